"""Carrying measured kernel times to shapes the tables did not measure
(:func:`simulator.perf.tables.lookup.affine_transfer`, :func:`beyond_grid`,
:func:`linear_regime_efficiency`) and the graph-replayed elementwise kernels."""
from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import build_perf_model
from simulator.perf.fitted import build_fitted_or_roofline, elementwise_bytes
from simulator.perf.step_shape import StepShape
from simulator.perf.tables.lookup import affine_transfer, beyond_grid, linear_regime_efficiency
from simulator.perf.tables.sets import table_sets


def test_affine_transfer_keeps_a_launch_floor():
    # a launch-bound kernel: 10 us at a 1 us bound (e = 0.1); its linear regime runs at 0.5
    # 4x the bound (3 us more work at e_lin 0.5): 10 + 3 / 0.5 = 16 us, not 40 us (e held)
    assert affine_transfer(10e-6, 1e-6, 4e-6, 0.5) == pytest.approx(16e-6)
    # less work: 10 - 0.5 / 0.5 = 9 us
    assert affine_transfer(10e-6, 1e-6, 0.5e-6, 0.5) == pytest.approx(9e-6)


def test_affine_transfer_holds_an_efficient_kernels_efficiency():
    # e = 0.8 >= e_lin 0.5: the efficiency is held, t = 2 x 80 us
    assert affine_transfer(100e-6, 80e-6, 160e-6, 0.5) == pytest.approx(200e-6)
    # vectorised, element by element
    out = affine_transfer(np.array([10e-6, 100e-6]), np.array([1e-6, 80e-6]),
                          np.array([4e-6, 160e-6]), 0.5)
    assert out == pytest.approx([16e-6, 200e-6])


def test_affine_transfer_never_reaches_zero_below_the_edge():
    # a tiny bound far below the edge: t >= r_to / e_lin (> 0)
    t = affine_transfer(10e-6, 1e-6, 1e-12, 0.5)
    assert t >= 1e-12 / 0.5 and t == pytest.approx(10e-6 - (1e-6 - 1e-12) / 0.5)


def test_beyond_grid_holds_above_and_floors_below():
    # above a measured axis: the edge efficiency held (t_edge x 3)
    assert beyond_grid(10e-6, 3e-6, 1e-6, 0.5) == pytest.approx(30e-6)
    # below: affine (10 - 0.5 / 0.5 = 9 us)
    assert beyond_grid(10e-6, 0.5e-6, 1e-6, 0.5) == pytest.approx(9e-6)
    # an axis measured at one value: affine even upward (10 + 2 / 0.5 = 14 us)
    assert beyond_grid(10e-6, 3e-6, 1e-6, 0.5, unmeasured_axis=True) == pytest.approx(14e-6)
    # no linear efficiency known: the efficiency held everywhere
    assert beyond_grid(10e-6, 0.5e-6, 1e-6, None) == pytest.approx(5e-6)
    out = beyond_grid(np.array([10e-6, 10e-6]), np.array([3e-6, 0.5e-6]),
                      np.array([1e-6, 1e-6]), 0.5)
    assert out == pytest.approx([30e-6, 9e-6])


def test_linear_regime_efficiency_is_the_median_at_the_largest_bounds():
    # 100 measured nodes: the top 5 by bound have efficiencies 0.6, 0.7, 0.8, 0.9, 0.65
    bound = np.arange(100, dtype=float)
    eff = np.full(100, 0.1)
    eff[95:] = [0.6, 0.7, 0.8, 0.9, 0.65]
    e = linear_regime_efficiency(np.log(bound + 1.0), np.log(eff))
    assert e == pytest.approx(0.7)
    # at least 3 nodes; capped at 1; unmeasured nodes left out
    assert linear_regime_efficiency(np.log([1.0, 2.0, 3.0, 4.0]),
                                    np.log([0.5, 2.0, 3.0, 4.0])) == 1.0
    meas = np.array([True, True, True, False])
    assert linear_regime_efficiency(np.log([1.0, 2.0, 3.0, 4.0]), np.log([0.2, 0.3, 0.4, 0.9]),
                                    meas) == pytest.approx(0.3)


