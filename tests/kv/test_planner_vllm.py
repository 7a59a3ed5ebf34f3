"""The KV planner's vLLM 0.19 accounting: every term of a small case worked out by hand, the
recorded RTX 4090 run, and the refusals (one line each, naming the cause and the knob)."""
from __future__ import annotations

import json

import pytest
from helpers import SHARED_DIR, make_scenario

from simulator.catalog.models import get_model
from simulator.cluster.setup import build_setup
from simulator.kv.planner import max_tokens_per_request, plan_memory
from simulator.kv.profile_terms import VLLM_0_19, cublas_workspace_bytes, sampler_peak_bytes
from simulator.scenario.config import validate_scenario

GiB = 2**30
RTX4090_META = (SHARED_DIR / "reference" / "groundtruth" / "llmservingsim" / "bench" / "examples"
                / "RTX4090" / "Llama-3.1-8B" / "vllm" / "meta.json")


def test_tiny_model_every_term_by_hand():
    """servesim-tiny-llama (4 layers, h 256, 4 heads, 2 KV heads, d 64, I 768, V 4096, 4096
    positions) on a 1e9-byte device at utilisation 0.5, 64 batched tokens, 8 sequences, a GPU
    with 4 SMs of compute capability 8.6.

    params      = 4 x (256 x 8 x 64 + 4 x 64 x 256 + 3 x 256 x 768 + 2 x 256)
                  + 2 x 4096 x 256 + 256                                  =   5,245,184
    weights     = 2 x params + rotary cache 4096 x 64 x 2
                  + 4 layers x 7 scale scalars x 512 B                     =  11,028,992
    forward     = 3 x 2 x 64 x 256 + max(2 x 64 x 3 x 768,                 (MLP)
                                         2 x 64 x 64 x (8 + 4 + 2 + 4))    (attention)
                                                                          =     393,216
    sampler     = 2 x 64 x 256 + 2 x 2 x 8 x 256 (hidden states)
                  + 2 x 8 x 4096 + 4 x 8 x 4096 (bf16 + fp32 logits)
                  + 4 x 4 x 4096 (top-k/top-p buffer: min(next_pow2(min(4, 8)), 4) = 4 rows)
                  + 2 x 4 x 8 x 4096 (probabilities, noise)                =     565,248
    cuBLAS      = 4096 KiB x 2 + 16 KiB x 8 + cuBLASLt 1 MiB               =   9,568,256
    activations = max(forward, sampler) + cuBLAS                           =  10,133,504
    non-torch   = 0.25 GiB                                                 = 268,435,456
    kv          = 5e8 - weights - activations - non-torch                  = 210,402,048
    blocks      = kv // (16 x 2 x 4 x 2 x 64 x 2 B)                        =       6,420
    """
    m = get_model("servesim-tiny-llama")
    assert m.num_params() == 5_245_184
    p = plan_memory(m, 1e9, gpu_memory_utilization=0.5, block_size=16, max_num_batched_tokens=64,
                    max_num_seqs=8, num_sms=4, compute_capability=(8, 6), max_model_len=4096)
    assert p.budget_bytes == 5e8
    assert p.weight_bytes == 2 * 5_245_184 + 4096 * 64 * 2 + 4 * 7 * 512 == 11_028_992
    assert p.rope_cache_bytes == 4096 * 64 * 2
    assert p.forward_peak_bytes == 3 * 2 * 64 * 256 + 2 * 64 * 3 * 768 == 393_216
    assert p.sampler_peak_bytes == (2 * 64 * 256 + 2 * 2 * 8 * 256 + 2 * 8 * 4096 + 4 * 8 * 4096
                                    + 4 * 4 * 4096 + 2 * 4 * 8 * 4096) == 565_248
    assert p.cublas_workspace_bytes == 4096 * 1024 * 2 + 16 * 1024 * 8 + 1024 * 1024 == 9_568_256
    assert p.activation_bytes == 565_248 + 9_568_256 == 10_133_504
    assert p.non_torch_bytes == p.reserve_bytes == 268_435_456 and p.cudagraph_bytes == 0
    assert p.kv_bytes == 5e8 - 11_028_992 - 10_133_504 - 268_435_456 == 210_402_048
    assert p.kv_bytes_per_token == 2 * 4 * 2 * 64 * 2 == 2048
    assert p.num_gpu_blocks == p.planned_num_gpu_blocks == 210_402_048 // (16 * 2048) == 6420
    assert p.kv_source == "profile" and p.non_kv_bytes == 11_028_992 + 10_133_504 + 268_435_456


