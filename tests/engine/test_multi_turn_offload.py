"""Multi-turn sessions through the engine, with and without a CPU offload tier.

One session of three turns (system 100 tokens, messages 50, answers 30, 16-token content ids:
prompts 150, 230, 310) on Llama-3.1-8B / H100 (roofline, vLLM V0 profile) whose GPU holds 30
blocks of 16 tokens: one turn's blocks. Between turns a 479-token request takes all 30 blocks,
evicting the session's blocks from the GPU, so turns 2 and 3 find their history only in the
CPU tier. Hand-derived: turn k+1 shares ``floor(min(prompt_k + 30, prompt_k+1) / 16)`` ids
with turn k (11 of 12 for turn 2, 16 for turn 3); the CPU tier holds turn k's prompt blocks
(``offload_prompt_only``, vLLM's default: 150 // 16 = 9 and 230 // 16 = 14 blocks) or every
full block of prompt and answer (``offload_prompt_only: false``: 11 and 16).
"""
from __future__ import annotations

import math

import pytest
from helpers import make_scenario, run_sim, spec

from simulator.catalog.hardware import get_gpu

PBT = 16
PROMPTS = (150, 230, 310)
ANSWER = 30
THINK_S = 2.0
#: KV bytes of one 16-token block of Llama-3.1-8B (bf16): 2 (K, V) x 32 layers x 8 KV heads
#: x 128 head dim x 2 bytes x 16 tokens
BLOCK_BYTES = 2 * 32 * 8 * 128 * 2 * 16


