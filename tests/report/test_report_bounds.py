"""The "What bounds this run" section of the run report (Markdown and HTML from the same
data), per pool for a gateway run, and absent for a summary written before the verdict."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
from helpers import make_scenario, specs_from_rows
from md_tables import rows_starting
from rich.console import Console

from simulator.metrics.bounds import run_bounds
from simulator.report.bounds import bounds_section
from simulator.report.render import write_report
from simulator.report.run import print_summary_table, render_run_report, write_run_report
from simulator.runs.scenario import run_scenario, scenario_dict

HEADING = "## What bounds this run"


def _queued_run():
    """One sequence at a time, 4 steps of 0.1 s per request, arrivals every 0.1 s: request i
    queues 0.3 i s and takes 0.3 i + 0.4 s (queueing 3.0 of 5.0 s over 5 requests)."""
    sc = make_scenario({"perf": {"source": "constant", "constant": {"step_s": 0.1}},
                        "scheduler": {"max_num_seqs": 1}})
    return run_scenario(sc, specs=specs_from_rows([(0.1 * i, 10, 4) for i in range(5)]),
                        write=False)


def test_run_report_says_what_bounds_the_run(tmp_path):
    res = _queued_run()
    path = write_run_report(tmp_path, res.summary, res.requests, res.steps,
                            scenario_dict(res.scenario), figures=False)
    md = path.read_text()
    section = md[md.index(HEADING):md.index("## Rejections")]
    assert md.index("## Headline") < md.index(HEADING)  # near the top
    assert "**Bound by queueing: 60% of request time waiting to be scheduled.**" in section
    assert rows_starting(section, "queueing") == [["queueing", "60.0%", "request time"]]
    assert rows_starting(section, "execution") == [["execution", "40.0%", "request time"]]
    assert not rows_starting(section, "memory")  # a constant model: no busy-time split
    assert not rows_starting(section, "tier transfers")  # no offload: not measured
    assert rows_starting(section, "KV cache at least 95% full") == [
        ["KV cache at least 95% full", "0.0%", "busy time"]]
    assert "Perf.source: constant has no operators" in section
    assert "0 preemption(s), 0 KV-capacity rejection(s)" in section
    html = (tmp_path / "report.html").read_text()
    assert 'id="what-bounds-this-run"' in html
    assert "Bound by queueing: 60% of request time waiting to be scheduled." in html


def test_summary_without_the_verdict_has_no_section():
    res = _queued_run()
    old = dict(res.summary)
    del old["bounds"]
    assert bounds_section(old) is None
    assert HEADING not in render_run_report(old, scenario_dict(res.scenario))
    assert HEADING in render_run_report(res.summary, scenario_dict(res.scenario))


class _Perf:
    kind = "fake"

    def bottleneck_shares(self, shape):
        return {"compute_bound": 0.6, "memory_bound": 0.3, "overhead": 0.1}

    def op_times(self, shape):
        return {"gemm": 0.9, "engine_overhead": 0.1}


def test_each_pool_of_a_gateway_run_gets_its_verdict(tmp_path):
    # queueing 1 of 5 s: execution 80%, of which compute-bound 60% of busy time
    req = pd.DataFrame({"arrival_time_s": [0.0], "first_scheduled_time_s": [1.0],
                        "finish_time_s": [5.0], "status": ["completed"]})
    steps = pd.DataFrame({"step_time_s": [0.5], "num_prefill_tokens": [100],
                          "num_prefill_seqs": [1], "num_decode_seqs": [0],
                          "kv_blocks_used": [5], "num_gpu_blocks": [10]})
    quiet = {"num_preemptions": 0, "reject_reasons": {}, "max_kv_cache_usage": 0.5}
    b = run_bounds(quiet, req, steps, _Perf())
    summary = {"pools": {"prefill": {"bounds": b},
                         "decode": {"bounds": run_bounds({**quiet, "num_preemptions": 3}, req,
                                                         steps, _Perf())}}}
    sec = bounds_section(summary)
    assert [r["name"] for r in sec["runs"]] == ["decode", "prefill"]
    assert sec["runs"][1]["verdict"] == ("Bound by compute: 80% of request time executing, 60% "
                                         "of busy time in compute-bound operators")
    assert sec["runs"][0]["verdict"].startswith("Bound by KV capacity: 3 preemption(s)")
    md = render_run_report({**summary, "slo": {}}, {"name": "pd"}, figures=())
    assert "### Pool `decode`" in md and "### Pool `prefill`" in md
    assert ["engine overhead", "10.0%", "busy time"] in rows_starting(md, "engine overhead")
    pages = write_report(tmp_path, "report", md)
    assert "Bound by compute: 80% of request time executing" in pages["html"].read_text()


def test_hostile_pool_name_is_data(tmp_path):
    req = pd.DataFrame({"arrival_time_s": [0.0], "first_scheduled_time_s": [0.0],
                        "finish_time_s": [1.0], "status": ["completed"]})
    steps = pd.DataFrame({"step_time_s": [np.float64(0.5)], "kv_blocks_used": [1],
                          "num_gpu_blocks": [10]})
    b = run_bounds({"num_preemptions": 0}, req, steps, object())
    md = render_run_report({"pools": {"<img src=x onerror=alert(1)>": {"bounds": b}},
                            "slo": {}}, {"name": "x"}, figures=())
    assert "### Pool `<img src=x onerror=alert(1)>`" in md  # a code span: shown as written
    html = write_report(tmp_path, "report", md)["html"].read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_terminal_table_says_what_bounds_the_run():
    res = _queued_run()
    buf = io.StringIO()
    print_summary_table(res.summary, Console(file=buf, width=200))
    line = next(ln for ln in buf.getvalue().splitlines() if "What bounds the run" in ln)
    assert "Bound by queueing: 60% of request time waiting to be scheduled" in line
