"""BlockPool: exact block ids, LIFO reuse of unhashed blocks, LRU eviction of cached blocks,
misuse errors. Expected orders follow the free-queue discipline stated in the module
docstring (unhashed freed blocks to the front, hashed ones to the back, allocate from the
front), worked out by hand below."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.kv.block_pool import BlockPool, BlockPoolError

BOTH = pytest.mark.parametrize("caching", [True, False], ids=["caching", "stack"])


@BOTH
def test_fresh_pool_allocates_ids_in_order(caching):
    p = BlockPool(6, enable_caching=caching)
    assert p.free_block_ids() == [0, 1, 2, 3, 4, 5]
    assert p.allocate(2) == [0, 1]
    assert p.allocate(3) == [2, 3, 4]
    assert p.free_block_ids() == [5]
    assert (p.num_free_blocks, p.num_used_blocks) == (1, 5)
    assert p.usage() == pytest.approx(5 / 6)
    assert p.ref_cnt == [1, 1, 1, 1, 1, 0]
    p.check_invariants()


@BOTH
def test_unhashed_blocks_reused_lifo(caching):
    p = BlockPool(6, enable_caching=caching)
    p.allocate(2)  # [0, 1]
    p.allocate(2)  # [2, 3]
    p.free([1, 0])  # tail first: 1 to the front, then 0 in front of it
    assert p.free_block_ids() == [0, 1, 4, 5]
    p.free([3])
    assert p.free_block_ids() == [3, 0, 1, 4, 5]
    assert p.allocate(3) == [3, 0, 1]  # the most recently freed first
    assert p.free_block_ids() == [4, 5]
    p.check_invariants()


def test_cached_blocks_evicted_least_recently_freed_first():
    p = BlockPool(6)
    a = p.allocate(3)  # [0, 1, 2]
    for j, b in enumerate(a):
        p.cache_block(b, ("a", j))
    b_ = p.allocate(2)  # [3, 4]
    for j, b in enumerate(b_):
        p.cache_block(b, ("b", j))
    p.free([2, 1, 0])  # request A ends (tail first): hashed blocks go to the back
    assert p.free_block_ids() == [5, 2, 1, 0]
    p.free([4, 3])  # then request B
    assert p.free_block_ids() == [5, 2, 1, 0, 4, 3]
    assert p.lookup(("a", 2)) == 2 and p.num_evictions == 0
    # allocation takes the unhashed block 5 first, then evicts A's tail block 2
    assert p.allocate(2) == [5, 2]
    assert p.num_evictions == 1
    assert p.lookup(("a", 2)) is None and p.block_hash[2] is None
    assert p.lookup(("a", 1)) == 1
    # a prefix hit on a cached free block takes it out of the free queue ...
    p.touch([1])
    assert p.ref_cnt[1] == 1 and p.free_block_ids() == [0, 4, 3]
    # ... and freeing it again makes it the most recently used cached block
    p.free([1])
    assert p.free_block_ids() == [0, 4, 3, 1]
    assert p.allocate(4) == [0, 4, 3, 1]
    assert p.num_evictions == 5
    assert p.hash_to_block == {}
    p.check_invariants()


def test_shared_block_freed_only_when_last_reference_drops():
    p = BlockPool(3)
    (b,) = p.allocate(1)
    p.cache_block(b, "k")
    p.touch([b])  # a second request shares it
    assert p.ref_cnt[b] == 2
    p.free([b])
    assert p.ref_cnt[b] == 1 and b not in p.free_block_ids()
    p.free([b])
    assert p.ref_cnt[b] == 0 and p.free_block_ids()[-1] == b
    assert p.lookup("k") == b  # still cached while free
    p.check_invariants()


def test_cache_block_keeps_first_holder_of_a_hash():
    p = BlockPool(4)
    b0, b1 = p.allocate(2)
    p.cache_block(b0, "h")
    p.cache_block(b1, "h")  # same content computed twice: the first block keeps the hash
    assert p.lookup("h") == b0 and p.block_hash[b1] is None
    p.cache_block(b0, "other")  # a block's hash never changes while it has one
    assert p.block_hash[b0] == "h"


@BOTH
def test_double_free_raises(caching):
    p = BlockPool(3, enable_caching=caching)
    (b,) = p.allocate(1)
    p.free([b])
    with pytest.raises(BlockPoolError):
        p.free([b])
    with pytest.raises(BlockPoolError):
        p.free([2])  # never allocated


@BOTH
def test_over_allocation_raises_and_changes_nothing(caching):
    p = BlockPool(3, enable_caching=caching)
    p.allocate(2)
    with pytest.raises(BlockPoolError):
        p.allocate(2)
    assert p.free_block_ids() == [2]


def test_bad_sizes_and_touch_without_caching():
    with pytest.raises(ValueError):
        BlockPool(0)
    with pytest.raises(BlockPoolError):
        BlockPool(2, enable_caching=False).touch([0])


def test_check_invariants_detects_corruption():
    p = BlockPool(4)
    p.allocate(2)
    p.check_invariants()
    p.ref_cnt[3] = 1  # a free block that is also held
    with pytest.raises(BlockPoolError):
        p.check_invariants()
    p.ref_cnt[3] = 0
    p.ref_cnt[0] = -1
    with pytest.raises(BlockPoolError):
        p.check_invariants()
    q = BlockPool(4, enable_caching=False)
    q.allocate(1)
    q._stack.append(3)  # a block twice in the free stack
    with pytest.raises(BlockPoolError):
        q.check_invariants()


@pytest.mark.parametrize("caching", [True, False])
def test_free_of_shared_and_repeated_blocks(caching):
    """Dropping references one block at a time: a block listed twice loses two references,
    a shared block goes back to the free queue only at its last reference, and a block
    freed once too often is refused. Counts and queue derived by hand."""
    p = BlockPool(6, enable_caching=caching)
    a = p.allocate(3)                       # [0, 1, 2], each count 1
    if caching:
        p.touch([1])
    else:
        p.ref_cnt[1] = 2                    # block 1 shared by two holders
    p.free([2, 1])                          # 2 -> 0 (free), 1 -> 1 (still held)
    assert p.ref_cnt[:3] == [1, 1, 0]
    assert p.free_block_ids()[0] == 2       # the freed block is reused first
    p.free([1, 0])
    assert p.ref_cnt[:3] == [0, 0, 0] and p.num_free_blocks == 6
    assert p.free_block_ids()[:3] == [0, 1, 2]  # most recently freed first
    b = p.allocate(1)[0]
    assert b == 0
    p.ref_cnt[b] = 2
    p.free([b, b])                          # listed twice: both references dropped
    assert p.ref_cnt[b] == 0 and p.free_block_ids()[0] == b
    with pytest.raises(BlockPoolError):
        p.free([b])                         # no reference left
    assert a == [0, 1, 2]


@pytest.mark.parametrize("seed", range(8))
def test_uncounted_stack_hands_out_what_the_counted_one_does(seed):
    """A pool without caching keeps no ref counts until one is read (freed lists pushed
    whole): on random allocations and frees of held lists (whole, tails, single blocks), it
    hands out the same ids in the same order, reports the same free blocks and queue, and its
    counts once read are those of a pool that counted from the start."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 80))
    fast, counted = BlockPool(n, enable_caching=False), BlockPool(n, enable_caching=False)
    counted.ref_cnt  # noqa: B018 - reading a count keeps every count from then on
    held_fast, held_counted = [], []
    for _ in range(300):
        if held_fast and rng.random() < 0.45:
            i = int(rng.integers(len(held_fast)))
            cut = int(rng.integers(len(held_fast[i])))  # free the tail from ``cut``
            for held, pool in ((held_fast, fast), (held_counted, counted)):
                tail = held[i][cut:]
                del held[i][cut:]
                tail.reverse()
                pool.free(tail)
                if not held[i]:
                    del held[i]
        else:
            k = int(rng.integers(0, 6))
            if k > counted.num_free_blocks:
                with pytest.raises(BlockPoolError):
                    fast.allocate(k)
                continue
            a, b = fast.allocate(k), counted.allocate(k)
            assert a == b
            if a:
                held_fast.append(a)
                held_counted.append(list(b))
        assert fast.num_free_blocks == counted.num_free_blocks
        assert fast.free_block_ids() == counted.free_block_ids()
    assert fast._chunks is not None and not fast._ref  # never counted so far
    assert fast.ref_cnt == counted.ref_cnt
    fast.check_invariants()


def test_uncounted_free_refuses_ids_never_handed_out():
    """Review finding: a pool keeping no counts took back an id it never handed out (then
    handed it out while it was still among the never-used ids). The ends of a freed list are
    checked: the same errors as a counting pool for a single id or a stray list."""
    for bad in ([7], [99], [-1], [2, 1, 7], [7, 1]):
        p = BlockPool(8, enable_caching=False)
        p.allocate(3)
        with pytest.raises(BlockPoolError):
            p.free(bad)
        assert p.num_free_blocks == 5 and p.allocate(2) == [3, 4]  # nothing was taken back
