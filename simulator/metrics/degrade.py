"""What each degrade policy cost and saved, from the controller's counters and the request table.

Per policy (:func:`degrade_effects`): how often and how long it was active, the requests it
shed, capped or sent to the fallback, the output tokens a cap did not generate, and the latency
of the requests that arrived while it was active next to those that arrived while it was not
(TTFT p50/p99 over requests with a first token, E2E p99 over completed requests; the one
percentile definition of :func:`simulator.metrics.summary.weighted_percentiles`). The latency
columns are an observed difference between two groups of one run, not a counterfactual: the
run without the policy is the scenario with ``scheduler.admission.degrade: []``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.base.quantiles import weighted_percentiles
from simulator.metrics.latency import per_request_latencies

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation


def _pct(x: np.ndarray, q: float) -> float | None:
    x = x[np.isfinite(x)]
    if not x.size:
        return None
    return float(weighted_percentiles(x, np.ones(x.size), [q])[0])


def _inside(arrival: np.ndarray, episodes: list[dict], end_s: float) -> np.ndarray:
    """Mask of arrivals inside any episode ``[start_s, end_s)`` (an open one runs to end)."""
    m = np.zeros(arrival.size, dtype=bool)
    for e in episodes:
        hi = e["end_s"] if e["end_s"] is not None else end_s
        m |= (arrival >= e["start_s"]) & (arrival < hi)
    return m


def degrade_effects(policies: list[dict], requests: pd.DataFrame,
                    end_time_s: float) -> list[dict[str, Any]]:
    """Add the latency comparison to each policy's controller summary.

    Parameters
    ----------
    policies : list of dict
        :meth:`simulator.scheduling.degrade.DegradeController.summary` (``request_ids``
        dropped from the result: the requests table carries them as ``degrade_policy``).
    requests : pandas.DataFrame
        The run's request table (``arrival_time_s``, ``status``, times).
    end_time_s : float
        End of the simulated run, seconds (closes open episodes).

    Returns
    -------
    list of dict
        Each policy's summary plus ``num_arrived_active`` / ``num_arrived_inactive``,
        ``ttft_p50_active_s``, ``ttft_p50_inactive_s``, ``ttft_p99_active_s``,
        ``ttft_p99_inactive_s``, ``e2e_p99_active_s``, ``e2e_p99_inactive_s`` (seconds,
        None where a group is empty).
    """
    if not policies:
        return []
    arrival = requests["arrival_time_s"].to_numpy(dtype=float) if len(requests) else \
        np.zeros(0)
    lat = per_request_latencies(requests) if len(requests) else None
    out = []
    for p in policies:
        q = {k: v for k, v in p.items() if k != "request_ids"}
        m = _inside(arrival, p["episodes"], end_time_s)
        q["num_arrived_active"] = int(m.sum())
        q["num_arrived_inactive"] = int((~m).sum())
        for key, col, pc in (("ttft_p50", "ttft_s", 50), ("ttft_p99", "ttft_s", 99),
                             ("e2e_p99", "e2e_latency_s", 99)):
            v = lat[col].to_numpy(dtype=float) if lat is not None else np.zeros(0)
            q[f"{key}_active_s"] = _pct(v[m], pc)
            q[f"{key}_inactive_s"] = _pct(v[~m], pc)
        out.append(q)
    return out


def degrade_column(policies: list[dict], request_ids: np.ndarray) -> np.ndarray:
    """Per request, the names of the policies applied to it (``'+'``-joined, '' if none).

    Parameters
    ----------
    policies : list of dict
        Controller summaries (with ``request_ids``).
    request_ids : ndarray of int
        The request table's ``request_id`` column.
    """
    names: dict[int, list[str]] = {}
    for p in policies:
        for rid in p.get("request_ids", ()):
            names.setdefault(int(rid), []).append(p["name"])
    return np.array(["+".join(names.get(int(r), ())) for r in request_ids], dtype=object)
