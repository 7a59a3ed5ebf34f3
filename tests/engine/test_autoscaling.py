"""An autoscaled pool in the engine (``cluster.autoscale``): when replicas are added and serve,
draining without loss, and GPU-hours as the integral of the replicas held. Every expected
time is derived by hand from the HPA rule (simulator/scenario/autoscale.py): evaluations every
``interval_s`` from the first arrival, the metric the mean of the samples within
``window_s``, a scale-up once every recommendation of the last ``scale_up_cooldown_s`` asks
for more, service after ``cold_start_s``."""
from __future__ import annotations

import math

import pytest
from helpers import make_scenario, run_sim, specs_from_rows

from simulator.runs.scenario import run_scenario
from simulator.scenario.errors import ScenarioError

STEP_S = 0.01  # every engine step (perf.source: constant)
COLD_S = 50.0


def _scenario(autoscale: dict, *, num_replicas: int = 1, tp: int = 1, **over):
    base = {"min_replicas": 1, "max_replicas": 8, "policy": "running_requests", "target": 4,
            "interval_s": 10, "window_s": 10, "scale_up_cooldown_s": 30,
            "scale_down_cooldown_s": 60, "cold_start": {"cold_start_s": COLD_S}}
    base.update(autoscale)
    return make_scenario({"perf": {"source": "constant", "constant": {"step_s": STEP_S}},
                          "cluster": {"num_replicas": num_replicas,
                                      "tensor_parallel_size": tp, "autoscale": base},
                          "cost": {"usd_per_gpu_hour": 2.0}, **over})


def _burst(extra=()):
    """One request at 0.5 s, then 20 at 95 s: each decodes 20,000 tokens at one token per
    10 ms step (200 s), so 21 requests stay outstanding on replica 0 from 95 s to ~295 s."""
    return specs_from_rows([(0.5, 10, 20000)] + [(95.0 + 0.001 * i, 10, 20000)
                                                 for i in range(20)] + list(extra))


def test_step_change_scales_up_after_cooldown_plus_cold_start():
    # evaluations at 10.5, 20.5, ...; the first to see 21 outstanding is 100.5; the
    # recommendation ceil(21 / 4) = 6 must hold over [t - 30, t]: first at 130.5; HPA's
    # step limit max(4, 100% of 1) = 4 adds 4 (5 committed: 21 / (4 x 5) = 1.05 is within
    # the 0.1 tolerance, so no more); they serve at 130.5 + 50 = 180.5
    late = [(150.0, 10, 5), (185.0, 10, 5), (185.1, 10, 5), (185.2, 10, 5)]
    out = run_sim(_scenario({}, ), _burst(late))
    ups = [e for e in out.autoscale["events"] if e["action"] == "scale_up"]
    assert [e["time_s"] for e in ups] == [130.5] * 4
    spans = out.replica_spans
    assert [s.replica_id for s in spans] == [0, 1, 2, 3, 4]
    for s in spans[1:]:
        assert s.provisioned_s == 130.5 and s.serving_s == 130.5 + COLD_S
        assert math.isinf(s.drain_s) and math.isinf(s.released_s)
    req = out.requests().set_index("request_id")
    assert req.loc[21, "replica_id"] == 0          # 150 s: the new replicas still start
    # 185 s on: round robin over the five serving replicas (the counter went on at 0)
    assert sorted(req.loc[[22, 23, 24], "replica_id"]) != [0, 0, 0]
    assert (req["status"] == "completed").all()


def test_a_load_shorter_than_the_cooldown_adds_nothing():
    # 20 requests of 1,000 tokens (10 s) at 95 s: outstanding at the evaluations of 100.5
    # only (finished by ~105 s): the recommendations of [t - 30, t] are never all above 1
    rows = [(0.5, 10, 2000)] + [(95.0 + 0.001 * i, 10, 1000) for i in range(20)]
    out = run_sim(_scenario({}), specs_from_rows(rows))
    assert [e for e in out.autoscale["events"] if e["action"] == "scale_up"] == []
    assert len(out.replica_spans) == 1


def test_scale_up_cooldown_zero_acts_at_the_first_evaluation():
    out = run_sim(_scenario({"scale_up_cooldown_s": 0}), _burst())
    ups = [e["time_s"] for e in out.autoscale["events"] if e["action"] == "scale_up"]
    assert ups == [100.5] * 4


def _two_loaded_replicas(drain: str):
    """Two replicas of one sequence each (max_num_seqs 1), round robin: 2 requests of 2,000
    tokens (20 s) at 0.5 s, then 8 of 100 tokens (1 s); a target of 100 requests per replica recommends 1 replica at the first
    evaluation (scale-down stabilisation 0): replica 1 (the tie's newest) drains at 10.5 s
    holding 1 running and 4 queued."""
    sc = _scenario({"target": 100, "scale_down_cooldown_s": 0, "drain": drain,
                    "min_replicas": 1, "max_replicas": 2}, num_replicas=2,
                   scheduler={"max_num_seqs": 1})
    rows = [(0.5, 10, 2000)] * 2 + [(9.0 + 0.01 * i, 10, 100) for i in range(8)]
    return sc, specs_from_rows(rows)


