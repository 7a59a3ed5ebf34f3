"""``servesim compare``: variant expansion, identical requests, files, KV metrics, CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from md_tables import rows_starting
from md_tables import tables as md_tables

from simulator.cli.main import main
from simulator.experiments.compare import (
    expand_variants,
    kv_step_metrics,
    parse_vary,
    run_compare,
    variant_names,
)
from simulator.scenario.config import ScenarioError

SCENARIO = {
    "name": "cmp_test",
    "model": "llama-3.1-8b",
    "hardware": {"gpu": "h100-sxm"},
    "scheduler": {"max_model_len": 2048, "max_batch_size": 8, "batch_timeout_s": 0.05},
    "kv_cache": {"num_gpu_blocks": 2048},
    "workload": {"synthetic": {
        "arrival": {"process": "poisson", "rate_rps": 4.0},
        "num_requests": 60,
        "prompt_tokens": {"dist": "uniform", "low": 50, "high": 600},
        "output_tokens": {"dist": "uniform", "low": 5, "high": 150}}},
    "slo": {"ttft_s": 0.5},
    "seed": 7,
}


@pytest.fixture
def scenario_file(tmp_path):
    p = tmp_path / "cmp.yaml"
    p.write_text(yaml.safe_dump(SCENARIO))
    return p


def test_parse_vary_and_expand():
    assert parse_vary("scheduler.policy=static,continuous") == (
        "scheduler.policy", ["static", "continuous"])
    assert parse_vary("scheduler.max_batch_size=8, 16") == ("scheduler.max_batch_size", [8, 16])
    for bad in ("scheduler.policy", "=a,b", "a.b=x,,y", "a..b=1"):
        with pytest.raises(ScenarioError):
            parse_vary(bad)
    # the same value twice would run one variant twice (named max_num_seqs=8, max_num_seqs=8-1)
    for dup, shown in (("scheduler.max_num_seqs=8,8", "8"), ("a.b=x, 1, x", "x")):
        with pytest.raises(ScenarioError, match=f"{shown} is in the list twice"):
            parse_vary(dup)
    assert parse_vary("a.b=1,1.0")[1] == [1, 1.0]  # written differently: two values
    combos = expand_variants([("a.x", [1, 2]), ("b.y", ["p", "q"])])
    assert combos == [[("a.x", 1), ("b.y", "p")], [("a.x", 1), ("b.y", "q")],
                      [("a.x", 2), ("b.y", "p")], [("a.x", 2), ("b.y", "q")]]
    with pytest.raises(ScenarioError, match="more than once"):
        expand_variants([("a.x", [1]), ("a.x", [2])])


def test_variant_names():
    words = [[("scheduler.policy", "static"), ("kv_cache.allocation", "paged")]]
    assert variant_names(words) == ["static-paged"]
    nums = [[("scheduler.max_batch_size", 8)], [("scheduler.max_batch_size", 16)]]
    assert variant_names(nums) == ["max_batch_size=8", "max_batch_size=16"]
    assert variant_names([[]]) == ["base"]


def test_kv_step_metrics_by_hand():
    steps = pd.DataFrame({
        "step_time_s": [1.0, 3.0],
        "batch_size": [4, 2],
        "kv_blocks_used": [10, 20],
        "kv_tokens_used": [80, 160],
        "num_padding_seqs": [1, 0],
    })
    m = kv_step_metrics(steps, block_size=16, kv_bytes_per_token=2.0)
    # reserved bytes 320 and 640 -> busy-time mean (320 + 3 x 640) / 4 = 560
    assert m["kv_reserved_bytes_mean"] == pytest.approx(560.0)
    # used bytes 160 and 320 -> (160 + 960) / 4 = 280
    assert m["kv_used_bytes_mean"] == pytest.approx(280.0)
    assert m["kv_wasted_bytes_mean"] == pytest.approx(280.0)
    assert m["mean_kv_fragmentation"] == pytest.approx(0.5)
    assert m["max_concurrency"] == 4
    assert m["padding_waste"] == pytest.approx(1 / 6)


def test_run_compare_four_variants_same_requests(scenario_file, tmp_path):
    out = tmp_path / "out"
    cr = run_compare(scenario_file, ["scheduler.policy=static,continuous",
                                     "kv_cache.allocation=contiguous,paged"],
                     outdir=out, figures=True, run_figures=False)
    names = [v.name for v in cr.variants]
    assert names == ["static-contiguous", "static-paged", "continuous-contiguous",
                     "continuous-paged"]
    assert cr.same_requests
    ref = cr.variants[0].requests
    for v in cr.variants:
        rq = v.requests
        assert rq["request_id"].tolist() == ref["request_id"].tolist()
        assert rq["arrival_time_s"].tolist() == ref["arrival_time_s"].tolist()
        assert rq["num_prompt_tokens"].tolist() == ref["num_prompt_tokens"].tolist()
        assert rq["num_output_tokens"].tolist() == ref["num_output_tokens"].tolist()
        assert len(rq) == 60
        sc = v.scenario
        assert (sc.scheduler.policy, sc.kv_cache.allocation) == tuple(
            x for _k, x in v.assignments)
        assert (out / v.name / "summary.json").is_file()
        assert (out / v.name / "report.md").is_file()
    for f in ("compare.md", "compare.csv", "compare.json", "compare_ttft_cdf.png",
              "compare_e2e_cdf.png", "compare_kv_memory.png", "compare_batch_size.png"):
        assert (out / f).is_file(), f
    assert (out / "compare_kv_memory.png").read_bytes()[:4] == b"\x89PNG"
    csv = pd.read_csv(out / "compare.csv")
    assert csv["variant"].tolist() == names
    assert {"ttft_p99_ms", "padding_waste_pct", "kv_fragmentation_pct", "max_concurrency",
            "cost_per_1m_tokens_usd", "scheduler.policy"} <= set(csv.columns)
    doc = json.loads((out / "compare.json").read_text())
    assert [v["name"] for v in doc["variants"]] == names and doc["same_requests"] is True
    md = (out / "compare.md").read_text()
    assert md_tables(md)[0][0][:2] == ["metric", "static-contiguous"]
    assert rows_starting(md, "padding waste (%)")
    assert "![TTFT CDF](compare_ttft_cdf.png)" in md
    # the table agrees with the runs: padding only in static, contiguous wastes more KV
    t = cr.table.set_index("variant")
    assert t.loc["continuous-paged", "padding_waste_pct"] == 0
    assert t.loc["static-contiguous", "padding_waste_pct"] > 0
    assert (t.loc["continuous-contiguous", "kv_fragmentation_pct"]
            > t.loc["continuous-paged", "kv_fragmentation_pct"])
    # static reserves per slot whatever the allocation mode: identical rows
    a = t.loc["static-contiguous"].drop(["kv_cache.allocation", "sim_wall_s"])
    b = t.loc["static-paged"].drop(["kv_cache.allocation", "sim_wall_s"])
    assert a.to_dict() == b.to_dict()


def test_run_compare_varying_workload_is_flagged(scenario_file, tmp_path):
    cr = run_compare(scenario_file, ["workload.rate_scale=1,2"], write=False)
    assert not cr.same_requests and cr.num_workloads == 2
    a, b = (v.requests["arrival_time_s"].to_numpy() for v in cr.variants)
    np.testing.assert_allclose(a / 2, b)


def test_compare_report_says_what_varied_and_names_the_latency_sources(scenario_file):
    from simulator.report.compare import render_compare_markdown
    cr = run_compare(scenario_file, ["hardware.gpu=h100-sxm,a100-sxm-80gb"], write=False)
    md = render_compare_markdown(cr)
    assert "Model `llama-3.1-8b` on varied GPUs (1 replica(s) x TP 1)" in md
    # one latency-sources line per variant, each naming its measured tables' device
    lines = [ln for ln in md.splitlines() if ln.startswith("- gpu=")]
    assert len(lines) == 2
    assert "NVIDIA H100 80GB HBM3: vLLM" in lines[0]
    assert "NVIDIA A100-SXM4-80GB: vLLM" in lines[1] and "reusing vllm-0.14.0" in lines[1]
    assert list(cr.table["latency_sources"]) == [ln.split(": ", 1)[1] for ln in lines]


def test_run_compare_invalid_variant(scenario_file):
    with pytest.raises(ScenarioError, match="variant bogus: .*scheduler.policy"):
        run_compare(scenario_file, ["scheduler.policy=bogus"], write=False)


def test_cli_compare(scenario_file, tmp_path, capsys):
    out = tmp_path / "cli"
    rc = main(["compare", str(scenario_file), "--vary", "scheduler.policy=static,continuous",
               "--set", "workload.synthetic.num_requests=20", "-o", str(out), "--no-figures"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "TTFT p99 (ms)" in text and "padding waste (%)" in text and "static" in text
    assert (out / "compare.md").is_file() and not (out / "compare_ttft_cdf.png").exists()
    assert (out / "static" / "summary.json").is_file()
    rc = main(["compare", str(scenario_file), "--vary", "scheduler.policy", "-o", str(out)])
    assert rc == 2
    assert "--vary" in capsys.readouterr().err


def test_cli_compare_trace(scenario_file, tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\n"
                     "0.0,100,5\n0.5,200,8\n1.0,50,3\n")
    out = tmp_path / "tr"
    rc = main(["compare", str(scenario_file), "--trace", str(trace), "--vary",
               "kv_cache.allocation=contiguous,paged", "-o", str(out), "--no-figures", "-q"])
    assert rc == 0
    doc = json.loads((out / "compare.json").read_text())
    assert [v["metrics"]["num_requests"] for v in doc["variants"]] == [3, 3]


def test_every_request_is_accounted_for_in_the_comparison(tmp_path):
    # 10 requests, every other one cancelled 1 ms after it arrives (before its first token)
    trace = tmp_path / "cancel.jsonl"
    trace.write_text("".join(json.dumps({"arrival_time_s": i, "num_prompt_tokens": 50,
                                         "num_output_tokens": 10,
                                         "cancel_after_s": 0.001 if i % 2 else None}) + "\n"
                             for i in range(10)))
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({**SCENARIO, "workload": {"trace": str(trace)}}))
    cr = run_compare(p, ["scheduler.max_num_seqs=4,8"], outdir=tmp_path / "out",
                     figures=False)
    for r in cr.table.to_dict(orient="records"):
        assert (r["num_requests"], r["num_completed"], r["num_cancelled"]) == (10, 5, 5)
        assert r["num_rejected"] == 0 and r["num_unfinished"] == 0
    csv = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert list(csv["num_cancelled"]) == [5, 5]
    md = (tmp_path / "out" / "compare.md").read_text()
    assert rows_starting(md, "cancelled requests") == [["cancelled requests", "5", "5"]]
    assert not rows_starting(md, "rejected requests")  # none: no row
