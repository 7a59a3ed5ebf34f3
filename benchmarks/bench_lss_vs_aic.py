"""LLMServingSim's per-layer profile against the shipped aiconfigurator tables (RTX PRO 6000).

Usage::

    python benchmarks/bench_lss_vs_aic.py [-o reports/bench_lss_vs_aic] [--shared ../shared]

Both sources measured vLLM 0.19.0 on an NVIDIA RTX PRO 6000 Blackwell Server Edition. The
LLMServingSim profile of Llama-3.1-8B (TP 1 and TP 2 shard shapes;
``shared/reference/groundtruth/llmservingsim/profiler_perf/RTXPRO6000/meta-llama/
Llama-3.1-8B/bf16``) is imported into a temporary folder with ``calibration/import_lss.py``
and compared with the shipped set ``hardware_profiles/rtx-pro-6000-server/tables/vllm-0.19.0``
(imported from aiconfigurator) in three ways:

1. ``servesim calibrate compare`` (:func:`calibration.compare.compare_table_sets`): each
   LLMServingSim row paired with the aiconfigurator row of the same key and shape at the same
   or nearest size (within 2x per grid axis); ratio = LSS / aiconfigurator.
2. Query: each LLMServingSim row's coordinates asked of the aiconfigurator
   :class:`~simulator.perf.tables.sets.TableSet` (interpolated in log size; unmeasured shapes by
   the nearest measured shape's efficiency, prefill ``start > 0`` by held efficiency, since
   aiconfigurator measured ``start = 0`` only); ratio = LSS measured / aiconfigurator query.
3. End to end: ``validate --recorded`` of the two recorded vLLM 0.19 runs on the GPUs of these
   profiles (RTX PRO 6000 / Llama-3.1-8B with either set; RTX 4090 / Llama-3.1-8B with the
   datasheet roofline (``perf.source=roofline``) and with the shipped LLMServingSim set):
   signed mean % error of TTFT, TPOT and E2E.

Prints the tables (ratios as median, p10, p90) and writes ``compare.md``, ``query.csv``,
``replay.csv`` under ``-o``. A minute or less on 2 cores. Not part of the test run.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.compare import compare_table_sets, report_markdown
from calibration.import_lss import import_lss
from simulator.catalog.hardware import get_gpu, load_gpu_spec
from simulator.perf.tables.sets import TableSet

PROFILE = "reference/groundtruth/llmservingsim/profiler_perf/RTXPRO6000/meta-llama/" \
          "Llama-3.1-8B/bf16"
RUNS = "reference/groundtruth/llmservingsim/bench/examples"
GPU = "rtx-pro-6000-server"


def _q(r: np.ndarray) -> dict:
    r = np.asarray(r, float)
    r = r[np.isfinite(r)]
    if not len(r):
        return {"n": 0, "median": np.nan, "p10": np.nan, "p90": np.nan}
    return {"n": len(r), "median": float(np.median(r)),
            "p10": float(np.percentile(r, 10)), "p90": float(np.percentile(r, 90))}


def query_ratios(lss: TableSet, aic: TableSet) -> pd.DataFrame:
    """Per family (prefill split by ``start = 0`` / ``> 0``; GEMM by op), the ratio of each
    LLMServingSim row to the aiconfigurator set's answer at its coordinates."""
    out = []
    g = lss._family("gemm").df
    t = np.array([aic.gemm(int(r.m), int(r.n), int(r.k), r.dtype) for r in g.itertuples()])
    for op, idx in g.groupby("op", sort=True).indices.items():
        out.append({"family": "gemm", "part": op, **_q(g["median_s"].to_numpy()[idx] / t[idx])})
    out.append({"family": "gemm", "part": "all", **_q(g["median_s"].to_numpy() / t)})
    p = lss._family("attention_prefill").df
    t = np.array([aic.attention_prefill(r.q, r.start, batch=r.batch, q_heads=r.q_heads,
                                        kv_heads=r.kv_heads, head_dim=r.head_dim,
                                        kv_dtype=r.kv_dtype) for r in p.itertuples()])
    rp = p["median_s"].to_numpy() / t
    s0 = p["start"].to_numpy() == 0
    out.append({"family": "attention_prefill", "part": "start = 0", **_q(rp[s0])})
    out.append({"family": "attention_prefill", "part": "start > 0 (aic extrapolated)",
                **_q(rp[~s0])})
    d = lss._family("attention_decode").df
    t = np.array([aic.attention_decode(int(r.batch), float(r.ctx_mean), q_heads=r.q_heads,
                                       kv_heads=r.kv_heads, head_dim=r.head_dim,
                                       kv_dtype=r.kv_dtype) for r in d.itertuples()])
    out.append({"family": "attention_decode", "part": "all",
                **_q(d["median_s"].to_numpy() / t)})
    return pd.DataFrame(out)


