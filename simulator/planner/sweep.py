"""Sweeps: one base scenario x a grid of field values, every point simulated, one table out.

``servesim sweep SWEEP.yaml`` writes ``OUTDIR/sweep.parquet`` and ``OUTDIR/sweep.csv``: one
row per point with ``point_id``, ``label``, ``status`` (``ok`` / ``error``), ``error``,
``cached``, every field of the resolved scenario as a dotted column
(``cluster.tensor_parallel_size``) and every summary metric flattened with ``_``
(``ttft_s_p99``, ``by_slice_chat_ttft_s_p99``), plus ``busy_fraction`` and
``queue_share_of_ttft``. Finished points are cached in ``OUTDIR/.cache/`` by a hash of the
resolved scenario and the exact request list, so a re-run simulates only what changed.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..config import ScenarioError, apply_overrides, cli_overrides, validate_scenario
from .backends import run_tasks
from .cache import ResultCache, cache_key, scenario_identity, specs_fingerprint
from .grid import config_label, expand_grid, flatten_inputs, flatten_summary, set_path
from .spec import PlanError, SweepSpec, resolve_base

__all__ = ["SweepResult", "prepare_points", "run_sweep", "sweep_worker", "write_table"]

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


def _scenario_dict(sc) -> dict:
    return json.loads(sc.model_dump_json())


def _absolute_spec_paths(raw: dict, folders: Sequence[Path]) -> None:
    """Make relative model / GPU spec file paths absolute (workers may run elsewhere).

    A value that looks like a path (has a ``/`` or a ``.yaml``/``.yml``/``.json`` suffix) and
    exists relative to one of ``folders`` is replaced by that absolute path; catalog names are
    left alone.
    """
    def fix(value):
        if not isinstance(value, str) or Path(value).is_absolute():
            return value
        if "/" not in value and not value.endswith((".yaml", ".yml", ".json")):
            return value
        for d in folders:
            if d is not None and (Path(d) / value).exists():
                return str((Path(d) / value).resolve())
        return value

    if "model" in raw:
        raw["model"] = fix(raw["model"])
    hw = raw.get("hardware")
    if isinstance(hw, dict) and "gpu" in hw:
        hw["gpu"] = fix(hw["gpu"])


def prepare_points(base_raw: dict, overrides: Sequence[Mapping[str, Any]],
                   source: str = "sweep", folders: Sequence[Path] = ()) -> list[dict]:
    """Apply each override set to ``base_raw`` and validate; returns resolved scenario dicts.

    ``folders``: where relative model / GPU spec paths are looked up (the base scenario's
    folder, then the sweep or plan file's).

    Raises
    ------
    PlanError
        Naming the point and the scenario error (unknown field path, bad value).
    """
    out = []
    for i, ov in enumerate(overrides):
        raw = json.loads(json.dumps(base_raw))
        try:
            for k, v in ov.items():
                set_path(raw, k, v)
            _absolute_spec_paths(raw, folders)
            sc = validate_scenario(raw, source=f"{source} point {i} ({config_label(ov)})")
        except ScenarioError as e:
            raise PlanError(str(e)) from None
        except ValueError as e:
            raise PlanError(f"{source} point {i} ({config_label(ov)}): {e}") from None
        out.append(_scenario_dict(sc))
    return out


def sweep_worker(task: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """Simulate one sweep point (runs in a worker). Never raises: errors become results."""
    from .simulate import simulate_summary
    specs = shared["workloads"][task["workload"]]
    t0 = time.perf_counter()
    try:
        r = simulate_summary(task["scenario"], specs, setup_factory=task.get("setup_factory"))
        return {"key": task["key"], "ok": True, "summary": r["summary"], "extra": r["extra"],
                "wall_s": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - one failed point must not stop a sweep
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return {"key": task["key"], "ok": False, "error": f"{type(e).__name__}: {msg}",
                "wall_s": time.perf_counter() - t0}


def _load_workloads(points: list[dict], base_dir: Path) -> tuple[list[str], dict[str, list]]:
    """Load each distinct workload once; returns the workload id of each point and the lists."""
    from ..workload import WorkloadConfig, load_workload
    ids: list[str] = []
    by_key: dict[str, str] = {}
    loaded: dict[str, list] = {}
    for p in points:
        k = json.dumps({"w": p["workload"], "seed": p["seed"]}, sort_keys=True)
        if k not in by_key:
            wid = f"w{len(by_key)}"
            by_key[k] = wid
            cfg = WorkloadConfig.model_validate(p["workload"])
            loaded[wid] = load_workload(cfg, p["seed"], base_dir)
        ids.append(by_key[k])
    return ids, loaded


def run_sweep(spec: SweepSpec, spec_dir: Path | None = None, *,
              scenario_overrides: list[str] | None = None, trace: str | None = None,
              jobs: int = 1, backend: str = "local", address: str | None = None,
              use_cache: bool = True, outdir: str | Path | None = None, write: bool = True,
              progress: Callable[[int, int], None] | None = None,
              setup_factory: Callable | None = None) -> SweepResult:
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
        See :func:`simulator.planner.backends.run_tasks`.
    use_cache : bool
        Read cached points (new results are always written).
    outdir : path, optional
        Overrides ``spec.output_dir``.
    write : bool
        Write ``sweep.parquet`` and ``sweep.csv``.
    progress : callable, optional
        ``progress(done, total)`` over the points to simulate.
    setup_factory : callable, optional
        Replaces :func:`simulator.engine.build_setup` (tests).

    Returns
    -------
    SweepResult
    """
    t0 = time.perf_counter()
    base_raw, base_dir = resolve_base(spec.base, spec_dir)
    for k, v in spec.set.items():
        set_path(base_raw, k, v)
    ovr = cli_overrides(scenario_overrides, trace)
    try:
        base_raw = apply_overrides(base_raw, ovr)
    except ScenarioError as e:
        raise PlanError(str(e)) from None
    overrides = expand_grid(spec.grid, spec.points)
    points = prepare_points(base_raw, overrides, folders=(base_dir, spec_dir))
    wids, workloads = _load_workloads(points, base_dir)
    fps = {w: specs_fingerprint(s) for w, s in workloads.items()}

    out = Path(outdir) if outdir is not None else Path(spec.output_dir.format(name=spec.name))
    cache = ResultCache(out / ".cache", enabled=use_cache)
    factory_id = _factory_id(setup_factory)
    keys, results, todo = [], {}, []
    for i, (p, w) in enumerate(zip(points, wids)):
        key = cache_key("sim", {"scenario": scenario_identity(p), "specs": fps[w],
                                "setup": factory_id})
        keys.append(key)
        hit = cache.get(key)
        if hit is not None:
            results[key] = {**hit, "ok": True, "cached": True}
        elif key not in {t["key"] for t in todo}:
            todo.append({"key": key, "scenario": p, "workload": w,
                         "setup_factory": setup_factory})
    new = run_tasks(sweep_worker, todo, shared={"workloads": workloads}, backend=backend,
                    jobs=jobs, address=address, progress=progress)
    for r in new:
        if r["ok"]:
            entry = {"summary": r["summary"], "extra": r["extra"]}
            cache.put(r["key"], entry)
            results[r["key"]] = {**entry, "ok": True, "cached": False}
        else:
            results[r["key"]] = {"ok": False, "error": r["error"], "cached": False}

    rows = []
    for i, (p, ov, key) in enumerate(zip(points, overrides, keys)):
        r = results[key]
        row: dict[str, Any] = {"point_id": i, "label": config_label(ov),
                               "status": "ok" if r["ok"] else "error",
                               "error": r.get("error", ""), "cached": bool(r.get("cached"))}
        row.update(flatten_inputs(p))
        if r["ok"]:
            row.update(flatten_summary(r["summary"]))
            ex = r.get("extra") or {}
            row["busy_fraction"] = ex.get("busy_fraction")
            row["queue_share_of_ttft"] = ex.get("queue_share_of_ttft")
        rows.append(row)
    table = pd.DataFrame(rows)
    res = SweepResult(table, len(points), len(todo), len(points) - len(todo),
                      time.perf_counter() - t0, out)
    if write:
        out.mkdir(parents=True, exist_ok=True)
        res.files = write_table(table, out, "sweep")
    return res


def _factory_id(setup_factory: Callable | None) -> str | None:
    if setup_factory is None:
        return None
    return getattr(setup_factory, "cache_id", None) or \
        f"{getattr(setup_factory, '__module__', '')}.{getattr(setup_factory, '__qualname__', '')}"


def _arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns mixing types become strings (Parquet needs one type per column)."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype != object:
            continue
        kinds = {type(v) for v in df[c] if v is not None and not (isinstance(v, float)
                                                                   and math.isnan(v))}
        if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
            df[c] = [None if v is None else (v if isinstance(v, str) else json.dumps(v))
                     for v in df[c]]
        elif kinds == {bool}:
            df[c] = df[c].astype("boolean")
    return df


def write_table(table: pd.DataFrame, outdir: Path, stem: str) -> dict[str, Path]:
    """Write ``stem.parquet`` and ``stem.csv``; returns their paths."""
    outdir = Path(outdir)
    pq, csv = outdir / f"{stem}.parquet", outdir / f"{stem}.csv"
    safe = _arrow_safe(table)
    safe.to_parquet(pq, index=False)
    safe.to_csv(csv, index=False, float_format="%.9g")
    return {"parquet": pq, "csv": csv}
