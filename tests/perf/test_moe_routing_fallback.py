"""A fused-MoE table set without balanced-routing rows (aiconfigurator's vLLM 0.14.0 sets of
A100, L40S and RTX PRO 6000) answers with its power_law_1.01 rows, labelled, instead of the
dense-MLP fit (which priced a published Qwen3-235B-A22B TP8 A100 run 25% fast)."""
from __future__ import annotations

import pytest

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf.measured import MOE_DISTRIBUTION_FALLBACK, load_measured_backend


def _ops(gpu, version, tp=8):
    return load_measured_backend(get_model("qwen3-235b-a22b"), get_gpu(gpu),
                                 tensor_parallel_size=tp, engine_version=version)


@pytest.mark.parametrize("tokens", [1, 64, 2048])
def test_a100_moe_layer_is_the_power_law_table_plus_router(tokens):
    ops = _ops("a100-sxm-80gb", "0.14.0")
    m = ops.model
    # independently: the table row for this shape at power_law_1.01, plus the router GEMM
    # (Qwen3 MoE has no shared experts)
    want = ops.tables.moe(tokens, hidden=m.hidden_size, inter=1536, topk=8, num_experts=128,
                          moe_tp=8, moe_ep=1, dtype="bf16", distribution="power_law_1.01")
    k, n = ops.router_gemm
    want += ops.gemm_kn_time(tokens, k, n)
    assert ops.shared_gemms == {}
    assert ops.moe_layer_time(tokens) == pytest.approx(want, rel=1e-12)
    assert MOE_DISTRIBUTION_FALLBACK == "power_law_1.01"
    prov = ops.provenance()["moe"]
    assert prov.startswith("measured (NVIDIA A100-SXM4-80GB, vLLM 0.14.0")
    assert "power_law_1.01 routing" in prov


def test_a_set_with_balanced_rows_keeps_them():
    ops = _ops("h100-sxm", "0.19.0")
    m = ops.model
    want = ops.tables.moe(256, hidden=m.hidden_size, inter=1536, topk=8, num_experts=128,
                          moe_tp=8, moe_ep=1, dtype="bf16", distribution="balanced")
    k, n = ops.router_gemm
    assert ops.moe_layer_time(256) == pytest.approx(want + ops.gemm_kn_time(256, k, n),
                                                    rel=1e-12)
    assert "power_law" not in ops.provenance()["moe"]
