"""Fidelity page: every recorded run and published summary replayed, on one Markdown page.

Usage::

    python benchmarks/bench_fidelity.py [-o docs/results/fidelity] [--root DIR] [--runs GLOB]
        [--summaries benchmarks/public_summaries.yaml] [--profile engine_profiles/vllm-v1.yaml]
        [--set key=value ...] [--gpu [GLOB=]NAME|spec.yaml ...] [--model [GLOB=]ID|config.json ...]
        [--engine-version [GLOB=]X.Y.Z ...] [--gpu-dir DIR]

Discovers the recorded runs under ``--root`` (default: ``../shared/reference/groundtruth`` next
to the repository, or ``$SERVESIM_SHARED/reference/groundtruth``): every per-request run folder
(``requests.jsonl`` + ``meta.json``, :func:`~simulator.observe.readers.find_recorded_runs`) and
every inference-perf experiment folder (``results/config.yaml`` + stage files). Each is
replayed as ``servesim validate --recorded`` replays it (:func:`validate_recorded`, nothing
written per run) and compared per stage; a per-request run also gets the KS distance of its
per-request distributions and, when ``outputs/sim.csv`` sits beside it, the peer simulator's
answer compared by the same definitions (:mod:`simulator.observe.fidelity`). The published
``vllm bench serve`` summaries of ``--summaries`` are replayed by
``benchmarks/bench_public_summaries.py`` (``''``: none). The engine profile's ``fit_report``
(``--profile``) gives the leave-one-out errors of its fitted constants.

Run names: ``<GPU folder>/<model folder>`` for per-request runs, ``<GPU>/<experiment>`` for an
inference-perf folder (the first word of the campaign's GPU name, the folder name without its
``YYYYMMDD-HHMMSS-`` prefix: ``H100/codellama-34b-tp2-codegen``), as the fit report names them.
``--runs``, and the ``GLOB=`` of ``--gpu`` / ``--model`` / ``--engine-version``, match a run's
name or its folder relative to the root. An inference-perf folder states no vLLM version:
:data:`ENGINE_VERSIONS` gives the campaign's (the root's ``README.md``) unless
``--engine-version`` does.

Writes, in ``-o`` (default ``docs/results/fidelity``): ``fidelity.md`` (the page:
:mod:`simulator.observe.fidelity_page`), ``fidelity.csv`` (every number on it),
``signed_errors.png``, ``public_summaries.png`` and ``cdf_<run>.png`` per per-request run. A run
that cannot be replayed is listed with its one-line error. Not part of the test run (all runs
replay in a few minutes on two cores).
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import fnmatch
import os
import re
import shlex
import sys
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))   # bench_public_summaries, however this is loaded

from gitinfo import commit_label

from simulator import __version__
from simulator.observe.compare import paired_frame
from simulator.observe.fidelity import (
    KS_METRICS,
    fit_report_summary,
    match_peer,
    peer_comparison,
    per_request_ks,
    read_peer_requests,
)
from simulator.observe.fidelity_figures import plot_cdf_overlay, plot_signed_errors
from simulator.observe.fidelity_page import (
    CSV_COLUMNS,
    csv_rows,
    error_chart_rows,
    render_page,
    summary_chart_rows,
)
from simulator.observe.readers import find_recorded_runs, read_recorded
from simulator.observe.readers_ip import is_inference_perf_dir
from simulator.observe.record import RecordError
from simulator.observe.settings import gpu_name_matches, match_gpu
from simulator.observe.validate import validate_recorded
from simulator.scenario.config import ScenarioError

#: vLLM version of recorded runs that state none, by folder glob (relative to the root):
#: the inference-perf H100 campaign ran vLLM 0.15.1 (the groundtruth README: the figure
#: captions of the campaign's companion repository sim-to-real-accuracy-validation).
ENGINE_VERSIONS = ("inference-perf-h100/*=0.15.1",)
DEFAULT_OUT = REPO / "docs" / "results" / "fidelity"
_DATE_PREFIX = re.compile(r"^\d{8}-\d{6}-")
#: Files this benchmark writes into its output folder (a rerun replaces them all).
_OWN_FILES = ("fidelity.md", "fidelity.csv", "signed_errors.png", "public_summaries.png",
              "cdf_*.png")
_ERROR_PANELS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E latency"),
                 ("throughput", "throughput (requests/s)"))
_SUMMARY_PANELS = (("duration", "duration"), ("ttft", "TTFT"), ("tpot", "TPOT"),
                   ("itl", "ITL mean"))
_CDF_PANELS = (("ttft", "TTFT (s)", 1.0), ("tpot", "TPOT (ms)", 1e3),
               ("e2e", "end-to-end latency (s)", 1.0))


def default_root() -> Path:
    env = os.environ.get("SERVESIM_SHARED")
    base = Path(env) if env else REPO.parent / "shared"
    return base / "reference" / "groundtruth"


def write_csv(path: Path, rows: list[dict], fieldnames: list[str]) -> None:
    """Write ``rows`` to the CSV file ``path`` (its folder created), columns ``fieldnames``
    (shared by the benchmarks that replay recorded runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fieldnames)
        w.writeheader()
        w.writerows(rows)


