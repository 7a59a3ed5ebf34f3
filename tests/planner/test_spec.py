from __future__ import annotations

import pytest
import yaml
from planner_testlib import tiny_plan

from simulator.cli.main import main
from simulator.planner.spec import PlanError, load_plan_spec, load_sweep_spec


def _write(tmp_path, data, name="plan.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


def test_plan_loads_with_defaults(tmp_path):
    spec, folder = load_plan_spec(_write(tmp_path, tiny_plan()))
    assert folder == tmp_path.resolve()
    assert spec.headroom == 0.1 and spec.gates.slice_ttft_p99 is True
    assert spec.search.max_requests == 150 and spec.search.growth == 2.0


@pytest.mark.parametrize("change, message", [
    ({"search": {"max_request": 5}},
     "unknown key 'search.max_request'; allowed keys: confirm_max_requests, early_stop, growth"),
    ({"serach": {}}, "unknown key 'serach'; allowed keys: base, baseline"),
    ({"search": {"rel_tol": 0}}, "search.rel_tol: value 0: Input should be greater than 0"),
    ({"gates": {"slice_ttft_p99_s": {"code": -1}}},
     "gates.slice_ttft_p99_s: value {...}: slice 'code': bound must be > 0 s"),
    ({"rate_scale": 2.0}, "give target_rate_rps or rate_scale, not both"),
    ({"search_space": {"cluster.num_replicas": [1, 2]}},
     "cluster.num_replicas is sized by the planner"),
    ({"search_space": {"workload.rate_scale": [1, 2]}}, "the workload is fixed for a plan"),
    ({"search_space": {"hardware.gpu": []}}, "'hardware.gpu' has no values"),
    ({"prices": {"h100": -1.0}}, "must be >= 0 USD/GPU-hour"),
    ({"baseline": {"nam": "x"}}, "unknown key 'baseline.nam'; allowed keys: name, set"),
])
def test_plan_errors_name_the_key_path(tmp_path, change, message):
    p = _write(tmp_path, tiny_plan(**change))
    with pytest.raises(PlanError) as e:
        load_plan_spec(p)
    assert message in str(e.value)
    assert str(e.value).startswith(str(p))
    assert "\n" not in str(e.value)


def test_missing_base_and_bad_yaml(tmp_path):
    data = tiny_plan()
    del data["base"]
    with pytest.raises(PlanError, match="missing required key 'base'"):
        load_plan_spec(_write(tmp_path, data))
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(PlanError, match="not valid YAML"):
        load_plan_spec(bad)
    with pytest.raises(PlanError, match="not found"):
        load_plan_spec(tmp_path / "nope.yaml")


def test_plan_set_overrides_spec_fields(tmp_path):
    p = _write(tmp_path, tiny_plan())
    spec, _ = load_plan_spec(p, ["search.max_requests=77", "target_rate_rps=3",
                                 "search_space.scheduler.max_num_seqs=[8]"])
    assert spec.search.max_requests == 77 and spec.target_rate_rps == 3
    assert spec.search_space["scheduler.max_num_seqs"] == [8]


def test_sweep_spec_errors(tmp_path):
    good = {"base": {"workload": {"trace": "x.csv"}}, "grid": {"hardware.gpu": ["h100"]}}
    spec, _ = load_sweep_spec(_write(tmp_path, good, "s.yaml"))
    assert spec.grid == {"hardware.gpu": ["h100"]}
    with pytest.raises(PlanError, match="unknown key 'gird'"):
        load_sweep_spec(_write(tmp_path, {**good, "gird": {}}, "s.yaml"))
    with pytest.raises(PlanError, match="grid: 'hardware.gpu' has no values"):
        load_sweep_spec(_write(tmp_path, {**good, "grid": {"hardware.gpu": []}}, "s.yaml"))
    with pytest.raises(PlanError, match="not of the form a.b.c"):
        load_sweep_spec(_write(tmp_path, {**good, "grid": {"a..b": [1]}}, "s.yaml"))


def test_cli_bad_plan_exits_2_with_one_line(tmp_path, capsys):
    p = _write(tmp_path, tiny_plan(search={"max_request": 5}))
    assert main(["plan", str(p), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("servesim: error: ") and "search.max_request" in err
    assert len(err.splitlines()) == 1


def test_cli_bad_candidate_names_the_point(tmp_path, capsys):
    p = _write(tmp_path, tiny_plan(search_space={"scheduler.max_num_seq": [1]}))
    assert main(["plan", str(p), "-q", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "plan candidate point 0 (max_num_seq=1)" in err and "scheduler.max_num_seq" in err
    # the plan file first, as a sweep's bad point names its sweep file
    assert err.startswith(f"servesim: error: {p}: plan candidate point 0 ")
