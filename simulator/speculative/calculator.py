"""Closed-form speculative-decoding estimates (batch-1, i.i.d. acceptance).

Notation (Leviathan et al. 2023): ``a`` = acceptance rate alpha, ``k`` = gamma, the number
of draft tokens per step, ``c`` = time of one draft step / time of one target step, and
``c_hat`` = arithmetic operations of the draft per token / those of the target.

- Eq. (1):       E[tokens per step] = (1 - a^(k+1)) / (1 - a)
- Theorem 3.8:   walltime improvement = (1 - a^(k+1)) / ((1 - a) (k c + 1))
- Corollary 3.9: if a > c, some k gives an improvement of at least (1 + a) / (1 + c)
- Theorem 3.11:  operations factor = (1 - a)(k c_hat + k + 1) / (1 - a^(k+1))

These hold for one sequence when the verification pass costs one target step (it is
memory-bound) and drafting is ``k`` sequential draft steps; at larger batch sizes the
verification of ``k + 1`` tokens per sequence is no longer free, which is what the
simulator's performance model accounts for. Use these numbers as the batch-1 upper bound.

Source: Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023, arXiv:2211.17192.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas and scipy load lazily: the engine imports this package too
    import pandas as pd

__all__ = [
    "DEFAULT_SWEEP_KS",
    "DEFAULT_SWEEP_RATES",
    "acceptance_rate_from_tokens_per_step",
    "break_even_acceptance_rate",
    "expected_ops_increase",
    "expected_speedup",
    "expected_tokens_per_step",
    "optimal_k",
    "sweep_table",
]

#: Acceptance rates of ``servesim spec --sweep``: 0.30, 0.35, ..., 0.95.
DEFAULT_SWEEP_RATES: tuple[float, ...] = tuple(round(0.30 + 0.05 * i, 2) for i in range(14))
#: Draft lengths of ``servesim spec --sweep``: 1..8.
DEFAULT_SWEEP_KS: tuple[int, ...] = tuple(range(1, 9))

_XTOL = 1e-12


def _rate(a) -> float:
    if isinstance(a, bool) or not isinstance(a, numbers.Real) or not (0.0 <= float(a) <= 1.0):
        raise ValueError(f"acceptance rate must be a number in [0, 1], got {a!r}")
    return float(a)


def _k(k, minimum: int = 0) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < minimum:
        raise ValueError(
            f"num_speculative_tokens must be an integer >= {minimum}, got {k!r}")
    return int(k)


def _cost(c, name: str = "draft cost ratio") -> float:
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {c!r}")
    return float(c)


def _brentq(f, lo: float, hi: float) -> float:
    from scipy.optimize import brentq

    return float(brentq(f, lo, hi, xtol=_XTOL))


def _tokens(a: float, k: int) -> float:
    if a == 1.0:
        return float(k + 1)
    if a == 0.0:
        return 1.0
    # (1 - a^(k+1)) / (1 - a) without cancellation near a = 1
    return -math.expm1((k + 1) * math.log(a)) / (1.0 - a)


def expected_tokens_per_step(a: float, k: int) -> float:
    """Expected tokens emitted per verification step under i.i.d. acceptance.

    ``(1 - a^(k+1)) / (1 - a)``, and ``k + 1`` at ``a = 1``.

    Parameters
    ----------
    a : float
        Acceptance rate in ``[0, 1]``.
    k : int
        Draft tokens per step (``>= 0``).

    Returns
    -------
    float
        Tokens per step, in ``[1, k + 1]``.

    Raises
    ------
    ValueError
        If ``a`` is outside ``[0, 1]`` or ``k`` is not a non-negative integer.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Eq. (1).
    """
    return _tokens(_rate(a), _k(k))


def expected_speedup(a: float, k: int, c: float) -> float:
    """Expected walltime improvement factor over plain decoding (batch 1).

    ``(1 - a^(k+1)) / ((1 - a)(k c + 1))``: tokens per step over the cost of one step
    (``k`` draft steps of relative cost ``c`` plus one target pass).

    Parameters
    ----------
    a : float
        Acceptance rate in ``[0, 1]``.
    k : int
        Draft tokens per step (``>= 0``; ``k = 0`` gives 1).
    c : float
        Draft step time / target step time (``>= 0``, dimensionless).

    Returns
    -------
    float
        Speedup factor (> 1 means faster than no speculation).

    Raises
    ------
    ValueError
        On an out-of-range argument.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Theorem 3.8.
    """
    a, k, c = _rate(a), _k(k), _cost(c)
    return _tokens(a, k) / (k * c + 1.0)


def expected_ops_increase(a: float, k: int, c_hat: float) -> float:
    """Expected factor of arithmetic operations versus plain decoding.

    ``(1 - a)(k c_hat + k + 1) / (1 - a^(k+1))``.

    Parameters
    ----------
    a : float
        Acceptance rate in ``[0, 1]``.
    k : int
        Draft tokens per step (``>= 0``).
    c_hat : float
        Draft operations per token / target operations per token (``>= 0``).

    Returns
    -------
    float
        Operations factor (>= 1 when ``c_hat >= 0``).

    Raises
    ------
    ValueError
        On an out-of-range argument.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Theorem 3.11.
    """
    a, k, c_hat = _rate(a), _k(k), _cost(c_hat, "c_hat")
    return (k * c_hat + k + 1.0) / _tokens(a, k)


def break_even_acceptance_rate(k: int, c: float) -> float | None:
    """The acceptance rate at which speculation neither helps nor hurts (speedup = 1).

    Solves ``(1 - a^(k+1)) / (1 - a) = k c + 1`` for ``a`` in ``[0, 1)`` with
    :func:`scipy.optimize.brentq` (tokens per step increase strictly in ``a``, so the root
    is unique). Above the returned rate speculation is faster.

    Parameters
    ----------
    k : int
        Draft tokens per step (``>= 1``).
    c : float
        Draft step time / target step time (``>= 0``).

    Returns
    -------
    float or None
        The break-even rate; ``0.0`` when ``c = 0`` (any positive rate helps); ``None`` when
        ``c >= 1`` (no rate below 1 reaches a speedup of 1). ``k = 1`` gives exactly ``c``.

    Raises
    ------
    ValueError
        If ``k < 1`` or ``c`` is negative or not finite.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Theorem 3.8 and Corollary 3.9.
    """
    k, c = _k(k, 1), _cost(c)
    target = k * c + 1.0
    if c == 0.0:
        return 0.0
    if target >= k + 1.0:
        return None
    return _brentq(lambda a: _tokens(a, k) - target, 0.0, 1.0)


def optimal_k(a: float, c: float, k_max: int = 16) -> int:
    """The draft length with the highest expected speedup, searched over ``0..k_max``.

    Parameters
    ----------
    a : float
        Acceptance rate in ``[0, 1]``.
    c : float
        Draft step time / target step time (``>= 0``).
    k_max : int, default 16
        Largest draft length considered (``>= 1``).

    Returns
    -------
    int
        The best ``k``; ``0`` means no ``k >= 1`` beats plain decoding. Ties go to the
        smaller ``k`` (cheaper in KV and compute).

    Raises
    ------
    ValueError
        On an out-of-range argument.

    References
    ----------
    Leviathan et al., arXiv:2211.17192, Theorem 3.8 (and their Fig. 3 of optimal gamma).
    """
    a, c, k_max = _rate(a), _cost(c), _k(k_max, 1)
    speedups = [_tokens(a, k) / (k * c + 1.0) for k in range(k_max + 1)]
    best = max(speedups)
    # a tiny relative slack so that float noise does not break ties towards larger k
    return next(k for k, s in enumerate(speedups) if s >= best * (1.0 - 1e-12))


def acceptance_rate_from_tokens_per_step(tokens_per_step: float, k: int) -> float:
    """Invert Eq. (1): the i.i.d. acceptance rate that yields ``tokens_per_step`` at ``k``.

    Useful to turn a published mean acceptance length ``tau`` (tokens per step including
    the bonus token) measured at ``k`` drafts into an ``alpha``.

    Parameters
    ----------
    tokens_per_step : float
        Mean tokens per verification step, in ``[1, k + 1]``.
    k : int
        Draft tokens per step (``>= 1``).

    Returns
    -------
    float
        The acceptance rate in ``[0, 1]``.

    Raises
    ------
    ValueError
        If ``tokens_per_step`` is outside ``[1, k + 1]`` or ``k < 1``.
    """
    k = _k(k, 1)
    t = tokens_per_step
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not (1.0 <= t <= k + 1.0):
        raise ValueError(
            f"tokens per step must lie in [1, k + 1] = [1, {k + 1}], got {tokens_per_step!r}")
    t = float(t)
    if t == 1.0:
        return 0.0
    if t == k + 1.0:
        return 1.0
    return _brentq(lambda a: _tokens(a, k) - t, 0.0, 1.0)


def sweep_table(
    acceptance_rates: Iterable[float] = DEFAULT_SWEEP_RATES,
    ks: Iterable[int] = DEFAULT_SWEEP_KS,
    c: float = 0.0,
) -> pd.DataFrame:
    """Tidy table of tokens per step and speedup over a grid of ``a`` x ``k``.

    Parameters
    ----------
    acceptance_rates : iterable of float
        Rates in ``[0, 1]``.
    ks : iterable of int
        Draft lengths (``>= 1``).
    c : float
        Draft step time / target step time (``>= 0``).

    Returns
    -------
    pandas.DataFrame
        One row per ``(acceptance_rate, num_speculative_tokens)``, ordered by ``k`` then
        rate, with columns ``acceptance_rate``, ``num_speculative_tokens``,
        ``draft_cost_ratio``, ``expected_tokens_per_step``, ``speedup`` and
        ``break_even_acceptance_rate`` (NaN where none exists).

    Raises
    ------
    ValueError
        On an out-of-range value or an empty grid.
    """
    import pandas as pd

    rates = [_rate(a) for a in acceptance_rates]
    k_list = [_k(k, 1) for k in ks]
    c = _cost(c)
    if not rates or not k_list:
        raise ValueError("the sweep needs at least one acceptance rate and one k")
    rows = []
    for k in k_list:
        be = break_even_acceptance_rate(k, c)
        for a in rates:
            tokens = _tokens(a, k)
            rows.append({
                "acceptance_rate": a,
                "num_speculative_tokens": k,
                "draft_cost_ratio": c,
                "expected_tokens_per_step": tokens,
                "speedup": tokens / (k * c + 1.0),
                "break_even_acceptance_rate": math.nan if be is None else be,
            })
    return pd.DataFrame(rows)