def exit_status(failed: int, total: int, what: str) -> int:
    """Say on stderr how many of ``total`` runs (``what``: "run(s)", "record(s)") could not be
    replayed; 1 when none could, else 0."""
    if failed:
        print(f"{failed} of {total} {what} could not be replayed (their rows say why)",
              file=sys.stderr)
    return 1 if failed == total else 0


def per_run(values: list[str] | None, *names: str) -> str | None:
    """The last ``GLOB=VALUE`` (or plain ``VALUE``) of ``values`` whose glob matches one of
    ``names`` (a run's name, its folder)."""
    out = None
    for item in values or []:
        glob, sep, val = item.partition("=")
        if not sep:
            out = item
        elif any(fnmatch.fnmatch(n, glob) for n in names):
            out = val
    return out


def _gpu_from_dir(device: str | None, gpu_dir: Path | None) -> str | None:
    if device is None or gpu_dir is None or match_gpu(device) is not None:
        return None
    for p in sorted(gpu_dir.glob("*.yaml")):
        raw = yaml.safe_load(p.read_text()) or {}
        names = [str(raw.get("name", "")), *map(str, raw.get("aliases") or [])]
        if gpu_name_matches(device, names):
            return str(p)
    return None


#: operator entries of a step-time provenance (the engine entries are reported apart)
_OPS = ("gemm", "attention_prefill", "attention_decode", "elementwise", "lm_head", "all_reduce",
        "moe")


def _perf_sources(prov: dict) -> str:
    """The table sets behind the operators, e.g. ``vllm-0.19.0 aiconfigurator``, with the
    count of operators from another source (``datasheet x1``)."""
    kinds, sets = Counter(), set()
    for op in _OPS:
        v = str(prov.get(op, ""))
        if not v or v.startswith("none"):
            continue
        if v.startswith("measured (") and ";" in v:
            dev_ver, src = v[len("measured ("):].split(";", 1)
            sets.add(f"{dev_ver.split(',')[-1].strip()} {src.strip().split(' ')[0]}")
        else:
            kinds[v.split(" ")[0]] += 1
    return ", ".join(sorted(sets) + [f"{k} x{n}" for k, n in sorted(kinds.items())])


# ------------------------------------------------------------------------ discovery
def discover(root: Path) -> list[Path]:
    """The per-request run folders and inference-perf experiment folders under ``root``."""
    ip = {q.parent.parent for q in root.rglob("results/config.yaml")
          if is_inference_perf_dir(q.parent.parent)}
    return sorted(set(find_recorded_runs(root)) | ip)


def page_name(run, folder: Path) -> str:
    """The run's name on the page (module docstring)."""
    if run.format != "inference_perf":
        return run.name
    device = str(run.setting("device_name") or "").split()
    gpu = device[0] if device else folder.parent.name
    return f"{gpu}/{_DATE_PREFIX.sub('', folder.name)}"


