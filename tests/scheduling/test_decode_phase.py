"""``ReqState.is_decoding``: the one test of "is this request in its decode phase", and the
schedulers counting exactly those requests as decodes.

Expected phases are worked out by hand: a prompt of ``P`` tokens under a token budget ``B``
is prefilled in ``ceil(P / B)`` chunks, the last of which emits the first token; every step
after it computes one token (a decode) until the output is complete.
"""
from __future__ import annotations

import math

import pytest
from helpers import make_scheduler, req, spec

from simulator.scheduling.state import ReqState


def test_phases_of_one_request_by_hand():
    r = req(0, 10, 4)
    assert not r.is_decoding  # nothing computed
    r.num_computed_tokens = 4
    assert not r.is_decoding  # a prompt chunk
    r.num_computed_tokens, r.num_emitted = 10, 1  # the prompt's last chunk emitted token 1
    assert r.is_decoding
    r.num_computed_tokens, r.num_emitted = 11, 2
    assert r.is_decoding
    r.num_computed_tokens = 0  # preempted, recomputed from scratch: a prefill again
    assert not r.is_decoding
    r.num_computed_tokens = 10  # part of the recompute (12 tokens) done
    assert not r.is_decoding


def test_request_prefilled_elsewhere_starts_decoding():
    """A decode pool's copy of a P/D request arrives with its prompt's KV and first token."""
    r = ReqState(spec(0, 1.0, 10, 4, num_kv_transferred_tokens=10, handoff_token_time_s=1.0))
    assert r.is_decoding and r.num_emitted == 1


@pytest.mark.parametrize("prompt,budget", [(10, 4), (7, 7), (9, 16)])
def test_scheduler_counts_decodes_as_the_property(prompt, budget):
    s = make_scheduler(max_num_batched_tokens=budget, enable_chunked_prefill=True)
    r = req(0, prompt, 3)
    s.add_request(r, 0.0)
    prefill_steps = math.ceil(prompt / budget)
    phases, decodes = [], []
    t = 0.0
    while s.has_work():
        was_decoding = r.is_decoding
        out = s.schedule(t)
        phases.append(was_decoding)
        decodes.append(out.shape.num_decode)
        s.update(out, t, t + 1.0)
        t += 1.0
    # ceil(P / B) prefill chunks, then the 2 decodes of tokens 2 and 3
    assert phases == [False] * prefill_steps + [True, True]
    assert decodes == [0] * prefill_steps + [1, 1]


def test_parallel_sampling_decodes_one_token_per_sequence():
    s = make_scheduler(max_num_batched_tokens=64)
    r = req(0, 8, 3, n=2)
    s.add_request(r, 0.0)
    o1 = s.schedule(0.0)
    assert not r.is_decoding and o1.ntoks == [8] and o1.shape.num_decode == 0
    s.update(o1, 0.0, 1.0)
    assert r.is_decoding
    o2 = s.schedule(1.0)
    # two sequences, one token each, of context 8 + 1 each
    assert o2.ntoks == [2] and o2.shape.num_decode == 2 and o2.shape.decode_ctx_total == 18
