"""Memory planner and KV bytes per token, against figures worked out by hand from the
formulas (planner.py docstring; DESIGN.md glossary) and shared/reference/facts.yaml."""
from __future__ import annotations

import pytest

from simulator.catalog.models import get_model
from simulator.kv import plan_memory

GB = 1e9


def test_kv_bytes_per_token_facts():
    # 2 x layers x kv_heads x head_dim x bytes (facts.yaml kv_bytes_per_token_bf16)
    assert get_model("llama-3-70b").kv_bytes_per_token("bf16") == 2 * 80 * 8 * 128 * 2 == 327_680
    assert get_model("llama-3.1-8b").kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2 == 131_072
    assert get_model("llama-2-7b").kv_bytes_per_token("bf16") == 524_288  # MHA: 32 kv heads
    assert get_model("qwen2.5-7b").kv_bytes_per_token("bf16") == 57_344  # 28 x 4 x 128 x 4
    assert get_model("tinyllama-1.1b").kv_bytes_per_token("bf16") == 22_528
    assert get_model("llama-3.2-1b").kv_bytes_per_token("bf16") == 32_768


def test_kv_bytes_fp8_halves_and_tp_divides():
    m = get_model("llama-3-70b")
    assert m.kv_bytes_per_token("fp8") == 163_840
    assert m.kv_bytes_per_token("bf16", 8) == 327_680 // 8 == 40_960  # 1 kv head per GPU
    assert m.kv_bytes_per_token("bf16", 2) == 163_840
    # TP beyond the KV-head count replicates heads: still one head per GPU
    assert m.kv_bytes_per_token("bf16", 16) == 40_960
    with pytest.raises(ValueError):
        m.kv_bytes_per_token("int3")


def test_plan_llama31_8b_on_80gb():
    """Llama-3.1-8B, one 80 GB GPU, utilisation 0.9, block 16, 8192 batched tokens, 256 seqs
    (vLLM 0.19 accounting, planner docstring; no SM count or compute capability given).

    budget      = 80e9 x 0.9                                        = 72,000,000,000
    params      = 32 x (4096 x 48 x 128 + 32 x 128 x 4096 + 3 x 4096 x 14336 + 2 x 4096)
                  + 2 x 128256 x 4096 + 4096                        = 8,030,261,248
    weights     = 2 x params + rotary cache 131072 x 128 x 2
                  + 32 layers x 7 scale scalars x 512 B               = 16,094,191,616
    forward     = 3 x 2 x 8192 x 4096 + 2 x 8192 x 3 x 14336        =    905,969,664
    sampler     = 2 x 8192 x 4096 + 2 x 2 x 256 x 4096
                  + 2 x 256 x 128256 + 4 x (4 x 256 x 128256)      =    662,306,816
    activations = max(forward, sampler) + 32 MiB + 1 MiB (cuBLAS)  =    940,572,672
    non-torch   = 0.25 GiB                                          =    268,435,456
    kv          = budget - weights - activations - non-torch        = 54,696,800,256
    blocks      = floor(kv / (16 x 131,072))                        = 26,081
    """
    m = get_model("llama-3.1-8b")
    assert m.num_params() == 8_030_261_248
    plan = plan_memory(m, 80 * GB, gpu_memory_utilization=0.9, block_size=16,
                       max_num_batched_tokens=8192, max_num_seqs=256)
    assert plan.budget_bytes == 72e9
    assert plan.weight_bytes == 2 * 8_030_261_248 + 131_072 * 128 * 2 + 32 * 7 * 512 \
        == 16_094_191_616
    assert plan.forward_peak_bytes == 3 * 2 * 8192 * 4096 + 2 * 8192 * 3 * 14336
    assert plan.sampler_peak_bytes == (2 * 8192 * 4096 + 2 * 2 * 256 * 4096
                                       + 2 * 256 * 128256 + 4 * (4 * 256 * 128256))
    assert plan.activation_bytes == 905_969_664 + 33 * 2**20 == 940_572_672
    assert plan.reserve_bytes == plan.non_torch_bytes == 2**30 // 4
    assert plan.kv_bytes == 72e9 - 16_094_191_616 - 940_572_672 - 268_435_456 == 54_696_800_256
    assert plan.kv_bytes_per_token == 131_072
    assert plan.num_gpu_blocks == 54_696_800_256 // (16 * 131_072) == 26_081
    assert plan.kv_tokens == 26_081 * 16


def test_plan_tp_splits_weights_and_kv():
    """Llama-3-70B, TP=4 on 80 GB GPUs: per GPU 16 query heads, 2 KV heads, MLP 28672 / 4,
    vocabulary 128256 / 4; norms replicated; non-torch 2.13 GiB (vLLM 0.19 at TP=4)."""
    m = get_model("llama-3-70b")
    tp = 4
    plan = plan_memory(m, 80 * GB, tensor_parallel_size=tp)
    per_layer = (8192 * (16 + 2 * 2) * 128 + 16 * 128 * 8192 + 3 * 8192 * 7168 + 2 * 8192)
    params = 80 * per_layer + 2 * 32064 * 8192 + 8192
    # + rotary cache (8,192 positions x 128 x 2 B) + 7 scale scalars x 512 B per layer
    weights = 2 * params + 8192 * 128 * 2 + 80 * 7 * 512
    forward = 3 * 2 * 8192 * 8192 + 2 * 8192 * 3 * 7168
    sampler = 2 * 8192 * 8192 + 2 * 2 * 256 * 8192 + 2 * 256 * 128256 + 4 * (4 * 256 * 128256)
    act = max(forward, sampler) + 33 * 2**20
    non_torch = int(2.13 * 2**30)
    kv = 72e9 - weights - act - non_torch
    assert plan.weight_bytes == weights == 35_281_215_488
    assert plan.activation_bytes == act and plan.reserve_bytes == non_torch
    assert plan.kv_bytes_per_token == 2 * 80 * 2 * 128 * 2 == 81_920
    assert plan.num_gpu_blocks == int(kv // (16 * 81_920))


def test_plan_model_that_does_not_fit():
    with pytest.raises(ValueError, match="TP=1"):
        plan_memory(get_model("llama-3-70b"), 80 * GB)  # 141 GB of bf16 weights
