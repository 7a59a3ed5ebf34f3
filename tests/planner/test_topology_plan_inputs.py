"""Inputs of a topology plan: the search names at least one family, a base that declares
pools is refused (the plan builds its own), and the plan's ``rate_scale`` multiplies the
base's."""
from __future__ import annotations

import pytest
from helpers import REPO_ROOT


def test_topology_search_needs_a_family():
    from pydantic import ValidationError

    from simulator.planner.topology import TopologySearch
    with pytest.raises(ValidationError, match="give aggregated, disaggregated or both"):
        TopologySearch.model_validate({})


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
