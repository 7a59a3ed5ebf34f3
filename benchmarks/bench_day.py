"""The shipped day: the windowed approximation's error per hour against the whole-day
simulation, the speed of both, and the day plan (static peak / static mean / autoscaled).

Runs ``scenarios/day_azure_conv_llama3_8b_a100.yaml`` (the Azure conv hour tiled to 24 h at
half its rate, shaped by ServeGen's measured diurnal profile; 238,240 requests) once whole and
once per ``--windows`` length (one window per hour, ``--lead-in-s`` before each), prints the
per-hour comparison (SLO attainment in points, TTFT p99 and TPOT mean in percent) and the CPU
seconds of each, and with ``--plan`` runs ``scenarios/plan_day_azure_conv.yaml`` (with
``--figure PATH`` its figure is copied there: ``docs/results/day/day_plan.png``). The
figures of ``docs/results/day.md`` are this script's ``--json`` output.

Usage::

    python benchmarks/bench_day.py --trace AZURE [--windows 300 600 1200] [--plan]
        [--figure docs/results/day/day_plan.png] [--json FILE]

Needs AZURE (``../shared/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv``). About two
minutes for the whole day, 10-30 s per window length and two to three minutes for the plan
(``-j 2``) on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/day_azure_conv_llama3_8b_a100.yaml"
PLAN = "scenarios/plan_day_azure_conv.yaml"


def _run(args: list[str]) -> tuple[float, float]:
    """Run ``servesim ARGS`` in a child process: (wall s, CPU s of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simulator.cli", *args], check=True, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - t0, cpu


def _rows(path: Path) -> list[dict]:
    rows = json.loads((path / "summary.json").read_text())["by_hour"]["rows"]
    return [r for r in rows if r["hour"] < 24]


def compare(full: list[dict], win: list[dict]) -> dict:
    """Per-hour errors of a windowed day against the whole one."""
    f = {r["hour"]: r for r in full}
    out = []
    for w in win:
        a = f[w["hour"]]
        out.append({"hour": w["hour"],
                    "att_full": a["slo_attainment"], "att_win": w["slo_attainment"],
                    "d_att_pp": 100 * (w["slo_attainment"] - a["slo_attainment"]),
                    "p99_full_s": a["ttft_p99_s"], "p99_win_s": w["ttft_p99_s"],
                    "p99_err": w["ttft_p99_s"] / a["ttft_p99_s"] - 1,
                    "tpot_err": w["tpot_mean_s"] / a["tpot_mean_s"] - 1})
    d = np.array([r["d_att_pp"] for r in out])
    p = np.array([r["p99_err"] for r in out])
    t = np.array([r["tpot_err"] for r in out])
    return {"rows": out, "max_abs_d_att_pp": float(np.abs(d).max()),
            "mean_abs_d_att_pp": float(np.abs(d).mean()),
            "median_abs_p99_err": float(np.median(np.abs(p))),
            "max_abs_p99_err": float(np.abs(p).max()),
            "max_abs_tpot_err": float(np.abs(t).max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--windows", type=float, nargs="*", default=[300.0, 600.0, 1200.0])
    ap.add_argument("--lead-in-s", type=float, default=300.0)
    ap.add_argument("--plan", action="store_true")
    ap.add_argument("--figure", help="copy the plan's day figure here")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_day_"))
    res: dict = {"windows": {}}
    wall, cpu = _run(["run", SCENARIO, "--trace", a.trace, "-o", str(tmp / "full"), "-q",
                      "--no-figures"])
    s = json.loads((tmp / "full" / "summary.json").read_text())
    res["full"] = {"wall_s": wall, "cpu_s": cpu, "sim_wall_s": s["sim_wall_s"],
                   "num_requests": s["num_requests"], "slo_attainment": s["slo_attainment"]}
    print(f"whole day: {s['num_requests']:,} requests, {cpu:.1f} CPU s ({wall:.1f} s wall)")
    full = _rows(tmp / "full")
    for k in a.windows:
        out = tmp / f"win{int(k)}"
        wall, cpu = _run(["run", SCENARIO, "--trace", a.trace, "-o", str(out), "-q",
                          "--no-figures", "--day-window-s", f"{k:g}", "--lead-in-s",
                          f"{a.lead_in_s:g}"])
        ws = json.loads((out / "summary.json").read_text())
        c = compare(full, _rows(out))
        c.update(wall_s=wall, cpu_s=cpu,
                 simulated_share=ws["by_hour"]["windowed"]["simulated_share"])
        res["windows"][str(int(k))] = c
        print(f"windows {k:g} s: {cpu:.1f} CPU s ({wall:.1f} s wall), "
              f"{c['simulated_share']:.1%} simulated; attainment error max "
              f"{c['max_abs_d_att_pp']:.2f} pp, TTFT p99 error median "
              f"{c['median_abs_p99_err']:.1%} max {c['max_abs_p99_err']:.1%}, TPOT mean max "
              f"{c['max_abs_tpot_err']:.1%}")
    if a.plan:
        wall, cpu = _run(["plan", PLAN, "--trace", a.trace, "-o", str(tmp / "plan"), "-q",
                          "-j", "2"])
        plan = json.loads((tmp / "plan" / "plan.json").read_text())
        res["plan"] = {"wall_s": wall, "cpu_s": cpu, "plan": plan}
        print(plan["verdict"])
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    if a.figure and a.plan:
        Path(a.figure).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp / "plan" / "day.png", a.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
