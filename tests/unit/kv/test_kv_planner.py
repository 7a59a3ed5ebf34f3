"""Memory planner and KV bytes per token, against figures worked out by hand from the
formulas (planner.py docstring; DESIGN.md glossary) and shared/reference/facts.yaml."""
from __future__ import annotations

import pytest

from simulator.kv import plan_memory
from simulator.models import get_model

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
    """Llama-3.1-8B, one 80 GB GPU, utilisation 0.9, block 16, 8192 batched tokens, 256 seqs.

    budget      = 80e9 x 0.9                                   = 72,000,000,000
    params      = 32 x (4096 x 48 x 128 + 32 x 128 x 4096 + 3 x 4096 x 14336 + 2 x 4096)
                  + 2 x 128256 x 4096 + 4096                   = 8,030,261,248
    weights     = 2 bytes x params                             = 16,060,522,496
    activations = 8192 x (4 x 4096 + 48 x 128 + 3 x 14336) x 2
                  + 256 x 128256 x 4                           = 1,205,075,968
    reserve                                                    = 1,500,000,000
    kv          = 72e9 - weights - activations - reserve       = 53,234,401,536
    blocks      = floor(kv / (16 x 131,072))                   = 25,384
    """
    m = get_model("llama-3.1-8b")
    assert m.num_params() == 8_030_261_248
    plan = plan_memory(m, 80 * GB, gpu_memory_utilization=0.9, block_size=16,
                       max_num_batched_tokens=8192, max_num_seqs=256)
    assert plan.budget_bytes == 72e9
    assert plan.weight_bytes == 16_060_522_496
    assert plan.activation_bytes == 1_205_075_968
    assert plan.kv_bytes == 53_234_401_536
    assert plan.kv_bytes_per_token == 131_072
    assert plan.num_gpu_blocks == 25_384
    assert plan.kv_tokens == 25_384 * 16


def test_plan_tp_splits_weights_and_kv():
    """Llama-3-70B, TP=4 on 80 GB GPUs: weights / 4 per GPU, KV 2 heads per GPU."""
    m = get_model("llama-3-70b")
    tp = 4
    plan = plan_memory(m, 80 * GB, tensor_parallel_size=tp)
    weights = m.num_params() * 2 / tp
    act = (8192 * (4 * 8192 + (64 + 16) * 128 / tp + 3 * 28672 / tp) * 2
           + 256 * 128256 / tp * 4)
    kv = 72e9 - weights - act - 1.5e9
    assert plan.weight_bytes == pytest.approx(weights)
    assert plan.activation_bytes == pytest.approx(act)
    assert plan.kv_bytes_per_token == 81_920
    assert plan.num_gpu_blocks == int(kv // (16 * 81_920))


def test_plan_model_that_does_not_fit():
    with pytest.raises(ValueError, match="TP=1"):
        plan_memory(get_model("llama-3-70b"), 80 * GB)  # 141 GB of bf16 weights
