"""What the workload's post-processing does to multi-turn sessions: a time window keeps the
sessions that start in it (whole), ``max_requests`` cuts at a turn, ``rate_scale`` scales
every arrival but not think times, share tables label whole sessions, patience is per turn,
and the options that would break a session (a clipped answer, parallel sampling, a declared
shared prefix on a turn) are refused naming the key and the line."""
from __future__ import annotations

import warnings
from collections import Counter

import pytest

from simulator.workload import WorkloadConfig, WorkloadError, WorkloadWarning, load_workload

HEAD = ("arrival_time_s,num_prompt_tokens,num_output_tokens,session_id,turn_index,"
        "think_time_s,slice\n")
ROWS = ["0.0,100,20,1,0,,chat",      # line 2
        "4.0,150,20,1,1,2.0,chat",   # line 3
        "8.0,200,20,1,2,2.0,chat",   # line 4
        "3.0,50,10,,,,batch",        # line 5: a request alone
        "5.0,100,20,2,0,,chat",      # line 6
        "6.0,150,20,2,1,0.5,chat",   # line 7
        "12.0,100,20,3,0,,chat",     # line 8
        "20.0,150,20,3,1,1.0,chat"]  # line 9


@pytest.fixture
def trace(write):
    return write("t.csv", HEAD + "\n".join(ROWS) + "\n")


def load(path, seed=0, **kw):
    return load_workload(WorkloadConfig.model_validate({"trace": str(path), **kw}), seed)


def synthetic_sessions(rate_rps: float, num_sessions: int, turns: dict, think_time_s: float,
                       answer_tokens: int) -> dict:
    """A ``workload.synthetic_sessions`` section: Poisson session arrivals, fixed think time,
    10-token messages and fixed answers."""
    return {"arrival": {"process": "poisson", "rate_rps": rate_rps},
            "num_sessions": num_sessions, "turns": turns,
            "think_time": {"dist": "fixed", "value": think_time_s},
            "message_tokens": {"dist": "fixed", "value": 10},
            "answer_tokens": {"dist": "fixed", "value": answer_tokens}}


def key(reqs):
    return [(r.arrival_time_s, r.session_id, r.turn_index) for r in reqs]


@pytest.mark.parametrize("window, kept", [
    # session 1 starts at 0 (dropped, though its turns at 4 and 8 s fall inside); the
    # request alone at 3 s and session 2 (5, 6 s) are kept, re-based to t - 3
    ((3.0, 10.0), [(0.0, None, 0), (2.0, 2, 0), (3.0, 2, 1)]),
    # sessions 2 and 3 start inside: kept whole, session 3's turn at 20 s too
    ((4.0, 13.0), [(1.0, 2, 0), (2.0, 2, 1), (8.0, 3, 0), (16.0, 3, 1)]),
])
def test_a_window_keeps_the_sessions_that_start_in_it(trace, session_contract, window, kept):
    reqs = load(trace, start_s=window[0], end_s=window[1])
    assert key(reqs) == kept
    session_contract(reqs)


def test_max_requests_cuts_at_a_turn_and_keeps_each_session_a_prefix(trace, session_contract):
    reqs = load(trace, max_requests=4)
    # the first 4 by arrival: 0 (1/0), 3 (alone), 4 (1/1), 5 (2/0)
    assert key(reqs) == [(0.0, 1, 0), (3.0, None, 0), (4.0, 1, 1), (5.0, 2, 0)]
    session_contract(reqs)


def test_rate_scale_divides_every_arrival_but_not_the_think_times(trace):
    reqs = load(trace, rate_scale=2.0)
    assert [r.arrival_time_s for r in reqs] == [0.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0]
    assert [r.think_time_s for r in reqs] == [0.0, 0.0, 2.0, 0.0, 0.5, 2.0, 0.0, 1.0]


def test_shares_label_whole_sessions_in_exact_proportions(trace):
    with pytest.warns(WorkloadWarning, match="tenant, priority assigned at random"):
        reqs = load(trace, tenants={"a": 0.5, "b": 0.5}, priorities={0: 0.25, 1: 0.75})
    units = {}
    for r in reqs:
        u = ("s", r.session_id) if r.session_id is not None else ("r", r.request_id)
        units.setdefault(u, set()).add((r.tenant, r.priority))
    assert all(len(v) == 1 for v in units.values())      # one label per session
    labels = [next(iter(v)) for v in units.values()]
    # 3 sessions + 1 request alone = 4 units: 2 / 2 tenants, 1 / 3 priorities
    assert Counter(t for t, _ in labels) == {"a": 2, "b": 2}
    assert Counter(p for _, p in labels) == {0: 1, 1: 3}


