"""What the KV offload tiers did in a run (:mod:`simulator.kv.tiers`): the summary section.

Definitions (DESIGN.md glossary): a tier's *hit rate* is the prompt tokens served from it over
all prompt tokens of the requests that arrived; *hit tokens* count a request's first admission
and its resumptions after preemption alike; bytes are over the replica's GPUs (every TP rank's
shard); *load wait* is the time from the load's start to its landing, on the request's path
(queueing on the host link included), *link busy* the copies' own seconds.
"""
from __future__ import annotations

import math

import numpy as np

from simulator.base.quantiles import weighted_percentiles


def _ttft_stats(ttft: np.ndarray) -> dict:
    """Count, p50 and p99 of completed requests' TTFT (seconds; None without samples)."""
    ttft = ttft[np.isfinite(ttft)]
    if not len(ttft):
        return {"count": 0, "p50": None, "p99": None}
    p50, p99 = weighted_percentiles(ttft, np.ones(len(ttft)), [50, 99])
    return {"count": len(ttft), "p50": float(p50), "p99": float(p99)}


def offload_summary(replicas, requests, duration_s: float) -> dict:
    """The ``kv_offload`` summary section of a run with offload tiers.

    Parameters
    ----------
    replicas : list of Replica
        The run's replicas (their KV managers carry the tiers and the counters).
    requests : pandas.DataFrame
        The request table (with ``tier_hit_tokens``; ``first_token_time_s``,
        ``arrival_time_s``, ``num_prompt_tokens``, ``status``).
    duration_s : float
        The run's simulated seconds (for the links' mean use).

    Returns
    -------
    dict
        ``connector``; ``tiers`` (per tier: capacity in blocks, blocks held at the end, stored
        (written from the GPU), promoted (copied in from the tier below on a hit there),
        evicted, hit blocks and tokens, hit rate); ``loads``, ``bytes_loaded`` (host to device),
        ``bytes_stored`` (device to host), ``load_busy_s``, ``load_wait_s`` (sum and mean per
        load); the host link's mean use each way; TTFT p50/p99 of completed requests with and
        without a tier hit.
    """
    kvs = [rep.kv for rep in replicas if getattr(rep.kv, "offload", None) is not None]
    if not kvs:
        return {}
    stores = list({id(kv.offload): kv.offload for kv in kvs}.values())  # shared: one store
    prompt_total = float(requests["num_prompt_tokens"].sum()) if len(requests) else 0.0
    tiers = []
    for i, t in enumerate(stores[0].tiers):
        hit_tokens = int(sum(kv.tier_hit_tokens[i] for kv in kvs))
        tiers.append({
            "medium": t.name,
            "capacity_blocks": int(sum(s.tiers[i].capacity_blocks for s in stores)),
            "blocks_held": int(sum(len(s.tiers[i]) for s in stores)),
            "blocks_stored": int(sum(s.tiers[i].num_stored_blocks for s in stores)),
            "blocks_promoted": int(sum(s.tiers[i].num_promoted_blocks for s in stores)),
            "blocks_evicted": int(sum(s.tiers[i].num_evicted_blocks for s in stores)),
            "hit_blocks": int(sum(s.tiers[i].num_hit_blocks for s in stores)),
            "hit_tokens": hit_tokens,
            "hit_rate": hit_tokens / prompt_total if prompt_total else 0.0,
        })
    loads = int(sum(kv.num_tier_loads for kv in kvs))
    wait = float(sum(kv.tier_load_wait_s for kv in kvs))
    loaded = float(sum(kv.tier_load_bytes for kv in kvs))
    stored = float(sum(kv.tier_store_bytes for kv in kvs))
    # the host link, per direction, summed over the replicas' GPUs
    link = float(sum(kv.host_bytes_per_s * kv.replica_block_bytes / kv.block_bytes_per_gpu
                     for kv in kvs if kv.block_bytes_per_gpu))
    span = link * duration_s if duration_s > 0 else math.inf
    hit = requests["tier_hit_tokens"].to_numpy() > 0
    done = (requests["status"] == "completed").to_numpy()
    ttft = (requests["first_token_time_s"] - requests["arrival_time_s"]).to_numpy(float)
    return {
        "connector": stores[0].connector,
        "shared": len(stores) == 1 and len(kvs) > 1,
        "tiers": tiers,
        "loads": loads,
        "bytes_loaded": loaded,
        "bytes_stored": stored,
        "load_busy_s": float(sum(kv.tier_load_busy_s for kv in kvs)),
        "load_wait_s": wait,
        "load_wait_mean_s": wait / loads if loads else None,
        "host_to_device_use": loaded / span,
        "device_to_host_use": stored / span,
        "ttft_tier_hit": _ttft_stats(ttft[hit & done]),
        "ttft_no_tier_hit": _ttft_stats(ttft[~hit & done]),
    }
