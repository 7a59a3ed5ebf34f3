"""What bounds a run: KV capacity, tier transfers, compute, memory, communication, engine
overhead or queueing, with the shares measured (the run summary's ``bounds`` section).

Two measurements, one rule.

**Request time.** Over the completed requests, their summed E2E latency (arrival to finish) is
split into

* *queueing*: arrival to first scheduled (the glossary's queue delay, summed);
* *tier transfers*: waiting for KV loads from the offload tiers (the request table's
  ``kv_load_wait_s``, summed; only a run with ``kv_cache.offload`` has it: ``None`` otherwise).
  A load starts once the request is scheduled, so it never overlaps its queueing;
* *execution*: the rest, from first scheduled to finish less the loads (prefill, decode, and a
  preempted request's wait to be resumed).

**Busy time.** :func:`~simulator.metrics.step_bottleneck.step_bottleneck` splits the replicas'
step time, each step classified on its own shape and weighted by its duration, into
*compute* (compute-bound operators), *memory* (memory-bound operators: HBM reads of weights
and KV), *communication* (TP all-reduce, EP all-to-all) and *engine overhead* (the engine's
CPU and sync time). Execution is split in these proportions. A model without operators
(``perf.source: constant``) has no such split: the four shares are ``None``.

**KV capacity** binds when a request was preempted, a request was rejected for KV capacity
(``reject_reasons["kv_capacity"]``) or the KV cache was ever at least :data:`KV_FULL_USAGE`
full (``max_kv_cache_usage``): the rule of the capacity plan's advice
(:mod:`simulator.planner.bottleneck`). Also measured: the share of busy time the cache was at
least that full (``kv_blocks_used / num_gpu_blocks`` of each step, weighted by its time).

**The verdict** (``bound``), first rule that applies:

1. ``kv_capacity`` when KV capacity binds (above): a full cache stops admissions, so the
   queueing and the preemptions it causes are its effect;
2. else the largest request-time part, ``queueing``, ``tier_transfers`` or execution; when it
   is execution, the largest busy-time part: ``compute``, ``memory``, ``communication`` or
   ``engine_overhead`` (``execution`` itself where the model has no operators to split it);
3. without completed requests, the largest busy-time part (``None`` when nothing was
   measured).

Ties go to the earlier name in :data:`BOUNDS`. ``bound_share`` is the verdict's share where it
was decided: of busy time for ``kv_capacity`` (the time the cache was full) and the four
execution parts, of request time for ``queueing``, ``tier_transfers`` and ``execution``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.columns import labels, nansum, numeric
from simulator.metrics.step_bottleneck import step_bottleneck
from simulator.metrics.step_stats import divide_by_column

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["BOUNDS", "BOUND_LABELS", "EXECUTION_PARTS", "KV_FULL_USAGE", "REQUEST_PARTS",
           "run_bounds"]

#: The verdicts, in tie-break order (``execution`` only for a model without operators).
BOUNDS = ("kv_capacity", "queueing", "tier_transfers", "memory", "compute", "communication",
          "engine_overhead", "execution")

#: How reports name each verdict.
BOUND_LABELS = {"kv_capacity": "KV capacity", "queueing": "queueing",
                "tier_transfers": "tier transfers", "memory": "memory", "compute": "compute",
                "communication": "communication", "engine_overhead": "engine overhead",
                "execution": "execution"}

#: KV-cache usage (fraction of ``num_gpu_blocks``) that counts as full: the capacity plan's
#: ``ADVICE_FULL_KV``.
KV_FULL_USAGE = 0.95

#: The parts of request time, in tie-break order.
REQUEST_PARTS = ("queueing", "tier_transfers", "execution")
#: The parts of busy time (execution), in tie-break order.
EXECUTION_PARTS = ("memory", "compute", "communication", "engine_overhead")
#: What each busy-time part is, in the report's sentence.
_PART_WORDS = {"memory": "memory-bound operators (HBM reads of weights and KV)",
               "compute": "compute-bound operators",
               "communication": "communication (TP all-reduce, EP all-to-all)",
               "engine_overhead": "the engine's CPU and sync time"}
#: The ``overhead_terms`` of :func:`step_bottleneck` that are communication.
_COMMUNICATION_TERMS = ("all_reduce", "ep_comm")


def _request_time(requests: pd.DataFrame) -> dict[str, Any]:
    """Summed E2E of the completed requests and its queueing / tier-transfer / execution
    shares (None without completed requests; ``tier_transfers`` None without the column)."""
    done = labels(requests, "status") == "completed"
    arrival = numeric(requests, "arrival_time_s")[done]
    e2e = float(np.sum(numeric(requests, "finish_time_s")[done] - arrival))
    queue = float(np.sum(numeric(requests, "first_scheduled_time_s")[done] - arrival))
    loads = (float(np.sum(numeric(requests, "kv_load_wait_s")[done]))
             if "kv_load_wait_s" in requests.columns else None)
    out: dict[str, Any] = {"num_requests": int(done.sum()), "request_time_s": e2e,
                           "queueing_s": queue, "tier_transfers_s": loads}
    if not e2e > 0:
        out.update(dict.fromkeys(REQUEST_PARTS))
        return out
    out["queueing"] = queue / e2e
    out["tier_transfers"] = None if loads is None else loads / e2e
    out["execution"] = 1.0 - out["queueing"] - (out["tier_transfers"] or 0.0)
    return out


def _execution_split(b: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Compute / memory / communication / engine-overhead shares of busy time from a
    :func:`step_bottleneck` result (all None without one): the overhead share is split into
    the all-reduce and all-to-all terms (communication) and the rest (engine overhead)."""
    if not b:
        return dict.fromkeys(EXECUTION_PARTS)
    overhead = float(b.get("overhead") or 0.0)
    terms = b.get("overhead_terms") or {}
    comm = min(overhead, sum(float(terms.get(k, 0.0)) for k in _COMMUNICATION_TERMS))
    return {"memory": float(b.get("memory_bound") or 0.0),
            "compute": float(b.get("compute_bound") or 0.0),
            "communication": comm, "engine_overhead": overhead - comm}


