from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest
import yaml
from planner_testlib import tiny_plan

from simulator.cli.main import main
from simulator.planner.plan import run_plan
from simulator.planner.report import _headline
from simulator.planner.spec import PlanSpec


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan")
    spec = PlanSpec.model_validate(tiny_plan())
    first = run_plan(spec, None, outdir=out, jobs=1)
    second = run_plan(spec, None, outdir=out, jobs=1)
    return out, first, second


def test_plan_recommends_cheapest_passing(planned):
    _out, res, _ = planned
    assert res.status == "candidate"
    c = res.recommendation["config"]
    passing = [r for r in res.candidates if r["passed"]]
    assert c["label"] == passing[0]["label"]
    assert c["usd_per_hour"] == min(r["usd_per_hour"] for r in passing)
    # sizing: replicas x capacity covers the target with the headroom
    assert c["replicas"] * c["capacity_rps"] >= 20.0 * 1.1 - 1e-9
    assert c["gpus"] == c["replicas"] * c["tensor_parallel_size"]
    assert c["usd_per_hour"] == pytest.approx(c["gpus"] * c["usd_per_gpu_hour"])
    assert c["usd_per_gpu_hour"] in (3.0, 2.0)  # plan prices, matched by alias
    tok_h = 20.0 * 3600
    assert c["cost_per_1m_input_tokens_usd"] == pytest.approx(
        c["usd_per_hour"] / (tok_h * res.workload["mean_prompt_tokens"]) * 1e6)
    assert c["confirmations"][-1]["feasible"]
    assert len(res.recommendation["runners_up"]) <= 2
    assert res.baseline["label"] == "today" and res.baseline["is_baseline"]
    note = res.recommendation["bottleneck"]
    shares = note["shares"]
    assert shares is not None and shares["method"].startswith("time-weighted")
    assert sum(shares[k] for k in ("compute_bound", "memory_bound", "overhead")) == \
        pytest.approx(1.0)
    assert shares["prefill_steps"]["time_share"] + shares["decode_steps"]["time_share"] == \
        pytest.approx(1.0)
    assert "steps with prefill work are" in note["text"] and "for the mean step" not in \
        note["text"]
    assert isinstance(note["advice"], list)
    assert res.pareto and all(p["tps_per_user"] > 0 for p in res.pareto)


def test_plan_files(planned):
    out, _res, _ = planned
    for name in ("plan.md", "plan.html", "plan.json", "plan_table.csv", "plan_table.parquet",
                 "pareto.csv", "probes.csv"):
        assert (out / name).is_file(), name
    for fig in ("cost_vs_attainment", "capacity", "pareto", "latency_vs_load", "bottleneck"):
        assert (out / "figures" / f"{fig}.png").is_file(), fig
    html = (out / "plan.html").read_text()
    assert html.count("data:image/png;base64,") == 5
    assert "http://" not in html and "https://" not in html and "<script" not in html
    md = (out / "plan.md").read_text()
    assert "## Runners-up" in md and "## Pareto front" in md and "### Bottleneck" in md
    assert "each step classified on its own shape, weighted by its duration" in md
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] == "candidate" and doc["recommendation"]["config"]["gpus"] >= 1
    assert len(doc["candidates"]) == 4
    table = pd.read_csv(out / "plan_table.csv")
    assert len(table) == 5 and "cost_per_1m_output_tokens_usd" in table.columns


def test_second_run_performs_no_simulation(planned):
    _, first, second = planned
    assert first.stats["num_simulations"] > 0
    assert second.stats["num_simulations"] == 0
    assert second.recommendation["config"]["label"] == first.recommendation["config"]["label"]
    assert second.recommendation["config"]["capacity_rps"] == \
        first.recommendation["config"]["capacity_rps"]


def test_probe_cache_is_shared_when_only_the_target_changes(planned, tmp_path):
    out, _first, _ = planned
    spec = PlanSpec.model_validate(tiny_plan(target_rate_rps=15.0))
    res = run_plan(spec, None, outdir=out, jobs=1, write=False)
    # the capacity probes hit the cache; only confirmations at the new rate may run
    n_probes = sum(len(r["probes"]) for r in res.candidates)
    assert res.stats["num_simulations"] < n_probes
    assert res.stats["num_cache_hits"] >= n_probes


