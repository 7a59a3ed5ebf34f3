"""``router: prefix_affinity`` on a trace with known shared prefixes: hand-counted hits."""
from __future__ import annotations

import pytest
from helpers import make_scenario, run_sim, spec, synthetic_workload

from simulator.scenario.config import ScenarioError, validate_scenario

GROUPS, PER_GROUP = 4, 8
PREFIX_TOKENS = 128     # 2 prefix ids x 64 tokens = 8 blocks of 16
PROMPT = PREFIX_TOKENS + 16


def _specs():
    """Group g's 8 requests arrive one after the other (ids 8g .. 8g+7), 1 s apart, so every
    request has finished before the next arrives (no load effects)."""
    out = []
    for i in range(GROUPS * PER_GROUP):
        g = i // PER_GROUP
        out.append(spec(i, float(i), PROMPT, 4, prefix_hash_ids=(100 * g + 1, 100 * g + 2),
                        prefix_block_tokens=64))
    return out


def _hit_tokens(router: str, replicas: int) -> int:
    sc = make_scenario({"cluster": {"num_replicas": replicas, "router": router},
                        "kv_cache": {"enable_prefix_caching": True, "block_size": 16,
                                     "num_gpu_blocks": 1000},
                        "perf": {"source": "constant", "constant": {"step_s": 0.001}}})
    out = run_sim(sc, _specs())
    assert len(out.requests()) == GROUPS * PER_GROUP
    assert (out.requests()["status"] == "completed").all()
    return int(out.recorder.prefix_hit_tokens)


def test_prefix_affinity_keeps_the_one_replica_hit_rate_on_four():
    # one replica: each group's first request misses, the 7 others hit all 8 prefix blocks
    one = GROUPS * (PER_GROUP - 1) * PREFIX_TOKENS
    assert _hit_tokens("round_robin", 1) == one
    # round robin over 4: a group's 8 requests land 2 on each replica: 1 miss + 1 hit each
    assert _hit_tokens("round_robin", 4) == GROUPS * 4 * PREFIX_TOKENS
    # prefix affinity over 4: a new prefix goes to the emptiest cache, its followers follow it
    assert _hit_tokens("prefix_affinity", 4) == one
    rate_one = one / (GROUPS * PER_GROUP * PROMPT)
    assert rate_one == pytest.approx(28 * 128 / (32 * 144))


def _guarded_counts(guard: int) -> dict:
    sc = make_scenario({"cluster": {"num_replicas": 2, "router": "prefix_affinity",
                                    "prefix_affinity_load_guard": guard},
                        "kv_cache": {"enable_prefix_caching": True, "block_size": 16,
                                     "num_gpu_blocks": 1000},
                        "perf": {"source": "constant", "constant": {"step_s": 0.001}}})
    # one request warms replica 0's cache, then 9 with the same prefix arrive at once
    specs = [spec(0, 0.0, PROMPT, 4, prefix_hash_ids=(1, 2), prefix_block_tokens=64)]
    specs += [spec(i, 10.0, PROMPT, 50, prefix_hash_ids=(1, 2), prefix_block_tokens=64)
              for i in range(1, 10)]
    out = run_sim(sc, specs)
    return out.requests()["replica_id"].value_counts().to_dict()


def test_load_guard_spills_a_hot_prefix():
    # no guard to speak of: all 9 follow the cached prefix to replica 0
    assert _guarded_counts(100) == {0: 10}
    # guard 2: replica 0 (cache hit) is a candidate while its outstanding <= replica 1's + 2.
    # loads (r0, r1) before each of the 9: (0,0) r0, (1,0) r0, (2,0) r0, (3,0) r1, (3,1) r0,
    # (4,1) r1, (4,2) r0, (5,2) r1, (5,3) r0 -> 6 + the warm-up on r0, 3 on r1
    assert _guarded_counts(2) == {0: 7, 1: 3}


def test_unknown_router_lists_prefix_affinity():
    with pytest.raises(ScenarioError, match="prefix_affinity"):
        validate_scenario({"cluster": {"router": "cache"},
                           "workload": synthetic_workload()})
