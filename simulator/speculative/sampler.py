"""Exact speculative-sampling verification (token level, numpy).

This module is the *reference* for what a speculative step does to tokens. The simulator's
engine never calls it per token (it draws accepted lengths from
:mod:`simulator.speculative.acceptance`); it exists so that invariant 10 of DESIGN.md
("the rejection sampler's outputs follow the target distribution") is a tested fact and so
that acceptance models can be cross-checked against real distributions.

Conventions
-----------
``k`` draft tokens ``x_1..x_k`` were proposed by a draft model; ``q[i]`` is the draft
distribution the token ``draft_tokens[i]`` was sampled from, ``p[i]`` the target model's
distribution at the same position (given the same prefix, including the earlier draft
tokens), and ``p[k]`` the target distribution after all ``k`` drafts (the "bonus" position).
All distributions are over a vocabulary of ``V`` token ids ``0..V-1``.

Sources
-------
- Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative Decoding",
  ICML 2023, arXiv:2211.17192 -- Algorithm 1 (SpeculativeDecodingStep), Definition 3.1
  (beta = sum_x min(p(x), q(x))), Theorem 3.5 (outputs are distributed as ``p``).
- Chen, Borgeaud, Irving, Lespiau, Sifre, Jumper, "Accelerating Large Language Model
  Decoding with Speculative Sampling", arXiv:2302.01318 -- Algorithm 2 and Theorem 1
  (modified rejection sampling recovers the target distribution).
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "PROB_SUM_ATOL",
    "expected_acceptance_rate",
    "greedy_verify",
    "naive_rejection_sample",
    "rejection_sample",
]

#: Absolute tolerance on ``sum(row) == 1`` for every probability row (float32 softmax
#: outputs over large vocabularies are typically within ~1e-6 of 1).
PROB_SUM_ATOL = 1e-5


# --------------------------------------------------------------------------- validation

def _check_rows(name: str, a: np.ndarray) -> None:
    # Fast path first (this runs once per verification step): min >= 0 rejects negatives
    # and NaN, the row-sum test rejects +inf and rows that are not distributions.
    if a.size == 0:  # q of a zero-draft step
        return
    sums = a.sum(axis=1)
    if a.min() >= 0.0 and np.abs(sums - 1.0).max() <= PROB_SUM_ATOL:
        return
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(a < 0.0):
        raise ValueError(f"{name} contains negative probabilities")
    i = int(np.argmax(np.abs(sums - 1.0)))
    raise ValueError(
        f"{name}[{i}] sums to {sums[i]:.9g}, not 1 (tolerance {PROB_SUM_ATOL:g}); "
        f"each row must be a probability distribution over the vocabulary"
    )


def _validate(p, q, draft_tokens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return float64/int64 views of the inputs or raise ``ValueError``."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    d = np.asarray(draft_tokens)
    if p.ndim != 2:
        raise ValueError(f"p must be 2-D with shape (k+1, V), got shape {p.shape}")
    if q.ndim != 2:
        raise ValueError(f"q must be 2-D with shape (k, V), got shape {q.shape}")
    k, vocab = q.shape
    if p.shape != (k + 1, vocab):
        raise ValueError(
            f"p must have shape (k+1, V) = ({k + 1}, {vocab}) to match q of shape {q.shape}, "
            f"got {p.shape}"
        )
    if vocab < 1:
        raise ValueError("the vocabulary must hold at least one token (V >= 1)")
    if d.shape != (k,):
        raise ValueError(f"draft_tokens must have shape (k,) = ({k},), got {d.shape}")
    if k and d.dtype.kind not in "iu":
        raise ValueError(f"draft_tokens must be integer token ids, got dtype {d.dtype}")
    d = d.astype(np.int64, copy=False)
    if k and (d.min() < 0 or d.max() >= vocab):
        raise ValueError(f"draft_tokens must lie in [0, {vocab - 1}], got {d.tolist()}")
    _check_rows("p", p)
    _check_rows("q", q)
    if k:
        q_at = q[np.arange(k), d]
        zero = np.flatnonzero(q_at <= 0.0)
        if zero.size:
            i = int(zero[0])
            raise ValueError(
                f"q[{i}] gives probability 0 to draft token {int(d[i])}: a draft token must "
                f"have been sampled from its draft distribution"
            )
    return p, q, d


def _check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def _sample_categorical(weights: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from non-negative ``weights`` (any positive total) with uniform ``u``.

    Zero-weight ids are never returned.
    """
    cdf = np.cumsum(weights)
    idx = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    if idx >= weights.shape[0]:  # u * total rounded up to the total: last positive id
        idx = int(np.flatnonzero(weights > 0.0)[-1])
    return idx


