"""Replicas and routers: what one replica is made of, and which replica an arriving request
goes to.

Routers see only what a real router can see (DESIGN.md invariant 8): queue lengths, KV
usage and the request's declared fields; never its true output length.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.base.rng import stream
from simulator.catalog.hardware import GPUSpec
from simulator.catalog.models import ModelSpec
from simulator.cluster.routing import prefix_affinity_pick
from simulator.kv import KVCacheManager, MemoryPlan
from simulator.kv.tiers import OffloadStore, attach_offload, build_store
from simulator.metrics.records import RunRecorder
from simulator.scenario.config import DEFAULT_LOAD_GUARD, Scenario
from simulator.scheduling.continuous import ContinuousScheduler
from simulator.scheduling.emission import Jump
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.speculative import SpeculativeScheduler
from simulator.scheduling.static import StaticScheduler

ROUTERS = ("round_robin", "least_outstanding", "least_kv", "random", "prefix_affinity")


class Router:
    """Pick a replica index for each arriving request.

    Parameters
    ----------
    policy : str
        ``round_robin``; ``least_outstanding`` (fewest routed-but-unfinished requests, ties
        to the lowest index); ``least_kv`` (lowest KV-block usage plus queued prompt blocks);
        ``random`` (uniform, seeded); ``prefix_affinity`` (longest cached prefix within a
        load guard: :func:`simulator.cluster.routing.prefix_affinity_pick`).
    seed : int
        Run seed; the ``random`` policy draws from its named stream ``router``
        (:mod:`simulator.base.rng`).
    load_guard : int
        ``prefix_affinity`` only: outstanding-request imbalance tolerated for affinity.

    Raises
    ------
    ValueError
        On an unknown policy.
    """

    def __init__(self, policy: str, seed: int = 0, load_guard: int = DEFAULT_LOAD_GUARD):
        if policy not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {policy!r}")
        self.policy = policy
        self._next = 0
        self._rng = stream(seed, "router")
        self.load_guard = int(load_guard)
        #: requests routed to each replica id (round robin or not), for reports and tests
        self.counts: list[int] = []

    def route(self, spec, replicas) -> int:
        """The position in ``replicas`` (the replicas taking requests now) for ``spec``."""
        i = self._pick(spec, replicas)
        rid = getattr(replicas[i], "idx", i)
        if len(self.counts) <= rid:
            self.counts.extend([0] * (rid + 1 - len(self.counts)))
        self.counts[rid] += 1
        return i

    def _pick(self, spec, replicas) -> int:
        n = len(replicas)
        if n == 1:
            return 0
        p = self.policy
        if p == "round_robin":
            i = self._next % n  # (< n unless an autoscaled pool shrank)
            self._next = (i + 1) % n
            return i
        if p == "least_outstanding":
            best, best_v = 0, None
            for i, rep in enumerate(replicas):
                v = rep.num_outstanding()
                if best_v is None or v < best_v:
                    best, best_v = i, v
            return best
        if p == "least_kv":
            best, best_v = 0, None
            for i, rep in enumerate(replicas):
                kv = rep.sched.kv
                queued = sum(kv.blocks_for(r.num_prompt_tokens)
                             for r in [*rep.sched.waiting_requests(), *rep.pending])
                used = rep.kv_blocks_used() if hasattr(rep, "kv_blocks_used") else \
                    kv.num_used_blocks
                v = (used + queued) / kv.num_gpu_blocks
                if best_v is None or v < best_v:
                    best, best_v = i, v
            return best
        if p == "prefix_affinity":
            return prefix_affinity_pick(spec, replicas, self.load_guard)
        return int(self._rng.integers(n))


@dataclass
class ReplicaSetup:
    """Everything one replica needs (identical for every replica of a scenario)."""

    model: ModelSpec
    gpu: GPUSpec
    tensor_parallel_size: int
    perf: object
    memory: MemoryPlan | None
    num_gpu_blocks: int
    block_size: int
    #: the scheduler's derived limits (its configuration is the scenario's ``scheduler:``)
    limits: SchedulerLimits
    kv_cache_dtype: str
    weight_dtype: str
    usd_per_gpu_hour: float
    extra: dict = field(default_factory=dict)

    @property
    def replica_block_bytes(self) -> float:
        """Bytes of one KV block over the replica's GPUs (each holds ``limits.swap_block_bytes``
        of it): what an offload tier stores per block."""
        return self.limits.swap_block_bytes * self.tensor_parallel_size

    @property
    def num_usable_blocks(self) -> int:
        """Blocks requests can hold: ``num_gpu_blocks`` less the engine's null block (vLLM V1
        keeps block 0 unused)."""
        rules = getattr(getattr(self.perf, "engine", None), "scheduler", None)
        null = 1 if (rules is not None and rules.null_block and self.num_gpu_blocks > 1) else 0
        return self.num_gpu_blocks - null


class Replica:
    """One model replica (a TP group) with its scheduler and KV cache (SimPy-free: the engine
    drives it)."""

    def __init__(self, idx: int, setup: ReplicaSetup, scenario: Scenario, rec: RunRecorder,
                 offload_store: OffloadStore | None = None):
        kvc = scenario.kv_cache
        self.idx = idx
        self.setup = setup
        self.kv = KVCacheManager(setup.num_usable_blocks, setup.block_size,
                                 enable_prefix_caching=kvc.enable_prefix_caching,
                                 allocation=kvc.allocation,
                                 max_model_len=setup.limits.max_model_len,
                                 watermark=kvc.watermark)
        off = kvc.offload_tiers
        if off is not None:  # tiers behind the prefix cache (shared: the pool's)
            lim = setup.limits
            attach_offload(self.kv, offload_store or build_offload_store(off, setup),
                           lim.swap_block_bytes, setup.replica_block_bytes,
                           lim.host_link_bandwidth_bytes_per_s)
        self.sched = make_scheduler(scenario, setup, self.kv, rec, idx)
        self.perf = setup.perf
        #: the SimPy event an idle replica sleeps on (set and cleared by the engine)
        self.wake: Any = None
        self.step_index = 0
        #: the fast-forwarded decode run in progress (set and cleared by the engine)
        self.jump: Jump | None = None
        #: the clock (a ``simpy.Environment``; set by the engine)
        self.env: Any = None
        #: step rows of committed decode runs not yet recorded (set and flushed by the engine)
        self.run_rows: Any = None
        #: arrivals not yet visible to the scheduler (async scheduling: they arrived while a
        #: step ran whose successor was already scheduled; the engine flushes them after its
        #: next ``schedule``), whether arrivals are deferred now, and the engine's queueing
        #: function ``enqueue(r, replica, now)`` (set by the engine)
        self.pending: list = []
        self.defer = False
        self.enqueue: Any = None
        #: the KV offload byte counters at the replica's last step row (engine.step_rows)
        self.tier_bytes_mark = (0.0, 0.0)
        #: called as ``on_idle(replica, now)`` when the replica runs out of work (an
        #: autoscaled pool's drained replica gives its GPUs back then; None otherwise)
        self.on_idle: Any = None

    def flush_pending(self, now: float) -> None:
        """Hand the deferred arrivals to the scheduler, oldest first."""
        pending, self.pending = self.pending, []
        for r in pending:
            self.enqueue(r, self, now)

    def num_outstanding(self) -> int:
        """Requests routed here and not finished: the scheduler's plus the deferred ones."""
        return self.sched.num_outstanding() + len(self.pending)

    def kv_blocks_used(self) -> int:
        """Blocks held now, as stepping one iteration at a time would show them (during a
        fast-forwarded run, the blocks of the step in progress)."""
        jump = self.jump
        if jump is None or self.env is None:
            return self.kv.num_used_blocks
        return jump.kv_blocks_at(self.env.now)

    def notify(self) -> None:
        w = self.wake
        if w is not None and not w.triggered:
            w.succeed()


def build_offload_store(offload, setup: ReplicaSetup) -> OffloadStore:
    """The KV offload tiers of ``offload`` (a scenario's active ``kv_cache.offload``) for a
    replica of ``setup`` (or its pool, shared): blocks of the replica's GPUs, the GPU's host
    link (:func:`simulator.kv.tiers.build_store`)."""
    return build_store(offload, setup.block_size, setup.replica_block_bytes,
                       setup.limits.host_link_bandwidth_bytes_per_s)


def make_scheduler(scenario: Scenario, setup: ReplicaSetup, kv, rec, idx: int):
    """The replica scheduler the scenario asks for (``scheduler.policy``), configured by the
    scenario's ``scheduler:`` section and the setup's derived limits."""
    sc = scenario.scheduler
    if scenario.speculative is not None and sc.policy == "continuous":
        return SpeculativeScheduler(sc, setup.limits, kv, rec, idx, scenario=scenario,
                                    setup=setup)
    if sc.policy == "static":
        return StaticScheduler(sc, setup.limits, kv, rec, idx)
    return ContinuousScheduler(sc, setup.limits, kv, rec, idx)
