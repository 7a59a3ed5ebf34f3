"""Simulator speed: replay the full Azure conv trace (19,366 requests, one hour) for
Llama-3.1-8B on one H100 SXM and print wall seconds and simulated requests per wall-second.

Usage::

    python benchmarks/bench_azure_conv.py [PATH/AzureLLMInferenceTrace_conv.csv] [--repeat N]

Target (issue 2): <= 10 s for the whole hour on one core of a 2-core machine. Times the
simulation alone (``simulate``), and separately the summary and the CSV writing.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import load_scenario
from simulator.workload import load_workload

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    if not Path(args.trace).exists():
        print(f"trace not found: {args.trace}", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[1]
    sc, base = load_scenario(root / "scenarios/azure_conv_llama3_8b_h100.yaml",
                             [f"workload.trace={args.trace}", *args.set])
    t0 = time.perf_counter()
    specs = load_workload(sc.workload, sc.seed, base)
    t_load = time.perf_counter() - t0
    setup = build_setup(sc)
    best = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out = simulate(sc, setup, specs)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    n = len(specs)
    steps = len(out.steps())
    print(f"trace load: {t_load:.2f} s ({n} requests)")
    print(f"simulate: best of {args.repeat}: {best:.2f} s wall, {n / best:,.0f} simulated "
          f"requests per wall-second, {steps:,} engine steps, simulated {out.end_time_s:,.0f} s")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        run_scenario(sc, base, specs=specs, setup=setup, outdir=d, figures=True)
    print(f"full run with summary, CSVs and report: {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
