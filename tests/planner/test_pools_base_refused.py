"""``servesim plan`` (capacity plans) and ``servesim sweep`` refuse a base scenario that
declares ``pools:`` up front -- one line naming the base file and what to use instead, exit 2
-- as ``servesim compare`` does. Before: every candidate / point failed alone with "declares
pools: it runs through the gateway" recorded in the outputs, and the command exited 0."""
from __future__ import annotations

import pytest
import yaml
from helpers import REPO_ROOT
from planner_testlib import tiny_scenario

from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanError, PlanSpec, SweepSpec
from simulator.planner.sweep import run_sweep

SCEN = REPO_ROOT / "scenarios"


def _cli(argv, capsys):
    from simulator.cli.main import main
    rc = main(argv)
    return rc, capsys.readouterr().err


def test_plan_with_a_pools_base_is_refused_before_any_candidate(tmp_path, capsys):
    out = tmp_path / "pp2"
    rc, err = _cli(["plan", "plan_default", "--plan-set", "base=pools_mixed_gpu.yaml",
                    "--plan-set", "search_space={scheduler.max_num_seqs: [64,256]}",
                    "--plan-set", "baseline.set={scheduler.max_num_seqs: 256}",
                    "-o", str(out), "-q"], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    path = SCEN / "pools_mixed_gpu.yaml"
    assert lines[0].startswith(f"servesim: error: {path}: scenario 'pools_mixed_gpu' "
                               "declares pools:")
    assert "topology_search" in lines[0] and "servesim run" in lines[0]
    assert not out.exists()  # nothing simulated, nothing written


def test_sweep_with_a_pools_base_is_refused_before_any_point(tmp_path, capsys):
    out = tmp_path / "sp2"
    rc, err = _cli(["sweep", "sweep_default", "--sweep-set", "base=pd_1p1d_llama3_8b.yaml",
                    "--set", "workload.max_requests=50", "-o", str(out), "-q"], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    path = SCEN / "pd_1p1d_llama3_8b.yaml"
    assert lines[0].startswith(f"servesim: error: {path}: scenario 'pd_1p1d_llama3_8b' "
                               "declares pools:")
    assert "servesim run" in lines[0]
    assert not out.exists()


POOLS = [{"name": "a", "cluster": {"num_replicas": 1}}]


def test_pools_added_by_the_set_or_varied_by_the_grid_are_refused_too(tmp_path):
    base = tiny_scenario(num_requests=10)
    with pytest.raises(PlanError, match=r"^base \(inline\): .*declares pools:"):
        run_sweep(SweepSpec(base=base, set={"pools": POOLS},
                            grid={"scheduler.max_num_seqs": [8]}), tmp_path, write=False)
    with pytest.raises(PlanError, match=r"^base \(inline\): grid: 'pools' sets pools:"):
        run_sweep(SweepSpec(base=base, grid={"pools": [POOLS]}), tmp_path, write=False)
    with pytest.raises(PlanError, match=r"^base \(inline\): scenario 'tiny' declares pools:"
                                        r".*capacity plan"):
        run_plan(PlanSpec(base={**base, "name": "tiny", "pools": POOLS},
                          search_space={"scheduler.max_num_seqs": [8]}), tmp_path, write=False)
    with pytest.raises(PlanError, match=r"^base \(inline\): search_space: "
                                        r"'pools.0.cluster.num_replicas' sets pools:"):
        run_plan(PlanSpec(base=base, search_space={"pools.0.cluster.num_replicas": [1, 2]}),
                 tmp_path, write=False)


def test_a_plain_base_still_plans_and_sweeps(tmp_path):
    base = tiny_scenario(num_requests=10)
    res = run_sweep(SweepSpec(base=base, grid={"scheduler.max_num_seqs": [8, 16]}), tmp_path,
                    write=False, use_cache=False, outdir=tmp_path / "out")  # (its cache there)
    assert list(res.table["status"]) == ["ok", "ok"]


def test_a_topology_plan_with_a_pools_candidate_is_not_refused(tmp_path):
    # the topology path sizes pools itself (docs/howto/topologies.md): left alone
    from simulator.planner.topology import _candidate_raw
    raw = _candidate_raw({"set": {"pools": POOLS}}, yaml.safe_load(
        (SCEN / "default.yaml").read_text()))
    assert raw["pools"] == POOLS and "cluster" not in raw


def test_compare_with_a_pools_scenario_is_refused_before_any_variant(tmp_path, capsys):
    """``servesim compare`` refuses a pools scenario up front, as sweep and plan do: one line
    naming the file, exit 2, nothing run and no output folder left behind."""
    out = tmp_path / "cmp"
    rc, err = _cli(["compare", "pd_1p1d_llama3_8b", "--vary", "scheduler.max_num_seqs=8,16",
                    "-o", str(out)], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # no "[1/2] running ..." line before it
    path = SCEN / "pd_1p1d_llama3_8b.yaml"
    assert lines[0].startswith(f"servesim: error: {path}: scenario 'pd_1p1d_llama3_8b' "
                               "declares pools:")
    assert not out.exists()
