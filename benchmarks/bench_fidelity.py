"""Fidelity benchmark: repeat ``servesim validate`` and summarise the simulator's error.

Usage::

    python benchmarks/bench_fidelity.py --repeats 3 -o reports/bench_fidelity [--device cpu]

Each repeat is a complete validation (bracketed calibration of the tiny Llama model, two real
engine runs, one simulation; see ``calibration/validate.py``). A shared or busy machine drifts
between repeats, so the summary gives, for every metric, the median and range over repeats of
the simulator's error next to the same statistics of the spread between two identical real
runs. Writes ``OUT/summary.json``, ``OUT/summary.md`` and one folder per repeat. Not part of
the test run (needs torch and a few minutes).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

METRICS = [
    ("step_time_median_abs_pct_error", "step_run2_vs_run1_median_abs_pct", "per-step median |%|"),
    ("step_time_p90_abs_pct_error", "step_run2_vs_run1_p90_abs_pct", "per-step p90 |%|"),
    ("ttft_p50_pct_error", "run2_vs_run1_ttft_p50_pct_error", "TTFT p50 %"),
    ("ttft_p99_pct_error", "run2_vs_run1_ttft_p99_pct_error", "TTFT p99 %"),
    ("tpot_p50_pct_error", "run2_vs_run1_tpot_p50_pct_error", "TPOT p50 %"),
    ("tpot_p99_pct_error", "run2_vs_run1_tpot_p99_pct_error", "TPOT p99 %"),
    ("e2e_p50_pct_error", "run2_vs_run1_e2e_p50_pct_error", "E2E p50 %"),
    ("e2e_p99_pct_error", "run2_vs_run1_e2e_p99_pct_error", "E2E p99 %"),
]


def _stats(vals: list[float]) -> dict:
    a = np.abs(np.array([v for v in vals if v is not None], dtype=float))
    if a.size == 0:
        return {"median_abs": None, "min_abs": None, "max_abs": None}
    return {"median_abs": float(np.median(a)), "min_abs": float(a.min()),
            "max_abs": float(a.max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-o", "--output", type=Path, default=Path("reports/bench_fidelity"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--num-requests", type=int, default=80)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--full-calibration", action="store_true")
    args = ap.parse_args(argv)
    from calibration.validate import ValidateOptions, validate
    results = []
    for i in range(args.repeats):
        out = args.output / f"repeat{i + 1}"
        print(f"repeat {i + 1}/{args.repeats} -> {out}", file=sys.stderr, flush=True)
        res = validate(ValidateOptions(device=args.device, out_dir=out,
                                       num_requests=args.num_requests, threads=args.threads,
                                       quick_calibration=not args.full_calibration),
                       log=lambda s: print("  " + s, file=sys.stderr, flush=True))
        results.append(res)
    summary = {"repeats": args.repeats, "device": results[0]["device"], "metrics": {}}
    lines = [(f"# Fidelity benchmark ({args.repeats} repeats of servesim validate on "
             f"{results[0]['device']})"), "",
             ("| metric | simulator vs real: median (min-max) of abs error | "
             "real run 2 vs 1: median (min-max) |"), "|---|---|---|"]
    for key, spread_key, label in METRICS:
        sim = _stats([r.get(key) for r in results])
        real = _stats([r.get("real_run_spread", {}).get(spread_key) for r in results])
        summary["metrics"][key] = {"simulator": sim, "real_spread": real}

        def fmt(s):
            if s["median_abs"] is None:
                return "n/a"
            return f"{s['median_abs']:.1f} ({s['min_abs']:.1f}-{s['max_abs']:.1f})"

        lines.append(f"| {label} | {fmt(sim)} | {fmt(real)} |")
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.output / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
