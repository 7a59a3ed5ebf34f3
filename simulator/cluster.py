"""Routers: which replica an arriving request goes to.

Routers see only what a real router can see (DESIGN.md invariant 8): queue lengths, KV
usage and the request's declared fields; never its true output length.
"""
from __future__ import annotations

from .rng import stream

ROUTERS = ("round_robin", "least_outstanding", "least_kv", "random")


class Router:
    """Pick a replica index for each arriving request.

    Parameters
    ----------
    policy : str
        ``round_robin``; ``least_outstanding`` (fewest routed-but-unfinished requests, ties
        to the lowest index); ``least_kv`` (lowest KV-block usage plus queued prompt blocks);
        ``random`` (uniform, seeded).
    seed : int
        Run seed; the ``random`` policy draws from its named stream ``router``
        (:mod:`simulator.rng`).

    Raises
    ------
    ValueError
        On an unknown policy.
    """

    def __init__(self, policy: str, seed: int = 0):
        if policy not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {policy!r}")
        self.policy = policy
        self._next = 0
        self._rng = stream(seed, "router")

    def route(self, spec, replicas) -> int:
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
        return int(self._rng.integers(n))
