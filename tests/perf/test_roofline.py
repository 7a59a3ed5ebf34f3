"""Roofline operator times for a tiny made-up model on a made-up GPU, worked out by hand.

Model: 2 layers, hidden 64, 4 query heads, 2 KV heads, head_dim 16, MLP 128, vocab 256.
GPU: 1e11 FLOP/s (bf16), 2e11 (fp8), 1e10 B/s HBM, 1e9 B/s interconnect: the ridge point
is 10 FLOP/byte. ``IDEAL`` sets every efficiency to 1 and every overhead to 0 so the figures
are the bare roofline bounds: t = max(FLOPs / 1e11, bytes / 1e10).
"""
from __future__ import annotations

import numpy as np
import pytest

from simulator.catalog.hardware import GPUSpec, get_gpu
from simulator.catalog.models import ModelSpec, get_model
from simulator.perf import RooflineParams, RooflinePerfModel, StepShape

TINY = ModelSpec("tiny", None, num_layers=2, hidden_size=64, num_attention_heads=4,
                 num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=256,
                 max_position_embeddings=1024)
TINY_MOE = ModelSpec("tiny-moe", None, num_layers=2, hidden_size=64, num_attention_heads=4,
                     num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=256,
                     max_position_embeddings=1024, num_experts=4, experts_per_token=2)
GPU = GPUSpec("toy", bf16_flops_per_s=1e11, hbm_bytes=1e9, hbm_bandwidth_bytes_per_s=1e10,
              fp8_flops_per_s=2e11, interconnect_bandwidth_bytes_per_s=1e9)
IDEAL = RooflineParams(gemm_compute_efficiency=1.0, attention_compute_efficiency=1.0,
                       memory_efficiency=1.0, interconnect_efficiency=1.0,
                       kernel_overhead_s=0.0, all_reduce_latency_s=0.0,
                       cpu_overhead_base_s=0.0, cpu_overhead_per_seq_s=0.0)


def ideal(model=TINY, tp=1, wdt="bf16"):
    return RooflinePerfModel(model, GPU, tp, wdt, "bf16", params=IDEAL)


def test_gemm_shapes_per_gpu():
    assert ideal().gemms == {"qkv_proj": (64, 128), "o_proj": (64, 64),
                             "mlp_gate_up": (64, 256), "mlp_down": (128, 64)}
    # TP=2: heads, KV heads and the MLP width split in two
    assert ideal(tp=2).gemms == {"qkv_proj": (64, 64), "o_proj": (32, 64),
                                 "mlp_gate_up": (64, 128), "mlp_down": (64, 64)}
    # TP=4 > 2 KV heads: one (replicated) KV head per GPU
    assert ideal(tp=4).kv_heads == 1


def test_gemm_memory_bound_single_token():
    # qkv, m=1: 2*1*64*128 = 16,384 FLOP (1.6384e-7 s);
    # bytes 64*128*2 + 1*(64+128)*2 = 16,768 (1.6768e-6 s): memory bound
    assert ideal().gemm_time("qkv_proj", 1) == pytest.approx(1.6768e-6, rel=1e-12)


def test_gemm_compute_bound_64_tokens():
    # qkv, m=64: 1,048,576 FLOP (1.048576e-5 s); bytes 16,384 + 64*192*2 = 40,960 (4.096e-6)
    assert ideal().gemm_time("qkv_proj", 64) == pytest.approx(1.048576e-5, rel=1e-12)
    # fp8 weights: half the weight bytes, twice the FLOP rate: 5.24288e-6 vs 3.2768e-6
    assert ideal(wdt="fp8").gemm_time("qkv_proj", 64) == pytest.approx(5.24288e-6, rel=1e-12)


def test_gemm_default_efficiencies_and_overhead():
    perf = RooflinePerfModel(TINY, GPU)  # 0.7 compute, 0.8 memory, 2 us per kernel
    # max(16,384 / 7e10, 16,768 / 8e9) + 2e-6 = 2.096e-6 + 2e-6
    assert perf.gemm_time("qkv_proj", 1) == pytest.approx(4.096e-6, rel=1e-12)


def test_attention_prefill_pairs_and_bounds():
    perf = ideal()
    # q=3 after s=5: pairs 3*5 + 3*4/2 = 21; FLOPs 4*16*4*21 = 5,376 (5.376e-8 s);
    # bytes (5+3) * (2*2*16*2 = 128) + 2*3*4*16*2 = 1,792 (1.792e-7 s): memory bound
    assert perf.attn_prefill_time(3, 5) == pytest.approx(1.792e-7, rel=1e-12)
    # q=512 from scratch: pairs 512*513/2 = 131,328; FLOPs 4*16*4*131,328 = 33,619,968
    # (3.3619968e-4 s) vs bytes 512*128 + 2*512*4*16*2 = 196,608 (1.96608e-5 s)
    assert perf.attn_prefill_time(512, 0) == pytest.approx(3.3619968e-4, rel=1e-12)


def test_attention_decode():
    perf = ideal()
    # 4 seqs, 100 context tokens: FLOPs 4*16*4*100 = 25,600 (2.56e-7 s);
    # bytes 100*128 + 2*4*4*16*2 = 13,824 (1.3824e-6 s)
    assert float(perf.attn_decode_time(4, 100)) == pytest.approx(1.3824e-6, rel=1e-12)
    v = perf.attn_decode_time(4, np.array([100, 200]))
    assert v[1] - v[0] == pytest.approx(100 * 128 / 1e10, rel=1e-9)


