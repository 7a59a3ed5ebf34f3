"""Summary statistics of a request list (``servesim trace`` and reports)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from simulator.base.quantiles import weighted_percentiles
from simulator.base.request import RequestSpec
from simulator.workload.columns import TraceColumns


def _length_stats(x: np.ndarray) -> dict:
    """Mean, p50 / p90 / p99, max and min of token counts ``x`` (tokens). The percentiles are
    servesim's one definition (:func:`~simulator.base.quantiles.weighted_percentiles`,
    the inverse empirical CDF, as ``servesim run``'s summary): observed counts, so ints."""
    p50, p90, p99 = weighted_percentiles(x, None, (50.0, 90.0, 99.0))
    return {"mean": float(x.mean()), "p50": int(p50), "p90": int(p90),
            "p99": int(p99), "max": int(x.max()), "min": int(x.min())}


def describe_workload(reqs: Sequence[RequestSpec]) -> dict:
    """Summarise a workload.

    Parameters
    ----------
    reqs : sequence of RequestSpec
        In any order (times are sorted here).

    Returns
    -------
    dict
        ``count``; ``duration_s`` (last - first arrival, s); ``mean_rate_rps``
        (``(count - 1) / duration_s`` = 1 / mean inter-arrival gap, req/s; ``None`` when the
        duration is 0); ``interarrival_cv`` (population std / mean of the gaps; ``None`` with
        fewer than 2 gaps or a zero mean); ``peak_requests_in_1s`` (most arrivals in one
        calendar second ``[k, k+1)`` of the run clock); ``peak_requests_any_1s`` (most arrivals
        in any window ``[t, t+1)``); ``prompt_tokens`` and ``output_tokens`` (mean, p50, p90,
        p99 by the inverse empirical CDF as every servesim percentile, max, min, in tokens); ``slices``, ``tenants``,
        ``priorities`` (request counts by label); ``with_cancel_after``, ``with_prefix_ids``,
        ``with_max_tokens`` (request counts). An empty list gives ``count`` 0 and ``None``
        statistics. A workload with session turns also has ``sessions``
        (:func:`session_stats`).
    """
    n = len(reqs)
    if n == 0:
        return _empty()
    out = _describe(
        np.fromiter((r.arrival_time_s for r in reqs), dtype=np.float64, count=n),
        np.fromiter((r.num_prompt_tokens for r in reqs), dtype=np.int64, count=n),
        np.fromiter((r.num_output_tokens for r in reqs), dtype=np.int64, count=n),
        slices=Counter(r.slice for r in reqs), tenants=Counter(r.tenant for r in reqs),
        priorities=Counter(r.priority for r in reqs),
        with_cancel_after=sum(r.cancel_after_s is not None for r in reqs),
        with_prefix_ids=sum(r.prefix_hash_ids is not None for r in reqs),
        with_max_tokens=sum(r.max_tokens is not None for r in reqs))
    if any(r.session_id is not None for r in reqs):
        out["sessions"] = session_stats(
            np.fromiter((-1 if r.session_id is None else r.session_id for r in reqs),
                        dtype=np.int64, count=n),
            np.fromiter((r.turn_index for r in reqs), dtype=np.int64, count=n),
            np.fromiter((r.num_prompt_tokens for r in reqs), dtype=np.int64, count=n),
            np.fromiter((r.num_output_tokens for r in reqs), dtype=np.int64, count=n),
            np.fromiter((r.think_time_s for r in reqs), dtype=np.float64, count=n))
    return out


def describe_columns(cols: TraceColumns) -> dict:
    """:func:`describe_workload` of a parsed trace, from its columns (no per-row objects).

    Parameters
    ----------
    cols : TraceColumns
        Rows in any order. Missing label columns count as ``"default"`` / priority 0, as
        :meth:`TraceColumns.to_specs` fills them; a NaN ``cancel_after_s``, a ``max_tokens``
        of 0 and a ``None`` prefix are "not given".

    Returns
    -------
    dict
        The same keys and values as ``describe_workload(cols.to_specs())``.
    """
    n = len(cols)
    if n == 0:
        return _empty()
    if cols.priority is not None:
        keys, counts = np.unique(cols.priority, return_counts=True)
        prio = Counter(dict(zip(keys.tolist(), counts.tolist())))
    else:
        prio = Counter({0: n})
    out = _describe(
        np.asarray(cols.arrival_s, dtype=np.float64), cols.prompt, cols.output,
        slices=Counter(cols.slice) if cols.slice else Counter({"default": n}),
        tenants=Counter(cols.tenant) if cols.tenant else Counter({"default": n}),
        priorities=prio,
        with_cancel_after=(0 if cols.cancel_after_s is None
                           else int(np.count_nonzero(~np.isnan(cols.cancel_after_s)))),
        with_prefix_ids=(0 if not cols.prefix_hash_ids
                         else sum(p is not None for p in cols.prefix_hash_ids)),
        with_max_tokens=(0 if cols.max_tokens is None
                         else int(np.count_nonzero(cols.max_tokens > 0))))
    if cols.session_id is not None and (cols.session_id >= 0).any():
        out["sessions"] = session_stats(cols.session_id, cols.turn_index, cols.prompt,
                                        cols.output, np.nan_to_num(cols.think_time_s, nan=0.0))
    return out


