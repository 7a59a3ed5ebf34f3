"""Per-request latencies by the glossary in ``DESIGN.md`` §4 (TTFT, TPOT, E2E, queue delay),
whether a request met its SLOs, and the statistics of a latency sample (mean, p50 / p90 / p99
by the one percentile definition, :func:`simulator.base.quantiles.weighted_percentiles`, max,
count). :func:`simulator.metrics.summary.summarize` reports them for a run; the validation
and fidelity comparisons compute them the same way for recorded runs.

Weighted means and sums of products are ``numpy.sum(a * b)`` (numpy's pairwise summation), not
``numpy.dot``: a BLAS dot product of more than a few thousand values is split over the
machine's threads, so its last bits depend on the core count (and its idle threads spin after
it); the summary must be the same bits on every machine.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.base.quantiles import as_weights, kept_samples, weighted_percentiles
from simulator.metrics.columns import labels, numeric

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = ["STAT_KEYS", "latency_stats", "output_tokens", "per_request_latencies", "slo_mask"]

#: Keys of every statistics dictionary returned by :func:`latency_stats`.
STAT_KEYS: tuple[str, ...] = ("mean", "p50", "p90", "p99", "max", "count")

_PERCENTILES = (50.0, 90.0, 99.0)


# --------------------------------------------------------------------------------------------
# percentiles and statistics
# --------------------------------------------------------------------------------------------
def latency_stats(values, weights=None) -> dict[str, float | int | None]:
    """Mean, percentiles, maximum and count of a sample of latencies.

    Parameters
    ----------
    values : array_like of float, shape (n,)
        Latencies in seconds. NaN values are ignored.
    weights : array_like of float, shape (n,), optional
        Multiplicity of each value (e.g. the engine's aggregated ITL gaps). ``None`` means one.

    Returns
    -------
    dict
        ``{"mean", "p50", "p90", "p99", "max"}`` in seconds (Python floats) and ``"count"``
        (the number of samples, the sum of the weights). Percentiles follow
        :func:`weighted_percentiles`. With no samples every value is ``None`` except
        ``count``, which is 0.
    """
    v = np.asarray(values, dtype=float).ravel()
    w = np.ones_like(v) if weights is None else as_weights(weights)
    if w.shape != v.shape:
        raise ValueError(f"values and weights differ in shape: {v.shape} vs {w.shape}")
    v, w = kept_samples(v, w)
    if v.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None, "count": 0}
    total = float(w.sum())
    mean = float(np.sum(v * w.astype(float, copy=False)) / total)  # pairwise sum (module doc)
    p50, p90, p99 = weighted_percentiles(v, w, _PERCENTILES)
    count: float | int = int(total) if float(total).is_integer() else total
    return {
        "mean": mean,
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(v.max()),
        "count": count,
    }


# --------------------------------------------------------------------------------------------
# per-request quantities
# --------------------------------------------------------------------------------------------
def output_tokens(requests: pd.DataFrame) -> np.ndarray:
    """Output tokens per request over all its sequences: ``num_emitted_tokens`` (per
    sequence) x ``n`` (sequences; 1 when the table has no ``n`` column)."""
    return numeric(requests, "num_emitted_tokens", 0.0) * numeric(requests, "n", 1.0)


def per_request_latencies(requests: pd.DataFrame) -> pd.DataFrame:
    """Per-request latencies by the glossary definitions.

    Parameters
    ----------
    requests : pandas.DataFrame
        The engine's request table (see :func:`summarize`).

    Returns
    -------
    pandas.DataFrame
        Same index as ``requests`` with float columns, in seconds, NaN where undefined:

        * ``ttft_s`` = first token time - arrival time;
        * ``tpot_s`` = (finish time - first token time) / (emitted tokens - 1), only for
          completed requests with at least 2 emitted tokens;
        * ``e2e_latency_s`` = finish time - arrival time, only for completed requests;
        * ``queue_delay_s`` = first scheduled time - arrival time.
    """
    import pandas as pd
    arrival = numeric(requests, "arrival_time_s")
    first_sched = numeric(requests, "first_scheduled_time_s")
    first_tok = numeric(requests, "first_token_time_s")
    finish = numeric(requests, "finish_time_s")
    emitted = numeric(requests, "num_emitted_tokens", 0.0)
    completed = labels(requests, "status") == "completed"
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(
            completed & (emitted >= 2), (finish - first_tok) / (emitted - 1.0), np.nan
        )
    e2e = np.where(completed, finish - arrival, np.nan)
    return pd.DataFrame(
        {
            "ttft_s": first_tok - arrival,
            "tpot_s": tpot,
            "e2e_latency_s": e2e,
            "queue_delay_s": first_sched - arrival,
        },
        index=requests.index,
    )


def slo_mask(requests: pd.DataFrame, slo: Mapping[str, Any] | None,
             latencies: pd.DataFrame | None = None) -> np.ndarray:
    """Which requests met every configured SLO.

    A request meets the SLOs when it completed and each configured bound holds (``<=``):
    ``ttft_s`` on TTFT, ``tpot_s`` on TPOT and ``e2e_s`` on E2E latency. A bound that is
    ``None`` (or absent) is not checked. The TPOT check passes when TPOT is undefined (fewer
    than 2 emitted tokens), as vLLM's benchmark does. Rejected, cancelled and unfinished
    requests never meet the SLOs.

    Parameters
    ----------
    requests : pandas.DataFrame
        The engine's request table.
    slo : mapping or None
        Bounds in seconds under keys ``ttft_s``, ``tpot_s``, ``e2e_s``; other keys ignored.
    latencies : pandas.DataFrame, optional
        The result of :func:`per_request_latencies` for ``requests`` (computed if omitted).

    Returns
    -------
    ndarray of bool, shape (len(requests),)
    """
    lat = per_request_latencies(requests) if latencies is None else latencies
    ok = labels(requests, "status") == "completed"
    slo = slo or {}
    ttft_b, tpot_b, e2e_b = slo.get("ttft_s"), slo.get("tpot_s"), slo.get("e2e_s")
    if ttft_b is not None:
        ok &= lat["ttft_s"].to_numpy() <= float(ttft_b)
    if tpot_b is not None:
        tpot = lat["tpot_s"].to_numpy()
        ok &= np.isnan(tpot) | (tpot <= float(tpot_b))
    if e2e_b is not None:
        ok &= lat["e2e_latency_s"].to_numpy() <= float(e2e_b)
    return np.asarray(ok, dtype=bool)
