"""_Grid.at_array: bilinear interpolation in u = log2(size), the same value whether a point
is queried alone, in a small query (point by point) or in a large one (array path)."""
import math

import numpy as np
import pytest
from helpers import small_grid

from simulator.perf.tables.grid import _POINT_QUERY, FILL_METHODS, _Grid

_grid = small_grid  # axes a = (1, 4), b = (2, 8, 32): tests/helpers.py


def test_bilinear_value_by_hand():
    g = _grid()
    # a = 2 -> u = 1, weight 1/2 between a-nodes; b = 4 -> u = 2, weight 1/2 between b = 2, 8
    want = 0.25 * (0.0 + 2.0 + 1.0 + 4.0)
    assert g.at_array([2.0, np.array([4.0])])[0] == want
    # b = 16 -> u = 4: halfway between b = 8 and 32; a = 1 on the lower edge
    assert g.at_array([np.array([1.0]), 16.0])[0] == 0.5 * (1.0 + 5.0)
    # beyond the grid: held at the edge node
    assert g.at_array([100.0, np.array([1000.0])])[0] == 6.0


def test_scalar_axis_and_small_and_large_queries_agree():
    g = _grid()
    rng = np.random.default_rng(3)
    b = rng.uniform(0.5, 50.0, size=_POINT_QUERY * 2)
    big = g.at_array([3.0, b])                      # array path
    for k in range(len(b)):
        alone = g.at_array([3.0, b[k:k + 1]])[0]     # point by point
        assert alone == big[k]
        assert alone == g.at([3.0, b[k]])           # the same bits as the scalar query
    small = g.at_array([np.full(_POINT_QUERY, 3.0), b[:_POINT_QUERY]])
    assert np.array_equal(small, big[:_POINT_QUERY])


def test_array_path_equals_point_queries_on_three_axes_inside_and_beyond():
    # three axes, one of them holding 0 (u = log2(1 + size)); sizes inside, on nodes, below
    # and above every axis: each value of a large query is the point query's, to the bit
    rng = np.random.default_rng(11)
    vals = [np.array([1.0, 4.0, 16.0, 64.0]), np.array([0.0, 8.0, 512.0]),
            np.array([2.0, 32.0])]
    raw = rng.normal(size=(4, 3, 2))
    g = _Grid.from_cells(["a", "b", "c"], vals, [False, True, False], raw)
    n = 3 * _POINT_QUERY
    xs = [rng.choice([0.5, 1.0, 4.0, 7.3, 64.0, 90.0], n) * rng.uniform(0.9, 1.1, n),
          rng.choice([0.0, 3.0, 8.0, 100.0, 700.0], n),
          rng.uniform(0.0, 40.0, n)]
    big = g.at_array(xs)
    for k in range(n):
        assert big[k] == g.at([xs[0][k], xs[1][k], xs[2][k]])


# ---------------------------------------------------------------------- the fill of empty cells
def _line(values, lr=None, method="akima"):
    """A 1-d grid over sizes 1, 2, 4, 8 (u = 0, 1, 2, 3) from raw log efficiencies."""
    return _Grid.from_cells(["x"], [np.array([1.0, 2.0, 4.0, 8.0])], [False],
                            np.array(values, float), lr, method=method)


def test_fill_kinds_by_hand():
    # measured at u = 0, 1, 3 with values 0, 1, 1; the cell u = 2 is empty.
    # linear: the chord between u = 1 and 3 -> 1.
    # pchip (Fritsch-Carlson, scipy's end rule): secants 1 and 0 change sign at u = 1 -> slope
    #   0 there; the right end slope ((2h0 + h1) d0 - h0 d1) / (h0 + h1) = -2/3 has the wrong
    #   sign -> 0; Hermite on [1, 3] with both slopes 0 -> 1.
    # akima: secants extended linearly (2, 3 on the left; -1, -2 on the right) give equal
    #   weights, slopes (1 + 0) / 2 = 0.5 at u = 1 and (0 - 1) / 2 = -0.5 at u = 3; Hermite at
    #   the midpoint: (1 + 1) / 2 + 2 / 8 x (0.5 - (-0.5)) = 1.25.
    # natural cubic spline: 6 M1 = 6 (0 - 1) -> M1 = -1; at u = 2: -1/12 + 5/6 + 1/2 = 1.25.
    raw = [0.0, 1.0, np.nan, 1.0]
    want = {"linear": 1.0, "pchip": 1.0, "akima": 1.25, "natural": 1.25}
    for method, v in want.items():
        g = _line(raw, method=method)
        assert math.isclose(g.le[2], v, rel_tol=1e-12), method
        assert g.le[[0, 1, 3]].tolist() == [0.0, 1.0, 1.0]   # measured cells untouched
        assert g.at([4.0]) == g.at_array([np.array([4.0])])[0] == g.le[2]


