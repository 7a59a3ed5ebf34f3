"""Acceptance models: how many draft tokens a verification step accepts.

The engine does not run draft or target models; per speculative step and per request it
draws the number of accepted *draft* tokens ``n`` in ``0..k`` (``k`` =
``num_speculative_tokens``) from one of these models, and the request advances by
``n + 1`` tokens (the accepted drafts plus the corrected or bonus token that verification
always emits).

Every model is defined by its accepted-length distribution ``pmf(k)`` over ``0..k``;
sampling, expectations and vLLM-style metrics derive from it, so they can never disagree.

Conventions (vLLM's spec-decode metrics)
----------------------------------------
- *mean acceptance length* = E[tokens emitted per step] = 1 + E[accepted drafts]
  (includes the bonus/corrected token);
- *draft acceptance rate* = E[accepted drafts] / draft tokens verified per step.

Sources
-------
- Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192, Sec. 3.1 and Eq. (1): i.i.d.
  acceptance with rate ``alpha`` gives E[tokens/step] = (1 - alpha^(k+1)) / (1 - alpha).
- Li et al., "EAGLE", ICML 2024, arXiv:2401.15077: per-position acceptance rates
  (motivates :class:`PositionalAcceptance`).
- Cai et al., "Medusa", arXiv:2401.10774, and Li et al., "EAGLE-2", arXiv:2406.16858:
  tree drafts (motivate :class:`TreeAcceptance`).
"""
from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from simulator.speculative.calculator import acceptance_rate_from_tokens_per_step

__all__ = [
    "AcceptanceModel",
    "EmpiricalAcceptance",
    "IIDAcceptance",
    "PositionalAcceptance",
    "TreeAcceptance",
]

_PMF_ATOL = 1e-6


def _check_k(k) -> int:
    # bad values (booleans, non-integers, negatives) are ValueErrors throughout this package
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise ValueError(f"num_speculative_tokens must be an integer >= 0, got {k!r}")
    return int(k)


def _check_rate(name: str, value) -> float:
    # "not (0 <= v <= 1)" also rejects NaN
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not (0.0 <= float(value) <= 1.0)):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _chain_pmf(survival: np.ndarray) -> np.ndarray:
    """pmf over 0..k from ``survival[n] = P(accepted >= n)``, n = 0..k (survival[0] = 1)."""
    pmf = np.empty_like(survival)
    pmf[:-1] = survival[:-1] - survival[1:]
    pmf[-1] = survival[-1]
    return np.clip(pmf, 0.0, None)


