"""The per-step lookups of the event loop answer what the general code answers, bit for bit:
a query along one grid line answered point by point against the array path,
``_Grid.at`` with integer sizes against the value by hand, and
``StepTimeModel.gpu_step_time`` against the sum of ``gpu_op_times``."""
from __future__ import annotations

import numpy as np
from helpers import small_grid

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import build_perf_model, get_engine_profile
from simulator.perf.step_shape import StepShape
from simulator.perf.tables.grid import _POINT_QUERY

_grid = small_grid  # axes a = (1, 4), b = (2, 8, 32): tests/helpers.py


def test_line_query_by_hand_either_axis():
    g = _grid()
    # a = 2 (u = 1: halfway), b = 4 (u = 2: halfway between 2 and 8): the mean of 0, 2, 1, 4
    assert g.at_array([2.0, np.array([4.0, 4.0])]).tolist() == [1.75, 1.75]
    assert g.at_array([np.array([2.0]), 4.0]).tolist() == [1.75]
    # b = 16 (u = 4: halfway between 8 and 32) on the lower a edge (1 and 5) and beyond the
    # upper one (a = 100 held at a = 4: 4 and 6)
    assert g.at_array([np.array([1.0, 100.0]), 16.0]).tolist() == [3.0, 5.0]


def test_line_query_equals_the_numpy_and_corner_paths():
    g = _grid()
    rng = np.random.default_rng(7)
    b = rng.uniform(0.5, 50.0, size=_POINT_QUERY)
    a = rng.uniform(0.5, 6.0, size=_POINT_QUERY)
    line_b = g.at_array([3.0, b])                           # a scalar, b varies
    both = g.at_array([np.full(len(b), 3.0), b])            # two arrays: the general path
    assert line_b.tolist() == both.tolist()
    line_a = g.at_array([a, 16.0])                          # a varies, b scalar
    assert line_a.tolist() == g.at_array([a, np.full(len(a), 16.0)]).tolist()
    long_b = g.at_array([3.0, np.concatenate([b, b])])      # past _POINT_QUERY: array path
    assert long_b[:len(b)].tolist() == line_b.tolist()


def test_at_with_remembered_integer_sizes_by_hand():
    g = _grid()
    for _ in range(2):   # the same answer every time
        assert g.at([2, 4]) == 1.75
        assert g.at([2.0, 4.0]) == 1.75
        assert g.at([1, 16]) == 3.0       # lower a edge: one axis interpolated
        assert g.at([4, 32]) == 6.0       # a node: nothing interpolated
        assert g.at([100, 1]) == 2.0      # clipped to the edges


def test_gpu_step_time_is_the_sum_of_the_op_times():
    m = build_perf_model(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1,
                         engine=get_engine_profile("vllm-v1"))
    shapes = [StepShape(prefill_q=[700], prefill_start=[0], num_decode=12,
                        decode_ctx_total=12_345, num_sampled=13),
              StepShape(prefill_q=[300, 2048], prefill_start=[4096, 0], num_sampled=1),
              StepShape(num_decode=24, decode_ctx_total=24 * 1500, num_sampled=24)]
    for s in shapes:
        want = float(sum(m.gpu_op_times(s).values()))
        assert m.gpu_step_time(s) == want
        assert m.gpu_step_time(s) == want   # remembered token terms: the same bits


def test_compiled_decode_steps_equal_the_array_path_inside_and_beyond_the_grid():
    # the measured H100 decode-attention grid spans ctx_mean 2..65,536 and batch 1..2,048:
    # pairs inside, on its edges and beyond it (a one-token context, a batch of 3,000)
    m = build_perf_model(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1,
                         engine=get_engine_profile("vllm-v1"))
    assert m.decode_times.attention is not None and m.decode_times.engine is not None
    rng = np.random.default_rng(5)
    cases = [(1, [1, 2, 3, 65_536, 70_000]), (3_000, [3_000, 3_000 * 900]),
             *((int(n), sorted(rng.integers(n, n * 9_000, 20).tolist()))
               for n in rng.integers(1, 300, 12))]
    for n, ctx in cases:
        want = m._decode_step_times(n, np.array(ctx)).tolist()   # numpy, no memo
        assert m.decode_step_times_list(n, ctx) == want
        assert m.decode_step_times_list(n, ctx) == want          # remembered: the same
        for c, w in zip(ctx, want):
            assert m.decode_times.one(n, c) == w
            # a mixed step's decode attention (compiled) is the backend's scalar sum
            assert m.kernels.decode_attention(n, c, 1) == m.ops.attention_decode_total(n, c)