def test_constant_efficiency_under_a_power_law_bound_is_reproduced():
    # a roofline that is one power law along the axis (t = c x^1.5: log t linear in u) and a
    # constant efficiency: every kind interpolating log time reproduces the line, so the
    # empty cell gets the same efficiency; the -eff kinds interpolate the constant itself
    lr = np.log(3e-6 * np.array([1.0, 2.0, 4.0, 8.0]) ** 1.5)
    le = math.log(0.6)
    for method in FILL_METHODS:
        g = _line([le, le, np.nan, le], lr=lr, method=method)
        assert math.isclose(g.le[2], le, rel_tol=1e-12), method


def test_constant_efficiency_across_a_roofline_knee_with_eff_methods():
    # bound max(x, 4) (memory-bound flat part, then compute-bound): log time is not linear in
    # u, but log efficiency is constant, which the -eff kinds reproduce exactly
    lr = np.log(np.maximum(np.array([1.0, 2.0, 4.0, 8.0]), 4.0))
    for method in [m for m in FILL_METHODS if m.endswith("-eff")]:
        g = _line([-0.5, -0.5, np.nan, -0.5], lr=lr, method=method)
        assert g.le[2] == -0.5 or math.isclose(g.le[2], -0.5, rel_tol=1e-12), method


def test_fill_takes_the_median_over_bracketing_axes():
    # 3 x 3 grid, centre empty: along a (u = 0, 1, 2) the akima estimate of 0, ?, 4 is the
    # chord 2 (two points), along b 10, ?, 20 gives 15; two axes -> their mean 8.5
    raw = np.array([[np.nan, 0.0, np.nan], [10.0, np.nan, 20.0], [np.nan, 4.0, np.nan]])
    g = _Grid.from_cells(["a", "b"], [np.array([1.0, 2.0, 4.0])] * 2, [False, False], raw)
    assert g.le[1, 1] == 8.5


def test_unknown_fill_method_is_refused():
    with pytest.raises(ValueError, match="unknown fill method 'cubic'; known: linear, pchip"):
        _line([0.0, 1.0, np.nan, 1.0], method="cubic")


# ------------------------------------------------------------------ the hybrid fill (default)
def _line3(times, bound=1.0):
    """A 1-d grid over sizes 1, 2, 4 (u = 0, 1, 2) with the middle cell empty: measured times
    ``times`` (s) at sizes 1 and 4 under a constant bound (log efficiency = -log time)."""
    lr = np.log(np.full(3, bound))
    raw = np.array([lr[0] - math.log(times[0]), np.nan, lr[2] - math.log(times[1])])
    return _Grid.from_cells(["x"], [np.array([1.0, 2.0, 4.0])], [False], raw, lr,
                            method="hybrid")


def test_hybrid_averages_the_affine_chord_where_the_slope_allows_it():
    # t(1) = 1 s, t(4) = 2 s: log-log slope ln 2 / ln 4 = 0.5, inside [0, 1].
    # two measured cells -> the Akima kind is the chord in u: ln t(2) = ln 2 / 2 (t = sqrt 2);
    # the affine chord in size: t(2) = 1 + (2 - 1) (2 - 1) / (4 - 1) = 4/3; their mean in log
    want = -0.5 * (0.5 * math.log(2.0) + math.log(4.0 / 3.0))
    assert math.isclose(_line3((1.0, 2.0)).le[1], want, rel_tol=1e-12)
    # t(1) = 1 s, t(4) = 16 s: slope 2 (superlinear, e.g. attention in q): the chord in u only,
    # ln t(2) = ln 16 / 2 -> t = 4 s
    assert math.isclose(_line3((1.0, 16.0)).le[1], -math.log(4.0), rel_tol=1e-12)
    # t(1) = 2 s, t(4) = 1 s: slope -0.5 (time falling with size): the chord in u only
    assert math.isclose(_line3((2.0, 1.0)).le[1], -0.5 * math.log(2.0), rel_tol=1e-12)


