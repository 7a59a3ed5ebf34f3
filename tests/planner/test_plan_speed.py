"""The plan's speed-ups change no decision: early stop of a probe whose verdict is known,
and dominance pruning of candidates that cannot cost less than a passing baseline."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from planner_testlib import tiny_plan, tiny_scenario

from simulator.planner.early_stop import ProbeStop, attainment_miss_limit, p99_exceed_count
from simulator.planner.plan import longest_first, run_plan
from simulator.planner.prune import gate_rate, max_replicas_within
from simulator.planner.search import SimRunner, replicas_for, run_probe
from simulator.planner.simulate import specs_rate
from simulator.planner.spec import GateSettings, PlanSpec, SearchSettings
from simulator.scenario.config import validate_scenario
from simulator.workload import load_workload


# ---------------------------------------------------------------------- the counting rules
def test_p99_exceed_count_is_the_inverse_cdf_closed_form():
    """Inverse-CDF p99 of m sorted values is the value at 1-based rank ceil(0.99 m); it
    exceeds a bound when the top m - ceil(0.99 m) + 1 values do (800 -> 9, 100 -> 2)."""
    assert p99_exceed_count(800) == 9
    assert p99_exceed_count(100) == 2
    assert p99_exceed_count(1) == 1
    prev = 0
    for m in range(1, 1201):
        c = p99_exceed_count(m)
        assert c == m - (-(-99 * m // 100)) + 1
        assert c >= prev  # never decreases: c(n) samples suffice for any final m <= n
        prev = c
    with pytest.raises(ValueError):
        p99_exceed_count(0)


def test_attainment_miss_limit():
    # (800 - 80) / 800 = 0.9 is not below 0.9; 81 misses are
    assert attainment_miss_limit(800, 0.9) == 81
    assert attainment_miss_limit(10, 0.9) == 2
    assert attainment_miss_limit(100, 1.0) == 1
    assert attainment_miss_limit(100, 0.0) == 101  # never


def _req(i, *, ttft, tpot=0.01, status="completed", emitted=10, slice_="default"):
    arr = float(i)
    first = arr + ttft if ttft is not None else float("nan")
    fin = first + tpot * (emitted - 1) if status == "completed" else float("nan")
    return SimpleNamespace(status=status, arrival_time_s=arr, first_token_time_s=first,
                           finish_time_s=fin, num_emitted=emitted,
                           spec=SimpleNamespace(slice=slice_))


def _specs(n, slice_="default"):
    return [SimpleNamespace(slice=slice_) for _ in range(n)]


def test_probe_stop_proves_p99_ttft_after_two_of_100():
    slo = {"ttft_s": 0.5, "tpot_s": 0.05, "attainment_target": 0.5}
    stop = ProbeStop(_specs(100), slo, GateSettings().model_dump())
    assert not stop(_req(0, ttft=0.1), 1.0)
    assert not stop(_req(1, ttft=0.9), 2.0)       # one above 500 ms: p99 may still pass
    assert stop(_req(2, ttft=0.7), 3.0)           # two of 100: p99 > 500 ms whatever follows
    assert stop.stopped_at_s == 3.0
    assert [f["gate"] for f in stop.failures] == ["slice_ttft_p99[default]"]


def test_probe_stop_proves_attainment_and_rejections():
    slo = {"ttft_s": 0.5, "tpot_s": 0.05, "attainment_target": 0.9}
    gates = GateSettings(slice_ttft_p99=False).model_dump()
    stop = ProbeStop(_specs(20), slo, gates)
    # TPOT 60 ms > 50 ms: a miss; 2 of 20 misses leave 18/20 = 0.9 (passes), 3 do not
    assert not stop(_req(0, ttft=0.1, tpot=0.06), 1.0)
    assert not stop(_req(1, ttft=0.1, tpot=0.06), 2.0)
    assert stop(_req(2, ttft=0.1, tpot=0.06), 3.0)
    assert [f["gate"] for f in stop.failures] == ["slo_attainment"]
    assert stop.failures[0]["value"] == pytest.approx(17 / 20)
    rej = ProbeStop(_specs(20), slo, GateSettings(slo_attainment=False, slice_ttft_p99=False,
                                                   max_rejected_fraction=0.0).model_dump())
    assert not rej(_req(0, ttft=0.1), 1.0)
    assert rej(_req(1, ttft=None, status="rejected"), 2.0)  # 1/20 > 0
    assert [f["gate"] for f in rej.failures] == ["rejected_fraction"]
    off = ProbeStop(_specs(20), slo, GateSettings(slo_attainment=False, slice_ttft_p99=False)
                    .model_dump())
    assert not off.active


# ---------------------------------------------------------------------- early stop vs full run
@pytest.fixture(scope="module")
def probe_inputs():
    raw = tiny_scenario(num_requests=150)
    sc = validate_scenario(raw)
    scenario = sc.model_dump(mode="json")
    specs = load_workload(sc.workload, sc.seed, None)
    return scenario, specs


def test_stopped_probe_has_the_full_runs_verdict(probe_inputs):
    """Run the same probes with and without early stop: equal verdicts; the overloaded one
    stops before its last request and the gates it proves are among the full run's."""
    scenario, specs = probe_inputs
    rate1 = specs_rate(specs)
    gates = GateSettings().model_dump()
    runner = SimRunner()
    seen_stop = False
    for scale in (0.5, 16.0, 64.0):
        recs = {}
        for es in (True, False):
            st = SearchSettings(early_stop=es).model_dump()
            recs[es] = run_probe(scenario, specs, scale, rate1, reps=1, gpus=1, st=st,
                                 gates=gates, runner=runner)
        fast, full = recs[True], recs[False]
        assert fast["feasible"] == full["feasible"]
        assert not full["stopped_early"]
        if fast["stopped_early"]:
            seen_stop = True
            assert not fast["feasible"]
            assert set(fast["failed_gates"]) <= set(full["failed_gates"])
            assert fast["stopped_at_s"] > 0
            assert fast["num_requests"] <= full["num_requests"] == len(specs)
        else:  # not stopped: the very same figures
            assert fast == full
    assert seen_stop  # 64x the rate overloads one replica


