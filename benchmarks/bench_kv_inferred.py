"""KV capacity of recorded runs, inferred from their running-request curves, against the planner.

Usage::

    python benchmarks/bench_kv_inferred.py [--root DIR] [--run PATH ...]
        [--gpu [GLOB=]NAME|spec.yaml ...] [--bound-fraction 0.2] [-o OUT.csv]

Why: a vLLM record states its KV block count (``num_gpu_blocks``) only when its recorder logged
it (the RTX 4090 run of ``../shared/reference/groundtruth`` does; the RTX PRO 6000 runs and
older records do not). When the run is *KV-bound* (requests wait while fewer than
``max_num_seqs`` run), the number of requests running at a time is set by the KV capacity
divided by the contexts they hold, so the capacity can be read back from the record: replay
the run with ``kv_cache.num_gpu_blocks = N`` and find the ``N`` whose mean running count over
the record's KV-bound window equals the record's (bisection; the mean grows with ``N``). On a
run whose count *is* recorded this checks the method (the RTX 4090 run: inferred within a few
blocks of the recorded 2,588); on a run whose count is not, it gives the memory planner
(``simulator/kv/planner.py``) a second data point, and ``non-torch implied`` is the planner's
non-torch figure plus the planner's surplus in bytes (KV = budget - weights - activation peak -
non-torch, so a block count off by ``d`` blocks is ``d`` x block bytes of unexplained memory).

Definitions (the same on both sides): a request *runs* from its first scheduling to its last
token and *waits* from its arrival to its first scheduling (a preempted request counts as
running: the per-request record has no preemption times). The KV-bound window is every instant
(2,000 evenly spaced over the record's span) where at least one request waits and fewer than
``max_num_seqs`` run; a run where that window is under ``--bound-fraction`` of its span is not
KV-bound and is reported without an inferred count. Each bisection step is one replay
(``servesim validate --recorded`` with ``--set kv_cache.num_gpu_blocks=N``; a 300-request run
takes about a second). Not part of the test run.

Runs: every folder with ``requests.jsonl`` and ``meta.json`` under ``--root`` (default
``../shared/reference/groundtruth``) and each ``--run PATH``. A held-out run not in
``../shared``: the RTX 4090 run with ``max_num_seqs`` 128 that LLMServingSim
(github.com/casys-kaist/LLMServingSim, MIT) kept at commit a09fa560 under
``bench/results/rtx4090-llama8b-tp1/`` (its ``meta.json`` has no device: pass
``--gpu rtx-4090``); see ``docs/howto/validate.md``, "A held-out run".
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_fidelity import default_root, exit_status, per_run, write_csv

from simulator.observe.readers import find_recorded_runs, read_recorded
from simulator.observe.validate import validate_recorded

COLUMNS = ["run", "max_num_seqs", "kv_bound_fraction", "recorded_blocks", "planner_blocks",
           "inferred_blocks", "inferred_vs_recorded_%", "planner_vs_recorded_%",
           "planner_vs_inferred_%", "block_bytes", "planner_non_torch_GiB",
           "non_torch_implied_GiB", "replays", "note"]
GiB = 1024 ** 3


def occupancy(start: np.ndarray, end: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """How many ``[start, end)`` intervals hold each time of ``grid`` (shapes ``(n,)``, ``(n,)``,
    ``(g,)`` -> ``(g,)``; NaN starts or ends never hold)."""
    ok = np.isfinite(start) & np.isfinite(end)
    s, e = np.sort(start[ok]), np.sort(end[ok])
    return (np.searchsorted(s, grid, side="right") - np.searchsorted(e, grid, side="right"))


def recorded_curves(outcomes, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running and waiting counts of the record on ``grid`` (seconds from the first arrival)."""
    arr = outcomes["arrival_s"].to_numpy(float)
    sch = outcomes["scheduled_s"].to_numpy(float)
    last = outcomes["last_token_s"].to_numpy(float)
    return occupancy(sch, last, grid), occupancy(arr, sch, grid)


def sim_running(requests, grid: np.ndarray) -> np.ndarray:
    """Running count of a replay's request table on ``grid``."""
    return occupancy(requests["first_scheduled_time_s"].to_numpy(float),
                     requests["finish_time_s"].to_numpy(float), grid)


