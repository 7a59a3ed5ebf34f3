"""Capacity search against queueing theory (M/D/1).

Model with a closed form: every engine step takes a constant ``D`` seconds, one sequence per
step (``max_num_seqs = 1``) and one output token per request, so a request is served by
exactly one step: TTFT = waiting time + D. With Poisson arrivals this is the M/D/1 queue:

* stable only for ``lambda < 1 / D``;
* mean wait (Pollaczek-Khinchine) ``Wq = rho D / (2 (1 - rho))``, ``rho = lambda D``;
* waiting-time distribution (Erlang 1909; Iversen, *Teletraffic Engineering*, M/D/1):
  ``P(W <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} exp(lambda (t - kD)) (-lambda (t - kD))^k / k!``.

With an SLO ``TTFT <= T`` and attainment target ``a``, the capacity is the ``lambda*`` where
``P(W <= T - D) = a``; the search must land near it, and below ``1 / D``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from simulator.cluster.setup import build_setup
from simulator.planner.search import search_capacity
from simulator.planner.simulate import specs_rate
from simulator.scenario.config import validate_scenario
from simulator.workload import load_workload

D = 0.1  # seconds per step


class ConstantPerf:
    """Every step takes ``D`` seconds whatever its shape."""

    kind = "constant"

    def step_time(self, shape) -> float:
        return D

    def decode_step_times(self, num_seqs, ctx_totals):
        return np.full(len(ctx_totals), D)

    def provenance(self) -> dict:
        return {"all": "test: constant step time"}


def constant_setup(scenario):
    s = build_setup(scenario)
    s.perf = ConstantPerf()
    return s


constant_setup.cache_id = f"constant-{D}"


def md1_wait_cdf(t: float, lam: float, d: float = D) -> float:
    """``P(W <= t)`` of the M/D/1 queue (Erlang's formula)."""
    rho = lam * d
    total = 0.0
    for k in range(math.floor(t / d + 1e-12) + 1):
        x = t - k * d
        total += math.exp(lam * x) * (-lam * x) ** k / math.factorial(k)
    return (1.0 - rho) * total


def md1_capacity(ttft_slo: float, target: float) -> float:
    """Arrival rate at which the share of requests with TTFT <= ``ttft_slo`` equals ``target``."""
    return brentq(lambda lam: md1_wait_cdf(ttft_slo - D, lam) - target, 1e-3, (1 - 1e-9) / D)


def md1_scenario(num_requests: int = 4000, ttft_s: float = 0.5, target: float = 0.9,
                 replicas: int = 1, seed: int = 0) -> dict:
    raw = {
        "name": "md1",
        "cluster": {"num_replicas": replicas, "router": "least_outstanding"},
        "scheduler": {"max_num_seqs": 1, "max_num_batched_tokens": 64},
        "workload": {"synthetic": {
            "arrival": {"process": "poisson", "rate_rps": 1.0},
            "num_requests": num_requests,
            "prompt_tokens": {"dist": "fixed", "value": 16},
            "output_tokens": {"dist": "fixed", "value": 1}}},
        "slo": {"ttft_s": ttft_s, "attainment_target": target},
        "seed": seed,
    }
    return validate_scenario(raw).model_dump(mode="json")


def _specs(sc: dict):
    return load_workload(validate_scenario(sc).workload, sc["seed"], None)


NO_SLICE_GATE = {"slo_attainment": True, "slice_ttft_p99": False}


def test_md1_formula_sanity():
    # P(W = 0) = 1 - rho, and the CDF rises to 1 for a stable queue
    assert md1_wait_cdf(0.0, 5.0) == pytest.approx(0.5)
    assert md1_wait_cdf(1.0, 5.0) == pytest.approx(1.0, abs=1e-4)  # (alternating sum:
    # keep t / D small, it loses precision beyond ~20 terms)
    assert 0 < md1_capacity(0.5, 0.9) < 1 / D


def test_mean_ttft_matches_pollaczek_khinchine():
    """The injected constant-time model gives an M/D/1 queue: mean TTFT = D + Wq."""
    from simulator.planner.search import SimRunner
    sc = md1_scenario(num_requests=4000)
    specs = _specs(sc)
    runner = SimRunner(setup_factory=constant_setup)
    lam = 6.0
    from simulator.planner.search import scenario_at
    from simulator.planner.simulate import rescale_specs
    scale = lam / specs_rate(specs)
    r = runner.run(scenario_at(sc, 1, scale, len(specs)), rescale_specs(specs, scale))
    rho = lam * D
    expected = D + rho * D / (2 * (1 - rho))
    assert r["summary"]["ttft_s"]["mean"] == pytest.approx(expected, rel=0.05)
    assert runner.num_simulations == 1


@pytest.mark.parametrize("ttft_slo", [0.3, 0.5])
def test_capacity_converges_to_md1_percentile_rate(ttft_slo):
    sc = md1_scenario(num_requests=4000, ttft_s=ttft_slo)
    specs = _specs(sc)
    expected = md1_capacity(ttft_slo, 0.9)
    res = search_capacity(sc, specs, setup_factory=constant_setup, gates=NO_SLICE_GATE,
                          search={"max_requests": 4000, "initial_rate_scale": 1.0,
                                  "growth": 2.0, "rel_tol": 0.02, "max_probes": 14,
                                  "min_rate_scale": 1 / 64, "max_rate_scale": 64})
    cap = res["capacity_rps"]
    assert res["search_note"] == "converged"
    assert cap < 1 / D  # below the stability limit
    assert cap == pytest.approx(expected, rel=0.08), (cap, expected)
    # every feasible probe is below every infeasible one (monotone in rate)
    feas = [p["rate_rps"] for p in res["probes"] if p["feasible"]]
    infeas = [p["rate_rps"] for p in res["probes"] if not p["feasible"]]
    assert max(feas) < min(infeas)


def test_capacity_approaches_stability_limit_with_loose_slo():
    """A TTFT bound of 30 D with a 50% target leaves only the stability limit 1/D."""
    sc = md1_scenario(num_requests=3000, ttft_s=30 * D, target=0.5)
    res = search_capacity(sc, _specs(sc), setup_factory=constant_setup, gates=NO_SLICE_GATE,
                          search={"max_requests": 3000, "rel_tol": 0.02, "max_probes": 14})
    cap = res["capacity_rps"]
    assert 0.85 / D < cap < 1.1 / D, cap
    assert md1_capacity(30 * D, 0.5) < 1 / D


def test_more_replicas_never_lower_capacity():
    caps = []
    for k in (1, 2, 3):
        sc = md1_scenario(num_requests=1500 * k, replicas=k)
        res = search_capacity(sc, _specs(sc), setup_factory=constant_setup,
                              gates=NO_SLICE_GATE,
                              search={"max_requests": 1500 * k, "rel_tol": 0.05,
                                      "max_probes": 12})
        caps.append(res["capacity_rps"])
    assert caps[0] <= caps[1] <= caps[2], caps
    assert caps[1] > 1.5 * caps[0] and caps[2] > 1.3 * caps[1], caps
