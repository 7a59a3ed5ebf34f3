"""Fit the ``vllm-v1`` engine profile's free constants across every recorded run, with
leave-one-run-out, leave-one-model-out and leave-one-GPU-out errors.

Usage::

    python benchmarks/fit_engine_constants.py -o reports/fit_engine [--jobs 2]
        [--grid-ms 0,0.25,0.5,0.75,1.0,1.25,1.5,2.0] [--write-profile]

Two constants, the parts of a step and of a request that no kernel table holds:

``sync.step_s``
    seconds every engine step adds beyond its kernels (the gap between steps that async
    scheduling cannot hide: sampled tokens back to the host, the next launch);
``api_server.per_request_s``
    seconds the client sees on top of the engine for each request (HTTP, tokenising the
    prompt, the first streamed chunk); applied only to records measured at the client
    (inference-perf, GuideLLM, ``vllm bench serve``), never to engine-side records.

Runs: the recorded vLLM runs under ``../shared/reference/groundtruth`` (the RTX per-request
records, engine side, and the H100 inference-perf stages, client side; the three overload
runs (those that lose requests to client time-outs) and the DP x EP lockstep MoE run are
replayed and reported but not fitted on). Each run is replayed once per value of
``sync.step_s`` on ``--grid-ms`` (``servesim validate --recorded``, the shipped tables and
defaults); its simulated statistics between grid values are interpolated linearly, and the
API term moves TTFT and E2E of a client-side record by exactly its value (every request's
first token and last token shift by it), so every fit below is computed from those replays.

Objective: the mean over runs of the mean absolute relative error of the mean, p50 and p90 of
TTFT, TPOT and E2E (of every stage for a staged record), equal weight per run, minimised on a
fine grid. Absolute, not squared: one run near saturation (CodeLlama-34B "reasoning", whose
queue makes a 10% step-time error a 50% latency error) would otherwise decide the constants
alone (squared errors gave 1.7 ms, every other H100 run 6-10% too slow). Leave-one-out: the constants refitted without the run (model, GPU) and that run's
errors with them. Not part of the test run (the replays take ~10 minutes on two cores).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.observe.readers import find_recorded_runs

SHARED = Path(os.environ.get("SERVESIM_SHARED", ROOT.parent / "shared"))
GT = SHARED / "reference" / "groundtruth"
METRICS = ("ttft", "tpot", "e2e")
STATS = ("mean", "p50", "p90")
#: runs replayed and reported but not fitted on (why)
NOT_FITTED = {"llama-2-7b-tp1-reasoning": "overload: client time-outs decide the outcome",
              "llama-2-70b-hf-tp4-reasoning": "overload: client time-outs decide the outcome",
              "mixtral-8x7b-v0-1-tp2-reasoning": "overload: client time-outs decide the outcome",
              "Qwen3-30B-A3B": "DP x EP lockstep (MoE): another engine path"}
#: (GPU, model) of each run
IP_MODELS = {"llama-2-7b": "Llama-2-7B", "llama-2-70b": "Llama-2-70B",
             "mixtral-8x7b": "Mixtral-8x7B", "codellama-34b": "CodeLlama-34B"}


def runs() -> list[dict]:
    out = []
    for p in find_recorded_runs(GT / "llmservingsim"):
        gpu, model = Path(p).parts[-2], Path(p).parts[-1]
        out.append({"path": str(p), "name": f"{gpu}/{model}", "gpu": gpu, "model": model,
                    "client": False, "version": None})
    for d in sorted((GT / "inference-perf-h100").glob("2026*")):
        key = next(k for k in IP_MODELS if k in d.name)
        out.append({"path": str(d), "name": "H100/" + d.name[16:], "gpu": "H100",
                    "model": IP_MODELS[key], "client": True, "version": "0.15.1"})
    for r in out:
        why = [v for k, v in NOT_FITTED.items() if k in r["name"]]
        r["fitted"] = not why
        r["why_not"] = why[0] if why else ""
    return out


def profile_with_sync(base: Path, sync_s: float, folder: Path) -> Path:
    doc = yaml.safe_load(base.read_text())
    doc["name"] = f"vllm-v1-sync{sync_s * 1e3:.3f}ms"
    doc["sync"]["step_s"] = {"value": float(sync_s), "source": "fit grid"}
    doc.pop("fitted_on", None)
    doc.pop("fit_report", None)
    p = folder / f"{doc['name']}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def replay(run: dict, prof: Path, out: Path) -> list[dict]:
    """``validate --recorded`` of one run with one profile: rows (stage, metric, stat, rec,
    sim) in seconds."""
    cmd = [sys.executable, "-m", "simulator.cli", "validate", "--recorded", run["path"],
           "--no-figures", "-q", "-o", str(out), "--set", f"perf.engine={prof}"]
    if run["version"]:
        cmd += ["--engine-version", run["version"]]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if r.returncode:
        raise RuntimeError(f"{run['name']}: {r.stderr.strip()[-400:]}")
    rows = []
    if run["client"]:
        e = pd.read_csv(out / "stage_errors.csv")
        for t in e.itertuples():
            if t.metric in METRICS and t.stat in STATS:
                rows.append({"stage": int(t.stage), "metric": t.metric, "stat": t.stat,
                             "rec": float(t.recorded), "sim": float(t.simulated)})
    else:
        v = json.loads((out / "validation.json").read_text())["metrics"]
        for m in METRICS:
            for s in STATS:
                rows.append({"stage": 0, "metric": m, "stat": s, "rec": v[m]["real"][s],
                             "sim": v[m]["sim"][s]})
    return rows


class RunTable:
    """One run's replays as arrays: a row per (stage, metric, statistic), a column per grid
    value of ``sync.step_s``; the API term's rows (TTFT and E2E of a client-side record)."""

    def __init__(self, table: pd.DataFrame, run: dict, grid: np.ndarray):
        t = table[table.run == run["name"]].sort_values(["stage", "metric", "stat", "sync_s"])
        keys = t[["stage", "metric", "stat"]].drop_duplicates()
        self.keys = keys.reset_index(drop=True)
        n = len(keys)
        self.sim = t.sim.to_numpy(float).reshape(n, len(grid))
        self.rec = t.rec.to_numpy(float).reshape(n, len(grid))[:, 0]
        self.api = (self.keys.metric.isin(["ttft", "e2e"]).to_numpy()
                    & bool(run["client"])).astype(float)
        self.grid = grid

    def errors(self, sync_s: float, api_s: float) -> np.ndarray:
        """Relative errors of every row at ``(sync_s, api_s)`` (linear between grid values)."""
        g = self.grid
        i = int(np.clip(np.searchsorted(g, sync_s) - 1, 0, len(g) - 2))
        w = (sync_s - g[i]) / (g[i + 1] - g[i])
        sim = self.sim[:, i] * (1 - w) + self.sim[:, i + 1] * w + self.api * api_s
        return (sim - self.rec) / self.rec