def session_stats(session_id: np.ndarray, turn_index: np.ndarray, prompt: np.ndarray,
                  output: np.ndarray, think_time_s: np.ndarray) -> dict:
    """Statistics of the session turns among requests (``session_id`` -1: a request alone).

    Parameters
    ----------
    session_id, turn_index, prompt, output : numpy.ndarray of int64
        Per request, in any order (tokens for the lengths).
    think_time_s : numpy.ndarray of float64
        Per request, seconds (0 where none is given: what a closed-loop run uses).

    Returns
    -------
    dict
        ``count`` (sessions), ``turns`` (session turns); ``turns_per_session`` (mean, p50,
        max); ``think_time_s`` (mean, p50, p90, max over turns after the first, s; ``None``
        without such turns); ``history_token_share``: the share of the session turns'
        prompt tokens that repeat the turn before (``min(prompt + output of turn k-1,
        prompt of turn k)`` tokens for each turn whose previous turn is present).
    """
    m = session_id >= 0
    sid, k = session_id[m], turn_index[m]
    p, o, d = prompt[m].astype(np.int64), output[m].astype(np.int64), think_time_s[m]
    order = np.lexsort((k, sid))
    sid, k, p, o, d = sid[order], k[order], p[order], o[order], d[order]
    _, per_session = np.unique(sid, return_counts=True)
    follows = np.zeros(sid.size, dtype=bool)
    follows[1:] = (sid[1:] == sid[:-1]) & (k[1:] == k[:-1] + 1)
    history = np.minimum((p + o)[:-1], p[1:])[follows[1:]].sum() if sid.size > 1 else 0
    later = d[k >= 1]
    think = None
    if later.size:
        p50, p90 = weighted_percentiles(later, None, (50.0, 90.0))
        think = {"mean": float(later.mean()), "p50": float(p50), "p90": float(p90),
                 "max": float(later.max())}
    return {"count": int(per_session.size), "turns": int(sid.size),
            "turns_per_session": {"mean": float(per_session.mean()),
                                  "p50": int(weighted_percentiles(per_session, None,
                                                                  (50.0,))[0]),
                                  "max": int(per_session.max())},
            "think_time_s": think,
            "history_token_share": float(history) / float(p.sum())}


def _empty() -> dict:
    return {"count": 0, "duration_s": None, "mean_rate_rps": None, "interarrival_cv": None,
            "peak_requests_in_1s": None, "peak_requests_any_1s": None,
            "prompt_tokens": None, "output_tokens": None, "slices": {}, "tenants": {},
            "priorities": {}, "with_cancel_after": 0, "with_prefix_ids": 0,
            "with_max_tokens": 0}


def _describe(arrival_s: np.ndarray, prompt: np.ndarray, output: np.ndarray, *,
              slices: Counter, tenants: Counter, priorities: Counter, with_cancel_after: int,
              with_prefix_ids: int, with_max_tokens: int) -> dict:
    """The statistics of :func:`describe_workload` from arrays (``arrival_s`` unsorted)."""
    n = len(arrival_s)
    t = np.sort(arrival_s)
    duration = float(t[-1] - t[0])
    gaps = np.diff(t)
    cv = None
    if gaps.size >= 1 and gaps.mean() > 0:
        cv = float(gaps.std() / gaps.mean())
    # whole seconds as floats: an int64 cast would overflow past 2**63 s (a clock the run
    # refuses, but a trace may hold)
    _, per_second = np.unique(np.floor(t), return_counts=True)
    sliding = np.searchsorted(t, t + 1.0, side="left") - np.arange(n)
    return {
        "count": n,
        "duration_s": duration,
        "mean_rate_rps": (n - 1) / duration if duration > 0 else None,
        "interarrival_cv": cv,
        "peak_requests_in_1s": int(per_second.max()),
        "peak_requests_any_1s": int(sliding.max()),
        "prompt_tokens": _length_stats(prompt),
        "output_tokens": _length_stats(output),
        "slices": dict(sorted(slices.items())),
        "tenants": dict(sorted(tenants.items())),
        "priorities": dict(sorted(priorities.items())),
        "with_cancel_after": int(with_cancel_after),
        "with_prefix_ids": int(with_prefix_ids),
        "with_max_tokens": int(with_max_tokens),
    }
