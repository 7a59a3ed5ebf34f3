"""Dominance pruning of plan candidates: skip those that cannot cost less than a known one.

The plan recommends the cheapest passing candidate (``usd_per_hour``; ties:
:data:`simulator.planner.recommend.TIE_RULE`). The baseline (and the last known-good) are evaluated in full anyway; when
one of them passes at ``C`` USD per hour, a candidate can only matter if its deployment
costs at most ``C``. A deployment of ``n`` replicas of ``g`` GPUs at ``p`` USD per GPU-hour
costs ``n g p``, and the confirmation only ever adds replicas to the
``n = replicas_for(target, capacity, headroom)`` the capacity implies, so:

* ``n_max = floor(C / (g p))`` replicas at most fit the bound; ``n_max = 0`` (one replica
  already costs more than ``C``) skips the candidate with no simulation at all (exact);
* else the capacity must reach ``gate_rate = target (1 + headroom) / (n_max + 1e-9)``
  (the inverse of :func:`~simulator.planner.search.replicas_for`); one probe at that rate
  decides: infeasible means, under the search's own assumption that feasibility falls as
  the rate rises, that every capacity the search could report is below it, so the
  candidate needs at least ``n_max + 1`` replicas and costs more than ``C``: it is skipped
  (``status: skipped``, gate ``dominated`` with its bound). Feasible: the candidate is
  searched and confirmed as usual (the gate probe is kept apart, ``dominance_probe``, so
  its figures equal an unpruned plan's).

A skipped candidate can neither be recommended nor tie (its cost is strictly above ``C``).
When no candidate at or below ``C`` passes, the plan evaluates the skipped ones in full
(an unpruned plan would recommend one of them over the baseline).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["dominance_bound", "gate_rate", "is_skipped", "max_replicas_within",
           "skipped_result"]


def is_skipped(row: Mapping[str, Any]) -> bool:
    """Whether a plan row is a candidate skipped as dominated (its ``status`` starts with
    ``skipped``; it has no measured capacity)."""
    return str(row.get("status") or "").startswith("skipped")


def dominance_bound(results: list[Mapping[str, Any]], gpus_per_replica: list[int],
                    prices: list[float]) -> float | None:
    """The lowest ``usd_per_hour`` (``replicas x gpus_per_replica x price``) among fully
    evaluated results that passed (``status == "ok"``); ``None`` when none passed."""
    costs = [r["replicas"] * g * p for r, g, p in zip(results, gpus_per_replica, prices)
             if r.get("status") == "ok" and r.get("replicas")]
    return min(costs) if costs else None


def max_replicas_within(bound_usd_per_hour: float, gpus_per_replica: int,
                        usd_per_gpu_hour: float) -> int:
    """The most replicas whose cost ``n x gpus_per_replica x usd_per_gpu_hour`` stays at or
    below the bound (a relative 1e-12 forgives rounding of the bound's own product)."""
    per = gpus_per_replica * usd_per_gpu_hour
    if not per > 0:
        raise ValueError(f"a replica must cost > 0 USD per hour, got {per}")
    return max(0, math.floor(bound_usd_per_hour / per * (1 + 1e-12)))


def gate_rate(target_rps: float, headroom: float, n_max: int) -> float:
    """The lowest capacity (requests/s per replica) for which ``replicas_for`` asks at most
    ``n_max`` replicas: ``target x (1 + headroom) / (n_max + 1e-9)`` (``replicas_for``
    rounds ``need - 1e-9`` up)."""
    if n_max < 1:
        raise ValueError(f"n_max must be >= 1, got {n_max}")
    return target_rps * (1.0 + headroom) / (n_max + 1e-9)


def skipped_result(bound_usd_per_hour: float, gpus_per_replica: int, usd_per_gpu_hour: float,
                   n_max: int, rate_rps: float | None) -> dict[str, Any]:
    """The fields of a candidate skipped as dominated: ``status: skipped``, gate
    ``dominated`` with the cheapest deployment it could have (``(n_max + 1)`` replicas)
    against the bound."""
    per = gpus_per_replica * usd_per_gpu_hour
    least = (n_max + 1) * per
    why = (f"one replica costs ${per:.2f}/h" if n_max == 0 else
           f"no capacity at {rate_rps:.3g} requests/s per replica (the probe there fails), "
           f"so >= {n_max + 1} replicas")
    text = (f"skipped: dominated: {why}: >= ${least:.2f}/h > ${bound_usd_per_hour:.2f}/h "
            "(the cheapest fallback deployment that met the simulated gates; the plan is "
            "re-run unpruned unless a candidate within it passes every gate)")
    return {"status": "skipped", "failed_gates": ["dominated"],
            "gate_failures": [{"gate": "dominated", "value": least,
                               "bound": bound_usd_per_hour, "op": "<=", "unit": "usd",
                               "excess": least - bound_usd_per_hour,
                               "relative": (least - bound_usd_per_hour) / bound_usd_per_hour,
                               "text": text}],
            "capacity_rps": None, "capacity_rate_scale": None,
            "capacity_below_rps": rate_rps, "search_note": "skipped: dominated",
            "dominance": {"bound_usd_per_hour": bound_usd_per_hour, "max_replicas": n_max,
                          "gate_rate_rps": rate_rps, "least_usd_per_hour": least}}
