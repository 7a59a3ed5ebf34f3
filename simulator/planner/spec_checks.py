"""Checks, text and command-line overrides shared by the sweep and plan schemas
(:mod:`simulator.planner.spec`): field paths, the size of a grid before it is expanded,
overrides the planner would replace, the SLOs as text, and ``--plan-set`` / ``--sweep-set``
applied to a spec file."""
from __future__ import annotations

import copy
from typing import Any

from simulator.report.format import ms
from simulator.scenario.config import Scenario
from simulator.scenario.overrides import (
    Override,
    apply_overrides,
    cli_bool,
    is_bool_field,
    override_annotation,
    parse_override,
)

__all__ = ["apply_spec_overrides", "check_count", "check_not_sized", "check_paths",
           "slo_text", "spec_overrides"]


def check_paths(d: dict[str, Any] | None, what: str) -> dict[str, Any] | None:
    """``d`` unchanged when every key is a dotted field path ``a.b.c``.

    Raises
    ------
    ValueError
        A key that is empty, not a string or has an empty component, naming ``what``.
    """
    if d is None:
        return d
    for k in d:
        if not isinstance(k, str) or not k or any(not p for p in k.split(".")):
            raise ValueError(f"{what}: field path {k!r} is not of the form a.b.c")
    return d


def check_count(grid: dict[str, list], points: list | None, limit: int, what: str,
                grid_key: str, points_key: str, limit_key: str) -> None:
    """Refuse an empty explicit list and a Cartesian product larger than ``limit`` (before it
    is expanded: a typo'd range would otherwise build millions of configurations silently).

    Raises
    ------
    ValueError
        One line naming the keys, the count and its factors.
    """
    if points is not None and not points:
        raise ValueError(f"{points_key}: an empty list; give at least one override set or "
                         f"leave '{points_key}' out")
    n = max(1, len(points or []))
    for vals in grid.values():
        n *= len(vals)
    if n > limit:
        factors = " x ".join([f"{k.split('.')[-1]} {len(v)}" for k, v in grid.items()]
                             + ([f"{points_key} {len(points)}"] if points else []))
        raise ValueError(f"{grid_key} x {points_key}: {n:,} {what} ({factors}) > "
                         f"{limit_key} {limit:,}; narrow the {grid_key} or raise {limit_key}")


def slo_text(slo) -> str:
    """Per-request SLO bounds as text: ``TTFT <= 500 ms, TPOT <= 50 ms`` (``none`` when no
    bound is set); ``slo``: a mapping or model with ``ttft_s``, ``tpot_s``, ``e2e_s`` (s)."""
    d = slo.model_dump() if hasattr(slo, "model_dump") else dict(slo or {})
    parts = [f"{label} <= {ms(d[k], '{:.4g} ms')}" for k, label in (
        ("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "end-to-end latency"))
        if d.get(k) is not None]
    return ", ".join(parts) or "none"


def check_not_sized(v: dict[str, Any], what: str) -> dict[str, Any]:
    """Refuse ``cluster.num_replicas`` in a plan's overrides: the planner sizes replicas
    (a value there would be replaced silently)."""
    for k, val in v.items():
        if k == "cluster.num_replicas" or (k == "cluster" and isinstance(val, dict)
                                           and "num_replicas" in val):
            raise ValueError(f"{what}: cluster.num_replicas is sized by the planner (from "
                             "the capacity, the target and the headroom), not set")
    return v


def spec_overrides(items: list[str] | None, flag: str) -> list[Override]:
    """``items`` as overrides that name ``flag`` in errors (an item that already knows its
    flag, such as ``--target-rate``'s, keeps it)."""
    return [i if isinstance(i, Override) else Override(i, f"{flag} {i}") for i in items or []]


#: mappings of a spec whose keys are dotted field paths (``--plan-set set.a.b=v`` sets the
#: key ``a.b`` of ``set``); a path of two parts names a mapping inside a section
_PATH_MAPPINGS = (("set",), ("search_space",), ("grid",), ("prices",), ("baseline", "set"),
                  ("last_known_good", "set"))


def apply_spec_overrides(raw: dict, overrides: list[str] | None, schema) -> dict:
    """``--plan-set a.b=v`` on the spec itself; ``set.x.y``, ``search_space.x.y``,
    ``baseline.set.x.y`` (and the other :data:`_PATH_MAPPINGS`) address the dotted field
    path ``x.y`` inside those mappings, so one key changes, not a whole section. Booleans
    accept the command-line spellings of :func:`simulator.scenario.overrides.cli_bool` (scenario paths
    of a ``set`` against the scenario's field)."""
    out = copy.deepcopy(raw)
    for item in overrides or []:
        path, value = parse_override(item)
        where = next((m for m in _PATH_MAPPINGS if tuple(path[:len(m)]) == m
                      and len(path) > len(m)), None)
        if where is None:
            out = apply_overrides(out, [item], schema)
            continue
        field = path[len(where):]
        ann = override_annotation(Scenario, field) if where[-1] == "set" else None
        if ann is not None and is_bool_field(ann):
            value = cli_bool(value, path, item.origin, nullable=ann is not bool)
        d = out
        for part in where:
            if not isinstance(d.get(part), dict):
                d[part] = {}
            d = d[part]
        d[".".join(field)] = value
    return out
