"""Speed of KV offload tiers (issue 30): the simulation of the shipped multi-turn chat
(``scenarios/chat_multi_turn_offload.yaml``, 4,806 turns) without a tier, with its 64 GiB CPU
tier, and with the CPU tier plus a disk tier, in interleaved rounds; the target is a run with
tiers costing at most 1.3x the same run without. The runs simulate different systems (a tier
serves history that the run without recomputes, so batches and steps differ): the cost per
simulated step is printed beside the run's.

Usage::

    python benchmarks/bench_offload_speed.py [--repeat N]

Times ``simulate`` alone (the workload and set-up are built once per variant) as the best of
``N`` rounds, CPU seconds of this process (``time.process_time``: steadier than wall time on a
shared machine) and wall seconds.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.scenario.config import load_scenario
from simulator.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios/chat_multi_turn_offload.yaml"
DISK = ("kv_cache.offload.tiers=[{medium: cpu, size_gib: 64}, {medium: disk, size_gib: 1024, "
        "bandwidth_bytes_per_s: 6.0e9, latency_s: 1.0e-4}]")
VARIANTS = {"no tier": ["kv_cache.offload.tiers.0.size_gib=0"], "cpu 64 GiB": [],
            "cpu 64 GiB + disk": [DISK]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = {}
    for name, sets in VARIANTS.items():
        sc, base = load_scenario(SCENARIO, sets)
        runs[name] = (sc, build_setup(sc), load_workload(sc.workload, sc.seed, base))
    best: dict[str, tuple[float, float]] = {}
    steps: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, (sc, setup, specs) in runs.items():
            c0, w0 = time.process_time(), time.perf_counter()
            out = simulate(sc, setup, specs)
            c, w = time.process_time() - c0, time.perf_counter() - w0
            b = best.get(name)
            best[name] = (c, w) if b is None else (min(b[0], c), min(b[1], w))
            steps[name] = len(out.step_table())
    base_cpu = best["no tier"][0]
    base_step = base_cpu / steps["no tier"]
    for name, (c, w) in best.items():
        print(f"{name:18s} simulate: {c:6.2f} CPU s  {w:6.2f} wall s  {steps[name]:7,} steps  "
              f"{c / base_cpu:5.2f}x the run without a tier (target <= 1.30x); per step "
              f"{c / steps[name] / base_step:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
