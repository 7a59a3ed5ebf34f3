"""Checks and text shared by the sweep and plan schemas (:mod:`simulator.planner.spec`):
field paths, the size of a grid before it is expanded, overrides the planner would replace,
and the SLOs as text."""
from __future__ import annotations

from typing import Any

from ..report.format import ms

__all__ = ["check_count", "check_not_sized", "check_paths", "slo_text"]


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
