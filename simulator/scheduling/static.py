"""Static (request-level) batching, as engines before iteration-level scheduling did.

A *static* engine (FasterTransformer-style; the baseline of Yu et al., "Orca", OSDI 2022)
runs one batch at a time from start to end:

Batch formation
    Waiting requests are taken in queue order (FCFS, or priority order) into a batch of at
    most ``max_batch_size`` slots (also capped by ``max_num_seqs``). Every slot reserves its
    request's whole maximum length in KV at formation time: ``kv.reserve_tokens(req)`` tokens
    (``max_model_len``, or prompt + declared ``max_tokens``), in either ``kv_cache.allocation``
    mode, because a static batch can neither admit nor preempt mid-run and must therefore
    hold its worst case up front. Requests are added while they fit; the first that does not
    fit closes the batch (no skipping ahead). The batch starts when it is *full* (
    ``max_batch_size`` slots, or the next request does not fit in KV) or when
    ``batch_timeout_s`` has passed since the arrival of the oldest request it would hold.
    Until then :meth:`StaticScheduler.idle_until` tells the replica when to try again, and an
    arrival wakes it earlier.

Prefill (one step)
    The whole batch is prefilled in one forward pass with every prompt padded to the batch's
    longest prompt ``P_max`` (FasterTransformer pads inputs to the longest in the batch): the
    step is costed as ``B`` prefill chunks of ``P_max`` tokens, ``num_prefill_tokens = B x
    P_max`` includes the padding tokens, and the padding alone is counted in
    :attr:`StaticScheduler.num_prefill_padding_tokens`. Every member emits its first token at
    the end of this step. The prefill step has no padding *slots* (``num_padding_seqs = 0``).

Decode (until the longest member finishes)
    Decode step ``j`` (``j = 1, 2, ...``) computes one token in every one of the ``B`` slots:
    ``shape.num_decode = B`` and the context of every slot is ``P_max + j`` (padded prompt
    plus generated tokens; finished slots keep generating filler, so their context grows
    too). A member with true output length ``o`` is useful in decode steps ``1 .. o - 1``
    and a *padding slot* from step ``o`` on: ``num_padding_seqs`` of step ``j`` is the number
    of members with ``o <= j`` (or that left early: cancelled during prefill, or stopped at
    ``max_model_len``). The batch has ``max(o) - 1`` decode steps; it ends, and all its KV
    is released, at the end of the step where its last live member finishes.

    Example: outputs 2, 5, 3 in one batch of 3 -> 1 prefill step and 4 decode steps with
    ``num_padding_seqs`` 0, 1, 2, 2 (total 5 of 15 slot-steps, padding waste 1/3).

KV accounting
    ``kv_blocks_used`` (the pool) holds every slot's reservation for the whole batch;
    ``kv_tokens_used`` (:attr:`StepOutput.kv_tokens`) counts only the tokens of *live*
    members after the step (real prompt + generated tokens): prompt padding, filler of
    finished slots and the unused tail of each reservation are waste.

Not modelled in static mode: preemption (none can happen), prefix caching (no hits are
taken), the ``max_num_batched_tokens`` budget (the padded batch is one forward pass) and the
KV watermark (nothing is ever preempted). The memory planner's activation reserve assumes
``max_num_batched_tokens``, so it understates a static engine's activation memory for large
padded batches.

Fast-forward: decode steps of a batch are identical but for the context until the next live
member finishes, so :meth:`StaticScheduler.plan_decode_run` allows a run up to that step and
:meth:`StaticScheduler.commit_decode_run` applies it in O(batch) (the ``plan_jump`` /
``commit_jump`` interface of :class:`ContinuousScheduler`; emission through
:func:`~simulator.scheduling.emission.advance`).
"""
from __future__ import annotations

import numpy as np

from simulator.base.compiled_core import register_pickling
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.continuous import ContinuousScheduler, StepOutput
from simulator.scheduling.emission import advance
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.state import CANCELLED, RUNNING, ReqState

