"""The autoscaler's decision rule (HPA's) and a replica's cold start, by hand."""
from __future__ import annotations

import math
import random

import pytest

from simulator.cluster.autoscale import (
    DEFAULT_CUDA_GRAPH_CAPTURE_S,
    DEFAULT_ENGINE_STARTUP_S,
    DEFAULT_STORAGE_READ_BANDWIDTH_BYTES_PER_S,
    AutoscaleController,
    cold_start,
)
from simulator.scenario.autoscale import AutoscaleConfig, ColdStartConfig


def _ctl(**kw) -> AutoscaleController:
    base = {"min_replicas": 1, "max_replicas": 10, "policy": "running_requests", "target": 4.0,
            "interval_s": 15.0, "window_s": 60.0, "scale_up_cooldown_s": 0.0,
            "scale_down_cooldown_s": 0.0}
    base.update(kw)
    return AutoscaleController(AutoscaleConfig(**base), 0.9)


def test_additive_metric_recommends_ceil_total_over_target():
    c = _ctl()
    c.add_sample(15.0, 13.0)          # 13 outstanding: ceil(13 / 4) = 4
    assert c.recommend(2) == 4
    c.add_sample(30.0, 3.0)           # window mean (13 + 3) / 2 = 8: ceil(8 / 4) = 2
    assert c.metric() == 8.0 and c.recommend(3) == 2
    c.add_sample(90.0, 41.0)          # the 15 s and 30 s samples left the 60 s window
    assert c.metric() == 41.0 and c.recommend(1) == 10  # ceil(41 / 4) = 11, clamped to 10


def test_tolerance_holds_the_count():
    c = _ctl()
    c.add_sample(15.0, 8.4)           # 8.4 / (4 x 2) = 1.05: within 0.1
    assert c.recommend(2) == 2
    c.add_sample(75.0, 9.0)           # 9 / 8 = 1.125: ceil(9 / 4) = 3
    assert c.recommend(2) == 3


def test_queue_delay_is_proportional_to_the_current_count():
    c = _ctl(policy="queue_delay", target=2.0)
    c.add_sample(15.0, 5.0)           # ceil(3 x 5 / 2) = 8
    assert c.recommend(3) == 8


def test_slo_attainment_steps_by_scale_step():
    c = _ctl(policy="slo_attainment", target=None, scale_step=2)
    assert c.recommend(4) == 4        # nothing finished yet: no reading
    c.add_sample(15.0, 8.0, 10.0)     # 80% < 90%: up by 2
    assert c.recommend(4) == 6
    c.add_sample(30.0, 10.0, 10.0)    # window: 18 / 20 = 90% >= 90%: down by 2
    assert c.recommend(4) == 2


def test_scale_down_waits_for_a_whole_stabilisation_window():
    c = _ctl(scale_down_cooldown_s=60.0, window_s=1.0)
    n = 4
    decisions = []
    for t in (15.0, 30.0, 45.0, 60.0, 75.0, 90.0):
        c.add_sample(t, 4.0)          # recommends 1
        n = c.decide(t, n)
        decisions.append(n)
    # the history reaches back 60 s only at 75 s (first recommendation at 15 s)
    assert decisions == [4, 4, 4, 4, 1, 1]


def test_scale_down_takes_the_largest_recent_recommendation():
    c = _ctl(scale_down_cooldown_s=30.0, window_s=1.0)
    for t, load in ((15.0, 12.0), (30.0, 4.0), (45.0, 8.0)):
        c.add_sample(t, load)
        c.decide(t, 4)
    # recommendations 3, 1, 2 at 15, 30, 45; at 45 the window [15, 45] holds all: max 3
    assert c.decide(45.0, 4) == 3


def test_scale_up_step_limit_defaults_to_hpa():
    c = _ctl(window_s=1.0)
    c.add_sample(15.0, 40.0)          # wants 10 from 1: HPA allows max(4, 100%) = 4 more
    assert c.decide(15.0, 1) == 5
    c2 = _ctl(window_s=1.0, max_scale_up_step=2)
    c2.add_sample(15.0, 40.0)
    assert c2.decide(15.0, 1) == 3


def test_cold_start_is_the_sum_of_its_parts():
    w = 16e9
    cs = cold_start(ColdStartConfig(), w)
    assert cs.basis == "parts"
    assert cs.total_s == pytest.approx(w / DEFAULT_STORAGE_READ_BANDWIDTH_BYTES_PER_S
                                       + DEFAULT_ENGINE_STARTUP_S + DEFAULT_CUDA_GRAPH_CAPTURE_S)
    cs = cold_start(ColdStartConfig(storage_read_bandwidth_bytes_per_s=4e9,
                                    engine_startup_s=10, cuda_graph_capture_s=5), w)
    assert cs.total_s == 16e9 / 4e9 + 10 + 5 == 19.0
    cs = cold_start(ColdStartConfig(cold_start_s=90), w)
    assert cs.total_s == 90.0 and cs.basis == "stated"


def test_windows_match_a_direct_recomputation():
    # the running sums and monotonic queues against the definition, recomputed from every
    # sample and recommendation kept (random loads, 2,000 evaluations)
    rnd = random.Random(7)
    cfg = {"window_s": 45.0, "scale_up_cooldown_s": 30.0, "scale_down_cooldown_s": 120.0}
    c = _ctl(**cfg)
    samples, recs, n = [], [], 3
    for k in range(1, 2001):
        t = 15.0 * k
        load = rnd.choice([0.0, 3.0, 7.5, 12.0, 20.0, 41.0]) * rnd.random()
        c.add_sample(t, load)
        samples.append((t, load))
        win = [v for s, v in samples if s > t - cfg["window_s"]]
        assert c.metric() == pytest.approx(sum(win) / len(win), rel=1e-9, abs=1e-9)
        rec = c.recommend(n)
        recs.append((t, rec))
        want = n
        if 15.0 <= t - cfg["scale_up_cooldown_s"]:  # the first recommendation: 15 s
            up = min(r for s, r in recs if s >= t - cfg["scale_up_cooldown_s"])
            if up > n:
                want = min(up, n + max(4, n))
        if want == n and 15.0 <= t - cfg["scale_down_cooldown_s"]:
            down = max(r for s, r in recs if s >= t - cfg["scale_down_cooldown_s"])
            want = min(n, down)
        got = c.decide(t, n)
        assert got == want, (k, got, want)
        n = got
    assert not math.isnan(c.metric())
