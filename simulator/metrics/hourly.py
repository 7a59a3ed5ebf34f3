"""Per-hour results of a run (``summary["by_hour"]``): load, latency, SLO attainment, fleet
and cost hour by hour, for runs of a day.

Hours are bins ``[k x period_s, (k + 1) x period_s)`` of the simulation clock (its 0 is the
workload's start: midnight for a day shaped by ``workload.rate_profile``), from the one
holding the measurement window's start to the one holding the last arrival; the last bin
runs on to the window's end (the drain after the last arrival belongs to the last hour).
Each row's ``duration_s`` is the part of its bin inside the window (so the last one may be
longer than ``period_s``). Per row:

* ``num_arrivals``, ``arrival_rate_rps`` (arrivals / ``duration_s``), and of the requests
  that *arrived* in the hour: ``num_completed``, ``num_rejected``, ``num_cancelled``,
  ``slo_attainment`` (DESIGN.md glossary: the share meeting every SLO; rejected, cancelled
  and unfinished requests count as misses; ``None`` without arrivals), ``ttft_p50_s``,
  ``ttft_p99_s`` (requests with a first token) and ``tpot_mean_s`` (completed with >= 2
  tokens), the percentiles by the summary's definition
  (:func:`simulator.metrics.latency.latency_stats`);
* ``num_output_tokens``: tokens emitted by the completions *finishing* in the hour (what
  throughput counts);
* from the fleet's :class:`~simulator.metrics.fleet.ReplicaSpan` s: ``mean_replicas_held``
  and ``mean_replicas_serving`` (replica-seconds held / routable in the hour over its
  ``duration_s``), ``gpu_hours`` (replica-seconds held x GPUs per replica / 3600: the
  integral of the fleet, :func:`~simulator.metrics.fleet.replica_seconds`) and ``cost_usd``
  (``gpu_hours x usd_per_gpu_hour``).

Summed over the rows, ``gpu_hours`` is the integral of the fleet over the measurement
window: a fixed fleet's total equals the summary's ``gpu_hours``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.columns import labels, numeric
from simulator.metrics.fleet import ReplicaSpan, replica_seconds, serving_seconds
from simulator.metrics.latency import latency_stats, output_tokens, per_request_latencies, slo_mask

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["HOUR_S", "ROW_KEYS", "hourly_rows", "wants_by_hour"]

#: The default bin of ``by_hour`` (s).
HOUR_S = 3600.0
#: Every key of a ``by_hour`` row, in table order.
ROW_KEYS = ("hour", "start_s", "duration_s", "num_arrivals", "arrival_rate_rps",
            "num_completed", "num_rejected", "num_cancelled", "slo_attainment", "ttft_p50_s",
            "ttft_p99_s", "tpot_mean_s", "num_output_tokens", "mean_replicas_held",
            "mean_replicas_serving", "gpu_hours", "cost_usd")


def wants_by_hour(duration_s: float, period_s: float = HOUR_S) -> bool:
    """Whether a run is long enough for a per-hour breakdown: its measurement window spans
    at least two periods (shorter runs keep their summary as it was)."""
    return duration_s >= 2 * period_s


def hourly_rows(requests: pd.DataFrame, spans: Sequence[ReplicaSpan], *,
                window: tuple[float, float], slo: Mapping[str, Any] | None = None,
                gpus_per_replica: int = 1, usd_per_gpu_hour: float = 0.0,
                period_s: float = HOUR_S, origin_s: float = 0.0) -> list[dict[str, Any]]:
    """One row per hour of the window (the module docstring defines every key).

    Parameters
    ----------
    requests : pandas.DataFrame
        The run's request table (:func:`simulator.metrics.summary.summarize`'s columns).
    spans : sequence of ReplicaSpan
        The fleet over time (a fixed fleet: :func:`~simulator.metrics.fleet.fixed_fleet_spans`).
    window : (float, float)
        The measurement window ``(start_s, end_s)`` (the summary's ``window_start_s`` and
        ``window_end_s``), seconds.
    slo : mapping, optional
        ``ttft_s``, ``tpot_s``, ``e2e_s`` bounds (s), as the summary takes them.
    gpus_per_replica : int
    usd_per_gpu_hour : float
    period_s : float
        The bin (s), one hour by default.
    origin_s : float
        Where bin 0 starts (s): bins are ``[origin_s + k x period_s, ...)``.

    Returns
    -------
    list of dict
        JSON-safe rows (``None`` for undefined values), keys :data:`ROW_KEYS`.

    Raises
    ------
    ValueError
        When the window ends before it starts or ``period_s`` is not > 0.
    """
    start_s, end_s = (float(x) for x in window)
    if not end_s >= start_s:
        raise ValueError(f"window ends ({end_s}) before it starts ({start_s})")
    if not (period_s > 0 and math.isfinite(period_s)):
        raise ValueError(f"period_s must be finite and > 0, got {period_s}")
    arrival = numeric(requests, "arrival_time_s")
    finish = numeric(requests, "finish_time_s")
    status = labels(requests, "status")
    completed = status == "completed"
    lat = per_request_latencies(requests)
    met = slo_mask(requests, slo, lat)
    ttft, tpot = lat["ttft_s"].to_numpy(), lat["tpot_s"].to_numpy()
    out_tok = output_tokens(requests)
    first = math.floor((start_s - origin_s) / period_s)
    latest = float(np.nanmax(arrival)) if np.any(~np.isnan(arrival)) else start_s
    last = max(first, math.floor((min(latest, end_s) - origin_s) / period_s))
    rows = []
    for k in range(first, last + 1):
        b0, b1 = origin_s + k * period_s, origin_s + (k + 1) * period_s
        lo, hi = max(b0, start_s), (min(b1, end_s) if k < last else end_s)
        dur = max(0.0, hi - lo)
        arr = (arrival >= b0) & (arrival < b1) if k < last else (arrival >= b0)
        fin = completed & (finish >= b0) & ((finish < b1) if k < last else True)
        n = int(arr.sum())
        t = latency_stats(ttft[arr])
        held = replica_seconds(spans, lo, hi)
        gpu_h = held * gpus_per_replica / 3600.0
        rows.append({
            "hour": k, "start_s": b0, "duration_s": dur, "num_arrivals": n,
            "arrival_rate_rps": n / dur if dur > 0 else None,
            "num_completed": int((arr & completed).sum()),
            "num_rejected": int((arr & (status == "rejected")).sum()),
            "num_cancelled": int((arr & (status == "cancelled")).sum()),
            "slo_attainment": float(met[arr].sum()) / n if n else None,
            "ttft_p50_s": t["p50"], "ttft_p99_s": t["p99"],
            "tpot_mean_s": latency_stats(tpot[arr])["mean"],
            "num_output_tokens": int(np.nansum(out_tok[fin])),
            "mean_replicas_held": held / dur if dur > 0 else None,
            "mean_replicas_serving": serving_seconds(spans, lo, hi) / dur if dur > 0 else None,
            "gpu_hours": gpu_h, "cost_usd": gpu_h * float(usd_per_gpu_hour),
        })
    return rows
