"""Invariant 2 (DESIGN.md): lifecycle.

Only legal status transitions happen (``check_transitions=True`` makes the recorder raise on
any other), the transition log of each request is one unbroken chain from ``new`` to the
status it ends in, and timestamps are causal:
``arrival <= first scheduled <= first token <= finish`` (and the exit time of a rejected or
cancelled request is not before its arrival).

Non-vacuity: over the scenario suite the log contains every legal edge that the engine can
take (preemption running -> waiting, queue-timeout and cancellation of waiting requests,
cancellation of running ones, completion, rejection at admission and while running), and a
deliberately injected illegal transition is shown to raise inside ``simulate``.
"""
from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict

import pytest
from helpers import SUITE, make_scenario, run_sim, spec, suite_run, synthetic_workload

from simulator.metrics.records import IllegalTransition, RunRecorder
from simulator.scheduling.continuous import ContinuousScheduler
from simulator.scheduling.state import COMPLETED, LEGAL_TRANSITIONS, ReqState

_EDGES: Counter = Counter()


def _check_lifecycle(out, until):
    df = out.requests().set_index("request_id")
    log = defaultdict(list)
    for t, rid, frm, to in out.recorder.transitions:
        assert (frm, to) in LEGAL_TRANSITIONS
        log[rid].append((t, frm, to))
        _EDGES[(frm, to)] += 1
    assert set(log) == set(df.index)
    for rid, chain in log.items():
        row = df.loc[rid]
        assert chain[0][1] == "new"
        for (_, _, to), (_, frm, _) in itertools.pairwise(chain):
            assert frm == to, (rid, chain)  # each transition starts where the last ended
        assert chain[-1][2] == row.status, (rid, chain, row.status)
        # final states are final: nothing after them
        assert all(c[1] not in ("completed", "rejected", "cancelled") for c in chain)
        # the first move to running happens at the first scheduled time
        runs = [t for t, _, to in chain if to == "running"]
        if runs and row.get("tier_hit_tokens", 0) > 0:
            # first scheduled for a KV load from an offload tier: it runs once that landed
            # (at once for a synchronous load, which the step itself waits for)
            assert runs[0] >= row.first_scheduled_time_s
        elif runs:
            assert runs[0] == row.first_scheduled_time_s
        else:
            assert math.isnan(row.first_scheduled_time_s)
        assert row.num_preemptions == sum(1 for _, f, to in chain
                                          if (f, to) == ("running", "waiting"))

    a = df.arrival_time_s
    s = df.first_scheduled_time_s
    f = df.first_token_time_s
    e = df.finish_time_s
    x = df.exit_time_s
    sched = s.notna()
    assert (a[sched] <= s[sched]).all()
    tok = f.notna()
    assert (s[tok] < f[tok]).all()  # a step takes positive time
    assert sched[tok].all()
    done = df.status == "completed"
    assert (f[done] <= e[done]).all()
    assert tok[done].all()
    assert (x[done] == e[done]).all()
    ended = df.status.isin(["rejected", "cancelled"])
    assert (a[ended] <= x[ended]).all()
    assert e[ended].isna().all()
    inflight = df.status.isin(["waiting", "running"])
    assert x[inflight].isna().all()
    if until is not None:
        assert (x[x.notna()] <= until).all()
    # a request that emitted has a first token; one that did not has none
    assert (tok == (df.num_emitted_tokens > 0)).all()


@pytest.mark.parametrize("name", list(SUITE))
def test_lifecycle(name):
    run = suite_run(name)  # simulated with check_transitions=True: illegal moves raise
    _check_lifecycle(run.out, run.until)


def test_lifecycle_edges_exercised():
    """Non-vacuity across the suite: every edge the engine can take was taken."""
    _EDGES.clear()
    for name in SUITE:
        run = suite_run(name)
        _check_lifecycle(run.out, run.until)
    expected = {("new", "waiting"), ("new", "rejected"), ("waiting", "running"),
                ("running", "waiting"), ("running", "completed"), ("running", "rejected"),
                ("waiting", "cancelled"), ("running", "cancelled"), ("waiting", "rejected")}
    assert expected == LEGAL_TRANSITIONS
    missing = expected - set(_EDGES)
    assert not missing, missing


def test_recorder_rejects_illegal_transitions():
    rec = RunRecorder(check_transitions=True)
    r = ReqState(spec(0, 0.0, 10, 5))
    with pytest.raises(IllegalTransition):
        rec.transition(r, "running", 0.0)  # new -> running skips the queue
    rec.transition(r, "waiting", 0.0)
    rec.transition(r, "running", 1.0)
    rec.finish(r, 2.0, "completed", "")
    for to in ("running", "waiting", "completed", "cancelled"):
        with pytest.raises(IllegalTransition):
            rec.transition(r, to, 3.0)  # nothing leaves a final state
    assert [t[2:] for t in rec.transitions] == [("new", "waiting"), ("waiting", "running"),
                                                 ("running", "completed")]


@pytest.mark.pure_core
def test_illegal_transition_inside_simulate_raises(monkeypatch):
    """``simulate(check_transitions=True)`` is wired to the checking recorder: finishing a
    request twice (an injected scheduler bug) raises instead of passing silently."""
    orig = ContinuousScheduler.update

    def buggy_update(self, out, start, end):
        orig(self, out, start, end)
        for r in out.reqs:
            if r.status == COMPLETED:
                self.rec.finish(r, end, COMPLETED, "")

    monkeypatch.setattr(ContinuousScheduler, "update", buggy_update)
    sc = make_scenario(workload=synthetic_workload(20, 10))
    with pytest.raises(IllegalTransition):
        run_sim(sc, check_transitions=True)
