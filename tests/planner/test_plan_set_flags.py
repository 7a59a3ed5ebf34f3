"""``--plan-set`` / ``--sweep-set`` (and the scenario's ``--set``): every boolean spelling,
and errors naming the spec file, the flag, the key and the valid choices; an override into a
mapping changes one key, not the section."""
from __future__ import annotations

import pytest
import yaml
from planner_testlib import tiny_plan, tiny_scenario

from simulator.planner.spec import PlanError, load_plan_spec, load_sweep_spec
from simulator.scenario.config import ScenarioError, load_scenario
from simulator.scenario.overrides import cli_overrides

BOOL_CHOICES = "use true/false, 1/0, yes/no or on/off (any case)"


def test_sweep_set_bad_boolean_names_the_file_and_the_flag(tmp_path):
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(),
                                 "grid": {"scheduler.max_num_seqs": [8, 16]}}))
    with pytest.raises(PlanError) as e:
        load_sweep_spec(p, ["set.scheduler.enable_chunked_prefill=maybe"])
    # before: "--sweep-set set.scheduler...: ..." without the file (other spec errors have it)
    assert str(e.value) == (f"{p}: --sweep-set set.scheduler.enable_chunked_prefill=maybe: "
                            "set.scheduler.enable_chunked_prefill: value 'maybe' is not a "
                            f"boolean; {BOOL_CHOICES}")


def test_plan_set_bad_boolean_on_the_cli_is_one_line_with_the_file(tmp_path, capsys):
    from simulator.cli.main import main
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(),
                                 "search_space": {"scheduler.max_num_seqs": [8]}}))
    assert main(["plan", str(p), "-q", "--plan-set", "search.early_stop=maybe"]) == 2
    err = capsys.readouterr().err
    assert err == (f"servesim: error: {p}: --plan-set search.early_stop=maybe: "
                   f"search.early_stop: value 'maybe' is not a boolean; {BOOL_CHOICES}\n")
    with pytest.raises(PlanError, match=f"^{p}: --plan-set search.early_stop=2: "):
        load_plan_spec(p, ["search.early_stop=2"])


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
    # scenario --set values are not coerced (docs/reference/scenario.md, pinned by the
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
                                         "last_known_good.set.scheduler.enable_chunked_"
                                         "prefill=0"])
    assert spec.baseline.set == {"hardware.gpu": "h100-sxm", "scheduler.max_num_seqs": 32}
    assert spec.last_known_good.set == {"scheduler.enable_chunked_prefill": False}
