"""Unit tests of the closed forms (simulator/speculative/calculator.py).

Published values: Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192 (Table 1 with
c = c_hat = 0; Table 2 "EXP" column = Theorem 3.8 with the profiled c). Independent
references are written out here (geometric sums, the k = 1 and k = 2 quadratics).
"""
from __future__ import annotations

import math

import pytest

from simulator.report.figures import plot_speculative_speedup
from simulator.speculative.calculator import (
    DEFAULT_SWEEP_KS,
    DEFAULT_SWEEP_RATES,
    acceptance_rate_from_tokens_per_step,
    break_even_acceptance_rate,
    expected_ops_increase,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
    sweep_table,
)

# Leviathan et al. 2023, Table 1: (alpha, gamma, ops, speed) with c = c_hat = 0
TABLE1 = [
    (0.6, 2, 1.53, 1.96),
    (0.7, 3, 1.58, 2.53),
    (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69),
    (0.9, 2, 1.11, 2.71),
    (0.9, 10, 1.60, 6.86),
]

# Leviathan et al. 2023, Table 2 (T5-XXL target): (gamma, alpha, c, EXP speedup).
# alpha and c are printed to 2 decimals, so recomputing EXP agrees to ~0.07.
TABLE2 = [
    (7, 0.75, 0.02, 3.2), (7, 0.80, 0.04, 3.3), (7, 0.82, 0.11, 2.5),
    (7, 0.62, 0.02, 2.3), (5, 0.68, 0.04, 2.4), (3, 0.71, 0.11, 2.0),
    (5, 0.65, 0.02, 2.4), (5, 0.73, 0.04, 2.6), (3, 0.74, 0.11, 2.0),
    (5, 0.53, 0.02, 1.9), (3, 0.55, 0.04, 1.8), (3, 0.56, 0.11, 1.6),
]


@pytest.mark.parametrize(("a", "k", "ops", "speed"), TABLE1)
def test_leviathan_table1(a, k, ops, speed):
    assert round(expected_speedup(a, k, 0.0), 2) == speed
    assert round(expected_tokens_per_step(a, k), 2) == speed
    assert round(expected_ops_increase(a, k, 0.0), 2) == ops


@pytest.mark.parametrize(("k", "a", "c", "exp"), TABLE2)
def test_leviathan_table2_expected_column(k, a, c, exp):
    assert expected_speedup(a, k, c) == pytest.approx(exp, abs=0.07)


def test_bigram_example():
    # Leviathan et al. Sec. 4: EnDe with a bigram draft (alpha ~0.2, c = 0): 1.25x at gamma 3
    assert expected_speedup(0.2, 3, 0.0) == pytest.approx(1.25, abs=0.005)


@pytest.mark.parametrize("k", [0, 1, 2, 7, 30])
@pytest.mark.parametrize("a", [0.0, 0.1, 0.5, 0.93, 1.0])
def test_tokens_per_step_is_the_geometric_sum(a, k):
    assert expected_tokens_per_step(a, k) == pytest.approx(sum(a**i for i in range(k + 1)),
                                                           rel=1e-12)


def test_tokens_per_step_is_continuous_at_one():
    assert expected_tokens_per_step(1 - 1e-12, 5) == pytest.approx(6.0, rel=1e-9)
    assert expected_tokens_per_step(1.0, 5) == 6.0


@pytest.mark.parametrize("c", [0.01, 0.05, 0.2, 0.5, 0.9])
def test_break_even_k1_and_k2_closed_forms(c):
    assert break_even_acceptance_rate(1, c) == pytest.approx(c, abs=1e-10)  # 1 + a = 1 + c
    # 1 + a + a^2 = 2c + 1  ->  a = (-1 + sqrt(1 + 8c)) / 2
    assert break_even_acceptance_rate(2, c) == pytest.approx((-1 + math.sqrt(1 + 8 * c)) / 2,
                                                             abs=1e-10)