# ------------------------------------------------------------------------ one run
def _peer(rv, pair, folder: Path, out: dict, samples: dict) -> None:
    """The peer's per-request answer (``outputs/sim.csv`` beside the run), compared."""
    p = folder / "outputs" / "sim.csv"
    if not p.is_file():
        return
    out["peer_name"] = (rv.run.peer or {}).get("name") or "peer simulator"
    try:
        peer = read_peer_requests(p)
        out["peer"] = peer_comparison(rv.run.outcomes, peer, compared=pair["compared"])
    except (RecordError, ValueError) as e:
        out["peer_error"] = str(e).splitlines()[0]
        return
    aligned = match_peer(rv.run.outcomes, peer)
    ok = pair["compared"].to_numpy() & aligned["matched"].to_numpy()
    for m in KS_METRICS:
        samples[m][out["peer_name"]] = aligned.loc[ok, f"peer_{m}_s"].to_numpy(float)


def read_run(folder: Path, root: Path) -> tuple[object | None, dict]:
    """A run folder read: ``(record, entry)`` with the page entry's name and record kind, or
    ``(None, entry)`` with the one-line error of a record that cannot be read."""
    rel = folder.relative_to(root).as_posix()
    entry = {"name": rel, "folder": rel, "collection": rel.split("/")[0], "stages": []}
    try:
        rec = read_recorded(folder)
    except (RecordError, ValueError) as e:
        entry["error"] = str(e).splitlines()[0]
        return None, entry
    entry.update(name=page_name(rec, folder), num_requests=rec.num_requests + rec.num_failed,
                 record=("per-stage summaries, client side" if rec.aggregate_only else
                         "per request, " + ("client side" if rec.client_side else
                                            "engine side")))
    return rec, entry


def replay_run(rec, folder: Path, entry: dict, args) -> dict | None:
    """Replay one read run, filling its page ``entry``; returns the samples of its CDF figure
    (``{metric: {series: values}}``) for a per-request record, else None."""
    name, rel = entry["name"], entry["folder"]
    version = None
    if rec.setting("vllm_version") is None:
        version = per_run(list(ENGINE_VERSIONS) + (args.engine_version or []), name, rel)
    gpu = per_run(args.gpu, name, rel) or _gpu_from_dir(rec.setting("device_name"), args.gpu_dir)
    try:
        rv = validate_recorded(folder, gpu=gpu, model=per_run(args.model, name, rel),
                               sets=args.set, write=False, engine_version=version)
    except (ScenarioError, RecordError, ValueError, FileNotFoundError, KeyError) as e:
        entry["error"] = str(e).splitlines()[0]
        return None
    v = rv.validation
    entry.update(stages=v["stages"], engine_version=str(rv.run.setting("vllm_version") or "-"),
                 tables=_perf_sources(v.get("provenance") or {}),
                 peer_published=v.get("peer"))
    if rec.aggregate_only:
        return None
    pair = paired_frame(rv.run.outcomes, rv.client_requests)
    ok = pair["compared"].to_numpy()
    entry["metrics"] = v["metrics"]
    entry["ks"] = per_request_ks(pair)
    samples = {m: {"recorded": pair.loc[ok, f"real_{m}_s"].to_numpy(float),
                   "servesim": pair.loc[ok, f"sim_{m}_s"].to_numpy(float)} for m in KS_METRICS}
    _peer(rv, pair, folder, entry, samples)
    return samples


# ------------------------------------------------------------------------ summaries, header
def replay_summaries(path: Path | None, sets) -> tuple[list[dict], str | None]:
    """Every record of the summaries file through ``bench_public_summaries.compare_record``."""
    if path is None:
        return [], None
    import bench_public_summaries as bps  # (it imports this module: imported here)
    out = []
    for rec in bps.load_records(path):
        print(f"replaying summary {rec.get('id')}", file=sys.stderr, flush=True)
        try:
            out.append(bps.compare_record(rec, sets))
        except (ScenarioError, ValueError, KeyError) as e:
            out.append({"record": str(rec.get("id")), "gpu": rec.get("gpu"),
                        "error": str(e).splitlines()[0]})
    return out, _shown(path)


def _shown(p: Path) -> str:
    """``p`` relative to the repository when it is under the repository's parent."""
    p = Path(p).resolve()
    return os.path.relpath(p, REPO) if p.is_relative_to(REPO.parent) else str(p)


