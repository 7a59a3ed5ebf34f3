"""Stateful property test of BlockPool against an independent model of its documented
free-queue discipline: allocation takes from the front (evicting a cached hash), a freed
unhashed block goes to the front, a freed hashed block to the back, a hit (touch) on a free
cached block takes it out of the queue. After every operation the pool's invariants hold
and its free order, ref counts and hash table equal the model's."""
from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from simulator.kv.block_pool import BlockPool, BlockPoolError

N = 8


class PoolMachine(RuleBasedStateMachine):
    caching = True

    def __init__(self):
        super().__init__()
        self.pool = BlockPool(N, enable_caching=self.caching)
        self.free = list(range(N))  # model free queue, front first
        self.ref = [0] * N
        self.hash = [None] * N
        self.h2b: dict = {}
        self.owners: list[list[int]] = []  # blocks held by each live "request"
        self.evictions = 0

    # ------------------------------------------------------------------ rules
    @rule(n=st.integers(0, N + 1))
    def allocate(self, n):
        if n > len(self.free):
            try:
                self.pool.allocate(n)
            except BlockPoolError:
                return
            raise AssertionError("over-allocation did not raise")
        got = self.pool.allocate(n)
        want, self.free = self.free[:n], self.free[n:]
        assert got == want
        for b in want:
            if self.hash[b] is not None:
                if self.h2b.get(self.hash[b]) == b:
                    del self.h2b[self.hash[b]]
                self.hash[b] = None
                self.evictions += 1
            self.ref[b] = 1
        if want:
            self.owners.append(list(want))

    @precondition(lambda self: self.owners)
    @rule(i=st.integers(0, 100))
    def free_owner(self, i):
        blocks = self.owners.pop(i % len(self.owners))
        tail_first = blocks[::-1]
        self.pool.free(tail_first)
        for b in tail_first:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if self.hash[b] is None:
                    self.free.insert(0, b)
                else:
                    self.free.append(b)

    @precondition(lambda self: self.caching and self.owners)
    @rule(i=st.integers(0, 100), j=st.integers(0, N), h=st.integers(0, 5))
    def cache(self, i, j, h):
        blocks = self.owners[i % len(self.owners)]
        b = blocks[j % len(blocks)]
        self.pool.cache_block(b, h)
        if self.hash[b] is None and h not in self.h2b:
            self.hash[b] = h
            self.h2b[h] = b

    @precondition(lambda self: self.caching and self.free)
    @rule(i=st.integers(0, 100), h=st.integers(0, 5))
    def cache_free(self, i, h):
        """A hash registered on a free block (possibly never used): its queue position does
        not change; a later hit takes it out of the queue wherever it is (the lazy pool's
        never-used id range included)."""
        b = self.free[i % len(self.free)]
        self.pool.cache_block(b, h)
        if self.hash[b] is None and h not in self.h2b:
            self.hash[b] = h
            self.h2b[h] = b

    @precondition(lambda self: self.caching and self.h2b)
    @rule(h=st.integers(0, 5))
    def hit(self, h):
        b = self.h2b.get(h)
        if b is None:
            return
        assert self.pool.lookup(h) == b
        self.pool.touch([b])
        if self.ref[b] == 0:
            self.free.remove(b)
        self.ref[b] += 1
        self.owners.append([b])

    @precondition(lambda self: self.free)
    @rule(i=st.integers(0, 100))
    def double_free_raises(self, i):
        b = self.free[i % len(self.free)]
        try:
            self.pool.free([b])
        except BlockPoolError:
            return
        raise AssertionError(f"freeing free block {b} did not raise")

    # ------------------------------------------------------------------ invariants
    @invariant()
    def pool_matches_model(self):
        p = self.pool
        p.check_invariants()
        assert p.free_block_ids() == self.free
        assert p.ref_cnt == self.ref
        assert p.num_free_blocks + p.num_used_blocks == N
        assert p.num_free_blocks == len(self.free)
        held = [b for o in self.owners for b in o]
        assert sorted(held) == sorted(b for b in range(N) for _ in range(self.ref[b]))
        if self.caching:
            assert p.hash_to_block == self.h2b
            assert p.num_evictions == self.evictions


class StackPoolMachine(PoolMachine):
    caching = False


TestBlockPoolCaching = PoolMachine.TestCase
TestBlockPoolCaching.settings = settings(max_examples=60, stateful_step_count=40,
                                         deadline=None)
TestBlockPoolStack = StackPoolMachine.TestCase
TestBlockPoolStack.settings = settings(max_examples=30, stateful_step_count=40, deadline=None)
