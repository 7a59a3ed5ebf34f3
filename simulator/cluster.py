"""Routers: which replica an arriving request goes to.

Routers see only what a real router can see (DESIGN.md invariant 8): queue lengths, KV
usage and the request's declared fields; never its true output length.
"""
from __future__ import annotations

from .rng import stream
from .topology.routing import DEFAULT_LOAD_GUARD, prefix_affinity_pick

ROUTERS = ("round_robin", "least_outstanding", "least_kv", "random", "prefix_affinity")


class Router:
    """Pick a replica index for each arriving request.

    Parameters
    ----------
    policy : str
        ``round_robin``; ``least_outstanding`` (fewest routed-but-unfinished requests, ties
        to the lowest index); ``least_kv`` (lowest KV-block usage plus queued prompt blocks);
        ``random`` (uniform, seeded); ``prefix_affinity`` (longest cached prefix within a
        load guard: :func:`simulator.topology.routing.prefix_affinity_pick`).
    seed : int
        Run seed; the ``random`` policy draws from its named stream ``router``
        (:mod:`simulator.rng`).
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
        #: requests routed to each replica (round robin or not), for reports and tests
        self.counts: list[int] = []

    def route(self, spec, replicas) -> int:
        i = self._pick(spec, replicas)
        if len(self.counts) < len(replicas):
            self.counts.extend([0] * (len(replicas) - len(self.counts)))
        self.counts[i] += 1
        return i

    def _pick(self, spec, replicas) -> int:
        n = len(replicas)
        if n == 1:
            return 0
        p = self.policy
        if p == "round_robin":
            i = self._next
            self._next = (i + 1) % n
            return i
        if p == "least_outstanding":
            best, best_v = 0, None
            for i, rep in enumerate(replicas):
                v = rep.sched.num_outstanding()
                if best_v is None or v < best_v:
                    best, best_v = i, v
            return best
        if p == "least_kv":
            best, best_v = 0, None
            for i, rep in enumerate(replicas):
                kv = rep.sched.kv
                queued = sum(kv.blocks_for(r.num_prompt_tokens)
                             for r in rep.sched.waiting_requests())
                used = rep.kv_blocks_used() if hasattr(rep, "kv_blocks_used") else \
                    kv.num_used_blocks
                v = (used + queued) / kv.num_gpu_blocks
                if best_v is None or v < best_v:
                    best, best_v = i, v
            return best
        if p == "prefix_affinity":
            return prefix_affinity_pick(spec, replicas, self.load_guard)
        return int(self._rng.integers(n))