class AcceptanceModel(ABC):
    """Base class: a distribution of accepted draft tokens per verification step.

    Subclasses implement :meth:`_pmf`; everything else is derived and cached per ``k``.
    Instances are immutable after construction.
    """

    def __init__(self) -> None:
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @abstractmethod
    def _pmf(self, k: int) -> np.ndarray:
        """Unvalidated pmf over ``0..k`` (length ``k + 1``)."""

    def _tables(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = _check_k(k)
        hit = self._cache.get(k)
        if hit is None:
            pmf = np.asarray(self._pmf(k), dtype=np.float64)
            pmf = pmf / pmf.sum()
            pmf.setflags(write=False)
            cdf = np.cumsum(pmf)
            # from the last length with positive probability on, the cdf is exactly 1, so
            # a uniform in [0, 1) can never land on a zero-probability tail
            cdf[int(np.flatnonzero(pmf > 0.0)[-1]):] = 1.0
            cdf.setflags(write=False)
            hit = (pmf, cdf)
            self._cache[k] = hit
        return hit

    def pmf(self, num_speculative_tokens: int) -> np.ndarray:
        """Probability of accepting exactly ``n`` draft tokens, ``n = 0..k``.

        Parameters
        ----------
        num_speculative_tokens : int
            ``k``, draft tokens proposed per step (chain length; tree depth for trees), >= 0.

        Returns
        -------
        ndarray of float64, shape (k + 1,)
            Read-only; sums to 1.

        Raises
        ------
        ValueError
            If ``k`` is not a non-negative integer.
        """
        return self._tables(num_speculative_tokens)[0]

    def sample_num_accepted(
        self, rng: np.random.Generator, num_speculative_tokens: int, size: int
    ) -> np.ndarray:
        """Draw the number of accepted draft tokens for ``size`` independent steps.

        Uses inverse-CDF sampling with exactly one uniform per draw, so the random stream
        advances by ``size`` regardless of the model (keeps runs reproducible when models
        are swapped).

        Parameters
        ----------
        rng : numpy.random.Generator
            The speculative subsystem's random stream.
        num_speculative_tokens : int
            ``k`` (>= 0).
        size : int
            Number of draws (>= 0), e.g. the number of requests in the decode batch.

        Returns
        -------
        ndarray of int64, shape (size,)
            Accepted draft tokens per step, each in ``0..k``; tokens emitted = value + 1.

        Raises
        ------
        ValueError
            If ``k`` or ``size`` is not a non-negative integer.
        TypeError
            If ``rng`` is not a ``numpy.random.Generator``.
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
            raise ValueError(f"size must be a non-negative integer, got {size!r}")
        cdf = self._tables(num_speculative_tokens)[1]
        return np.searchsorted(cdf, rng.random(int(size)), side="right").astype(np.int64)

    def expected_num_accepted(self, num_speculative_tokens: int) -> float:
        """E[accepted draft tokens per step] (tokens), in ``[0, k]``."""
        pmf = self.pmf(num_speculative_tokens)
        return float(np.dot(np.arange(pmf.shape[0]), pmf))

    def expected_tokens_per_step(self, num_speculative_tokens: int) -> float:
        """E[tokens emitted per verification step] = 1 + E[accepted], in ``[1, k + 1]``.

        Raises
        ------
        ValueError
            If ``k`` is not a non-negative integer.
        """
        return 1.0 + self.expected_num_accepted(num_speculative_tokens)

    def mean_acceptance_length(self, num_speculative_tokens: int) -> float:
        """vLLM's *mean acceptance length* (includes the bonus token); equals
        :meth:`expected_tokens_per_step`."""
        return self.expected_tokens_per_step(num_speculative_tokens)

    def num_verified_tokens(self, num_speculative_tokens: int) -> int:
        """Draft tokens the target verifies per step (for costing the verification pass).

        ``k`` for chain drafts; trees override it.
        """
        return _check_k(num_speculative_tokens)

    def draft_acceptance_rate(self, num_speculative_tokens: int) -> float:
        """vLLM's *draft acceptance rate*: E[accepted] / draft tokens verified (0 if k = 0)."""
        verified = self.num_verified_tokens(num_speculative_tokens)
        if verified == 0:
            return 0.0
        return self.expected_num_accepted(num_speculative_tokens) / verified


class IIDAcceptance(AcceptanceModel):
    """Each draft token is accepted independently with probability ``acceptance_rate``.

    The accepted count is the number of successes before the first failure, capped at
    ``k``: ``P(n) = a^n (1 - a)`` for ``n < k`` and ``P(k) = a^k``. Hence
    ``E[tokens/step] = (1 - a^(k+1)) / (1 - a)`` (``k + 1`` when ``a = 1``).

    Parameters
    ----------
    acceptance_rate : float
        ``alpha`` in ``[0, 1]`` (Leviathan et al.'s ``E[beta]``).

    Raises
    ------
    ValueError
        If the rate is not a number in ``[0, 1]``.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Sec. 3.1, Eq. (1) (the i.i.d. assumption is theirs).
    """

    def __init__(self, acceptance_rate: float) -> None:
        super().__init__()
        self.acceptance_rate = _check_rate("acceptance_rate", acceptance_rate)

    def _pmf(self, k: int) -> np.ndarray:
        return _chain_pmf(self.acceptance_rate ** np.arange(k + 1, dtype=np.float64))

    @classmethod
    def from_mean_acceptance_length(
        cls, mean_acceptance_length: float, num_speculative_tokens: int
    ) -> IIDAcceptance:
        """The i.i.d. model whose mean acceptance length at ``k`` equals the given value.

        Handy for turning a published ``tau`` (e.g. Spec-Bench "mean accepted tokens")
        into an ``alpha``; see
        :func:`simulator.speculative.calculator.acceptance_rate_from_tokens_per_step`.

        Raises
        ------
        ValueError
            If the value is outside ``[1, k + 1]`` or ``k < 1``.
        """

        return cls(acceptance_rate_from_tokens_per_step(
            mean_acceptance_length, num_speculative_tokens))

    def __repr__(self) -> str:
        return f"IIDAcceptance(acceptance_rate={self.acceptance_rate!r})"


class PositionalAcceptance(AcceptanceModel):
    """Per-position conditional acceptance: draft ``i`` (1-based) is accepted with
    probability ``rates[i-1]`` given that drafts ``1..i-1`` were accepted.

    ``P(accepted >= n) = prod_{i<n} rates[i]``. Positions beyond ``len(rates)`` reuse the
    last rate (an assumption; measured rates flatten with depth, see EAGLE's per-position
    figures, e.g. ``[0.79, 0.74, 0.72, 0.73]`` for Vicuna-7B on MT-Bench).

    Parameters
    ----------
    rates : sequence of float
        Non-empty; each in ``[0, 1]``.

    Raises
    ------
    ValueError
        If ``rates`` is empty or holds a value outside ``[0, 1]``.

    References
    ----------
    Li et al., "EAGLE", arXiv:2401.15077 (per-position acceptance rates).
    """

    def __init__(self, rates: Sequence[float]) -> None:
        super().__init__()
        rates = list(rates)
        if not rates:
            raise ValueError("rates must hold at least one acceptance rate")
        self.rates = tuple(_check_rate(f"rates[{i}]", r) for i, r in enumerate(rates))

    def _pmf(self, k: int) -> np.ndarray:
        r = np.array(self.rates[:k] + (self.rates[-1],) * max(0, k - len(self.rates)))
        survival = np.concatenate(([1.0], np.cumprod(r)))
        return _chain_pmf(survival)

    def __repr__(self) -> str:
        return f"PositionalAcceptance(rates={list(self.rates)!r})"


class EmpiricalAcceptance(AcceptanceModel):
    """A measured accepted-length distribution ``P(n)``, ``n = 0..m``.

    ``m`` is the number of speculative tokens the histogram was measured at. Used with
    ``k < m``, the mass above ``k`` collapses onto ``k`` (a step that would have accepted
    more than ``k`` drafts accepts all ``k``). Used with ``k > m``, lengths above ``m`` keep
    probability 0 (no extrapolation beyond what was measured).

    Parameters
    ----------
    probabilities : sequence of float
        ``P(0..m)``, non-negative, summing to 1 within 1e-6. Use :meth:`from_counts` for a
        raw histogram.

    Raises
    ------
    ValueError
        If empty, negative, non-finite, or not summing to 1.
    """

    def __init__(self, probabilities: Sequence[float]) -> None:
        super().__init__()
        p = np.asarray(list(probabilities), dtype=np.float64)
        if p.ndim != 1 or p.size == 0:
            raise ValueError("probabilities must be a non-empty list over accepted lengths 0..m")
        if not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError("probabilities must be finite and non-negative")
        total = float(p.sum())
        if abs(total - 1.0) > _PMF_ATOL:
            raise ValueError(
                f"probabilities sum to {total:.9g}, not 1; pass raw counts to "
                f"EmpiricalAcceptance.from_counts(...) instead"
            )
        self.probabilities = tuple(float(x) for x in p / total)

    @classmethod
    def from_counts(cls, counts: Sequence[float]) -> EmpiricalAcceptance:
        """Build from a histogram: ``counts[n]`` = steps that accepted ``n`` drafts.

        Raises
        ------
        ValueError
            If empty, negative, non-finite, or all zero.
        """
        c = np.asarray(list(counts), dtype=np.float64)
        if c.ndim != 1 or c.size == 0:
            raise ValueError("counts must be a non-empty list over accepted lengths 0..m")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError("counts must be finite and non-negative")
        total = float(c.sum())
        if total <= 0:
            raise ValueError("counts must not all be zero")
        return cls(c / total)

    @property
    def max_accepted(self) -> int:
        """``m``, the largest accepted length in the measured distribution."""
        return len(self.probabilities) - 1

    def _pmf(self, k: int) -> np.ndarray:
        p = np.asarray(self.probabilities)
        out = np.zeros(k + 1)
        if k >= p.size - 1:
            out[: p.size] = p
        else:
            out[:k] = p[:k]
            out[k] = p[k:].sum()
        return out

    def __repr__(self) -> str:
        return f"EmpiricalAcceptance(probabilities={list(self.probabilities)!r})"


class TreeAcceptance(AcceptanceModel):
    """A tree draft: ``depth`` levels, ``width`` candidate tokens verified per level.

    Model and assumptions:

    - each candidate is accepted independently with probability ``acceptance_rate``;
    - a level is accepted if any of its ``width`` candidates is, so with probability
      ``b = 1 - (1 - a)^width``, independently of the other levels (i.e. i.i.d. acceptance
      with rate ``b`` per level);
    - wherever the accepted path goes, ``width`` candidates continue it at the next level.
      That holds for a full ``width``-ary tree; for a token budget of ``width * depth``
      nodes (what :meth:`num_verified_tokens` costs) it is optimistic, as is the
      independence of siblings (real siblings are distinct top-``width`` tokens of one
      draft distribution, and multi-candidate verification is not independent);
    - the accepted length is the first level with no accepted candidate, capped at the
      number of levels used, ``min(k, depth)``.

    With ``width = 1`` this is :class:`IIDAcceptance` with the same rate.

    Parameters
    ----------
    width : int
        Candidates per level (>= 1).
    depth : int
        Levels (>= 1); the most drafts one step can accept.
    acceptance_rate : float
        Per-candidate acceptance probability in ``[0, 1]``.

    Raises
    ------
    ValueError
        If ``width`` or ``depth`` is not a positive integer or the rate is outside [0, 1].

    References
    ----------
    Cai et al., "Medusa", arXiv:2401.10774 (tree attention over candidate trees); Li et al.,
    "EAGLE-2", arXiv:2406.16858 (dynamic draft trees, e.g. 60-token budget at depth 6).
    """

    def __init__(self, width: int, depth: int, acceptance_rate: float) -> None:
        super().__init__()
        for name, v in (("width", width), ("depth", depth)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"tree {name} must be a positive integer, got {v!r}")
        self.width = int(width)
        self.depth = int(depth)
        self.acceptance_rate = _check_rate("acceptance_rate", acceptance_rate)

    @property
    def level_acceptance_rate(self) -> float:
        """``1 - (1 - a)^width``: probability that a level has an accepted candidate."""
        return -math.expm1(self.width * math.log1p(-self.acceptance_rate)) \
            if self.acceptance_rate < 1.0 else 1.0

    def _levels(self, k: int) -> int:
        return min(_check_k(k), self.depth)

    def _pmf(self, k: int) -> np.ndarray:
        levels = self._levels(k)
        out = np.zeros(k + 1)
        out[: levels + 1] = _chain_pmf(
            self.level_acceptance_rate ** np.arange(levels + 1, dtype=np.float64))
        return out

    def num_verified_tokens(self, num_speculative_tokens: int) -> int:
        """``width * min(k, depth)`` draft tokens are verified per step."""
        return self.width * self._levels(num_speculative_tokens)

    def __repr__(self) -> str:
        return (f"TreeAcceptance(width={self.width}, depth={self.depth}, "
                f"acceptance_rate={self.acceptance_rate!r})")
