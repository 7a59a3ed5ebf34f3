"""Unit tests of the acceptance models (simulator/speculative/acceptance.py).

Exact pmfs are written out here from their definitions; Monte Carlo references simulate
the Bernoulli chains directly (not through the code under test).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from simulator.speculative.acceptance import (
    EmpiricalAcceptance,
    IIDAcceptance,
    PositionalAcceptance,
    TreeAcceptance,
)


def _iid_pmf(a, k):
    return np.array([a**n * (1 - a) for n in range(k)] + [a**k])


def _chi2_ok(samples, pmf):
    counts = np.bincount(samples, minlength=pmf.size)
    assert counts.size == pmf.size
    support = pmf > 0
    assert counts[~support].sum() == 0
    return chisquare(counts[support], pmf[support] * samples.size).pvalue > 1e-3


# ----------------------------------------------------------------------------- i.i.d.

@pytest.mark.parametrize(("a", "k"), [(0.7, 5), (0.3, 2), (0.9, 8)])
def test_iid_monte_carlo_matches_exact_pmf(a, k):
    model = IIDAcceptance(a)
    samples = model.sample_num_accepted(np.random.default_rng(1), k, 200_000)
    assert samples.dtype == np.int64 and samples.shape == (200_000,)
    assert samples.min() >= 0 and samples.max() <= k
    assert _chi2_ok(samples, _iid_pmf(a, k))
    assert model.pmf(k) == pytest.approx(_iid_pmf(a, k), abs=1e-15)


@pytest.mark.parametrize(("a", "k"), [(0.0, 3), (0.5, 1), (0.8, 5), (0.99, 16), (1.0, 4)])
def test_iid_expected_tokens_closed_form_and_simulation(a, k):
    model = IIDAcceptance(a)
    exact = sum(a**i for i in range(k + 1))  # 1 + a + ... + a^k
    assert model.expected_tokens_per_step(k) == pytest.approx(exact, rel=1e-12)
    assert model.mean_acceptance_length(k) == pytest.approx(exact, rel=1e-12)
    assert model.expected_num_accepted(k) == pytest.approx(exact - 1, abs=1e-12)
    assert model.draft_acceptance_rate(k) == pytest.approx((exact - 1) / k, abs=1e-12)
    s = model.sample_num_accepted(np.random.default_rng(2), k, 100_000) + 1
    sem = max(s.std(ddof=1), 1e-12) / np.sqrt(s.size)
    assert abs(s.mean() - exact) <= 5 * sem + 1e-12


def test_iid_edge_rates():
    rng = np.random.default_rng(0)
    assert IIDAcceptance(0.0).sample_num_accepted(rng, 4, 100).tolist() == [0] * 100
    assert IIDAcceptance(1.0).sample_num_accepted(rng, 4, 100).tolist() == [4] * 100
    assert IIDAcceptance(0.5).sample_num_accepted(rng, 0, 10).tolist() == [0] * 10


def test_iid_from_mean_acceptance_length_round_trip():
    m = IIDAcceptance.from_mean_acceptance_length(3.0, 4)
    assert m.expected_tokens_per_step(4) == pytest.approx(3.0, rel=1e-9)


def test_sampling_is_reproducible_and_uses_one_uniform_per_draw():
    model = IIDAcceptance(0.6)
    a = model.sample_num_accepted(np.random.default_rng(9), 3, 50)
    b = model.sample_num_accepted(np.random.default_rng(9), 3, 50)
    assert a.tolist() == b.tolist()
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    model.sample_num_accepted(r1, 3, 50)
    r2.random(50)
    assert r1.random() == r2.random()
    assert model.sample_num_accepted(r1, 3, 0).shape == (0,)


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda: IIDAcceptance(1.5), ValueError),
        (lambda: IIDAcceptance(float("nan")), ValueError),
        (lambda: IIDAcceptance(True), ValueError),
        (lambda: IIDAcceptance(0.5).pmf(-1), ValueError),
        (lambda: IIDAcceptance(0.5).pmf(2.0), ValueError),
        (lambda: IIDAcceptance(0.5).sample_num_accepted(np.random.default_rng(), 2, -1),
         ValueError),
        (lambda: IIDAcceptance(0.5).sample_num_accepted(np.random.RandomState(0), 2, 1),
         TypeError),
    ],
)
def test_invalid_arguments(call, exc):
    with pytest.raises(exc):
        call()


# ----------------------------------------------------------------------------- positional

def test_positional_matches_bernoulli_chain_simulation():
    rates = [0.79, 0.74, 0.72, 0.73]  # EAGLE-style per-position rates
    k = 6  # positions 5 and 6 reuse the last rate
    model = PositionalAcceptance(rates)
    full = np.array(rates + [rates[-1]] * (k - len(rates)))
    rng = np.random.default_rng(4)
    chain = (rng.random((100_000, k)) < full).cumprod(axis=1).sum(axis=1)
    assert _chi2_ok(chain, model.pmf(k))
    # exact mean: sum over n of P(accepted >= n)
    expected = 1 + sum(np.prod(full[:n]) for n in range(1, k + 1))
    assert model.expected_tokens_per_step(k) == pytest.approx(expected, rel=1e-12)


def test_positional_with_equal_rates_equals_iid():
    assert PositionalAcceptance([0.6] * 3).pmf(5) == pytest.approx(IIDAcceptance(0.6).pmf(5))
    assert PositionalAcceptance([0.6]).pmf(5) == pytest.approx(IIDAcceptance(0.6).pmf(5))


def test_positional_truncates_to_k():
    pmf = PositionalAcceptance([0.5, 0.9, 0.1]).pmf(1)
    assert pmf.tolist() == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError):
        PositionalAcceptance([])
    with pytest.raises(ValueError):
        PositionalAcceptance([0.5, -0.1])


# ----------------------------------------------------------------------------- empirical

def test_empirical_collapses_mass_above_k_and_pads_below():
    m = EmpiricalAcceptance([0.1, 0.2, 0.3, 0.4])  # measured at k = 3
    assert m.max_accepted == 3
    assert m.pmf(3).tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert m.pmf(1).tolist() == pytest.approx([0.1, 0.9])
    assert m.pmf(5).tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.0, 0.0])
    assert m.expected_tokens_per_step(3) == pytest.approx(1 + 0.2 + 0.6 + 1.2)
    s = m.sample_num_accepted(np.random.default_rng(5), 5, 50_000)
    assert s.max() <= 3
    assert _chi2_ok(s, m.pmf(5))


def test_empirical_from_counts_and_errors():
    m = EmpiricalAcceptance.from_counts([10, 30, 60])
    assert m.pmf(2).tolist() == pytest.approx([0.1, 0.3, 0.6])
    for bad in ([0.5, 0.4], [], [1.2, -0.2], [float("nan"), 1.0]):
        with pytest.raises(ValueError):
            EmpiricalAcceptance(bad)
    for bad in ([0, 0], [], [-1, 2]):
        with pytest.raises(ValueError):
            EmpiricalAcceptance.from_counts(bad)


# ----------------------------------------------------------------------------- tree

@pytest.mark.parametrize("a", [0.0, 0.35, 0.8, 1.0])
def test_tree_of_width_one_equals_iid(a):
    tree = TreeAcceptance(width=1, depth=5, acceptance_rate=a)
    assert tree.pmf(5) == pytest.approx(IIDAcceptance(a).pmf(5), abs=1e-15)
    assert tree.num_verified_tokens(5) == 5


def test_tree_matches_candidate_simulation():
    w, d, a = 3, 4, 0.45
    tree = TreeAcceptance(width=w, depth=d, acceptance_rate=a)
    rng = np.random.default_rng(6)
    level_ok = (rng.random((100_000, d, w)) < a).any(axis=2)
    accepted = level_ok.cumprod(axis=1).sum(axis=1)
    assert _chi2_ok(accepted, tree.pmf(d))
    b = 1 - (1 - a) ** w
    assert tree.level_acceptance_rate == pytest.approx(b)
    assert tree.pmf(d) == pytest.approx(_iid_pmf(b, d))


def test_tree_costing_and_depth_cap():
    tree = TreeAcceptance(width=10, depth=6, acceptance_rate=0.5)
    assert tree.num_verified_tokens(6) == 60  # EAGLE-2-like budget: 60 tokens at depth 6
    assert tree.num_verified_tokens(8) == 60  # k beyond the depth is capped
    assert tree.num_verified_tokens(2) == 20
    pmf = tree.pmf(8)
    assert pmf.shape == (9,) and pmf[7:].tolist() == [0.0, 0.0]
    assert tree.draft_acceptance_rate(6) == pytest.approx(tree.expected_num_accepted(6) / 60)
    # wider trees accept more
    means = [TreeAcceptance(w, 6, 0.5).expected_tokens_per_step(6) for w in (1, 2, 4, 8)]
    assert means == sorted(means) and means[0] < means[-1]


def test_tree_rejects_bad_shape():
    for w, d in ((0, 3), (2, 0), (True, 3), (2.5, 3)):
        with pytest.raises(ValueError):
            TreeAcceptance(w, d, 0.5)
