"""Parallel sampling with copy-on-write prompt blocks (issue 15 part 5): the block arithmetic by
hand, the KV manager's exact block ids and counters, and a request with n = 4 through the
engine (TTFT at the first token, E2E at the last, every sequence's tokens counted)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import ConstantStepPerf

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.kv import KVCacheManager
from simulator.kv.cow import blocks_saved, independent_blocks, parallel_sampling_blocks
from simulator.scenario.config import validate_scenario
from simulator.scheduling.state import ReqState

STEP_S = 0.01


@pytest.mark.parametrize("prompt, tokens, n, bs, expected, indep", [
    # P = 37, B = 16: F = 37 // 16 = 2 full prompt blocks, a partial third block (5 tokens)
    (37, 37, 4, 16, 3, 12),    # prefill: ceil(37/16) = 3, all shared
    (37, 38, 4, 16, 6, 12),    # first token: 2 shared + 4 x (ceil(38/16) - 2) = 2 + 4 x 1
    (37, 49, 4, 16, 10, 16),   # 49 tokens: 2 + 4 x (4 - 2)
    (32, 33, 3, 16, 5, 9),     # P = 32 fills 2 blocks exactly: 2 + 3 x (3 - 2), no copy
    (37, 38, 1, 16, 3, 3),     # n = 1 is a plain request
    (5, 6, 8, 16, 8, 8),       # no full prompt block: nothing to share after the first write
])
def test_block_count_by_hand(prompt, tokens, n, bs, expected, indep):
    assert parallel_sampling_blocks(prompt, tokens, n, bs) == expected
    assert independent_blocks(prompt, tokens, n, bs) == indep
    assert blocks_saved(prompt, tokens, n, bs) == indep - expected


def test_saving_is_n_minus_one_full_prompt_blocks_after_the_first_token():
    # (n - 1) x P // B for any length past the prompt
    for tokens in range(38, 200):
        assert blocks_saved(37, tokens, 4, 16) == 3 * 2


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="n >= 1"):
        parallel_sampling_blocks(10, 11, 0, 16)


def test_manager_shares_the_prompt_and_copies_the_partial_block_on_first_write():
    kv = KVCacheManager(20, 16)
    r = ReqState(RequestSpec(0, 0.0, 37, 5, n=4))
    assert kv.allocate(r, 37)                       # prefill: 3 blocks, shared
    assert r.blocks == [0, 1, 2] and kv.num_cow_copies == 0
    assert kv.cow_blocks_saved == 3 * 3             # 4 x 3 independent - 3
    assert kv.allocate(r, 38)                       # first write: 3 copies of block 2
    assert r.blocks == [0, 1, 2, 3, 4, 5] and kv.num_cow_copies == 3
    assert kv.num_used_blocks == 6 and kv.cow_blocks_saved == 6
    assert kv.allocate(r, 48) and len(r.blocks) == 6    # 48 tokens still fit 3 blocks each
    assert kv.allocate(r, 49) and len(r.blocks) == 10   # each sequence opens block 4
    assert kv.num_cow_copies == 3                       # copied once only
    kv.free(r)
    assert kv.num_free_blocks == 20 and kv.cow_blocks_saved == 0
    assert kv.cow_blocks_saved_peak == 9
    kv.pool.check_invariants()


def test_manager_refuses_what_does_not_fit_and_changes_nothing():
    kv = KVCacheManager(5, 16)
    r = ReqState(RequestSpec(0, 0.0, 37, 5, n=4))
    assert kv.allocate(r, 37)
    assert not kv.allocate(r, 38)           # needs 6 blocks, the pool has 5
    assert r.blocks == [0, 1, 2] and kv.num_cow_copies == 0




def _scenario(**sections):
    """Llama-3.1-8B with ``sections`` (scheduler, kv_cache, ...); the synthetic workload is a
    placeholder: the tests simulate their own request specs."""
    return validate_scenario({
        "model": "llama-3.1-8b", **sections,
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}}})


def _run(specs, kv_blocks=None, **sched):
    sc = _scenario(
        hardware={"gpu": "h100-sxm"},
        scheduler={"max_num_seqs": 8, "max_num_batched_tokens": 512, **sched},
        kv_cache={"block_size": 16, **({"num_gpu_blocks": kv_blocks} if kv_blocks else {})})
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(STEP_S)
    return simulate(sc, setup, specs, check_transitions=True)


def test_parallel_request_through_the_engine():
    # P = 37, 5 output tokens per sequence, n = 4, 10 ms per step:
    # step 1 prefills 37 tokens once and samples 4 first tokens (TTFT 10 ms);
    # steps 2..5 decode 4 tokens each (one per sequence): E2E 50 ms.
    sim = _run([RequestSpec(0, 0.0, 37, 5, n=4)])
    req = sim.requests()
    assert req.status.tolist() == ["completed"] and req.n.tolist() == [4]
    assert req.num_emitted_tokens.tolist() == [5]
    assert req.first_token_time_s.iloc[0] == pytest.approx(0.01)
    assert req.finish_time_s.iloc[0] == pytest.approx(0.05)
    st = sim.steps()
    assert st.num_prefill_tokens.tolist() == [37, 0, 0, 0, 0]
    assert st.num_decode_tokens.tolist() == [0, 4, 4, 4, 4]
    # blocks: 3 while prefilling, then 2 shared + 4 x 1 = 6 (tokens 38..41 per sequence)
    assert st.kv_blocks_used.tolist() == [3, 6, 6, 6, 6]
    # KV tokens held: 37, then 37 + 4 x (j) for the j-th generated token's slot
    assert st.kv_tokens_used.tolist() == [37, 41, 45, 49, 53]
    # ITL: 4 gaps per sequence of 10 ms each, 16 samples
    v, w = sim.recorder.itl_samples()
    assert int(w.sum()) == 16 and np.allclose(v, 0.01)
    kv = sim.replicas[0].kv
    assert kv.cow_blocks_saved_peak == 9 and kv.num_cow_copies == 3


def test_summary_counts_every_sequence_and_reports_the_saving(tmp_path):
    from simulator.runs.scenario import run_scenario
    sc = _scenario(kv_cache={"block_size": 16})
    specs = [RequestSpec(0, 0.0, 37, 5, n=4, use_beam_search=True),
             RequestSpec(1, 0.0, 20, 3)]
    res = run_scenario(sc, specs=specs, outdir=tmp_path, figures=False)
    s = res.summary
    assert s["num_output_tokens"] == 4 * 5 + 3
    ps = s["parallel_sampling"]
    assert ps["num_requests"] == 1 and ps["num_sequences"] == 4
    assert ps["num_beam_search_requests"] == 1
    assert ps["cow_blocks_saved_peak"] == 9   # prefill: 4 x 3 - 3 (the request alone)
    # Llama-3.1-8B: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token
    assert ps["cow_bytes_saved_peak"] == 9 * 16 * 131072
    md = (tmp_path / "report.md").read_text()
    row = next(ln for ln in md.splitlines() if "copy-on-write sharing (peak)" in ln)
    # 9 x 16 x 131,072 bytes = 18,874,368 bytes = 0.019 GB
    assert row.split("|")[2].strip() == "9 blocks = 0.019 GB vs n independent requests"


@pytest.mark.parametrize("sched, reason", [
    ({"max_num_seqs": 2}, "n_exceeds_max_num_seqs"),
    ({"policy": "static"}, "parallel_sampling_unsupported"),
])
def test_parallel_requests_that_cannot_run_are_rejected_with_a_reason(sched, reason):
    sim = _run([RequestSpec(0, 0.0, 10, 5, n=4), RequestSpec(1, 0.0, 10, 5)], **sched)
    req = sim.requests().set_index("request_id")
    assert req.loc[0, "status"] == "rejected" and req.loc[0, "reject_reason"] == reason
    assert req.loc[1, "status"] == "completed"


def test_parallel_requests_under_kv_pressure_keep_every_invariant():
    # 12 requests, a third with n = 3, on a 40-block pool: preemptions happen (the group
    # needs 2 + 3 x 4 = 14 blocks at its end); every request completes with its output
    # length per sequence, the pool balances, and free + held = total after the run
    specs = [RequestSpec(i, 0.001 * i, 40, 30, n=3 if i % 3 == 0 else 1) for i in range(12)]
    sim = _run(specs, kv_blocks=40, max_num_seqs=16)
    req = sim.requests()
    assert (req.status == "completed").all()
    assert (req.num_emitted_tokens == req.num_output_tokens).all()
    assert req.num_preemptions.sum() > 0   # non-vacuity: the pool ran dry
    kv = sim.replicas[0].kv
    assert kv.num_free_blocks == kv.num_gpu_blocks and kv.cow_blocks_saved == 0
    kv.pool.check_invariants()
    st = sim.steps()
    assert (st.kv_blocks_used <= st.num_gpu_blocks).all()
    # sequences in a step never exceed max_num_seqs: decode tokens count one per sequence
    assert (st.num_decode_seqs + st.num_prefill_seqs <= 16).all()


def test_summary_counts_only_the_sequences_that_ran(tmp_path):
    # review finding: a rejected n = 4 request added its 4 sequences to num_sequences
    from simulator.runs.scenario import run_scenario
    sc = _scenario(scheduler={"max_num_seqs": 3})
    specs = [RequestSpec(0, 0.0, 37, 5, n=4),   # 4 > max_num_seqs 3: rejected at arrival
             RequestSpec(1, 0.0, 20, 3, n=2)]
    res = run_scenario(sc, specs=specs, outdir=tmp_path, figures=False)
    ps = res.summary["parallel_sampling"]
    assert ps["num_requests"] == 2 and ps["num_requests_not_run"] == 1
    assert ps["num_sequences"] == 2   # request 1's two sequences; request 0 never ran
    assert res.summary["num_output_tokens"] == 2 * 3
    md = (tmp_path / "report.md").read_text()
    assert "2 requests with n > 1 (2 sequences run, 0 beam search; 1 not run)" in md
