"""Expert-load skew: the busiest EP rank's expert rows scale the expert GEMMs, not the
gathered activations."""
from __future__ import annotations

import pytest

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf.roofline import RooflinePerfModel


def _ops(skew):
    m, g = get_model("qwen3-30b-a3b"), get_gpu("h100-sxm")
    return RooflinePerfModel(m, g, 1).with_expert_parallel(2, skew)


def test_skew_scales_the_compute_bound_expert_rows():
    base, hot = _ops(1.0), _ops(1.5)
    T = 8192  # compute bound: 2 x T_group x topk / ep rows x k x n FLOPs dominate
    ovh = base.params.kernel_overhead_s
    m = base.model
    k, n = base.expert_gemms["mlp_gate_up"]
    rows = T * 2 * m.experts_per_token / 2  # group tokens T x ep over ep ranks
    flops_s = 2.0 * rows * k * n / base.gemm_peak
    assert base._moe_time("mlp_gate_up", T) == pytest.approx(flops_s + ovh)
    assert hot._moe_time("mlp_gate_up", T) == pytest.approx(1.5 * flops_s + ovh)
    # the all-gather / reduce-scatter moves the same gathered tensor either way
    assert hot.ep_comm_time(T) == base.ep_comm_time(T)


def test_skew_below_one_is_rejected():
    with pytest.raises(ValueError, match="expert_load_skew must be >= 1"):
        _ops(0.5)
