"""Every experiment report says what bounds each run: the ``bound`` row of ``servesim
compare``, the ``bound`` / ``share`` columns of the sweep report, the verdict in the capacity
plan's Bottleneck note; tables written before the verdict existed render as before."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from md_tables import rows_starting, tables

from simulator.experiments.compare import run_compare
from simulator.experiments.grid import flatten_summary
from simulator.planner.bottleneck import bottleneck_note
from simulator.report.compare import table_rows
from simulator.report.sweep import write_sweep_report

#: Constant 0.1 s steps, one sequence at a time, 4-token answers: 0.4 s per request.
SCENARIO = {
    "name": "bounds_cmp", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
    "perf": {"source": "constant", "constant": {"step_s": 0.1}},
    "scheduler": {"max_num_seqs": 1},
    "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1.0},
                               "num_requests": 20,
                               "prompt_tokens": {"dist": "fixed", "value": 10},
                               "output_tokens": {"dist": "fixed", "value": 4}}},
    "seed": 3,
}


def test_compare_has_a_bound_row_per_variant(tmp_path):
    """At 1 req/s (load 0.4) execution dominates; at 20 req/s (load 8) requests queue."""
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(SCENARIO))
    cr = run_compare(p, ["workload.rate_scale=1,20"], outdir=tmp_path / "out", figures=False,
                     run_figures=False)
    t = cr.table.set_index("variant")
    for v in cr.variants:
        req = v.requests
        q = (req["first_scheduled_time_s"] - req["arrival_time_s"]).sum()
        e2e = (req["finish_time_s"] - req["arrival_time_s"]).sum()
        want = "queueing" if q / e2e > 0.5 else "execution"
        assert t.loc[v.name, "bound"] == want
        assert t.loc[v.name, "bound_share_pct"] == pytest.approx(
            100 * (q / e2e if want == "queueing" else 1 - q / e2e))
    assert list(t["bound"]) == ["execution", "queueing"]
    md = (tmp_path / "out" / "compare.md").read_text()
    row = rows_starting(md, "bound (what bounds the run)")
    assert row == [["bound (what bounds the run)", "execution", "queueing"]]
    shares = rows_starting(md, "bound's share (%)")[0][1:]
    assert shares == [f"{x:,.1f}" for x in t["bound_share_pct"]]
    assert "*bound* is what bounds the variant's run" in md
    csv = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert list(csv["bound"]) == ["execution", "queueing"]


def test_compare_table_without_the_verdict_renders_as_before():
    table = pd.DataFrame([{"variant": "a", "num_completed": 3, "bound": "kv_capacity",
                           "bound_share_pct": 12.345}])
    head, rows = table_rows(table)
    assert head == ["metric", "a"]
    assert ["bound (what bounds the run)", "KV capacity"] in rows
    assert ["bound's share (%)", "12.3"] in rows
    _head, rows = table_rows(table.drop(columns=["bound", "bound_share_pct"]))
    assert not any(r[0].startswith("bound") for r in rows)


def _sweep_table(with_bounds: bool) -> pd.DataFrame:
    rows = [{"point_id": 0, "label": "seqs=8", "status": "ok", "error": "", "cached": False,
             "slo_attainment": 0.5, "ttft_s_p99": 1.0, "tpot_s_p99": 0.01,
             "output_token_throughput_tps": 100.0, "cost_per_1m_output_tokens_usd": 1.0},
            {"point_id": 1, "label": "seqs=64", "status": "ok", "error": "", "cached": False,
             "slo_attainment": 0.9, "ttft_s_p99": 0.1, "tpot_s_p99": 0.02,
             "output_token_throughput_tps": 400.0, "cost_per_1m_output_tokens_usd": 0.3}]
    if with_bounds:
        rows[0].update(flatten_summary({"bounds": {"bound": "queueing", "bound_share": 0.983}}))
        rows[1].update(flatten_summary({"bounds": {"bound": "engine_overhead",
                                                   "bound_share": np.float64(0.41)}}))
    return pd.DataFrame(rows)


def test_sweep_report_has_bound_columns(tmp_path):
    files = write_sweep_report(_sweep_table(True), tmp_path, name="b", num_simulated=2,
                               num_cached=0, figures=False)
    md = files["md"].read_text()
    t = tables(md)[0]
    assert t[0][-3:] == ["bound", "share", "point"]
    assert t[1][-3:] == ["queueing", "98%", "seqs=8"]
    assert t[2][-3:] == ["engine overhead", "41%", "seqs=64"]
    assert "*bound* is what bounds the point's run" in md
    old = write_sweep_report(_sweep_table(False), tmp_path / "old", name="b", num_simulated=2,
                             num_cached=0, figures=False)["md"].read_text()
    assert "bound" not in tables(old)[0][0] and "*bound*" not in old


def test_plan_bottleneck_note_ends_with_the_run_verdict():
    verdict = "Bound by memory: 95% of request time executing, 80% of busy time in x"
    row = {"confirm_extra": {}, "confirm_summary": {
        "num_preemptions": 0, "perf_model": "roofline",
        "bounds": {"bound": "memory", "verdict": verdict}}}
    note = bottleneck_note(row)
    assert note["bound"] == "memory"
    assert note["summary"].endswith("the run's verdict: bound by memory: 95% of request time "
                                    "executing, 80% of busy time in x")
    cached = bottleneck_note({"confirm_extra": {}, "confirm_summary": {"num_preemptions": 0}})
    assert cached["bound"] is None and "verdict" not in cached["summary"]