@pytest.mark.parametrize("k", [1, 3, 5, 8, 16])
@pytest.mark.parametrize("c", [0.02, 0.1, 0.3, 0.99])
def test_speedup_is_one_at_break_even(k, c):
    a = break_even_acceptance_rate(k, c)
    assert 0.0 < a < 1.0
    assert expected_speedup(a, k, c) == pytest.approx(1.0, abs=1e-9)
    assert expected_speedup(min(1.0, a + 1e-3), k, c) > 1.0
    assert expected_speedup(max(0.0, a - 1e-3), k, c) < 1.0


def test_break_even_edges():
    assert break_even_acceptance_rate(4, 0.0) == 0.0
    assert break_even_acceptance_rate(4, 1.0) is None
    assert break_even_acceptance_rate(4, 2.5) is None
    # longer drafts need higher acceptance to pay off
    rates = [break_even_acceptance_rate(k, 0.1) for k in range(1, 9)]
    assert rates == sorted(rates)


def test_corollary_3_9_gamma_one_gain():
    for a, c in [(0.5, 0.1), (0.8, 0.3), (0.31, 0.3)]:
        assert expected_speedup(a, 1, c) == pytest.approx((1 + a) / (1 + c))
        assert expected_speedup(a, 1, c) > 1.0


def test_optimal_k_brute_force_and_edges():
    for a, c in [(0.6, 0.05), (0.8, 0.02), (0.9, 0.1), (0.5, 0.3)]:
        best = max(range(17), key=lambda k: (expected_speedup(a, k, c), -k))
        assert optimal_k(a, c, 16) == best
    assert optimal_k(0.9, 0.0, 12) == 12  # free drafts: longer is better
    assert optimal_k(0.2, 0.5, 16) == 0  # never pays off
    assert optimal_k(0.0, 0.0, 8) == 0  # all speedups equal 1: smallest k wins


def test_acceptance_rate_inversion_round_trip():
    for a, k in [(0.3, 2), (0.75, 5), (0.95, 8)]:
        t = expected_tokens_per_step(a, k)
        assert acceptance_rate_from_tokens_per_step(t, k) == pytest.approx(a, abs=1e-9)
    assert acceptance_rate_from_tokens_per_step(1.0, 3) == 0.0
    assert acceptance_rate_from_tokens_per_step(4.0, 3) == 1.0
    with pytest.raises(ValueError):
        acceptance_rate_from_tokens_per_step(4.5, 3)


@pytest.mark.parametrize(
    "call",
    [
        lambda: expected_tokens_per_step(1.2, 3),
        lambda: expected_tokens_per_step(-0.1, 3),
        lambda: expected_tokens_per_step(0.5, -1),
        lambda: expected_tokens_per_step(0.5, 2.5),
        lambda: expected_speedup(0.5, 3, -0.1),
        lambda: expected_speedup(0.5, 3, math.inf),
        lambda: expected_speedup(0.5, True, 0.1),
        lambda: break_even_acceptance_rate(0, 0.1),
        lambda: optimal_k(0.5, 0.1, 0),
        lambda: sweep_table([], [1], 0.1),
        lambda: sweep_table([0.5], [0], 0.1),
    ],
)
def test_invalid_values_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_sweep_table_and_plot(tmp_path):
    df = sweep_table(DEFAULT_SWEEP_RATES, DEFAULT_SWEEP_KS, 0.05)
    assert len(df) == 14 * 8
    assert list(df.columns) == ["acceptance_rate", "num_speculative_tokens", "draft_cost_ratio",
                                "expected_tokens_per_step", "speedup",
                                "break_even_acceptance_rate"]
    row = df[(df.acceptance_rate == 0.8) & (df.num_speculative_tokens == 5)].iloc[0]
    assert row.speedup == pytest.approx(3.68928 / 1.25)
    assert DEFAULT_SWEEP_RATES[0] == 0.3 and DEFAULT_SWEEP_RATES[-1] == 0.95
    assert df.break_even_acceptance_rate.notna().all()
    assert sweep_table([0.5], [2], 1.5).break_even_acceptance_rate.isna().all()
    out = plot_speculative_speedup(df, tmp_path / "sub" / "sweep.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="lacks columns"):
        plot_speculative_speedup(df.drop(columns=["speedup"]), tmp_path / "x.png")