def infer_one(path: Path, gpu: str | None, bound_fraction: float) -> dict:
    """Everything of one row of :data:`COLUMNS` for the recorded run at ``path``."""
    rec = read_recorded(path)
    row = {c: "" for c in COLUMNS}
    row["run"] = rec.name
    base = validate_recorded(path, gpu=gpu, write=False)
    kv = base.validation["kv_cache"]
    setup = base.result.setup
    max_seqs = int(base.replay.scenario.scheduler.max_num_seqs)
    block_bytes = int(setup.model.kv_bytes_per_token(setup.kv_cache_dtype,
                                                     setup.tensor_parallel_size)
                      * setup.block_size)
    planner = int(kv["planner_num_gpu_blocks"])
    recorded = kv.get("recorded_num_gpu_blocks")
    span = float(np.nanmax(rec.outcomes["last_token_s"].to_numpy(float)))
    grid = np.linspace(0.0, span, 2000)
    run_real, wait_real = recorded_curves(rec.outcomes, grid)
    mask = (wait_real >= 1) & (run_real < max_seqs)
    replicas = base.replay.scenario.cluster.num_replicas
    frac = float(mask.mean())
    row.update(max_num_seqs=max_seqs, kv_bound_fraction=f"{frac:.2f}", planner_blocks=planner,
               recorded_blocks=recorded if recorded is not None else "",
               block_bytes=block_bytes,
               planner_non_torch_GiB=_planner_non_torch(base))
    if recorded is not None:
        row["planner_vs_recorded_%"] = f"{100 * (planner / recorded - 1):+.1f}"
    if replicas != 1:
        row["note"] = (f"{replicas} engines (data parallel): the record's running count is "
                       "their sum, and no engine alone is shown KV-bound by it; not inferred")
        return row
    if frac < bound_fraction:
        row["note"] = ("not KV-bound (one engine, waiting while < max_num_seqs run) in "
                       f"{100 * frac:.0f}% of the span: the running curve does not fix the "
                       "block count")
        return row
    target = float(run_real[mask].mean())

    def gap(n: int) -> float:
        rv = validate_recorded(path, gpu=gpu, sets=[f"kv_cache.num_gpu_blocks={n}"],
                               write=False)
        return float(sim_running(rv.result.requests, grid)[mask].mean()) - target

    seen: dict[int, float] = {}
    lo, hi = max(planner // 2, 16), planner * 2
    seen[lo] = gap(lo)
    while True:  # the largest count up to 2 x planner that fits the device
        try:
            seen[hi] = gap(hi)
            break
        except ValueError:
            if hi <= planner:
                raise
            hi = max(planner, int(hi * 0.9))
    if seen[lo] > 0 or seen[hi] < 0:
        row["note"] = f"running curve not bracketed in [{lo}, {hi}] blocks"
        row["replays"] = 2
        return row
    while hi - lo > 4:
        mid = (lo + hi) // 2
        seen[mid] = g = gap(mid)
        if g < 0:
            lo = mid
        else:
            hi = mid
    best = min(seen, key=lambda n: (abs(seen[n]), n))
    row["inferred_blocks"] = best
    row["replays"] = len(seen) + 1
    row["planner_vs_inferred_%"] = f"{100 * (planner / best - 1):+.1f}"
    if recorded is not None:
        row["inferred_vs_recorded_%"] = f"{100 * (best / recorded - 1):+.1f}"
    nt = row["planner_non_torch_GiB"]
    if nt != "":
        row["non_torch_implied_GiB"] = f"{float(nt) + (planner - best) * block_bytes / GiB:.3f}"
    return row


def _planner_non_torch(rv) -> str:
    """The planner's non-torch bytes for this replay, in GiB (blank when not planned)."""
    plan = rv.result.setup.memory
    nt = getattr(plan, "non_torch_bytes", None)
    return "" if nt is None else f"{nt / GiB:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=None,
                    help="folder to discover recorded runs under ('' for none)")
    ap.add_argument("--run", type=Path, action="append", default=[],
                    help="a recorded run folder or requests.jsonl (repeatable)")
    ap.add_argument("--gpu", action="append", metavar="[GLOB=]GPU",
                    help="GPU for every run, or GLOB=GPU for the runs whose name matches "
                         "(the name as printed: PARENT/RUN, e.g. 'RTX4090/*' or '*/RUN')")
    ap.add_argument("--bound-fraction", type=float, default=0.2,
                    help="least KV-bound share of a run's span to infer its block count")
    ap.add_argument("-o", "--output", type=Path, default=None, help="write the table as CSV")
    args = ap.parse_args(argv)
    if not 0.0 < args.bound_fraction <= 1.0:
        ap.error(f"--bound-fraction {args.bound_fraction}: a share of the run's span in (0, 1]")
    if args.output is not None and args.output.is_dir():
        ap.error(f"-o {args.output}: a folder; give the CSV file's path")
    runs = list(args.run)
    root = default_root() if args.root is None else (Path(args.root) if args.root else None)
    if root is not None:
        if root.is_dir():
            runs = [*find_recorded_runs(root), *runs]
        elif args.root is not None or not runs:
            ap.error(f"--root {root}: not a folder" + ("" if args.root is not None else
                     " (the default, ../shared/reference/groundtruth or $SERVESIM_SHARED); "
                     "give --root DIR or --root '' --run RUN"))
    if not runs:
        ap.error(f"no recorded runs under {root} (give --run RUN or another --root)")
    rows = []
    for path in runs:
        try:
            name = read_recorded(path).name
        except (ValueError, FileNotFoundError) as e:  # RecordError is a ValueError
            ap.error(f"--run {path}: {str(e).splitlines()[0]}")
        try:
            rows.append(infer_one(Path(path), per_run(args.gpu, name), args.bound_fraction))
        except (ValueError, FileNotFoundError, KeyError) as e:
            rows.append({**{c: "" for c in COLUMNS}, "run": name,
                         "note": "error: " + str(e).splitlines()[0]})
        r = rows[-1]
        print(f"{r['run']}: max_num_seqs {r['max_num_seqs'] or '-'}, KV-bound "
              f"{r['kv_bound_fraction'] or '-'}, recorded {r['recorded_blocks'] or '-'}, planner "
              f"{r['planner_blocks'] or '-'}, inferred {r['inferred_blocks'] or '-'} "
              f"(inferred vs recorded {r['inferred_vs_recorded_%'] or '-'}%, planner vs inferred "
              f"{r['planner_vs_inferred_%'] or '-'}%, non-torch implied "
              f"{r['non_torch_implied_GiB'] or '-'} GiB vs planner "
              f"{r['planner_non_torch_GiB'] or '-'} GiB) {r['note']}", flush=True)
    if args.output:
        write_csv(args.output, rows, COLUMNS)
    return exit_status(sum(str(r["note"]).startswith("error: ") for r in rows), len(rows),
                       "run(s)")

if __name__ == "__main__":
    sys.exit(main())
