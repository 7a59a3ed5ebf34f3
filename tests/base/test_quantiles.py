"""Selection percentiles (metrics/quantiles.py) equal the sorting path of weighted_percentiles."""
import numpy as np
import pytest

from simulator.base import quantiles
from simulator.base.quantiles import select_percentiles
from simulator.metrics.summary import weighted_percentiles

QS = np.array([0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0])


def _sorted_path(v, w, q):
    """The definition by hand: expand integer weights, take inverse-CDF percentiles."""
    return np.percentile(np.repeat(v, w), q, method="inverted_cdf")


@pytest.mark.parametrize("seed", range(6))
def test_selection_equals_expanded_sample(seed, monkeypatch):
    monkeypatch.setattr(quantiles, "_CHUNK", 97)        # many chunks, ragged last one
    monkeypatch.setattr(quantiles, "_BUCKET_BITS", 4)   # few buckets: many values per bucket
    rng = np.random.default_rng(seed)
    n = 2_000
    v = rng.lognormal(-4.0, 1.0, n)
    v[rng.integers(0, n, 200)] = v[5]                   # ties across chunks
    if seed % 2:
        v[:10] = 0.0                                    # exact zeros are allowed
    w = rng.integers(1, 6, n).astype(np.int64)
    got = select_percentiles(v, w, QS)
    assert got is not None
    np.testing.assert_array_equal(got, _sorted_path(v, w, QS))


def test_long_sample_takes_selection_and_matches_sort(monkeypatch):
    rng = np.random.default_rng(7)
    v = rng.gamma(2.0, 0.01, 50_000)
    w = rng.integers(1, 4, v.size).astype(np.int64)
    sorted_result = weighted_percentiles(v, w, QS)       # below the threshold: sorts
    calls = []
    real = quantiles.select_percentiles
    monkeypatch.setattr(quantiles, "select_percentiles", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(quantiles, "SELECT_MIN_SAMPLES", 1_000)
    np.testing.assert_array_equal(weighted_percentiles(v, w, QS), sorted_result)
    assert calls == [1]


def test_not_applicable_returns_none():
    v = np.array([0.5, -1.0, 2.0])
    assert select_percentiles(v, np.ones(3, dtype=np.int64), QS) is None      # negative value
    v = np.array([0.5, -0.0, 2.0])
    assert select_percentiles(v, np.ones(3, dtype=np.int64), QS) is None      # -0.0
    assert select_percentiles(np.array([0.5, 1.0]), np.array([0.5, 1.5]), QS) is None  # float w


def test_single_value():
    got = select_percentiles(np.array([0.25]), np.array([3], dtype=np.int64), QS)
    np.testing.assert_array_equal(got, np.full(QS.shape, 0.25))


def test_no_percentiles_asked_of_a_long_sample_gives_none():
    """An empty ``qs`` of a sample long enough to select (review finding: the few-buckets
    path indexed the first of no buckets)."""
    v = np.linspace(0.0, 1.0, 1 << 17)
    got = weighted_percentiles(v, np.ones_like(v), [])
    assert got.shape == (0,)
