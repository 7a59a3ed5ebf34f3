"""The run report's "What bounds this run" section (from ``summary["bounds"]``,
:func:`simulator.metrics.bounds.run_bounds`; a run of several pools shows each pool's, from
``summary["pools"][name]["bounds"]``).

The verdict's rule is stated once, in :mod:`simulator.metrics.bounds`, and summarised in the
section's note (:data:`RULE_NOTE`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.metrics.bounds import (
    BOUND_LABELS,
    EXECUTION_PARTS,
    KV_FULL_USAGE,
    REQUEST_PARTS,
)
from simulator.report.format import adaptive, pct

__all__ = ["RULE_NOTE", "bounds_section"]

#: The verdict's rule, as the report states it under the shares.
RULE_NOTE = ("Rule: KV capacity binds when a request was preempted or rejected for KV "
             "capacity, or the KV cache was ever at least {full} full; otherwise the largest "
             "part of request time (the completed requests' summed E2E: queueing = arrival to "
             "first scheduled, tier transfers = waiting for KV loads from offload tiers, "
             "execution = the rest) decides, and when that is execution, the largest part of "
             "busy time (each step classified on its own shape and weighted by its duration)")


def _rows(b: Mapping[str, Any]) -> list[list[str]]:
    """The shares table: part, share, of what (request-time parts first; a part that was not
    measured is left out: tier transfers without offload, the busy-time split without
    operators)."""
    shares = b.get("shares") or {}
    rows = [[BOUND_LABELS[k], pct(shares.get(k), "{:.1f}%"), "request time"]
            for k in REQUEST_PARTS if shares.get(k) is not None]
    rows += [[BOUND_LABELS[k], pct(shares.get(k), "{:.1f}%"), "busy time"]
             for k in EXECUTION_PARTS if shares.get(k) is not None]
    kv = b.get("kv_capacity") or {}
    if kv.get("full_time_share") is not None:
        rows.append([f"KV cache at least {pct(kv.get('full_usage'), '{:.0f}%')} full",
                     pct(kv["full_time_share"], "{:.1f}%"), "busy time"])
    return rows


def _one(name: str | None, b: Mapping[str, Any]) -> dict[str, Any]:
    kv = b.get("kv_capacity") or {}
    return {
        "name": name,
        "verdict": b.get("verdict") or "",
        "rows": _rows(b),
        "kv": (f"{adaptive(kv.get('num_preemptions'))} preemption(s), "
               f"{adaptive(kv.get('kv_capacity_rejections'))} KV-capacity rejection(s), "
               f"KV use {pct(kv.get('mean_kv_cache_usage'), '{:.1f}%')} mean, "
               f"{pct(kv.get('max_kv_cache_usage'), '{:.1f}%')} peak"),
        "no_split": b.get("no_split_note"),
    }


def bounds_section(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The context of the "What bounds this run" section.

    Parameters
    ----------
    summary : mapping
        A run summary with ``bounds`` (:func:`simulator.metrics.bounds.run_bounds`), or a
        gateway run's with ``pools`` whose entries carry it.

    Returns
    -------
    dict or None
        ``runs``: one entry per verdict (the run's, or each pool's), each with ``name`` (the
        pool, None for a single run), ``verdict`` (the sentence), ``rows`` (part, share, of
        what), ``kv`` (preemptions, KV-capacity rejections, mean and peak KV use) and
        ``no_split`` (why there is no busy-time split, or None); ``rule`` (the note).
        None when the summary has no verdict (a summary written before it existed).
    """
    runs = []
    if summary.get("bounds"):
        runs.append(_one(None, summary["bounds"]))
    else:
        for name, pool in sorted((summary.get("pools") or {}).items()):
            if isinstance(pool, Mapping) and pool.get("bounds"):
                runs.append(_one(str(name), pool["bounds"]))
    if not runs:
        return None
    return {"runs": runs, "rule": RULE_NOTE.format(full=pct(KV_FULL_USAGE, "{:.0f}%"))}
