"""Fidelity benchmark: ``servesim validate --recorded`` on every recorded real-engine run.

Usage::

    python benchmarks/bench_fidelity.py [--root DIR] [--runs GLOB] [-o reports/bench_fidelity]
        [--set key=value ...] [--gpu [GLOB=]NAME|spec.yaml ...] [--model [GLOB=]ID|config.json ...]
        [--gpu-dir DIR]

Discovers the runs under ``--root`` (default: ``../shared/reference/groundtruth`` next to the
repository, or ``$SERVESIM_SHARED/reference/groundtruth``): every folder with a
``requests.jsonl`` and a ``meta.json``. Each run is replayed (``simulator.observe``) with the
``--set`` overrides; ``--gpu`` / ``--model`` apply to every run, or, as ``GLOB=VALUE``, to the
runs whose name matches ``GLOB`` (``'RTXPRO6000/Qwen3-30B*=my/config.json'``). ``--gpu-dir``
names a folder of GPU spec YAMLs to match by name / alias when the GPU catalog does not know a
record's device.

Prints one table and writes ``OUT/fidelity.csv``, ``OUT/fidelity.md`` and each run's full
report under ``OUT/<run>/``. Columns: the run; signed % errors (simulated - recorded) /
recorded of the mean and p90 of TTFT, TPOT and E2E and of the makespan; the perf model and the
source of its operators (from the run's provenance); the engine profile; and "constants fitted
on": the runs the engine profile's constants were fitted on (``validation.json``
``constants_fitted_on``, read from the profile's provenance; empty until engine profiles with
fitted constants exist; a run listed there is in-sample). Next to ours, a second table repeats
the peer simulator's published errors for the same runs (``validation/summary.txt``: *their*
numbers, in *their* percentile definition). A run that cannot be replayed gets a row with its
one-line error. Not part of the test run.
"""
from __future__ import annotations

import argparse
import csv
import fnmatch
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simulator.observe.readers import find_recorded_runs, read_recorded
from simulator.observe.settings import gpu_name_matches, match_gpu
from simulator.observe.validate import validate_recorded

COLUMNS = ["run", "compared", "ttft_mean_%", "ttft_p90_%", "tpot_mean_%", "tpot_p90_%",
           "e2e_mean_%", "e2e_p90_%", "makespan_%", "perf_model", "perf_sources",
           "engine_profile", "constants_fitted_on", "error"]
PEER_COLUMNS = ["run", "peer", "ttft_mean_%", "ttft_p90_%", "tpot_mean_%", "tpot_p90_%",
                "e2e_mean_%", "e2e_p90_%"]


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


def per_run(values: list[str] | None, name: str) -> str | None:
    """The last ``GLOB=VALUE`` (or plain ``VALUE``) of ``values`` that applies to run ``name``."""
    out = None
    for item in values or []:
        glob, sep, val = item.partition("=")
        if not sep:
            out = item
        elif fnmatch.fnmatch(name, glob):
            out = val
    return out


def _gpu_from_dir(device: str | None, gpu_dir: Path | None) -> str | None:
    if device is None or gpu_dir is None or match_gpu(device) is not None:
        return None
    import yaml
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
    """Operator source counts and the table sets behind them, e.g. ``measured x4 (vllm-0.19.0
    aiconfigurator), datasheet x1``."""
    kinds, sets = Counter(), set()
    for op in _OPS:
        v = str(prov.get(op, ""))
        if not v or v.startswith("none"):
            continue
        kinds[v.split(" ")[0]] += 1
        if v.startswith("measured (") and ";" in v:
            dev_ver, src = v[len("measured ("):].split(";", 1)
            ver = dev_ver.split(",")[-1].strip()
            sets.add(f"{ver}, {src.strip().split(' ')[0]}")
    txt = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
    return txt + (f" ({'; '.join(sorted(sets))})" if sets else "")


def _f(x) -> str:
    return "" if x is None else f"{x:+.1f}"