def _session_specs() -> list:
    """The session's turns (ids 0-2) and the two evicting requests (ids 3, 4)."""
    out, prev, fresh = [], (), 10_000
    for k, p in enumerate(PROMPTS):
        whole = p + ANSWER
        shared = 0 if k == 0 else min(PROMPTS[k - 1] + ANSWER, p)
        keep = prev[:shared // PBT]
        n_new = math.ceil(whole / PBT) - len(keep)
        ids = keep + tuple(range(fresh, fresh + n_new))
        fresh += n_new
        out.append(spec(k, k * 0.001, p, ANSWER, session_id=7, turn_index=k,
                        think_time_s=THINK_S, prefix_hash_ids=ids, prefix_block_tokens=PBT))
        prev = ids
    # arrive after turn 0 (resp. 1) ended and before the next turn (think time 2 s)
    out += [spec(3, 1.0, 479, 1, prefix_hash_ids=tuple(range(90_000, 90_030)),
                 prefix_block_tokens=PBT),
            spec(4, 3.5, 479, 1, prefix_hash_ids=tuple(range(95_000, 95_030)),
                 prefix_block_tokens=PBT)]
    return sorted(out, key=lambda s: s.arrival_time_s)


def _scenario(offload: dict | None):
    kvc = {"enable_prefix_caching": True, "num_gpu_blocks": 30, "block_size": PBT}
    if offload is not None:
        kvc["offload"] = offload
    return make_scenario({"kv_cache": kvc, "scheduler": {"max_model_len": 4096}})


def _by_id(out) -> dict:
    return {r.request_id: r for r in out.recorder.all_requests}


@pytest.mark.parametrize("prompt_only, hit_blocks", [(True, (9, 14)), (False, (11, 16))])
def test_turns_two_and_three_load_their_history_from_the_cpu_tier(prompt_only, hit_blocks):
    sc = _scenario({"tiers": [{"medium": "cpu", "size_gib": 4}],
                    "offload_prompt_only": prompt_only})
    host = get_gpu("h100-sxm").host_link_bandwidth_bytes_per_s
    outs = [run_sim(sc, _session_specs(), fast_forward=ff) for ff in (True, False)]
    for out in outs:
        r = _by_id(out)
        assert all(q.status == "completed" for q in r.values())
        assert [r[k].num_tier_hit_tokens for k in range(3)] == [0, *(b * PBT for b in
                                                                     hit_blocks)]
        for k, b in zip((1, 2), hit_blocks):   # one load each, over the host link
            assert r[k].kv_load_wait_s == pytest.approx(b * BLOCK_BYTES / host, rel=1e-12)
            # closed loop: the turn arrives at the previous turn's end + the think time
            assert r[k].arrival_time_s == r[k - 1].finish_time_s + THINK_S
        kv = out.replicas[0].kv
        assert kv.tier_load_bytes == sum(hit_blocks) * BLOCK_BYTES
        assert kv.tier_hit_tokens == [sum(hit_blocks) * PBT, 0]
    a, b = outs   # fast-forwarded decode runs give what stepping gives
    assert [(q.request_id, q.first_token_time_s, q.finish_time_s) for q in
            a.recorder.all_requests] == [(q.request_id, q.first_token_time_s, q.finish_time_s)
                                          for q in b.recorder.all_requests]


def test_without_a_tier_the_turns_recompute_their_history():
    out = run_sim(_scenario(None), _session_specs())
    r = _by_id(out)
    assert [r[k].num_cached_prompt_tokens for k in range(3)] == [0, 0, 0]
    assert out.recorder.prefix_hit_tokens == 0
    off = run_sim(_scenario({"tiers": [{"medium": "cpu", "size_gib": 0}]}), _session_specs())
    assert [q.num_cached_prompt_tokens for q in off.recorder.all_requests] == \
        [q.num_cached_prompt_tokens for q in out.recorder.all_requests]  # size 0: no tier


def test_on_a_large_gpu_the_history_hits_the_gpu_cache():
    sc = make_scenario({"kv_cache": {"enable_prefix_caching": True, "block_size": PBT}})
    r = _by_id(run_sim(sc, [s for s in _session_specs() if s.session_id is not None]))
    # the answers' blocks were registered as they filled: 11 (176 tokens), then 16 (256)
    assert [r[k].num_cached_prompt_tokens for k in range(3)] == [0, 176, 256]


def test_a_rejected_turn_ends_its_session_and_every_turn_is_accounted_for():
    specs = [s for s in _session_specs() if s.session_id is not None]
    sc = make_scenario({"kv_cache": {"enable_prefix_caching": True, "block_size": PBT},
                        "scheduler": {"max_model_len": 300}})  # turn 3 (310 tokens) too long
    out = run_sim(sc, specs)
    r = _by_id(out)
    assert [r[k].status for k in range(3)] == ["completed", "completed", "rejected"]
    assert r[2].reject_reason == "prompt_too_long"
    sc = make_scenario({"kv_cache": {"enable_prefix_caching": True, "block_size": PBT},
                        "scheduler": {"max_model_len": 200}})  # turn 2 too long: 3 abandoned
    r = _by_id(run_sim(sc, specs))
    assert [(r[k].status, r[k].reject_reason) for k in range(3)] == [
        ("completed", ""), ("rejected", "prompt_too_long"), ("rejected", "session_abandoned")]
    assert r[2].arrival_time_s == r[1].arrival_time_s   # abandoned when turn 2 was rejected


def test_step_table_carries_the_tier_bytes():
    sc = _scenario({"tiers": [{"medium": "cpu", "size_gib": 4}], "offload_prompt_only": False})
    for ff in (True, False):
        out = run_sim(sc, _session_specs(), fast_forward=ff)
        steps, rep = out.steps(), out.replicas[0]
        assert list(steps.columns[-2:]) == ["kv_load_bytes", "kv_store_bytes"]
        assert steps["kv_load_bytes"].sum() == rep.kv.tier_load_bytes == (11 + 16) * BLOCK_BYTES
        # stores show in the row after the step that made them: all but the last step's
        assert steps["kv_store_bytes"].sum() == rep.tier_bytes_mark[1]
        assert steps["kv_store_bytes"].sum() > 0
