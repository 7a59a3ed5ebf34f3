"""A fast-forwarded decode run priced a segment at a time (``simulator.engine.loop._run_jump``)
gives the outputs of the same run priced whole at its start, and its end keeps its place among
events at the same time (``simulator.engine.event_slots``)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import simpy
from helpers import make_scenario, run_sim, synthetic_workload

from simulator.engine import loop
from simulator.engine.event_slots import reserve, trigger_at


# ------------------------------------------------------------------ the kept place in the order
def _order(kept: bool) -> list[str]:
    """Events at t = 5 scheduled before, at and after a run start at t = 1: the run's end
    scheduled then (a plain time-out) or later, at t = 3, in the place kept for it."""
    env = simpy.Environment()
    seen: list[str] = []

    def mark(name):
        return lambda _ev: seen.append(name)

    env.timeout(5.0).callbacks.append(mark("before"))

    def run():
        yield env.timeout(1.0)
        slot = reserve(env) if kept else None
        if not kept:
            env.timeout(4.0).callbacks.append(mark("run end"))
        env.timeout(4.0).callbacks.append(mark("after"))
        yield env.timeout(2.0)
        env.timeout(2.0).callbacks.append(mark("later"))
        if kept:
            trigger_at(env, slot, 5.0, mark("run end"))

    env.process(run())
    env.run()
    return seen


def test_a_kept_slot_runs_where_a_timeout_scheduled_then_would():
    assert _order(kept=False) == ["before", "run end", "after", "later"]
    assert _order(kept=True) == _order(kept=False)


def test_trigger_at_refuses_a_time_before_the_clock_and_reserve_needs_simpy_4():
    env = simpy.Environment(10.0)
    with pytest.raises(ValueError, match="before the clock"):
        trigger_at(env, reserve(env), 9.0, lambda _ev: None)
    assert reserve(object()) is None


def test_another_simpy_major_version_prices_runs_whole(monkeypatch):
    import simulator.engine.event_slots as slots
    assert slots.KNOWN_SIMPY  # the SimPy this project installs (4.x)
    env = simpy.Environment()
    assert reserve(env) is not None
    monkeypatch.setattr(slots, "KNOWN_SIMPY", False)
    assert reserve(env) is None


# ------------------------------------------------------------------ the engine
def _tables(out):
    v, w = out.recorder.itl_samples()
    return out.requests(), out.steps().reset_index(drop=True), np.sort(np.repeat(v, w))


@pytest.mark.parametrize("policy", ["kv_cache_utilization", None])
def test_segmented_pricing_equals_pricing_whole_runs(monkeypatch, policy):
    # long outputs (runs of hundreds of steps) on two replicas behind least-outstanding, cut
    # by arrivals; an autoscaler reading every replica's KV blocks in use mid-run
    # (Jump.kv_blocks_at, which prices what it reads) and a stop while runs are in flight
    over = {"cluster": {"num_replicas": 2, "router": "least_outstanding"},
            "kv_cache": {"num_gpu_blocks": 2000}}
    if policy is not None:
        over["cluster"]["autoscale"] = {
            "min_replicas": 1, "max_replicas": 3, "policy": policy, "target": 0.05,
            "interval_s": 0.7, "window_s": 1, "scale_up_cooldown_s": 2,
            "scale_down_cooldown_s": 3, "cold_start": {"cold_start_s": 1.5}}
    sc = make_scenario(over, workload=synthetic_workload(120, 6, output_median=400,
                                                         output_max=2000))
    calls = {"reserve": 0, "trigger_at": 0}

    def counting(name, fn):
        def wrapped(*a):
            calls[name] += 1
            return fn(*a)
        return wrapped

    monkeypatch.setattr(loop, "reserve", counting("reserve", reserve))
    monkeypatch.setattr(loop, "trigger_at", counting("trigger_at", trigger_at))
    lazy = run_sim(sc, until_s=40.0)
    # non-vacuous: many runs priced in segments, some of them to their end
    assert calls["reserve"] >= 20 and calls["trigger_at"] >= 5, calls
    monkeypatch.setattr(loop, "reserve", lambda env: None)  # every run priced whole at once
    whole = run_sim(sc, until_s=40.0)
    for a, b in zip(_tables(lazy), _tables(whole)):
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        else:
            assert np.array_equal(a, b)
    assert lazy.end_time_s == whole.end_time_s
    if policy is not None:
        assert lazy.autoscale["events"] == whole.autoscale["events"]
        assert len(lazy.autoscale["events"]) >= 2


def test_ties_on_a_binary_clock_keep_the_order_of_whole_runs(monkeypatch):
    # every step takes 2**-6 s and every arrival and autoscaler evaluation falls on that grid:
    # float sums are exact, so arrivals, step ends, segment ends and evaluations coincide
    # (the order of events at one instant decides the outputs here)
    from helpers import specs_from_rows
    rng = np.random.default_rng(5)
    grid = 2.0 ** -6
    rows = [(float(t) * grid, int(p), int(o)) for t, p, o in
            zip(np.sort(rng.integers(0, 1500, 90)), rng.integers(5, 60, 90),
                rng.integers(20, 700, 90))]
    sc = make_scenario({
        "perf": {"source": "constant", "constant": {"step_s": grid}},
        "kv_cache": {"num_gpu_blocks": 600},
        "cluster": {"num_replicas": 2, "router": "least_outstanding", "autoscale": {
            "min_replicas": 1, "max_replicas": 3, "policy": "kv_cache_utilization",
            "target": 0.1, "interval_s": 16 * grid, "window_s": 32 * grid,
            "scale_up_cooldown_s": 64 * grid, "scale_down_cooldown_s": 128 * grid,
            "cold_start": {"cold_start_s": 48 * grid}}}})
    specs = specs_from_rows(rows)
    lazy = run_sim(sc, specs)
    monkeypatch.setattr(loop, "reserve", lambda env: None)
    whole = run_sim(sc, specs)
    stepped = run_sim(sc, specs, fast_forward=False)
    assert len(lazy.autoscale["events"]) >= 2
    for other in (whole, stepped):
        pd.testing.assert_frame_equal(lazy.requests(), other.requests(), check_exact=True)
        assert lazy.autoscale["events"] == other.autoscale["events"]
    pd.testing.assert_frame_equal(_tables(lazy)[1], _tables(whole)[1], check_exact=True)


def test_a_run_whose_last_steps_take_no_time_ends_where_a_whole_run_would(monkeypatch):
    # steps of one ulp below 4096 s: the clock stops advancing at 4096 s, so every later step
    # of a run takes no time and the run ends at the instant its last segment's wake-up
    # runs; a cancellation due at that instant (cancel_after_s = 0 for a request arriving
    # then) must come after the run's end, as when the run is priced whole or stepped (found
    # by review: the segments' wake-ups had ids of their own, later than the run's slot)
    from helpers import specs_from_rows
    u, t = 2.0 ** -41, 4096.0
    sc = make_scenario({"perf": {"source": "constant", "constant": {"step_s": u}},
                        "cluster": {"num_replicas": 2, "router": "round_robin"}})
    specs = specs_from_rows([(t - 49 * u, 100, 120), (t - 47 * u, 8, 100),
                             (t, 8, 10, {"cancel_after_s": 0.0})])
    lazy = run_sim(sc, specs)
    stepped = run_sim(sc, specs, fast_forward=False)
    monkeypatch.setattr(loop, "reserve", lambda env: None)
    whole = run_sim(sc, specs)
    assert whole.requests().loc[2, "first_scheduled_time_s"] == t  # not cancelled before
    for other in (whole, stepped):
        pd.testing.assert_frame_equal(lazy.requests(), other.requests(), check_exact=True)
    pd.testing.assert_frame_equal(_tables(lazy)[1], _tables(whole)[1], check_exact=True)