def fit(tabs: dict, fit_runs, grid, api_grid) -> tuple[float, float]:
    """``(sync_s, api_s)`` minimising the objective over ``fit_runs`` (fine grids)."""
    best = (np.inf, 0.0, 0.0)
    client = any(r["client"] for r in fit_runs)
    for s in np.linspace(grid.min(), grid.max(), 81):
        for a in (api_grid if client else [0.0]):
            j = float(np.mean([np.mean(np.abs(tabs[r["name"]].errors(s, a)))
                               for r in fit_runs]))
            if j < best[0]:
                best = (j, float(s), float(a))
    return best[1], best[2]


def summary(tab: RunTable, s: float, a: float) -> dict:
    """The worst stage's signed % error of the mean, per metric."""
    e = tab.errors(s, a)
    out = {}
    for m in METRICS:
        sel = ((tab.keys.metric == m) & (tab.keys.stat == "mean")).to_numpy()
        v = e[sel]
        out[m] = 100 * float(v[np.argmax(np.abs(v))]) if len(v) else float("nan")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--grid-ms", default="0,0.25,0.5,0.75,1.0,1.25,1.5,2.0")
    ap.add_argument("--api-max-ms", type=float, default=40.0)
    ap.add_argument("--write-profile", action="store_true",
                    help="write the fitted constants into engine_profiles/vllm-v1.yaml")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    grid = np.array([float(x) * 1e-3 for x in a.grid_ms.split(",")])
    api_grid = np.linspace(0.0, a.api_max_ms * 1e-3, 161)
    base = ROOT / "engine_profiles" / "vllm-v1.yaml"
    rs = runs()
    cache = out / "replays.csv"
    if cache.is_file():
        table = pd.read_csv(cache)
    else:
        jobs = []
        for s in grid:
            prof = profile_with_sync(base, float(s), out)
            for r in rs:
                jobs.append((r, prof, s, out / "replays" / f"{s * 1e3:.3f}ms"
                             / r["name"].replace("/", "-")))

        def one(job):
            r, prof, s, o = job
            print(f"replay {r['name']} sync={s * 1e3:.3f} ms", flush=True)
            return [{**row, "run": r["name"], "sync_s": float(s)} for row in replay(r, prof, o)]
        with ThreadPoolExecutor(a.jobs) as ex:
            table = pd.DataFrame([row for rows in ex.map(one, jobs) for row in rows])
        table.to_csv(cache, index=False)
    fit_runs = [r for r in rs if r["fitted"]]
    tabs = {r["name"]: RunTable(table, r, grid) for r in rs}
    s0, a0 = fit(tabs, fit_runs, grid, api_grid)
    print(f"fitted on {len(fit_runs)} runs: sync.step_s = {s0 * 1e3:.3f} ms, "
          f"api_server.per_request_s = {a0 * 1e3:.2f} ms")
    rows = []
    for r in rs:
        row = {"run": r["name"], "gpu": r["gpu"], "model": r["model"],
               "fitted": r["fitted"], "not_fitted_because": r["why_not"]}
        row.update({f"in_{m}": v for m, v in summary(tabs[r["name"]], s0, a0).items()})
        for kind, key in (("loro", "name"), ("lomo", "model"), ("logo", "gpu")):
            rest = [q for q in fit_runs if q[key] != r[key]]
            if not rest or not r["fitted"]:
                continue
            si, ai = fit(tabs, rest, grid, api_grid)
            row[f"{kind}_sync_ms"], row[f"{kind}_api_ms"] = si * 1e3, ai * 1e3
            row.update({f"{kind}_{m}": v for m, v in summary(tabs[r["name"]], si, ai).items()})
        rows.append(row)
        print(row["run"], {k: round(v, 1) for k, v in row.items() if isinstance(v, float)},
              flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "fit.csv", index=False)
    fitted = df[df.fitted]
    med = {f"{k}_{m}": float(fitted[f"{k}_{m}"].abs().median())
           for k in ("in", "loro", "lomo", "logo") for m in METRICS if f"{k}_{m}" in fitted}
    res = {"sync_step_s": s0, "api_server_per_request_s": a0,
           "fitted_on": [r["name"] for r in fit_runs], "median_abs_pct": med}
    (out / "fit.json").write_text(json.dumps(res, indent=1))
    lines = ["# Engine constants fitted across the recorded runs", "",
             (f"`sync.step_s` = {s0 * 1e3:.3f} ms, `api_server.per_request_s` = "
              f"{a0 * 1e3:.2f} ms, fitted on {len(fit_runs)} runs; the worst stage's signed % "
              "error of the mean per run, in sample (`in`), leave-one-run-out (`loro`), "
              "leave-one-model-out (`lomo`), leave-one-GPU-out (`logo`)."), "",
             df.to_markdown(index=False, floatfmt="+.1f"), "",
             "Median |error| over the fitted runs: " + ", ".join(
                 f"{k} {v:.1f}%" for k, v in med.items()), ""]
    (out / "fit.md").write_text("\n".join(lines))
    print("\n".join(lines[-2:]))
    if a.write_profile:
        write_constants(base, s0, a0, fit_runs, df, med)
    return 0


