"""Summary statistics of a request list (``servesim trace`` and reports)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from simulator.request import RequestSpec


def _length_stats(x: np.ndarray) -> dict:
    p50, p90, p99 = np.percentile(x, [50, 90, 99])  # linear interpolation
    return {"mean": float(x.mean()), "p50": float(p50), "p90": float(p90),
            "p99": float(p99), "max": int(x.max()), "min": int(x.min())}


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
        p99 with linear interpolation, max, min, in tokens); ``slices``, ``tenants``,
        ``priorities`` (request counts by label); ``with_cancel_after``, ``with_prefix_ids``,
        ``with_max_tokens`` (request counts). An empty list gives ``count`` 0 and ``None``
        statistics.
    """
    n = len(reqs)
    if n == 0:
        return {"count": 0, "duration_s": None, "mean_rate_rps": None, "interarrival_cv": None,
                "peak_requests_in_1s": None, "peak_requests_any_1s": None,
                "prompt_tokens": None, "output_tokens": None, "slices": {}, "tenants": {},
                "priorities": {}, "with_cancel_after": 0, "with_prefix_ids": 0,
                "with_max_tokens": 0}
    t = np.sort(np.fromiter((r.arrival_time_s for r in reqs), dtype=np.float64, count=n))
    prompt = np.fromiter((r.num_prompt_tokens for r in reqs), dtype=np.int64, count=n)
    output = np.fromiter((r.num_output_tokens for r in reqs), dtype=np.int64, count=n)
    duration = float(t[-1] - t[0])
    gaps = np.diff(t)
    cv = None
    if gaps.size >= 1 and gaps.mean() > 0:
        cv = float(gaps.std() / gaps.mean())
    bins = np.floor(t).astype(np.int64)
    _, per_second = np.unique(bins, return_counts=True)
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
        "slices": dict(sorted(Counter(r.slice for r in reqs).items())),
        "tenants": dict(sorted(Counter(r.tenant for r in reqs).items())),
        "priorities": dict(sorted(Counter(r.priority for r in reqs).items())),
        "with_cancel_after": sum(r.cancel_after_s is not None for r in reqs),
        "with_prefix_ids": sum(r.prefix_hash_ids is not None for r in reqs),
        "with_max_tokens": sum(r.max_tokens is not None for r in reqs),
    }
