"""ContinuousScheduler on tiny hand-computed schedules (no SimPy: schedule -> update).

Conventions: each step lasts 1 s (``update(out, t, t + 1)``); ``block_size`` 4 unless said.
Every expected chunk size, block id and victim is worked out by hand in the comments.
"""
from __future__ import annotations

import pytest
from helpers import make_scheduler, req

from simulator.scheduling.state import CANCELLED, COMPLETED, REJECTED, RUNNING, WAITING


def step(s, now):
    out = s.schedule(now)
    assert out is not None
    s.update(out, now, now + 1.0)
    return out


def plan(out):
    return [(r.request_id, n) for r, n in zip(out.reqs, out.ntoks)]


def test_chunked_prefill_budget_10_prompts_7_and_6():
    s = make_scheduler(max_num_batched_tokens=10, enable_chunked_prefill=True)
    a, b = req(0, 7, 3), req(1, 6, 3)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    # step 1: A's whole prompt (7), B gets the remaining 3 of the budget
    o1 = step(s, 0.0)
    assert plan(o1) == [(0, 7), (1, 3)]
    assert o1.shape.prefill_q == [7, 3] and o1.shape.prefill_start == [0, 0]
    assert o1.shape.num_decode == 0 and o1.shape.num_sampled == 1  # only A samples
    assert (o1.num_prefill_tokens, o1.num_decode_tokens) == (10, 0)
    assert a.num_emitted == 1 and a.first_token_time_s == 1.0 and b.num_emitted == 0
    assert a.blocks == [0, 1] and b.blocks == [2]  # ceil(7/4) = 2, ceil(3/4) = 1
    # step 2: A decodes (1 token over 8 of context), B finishes its prompt (3 more)
    o2 = step(s, 1.0)
    assert plan(o2) == [(0, 1), (1, 3)]
    assert o2.shape.num_decode == 1 and o2.shape.decode_ctx_total == 8
    assert o2.shape.prefill_q == [3] and o2.shape.prefill_start == [3]
    assert o2.shape.num_sampled == 2
    assert b.blocks == [2, 3] and b.first_token_time_s == 2.0
    # step 3: both decode: contexts 9 and 7
    o3 = s.schedule(2.0)
    assert plan(o3) == [(0, 1), (1, 1)]
    assert o3.shape.decode_ctx_total == 16 and o3.num_decode_seqs == 2
    assert a.blocks == [0, 1, 4]  # token 9 needs a third block
    assert s.plan_decode_run(o3) == 1  # A finishes after this step
    s.update(o3, 2.0, 3.0)
    assert a.blocks == [] and a.status == COMPLETED and a.finish_time_s == 3.0 and a.num_emitted == 3
    # step 4: B alone
    o4 = step(s, 3.0)
    assert plan(o4) == [(1, 1)]
    assert b.status == COMPLETED and b.finish_time_s == 4.0
    assert s.schedule(4.0) is None and not s.has_work()
    assert s.kv.num_used_blocks == 0


def test_without_chunking_a_prompt_waits_for_room():
    s = make_scheduler(max_num_batched_tokens=10, enable_chunked_prefill=False)
    a, b = req(0, 7, 3), req(1, 6, 3)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    assert plan(step(s, 0.0)) == [(0, 7)]  # 6 > 3 left: B waits whole
    assert b.status == WAITING and b.num_computed_tokens == 0
    assert plan(step(s, 1.0)) == [(0, 1), (1, 6)]  # 1 + 6 <= 10


def test_head_of_line_blocking_fcfs():
    """FCFS does not let a later small prompt overtake a waiting large one."""
    s = make_scheduler(max_num_batched_tokens=10, enable_chunked_prefill=False)
    for i, p in enumerate((7, 6, 2)):
        s.add_request(req(i, p, 3), 0.0)
    assert plan(step(s, 0.0)) == [(0, 7)]  # 6 does not fit in 3; 2 would, but waits


def test_max_num_seqs_one():
    s = make_scheduler(max_num_seqs=1)
    a, b = req(0, 5, 3), req(1, 5, 2)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    assert [plan(step(s, t)) for t in (0.0, 1.0, 2.0)] == [[(0, 5)], [(0, 1)], [(0, 1)]]
    assert a.status == COMPLETED and b.status == WAITING
    assert plan(step(s, 3.0)) == [(1, 5)]
    assert b.first_scheduled_time_s == 3.0


