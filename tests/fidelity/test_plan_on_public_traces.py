"""Acceptance of issue 15 (parts 1-4, planner side), on the public traces of the shared folder
(skipped when it is absent, failed when ``$SERVESIM_SHARED`` is set but wrong):

- ``servesim plan`` on the Azure conversation trace with a quality table, a cost-per-token
  gate, memory headroom and per-slice gates, and a last known-good fallback produces a plan
  whose Markdown and HTML show the winner, the fallback beside it, each candidate's failing
  gates (value against bound) and provenance, and the phase-attributed price per token;
- a ServeGen client file and a Parquet copy of the Azure trace replay end to end with every
  request accounted for.

The plan runs with a smaller search than the scenario file's (``--plan-set``), so it takes
seconds, not a minute; the gates and the candidates are the file's.
"""
from __future__ import annotations

import csv

import pandas as pd
import pytest
import yaml
from helpers import REPO_ROOT, shared_path, summary_without_wall

from simulator.cli.main import main
from simulator.planner.plan import run_plan
from simulator.planner.spec import load_plan_spec
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import load_scenario
from simulator.scenario.overrides import cli_overrides
from simulator.workload import WorkloadWarning

AZURE = "traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
PLAN = REPO_ROOT / "scenarios" / "plan_azure_conv_gates.yaml"
QUALITY = REPO_ROOT / "scenarios" / "quality_azure_conv_example.yaml"
SCENARIO = REPO_ROOT / "scenarios" / "azure_conv_llama3_8b_h100.yaml"
FAST = ["search.window_s=300", "search.max_requests=200", "search.confirm_max_requests=400",
        "search.max_probes=6", "search.rel_tol=0.25"]


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    trace = shared_path(AZURE)
    out = tmp_path_factory.mktemp("plan_gates")
    spec, folder = load_plan_spec(PLAN, FAST)
    with pytest.warns(WorkloadWarning, match=r"slice assigned at random by the workload "
                                             r"config \(workload.slices\), not read from"):
        res = run_plan(spec, folder, trace=str(trace), outdir=out, jobs=1)
    return res, (out / "plan.md").read_text(), (out / "plan.html").read_text()


def test_plan_shows_winner_and_fallback_side_by_side(plan):
    res, md, html = plan
    rec = res.recommendation["config"]
    assert res.status == "candidate" and rec["passed"]
    assert res.fallback["name"] == "lkg-a100-bf16"
    assert res.fallback["kind"] == "last_known_good"
    side = md.split("## Recommendation and fallback")[1].split("## Recommended configuration")[0]
    assert rec["label"] in side and "[last known-good] lkg-a100-bf16" in side
    assert 'id="recommendation-and-fallback"' in html and "lkg-a100-bf16" in html
    assert md.startswith(f"# Capacity plan: azure_conv_gates\n\n**Recommend {rec['label']}")


def test_fp8_paths_fail_the_rare_language_quality_gate(plan):
    res, md, html = plan
    table = yaml.safe_load(QUALITY.read_text())
    fp8 = next(e for e in table["scores"] if e["match"] == {"perf.weight_dtype": "fp8"})
    score = fp8["slices"]["rare-language"]
    bound = yaml.safe_load(PLAN.read_text())["quality"]["min_score_by_slice"]["rare-language"]
    assert score < bound
    rows = [r for r in res.candidates if r["overrides"]["perf.weight_dtype"] == "fp8"]
    assert len(rows) == 2
    for r in rows:
        assert not r["passed"]
        f = next(g for g in r["gate_failures"] if g["gate"] == "quality[rare-language]")
        assert (f["value"], f["bound"]) == (score, bound)
        text = f"rare-language accuracy {score:.4g} < minimum {bound:.4g}"
        assert text in md and text.replace("<", "&lt;") in html