def _kv_full_time_share(steps: pd.DataFrame) -> float | None:
    """Share of busy time in steps whose KV usage (``kv_blocks_used / num_gpu_blocks``) is at
    least :data:`KV_FULL_USAGE` (None without steps or step time)."""
    if steps is None or len(steps) == 0 or "kv_blocks_used" not in steps.columns:
        return None
    usage = numeric(steps, "kv_blocks_used", copy=True)
    divide_by_column(usage, steps, "num_gpu_blocks")
    full = usage >= KV_FULL_USAGE  # NaN (no blocks) compares False
    del usage
    t = numeric(steps, "step_time_s", 0.0)
    busy = nansum(t)
    return nansum(t[full]) / busy if busy > 0 else None


def _kv_capacity(summary: Mapping[str, Any], steps: pd.DataFrame) -> dict[str, Any]:
    """The KV-capacity figures and whether KV capacity binds (the module's rule)."""
    preempt = int(summary.get("num_preemptions") or 0)
    rejects = int((summary.get("reject_reasons") or {}).get("kv_capacity", 0))
    peak = summary.get("max_kv_cache_usage")
    return {"binds": bool(preempt or rejects or (peak is not None and peak >= KV_FULL_USAGE)),
            "num_preemptions": preempt, "kv_capacity_rejections": rejects,
            "max_kv_cache_usage": peak, "mean_kv_cache_usage": summary.get("mean_kv_cache_usage"),
            "full_usage": KV_FULL_USAGE, "full_time_share": _kv_full_time_share(steps)}


def _largest(shares: Mapping[str, float | None], order) -> str | None:
    """The key of the largest non-None share (ties: the earlier in ``order``)."""
    have = [k for k in order if shares.get(k) is not None]
    return max(have, key=lambda k: (shares[k], -order.index(k))) if have else None


def _verdict(kv: dict, req: dict, exe: dict) -> tuple[str | None, float | None]:
    """``(bound, bound_share)`` by the module's rule."""
    if kv["binds"]:
        return "kv_capacity", kv["full_time_share"]
    top = _largest(req, REQUEST_PARTS)
    if top is not None and top != "execution":
        return top, req[top]
    part = _largest(exe, EXECUTION_PARTS)
    if part is not None:
        return part, exe[part]
    return ("execution", req["execution"]) if top == "execution" else (None, None)


def _pct(x: float | None) -> str:
    """A share in whole percent; ``<1%`` / ``>99%`` for a share that would round to 0 / 100
    without being it."""
    if x is None:
        return "n/a"
    if 0 < x < 0.005:
        return "<1%"
    if 0.995 <= x < 1:
        return ">99%"
    return f"{x:.0%}"


def _no_split_note(perf_model: str | None) -> str:
    """Why a run has no busy-time split."""
    if perf_model == "constant":
        return ("perf.source: constant has no operators, so no compute, memory, "
                "communication or engine-overhead split")
    return "no compute / memory split (no step time the model could classify)"


