"""Field-path grids: expand a base scenario over lists of values, flatten nested results.

A *field path* names one scenario field with dots, as ``--set`` does: ``hardware.gpu``,
``cluster.tensor_parallel_size``, ``scheduler.enable_chunked_prefill``. A value may be any
YAML value; a mapping (or ``null``) replaces the whole sub-tree, so
``speculative: [null, {method: draft_model, ...}]`` switches speculative decoding off and on.

A grid is counted before it is expanded (:func:`grid_size`, the product of the list lengths
times the explicit points, in exact integer arithmetic) and never expands past
:data:`MAX_GRID_POINTS` configurations: the ceiling of a sweep's ``max_points``, a plan's
``max_candidates`` and ``servesim compare --max-variants``.
"""
from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

from simulator.base.input_limits import short_repr
from simulator.scenario.overrides import list_index

__all__ = [
    "MAX_GRID_POINTS",
    "config_label",
    "expand_grid",
    "flatten_inputs",
    "flatten_summary",
    "get_path",
    "grid_size",
    "set_path",
]

#: the most configurations a grid may expand to (sweep points, plan candidates, compare
#: variants): each costs ~30 KB while the family runs (its resolved scenario, its task, its
#: summary row), so 50,000 stay near 1.5 GB, and at a second a simulation take 14 hours
MAX_GRID_POINTS = 50_000


def set_path(raw: dict, path: str, value: Any) -> dict:
    """Set ``raw[a][b][c] = value`` for ``path = "a.b.c"`` in place and return ``raw``.

    Intermediate sections that are missing or ``None`` are created as empty mappings; a
    component that follows a list section indexes it (``kv_cache.offload.tiers.0.size_gib``).

    Parameters
    ----------
    raw : dict
        A raw (not yet validated) scenario mapping.
    path : str
        Dotted field path.
    value : any
        The value (deep-copied, so later edits of ``raw`` never alias the grid's lists).

    Raises
    ------
    ValueError
        If the path is empty or an intermediate key holds a non-mapping value.
    """
    parts = path.split(".")
    if not path or any(not p for p in parts):
        raise ValueError(f"field path {path!r}: empty component")
    d: Any = raw
    for i, p in enumerate(parts[:-1]):
        nxt = _list_item(d, p, path, parts, i) if isinstance(d, list) else d.get(p)
        if nxt is None:
            nxt = {}
            d[int(p) if isinstance(d, list) else p] = nxt
        elif not isinstance(nxt, dict | list):
            where = ".".join(parts[: i + 1])
            raise ValueError(f"field path {path!r}: '{where}' is not a section")
        d = nxt
    last = parts[-1]
    if isinstance(d, list):
        _list_item(d, last, path, parts, len(parts) - 1)
        d[int(last)] = copy.deepcopy(value)
    else:
        d[last] = copy.deepcopy(value)
    return raw


def _list_item(seq: list, part: str, path: str, parts: list[str], i: int) -> Any:
    """``seq[int(part)]`` for a path component that indexes a list section (``tiers.0``)."""
    k = list_index(seq, part)
    if k is None:
        where = ".".join(parts[:i])
        raise ValueError(f"field path {path!r}: '{part}' is not an index of '{where}', a "
                         f"list of {len(seq)} (valid: 0..{len(seq) - 1})")
    return seq[k]


def get_path(raw: Mapping, path: str, default: Any = None) -> Any:
    """The value at dotted ``path`` in ``raw`` (``default`` when any component is missing)."""
    d: Any = raw
    for p in path.split("."):
        k = list_index(d, p) if isinstance(d, list) else None
        if k is not None:
            d = d[k]
            continue
        if not isinstance(d, Mapping) or p not in d:
            return default
        d = d[p]
    return d


def grid_size(grid: Mapping[str, Any] | None, points: list | None = None) -> int:
    """How many configurations :func:`expand_grid` would return: ``max(1, len(points))`` x the
    product of the grid's list lengths (exact: Python integers; nothing is expanded).
    A value that is not a list counts as one."""
    n = max(1, len(points or []))
    for v in (grid or {}).values():
        n *= len(v) if isinstance(v, list) else 1
    return n


