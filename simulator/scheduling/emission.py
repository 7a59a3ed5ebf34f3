"""Token emission, and the fast-forward interface every scheduler shares.

:func:`advance` is the one routine that emits tokens: it moves ``num_emitted``, stamps the
first token, records inter-token latency (ITL) and finishes requests that reached their
output length or ``max_model_len``. Stepping one iteration is its ``k_steps == 1`` case; a
fast-forwarded decode run (:class:`Jump`) is its ``k_steps > 1`` case, with results equal to
``k`` single steps (DESIGN.md glossary: one inter-token gap per request per step, whatever
the step emits).

Fast-forward: a pure-decode step after which nothing can change but the context lengths
repeats identically, so a scheduler may plan a :class:`Jump` of ``k`` such steps
(``plan_jump``) and commit its first ``upto_step`` of them (``commit_jump``) when an arrival
cuts it. A step that has any feature of :data:`FAST_FORWARD_VETOES` is stepped one at a
time; a new feature that makes consecutive steps differ must add its name there and set
``StepOutput.veto``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.base.compiled_core import register_pickling
from simulator.kv.run_blocks import RunBlocks
from simulator.scheduling.state import COMPLETED, REJECTED, ReqState

#: Step features that veto a fast-forward jump (``StepOutput.veto`` names the first found):
#:
#: - ``prefill``: the step computes prompt tokens (its shape changes next step);
#: - ``lookahead``: speculative decoding (each step's emission is random);
#: - ``preemption``: a request was preempted (the waiting queue may admit next step);
#: - ``cancel_pending``: a request leaves at the end of the step;
#: - ``host_transfer``: the step swaps KV in or out (extra time; not repeated);
#: - ``static_prefill``: the prefill of a static batch;
#: - ``parallel_sampling``: a request with ``n > 1`` sequences (the jump's block arithmetic
#:   assumes one sequence per request);
#: - ``speculation_paused``: a degrade policy paused speculation (the speculative scheduler's
#:   counters need every step).
FAST_FORWARD_VETOES = ("prefill", "lookahead", "preemption", "cancel_pending",
                       "host_transfer", "static_prefill", "parallel_sampling",
                       "speculation_paused")


@dataclass(slots=True)
class Jump:
    """A planned fast-forward: ``k_steps`` identical decode steps of ``step``.

    Attributes
    ----------
    step : StepOutput
        The first step (every step of the run has its batch and shape but for context).
    k_steps : int
        Steps planned (>= 2).
    ctx_totals : range, list of int or ndarray of int64, shape (k_steps,)
        Attended context summed over the batch at each step (tokens).
    kv_blocks_used : RunBlocks or ndarray of int64, shape (k_steps,)
        Pool blocks in use during each step (a :class:`~simulator.kv.run_blocks.RunBlocks`
        lists them as far as they are read).
    start_s : float
        Clock at the first step's start (seconds); set by the engine.
    step_times_s, step_end_times_s : list of float, shape (<= k_steps,)
        Each step's duration and end time (seconds); set by the engine from the
        performance model (Python floats), the steps priced so far: a long run is priced a
        segment at a time (:func:`simulator.engine.loop._run_jump`).
    cover : callable or None
        ``cover(t)``: price steps until the last one priced ends after clock ``t`` (or the
        run is priced whole); None once the run is over or when it was priced whole at once.
    """

    step: Any  # a StepOutput (scheduling.continuous imports this module)
    k_steps: int
    ctx_totals: Any  # range, list or ndarray
    kv_blocks_used: Any  # RunBlocks or ndarray
    start_s: float = 0.0
    step_times_s: list | None = None
    step_end_times_s: list | None = None
    cover: Callable[[float], None] | None = None

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.step, self.k_steps, self.ctx_totals, self.kv_blocks_used), {}

    def kv_blocks_at(self, t: float) -> int:
        """Blocks in use at clock ``t`` (those of the step in progress)."""
        if self.cover is not None:
            self.cover(t)
        ends = self.step_end_times_s
        assert ends is not None, "the engine sets step_end_times_s before a run starts"
        i = min(int(np.searchsorted(ends, t, side="right")), self.k_steps - 1)
        used = self.kv_blocks_used
        if isinstance(used, RunBlocks):
            return used.at(i)
        return int(used[i])


def _step_gaps(ends, k_steps: int) -> list:
    """Gaps (seconds) between consecutive step ends: np.diff's subtractions, in floats."""
    a = float(ends[0])
    gaps = []
    for i in range(1, k_steps):
        b = float(ends[i])
        gaps.append(b - a)
        a = b
    return gaps