def test_hybrid_is_exact_for_a_launch_floor_plus_linear_time():
    # t = 1 + x (s) at sizes 1, 4 (2 s, 5 s; slope ln 2.5 / ln 4 = 0.66): the affine chord is
    # exact (3 s at size 2), the chord in u gives sqrt(2 x 5) = 3.162 s; the hybrid takes
    # their log mean, sqrt(3 x 3.162) = 3.080 s (2.7% high, against 5.4% for the chord)
    got = math.exp(-_line3((2.0, 5.0)).le[1])
    assert math.isclose(got, math.sqrt(3.0 * math.sqrt(10.0)), rel_tol=1e-12)


def test_hybrid_fills_unbracketed_cells_along_diagonals_then_by_mean_hold():
    # 3 x 3 grid over sizes 1, 2, 4 on both axes, measured only at (0, 2) = 0 and (2, 0) = 2
    # (log efficiency; no bound given, so the fill works on it directly). No cell is bracketed
    # along an axis; the centre is bracketed by the anti-diagonal (0, 2)-(2, 0) at equal
    # distances: 1. Then nothing is bracketed anywhere: each empty cell takes the mean over
    # axes of the nearest finite cell on its line: (0, 0): column 0 -> (2, 0) = 2, row 0 ->
    # (0, 2) = 0: 1; (0, 1): column 1 -> centre 1, row 0 -> (0, 2) (the nearer side) 0: 0.5
    nan = np.nan
    raw = np.array([[nan, nan, 0.0], [nan, nan, nan], [2.0, nan, nan]])
    g = _Grid.from_cells(["a", "b"], [np.array([1.0, 2.0, 4.0])] * 2, [False, False], raw,
                         method="hybrid")
    assert g.le[1, 1] == 1.0
    assert g.le[0, 0] == 1.0
    assert g.le[0, 1] == 0.5
    assert np.isfinite(g.le).all()
    # the other methods hold along the first axis that has a measured cell: (0, 0) <- (2, 0)
    old = _Grid.from_cells(["a", "b"], [np.array([1.0, 2.0, 4.0])] * 2, [False, False], raw,
                           method="akima")
    assert old.le[0, 0] == 2.0 and old.le[0, 2] == 0.0


@pytest.mark.parametrize("zero", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("nodes", [(4, 3), (1, 3), (4, 1), (1, 1), (2, 17)])
def test_two_axis_point_query_is_the_general_one_to_the_bit(zero, nodes):
    # GridPoint.at2 / inside2 (the decode-attention query without lists) against at / inside:
    # inside and on nodes, below and above each axis, one-node axes, axes holding 0, NaN
    rng = np.random.default_rng(sum(nodes) + 7 * sum(zero))
    vals = [np.cumsum(rng.uniform(1.0, 3.0, n)) * 2.0 ** np.arange(n) for n in nodes]
    for a, z in enumerate(zero):
        if z:
            vals[a][0] = 0.0
    g = _Grid.from_cells(["a", "b"], vals, list(zero), rng.normal(size=nodes))
    p = g.point
    picks = [np.concatenate([v, rng.uniform(-1.0, 1.5 * v[-1] + 2.0, 60), [np.nan, 0.5]])
             for v in vals]
    for x0 in picks[0]:
        for x1 in picks[1]:
            want = p.at([float(x0), float(x1)])
            got = p.at2(float(x0), float(x1))
            assert got == want or (math.isnan(got) and math.isnan(want)), (x0, x1)
            assert p.inside2(float(x0), float(x1)) == p.inside([float(x0), float(x1)])
