"""Static (request-level) batching: hand-computed batches, padding, timeout, reservation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.base.request import RequestSpec
from simulator.kv import KVCacheManager
from simulator.metrics.records import RunRecorder
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import SchedulerConfig, validate_scenario
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.state import COMPLETED, REJECTED, ReqState
from simulator.scheduling.static import StaticScheduler

BS = 16


def make_sched(num_blocks=64, max_model_len=64, max_batch_size=3, timeout=0.5,
               allocation="contiguous", policy="fcfs"):
    kv = KVCacheManager(num_blocks, BS, allocation=allocation, max_model_len=max_model_len)
    rec = RunRecorder(check_transitions=True)
    cfg = SchedulerConfig(policy="static", queue_policy=policy, max_batch_size=max_batch_size,
                          batch_timeout_s=timeout)
    sched = StaticScheduler(cfg, SchedulerLimits(max_model_len=max_model_len), kv, rec, 0)
    return sched, kv, rec


def spec(i, t, prompt, output, max_tokens=None):
    return RequestSpec(i, t, prompt, output, max_tokens=max_tokens)


def add(sched, rec, s, now=None):
    r = ReqState(s)
    rec.all_requests.append(r)
    ok = sched.add_request(r, s.arrival_time_s if now is None else now)
    return r, ok


def scenario(**sched_over):
    """A tiny scenario (the workload is replaced by explicit specs in the tests)."""
    sc = {"policy": "static", "max_model_len": 64, "max_batch_size": 3,
          "batch_timeout_s": 0.5}
    sc.update(sched_over.pop("scheduler", {}))
    kv = {"num_gpu_blocks": 64, "allocation": "contiguous"}
    kv.update(sched_over.pop("kv_cache", {}))
    raw = {"name": "t", "model": "llama-3.1-8b", "scheduler": sc, "kv_cache": kv,
           "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1.0},
                                      "num_requests": 1,
                                      "prompt_tokens": {"dist": "fixed", "value": 8},
                                      "output_tokens": {"dist": "fixed", "value": 2}}}}
    raw.update(sched_over)
    return validate_scenario(raw)


HAND = [spec(0, 0.0, 10, 2), spec(1, 0.0, 20, 5), spec(2, 0.0, 30, 3)]


# ------------------------------------------------------------------ scheduler alone
def test_hand_batch_step_by_step():
    """Outputs 2, 5, 3 in one batch of 3: 1 prefill + 4 decode steps, padding 0,1,2,2."""
    sched, kv, rec = make_sched()
    reqs = [add(sched, rec, s)[0] for s in HAND]
    now = 0.0
    outs = []
    while sched.has_work():
        out = sched.schedule(now)
        assert out is not None
        outs.append(out)
        sched.update(out, now, now + 1.0)
        now += 1.0
    assert [o.batch_size for o in outs] == [3, 3, 3, 3, 3]
    assert [o.num_padding_seqs for o in outs] == [0, 0, 1, 2, 2]
    assert sum(o.num_padding_seqs for o in outs) == 5
    # prefill: every prompt padded to the longest (30): 90 tokens computed, 30 of padding
    pre = outs[0]
    assert pre.is_prefill and pre.num_prefill_tokens == 90 and pre.num_prefill_seqs == 3
    assert pre.shape.prefill_q == [30, 30, 30] and pre.shape.prefill_start == [0, 0, 0]
    assert sched.num_prefill_padding_tokens == 30
    # decode step j: all 3 slots computed, each attending P_max + j tokens
    assert [o.shape.num_decode for o in outs[1:]] == [3, 3, 3, 3]
    assert [o.shape.decode_ctx_total for o in outs[1:]] == [93, 96, 99, 102]
    # KV tokens of live members after each step
    assert [o.kv_tokens for o in outs] == [60, 63, 54, 23, 24]
    # first tokens at the end of the prefill, finishes at the step of the last token
    assert all(r.first_token_time_s == 1.0 for r in reqs)
    assert [r.finish_time_s for r in reqs] == [2.0, 5.0, 3.0]
    assert all(r.status == COMPLETED for r in reqs)
    assert [r.num_emitted for r in reqs] == [2, 5, 3]
    assert sched.stats()["padding_waste"] == pytest.approx(5 / 15)
    assert kv.num_used_blocks == 0  # the batch released its reservation
    kv.pool.check_invariants()


def test_hand_batch_fast_forward_plan():
    sched, _kv, rec = make_sched()
    for s in HAND:
        add(sched, rec, s)
    out = sched.schedule(0.0)
    assert sched.plan_decode_run(out) == 1  # prefill
    sched.update(out, 0.0, 1.0)
    plans = []
    now = 1.0
    while sched.has_work():
        out = sched.schedule(now)
        k = sched.plan_decode_run(out)
        plans.append(k)
        ctx, used = sched.decode_run_arrays(out, k)
        assert ctx.tolist() == [3 * (30 + out.decode_index + i) for i in range(k)]
        assert used.tolist() == [12] * k  # 3 slots x ceil(64 / 16) blocks
        ends = now + np.arange(1, k + 1, dtype=float)
        sched.commit_decode_run(out, k, now, ends)
        now = float(ends[-1])
    # runs end where the next member finishes: step 1 (o=2), step 2 (o=3), steps 3-4 (o=5)
    assert plans == [1, 1, 2]
    assert sched.num_padding_slot_steps == 5 and sched.num_slot_steps == 15


def test_contiguous_reservation_block_counts():
    # max_model_len 100 -> ceil(100 / 16) = 7 blocks per slot, in both allocation modes
    for allocation in ("contiguous", "paged"):
        sched, kv, rec = make_sched(num_blocks=64, max_model_len=100, allocation=allocation)
        for s in HAND:
            add(sched, rec, s)
        out = sched.schedule(0.0)
        assert out.batch_size == 3
        assert kv.num_used_blocks == 21
        assert [len(r.blocks) for r in out.reqs] == [7, 7, 7]
        # finished members keep their slot until the batch ends
        sched.update(out, 0.0, 1.0)
        sched.update(sched.schedule(1.0), 1.0, 2.0)
        assert out.reqs[0].status == COMPLETED and len(out.reqs[0].blocks) == 7
        assert kv.num_used_blocks == 21
    # a declared max_tokens bounds the reservation: 10 + 20 = 30 tokens -> 2 blocks
    sched, kv, rec = make_sched(num_blocks=64, max_model_len=100, max_batch_size=1)
    add(sched, rec, spec(0, 0.0, 10, 5, max_tokens=20))
    sched.schedule(0.0)
    assert kv.num_used_blocks == 2


def test_admits_only_what_fits_and_starts_when_memory_full():
    # 15 blocks, 4 per slot (max_model_len 64): 3 fit; 4 waiting, batch size 8
    sched, kv, rec = make_sched(num_blocks=15, max_model_len=64, max_batch_size=8, timeout=10.0)
    reqs = [add(sched, rec, spec(i, 0.0, 8, 2))[0] for i in range(4)]
    out = sched.schedule(0.0)  # full by memory: starts before the timeout
    assert out is not None and out.batch_size == 3
    assert kv.num_used_blocks == 12 and sched.num_waiting == 1
    assert reqs[3].status == "waiting"


def test_timeout_vs_full():
    sched, _kv, rec = make_sched(max_batch_size=3, timeout=0.5)
    add(sched, rec, spec(0, 0.0, 8, 2))
    add(sched, rec, spec(1, 0.1, 8, 2))
    assert sched.schedule(0.1) is None
    assert sched.idle_until(0.1) == pytest.approx(0.5)  # oldest arrival + timeout
    assert sched.schedule(0.49) is None
    out = sched.schedule(0.5)
    assert out is not None and out.batch_size == 2
    # full batch: starts at the third arrival, before the timeout
    sched, _kv, rec = make_sched(max_batch_size=3, timeout=0.5)
    for i, t in enumerate((0.0, 0.1, 0.2)):
        add(sched, rec, spec(i, t, 8, 2))
    out = sched.schedule(0.2)
    assert out is not None and out.batch_size == 3
    # timeout 0: whatever is waiting starts at once
    sched, _kv, rec = make_sched(max_batch_size=3, timeout=0.0)
    add(sched, rec, spec(0, 0.0, 8, 2))
    assert sched.schedule(0.0).batch_size == 1


def test_never_fits_rejected_with_reason():
    sched, _kv, rec = make_sched(num_blocks=3, max_model_len=64)  # needs 4 blocks per slot
    r, ok = add(sched, rec, spec(0, 0.0, 8, 2))
    assert not ok and r.status == REJECTED and r.reject_reason == "kv_capacity"
    sched, _kv, rec = make_sched(max_model_len=64)
    r, ok = add(sched, rec, spec(0, 0.0, 64, 2))
    assert not ok and r.reject_reason == "prompt_too_long"


def test_cancel_during_prefill_leaves_a_padding_slot():
    sched, kv, rec = make_sched()
    reqs = [add(sched, rec, s)[0] for s in HAND]
    out = sched.schedule(0.0)
    sched.cancel(reqs[1], 0.5)
    sched.update(out, 0.0, 1.0)
    assert reqs[1].status == "cancelled" and reqs[1].num_emitted == 0
    out = sched.schedule(1.0)
    assert out.batch_size == 3 and out.num_padding_seqs == 1
    assert kv.num_used_blocks == 12


# ------------------------------------------------------------------ through the engine
def test_engine_steps_frame_hand_case():
    res = run_scenario(scenario(), specs=list(HAND), write=False, check_transitions=True)
    st = res.steps
    assert st["batch_size"].tolist() == [3, 3, 3, 3, 3]
    assert st["num_padding_seqs"].tolist() == [0, 0, 1, 2, 2]
    assert st["num_prefill_tokens"].tolist() == [90, 0, 0, 0, 0]
    assert st["kv_tokens_used"].tolist() == [60, 63, 54, 23, 24]
    assert st["kv_blocks_used"].tolist() == [12] * 5
    assert st["num_padding_seqs"].sum() / st["batch_size"].sum() == pytest.approx(1 / 3)
    rq = res.requests
    assert rq["status"].tolist() == ["completed"] * 3
    assert rq["num_emitted_tokens"].tolist() == [2, 5, 3]
    # the batch starts at once (full); first tokens together at the end of the prefill
    assert rq["first_scheduled_time_s"].tolist() == [0.0, 0.0, 0.0]
    assert rq["first_token_time_s"].nunique() == 1
    end = st["end_time_s"].to_numpy()
    assert rq["finish_time_s"].tolist() == [end[1], end[4], end[2]]


def test_engine_timeout_and_full():
    # two requests, batch of 3: they wait for the 0.5 s timeout from the first arrival
    specs = [spec(0, 0.0, 8, 2), spec(1, 0.2, 8, 2)]
    res = run_scenario(scenario(), specs=specs, write=False, check_transitions=True)
    assert res.requests["first_scheduled_time_s"].tolist() == [0.5, 0.5]
    # three requests: the batch is full at the third arrival
    specs = [spec(0, 0.0, 8, 2), spec(1, 0.1, 8, 2), spec(2, 0.3, 8, 2)]
    res = run_scenario(scenario(), specs=specs, write=False, check_transitions=True)
    assert res.requests["first_scheduled_time_s"].tolist() == [0.3, 0.3, 0.3]
    # a request arriving during a batch waits for its end (no joining mid-batch)
    specs = [spec(0, 0.0, 8, 40), spec(1, 0.0, 8, 40), spec(2, 0.0, 8, 40), spec(3, 0.01, 8, 2)]
    res = run_scenario(scenario(), specs=specs, write=False, check_transitions=True)
    rq = res.requests
    assert rq.loc[3, "first_scheduled_time_s"] >= rq.loc[:2, "finish_time_s"].max()


def test_engine_max_model_len_stops_member():
    specs = [spec(0, 0.0, 10, 100), spec(1, 0.0, 10, 3)]
    res = run_scenario(scenario(scheduler={"max_model_len": 20, "max_batch_size": 2}),
                       specs=specs, write=False)
    rq = res.requests
    assert rq["status"].tolist() == ["rejected", "completed"]
    assert rq.loc[0, "reject_reason"] == "max_model_len_reached"
    assert rq.loc[0, "num_emitted_tokens"] == 10  # 10 + 10 = max_model_len


def _random_specs(n, seed):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(0.05, n))
    p = rng.integers(1, 200, n)
    o = rng.integers(1, 120, n)
    return [spec(i, float(t[i]), int(p[i]), int(o[i])) for i in range(n)]


@pytest.mark.pure_core
def test_fast_forward_equals_single_steps(monkeypatch):
    """Fast-forwarded runs give the same records as stepping one decode step at a time."""
    sc = scenario(scheduler={"max_model_len": 512, "max_batch_size": 8, "batch_timeout_s": 0.1},
                  kv_cache={"num_gpu_blocks": 200})
    specs = _random_specs(150, 3)
    fast = run_scenario(sc, specs=specs, write=False, check_transitions=True)
    monkeypatch.setattr(StaticScheduler, "plan_decode_run", lambda self, out: 1)
    slow = run_scenario(sc, specs=specs, write=False, check_transitions=True)
    assert len(fast.steps) == len(slow.steps)
    # the fast run did jump (decode runs recorded as chunks), the slow one did not
    assert fast.sim.recorder.num_step_chunks and not slow.sim.recorder.num_step_chunks
    for col in ("batch_size", "num_padding_seqs", "kv_tokens_used", "kv_blocks_used",
                "num_prefill_tokens", "num_decode_tokens"):
        assert fast.steps[col].tolist() == slow.steps[col].tolist(), col
    np.testing.assert_allclose(fast.steps["end_time_s"], slow.steps["end_time_s"], rtol=1e-12)
    for col in ("first_token_time_s", "finish_time_s", "first_scheduled_time_s"):
        np.testing.assert_allclose(fast.requests[col], slow.requests[col], rtol=1e-12)
    assert fast.requests["status"].tolist() == slow.requests["status"].tolist()
    # ITL samples: same multiset
    fv, fw = fast.itl_values_s, fast.itl_weights
    sv, sw = slow.itl_values_s, slow.itl_weights
    assert fw.sum() == sw.sum()
    assert np.average(fv, weights=fw) == pytest.approx(np.average(sv, weights=sw), rel=1e-9)
    # the steps frame's padding equals the scheduler's own count
    sched = fast.sim.replicas[0].sched
    st = fast.steps
    assert st["num_padding_seqs"].sum() == sched.num_padding_slot_steps
    assert st["batch_size"].sum() == sched.num_slot_steps
    assert (st["batch_size"] <= 8).all()
    # every request completed, each emitted exactly its output length
    rq = fast.requests
    assert (rq["status"] == "completed").all()
    assert (rq["num_emitted_tokens"] == rq["num_output_tokens"]).all()
    # KV pool empty at the end
    assert fast.sim.replicas[0].kv.num_used_blocks == 0


def test_priority_queue_order():
    sched, _kv, rec = make_sched(max_batch_size=2, timeout=0.0, policy="priority")
    a, _ = add(sched, rec, RequestSpec(0, 0.0, 8, 2, priority=1))
    b, _ = add(sched, rec, RequestSpec(1, 0.0, 8, 2, priority=0))
    c, _ = add(sched, rec, RequestSpec(2, 0.0, 8, 2, priority=0))
    out = sched.schedule(0.0)
    assert [r.request_id for r in out.reqs] == [1, 2]
    assert a.status == "waiting" and math.isnan(a.first_scheduled_time_s)
    assert b.status == c.status == "running"


def test_bad_parameters():
    # the static scheduler reads its batch size and timeout from the scheduler section, whose
    # schema refuses a batch of no slot and a negative wait
    with pytest.raises(ValueError, match="max_batch_size"):
        SchedulerConfig(policy="static", max_batch_size=0)
    with pytest.raises(ValueError, match="batch_timeout_s"):
        SchedulerConfig(policy="static", batch_timeout_s=-1.0)
