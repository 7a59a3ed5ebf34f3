"""The sweep report, and the plan report's generic rendering of fields it does not know."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from md_tables import rows_starting, tables
from report_cases import plan_result

from simulator.planner.plan import PlanResult
from simulator.planner.report import render_plan_markdown
from simulator.report.sweep import write_sweep_report


def _sweep_table() -> pd.DataFrame:
    return pd.DataFrame([
        {"point_id": 0, "label": "seqs=8", "status": "ok", "error": "", "cached": False,
         "slo_attainment": 0.95, "ttft_s_p99": 0.1234, "tpot_s_p99": 0.01567,
         "output_token_throughput_tps": 1234.4, "cost_per_1m_output_tokens_usd": 0.51234,
         "slo.ttft_s": 0.25},
        {"point_id": 1, "label": "seqs=64", "status": "error", "error": "ValueError: no fit",
         "cached": True, "slo_attainment": np.nan, "ttft_s_p99": np.nan, "tpot_s_p99": np.nan,
         "output_token_throughput_tps": np.nan, "cost_per_1m_output_tokens_usd": np.nan,
         "slo.ttft_s": 0.25},
    ])


def test_sweep_report_rows_by_hand(tmp_path):
    files = write_sweep_report(_sweep_table(), tmp_path, name="demo", num_simulated=1,
                               num_cached=1, varied=[("scheduler.max_num_seqs", [8, 64])])
    md = files["md"].read_text()
    assert md.startswith("# servesim sweep: demo\n")
    assert "2 point(s): 1 simulated, 1 from the cache, 1 failed." in md
    assert "Varied: `scheduler.max_num_seqs` in {8, 64}." in md
    points = tables(md)[0]
    assert points[0] == ["#", "attainment", "TTFT p99", "TPOT p99", "output tok/s",
                         "USD/1M out", "point"]
    # 0.1234 s -> 123.4 ms, 0.01567 s -> 15.67 ms, $0.51234 to 4 decimals
    assert points[1] == ["0", "0.950", "123.4 ms", "15.67 ms", "1,234", "$0.5123", "seqs=8"]
    assert points[2][:2] == ["1", "error"]
    assert rows_starting(md, "1")[-1] == ["1", "seqs=64", "ValueError: no fit"]
    assert files["figure"].name == "sweep.png" and "![" in md
    assert files["html"].read_text().count("data:image/png;base64,") == 1


def test_sweep_report_without_a_successful_point(tmp_path):
    t = _sweep_table().iloc[1:]
    files = write_sweep_report(t, tmp_path, name="bad", num_simulated=1, num_cached=0)
    assert "figure" not in files and "![" not in files["md"].read_text()


def test_plan_report_shows_unknown_fields_generically():
    res = plan_result("plan")
    cands = [dict(c) for c in res.candidates]
    for i, c in enumerate(cands):
        c["gates"] = {"cost_per_1m_output": {"passed": i % 2 == 0, "value": 0.5 + i,
                                             "limit": 1.0},
                      "quality[rare]": {"passed": True, "value": 0.93, "limit": 0.9}}
    config = dict(res.recommendation["config"])
    config["kv_offload"] = {"tier": "cpu", "gb": 64}
    config["fallback_label"] = "last-known-good"

    @dataclasses.dataclass
    class Extended(PlanResult):
        degrade_actions: dict = dataclasses.field(default_factory=dict)

    ext = Extended(res.plan, res.status, {**res.recommendation, "config": config}, cands,
                   res.baseline, res.pareto, res.workload, res.stats, res.base_scenario,
                   degrade_actions={"cap_max_tokens": "never fired", "shed": 3})
    md = render_plan_markdown(ext)
    assert rows_starting(md, "kv_offload") == [["kv_offload", "tier: cpu; gb: 64"]]
    assert rows_starting(md, "fallback_label") == [["fallback_label", "last-known-good"]]
    gates = next(t for t in tables(md) if t[0][0] == "configuration" and
                 "quality[rare]" in t[0])
    assert gates[0] == ["configuration", "cost_per_1m_output", "quality[rare]"]
    assert gates[1][1:] == ["pass (0.5 vs 1)", "pass (0.93 vs 0.9)"]
    assert gates[2][1] == "fail (1.5 vs 1)"
    assert rows_starting(md, "degrade_actions") == [
        ["degrade_actions", "cap_max_tokens: never fired; shed: 3"]]
    # without extra fields the plan report has none of these sections
    plain = render_plan_markdown(res)
    assert "## Gates by candidate" not in plain and "## More results" not in plain
