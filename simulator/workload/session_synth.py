"""Synthetic multi-turn sessions (``workload.synthetic_sessions``): conversations or agents
whose every turn after the first repeats the whole history as its prompt.

For each session (arrivals of ``rate_rps`` sessions per second, Poisson or gamma):

- ``K`` turns from ``turns``; turn ``k`` has a user message ``m_k`` (``message_tokens``),
  an answer ``a_k`` (``answer_tokens``, its output) and, for ``k >= 1``, a think time
  ``d_k`` (``think_time``, seconds);
- prompts: ``prompt_0 = system + m_0`` and ``prompt_k = prompt_{k-1} + a_{k-1} + m_k``;
- the session ends before the first turn ``k >= 1`` whose ``prompt_k + a_k`` exceeds
  ``max_context_tokens`` (turn 0 is always kept);
- arrivals: turn 0 at the session's arrival; turn ``k`` at ``arrival_{k-1} + d_k``
  (computed in that order in float64; a turn that would land on the previous one's time,
  ``d_k`` = 0, is put one float step after it, so turns keep a strict order). In closed
  loop (``workload.session_arrival: closed``) these later arrivals are provisional, a sort
  key only: the engine sends turn ``k`` when turn ``k-1`` finishes plus ``d_k``
  (``RequestSpec.think_time_s``); in open loop they are the arrival times.

Prefix ids follow the contract of :mod:`simulator.workload.sessions`, the system prompt's
full blocks shared by every session. Sessions are numbered 0, 1, ... in arrival order.
Draws come from sub-streams of the ``sessions`` stream of :mod:`simulator.base.rng` (0
session arrivals, 1 turn counts, 2 think times, 3 messages, 4 answers), each drawn for every
turn of every session before any is cut by ``max_context_tokens``, so a seed gives the same
sessions whatever the bound.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from simulator.base.budget import check_workload_budget
from simulator.base.schema import MAX_TOKENS_REPRESENTABLE
from simulator.workload.columns import TraceColumns
from simulator.workload.config import SyntheticSessionsConfig
from simulator.workload.errors import WorkloadError
from simulator.workload.sessions import SESSION_BLOCK_TOKENS, session_prefix_ids
from simulator.workload.synthetic import (
    generate_arrivals,
    rng_stream,
    sample_lengths,
    sample_seconds,
)

__all__ = ["KEY", "generate_sessions"]

#: The config key messages name.
KEY = "workload.synthetic_sessions"
_STREAM = "sessions"
#: Sub-streams of the ``sessions`` stream, one per quantity (fixed forever).
_ARRIVALS, _TURNS, _THINK, _MESSAGES, _ANSWERS = range(5)


def _turn_arrivals(start_s: np.ndarray, first: np.ndarray, think_s: np.ndarray
                   ) -> np.ndarray:
    """Provisional arrivals: a session's turn 0 at its start, turn ``k`` at turn ``k-1``'s
    arrival + its think time, strictly after it (one float step where the sum is not)."""
    out = np.empty(think_s.size, dtype=np.float64)
    starts = iter(start_s.tolist())
    t = 0.0
    for i, (is_first, d) in enumerate(zip(first.tolist(), think_s.tolist())):
        if is_first:
            t = next(starts)
        else:
            nt = t + d
            t = nt if nt > t else math.nextafter(t, math.inf)
        out[i] = t
    return out


def _turn_prompts(cfg: SyntheticSessionsConfig, turns: np.ndarray, message: np.ndarray,
                  answer: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per drawn turn: its session, its index, its prompt (tokens), and the rows kept by
    ``max_context_tokens``.

    Raises
    ------
    WorkloadError
        If a kept turn's prompt passes 2**31 - 1 tokens.
    """
    total = int(turns.sum())
    sid = np.repeat(np.arange(turns.size, dtype=np.int64), turns)
    first_row = np.cumsum(turns) - turns
    turn = np.arange(total, dtype=np.int64) - np.repeat(first_row, turns)
    # context after turn k (prompt + answer): system + the session's (message + answer)
    # up to k, in exact integers; it grows with k, so the turns within a bound are a prefix
    step = message + answer
    grown = np.cumsum(step)
    context = cfg.system_prompt_tokens + grown - np.repeat((grown - step)[first_row], turns)
    keep = turn == 0
    if cfg.max_context_tokens is not None:
        keep |= context <= cfg.max_context_tokens
    else:
        keep[:] = True
    prompt = context - answer
    idx = np.flatnonzero(keep)
    big = prompt[idx] > MAX_TOKENS_REPRESENTABLE
    if big.any():
        i = int(idx[np.argmax(big)])
        raise WorkloadError(
            f"{KEY}: turn {int(turn[i])} of session {int(sid[i])} has a prompt of "
            f"{int(prompt[i]):,} tokens, beyond {MAX_TOKENS_REPRESENTABLE:,}; set "
            f"{KEY}.max_context_tokens (or bound turns / message_tokens / answer_tokens)")
    return sid, turn, prompt, idx


