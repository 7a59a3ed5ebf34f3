"""The one runner for families of scenarios: variants of a base, their shared request lists,
the executor and the result cache.

A *family* is a set of scenarios that differ from one base by a few field values: the
variants of ``servesim compare``, the points of a sweep, the rates x (with, without
speculation) of ``servesim spec-sweep``, the candidates of a plan. Running one takes the same
steps whatever the experiment:

1. :func:`prepare_points` applies each variant's overrides to the base and validates it;
2. :class:`Workloads` loads each distinct request list once (a variant that changes neither
   the workload nor the seed replays the very same requests) and hands the lists to every
   worker through the executor's ``shared`` inputs (sent once per worker, not per task);
3. :func:`run_family` runs the experiment's worker on every task with a distinct key that
   the :class:`~simulator.experiments.cache.ResultCache` does not already hold, through the
   one executor :func:`~simulator.experiments.executor.run_tasks` (in process, a local
   process pool or Ray), and stores the new results.

The experiments (:mod:`simulator.experiments.compare`, :mod:`simulator.experiments.spec_sweep`,
:mod:`simulator.planner.sweep`, :mod:`simulator.planner.plan`) differ only in their workers and
in what they make of the results.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.base.outdir import check_outputs_spare_inputs, make_output_folder
from simulator.base.request import RequestSpec
from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.experiments.cache import ResultCache
from simulator.experiments.executor import run_tasks
from simulator.experiments.grid import config_label, set_path
from simulator.experiments.input_files import absolute_spec_path
from simulator.experiments.warned import reemit
from simulator.perf import get_engine_profile
from simulator.runs.scenario import scenario_inputs
from simulator.scenario.config import Scenario, ScenarioError, validate_scenario
from simulator.scenario.yaml_files import read_yaml_mapping
from simulator.workload import WorkloadConfig, load_workload

__all__ = ["Workloads", "absolute_spec_paths", "check_catalog_names", "factory_id",
           "guard_outputs", "output_folder", "prepare_points", "run_family", "spec_file"]

Progress = Callable[[int, int], None]
#: ``cache_entries(task_key, result)`` -> the ``(key, value)`` pairs to store for a result.
CacheEntries = Callable[[str, Any], Iterable[tuple[str, Any]]]


def output_folder(path: str | Path, create: bool = True) -> Path:
    """The output folder of a sweep or plan, created (with its parents) when ``create``.

    Raises
    ------
    ScenarioError
        One line when the folder cannot be created (a file in the way, no permission),
        before any simulation runs.
    """
    out = Path(path)
    if create:
        make_output_folder(out, ScenarioError)
    return out


def spec_file(path: str | Path | None, what: str) -> Path | None:
    """The file a sweep or plan argument names (``sweep_default`` -> the shipped
    ``scenarios/sweep_default.yaml``), as the loader resolves it; None when ``path`` is None
    or names none."""
    if path is None:
        return None
    try:
        return read_yaml_mapping(path, what)[1]
    except ScenarioError:
        return None


def guard_outputs(out: Path, outputs: Sequence[str], files: Sequence, scenarios: Sequence,
                  base_dir: Path | None, error: type[Exception] = ScenarioError,
                  folders: Sequence[Path | None] = ()) -> None:
    """Refuse a family whose outputs (``outputs``, names in ``out``) would overwrite one of
    its inputs: ``files`` (the sweep or plan file, the base scenario) and every file its
    points' settings name (``scenarios``: resolved scenario dicts; their trace, model
    ``config.json``, GPU spec ...; relative to ``base_dir``, the working folder or one of
    ``folders``), before anything runs.

    Raises
    ------
    ScenarioError
        (or ``error``) one line naming the output and the input
        (:func:`simulator.base.outdir.check_outputs_spare_inputs`).
    """
    check_outputs_spare_inputs(out, outputs,
                               scenario_inputs(scenarios, base_dir, files, folders), error=error)


def absolute_spec_paths(raw: dict, folders: Sequence[Path | None]) -> None:
    """Make relative model / GPU spec file paths absolute (workers may run elsewhere).

    A value that looks like a path (has a ``/`` or a ``.yaml``/``.yml``/``.json`` suffix) and
    exists relative to one of ``folders`` is replaced by that absolute path; catalog names are
    left alone. ``raw`` is changed in place.
    """
    if "model" in raw:
        raw["model"] = absolute_spec_path(raw["model"], folders)
    hw = raw.get("hardware")
    if isinstance(hw, dict) and "gpu" in hw:
        hw["gpu"] = absolute_spec_path(hw["gpu"], folders)


def prepare_points(base_raw: dict, overrides: Sequence[Mapping[str, Any]],
                   source: str = "sweep", folders: Sequence[Path | None] = ()) -> list[dict]:
    """Apply each override set to ``base_raw`` and validate; returns resolved scenario dicts.

    Parameters
    ----------
    base_raw : dict
        The base scenario as plain data (not changed).
    overrides : sequence of mapping
        ``{field path: value}`` per point (:func:`simulator.experiments.grid.set_path`).
    source : str
        Names the family in error messages (``sweep``, ``plan candidate``).
    folders : sequence of Path
        Where relative model / GPU spec paths are looked up (the base scenario's folder,
        then the sweep or plan file's).

    Returns
    -------
    list of dict
        One JSON-safe resolved scenario per override set.

    Raises
    ------
    ScenarioError
        Naming the point and the scenario error (unknown field path, bad value), or a catalog
        name of the point that does not resolve (:func:`check_catalog_names`), before any
        point runs.
    """
    out = []
    known: dict[tuple[str, str], str | None] = {}  # (key, value) -> why it fails, or None
    for i, ov in enumerate(overrides):
        raw = json.loads(json.dumps(base_raw))
        label = f"{source} point {i} ({config_label(ov)})"
        try:
            for k, v in ov.items():
                set_path(raw, k, v)
            absolute_spec_paths(raw, folders)
            sc = validate_scenario(raw, source=label)
        except ScenarioError:
            raise
        except ValueError as e:
            raise ScenarioError(f"{label}: {e}") from None
        check_catalog_names(sc, label, known)
        out.append(json.loads(sc.model_dump_json()))
    return out


def _catalog_names(sc: Scenario) -> list[tuple[str, str, Callable[[str], Any]]]:
    """``(key, value, lookup)`` of every catalog name (or spec path) a scenario's run
    resolves before its first step: model, GPU, draft model and engine profile."""
    names = [("model", sc.model, get_model), ("hardware.gpu", sc.hardware.gpu, get_gpu)]
    spec = sc.speculative
    if spec is not None and spec.method == "draft_model" and spec.draft_model:
        names.append(("speculative.draft_model", spec.draft_model, get_model))
    if sc.perf.source != "constant":  # a constant step time reads no engine profile
        names.append(("perf.engine", sc.perf.engine, get_engine_profile))
    return names


def check_catalog_names(sc: Scenario, label: str,
                        known: dict[tuple[str, str], str | None] | None = None) -> None:
    """Resolve the model, GPU, draft model and engine profile a family member (a sweep point,
    a plan candidate) names, as its run would (relative spec paths already absolute,
    :func:`absolute_spec_paths`), so that a typo is refused before any member runs (as
    ``servesim compare`` refuses it) instead of failing its member alone.

    Parameters
    ----------
    sc : Scenario
        The member's validated scenario.
    label : str
        Names the member in the message (``FILE: sweep point 1 (gpu=x)``).
    known : dict, optional
        ``(key, value) -> reason or None`` of names already looked up (a grid names the same
        few values at many points); updated.

    Raises
    ------
    ScenarioError
        ``LABEL: KEY: the lookup's message`` for the first name that does not resolve.
    """
    known = {} if known is None else known
    for key, value, lookup in _catalog_names(sc):
        if (key, value) not in known:
            try:
                lookup(value)
                known[(key, value)] = None
            except ValueError as e:
                known[(key, value)] = str(e)
        why = known[(key, value)]
        if why is not None:
            raise ScenarioError(f"{label}: {key}: {why}")


class Workloads:
    """The request lists of a family, each loaded once per distinct (workload, seed, folder).

    :meth:`add` returns the id (``w0``, ``w1``, ... in order of first appearance) under which
    :attr:`lists` holds the requests; workers find them in ``shared["workloads"][id]``.
    """

    def __init__(self) -> None:
        #: id -> request list
        self.lists: dict[str, list[RequestSpec]] = {}
        self._ids: dict[str, str] = {}

    def add(self, workload: WorkloadConfig | Mapping[str, Any], seed: int,
            base_dir: Path | None = None) -> str:
        """The id of the request list of ``workload`` with ``seed`` (loaded on first use).

        Parameters
        ----------
        workload : WorkloadConfig or mapping
            A scenario's ``workload`` section.
        seed : int
            The scenario seed (synthetic arrivals and assigned labels depend on it).
        base_dir : Path, optional
            Folder a relative trace path resolves against.

        Raises
        ------
        ValueError
            From the workload loader (missing trace, bad trace rows).
        """
        cfg = workload if isinstance(workload, WorkloadConfig) else \
            WorkloadConfig.model_validate(dict(workload))
        key = json.dumps({"w": cfg.model_dump(mode="json"), "seed": int(seed),
                          "base": None if base_dir is None else str(base_dir)}, sort_keys=True)
        if key not in self._ids:
            wid = f"w{len(self._ids)}"
            self.lists[wid] = load_workload(cfg, int(seed), base_dir)
            self._ids[key] = wid
        return self._ids[key]

    def __len__(self) -> int:
        return len(self.lists)


def factory_id(setup_factory: Callable | None) -> str | None:
    """What identifies a test's ``setup_factory`` in cache keys (None without one)."""
    if setup_factory is None:
        return None
    return getattr(setup_factory, "cache_id", None) or \
        f"{getattr(setup_factory, '__module__', '')}.{getattr(setup_factory, '__qualname__', '')}"


def _warnings_of(result: Any):
    """The warnings a worker recorded (:mod:`simulator.experiments.warned`) with a result."""
    return result.get("warnings") if isinstance(result, Mapping) else None


def _store_result(key: str, result: Any) -> Iterable[tuple[str, Any]]:
    return [(key, result)]


def _family_note(what: str, hits: int, cache: ResultCache | None):
    """The note of a stopped family: ``3 of 8 sweep points finished (2 more from the cache);
    the finished ones are cached in DIR: a rerun uses them``."""
    def note(done: int, total: int) -> str:
        text = f"{done} of {total} {what} finished"
        if hits:
            text += f" ({hits} more from the cache)"
        if cache is not None and cache.folder is not None and done:
            text += f"; the finished ones are cached in {cache.folder}: a rerun uses them"
        return text
    return note


def run_family(worker: Callable[[Any, Mapping[str, Any]], Any], tasks: Sequence[Mapping],
               *, shared: Mapping[str, Any] | None = None, cache: ResultCache | None = None,
               cache_entries: CacheEntries | None = None, backend: str = "local",
               jobs: int = 1, address: str | None = None,
               progress: Progress | None = None, what: str = "tasks",
               stop_note: Callable[[int, int], str] | None = None
               ) -> tuple[dict[str, Any], set[str]]:
    """Run ``worker(task, shared)`` once per distinct ``task["key"]`` the cache does not hold.

    Parameters
    ----------
    worker : callable
        A module-level function (picklable by reference for the process pool and Ray).
    tasks : sequence of mapping
        Picklable task descriptions, each with a ``"key"`` (tasks sharing a key run once).
    shared : mapping, optional
        Read-only inputs of every task (e.g. ``{"workloads": Workloads().lists}``).
    cache : ResultCache, optional
        Looked up before running (a hit is returned as it is stored); new results are
        stored through ``cache_entries``. The ``"warnings"`` a worker recorded with a
        result (:func:`simulator.experiments.warned.recording`), fresh or cached, are shown
        through :func:`warnings.warn`, each distinct one once per family.
    cache_entries : callable, optional
        ``cache_entries(key, result)`` yields the ``(key, value)`` pairs to store for a new
        result (default: the result under its task key). Return nothing to skip a result
        (e.g. a failed point).
    backend, jobs, address, progress
        See :func:`simulator.experiments.executor.run_tasks`; ``progress(done, total)``
        counts the tasks that run (not the cache hits).
    what : str
        What the tasks are, in plural (``sweep points``), for the note a stopped family's
        exception carries (:func:`~simulator.experiments.executor.add_note`): ``3 of 8
        sweep points finished (2 more from the cache); the finished ones are cached: a
        rerun uses them`` (with a cache; without one the note says how many finished).
    stop_note : callable, optional
        ``stop_note(done, total)`` replaces that note (e.g. one that counts what a stopped
        family keeps on disk).

    Returns
    -------
    (dict, set of str)
        ``{task key: result}`` for every task (a cache hit as it was stored) and the keys of
        the tasks that ran (the others were cache hits).

    Raises
    ------
    ValueError
        From :func:`~simulator.experiments.executor.run_tasks` (unknown backend, ``jobs < 1``,
        Ray missing); a worker's own exceptions propagate (workers that must not stop a
        family catch them and return an error result).
    """
    results: dict[str, Any] = {}
    todo: list[Mapping] = []
    queued: set[str] = set()
    shown: set = set()  # each distinct warning once per family
    for t in tasks:
        key = t["key"]
        if key in results or key in queued:
            continue
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            results[key] = hit
            reemit(_warnings_of(hit), shown)  # what the run that made it warned
        else:
            todo.append(t)
            queued.add(key)
    store = cache_entries or _store_result

    def keep(i: int, r: Any) -> None:
        # stored as each task finishes: an interrupted family keeps its finished tasks
        if cache is not None:
            for k, v in store(todo[i]["key"], r):
                cache.put(k, v)
        results[todo[i]["key"]] = r
        reemit(_warnings_of(r), shown)

    run_tasks(worker, todo, shared=shared, backend=backend, jobs=jobs, address=address,
              progress=progress, on_result=keep,
              stop_note=stop_note or _family_note(what, len(results), cache))
    return results, queued
