"""Arrival generators against their stated distributions (scipy.stats KS tests) and
hypothesis properties of the synthetic workload and share assignment."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from simulator.workload import WorkloadConfig, assign_by_share, load_workload
from simulator.workload.config import ArrivalConfig
from simulator.workload.synthetic import arrival_gaps, generate_arrivals

N = 5000


def gaps_of(cfg: WorkloadConfig, seed: int) -> np.ndarray:
    """Inter-arrival gaps of a synthetic workload, including the first (from t = 0)."""
    t = np.array([r.arrival_time_s for r in load_workload(cfg, seed=seed)])
    return np.diff(np.concatenate([[0.0], t]))


def synthetic(arrival: dict, n: int = N, **kw) -> WorkloadConfig:
    return WorkloadConfig.model_validate({
        "synthetic": {"arrival": arrival, "num_requests": n,
                      "prompt_tokens": {"dist": "fixed", "value": 1},
                      "output_tokens": {"dist": "fixed", "value": 1}}, **kw})


@pytest.mark.parametrize("rate", [0.5, 5.5, 200.0])
def test_poisson_gaps_are_exponential(rate):
    gaps = gaps_of(synthetic({"process": "poisson", "rate_rps": rate}), seed=42)
    assert gaps.size == N
    # exponential with mean 1/rate: scipy expon(loc=0, scale=1/rate)
    assert stats.kstest(gaps, "expon", args=(0.0, 1.0 / rate)).pvalue > 0.01
    assert abs(gaps.mean() * rate - 1.0) < 5 / math.sqrt(N)


@pytest.mark.parametrize("rate, cv", [(5.5, 1.1), (2.0, 0.5), (0.3, 1.8)])
def test_gamma_gaps_have_stated_shape_and_cv(rate, cv):
    gaps = gaps_of(synthetic({"process": "gamma", "rate_rps": rate, "cv": cv}), seed=7)
    shape, scale = 1.0 / cv**2, cv**2 / rate   # mean shape*scale = 1/rate, CV 1/sqrt(shape)
    assert stats.kstest(gaps, "gamma", args=(shape, 0.0, scale)).pvalue > 0.01
    assert abs(gaps.std() / gaps.mean() - cv) < 0.1 * cv


def test_very_bursty_gamma_gaps():
    """CV 3 (shape 1/9): ~5% of gaps are below 1e-12 s, so they are checked as drawn; after
    summing into float arrival times such gaps collapse into ties (equal arrival times)."""
    rate, cv = 10.0, 3.0
    gaps = arrival_gaps(ArrivalConfig(process="gamma", rate_rps=rate, cv=cv), N,
                        np.random.default_rng([7, 1]))
    assert stats.kstest(gaps, "gamma", args=(1.0 / cv**2, 0.0, cv**2 / rate)).pvalue > 0.01


def test_gamma_ks_rejects_wrong_cv():
    """The KS check has power: gaps with CV 2 fail against the CV 1 (exponential) law."""
    gaps = gaps_of(synthetic({"process": "gamma", "rate_rps": 1.0, "cv": 2.0}), seed=7)
    assert stats.kstest(gaps, "expon", args=(0.0, 1.0)).pvalue < 1e-6


def test_rate_scale_scales_gaps():
    base = {"process": "gamma", "rate_rps": 2.0, "cv": 1.5}
    g1 = gaps_of(synthetic(base), seed=3)
    g2 = gaps_of(synthetic(base, rate_scale=4.0), seed=3)
    assert np.allclose(g2, g1 / 4.0)


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.05, 500.0), cv=st.floats(0.2, 4.0), seed=st.integers(0, 2**32),
       n=st.integers(1, 300), duration=st.one_of(st.none(), st.floats(0.1, 100.0)))
def test_arrivals_sorted_positive_and_bounded(rate, cv, seed, n, duration):
    cfg = ArrivalConfig(process="gamma", rate_rps=rate, cv=cv)
    t = generate_arrivals(cfg, np.random.default_rng([seed, 1]), n, duration)
    assert t.size <= n
    assert np.all(np.diff(t) >= 0) and np.all(t >= 0)
    if duration is not None:
        assert np.all(t < duration)
    else:
        assert t.size == n


@settings(max_examples=20, deadline=None)
@given(rate=st.floats(0.5, 50.0), duration=st.floats(1.0, 60.0), seed=st.integers(0, 1000))
def test_duration_only_generation_is_deterministic(rate, duration, seed):
    cfg = ArrivalConfig(process="poisson", rate_rps=rate)
    a = generate_arrivals(cfg, np.random.default_rng([seed, 1]), None, duration)
    b = generate_arrivals(cfg, np.random.default_rng([seed, 1]), None, duration)
    assert np.array_equal(a, b) and np.all(a < duration)


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6).filter(
           lambda w: sum(w) > 0.01),
       n=st.integers(0, 500), seed=st.integers(0, 2**32))
def test_assign_by_share_within_one_of_exact(weights, n, seed):
    total = sum(weights)
    shares = {f"s{i}": w / total for i, w in enumerate(weights)}
    labels = assign_by_share(shares, n, np.random.default_rng(seed))
    assert len(labels) == n
    counts = Counter(labels)
    for k, s in shares.items():
        assert math.floor(s * n + 1e-9) <= counts.get(k, 0) <= math.ceil(s * n - 1e-9) + 1
    assert labels == assign_by_share(shares, n, np.random.default_rng(seed))
