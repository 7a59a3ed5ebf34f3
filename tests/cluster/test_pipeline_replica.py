"""A PP replica end to end: hand-derived cycle times with a constant-time model, KV per GPU
and GPU accounting."""
from __future__ import annotations

import pytest
from helpers import make_scenario, run_sim, spec

from simulator.cluster.setup import build_setup
from simulator.perf.pipeline import PipelinePerfModel, split_shape
from simulator.perf.step_model import ConstantPerfModel
from simulator.perf.step_shape import StepShape


def _pp(per_seq_s=1e-3, bw=1e12, alpha=0.0):
    # a 32-layer model of hidden 4096 in 2 stages of 16 layers
    return PipelinePerfModel(ConstantPerfModel(per_seq_s=per_seq_s), 2, 32, 4096, bw, alpha)


def test_cycle_of_a_full_pipeline():
    pp = _pp(alpha=1e-4)
    # 4 decode seqs -> 2 micro-batches of 2: t_mb = 2 ms on the whole model, 1 ms a stage;
    # cycle = max(2 x 1 ms, 2 ms + 1 hop) with hop = 1e-4 + 2 x 4096 x 2 / 1e12
    hop = 1e-4 + 2 * 4096 * 2 / 1e12
    assert pp.decode_step_times(4, [400, 404]) == pytest.approx([2e-3 + hop] * 2)
    # no hop cost: the two micro-batches keep both stages busy: no bubble
    free = _pp()
    free.decode_step_times(4, [400])
    assert free.bubble_fraction() == pytest.approx(2 * 4096 * 2 / 1e12 / (2e-3 + 2 * 4096 * 2 / 1e12), abs=1e-6)


def test_one_sequence_leaves_half_the_pipeline_idle():
    pp = _pp(bw=1e30)
    # one sequence: one micro-batch, t = 1 ms through both stages, each stage idle half the time
    assert pp.step_time(StepShape([], [], 1, 100, 1, 1)) == pytest.approx(1e-3)
    assert pp.bubble_fraction() == pytest.approx(0.5)


def test_split_shape_deals_decodes_and_prefills():
    s = StepShape([300, 100, 50], [0, 0, 0], 5, 500, 1, 7)
    a, b = split_shape(s, 2)
    assert (a.num_decode, b.num_decode) == (3, 2)
    assert (a.decode_ctx_total, b.decode_ctx_total) == (300, 200)
    assert sorted([a.prefill_q, b.prefill_q]) == sorted([[300], [100, 50]])
    assert a.num_tokens + b.num_tokens == s.num_tokens


def test_pp2_replica_holds_twice_the_kv_and_counts_its_gpus():
    one = make_scenario({"kv_cache": {"gpu_memory_utilization": 0.9}})
    two = make_scenario({"cluster": {"pipeline_parallel_size": 2}})
    assert two.num_gpus == 2 and two.gpus_per_replica == 2
    b1, b2 = build_setup(one).num_gpu_blocks, build_setup(two).num_gpu_blocks
    # each GPU of PP2 holds 16 of the 32 layers: half the weights, half the KV per token;
    # so more than twice the blocks of one GPU with every layer (the weights freed add more)
    assert b2 > 2 * b1


def test_pp2_run_accounts_for_every_request():
    sc = make_scenario({"cluster": {"pipeline_parallel_size": 2},
                        "perf": {"source": "roofline", "engine": "vllm-v0"}})
    specs = [spec(i, 0.05 * i, 200, 20) for i in range(40)]
    out = run_sim(sc, specs)
    assert len(out.requests()) == 40 and (out.requests()["status"] == "completed").all()
