"""Continuous (iteration-level) batching scheduler, vLLM v1-like.

Each call to :meth:`ContinuousScheduler.schedule` builds one engine iteration under a token
budget ``max_num_batched_tokens`` and a sequence limit ``max_num_seqs`` (Yu et al., "Orca",
OSDI 2022; vLLM v1's scheduler, whose structure we follow):

1. running requests first, in order: each asks for ``num_tokens - num_computed_tokens``
   tokens (1 for a decode, the rest of the prompt for a prefill), capped by the budget;
   when the KV pool cannot supply its blocks, a victim is preempted (FCFS: the tail of the
   running queue; priority policy: the least important, latest arrival) until it fits or the
   request itself was the victim;
2. then waiting requests in queue order, while the budget, ``max_num_seqs`` and the KV pool
   allow (and only when nothing was preempted in this step). Without chunked prefill a
   waiting prompt is admitted only whole; with ``enable_chunked_prefill`` it may be split.
   A preempted request being recomputed may always be chunked (otherwise a long
   recompute could never fit the budget).

The scheduler is a plain object (no SimPy): the replica process asks it for a step, has
the step priced by the perf side (:meth:`ContinuousScheduler.step_pricer`: the step reports
its shape and the KV blocks it swaps, the pricer turns them into seconds), advances the clock
and calls :meth:`update`.

Fast-forward: a pure-decode step after which nothing can change (no request finishes, no
waiting request becomes admissible, no block shortage) repeats identically but for the
context lengths; :meth:`plan_jump` returns a :class:`~simulator.scheduling.emission.Jump`
of as many such steps as can run back to back (:meth:`plan_decode_run` counts them) and
:meth:`commit_jump` applies the first ``k`` of them at once (numpy, O(batch) per run), with
results identical to stepping one by one. Tokens, ITL and finishes of both paths go through
:func:`~simulator.scheduling.emission.advance`; blocks through the KV manager only.

size: 798 lines, functions 95 lines: one scheduler class on the hot path, as vLLM v1's Scheduler is one class (KV loads from offload tiers live in scheduling/kv_loads.py); _schedule_running is the running-batch pass of its schedule(), kept whole so its decisions read in vLLM's order (parallel sampling lives in scheduling/parallel.py, the fast-forward in scheduling/emission.py).
"""
from __future__ import annotations

from itertools import islice
from typing import Any

import numpy as np
from mypy_extensions import mypyc_attr

from simulator.base.compiled_core import register_pickling
from simulator.kv.tiers import tier_prefix
from simulator.perf.step_cost import StepPricer
from simulator.perf.step_shape import StepShape
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.emission import Jump, advance
from simulator.scheduling.kv_loads import land_loads, load_in_step, next_landing_s, park_for_load
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.parallel import extra_seqs, kv_tokens_held, kv_tokens_per_seq
from simulator.scheduling.queues import RequestQueue
from simulator.scheduling.state import CANCELLED, REJECTED, RUNNING, WAITING, ReqState