def test_fcfs_preemption_victim_is_tail_and_requeued_at_front():
    """6 blocks of 4 tokens. A, B, C (prompts 7: 2 blocks each) fill the pool; D waits.
    At step 3 A's 9th token needs a third block: C (the tail) is preempted, its blocks
    5, 4 are freed tail first, and A and B take 4 and 5."""
    s = make_scheduler(num_blocks=6, max_num_batched_tokens=100)
    a, b, c, d = (req(i, 7, 10) for i in range(4))
    for r in (a, b, c):
        s.add_request(r, 0.0)
    o1 = step(s, 0.0)
    assert plan(o1) == [(0, 7), (1, 7), (2, 7)]
    assert (a.blocks, b.blocks, c.blocks) == ([0, 1], [2, 3], [4, 5])
    s.add_request(d, 0.5)
    o2 = step(s, 1.0)  # 8 tokens each still fit in 2 blocks; D does not fit (0 free)
    assert plan(o2) == [(0, 1), (1, 1), (2, 1)] and d.status == WAITING
    o3 = s.schedule(2.0)
    assert [r.request_id for r in o3.preempted] == [2]
    assert plan(o3) == [(0, 1), (1, 1)]
    assert c.status == WAITING and c.num_computed_tokens == 0 and c.blocks == []
    assert c.num_preemptions == 1 and c.num_emitted == 2  # emitted tokens are kept
    assert [r.request_id for r in s.waiting_requests()] == [2, 3]  # C ahead of D
    assert (a.blocks, b.blocks) == ([0, 1, 4], [2, 3, 5])
    assert s.kv.num_free_blocks == 0
    s.update(o3, 2.0, 3.0)
    # step 4: C must recompute prompt + its 2 emitted tokens = 9 tokens (3 blocks): waits
    o4 = step(s, 3.0)
    assert plan(o4) == [(0, 1), (1, 1)]
    log = [(rid, frm, to) for _, rid, frm, to in s.rec.transitions if rid == 2]
    assert log == [(2, "new", WAITING), (2, WAITING, RUNNING), (2, RUNNING, WAITING)]


@pytest.mark.parametrize("policy,victim", [("priority", "Y"), ("fcfs", "Z")])
def test_priority_victim_is_least_important(policy, victim):
    """X (priority 3) and Y (priority 9) run; Z (priority 1) joins; at step 3 X needs a
    block: the priority policy preempts Y (largest priority value), FCFS the tail Z."""
    s = make_scheduler(num_blocks=6, max_num_batched_tokens=100, queue_policy=policy)
    x = req(0, 7, 10, priority=3)
    y = req(1, 7, 10, priority=9)
    z = req(2, 7, 10, priority=1, arrival=0.5)
    s.add_request(x, 0.0)
    s.add_request(y, 0.0)
    assert plan(step(s, 0.0)) == [(0, 7), (1, 7)]
    s.add_request(z, 0.5)
    assert plan(step(s, 1.0)) == [(0, 1), (1, 1), (2, 7)]
    o3 = s.schedule(2.0)
    names = {0: "X", 1: "Y", 2: "Z"}
    assert [names[r.request_id] for r in o3.preempted] == [victim]
    assert x.blocks == [0, 1, 2] if victim == "Y" else x.blocks == [0, 1, 4]
    survivors = [k for k in ("X", "Y", "Z") if k != victim]
    assert [names[r.request_id] for r in o3.reqs] == survivors


def test_priority_order_of_waiting_queue():
    s = make_scheduler(max_num_seqs=1, queue_policy="priority")
    for i, p in enumerate((5, 0, 5, 2)):
        s.add_request(req(i, 4, 1, priority=p, arrival=0.1 * i), 0.1 * i)
    # (priority, arrival): 1 (0), 3 (2), 0 (5, t=0), 2 (5, t=0.2)
    assert [r.request_id for r in s.waiting_requests()] == [1, 3, 0, 2]
    order = [plan(step(s, float(t)))[0][0] for t in range(4)]
    assert order == [1, 3, 0, 2]