# ---------------------------------------------------------------------- dominance pruning
def test_dominance_arithmetic():
    # a $5.98/h bound: 2 H100 replicas at $2.99 fit, 1 TP2 H100 replica fits, a TP2 H200
    # replica at $4.54/GPU-h ($9.08/h) does not
    assert max_replicas_within(5.98, 1, 2.99) == 2
    assert max_replicas_within(5.98, 2, 2.99) == 1
    assert max_replicas_within(5.98, 2, 4.54) == 0
    # the gate rate is where replicas_for switches from n_max + 1 to n_max replicas
    r = gate_rate(30.0, 0.1, 2)
    assert r == pytest.approx(16.5)
    assert replicas_for(30.0, r, 0.1) == 2
    assert replicas_for(30.0, r * (1 - 1e-6), 0.1) == 3


def test_longest_first_orders_by_replica_bandwidth():
    cfg = [{"hardware": {"gpu": g}, "cluster": {"tensor_parallel_size": tp}}
           for g, tp in (("h100-sxm", 1), ("a100-sxm-80gb", 1), ("h100-sxm", 2),
                         ("a100-sxm-80gb", 2))]
    # A100 HBM 2.0 TB/s < H100 3.35 TB/s; x TP: 2.0, 3.35, 4.0, 6.7 TB/s
    assert longest_first(cfg) == [1, 0, 3, 2]


def _plan(prune: bool, **over):
    d = tiny_plan(**over)
    d["search"] = {**d["search"], "prune_dominated": prune}
    return PlanSpec.model_validate(d)


def _decision(res):
    c = res.recommendation["config"]
    return (res.status, c["label"], c["replicas"], c["usd_per_hour"])


def test_pruning_never_drops_the_cheapest(tmp_path):
    full = run_plan(_plan(False), None, outdir=tmp_path / "a", jobs=1, write=False)
    fast = run_plan(_plan(True), None, outdir=tmp_path / "b", jobs=1, write=False)
    assert _decision(fast) == _decision(full)
    best = full.recommendation["config"]["usd_per_hour"]
    by_label = {r["label"]: r for r in full.candidates}
    for r in fast.candidates:
        if r["failed_gates"] == ["dominated"]:
            # skipped only when it could not cost as little as the passing baseline
            assert r["dominance"]["least_usd_per_hour"] > best
            assert by_label[r["label"]]["usd_per_hour"] > best or not by_label[
                r["label"]]["passed"]
        else:
            o = by_label[r["label"]]
            assert (r["capacity_rps"], r["replicas"], r["passed"]) == (
                o["capacity_rps"], o["replicas"], o["passed"])
    # the tiny plan's A100 at max_num_seqs 16 needs 2 replicas ($4/h) > the $3/h baseline
    assert sum(r["failed_gates"] == ["dominated"] for r in fast.candidates) >= 1
    assert fast.stats["num_simulations"] < full.stats["num_simulations"]