def replays(shared: Path, lss_profile: Path) -> pd.DataFrame:
    """Signed mean % errors of the recorded-run replays (module docstring, item 3)."""
    from simulator.observe.validate import validate_recorded
    cases = [("RTXPRO6000/Llama-3.1-8B", "aiconfigurator vllm-0.19.0 (shipped)", GPU, None),
             ("RTXPRO6000/Llama-3.1-8B", "LLMServingSim vllm-0.19.0-lss (this import)",
              str(lss_profile / "spec.yaml"), None),
             ("RTX4090/Llama-3.1-8B", "datasheet roofline", "rtx-4090",
              ["perf.source=roofline"]),
             ("RTX4090/Llama-3.1-8B", "LLMServingSim vllm-0.19.0-lss (shipped)", "rtx-4090",
              None)]
    rows = []
    for run, label, gpu, sets in cases:
        rv = validate_recorded(shared / RUNS / run, gpu=gpu, sets=sets, write=False,
                               figures=False)
        v = rv.validation
        rows.append({"run": run, "tables": label, "perf_model": v["perf_model"],
                     "ttft_mean_pct": v["ttft_mean_pct_error"],
                     "tpot_mean_pct": v["tpot_mean_pct_error"],
                     "e2e_mean_pct": v["e2e_mean_pct_error"],
                     "makespan_pct": v["makespan_pct_error"]})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="reports/bench_lss_vs_aic")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"),
                    help="the project's shared folder (default ../shared)")
    ap.add_argument("--no-replay", action="store_true", help="skip the end-to-end replays")
    args = ap.parse_args(argv)
    shared = Path(args.shared)
    src = shared / PROFILE
    if not src.is_dir():
        print(f"bench_lss_vs_aic: {src} not found (set --shared)", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 160)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (set_dir,) = import_lss(src, tmp, gpu=GPU)
        prof = tmp / GPU
        shutil.copy(ROOT / "hardware_profiles" / GPU / "spec.yaml", prof / "spec.yaml")
        aic_dir = ROOT / "hardware_profiles" / GPU / "tables" / "vllm-0.19.0"
        res = compare_table_sets(set_dir, aic_dir)
        md = report_markdown(res)
        (out / "compare.md").write_text(md)
        print(md)
        lss = TableSet(set_dir, load_gpu_spec(prof / "spec.yaml"))
        aic = TableSet(aic_dir, get_gpu(GPU))
        q = query_ratios(lss, aic)
        q.to_csv(out / "query.csv", index=False, float_format="%.4g")
        print("LSS measured / aiconfigurator query at the LSS coordinates:")
        print(q.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        if not args.no_replay:
            r = replays(shared, prof)
            r.to_csv(out / "replay.csv", index=False, float_format="%.2f")
            print("\nReplays of the recorded vLLM runs (signed mean % error, sim - real):")
            print(r.to_string(index=False, float_format=lambda v: f"{v:+.1f}"))
    print(f"\noutputs: {out}/compare.md, query.csv" + ("" if args.no_replay else ", replay.csv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
