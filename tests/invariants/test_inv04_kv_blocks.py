"""Invariant 4 (DESIGN.md): KV blocks.

After every scheduler call that moves blocks (``schedule``, ``update``,
``commit_decode_run``; wrapped with ``monkeypatch`` by :class:`helpers.KVAudit`):
free + allocated == total, no negative ref count, no block both free and held
(``BlockPool.check_invariants``), and, stronger, each block's ref count equals the number of
live requests holding it (so no finished request keeps a block and no block leaks), waiting
requests hold nothing, and every scheduled request holds the blocks its step writes.
At the end of a run that drained, every block is free. With KV offload tiers, requests
parked for a load are waiting yet hold exactly the blocks of what they load, and no tier holds
more blocks than its capacity.

Non-vacuity: the audit counts its checks, the preemption victims it saw, the steps run with
a full pool, the largest ref count (>= 2 only when blocks are shared by prefix caching) and
the pool's evictions of cached blocks.
"""
from __future__ import annotations

import pytest
from helpers import SUITE, KVAudit, make_scenario, prefix_specs, run_sim, suite_case

# instruments the scheduler by patching its classes: the pure-Python build only
pytestmark = pytest.mark.pure_core

PRESSURE = {"preempt_chunked", "no_chunking", "priority", "prefix_caching", "multi_replica",
            "cancel_admission", "max_model_len"}
PREFIX = {"prefix_caching", "prefix_mooncake", "offload_vllm", "offload_lmcache_shared",
          "multi_turn_offload"}
OFFLOAD = {"offload_vllm", "offload_lmcache_shared", "multi_turn_offload"}


@pytest.mark.parametrize("name", list(SUITE))
def test_kv_invariants_every_step(name, monkeypatch):
    audit = KVAudit().install(monkeypatch)
    sc, specs, until = suite_case(name)
    out = run_sim(sc, specs, until_s=until)
    assert audit.checks > 100
    pools = [rep.kv.pool for rep in out.replicas]
    if until is None:
        for p in pools:
            p.check_invariants()
            assert p.num_used_blocks == 0 and p.num_free_blocks == p.num_blocks
            assert all(c == 0 for c in p.ref_cnt)
    if name in PRESSURE:
        assert audit.preempted > 0 and audit.full_steps > 0, vars(audit)
    if name in PREFIX:
        assert audit.max_ref >= 2, vars(audit)  # blocks shared by two live requests
        assert out.recorder.prefix_hit_tokens > 0
        assert sum(p.num_evictions for p in pools) > 0
        # cached blocks outlive their requests: freed, but still findable by hash
        assert any(p.hash_to_block for p in pools)
    else:
        assert audit.max_ref <= 1
    if name in OFFLOAD:  # every tier within its capacity at every check; tiers were used
        assert audit.tier_checks > 100
        kvs = [rep.kv for rep in out.replicas]
        assert sum(kv.tier_hit_tokens[0] for kv in kvs) > 0
        for t in kvs[0].offload.tiers:
            assert t.num_evicted_blocks > 0 and len(t) == t.capacity_blocks, vars(t)
        if not kvs[0].offload.sync_loads:
            assert audit.loading > 0  # requests were seen parked, holding their blocks


def test_kv_shared_prefix_blocks_under_preemption(monkeypatch):
    """Sharing never mixes content: a block that carries a prefix hash sits, in every
    request holding it, at the position whose prefix key is that hash; a block held by two
    or more requests is always such a hashed prefix block. Exercised through preemption,
    eviction and re-admission."""
    audit = KVAudit().install(monkeypatch)
    shared_seen = []
    from simulator.scheduling.continuous import ContinuousScheduler
    orig = ContinuousScheduler.update

    def update(self, out, start, end):
        pool = self.kv.pool
        for r in self.running:
            keys = r.prefix_keys or []
            for j, b in enumerate(r.blocks):
                h = pool.block_hash[b]
                if h is not None:
                    assert j < len(keys) and keys[j] == h, (r.request_id, j, b)
                if pool.ref_cnt[b] >= 2:
                    assert h is not None, (r.request_id, j, b)
                    shared_seen.append(pool.ref_cnt[b])
        orig(self, out, start, end)

    monkeypatch.setattr(ContinuousScheduler, "update", update)
    sc = make_scenario({"kv_cache": {"num_gpu_blocks": 70, "enable_prefix_caching": True},
                        "scheduler": {"max_num_batched_tokens": 512}})
    out = run_sim(sc, prefix_specs(150, 30.0, seed=3))
    df = out.requests()
    assert (df.status == "completed").sum() > 100
    assert df.num_preemptions.sum() > 0 and audit.preempted > 0
    assert len(shared_seen) > 10 and max(shared_seen) >= 3
    assert (df.num_cached_prompt_tokens > 0).sum() > 20
    assert sum(rep.kv.pool.num_evictions for rep in out.replicas) > 0
    # a cached prompt prefix is a whole number of blocks and leaves >= 1 token to compute
    bs = sc.kv_cache.block_size
    assert (df.num_cached_prompt_tokens % bs == 0).all()
    assert (df.num_cached_prompt_tokens <= df.num_prompt_tokens - 1).all()