def test_synthetic_sessions_get_exact_session_shares():
    sessions = synthetic_sessions(1.0, 40, {"dist": "uniform", "low": 1, "high": 5}, 1.0, 5)
    reqs = load_workload(WorkloadConfig.model_validate(
        {"synthetic_sessions": sessions, "tenants": {"a": 0.25, "b": 0.75}}), 4)
    by = {}
    for r in reqs:
        by.setdefault(r.session_id, set()).add(r.tenant)
    assert all(len(v) == 1 for v in by.values())
    # floor(0.25 x 40) = 10 sessions for a, 30 for b
    assert Counter(next(iter(v)) for v in by.values()) == {"a": 10, "b": 30}


def test_patience_is_drawn_for_every_turn(trace):
    with pytest.warns(WorkloadWarning, match="cancel_after_s assigned at random"):
        reqs = load(trace, patience={"dist": "fixed", "value": 30.0})
    assert [r.cancel_after_s for r in reqs] == [30.0] * 8


def test_a_declared_max_tokens_that_would_clip_a_turn_is_refused(trace):
    with pytest.raises(WorkloadError, match=rf"^{trace}:2: workload.max_tokens=15 would clip "
                                            r"the answer of 7 session turns \(turn 0 of "
                                            r"session 1: 20 tokens\), which later turns "
                                            "repeat as their prompt; raise it to at least 20, "
                                            "or remove it$"):
        load(trace, max_tokens=15)
    reqs = load(trace, max_tokens=25)  # above every output: declared, nothing clipped
    assert {r.max_tokens for r in reqs} == {25}
    assert [r.num_output_tokens for r in reqs] == [20, 10, 20, 20, 20, 20, 20, 20]


def test_a_max_tokens_below_synthetic_answers_names_the_answer_bound():
    sessions = synthetic_sessions(1.0, 1, {"dist": "fixed", "value": 3}, 1.0, 30)
    with pytest.raises(WorkloadError, match=r"^synthetic sessions: workload.max_tokens=20 would "
                                            r"clip the answer of 3 session turns .*bound "
                                            r"workload.synthetic_sessions.answer_tokens.max"):
        load_workload(WorkloadConfig.model_validate(
            {"synthetic_sessions": sessions, "max_tokens": 20}), 0)


def test_parallel_sampling_is_refused_on_session_turns_only(trace):
    with pytest.raises(WorkloadError, match=r"parallel_sampling \(n=2\) would apply to 7 "
                                            "session turns"):
        load(trace, parallel_sampling={"n": 2})
    reqs = load(trace, parallel_sampling={"n": 2, "slices": ["batch"]})
    assert [(r.session_id, r.n) for r in reqs if r.n > 1] == [(None, 2)]


def test_a_shared_prefix_on_a_session_turn_is_refused(trace):
    with pytest.raises(WorkloadError, match=rf"^{trace}:2: shared prefix 'sys' matches turn 0 "
                                            "of session 1, whose prefix ids its session's "
                                            "history sets"):
        load(trace, shared_prefixes=[{"name": "sys", "num_tokens": 8}])
    reqs = load(trace, shared_prefixes=[{"name": "sys", "num_tokens": 8, "slice": "batch"}])
    assert [r.prefix_block_tokens for r in reqs if r.session_id is None] == [8]


def test_closed_loop_warns_about_later_turns_without_think_time(write):
    p = write("t.csv", HEAD + "0,10,5,1,0,,c\n1,20,5,1,1,,c\n2,30,5,1,2,1.5,c\n")
    with pytest.warns(WorkloadWarning, match=rf"{p}: 1 of 2 later session turns have no "
                                             "think_time_s"):
        reqs = load(p)
    assert [r.think_time_s for r in reqs] == [0.0, 0.0, 1.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # open loop replays the recorded times: no warning
        load(p, session_arrival="open")


def test_a_synthetic_window_keeps_whole_sessions():
    sessions = synthetic_sessions(2.0, 30, {"dist": "fixed", "value": 3}, 10.0, 5)
    reqs = load_workload(WorkloadConfig.model_validate(
        {"synthetic_sessions": sessions, "start_s": 2.0, "end_s": 6.0}), 1)
    starts = [r.arrival_time_s for r in reqs if r.turn_index == 0]
    assert starts and all(0.0 <= t < 4.0 for t in starts)
    assert Counter(r.session_id for r in reqs) == {s: 3 for s in
                                                   {r.session_id for r in reqs}}
    assert max(r.arrival_time_s for r in reqs) > 20.0  # turn 2: 20 s after its start
