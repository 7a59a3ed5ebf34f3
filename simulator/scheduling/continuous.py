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

The scheduler is a plain object (no SimPy): the replica process asks it for a step, costs
the step with the performance model, advances the clock and calls :meth:`update`.

Fast-forward: a pure-decode step after which nothing can change (no request finishes, no
waiting request becomes admissible, no block shortage) repeats identically but for the
context lengths; :meth:`plan_decode_run` returns how many such steps can run back to back
and :meth:`commit_decode_run` applies ``k`` of them at once (numpy, O(batch) per run), with
results identical to stepping one by one.

size: pending its owner's split (issue 14 part 4; owner: wave2-hotpath): schedule() 82 lines.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..perf.roofline import StepShape
from .state import CANCELLED, COMPLETED, REJECTED, RUNNING, WAITING, ReqState


@dataclass
class SchedulerConfig:
    """Scheduler limits (vLLM names).

    Attributes
    ----------
    max_num_seqs : int
        Sequences in one iteration.
    max_num_batched_tokens : int
        Tokens (prefill + decode) in one iteration.
    enable_chunked_prefill : bool
        Split prompts across iterations.
    max_model_len : int
        Longest sequence (prompt + output) in tokens.
    policy : {"fcfs", "priority"}
        Queue order; ``priority`` orders by (priority, arrival) and preempts the least
        important running request first.
    preemption_mode : {"recompute", "swap"}
    step_policy : {"decode_first", "prefill_first"}
        ``decode_first``: vLLM V1 mixed steps (running requests first, waiting prompts fill
        the rest of the token budget); ``prefill_first``: vLLM V0 without chunked prefill
        and Vidur's ``vllm`` scheduler: a step admits waiting prompts and, when it admitted
        any, runs them alone (no decodes); otherwise it decodes the running requests.
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enable_chunked_prefill: bool = True
    max_model_len: int = 131072
    policy: str = "fcfs"
    preemption_mode: str = "recompute"
    #: host swap space in KV blocks (``preemption_mode: swap``)
    swap_space_blocks: int = 0
    #: bytes of one KV block on one GPU (swap transfer size per GPU)
    swap_block_bytes: float = 0.0
    #: host link (PCIe) bandwidth per direction, bytes/s
    host_link_bandwidth_bytes_per_s: float = 32e9
    #: max running sequences per tenant (``admission.tenant_max_share x max_num_seqs``)
    tenant_max_seqs: int | None = None
    #: admit a waiting request only when its whole current sequence fits in the free blocks
    #: (vLLM >= 0.10 ``scheduler_reserve_full_isl``; from the engine profile); not enforced
    #: while nothing runs (so a request larger than the free pool cannot wedge the replica)
    reserve_full_isl: bool = False
    step_policy: str = "decode_first"


class StepOutput:
    """One scheduled iteration."""

    __slots__ = (
        "extra_time_s",
        "jumpable",
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
        "shape",
        "swap_bytes",
    )

    def __init__(self):
        self.reqs: list[ReqState] = []
        self.ntoks: list[int] = []
        self.preempted: list[ReqState] = []
        self.shape = StepShape()
        self.num_prefill_tokens = 0
        self.num_decode_tokens = 0
        self.num_prefill_seqs = 0
        self.num_decode_seqs = 0
        self.num_waiting = 0
        self.jumpable = False
        self.swap_bytes = 0.0
        self.kv_tokens = 0  # tokens held in KV after the step (sum over running requests)
        self.num_padding_seqs = 0  # slots doing no useful work (static batching)
        self.extra_time_s = 0.0  # added to the step time (swap transfers, drafting)
        self.run_arrays = None  # (computed tokens, blocks held) per request, for a decode run

    @property
    def batch_size(self) -> int:
        return len(self.reqs)


class ContinuousScheduler:
    """Iteration-level scheduler for one replica.

    Parameters
    ----------
    config : SchedulerConfig
    kv : KVCacheManager
    recorder : RunRecorder
        Collects finished requests, ITL samples and transitions.
    replica_id : int
    """

    def __init__(self, config: SchedulerConfig, kv, recorder, replica_id: int = 0):
        if config.policy not in ("fcfs", "priority"):
            raise ValueError(f"scheduler.policy must be fcfs or priority, got {config.policy!r}")
        self.cfg = config
        self.kv = kv
        self.rec = recorder
        self.replica_id = replica_id
        self.priority = config.policy == "priority"
        self.waiting: deque[ReqState] = deque()
        self._heap: list = []  # priority policy: (priority, arrival, id, req)
        self.running: list[ReqState] = []
        self.num_preemptions = 0
        #: draft tokens verified per decode step (speculative decoding); 0 = plain decoding.
        #: A decode then schedules ``1 + num_lookahead_tokens`` tokens and allocates KV slots
        #: for them (rolled back on rejection by the speculative scheduler's ``update``).
        self.num_lookahead_tokens = 0
        self.swap_used_blocks = 0
        self.num_swap_outs = 0
        self.num_swap_ins = 0

    # ------------------------------------------------------------------ queue helpers
    @property
    def num_waiting(self) -> int:
        return len(self._heap) if self.priority else len(self.waiting)

    def has_work(self) -> bool:
        return bool(self.running) or self.num_waiting > 0

    def num_outstanding(self) -> int:
        """Requests routed here and not finished (what a real router can count)."""
        return len(self.running) + self.num_waiting

    def _peek_waiting(self):
        if self.priority:
            return self._heap[0][3] if self._heap else None
        return self.waiting[0] if self.waiting else None

    def _pop_waiting(self):
        if self.priority:
            return heapq.heappop(self._heap)[3]
        return self.waiting.popleft()

    def _push_waiting(self, r: ReqState, front: bool = False):
        if self.priority:
            heapq.heappush(self._heap, (r.priority, r.arrival_time_s, r.request_id, r))
        elif front:
            self.waiting.appendleft(r)
        else:
            self.waiting.append(r)

    def _remove_waiting(self, r: ReqState) -> bool:
        if self.priority:
            for i, item in enumerate(self._heap):
                if item[3] is r:
                    self._heap[i] = self._heap[-1]
                    self._heap.pop()
                    heapq.heapify(self._heap)
                    return True
            return False
        try:
            self.waiting.remove(r)
            return True
        except ValueError:
            return False

    def waiting_requests(self) -> list[ReqState]:
        if self.priority:
            return [it[3] for it in sorted(self._heap, key=lambda x: x[:3])]
        return list(self.waiting)

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

    def never_fits_reason(self, r: ReqState) -> str:
        """Why ``r`` can never run on this replica ('' if it can). Reads declared data only.

        ``prompt_too_long``: the prompt leaves no room for one output token within
        ``max_model_len``; ``max_tokens_too_large``: prompt + declared ``max_tokens`` exceeds
        ``max_model_len`` (vLLM's OpenAI server rejects such a request at arrival: "'max_tokens'
        ... is too large ... maximum context length"); ``kv_capacity``: it cannot fit an empty
        KV pool; ``prompt_exceeds_max_num_batched_tokens``: without chunked prefill the
        prompt never fits one iteration.
        """
        cfg = self.cfg
        if r.num_prompt_tokens + 1 > cfg.max_model_len:
            return "prompt_too_long"
        mt = r.spec.max_tokens
        if mt is not None and r.num_prompt_tokens + mt > cfg.max_model_len:
            return "max_tokens_too_large"
        if not self.kv.can_ever_fit(r):
            return "kv_capacity"
        if not cfg.enable_chunked_prefill and r.num_prompt_tokens > cfg.max_num_batched_tokens:
            return "prompt_exceeds_max_num_batched_tokens"
        return ""

    def cancel(self, r: ReqState, now: float) -> None:
        """Client cancellation (only requests without a first token are cancelled)."""
        if r.is_finished or r.num_emitted > 0:
            return
        if r.status == WAITING:
            self._remove_waiting(r)
            self.kv.free(r)
            self.rec.finish(r, now, CANCELLED, "cancelled")
        elif r.status == RUNNING:
            r.cancel_requested = True  # applied at the end of the current step
            r.finish_time_s = now

    # ------------------------------------------------------------------ preemption
    def _preempt(self, victim: ReqState, now: float, out: StepOutput) -> None:
        self.running.remove(victim)
        cfg = self.cfg
        nb = len(victim.blocks)
        if (cfg.preemption_mode == "swap" and victim.num_computed_tokens > 0 and nb
                and self.swap_used_blocks + nb <= cfg.swap_space_blocks
                and self.kv.allocation == "paged"):
            # swap out: KV copied to host memory over the host link; progress kept
            victim.swapped_blocks = nb
            self.swap_used_blocks += nb
            out.extra_time_s += nb * cfg.swap_block_bytes / cfg.host_link_bandwidth_bytes_per_s
            out.swap_bytes += nb * cfg.swap_block_bytes
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
        cfg, kv = self.cfg, self.kv
        out = StepOutput()
        budget = cfg.max_num_batched_tokens
        sched: dict[ReqState, int] = {}
        running = self.running
        bs = kv.block_size
        la = self.num_lookahead_tokens
        prefill_only = False
        if cfg.step_policy == "prefill_first" and self.num_waiting:  # V0: prefills alone
            budget = self._admit_waiting(now, out, sched, budget)
            prefill_only = bool(sched)
        i = len(running) if prefill_only else 0  # a prefill-only step skips the decodes
        while i < len(running) and budget > 0:
            r = running[i]
            n = r.num_tokens - r.num_computed_tokens
            if la and n == 1 and r.num_emitted > 0 and budget >= 1 + la:
                n += la
            n = min(n, budget)
            while (r.num_computed_tokens + n > len(r.blocks) * bs
                   and not kv.allocate(r, r.num_computed_tokens + n)):
                victim = self._pick_victim()
                if victim in sched:
                    budget += sched.pop(victim)
                if victim is r and len(running) == 1:
                    # alone and still does not fit: it never will
                    running.remove(r)
                    kv.free(r)
                    self.rec.finish(r, now, REJECTED, "kv_capacity")
                    r = None
                    break
                idx = running.index(victim)
                self._preempt(victim, now, out)
                if idx < i:
                    i -= 1
                if victim is r:
                    r = None
                    break
            if r is None:
                continue
            sched[r] = n
            budget -= n
            i += 1
        # waiting requests
        blocked = True  # admission stopped for a reason that persists through decode steps
        if prefill_only:
            pass  # admitted above
        elif not out.preempted:
            budget = self._admit_waiting(now, out, sched, budget)
        else:
            blocked = False
        if not sched:
            return None
        # shape of the step
        shape = out.shape
        pq, ps = shape.prefill_q, shape.prefill_start
        nd = ctx = nsamp = ntok_p = 0
        for r, n in sched.items():
            c = r.num_computed_tokens
            if r.num_emitted > 0 and c == r.num_tokens - 1 and (n == 1 or n == 1 + la):
                # decode (with ``la`` draft tokens to verify when speculating)
                nd += 1
                ctx += c + n
                nsamp += n
            else:
                if c + n == r.num_tokens:
                    nsamp += 1
                pq.append(n)
                ps.append(c)
                ntok_p += n
            out.reqs.append(r)
            out.ntoks.append(n)
        kvt = 0
        for r in running:
            kvt += r.num_computed_tokens + sched.get(r, 0)
        out.kv_tokens = kvt
        shape.num_decode = nd
        shape.decode_ctx_total = ctx
        shape.decode_q_per_seq = 1 + la if (la and nd) else 1
        shape.num_sampled = nsamp
        out.num_decode_seqs = out.num_decode_tokens = nd
        out.num_prefill_tokens = ntok_p
        out.num_prefill_seqs = len(pq)
        out.num_waiting = self.num_waiting
        out.jumpable = (blocked and not pq and not la and not out.preempted
                        and not any(r.cancel_requested for r in out.reqs))
        return out

    def _admission_order(self):
        """Waiting requests in admission order (a snapshot when skipping is possible)."""
        if self.cfg.tenant_max_seqs is None:
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
        cfg, kv, running = self.cfg, self.kv, self.running
        cap = cfg.tenant_max_seqs
        counts: dict[str, int] = {}
        if cap is not None:
            for q in running:
                counts[q.spec.tenant] = counts.get(q.spec.tenant, 0) + 1
        for r in self._admission_order():
            if budget <= 0:
                break
            if cap is not None and counts.get(r.spec.tenant, 0) >= cap:
                continue  # tenant at its share: let other tenants' requests pass
            while len(running) >= cfg.max_num_seqs:
                back = self._preempt_for(r, now, out, sched)
                if back < 0:
                    return budget
                budget += back
            swapped = r.swapped_blocks
            hits = kv.get_computed_blocks(r) if r.num_computed_tokens == 0 else []
            computed = len(hits) * kv.block_size if hits else r.num_computed_tokens
            n = r.num_tokens - computed
            if n > budget:
                if not cfg.enable_chunked_prefill and r.num_preemptions == 0:
                    break
                n = budget
            full = r.num_tokens if (cfg.reserve_full_isl and running) else None
            while not kv.allocate(r, computed + n, new_request=True, hit_blocks=hits,
                                  full_sequence_tokens=full):
                back = self._preempt_for(r, now, out, sched)
                if back < 0:
                    return budget
                budget += back
                hits = kv.get_computed_blocks(r) if r.num_computed_tokens == 0 else []
            if cap is None:
                self._pop_waiting()
            else:
                self._remove_waiting(r)
                counts[r.spec.tenant] = counts.get(r.spec.tenant, 0) + 1
            if hits:
                r.num_computed_tokens = computed
                if r.num_emitted == 0 and r.num_preemptions == 0:
                    r.num_cached_prompt_tokens = computed
                self.rec.prefix_hit_tokens += computed
            if swapped:
                out.extra_time_s += swapped * cfg.swap_block_bytes / cfg.host_link_bandwidth_bytes_per_s
                out.swap_bytes += swapped * cfg.swap_block_bytes
                self.swap_used_blocks -= swapped
                r.swapped_blocks = 0
                self.num_swap_ins += 1
            if r.first_scheduled_time_s != r.first_scheduled_time_s:  # NaN: first time
                r.first_scheduled_time_s = now
            self.rec.transition(r, RUNNING, now)
            running.append(r)
            sched[r] = n
            budget -= n
        return budget

    def update(self, out: StepOutput, start: float, end: float) -> None:
        """Apply a finished iteration: advance counters, emit tokens, finish requests."""
        kv, rec = self.kv, self.rec
        max_len = self.cfg.max_model_len
        prefix = kv.enable_prefix_caching
        done = False
        same_gap = 0
        for r, n in zip(out.reqs, out.ntoks):
            if r.status != RUNNING:
                continue
            r.num_computed_tokens += n
            if r.cancel_requested:
                self.running.remove(r)
                kv.free(r)
                rec.finish(r, end, CANCELLED, "cancelled")  # leaves at the end of the step
                continue
            if prefix:
                kv.cache_full_blocks(r)
            if r.num_computed_tokens == r.num_tokens:
                if r.num_emitted == 0:
                    r.first_token_time_s = end
                elif r.last_token_time_s == start:
                    same_gap += 1
                else:
                    rec.add_itl(end - r.last_token_time_s, 1)
                r.num_emitted += 1
                r.last_token_time_s = end
                if r.num_emitted >= r.num_output_tokens:
                    kv.free(r)
                    rec.finish(r, end, COMPLETED, "")
                    done = True
                elif r.num_tokens >= max_len:
                    kv.free(r)
                    rec.finish(r, end, REJECTED, "max_model_len_reached")
                    done = True
        if same_gap:
            rec.add_itl(end - start, same_gap)
        if done or any(r.status != RUNNING for r in self.running):
            self.running = [r for r in self.running if r.status == RUNNING]

    # ------------------------------------------------------------------ fast-forward
    def _run_arrays(self, out: StepOutput):
        """Computed tokens and blocks held per request of ``out`` before its first step
        (read once per decode run: planning and the per-step arrays share them)."""
        if out.run_arrays is None:
            reqs = out.reqs
            n = len(reqs)
            out.run_arrays = (
                np.fromiter((r.num_computed_tokens for r in reqs), dtype=np.int64, count=n),
                np.fromiter((len(r.blocks) for r in reqs), dtype=np.int64, count=n))
        return out.run_arrays

    def plan_decode_run(self, out: StepOutput) -> int:
        """How many identical-shape decode steps (this one included) can run back to back.

        Limits: the first request to finish (it finishes at the last step), the first step
        whose new KV blocks the pool cannot supply, and ``max_model_len``.
        """
        if not out.jumpable or out.extra_time_s:
            return 1
        reqs = out.reqs
        bs = self.kv.block_size
        c, held = self._run_arrays(out)
        remaining = np.fromiter((r.num_output_tokens - r.num_emitted for r in reqs),
                                dtype=np.int64, count=len(reqs))
        k_max = int(remaining.min())
        ntoks = c + 1  # num_tokens of each request (decode: computed = tokens - 1)
        k_len = int(self.cfg.max_model_len - ntoks.max())
        k_max = max(1, min(k_max, k_len))
        if k_max <= 1:
            return 1
        if self.kv.allocation == "contiguous":
            return k_max
        free = self.kv.num_free_blocks

        def extra(k: int) -> int:
            return int(np.maximum(0, -(-(c + k) // bs) - held).sum())

        if extra(k_max) <= free:
            return k_max
        lo, hi = 1, k_max  # extra(lo) <= free (step 1 already allocated), extra(hi) > free
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if extra(mid) <= free:
                lo = mid
            else:
                hi = mid
        return lo

    def decode_run_arrays(self, out: StepOutput, k: int):
        """Per-step total context and KV blocks used for ``k`` decode steps.

        Returns
        -------
        ctx_totals : ndarray (k,)
            Attended tokens summed over the batch at each step.
        blocks_used : ndarray (k,)
            Blocks held in the pool during each step.
        """
        reqs = out.reqs
        bs = self.kv.block_size
        c, held = self._run_arrays(out)
        j = np.arange(k, dtype=np.int64)
        ctx_totals = int(c.sum() + len(reqs)) + j * len(reqs)
        used0 = self.kv.num_used_blocks
        if self.kv.allocation == "contiguous" or k == 1:
            return ctx_totals, np.full(k, used0, dtype=np.int64)
        need = -(-(c[None, :] + j[:, None] + 1) // bs) - held[None, :]
        blocks_used = used0 + np.maximum(need, 0).sum(axis=1)
        return ctx_totals, blocks_used

    def commit_decode_run(self, out: StepOutput, k: int, start: float, ends: np.ndarray) -> None:
        """Apply ``k`` consecutive decode steps of ``out`` (ends: their end times)."""
        if k == 1:
            self.update(out, start, float(ends[0]))
            return
        kv, rec = self.kv, self.rec
        end = float(ends[k - 1])
        # ITL: first gap per request, then k-1 step durations for every request
        first_end = float(ends[0])
        paged = kv.allocation == "paged"
        bs = kv.block_size
        pool = kv.pool
        same = 0
        finished = False
        for r in out.reqs:
            if r.last_token_time_s == start:
                same += 1
            else:
                rec.add_itl(first_end - r.last_token_time_s, 1)
            r.num_computed_tokens += k
            r.num_emitted += k
            r.last_token_time_s = end
            if paged:
                need = -(-r.num_computed_tokens // bs) - len(r.blocks)
                if need > 0:
                    r.blocks.extend(pool.allocate(need))
        # finish only after every request took its blocks (as stepping does: frees happen
        # at the end of the last step, after that step's allocations)
        for r in out.reqs:
            if r.num_emitted >= r.num_output_tokens:
                kv.free(r)
                rec.finish(r, end, COMPLETED, "")
                finished = True
            elif r.num_tokens >= self.cfg.max_model_len:
                kv.free(r)
                rec.finish(r, end, REJECTED, "max_model_len_reached")
                finished = True
        if same:
            rec.add_itl(first_end - start, same)
        gaps = np.diff(ends[:k])
        rec.add_itl_array(gaps, len(out.reqs))
        if finished:
            self.running = [r for r in self.running if r.status == RUNNING]