def test_unsafe_release_degrades_to_the_baseline(tmp_path):
    spec = PlanSpec.model_validate(tiny_plan(
        slo={"ttft_s": 1e-4}, search_space={"scheduler.max_num_seqs": [16, 64]},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4,
                "min_rate_scale": 0.25}))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1)
    # a 0.1 ms TTFT is below one prefill step of an 8B model, so the baseline (the same model
    # on an H100) fails the capacity gate too: nothing is recommended
    assert res.status == "none_passed"
    assert not res.recommendation["config"]["passed"]
    assert res.recommendation["config"]["label"] == "today"
    assert "no candidate passed every gate" in res.recommendation["reason"]
    assert "the baseline 'today' fails capacity" in res.recommendation["reason"]
    assert all("capacity" in r["failed_gates"] for r in res.candidates)
    head = _headline(res)
    assert head.startswith("No configuration passes the gates") and "Recommend" not in head
    md = (tmp_path / "plan.md").read_text()
    assert "none_passed" in md and "## Failed gates" in md and "Recommend" not in md.split(
        "## Target")[0]


def test_failing_candidates_fall_back_to_a_passing_baseline(tmp_path):
    """Llama-3.1-405B in bf16 needs 2 bytes x 405e9 = 810 GB of weights, more than one
    H100's 80 GB at TP 1, so the only candidate fails the fits gate; the baseline (the
    base scenario's 8B model) passes and is recommended."""
    spec = PlanSpec.model_validate(tiny_plan(
        search_space={"model": ["llama-3.1-405b"]}, baseline={"name": "today", "set": {}},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False)
    assert [r["failed_gates"] for r in res.candidates] == [["fits"]]
    assert res.status == "baseline_fallback" and res.recommendation["config"]["passed"]
    assert _headline(res).startswith("Recommend baseline 'today'")


def test_model_that_does_not_fit_fails_the_fits_gate(tmp_path):
    spec = PlanSpec.model_validate(tiny_plan(
        search_space={"model": ["llama-3.1-8b", "llama-3.1-405b"]},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False)
    big = next(r for r in res.candidates if "405b" in r["label"])
    assert big["failed_gates"] == ["fits"] and not big["passed"] and big["error"]
    assert res.status == "candidate"


def test_cli_plan(tmp_path, capsys):
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(tiny_plan(
        search_space={"scheduler.max_num_seqs": [32]},
        search={"window_s": None, "max_requests": 80, "rel_tol": 0.5, "max_probes": 5})))
    out = tmp_path / "out"
    assert main(["plan", str(p), "-j", "1", "-o", str(out), "--no-figures"]) == 0
    text = capsys.readouterr().out
    assert "Recommend" in text and "plan.html" in text
    assert (out / "plan.html").is_file() and not (out / "figures").exists()
    assert main(["plan", str(p), "-j", "1", "-o", str(out), "-q", "--target-rate", "5"]) == 0
    assert capsys.readouterr().out.startswith("Recommend")


def test_replica_count_of_an_overflowing_target_is_refused():
    from simulator.planner.search import replicas_for
    # 1.7e308 x 1.1 overflows to inf: no replica count, one clear error (not OverflowError)
    with pytest.raises(ValueError, match="not a finite replica count"):
        replicas_for(1.7e308, 1.0, 0.1)
    assert replicas_for(1e300, 1e290, 0.0) == 10**10


def test_target_needing_more_replicas_than_pool_requests_fails_confirmation(tmp_path):
    """The pool holds 150 requests: a target needing more replicas than that can never load
    every replica, so the candidate fails a ``confirmation`` gate saying so (no cluster of
    1e300 replicas is built, no int64 column overflows)."""
    spec = PlanSpec.model_validate(tiny_plan(
        target_rate_rps=1e300, search_space={"scheduler.max_num_seqs": [64]},
        baseline={"name": "today", "set": {}},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=True)
    (c,) = res.candidates
    assert c["failed_gates"] == ["confirmation"] and not c["passed"]
    text = c["gate_failures"][0]["text"]
    assert "more than the 150 requests of the pool" in text and "e+" in text
    assert res.status == "none_passed"


def test_thin_confirmation_warns(tmp_path):
    """The confirmation replays min(pool, max_requests x n) requests on n replicas; below
    20 per replica it warns (derived from the candidate's own replica count)."""
    from simulator.planner.search import CONFIRM_MIN_REQUESTS_PER_REPLICA, PlanConfirmationWarning
    spec = PlanSpec.model_validate(tiny_plan(
        target_rate_rps=1500.0, search_space={"scheduler.max_num_seqs": [64]},
        baseline={"name": "today", "set": {}},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False)
    (c,) = res.candidates
    n = c["confirmations"][0]["replicas"]   # the first confirmation's cluster
    assert n <= 150   # the pool check did not stop it
    m = min(150, 60 * n)
    thin = [str(w.message) for w in caught if issubclass(w.category, PlanConfirmationWarning)]
    if m < CONFIRM_MIN_REQUESTS_PER_REPLICA * n:
        assert any(f"at {n:,} replica(s) replays {m:,} requests ({m / n:.1f} per replica"
                   in t for t in thin), thin
    else:
        assert not thin
    assert n >= 8, "the target should need enough replicas to make the confirmation thin"