def write_constants(base: Path, s0, a0, fit_runs, df, med) -> None:
    """Put the fitted values, their provenance and the per-run report (``fit_report``) into
    the shipped profile."""
    names = ", ".join(r["name"] for r in fit_runs)
    gpus = sorted({r["gpu"] for r in fit_runs})
    models = sorted({r["model"] for r in fit_runs})

    def cell(row, kind):
        return {m: (None if not np.isfinite(v := float(row.get(f"{kind}_{m}", np.nan)))
                    else round(v, 2)) for m in METRICS}
    per_run = {}
    for row in df.to_dict("records"):
        per_run[row["run"]] = {"fitted": bool(row["fitted"]),
                               **({"not_fitted_because": row["not_fitted_because"]}
                                  if not row["fitted"] else {}),
                               "in": cell(row, "in"),
                               **{k: cell(row, k) for k in ("loro", "lomo", "logo")
                                  if row["fitted"]}}
    doc = yaml.safe_load(base.read_text())
    doc["sync"]["step_s"] = {
        "value": round(s0, 6),
        "source": (f"fitted by benchmarks/fit_engine_constants.py on {len(fit_runs)} recorded "
                   f"runs ({names}) of {len(gpus)} GPUs ({', '.join(gpus)}) and {len(models)} "
                   f"models ({', '.join(models)}); median |error| of the mean TTFT/TPOT/E2E over "
                   "those runs: "
                   f"leave-one-run-out {med['loro_ttft']:.1f}/{med['loro_tpot']:.1f}/"
                   f"{med['loro_e2e']:.1f}%, leave-one-model-out {med['lomo_ttft']:.1f}/"
                   f"{med['lomo_tpot']:.1f}/{med['lomo_e2e']:.1f}%, leave-one-GPU-out "
                   f"{med['logo_ttft']:.1f}/{med['logo_tpot']:.1f}/{med['logo_e2e']:.1f}% "
                   "(fit_report: every run)")}
    doc.setdefault("api_server", {})["per_request_s"] = {
        "value": round(a0, 5),
        "source": ("fitted with sync.step_s (same fit) on the client-side records among those "
                   "runs (the H100 inference-perf stages: HTTP, prompt tokenisation and the "
                   "first streamed chunk as the client sees them); engine-side records do not "
                   "see it")}
    doc["fitted_on"] = [r["name"] for r in fit_runs]
    doc["fit_report"] = {
        "tool": "benchmarks/fit_engine_constants.py",
        "objective": ("mean over runs of the mean absolute relative error of the mean, p50 "
                      "and p90 of TTFT, TPOT and E2E (every stage of a staged record); equal "
                      "weight per run; replays on a grid of sync.step_s, interpolated; the API "
                      "term shifts client-side TTFT and E2E exactly"),
        "constants": {"sync.step_s": round(s0, 6), "api_server.per_request_s": round(a0, 5)},
        "runs": [r["name"] for r in fit_runs],
        "per_run": per_run,
        "median_abs_pct": {k: round(v, 2) for k, v in med.items()},
    }
    base.write_text(yaml.safe_dump(doc, sort_keys=False, width=100))


if __name__ == "__main__":
    raise SystemExit(main())