class StepOutput:
    """One scheduled iteration."""

    __slots__ = (
        "cost",
        "draft",
        "kv_load_s",
        "kv_tokens",
        "ntoks",
        "num_decode_seqs",
        "num_decode_tokens",
        "num_padding_seqs",
        "num_prefill_seqs",
        "num_prefill_tokens",
        "num_waiting",
        "preempted",
        "reqs",
        "run_arrays",
        "run_blocks",
        "shape",
        "swap_transfers",
        "veto",
    )

    def __init__(self) -> None:
        self.reqs: list[ReqState] = []
        self.ntoks: list[int] = []
        self.preempted: list[ReqState] = []
        self.shape = StepShape()
        self.num_prefill_tokens = 0
        self.num_decode_tokens = 0
        self.num_prefill_seqs = 0
        self.num_decode_seqs = 0
        self.num_waiting = 0
        #: the first feature of :data:`~simulator.scheduling.emission.FAST_FORWARD_VETOES`
        #: the step has ('' when it may be fast-forwarded)
        self.veto = "prefill"
        #: bytes of each host-link transfer (swap out or in) of the step, in order (None: none)
        self.swap_transfers: list[float] | None = None
        #: seconds of synchronous KV loads from offload tiers within the step (LMCache's
        #: connector loads before the forward pass; simulator.kv.tiers)
        self.kv_load_s = 0.0
        #: the draft work of speculative decoding (a ``DraftWork``; None: no drafting)
        self.draft: Any = None
        #: what the step cost (a ``StepCost``, set when ``StepPricer.price`` priced it)
        self.cost: Any = None
        self.kv_tokens = 0  # tokens held in KV after the step (sum over running requests)
        self.num_padding_seqs = 0  # slots doing no useful work (static batching)
        self.run_arrays: Any = None  # (computed tokens, blocks held) per request, for a decode run
        self.run_blocks: Any = None  # pool blocks in use per step of the planned decode run

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (), {}

    @property
    def batch_size(self) -> int:
        return len(self.reqs)

    @property
    def swap_bytes(self) -> float:
        """Bytes the step moves over the host link (the sum of :attr:`swap_transfers`)."""
        transfers = self.swap_transfers
        return 0.0 if transfers is None else float(sum(transfers))

    def add_swap(self, nbytes: float) -> None:
        """Report one host-link transfer of ``nbytes`` bytes (a swap out or in); the step
        pricer charges its time."""
        transfers = self.swap_transfers
        if transfers is None:
            self.swap_transfers = [nbytes]
        else:
            transfers.append(nbytes)

    @property
    def jumpable(self) -> bool:
        """Whether no feature vetoes fast-forwarding this step."""
        return not self.veto


