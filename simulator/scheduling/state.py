"""Mutable per-request progress state kept by a replica.

One progress counter per request (vLLM v1's idea): ``num_computed_tokens`` catches up with
``num_tokens = num_prompt_tokens + num_emitted``. Prefill, chunked prefill, recompute after
preemption and prefix-cache hits all just move that counter. When a step brings it level with
``num_tokens``, the request emits one token (``num_emitted += 1``).
"""
from __future__ import annotations

import math

from simulator.base.compiled_core import register_pickling
from simulator.base.request import RequestSpec
from simulator.kv.manager import KVHandle

WAITING, RUNNING, COMPLETED, REJECTED, CANCELLED = (
    "waiting", "running", "completed", "rejected", "cancelled")
FINAL = (COMPLETED, REJECTED, CANCELLED)
#: legal status transitions (DESIGN.md invariant 2); "new" is the state before admission
LEGAL_TRANSITIONS = {
    ("new", WAITING), ("new", REJECTED),
    (WAITING, RUNNING), (WAITING, REJECTED), (WAITING, CANCELLED),
    (RUNNING, WAITING),  # preemption
    (RUNNING, COMPLETED), (RUNNING, REJECTED), (RUNNING, CANCELLED),
}
NaN = math.nan


class ReqState:
    """Progress and timestamps of one request on a replica (times in seconds)."""

    __slots__ = (
        "arrival_time_s",
        "cancel_requested",
        "finish_time_s",
        "first_scheduled_time_s",
        "first_token_time_s",
        "kv_handle",
        "kv_load_target_tokens",
        "kv_load_wait_s",
        "kv_ready_s",
        "last_token_time_s",
        "num_cached_prompt_tokens",
        "num_computed_tokens",
        "num_emitted",
        "num_output_tokens",
        "num_preemptions",
        "num_prompt_tokens",
        "num_seqs",
        "num_tier_hit_tokens",
        "prefix_keys",
        "priority",
        "reject_reason",
        "replica_id",
        "request_id",
        "spec",
        "spec_accepted",
        "spec_drafts",
        "status",
        "swapped_blocks",
    )

    def __init__(self, spec: RequestSpec) -> None:
        self.spec = spec
        self.request_id = spec.request_id
        self.num_prompt_tokens = spec.num_prompt_tokens
        self.num_output_tokens = spec.num_output_tokens
        self.num_computed_tokens = 0
        self.num_emitted = 0
        self.status = "new"
        self.reject_reason = ""
        self.replica_id = -1
        self.arrival_time_s = spec.arrival_time_s
        self.first_scheduled_time_s = NaN
        self.first_token_time_s = NaN
        self.finish_time_s = NaN
        self.last_token_time_s = NaN
        self.num_preemptions = 0
        #: the request's blocks, known to the KV manager only
        self.kv_handle = KVHandle()
        self.prefix_keys: list | None = None
        self.num_cached_prompt_tokens = 0
        self.cancel_requested = False
        self.priority = spec.priority
        self.swapped_blocks = 0
        #: KV offload tiers (simulator.kv.tiers): when a load in flight lands (NaN: none),
        #: the computed tokens it brings, the tokens loaded from the tiers over the request's
        #: life (resumptions after a preemption too), and the seconds spent waiting for loads
        self.kv_ready_s = NaN
        self.kv_load_target_tokens = 0
        self.num_tier_hit_tokens = 0
        self.kv_load_wait_s = 0.0
        self.spec_accepted = 0
        self.spec_drafts = 0
        #: sequences sharing the prompt (parallel sampling / beam width; 1 = a plain request)
        self.num_seqs = spec.n
        if spec.num_kv_transferred_tokens:  # P/D hook (simulator.runs.gateway)
            self._handed_over(spec)

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.spec,), {}

    def _handed_over(self, spec: RequestSpec) -> None:
        """A decode pool's copy of a request prefilled elsewhere: its prompt KV arrived
        (counts as computed; the blocks are allocated on admission) with its first token."""
        self.num_computed_tokens = spec.num_kv_transferred_tokens
        self.num_emitted = 1
        self.first_token_time_s = spec.arrival_time_s
        t = spec.handoff_token_time_s  # set with num_kv_transferred_tokens
        self.last_token_time_s = NaN if t is None else t

    @property
    def num_tokens(self) -> int:
        """Prompt plus emitted tokens: what must be computed before the next emission."""
        return self.num_prompt_tokens + self.num_emitted

    @property
    def is_decoding(self) -> bool:
        """Whether the request is in its decode phase: it has emitted a token and its KV
        holds the prompt and every emitted token but the last, so its next step computes one
        token per sequence (plus any draft tokens to verify). False while its prompt is
        prefilled, chunk by chunk or recomputed after a preemption."""
        return self.num_emitted > 0 and \
            self.num_computed_tokens == self.num_prompt_tokens + self.num_emitted - 1

    @property
    def blocks(self) -> list[int]:
        """Block ids held (read-only view for tests and audits: ``kv_handle.block_ids``)."""
        return self.kv_handle.block_ids

    @property
    def num_cached_blocks(self) -> int:
        """Leading blocks with a registered prefix hash (``kv_handle.num_cached_blocks``)."""
        return self.kv_handle.num_cached_blocks

    @property
    def is_finished(self) -> bool:
        return self.status in FINAL

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (f"ReqState(id={self.request_id}, {self.status}, computed="
                f"{self.num_computed_tokens}/{self.num_tokens}, emitted={self.num_emitted}/"
                f"{self.num_output_tokens}, blocks={len(self.kv_handle)})")


register_pickling(ReqState)
