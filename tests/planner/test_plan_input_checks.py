"""Plan and sweep files are checked before any simulation: candidate lists and grids are
counted before expanding, unknown names are named with the candidate and the key (the base's
names once, up front), a scenario or sweep given as a plan says so, a missing base names the
plan key, planner-sized replica counts are refused, and an unusable output folder is one
line."""
from __future__ import annotations

import pytest
import yaml
from planner_testlib import tiny_plan, tiny_scenario

from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanError, PlanSpec, load_plan_spec, load_sweep_spec
from simulator.scenario.config import ScenarioError


@pytest.fixture()
def plan_file(tmp_path):
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump(tiny_plan()))
    return p


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


@pytest.mark.parametrize("make", ["file", "under_file"])
def test_an_unusable_output_folder_is_one_line_before_any_simulation(tmp_path, make):
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" if make == "file" else tmp_path / "f" / "sub"
    with pytest.raises(ScenarioError) as e:
        run_plan(PlanSpec.model_validate(tiny_plan()), None, outdir=out, jobs=1)
    # before: "[Errno 20] Not a directory: '.../.cache/1e'" after the first candidate ran
    assert str(e.value).startswith(f"output folder {out}: ")
    assert "\n" not in str(e.value)


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
