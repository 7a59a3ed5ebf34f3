"""Hardening of the planner's command line (session 6): bad booleans in ``--plan-set`` /
``--sweep-set`` name the spec file as every other spec error does; topology plans honour
``-j``, ``--backend``, ``--no-cache``; an unreachable Ray address fails in bounded time.
Each test fails on the code before its fix."""
from __future__ import annotations

import pytest
import yaml
from planner_testlib import tiny_scenario

from simulator.planner.spec import PlanError, load_plan_spec, load_sweep_spec

BOOL_CHOICES = "use true/false, 1/0, yes/no or on/off (any case)"


# ---------------------------------------------------------------------- --plan-set booleans
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
    from simulator.cli import main
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(),
                                 "search_space": {"scheduler.max_num_seqs": [8]}}))
    assert main(["plan", str(p), "-q", "--plan-set", "search.early_stop=maybe"]) == 2
    err = capsys.readouterr().err
    assert err == (f"servesim: error: {p}: --plan-set search.early_stop=maybe: "
                   f"search.early_stop: value 'maybe' is not a boolean; {BOOL_CHOICES}\n")
    with pytest.raises(PlanError, match=f"^{p}: --plan-set search.early_stop=2: "):
        load_plan_spec(p, ["search.early_stop=2"])
