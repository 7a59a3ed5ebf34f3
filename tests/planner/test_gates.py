"""Plan gates with their margins (cost per token, memory headroom, per-slice TTFT/TPOT,
quality table), per-candidate provenance and the named fallback beside the recommendation."""
from __future__ import annotations

import json

import pytest
import yaml
from planner_testlib import tiny_plan

from simulator.planner.gates import check_gates, evaluate_gates
from simulator.planner.plan import run_plan
from simulator.planner.provenance import compare_provenance, perf_provenance
from simulator.planner.spec import PlanError, PlanSpec, load_plan_spec

SLO = {"ttft_s": 0.25, "tpot_s": 0.05, "attainment_target": 0.9}


def _summary(**over):
    s = {"num_requests": 100, "num_rejected": 0, "num_cancelled": 0, "num_preemptions": 0,
         "slo_attainment": 0.95, "max_kv_cache_usage": 0.5,
         "by_slice": {"chat": {"ttft_s": {"p99": 0.2}, "tpot_s": {"p99": 0.04}},
                      "rare": {"ttft_s": {"p99": 0.2}, "tpot_s": {"p99": 0.04}}}}
    s.update(over)
    return s


def test_gates_report_value_bound_and_margin():
    s = _summary(slo_attainment=0.85, max_kv_cache_usage=0.97,
                 by_slice={"chat": {"ttft_s": {"p99": 0.2}, "tpot_s": {"p99": 0.04}},
                           "rare": {"ttft_s": {"p99": 0.3}, "tpot_s": {"p99": 0.06}}})
    gates = {"slice_tpot_p99": True, "max_peak_kv_cache_usage": 0.9}
    fails = {f["gate"]: f for f in evaluate_gates(s, gates, SLO)}
    assert list(fails) == ["slo_attainment", "slice_ttft_p99[rare]", "slice_tpot_p99[rare]",
                           "peak_kv_cache_usage"]
    att = fails["slo_attainment"]
    assert att["value"] == 0.85 and att["bound"] == 0.9 and att["op"] == ">="
    assert att["excess"] == pytest.approx(0.05)
    ttft = fails["slice_ttft_p99[rare]"]
    assert ttft["excess"] == pytest.approx(0.05) and ttft["relative"] == pytest.approx(0.2)
    assert ttft["text"] == "rare p99 TTFT 300 ms > 250 ms (+20%)"
    tpot = fails["slice_tpot_p99[rare]"]
    assert tpot["text"] == "rare p99 TPOT 60 ms > 50 ms (+20%)"
    kv = fails["peak_kv_cache_usage"]
    assert kv["value"] == 0.97 and kv["bound"] == 0.9
    assert "97.0% > 90.0%" in kv["text"]
    assert check_gates(s, gates, SLO) == list(fails)


def test_tpot_slice_gate_is_off_by_default_and_bounds_per_slice():
    s = _summary(by_slice={"rare": {"ttft_s": {"p99": 0.1}, "tpot_s": {"p99": 0.06}}})
    assert check_gates(s, {}, SLO) == []
    assert check_gates(s, {"slice_tpot_p99": True, "slice_tpot_p99_s": {"rare": 0.07}},
                       SLO) == []
    assert check_gates(s, {"slice_tpot_p99": True}, SLO) == ["slice_tpot_p99[rare]"]


QUALITY = {"metric": "accuracy", "source": "hand-written test table",
           "scores": [{"name": "fp8", "match": {"perf.weight_dtype": "fp8"},
                       "slices": {"chat": 0.9, "code": 0.6}},
                      {"name": "bf16 on h100", "match": {"perf.weight_dtype": "bf16",
                                                         "hardware.gpu": "h100"},
                       "score": 0.85}]}


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """Two candidates (H100 bf16 and fp8) against a quality table, a KV headroom gate, a
    last known-good A100 fallback; the search is small (60 requests per probe)."""
    out = tmp_path_factory.mktemp("gated")
    (out / "q.yaml").write_text(yaml.safe_dump(QUALITY))
    plan = tiny_plan(
        search_space={"perf.weight_dtype": ["bf16", "fp8"]},
        last_known_good={"name": "lkg", "set": {"hardware.gpu": "a100-sxm-80gb"}},
        gates={"max_peak_kv_cache_usage": 0.95},
        quality={"table": "q.yaml", "min_score": 0.8, "min_score_by_slice": {"code": 0.7}},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 5})
    (out / "plan.yaml").write_text(yaml.safe_dump(plan))
    spec, folder = load_plan_spec(out / "plan.yaml")
    return out, run_plan(spec, folder, outdir=out / "report", jobs=1)


