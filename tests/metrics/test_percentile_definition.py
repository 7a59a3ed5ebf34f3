"""The one percentile definition of servesim (:func:`simulator.metrics.summary.weighted_percentiles`,
the inverse empirical CDF, Hyndman & Fan definition 1) against numpy >= 2.

Finding (why the hand-written function stays): numpy's ``np.percentile(v, q, weights=w,
method="inverted_cdf")`` gives the same values for integer weights, for unequal float weights
and with zero weights, but not for *equal non-unit* weights: it accumulates the float weights
(``3 x 0.95 = 2.8499999999999996 < 0.5 x 5.7``) and can land one sample past the value the
definition picks. servesim treats equal weights as unit weights, so a weighted sample of equal
weights gives exactly the unweighted ``np.percentile(v, q, method="inverted_cdf")``.
"""
from __future__ import annotations

import numpy as np
import pytest

from simulator.metrics.summary import weighted_percentiles

NUMPY2 = pytest.mark.skipif(int(np.__version__.split(".")[0]) < 2,
                            reason="np.percentile(weights=...) needs numpy >= 2")
QS = np.array([0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0])


def _cases(kind: str, n_cases: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(n_cases):
        n = int(rng.integers(1, 60))
        v = np.round(rng.exponential(size=n), int(rng.integers(0, 4)))  # with ties
        if kind == "integer":
            w = rng.integers(1, 20, n).astype(float)
        elif kind == "float":
            w = rng.uniform(0.01, 5.0, n)
        else:  # some zero weights
            w = rng.integers(0, 3, n).astype(float)
            w[0] = max(w[0], 1.0)
        yield v, w


def test_by_hand():
    """P(q) = the smallest value whose cumulative weight reaches q/100 of the total."""
    v = [10.0, 20.0, 30.0, 40.0]
    assert weighted_percentiles(v, None, [0, 25, 50, 51, 100]).tolist() == \
        [10.0, 10.0, 20.0, 30.0, 40.0]
    # weights 3, 1, 1, 1 (total 6): the first value alone reaches half of the weight
    assert weighted_percentiles(v, [3, 1, 1, 1], [50, 60, 100]).tolist() == [10.0, 20.0, 40.0]
    # zero weight and NaN values are not part of the sample
    assert weighted_percentiles([5.0, 1.0, np.nan], [0, 1, 1], [0, 100]).tolist() == [1.0, 1.0]


@NUMPY2
@pytest.mark.parametrize("kind", ["integer", "float", "zero"])
def test_numpy_weighted_percentile_agrees(kind):
    for v, w in _cases(kind):
        ours = weighted_percentiles(v, w, QS)
        theirs = np.percentile(v, QS, weights=w, method="inverted_cdf")
        np.testing.assert_array_equal(ours, theirs)


def test_integer_weights_equal_the_expanded_sample():
    for v, w in _cases("integer", 100, seed=1):
        expanded = np.repeat(v, w.astype(int))
        np.testing.assert_array_equal(weighted_percentiles(v, w, QS),
                                      np.percentile(expanded, QS, method="inverted_cdf"))


def test_equal_weights_equal_the_unweighted_definition():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        v = rng.exponential(size=n)
        c = float(rng.uniform(0.05, 3.0))
        np.testing.assert_array_equal(weighted_percentiles(v, np.full(n, c), QS),
                                      np.percentile(v, QS, method="inverted_cdf"))


@NUMPY2
def test_where_numpy_weighted_differs():
    """Six equal weights of 0.95: the median is the 3rd value by the definition (3 of 6
    samples reach half the weight); numpy's weighted path accumulates 3 x 0.95 =
    2.8499999999999996 < 2.85 and returns the 4th."""
    v = np.arange(1.0, 7.0)
    w = np.full(6, 0.95)
    assert weighted_percentiles(v, w, 50)[0] == 3.0
    assert np.percentile(v, 50, method="inverted_cdf") == 3.0
    assert np.percentile(v, 50, weights=w, method="inverted_cdf") == 4.0