def test_moe_workspace_under_the_sampler_peak():
    """Qwen3-30B-A3B, 8192 batched tokens, 1024 seqs, 132 SMs, compute capability 9.0.

    MoE workspaces (persistent)  2 x max(8192 x 8 x 2048, 8192 x 2048)
                                 + 2 x 8192 x 8 x max(2 x 768, 2048)            =   536,870,912
    sampler                      2 x 8192 x 2048 + 2 x 2 x 1024 x 2048 + 2 x 1024 x 151936
                                 + 4 x 1024 x 151936 + 4 x 132 x 151936
                                 + 2 x 4 x 1024 x 151936                       = 2,300,319,744
    forward transient            3 x 2 x 8192 x 2048 + 2 x 8192 x 128 x (32 + 8 + 32 + 4 + 32)
                                 (attention projections > MoE output + router)  =   327,155,712
    activations                  MoE + max(forward, sampler) + 33 MiB           = 2,871,793,664
    """
    m = get_model("qwen3-30b-a3b")
    p = plan_memory(m, 80e9, max_num_batched_tokens=8192, max_num_seqs=1024, num_sms=132,
                    compute_capability=(9, 0))
    assert p.moe_workspace_bytes == 2 * 8192 * 8 * 2048 * 2 == 536_870_912
    assert p.sampler_peak_bytes == (2 * 8192 * 2048 + 2 * 2 * 1024 * 2048 + 2 * 1024 * 151936
                                    + 4 * 1024 * 151936 + 4 * 132 * 151936
                                    + 2 * 4 * 1024 * 151936) == 2_300_319_744
    assert p.forward_peak_bytes == 3 * 2 * 8192 * 2048 + 2 * 8192 * 128 * 108 == 327_155_712
    assert p.activation_bytes == 536_870_912 + 2_300_319_744 + 33 * 2**20 == 2_871_793_664
    # expert parallel over 2 GPUs: 64 whole experts each, same workspace width per token
    assert m.moe_shape(1, 2)["experts_per_rank"] == 64
    assert plan_memory(m, 80e9, expert_parallel_size=2).weight_bytes < plan_memory(m, 80e9).weight_bytes


def test_sampler_rows_small_batches_and_sm_rule():
    m = get_model("llama-3.1-8b")
    v, h = 128256, 4096
    # 4 rows < 8: PyTorch sort path (sorted fp32 values 4RV, int64 indices 8RV, mask RV)
    small = sampler_peak_bytes(m, 2048, 4)
    assert small == (2 * 2048 * h + 2 * 2 * 4 * h + 2 * 4 * v + 4 * 4 * v + 13 * 4 * v
                     + 2 * 4 * 4 * v)
    # 256 rows on a 132-SM GPU: buffer min(next_pow2(132), 132) = 132 rows; unknown SMs: 256 rows
    with_sms = sampler_peak_bytes(m, 2048, 256, num_sms=132)
    assert sampler_peak_bytes(m, 2048, 256) - with_sms == 4 * (256 - 132) * v
    # rows are min(max_num_seqs, max_num_batched_tokens): 256 seqs but 64 tokens -> 64 rows
    assert sampler_peak_bytes(m, 64, 256) == (2 * 64 * h + 2 * 2 * 64 * h + 2 * 64 * v
                                              + 4 * (4 * 64 * v))
    assert cublas_workspace_bytes((9, 0)) == 32 * 2**20 + 2**20 == cublas_workspace_bytes(None)