def test_quality_gate_fails_the_fp8_slice_by_its_margin(gated):
    _, res = gated
    rows = {r["label"]: r for r in res.candidates}
    fp8 = next(r for k, r in rows.items() if "fp8" in k)
    bf16 = next(r for k, r in rows.items() if "bf16" in k)
    assert "quality[code]" in fp8["failed_gates"] and not fp8["passed"]
    f = next(g for g in fp8["gate_failures"] if g["gate"] == "quality[code]")
    assert f["value"] == 0.6 and f["bound"] == 0.7 and f["excess"] == pytest.approx(0.1)
    assert f["text"] == "code accuracy 0.6 < minimum 0.7 (short by 0.1)"
    assert fp8["quality"]["entry"] == "fp8"
    assert fp8["quality"]["scores"] == {"chat": 0.9, "code": 0.6}
    # the bf16 entry matches "h100" by catalog name (the candidate says h100-sxm)
    assert bf16["quality"]["entry"] == "bf16 on h100"
    assert bf16["quality"]["scores"] == {"chat": 0.85, "code": 0.85}
    assert not any(g.startswith("quality") for g in bf16["failed_gates"])
    # the A100 fallback has no entry in the table: unscored slices fail by default
    lkg = res.last_known_good
    assert lkg["quality"]["entry"] is None
    assert {"quality[chat]", "quality[code]"} <= set(lkg["failed_gates"])


def test_fallback_is_named_and_shown_beside_the_recommendation(gated):
    out, res = gated
    assert res.status == "candidate"
    assert res.fallback["kind"] == "last_known_good" and res.fallback["name"] == "lkg"
    assert not res.fallback["is_recommended"]
    md = (out / "report" / "plan.md").read_text()
    side = md.split("## Recommendation and fallback")[1].split("## Recommended configuration")[0]
    assert "fallback (last known-good)" in side and "[last known-good] lkg" in side
    assert res.recommendation["config"]["label"] in side
    html = (out / "report" / "plan.html").read_text()
    assert 'id="recommendation-and-fallback"' in html
    assert 'id="why-each-configuration-fails"' in html
    assert "code accuracy 0.6 &lt; minimum 0.7 (short by 0.1)" in html
    doc = json.loads((out / "report" / "plan.json").read_text())
    assert doc["fallback"]["name"] == "lkg" and doc["quality_table"]["metric"] == "accuracy"


def test_plan_prices_are_the_phase_split_of_the_hourly_cost(gated):
    _, res = gated
    c = res.recommendation["config"]
    w = res.workload
    f = c["prefill_share_at_target"]
    assert 0 < f < 1
    tok_h = w["target_rate_rps"] * 3600.0
    assert c["price_per_1m_input_tokens_usd"] == pytest.approx(
        c["usd_per_hour"] * f / (tok_h * w["mean_prompt_tokens"]) * 1e6)
    # input price x input tokens + output price x output tokens = the hourly cost
    per_hour = (c["price_per_1m_input_tokens_usd"] * tok_h * w["mean_prompt_tokens"]
                + c["price_per_1m_output_tokens_usd"] * tok_h * w["mean_output_tokens"]) / 1e6
    assert per_hour == pytest.approx(c["usd_per_hour"])