# --------------------------------------------------------------------------- samplers

def _speculative_step(p, q, draft_tokens, rng, *, residual: bool) -> tuple[np.ndarray, int]:
    _check_rng(rng)
    p, q, d = _validate(p, q, draft_tokens)
    k = q.shape[0]
    # One uniform per draft (accept/reject) and one for the emitted sample: a fixed k+1
    # draws per call, so the stream position does not depend on the outcome.
    u = rng.random(k + 1)
    rows = np.arange(k)
    p_at = p[rows, d]
    # accept x_i with probability min(1, p_i(x)/q_i(x)):  u < p/q  <=>  u * q < p
    rejected = u[:k] * q[rows, d] >= p_at
    n = int(rejected.argmax()) if rejected.any() else k
    if n == k:
        w = p[k]  # all k drafts accepted: bonus token from p_k
    elif residual:
        w = np.maximum(p[n] - q[n], 0.0)
        if not w.sum() > 0.0:
            # Only reachable through rounding (p_n == q_n up to float error, where a
            # rejection has probability ~0); fall back to the target row itself.
            w = p[n]
    else:
        w = p[n]  # the naive (biased) variant
    out = np.empty(n + 1, dtype=np.int64)
    out[:n] = d[:n]
    out[n] = _sample_categorical(w, u[k])
    return out, n


