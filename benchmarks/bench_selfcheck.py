"""CPU self-check benchmark: repeat ``servesim validate --device cpu`` and summarise its error.

The self-check is an internal consistency check of harness, tables and scheduler (a tiny
random-weight model driven by servesim's own scheduler), not evidence of fidelity to a real
serving engine: that is ``benchmarks/bench_fidelity.py`` (recorded vLLM runs).

Usage::

    python benchmarks/bench_selfcheck.py --repeats 3 -o reports/bench_selfcheck [--device cpu]

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

#: gross-regression bounds (percent) that used to live in the test suite, where machine load
#: broke them; here they are reported as pass/fail next to the real runs' own spread. Each is
#: widened to ``2 x spread + 5`` when two identical real runs differ by ``spread``.
BOUNDS = {"step_time_median_abs_pct_error": 25.0, "step_time_p90_abs_pct_error": 80.0,
          "ttft_p50_pct_error": 35.0, "e2e_p50_pct_error": 25.0, "e2e_p99_pct_error": 35.0}

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
    ap.add_argument("-o", "--output", type=Path, default=Path("reports/bench_selfcheck"))
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
    lines = [(f"# CPU self-check benchmark ({args.repeats} repeats of servesim validate on "
             f"{results[0]['device']})"), "",
             ("| metric | simulator vs real: median (min-max) of abs error | "
             "real run 2 vs 1: median (min-max) | bound (widened by spread) |"), "|---|---|---|---|"]
    for key, spread_key, label in METRICS:
        sim = _stats([r.get(key) for r in results])
        real = _stats([r.get("real_run_spread", {}).get(spread_key) for r in results])
        summary["metrics"][key] = {"simulator": sim, "real_spread": real}

        def fmt(s):
            if s["median_abs"] is None:
                return "n/a"
            return f"{s['median_abs']:.1f} ({s['min_abs']:.1f}-{s['max_abs']:.1f})"

        bound = BOUNDS.get(key)
        verdict = ""
        if bound is not None and sim["median_abs"] is not None:
            allowed = max(bound, 2.0 * (real["median_abs"] or 0.0) + 5.0)
            ok = sim["median_abs"] <= allowed
            summary["metrics"][key]["bound_pct"] = allowed
            summary["metrics"][key]["within_bound"] = ok
            verdict = f"{allowed:.1f}: {'pass' if ok else 'FAIL'}"
        lines.append(f"| {label} | {fmt(sim)} | {fmt(real)} | {verdict} |")
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.output / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
