"""A plan, sweep or quality-table file given where a scenario is expected says what it is and
which command takes it (it said "missing required key 'workload'")."""
from __future__ import annotations

import pytest

from simulator.scenario.config import ScenarioError, load_scenario


@pytest.mark.parametrize(("name", "said"), [
    ("plan_default", ("a capacity plan file (it has 'search_space'), not a scenario: run it "
                     "with 'servesim plan'")),
    ("sweep_default", ("a sweep file (it has 'grid'), not a scenario: run it with "
                      "'servesim sweep'")),
    ("plan_topology_azure_conv_70b", ("a topology plan file (it has 'topology_search'), not a "
                                     "scenario: run it with 'servesim plan'")),
    ("plan_day_azure_conv", ("a day plan file (it has 'day'), not a scenario: run it with "
                            "'servesim plan'")),
    ("quality_azure_conv_example", ("a quality table file (it has 'scores'), not a scenario: a "
                                   "capacity plan names it in its 'quality:' key")),
])
def test_a_file_of_another_command_names_it(name, said):
    with pytest.raises(ScenarioError) as e:
        load_scenario(name)
    assert str(e.value) == f"{name}: {said}"


def test_the_cli_says_it_in_one_line(capsys, tmp_path):
    from simulator.cli.main import main
    assert main(["run", "plan_default", "-o", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [("servesim: error: plan_default: a capacity plan file (it has 'search_space'), "
                   "not a scenario: run it with 'servesim plan'")]