def generate_sessions(cfg: SyntheticSessionsConfig, seed: int,
                      block_tokens: int = SESSION_BLOCK_TOKENS,
                      trace_lengths: Callable[[str, str], np.ndarray] | None = None,
                      ) -> TraceColumns:
    """The turns of synthetic sessions as columns, sorted by (provisional) arrival (module
    docstring).

    Parameters
    ----------
    cfg : SyntheticSessionsConfig
    seed : int
        The run's seed (>= 0).
    block_tokens : int
        Tokens per prefix id (``workload.session_block_tokens``).
    trace_lengths : callable, optional
        ``(from_trace, column) -> int array`` loader for ``from_trace`` lengths.

    Returns
    -------
    TraceColumns
        One row per turn, with ``session_id``, ``turn_index``, ``think_time_s`` (0 for turn
        0) and ``prefix_hash_ids``; lines 0 (generated).

    Raises
    ------
    simulator.base.budget.ResourceError
        If the expected sessions, or the turns drawn, alone exceed the memory budget.
    WorkloadError
        If the seed is negative, a length distribution draws beyond 2**31 - 1 tokens, or a
        turn's prompt grows beyond it (without ``max_context_tokens``).
    """
    rng = [rng_stream(seed, _STREAM, j) for j in range(5)]
    expected = [float(cfg.num_sessions)] if cfg.num_sessions is not None else []
    if cfg.duration_s is not None:
        expected.append(cfg.arrival.rate_rps * cfg.duration_s)
    knob = f"{KEY}.num_sessions (or duration_s / arrival.rate_rps, turns)"
    check_workload_budget(min(expected), "synthetic sessions", knob)
    start_s = generate_arrivals(cfg.arrival, rng[_ARRIVALS], cfg.num_sessions, cfg.duration_s)
    num_sessions = int(start_s.size)
    turns = sample_lengths(cfg.turns, num_sessions, rng[_TURNS], key=f"{KEY}.turns")
    total = int(turns.sum())
    check_workload_budget(total, f"synthetic sessions ({num_sessions:,} sessions)", knob)
    think = sample_seconds(cfg.think_time, total, rng[_THINK])
    message = sample_lengths(cfg.message_tokens, total, rng[_MESSAGES], default_column="prompt",
                             trace_lengths=trace_lengths, key=f"{KEY}.message_tokens")
    answer = sample_lengths(cfg.answer_tokens, total, rng[_ANSWERS], default_column="output",
                            trace_lengths=trace_lengths, key=f"{KEY}.answer_tokens")
    sid, turn, prompt, idx = _turn_prompts(cfg, turns, message, answer)
    sid, turn, prompt, answer, think = sid[idx], turn[idx], prompt[idx], answer[idx], think[idx]
    first = turn == 0
    arrival = _turn_arrivals(start_s, first, think)
    think = np.where(first, 0.0, think)
    ids = session_prefix_ids(sid.tolist(), prompt.tolist(), answer.tolist(), block_tokens,
                             system_tokens=cfg.system_prompt_tokens)
    n = int(idx.size)
    cols = TraceColumns(path="<synthetic sessions>", format="synthetic_sessions",
                        arrival_s=arrival, prompt=prompt.astype(np.int64),
                        output=answer.astype(np.int64), lines=np.zeros(n, dtype=np.int64),
                        prefix_hash_ids=ids, prefix_block_tokens=int(block_tokens),
                        session_id=sid, turn_index=turn, think_time_s=think)
    return cols.take(np.argsort(arrival, kind="stable"))

