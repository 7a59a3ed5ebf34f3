"""The base scenario of a sweep or capacity plan: where it is read from, and the refusal of a
base that declares ``pools:`` (a topology scenario), shared by :mod:`simulator.planner.sweep`
and :mod:`simulator.planner.plan` (re-exported by :mod:`simulator.planner.spec`)."""
from __future__ import annotations

import copy
from pathlib import Path

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.experiments.grid import get_path
from simulator.experiments.runner import absolute_spec_paths
from simulator.perf import get_engine_profile
from simulator.scenario.config import ScenarioError
from simulator.scenario.yaml_files import read_scenario_yaml

__all__ = ["PlanError", "check_names_up_front", "refuse_pools_base", "resolve_base",
           "resolve_base_source"]


class PlanError(ScenarioError):
    """A sweep or plan file is invalid (message: one readable line)."""


def resolve_base(base: str | dict, spec_dir: Path | None) -> tuple[dict, Path]:
    """The base scenario as a raw dict and the folder its relative paths resolve against.

    A path is tried relative to the spec file's folder first, then as the scenario loader
    does (working directory, ``scenarios/``). An inline mapping resolves against the spec's
    folder.
    """
    raw, folder, _source = resolve_base_source(base, spec_dir)
    return raw, folder


def resolve_base_source(base: str | dict, spec_dir: Path | None) -> tuple[dict, Path, str]:
    """:func:`resolve_base` and the base's name for messages: the resolved file path, or
    ``"base (inline)"`` for an inline mapping.

    Raises
    ------
    PlanError
        The base file is missing, unreadable or not a YAML mapping.
    """
    if isinstance(base, dict):
        return copy.deepcopy(base), (spec_dir or Path.cwd()), "base (inline)"
    p = Path(base)
    if not p.is_absolute() and spec_dir is not None and (spec_dir / p).is_file():
        p = spec_dir / p
    try:
        raw = read_scenario_yaml(p)
    except ScenarioError as e:
        raise PlanError(f"base: {e}") from None
    source = str(raw.pop("__file__", p))
    return raw, Path(source).parent, source


#: what each family refusing a ``pools:`` base says to use instead
_POOLS_INSTEAD = {
    "capacity plan": "a capacity plan sizes one replica set per candidate; size pools with a "
                     "topology plan (a plan file with topology_search:, docs/howto/topologies.md) "
                     "or run the scenario with servesim run",
    "sweep": "a sweep point runs one replica set; run the scenario with servesim run (vary a "
             "pool with --set pools.N.KEY=VALUE), or size pools with a topology plan (a plan "
             "file with topology_search:)",
}


def refuse_pools_base(base_raw: dict, source: str, family: str,
                      varied: dict[str, list[str]] | None = None) -> None:
    """Refuse a base scenario that declares ``pools:`` (a topology scenario, run through the
    gateway) before any point of a sweep or capacity plan is simulated, as ``servesim
    compare`` does: every point would otherwise fail alone with the same error.

    Parameters
    ----------
    base_raw : dict
        The base scenario as plain data, after the file's ``set`` and the ``--set`` overrides.
    source : str
        Names the base in the message (its file, from :func:`resolve_base_source`).
    family : {"capacity plan", "sweep"}
        Who refuses (picks the advice in the message).
    varied : dict, optional
        ``{where: [field path, ...]}``: the paths the points set (``grid``, ``search_space``,
        ...); one under ``pools`` is refused the same way.

    Raises
    ------
    PlanError
        One line naming the base file, what declares the pools and what to use instead.
    """
    instead = _POOLS_INSTEAD[family]
    if base_raw.get("pools") is not None:
        name = base_raw.get("name")
        who = f"scenario '{name}'" if name else "the base scenario"
        raise PlanError(f"{source}: {who} declares pools: (a topology scenario, run through "
                        f"the gateway): {instead}")
    for where, paths in (varied or {}).items():
        for path in paths:
            if path == "pools" or str(path).startswith("pools."):
                raise PlanError(f"{source}: {where}: '{path}' sets pools: (a topology "
                                f"scenario, run through the gateway): {instead}")


#: scenario keys naming a catalog entry (or a spec / config / profile path) that every
#: point needs, and their lookups
_NAMED_KEYS = {"model": get_model, "hardware.gpu": get_gpu, "speculative.draft_model": get_model,
               "perf.engine": get_engine_profile}


def check_names_up_front(base_raw: dict, folders, family: str, varied) -> None:
    """Resolve the model, GPU, draft model and engine profile of the base scenario that every
    point of a sweep or plan inherits (the keys no point sets, nor a section above them)
    before any point runs: an unknown name would
    otherwise fail each point alone, and the command end with exit 0 and a table of failures.
    Keys the points set are checked per point
    (:func:`simulator.experiments.runner.check_catalog_names`).

    Parameters
    ----------
    base_raw : dict
        The base scenario as plain data, after the file's ``set`` and the ``--set`` overrides.
    folders : sequence of Path or None
        Where relative model / GPU spec paths resolve, in order (the base's folder, the spec
        file's), as the points resolve them (``absolute_spec_paths``).
    family : str
        ``sweep`` or ``capacity plan`` (the message names it).
    varied : collection of str
        The field paths the points set (grid axes, listed points, candidates).

    Raises
    ------
    PlanError
        ``<family>: <key> <value> (of the base scenario): <the lookup's message>``.
    """
    resolved = {"model": base_raw.get("model"),
                "hardware": dict(base_raw.get("hardware") or {})}
    absolute_spec_paths(resolved, folders)  # as the points resolve their paths
    constant = get_path(base_raw, "perf.source") == "constant"  # reads no engine profile
    for key, lookup in _NAMED_KEYS.items():
        value = get_path(base_raw, key)
        if (value is None or any(key == v or key.startswith(f"{v}.") for v in varied)
                or (key == "perf.engine" and constant)):
            continue
        try:
            lookup(str(get_path(resolved, key, value)))
        except ValueError as e:
            raise PlanError(f"{family}: {key} {value!r} (of the base scenario): {e}") from None
