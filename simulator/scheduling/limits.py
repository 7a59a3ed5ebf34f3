"""The limits a replica's scheduler needs beyond the scenario's ``scheduler:`` section.

The scenario's :class:`~simulator.scenario.config.SchedulerConfig` is the one scheduler
configuration: every key a user writes (``max_num_seqs``, ``max_num_batched_tokens``,
``enable_chunked_prefill``, ``queue_policy``, ``preemption_mode``, ``step_policy``, ...) is
read from it, under its own name and meaning. :class:`SchedulerLimits` holds only what is
*derived* from the scenario and the replica it runs on (the model, the GPU, the engine
profile, the memory plan), computed once per replica set-up
(:func:`simulator.cluster.setup.build_setup`) and frozen: no name of it is a scenario key
with another meaning.
"""
from __future__ import annotations

from dataclasses import dataclass

from simulator.kv.planner import swap_space_blocks
from simulator.scenario.config import KVCacheConfig, SchedulerConfig


@dataclass(frozen=True)
class SchedulerLimits:
    """Derived scheduler limits of one replica (vLLM names where vLLM has one).

    Attributes
    ----------
    max_model_len : int
        Longest sequence (prompt + output), tokens: ``scheduler.max_model_len``, or the
        model's ``max_position_embeddings`` when the scenario leaves it out (as vLLM resolves
        it).
    swap_space_blocks : int
        KV blocks the host swap space holds per GPU (``kv_cache.swap_space_gb`` over
        ``swap_block_bytes``; used with ``preemption_mode: swap``).
    swap_block_bytes : float
        Bytes of one KV block on one GPU (the swap transfer size per GPU).
    host_link_bandwidth_bytes_per_s : float
        The GPU's host link (PCIe) bandwidth per direction, bytes/s (swap transfers).
    tenant_max_seqs : int or None
        Running sequences one tenant may hold (``admission.tenant_max_share x
        max_num_seqs``, at least 1); None without a share.
    reserve_full_isl : bool
        Admit a waiting request only when its whole current sequence fits in the free blocks
        (vLLM >= 0.10 ``scheduler_reserve_full_isl``; from the engine profile); not enforced
        while nothing runs, so a request larger than the free pool cannot wedge the replica.
    """

    max_model_len: int
    swap_space_blocks: int = 0
    swap_block_bytes: float = 0.0
    host_link_bandwidth_bytes_per_s: float = 32e9
    tenant_max_seqs: int | None = None
    reserve_full_isl: bool = False

    @classmethod
    def for_replica(cls, section: SchedulerConfig, kv_cache: KVCacheConfig, *,
                    max_model_len: int, block_bytes: float,
                    host_link_bandwidth_bytes_per_s: float,
                    reserve_full_isl: bool) -> SchedulerLimits:
        """The limits of a replica whose scenario has ``section`` and ``kv_cache``.

        Parameters
        ----------
        section : SchedulerConfig
            The scenario's ``scheduler:`` section.
        kv_cache : KVCacheConfig
            The scenario's ``kv_cache:`` section (``swap_space_gb``).
        max_model_len : int
            The resolved longest sequence, tokens.
        block_bytes : float
            Bytes of one KV block on one GPU.
        host_link_bandwidth_bytes_per_s : float
            The GPU's host link bandwidth per direction, bytes/s.
        reserve_full_isl : bool
            The engine profile's admission rule (see the class attributes).

        Returns
        -------
        SchedulerLimits

        Raises
        ------
        ValueError
            When ``block_bytes`` is not > 0 (from :func:`~simulator.kv.planner.swap_space_blocks`).
        """
        share = section.admission.tenant_max_share
        return cls(max_model_len=int(max_model_len),
                   swap_space_blocks=swap_space_blocks(kv_cache.swap_space_gb, block_bytes),
                   swap_block_bytes=float(block_bytes),
                   host_link_bandwidth_bytes_per_s=float(host_link_bandwidth_bytes_per_s),
                   tenant_max_seqs=(max(1, int(share * section.max_num_seqs))
                                    if share is not None else None),
                   reserve_full_isl=bool(reserve_full_isl))
