"""Requests waiting for their KV to load from an offload tier (:mod:`simulator.kv.tiers`).

LMCache's connector loads synchronously (:func:`load_in_step`: the step waits); vLLM's loads
asynchronously, as follows.

A parked request is given the blocks of its whole current sequence when its load starts (vLLM
allocates the loaded tokens' blocks first and the rest once the request runs): a landed request
then needs no block to run, so loads in flight can never hold the pool in a state where none
of them can proceed (requests whose loads filled the pool, each waiting for blocks for the rest
of its prompt). The admission rule is the same as for any request: the blocks must be free.

vLLM's offloading connector (and LMCache's) answer a prefix lookup with the tokens an
offload tier holds beyond the GPU's prefix cache; the scheduler then allocates the request's
GPU blocks, starts an asynchronous copy and parks the request (``WAITING_FOR_REMOTE_KVS``)
until the copy lands, while the replica keeps running other requests. A parked request counts
as waiting (its lifecycle status), holds its blocks, takes no token budget and no
``max_num_seqs`` slot; once its copy has landed, the next schedule puts it back at the head
of the waiting queue with the loaded tokens computed, and it is admitted as any request with
a prefix hit. The ContinuousScheduler calls these helpers; they are its code, kept apart.
"""
from __future__ import annotations

import math
from typing import Any

from simulator.kv.tiers import begin_load, take_load


def park_for_load(sched: Any, r: Any, num_gpu_hit_blocks: int, where: list[int],
                  now: float) -> None:
    """Start loading ``where`` (tiers of the blocks after the request's GPU hits; its blocks
    are allocated) and park ``r`` until the copy lands.

    Parameters
    ----------
    sched : ContinuousScheduler
    r : ReqState
        Taken out of the waiting queue, nothing computed.
    num_gpu_hit_blocks : int
        Its leading blocks shared from the GPU prefix cache.
    where : list of int
        The tier (0 cpu, 1 disk) of each block to load.
    now : float
        Seconds.
    """
    kv = sched.kv
    bs = kv.block_size
    target = (num_gpu_hit_blocks + len(where)) * bs
    ready = begin_load(kv, r, num_gpu_hit_blocks, where, now)
    r.kv_ready_s = ready
    r.kv_load_target_tokens = target
    r.kv_load_wait_s += ready - now
    if r.num_emitted == 0 and r.num_preemptions == 0:
        r.num_cached_prompt_tokens = target
    sched.rec.prefix_hit_tokens += num_gpu_hit_blocks * bs
    if r.first_scheduled_time_s != r.first_scheduled_time_s:  # NaN: first time
        r.first_scheduled_time_s = now
    sched.loading.append(r)
    sched.new_landings.append(ready)


def load_in_step(sched: Any, r: Any, num_gpu_hit_blocks: int, where: list[int]) -> float:
    """A synchronous load (LMCache's connector): blocks ``where`` after the request's GPU
    hits come in before the step's forward pass; returns its seconds (the step lasts that
    much longer, :attr:`StepOutput.kv_load_s`). The caller admits ``r`` with them computed."""
    busy = take_load(sched.kv, r, num_gpu_hit_blocks, where)
    r.kv_load_wait_s += busy
    sched.kv.tier_load_wait_s += busy
    return busy


def land_loads(sched: Any, now: float) -> None:
    """Requests whose copy has landed by ``now`` go back to the head of the waiting queue (in
    the order they were parked) with the loaded tokens computed and their blocks registered."""
    loading = sched.loading
    done = [r for r in loading if r.kv_ready_s <= now]
    if not done:
        return
    sched.loading = [r for r in loading if r.kv_ready_s > now]
    kv = sched.kv
    for i in range(len(done) - 1, -1, -1):  # pushed to the front: the first parked first
        r = done[i]
        r.num_computed_tokens = r.kv_load_target_tokens
        r.kv_ready_s = math.nan
        kv.cache_full_blocks(r)
        sched._push_waiting(r, front=True)


def next_landing_s(sched: Any) -> float | None:
    """When the first load in flight lands (None: none in flight)."""
    if not sched.loading:
        return None
    return min(r.kv_ready_s for r in sched.loading)
