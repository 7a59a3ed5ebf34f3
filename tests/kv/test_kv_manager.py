"""KVCacheManager: paged vs contiguous block counts (hand-computed ceilings), prefix hits
with exact shared block ids and ref counts, the hit cap, chained keys, trim, watermark."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import req

from simulator.kv import KVCacheManager


def test_blocks_for_is_ceiling():
    kv = KVCacheManager(10, 16)
    assert [kv.blocks_for(n) for n in (0, 1, 15, 16, 17, 32, 33)] == [0, 1, 1, 1, 2, 2, 3]


def test_paged_allocation_grows_block_by_block():
    kv = KVCacheManager(10, 16)
    r = req(0, prompt=17, output=20)
    assert kv.allocate(r, 17) and r.blocks == [0, 1]  # ceil(17/16) = 2
    assert kv.allocate(r, 32) and r.blocks == [0, 1]  # still 2
    assert kv.allocate(r, 33) and r.blocks == [0, 1, 2]  # ceil(33/16) = 3
    assert kv.num_used_blocks == 3 and kv.num_free_blocks == 7
    kv.free(r)
    assert r.blocks == [] and kv.num_free_blocks == 10


def test_paged_allocation_failure_changes_nothing():
    kv = KVCacheManager(4, 16)
    a, b = req(0, 40, 5), req(1, 40, 5)
    assert kv.allocate(a, 40)  # 3 blocks
    assert not kv.allocate(b, 40)  # needs 3, 1 free
    assert b.blocks == [] and kv.num_free_blocks == 1
    assert kv.allocate(b, 16) and b.blocks == [3]


def test_contiguous_reserves_maximum_length():
    kv = KVCacheManager(100, 16, allocation="contiguous", max_model_len=1000)
    r = req(0, prompt=30, output=5)  # no declared max_tokens: reserve max_model_len
    assert kv.allocate(r, 30)
    assert len(r.blocks) == 63  # ceil(1000 / 16)
    assert kv.allocate(r, 2000) and len(r.blocks) == 63  # already reserved: no change
    d = req(1, prompt=30, output=5, max_tokens=20)  # reserve prompt + max_tokens = 50
    assert kv.allocate(d, 30) and len(d.blocks) == 4  # ceil(50 / 16)
    assert kv.num_free_blocks == 100 - 67
    e = req(2, prompt=30, output=5)
    assert not kv.allocate(e, 30)  # 63 more blocks do not fit in 33


def test_can_ever_fit_paged_and_contiguous():
    paged = KVCacheManager(50, 16)  # 800 tokens
    assert paged.can_ever_fit(req(0, 799, 100))  # prompt + 1 = 800 tokens
    assert not paged.can_ever_fit(req(1, 800, 1))  # 801 tokens
    contig = KVCacheManager(50, 16, allocation="contiguous", max_model_len=1000)
    assert not contig.can_ever_fit(req(2, 10, 1))  # reserves 1000 tokens = 63 blocks
    assert contig.can_ever_fit(req(3, 10, 1, max_tokens=790))  # 800 tokens


def test_watermark_applies_to_new_requests_only():
    kv = KVCacheManager(10, 16, watermark=0.2)  # 2 blocks kept back
    r = req(0, prompt=144, output=1)  # 9 blocks
    assert not kv.allocate(r, 144, new_request=True)  # 10 - 2 = 8 < 9
    assert kv.allocate(r, 144) and len(r.blocks) == 9


def _prefix_req(i, prompt, ids, pbt=16):
    return req(i, prompt=prompt, output=5, prefix_hash_ids=tuple(ids), prefix_block_tokens=pbt)


def _compute_and_cache(kv, r, tokens):
    assert kv.allocate(r, tokens, new_request=True, hit_blocks=kv.get_computed_blocks(r))
    r.num_computed_tokens = tokens
    kv.cache_full_blocks(r)


def test_prefix_hits_share_exact_blocks():
    kv = KVCacheManager(10, 16, enable_prefix_caching=True)
    a = _prefix_req(0, 64, (1, 2, 3))  # 3 shareable blocks of 16 tokens
    assert kv.get_computed_blocks(a) == []  # nothing cached yet
    _compute_and_cache(kv, a, 64)
    assert a.blocks == [0, 1, 2, 3]
    assert [kv.pool.block_hash[b] is not None for b in a.blocks] == [True, True, True, False]
    b = _prefix_req(1, 64, (1, 2, 3))
    hits = kv.get_computed_blocks(b)
    assert hits == [0, 1, 2]  # cap: min(3 keys, (64 - 1) // 16 = 3)
    assert kv.allocate(b, 64, new_request=True, hit_blocks=hits)
    assert b.blocks == [0, 1, 2, 4] and b.num_cached_blocks == 3
    assert kv.pool.ref_cnt[:6] == [2, 2, 2, 1, 1, 0]
    kv.pool.check_invariants()
    # free A (tail first): its private block 3 goes to the front, the shared ones stay held
    kv.free(a)
    assert kv.pool.ref_cnt[:5] == [1, 1, 1, 0, 1]
    kv.free(b)  # now 4 to the front, and the cached 2, 1, 0 to the back (tail first)
    assert kv.pool.free_block_ids() == [4, 3, 5, 6, 7, 8, 9, 2, 1, 0]
    kv.pool.check_invariants()


def test_prefix_hit_cap_leaves_one_token_to_compute():
    kv = KVCacheManager(10, 16, enable_prefix_caching=True)
    _compute_and_cache(kv, _prefix_req(0, 64, (1, 2, 3)), 64)
    c = _prefix_req(1, 48, (1, 2, 3))  # the whole prompt is the prefix
    assert kv.get_computed_blocks(c) == [0, 1]  # (48 - 1) // 16 = 2 blocks, not 3


def test_prefix_chain_stops_at_first_difference():
    kv = KVCacheManager(10, 16, enable_prefix_caching=True)
    _compute_and_cache(kv, _prefix_req(0, 64, (1, 2, 3)), 64)
    assert kv.get_computed_blocks(_prefix_req(1, 64, (1, 9, 3))) == [0]
    assert kv.get_computed_blocks(_prefix_req(2, 64, (5, 2, 3))) == []
    assert kv.get_computed_blocks(_prefix_req(3, 64, (1, 2))) == [0, 1]


def test_prefix_blocks_larger_than_kv_blocks():
    """Prefix ids cover 32 tokens each, KV blocks 16: KV blocks 0 and 1 both lie in prefix
    block 0, so prompts (7, 8) and (7, 9) share exactly two KV blocks."""
    kv = KVCacheManager(20, 16, enable_prefix_caching=True)
    e = _prefix_req(0, 100, (7, 8), pbt=32)
    _compute_and_cache(kv, e, 100)  # shareable: min(64, 100) // 16 = 4 blocks
    assert e.num_cached_blocks == 4
    f = _prefix_req(1, 100, (7, 9), pbt=32)
    assert kv.get_computed_blocks(f) == e.blocks[:2]
    g = _prefix_req(2, 100, (7, 8), pbt=32)
    assert kv.get_computed_blocks(g) == e.blocks[:4]


def test_prefix_caching_off_never_hits():
    kv = KVCacheManager(10, 16)
    a = _prefix_req(0, 64, (1, 2, 3))
    assert kv.allocate(a, 64)
    a.num_computed_tokens = 64
    kv.cache_full_blocks(a)
    assert kv.get_computed_blocks(_prefix_req(1, 64, (1, 2, 3))) == []


def test_free_cached_hits_count_against_free_space():
    kv = KVCacheManager(5, 16, enable_prefix_caching=True)
    a = _prefix_req(0, 48, (1, 2, 3))
    _compute_and_cache(kv, a, 48)  # blocks 0..2 cached
    kv.free(a)
    assert kv.num_free_blocks == 5
    b = _prefix_req(1, 64, (1, 2, 3))
    hits = kv.get_computed_blocks(b)
    assert hits == [0, 1, 2]
    # 4 blocks needed, 3 of them are free cached hits: 5 free - 3 hits = 2 >= 1 new
    assert kv.allocate(b, 64, new_request=True, hit_blocks=hits)
    assert b.blocks == [0, 1, 2, 3] and kv.num_free_blocks == 1
    c = _prefix_req(2, 200, (1, 2, 3))
    hits = kv.get_computed_blocks(c)  # 13 blocks needed, 3 shared (held), 10 new > 1
    assert not kv.allocate(c, 200, new_request=True, hit_blocks=hits)
    assert c.blocks == [] and kv.pool.ref_cnt[:4] == [1, 1, 1, 1]


def test_trim_releases_tail_blocks():
    kv = KVCacheManager(10, 16)
    r = req(0, 40, 5)
    assert kv.allocate(r, 40) and r.blocks == [0, 1, 2]
    kv.trim(r, 17)  # ceil(17/16) = 2 blocks kept
    assert r.blocks == [0, 1] and kv.pool.free_block_ids()[0] == 2
    kv.trim(r, 30)  # nothing beyond 2 blocks
    assert r.blocks == [0, 1]
    contig = KVCacheManager(100, 16, allocation="contiguous", max_model_len=100)
    s = req(1, 40, 5)
    contig.allocate(s, 40)
    contig.trim(s, 1)  # contiguous reservations are never trimmed
    assert len(s.blocks) == 7


def test_bad_arguments():
    with pytest.raises(ValueError):
        KVCacheManager(10, 0)
    with pytest.raises(ValueError):
        KVCacheManager(10, 16, allocation="virtual")


def test_plan_decode_run_blocks_counts_block_boundaries():
    # block_size 4. A: 5 tokens computed, 2 blocks held: step s needs ceil((5 + s) / 4)
    # blocks = 2, 2, 2, 3, 3, 3 -> grows at step 4. B: 2 computed, 1 held: ceil((2 + s) / 4)
    # = 1, 1, 2, 2, 2, 2 -> grows at step 3. Growth after each step: 0, 0, 1, 2, 2, 2.
    kv = KVCacheManager(4, 4)
    a, b = req(0, prompt=5, output=10), req(1, prompt=2, output=10)
    assert kv.allocate(a, 6) and kv.allocate(b, 3)  # the first step's slots: 2 + 1 blocks
    a.num_computed_tokens, b.num_computed_tokens = 5, 2
    k, used = kv.plan_decode_run_blocks([a, b], 6)
    assert k == 3  # 1 block free: step 3 takes it, step 4 would need another
    assert used.head(6) == [3, 3, 4, 5, 5, 5]  # 3 held + growth
    # the same answers as the one-at-a-time methods
    c, held = np.array([5, 2]), kv.blocks_held([a, b])
    assert kv.max_decode_run_steps(c, held, 6) == k
    assert kv.decode_run_blocks_used(c, held, 6).tolist() == used.head(6)


@pytest.mark.parametrize("seed", range(6))
def test_run_blocks_listed_lazily_match_every_step_counted(seed):
    # random batches (block_size 4 or 16; some requests holding more blocks than they need):
    # the closed-form growth, the longest run the pool supplies, and the blocks listed a few
    # steps at a time equal decode_run_blocks_used's (k, batch) count and a bisect over it
    rng = np.random.default_rng(seed)
    bs = int(rng.choice([4, 16]))
    kv = KVCacheManager(4000, bs)
    reqs = []
    for i in range(int(rng.integers(1, 40))):
        r = req(i, prompt=int(rng.integers(1, 200)), output=10_000)
        extra = int(rng.integers(0, 3)) if rng.random() < 0.3 else 0
        assert kv.allocate(r, r.num_prompt_tokens + 1 + extra * bs)
        r.num_computed_tokens = r.num_prompt_tokens
        reqs.append(r)
    # leave a pool that runs short within the run (or not)
    kv.pool.allocate(int(rng.integers(0, kv.num_free_blocks + 1)))
    k_max = int(rng.integers(1, 300))
    k, blocks = kv.plan_decode_run_blocks(reqs, k_max)
    c = np.array([r.num_computed_tokens for r in reqs])
    held = kv.blocks_held(reqs)
    every = kv.decode_run_blocks_used(c, held, k_max)
    assert k == kv.max_decode_run_steps(c, held, k_max)
    assert k == max(1, int(np.searchsorted(every - kv.num_used_blocks, kv.num_free_blocks,
                                           side="right")))
    assert [blocks.growth(s) for s in range(k_max + 1)] == \
        [0] + (every - kv.num_used_blocks).tolist()
    got, n = [], 0
    while n < k_max:  # listed in uneven pieces, read back as one list
        n = min(k_max, n + int(rng.integers(1, 40)))
        got = list(blocks.head(n))
        assert blocks.at(n - 1) == every[n - 1]
    assert got == every.tolist()
    assert blocks.head(k_max + 5) == every.tolist()  # never past k_max
