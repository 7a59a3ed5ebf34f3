"""Invariant 10 (DESIGN.md): speculative exactness.

Text generated through speculative verification must be distributed exactly as text
sampled from the target model token by token (Leviathan et al. 2023, arXiv:2211.17192,
Thm 3.5; Chen et al. 2023, arXiv:2302.01318, Thm 1).

The harness uses a *prefix-dependent* target: a first-order Markov chain ``T`` (the next
token's distribution depends on the previous token) drafted by a different chain ``Q``.
Each step proposes ``k`` tokens from ``Q``, asks the target for the ``k + 1`` conditional
rows along the draft, verifies with :func:`rejection_sample` and continues from the last
emitted token. Exactness then means: every transition ``a -> b`` in the generated stream
(across step boundaries too) occurs with probability ``T[a, b]``, tested with one
chi-square over all transition counts. Non-vacuity: the test asserts that the
first-position rejection, partial acceptance and bonus paths all ran many times, that the
residual produced tokens the draft can never propose, and that the same harness rejects
the naive (resample-from-p) rule.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import chi2

from simulator.speculative.sampler import greedy_verify, naive_rejection_sample, rejection_sample

V, K = 6, 3

# target chain T and draft chain Q (rows: previous token)
T = np.array([
    [0.30, 0.25, 0.20, 0.15, 0.10, 0.00],
    [0.05, 0.40, 0.05, 0.20, 0.20, 0.10],
    [0.25, 0.05, 0.30, 0.05, 0.05, 0.30],
    [0.10, 0.10, 0.10, 0.40, 0.20, 0.10],
    [0.20, 0.20, 0.20, 0.10, 0.15, 0.15],
    [0.35, 0.05, 0.10, 0.10, 0.10, 0.30],
])
Q = np.array([
    [0.40, 0.30, 0.10, 0.00, 0.00, 0.20],  # proposes 5 (T forbids it), never 3 or 4
    [0.05, 0.60, 0.05, 0.10, 0.10, 0.10],
    [0.30, 0.00, 0.40, 0.00, 0.00, 0.30],  # never proposes 1, 3, 4
    [0.15, 0.15, 0.15, 0.25, 0.15, 0.15],
    [0.20, 0.20, 0.20, 0.10, 0.15, 0.15],  # equals T's row: always accepted
    [0.50, 0.00, 0.10, 0.10, 0.10, 0.20],
])
Q_CDF = np.cumsum(Q, axis=1)


def _generate(sampler, steps, seed):
    """Run ``steps`` speculative steps from token 0; return (tokens, accepted, residual_only)."""
    rng = np.random.default_rng(seed)
    tokens = [0]
    accepted = np.empty(steps, dtype=np.int64)
    residual_only = 0  # emitted corrections the draft could not have proposed
    for s in range(steps):
        prev = tokens[-1]
        drafts = np.empty(K, dtype=np.int64)
        ctx = prev
        for i in range(K):
            drafts[i] = min(int(np.searchsorted(Q_CDF[ctx], rng.random(), side="right")), V - 1)
            ctx = int(drafts[i])
        ctx_rows = np.concatenate(([prev], drafts))  # context of each of the K+1 positions
        out, n = sampler(T[ctx_rows], Q[ctx_rows[:K]], drafts, rng)
        accepted[s] = n
        if n < K and Q[ctx_rows[n], out[n]] == 0.0:
            residual_only += 1
        tokens.extend(int(t) for t in out)
    return np.asarray(tokens), accepted, residual_only


def _transition_test(tokens):
    """Chi-square p-value of all transitions against T, and the transition counts."""
    counts = np.zeros((V, V), dtype=np.int64)
    np.add.at(counts, (tokens[:-1], tokens[1:]), 1)
    stat, dof = 0.0, 0
    for a in range(V):
        support = T[a] > 0
        expected = counts[a].sum() * T[a, support]
        assert expected.min() >= 5
        stat += float((((counts[a, support] - expected) ** 2) / expected).sum())
        dof += int(support.sum()) - 1
    return chi2.sf(stat, dof), counts


def test_speculative_generation_follows_target_chain():
    tokens, accepted, residual_only = _generate(rejection_sample, 40_000, seed=10)
    pvalue, counts = _transition_test(tokens)
    assert pvalue > 1e-3

    # --- non-vacuity: every path of the sampler ran, many times
    steps = accepted.size
    assert (accepted == 0).sum() > 0.05 * steps  # rejected at the first draft
    assert ((accepted > 0) & (accepted < K)).sum() > 0.05 * steps  # partial acceptance
    assert (accepted == K).sum() > 0.05 * steps  # all accepted: bonus token from p_K
    assert residual_only > 1000  # residual resampling emitted tokens q cannot propose
    assert counts[0, 5] == 0  # T forbids 0 -> 5 although the draft proposes it
    assert tokens.size > 2 * steps  # speculation really emitted several tokens per step


def test_harness_detects_the_naive_rule():
    tokens, _, _ = _generate(naive_rejection_sample, 15_000, seed=11)
    pvalue, _ = _transition_test(tokens)
    assert pvalue < 1e-6


def test_greedy_speculation_reproduces_greedy_decoding():
    # temperature 0: the speculative output equals plain greedy decoding, token for token
    nxt = T.argmax(axis=1)
    rng = np.random.default_rng(12)
    plain = [0]
    for _ in range(400):
        plain.append(int(nxt[plain[-1]]))
    spec, paths = [0], set()
    while len(spec) < len(plain):
        prev = spec[-1]
        # a draft that is right most of the time
        drafts, ctx = [], prev
        for _ in range(K):
            ctx = int(nxt[ctx]) if rng.random() < 0.7 else int(rng.integers(V))
            drafts.append(ctx)
        ctx_rows = [prev, *drafts]
        out = greedy_verify(nxt[ctx_rows], np.array(drafts))
        paths.add(min(len(out) - 1, K))
        spec.extend(int(t) for t in out)
    assert spec[: len(plain)] == plain
    assert paths == set(range(K + 1))  # mismatches at every position and the bonus path