def test_every_failing_candidate_shows_its_gates_and_every_one_its_provenance(plan):
    res, md, html = plan
    why = md.split("### Why each configuration fails")[1].split("\n## ")[0]
    for r in res.candidates + [res.baseline, res.last_known_good]:
        assert r["provenance"]["label"] in md
        if not r["passed"]:
            assert r["gate_failures"], r["label"]
            for f in r["gate_failures"]:
                assert f["text"] in why
    # H200 candidates: elementwise from the datasheet while the H100's is fitted
    h200 = [r for r in res.candidates if r["gpu"] == "h200-sxm"]
    assert h200 and all(r["provenance_weaker"] for r in h200)
    assert all(r["provenance_weaker_operators"] == {"elementwise": "datasheet (best: fitted)"}
               for r in h200)
    assert "## Provenance warnings" in md and 'id="provenance-warnings"' in html


def test_phase_prices_add_up_to_the_hourly_cost(plan):
    res, md, _ = plan
    w = res.workload
    tok_h = w["target_rate_rps"] * 3600.0
    for r in res.candidates:
        if r["price_per_1m_input_tokens_usd"] is None:
            continue
        per_hour = (r["price_per_1m_input_tokens_usd"] * w["mean_prompt_tokens"]
                    + r["price_per_1m_output_tokens_usd"] * w["mean_output_tokens"]) * tok_h / 1e6
        assert per_hour == pytest.approx(r["usd_per_hour"])
    rec = res.recommendation["config"]
    assert f"${rec['price_per_1m_output_tokens_usd']:,.4f}" in md
    assert "price per 1M output tokens (decode GPU time)" in md
    # the slices were assigned at random by the workload: the plan says so
    assert res.workload["synthesised"] == {"slice": "workload.slices"}
    assert "Note: Synthesised request labels: slice (workload.slices)" in md


def _recorded(path, start_s: float, end_s: float) -> int:
    """Requests a ServeGen client file records in whole windows of [start_s, end_s): the sum
    of rate x 600 s (csv module, independent of the reader)."""
    n = 0.0
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if start_s <= int(row[0]) < end_s:
                n += float(row[1]) * 600
    return round(n)


def test_servegen_client_file_replays_end_to_end():
    trace = shared_path("traces/servegen/reason/deepseek-r1/chunk-5-trace.csv")
    sc, base = load_scenario(SCENARIO, cli_overrides(
        ["workload.start_s=3600", "workload.end_s=5400"], str(trace)))
    res = run_scenario(sc, base, write=False, figures=False)
    s = res.summary
    n = _recorded(trace, 3600, 5400)
    assert n > 100
    assert s["num_requests"] == len(res.requests) == n
    assert (s["num_completed"] + s["num_rejected"] + s["num_cancelled"]
            + s["num_unfinished"]) == n
    assert set(res.requests["tenant"]) == {"client-5"}
    assert s["workload_synthesised"] == {}


def test_parquet_copy_of_azure_replays_like_the_csv(tmp_path, capsys):
    trace = shared_path(AZURE)
    pq_path = tmp_path / "azure.parquet"
    assert main(["trace", str(trace), "--to-parquet", str(pq_path)]) == 0
    capsys.readouterr()
    window = ["workload.end_s=300"]
    runs = []
    for t in (trace, pq_path):
        sc, base = load_scenario(SCENARIO, cli_overrides(window, str(t)))
        runs.append(run_scenario(sc, base, write=False, figures=False))
    a, b = runs
    # rows of the CSV in the window, counted with pandas from the raw timestamps
    ts = pd.to_datetime(pd.read_csv(trace)["TIMESTAMP"])
    n = int(((ts - ts.min()).dt.total_seconds() < 300).sum())
    assert b.summary["num_requests"] == n
    assert (b.summary["num_completed"] + b.summary["num_rejected"]
            + b.summary["num_cancelled"] + b.summary["num_unfinished"]) == n
    assert summary_without_wall(a.summary) == summary_without_wall(b.summary)