def rejection_sample(
    p: np.ndarray, q: np.ndarray, draft_tokens: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """Verify ``k`` draft tokens exactly (speculative sampling).

    For ``i = 0..k-1``: accept ``draft_tokens[i]`` (``x``) with probability
    ``min(1, p[i, x] / q[i, x])``; at the first rejection, emit a token drawn from the
    residual ``normalize(max(0, p[i] - q[i]))`` and stop. If all ``k`` drafts are accepted,
    emit a bonus token drawn from ``p[k]``. Every call therefore emits ``num_accepted + 1``
    tokens, and each emitted token is distributed exactly as the target distribution at its
    position (Leviathan et al. 2023, Thm 3.5; Chen et al. 2023, Thm 1).

    Parameters
    ----------
    p : ndarray, shape (k+1, V)
        Target distributions, one row per position (rows sum to 1 within
        :data:`PROB_SUM_ATOL`).
    q : ndarray, shape (k, V)
        Draft distributions the draft tokens were sampled from. ``k = 0`` is allowed (the
        step then samples one token from ``p[0]``).
    draft_tokens : ndarray of int, shape (k,)
        The proposed token ids, ``draft_tokens[i] ~ q[i]``; ``q[i, draft_tokens[i]] > 0``.
    rng : numpy.random.Generator
        Source of randomness; each call consumes exactly ``k + 1`` uniforms.

    Returns
    -------
    accepted_tokens : ndarray of int64, shape (num_accepted + 1,)
        The tokens this step emits: the accepted draft prefix followed by the corrected
        (resampled) token or the bonus token.
    num_accepted : int
        Number of accepted *draft* tokens, ``0 <= num_accepted <= k``.

    Raises
    ------
    ValueError
        On inconsistent shapes, non-integer or out-of-range draft tokens, NaN/inf or
        negative probabilities, rows not summing to 1, or a draft token with ``q = 0``.
    TypeError
        If ``rng`` is not a ``numpy.random.Generator``.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Algorithm 1 and Theorem 3.5; Chen et al.,
    arXiv:2302.01318, Algorithm 2.
    """
    return _speculative_step(p, q, draft_tokens, rng, residual=True)


def naive_rejection_sample(
    p: np.ndarray, q: np.ndarray, draft_tokens: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, int]:
    """A deliberately *wrong* variant of :func:`rejection_sample`: resamples from ``p``.

    On a rejection it draws the corrected token from ``p[i]`` instead of the residual
    ``normalize(max(0, p[i] - q[i]))``. The emitted token then has distribution
    ``min(p, q) + (1 - beta) * p`` instead of ``p`` (``beta = sum min(p, q)``), which
    over-weights tokens the draft already favours. It exists only so that a test can show
    that the exactness test detects this bias; do not use it for anything else.

    Parameters, returns and errors are those of :func:`rejection_sample`.
    """
    return _speculative_step(p, q, draft_tokens, rng, residual=False)


def greedy_verify(target_argmax: np.ndarray, draft_tokens: np.ndarray) -> np.ndarray:
    """Verify draft tokens at temperature 0 (greedy decoding).

    The emitted tokens are the longest prefix of ``draft_tokens`` that equals the target's
    argmax tokens, followed by the target's token at the first mismatch, or by the bonus
    token ``target_argmax[k]`` when all ``k`` drafts match. This is the temperature-0 limit
    of :func:`rejection_sample` (``p`` and ``q`` one-hot).

    Parameters
    ----------
    target_argmax : ndarray of int, shape (k+1,)
        The target model's greedy token at each of the ``k+1`` positions.
    draft_tokens : ndarray of int, shape (k,)
        The proposed token ids.

    Returns
    -------
    ndarray of int64, shape (num_accepted + 1,)
        The emitted tokens; ``num_accepted = len(result) - 1`` drafts were accepted.

    Raises
    ------
    ValueError
        If the arrays are not 1-D integer arrays of lengths ``k+1`` and ``k``, or hold
        negative token ids.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Section 2 (greedy decoding as the ``T = 0`` case).
    """
    t = np.asarray(target_argmax)
    d = np.asarray(draft_tokens)
    if t.ndim != 1 or t.shape[0] < 1:
        raise ValueError(f"target_argmax must be 1-D with shape (k+1,), got shape {t.shape}")
    k = t.shape[0] - 1
    if d.shape != (k,):
        raise ValueError(
            f"draft_tokens must have shape (k,) = ({k},) to match target_argmax of shape "
            f"{t.shape}, got {d.shape}"
        )
    for name, a in (("target_argmax", t), ("draft_tokens", d)):
        if a.size and a.dtype.kind not in "iu":
            raise ValueError(f"{name} must be integer token ids, got dtype {a.dtype}")
        if a.size and a.min() < 0:
            raise ValueError(f"{name} must hold non-negative token ids, got {a.tolist()}")
    t = t.astype(np.int64, copy=False)
    mismatch = np.flatnonzero(t[:k] != d.astype(np.int64, copy=False))
    n = int(mismatch[0]) if mismatch.size else k
    return t[: n + 1].copy()


def expected_acceptance_rate(p: np.ndarray, q: np.ndarray) -> float:
    """The acceptance probability ``beta = sum_x min(p(x), q(x))`` of one draft token.

    With ``x ~ q`` and acceptance probability ``min(1, p(x)/q(x))``, a draft token is
    accepted with probability ``beta``; ``alpha = E[beta]`` over positions is the i.i.d.
    acceptance rate of :class:`simulator.speculative.acceptance.IIDAcceptance`.

    Parameters
    ----------
    p, q : ndarray, shape (V,)
        Target and draft distributions.

    Returns
    -------
    float
        ``beta`` in ``[0, 1]`` (dimensionless); ``1 - beta`` is the total-variation distance.

    Raises
    ------
    ValueError
        If ``p`` and ``q`` are not 1-D probability vectors of the same length.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Definition 3.1 and Lemma 3.3.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.ndim != 1 or p.shape != q.shape:
        raise ValueError(f"p and q must be 1-D of equal length, got {p.shape} and {q.shape}")
    _check_rows("p", p[None, :])
    _check_rows("q", q[None, :])
    return float(np.minimum(p, q).sum())
