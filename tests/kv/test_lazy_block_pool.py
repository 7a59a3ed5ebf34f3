"""The lazy block pool: memory in proportion to the blocks handed out, not to the pool's
size (a pool of 10^12 blocks, thousands of replicas). Expected values derived by hand."""
from __future__ import annotations

import pytest
from helpers import (
    make_scheduler,
    req,
    run_constant_step,
    small_scenario,
    specs_from_rows,
)

from simulator.kv import BlockPool


@pytest.mark.parametrize("caching", [True, False])
def test_block_pool_memory_follows_blocks_used_not_owned(caching):
    """A pool of 10^12 blocks (a replica with an absurd num_gpu_blocks) is built at once and
    holds state only for the blocks it handed out: 3 allocated -> 3 ref counts; the ids are
    the lowest three; freeing and re-allocating reuses them (LIFO), so no new id is
    touched."""
    n = 10**12
    p = BlockPool(n, enable_caching=caching)
    assert p.num_free_blocks == n
    assert p.allocate(3) == [0, 1, 2]
    # without caching no count is kept until one is read (BlockPool.free)
    counts = 3 if caching else 0
    assert len(p._ref) == counts and p.fresh == 3
    assert p.num_free_blocks == n - 3 and p.num_used_blocks == 3
    p.free([2, 1, 0])
    assert len(p._ref) == counts and not any(p._ref) and p.num_free_blocks == n
    assert p.allocate(3) == [0, 1, 2]
    assert p.fresh == 3  # nothing beyond the 3 ids ever used


def test_scheduler_on_a_huge_pool_allocates_nothing_per_block():
    s = make_scheduler(num_blocks=10**12, block_size=16)
    r = req(0, 100, 3)
    s.add_request(r, 0.0)
    out = s.schedule(0.0)
    s.update(out, 0.0, 0.01)
    # 100 prompt tokens + the first output need ceil(100 / 16) = 7 blocks after the prefill
    pool = s.kv.pool
    assert len(r.blocks) == 7 and pool.fresh == 7
    assert len(pool._ref) == (7 if pool._chunks is None else 0)  # counts kept, or none
    assert pool.ref_cnt[:8] == [1] * 7 + [0] and len(pool._ref) == 7  # counted when read


def test_thousands_of_replicas_touch_only_the_blocks_their_requests_need():
    """5,000 replicas, round robin, 12 requests of 20 prompt + 4 output tokens: each request
    needs ceil(24 / 16) = 2 blocks at most, so all pools together touch at most 12 x 2 = 24
    blocks (before the lazy pool, every replica built its whole ~30,000-block free queue)."""
    sc = small_scenario(cluster={"num_replicas": 5000})
    specs = specs_from_rows([(0.1 * i, 20, 4) for i in range(12)])
    sim, _ = run_constant_step(sc, specs)
    df = sim.requests()
    assert (df.status == "completed").sum() == 12
    assert sum(rep.kv.pool.fresh for rep in sim.replicas) <= 24
