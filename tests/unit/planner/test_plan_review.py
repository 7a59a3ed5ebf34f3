"""Review findings on the capacity planner (session 5): the tie rule, command-line booleans,
the Method line's stop counts, the pruning notice, skipped candidates' empty capacity, the
SLO text and unused top-level cluster keys. Each test fails on the code before the fix."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from planner_testlib import tiny_plan, tiny_scenario

from simulator.planner.plan import run_plan
from simulator.planner.recommend import TIE_RULE, any_within, rank_key
from simulator.planner.report import _speedups_text
from simulator.planner.spec import PlanError, PlanSpec, load_plan_spec, load_sweep_spec, slo_text
from simulator.planner.topology import _rank as topology_rank
from simulator.planner.topology import write_topology_plan
from simulator.scenario.config import ScenarioError, load_scenario, validate_scenario
from simulator.scenario.overrides import cli_overrides


# ---------------------------------------------------------------------- 1. the tie rule
def _r(index, usd, gpus, headroom, passed=True, **kw):
    return {"index": index, "usd_per_hour": usd, "gpus": gpus, "headroom": headroom,
            "passed": passed, **kw}


def test_rank_key_applies_the_tie_rule_in_its_order():
    rows = [_r(0, 3.0, 1, 2.0),                                   # list order first
            _r(1, 3.0, 1, 2.0),
            _r(2, 3.0, 1, 4.0),                                   # more headroom
            _r(3, 3.0, 1, 0.1, same_config_as="last_known_good"),
            _r(4, 3.0, 1, 0.1, same_config_as="baseline"),
            _r(5, 2.0, 2, 0.1),                                   # cheaper: first
            _r(6, 1.0, 1, 9.0, passed=False)]                     # failing: last
    # by hand: $2 first; at $3 the baseline's config, the last known-good's, then the
    # higher headroom (4.0), then list order 0, 1; the failing one last
    assert [r["index"] for r in sorted(rows, key=rank_key)] == [5, 4, 3, 2, 0, 1, 6]
    # fewer GPUs before more headroom at equal cost: 1 GPU at $3/h beats 3 GPUs at $1/h each
    a, b = _r(0, 3.0, 3, 5.0), _r(1, 3.0, 1, 0.0)
    assert min([a, b], key=rank_key) is b
    assert TIE_RULE.startswith("at equal USD per hour: the baseline's configuration")


def _tie_plan(seqs=(32, 48)):
    # every candidate and the baseline: 1 x H100 at $3/h (the target needs one replica)
    return tiny_plan(search_space={"hardware.gpu": ["h100-sxm"],
                                   "scheduler.max_num_seqs": list(seqs)},
                     target_rate_rps=4.0)


def test_baseline_wins_an_equal_cost_tie(tmp_path):
    res = run_plan(PlanSpec.model_validate(_tie_plan()), None, outdir=tmp_path, jobs=1,
                   write=False)
    assert [r["usd_per_hour"] for r in res.candidates] == [3.0, 3.0]  # precondition: a tie
    assert res.baseline["passed"] and res.baseline["usd_per_hour"] == 3.0
    # before: the first-ranked candidate won by list order / headroom over the baseline
    assert res.status == "baseline"
    assert res.recommendation["config"]["label"] == "today"
    assert "wins the tie" in res.recommendation["reason"]
    assert [r["label"] for r in res.recommendation["runners_up"]] == [
        r["label"] for r in res.candidates]


def test_the_baseline_configuration_wins_among_candidates(tmp_path):
    # max_num_seqs 64 is the base's own value, so that candidate is the baseline's config;
    # listed second, it still ranks first at equal cost
    d = _tie_plan(seqs=(128, 64))
    res = run_plan(PlanSpec.model_validate(d), None, outdir=tmp_path, jobs=1, write=False)
    assert [r["usd_per_hour"] for r in res.candidates] == [3.0, 3.0]
    c = res.recommendation["config"]
    assert res.status == "candidate"
    assert c["label"] == "gpu=h100-sxm seqs=64" and c["same_config_as"] == "baseline"
    assert res.candidates[0]["label"] == c["label"] and res.candidates[0]["rank"] == 1


def test_topology_rank_breaks_ties_by_gpus_then_attainment_then_list_order():
    rows = [{"usd_per_hour": 4.0, "gpus": 2, "slo_attainment": 0.95, "order": 0,
             "label": "z"},
            {"usd_per_hour": 4.0, "gpus": 2, "slo_attainment": 0.95, "order": 1,
             "label": "a"},
            {"usd_per_hour": 4.0, "gpus": 2, "slo_attainment": 0.99, "order": 2,
             "label": "m"}]
    # before: the label ("a") broke the equal-attainment tie; now list order ("z" first)
    assert [r["label"] for r in sorted(rows, key=topology_rank)] == ["m", "z", "a"]


# ---------------------------------------------------------------------- 2. CLI booleans
@pytest.fixture()
def plan_file(tmp_path):
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(tiny_plan()))
    return p


@pytest.mark.parametrize("word, want", [("1", True), ("0", False), ("yes", True),
                                        ("Off", False), ("TRUE", True), ("n", False),
                                        ("on", True), ("False", False)])
def test_plan_set_accepts_every_boolean_spelling(plan_file, word, want):
    spec, _ = load_plan_spec(plan_file, [f"search.early_stop={word}",
                                         f"set.scheduler.enable_chunked_prefill={word}"])
    assert spec.search.early_stop is want
    assert spec.set["scheduler.enable_chunked_prefill"] is want


def test_plan_set_bad_boolean_names_the_flag_the_key_and_the_choices(plan_file):
    with pytest.raises(ScenarioError) as e:
        load_plan_spec(plan_file, ["search.early_stop=maybe"])
    msg = str(e.value)
    # the plan file leads, as in every other spec error (session 6)
    assert msg.startswith(f"{plan_file}: --plan-set search.early_stop=maybe: search.early_stop:")
    assert "true/false, 1/0, yes/no or on/off" in msg and "\n" not in msg


def test_plan_set_validation_error_names_the_flag(plan_file):
    with pytest.raises(PlanError) as e:
        load_plan_spec(plan_file, ["search.rel_tol=0"])
    # before: only the plan file was named
    assert f"{plan_file}: --plan-set search.rel_tol=0: search.rel_tol: value 0" in str(e.value)


def test_sweep_set_booleans_and_errors(tmp_path):
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(),
                                 "grid": {"scheduler.max_num_seqs": [8, 16]}}))
    with pytest.raises(PlanError) as e:
        load_sweep_spec(p, ["grid=3"])
    assert "--sweep-set grid=3: grid" in str(e.value)


def test_run_set_stays_strict_and_names_the_flag_and_the_choices(tmp_path):
    # scenario --set values are not coerced (README "Scenario reference", pinned by the
    # hostile corpus): 0 is refused, with the flag, the key and the valid values named
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(tiny_scenario()))
    with pytest.raises(ScenarioError) as e:
        load_scenario(p, cli_overrides(["scheduler.enable_chunked_prefill=0"]))
    assert str(e.value).endswith("--set scheduler.enable_chunked_prefill=0: "
                                 "scheduler.enable_chunked_prefill: value 0: Input should be "
                                 "a valid boolean (true or false)")
    sc, _ = load_scenario(p, cli_overrides(["scheduler.enable_chunked_prefill=false"]))
    assert sc.scheduler.enable_chunked_prefill is False


# ---------------------------------------------------------------------- 3. the Method line
def test_method_line_counts_the_dominance_probes():
    probe = {"stopped_early": False}
    dom = {"stopped_early": True}
    cand = {"probes": [probe], "confirmations": [probe], "dominance_probe": dom,
            "status": "pass"}
    res = SimpleNamespace(candidates=[cand], baseline={"probes": [probe],
                                                       "confirmations": []},
                          last_known_good=None)
    # by hand: 4 runs (2 probes, 1 confirmation, 1 dominance probe), the dominance one
    # stopped; before, the dominance probe was left out: "0 of 3", so no sentence at all
    assert _speedups_text(res).startswith(
        "1 of 4 probe, dominance-probe and confirmation runs stopped")


# ---------------------------------------------------------------------- 4 and 6. pruning
def test_any_within_reads_the_built_rows():
    rows = [{"passed": False, "usd_per_hour": 1.0}, {"passed": True, "usd_per_hour": 4.0}]
    assert not any_within(rows, 3.0)
    assert any_within(rows + [{"passed": True, "usd_per_hour": 3.0}], 3.0)


def test_abandoned_pruning_says_so_in_one_line(tmp_path):
    # the H100 candidate costs more than the $0.10/h A100 baseline: skipped, then nothing
    # within the bound passes, so the plan evaluates it again unpruned
    d = tiny_plan(search_space={"hardware.gpu": ["h100-sxm"]},
                  prices={"h100": 3.0, "a100-sxm-80gb": 0.1},
                  baseline={"name": "today", "set": {"hardware.gpu": "a100-sxm-80gb"}})
    d["search"] = {**d["search"], "prune_dominated": True}
    lines: list[str] = []
    res = run_plan(PlanSpec.model_validate(d), None, outdir=tmp_path, jobs=1, write=False,
                   notify=lines.append)
    assert res.stats["pruning_abandoned_after_simulations"] is not None
    assert len(lines) == 1 and "\n" not in lines[0]
    bound = res.baseline["usd_per_hour"]
    assert lines[0].startswith(f"pruning abandoned: no candidate within the bound "
                               f"${bound:,.2f}/h passed; evaluating all 1 candidates unpruned")


# ---------------------------------------------------------------------- 5. skipped rows
def test_skipped_candidates_have_no_capacity_and_say_why(tmp_path):
    d = tiny_plan()
    d["search"] = {**d["search"], "prune_dominated": True}
    res = run_plan(PlanSpec.model_validate(d), None, outdir=tmp_path, jobs=1, figures=False)
    skipped = [r for r in res.candidates if r["status"].startswith("skipped")]
    assert skipped  # the A100 at max_num_seqs 16 needs 2 replicas ($4/h) > the $3/h baseline
    t = pd.read_csv(tmp_path / "plan_table.csv").set_index("label")
    for r in skipped:
        assert r["capacity_rps"] is None and r["capacity_rps_per_gpu"] is None
        assert pd.isna(t.loc[r["label"], "capacity_rps"])  # before: 0
        assert t.loc[r["label"], "status"] == "skipped: dominated by the baseline 'today' " \
                                              "at $3.00/h"
    for r in res.candidates:
        if r not in skipped:
            assert t.loc[r["label"], "status"] == ("pass" if r["passed"] else
                                                   "fail: " + ", ".join(r["failed_gates"]))
            assert t.loc[r["label"], "capacity_rps"] == pytest.approx(r["capacity_rps"])
    md = (tmp_path / "plan.md").read_text()
    # the "all candidates" table: rank, configuration, capacity/replica, ...
    row = next(ln for ln in md.splitlines()
               if ln.startswith("| -") and f"| {skipped[0]['label']} " in ln)
    assert row.split("|")[3].strip() == "-"  # the capacity cell: not measured, not 0.00


# ---------------------------------------------------------------------- 7. SLO text
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


# ---------------------------------------------------------------------- 8. unused cluster
def test_top_level_cluster_keys_unused_by_every_pool_are_refused():
    pools = [{"name": "A", "cluster": {"num_replicas": 2}},
             {"name": "B", "cluster": {"num_replicas": 1}, "match": {"tenants": ["b"]}}]
    raw = {"workload": {"trace": "t.csv"}, "pools": pools}
    validate_scenario(raw)  # no top-level cluster: fine
    # a key stated at its default is unused all the same (before: let through)
    with pytest.raises(ScenarioError, match=r"cluster: key\(s\) num_replicas unused"):
        validate_scenario({**raw, "cluster": {"num_replicas": 1}})
    with pytest.raises(ScenarioError) as e:
        validate_scenario({**raw, "cluster": {"num_replicas": 3, "router": "least_kv"}})
    assert "cluster: key(s) num_replicas, router unused: every pool states its own cluster" \
        in str(e.value)
    # a pool without its own cluster reads the top-level one: allowed
    validate_scenario({**raw, "pools": [{"name": "A"}, pools[1]],
                       "cluster": {"num_replicas": 3}})


# ---------------------------------------------------------------------- hostile inputs
def _factory(stop_on: str | None):
    from simulator.cluster.setup import build_setup

    def factory(sc):
        if sc.hardware.gpu == stop_on:
            raise KeyboardInterrupt  # Ctrl-C while this candidate is evaluated
        return build_setup(sc)
    factory.cache_id = "review-interrupt"  # the same cache keys for both factories
    return factory


def test_an_interrupted_plan_resumes_from_its_finished_candidates(tmp_path):
    # H100 first (the baseline shares its evaluation), then the A100: interrupted there
    d = tiny_plan(search_space={"hardware.gpu": ["h100-sxm", "a100-sxm-80gb"]})
    spec = PlanSpec.model_validate(d)
    with pytest.raises(KeyboardInterrupt):
        run_plan(spec, None, outdir=tmp_path, jobs=1, write=False,
                 setup_factory=_factory("a100-sxm-80gb"))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False,
                   setup_factory=_factory(None))
    # before: nothing was cached until every candidate finished, so both ran again
    h100 = next(r for r in res.candidates if r["gpu"] == "h100-sxm")
    a100 = next(r for r in res.candidates if r["gpu"] == "a100-sxm-80gb")
    assert h100["cached"] and h100["num_simulations"] == 0
    assert not a100["cached"] and a100["num_simulations"] > 0


@pytest.mark.parametrize("plan_set, needle", [
    (["candidates=[]"], "candidates: an empty list; give at least one override set"),
    (["search_space={scheduler.max_num_seqs: [1, 2, 3], kv_cache.block_size: [8, 16]}",
      "max_candidates=5"],
     ("search_space x candidates: 6 candidates (max_num_seqs 3 x block_size 2) > "
      "max_candidates 5")),
])
def test_plan_candidate_lists_are_checked_before_expanding(plan_file, plan_set, needle):
    with pytest.raises(PlanError) as e:
        load_plan_spec(plan_file, plan_set)
    assert needle in str(e.value)


def test_a_million_point_sweep_is_refused_before_expanding(tmp_path):
    p = tmp_path / "sweep.yaml"
    grid = {"scheduler.max_num_seqs": list(range(1, 101)),
            "scheduler.max_num_batched_tokens": list(range(2048, 2148)),
            "kv_cache.block_size": list(range(1, 101))}
    p.write_text(yaml.safe_dump({"base": tiny_scenario(), "grid": grid}))  # keys sorted
    with pytest.raises(PlanError) as e:
        load_sweep_spec(p)
    assert "grid x points: 1,000,000 points (block_size 100 x max_num_batched_tokens " \
           "100 x max_num_seqs 100) > max_points 10,000" in str(e.value)


def test_unknown_candidate_gpu_names_the_candidate_and_the_key(tmp_path):
    d = tiny_plan(search_space={"hardware.gpu": ["h100-sxm", "nonsense"]})
    with pytest.raises(PlanError) as e:
        run_plan(PlanSpec.model_validate(d), None, outdir=tmp_path, jobs=1, write=False)
    # before: "unknown GPU 'nonsense'; ..." with no candidate or key named
    assert str(e.value).startswith("plan candidate point 1 (gpu=nonsense): hardware.gpu: "
                                   "unknown GPU 'nonsense'")


def test_free_gpus_with_pruning_are_evaluated_not_errors(tmp_path):
    # price 0: a replica costs $0/h, never more than the bound; before, every pruned
    # candidate failed with "error: ValueError: a replica must cost > 0 USD per hour"
    d = tiny_plan(prices={"h100": 0.0, "a100-sxm-80gb": 0.0})
    d["search"] = {**d["search"], "prune_dominated": True}
    res = run_plan(PlanSpec.model_validate(d), None, outdir=tmp_path, jobs=1, write=False)
    assert not any(r["error"] for r in res.candidates)
    assert all(r["usd_per_hour"] == 0.0 for r in res.candidates if r["passed"])
    # every cost ties at $0/h: the baseline's configuration (H100, max_num_seqs 64) wins
    c = res.recommendation["config"]
    assert res.status == "candidate" and c["same_config_as"] == "baseline"


@pytest.mark.parametrize("make", ["file", "under_file"])
def test_an_unusable_output_folder_is_one_line_before_any_simulation(tmp_path, make):
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" if make == "file" else tmp_path / "f" / "sub"
    with pytest.raises(ScenarioError) as e:
        run_plan(PlanSpec.model_validate(tiny_plan()), None, outdir=out, jobs=1)
    # before: "[Errno 20] Not a directory: '.../.cache/1e'" after the first candidate ran
    assert str(e.value).startswith(f"output folder {out}: ")
    assert "\n" not in str(e.value)


def test_sweep_warns_about_failed_points_even_when_quiet(tmp_path, capsys):
    from simulator.cli.main import main
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(num_requests=20),
                                 "grid": {"model": ["llama-3.1-8b", "llama-3.1-405b"]}}))
    assert main(["sweep", str(p), "-q", "-j", "1", "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "servesim: warning: 1 point(s) failed (see the 'error' column)" in err


def _topology_file(tmp_path):
    p = tmp_path / "topo.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "base": tiny_scenario(num_requests=20),
                                 "usd_per_gpu_hour": 2.0, "output_dir": str(tmp_path / "o"),
                                 "topology_search": {"aggregated": {"max_replicas": 1}}}))
    return p


def test_topology_plan_reads_plan_set_and_refuses_flags_it_does_not_use(tmp_path, capsys):
    from simulator.cli.main import main
    p = _topology_file(tmp_path)
    # before: --plan-set and --target-rate were ignored silently for a topology plan
    assert main(["plan", str(p), "-q", "--plan-set", "rate_scale=0"]) == 2
    assert "rate_scale: value 0: Input should be greater than 0" in capsys.readouterr().err
    assert main(["plan", str(p), "-q", "--target-rate", "5"]) == 2
    assert "--target-rate: not used by a topology plan" in capsys.readouterr().err
    assert main(["plan", str(p), "-q", "--plan-set", "name=renamed"]) == 0
    assert "renamed" in (tmp_path / "o" / "plan.md").read_text()


@pytest.mark.parametrize("plan_set, key", [
    (["set={cluster.num_replicas: 4}"], "set"),
    (["baseline={set: {cluster: {num_replicas: 4}}}"], "baseline.set"),
    (["last_known_good={name: lkg, set: {cluster.num_replicas: 2}}"], "last_known_good.set"),
])
def test_replicas_in_plan_overrides_are_refused_not_replaced(plan_file, plan_set, key):
    # before: the planner replaced the value by its own sizing without a word
    with pytest.raises(PlanError) as e:
        load_plan_spec(plan_file, plan_set)
    assert f"{key}: value {{...}}: set: cluster.num_replicas is sized by the planner" in \
        str(e.value)


def test_a_missing_base_names_the_plan_key(tmp_path):
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(tiny_plan(base="missing.yaml")))
    spec, folder = load_plan_spec(p)
    with pytest.raises(PlanError) as e:
        run_plan(spec, folder, outdir=tmp_path / "o", jobs=1, write=False)
    assert str(e.value).startswith("base: scenario file 'missing.yaml' not found")


@pytest.mark.parametrize("load", [load_plan_spec, load_sweep_spec])
def test_a_scenario_given_as_a_plan_or_sweep_says_so(tmp_path, load):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(tiny_scenario()))
    with pytest.raises(PlanError) as e:
        load(p)
    # before: "missing required key 'base'"
    assert "a scenario file (it has workload: and no base:)" in str(e.value)


def test_a_malformed_plan_set_names_its_own_flag(plan_file):
    with pytest.raises(ScenarioError) as e:
        load_plan_spec(plan_file, ["search.max_requests"])
    # before: "--set 'search.max_requests': expected key.path=value"
    assert str(e.value) == f"{plan_file}: --plan-set 'search.max_requests': expected key.path=value"


def test_a_dotted_key_inside_a_mapping_is_blamed_on_its_flag(plan_file):
    with pytest.raises(PlanError) as e:
        load_plan_spec(plan_file, ["search_space.hardware.gpu=h100"])
    assert f"{plan_file}: --plan-set search_space.hardware.gpu=h100: " \
           "search_space.hardware.gpu: value 'h100'" in str(e.value)


def test_plan_set_into_baseline_set_changes_one_key_not_the_section(plan_file):
    # before: baseline.set became {"scheduler": {"max_num_seqs": 32}}, which replaced the
    # base's whole scheduler section (its max_num_batched_tokens silently lost)
    spec, _ = load_plan_spec(plan_file, ["baseline.set.scheduler.max_num_seqs=32",
                                         ("last_known_good.set.scheduler.enable_chunked_"
                                          "prefill=0")])
    assert spec.baseline.set == {"hardware.gpu": "h100-sxm", "scheduler.max_num_seqs": 32}
    assert spec.last_known_good.set == {"scheduler.enable_chunked_prefill": False}


def test_a_sweep_given_as_a_plan_and_back_says_so(tmp_path):
    sweep = tmp_path / "sw.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": "x.yaml",
                                     "grid": {"scheduler.max_num_seqs": [8, 16]}}))
    with pytest.raises(PlanError) as e:
        load_plan_spec(sweep)
    # before: "unknown key 'grid'"
    assert str(e.value) == (f"{sweep}: a sweep file (it has grid: and no search_space:), not a "
                            "plan file; run it with servesim sweep")
    plan = tmp_path / "pl.yaml"
    plan.write_text(yaml.safe_dump({"name": "p", "base": "x.yaml", "target_rate_rps": 1.0,
                                    "search_space": {"scheduler.max_num_seqs": [8]}}))
    with pytest.raises(PlanError) as e:
        load_sweep_spec(plan)
    assert str(e.value) == (f"{plan}: a plan file (it has search_space: and no grid:), not a "
                            "sweep file; run it with servesim plan")


@pytest.mark.parametrize("argv, family", [
    (["plan", "plan_default", "-q", "-j", "1"], "capacity plan"),
    (["sweep", "sweep_default", "-q", "-j", "1"], "sweep"),
])
def test_unknown_base_name_is_one_line_before_any_point(tmp_path, capsys, monkeypatch, argv,
                                                        family):
    """A model every point inherits from the base: before, each point failed alone and the
    command exited 0 ("32 point(s) failed"; a plan with every gate 'does not fit'). (The
    shipped sweep's grid sets the GPU, and the plan checks its GPUs with their prices.)"""
    from simulator.cli.main import main
    from simulator.experiments import runner

    def _refuse(*a, **k):
        raise AssertionError("a point ran before the base's names were checked")
    monkeypatch.setattr(runner, "run_tasks", _refuse)
    out = tmp_path / "new" / "o"
    assert main([*argv, "--set", "model=nosuch", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"servesim: error: {family}: model 'nosuch' (of the base scenario): "
                          "unknown model 'nosuch'; known: "), err
    assert not (tmp_path / "new").exists()


def test_base_model_path_relative_to_the_spec_folder_passes_the_name_check(tmp_path):
    """The up-front name check resolves a config path as the points do (the base's folder,
    then the spec file's): a model given relative to the sweep file is not refused."""
    import json

    from simulator.catalog.models import get_model
    from simulator.planner.sweep import _sweep_base

    cfg = tmp_path / "spec" / "cfg" / "config.json"
    cfg.parent.mkdir(parents=True)
    llama = get_model("llama-3.2-1b")
    cfg.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": llama.hidden_size, "intermediate_size": llama.intermediate_size,
        "num_hidden_layers": llama.num_layers, "num_attention_heads": llama.num_attention_heads,
        "num_key_value_heads": llama.num_kv_heads, "vocab_size": llama.vocab_size,
        "max_position_embeddings": 8192, "tie_word_embeddings": True}))
    base = tmp_path / "base" / "b.yaml"
    base.parent.mkdir()
    base.write_text(yaml.safe_dump(tiny_scenario()))
    spec = load_sweep_spec_from({"base": str(base), "set": {"model": "cfg/config.json"},
                                 "grid": {"scheduler.max_num_seqs": [8]}}, tmp_path / "spec")
    raw, _ = _sweep_base(spec, tmp_path / "spec", None, None)
    assert raw["model"] == "cfg/config.json"
    spec = load_sweep_spec_from({"base": str(base), "set": {"model": "cfg/nosuch.json"},
                                 "grid": {"scheduler.max_num_seqs": [8]}}, tmp_path / "spec")
    with pytest.raises(PlanError, match=r"sweep: model 'cfg/nosuch.json' \(of the base "
                                        r"scenario\)"):
        _sweep_base(spec, tmp_path / "spec", None, None)


def load_sweep_spec_from(raw: dict, folder):
    p = folder / "sweep.yaml"
    p.write_text(yaml.safe_dump(raw))
    return load_sweep_spec(p)[0]