def run_one(run_dir: Path, out: Path, args) -> tuple[dict, dict | None]:
    rec = read_recorded(run_dir)
    name = rec.name
    gpu = per_run(args.gpu, name) or _gpu_from_dir(rec.setting("device_name"), args.gpu_dir)
    model = per_run(args.model, name)
    row = {c: "" for c in COLUMNS}
    row["run"] = name
    try:
        rv = validate_recorded(run_dir, gpu=gpu, model=model, sets=args.set,
                               out_dir=out / name.replace("/", "-"))
    except (ValueError, FileNotFoundError, KeyError) as e:
        row["error"] = str(e).splitlines()[0]
        return row, None
    v = rv.validation
    row.update({
        "compared": f"{v['counts']['num_compared']}/{v['counts']['num_requests_record']}",
        "ttft_mean_%": _f(v["ttft_mean_pct_error"]), "ttft_p90_%": _f(v["ttft_p90_pct_error"]),
        "tpot_mean_%": _f(v["tpot_mean_pct_error"]), "tpot_p90_%": _f(v["tpot_p90_pct_error"]),
        "e2e_mean_%": _f(v["e2e_mean_pct_error"]), "e2e_p90_%": _f(v["e2e_p90_pct_error"]),
        "makespan_%": _f(v["makespan_pct_error"]), "perf_model": v["perf_model"],
        "perf_sources": _perf_sources(v["provenance"]),
        "engine_profile": f"{v['engine']['name']} {v['engine']['version'] or ''}".strip(),
        "constants_fitted_on": ", ".join(v["constants_fitted_on"] or []),
    })
    if v["constants_fitted_on"] and name in v["constants_fitted_on"]:
        row["constants_fitted_on"] += " (in-sample)"
    peer = None
    if v.get("peer"):
        pm = v["peer"]["metrics"]
        peer = {"run": name, "peer": v["peer"]["name"]}
        for m in ("ttft", "tpot", "e2e"):
            for s in ("mean", "p90"):
                e = pm.get(m, {}).get(s)
                peer[f"{m}_{s}_%"] = _f(e["pct_error"] if e else None)
    return row, peer


def _md_table(rows: list[dict], cols: list[str]) -> list[str]:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in cols)
                     + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=None, help="folder to discover runs under")
    ap.add_argument("--runs", default="*", help="glob on run names (e.g. 'RTXPRO6000/*')")
    ap.add_argument("-o", "--output", type=Path, default=Path("reports/bench_fidelity"))
    ap.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                    help="scenario override passed to every run (repeatable)")
    ap.add_argument("--gpu", action="append", metavar="[GLOB=]GPU",
                    help="GPU for every run, or for the runs matching GLOB (repeatable)")
    ap.add_argument("--model", action="append", metavar="[GLOB=]MODEL",
                    help="model for every run, or for the runs matching GLOB (repeatable)")
    ap.add_argument("--gpu-dir", type=Path, default=None,
                    help="GPU spec YAMLs to match a record's device the catalog lacks")
    args = ap.parse_args(argv)
    root = args.root or default_root()
    if not root.is_dir():
        print(f"bench_fidelity: no recorded runs folder at {root} (use --root)", file=sys.stderr)
        return 2
    runs = []
    for d in find_recorded_runs(root):
        name = read_recorded(d).name
        if fnmatch.fnmatch(name, args.runs) or fnmatch.fnmatch(str(d.relative_to(root)),
                                                               args.runs):
            runs.append(d)
    if not runs:
        print(f"bench_fidelity: no run under {root} matches {args.runs!r}", file=sys.stderr)
        return 2
    args.output.mkdir(parents=True, exist_ok=True)
    rows, peers = [], []
    for d in runs:
        print(f"replaying {d}", file=sys.stderr, flush=True)
        row, peer = run_one(d, args.output, args)
        rows.append(row)
        if peer:
            peers.append(peer)
    write_csv(args.output / "fidelity.csv", rows, COLUMNS)
    intro = (f"Runs under `{root}`; signed % error (simulated - recorded) / recorded; "
             f"overrides: {', '.join(args.set or []) or 'none'}.")
    md = ["# Fidelity: servesim validate --recorded on the recorded runs", "", intro, "",
          *_md_table(rows, COLUMNS)]
    if peers:
        md += ["", "## The peer simulator's published errors (theirs, not servesim's)", "",
               "From each run's `validation/summary.txt`, in their percentile definition.", "",
               *_md_table(peers, PEER_COLUMNS)]
    text = "\n".join(md) + "\n"
    (args.output / "fidelity.md").write_text(text)
    if peers:
        write_csv(args.output / "fidelity_peer.csv", peers, PEER_COLUMNS)
    print(text)
    print(f"wrote {args.output}/fidelity.csv, fidelity.md and one report folder per run",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
