"""_Grid.at_array: bilinear interpolation in u = log2(size), the same value whether a point
is queried alone, in a small query (plain-Python path) or in a large one (numpy path)."""
import math

import numpy as np

from simulator.perf.table_grid import _SMALL_QUERY, _Grid


def _grid():
    # axes: a = (1, 4) -> u = (0, 2); b = (2, 8, 32) -> u = (1, 3, 5); values v[a, b]
    raw = np.array([[0.0, 1.0, 5.0], [2.0, 4.0, 6.0]])
    return _Grid.from_cells(["a", "b"], [np.array([1.0, 4.0]), np.array([2.0, 8.0, 32.0])],
                            [False, False], raw)


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
    b = rng.uniform(0.5, 50.0, size=_SMALL_QUERY * 4)
    big = g.at_array([3.0, b])                      # numpy path
    for k in range(len(b)):
        alone = g.at_array([3.0, b[k:k + 1]])[0]     # plain-Python path, remembered a = 3
        assert alone == big[k]
        assert math.isclose(alone, g.at([3.0, b[k]]), rel_tol=1e-12, abs_tol=1e-12)
    small = g.at_array([np.full(_SMALL_QUERY, 3.0), b[:_SMALL_QUERY]])
    assert np.array_equal(small, big[:_SMALL_QUERY])