def test_provenance_is_recorded_per_candidate(gated):
    _, res = gated
    for r in res.candidates + [res.baseline, res.last_known_good]:
        p = r["provenance"]
        assert p["engine_profile"] == "vllm-v1" and p["num_operators"] >= 4
        assert sum(p["counts"].values()) == p["num_operators"]
        assert p["label"].startswith("measured")


def test_cost_per_token_gate_and_baseline_fallback(tmp_path):
    """A ceiling of $0.0001 per 1M output tokens no deployment meets: every candidate fails
    it with its price shown, and with no last known-good the baseline is the fallback (it
    fails too, so nothing is recommended)."""
    spec = PlanSpec.model_validate(tiny_plan(
        search_space={"scheduler.max_num_seqs": [64]},
        gates={"max_usd_per_1m_output_tokens": 0.0001},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False)
    (row,) = res.candidates
    f = next(g for g in row["gate_failures"] if g["gate"] == "max_usd_per_1m_output_tokens")
    assert f["value"] == pytest.approx(row["price_per_1m_output_tokens_usd"])
    assert f["bound"] == 0.0001 and f["text"].startswith("price per 1M output tokens $")
    assert res.fallback["kind"] == "baseline" and res.fallback["name"] == "today"
    assert res.status == "none_passed"


def test_plan_spec_errors_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="min_score and/or min_score_by_slice"):
        PlanSpec.model_validate(tiny_plan(quality={"table": "x.yaml"}))
    with pytest.raises(ValueError, match="share the name"):
        PlanSpec.model_validate(tiny_plan(last_known_good={"name": "today"}))
    spec = PlanSpec.model_validate(tiny_plan(quality={"table": "missing.yaml",
                                                      "min_score": 0.5}))
    with pytest.raises(PlanError, match="quality.table: file 'missing.yaml' not found"):
        run_plan(spec, tmp_path, outdir=tmp_path, write=False)
    (tmp_path / "bad.yaml").write_text("source: s\nscores:\n  - match: {}\n    scor: 1\n")
    spec = PlanSpec.model_validate(tiny_plan(quality={"table": "bad.yaml", "min_score": 0.5}))
    with pytest.raises(PlanError, match=r"bad.yaml.*scores.0.scor"):
        run_plan(spec, tmp_path, outdir=tmp_path, write=False)


def test_compare_provenance_marks_the_weaker_evidence():
    h100 = {"operators": {"gemm": {"kind": "measured"}, "elementwise": {"kind": "fitted"},
                          "all_reduce": {"kind": "none"}}, "engine_fitted_on": []}
    h200 = {"operators": {"gemm": {"kind": "measured"}, "elementwise": {"kind": "datasheet"},
                          "all_reduce": {"kind": "none"}}, "engine_fitted_on": []}
    a, b, c = compare_provenance([h100, h200, None])
    assert not a["weaker"] and a["note"] == ""
    assert b["weaker"] and b["weaker_operators"] == {"elementwise": "datasheet (best: fitted)"}
    assert c["weaker"] and "unknown" in c["note"]


def test_perf_provenance_of_the_shipped_profiles():
    """The shipped H200 profile has no fitted elementwise efficiencies (no fitted.yaml)
    while the H100 has one: an H200 candidate is ranked on weaker elementwise evidence."""
    from helpers import make_scenario

    from simulator.cluster.setup import build_setup
    recs = []
    for gpu in ("h100-sxm", "h200-sxm"):
        sc = make_scenario({"hardware": {"gpu": gpu}, "perf": {"source": "auto",
                                                                "engine": "vllm-v1"}})
        recs.append(perf_provenance(build_setup(sc).perf))
    h100, h200 = recs
    assert h100["operators"]["elementwise"]["kind"] == "fitted"
    assert h200["operators"]["elementwise"]["kind"] == "datasheet"
    assert h100["operators"]["all_reduce"]["kind"] == "none"
    assert any("vLLM" in s for s in h100["measured_table_sets"])
    assert compare_provenance(recs)[1]["weaker_operators"] == {
        "elementwise": "datasheet (best: fitted)"}
