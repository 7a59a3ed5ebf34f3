"""Speculative decoding against its closed forms (Leviathan et al. 2023, arXiv:2211.17192).

Setting: a constant step time ``T`` (a stub performance model injected into the run's
setup), a draft cost ratio ``c`` (each step drafts ``k`` passes of ``c T``; the draft's
prompt prefill costs ``c T``), and requests far apart, so one request runs at a time and
nothing queues. Then:

- every decode step of a request takes exactly ``T (1 + k c)``, its first token comes
  ``T (1 + c)`` after arrival, and its decode phase lasts ``drafts x T (1 + k c)``;
- the engine's accepted-length counters follow the acceptance model: the mean tokens per
  step matches E[tokens/step] (``(1 - a^(k+1)) / (1 - a)`` for i.i.d. acceptance) within
  4 standard errors, the standard error derived from the model's own variance, and the
  accepted-length histogram passes a chi-square test against the model's pmf;
- the TPOT speedup over the same run without speculation matches Thm 3.8,
  ``E[tokens/step] / (1 + k c)``, within the sampling error plus the bound on the
  truncation of each request's last step.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import Scenario
from simulator.speculative.calculator import expected_speedup, expected_tokens_per_step

T = 0.01  # seconds per step
K = 4
C = 0.1
OUT = 1000  # output tokens per request
PER_SLICE = 16
SLICES = {
    "code": {"model": "iid", "acceptance_rate": 0.8},
    "chat": {"model": "iid", "acceptance_rate": 0.5},
    "math": {"model": "empirical", "probabilities": [0.3, 0.2, 0.1, 0.1, 0.3]},
}


class ConstPerf:
    """Every step, and every plain decode step, takes ``T``."""

    kind = "stub"

    def step_time(self, shape) -> float:
        return T

    def decode_step_times(self, num_seqs, ctx_totals):
        return np.full(np.atleast_1d(ctx_totals).shape, T)

    def provenance(self) -> dict:
        return {"all": "stub (constant step time)"}


def _scenario(speculative: bool) -> Scenario:
    raw = {
        "name": "closed_form", "model": "llama-3.1-8b",
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1.0},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 8},
                                   "output_tokens": {"dist": "fixed", "value": 8}}},
        "seed": 17,
    }
    if speculative:
        raw["speculative"] = {"method": "draft_model", "draft_model": "llama-3.2-1b",
                              "num_speculative_tokens": K, "draft_cost_ratio": C,
                              "acceptance": SLICES["chat"], "acceptance_by_slice": SLICES}
    return Scenario.model_validate(raw)


def _specs() -> list[RequestSpec]:
    names = [n for n in SLICES for _ in range(PER_SLICE)]
    # 100 s apart: a request needs at most OUT steps of T (1 + K C) = 14 s
    return [RequestSpec(i, 100.0 * i, 8, OUT, slice=n) for i, n in enumerate(names)]


def _run(speculative: bool):
    sc = _scenario(speculative)
    setup = build_setup(sc)
    setup.perf = ConstPerf()
    return run_scenario(sc, specs=_specs(), write=False, setup=setup)


@pytest.fixture(scope="module")
def runs():
    return _run(True), _run(False)


def _pmf(name: str) -> np.ndarray:
    return _scenario(True).speculative.acceptance_model(name).pmf(K)


def test_step_times_are_exact_without_queueing(runs):
    spec, _ = runs
    step = T * (1 + K * C)
    for r in spec.sim.recorder.all_requests:
        assert r.status == "completed" and r.num_emitted == OUT
        assert r.first_token_time_s - r.arrival_time_s == pytest.approx(T * (1 + C))
        assert r.finish_time_s - r.first_token_time_s == pytest.approx(r.spec_drafts * step)
    # the ITL samples are the decode steps, one gap per step whatever it emitted
    vals, w = spec.itl_values_s, spec.itl_weights
    assert np.allclose(vals[w > 0], step)
    assert int(w.sum()) == spec.summary["speculative"]["num_drafts"]


@pytest.mark.parametrize("name", list(SLICES))
def test_tokens_per_step_match_closed_form(runs, name):
    spec, _ = runs
    b = spec.summary["speculative"]["by_slice"][name]
    pmf = _pmf(name)
    n = np.arange(K + 1)
    mean = float(n @ pmf) + 1.0
    sd = math.sqrt(float((n - (mean - 1.0)) ** 2 @ pmf))
    se = sd / math.sqrt(b["num_drafts"])
    if SLICES[name]["model"] == "iid":
        a = SLICES[name]["acceptance_rate"]
        assert mean == pytest.approx((1 - a ** (K + 1)) / (1 - a))
        assert mean == pytest.approx(expected_tokens_per_step(a, K))
    assert b["expected_tokens_per_step"] == pytest.approx(mean)
    assert abs(b["mean_acceptance_length"] - mean) < 4 * se
    assert b["mean_acceptance_length_stderr"] == pytest.approx(se, rel=0.1)
    assert b["num_drafts"] > 3000  # enough draws for the 4-sigma bound to be tight


@pytest.mark.parametrize("name", list(SLICES))
def test_accepted_length_distribution_monte_carlo(runs, name):
    spec, _ = runs
    hist = np.asarray(spec.summary["speculative"]["by_slice"][name]["accepted_length_hist"])
    expected = _pmf(name) * hist.sum()
    assert expected.min() > 5  # chi-square validity
    assert chisquare(hist, expected).pvalue > 1e-4
    # and it is not vacuous: a clearly different pmf is rejected
    wrong = np.roll(_pmf(name), 1) * hist.sum()
    assert chisquare(hist, wrong).pvalue < 1e-6


@pytest.mark.parametrize("name", ["code", "chat"])
def test_tpot_speedup_matches_theorem_3_8(runs, name):
    spec, base = runs
    a = SLICES[name]["acceptance_rate"]
    b_spec = spec.summary["by_slice"][name]["tpot_s"]["mean"]
    b_base = base.summary["by_slice"][name]["tpot_s"]["mean"]
    assert b_base == pytest.approx(T)  # plain decoding: one token per step of T
    got = b_base / b_spec
    want = expected_speedup(a, K, C)
    # tolerance: sampling error of the tokens per step, plus the last step of each request
    # (capped at the output length) wasting at most k tokens: <= 1 step in drafts
    sp = spec.summary["speculative"]["by_slice"][name]
    rel_se = sp["mean_acceptance_length_stderr"] / sp["mean_acceptance_length"]
    drafts_per_req = sp["num_drafts"] / PER_SLICE
    tol = 4 * rel_se + 1.0 / drafts_per_req
    assert got == pytest.approx(want, rel=tol)
    assert got < want * (1 + 4 * rel_se)  # truncation only ever lowers the gain
