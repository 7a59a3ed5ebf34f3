"""``servesim plan`` with a topology plan: a bad ``--plan-set`` names that flag; ``-o`` is
checked before any simulation. Each test fails on the code before its fix."""
from __future__ import annotations

import yaml
from helpers import synthetic_workload

from simulator.cli.main import main

BASE = {"name": "b", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "perf": {"source": "constant", "constant": {"step_s": 0.002, "per_token_s": 1e-4}},
        "workload": synthetic_workload(n=40, rate_rps=40.0),
        "slo": {"ttft_s": 0.2, "tpot_s": 0.05, "attainment_target": 0.9}}


def _plan_file(tmp_path):
    p = tmp_path / "topo.yaml"
    p.write_text(yaml.safe_dump({
        "name": "t", "base": BASE, "usd_per_gpu_hour": 2.0,
        "output_dir": str(tmp_path / "out"),
        "topology_search": {"aggregated": {"tensor_parallel_size": [1], "max_replicas": 2}}}))
    return p


def test_bad_plan_set_names_the_flag(tmp_path, capsys):
    p = _plan_file(tmp_path)
    assert main(["plan", str(p), "-q", "--plan-set", "rate_scale=abc"]) == 2
    # before: "servesim: error: PATH: rate_scale: ..." (no --plan-set item)
    assert capsys.readouterr().err == (
        f"servesim: error: {p}: --plan-set rate_scale=abc: rate_scale: value 'abc': "
        "Input should be a valid number\n")
    assert main(["plan", str(p), "-q", "--plan-set",
                 "topology_search.aggregated.max_replicas=0"]) == 2
    assert capsys.readouterr().err == (
        f"servesim: error: {p}: --plan-set topology_search.aggregated.max_replicas=0: "
        "topology_search.aggregated.max_replicas: value 0: Input should be greater than or "
        "equal to 1\n")
    assert not (tmp_path / "out").exists()


def test_error_in_the_file_itself_names_no_flag(tmp_path, capsys):
    p = _plan_file(tmp_path)
    raw = yaml.safe_load(p.read_text())
    raw["rate_scale"] = "abc"
    p.write_text(yaml.safe_dump(raw))
    assert main(["plan", str(p), "-q", "--plan-set", "window_s=10"]) == 2
    assert capsys.readouterr().err == (
        f"servesim: error: {p}: rate_scale: value 'abc': Input should be a valid number\n")


def test_unusable_output_folder_is_one_line_before_any_candidate_runs(tmp_path, capsys,
                                                                      monkeypatch):
    """-o below a plain file: one line naming it, exit 2, no candidate simulated (before, the
    search ran every candidate and only writing plan.json failed, with errno text)."""
    from simulator.planner import topology

    def _no_search(*a, **k):
        raise AssertionError("a candidate ran before -o was checked")
    monkeypatch.setattr(topology, "_search", _no_search)
    p = _plan_file(tmp_path)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "sub"
    assert main(["plan", str(p), "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"servesim: error: output folder {out}: cannot create it (Not a directory)\n")
