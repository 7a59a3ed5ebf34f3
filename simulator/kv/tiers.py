"""KV offload tiers behind the GPU's prefix cache: a CPU tier and an optional disk tier.

A tier holds copies of KV blocks, keyed by the same chained content keys the GPU prefix cache
uses (:meth:`simulator.kv.manager.KVCacheManager._prefix_keys`), up to its capacity in blocks,
and evicts the least recently used block when full. Which blocks reach a tier, and when, is
the *connector*'s policy; two engines' semantics are modelled (our code; the behaviour as
their documentation states it):

``vllm``
    vLLM's ``OffloadingConnector`` (``CPUOffloadingSpec`` / ``TieringOffloadingSpec``; vLLM
    docs, "KV Offloading Usage Guide", docs.vllm.ai/en/latest/features/kv_offloading_usage;
    the scheduler-side manager of vLLM 0.34): every full block is stored to the CPU tier as it
    is produced (asynchronous DMA at the start of the next step; with ``offload_prompt_only``,
    vLLM's default, prompt blocks only), and each block stored to the CPU tier is written to
    the secondary (disk) tier too; the CPU tier evicts LRU (a hit counts as a use); a lookup
    takes the longest run of blocks after the GPU hits; the request waits
    (``WAITING_FOR_REMOTE_KVS``) while the copy runs on its own stream, other requests running;
    a disk hit is promoted into the CPU tier on its way to the GPU.
``lmcache``
    LMCache (its vLLM connector, 0.5.x): every full chunk of ``chunk_size`` tokens (256 by
    default; ``save_unfull_chunk`` off; decode tokens only with ``save_decode_cache``) is
    written through to every enabled tier (local CPU, local disk); lookups match whole chunks
    from the prompt's start, CPU first, then disk, and a disk hit is copied back into the CPU
    tier; each tier evicts LRU; loads are synchronous, before the step's forward pass, so they
    lengthen the step (every request in it waits); with ``shared`` one store serves every
    replica of the pool (a shared LMCache backend).

A hit in a tier costs its copy (:meth:`OffloadStore.load_seconds`). vLLM's asynchronous loads
queue on the replica's host-to-device link and the request holds its GPU blocks and waits for
its copy; LMCache's synchronous loads add their seconds to the step. Stores are asynchronous
and are not charged to a step; their bytes are counted (device-to-host), so a report can say
what they ask of the link. Simplification, stated: a stored block is in its tier at once (a
copy takes milliseconds; a block is needed from a tier only after its GPU copy was evicted).
vLLM's ``store_threshold`` (store a block only once N requests offered it) is not modelled
(its default, off, is what is modelled).

Invariants (DESIGN.md 4): a block lives only in the tiers its policy allows; no tier holds
more blocks than its capacity; bytes moved = blocks moved x block bytes.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from simulator.base.compiled_core import register_pickling

if TYPE_CHECKING:  # pragma: no cover (the request state's module imports the KV manager)
    from simulator.scheduling.state import ReqState

#: connectors whose semantics the tiers follow
CONNECTORS = ("vllm", "lmcache")


class OffloadTier:
    """One tier: an LRU set of block keys with a capacity in blocks.

    Parameters
    ----------
    name : str
        ``cpu`` or ``disk``.
    capacity_blocks : int
        Blocks the tier holds (>= 1).
    read_bytes_per_s : float
        Bandwidth of a load out of this tier, bytes/s per GPU (> 0).
    latency_s : float
        Fixed seconds a load out of this tier adds (>= 0).

    Raises
    ------
    ValueError
        A capacity below 1 block, a bandwidth <= 0 or a negative latency.
    """

    __slots__ = ("_lru", "capacity_blocks", "latency_s", "name", "num_evicted_blocks",
                 "num_hit_blocks", "num_promoted_blocks", "num_stored_blocks",
                 "read_bytes_per_s")

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.name, self.capacity_blocks, self.read_bytes_per_s, self.latency_s), {}

    def __init__(self, name: str, capacity_blocks: int, read_bytes_per_s: float,
                 latency_s: float = 0.0) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"offload tier {name!r}: capacity must be at least one KV block, "
                             f"got {capacity_blocks} blocks")
        if not read_bytes_per_s > 0:
            raise ValueError(f"offload tier {name!r}: bandwidth must be > 0 bytes/s")
        if latency_s < 0:
            raise ValueError(f"offload tier {name!r}: latency_s must be >= 0")
        self.name = name
        self.capacity_blocks = int(capacity_blocks)
        self.read_bytes_per_s = float(read_bytes_per_s)
        self.latency_s = float(latency_s)
        self._lru: OrderedDict[Any, None] = OrderedDict()  # Any: 64-bit keys stay boxed
        #: blocks written into the tier from the GPU (a block already there is skipped)
        self.num_stored_blocks = 0
        #: blocks dropped to make room (least recently used first)
        self.num_evicted_blocks = 0
        #: blocks a prefix lookup found here and loaded
        self.num_hit_blocks = 0
        #: blocks copied in from the tier below on a hit there (not counted as stored)
        self.num_promoted_blocks = 0

    def __contains__(self, key: Any) -> bool:
        return key in self._lru

    def __len__(self) -> int:
        return len(self._lru)

    def touch(self, key: Any) -> None:
        """Mark ``key`` most recently used (it must be in the tier)."""
        self._lru.move_to_end(key)

    def put_many(self, keys: list[Any]) -> int:
        """Write the keys of ``keys`` not in the tier yet (in order, most recently used last;
        a key already there is skipped, not refreshed: both engines skip a block their store
        holds, and only a hit counts as a use), then evict the least recently used down to the
        capacity (one pass). Returns the keys written (the caller counts them as stored or
        promoted)."""
        lru = self._lru
        before = len(lru)
        for k in keys:
            if k not in lru:
                lru[k] = None
        added = len(lru) - before
        over = len(lru) - self.capacity_blocks
        if over > 0:
            self.num_evicted_blocks += over
            for _ in range(over):
                lru.popitem(last=False)
        return added

    def keys_lru(self) -> list[Any]:
        """Keys from least to most recently used (tests, audits)."""
        return list(self._lru)


class OffloadStore:
    """The tiers behind one replica's GPU KV cache (or, shared, behind a pool's).

    Parameters
    ----------
    connector : {"vllm", "lmcache"}
        Whose semantics (module docstring).
    tiers : list of OffloadTier
        The CPU tier first, then at most one disk tier.
    chunk_blocks : int
        Blocks per stored / matched unit: 1 for ``vllm`` (one GPU block), ``chunk_size /
        block_size`` for ``lmcache``.
    store_decode : bool
        Store the blocks of generated tokens too (default: prompt blocks only).

    Raises
    ------
    ValueError
        On an unknown connector, no tier, a first tier that is not ``cpu`` or more than two.
    """

    __slots__ = ("chunk_blocks", "connector", "store_decode", "sync_loads", "tiers")

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.connector, self.tiers, self.chunk_blocks), {
            "store_decode": self.store_decode}

    def __init__(self, connector: str, tiers: list[OffloadTier], chunk_blocks: int = 1,
                 store_decode: bool = False) -> None:
        if connector not in CONNECTORS:
            raise ValueError(f"offload connector must be one of {', '.join(CONNECTORS)}, "
                             f"got {connector!r}")
        if not tiers or tiers[0].name != "cpu" or len(tiers) > 2 \
                or (len(tiers) == 2 and tiers[1].name != "disk"):
            raise ValueError("offload tiers: a 'cpu' tier, optionally followed by one 'disk' "
                             "tier")
        if chunk_blocks < 1:
            raise ValueError("offload chunk must be at least one block")
        self.connector = connector
        self.tiers = tiers
        self.chunk_blocks = int(chunk_blocks)
        #: whether blocks of generated tokens are stored too (vLLM ``offload_prompt_only:
        #: false``, LMCache ``save_decode_cache: true``); both engines default to prompts only
        self.store_decode = bool(store_decode)
        #: loads block the step (LMCache's vLLM connector loads before the forward pass)
        #: instead of parking the request (vLLM's connector: asynchronous)
        self.sync_loads = connector == "lmcache"

    def store(self, keys: list[Any]) -> int:
        """Write completed blocks ``keys`` (in order) into every tier (write-through: vLLM's
        tiering writes each block stored to the CPU tier to its secondary tiers too, LMCache
        writes to every enabled backend); returns the blocks newly written to the CPU tier
        (the device-to-host copies)."""
        cpu = self.tiers[0]
        written = cpu.put_many(keys)
        cpu.num_stored_blocks += written
        for t in self.tiers[1:]:
            t.num_stored_blocks += t.put_many(keys)
        return written

    def match(self, keys: list[Any], start: int, limit: int) -> list[int]:
        """The tier (0 = cpu, 1 = disk) of each block of the longest run ``keys[start:j]``
        (``j <= limit``) held in some tier, cut to whole chunks counted from the prompt's
        start (``lmcache``: ``j`` a multiple of ``chunk_blocks``)."""
        lrus = [t._lru for t in self.tiers]
        cpu = lrus[0]
        disk = lrus[1] if len(lrus) > 1 else None
        found: list[int] = []
        for j in range(start, limit):
            k = keys[j]
            if k in cpu:
                found.append(0)
            elif disk is not None and k in disk:
                found.append(1)
            else:
                break
        c = self.chunk_blocks
        if c > 1:
            end = (start + len(found)) // c * c
            del found[max(0, end - start):]
        return found

    def take(self, keys: list[Any], where: list[int]) -> list[int]:
        """Record the load of ``keys`` (found in tiers ``where``, from :meth:`match`): each
        hit is refreshed in its tier, and a disk hit is copied into the CPU tier on its way to
        the GPU (both connectors promote). Returns the blocks per tier, ``[cpu, disk]``."""
        tiers = self.tiers
        counts = [0] * len(tiers)
        for k, i in zip(keys, where):  # every hit refreshed first: all are in use now
            t = tiers[i]
            t.num_hit_blocks += 1
            counts[i] += 1
            t.touch(k)
        if counts[0] < len(keys):  # then the disk hits promoted (LRU may evict others)
            tiers[0].num_promoted_blocks += tiers[0].put_many(
                [k for k, i in zip(keys, where) if i])
        return counts

    def store_end(self, done: int, prompt_blocks: int) -> int:
        """The block up to which a request with ``done`` full blocks computed (``prompt_blocks``
        of them its prompt's) is stored: prompt blocks only unless :attr:`store_decode`, in
        whole chunks."""
        end = done if self.store_decode else min(done, prompt_blocks)
        return end // self.chunk_blocks * self.chunk_blocks

    def load_seconds(self, counts: list[int], block_bytes: float,
                     host_bytes_per_s: float) -> float:
        """Seconds to bring ``counts`` blocks (per tier) to the GPU: each tier involved adds
        its latency; CPU blocks cross the host link, disk blocks the slower of the disk and
        the host link (the copy is pipelined through the CPU tier). ``block_bytes`` and the
        bandwidths are per GPU (every TP rank copies its shard at once)."""
        t = 0.0
        cpu = self.tiers[0]
        if counts[0]:
            t += cpu.latency_s + counts[0] * block_bytes / min(cpu.read_bytes_per_s,
                                                               host_bytes_per_s)
        if len(counts) > 1 and counts[1]:
            disk = self.tiers[1]
            t += disk.latency_s + counts[1] * block_bytes / min(disk.read_bytes_per_s,
                                                                host_bytes_per_s)
        return t

    def check_invariants(self) -> None:
        """Raise ValueError when a tier holds more blocks than its capacity (DESIGN.md 4)."""
        for t in self.tiers:
            if len(t) > t.capacity_blocks:
                raise ValueError(f"offload tier {t.name!r} holds {len(t)} blocks, over its "
                                 f"capacity of {t.capacity_blocks}")


# ---------------------------------------------------------------------- a replica's cache
def attach_offload(kv: Any, store: OffloadStore, block_bytes_per_gpu: float,
                   replica_block_bytes: float, host_bytes_per_s: float) -> None:
    """Put offload tiers behind a replica's KV cache (prefix caching must be on); every full
    block of every request then gets a content key (vLLM hashes every full block) under which
    the tiers store it, so a preempted request finds its own blocks there again. The GPU
    prefix cache still registers only declared content (``prefix_hash_ids``), as without
    tiers: a run with tiers differs from one without by the tiers alone.

    Parameters
    ----------
    kv : KVCacheManager
    store : OffloadStore
        This replica's tiers (or the pool's, shared).
    block_bytes_per_gpu : float
        Bytes of one block on one GPU (what each TP rank copies per block).
    replica_block_bytes : float
        Bytes of one block over the replica's GPUs (what the tiers store per block).
    host_bytes_per_s : float
        Host link bandwidth per GPU and direction, bytes/s.

    Raises
    ------
    ValueError
        Without prefix caching (the tiers are keyed by its block hashes).
    """
    if not kv.enable_prefix_caching:
        raise ValueError("KV offload tiers need prefix caching (kv_cache.enable_prefix_caching: "
                         "true)")
    kv.offload = store
    kv.hash_all_blocks = True
    if store.store_decode:  # answers' blocks are stored as decode runs fill them
        kv.decode_blocks_keyed = True
    kv.block_bytes_per_gpu = float(block_bytes_per_gpu)
    kv.replica_block_bytes = float(replica_block_bytes)
    kv.host_bytes_per_s = float(host_bytes_per_s)


def tier_prefix(kv: Any, req: ReqState, start: int) -> list[int]:
    """The tier of each block a waiting request (nothing computed) can load after its
    ``start`` GPU-cached blocks (:meth:`OffloadStore.match`; at most ``(tokens - 1) //
    block_size`` blocks in all, its prompt and any tokens it emitted before a preemption, so
    one token is left to compute)."""
    off = kv.offload
    if off is None:
        return []
    keys = kv._prefix_keys(req)
    limit = min(len(keys), (req.num_tokens - 1) // kv.block_size)  # a resumed request: all
    if start >= limit:
        return []
    return off.match(keys, start, limit)


def take_load(kv: Any, req: ReqState, start: int, where: list[int]) -> float:
    """Take blocks ``start .. start + len(where)`` of ``req`` from the tiers ``where`` and
    count them; returns the copy's own seconds (:meth:`OffloadStore.load_seconds`)."""
    off = kv.offload
    keys = kv._prefix_keys(req)
    counts = off.take(keys[start:start + len(where)], where)
    busy = off.load_seconds(counts, kv.block_bytes_per_gpu, kv.host_bytes_per_s)
    # the request's blocks up to the loaded ones are in the tiers now: its GPU hits are
    # stored again if the tiers dropped them (vLLM stores a request's blocks not offloaded
    # yet), the loaded ones are there (just refreshed)
    kv.store_blocks(req, start // off.chunk_blocks * off.chunk_blocks)
    req.kv_handle.num_stored_blocks = start + len(where)
    bs = kv.block_size
    for i, c in enumerate(counts):
        kv.tier_hit_tokens[i] += c * bs
    req.num_tier_hit_tokens += len(where) * bs  # every load of its life (the summary's count)
    kv.tier_load_bytes += len(where) * kv.replica_block_bytes
    kv.num_tier_loads += 1
    kv.tier_load_busy_s += busy
    return busy


def begin_load(kv: Any, req: ReqState, start: int, where: list[int], now: float) -> float:
    """Start an asynchronous load of blocks ``start .. start + len(where)`` of ``req`` from
    the tiers ``where`` (its GPU blocks already allocated); loads queue on the replica's
    host-to-device link. Returns the time the copy lands, seconds."""
    busy = take_load(kv, req, start, where)
    ready = max(now, kv.h2d_free_s) + busy
    kv.h2d_free_s = ready
    kv.tier_load_wait_s += ready - now
    kv.load_landings.append(ready)
    return ready


def tier_capacity_blocks(offload: Any, replica_block_bytes: float) -> list[int]:
    """Blocks each tier of a ``kv_cache.offload`` section holds: its size over the block's
    bytes over the replica's GPUs, rounded down.

    Raises
    ------
    ValueError
        A tier smaller than one block.
    """
    out = []
    for t in offload.tiers:
        blocks = int(t.size_bytes // replica_block_bytes)
        if blocks < 1:
            raise ValueError(f"kv_cache.offload: the {t.medium} tier ({t.size_bytes} bytes) is "
                             f"smaller than one KV block ({replica_block_bytes:.0f} bytes)")
        out.append(blocks)
    return out


def build_store(offload: Any, block_size: int, replica_block_bytes: float,
                host_bytes_per_s: float) -> OffloadStore:
    """The tiers a scenario's ``kv_cache.offload`` section describes, for one replica (or a
    pool, shared).

    Parameters
    ----------
    offload : simulator.scenario.offload.OffloadConfig
    block_size : int
        Tokens per KV block.
    replica_block_bytes : float
        Bytes of one block over the replica's GPUs (:func:`tier_capacity_blocks`).
    host_bytes_per_s : float
        The GPU's host link per direction (the CPU tier's default bandwidth).

    Raises
    ------
    ValueError
        A tier smaller than one block.
    """
    tiers = []
    for t, blocks in zip(offload.tiers, tier_capacity_blocks(offload, replica_block_bytes)):
        bw = t.bandwidth_bytes_per_s if t.bandwidth_bytes_per_s is not None \
            else host_bytes_per_s
        tiers.append(OffloadTier(t.medium, blocks, bw, t.latency_s or 0.0))
    chunk = offload.chunk_tokens()
    return OffloadStore(offload.connector, tiers, max(1, chunk // block_size),
                        store_decode=offload.stores_decode())


register_pickling(OffloadTier, OffloadStore)
