"""Unit tests of the token-level rejection sampler (simulator/speculative/sampler.py).

Reference distributions are computed here from first principles, not by the code under test.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from simulator.speculative.acceptance import IIDAcceptance
from simulator.speculative.sampler import (
    expected_acceptance_rate,
    greedy_verify,
    naive_rejection_sample,
    rejection_sample,
)

V = 8


def _draw_drafts(rng, q, n):
    """(n, k) draft tokens, column i sampled from q[i]."""
    k = q.shape[0]
    out = np.empty((n, k), dtype=np.int64)
    for i in range(k):
        out[:, i] = rng.choice(q.shape[1], size=n, p=q[i])
    return out


def _run(sampler, p, q, n, seed):
    rng = np.random.default_rng(seed)
    drafts = _draw_drafts(rng, q, n)
    first = np.empty(n, dtype=np.int64)
    accepted = np.empty(n, dtype=np.int64)
    for j in range(n):
        toks, na = sampler(p, q, drafts[j], rng)
        first[j] = toks[0]
        accepted[j] = na
        assert toks.shape == (na + 1,)
    return first, accepted


def _chi2_pvalue(samples, probs):
    counts = np.bincount(samples, minlength=probs.size)
    support = probs > 0
    assert counts[~support].sum() == 0, "a token with probability 0 was emitted"
    expected = probs[support] * samples.size
    assert expected.min() >= 5, "test design: chi-square needs expected counts >= 5"
    return chisquare(counts[support], expected).pvalue


def _pairs():
    rng = np.random.default_rng(20230518)
    # 1) random distributions
    p1 = rng.dirichlet(np.full(V, 2.0), size=3)
    q1 = rng.dirichlet(np.full(V, 2.0), size=2)
    # 2) mismatched supports: the draft never proposes tokens 0-1 (only the residual can
    #    emit them) and proposes token 7, which the target never emits
    p2 = np.array([[0.20, 0.15, 0.10, 0.15, 0.10, 0.15, 0.15, 0.00]] * 3)
    q2 = np.array([[0.00, 0.00, 0.25, 0.05, 0.30, 0.10, 0.10, 0.20]] * 2)
    # 3) a peaked draft (low acceptance) against a flat-ish target
    p3 = rng.dirichlet(np.full(V, 5.0), size=3)
    q3 = np.full((2, V), 0.02)
    q3[:, 3] = 1.0 - 0.02 * (V - 1)
    return [(p1, q1), (p2, q2), (p3, q3)]


@pytest.mark.parametrize("case", range(3))
def test_first_emitted_token_follows_target(case):
    p, q = _pairs()[case]
    first, accepted = _run(rejection_sample, p, q, 20_000, seed=100 + case)
    assert (accepted < q.shape[0]).any() and (accepted == q.shape[0]).any()
    assert _chi2_pvalue(first, p[0]) > 1e-3


def test_naive_resampling_is_biased_and_matches_its_analytic_law():
    p, q = _pairs()[0]
    first, _ = _run(naive_rejection_sample, p, q, 20_000, seed=7)
    assert _chi2_pvalue(first, p[0]) < 1e-6
    # what the naive rule does produce: min(p, q) + (1 - beta) p
    beta = np.minimum(p[0], q[0]).sum()
    biased = np.minimum(p[0], q[0]) + (1.0 - beta) * p[0]
    assert _chi2_pvalue(first, biased) > 1e-3


def test_accepted_count_matches_iid_model_with_beta():
    # identical rows -> each draft accepted independently with beta = sum min(p, q)
    rng = np.random.default_rng(3)
    p0, q0 = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    k = 4
    p, q = np.tile(p0, (k + 1, 1)), np.tile(q0, (k, 1))
    _, accepted = _run(rejection_sample, p, q, 20_000, seed=11)
    beta = float(np.minimum(p0, q0).sum())
    pmf = np.array([beta**n * (1 - beta) for n in range(k)] + [beta**k])
    counts = np.bincount(accepted, minlength=k + 1)
    assert chisquare(counts, pmf * accepted.size).pvalue > 1e-3
    assert IIDAcceptance(beta).pmf(k) == pytest.approx(pmf)


def test_identical_distributions_always_accept():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(V), size=4)
    for _ in range(50):
        d = np.array([rng.choice(V, p=p[i]) for i in range(3)])
        toks, n = rejection_sample(p, p[:3], d, rng)
        assert n == 3 and toks[:3].tolist() == d.tolist()


def test_one_hot_distributions_reduce_to_greedy():
    eye = np.eye(V)
    target = np.array([3, 1, 4, 1, 5])
    cases = [np.array([3, 1, 4, 1]), np.array([3, 2, 4, 1]), np.array([0, 1, 4, 1])]
    rng = np.random.default_rng(0)
    for drafts in cases:
        toks, n = rejection_sample(eye[target], eye[drafts], drafts, rng)
        assert toks.tolist() == greedy_verify(target, drafts).tolist()
        assert n == len(toks) - 1


def test_zero_drafts_samples_one_target_token():
    rng = np.random.default_rng(0)
    p = np.zeros((1, V))
    p[0, 6] = 1.0
    toks, n = rejection_sample(p, np.zeros((0, V)), np.zeros(0, dtype=int), rng)
    assert n == 0 and toks.tolist() == [6]


def test_same_seed_same_result():
    p, q = _pairs()[0]
    d = np.array([1, 2])
    a = rejection_sample(p, q, d, np.random.default_rng(5))
    b = rejection_sample(p, q, d, np.random.default_rng(5))
    assert a[1] == b[1] and a[0].tolist() == b[0].tolist()


@pytest.mark.parametrize(
    ("target", "drafts", "expected"),
    [
        ([5, 6, 7, 8], [5, 6, 7], [5, 6, 7, 8]),  # all match: bonus token
        ([5, 6, 7, 8], [5, 9, 7], [5, 6]),  # mismatch at 1: target's token there
        ([5, 6, 7, 8], [0, 6, 7], [5]),  # mismatch at 0
        ([5, 6, 7, 8], [5, 6, 0], [5, 6, 7]),  # mismatch at the last draft
        ([4], [], [4]),  # no drafts
    ],
)
def test_greedy_verify_hand_cases(target, drafts, expected):
    out = greedy_verify(np.array(target), np.array(drafts, dtype=np.int64))
    assert out.tolist() == expected
    assert out.dtype == np.int64


@pytest.mark.parametrize(
    ("target", "drafts", "match"),
    [
        ([1, 2], [1, 2], "shape"),
        ([[1, 2]], [1], "1-D"),
        ([1.0, 2.0], [1], "integer"),
        ([1, 2], [-1], "non-negative"),
        ([], [], "1-D"),
    ],
)
def test_greedy_verify_rejects_bad_input(target, drafts, match):
    with pytest.raises(ValueError, match=match):
        greedy_verify(np.array(target), np.array(drafts))


def _ok():
    p = np.full((3, 4), 0.25)
    q = np.full((2, 4), 0.25)
    return p, q, np.array([0, 3])


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda p, q, d: (p[0], q, d), "p must be 2-D"),
        (lambda p, q, d: (p, q[0], d), "q must be 2-D"),
        (lambda p, q, d: (p[:2], q, d), r"p must have shape \(k\+1, V\)"),
        (lambda p, q, d: (p[:, :3] / p[:, :3].sum(1, keepdims=True), q, d), "p must have shape"),
        (lambda p, q, d: (p, q, d[:1]), "draft_tokens must have shape"),
        (lambda p, q, d: (p, q, d.astype(float)), "integer"),
        (lambda p, q, d: (p, q, np.array([0, 4])), r"\[0, 3\]"),
        (lambda p, q, d: (p * 1.1, q, d), r"p\[0\] sums to"),
        (lambda p, q, d: (p, q + np.array([0.5, -0.5, 0, 0]), d), "negative"),
        (lambda p, q, d: (np.where(p > 0, np.nan, p), q, d), "NaN"),
        (lambda p, q, d: (p, np.array([[0.0, 0.5, 0.5, 0.0], [0.25] * 4]), d), "probability 0"),
    ],
)
def test_rejection_sample_validates(mutate, match):
    p, q, d = mutate(*_ok())
    with pytest.raises(ValueError, match=match):
        rejection_sample(p, q, d, np.random.default_rng(0))


def test_rejection_sample_needs_a_generator():
    with pytest.raises(TypeError, match="Generator"):
        rejection_sample(*_ok(), np.random.RandomState(0))


def test_expected_acceptance_rate_hand_value():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.25, 0.25, 0.25, 0.25])
    assert expected_acceptance_rate(p, q) == pytest.approx(0.25 + 0.25 + 0.2 + 0.0)
    with pytest.raises(ValueError):
        expected_acceptance_rate(p, q[:3])
