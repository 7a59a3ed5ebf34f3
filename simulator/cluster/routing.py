"""The ``prefix_affinity`` router policy: send a request where its prefix is cached.

Cache-aware routing as the llm-d inference scheduler's prefix scorer and the SGLang router's
``cache_aware`` policy do it: score each replica by the longest prefix of the request's KV
blocks it holds in its prefix cache, and pick the best; a *load guard* switches to the least
loaded replica when the cluster is out of balance, so a hot prefix cannot pile every request on
one replica. The router sees only what a real one can (DESIGN.md invariant 8): the declared
prefix block ids, each replica's cached block hashes and its outstanding requests.
"""
from __future__ import annotations

from simulator.base.request import RequestSpec
from simulator.scenario.config import DEFAULT_LOAD_GUARD
from simulator.scheduling.state import ReqState


def cached_prefix_blocks(kv, probe) -> int:
    """Blocks of ``probe``'s prefix that ``kv`` (a :class:`simulator.kv.manager.KVManager`)
    holds in its prefix cache (longest chain from the first block)."""
    return len(kv.get_computed_blocks(probe))


def prefix_affinity_pick(spec, replicas, load_guard: int = DEFAULT_LOAD_GUARD) -> int:
    """Index of the replica for ``spec`` under the ``prefix_affinity`` policy.

    Rules, in order:

    1. *Load guard*: when the most and least loaded replicas differ by more than
       ``load_guard`` outstanding requests, only the replicas within ``load_guard`` of the
       least loaded are candidates.
    2. Among the candidates, the one holding the longest cached prefix of ``spec``.
    3. Ties: fewest outstanding requests, then fewest cached blocks (the emptiest cache, so
       new prefixes spread over the replicas), then the lowest index.

    Parameters
    ----------
    spec : RequestSpec
    replicas : sequence
        Objects with ``num_outstanding()`` (deferred arrivals included) and ``sched.kv``
        (the replica's KV manager).
    load_guard : int
        Outstanding-request imbalance tolerated for affinity (>= 0).
    """
    loads = [rep.num_outstanding() for rep in replicas]
    lo = min(loads)
    guard = max(0, int(load_guard))
    # what a router can read of the request: its declared prompt content (the keys up to its
    # prompt; never its answer, which a session turn's own keys would go on into)
    # (a request state of its own: the KV manager's compiled methods take no other object;
    # built from the fields a router may read, never the output length: invariant 8)
    probe = ReqState(RequestSpec(
        request_id=-1, arrival_time_s=0.0, num_prompt_tokens=spec.num_prompt_tokens,
        num_output_tokens=0, prefix_hash_ids=spec.prefix_hash_ids,
        prefix_block_tokens=spec.prefix_block_tokens))
    best, best_key = 0, None
    for i, rep in enumerate(replicas):
        if loads[i] > lo + guard:
            continue
        kv = rep.sched.kv
        hit = cached_prefix_blocks(kv, probe) if spec.prefix_hash_ids else 0
        key = (-hit, loads[i], len(kv.pool.hash_to_block), i)
        if best_key is None or key < best_key:
            best, best_key = i, key
    return best