def expand_grid(grid: Mapping[str, list] | None,
                points: list[Mapping[str, Any]] | None = None, *,
                limit: int = MAX_GRID_POINTS) -> list[dict[str, Any]]:
    """All override sets of a grid: ``points`` (or one empty point) x the Cartesian product.

    Parameters
    ----------
    grid : mapping of str to list, optional
        Field path -> values. The product varies the *last* path fastest (like nested loops
        in the order the paths were written).
    points : list of mapping, optional
        Explicit override sets (field path -> value); each is combined with every product
        point (the product's values win on a shared path).

    Returns
    -------
    list of dict
        Field path -> value, one dict per configuration, in a deterministic order.

    limit : int
        The most configurations expanded (default :data:`MAX_GRID_POINTS`).

    Raises
    ------
    ValueError
        If a grid entry is not a non-empty list, or the grid holds more than ``limit``
        configurations (counted before anything is expanded).
    """
    grid = dict(grid or {})
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"grid '{k}': expected a non-empty list of values, got "
                             f"{short_repr(v)}")
    n = grid_size(grid, points)
    if n > limit:
        factors = " x ".join([f"{k.split('.')[-1]} {len(v)}" for k, v in grid.items()]
                             + ([f"points {len(points)}"] if points else []))
        raise ValueError(f"grid: {n:,} configurations ({factors}) > {limit:,}, the most one "
                         "grid expands to; narrow it")
    keys = list(grid)
    prod = [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]
    base_points = [dict(p) for p in points] if points else [{}]
    return [{**p, **g} for p in base_points for g in prod]


def _short(path: str) -> str:
    last = path.split(".")[-1]
    return {
        "tensor_parallel_size": "tp",
        "num_replicas": "replicas",
        "max_num_seqs": "seqs",
        "max_num_batched_tokens": "tokens",
        "enable_chunked_prefill": "chunked",
        "kv_cache_dtype": "kv",
        "gpu": "gpu",
        "router": "router",
        "enable_prefix_caching": "prefix_cache",
        "weight_dtype": "w",
    }.get(last, last)


def _fmt_value(v: Any) -> str:
    if v is None:
        return "off"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, Mapping):
        if "method" in v:
            k = v.get("num_speculative_tokens")
            return f"{v['method']}" + (f"x{k}" if k is not None else "")
        tiers = v.get("tiers")
        if isinstance(tiers, list) and all(isinstance(t, Mapping) for t in tiers):
            # KV offload tiers: their media and sizes (``cpu64G+disk1024G``)
            return "+".join(f"{t.get('medium')}{_tier_size(t)}" for t in tiers)
        s = json.dumps(v, sort_keys=True, separators=(",", ":"))
        return s if len(s) <= 24 else s[:21] + "..."
    return str(v)


def _tier_size(t: Mapping[str, Any]) -> str:
    """A tier's size in a label: ``64G`` (GiB) or bytes."""
    if t.get("size_gib") is not None:
        return f"{t['size_gib']:g}G" if isinstance(t["size_gib"], int | float) else "?"
    return f"{t.get('cpu_bytes_to_use')}B"


def config_label(overrides: Mapping[str, Any]) -> str:
    """A short human label of an override set: ``gpu=h100-sxm tp=1 seqs=128``.

    ``None``/``False`` show as ``off``, ``True`` as ``on``; a mapping with a ``method`` key
    (speculative decoding) shows its method and ``num_speculative_tokens``, one with ``tiers``
    (KV offload) its tiers' media and sizes.
    """
    if not overrides:
        return "base"
    return " ".join(f"{_short(k)}={_fmt_value(v)}" for k, v in overrides.items())


def _flatten(d: Any, prefix: str, sep: str, out: dict) -> None:
    if isinstance(d, Mapping):
        if not d and prefix:
            out[prefix] = None
        for k, v in d.items():
            _flatten(v, f"{prefix}{sep}{k}" if prefix else str(k), sep, out)
    elif isinstance(d, (list, tuple)):
        out[prefix] = json.dumps(d, sort_keys=True)
    else:
        if isinstance(d, float) and not math.isfinite(d):
            d = None
        out[prefix] = d


def flatten_inputs(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a resolved scenario to ``{"cluster.tensor_parallel_size": 1, ...}``.

    Lists become JSON strings; an empty or ``None`` section stays one column (``speculative``).
    """
    out: dict[str, Any] = {}
    _flatten(scenario, "", ".", out)
    return out


def flatten_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a run summary with ``_``: ``ttft_s.p99`` -> ``ttft_s_p99``,
    ``by_slice.chat.ttft_s.p99`` -> ``by_slice_chat_ttft_s_p99``."""
    out: dict[str, Any] = {}
    _flatten(summary, "", "_", out)
    return out