@pytest.mark.parametrize("drain", ["finish", "migrate"])
def test_scale_down_loses_no_request(drain):
    sc, specs = _two_loaded_replicas(drain)
    out = run_sim(sc, specs)
    req = out.requests()
    assert len(req) == len(specs) and (req["status"] == "completed").all()
    downs = [e for e in out.autoscale["events"] if e["action"] == "scale_down"]
    assert [(e["time_s"], e["replica_id"]) for e in downs] == [(10.5, 1)]
    span = out.replica_spans[1]
    assert span.drain_s == 10.5
    on1 = req.loc[req["replica_id"] == 1]
    # released when its last request finished, not before
    assert span.released_s == pytest.approx(on1["finish_time_s"].max(), abs=0)
    if drain == "finish":  # replica 1 keeps its 5 (ids 1, 3, 5, 7, 9 by round robin)
        assert sorted(on1["request_id"]) == [1, 3, 5, 7, 9]
    else:  # its 4 queued requests moved to replica 0; the running one finished there
        assert sorted(on1["request_id"]) == [1]
        assert span.released_s < on1["finish_time_s"].max() + 1e-9


def test_gpu_hours_are_the_integral_of_the_replicas_held():
    res = run_scenario(_scenario({}, tp=2), specs=_burst(), write=False)
    sm = res.summary
    t0, t1 = sm["window_start_s"], sm["window_end_s"]
    assert t0 == 0.5
    # replica 0 throughout, four more from 130.5 s; 2 GPUs each
    by_hand = ((t1 - t0) + 4 * (t1 - 130.5)) * 2 / 3600
    assert sm["gpu_hours"] == pytest.approx(by_hand, rel=1e-12)
    assert sm["cost_usd"] == pytest.approx(by_hand * 2.0, rel=1e-12)
    assert sm["num_gpus"] == 10  # the most held at once
    a = sm["autoscale"]
    assert a["gpu_hours"] == pytest.approx(by_hand, rel=1e-12)
    assert a["replicas_over_time"] == {"time_s": [0.5, 130.5, 180.5], "held": [1, 5, 5],
                                       "serving": [1, 1, 5]}
    assert a["num_scale_ups"] == 4 and a["peak_replicas_held"] == 5


def test_deterministic():
    sc, specs = _two_loaded_replicas("migrate")
    a = run_sim(sc, specs).requests()
    b = run_sim(sc, specs).requests()
    assert a.equals(b)


@pytest.mark.parametrize(("cluster", "needle"), [
    ({"num_replicas": 9}, "must lie within"),
    ({"autoscale": {"max_replicas": 1, "min_replicas": 2}}, "max_replicas (1) must be >="),
    ({"autoscale": {"policy": "queue_delay", "target": None}}, "target is required"),
    ({"autoscale": {"policy": "kv_cache_utilization", "target": 2}}, "fraction"),
    ({"autoscale": {"policy": "cpu"}}, "running_requests"),
])
def test_schema_errors_name_the_key(cluster, needle):
    a = {"max_replicas": 8, "policy": "running_requests", "target": 4}
    a.update(cluster.pop("autoscale", {}))
    with pytest.raises((ScenarioError, ValueError)) as e:
        make_scenario({"cluster": {"autoscale": a, **cluster}})
    assert needle in str(e.value)


def test_lockstep_and_fallback_are_refused():
    a = {"max_replicas": 4, "target": 4}
    with pytest.raises((ScenarioError, ValueError), match="lockstep"):
        make_scenario({"cluster": {"autoscale": a, "num_replicas": 2, "dp_lockstep": True}})


def test_a_cold_start_cancelled_is_paid_and_never_serves():
    # 20 requests of 1,500 tokens at 95 s, decoded together at one token per 10 ms step: done
    # by ~110.02 s; no cooldowns: the evaluation of 100.5 s sees 21 outstanding and starts 4
    # replicas (50 s cold start), the one of 110.5 s sees 1 and drains to 1: the four starts
    # are cancelled at 110.5 s, held 10 s each, never serving
    rows = [(0.5, 10, 20000)] + [(95.0 + 0.001 * i, 10, 1500) for i in range(20)]
    sc = _scenario({"scale_up_cooldown_s": 0, "scale_down_cooldown_s": 0})
    res = run_scenario(sc, specs=specs_from_rows(rows), write=False)
    a = res.summary["autoscale"]
    acts = [(e["time_s"], e["action"]) for e in a["events"]]
    assert acts == [(100.5, "scale_up")] * 4 + [(110.5, "cancel_start")] * 4
    spans = res.sim.replica_spans[1:]
    assert all(s.provisioned_s == 100.5 and s.released_s == 110.5 and math.isinf(s.serving_s)
               for s in spans)
    assert [r["serving_s"] for r in a["replicas"][1:]] == [None] * 4
    t0, t1 = res.summary["window_start_s"], res.summary["window_end_s"]
    assert res.summary["gpu_hours"] == pytest.approx(((t1 - t0) + 4 * 10.0) / 3600, rel=1e-12)
    assert a["mean_replicas_serving"] == pytest.approx(1.0)
    # arrivals during the abandoned starts count as arriving during a cold start; after, not
    assert a["cold_start_requests"] == 0  # none arrived in [100.5, 110.5)
