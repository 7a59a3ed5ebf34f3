"""A real iteration-level continuous-batching engine, for measuring the simulator against.

The loop is the simulator's own scheduling policy executed on real tensors: each iteration asks
:class:`simulator.scheduling.continuous.ContinuousScheduler` (running requests first, then
waiting ones within ``max_num_seqs`` and ``max_num_batched_tokens``, chunked prefill as
configured, recompute on preemption) which requests run and how many tokens each computes,
executes that batch on :class:`calibration.tiny_model.TinyLlama` (per-request KV cache, one
SDPA call per sequence) and reports the step back with its wall-clock end time. Reusing the
scheduler object (a plain class, no SimPy) makes the batch compositions of the real run and of
a simulation identical by construction whenever the step times agree, so a comparison isolates
the step-time model.

Times are wall-clock seconds from the start of the run (``time.perf_counter``); arrivals are
released in real time (the idle loop polls the clock). A step's end is taken
after the sampled tokens reach the host (``.tolist()`` synchronises a CUDA device) and the
scheduler has been updated; the next step starts right then.
"""
from __future__ import annotations

import gc
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.base.request import RequestSpec
from simulator.kv import KVCacheManager
from simulator.metrics.records import RunRecorder
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.continuous import ContinuousScheduler
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.state import ReqState

from .kernels import SeqSlice

STEP_COLUMNS = ["step_index", "start_time_s", "end_time_s", "step_time_s", "forward_time_s",
                "num_seqs", "num_tokens", "num_prefill_seqs", "num_prefill_tokens",
                "num_decode_seqs", "decode_ctx_total", "num_sampled", "prefill_q",
                "prefill_start", "composition"]


@dataclass
class EngineRun:
    """What one real run measured.

    Attributes
    ----------
    steps : DataFrame
        One row per iteration (``STEP_COLUMNS``); ``prefill_q``/``prefill_start`` are
        space-separated lists, ``composition`` is ``id:tokens`` pairs.
    requests : DataFrame
        The simulator's request columns (``simulator.metrics.records.REQUEST_COLUMNS``).
    wall_s : float
        Duration of the run.
    """

    steps: pd.DataFrame
    requests: pd.DataFrame
    wall_s: float
    meta: dict = field(default_factory=dict)


def prompt_tokens(request_id: int, n: int, vocab: int, seed: int = 0) -> list[int]:
    """Deterministic random prompt token ids of one request."""
    rng = np.random.default_rng([seed, request_id])
    return rng.integers(0, vocab, size=n).tolist()


