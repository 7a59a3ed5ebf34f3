"""Unit tests for simulator.report.run: report.md content and the rich table."""
from __future__ import annotations

import io
import re

import numpy as np
from md_tables import rows_starting
from md_tables import tables as markdown_tables
from rich.console import Console

from simulator.metrics.summary import summarize
from simulator.report.figures import FIGURE_FILES
from simulator.report.run import (
    format_summary_rows,
    print_summary_table,
    render_run_report,
    write_run_report,
)

SCENARIO = {
    "name": "tiny",
    "model": {"name": "llama-3.1-8b"},
    "hardware": {"gpu": "h100-sxm5-80gb"},
    "cluster": {"num_replicas": 2, "tensor_parallel_size": 1, "router": "round_robin"},
    "scheduler": {"kind": "continuous", "max_num_seqs": 64, "max_num_batched_tokens": 2048},
    "workload": {"arrival": {"kind": "poisson", "rate_rps": 4.0}, "num_requests": 60},
    "seed": 3,
    "provenance": {"mlp": "measured", "attention_decode": "roofline"},
}
SLO = {"ttft_s": 0.3, "tpot_s": 0.05, "e2e_s": None, "attainment_target": 0.9}


def _run(tables):
    requests, steps = tables()
    summary = summarize(requests, steps, np.array([0.02, 0.03]), np.array([10, 5]), slo=SLO,
                        usd_per_gpu_hour=2.5, num_gpus=2, sim_wall_s=0.1, window=None)
    return summary, requests, steps


def test_write_run_report(tmp_path, tables):
    summary, requests, steps = _run(tables)
    path = write_run_report(tmp_path / "out", summary, requests, steps, SCENARIO)
    assert path == tmp_path / "out" / "report.md"
    text = path.read_text(encoding="utf-8")
    for needle in ("# servesim run: tiny", "llama-3.1-8b", "h100-sxm5-80gb", "round_robin",
                   "max_num_seqs=64", "arrival.rate_rps=4.0", "## Headline", "TTFT", "TPOT",
                   "ITL", "Goodput", "SLO attainment", "target 90.0%", "Cost per 1M output",
                   "## Rejections", "kv_capacity", "## By slice", "## Provenance"):
        assert needle in text, needle
    assert rows_starting(text, "chat") and rows_starting(text, "code")
    assert ["attention_decode", "roofline"] in rows_starting(text, "attention_decode")
    assert ["mlp", "measured"] in rows_starting(text, "mlp")
    assert "## By tenant" not in text  # a single tenant gets no table
    for name in FIGURE_FILES.values():
        assert f"]({name})" in text
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)
    # every table row has as many cells as its header
    for t in markdown_tables(text):
        assert len({len(r) for r in t}) == 1, t


def test_report_is_deterministic(tmp_path, tables):
    summary, requests, steps = _run(tables)
    a = write_run_report(tmp_path / "a", summary, requests, steps, SCENARIO, title="T",
                         figures=False)  # figure bytes: see test_report_figures.py
    b = write_run_report(tmp_path / "b", summary, requests, steps, SCENARIO, title="T",
                         figures=False)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_text(encoding="utf-8").startswith("# T\n")


def test_render_without_figures_or_scenario(tables):
    summary, _, _ = _run(tables)
    text = render_run_report(summary, {}, figures=())
    assert text.startswith("# servesim run\n")
    assert "## Figures" not in text and "## Provenance" not in text


def test_summary_rows_handle_missing_values(tables):
    rows = dict(format_summary_rows({}))
    assert rows["Goodput"] == "n/a"
    assert rows["Cost per 1M tokens (input + output)"] == "n/a"


def test_print_summary_table(tables):
    summary, _, _ = _run(tables)
    buf = io.StringIO()
    console = Console(file=buf, width=120, color_system=None)
    table = print_summary_table(summary, console=console)
    out = buf.getvalue()
    assert table.row_count >= 10
    for needle in ("Requests", "60 arrived", "TTFT p50", "Goodput", "SLO attainment",
                   "kv_capacity: 6"):
        assert needle in out, needle


def test_the_console_table_shows_the_gpu_energy_where_it_is_modelled():
    energy = {"available": True, "energy_kwh": 0.0225, "joules_per_output_token": 0.42,
              "mean_power_w": 420.4, "peak_power_w": 432.3, "energy_cost_usd": 0.0027,
              "usd_per_kwh": 0.12}

    def printed(summary):
        buf = io.StringIO()
        print_summary_table(summary, console=Console(file=buf, width=200, color_system=None))
        return [ln for ln in buf.getvalue().splitlines() if "GPU energy" in ln]

    (row,) = printed({"num_requests": 1, "energy": energy})
    assert ("0.0225 kWh, 0.42 J per output token, 420 W mean / 432 W peak, $0.0027 at "
            "$0.1200/kWh") in row
    (row,) = printed({"num_requests": 1, "energy": {**energy, "energy_cost_usd": None}})
    assert row.rstrip(" │").endswith("432 W peak")
    assert printed({"num_requests": 1, "energy": {"available": False}}) == []
    # pools paying different electricity prices: each pool's (it raised TypeError)
    (row,) = printed({"num_requests": 1, "energy": {
        **energy, "usd_per_kwh": {"chat": 0.1, "batch": 0.2}}})
    assert "$0.0027 at chat $0.1000/kWh, batch $0.2000/kWh" in row
    # an electricity price stated for a GPU without a power model: said, not silently dropped
    buf = io.StringIO()
    print_summary_table({"num_requests": 1, "energy": {"available": False, "reason": "no power"}},
                        console=Console(file=buf, width=200, color_system=None),
                        scenario={"cost": {"usd_per_kwh": 0.12}})
    assert "not modelled: no power" in buf.getvalue()
    buf = io.StringIO()
    print_summary_table({"num_requests": 1, "energy": {"available": False, "reason": "no power"}},
                        console=Console(file=buf, width=200, color_system=None),
                        scenario={"cost": {"usd_per_kwh": None}})
    assert "GPU energy" not in buf.getvalue()
    from simulator.report.energy import energy_section
    sec = energy_section({"energy": {**energy, "usd_per_kwh": {"chat": 0.1, "batch": 0.2}}})
    assert dict(sec["rows"])["Energy cost"] == "$0.0027 at chat $0.1000/kWh, batch $0.2000/kWh"
