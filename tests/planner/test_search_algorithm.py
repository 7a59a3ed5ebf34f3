from __future__ import annotations

import math

import pytest

from simulator.planner.gates import check_gates
from simulator.planner.plan import pareto_front
from simulator.planner.search import find_capacity, replicas_for


def threshold_probe(limit: float, calls: list | None = None):
    def probe(s: float) -> dict:
        if calls is not None:
            calls.append(s)
        return {"feasible": s <= limit}
    return probe


@pytest.mark.parametrize("start", [0.1, 1.0, 3.7, 50.0])
def test_find_capacity_brackets_and_bisects(start):
    cap, recs, note = find_capacity(threshold_probe(3.7), start=start, rel_tol=0.05,
                                    max_probes=30)
    assert note == "converged"
    assert 3.7 / 1.05 <= cap <= 3.7
    # the reported capacity is a probed feasible scale
    assert any(r["rate_scale"] == cap and r["feasible"] for r in recs)
    infeasible = [r["rate_scale"] for r in recs if not r["feasible"]]
    assert min(infeasible) / cap - 1 <= 0.05 + 1e-12


def test_find_capacity_probe_count_is_logarithmic():
    calls: list = []
    find_capacity(threshold_probe(3.7, calls), start=1.0, rel_tol=0.1, max_probes=30)
    # 1, 2, 4 (bracket) then 3 bisections of a factor-2 bracket down to 10 %
    assert len(calls) == 6
    assert calls[:3] == [1.0, 2.0, 4.0]
    assert calls[3] == pytest.approx(math.sqrt(8.0))


def test_find_capacity_limits():
    cap, recs, note = find_capacity(threshold_probe(-1), start=1.0, min_scale=0.25)
    assert cap is None and note == "infeasible"
    assert [r["rate_scale"] for r in recs] == [1.0, 0.5, 0.25]
    cap, recs, note = find_capacity(threshold_probe(1e9), start=1.0, max_scale=8.0)
    assert cap == 8.0 and note == "at_max_scale"
    cap, recs, note = find_capacity(threshold_probe(3.7), start=1.0, rel_tol=1e-6,
                                    max_probes=5)
    assert note == "max_probes" and len(recs) == 5 and cap <= 3.7


def test_replicas_for():
    assert replicas_for(30.0, 10.0, 0.0) == 3
    assert replicas_for(30.0, 10.0, 0.1) == 4
    assert replicas_for(1.0, 10.0, 0.1) == 1
    assert replicas_for(33.0, 10.0, 0.0) == 4
    with pytest.raises(ValueError):
        replicas_for(1.0, 0.0, 0.1)


def _summary(att=0.95, chat=0.1, code=0.3, rejected=0, preempt=0, n=100):
    return {"num_requests": n, "slo_attainment": att, "num_rejected": rejected,
            "num_cancelled": 0, "num_preemptions": preempt,
            "by_slice": {"chat": {"ttft_s": {"p99": chat}}, "code": {"ttft_s": {"p99": code}}}}


def test_check_gates():
    slo = {"ttft_s": 0.25, "attainment_target": 0.9}
    gates = {"slo_attainment": True, "slice_ttft_p99": True, "slice_ttft_p99_s": {}}
    assert check_gates(_summary(code=0.2), gates, slo) == []
    assert check_gates(_summary(), gates, slo) == ["slice_ttft_p99[code]"]
    loose = dict(gates, slice_ttft_p99_s={"code": 0.5})
    assert check_gates(_summary(), loose, slo) == []
    assert check_gates(_summary(att=0.8, code=0.2), gates, slo) == ["slo_attainment"]
    assert check_gates(_summary(att=None, code=0.2), gates, slo) == ["slo_attainment"]
    off = {"slo_attainment": False, "slice_ttft_p99": False}
    assert check_gates(_summary(att=0.1, code=9), off, slo) == []
    g = dict(off, max_rejected_fraction=0.01, max_preemptions_per_request=0.1)
    assert check_gates(_summary(rejected=2, preempt=20), g, slo) == [
        "rejected_fraction", "preemptions_per_request"]
    # no TTFT bound anywhere: the slice gate has nothing to check
    assert check_gates(_summary(code=9), gates, {"attainment_target": 0.9}) == []


def test_pareto_front():
    pts = [{"x": 1, "y": 5}, {"x": 2, "y": 4}, {"x": 2, "y": 3}, {"x": 3, "y": 1},
           {"x": 0.5, "y": 5}, {"x": None, "y": 9}]
    front = pareto_front(pts, "x", "y")
    assert [(p["x"], p["y"]) for p in front] == [(1, 5), (2, 4), (3, 1)]
    assert pareto_front([], "x", "y") == []


def test_probes_that_run_out_before_any_failure_say_lower_bound():
    # every probe passes (1, 2, 4, 8): the capacity is at least 8, not bracketed
    cap, recs, note = find_capacity(threshold_probe(1e9), start=1.0, max_probes=4)
    assert cap == 8.0 and note == "lower_bound"
    assert all(r["feasible"] for r in recs) and len(recs) == 4
    # bracketed (a probe failed) but not converged: still max_probes
    cap, recs, note = find_capacity(threshold_probe(5.0), start=1.0, rel_tol=1e-6,
                                    max_probes=4)
    assert note == "max_probes" and any(not r["feasible"] for r in recs)
