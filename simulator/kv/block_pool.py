"""Paged KV block pool with reference counts, prefix hashes and LRU eviction.

Blocks are ids ``0 .. num_blocks-1``. A block is either *free* (ref count 0; in the free
queue) or *held* (ref count >= 1). A free block may still carry a prefix hash (its KV stays
valid until the block is reused): such blocks are reusable by a later prefix hit, and are
evicted in least-recently-freed order.

Free-queue discipline (the idea of vLLM v1's ``FreeKVCacheBlockQueue``; our own code): a
freed block *without* a hash goes to the front (reused first, LIFO), a freed block *with* a
hash goes to the back, so allocation evicts cached blocks in LRU order. A fresh pool's queue
is ``0, 1, ..., num_blocks - 1``, so the lowest never-used id is allocated first.

Memory is proportional to the blocks that have ever been used, not to ``num_blocks``: the
never-used blocks are the id range ``[fresh, num_blocks)`` (a counter), ref counts live in a
list indexed by block id, as long as the highest id handed out (ids are handed out lowest
first; a list read and written by index: a dict of held blocks cost a hash, and resizes as
blocks came and went, on every block of every decode step), hashes in a dict keyed by the
blocks that have them, and only blocks that were freed after use sit in an explicit queue. A
replica with 10^6 blocks that serves one short request costs a few hundred bytes. The free
queue is, front to back::

    front (blocks freed without a hash, most recent first)
    never-used ids fresh, fresh + 1, ..., num_blocks - 1
    back (blocks freed with a hash, least recently freed first)

which is exactly the single queue the discipline above describes (a block freed with a hash
goes behind every never-used block; one freed without goes in front of them).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from simulator.base.compiled_core import register_pickling
from simulator.kv.errors import BlockPoolError


class _DenseView:
    """A list-like, read-write view of a sparse per-block table (``ref_cnt``,
    ``block_hash``): ``view[b]`` is the stored value or ``default``. Materialising it
    (iteration, ``==`` with a list, slicing) costs O(num_blocks): for tests and debugging, not
    for the hot path."""

    __slots__ = ("_d", "_default", "_n")

    def __init__(self, d: dict, n: int, default) -> None:
        self._d, self._n, self._default = d, n, default

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self._d, self._n, self._default), {}

    def __len__(self) -> int:
        return self._n

    def _index(self, b) -> int:
        b = int(b)
        if b < 0:
            b += self._n
        if not 0 <= b < self._n:
            raise IndexError(f"block {b} out of range 0..{self._n - 1}")
        return b

    def _get(self, i: int):
        return self._d.get(i, self._default)

    def _set(self, i: int, value) -> None:
        default = self._default
        if value is None if default is None else value == default:
            self._d.pop(i, None)
        else:
            self._d[i] = value

    def __getitem__(self, b):
        if isinstance(b, slice):
            return [self._get(i) for i in range(*b.indices(self._n))]
        return self._get(self._index(b))

    def __setitem__(self, b, value) -> None:
        self._set(self._index(b), value)

    def __iter__(self):
        return (self._get(i) for i in range(self._n))

    def __eq__(self, other) -> bool:
        try:
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        except TypeError:
            return NotImplemented

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"{list(self)!r}"


class _RefView(_DenseView):
    """:class:`_DenseView` of the pool's ref counts (``ref_cnt``), a list by block id:
    ``view[b]`` is block ``b``'s count (0 past the ids handed out)."""

    __slots__ = ("_ref",)

    def __init__(self, ref: list[int], n: int) -> None:
        super().__init__({}, n, 0)
        self._ref = ref

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self._ref, self._n), {}

    def _get(self, i: int):
        ref = self._ref
        return ref[i] if i < len(ref) else 0

    def _set(self, i: int, value) -> None:
        ref = self._ref
        if i >= len(ref):
            ref.extend([0] * (i + 1 - len(ref)))
        ref[i] = int(value)


