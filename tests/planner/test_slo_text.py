"""SLOs written as text (``TTFT <= 500 ms``) in the plan and the topology plan, never as a
Python mapping."""
from __future__ import annotations

from simulator.planner.spec import slo_text
from simulator.planner.topology import write_topology_plan


def test_slo_text_is_readable():
    assert slo_text({"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": None}) == \
        "TTFT <= 500 ms, TPOT <= 50 ms"
    assert slo_text({"e2e_s": 12.0}) == "end-to-end latency <= 1.2e+04 ms"
    assert slo_text({}) == "none"


def test_topology_plan_md_prints_the_slos_as_text(tmp_path):
    plan = {"name": "t", "base": "b.yaml", "num_requests": 10, "rate_scale": 1.0,
            "window_s": None, "usd_per_gpu_hour": 2.0, "explanation": "x", "rows": [],
            "slo": {"ttft_s": 0.2, "tpot_s": 0.05, "e2e_s": None, "attainment_target": 0.9}}
    md = (tmp_path / "plan.md")
    write_topology_plan(plan, tmp_path)
    text = md.read_text()
    assert "whole workload), SLOs per request TTFT <= 200 ms, TPOT <= 50 ms " \
           "(attainment >= 90.0%)" in text
    assert "{'" not in text and "window None" not in text