# a Python subclass may extend it: the speculative scheduler (not compiled: it samples
# acceptance with numpy per step and tests replace its sampler)
@mypyc_attr(allow_interpreted_subclasses=True)
class ContinuousScheduler:
    """Iteration-level scheduler for one replica.

    Parallel sampling (``RequestSpec.n > 1``): the prompt is prefilled once; each decode step
    then schedules one token per sequence (``n`` tokens of the budget, all or none), the
    sequences count against ``max_num_seqs``, and every step emits ``n`` tokens (ITL samples
    weighted ``n``). The ``n`` sequences share the prompt's KV blocks copy-on-write
    (:mod:`simulator.kv.cow`) and, as modelled here, have the same length. Recompute after a
    preemption is charged as one sequence's tokens (a simplification).

    Parameters
    ----------
    config : SchedulerConfig
        The scenario's ``scheduler:`` section (vLLM names: ``max_num_seqs``,
        ``max_num_batched_tokens``, ``enable_chunked_prefill``, ``queue_policy``: FCFS, or
        ``priority``: by (priority, arrival), preempting the least important running request
        first; ``preemption_mode``; ``step_policy``: ``decode_first`` for vLLM V1 mixed steps,
        ``prefill_first`` for V0 without chunked prefill, where admitted prompts run alone).
    limits : SchedulerLimits
        What the replica derives beyond the section (the resolved ``max_model_len``, swap
        space, tenant cap, the engine's admission rule).
    kv : KVCacheManager
    recorder : RunRecorder
        Collects finished requests, ITL samples and transitions.
    replica_id : int
    """

    #: whether requests with ``n > 1`` are served (the speculative plug-in says no)
    supports_parallel_sampling = True

    def __init__(self, config: SchedulerConfig, limits: SchedulerLimits, kv, recorder,
                 replica_id: int = 0) -> None:
        self.queue = RequestQueue(config.queue_policy)
        self.cfg = config
        self.limits = limits
        self.kv = kv
        self.rec = recorder
        self.replica_id = replica_id
        self.priority = config.queue_policy == "priority"
        self.running: list[ReqState] = []
        self.num_preemptions = 0
        #: draft tokens verified per decode step (speculative decoding); 0 = plain decoding.
        #: A decode then schedules ``1 + num_lookahead_tokens`` tokens and allocates KV slots
        #: for them (rolled back on rejection by the speculative scheduler's ``update``).
        self.num_lookahead_tokens = 0
        self.swap_used_blocks = 0
        self.num_swap_outs = 0
        self.num_swap_ins = 0
        #: running requests whose client cancelled (``cancel_requested`` set), ever
        self.num_cancels_requested = 0
        #: requests waiting for a KV load from an offload tier (scheduling/kv_loads.py), and
        #: the landing times of loads started since the engine last looked (it sets a timer
        #: on each: a landing cuts a fast-forwarded run as an arrival does)
        self.loading: list[ReqState] = []
        self.new_landings: list[float] = []

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.cfg, self.limits, self.kv, self.rec, self.replica_id), {}

    # ------------------------------------------------------------------ queue helpers
    @property
    def num_waiting(self) -> int:
        return len(self.queue)

    def has_work(self) -> bool:
        return bool(self.running) or len(self.queue) > 0 or bool(self.loading)

    def num_outstanding(self) -> int:
        """Requests routed here and not finished (what a real router can count)."""
        return len(self.running) + len(self.queue) + len(self.loading)

    def _peek_waiting(self):
        return self.queue.peek()

    def _pop_waiting(self):
        return self.queue.pop()

    def _push_waiting(self, r: ReqState, front: bool = False):
        self.queue.push(r, front)

    def _remove_waiting(self, r: ReqState) -> bool:
        return self.queue.remove(r)

    def remove_waiting(self, r: ReqState) -> bool:
        """Take ``r`` out of the waiting queue (False when it is not there)."""
        return self.queue.remove(r)

    def waiting_requests(self) -> list[ReqState]:
        return self.queue.ordered()

    def idle_until(self, now: float) -> float | None:
        """When to try scheduling again though nothing arrives (None: only an arrival or a
        finish changes what can run; iteration-level batching waits for a timer only while a
        KV load from an offload tier is in flight: until it lands)."""
        return next_landing_s(self)

    def step_pricer(self, perf) -> StepPricer:
        """The pricer of this scheduler's steps on ``perf`` (swaps cross the configured host
        link)."""
        bw = self.limits.host_link_bandwidth_bytes_per_s
        return StepPricer(perf, host_link_bandwidth_bytes_per_s=bw)

    # ------------------------------------------------------------------ admission
    def add_request(self, r: ReqState, now: float) -> bool:
        """Queue ``r``; reject it (returns False) when it can never be served here."""
        r.replica_id = self.replica_id
        reason = self.never_fits_reason(r)
        if reason:
            self.rec.reject(r, now, reason)
            return False
        self.rec.transition(r, WAITING, now)
        self._push_waiting(r)
        return True

    def requeue_migrated(self, r: ReqState) -> None:
        """Queue ``r``, a waiting request a drained replica of the pool hands over."""
        r.replica_id = self.replica_id
        self._push_waiting(r)

    def never_fits_reason(self, r: ReqState) -> str:
        """Why ``r`` can never run on this replica ('' if it can). Reads declared data only.

        ``prompt_too_long``: the prompt leaves no room for one output token within
        ``max_model_len``; ``max_tokens_too_large``: prompt + declared ``max_tokens`` exceeds
        ``max_model_len`` (vLLM's OpenAI server rejects such a request at arrival: "'max_tokens'
        ... is too large ... maximum context length"); ``kv_capacity``: it cannot fit an empty
        KV pool; ``prompt_exceeds_max_num_batched_tokens``: without chunked prefill the
        prompt never fits one iteration; ``parallel_sampling_unsupported``: ``n > 1`` on a
        scheduler without parallel sampling (speculative decoding); ``n_exceeds_max_num_seqs``:
        its ``n`` sequences never fit one iteration.
        """
        cfg, max_len = self.cfg, self.limits.max_model_len
        if r.num_prompt_tokens + 1 > max_len:
            return "prompt_too_long"
        mt = r.spec.max_tokens
        if mt is not None and r.num_prompt_tokens + mt > max_len:
            return "max_tokens_too_large"
        if not self.kv.can_ever_fit(r):
            return "kv_capacity"
        if not cfg.enable_chunked_prefill and r.num_prompt_tokens > cfg.max_num_batched_tokens:
            return "prompt_exceeds_max_num_batched_tokens"
        if r.num_seqs > 1:
            if not self.supports_parallel_sampling:
                return "parallel_sampling_unsupported"
            if r.num_seqs > min(cfg.max_num_seqs, cfg.max_num_batched_tokens):
                return "n_exceeds_max_num_seqs"
        return ""

    def cancel(self, r: ReqState, now: float) -> None:
        """Client cancellation: of a request without a first token, or of any unfinished one
        whose spec says ``cancel_when_streaming`` (applied at the end of the step in
        progress)."""
        if r.is_finished or (r.num_emitted > 0 and not r.spec.cancel_when_streaming):
            return
        if r.status == WAITING:
            if not self._remove_waiting(r) and r in self.loading:
                self.loading.remove(r)  # its load in flight is dropped with its blocks
            self.kv.free(r)
            self.rec.finish(r, now, CANCELLED, "cancelled")
        elif r.status == RUNNING:
            r.cancel_requested = True  # applied at the end of the current step
            self.num_cancels_requested += 1
            r.finish_time_s = now

    # ------------------------------------------------------------------ preemption
    def _preempt(self, victim: ReqState, now: float, out: StepOutput) -> None:
        self.running.remove(victim)
        lim = self.limits
        nb = len(victim.kv_handle)
        if (self.cfg.preemption_mode == "swap" and victim.num_computed_tokens > 0 and nb
                and self.swap_used_blocks + nb <= lim.swap_space_blocks
                and self.kv.allocation == "paged"):
            # swap out: KV copied to host memory over the host link; progress kept
            victim.swapped_blocks = nb
            self.swap_used_blocks += nb
            out.add_swap(nb * lim.swap_block_bytes)
            self.num_swap_outs += 1
            self.kv.free(victim)
        else:
            self.kv.free(victim)
            victim.num_computed_tokens = 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.rec.transition(victim, WAITING, now)
        self._push_waiting(victim, front=True)
        out.preempted.append(victim)

    def _pick_victim(self) -> ReqState:
        if self.priority:
            return max(self.running, key=lambda r: (r.priority, r.arrival_time_s, r.request_id))
        return self.running[-1]

    # ------------------------------------------------------------------ one iteration
    def schedule(self, now: float) -> StepOutput | None:
        """Build the next iteration; None when nothing can run."""
        out = StepOutput()
        sched: dict[ReqState, int] = {}
        if self.loading:
            land_loads(self, now)
        budget, prefill_only, acc = self._schedule_running(now, out, sched)
        n_run = len(sched)
        # waiting requests (admission stops for a reason that persists through decode steps,
        # unless something was preempted)
        if not prefill_only and not out.preempted:  # prefill_first: admitted first
            self._admit_waiting(now, out, sched, budget)
        if not sched:
            return None
        if acc is None or out.preempted:  # counted afresh from the scheduled tokens
            parallel = self._fill_shape(out, sched)
        else:  # the running requests were counted as they were scheduled; add the admitted
            parallel = self._set_shape(out, sched, self._count_shape(
                out, islice(sched.items(), n_run, None) if len(sched) > n_run else (), acc))
        out.veto = self._veto(out, self.num_lookahead_tokens, parallel,
                              self.num_cancels_requested)
        return out

    def _schedule_running(self, now: float, out: StepOutput,
                          sched: dict) -> tuple[int, bool, list | None]:
        """Give the running requests their tokens, preempting when the KV pool runs dry
        (``step_policy: prefill_first``: waiting prompts first, alone); returns the budget left,
        whether the step is prefill-only, and the shape counts of the requests scheduled
        (:meth:`_count_shape`'s accumulator, counted on the way; None when a request with
        several sequences or ``prefill_first`` asks for the general count)."""
        cfg, kv = self.cfg, self.kv
        budget: int = cfg.max_num_batched_tokens  # typed: native int arithmetic when compiled
        running = self.running
        la = self.num_lookahead_tokens
        prefill_only = False
        if cfg.step_policy == "prefill_first" and self.num_waiting:  # V0: prefills alone
            budget = self._admit_waiting(now, out, sched, budget)
            prefill_only = bool(sched)
        i = len(running) if prefill_only else 0  # a prefill-only step skips the decodes
        bs: int = kv.block_size
        # _count_shape inlined for one-sequence requests: decodes, decode context, sampled
        # rows, prefill tokens, KV tokens after the step, parallel sampling seen
        nd = ctx = nsamp = ntok_p = kvt = 0
        general = cfg.step_policy == "prefill_first"
        pq, ps = out.shape.prefill_q, out.shape.prefill_start
        nrun = len(running)
        while i < nrun and budget > 0:
            r = running[i]
            c = r.num_computed_tokens
            n = n0 = r.num_prompt_tokens + r.num_emitted - c  # num_tokens - computed (inlined)
            decoding = r.is_decoding
            ns = r.num_seqs
            if ns > 1 and decoding:
                # parallel sampling: one decode token per sequence, all or none
                if budget < ns:
                    i += 1
                    continue
                n = ns
            elif la and decoding and budget >= 1 + la:
                n += la
            n = min(n, budget)
            if ns == 1:  # kv.has_slots, inlined for one sequence (the common case)
                kv_tokens = c + n
                fits = kv_tokens <= len(r.kv_handle.block_ids) * bs
            else:
                kv_tokens = kv_tokens_per_seq(r, n)
                fits = kv.has_slots(r, kv_tokens)
            left = False  # r left the running list (preempted or rejected)
            while (not fits and not kv.has_slots(r, kv_tokens)
                   and not kv.allocate(r, kv_tokens)):
                victim = self._pick_victim()
                if victim in sched:
                    budget += sched.pop(victim)
                if victim is r and len(running) == 1:
                    # alone and still does not fit: it never will
                    running.remove(r)
                    kv.free(r)
                    self.rec.finish(r, now, REJECTED, "kv_capacity")
                    left = True
                    break
                idx = running.index(victim)
                self._preempt(victim, now, out)
                nrun = len(running)
                if idx < i:
                    i -= 1
                if victim is r:
                    left = True
                    break
            if left:
                nrun = len(running)  # a request left the running list
                continue
            sched[r] = n
            budget -= n
            i += 1
            if ns != 1:
                general = True
            elif decoding and (n == 1 or n == 1 + la):
                nd += 1  # a decode (with ``la`` draft tokens to verify when speculating)
                ctx += c + n
                nsamp += n
                kvt += c + n
            else:
                if n == n0:
                    nsamp += 1  # the prompt's last chunk samples its token
                pq.append(n)
                ps.append(c)
                ntok_p += n
                kvt += c + n
        return budget, prefill_only, (None if general else [nd, ctx, nsamp, ntok_p, kvt, False])

    def _fill_shape(self, out: StepOutput, sched: dict) -> bool:
        """The step's shape and counters from the scheduled tokens; True when a request with
        several sequences (parallel sampling) is in the step."""
        out.shape.prefill_q.clear()
        out.shape.prefill_start.clear()
        return self._set_shape(out, sched, self._count_shape(out, sched.items(),
                                                             [0, 0, 0, 0, 0, False]))

    def _count_shape(self, out: StepOutput, items, acc: list) -> list:
        """Add the scheduled ``(request, tokens)`` pairs ``items`` to the shape counts ``acc``
        (decodes, decode context, sampled rows, prefill tokens, KV tokens after the step of
        the one-sequence requests, parallel sampling seen) and the step's prefill chunks."""
        la = self.num_lookahead_tokens
        pq, ps = out.shape.prefill_q, out.shape.prefill_start
        nd, ctx, nsamp, ntok_p, kvt, parallel = acc
        for r, n in items:
            c = r.num_computed_tokens
            ns = r.num_seqs
            if ns > 1:
                parallel = True
            else:
                kvt += c + n
            decoding = r.is_decoding
            if ns > 1 and n == ns and decoding:
                nd += ns  # ns decode sequences of context c + 1 each
                ctx += ns * (c + 1)
                nsamp += ns
            elif ns == 1 and decoding and (n == 1 or n == 1 + la):
                # decode (with ``la`` draft tokens to verify when speculating)
                nd += 1
                ctx += c + n
                nsamp += n
            else:
                if c + n == r.num_prompt_tokens + r.num_emitted:  # r.num_tokens, inlined
                    nsamp += ns  # the prompt's last chunk samples every sequence's token
                pq.append(n)
                ps.append(c)
                ntok_p += n
        return [nd, ctx, nsamp, ntok_p, kvt, parallel]

    def _set_shape(self, out: StepOutput, sched: dict, acc: list) -> bool:
        """Write the counts ``acc`` (:meth:`_count_shape`) into ``out``; returns whether
        parallel sampling is in the step."""
        la = self.num_lookahead_tokens
        shape = out.shape
        nd, ctx, nsamp, ntok_p, kvt, parallel = acc
        out.reqs = list(sched)
        out.ntoks = list(sched.values())
        running = self.running
        if parallel or len(sched) != len(running):  # sched's keys are running requests
            kvt = 0
            for r in running:
                kvt += (r.num_computed_tokens + sched.get(r, 0) if r.num_seqs == 1
                        else kv_tokens_held(r, sched.get(r, 0)))
        out.kv_tokens = kvt
        shape.num_decode = nd
        shape.decode_ctx_total = ctx
        shape.decode_q_per_seq = 1 + la if (la and nd) else 1
        shape.num_sampled = nsamp
        out.num_decode_seqs = out.num_decode_tokens = nd
        out.num_prefill_tokens = ntok_p
        out.num_prefill_seqs = len(shape.prefill_q)
        out.num_waiting = self.num_waiting
        return parallel

    @staticmethod
    def _veto(out: StepOutput, la: int, parallel: bool = False, cancels: int = 1) -> str:
        """The first feature of ``FAST_FORWARD_VETOES`` this step has ('' for none);
        ``cancels``: cancellations of running requests so far (0: none can be pending)."""
        if out.shape.prefill_q:
            return "prefill"
        if parallel:
            return "parallel_sampling"
        if la:
            return "lookahead"
        if out.preempted:
            return "preemption"
        if cancels and any(r.cancel_requested for r in out.reqs):
            return "cancel_pending"
        if out.swap_bytes:
            return "host_transfer"
        return ""

    def _admission_order(self):
        """Waiting requests in admission order (a snapshot when skipping is possible)."""
        if self.limits.tenant_max_seqs is None:
            while True:
                r = self._peek_waiting()
                if r is None:
                    return
                yield r
        else:
            yield from self.waiting_requests()

    def _preempt_for(self, r: ReqState, now: float, out: StepOutput, sched: dict) -> int:
        """Priority policy: preempt the least important running request if it is strictly
        less important than ``r``. Returns the budget it gave back (-1: nothing preempted)."""
        if not self.priority or not self.running:
            return -1
        victim = self._pick_victim()
        if victim.priority <= r.priority:
            return -1
        back = sched.pop(victim, 0)
        self._preempt(victim, now, out)
        return back

    def _admit_waiting(self, now: float, out: StepOutput, sched: dict, budget: int) -> int:
        if not len(self.queue):
            return budget  # nothing waits (most decode steps): no per-request counts needed
        cfg, lim, kv, running = self.cfg, self.limits, self.kv, self.running
        cap = lim.tenant_max_seqs
        counts: dict[str, int] = {}
        if cap is not None:
            for q in running:
                counts[q.spec.tenant] = counts.get(q.spec.tenant, 0) + 1
        extra = extra_seqs(running)
        for r in self._admission_order():
            if budget <= 0:
                break
            if cap is not None and counts.get(r.spec.tenant, 0) >= cap:
                continue  # tenant at its share: let other tenants' requests pass
            # sequences, not requests, fill max_num_seqs
            if (extra or r.num_seqs > 1) and running \
                    and extra_seqs(running) + len(running) + r.num_seqs > cfg.max_num_seqs:
                return budget
            while len(running) >= cfg.max_num_seqs:
                back = self._preempt_for(r, now, out, sched)
                if back < 0:
                    return budget
                budget += back
            swapped = r.swapped_blocks
            full = r.num_tokens if (lim.reserve_full_isl and running) else None
            while True:
                hits, computed = kv.cached_prefix(r)
                # blocks an offload tier holds past the GPU hits: loaded into new blocks, by a
                # parked request (asynchronous loads) or within this step (synchronous)
                where: list[int] = (tier_prefix(kv, r, len(hits)) if kv.offload is not None
                                    and not r.num_computed_tokens else [])
                park = bool(where) and not kv.offload.sync_loads
                if where and not park:
                    computed += len(where) * kv.block_size
                # parked: blocks for the whole sequence now, nothing computed this step
                n = r.num_tokens - computed
                if n > budget and not park:
                    if not cfg.enable_chunked_prefill and r.num_preemptions == 0:
                        return budget
                    n = budget
                if kv.allocate(r, computed + n, new_request=True, hit_blocks=hits,
                               full_sequence_tokens=full):
                    break
                back = self._preempt_for(r, now, out, sched)
                if back < 0:
                    return budget
                budget += back
            if cap is None:
                self._pop_waiting()
            else:
                self._remove_waiting(r)
                counts[r.spec.tenant] = counts.get(r.spec.tenant, 0) + 1
            if where:
                if park:
                    park_for_load(self, r, len(hits), where, now)
                    continue
                out.kv_load_s += load_in_step(self, r, len(hits), where)
            if hits or where:
                r.num_computed_tokens = computed
                if r.num_emitted == 0 and r.num_preemptions == 0:
                    r.num_cached_prompt_tokens = computed
                self.rec.prefix_hit_tokens += len(hits) * kv.block_size
            if swapped:
                out.add_swap(swapped * lim.swap_block_bytes)
                self.swap_used_blocks -= swapped
                r.swapped_blocks = 0
                self.num_swap_ins += 1
            if r.first_scheduled_time_s != r.first_scheduled_time_s:  # NaN: first time
                r.first_scheduled_time_s = now
            self.rec.transition(r, RUNNING, now)
            running.append(r)
            sched[r] = n
            budget -= n
            extra = extra or r.num_seqs > 1
        return budget

    def update(self, out: StepOutput, start: float, end: float) -> None:
        """Apply a finished iteration: advance counters, emit tokens, finish requests."""
        self._apply_step(out, start, end, None)

    def _apply_step(self, out: StepOutput, start: float, end: float, drafted) -> None:
        """Progress of every request of ``out``, emission through :func:`advance`, KV release.

        ``drafted`` (speculative decoding) maps a verified request to the tokens it emits;
        its computed tokens become ``num_tokens - 1`` after emission and its blocks beyond
        them (rejected drafts) are released.
        """
        kv = self.kv
        prefix = kv.enable_prefix_caching
        emitters, tokens, leaving = [], [], []
        for r, n in zip(out.reqs, out.ntoks):
            if r.status != RUNNING:
                continue
            ns = r.num_seqs
            if ns > 1 and n == ns and r.is_decoding:
                n = 1  # one token per sequence
            if r.cancel_requested:
                r.num_computed_tokens += n
                leaving.append(r)
                continue
            if drafted is not None:
                e = drafted.get(r)
                if e is not None:
                    r.num_computed_tokens = r.num_tokens + e - 1
                    emitters.append(r)
                    tokens.append(e)
                    continue
            r.num_computed_tokens += n
            if prefix:
                kv.cache_full_blocks(r)
            if r.num_computed_tokens == r.num_tokens:
                emitters.append(r)
                tokens.append(1)
        for r in leaving:  # leaves at the end of the step
            kv.free(r)
            self.rec.finish(r, end, CANCELLED, "cancelled")
        finished = advance(emitters, 1, (end,), start_s=start, recorder=self.rec,
                           max_model_len=self.limits.max_model_len,
                           tokens=tokens if drafted else None)
        for r in finished:
            kv.free(r)
        if drafted:
            for r in drafted:
                if r.status == RUNNING:
                    kv.trim(r, r.num_computed_tokens)  # roll back the rejected drafts' slots
                    if prefix:
                        kv.cache_full_blocks(r)
        if leaving or finished:
            self.running = [r for r in self.running if r.status == RUNNING]

    def _leave_cancelled_run(self, reqs: list, k: int, start: float, ends) -> list:
        """The cancelled requests of a ``k``-step decode run: ``k - 1`` tokens, then they
        leave at the last step's end with their blocks freed; returns the others."""
        gone = [r for r in reqs if r.cancel_requested]
        for r in gone:
            r.num_computed_tokens += k - 1
        # a run ends at its first finish (plan_decode_run), so none finishes in k - 1 steps
        advance(gone, k - 1, ends, start_s=start, recorder=self.rec,
                max_model_len=self.limits.max_model_len)
        end = float(ends[k - 1])
        for r in gone:
            r.num_computed_tokens += 1
            self.kv.free(r)
            self.rec.finish(r, end, CANCELLED, "cancelled")
        self.running = [r for r in self.running if r.status == RUNNING]
        return [r for r in reqs if not r.cancel_requested]

    # ------------------------------------------------------------------ fast-forward
    def _run_arrays(self, out: StepOutput):
        """Computed tokens and blocks held per request of ``out`` before its first step
        (read once per decode run: planning and the per-step arrays share them)."""
        if out.run_arrays is None:
            reqs = out.reqs
            out.run_arrays = (
                np.fromiter((r.num_computed_tokens for r in reqs), dtype=np.int64,
                            count=len(reqs)),
                self.kv.blocks_held(reqs))
        return out.run_arrays

    def plan_jump(self, out: StepOutput) -> Jump | None:
        """A fast-forward of ``out`` and the identical decode steps after it, or None when
        a feature vetoes it or only one step can run (step it with :meth:`update`)."""
        k = self.plan_decode_run(out)
        if k < 2:
            return None
        ctx, used = self.decode_run_arrays(out, k)
        return Jump(out, k, ctx, used)

    def commit_jump(self, jump: Jump, upto_step: int) -> None:
        """Apply the first ``upto_step`` steps of ``jump`` (the engine priced it)."""
        self.commit_decode_run(jump.step, upto_step, jump.start_s, jump.step_end_times_s)

    def plan_decode_run(self, out: StepOutput) -> int:
        """How many identical-shape decode steps (this one included) can run back to back.

        Limits: the first request to finish (it finishes at the last step), the first step
        whose new KV blocks the pool cannot supply, and ``max_model_len``.
        """
        if out.veto:
            return 1
        reqs = out.reqs
        left = -1      # the fewest output tokens any request has left
        computed = 0   # the most tokens any request has computed
        for r in reqs:  # one pass, no lists (a batch is tens to hundreds of requests)
            n = r.num_output_tokens - r.num_emitted
            if left < 0 or n < left:
                left = n
            if r.num_computed_tokens > computed:  # noqa: PLR1730 - a C compare, compiled
                computed = r.num_computed_tokens
        # num_tokens of each request is computed + 1 (a decode step)
        k_len = self.limits.max_model_len - 1 - computed
        k_max = max(1, min(left, k_len))
        if k_max <= 1:
            return 1
        k, out.run_blocks = self.kv.plan_decode_run_blocks(reqs, k_max)
        return k

    def decode_run_arrays(self, out: StepOutput, k: int):
        """Per-step total context and KV blocks used for ``k`` decode steps, lazily (a run is
        cut after tens of its planned steps: the engine reads those it prices).

        Returns
        -------
        ctx_totals : range (k,)
            Attended tokens summed over the batch at each step.
        blocks_used : RunBlocks, or ndarray of int64 (k,)
            Blocks held in the pool during each step (:class:`~simulator.kv.run_blocks.RunBlocks`
            from :meth:`plan_decode_run`, at this state; an array when not planned through it).
        """
        B = len(out.reqs)
        # the first step's decode context, counted by the scheduler: sum(computed + 1), every
        # request of an unvetoed step being a one-token decode
        c0 = out.shape.decode_ctx_total
        ctx_totals = range(c0, c0 + k * B, B)  # c0 + j * B
        used = out.run_blocks  # from plan_decode_run, at this very state
        if used is None or used.k_max < k:
            c, held = self._run_arrays(out)
            return ctx_totals, self.kv.decode_run_blocks_used(c, held, k)
        return ctx_totals, used

    def commit_decode_run(self, out: StepOutput, k: int, start: float, ends) -> None:
        """Apply ``k`` consecutive decode steps of ``out`` (ends: their end times).

        A request whose client cancelled during the run (``cancel_requested``, set by
        :meth:`cancel` while the run was in flight; the engine cut the run at the end of the
        step in progress) emits the first ``k - 1`` steps' tokens and leaves at the end of step
        ``k`` without its token, as stepping one iteration at a time does."""
        if k == 1:
            self.update(out, start, float(ends[0]))
            return
        reqs = out.reqs
        if self.num_cancels_requested and any(r.cancel_requested for r in reqs):
            reqs = self._leave_cancelled_run(reqs, k, start, ends)
        # every request advances and takes its blocks before any finishes (as stepping does:
        # frees happen at the end of the last step, after that step's allocations)
        self.kv.grow_decode_run(reqs, k)
        if self.kv.decode_blocks_keyed:  # session answers / offload: register their blocks
            self.kv.cache_decode_run(reqs, k)
        finished = advance(reqs, k, ends, start_s=start, recorder=self.rec,
                           max_model_len=self.limits.max_model_len)
        if finished:
            for r in finished:
                self.kv.free(r)
            self.running = [r for r in self.running if r.status == RUNNING]


register_pickling(StepOutput, ContinuousScheduler)