def test_weights_match_vllm_model_loading_figure():
    """vLLM logs "Model loading took 14.9889 GiB" for Llama-3.1-8B (vllm-project/vllm#17122):
    8,030,261,248 x 2 B of parameters, the rotary cache of 131,072 positions x 128 x 2 B and
    32 layers x 7 scalars x 512 B = 16,094,191,616 B (without the scalars: 14.9888 GiB)."""
    p = plan_memory(get_model("llama-3.1-8b"), 80e9)
    assert round(p.weight_bytes / GiB, 4) == 14.9889


def test_non_torch_by_tensor_parallel_size():
    assert VLLM_0_19.non_torch_bytes(1) == int(0.25 * GiB)
    assert VLLM_0_19.non_torch_bytes(2) == VLLM_0_19.non_torch_bytes(3) == int(2.07 * GiB)
    assert VLLM_0_19.non_torch_bytes(8) == int(2.13 * GiB)  # not measured: the TP=4 figure
    p = plan_memory(get_model("llama-3-70b"), 80e9, tensor_parallel_size=8)
    assert p.reserve_bytes == int(2.13 * GiB) and any("TP=8 not measured" in n for n in p.notes)


def test_mla_kv_is_not_split_by_tp():
    """DeepSeek-V3 at TP 8, fp8 weights, on 139 GiB GPUs: KV per token per GPU is the whole
    61 x 576 latent in bf16 (70,272 B), weights are the TP-8 shard."""
    m = get_model("deepseek-v3")
    p = plan_memory(m, 139 * GiB, tensor_parallel_size=8, weight_dtype="fp8")
    assert p.kv_bytes_per_token == 70_272
    assert p.weight_bytes == m.num_params_per_gpu(8) * 1 + 163840 * 64 * 2 + 61 * 7 * 512
    assert p.num_gpu_blocks == int(p.kv_bytes // (16 * 70_272))


def test_sliding_window_max_request_rule():
    """Every layer sliding (Mistral-7B, window 4096): a request needs
    cdiv(min(4095 + 8192, len), 16) + 1 = 769 blocks at most (vLLM SlidingWindowSpec)."""
    m = get_model("mistral-7b")
    assert max_tokens_per_request(m, 769, 16, 8192, 32768) == 32768
    assert max_tokens_per_request(m, 768, 16, 8192, 32768) == 767 * 16
    full = get_model("llama-3.1-8b")
    assert max_tokens_per_request(full, 100, 16, 8192, 131072) == 1600
    p = plan_memory(m, 80e9, max_model_len=32768)
    assert any("every layer slides" in n for n in p.notes)


def test_hybrid_sliding_models_refused_unless_manager_disabled(tmp_path):
    cfg = {"model_type": "qwen2", "hidden_size": 512, "intermediate_size": 1024,
           "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 4,
           "vocab_size": 1000, "use_sliding_window": True, "sliding_window": 256,
           "max_window_layers": 2}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = get_model(str(tmp_path))
    with pytest.raises(ValueError, match="hybrid KV cache manager") as ei:
        plan_memory(m, 1e10)
    assert "\n" not in str(ei.value) and "disable-hybrid-kv-cache-manager" in str(ei.value)
    p = plan_memory(m, 1e10, disable_hybrid_kv_cache_manager=True)
    assert p.kv_bytes_per_token == 2 * 4 * 2 * 64 * 2  # every layer cached as full attention


# ---------------------------------------------------------------------------- the recorded run
def _rtx4090_plan():
    if not RTX4090_META.is_file():
        pytest.skip("shared/reference/groundtruth RTX 4090 meta.json not available")
    meta = json.loads(RTX4090_META.read_text())
    ek, kv, hw = meta["engine_kwargs"], meta["kv_cache"], meta["hardware"]
    plan = plan_memory(get_model(meta["model"]), hw["device_total_memory_bytes"],
                       gpu_memory_utilization=kv["gpu_memory_utilization"],
                       block_size=kv["block_size"],
                       max_num_batched_tokens=ek["max_num_batched_tokens"],
                       max_num_seqs=ek["max_num_seqs"], max_model_len=ek["max_model_len"],
                       num_sms=128,  # RTX 4090 (AD102): 128 SMs
                       compute_capability=tuple(int(x) for x in hw["device_capability"].split(".")))
    return plan, kv["num_gpu_blocks"]


def test_rtx4090_terms_by_hand():
    """Llama-3.1-8B, RTX 4090 (25,250,627,584 B), util 0.9, 2048 batched tokens, 256 seqs.

    requested   = 25,250,627,584 x 0.9                                  = 22,725,564,825.6
    weights     = 16,060,522,496 + 131,072 x 128 x 2 + 32 x 7 x 512     = 16,094,191,616
    sampler     = 2 x 2048 x 4096 + 2 x 2 x 256 x 4096 + 2 x 256 x 128256
                  + 4 x 4 x 256 x 128256 - 4 x (256 - 128) x 128256 (buffer: 128 SMs)
                                                                        =    546,308,096
    forward     = 3 x 2 x 2048 x 4096 + 2 x 2048 x 3 x 14336            =    226,492,416
    activations = sampler + cuBLAS (sm89: 8,519,680 + 1,048,576)        =    555,876,352
    non-torch   = 0.25 GiB                                              =    268,435,456
    blocks      = (requested - weights - activations - non-torch) // (16 x 131,072) = 2,769
    """
    plan, _ = _rtx4090_plan()
    sampler = (2 * 2048 * 4096 + 2 * 2 * 256 * 4096 + 2 * 256 * 128256 + 4 * 4 * 256 * 128256
               - 4 * (256 - 128) * 128256)
    assert plan.sampler_peak_bytes == sampler == 546_308_096
    assert plan.forward_peak_bytes == 3 * 2 * 2048 * 4096 + 2 * 2048 * 3 * 14336
    assert plan.activation_bytes == sampler + 8_519_680 + 1_048_576
    kv = 25_250_627_584 * 0.9 - 16_094_191_616 - 555_876_352 - 268_435_456
    assert plan.kv_bytes == pytest.approx(kv)
    assert plan.num_gpu_blocks == int(kv // (16 * 131_072)) == 2769


@pytest.mark.xfail(strict=True, reason=(
    "vLLM 0.19 recorded 2,588 blocks; the planner gives 2,769 (+7.0%). Weights and the torch "
    "peak are derived from vLLM's code (and reproduce its H100 logs); the run leaves "
    "0.604 GiB for non-torch memory where vLLM 0.19's H100 logs show 0.25 GiB: the non-torch "
    "term of this RTX 4090 is not known (benchmarks/bench_kv_planner.py)"))
def test_rtx4090_recorded_blocks_within_1pct():
    plan, recorded = _rtx4090_plan()
    assert recorded == 2588
    assert abs(plan.num_gpu_blocks - recorded) <= 0.01 * recorded


# ---------------------------------------------------------------------------- refusals
def test_refuse_kv_that_cannot_hold_one_max_length_request():
    """Llama-3.1-8B on a 25.25e9-byte GPU plans 2,769 blocks = 44,304 tokens < 131,072."""
    with pytest.raises(ValueError) as ei:
        plan_memory(get_model("llama-3.1-8b"), 25_250_627_584, max_num_batched_tokens=2048,
                    num_sms=128, compute_capability=(8, 9), max_model_len=131072)
    msg = str(ei.value)
    assert "max seq len (131,072) is larger than the maximum number of tokens that can be " \
           "stored in KV cache (44,304" in msg
    assert "lower max_model_len (at most 44,304)" in msg and "\n" not in msg
    assert "raise gpu_memory_utilization" in msg and "more GPUs" in msg


def test_refuse_block_larger_than_kv_memory_names_block_size():
    """A 2**20-token block of Llama-3.1-8B needs 2**20 x 131,072 B = 137.4 GB > the ~54.7 GB
    left on an 80e9-byte GPU (80e9 x 0.9 - 16,094,191,616 - 940,572,672 - 268,435,456 =
    54,696,800,256 B): the cause is the block, not the weights."""
    with pytest.raises(ValueError) as ei:
        plan_memory(get_model("llama-3.1-8b"), 80e9, block_size=2**20)
    msg = str(ei.value)
    assert msg.startswith("kv_cache.block_size=1048576: one KV block needs 137.44 GB")
    assert "54.70 GB per GPU is left" in msg and "lower kv_cache.block_size" in msg
    assert "does not fit" not in msg and "\n" not in msg
    assert f"at most {54_696_800_256 // 131_072:,} tokens" in msg


def test_refuse_num_gpu_blocks_beyond_the_device():
    m = get_model("llama-3.1-8b")
    with pytest.raises(ValueError) as ei:
        plan_memory(m, 80e9, num_gpu_blocks_override=10**12)
    msg = str(ei.value)
    assert "kv_cache.num_gpu_blocks=1,000,000,000,000" in msg
    assert "the memory plan gives 26,081 blocks" in msg and "\n" not in msg
    room = 80e9 - 16_094_191_616
    assert f"at most {int(room // 2_097_152):,}" in msg
    # above the plan but within the device: trusted (vLLM), with a note
    p = plan_memory(m, 80e9, num_gpu_blocks_override=30_000)
    assert p.num_gpu_blocks == 30_000 and p.planned_num_gpu_blocks == 26_081
    assert p.kv_source == "num_gpu_blocks" and any("exceeds" in n for n in p.notes)


def test_kv_cache_memory_bytes():
    m = get_model("llama-3.1-8b")
    p = plan_memory(m, 80e9, kv_cache_memory_bytes=1000 * 16 * 131_072 + 5)
    assert p.num_gpu_blocks == 1000 and p.kv_source == "kv_cache_memory_bytes"
    with pytest.raises(ValueError, match="kv_cache_memory_bytes=70,000,000,000") as ei:
        plan_memory(m, 80e9, kv_cache_memory_bytes=70_000_000_000)
    assert "\n" not in str(ei.value)


def test_refuse_model_that_does_not_fit_with_true_arithmetic():
    with pytest.raises(ValueError) as ei:
        plan_memory(get_model("llama-3-70b"), 80e9)
    msg = str(ei.value)
    assert msg.startswith("model llama-3-70b does not fit: weights 141.")
    assert "exceed the 72.00 GB requested" in msg and "TP=1" in msg


def test_build_setup_honours_kv_cache_memory_bytes_and_refusals():
    sc = make_scenario({"kv_cache": {"kv_cache_memory_bytes": 500 * 16 * 131_072},
                        "scheduler": {"max_model_len": 8000}})
    assert build_setup(sc).num_gpu_blocks == 500
    with pytest.raises(ValueError, match="num_gpu_blocks=1,000,000,000,000"):
        build_setup(make_scenario({"kv_cache": {"num_gpu_blocks": 10**12}}))
    with pytest.raises(ValueError, match="lower max_model_len"):
        # 70B on two H100s: ~3.4 GB of KV per GPU, about 20,000 tokens < 131,072
        build_setup(make_scenario({"hardware": {"gpu": "h100"}, "model": "llama-3.1-70b",
                                   "cluster": {"tensor_parallel_size": 2}}))
    for bad in (0, 1.5e9, "1e9"):
        with pytest.raises(ValueError, match="kv_cache_memory_bytes"):
            validate_scenario({"workload": {"kind": "synthetic", "num_requests": 1},
                               "kv_cache": {"kv_cache_memory_bytes": bad}})
