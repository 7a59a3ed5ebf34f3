"""The shape of one engine iteration: what a step computes, which every cost model prices.

:class:`StepShape` is built by the schedulers (``simulator.scheduling``) and priced by the
performance models (:mod:`simulator.perf`); it lives in a module of its own so that both sides
share it without either importing the other's machinery.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepShape:
    """What one engine iteration computes.

    Attributes
    ----------
    prefill_q : list of int
        New (query) tokens of each prefill chunk in the step.
    prefill_start : list of int
        Tokens already in the KV cache before each chunk (same length as ``prefill_q``).
    num_decode : int
        Decode sequences (one query token each, or ``1 + k`` when verifying ``k`` draft tokens).
    decode_ctx_total : int
        Sum over decode sequences of the context length attended (tokens).
    decode_q_per_seq : int
        Query tokens per decode sequence (1, or ``num_speculative_tokens + 1`` for verification).
    num_sampled : int
        Rows that go through the LM head and sampler.
    """

    prefill_q: list = field(default_factory=list)
    prefill_start: list = field(default_factory=list)
    num_decode: int = 0
    decode_ctx_total: int = 0
    decode_q_per_seq: int = 1
    num_sampled: int = 0

    @property
    def num_tokens(self) -> int:
        return int(sum(self.prefill_q)) + self.num_decode * self.decode_q_per_seq

    @property
    def num_seqs(self) -> int:
        return len(self.prefill_q) + self.num_decode
