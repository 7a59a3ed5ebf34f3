"""Invariant 3 (DESIGN.md): the clock is non-decreasing; equal-time events run in a
deterministic order.

Checked on the per-step records of every replica: step indices are 0..n-1, every step has a
positive duration with ``end = start + step_time``, starts never decrease and a step never
starts before the previous one ended (one replica runs one iteration at a time). The
transition log (appended as the simulation proceeds) must be in time order too.

Non-vacuity: the scenarios contain idle gaps *and* back-to-back steps, multi-step
fast-forwarded decode runs (counted by ``helpers.suite_run``), and for the
equal-time test, bursts of simultaneous arrivals that queue.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import SUITE, make_scenario, run_sim, spec, suite_run


def _check_steps(steps, end_time, counters):
    for rid, g in steps.groupby("replica_id"):
        g = g.sort_values("step_index")
        assert (g.step_index.to_numpy() == np.arange(len(g))).all()
        start = g.start_time_s.to_numpy()
        end = g.end_time_s.to_numpy()
        dt = g.step_time_s.to_numpy()
        assert (dt > 0).all()
        np.testing.assert_allclose(end, start + dt, rtol=1e-12, atol=1e-12)
        assert (np.diff(start) > 0).all()  # strictly: each step takes time
        gap = start[1:] - end[:-1]
        assert (gap >= 0).all(), f"replica {rid}: overlapping steps, min gap {gap.min()}"
        assert start[0] >= 0
        assert end[-1] <= end_time + 1e-12
        counters["idle_gaps"] += int((gap > 0).sum())
        counters["back_to_back"] += int((gap == 0).sum())


@pytest.mark.parametrize("name", list(SUITE))
def test_clock_steps(name):
    run = suite_run(name)
    out, until = run.out, run.until
    counters = {"idle_gaps": 0, "back_to_back": 0}
    _check_steps(out.steps(), out.end_time_s, counters)
    if until is not None:
        assert out.end_time_s == until
    # the transition log is written in time order
    times = [t for t, _, frm, to in out.recorder.transitions]
    bad = [(a, b) for a, b in itertools.pairwise(times) if b < a]
    assert not bad, bad[:3]
    assert counters["back_to_back"] > 0 and run.decode_runs > 0, (counters, run.decode_runs)
    if name == "light_load":  # replicas go idle between requests and get woken
        assert counters["idle_gaps"] > 20, counters


def test_equal_time_arrivals_keep_request_order():
    """Bursts of requests with the same arrival time are queued in request-id order (FCFS),
    so the first-scheduled times are non-decreasing in (arrival, id); two runs agree."""
    rows = []
    for burst_t in (0.0, 1.0, 1.0 + 1e-9):
        for _ in range(40):
            rows.append((burst_t, 200 + 37 * (len(rows) % 7), 20 + len(rows) % 13))
    specs = [spec(i, t, p, o) for i, (t, p, o) in enumerate(rows)]
    sc = make_scenario({"scheduler": {"max_num_seqs": 6}, "kv_cache": {"num_gpu_blocks": 300}})
    a = run_sim(sc, specs).requests()
    b = run_sim(sc, specs).requests()
    assert a.equals(b)
    assert (a.status == "completed").all()
    order = a.sort_values(["arrival_time_s", "request_id"])
    fs = order.first_scheduled_time_s.to_numpy()
    assert (np.diff(fs) >= 0).all()
    # non-vacuity: simultaneous arrivals really waited for each other
    assert (a.first_scheduled_time_s > a.arrival_time_s).sum() > 60
    assert a.groupby("arrival_time_s").size().max() == 40


def test_running_cancellation_logged_in_time_order():
    # request 0: a 2000-token prompt chunked 256 tokens per step, cancelled mid-step 3;
    # request 1 arrives during that step, before it ends
    sc = make_scenario({"scheduler": {"max_num_batched_tokens": 256}})
    specs = [spec(0, 0.0, 2000, 10, cancel_after_s=0.02), spec(1, 0.021, 100, 10)]
    out = run_sim(sc, specs)
    steps = out.steps()
    # the cancel time (0.02 s) and request 1's arrival (0.021 s, logged first) both fall
    # inside the third step
    cancel_t, arrival_1 = specs[0].cancel_after_s, specs[1].arrival_time_s
    assert steps.start_time_s[2] < cancel_t < arrival_1 < steps.end_time_s[2]
    tr = out.recorder.transitions
    assert ("running", "cancelled") in [(f, t) for _, _, f, t in tr]
    times = [t for t, *_ in tr]
    assert times == sorted(times)