def _h100_set():
    sets = [s for s in table_sets(get_gpu("h100-sxm")) if s.name == "vllm-0.14.0"]
    if not sets:
        pytest.skip("the H100 vLLM 0.14.0 table set is not shipped")
    return sets[0]


def test_unmeasured_head_layout_keeps_the_measured_floor():
    # Llama-2-7B's 32 KV heads are not measured (1-8): at batch 1 and a short context the
    # kernel is launch-bound, so its time stays near the measured 32/8 layout's, far from the
    # 4x that holding the efficiency against a 4x larger KV bound gives
    ts = _h100_set()
    kw = {"q_heads": 32, "head_dim": 128, "kv_dtype": "bf16"}
    t8 = ts.attention_decode(1, 64.0, kv_heads=8, **kw)
    t32 = ts.attention_decode(1, 64.0, kv_heads=32, **kw)
    assert t8 <= t32 < 1.5 * t8
    assert "carried to its roofline bound" in ts.nearest_note(
        "attention_decode", kv_heads=32, **kw)
    # where the KV read dominates (large batch x context) the time scales with the bytes
    big8 = ts.attention_decode(256, 8192.0, kv_heads=8, **kw)
    big32 = ts.attention_decode(256, 8192.0, kv_heads=32, **kw)
    assert 3.0 < big32 / big8 < 4.5


def test_prefill_chunk_after_a_cached_prefix_is_not_a_scaled_floor():
    # measured at start = 0 only: a 1-token chunk after 576 cached tokens reads 577 tokens of
    # KV (~0.3 us of bandwidth per layer here), so it costs about the measured short chunk
    ts = _h100_set()
    kw = {"q_heads": 32, "kv_heads": 4, "head_dim": 128, "kv_dtype": "bf16"}
    t0 = ts.attention_prefill(16, 0, **kw)
    t = ts.attention_prefill(1, 576, **kw)
    assert t < 2 * t0


def test_graph_kernel_floor_is_the_fastest_measured_gemms():
    ts = _h100_set()
    fam = ts._family("gemm")
    times = np.sort(np.concatenate([fam.t[i] for k, i in fam.groups.items()
                                    if k[0] == "bf16"]))
    assert ts.graph_kernel_floor_s() == pytest.approx(float(np.median(times[:20])))
    # a transferred (sibling) set has no floor of its own
    assert all(s.graph_kernel_floor_s() is None for s in table_sets(get_gpu("h100-pcie")))


def test_elementwise_in_a_graph_is_four_fused_kernels_at_the_floor():
    m, g = get_model("llama-2-70b"), get_gpu("h100-sxm")
    ops = build_fitted_or_roofline(m, g, 4, "bf16", "bf16")
    ops.graph_kernel_floor_s = 2.5e-6
    byts = elementwise_bytes(m, 4, 24)
    ew = ops.fitted["operators"]["elementwise"]
    bw = g.hbm_bandwidth_bytes_per_s
    want = (2 * max(2.5e-6, byts["add_rmsnorm"] / (bw * ew["rmsnorm"]["e"]))
            + max(2.5e-6, byts["rope"] / (bw * ew["rope"]["e"]))
            + max(2.5e-6, byts["act"] / (bw * ew["act"]["e"])))
    assert ops.elementwise_time(24, graph=True) == pytest.approx(want)
    assert want == pytest.approx(4 * 2.5e-6)  # 24 tokens: every kernel at its floor
    # eager: Vidur's six ops, each above its own (larger) fitted floor
    assert ops.elementwise_time(24, graph=False) > want


def test_a_decode_step_prices_elementwise_in_the_graph():
    m, g = get_model("llama-2-70b"), get_gpu("h100-sxm")
    perf = build_perf_model(m, g, 4, engine_version="0.14.0", max_num_seqs=128,
                            max_num_batched_tokens=2048)
    floor = perf.ops.tables.graph_kernel_floor_s()
    ew = perf.op_times(StepShape(num_decode=24, decode_ctx_total=24 * 700,
                                 num_sampled=24))["elementwise"]
    assert ew == pytest.approx(m.num_layers * 4 * floor)
    assert math.isfinite(ew)