def advance(batch: list[ReqState], k_steps: int, step_end_times, *, start_s: float,
            recorder, max_model_len: int, tokens=None) -> list[ReqState]:
    """Emit the tokens of ``k_steps`` consecutive steps for every request of ``batch``.

    Each request emits at the end of every step: one token, or ``tokens[i]`` (only with
    ``k_steps == 1``: speculative verification emits accepted drafts plus one). A request
    without a token yet gets its first-token time; every other emission is one ITL gap.
    Afterwards a request that emitted its output length is finished ``completed``; one that
    reached ``max_model_len`` tokens is finished ``rejected`` (``max_model_len_reached``).

    Parameters
    ----------
    batch : sequence of ReqState
        Requests emitting, in batch order (the order of ITL records).
    k_steps : int
        Steps (>= 1).
    step_end_times : sequence of float
        End time of each step (seconds), at least ``k_steps`` values.
    start_s : float
        Start of the first step (seconds): gaps of requests that emitted exactly then are
        recorded together as one weighted sample.
    recorder : RunRecorder
        Receives ITL samples and finishes.
    max_model_len : int
        Longest sequence (prompt + output tokens).
    tokens : sequence of int, optional
        Tokens each request emits (``k_steps == 1`` only); default 1.

    Returns
    -------
    list of ReqState
        The requests finished, in batch order (their KV is the caller's to release).

    Raises
    ------
    ValueError
        On ``tokens`` with ``k_steps > 1``.
    """
    if tokens is not None and k_steps != 1:
        raise ValueError("advance: per-request tokens need k_steps == 1")
    first_end = float(step_end_times[0])
    end = float(step_end_times[k_steps - 1]) if k_steps > 1 else first_end
    gaps: list[float] = []     # single gaps, in batch order (one recorder call at the end)
    gap_w: list[int] = []
    same = 0
    num_seqs = 0
    finished: list[ReqState] = []
    if tokens is None:
        tokens = (k_steps,) * len(batch)
    r: ReqState
    e: int
    for r, e in zip(batch, tokens):
        ns = r.num_seqs
        num_seqs += ns
        emitted = r.num_emitted
        if emitted == 0:
            r.first_token_time_s = first_end  # every sequence's first token (n > 1)
        else:
            last = r.last_token_time_s
            if last == start_s:
                same += ns  # one gap per sequence
            else:
                gaps.append(first_end - last)
                gap_w.append(ns)
        emitted += e
        r.num_emitted = emitted
        r.last_token_time_s = end
        if emitted >= r.num_output_tokens or r.num_prompt_tokens + emitted >= max_model_len:
            finished.append(r)
    if same:
        gaps.append(first_end - start_s)
        gap_w.append(same)
    if gaps:
        recorder.add_itls(gaps, gap_w)
    if k_steps > 1 and not recorder.add_itl_run(k_steps - 1, num_seqs):
        recorder.add_itl_array(_step_gaps(step_end_times, k_steps), num_seqs)
    _finish(finished, end, recorder)
    return finished


def _finish(finished: list[ReqState], end: float, recorder) -> None:
    """Finish each request of ``finished`` at ``end`` (seconds): ``completed`` when it
    emitted its output length, else ``rejected`` (``max_model_len_reached``)."""
    for r in finished:
        if r.num_emitted >= r.num_output_tokens:
            recorder.finish(r, end, COMPLETED, "")
        else:
            recorder.finish(r, end, REJECTED, "max_model_len_reached")


register_pickling(Jump)