# ------------------------------------------------------------------------ main
def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=None, help="folder to discover runs under")
    ap.add_argument("--runs", default="*", help="glob on run names or folders")
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--summaries", default=str(REPO / "benchmarks" / "public_summaries.yaml"),
                    help="published summaries YAML ('' for none)")
    ap.add_argument("--profile", type=Path, default=REPO / "engine_profiles" / "vllm-v1.yaml",
                    help="engine profile whose fit_report the page shows")
    ap.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                    help="scenario override passed to every replay (repeatable)")
    ap.add_argument("--gpu", action="append", metavar="[GLOB=]GPU",
                    help="GPU for every run, or for the runs matching GLOB (repeatable)")
    ap.add_argument("--model", action="append", metavar="[GLOB=]MODEL",
                    help="model for every run, or for the runs matching GLOB (repeatable)")
    ap.add_argument("--engine-version", action="append", metavar="[GLOB=]X.Y.Z",
                    help="vLLM version of runs whose record states none (repeatable)")
    ap.add_argument("--gpu-dir", type=Path, default=None,
                    help="GPU spec YAMLs to match a record's device the catalog lacks")
    return ap, ap.parse_args(argv)


def _figures(out: Path, runs: list[dict], samples: dict, summaries: list[dict]) -> dict:
    figs = {"errors": None, "summaries": None, "cdfs": []}
    rows = error_chart_rows([r for r in runs if not r.get("error")])
    if rows:
        figs["errors"] = plot_signed_errors(rows, _ERROR_PANELS, out / "signed_errors.png",
                                            title="Recorded runs: signed error",
                                            value_label="requests/s").name
    srows = summary_chart_rows(summaries)
    if srows:
        figs["summaries"] = plot_signed_errors(srows, _SUMMARY_PANELS,
                                               out / "public_summaries.png",
                                               title="Published summaries: signed error",
                                               value_label="duration", limit_pct=100.0).name
    for name, s in samples.items():
        f = out / f"cdf_{name.replace('/', '-')}.png"
        figs["cdfs"].append((name, plot_cdf_overlay(s, _CDF_PANELS, f, title=name).name))
    return figs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap, args = _args(argv)
    root = args.root or default_root()
    if not root.is_dir():
        ap.error(f"--root {root}: no recorded runs folder there")
    runs, samples = [], {}
    for d in discover(root):
        rec, entry = read_run(d, root)
        if not any(fnmatch.fnmatch(n, args.runs) for n in (entry["name"], entry["folder"])):
            continue
        print(f"replaying {entry['folder']}", file=sys.stderr, flush=True)
        if rec is not None:
            s = replay_run(rec, d, entry, args)
            if s is not None:
                samples[entry["name"]] = s
        runs.append(entry)
    if not runs:
        ap.error(f"--runs {args.runs!r}: no run under {root} matches")
    runs.sort(key=lambda r: r["name"])
    summaries_path = Path(args.summaries) if args.summaries else None
    try:
        summaries, summaries_src = replay_summaries(summaries_path, args.set)
    except ValueError as e:
        ap.error(str(e))
    profile = yaml.safe_load(args.profile.read_text()) if args.profile.is_file() else None
    fit = fit_report_summary(profile)
    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    for pat in _OWN_FILES:
        for f in out.glob(pat):
            f.unlink()
    figures = _figures(out, runs, samples, summaries)
    header = {"command": shlex.join(["python", "benchmarks/bench_fidelity.py", *argv]),
              "commit": commit_label(REPO), "date": dt.datetime.now(dt.timezone.utc).date().isoformat(),
              "servesim_version": __version__, "root": _shown(root),
              "profile": _shown(args.profile), "summaries_source": summaries_src,
              "csv": "fidelity.csv"}
    text = render_page(header, runs, summaries, fit, figures)
    (out / "fidelity.md").write_text(text, encoding="utf-8")
    write_csv(out / "fidelity.csv", [{k: f"{v:.6g}" if isinstance(v, float) else v
                                      for k, v in r.items()}
                                     for r in csv_rows(runs, summaries, fit)], list(CSV_COLUMNS))
    print(f"wrote {out}/fidelity.md and fidelity.csv and its figures", file=sys.stderr)
    failed = sum(bool(r.get("error")) for r in runs)
    return exit_status(failed, len(runs), "run(s)")


if __name__ == "__main__":
    sys.exit(main())