#: Tolerance (seconds) when comparing the clock with a batch deadline (float round-off of
#: ``now + (deadline - now)`` must not make the replica sleep for a zero-length timeout).
_TIME_EPS = 1e-9


class StaticStepOutput(StepOutput):
    """A :class:`StepOutput` of a static batch.

    Attributes
    ----------
    is_prefill : bool
        The batch's (single) prefill step.
    decode_index : int
        1-based index ``j`` of the decode step within the batch (0 for the prefill).
    num_live : int
        Members still generating during the step (``batch_size - num_padding_seqs``).
    """

    __slots__ = ("decode_index", "is_prefill", "num_live")

    def __init__(self) -> None:
        super().__init__()
        self.is_prefill = False
        self.decode_index = 0
        self.num_live = 0


class StaticScheduler(ContinuousScheduler):
    """Static (request-level) batching for one replica.

    Reuses :class:`ContinuousScheduler`'s queues, :meth:`add_request` and :meth:`cancel`.
    ``running`` holds the batch's *live* members (still generating); :attr:`batch` holds all
    of its slots, finished members included.

    Parameters
    ----------
    config : SchedulerConfig
        The scenario's ``scheduler:`` section: ``max_batch_size`` (slots per batch),
        ``max_num_seqs`` (also caps the batch size), ``batch_timeout_s`` (longest wait, from
        the arrival of the oldest request of the forming batch, before a batch that is not
        full starts) and ``queue_policy`` (queue order) are used; the token budget and
        chunked prefill are not.
    limits : SchedulerLimits
        The replica's derived limits (``max_model_len``).
    kv : KVCacheManager
    recorder : RunRecorder
    replica_id : int
    """

    def __init__(self, config: SchedulerConfig, limits: SchedulerLimits, kv, recorder,
                 replica_id: int = 0) -> None:
        super().__init__(config, limits, kv, recorder, replica_id)
        self.max_batch_size = int(config.max_batch_size)  # >= 1, >= 0: checked by the schema
        self.batch_timeout_s = float(config.batch_timeout_s)
        self.batch: list[ReqState] = []
        self._pmax = 0
        self._j = 0  # decode steps done in the current batch
        self._prefilled = False
        self._live_prompt_sum = 0
        # statistics (whole run)
        self.num_batches = 0
        self.num_prefill_padding_tokens = 0
        self.num_padding_slot_steps = 0
        self.num_slot_steps = 0

    # ------------------------------------------------------------------ queue / admission
    @property
    def capacity(self) -> int:
        """Slots per batch: ``min(max_batch_size, max_num_seqs)``."""
        return min(self.max_batch_size, self.cfg.max_num_seqs)

    def has_work(self) -> bool:
        return bool(self.batch) or self.num_waiting > 0

    def never_fits_reason(self, r: ReqState) -> str:
        """Why ``r`` can never run here ('' if it can); reads declared data only.

        ``prompt_too_long`` when the prompt leaves no room for one output token within
        ``max_model_len``; ``max_tokens_too_large`` when prompt + declared ``max_tokens``
        exceeds ``max_model_len`` (as vLLM rejects it at arrival); ``kv_capacity`` when its
        reservation (``kv.reserve_tokens``) exceeds the whole pool;
        ``parallel_sampling_unsupported`` for ``n > 1`` (not modelled with static batching).
        """
        if r.num_prompt_tokens + 1 > self.limits.max_model_len:
            return "prompt_too_long"
        mt = r.spec.max_tokens
        if mt is not None and r.num_prompt_tokens + mt > self.limits.max_model_len:
            return "max_tokens_too_large"
        kv = self.kv
        if kv.blocks_for(kv.reserve_tokens(r)) > kv.num_gpu_blocks:
            return "kv_capacity"
        if r.num_seqs > 1:
            return "parallel_sampling_unsupported"  # static batching: one sequence per slot
        return ""

    def _candidates(self) -> list[ReqState]:
        """Up to ``capacity`` waiting requests in queue order (O(capacity) for FCFS)."""
        return self.queue.head(self.capacity)

    def _plan_batch(self) -> tuple[list[ReqState], bool]:
        """The requests the next batch would take now, and whether the batch is full.

        Full: ``capacity`` requests, or the next request in queue order does not fit in the
        free KV blocks.
        """
        kv = self.kv
        free = kv.num_free_blocks
        cands = self._candidates()
        take: list[ReqState] = []
        for r in cands:
            need = kv.blocks_for(kv.reserve_tokens(r))
            if need > free:
                return take, True
            free -= need
            take.append(r)
        if len(take) == self.capacity:
            return take, True
        return take, False

    def _deadline(self, take: list[ReqState]) -> float:
        return min(r.arrival_time_s for r in take) + self.batch_timeout_s

    def idle_until(self, now: float) -> float | None:
        """When to retry forming a batch that waits for its timeout (None: nothing to wait
        for: a batch is running, the queue is empty, or nothing fits)."""
        if self.batch or not self.num_waiting:
            return None
        take, _full = self._plan_batch()
        if not take:
            return None
        return self._deadline(take)

    # ------------------------------------------------------------------ one iteration
    def schedule(self, now: float) -> StaticStepOutput | None:
        """The next step: the running batch's next decode step, or a new batch's prefill.

        Returns None when no batch runs and none may start yet (not full and the timeout
        has not passed).
        """
        if self.batch:
            return self._decode_step()
        while self.num_waiting:
            take, full = self._plan_batch()
            if not take:
                head = self._peek_waiting()
                if self.kv.num_used_blocks == 0:
                    # does not fit an empty pool: it never will (add_request normally
                    # rejects such requests already)
                    self._remove_waiting(head)
                    self.rec.reject(head, now, "kv_capacity")
                    continue
                return None  # pragma: no cover - the pool is empty between batches
            if not full and now + _TIME_EPS < self._deadline(take):
                return None
            return self._start_batch(take, now)
        return None

    def _start_batch(self, take: list[ReqState], now: float) -> StaticStepOutput:
        kv, rec = self.kv, self.rec
        for r in take:
            popped = self._pop_waiting()
            assert popped is r
            ok = kv.allocate(r, kv.reserve_tokens(r))
            assert ok, "planned reservation must fit"
            if r.first_scheduled_time_s != r.first_scheduled_time_s:  # NaN: first time
                r.first_scheduled_time_s = now
            rec.transition(r, RUNNING, now)
        B = len(take)
        pmax = max(r.num_prompt_tokens for r in take)
        psum = sum(r.num_prompt_tokens for r in take)
        self.batch = take
        self.running = list(take)
        self._pmax = pmax
        self._j = 0
        self._prefilled = False
        self._live_prompt_sum = psum
        self.num_batches += 1
        self.num_prefill_padding_tokens += B * pmax - psum

        out = StaticStepOutput()
        out.is_prefill = True
        out.veto = "static_prefill"
        out.reqs = take
        out.ntoks = [r.num_prompt_tokens for r in take]
        shape = out.shape
        shape.prefill_q = [pmax] * B
        shape.prefill_start = [0] * B
        shape.num_decode = 0
        shape.decode_ctx_total = 0
        shape.num_sampled = B
        out.num_prefill_tokens = B * pmax
        out.num_prefill_seqs = B
        out.num_decode_seqs = out.num_decode_tokens = 0
        out.num_padding_seqs = 0
        out.num_live = B
        out.kv_tokens = psum
        out.num_waiting = self.num_waiting
        return out

    def _decode_step(self) -> StaticStepOutput:
        B = len(self.batch)
        live = len(self.running)
        j = self._j + 1
        out = StaticStepOutput()
        out.decode_index = j
        out.reqs = self.batch
        out.ntoks = [1] * B
        shape = out.shape
        shape.num_decode = B
        shape.decode_ctx_total = B * (self._pmax + j)
        shape.num_sampled = B
        out.num_decode_seqs = out.num_decode_tokens = B
        out.num_padding_seqs = B - live
        out.num_live = live
        out.kv_tokens = self._live_prompt_sum + live * j
        out.num_waiting = self.num_waiting
        out.veto = ""
        return out

    # ------------------------------------------------------------------ results
    def _after_step(self, left: bool) -> None:
        if left:
            self.running = [r for r in self.running if r.status == RUNNING]
            self._live_prompt_sum = sum(r.num_prompt_tokens for r in self.running)
        if not self.running:
            kv = self.kv
            for r in self.batch:
                kv.free(r)
            self.batch = []

    def update(self, out: StaticStepOutput, start: float, end: float) -> None:  # type: ignore[override]
        """Apply one finished step (prefill or decode) of the running batch."""
        if out.is_prefill:
            self._count_slots(out, 1)
            live = []
            cancelled = False
            for r in self.running:
                r.num_computed_tokens = r.num_prompt_tokens
                if r.cancel_requested:
                    self.rec.finish(r, r.finish_time_s, CANCELLED, "cancelled")
                    cancelled = True
                else:
                    live.append(r)
            finished = advance(live, 1, (end,), start_s=start, recorder=self.rec,
                               max_model_len=self.limits.max_model_len)
            self._prefilled = True
            self._after_step(cancelled or bool(finished))
            return
        self.commit_decode_run(out, 1, start, (end,))

    def _count_slots(self, out: StaticStepOutput, k: int) -> None:
        self.num_slot_steps += k * len(out.reqs)
        self.num_padding_slot_steps += k * out.num_padding_seqs

    # ------------------------------------------------------------------ fast-forward
    def plan_decode_run(self, out: StaticStepOutput) -> int:  # type: ignore[override]
        """Decode steps (this one included) that can run back to back: up to the step in
        which the next live member finishes (or reaches ``max_model_len``)."""
        if out.is_prefill or not self.running:
            return 1
        rem = min(r.num_output_tokens - r.num_emitted for r in self.running)
        k_len = self.limits.max_model_len - max(r.num_tokens for r in self.running)
        return max(1, min(rem, k_len))

    def decode_run_arrays(self, out: StaticStepOutput, k: int):  # type: ignore[override]
        """Per-step total attended context and KV blocks held for ``k`` decode steps.

        Returns
        -------
        ctx_totals : ndarray of int, shape (k,)
            ``B x (P_max + j)`` for ``j = decode_index .. decode_index + k - 1``.
        blocks_used : ndarray of int, shape (k,)
            The batch's reservation (constant).
        """
        B = len(out.reqs)
        j = out.decode_index + np.arange(k, dtype=np.int64)
        ctx = B * (self._pmax + j)
        return ctx, np.full(k, self.kv.num_used_blocks, dtype=np.int64)

    def commit_decode_run(self, out: StaticStepOutput, k: int, start: float,  # type: ignore[override]
                          ends) -> None:
        """Apply ``k`` consecutive decode steps of ``out`` (``ends``: their end times); the
        KV of finished members stays reserved until the batch ends."""
        self._count_slots(out, k)
        live = self.running
        for r in live:
            r.num_computed_tokens += k
        finished = advance(live, k, ends, start_s=start, recorder=self.rec,
                           max_model_len=self.limits.max_model_len)
        self._j += k
        self._after_step(bool(finished))

    # ------------------------------------------------------------------ statistics
    def stats(self) -> dict:
        """Run totals: batches, padding slot-steps, slot-steps, prefill padding tokens, and
        ``padding_waste`` = padding slot-steps / slot-steps (None before any step)."""
        return {
            "num_batches": self.num_batches,
            "num_padding_slot_steps": self.num_padding_slot_steps,
            "num_slot_steps": self.num_slot_steps,
            "num_prefill_padding_tokens": self.num_prefill_padding_tokens,
            "padding_waste": (self.num_padding_slot_steps / self.num_slot_steps
                              if self.num_slot_steps else None),
        }


register_pickling(StaticStepOutput, StaticScheduler)
