"""Memory benchmark: fit the per-unit costs behind servesim's pre-run memory estimate.

Usage::

    python benchmarks/bench_memory.py [-o reports/bench_memory] [--quick]

Runs a set of small and large scenarios end to end (``run_scenario`` with outputs and figures
written to a temporary folder, exactly the ``servesim run`` path) under ``tracemalloc`` and
records the peak traced memory (Python objects and NumPy buffers) together with the run's
size: requests ``N``, replicas ``R``, engine-step rows ``S`` and KV blocks ever touched ``B``
(summed over replicas). It then fits

    peak_bytes = c0 + c_request * N + c_replica * R + c_step * S + c_block * B

by non-negative least squares over all runs and reports each run's leave-one-out error (the
run predicted by a fit to the others). The fitted coefficients are the ones in
``simulator/base/budget.py`` (``BYTES_PER_*``); re-run this after changing the recorder, the
scheduler's state or the block pool, and update them.

Not part of the test run (a few minutes; tracemalloc slows the simulator about 2x).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from simulator.cluster.setup import build_setup
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario
from simulator.workload import load_workload


def _scenario(n: int, *, rate: float, replicas: int = 1, prompt: float = 300,
              output: float = 100, output_max: int = 1000, prefix: bool = False,
              blocks: int | None = None, max_num_seqs: int = 256) -> dict:
    kv = {"enable_prefix_caching": prefix}
    if blocks is not None:
        kv["num_gpu_blocks"] = blocks
    return {
        "name": "bench_memory", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "perf": {"source": "roofline"}, "seed": 0,
        "cluster": {"num_replicas": replicas, "router": "round_robin"},
        "scheduler": {"max_num_seqs": max_num_seqs}, "kv_cache": kv,
        "workload": {"synthetic": {
            "arrival": {"process": "poisson", "rate_rps": rate}, "num_requests": n,
            "prompt_tokens": {"dist": "lognormal", "median": prompt, "sigma": 0.8,
                              "max": 8 * int(prompt)},
            "output_tokens": {"dist": "lognormal", "median": output, "sigma": 0.8,
                              "max": output_max}},
            **({"shared_prefixes": [{"name": "sys", "num_tokens": 1024}]} if prefix else {})},
    }


def cases(quick: bool) -> list[tuple[str, dict]]:
    out = [
        ("requests 1k", _scenario(1000, rate=20)),
        ("requests 4k", _scenario(4000, rate=20)),
        ("requests 16k", _scenario(16000, rate=40, output=40)),
        ("replicas 500", _scenario(50, rate=20, replicas=500)),
        ("replicas 2k", _scenario(50, rate=20, replicas=2000)),
        ("replicas 8k", _scenario(50, rate=20, replicas=8000)),
        ("steps, serial decode", _scenario(100, rate=0.05, output=3000, output_max=4000,
                                           max_num_seqs=1)),
        ("steps, serial short", _scenario(100, rate=0.05, output=800, output_max=4000,
                                          max_num_seqs=1)),
        ("steps, busy", _scenario(2000, rate=8, output=400, output_max=4000)),
        # 32,000 blocks: under the 33,285 an H100 can hold next to the 8B weights (the
        # memory plan refuses more)
        ("blocks, prefix cache", _scenario(2000, rate=30, prompt=3000, prefix=True,
                                           blocks=32_000)),
        ("blocks, long prompts", _scenario(1000, rate=50, prompt=6000, output=20,
                                           blocks=32_000)),
        ("blocks, many replicas", _scenario(1000, rate=50, prompt=3000, output=20,
                                            replicas=200, blocks=32_000)),
    ]
    if not quick:
        out += [("requests 32k", _scenario(32000, rate=60, output=30)),
                ("replicas 16k", _scenario(50, rate=20, replicas=16000))]
    return out


def measure(raw: dict) -> dict:
    sc = validate_scenario(raw)
    setup = build_setup(sc)
    specs = load_workload(sc.workload, sc.seed, None)
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        res = run_scenario(sc, None, specs=specs, setup=setup, outdir=tmp, figures=True)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    blocks = sum(rep.kv.pool.fresh for rep in res.sim.replicas)
    return {"N": len(specs), "R": sc.cluster.num_replicas, "S": len(res.step_table), "B": blocks,
            "peak_bytes": peak}


def fit(rows: list[dict]) -> tuple[np.ndarray, list[float]]:
    X = np.array([[1.0, r["N"], r["R"], r["S"], r["B"]] for r in rows])
    y = np.array([r["peak_bytes"] for r in rows], dtype=float)
    coef, _ = nnls(X, y)
    loo = []
    for i in range(len(rows)):
        keep = np.arange(len(rows)) != i
        c, _ = nnls(X[keep], y[keep])
        loo.append(float(X[i] @ c / y[i] - 1.0))
    return coef, loo


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="reports/bench_memory")
    ap.add_argument("--quick", action="store_true", help="skip the two largest runs")
    args = ap.parse_args(argv)
    rows = []
    measure(_scenario(200, rate=20))  # warm-up: one-time allocations (fonts, caches, imports)
    for name, raw in cases(args.quick):
        r = measure(raw)
        r["case"] = name
        rows.append(r)
        print(f"{name:24s} N={r['N']:>6} R={r['R']:>6} S={r['S']:>8} B={r['B']:>8} "
              f"peak={r['peak_bytes'] / 1e6:9.1f} MB", flush=True)
    coef, loo = fit(rows)
    names = ["c0_bytes", "bytes_per_request", "bytes_per_replica", "bytes_per_step_row",
             "bytes_per_block"]
    print("\nfit (non-negative least squares):")
    for k, v in zip(names, coef):
        print(f"  {k:20s} {v:12.1f}")
    print("\nleave-one-out error (predicted / measured - 1):")
    for r, e in zip(rows, loo):
        print(f"  {r['case']:24s} {e * 100:+7.1f} %")
    a = np.abs(loo)
    print(f"  median |error| {np.median(a) * 100:.1f} %, max {a.max() * 100:.1f} %")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_memory.json").write_text(json.dumps(
        {"runs": rows, "fit": dict(zip(names, coef.tolist())), "loo_error": loo},
        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