def _text(bound: str | None, kv: dict, req: dict, exe: dict,
          perf_model: str | None) -> tuple[str, str]:
    """The verdict sentence and the one line of the report (see :func:`run_bounds`)."""
    have_split = exe["memory"] is not None
    if bound is None:
        none = "Nothing measured: no completed request and no classified step time"
        return none, none
    if bound == "kv_capacity":
        why = (f"{kv['num_preemptions']} preemption(s), {kv['kv_capacity_rejections']} "
               f"KV-capacity rejection(s), peak KV use {_pct(kv['max_kv_cache_usage'])}, "
               f"at least {KV_FULL_USAGE:.0%} full for {_pct(kv['full_time_share'])} of "
               "busy time")
    elif bound == "queueing":
        why = f"{_pct(req['queueing'])} of request time waiting to be scheduled"
    elif bound == "tier_transfers":
        why = (f"{_pct(req['tier_transfers'])} of request time waiting for KV loads from the "
               "offload tiers")
    elif bound == "execution":
        why = f"{_pct(req['execution'])} of request time executing"
    elif req["execution"] is None:
        why = f"{_pct(exe[bound])} of busy time in {_PART_WORDS[bound]} (no completed request)"
    else:
        why = (f"{_pct(req['execution'])} of request time executing, {_pct(exe[bound])} of "
               f"busy time in {_PART_WORDS[bound]}")
    parts = []
    if req["execution"] is not None:
        parts.append("request time: " + ", ".join(
            f"{BOUND_LABELS[k]} {_pct(req[k])}" for k in REQUEST_PARTS if req[k] is not None))
    if have_split:
        parts.append("busy time: " + ", ".join(
            f"{BOUND_LABELS[k]} {_pct(exe[k])}"
            for k in sorted(EXECUTION_PARTS, key=lambda k: -round(exe[k], 9))))  # ties: order
    else:
        parts.append(_no_split_note(perf_model))
    verdict = f"Bound by {BOUND_LABELS[bound]}: {why}"
    return verdict, verdict + "; " + "; ".join(parts)


def run_bounds(summary: Mapping[str, Any], requests: pd.DataFrame, steps: pd.DataFrame,
               perf: Any, binned: tuple | None = None) -> dict[str, Any]:
    """What bounds a run, by the rule of this module's docstring.

    Parameters
    ----------
    summary : mapping
        The run summary (:func:`simulator.metrics.summary.summarize`): reads
        ``num_preemptions``, ``reject_reasons``, ``max_kv_cache_usage``,
        ``mean_kv_cache_usage`` and ``perf_model``.
    requests : pandas.DataFrame
        The request table (``status``, ``arrival_time_s``, ``first_scheduled_time_s``,
        ``finish_time_s``; ``kv_load_wait_s`` with offload tiers).
    steps : pandas.DataFrame or StepTable
        The step table (``step_time_s``, the batch-shape columns of
        :func:`~simulator.metrics.step_bottleneck.step_bottleneck`, ``kv_blocks_used``,
        ``num_gpu_blocks``).
    perf : object
        The run's performance model (``bottleneck_shares`` and ``op_times`` where it has
        operators; anything else gives no execution split).
    binned : tuple, optional
        :func:`~simulator.metrics.step_bottleneck.step_bins` of ``steps``, when computed
        already.

    Returns
    -------
    dict
        ``bound`` (one of :data:`BOUNDS`, or None when nothing was measured), ``bound_share``
        (fraction, see the module docstring), ``verdict`` (the bound and why, one sentence),
        ``text`` (one line: the verdict, then the request-time and busy-time shares),
        ``no_split_note`` (why there is no busy-time split; None when there is one); ``shares``: the request-time shares ``queueing``, ``tier_transfers``,
        ``execution`` (of summed E2E) and the busy-time shares ``memory``, ``compute``,
        ``communication``, ``engine_overhead`` (None where not measurable); ``request_time``:
        ``num_requests`` (completed), ``request_time_s``, ``queueing_s``,
        ``tier_transfers_s`` (seconds, summed); ``kv_capacity``: ``binds``,
        ``num_preemptions``, ``kv_capacity_rejections``, ``max_kv_cache_usage``,
        ``mean_kv_cache_usage``, ``full_usage`` (the threshold), ``full_time_share``;
        ``step_bottleneck``: the busy-time classification as
        :func:`~simulator.metrics.step_bottleneck.step_bottleneck` returns it (None without
        operators).
    """
    b = step_bottleneck(steps, perf, binned)
    req = _request_time(requests)
    exe = _execution_split(b)
    kv = _kv_capacity(summary, steps)
    bound, share = _verdict(kv, req, exe)
    shares = {k: req[k] for k in REQUEST_PARTS}
    shares.update(exe)
    verdict, text = _text(bound, kv, req, exe, summary.get("perf_model"))
    return {"bound": bound, "bound_share": share, "verdict": verdict, "text": text,
            "no_split_note": None if b else _no_split_note(summary.get("perf_model")),
            "shares": shares,
            "request_time": {k: req[k] for k in ("num_requests", "request_time_s", "queueing_s",
                                                 "tier_transfers_s")},
            "kv_capacity": kv, "step_bottleneck": b}

