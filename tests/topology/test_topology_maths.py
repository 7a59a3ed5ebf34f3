"""Hand-derived checks of the topology maths (issue 11): KV transfer, PP schedule and stage
split, KV per GPU under PP, EP all-to-all volume."""
from __future__ import annotations

import pytest

from simulator.catalog.models import get_model
from simulator.topology.expert import ep_all_to_all_volume
from simulator.topology.pipeline import (
    activation_bytes,
    kv_bytes_per_token_per_gpu,
    pipeline_schedule,
    stage_layer_counts,
    stage_times_s,
)
from simulator.topology.transfer import Link, kv_transfer_bytes, kv_transfer_time_s


def test_kv_transfer_time_of_a_known_prompt():
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 head dim x 2 (K and V) x 2 bytes (bf16)
    # = 131072 bytes per token; a 1000-token prompt = 131,072,000 bytes.
    m = get_model("llama-3.1-8b")
    per_tok = m.kv_bytes_per_token("bf16", 1)
    assert per_tok == 32 * 8 * 128 * 2 * 2
    assert kv_transfer_bytes(1000, per_tok) == 131_072_000
    # over a 50 GB/s link with 10 us latency: 10e-6 + 131.072e6 / 50e9 = 2.63144 ms
    ib = Link(50e9, 10e-6, "infiniband")
    assert kv_transfer_time_s(1000, per_tok, ib) == pytest.approx(10e-6 + 131.072e6 / 50e9)
    assert kv_transfer_time_s(0, per_tok, ib) == 0.0


def test_layerwise_overlap_hides_all_but_the_last_layer_on_a_fast_link():
    link = Link(1e9, 0.0)
    # 4 layers, 4e6 bytes: 1 ms per layer message; prefill 8 ms = 2 ms per layer > 1 ms
    assert kv_transfer_time_s(4, 1e6, link, num_layers=4, prefill_s=8e-3,
                              layerwise=True) == pytest.approx(1e-3)
    # slow link: prefill 2 ms = 0.5 ms per layer < 1 ms message: the last message ends
    # 1 + 3 x (1 - 0.5) = 2.5 ms after the prefill
    assert kv_transfer_time_s(4, 1e6, link, num_layers=4, prefill_s=2e-3,
                              layerwise=True) == pytest.approx(2.5e-3)
    # never more than the unoverlapped single message plus per-message latencies
    assert kv_transfer_time_s(4, 1e6, link) == pytest.approx(4e-3)


def test_link_rejects_bad_values():
    with pytest.raises(ValueError, match="bandwidth_bytes_per_s must be > 0"):
        Link(0.0)
    with pytest.raises(ValueError, match="latency_s must be >= 0"):
        Link(1e9, -1.0)


def test_pp_step_time_and_bubble_for_constant_stages():
    # p = 4 stages of 10 ms, m = 4 micro-batches, no hop: (4 + 3) x 10 = 70 ms;
    # bubble (p - 1) / (m + p - 1) = 3 / 7
    s = pipeline_schedule([0.01] * 4, 4)
    assert s.makespan_s == pytest.approx(0.07)
    assert s.bubble_fraction == pytest.approx(3 / 7)
    assert s.microbatch_latency_s == pytest.approx(0.04)
    # one micro-batch: p t, bubble (p-1)/p
    s1 = pipeline_schedule([0.01] * 4, 1)
    assert s1.makespan_s == pytest.approx(0.04) and s1.bubble_fraction == pytest.approx(0.75)
    # activation hop a = 2 ms: makespan (m + p - 1) t + (p - 1) a = 70 + 6 = 76 ms
    sa = pipeline_schedule([0.01] * 4, 4, activation_s=0.002)
    assert sa.makespan_s == pytest.approx(0.076)
    assert sa.bubble_fraction == pytest.approx(1 - 0.16 / (4 * 0.076))


def test_pp_stage_split_follows_vllm():
    # vLLM get_pp_indices: 32 // 3 = 10 each, the 2 left over to the stages before the last
    assert stage_layer_counts(32, 3) == [11, 11, 10]
    assert stage_layer_counts(80, 2) == [40, 40]
    assert stage_layer_counts(5, 2) == [3, 2]
    with pytest.raises(ValueError, match="between 1 and the model's 4 layers"):
        stage_layer_counts(4, 5)
    # per-stage time: 1 ms a layer, the last stage adds the 0.5 ms LM head
    assert stage_times_s(1e-3, 5, 2, last_stage_extra_s=5e-4) == pytest.approx([3e-3, 2.5e-3])


def test_pp_activation_bytes_and_kv_per_gpu():
    # 512 tokens x 8192 hidden x 2 bytes
    assert activation_bytes(512, 8192) == 512 * 8192 * 2
    m = get_model("llama-3.1-70b")  # 80 layers, 8 KV heads, head dim 128
    per_gpu_tp = m.kv_bytes_per_token("bf16", 4)  # 8 KV heads / 4 = 2 heads per GPU
    assert per_gpu_tp == 80 * 2 * 128 * 2 * 2
    # PP2: a GPU holds 40 of the 80 layers -> half
    assert kv_bytes_per_token_per_gpu(per_gpu_tp, 80, 2) == per_gpu_tp / 2


def test_ep_all_to_all_volume():
    # Qwen3-30B-A3B-like: hidden 2048, top-8; 100 tokens per rank, EP 2:
    # dispatch = 100 x 8 x 1/2 x 2048 x 2 bytes = 1,638,400 bytes; combine the same
    v = ep_all_to_all_volume(100, 2048, 8, 2)
    assert v.dispatch_bytes == 100 * 8 * 0.5 * 2048 * 2 == 1_638_400
    assert v.total_bytes == 2 * 1_638_400
    # EP 4, skew 1.5 (busiest rank gets 1.5x the mean): 100 x 8 x 3/4 x 4096 x 1.5
    assert ep_all_to_all_volume(100, 2048, 8, 4, skew=1.5).dispatch_bytes == \
        pytest.approx(100 * 8 * 0.75 * 4096 * 1.5)
    # all-gather + reduce-scatter: (p-1)/p x group tokens x row, independent of top-k
    ag = ep_all_to_all_volume(100, 2048, 8, 2, backend="allgather_reducescatter")
    assert ag.dispatch_bytes == 0.5 * 200 * 4096
    assert ep_all_to_all_volume(100, 2048, 8, 1).total_bytes == 0.0
    with pytest.raises(ValueError, match="skew must be >= 1"):
        ep_all_to_all_volume(100, 2048, 8, 2, skew=0.5)
    with pytest.raises(ValueError, match="all_to_all, allgather_reducescatter"):
        ep_all_to_all_volume(100, 2048, 8, 2, backend="nccl")
