"""The fleet over time: which replicas existed when, and what they cost to hold.

A replica's life is one :class:`ReplicaSpan`: its GPUs are taken (paid for) at
``provisioned_s``, it serves (is routable) from ``serving_s`` (the end of its cold start), it
stops taking new requests at ``drain_s`` and gives its GPUs back at ``released_s`` (when its
last request is done). A fixed fleet (no autoscaler) is spans that start before and end after
any window (``-inf`` / ``inf``); an autoscaled run's spans come from
:mod:`simulator.cluster.autoscale`. GPU-hours, cost and idle energy integrate over the spans
(DESIGN.md section 3d: "GPU-hours, cost and energy integrate over the replicas that exist").
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np


class ReplicaSpan(NamedTuple):
    """One replica's life (seconds on the simulation clock).

    ``provisioned_s <= serving_s <= drain_s <= released_s``; ``drain_s`` and ``released_s``
    are ``inf`` for a replica held to the end of the run, ``provisioned_s`` and ``serving_s``
    are ``-inf`` for one that existed before the run began (a fixed fleet's). A replica whose
    cold start was abandoned never served: its ``serving_s`` is ``inf`` (after its
    ``released_s``; it counts as held from ``provisioned_s`` to ``released_s`` only)."""

    replica_id: int
    provisioned_s: float
    serving_s: float
    drain_s: float
    released_s: float


def fixed_fleet_spans(num_replicas: int, first_id: int = 0) -> list[ReplicaSpan]:
    """The spans of ``num_replicas`` replicas held throughout (ids from ``first_id``)."""
    inf = math.inf
    return [ReplicaSpan(first_id + i, -inf, -inf, inf, inf) for i in range(num_replicas)]


def _overlap(a0: float, a1: float, t0: float, t1: float) -> float:
    """Seconds of ``[a0, a1]`` inside ``[t0, t1]``."""
    return max(0.0, min(a1, t1) - max(a0, t0))


def replica_seconds(spans: Iterable[ReplicaSpan], t0: float, t1: float) -> float:
    """Replica-seconds held (provisioned to released) within the window ``[t0, t1]``.

    Parameters
    ----------
    spans : iterable of ReplicaSpan
    t0, t1 : float
        The window (seconds; ``t1 >= t0``).

    Returns
    -------
    float
        ``sum over spans of |[provisioned_s, released_s] ∩ [t0, t1]|`` (seconds): the integral
        of the number of replicas held over the window. GPU-hours are this times the GPUs per
        replica over 3600.

    Raises
    ------
    ValueError
        When ``t1 < t0``.
    """
    if t1 < t0:
        raise ValueError(f"window ends ({t1}) before it starts ({t0})")
    return float(sum(_overlap(s.provisioned_s, s.released_s, t0, t1) for s in spans))


def serving_seconds(spans: Iterable[ReplicaSpan], t0: float, t1: float) -> float:
    """Replica-seconds routable (``serving_s`` to ``drain_s``) within ``[t0, t1]``."""
    if t1 < t0:
        raise ValueError(f"window ends ({t1}) before it starts ({t0})")
    return float(sum(_overlap(s.serving_s, s.drain_s, t0, t1) for s in spans))


def replica_counts(spans: Sequence[ReplicaSpan], t0: float, t1: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fleet as step functions over ``[t0, t1]``.

    Returns
    -------
    times_s, held, serving : numpy.ndarray, shape (k,)
        ``times_s[0] == t0``, strictly increasing change times within ``[t0, t1)``; from
        ``times_s[j]`` until the next change, ``held[j]`` replicas are held (provisioned and
        not released) and ``serving[j]`` of them are routable (cold start over, not draining).
        Counts are int64.
    """
    if t1 < t0:
        raise ValueError(f"window ends ({t1}) before it starts ({t0})")
    edges = {t0}
    for s in spans:
        for t in (s.provisioned_s, s.serving_s, s.drain_s, s.released_s):
            if t0 < t < t1:
                edges.add(float(t))
    times = np.array(sorted(edges), dtype=np.float64)
    held = np.zeros(len(times), dtype=np.int64)
    serving = np.zeros(len(times), dtype=np.int64)
    for s in spans:
        held += (times >= s.provisioned_s) & (times < s.released_s)
        serving += (times >= s.serving_s) & (times < s.drain_s)
    return times, held, serving


def spans_table(spans: Sequence[ReplicaSpan], t0: float, t1: float) -> list[dict]:
    """JSON-safe rows of the spans that overlap ``[t0, t1]``, times clipped to it (a fixed
    fleet's ``-inf`` / ``inf`` become the window's ends; ``None`` for a phase never
    reached inside it)."""
    rows = []
    for s in spans:
        if s.released_s < t0 or s.provisioned_s > t1:
            continue

        def clip(t: float) -> float | None:  # None: not reached within the window
            return None if t > t1 else float(min(max(t, t0), t1))
        rows.append({"replica_id": int(s.replica_id), "provisioned_s": clip(s.provisioned_s),
                     "serving_s": clip(s.serving_s), "drain_s": clip(s.drain_s),
                     "released_s": clip(s.released_s)})
    return rows


def during_cold_starts(spans: Sequence[ReplicaSpan], times_s: np.ndarray) -> np.ndarray:
    """Which of ``times_s`` fall while at least one replica added during the run (finite
    ``provisioned_s``) was in its cold start: ``provisioned_s <= t < serving_s`` (or, for a
    start abandoned, ``< released_s``). A fixed fleet has none.

    Returns
    -------
    numpy.ndarray of bool, shape ``times_s.shape``
    """
    t = np.asarray(times_s, dtype=float)
    during = np.zeros(t.shape, dtype=bool)
    for s in spans:
        if math.isfinite(s.provisioned_s) and s.serving_s > s.provisioned_s:
            during |= (t >= s.provisioned_s) & (t < min(s.serving_s, s.released_s))
    return during


def autoscale_summary(spans: Sequence[ReplicaSpan], outputs: dict, arrival_s: np.ndarray,
                      met: np.ndarray, window: tuple[float, float], gpus_per_replica: int,
                      usd_per_gpu_hour: float, config: dict) -> dict:
    """The ``autoscale`` block of an autoscaled run's summary.

    Parameters
    ----------
    spans : sequence of ReplicaSpan
    outputs : dict
        :meth:`simulator.engine.autoscaling.Fleet.outputs` (cold start, events).
    arrival_s, met : numpy.ndarray, shape (n,)
        Every request's arrival time (s) and whether it met every SLO
        (:func:`simulator.metrics.latency.slo_mask`).
    window : (float, float)
        The summary's measurement window (s).
    gpus_per_replica : int
    usd_per_gpu_hour : float
    config : dict
        The scenario's ``cluster.autoscale`` section (echoed).

    Returns
    -------
    dict
        ``replica_hours`` and ``gpu_hours`` (integrals of the replicas held over the window),
        ``cost_usd``, ``mean_replicas_held`` (replica-hours / window hours), ``mean_replicas_serving``,
        ``peak_replicas_held``, ``min_replicas_held``, ``num_scale_ups``, ``num_scale_downs``,
        ``num_cancelled_starts``, ``cold_start`` (its seconds and parts), the
        ``cold_start_requests`` (arrivals while a started replica was not serving yet) and
        ``cold_start_slo_misses`` (those that missed an SLO), ``replicas_over_time``
        (``time_s``, ``held``, ``serving`` change points), ``replicas`` (each span, clipped)
        and ``events``.
    """
    t0, t1 = window
    dur = t1 - t0
    rs = replica_seconds(spans, t0, t1)
    times, held, serving = replica_counts(spans, t0, t1)
    events = outputs.get("events", [])
    during = during_cold_starts(spans, arrival_s)

    def count(action: str) -> int:
        return sum(1 for e in events if e["action"] == action)
    return {
        "config": config,
        "replica_hours": rs / 3600.0,
        "gpu_hours": rs * gpus_per_replica / 3600.0,
        "cost_usd": rs * gpus_per_replica / 3600.0 * float(usd_per_gpu_hour),
        "mean_replicas_held": rs / dur if dur > 0 else None,
        "mean_replicas_serving": serving_seconds(spans, t0, t1) / dur if dur > 0 else None,
        "peak_replicas_held": int(held.max()) if len(held) else 0,
        "min_replicas_held": int(held.min()) if len(held) else 0,
        "num_scale_ups": count("scale_up"),
        "num_scale_downs": count("scale_down"),
        "num_cancelled_starts": count("cancel_start"),
        "cold_start": outputs.get("cold_start"),
        "cold_start_requests": int(during.sum()),
        "cold_start_slo_misses": int((during & ~met).sum()),
        "replicas_over_time": {"time_s": times.tolist(), "held": held.tolist(),
                               "serving": serving.tolist()},
        "replicas": spans_table(spans, t0, t1),
        "events": events,
    }
