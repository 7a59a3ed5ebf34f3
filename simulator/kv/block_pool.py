"""Paged KV block pool with reference counts, prefix hashes and LRU eviction.

Blocks are ids ``0 .. num_blocks-1``. A block is either *free* (ref count 0; in the free
queue) or *held* (ref count >= 1). A free block may still carry a prefix hash (its KV stays
valid until the block is reused): such blocks are reusable by a later prefix hit, and are
evicted in least-recently-freed order.

Free-queue discipline (the idea of vLLM v1's ``FreeKVCacheBlockQueue``; our own code): a
freed block *without* a hash goes to the front (reused first, LIFO), a freed block *with* a
hash goes to the back, so allocation evicts cached blocks in LRU order.
"""
from __future__ import annotations

from collections import OrderedDict


class BlockPoolError(RuntimeError):
    """Misuse of the pool (double free, negative ref count): a bug in the caller."""


class BlockPool:
    """A fixed set of KV blocks.

    Parameters
    ----------
    num_blocks : int
        Total blocks (``num_gpu_blocks``), >= 1.

    Raises
    ------
    ValueError
        If ``num_blocks < 1``.
    """

    __slots__ = (
        "_free",
        "_stack",
        "block_hash",
        "hash_to_block",
        "num_blocks",
        "num_evictions",
        "ref_cnt",
    )

    def __init__(self, num_blocks: int, enable_caching: bool = True):
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = int(num_blocks)
        self.ref_cnt = [0] * num_blocks
        self.block_hash: list = [None] * num_blocks
        self.hash_to_block: dict = {}
        self.num_evictions = 0
        if enable_caching:
            self._free: OrderedDict[int, None] | None = OrderedDict(
                (i, None) for i in range(num_blocks))
            self._stack = None
        else:
            # no prefix caching: no block ever carries a hash, so the free queue is a plain
            # LIFO stack (same order as the OrderedDict discipline, faster); top = end
            self._free = None
            self._stack = list(range(num_blocks - 1, -1, -1))

    # ------------------------------------------------------------------ queries
    @property
    def num_free_blocks(self) -> int:
        """Blocks with ref count 0 (cached-but-unreferenced blocks count as free)."""
        return len(self._stack) if self._free is None else len(self._free)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def usage(self) -> float:
        """Fraction of blocks held (0..1)."""
        return self.num_used_blocks / self.num_blocks

    def free_block_ids(self) -> list[int]:
        """Free blocks in allocation order (front first): exposes eviction order for tests."""
        if self._free is None:
            return self._stack[::-1]
        return list(self._free)

    # ------------------------------------------------------------------ operations
    def allocate(self, n: int) -> list[int]:
        """Take ``n`` blocks from the front of the free queue (evicting cached hashes).

        Raises
        ------
        BlockPoolError
            If fewer than ``n`` blocks are free (callers check ``num_free_blocks`` first).
        """
        free = self._free
        if free is None:
            st = self._stack
            if n > len(st):
                raise BlockPoolError(f"allocate({n}) with only {len(st)} free blocks")
            out = st[len(st) - n:]
            del st[len(st) - n:]
            out.reverse()
            ref = self.ref_cnt
            for b in out:
                ref[b] = 1
            return out
        if n > len(free):
            raise BlockPoolError(f"allocate({n}) with only {len(free)} free blocks")
        out = []
        ref, bh = self.ref_cnt, self.block_hash
        for _ in range(n):
            b, _v = free.popitem(last=False)
            h = bh[b]
            if h is not None:
                if self.hash_to_block.get(h) == b:
                    del self.hash_to_block[h]
                bh[b] = None
                self.num_evictions += 1
            ref[b] = 1
            out.append(b)
        return out

    def touch(self, blocks: list[int]) -> None:
        """Add a reference to each (cached) block; a free one leaves the free queue."""
        ref, free = self.ref_cnt, self._free
        if free is None:
            raise BlockPoolError("touch() needs a pool built with enable_caching=True")
        for b in blocks:
            if ref[b] == 0:
                del free[b]
            ref[b] += 1

    def free(self, blocks: list[int]) -> None:
        """Drop one reference from each block, in the given order (pass tail-first).

        Raises
        ------
        BlockPoolError
            On a block whose ref count is already 0.
        """
        ref, free, bh = self.ref_cnt, self._free, self.block_hash
        if free is None:
            st = self._stack
            for b in blocks:
                c = ref[b] - 1
                if c < 0:
                    raise BlockPoolError(f"block {b} freed with ref count 0")
                ref[b] = c
                if c == 0:
                    st.append(b)
            return
        for b in blocks:
            c = ref[b] - 1
            if c < 0:
                raise BlockPoolError(f"block {b} freed with ref count 0")
            ref[b] = c
            if c == 0:
                free[b] = None
                if bh[b] is None:
                    free.move_to_end(b, last=False)

    def cache_block(self, block: int, block_hash) -> None:
        """Register a full block's prefix hash so later requests can share it."""
        if self._free is None:
            return
        if self.block_hash[block] is not None:
            return
        if block_hash in self.hash_to_block:
            return  # another block already holds this content
        self.block_hash[block] = block_hash
        self.hash_to_block[block_hash] = block

    def lookup(self, block_hash):
        """Block id holding ``block_hash`` or None."""
        return self.hash_to_block.get(block_hash)

    def check_invariants(self) -> None:
        """Raise :class:`BlockPoolError` if free + held != total, a ref count is negative, or
        a block is both free and held (DESIGN.md invariant 4)."""
        held = sum(1 for c in self.ref_cnt if c > 0)
        if any(c < 0 for c in self.ref_cnt):
            raise BlockPoolError("negative ref count")
        free = self._free if self._free is not None else self._stack
        if len(set(free)) != len(free):
            raise BlockPoolError("a block appears twice in the free queue")
        if held + len(free) != self.num_blocks:
            raise BlockPoolError(f"free {len(free)} + held {held} != {self.num_blocks}")
        for b in free:
            if self.ref_cnt[b] != 0:
                raise BlockPoolError(f"block {b} is free but has ref count {self.ref_cnt[b]}")