def test_pruning_reevaluates_when_nothing_within_the_bound_passes(tmp_path):
    """A baseline priced far below every candidate: the candidate is skipped first (one
    replica already dearer), no candidate within the bound passes, so the plan evaluates
    it in full and recommends it, as an unpruned plan does."""
    over = {"search_space": {"hardware.gpu": ["h100-sxm"]},
                "prices": {"h100": 3.0, "a100-sxm-80gb": 0.1},
                "baseline": {"name": "today", "set": {"hardware.gpu": "a100-sxm-80gb"}}}
    full = run_plan(_plan(False, **over), None, outdir=tmp_path / "a", jobs=1, write=False)
    assert full.baseline["passed"] and full.baseline["usd_per_hour"] < 3.0  # precondition
    fast = run_plan(_plan(True, **over), None, outdir=tmp_path / "b", jobs=1, write=False)
    assert _decision(fast) == _decision(full)
    assert fast.candidates[0]["failed_gates"] != ["dominated"]


def test_pruning_with_a_quality_gate_keeps_the_unpruned_answer(tmp_path):
    """Review finding: the within-bound candidates (H100, as cheap as the H100 baseline) pass
    the simulated gates but fail the quality gate; the A100 ones cost more than the bound and
    are skipped first. The pruned plan must notice that nothing within the bound passes every
    gate and evaluate the skipped ones, recommending what the unpruned plan recommends."""
    import yaml

    from simulator.planner.spec import load_plan_spec
    quality = {"metric": "accuracy", "source": "hand-written test table",
               "scores": [{"name": "h100", "match": {"hardware.gpu": "h100-sxm"}, "score": 0.5},
                          {"name": "a100", "match": {"hardware.gpu": "a100-sxm-80gb"},
                           "score": 0.9}]}
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(quality))
    decisions = []
    for prune in (False, True):
        # an A100 replica ($3.5/h) is dearer than the $3/h H100 baseline: skipped by price
        d = tiny_plan(quality={"table": "q.yaml", "min_score": 0.8},
                      prices={"h100": 3.0, "a100-sxm-80gb": 3.5})
        d["search"] = {**d["search"], "prune_dominated": prune}
        (tmp_path / f"plan_{prune}.yaml").write_text(yaml.safe_dump(d))
        spec, folder = load_plan_spec(tmp_path / f"plan_{prune}.yaml")
        res = run_plan(spec, folder, outdir=tmp_path / f"o{prune}", jobs=1, write=False)
        decisions.append(_decision(res))
        if prune:
            assert res.stats["pruning_abandoned_after_simulations"] is not None
    assert decisions[0] == decisions[1]
    assert decisions[0][0] == "candidate" and "a100" in decisions[0][1]


def test_stop_rules_are_part_of_the_simulation_cache_key(probe_inputs, tmp_path):
    """A run stopped under one set of gates must not answer a probe under other gates:
    with the p99 gate off, the 64x probe is not stopped by it."""
    from simulator.experiments.cache import ResultCache
    scenario, specs = probe_inputs
    rate1 = specs_rate(specs)
    st = SearchSettings().model_dump()
    cache = ResultCache(tmp_path)
    first = SimRunner(cache)
    a = run_probe(scenario, specs, 64.0, rate1, reps=1, gpus=1, st=st,
                  gates=GateSettings().model_dump(), runner=first)
    for k, v in first.new_cache.items():
        cache.put(k, v)
    second = SimRunner(cache)
    b = run_probe(scenario, specs, 64.0, rate1, reps=1, gpus=1, st=st,
                  gates=GateSettings(slice_ttft_p99=False).model_dump(), runner=second)
    assert a["stopped_early"] and "slice_ttft_p99[chat]" in a["failed_gates"]
    assert second.num_cache_hits == 0
    assert not any(g.startswith("slice_ttft_p99") for g in b["failed_gates"])