class RealEngine:
    """Continuous batching on a real model (see module docstring).

    Parameters
    ----------
    model : TinyLlama
    sched : SchedulerConfig
        The scheduler section the simulated scenario uses.
    limits : SchedulerLimits
        Its derived limits (``max_model_len`` bounds every request and the block pool).
    block_size : int
        KV block size of the (accounting-only) block pool the scheduler consults.
    num_gpu_blocks : int
        Pool size; large, so that memory never limits the batch (the caches themselves are
        per-request tensors sized to prompt + output).
    seed : int
        Prompt token seed.
    """

    def __init__(self, model, sched: SchedulerConfig, limits: SchedulerLimits,
                 block_size: int = 16, num_gpu_blocks: int = 1_000_000, seed: int = 0):
        self.model = model
        self.cfg = sched
        self.limits = limits
        self.block_size = block_size
        self.num_gpu_blocks = num_gpu_blocks
        self.seed = seed
        self.torch = model.torch

    def run(self, specs: list[RequestSpec], realtime: bool = True, probe=None) -> EngineRun:
        """Serve ``specs`` (sorted by arrival) to completion and return the measurements.

        With ``realtime=False`` every request is released at time 0 (calibration runs).
        ``probe`` (a :class:`calibration.timing.Probe`) records per-operator times of every
        step in ``EngineRun.meta["op_times"]`` (diagnostics; it adds a little overhead).
        """
        model = self.model
        kv = KVCacheManager(self.num_gpu_blocks, self.block_size, enable_prefix_caching=False,
                            allocation="paged", max_model_len=self.limits.max_model_len,
                            watermark=0.0)
        rec = RunRecorder()
        sch = ContinuousScheduler(self.cfg, self.limits, kv, rec, 0)
        pending = deque(sorted(specs, key=lambda s: (s.arrival_time_s, s.request_id)))
        toks: dict[int, list[int]] = {}
        caches: dict[int, list] = {}
        rows: list[tuple] = []
        op_times: list[dict] = []
        step = 0
        gc_was = gc.isenabled()
        gc.disable()
        t0 = time.perf_counter()
        clock = (lambda: time.perf_counter() - t0)
        try:
            t_prev = None
            while pending or sch.has_work():
                now = clock()
                while pending and (not realtime or pending[0].arrival_time_s <= now):
                    spec = pending.popleft()
                    r = ReqState(spec)
                    rec.all_requests.append(r)
                    sch.add_request(r, now)
                if not sch.has_work():
                    if pending:
                        self._wait_until(pending[0].arrival_time_s, clock)
                    t_prev = None
                    continue
                start = now if t_prev is None else t_prev
                out = sch.schedule(now)
                if out is None:
                    if not pending:
                        raise RuntimeError("real engine: work remains but nothing can be scheduled")
                    self._wait_until(pending[0].arrival_time_s, clock)
                    t_prev = None
                    continue
                tokens_t, pos_t, groups, decodes, rows_t, comp = self._inputs(out, toks, caches)
                f0 = clock()
                new = model.forward(tokens_t, pos_t, groups, decodes, rows_t, probe)
                fwd_end = clock()
                if probe is not None:
                    op_times.append(probe.collect())
                _append_emitted(out, new, toks)
                sch.update(out, start, fwd_end)
                for r in out.reqs:
                    if r.is_finished:
                        caches.pop(r.request_id, None)
                end = clock()
                rows.append(_step_row(step, start, end, fwd_end - f0, out, comp))
                step += 1
                t_prev = end
        finally:
            if gc_was:
                gc.enable()
        wall = clock()
        steps = pd.DataFrame.from_records(rows, columns=STEP_COLUMNS)
        return EngineRun(steps, rec.requests_frame(), wall,
                         {"num_preemptions": sch.num_preemptions, "op_times": op_times})

    def _inputs(self, out, toks: dict, caches: dict) -> tuple:
        """One step's model inputs: token ids, positions, prefill groups, decode slices and
        the rows to sample, plus its composition (``id:tokens`` strings). A request met for
        the first time gets its prompt tokens and its KV cache here."""
        torch, model = self.torch, self.model
        vocab, dev = model.cfg.vocab_size, model.device
        tok_ids: list[int] = []
        pos: list[int] = []
        prefill_groups: list[list[SeqSlice]] = []
        decodes: list[SeqSlice] = []
        sample_rows: list[int] = []
        comp = []
        off = 0
        for r, n in zip(out.reqs, out.ntoks):
            rid = r.request_id
            seq = toks.get(rid)
            if seq is None:
                seq = prompt_tokens(rid, r.num_prompt_tokens, vocab, self.seed)
                toks[rid] = seq
            cache = caches.get(rid)
            if cache is None:
                cache = model.new_cache(r.num_prompt_tokens + r.num_output_tokens + 1)
                caches[rid] = cache
            c = r.num_computed_tokens
            tok_ids.extend(seq[c:c + n])
            pos.extend(range(c, c + n))
            sl = SeqSlice(off, n, c, cache)
            emits = c + n == r.num_tokens
            if n == 1 and r.is_decoding:
                decodes.append(sl)
            else:
                prefill_groups.append([sl])
            if emits:
                sample_rows.append(off + n - 1)
            comp.append(f"{rid}:{n}")
            off += n
        tokens_t = torch.tensor(tok_ids, dtype=torch.long, device=dev)
        pos_t = torch.tensor(pos, dtype=torch.long, device=dev)
        rows_t = torch.tensor(sample_rows, dtype=torch.long, device=dev)
        return tokens_t, pos_t, prefill_groups, decodes, rows_t, comp

    @staticmethod
    def _wait_until(t: float, clock) -> None:
        """Poll the clock until ``t`` (a busy loop, as a serving engine's polling loop).

        Sleeping would let the core idle; the first step after a wake-up then runs up to
        ~40% slower on a CPU (caches, clocks), an effect the step-time model does not have.
        Gaps longer than 0.5 s sleep for all but their last 0.2 s.
        """
        dt = t - clock()
        if dt > 0.5:
            time.sleep(dt - 0.2)
        while clock() < t:
            pass


def _append_emitted(out, new: list, toks: dict) -> None:
    """Append the tokens sampled in a step (``new``, in batch order) to the requests that
    emitted one (those whose step reaches their last known token)."""
    j = 0
    for r, n in zip(out.reqs, out.ntoks):
        if r.num_computed_tokens + n == r.num_tokens:
            toks[r.request_id].append(int(new[j]) if j < len(new) else 0)
            j += 1


def _step_row(step: int, start: float, end: float, forward_s: float, out, comp: list) -> tuple:
    """One row of ``EngineRun.steps`` (:data:`STEP_COLUMNS`)."""
    sh = out.shape
    return (step, start, end, end - start, forward_s, out.batch_size,
            sh.num_tokens, len(sh.prefill_q), int(sum(sh.prefill_q)),
            sh.num_decode, sh.decode_ctx_total, sh.num_sampled,
            " ".join(map(str, sh.prefill_q)),
            " ".join(map(str, sh.prefill_start)), " ".join(comp))


def steps_to_shapes(steps: pd.DataFrame):
    """The :class:`~simulator.perf.step_shape.StepShape` of every recorded step."""
    from simulator.perf.step_shape import StepShape
    out = []
    for q, s, nd, ctx, ns in zip(steps["prefill_q"], steps["prefill_start"],
                                 steps["num_decode_seqs"], steps["decode_ctx_total"],
                                 steps["num_sampled"]):
        pq = [int(v) for v in str(q).split()] if isinstance(q, str) and q.strip() else []
        ps = [int(v) for v in str(s).split()] if isinstance(s, str) and s.strip() else []
        out.append(StepShape(prefill_q=pq, prefill_start=ps, num_decode=int(nd),
                             decode_ctx_total=int(ctx), num_sampled=int(ns)))
    return out
