"""Topology inputs a third fresh-clone review found crashing or silently approximated
(session 10): an empty pool, an unreachable pool, a topology plan over a pools base or at a
scaled base rate, lockstep DP with speculative decoding, a fallback set inside the lockstep."""
from __future__ import annotations

import warnings

import pytest
from helpers import REPO_ROOT, make_scenario, spec

from simulator.runs.gateway import run_gateway
from simulator.scenario.config import ScenarioError, validate_scenario
from simulator.workload import WorkloadWarning

CONST = {"source": "constant", "constant": {"step_s": 0.01}}


def test_a_pool_no_request_reaches_reports_zero_and_warns():
    sc = make_scenario({"perf": CONST, "pools": [
        {"name": "vip", "match": {"tenants": ["vip"]}}, {"name": "rest"}]})
    specs = [spec(i, 0.1 * i, 20, 3) for i in range(5)]
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = run_gateway(sc, specs=specs, write=False)   # was an IndexError
    assert res.summary["pools"]["vip"]["num_requests"] == 0
    assert res.summary["pools"]["rest"]["num_requests"] == 5 == res.summary["num_completed"]
    msgs = [str(w.message) for w in got if issubclass(w.category, WorkloadWarning)]
    assert any("pool vip matches vip, which no request of the workload carries" in m
               for m in msgs)


def test_a_second_pool_without_match_is_refused():
    sc = make_scenario({"perf": CONST, "pools": [{"name": "a"}, {"name": "b"}]})
    with pytest.raises(ValueError, match=r"pools: a, b have no match: .* b would never get one"):
        run_gateway(sc, specs=[spec(0, 0.0, 10, 2)], write=False)


def test_lockstep_with_speculative_decoding_is_refused():
    raw = {"model": "qwen3-30b-a3b", "workload": {"trace": "traces/default_conv_1k.csv"},
           "cluster": {"num_replicas": 2,
                                                 "enable_expert_parallel": True},
           "speculative": {"method": "eagle", "num_speculative_tokens": 2,
                           "acceptance": {"model": "iid", "acceptance_rate": 0.6}}}
    with pytest.raises(ScenarioError, match="cluster.dp_lockstep: data-parallel ranks"):
        validate_scenario(raw)
    raw["cluster"]["dp_lockstep"] = False  # independent replicas: accepted
    assert validate_scenario(raw).cluster.dp_lockstep_active is False


def test_a_topology_plan_refuses_a_pools_base_and_multiplies_the_base_rate(tmp_path,
                                                                        monkeypatch):
    from simulator.planner.spec import PlanError
    from simulator.planner.topology import TopologyPlanSpec, run_topology_plan
    d = {"name": "t", "base": "pools_mixed_gpu", "usd_per_gpu_hour": 2.99, "window_s": 5,
         "topology_search": {"aggregated": {"tensor_parallel_size": [1], "max_replicas": 1}}}
    with pytest.raises(PlanError, match="declares pools: a topology plan builds its own pools"):
        run_topology_plan(TopologyPlanSpec.model_validate(d), REPO_ROOT / "scenarios",
                          outdir=tmp_path / "a")
    import simulator.planner.topology as topo
    seen = []
    real = topo.load_workload

    def spy(cfg, *a, **k):
        seen.append(cfg.rate_scale)
        return real(cfg, *a, **k)

    monkeypatch.setattr(topo, "load_workload", spy)
    base = tmp_path / "b.yaml"
    base.write_text("name: b\nmodel: llama-3.1-8b\nhardware: {gpu: h100-sxm}\n"
                    f"workload: {{trace: {REPO_ROOT / 'traces' / 'default_conv_1k.csv'}, "
                    "format: vidur, rate_scale: 3.0}\n")
    d.update(base=str(base), rate_scale=2.0)
    res = run_topology_plan(TopologyPlanSpec.model_validate(d), tmp_path, outdir=tmp_path / "c")
    assert seen == [6.0]  # 3 x 2 (before, the plan's 2.0 replaced the base's 3.0)
    # every report is Markdown and self-contained HTML (the topology plan wrote no HTML)
    html = (tmp_path / "c" / "plan.html").read_text()
    assert res["files"]["html"] == str(tmp_path / "c" / "plan.html") and "Verdict" in html


def test_a_fallback_set_does_not_step_in_the_lockstep_group(tmp_path):
    from simulator.cli.main import main
    out = tmp_path / "fb"
    assert main(["run", "moe_dp2_ep2_qwen3_30b", "-q", "--no-figures", "-o", str(out),
                 "--set", ("scheduler.admission.degrade=[{name: f, action: fallback, "
                           "when: {num_waiting: 2}}]"),
                 "--set", "scheduler.admission.fallback={model: qwen3-8b, num_replicas: 1}",
                 "--set", "workload.rate_scale=4", "--set", "workload.max_requests=120",
                 "--set", "cost.usd_per_gpu_hour=1.0"]) == 0
    import pandas as pd
    st = pd.read_parquet(out / "steps.parquet")
    group = set(st.loc[st["replica_id"] < 2, "start_time_s"])
    fb = st.loc[st["replica_id"] == 2, "start_time_s"]
    assert len(fb) > 0
    # the dense fallback replica steps on its own clock: (almost) none of its steps start at
    # a group step's instant (before: 934 of 1,013 did, in the review's run)
    assert fb.isin(group).mean() < 0.1
