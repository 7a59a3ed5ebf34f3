"""The per-step lookups of the event loop answer what the general code answers, bit for bit:
a query along one grid line answered point by point against the array path,
``_Grid.at`` with integer sizes against the value by hand, and
``StepTimeModel.gpu_step_time`` against the sum of ``gpu_op_times``."""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import small_grid

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import build_perf_model, get_engine_profile
from simulator.perf.step_shape import StepShape
from simulator.perf.step_times import DecodeAttention, DecodeStepTimes, EngineTerms
from simulator.perf.tables.grid import _POINT_QUERY
from simulator.perf.tables.grid_point import GridPoint

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


@pytest.mark.parametrize("ctx_first", [True, False])
@pytest.mark.parametrize("async_scheduling", [True, False])
def test_decode_run_times_equal_the_list_point_query_by_hand(ctx_first, async_scheduling):
    # DecodeStepTimes.times computes the batch axis's part of a run once (batch_part) and
    # each step's ctx part (total_inside), unremembered: the same bits as GridPoint.at's list
    # query, step by step, with a full and a sliding-window layer group, either axis order,
    # batches and contexts inside, on the edges of and beyond the grid (beyond: ``beyond``)
    rng = np.random.default_rng(11)
    ctx_sizes, batch_sizes = [2.0, 8.0, 64.0, 512.0, 4096.0], [1.0, 2.0, 4.0, 16.0, 32.0]
    sizes = [ctx_sizes, batch_sizes] if ctx_first else [batch_sizes, ctx_sizes]
    flat = rng.uniform(-12.0, -6.0, 25).tolist()
    point = GridPoint(flat, [[math.log2(x) for x in s] for s in sizes], [5, 1], [False, False],
                      [s[0] for s in sizes], [s[-1] for s in sizes])
    ca, ba = (0, 1) if ctx_first else (1, 0)

    def beyond(n, mean):
        return 1e-6 * mean + 1e-5 * n

    groups = [(0, 3), (64, 2)]
    att = DecodeAttention(point, ca, ba, groups, beyond)
    eng = EngineTerms((1e-3, 2e-6, 1e-7), (1e-4, 3e-7, 0.0), async_scheduling)

    def fixed(n):
        return 1e-4 * n + 2e-3

    times = DecodeStepTimes(fixed, None, att, eng)
    for b in (1, 3, 16, 32, 40):
        ctx = sorted(rng.integers(1, 6_000 * b, 30).tolist()) + [2 * b, 4096 * b, 4097 * b]
        want = []
        for c in ctx:
            total = 0.0
            for w, layers in groups:
                cc = c if w == 0 else min(c, b * w)
                xs = [0.0, 0.0]
                xs[ca], xs[ba] = float(cc) / b, float(b)
                v = math.exp(point.at(xs)) if point.inside(xs) else beyond(b, xs[ca])
                total = total + layers * v
            gpu = fixed(b) + total
            cpu = 1e-3 + 2e-6 * b + 1e-7 * b
            sync = 1e-4 + 3e-7 * b + 0.0 * b
            want.append(((cpu if cpu > gpu else gpu) + sync) if async_scheduling  # noqa: FURB136
                        else gpu + cpu + sync)
        assert times.times(b, ctx) == want
        assert [times.one(b, c) for c in ctx] == want   # the remembered path: the same