def test_priority_arrival_preempts_less_important_at_seq_limit():
    s = make_scheduler(max_num_seqs=1, queue_policy="priority")
    low, high = req(0, 4, 10, priority=5), req(1, 4, 10, priority=0)
    s.add_request(low, 0.0)
    step(s, 0.0)
    s.add_request(high, 0.5)
    o = s.schedule(1.0)
    assert [r.request_id for r in o.preempted] == [0] and plan(o) == [(1, 4)]
    assert low.status == WAITING and low.num_computed_tokens == 0
    # an equally important arrival does not preempt
    s2 = make_scheduler(max_num_seqs=1, queue_policy="priority")
    s2.add_request(req(0, 4, 10, priority=1), 0.0)
    step(s2, 0.0)
    s2.add_request(req(1, 4, 10, priority=1), 0.5)
    o2 = s2.schedule(1.0)
    assert o2.preempted == [] and plan(o2) == [(0, 1)]


@pytest.mark.parametrize("prompt,sched_kw,reason", [
    (12, {"max_model_len": 12}, "prompt_too_long"),  # 12 + 1 > 12
    (16, {"num_blocks": 4}, "kv_capacity"),  # 17 tokens need 5 blocks of 4 > 4
    (11, {"enable_chunked_prefill": False, "max_num_batched_tokens": 10},
     "prompt_exceeds_max_num_batched_tokens"),
    (4, {"allocation": "contiguous", "num_blocks": 10, "max_model_len": 100},
     "kv_capacity"),  # reserves max_model_len = 100 tokens = 25 blocks > 10
])
def test_rejection_reasons_at_admission(prompt, sched_kw, reason):
    s = make_scheduler(**sched_kw)
    r = req(0, prompt, 1)
    assert not s.add_request(r, 0.0)
    assert r.status == REJECTED and r.reject_reason == reason
    assert s.num_waiting == 0 and s.rec.exit_time == {0: 0.0}


@pytest.mark.parametrize("prompt,sched_kw,kw", [
    (11, {"max_model_len": 12}, {}),  # 11 + 1 = 12 fits
    (15, {"num_blocks": 4}, {}),  # 16 tokens = 4 blocks
    (10, {"enable_chunked_prefill": False, "max_num_batched_tokens": 10}, {}),
    (4, {"allocation": "contiguous", "num_blocks": 10, "max_model_len": 100},
     {"max_tokens": 30}),  # reserves 34 tokens = 9 blocks
])
def test_admitted_at_the_limit(prompt, sched_kw, kw):
    s = make_scheduler(**sched_kw)
    assert s.add_request(req(0, prompt, 1, **kw), 0.0) and s.num_waiting == 1


def test_runtime_rejection_when_alone_and_out_of_blocks():
    """Pool of 4 blocks x 4 = 16 tokens: prompt 15 emits at 15 and 16 tokens computed; the
    17th token can never fit, so the request (alone) is rejected after 2 tokens."""
    s = make_scheduler(num_blocks=4)
    r = req(0, 15, 10)
    s.add_request(r, 0.0)
    step(s, 0.0)
    step(s, 1.0)
    assert r.num_emitted == 2
    assert s.schedule(2.0) is None
    assert r.status == REJECTED and r.reject_reason == "kv_capacity"
    assert s.kv.num_used_blocks == 0


def test_max_model_len_stop():
    s = make_scheduler(max_model_len=10)
    r = req(0, 7, 10)
    s.add_request(r, 0.0)
    for t in range(3):
        step(s, float(t))
    # prompt 7 + 3 emitted = 10 = max_model_len
    assert r.status == REJECTED and r.reject_reason == "max_model_len_reached"
    assert r.num_emitted == 3


