"""KV cache manager: which blocks each request holds, prefix hits, and allocation modes.

The scheduler talks to it through a narrow interface (DESIGN.md section 2): ``allocate``
returns True (the request now holds blocks for the asked tokens) or False (does not fit:
the caller preempts or waits); misuse raises.

Allocation modes
----------------
``paged``
    Blocks on demand (Kwon et al., "Efficient Memory Management for LLM Serving with
    PagedAttention", SOSP 2023): a request holds ``ceil(tokens / block_size)`` blocks, so
    internal fragmentation is confined to its last block.
``contiguous``
    The whole maximum length is reserved at admission (``max_model_len`` tokens, or prompt +
    declared ``max_tokens`` when the request declares one), as pre-paging engines did.

Prefix sharing: a request's shareable prefix (``RequestSpec.prefix_hash_ids``) maps to KV
block keys: block ``j`` (tokens ``[j*bs, (j+1)*bs)``) is shareable when it lies wholly inside
the declared prefix, and its key chains the ids of every prefix block overlapping
``[0, (j+1)*bs)``: two requests share block ``j`` iff their prefixes agree up to its end.

Parallel sampling (``num_seqs > 1``): the request's ``n`` sequences share its prompt blocks
copy-on-write (:mod:`simulator.kv.cow`): the request holds
:func:`~simulator.kv.cow.parallel_sampling_blocks` blocks, the prompt's full blocks once and,
from the first generated token on, each sequence's own copy of the partial last block and its
own later blocks. ``blocks`` stays one flat list of the physical blocks the group holds (the
prompt's blocks first, in order), so prefix caching and freeing treat it as any request: the
sharing is in the block count, and a shared block's pool ref count stays 1 (the group holds
it once) rather than ``n`` per-sequence block-table references. The manager counts the copies made on
first write (``num_cow_copies``) and the blocks sharing saves against ``n`` independent
requests, now and at its peak (``cow_blocks_saved``, ``cow_blocks_saved_peak``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simulator.base.compiled_core import register_pickling
from simulator.kv.block_pool import BlockPool
from simulator.kv.cow import blocks_saved, parallel_sampling_blocks
from simulator.kv.run_blocks import RunBlocks
from simulator.kv.tiers import OffloadStore

if TYPE_CHECKING:  # pragma: no cover (the scheduler's request state imports this module)
    from simulator.scheduling.state import ReqState


class KVHandle:
    """What a request holds in one replica's KV cache: only :class:`KVCacheManager` reads or
    changes it (schedulers never see block ids or do block arithmetic).

    Attributes
    ----------
    block_ids : list of int
        Pool blocks in token order (block ``j`` holds tokens ``[j*bs, (j+1)*bs)``).
    num_cached_blocks : int
        Leading blocks whose prefix hash is registered (shared or shareable).

    Notes
    -----
    Designed for copy-on-write forks (parallel sampling ``n``, beam search): a fork is a new
    handle listing the parent's ``block_ids`` with one more reference on each in the pool;
    the first write into a shared, partially filled last block replaces it by a private copy.
    """

    __slots__ = ("block_ids", "num_cached_blocks", "num_shared_keys", "num_stored_blocks")

    def __init__(self) -> None:
        self.block_ids: list[int] = []
        self.num_cached_blocks = 0
        #: leading content keys from declared ids (shareable through the GPU prefix cache);
        #: the keys after them are the request's own (offload tiers only)
        self.num_shared_keys = 0
        #: leading blocks already written to the offload tiers (:mod:`simulator.kv.tiers`)
        self.num_stored_blocks = 0

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (), {}

    def __len__(self) -> int:
        return len(self.block_ids)


class KVCacheManager:
    """Per-replica KV cache bookkeeping.

    Parameters
    ----------
    num_gpu_blocks : int
        Blocks in the pool.
    block_size : int
        Tokens per block.
    enable_prefix_caching : bool
        Share full prefix blocks between requests (hash + ref count + LRU eviction).
    allocation : {"paged", "contiguous"}
    max_model_len : int
        Tokens reserved per request in ``contiguous`` mode (unless it declares max_tokens).
    watermark : float
        Fraction of blocks kept free when admitting a *new* request (vLLM's ``watermark``).

    Raises
    ------
    ValueError
        On a non-positive block size or an unknown allocation mode.
    """

    def __init__(self, num_gpu_blocks: int, block_size: int, enable_prefix_caching: bool = False,
                 allocation: str = "paged", max_model_len: int = 1 << 30, watermark: float = 0.0):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if allocation not in ("paged", "contiguous"):
            raise ValueError(f"allocation must be 'paged' or 'contiguous', got {allocation!r}")
        self.block_size = int(block_size)
        self.num_gpu_blocks = int(num_gpu_blocks)
        self.pool = BlockPool(num_gpu_blocks, enable_caching=bool(enable_prefix_caching))
        self.enable_prefix_caching = bool(enable_prefix_caching)
        self.allocation = allocation
        self.max_model_len = int(max_model_len)
        self.watermark_blocks = int(watermark * num_gpu_blocks)
        # prefix-cache statistics (blocks)
        self.num_prefix_queries = 0
        self.num_prefix_hits = 0
        # copy-on-write statistics (parallel sampling)
        self.num_cow_copies = 0
        self.cow_blocks_saved = 0
        self.cow_blocks_saved_peak = 0
        self._cow_saved: dict[int, int] = {}
        self._cow_copied: set[int] = set()
        # offload tiers (attach_offload); None: a block evicted from the GPU is gone
        self.offload: OffloadStore | None = None
        #: every full block of every request gets a content key, the tiers' key (set with
        #: offload tiers; the GPU cache registers only declared content, so runs with and
        #: without tiers differ by the tiers alone)
        self.hash_all_blocks = False
        #: some request has declared content past its prompt (a session turn's answer), or
        #: the tiers store answers: decode runs register / store the blocks they fill
        self.decode_blocks_keyed = False
        self.block_bytes_per_gpu = 0.0
        self.replica_block_bytes = 0.0
        self.host_bytes_per_s = 1.0
        #: when the host-to-device link is free again (loads queue on it), seconds
        self.h2d_free_s = 0.0
        # offload statistics: tokens served from each tier, bytes each way, load seconds
        self.tier_hit_tokens: list[int] = [0, 0]
        self.tier_load_bytes = 0.0
        self.tier_store_bytes = 0.0
        self.num_tier_loads = 0
        self.tier_load_busy_s = 0.0
        self.tier_load_wait_s = 0.0
        #: when each asynchronous load landed, in start order (seconds; audits: a replica
        #: idle until a landing had nothing runnable, invariant 7)
        self.load_landings: list[float] = []

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.num_gpu_blocks, self.block_size), {
            "enable_prefix_caching": self.enable_prefix_caching, "allocation": self.allocation,
            "max_model_len": self.max_model_len}

    # ------------------------------------------------------------------ helpers
    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold ``num_tokens`` tokens: ceil(num_tokens / block_size)."""
        return -(-num_tokens // self.block_size)

    def blocks_needed(self, req: ReqState, num_tokens: int) -> int:
        """Blocks ``req`` holds with ``num_tokens`` tokens of KV per sequence (its
        ``num_seqs`` sequences sharing the prompt copy-on-write)."""
        if req.num_seqs == 1:
            return -(-num_tokens // self.block_size)
        return parallel_sampling_blocks(req.num_prompt_tokens, num_tokens, req.num_seqs,
                                        self.block_size)

    def reserve_tokens(self, req: ReqState) -> int:
        """Tokens reserved for ``req`` in contiguous mode (reads the declared max_tokens only)."""
        mt = req.spec.max_tokens
        if mt is not None:
            return min(self.max_model_len, req.num_prompt_tokens + mt)
        return self.max_model_len

    def max_tokens_ever(self, req: ReqState) -> int:
        """The tokens a request must be able to hold to make any progress (for rejection)."""
        if self.allocation == "contiguous":
            return self.reserve_tokens(req)
        return req.num_prompt_tokens + 1

    def can_ever_fit(self, req: ReqState) -> bool:
        """Whether ``req`` could be admitted into an empty pool (watermark included)."""
        return (self.blocks_needed(req, self.max_tokens_ever(req))
                <= self.num_gpu_blocks - self.watermark_blocks)

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    @property
    def num_used_blocks(self) -> int:
        return self.pool.num_used_blocks

    # ------------------------------------------------------------------ prefix keys
    def _prefix_keys(self, req: ReqState) -> list:
        keys = req.prefix_keys
        if keys is not None:
            return keys
        keys = []
        if not self.enable_prefix_caching:
            req.prefix_keys = keys
            return keys
        spec = req.spec
        ids = spec.prefix_hash_ids
        bs = self.block_size
        # a session turn's ids (and, with every block hashed, the request's own blocks) go
        # on past the prompt: its answer's blocks are the next turn's history
        whole = req.num_prompt_tokens
        if req.num_seqs == 1 and (self.hash_all_blocks or spec.session_id is not None):
            whole += spec.num_output_tokens
        prev = 0
        declared = 0
        if ids:
            pbt = spec.prefix_block_tokens
            shared = min(len(ids) * pbt, whole if spec.session_id is not None
                         else req.num_prompt_tokens)
            declared = shared // bs
            for j in range(declared):
                end = (j + 1) * bs
                hi = -(-end // pbt)  # prefix blocks overlapping [0, end)
                lo = -(-(j * bs) // pbt) if j else 0
                # chained 64-bit key: (key of block j-1, new prefix ids, j); ints hash
                # deterministically in CPython (no per-process salt)
                prev = hash((prev, tuple(ids[lo:hi]), j))
                keys.append(prev)
        req.kv_handle.num_shared_keys = declared
        if self.hash_all_blocks and req.num_seqs == 1:
            rid = req.request_id
            for j in range(declared, whole // bs):
                # the request's own content: (key of block j-1, request id, j, 0), a tuple
                # shape no declared key has
                prev = hash((prev, rid, j, 0))
                keys.append(prev)
        if declared * bs > req.num_prompt_tokens:
            self.decode_blocks_keyed = True
        req.prefix_keys = keys
        return keys

    def get_computed_blocks(self, req: ReqState) -> list[int]:
        """Cached blocks matching ``req``'s prefix (longest chain), without taking them.

        At most ``(prompt - 1) // block_size`` blocks hit, so at least one prompt token is
        computed (it yields the first output token).
        """
        if not self.enable_prefix_caching:
            return []
        keys = self._prefix_keys(req)
        # a resumed request (every block hashed) looks up all its tokens, as vLLM does
        n = req.num_tokens if self.hash_all_blocks else req.num_prompt_tokens
        limit = min(len(keys), (n - 1) // self.block_size)
        out = []
        lookup = self.pool.hash_to_block
        for j in range(limit):
            b = lookup.get(keys[j])
            if b is None:
                break
            out.append(b)
        return out

    def cached_prefix(self, req: ReqState) -> tuple[list[int], int]:
        """The cached blocks a request about to be admitted can share and the tokens they
        hold: ``(get_computed_blocks(req), len(blocks) x block_size)`` for a request with
        nothing computed, else ``([], num_computed_tokens)`` (a preempted-by-swap or chunked
        request keeps what it computed)."""
        if req.num_computed_tokens:
            return [], req.num_computed_tokens
        hits = self.get_computed_blocks(req)
        return hits, len(hits) * self.block_size

    # ------------------------------------------------------------------ allocation
    def allocate(self, req: ReqState, num_tokens: int, new_request: bool = False,
                 hit_blocks: list[int] | None = None,
                 full_sequence_tokens: int | None = None) -> bool:
        """Make ``req`` hold blocks for its first ``num_tokens`` tokens.

        Parameters
        ----------
        req : ReqState
        num_tokens : int
            Tokens that must have KV slots after the coming step (computed + scheduled).
        new_request : bool
            Admission of a waiting request: the watermark applies.
        hit_blocks : list of int, optional
            Prefix-cache blocks to share (from :meth:`get_computed_blocks`), only when
            ``req`` holds no blocks yet.
        full_sequence_tokens : int, optional
            Admit only when blocks for this many tokens would fit, but allocate for
            ``num_tokens`` only (vLLM >= 0.10 ``scheduler_reserve_full_isl``: a chunked prompt is
            admitted only when its whole current sequence fits in the free blocks).

        Returns
        -------
        bool
            False when the pool cannot supply the blocks (nothing changed).
        """
        h = req.kv_handle
        blocks = h.block_ids
        if self.allocation == "contiguous":
            if blocks:
                return True
            num_tokens = max(num_tokens, self.reserve_tokens(req))
        par = req.num_seqs > 1
        need = (self.blocks_needed(req, num_tokens) if par
                else -(-num_tokens // self.block_size)) - len(blocks)
        pool = self.pool
        if hit_blocks:
            ref = pool.ref_count
            free_hits = sum(1 for b in hit_blocks if ref(b) == 0)
            need -= len(hit_blocks)
        else:
            free_hits = 0
        if need <= 0 and not hit_blocks:
            return True
        avail = pool.num_free_blocks - free_hits - (self.watermark_blocks if new_request else 0)
        if need > avail:
            return False
        if full_sequence_tokens is not None and full_sequence_tokens > num_tokens \
                and self.allocation == "paged":
            need_full = (self.blocks_needed(req, full_sequence_tokens) - len(blocks)
                         - (len(hit_blocks) if hit_blocks else 0))
            if need_full > avail:
                return False
        if hit_blocks:
            pool.touch(hit_blocks)
            blocks.extend(hit_blocks)
            h.num_cached_blocks = len(hit_blocks)
        if need > 0:
            blocks.extend(pool.allocate(need))
        if par:
            self._count_cow(req, num_tokens)
        return True

    def _count_cow(self, req: ReqState, num_tokens: int) -> None:
        """Update the copy-on-write counters of a parallel-sampling request."""
        bs = self.block_size
        p = req.num_prompt_tokens
        rid = req.request_id
        if num_tokens > p and p % bs and rid not in self._cow_copied:
            self._cow_copied.add(rid)  # first write past the prompt: the partial block copied
            self.num_cow_copies += req.num_seqs - 1
        saved = blocks_saved(p, num_tokens, req.num_seqs, bs)
        self.cow_blocks_saved += saved - self._cow_saved.get(rid, 0)
        self._cow_saved[rid] = saved
        self.cow_blocks_saved_peak = max(self.cow_blocks_saved_peak, self.cow_blocks_saved)

    def trim(self, req: ReqState, num_tokens: int) -> None:
        """Release blocks beyond what ``num_tokens`` tokens need (paged mode; rollback)."""
        if self.allocation == "contiguous":
            return
        keep = self.blocks_needed(req, num_tokens)
        blocks = req.kv_handle.block_ids
        if len(blocks) > keep:
            extra = blocks[keep:]
            del blocks[keep:]
            extra.reverse()
            self.pool.free(extra)

    def free(self, req: ReqState) -> None:
        """Release every block ``req`` holds (tail first, so its tail is evicted first)."""
        h = req.kv_handle
        blocks = h.block_ids
        if blocks:
            blocks.reverse()
            self.pool.free(blocks)
            h.block_ids = []
        h.num_cached_blocks = 0
        h.num_stored_blocks = 0
        if req.num_seqs > 1:
            self.cow_blocks_saved -= self._cow_saved.pop(req.request_id, 0)
            self._cow_copied.discard(req.request_id)  # recomputed after preemption: copied again

    def cache_full_blocks(self, req: ReqState) -> None:
        """Register the hashes of ``req``'s newly computed full shareable blocks."""
        keys = req.prefix_keys
        if not keys:
            return
        h = req.kv_handle
        blocks = h.block_ids
        done = min(len(keys), req.num_computed_tokens // self.block_size, len(blocks))
        shared = min(done, h.num_shared_keys)  # the GPU cache registers declared content
        if shared > h.num_cached_blocks:
            pool = self.pool
            for j in range(h.num_cached_blocks, shared):
                pool.cache_block(blocks[j], keys[j])
            h.num_cached_blocks = shared
        off = self.offload
        if off is not None:
            self.store_blocks(req, off.store_end(done, req.num_prompt_tokens // self.block_size))

    def store_blocks(self, req: ReqState, end: int) -> None:
        """Write ``req``'s blocks from its first not yet stored one up to block ``end`` to the
        offload tiers (:meth:`simulator.kv.tiers.OffloadStore.store`; nothing when they are)."""
        h = req.kv_handle
        if end > h.num_stored_blocks:
            off = self.offload
            keys = req.prefix_keys
            assert off is not None and keys is not None
            n = off.store(keys[h.num_stored_blocks:end])
            self.tier_store_bytes += n * self.replica_block_bytes
            h.num_stored_blocks = end

    def keys_extend_past_prompt(self, req: ReqState) -> bool:
        """Whether decode steps of ``req`` register or store blocks: its declared content goes
        on past its prompt (a session turn's answer), or the tiers store answers."""
        keys = req.prefix_keys
        if keys is None:
            return False
        past = req.num_prompt_tokens
        bs = self.block_size
        if req.kv_handle.num_shared_keys * bs > past:
            return True
        off = self.offload
        return off is not None and off.store_decode and len(keys) * bs > past

    def cache_decode_run(self, reqs: list[ReqState], k: int) -> None:
        """Register (and offload) the blocks a committed ``k``-step decode run completed, in
        the order stepping registers them: step by step, each step in batch order (the tiers'
        LRU order depends on it). ``reqs`` have their computed tokens already advanced."""
        bs = self.block_size
        events: list[tuple[int, int]] = []  # (step, batch position) at which a block fills
        for i, r in enumerate(reqs):
            if not self.keys_extend_past_prompt(r):
                continue
            c0 = r.num_computed_tokens - k
            s = bs - c0 % bs
            while s <= k:
                events.append((s, i))
                s += bs
        if not events:
            return
        events.sort()
        done = [r.num_computed_tokens for r in reqs]
        for s, i in events:
            r = reqs[i]
            r.num_computed_tokens = done[i] - k + s
            self.cache_full_blocks(r)
        for r, c in zip(reqs, done):
            r.num_computed_tokens = c

    # ------------------------------------------------------------------ decode runs
    def has_slots(self, req: ReqState, num_tokens: int) -> bool:
        """Whether ``req`` already holds KV slots for its first ``num_tokens`` tokens (per
        sequence, its ``num_seqs`` sequences sharing the prompt copy-on-write)."""
        if req.num_seqs > 1:
            return self.blocks_needed(req, num_tokens) <= len(req.kv_handle.block_ids)
        return num_tokens <= len(req.kv_handle.block_ids) * self.block_size

    def blocks_held(self, reqs: list[ReqState]) -> np.ndarray:
        """Blocks held by each request of ``reqs`` (int64 array, batch order)."""
        return np.fromiter((len(r.kv_handle.block_ids) for r in reqs), dtype=np.int64,
                           count=len(reqs))

    def _run_growth(self, computed: np.ndarray, held: np.ndarray, k: int) -> int:
        """New blocks a decode run of ``k`` steps takes (request ``i`` holds ``held[i]``
        blocks and has ``computed[i]`` tokens computed before the run's first step)."""
        return int(np.maximum(0, -(-(computed + k) // self.block_size) - held).sum())

    def max_decode_run_steps(self, computed: np.ndarray, held: np.ndarray, k_max: int) -> int:
        """The longest decode run, at most ``k_max`` steps, whose block growth the free pool
        supplies (binary search; the growth is monotone in the run length).

        Parameters
        ----------
        computed, held : ndarray of int64
            Per request: computed tokens and blocks held before the run's first step (whose
            blocks the scheduler already allocated).
        k_max : int
            Steps allowed by everything but KV (>= 1).

        Returns
        -------
        int
            ``k_max`` in contiguous mode (reservations never grow).
        """
        if self.allocation == "contiguous":
            return k_max
        free = self.num_free_blocks
        if self._run_growth(computed, held, k_max) <= free:
            return k_max
        lo, hi = 1, k_max  # growth(lo) <= free (step 1 already allocated), growth(hi) > free
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._run_growth(computed, held, mid) <= free:
                lo = mid
            else:
                hi = mid
        return lo

    def plan_decode_run_blocks(self, reqs: list[ReqState], k_max: int) -> tuple[int, RunBlocks]:
        """:meth:`max_decode_run_steps` and :meth:`decode_run_blocks_used` of its answer at
        once, for the decode batch ``reqs`` (before the run's first step, whose blocks the
        scheduler already allocated).

        Request ``i`` (``c`` tokens computed, ``h`` blocks held) needs ``ceil((c + s) / bs)``
        blocks at step ``s``: one more than it holds first at step ``h x bs - c + 1``, then
        every ``block_size`` steps (:class:`RunBlocks`). The run's growth by step ``s`` is a
        sum over the batch in closed form, so the longest run the free pool supplies is found
        without listing every step: ``O(batch)`` (``O(batch x log k_max)`` when the pool runs
        short), whatever ``k_max`` (a run is planned to its first finish, often thousands of
        steps, and an arrival cuts it after tens).

        Returns
        -------
        k : int
            The longest run, at most ``k_max`` steps, whose block growth the free pool supplies.
        blocks_used : RunBlocks
            Pool blocks in use during each of the first ``k_max`` steps, listed as far as
            they are asked for (:meth:`RunBlocks.head`).
        """
        used0 = self.num_used_blocks
        if self.allocation == "contiguous":
            return k_max, RunBlocks(used0, 0, [], self.block_size, k_max)
        bs = self.block_size
        first = 0      # blocks the first step takes beyond those held
        starts: list[int] = []
        for r in reqs:
            c = r.num_computed_tokens
            h = len(r.kv_handle.block_ids)
            nb = -(-(c + 1) // bs)  # blocks the first step needs
            if nb > h:
                first += nb - h
                h = nb
            starts.append(h * bs - c + 1)
        blocks = RunBlocks(used0, first, starts, bs, k_max)
        free = self.num_free_blocks
        if blocks.growth(k_max) <= free:
            return k_max, blocks
        lo, hi = 0, k_max  # growth(lo) <= free (growth(0) = 0), growth(hi) > free
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if blocks.growth(mid) <= free:
                lo = mid
            else:
                hi = mid
        return max(1, lo), blocks

    def decode_run_blocks_used(self, computed: np.ndarray, held: np.ndarray,
                               k: int) -> np.ndarray:
        """Pool blocks in use during each of ``k`` decode steps (step ``j`` holds the slots
        of ``computed + j + 1`` tokens per request), int64 array of shape ``(k,)``."""
        used0 = self.num_used_blocks
        if self.allocation == "contiguous" or k == 1:
            return np.full(k, used0, dtype=np.int64)
        j = np.arange(k, dtype=np.int64)
        need = -(-(computed[None, :] + j[:, None] + 1) // self.block_size) - held[None, :]
        return used0 + np.maximum(need, 0).sum(axis=1)

    def grow_decode_run(self, reqs: list[ReqState], k: int) -> None:
        """Advance every request of a committed ``k``-step decode run (``reqs``, in batch
        order: the order blocks are handed out in) by ``k`` computed tokens, one a step, and
        give it the blocks its computed tokens then need (paged mode; the run was planned with
        :meth:`max_decode_run_steps`): one pass over the batch for both."""
        if self.allocation != "paged":
            for r in reqs:
                r.num_computed_tokens += k
            return
        bs = self.block_size
        grow: list[list[int]] = []  # the block lists that grow, in batch order,
        needs: list[int] = []       # and how many blocks each takes
        total = 0
        for r in reqs:
            c = r.num_computed_tokens + k
            r.num_computed_tokens = c
            blocks = r.kv_handle.block_ids
            need = -(-c // bs) - len(blocks)
            if need > 0:
                grow.append(blocks)
                needs.append(need)
                total += need
        if not total:
            return
        # one pool call: the free queue hands out blocks front first, so taking them all at
        # once and splitting in batch order gives every request the ids it would get alone
        new = self.pool.allocate(total)
        at = 0
        for i in range(len(grow)):
            need = needs[i]
            if need == 1:  # a block (a run shorter than a block): no slice
                grow[i].append(new[at])
            else:
                grow[i].extend(new[at:at + need])
            at += need


register_pickling(KVHandle, KVCacheManager)
