"""Early stop of a capacity probe whose verdict is already known.

A probe replays ``n`` requests and is infeasible when one of its request-level gates fails
(:func:`simulator.planner.gates.evaluate_gates`). Some gates are decided by *final* facts
of single requests: once a request has finished, its latencies and status never change. As
requests finish, :class:`ProbeStop` counts those facts and proves a failure as soon as no
outcome of the remaining requests can save the gate; the engine then ends the run
(``simulate(stop_when=...)``). Overloaded probes, the slowest ones (queues grow), stop
after a few percent of their requests.

The rules, for ``n`` requests in the probe (every one enters a run that is not stopped):

* ``slo_attainment``: attainment is ``met / n`` (:func:`simulator.metrics.latency.slo_mask`;
  rejected, cancelled and unfinished requests are misses). After ``k`` finished misses at
  most ``n - k`` can meet the SLOs: the gate has failed once ``(n - k) / n < target``.
* ``slice_ttft_p99`` (and ``slice_tpot_p99`` when enabled): the slice's p99 over its
  ``m <= n_s`` samples is the inverse-CDF percentile
  (:func:`simulator.metrics.summary.weighted_percentiles`): it exceeds the bound ``b``
  exactly when at least ``c(m)`` samples exceed ``b``, ``c(m)`` = the smallest count of
  values above ``b`` that makes the p99 of ``m`` values exceed it (``m - ceil(0.99 m) + 1``).
  ``c`` never decreases with ``m`` (:func:`p99_exceed_count`), so ``c(n_s)`` finished
  requests of the slice above ``b`` prove the failure whatever the final ``m``. TTFT counts
  for every request with a first token, TPOT for completed ones with >= 2 tokens, as the
  summary's statistics do.
* ``rejected_fraction``: (rejected + cancelled) / n only grows: the gate has failed once it
  exceeds ``max_rejected_fraction``.

The other gates (preemptions per request, peak KV-cache use) are not decided early. A
stopped probe is reported infeasible with the gates proven failed (its other metrics cover
the part that ran, and say so: ``stopped_early``).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulator.base.quantiles import weighted_percentiles

__all__ = ["ProbeStop", "attainment_miss_limit", "p99_exceed_count"]


def p99_exceed_count(m: int, q: float = 99.0) -> int:
    """The fewest of ``m`` samples above a bound that put the ``q``-th percentile above it.

    Found on the summary's own percentile (:func:`weighted_percentiles`, inverse CDF) by
    bisection over the count ``c`` of samples above the bound (the percentile of ``m - c``
    zeros and ``c`` twos is above 1 exactly when ``c`` suffices); for ``q = 99`` it equals
    ``m - ceil(0.99 m) + 1``.

    Raises
    ------
    ValueError
        When ``m < 1``.
    """
    if m < 1:
        raise ValueError(f"need at least one sample, got {m}")

    def above(c: int) -> bool:
        v = np.zeros(m)
        v[m - c:] = 2.0
        return float(weighted_percentiles(v, np.ones(m), q)[0]) > 1.0

    lo, hi = 1, m  # above(m) holds; find the smallest c with above(c)
    while lo < hi:
        mid = (lo + hi) // 2
        if above(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def attainment_miss_limit(n: int, target: float) -> int:
    """The fewest misses among ``n`` requests that put attainment below ``target``: the
    smallest ``k`` with ``(n - k) / n < target`` (``n + 1``: never, for ``target <= 0``)."""
    k = max(0, math.floor(n * (1.0 - target)) - 1)
    while k <= n and not (n - k) / n < target:
        k += 1
    return k


class ProbeStop:
    """``stop_when`` predicate of one probe: proves a gate failure from finished requests.

    Parameters
    ----------
    specs : sequence of RequestSpec
        The probe's requests (their ``slice`` sizes the per-slice rules).
    slo : mapping
        The scenario's ``slo`` section (``ttft_s``, ``tpot_s``, ``e2e_s``,
        ``attainment_target``; seconds).
    gates : mapping
        Gate settings (:class:`simulator.planner.spec.GateSettings` as a dict).

    Attributes
    ----------
    stopped_at_s : float or None
        Simulated time of the proof (``None``: not stopped).
    failures : list of dict
        The gates proven failed, as keyword arguments of
        :func:`simulator.planner.gates.gate_failure` (``gate``, ``value``, ``bound``,
        ``op``, ``unit``, ``text``).
    """

    def __init__(self, specs: Sequence, slo: Mapping[str, Any], gates: Mapping[str, Any]):
        self.n = n = len(specs)
        self.ttft_b = _bound(slo.get("ttft_s"))
        self.tpot_b = _bound(slo.get("tpot_s"))
        self.e2e_b = _bound(slo.get("e2e_s"))
        target = slo.get("attainment_target")
        self.miss_limit = (attainment_miss_limit(n, float(target))
                           if gates.get("slo_attainment", True) and target is not None
                           else None)
        self.target = target
        mrf = gates.get("max_rejected_fraction")
        self.mrf = None if mrf is None else float(mrf)
        self.bad_limit = (next((k for k in range(n + 1) if k / n > float(mrf)), None)
                          if mrf is not None and n else None)
        sizes: dict[str, int] = {}
        for s in specs:
            sizes[s.slice] = sizes.get(s.slice, 0) + 1
        self.ttft_rule = self._slice_rule(gates, "slice_ttft_p99", True, "slice_ttft_p99_s",
                                          slo.get("ttft_s"), sizes)
        self.tpot_rule = self._slice_rule(gates, "slice_tpot_p99", False, "slice_tpot_p99_s",
                                          slo.get("tpot_s"), sizes)
        self.misses = 0
        self.bad = 0
        self.over: dict[tuple[str, str], int] = {}
        self.stopped_at_s: float | None = None
        self.failures: list[dict] = []

    @staticmethod
    def _slice_rule(gates, flag, default, bounds_key, slo_bound, sizes) -> dict:
        """``{slice: (bound_s, count needed)}`` of a per-slice p99 gate (empty: off)."""
        if not gates.get(flag, default):
            return {}
        per = gates.get(bounds_key) or {}
        out = {}
        for name, n_s in sizes.items():
            b = per.get(name, slo_bound)
            if b is not None:
                out[name] = (float(b), p99_exceed_count(n_s))
        return out

    def identity(self) -> dict[str, Any]:
        """The rules as plain data (what a cached stopped run depends on besides its
        scenario and requests)."""
        return {"n": self.n, "ttft_s": self.ttft_b, "tpot_s": self.tpot_b,
                "e2e_s": self.e2e_b, "miss_limit": self.miss_limit,
                "bad_limit": self.bad_limit,
                "ttft_rule": sorted(self.ttft_rule.items()),
                "tpot_rule": sorted(self.tpot_rule.items())}

    @property
    def active(self) -> bool:
        """Whether any rule can fire (else the probe runs to its end)."""
        return bool(self.miss_limit is not None or self.bad_limit is not None
                    or self.ttft_rule or self.tpot_rule)

    def __call__(self, r, now_s: float) -> bool:
        """Count request ``r``'s final facts (it just finished at ``now_s``); True once a
        gate is proven failed."""
        if self.stopped_at_s is not None:
            return True
        completed = r.status == "completed"
        ttft = r.first_token_time_s - r.arrival_time_s  # NaN without a first token
        tpot = math.nan
        if completed and r.num_emitted >= 2:
            tpot = (r.finish_time_s - r.first_token_time_s) / (r.num_emitted - 1.0)
        met = completed
        if met and self.ttft_b is not None:
            met = ttft <= self.ttft_b
        if met and self.tpot_b is not None:
            met = math.isnan(tpot) or tpot <= self.tpot_b
        if met and self.e2e_b is not None:
            met = (r.finish_time_s - r.arrival_time_s) <= self.e2e_b
        if not met:
            self.misses += 1
        if r.status in ("rejected", "cancelled"):
            self.bad += 1
        sl = r.spec.slice
        for kind, rule, v in (("ttft", self.ttft_rule, ttft), ("tpot", self.tpot_rule, tpot)):
            b = rule.get(sl)
            if b is not None and v > b[0]:  # NaN compares False: not a sample
                self.over[(kind, sl)] = self.over.get((kind, sl), 0) + 1
        self._prove(now_s)
        return self.stopped_at_s is not None

    def _prove(self, now_s: float) -> None:
        fails = []
        if self.miss_limit is not None and self.misses >= self.miss_limit:
            best = (self.n - self.misses) / self.n
            fails.append(_failure(
                "slo_attainment", best, float(self.target), op=">=", unit="fraction",
                text=(f"slo_attainment <= {100 * best:.1f}% < {100 * float(self.target):.1f}%"
                      f": {self.misses} of {self.n} requests already missed an SLO "
                      "(stopped early)")))
        for kind, rule, flag in (("ttft", self.ttft_rule, "slice_ttft_p99"),
                                 ("tpot", self.tpot_rule, "slice_tpot_p99")):
            for sl, (b, need) in sorted(rule.items()):
                c = self.over.get((kind, sl), 0)
                if c >= need:
                    fails.append(_failure(
                        f"{flag}[{sl}]", None, b, unit="s",
                        text=(f"{sl} p99 {kind.upper()} > {1000 * b:.0f} ms: {c} request(s) "
                              f"above it, {need} suffice (stopped early)")))
        if self.bad_limit is not None and self.bad >= self.bad_limit:
            fails.append(_failure(
                "rejected_fraction", self.bad / self.n, self.mrf, unit="fraction",
                text=(f"rejected_fraction >= {self.bad} of {self.n} requests "
                      f"> {100 * self.mrf:.1f}% (stopped early)")))
        if fails:
            self.stopped_at_s = now_s
            self.failures = fails


def _failure(gate: str, value, bound, *, op: str = "<=", unit: str = "", text: str) -> dict:
    return {"gate": gate, "value": value, "bound": bound, "op": op, "unit": unit,
            "text": text}


def _bound(x) -> float | None:
    return None if x is None else float(x)