def test_cancel_waiting_and_running():
    s = make_scheduler(max_num_seqs=1, max_num_batched_tokens=4)
    a, b = req(0, 10, 5), req(1, 4, 5)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    o = s.schedule(0.0)  # A: first 4-token chunk
    s.cancel(b, 0.5)  # waiting: leaves at once
    assert b.status == CANCELLED and s.num_waiting == 0
    s.cancel(a, 0.5)  # running: leaves at the end of the step
    assert a.status == RUNNING and a.cancel_requested
    s.update(o, 0.0, 1.0)
    assert a.status == CANCELLED and s.running == [] and s.kv.num_used_blocks == 0
    assert s.rec.exit_time == {1: 0.5, 0: 1.0}  # running: exits at the end of its step
    # a request that already has its first token is not cancelled
    c = req(2, 4, 5)
    s.add_request(c, 1.0)
    step(s, 1.0)
    s.cancel(c, 2.5)
    assert c.status == RUNNING and not c.cancel_requested


def test_decode_run_planning_hand_computed():
    """A (prompt 8, 6 tokens) and B (prompt 5, 10 tokens), 6 blocks of 4.

    After the prefill step: A computed 8 (2 blocks), B computed 5 (2 blocks). Step 2
    allocates A's third block (token 9): 1 block left. In a decode run, after j steps A has
    8 + j tokens computed (a 4th block at j = 5) and B 5 + j (a 3rd block at j = 4): the
    single free block lets B through j = 4, so the run is 4 steps (A would finish after 5).
    """
    s = make_scheduler(num_blocks=6)
    a, b = req(0, 8, 6), req(1, 5, 10)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    step(s, 0.0)
    out = s.schedule(1.0)
    assert plan(out) == [(0, 1), (1, 1)] and out.jumpable
    assert a.blocks == [0, 1, 4] and s.kv.num_free_blocks == 1
    k = s.plan_decode_run(out)
    assert k == 4
    ctx, used = s.decode_run_arrays(out, k)
    assert list(ctx) == [15, 17, 19, 21]  # (9 + 6) then + 2 per step
    assert used.head(k) == [5, 5, 5, 6]  # B's third block from the 4th step
    s.commit_decode_run(out, k, 1.0, [2.0, 3.0, 4.0, 5.0])
    assert (a.num_computed_tokens, a.num_emitted, len(a.blocks)) == (12, 5, 3)
    assert (b.num_computed_tokens, b.num_emitted, len(b.blocks)) == (9, 5, 3)
    assert a.last_token_time_s == 5.0 and s.kv.num_free_blocks == 0
    vals, w = s.rec.itl_samples()
    assert w.sum() == 2 * 4  # 4 new gaps per request, each 1 s (first tokens at t = 1)
    assert set(vals[w > 0]) == {1.0}
    # with the pool exhausted, the next step preempts B (the tail) to give A its 4th block
    o = s.schedule(5.0)
    assert [r.request_id for r in o.preempted] == [1]


def test_plan_decode_run_stops_at_first_finish():
    s = make_scheduler(num_blocks=100)
    a, b = req(0, 4, 7), req(1, 4, 30)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    step(s, 0.0)  # both emitted 1
    out = s.schedule(1.0)
    assert s.plan_decode_run(out) == 6  # A has 6 tokens left: it finishes at the 6th step
    s.commit_decode_run(out, 6, 1.0, [2.0 + i for i in range(6)])
    assert a.status == COMPLETED and a.finish_time_s == 7.0 and a.num_emitted == 7
    assert b.num_emitted == 7 and s.running == [b]


def test_not_jumpable_with_waiting_work_or_prefill():
    s = make_scheduler(num_blocks=100, max_num_batched_tokens=6)
    s.add_request(req(0, 4, 10), 0.0)
    s.add_request(req(1, 9, 10), 0.0)
    o = s.schedule(0.0)
    assert plan(o) == [(0, 4), (1, 2)] and not o.jumpable  # prefill in the batch
    assert s.plan_decode_run(o) == 1


def test_prompt_beyond_watermark_rejected_at_admission():
    """10 blocks of 16, watermark 0.2 (2 blocks): a new request may take at most 8 blocks,
    so a 140-token prompt (141 tokens = 9 blocks) can never be admitted (vLLM: NEVER)."""
    s = make_scheduler(num_blocks=10, block_size=16, watermark=0.2)
    r = req(0, 140, 5)
    ok = s.add_request(r, 0.0)
    assert not ok and r.reject_reason == "kv_capacity"