def test_all_reduce_ring_formula():
    # TP=2, 10 tokens: 10*64*2 = 1,280 bytes; 2*(2-1)/2 * 1,280 / 1e9 = 1.28e-6 s
    assert ideal(tp=2).all_reduce_time(10) == pytest.approx(1.28e-6, rel=1e-12)
    # TP=4: 2*3/4 * 1,280 / 1e9 = 1.92e-6 s
    assert ideal(tp=4).all_reduce_time(10) == pytest.approx(1.92e-6, rel=1e-12)
    assert ideal(tp=1).all_reduce_time(10) == 0.0
    # default: 70% link efficiency and an 8 us latency per ring hop, 2 (p - 1) hops
    d = RooflinePerfModel(TINY, GPU, 2)
    assert d.all_reduce_time(10) == pytest.approx(1280 / 0.7e9 + 2 * 8e-6, rel=1e-12)
    d4 = RooflinePerfModel(TINY, GPU, 4)
    assert d4.all_reduce_time(10) == pytest.approx(1.5 * 1280 / 0.7e9 + 6 * 8e-6, rel=1e-12)


def test_elementwise_lm_head_cpu():
    perf = ideal()
    # 10 tokens x 2 bytes x (8*64 + 3*128) = 17,920 bytes
    assert perf.elementwise_time(10) == pytest.approx(1.792e-6, rel=1e-12)
    # 3 rows: FLOPs 2*3*64*256 = 98,304 (9.8304e-7); bytes 64*256*2 + 3*320*2 = 34,688
    assert perf.lm_head_time(3) == pytest.approx(3.4688e-6, rel=1e-12)
    assert perf.lm_head_time(0) == 0.0
    d = RooflinePerfModel(TINY, GPU)
    assert d.cpu_overhead_time(10) == pytest.approx(1e-3 + 10 * 4.8e-5, rel=1e-12)


def test_moe_gemm_touched_experts():
    perf = ideal(TINY_MOE)
    # 1 token, 2 of 4 experts: touched = 4 * (1 - (1 - 2/4)^1) = 2
    # FLOPs 2*1*2*64*256 = 65,536; bytes 2*64*256*2 + 1*2*(64+256)*2 = 66,816 (6.6816e-6)
    assert perf.gemm_time("mlp_gate_up", 1) == pytest.approx(6.6816e-6, rel=1e-12)
    # many tokens touch all 4 experts: weight bytes 4*64*256*2 = 131,072 (+ activations)
    t = perf.gemm_time("mlp_gate_up", 10)
    touched = 4 * (1 - 0.5 ** 10)
    flops = 2 * 10 * 2 * 64 * 256
    byts = touched * 64 * 256 * 2 + 10 * 2 * 320 * 2
    assert t == pytest.approx(max(flops / 1e11, byts / 1e10), rel=1e-12)


def test_whole_step_by_hand():
    """Prefill chunk 3 after 5 cached + 4 decodes over 100 context, 5 sampled rows:
    7 tokens. Per layer: qkv 1.9072e-6, o_proj 9.984e-7, gate_up 3.7248e-6,
    down 1.9072e-6, prefill attention 1.792e-7, decode attention 1.3824e-6,
    elementwise 1.2544e-6 = 1.13536e-5; x 2 layers + LM head (5 rows) 3.5968e-6."""
    shape = StepShape(prefill_q=[3], prefill_start=[5], num_decode=4, decode_ctx_total=100,
                      num_sampled=5)
    perf = ideal()
    assert shape.num_tokens == 7 and shape.num_seqs == 5
    assert perf.step_time(shape) == pytest.approx(2.6304e-5, rel=1e-12)
    ops = perf.op_times(shape)
    assert ops["lm_head"] == pytest.approx(3.5968e-6, rel=1e-12)
    assert ops["attention_prefill"] == pytest.approx(2 * 1.792e-7, rel=1e-12)
    assert ops["all_reduce"] == 0.0 and ops["cpu_overhead"] == 0.0
    assert sum(ops.values()) == pytest.approx(perf.step_time(shape), rel=1e-12)
    shares = perf.bottleneck_shares(shape)
    assert sum(shares.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("model,gpu,tp", [
    (TINY, GPU, 1), (TINY, GPU, 2),
    (get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1),
    (get_model("llama-3-70b"), get_gpu("h100-sxm"), 4),
    (get_model("mixtral-8x7b"), get_gpu("a100-sxm-80gb"), 2),
])
def test_decode_step_times_equal_step_time(model, gpu, tp):
    perf = RooflinePerfModel(model, gpu, tp)  # default efficiencies and overheads
    for n in (1, 7, 64):
        ctx = np.array([n * 10, n * 500, n * 4000, n * 4001])
        vec = perf.decode_step_times(n, ctx)
        one = [perf.step_time(StepShape(num_decode=n, decode_ctx_total=int(c), num_sampled=n))
               for c in ctx]
        np.testing.assert_allclose(vec, one, rtol=1e-12)


def test_provenance_labels():
    prov = RooflinePerfModel(TINY, GPU).provenance()
    assert prov["gemm"] == "datasheet" and "fitted" in prov["cpu_overhead"]