class BlockPool:
    """A fixed set of KV blocks, allocated lazily.

    Parameters
    ----------
    num_blocks : int
        Total blocks (``num_gpu_blocks``), >= 1.
    enable_caching : bool
        Keep prefix hashes of freed blocks (LRU eviction); without it, the free queue is a
        plain LIFO stack (the same order, cheaper).

    Raises
    ------
    ValueError
        If ``num_blocks < 1``.
    """

    __slots__ = (
        "_back",
        "_chunks",
        "_front",
        "_hash",
        "_holes",
        "_ref",
        "_stack",
        "_stacked",
        "fresh",
        "hash_to_block",
        "num_blocks",
        "num_evictions",
    )

    def __init__(self, num_blocks: int, enable_caching: bool = True) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = int(num_blocks)
        #: the lowest never-used block id; ids >= fresh are free and never used
        self.fresh = 0
        #: ref count per block id ``b < len(_ref)`` (0: free); ids past the list: free
        self._ref: list[int] = []
        self._hash: dict = {}            # blocks carrying a prefix hash
        self.hash_to_block: dict = {}
        self.num_evictions = 0
        #: with caching: blocks freed without a hash, the most recent last (popped first: the
        #: front of the queue is this list's end)
        self._front: list[int] = []
        # OrderedDict[int, None] with caching, None without (Any: mypyc, see compiled_core)
        self._back: Any = None
        #: never-used ids taken out of order (a prefix hit on a block hashed while free)
        self._holes: set[int] = set()
        #: without caching: returned blocks, top of the stack = end; below them the never-used ids
        self._stack: list[int] | None = None
        #: without caching, until a ref count is read: the stack above ``_stack`` as the
        #: lists freed whole, in order (None: every count kept in ``_ref``; see :meth:`free`)
        self._chunks: list[list[int]] | None = None
        self._stacked = 0  # ids in ``_chunks``
        if enable_caching:
            self._back = OrderedDict()
        else:
            self._stack = []
            self._chunks = []

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.num_blocks, self._back is not None), {}

    # ------------------------------------------------------------------ views
    @property
    def ref_cnt(self) -> _RefView:
        """Ref count per block id (list-like view; 0 for free blocks)."""
        self._count_refs()
        return _RefView(self._ref, self.num_blocks)

    def _count_refs(self) -> None:
        """Keep every ref count from now on (a pool without caching counts none until one
        is read: :meth:`free`): a held block's count is 1, a free one's 0."""
        chunks = self._chunks
        if chunks is None:
            return
        st = self._stack
        assert st is not None
        for ch in chunks:
            st.extend(ch)
        self._chunks = None
        self._stacked = 0
        ref = self._ref
        ref[:] = [1] * self.fresh
        n = len(ref)
        for b in st:
            if 0 <= b < n:
                ref[b] = 0

    @property
    def block_hash(self) -> _DenseView:
        """Prefix hash per block id (list-like view; None for blocks without one)."""
        return _DenseView(self._hash, self.num_blocks, None)

    def ref_count(self, block: int) -> int:
        """Ref count of one block (0 when free)."""
        self._count_refs()
        ref = self._ref
        return ref[block] if 0 <= block < len(ref) else 0

    # ------------------------------------------------------------------ queries
    @property
    def num_free_blocks(self) -> int:
        """Blocks with ref count 0 (cached-but-unreferenced blocks count as free)."""
        never = self.num_blocks - self.fresh
        if self._stack is not None:
            return len(self._stack) + self._stacked + never
        return len(self._front) + len(self._back) + never - len(self._holes)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def usage(self) -> float:
        """Fraction of blocks held (0..1)."""
        return self.num_used_blocks / self.num_blocks

    def _never_used(self):
        holes = self._holes
        return (b for b in range(self.fresh, self.num_blocks) if b not in holes)

    def free_block_ids(self) -> list[int]:
        """Free blocks in allocation order (front first): exposes eviction order for tests.
        O(num_blocks)."""
        if self._stack is not None:
            stack = list(self._stack)
            for ch in self._chunks or ():
                stack.extend(ch)
            return stack[::-1] + list(range(self.fresh, self.num_blocks))
        return self._front[::-1] + list(self._never_used()) + list(self._back)

    # ------------------------------------------------------------------ operations
    def _take_fresh(self) -> int:
        """The lowest never-used id (skipping ids already taken out of order)."""
        b = self.fresh
        holes = self._holes
        while b in holes:
            holes.discard(b)
            b += 1
        self.fresh = b + 1
        ref = self._ref
        if b >= len(ref):
            ref.extend([0] * (b + 1 - len(ref)))
        return b

    def allocate(self, n: int) -> list[int]:
        """Take ``n`` blocks from the front of the free queue (evicting cached hashes).

        Raises
        ------
        BlockPoolError
            If fewer than ``n`` blocks are free (callers check ``num_free_blocks`` first).
        """
        if self._chunks is not None:
            return self._allocate_uncounted(n)
        ref = self._ref
        st = self._stack
        if st is not None:
            if n == 1 and st:  # one block from the top of the stack (a decode step's growth)
                b = st.pop()
                ref[b] = 1
                return [b]
            have = len(st)
            if n > have + self.num_blocks - self.fresh:
                raise BlockPoolError(f"allocate({n}) with only {self.num_free_blocks} free "
                                     "blocks")
            k = min(have, n)
            out = st[have - k:]
            del st[have - k:]
            out.reverse()
            for b in out:  # blocks from the stack: ids below fresh
                ref[b] = 1
            if k < n:
                f = self.fresh
                out.extend(range(f, f + n - k))
                self.fresh = f + n - k
                # never-used ids: the list reaches ``fresh`` (appended; counts set past it
                # through ``ref_cnt`` are overwritten)
                ref[f:f + n - k] = [1] * (n - k)
            return out
        if n > self.num_free_blocks:
            raise BlockPoolError(f"allocate({n}) with only {self.num_free_blocks} free blocks")
        front, back, bh = self._front, self._back, self._hash
        out = []
        for _ in range(n):
            if front:
                b = front.pop()
            elif self.fresh < self.num_blocks and len(self._holes) < self.num_blocks - self.fresh:
                b = self._take_fresh()
            else:
                b, _v = back.popitem(last=False)
            h = bh.pop(b, None)
            if h is not None:
                if self.hash_to_block.get(h) == b:
                    del self.hash_to_block[h]
                self.num_evictions += 1
            ref[b] = 1
            out.append(b)
        return out

    def _allocate_uncounted(self, n: int) -> list[int]:
        """:meth:`allocate` without caching while no ref count is kept: the same ids in the
        same order (the top of the stack first, then never-used ids lowest first), taken a
        freed list at a time."""
        if n > self.num_free_blocks:
            raise BlockPoolError(f"allocate({n}) with only {self.num_free_blocks} free blocks")
        chunks = self._chunks
        assert chunks is not None
        if n == 1 and chunks:  # one block (a decode step's growth): the top id, no slice
            top = chunks[-1]
            b = top.pop()
            if not top:
                chunks.pop()
            self._stacked -= 1
            return [b]
        out: list[int] = []
        need = n
        while need and chunks:
            top = chunks[-1]
            m = len(top)
            if m <= need:  # the whole list, top first
                chunks.pop()
                top.reverse()
                if out:
                    out.extend(top)
                else:
                    out = top
                need -= m
            else:
                part = top[m - need:]
                del top[m - need:]
                part.reverse()
                out.extend(part)
                need = 0
        self._stacked -= n - need
        if need:
            f = self.fresh
            out.extend(range(f, f + need))
            self.fresh = f + need
        return out

    def touch(self, blocks: list[int]) -> None:
        """Add a reference to each (cached) block; a free one leaves the free queue."""
        back = self._back
        if back is None:
            raise BlockPoolError("touch() needs a pool built with enable_caching=True")
        ref, front = self._ref, self._front
        for b in blocks:
            c = ref[b] if 0 <= b < len(ref) else 0
            if c == 0:
                if b in back:
                    del back[b]
                elif self.fresh <= b < self.num_blocks and b not in self._holes:
                    self._holes.add(b)  # a never-used block, taken out of order
                elif b in front:  # a block freed without a hash (a list scan: rare)
                    front.remove(b)
                else:
                    raise BlockPoolError(f"touch() of block {b}, which is not in the pool")
            if b >= len(ref):  # a never-used block, taken out of order
                ref.extend([0] * (b + 1 - len(ref)))
            ref[b] = c + 1

    def free(self, blocks: list[int]) -> None:
        """Drop one reference from each block, in the given order (pass tail-first).

        A pool without caching counts no references until one is read (:attr:`ref_cnt`,
        :meth:`ref_count`, :meth:`check_invariants`): its blocks are held once (sharing needs
        caching: :meth:`touch`), so the list is pushed on the free stack as it is, kept by the
        pool (the caller hands it over and must not use it again), without reading a block
        id: freeing a finished request's few hundred blocks cost a memory access per id (the
        ids are objects, last touched when allocated), 12% of the ServeGen day's loop. Such a
        free checks the count (never more blocks free than handed out) and the list's first
        and last ids (handed out before); a block freed twice while others are held shows at
        the next :meth:`check_invariants` (it is twice in the free queue), an id never handed
        out inside the list does not: the manager frees only the lists it was given.

        Raises
        ------
        BlockPoolError
            On a block whose ref count is already 0 (where counts are kept), more blocks
            freed than are held, or a list whose first or last id was never handed out.
        """
        chunks = self._chunks
        if chunks is not None:
            if blocks:
                held = self.num_used_blocks
                if len(blocks) > held:  # more free than ever handed out: a block freed twice
                    raise BlockPoolError(f"{len(blocks)} blocks freed with only {held} held")
                for b in (blocks[0], blocks[-1]):  # the ends only: O(1)
                    if not 0 <= b < self.fresh:
                        raise BlockPoolError(f"block {b} freed but never handed out")
                chunks.append(blocks)
                self._stacked += len(blocks)
            return
        ref = self._ref
        st = self._stack
        n = len(ref)
        if st is not None:
            shared = False
            for b in blocks:
                c = ref[b] if 0 <= b < n else 0
                if c <= 0:
                    raise BlockPoolError(f"block {b} freed with ref count 0")
                ref[b] = c - 1
                shared = shared or c > 1
            if not shared:  # every block is free now: one C-level extend (no boxing per id)
                st.extend(blocks)
                return
            for b in blocks:  # a shared block: undo, then one block at a time
                ref[b] += 1
            for b in blocks:
                c = ref[b] - 1
                ref[b] = c
                if c == 0:
                    st.append(b)
            return
        front, back, bh = self._front, self._back, self._hash
        for b in blocks:
            c = (ref[b] if 0 <= b < n else 0) - 1
            if c < 0:
                raise BlockPoolError(f"block {b} freed with ref count 0")
            ref[b] = c
            if c:
                continue
            if b in bh:
                back[b] = None
            else:
                front.append(b)

    def cache_block(self, block: int, block_hash) -> None:
        """Register a full block's prefix hash so later requests can share it."""
        if self._back is None:
            return
        if block in self._hash:
            return
        if block_hash in self.hash_to_block:
            return  # another block already holds this content
        self._hash[block] = block_hash
        self.hash_to_block[block_hash] = block

    def lookup(self, block_hash):
        """Block id holding ``block_hash`` or None."""
        return self.hash_to_block.get(block_hash)

    def check_invariants(self) -> None:
        """Raise :class:`BlockPoolError` if free + held != total, a ref count is negative, or
        a block is both free and held (DESIGN.md invariant 4)."""
        self._count_refs()
        ref = self._ref
        if any(c < 0 for c in ref):
            raise BlockPoolError("negative ref count")
        held = sum(1 for c in ref if c > 0)
        free = self.free_block_ids()
        if len(set(free)) != len(free):
            raise BlockPoolError("a block appears twice in the free queue")
        if held + len(free) != self.num_blocks:
            raise BlockPoolError(f"free {len(free)} + held {held} != {self.num_blocks}")
        for b in free:
            if self.ref_count(b) != 0:
                raise BlockPoolError(f"block {b} is free but has ref count {ref[b]}")


register_pickling(_DenseView, _RefView, BlockPool)
