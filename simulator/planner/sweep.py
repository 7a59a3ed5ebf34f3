"""Sweeps: one base scenario x a grid of field values, every point simulated, one table out.

``servesim sweep SWEEP.yaml`` writes ``OUTDIR/sweep.parquet`` and ``OUTDIR/sweep.csv``: one
row per point with ``point_id``, ``label``, ``status`` (``ok`` / ``error``), ``error``,
``cached``, every field of the resolved scenario as a dotted column
(``cluster.tensor_parallel_size``) and every summary metric flattened with ``_``
(``ttft_s_p99``, ``by_slice_chat_ttft_s_p99``), plus ``busy_fraction`` and
``queue_share_of_ttft``. Finished points are cached in ``OUTDIR/.cache/`` by a hash of the
resolved scenario and the exact request list, so a re-run simulates only what changed.
The points run through the family runner (:func:`simulator.experiments.runner.run_family`).
Next to the table: ``sweep.md`` and a self-contained ``sweep.html`` with the summary
columns of every point and ``sweep.png`` (:mod:`simulator.report.sweep`).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.base.outdir import clear_outputs, named_output_folder
from simulator.experiments.cache import ResultCache, cache_key, scenario_identity, specs_fingerprint
from simulator.experiments.grid import (
    config_label,
    expand_grid,
    flatten_inputs,
    flatten_summary,
    set_path,
)
from simulator.experiments.input_files import inputs_fingerprint
from simulator.experiments.runner import (
    Workloads,
    factory_id,
    guard_outputs,
    output_folder,
    prepare_points,
    run_family,
    spec_file,
)
from simulator.experiments.warned import recording
from simulator.perf.provenance import summary_sources_label
from simulator.planner.simulate import simulate_summary
from simulator.planner.spec import (
    PlanError,
    SweepSpec,
    check_names_up_front,
    refuse_pools_base,
    resolve_base_source,
)
from simulator.report.sweep import FIGURE_FILE, write_sweep_report
from simulator.report.tables import write_table
from simulator.scenario.config import ScenarioError, validate_scenario
from simulator.scenario.overrides import apply_overrides, cli_overrides

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["SweepResult", "run_sweep", "sweep_worker"]

#: The files a sweep writes in its output folder (beside its ``.cache/``)
SWEEP_FILES = ("sweep.parquet", "sweep.csv", "sweep.md", "sweep.html", FIGURE_FILE)

#: Columns that differ between two runs of the same point (wall-clock figures).
NONDETERMINISTIC_COLUMNS = ("sim_wall_s", "sim_speedup", "cached")


@dataclass
class SweepResult:
    """What :func:`run_sweep` produced."""

    table: pd.DataFrame
    num_points: int
    num_simulated: int
    num_cached: int
    wall_s: float
    outdir: Path | None = None
    files: dict[str, Path] = field(default_factory=dict)


def sweep_worker(task: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """Simulate one sweep point (runs in a worker). Never raises: errors become results."""
    specs = shared["workloads"][task["workload"]]
    t0 = time.perf_counter()
    with recording() as warned:  # kept with the result: a cached point shows them again
        try:
            r = simulate_summary(task["scenario"], specs,
                                 setup_factory=task.get("setup_factory"))
            out = {"key": task["key"], "ok": True, "summary": r["summary"],
                   "extra": r["extra"]}
        except Exception as e:  # noqa: BLE001 - one failed point must not stop a sweep
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            out = {"key": task["key"], "ok": False, "error": f"{type(e).__name__}: {msg}"}
    out["wall_s"] = time.perf_counter() - t0
    out["warnings"] = warned
    return out


def run_sweep(spec: SweepSpec, spec_dir: Path | None = None, *,
              scenario_overrides: list[str] | None = None, trace: str | None = None,
              jobs: int = 1, backend: str = "local", address: str | None = None,
              use_cache: bool = True, outdir: str | Path | None = None, write: bool = True,
              progress: Callable[[int, int], None] | None = None,
              setup_factory: Callable | None = None, figures: bool = True,
              source: str | None = None) -> SweepResult:
    """Run every point of a sweep.

    Parameters
    ----------
    spec : SweepSpec
    spec_dir : Path, optional
        Folder of the sweep file (relative ``base`` paths resolve against it).
    scenario_overrides : list of str, optional
        ``a.b=v`` overrides of the base scenario (after ``spec.set``).
    trace : str, optional
        Replay this trace instead of the base workload's source.
    jobs, backend, address
        See :func:`simulator.experiments.executor.run_tasks`.
    use_cache : bool
        Read cached points (new results are always written).
    outdir : path, optional
        Overrides ``spec.output_dir``.
    write : bool
        Write ``sweep.parquet``, ``sweep.csv``, ``sweep.md`` and ``sweep.html``.
    progress : callable, optional
        ``progress(done, total)`` over the points to simulate.
    setup_factory : callable, optional
        Replaces :func:`simulator.cluster.setup.build_setup` (tests).
    source : str, optional
        The sweep file, named in a bad point's error (``FILE: sweep point N (...): ...``).
    figures : bool
        Draw ``sweep.png`` (with ``write``).

    Returns
    -------
    SweepResult

    Raises
    ------
    PlanError
        A bad ``--set`` override, a point that is not a valid scenario, or a base scenario
        that declares ``pools:`` (or a grid that sets them), refused before any point runs.
    """
    t0 = time.perf_counter()
    base_raw, base_dir = _sweep_base(spec, spec_dir, scenario_overrides, trace)
    overrides = expand_grid(spec.grid, spec.points)
    points = _points(base_raw, overrides, (base_dir, spec_dir), source)
    # the output folder before the workloads load (their warnings, their time)
    out = _output_folder(spec, spec_dir, outdir, write or use_cache, source, points, base_dir)
    workloads = Workloads()
    wids = [workloads.add(p["workload"], p["seed"], base_dir) for p in points]
    fps = {w: specs_fingerprint(s) for w, s in workloads.lists.items()}

    cache = ResultCache(out / ".cache", enabled=use_cache)
    fid = factory_id(setup_factory)
    tasks = [{"key": cache_key("sim", {"scenario": scenario_identity(p), "specs": fps[w],
                                       "inputs": inputs_fingerprint(p), "setup": fid}),
              "scenario": p, "workload": w, "setup_factory": setup_factory}
             for p, w in zip(points, wids)]
    keys = [t["key"] for t in tasks]
    results, ran = run_family(sweep_worker, tasks, shared={"workloads": workloads.lists},
                                  cache=cache, cache_entries=_cache_entry, backend=backend,
                                  jobs=jobs, address=address, progress=progress,
                                  what="sweep points")

    import pandas as pd  # start-up: loaded once there are rows to tabulate
    table = pd.DataFrame(_rows(points, overrides, keys, results, ran))
    res = SweepResult(table, len(points), len(ran), len(points) - len(ran),
                      time.perf_counter() - t0, out)
    if write:
        out.mkdir(parents=True, exist_ok=True)
        clear_outputs(out, SWEEP_FILES)  # an earlier sweep's (sweep.png after --no-figures)
        res.files = write_table(table, out, "sweep")
        res.files.update(write_sweep_report(
            table, out, name=spec.name, num_simulated=res.num_simulated,
            num_cached=res.num_cached, varied=list(spec.grid.items()), figures=figures))
    return res


def _output_folder(spec: SweepSpec, spec_dir, outdir, create: bool, source, points,
                   base_dir) -> Path:
    """The sweep's output folder (``outdir`` or the spec's ``output_dir`` with its name),
    created with ``create`` and then refused (:class:`PlanError`, one line) when an output
    would overwrite an input: the sweep file, the base scenario, a file a point names."""
    out = output_folder(outdir if outdir is not None else named_output_folder(
        spec.output_dir, spec.name, "sweep name", PlanError), create=create)
    if create:
        guard_outputs(out, [*SWEEP_FILES, ".cache/"],
                      [spec_file(source, "sweep"), resolve_base_source(spec.base, spec_dir)[2]],
                      points, base_dir, PlanError)
    return out


def _points(base_raw: dict, overrides, folders, source: str | None) -> list[dict]:
    """The resolved scenario of every point (:func:`prepare_points`); a bad point is a
    :class:`PlanError` naming the sweep file (``source``) and the point."""
    try:
        return prepare_points(base_raw, overrides, folders=folders,
                              source=f"{source}: sweep" if source else "sweep")
    except ScenarioError as e:
        raise PlanError(str(e)) from None


def _sweep_base(spec: SweepSpec, spec_dir: Path | None, scenario_overrides: list[str] | None,
                trace: str | None) -> tuple[dict, Path]:
    """The sweep's base scenario (raw dict, after ``spec.set`` and the ``--set`` / ``--trace``
    overrides) and the folder its paths resolve against; raises :class:`PlanError` for a bad
    override or a base (or grid) that declares ``pools:``."""
    base_raw, base_dir, source = resolve_base_source(spec.base, spec_dir)
    for k, v in spec.set.items():
        set_path(base_raw, k, v)
    ovr = cli_overrides(scenario_overrides, trace)
    try:
        base_raw = apply_overrides(base_raw, ovr)
        refuse_pools_base(base_raw, source, "sweep",
                          {"grid": list(spec.grid),
                           "points": [k for pt in spec.points or [] for k in pt]})
        _check_overrides(base_raw, ovr)
    except ScenarioError as e:
        raise PlanError(str(e)) from None
    check_names_up_front(base_raw, (base_dir, spec_dir), "sweep",
                         {*spec.grid, *(k for pt in spec.points or [] for k in pt)})
    return base_raw, base_dir


def _check_overrides(base_raw: dict, ovr: list) -> None:
    """Fail on a ``--set``/``--trace`` override that is wrong in itself (an unknown key path, a
    bad value), naming the flag, before the grid is expanded; an error the grid's points may
    still fill in is left to the per-point validation.

    Raises
    ------
    ScenarioError
        When a validation error lies on the key path of one of ``ovr``.
    """
    if not ovr:
        return
    try:
        validate_scenario(base_raw, source="sweep base scenario", overrides=ovr)
    except ScenarioError as e:
        if any(getattr(o, "origin", None) and o.origin in str(e) for o in ovr):
            raise


def _rows(points, overrides, keys, results, ran) -> list[dict[str, Any]]:
    """One table row per point: identity, status, the dotted inputs, the flat summary."""
    rows = []
    for i, (p, ov, key) in enumerate(zip(points, overrides, keys)):
        r = results[key]
        ok = r.get("ok", True)  # a cache entry is a successful result
        row: dict[str, Any] = {"point_id": i, "label": config_label(ov),
                               "status": "ok" if ok else "error",
                               "error": r.get("error", ""), "cached": key not in ran}
        row.update(flatten_inputs(p))
        if ok:
            row.update(flatten_summary(r["summary"]))
            row["latency_sources"] = summary_sources_label(r["summary"].get("provenance"))
            ex = r.get("extra") or {}
            row["busy_fraction"] = ex.get("busy_fraction")
            row["queue_share_of_ttft"] = ex.get("queue_share_of_ttft")
        rows.append(row)
    return rows


def _cache_entry(key: str, result: Mapping[str, Any]):
    """What a sweep caches of a point: its summary, extras and the warnings it raised (shown
    again when the entry is served; failed points: nothing)."""
    if result["ok"]:
        entry = {"summary": result["summary"], "extra": result["extra"]}
        if result.get("warnings"):
            entry["warnings"] = result["warnings"]
        yield key, entry
