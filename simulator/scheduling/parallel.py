"""Parallel sampling in the scheduler: what one request with ``n`` sequences asks of a step.

A request with ``num_seqs = n > 1`` (``RequestSpec.n``) is one :class:`~.state.ReqState`
whose progress counter counts tokens *per sequence*: the prompt is computed once (its KV
shared copy-on-write, :mod:`simulator.kv.cow`), then each decode step advances every sequence
by one token, so it takes ``n`` tokens of the step's budget and ``n`` decode slots. These
helpers hold that arithmetic so the continuous scheduler's loops stay one line per case.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover (the request state's module imports the KV manager)
    from simulator.scheduling.state import ReqState


def kv_tokens_per_seq(r: ReqState, scheduled: int) -> int:
    """Tokens of KV each sequence of ``r`` holds after a step scheduling ``scheduled`` tokens
    of it (a decode schedules ``num_seqs`` tokens: one each)."""
    if scheduled == r.num_seqs and r.is_decoding:
        return r.num_computed_tokens + 1
    return r.num_computed_tokens + scheduled


def kv_tokens_held(r: ReqState, scheduled: int) -> int:
    """Tokens of KV ``r`` holds after the step, over all its sequences: the prompt once, each
    sequence's generated tokens apart (``P + n x (L - P)`` past the prompt, ``L`` before)."""
    per_seq = kv_tokens_per_seq(r, scheduled)
    p = r.num_prompt_tokens
    return per_seq if per_seq <= p else p + r.num_seqs * (per_seq - p)


def extra_seqs(running: list[ReqState]) -> int:
    """Sequences beyond one per running request (what ``max_num_seqs`` counts on top)."""
    return sum(r.num_seqs - 1 for r in running if r.num_seqs > 1)
