"""Warnings survive the result cache (session 6): a sweep point's or plan candidate's warnings
are stored with its result and shown again, once, when the result comes from the cache.
Before: a cached result showed nothing (the warning was printed only by the run that made
it), and with ``-j 2`` each worker printed its own copy."""
from __future__ import annotations

import warnings

import yaml
from planner_testlib import tiny_plan, tiny_scenario

from simulator.cluster.setup import LinkReachWarning
from simulator.experiments.cache import ResultCache
from simulator.experiments.warned import merge, recording, reemit
from simulator.planner import search
from simulator.planner.spec import PlanSpec, SweepSpec
from simulator.planner.sweep import run_sweep

#: h100-pcie's NVLink bridge joins 2 GPUs (its spec's interconnect_max_gpus): TP 4 warns
TP4_PCIE = {"hardware": {"gpu": "h100-pcie"},
            "cluster": {"num_replicas": 1, "tensor_parallel_size": 4}}


def _link_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, LinkReachWarning)]


def test_recording_keeps_distinct_warnings_and_reemit_shows_each_once():
    with recording() as rec:
        for _ in range(3):
            warnings.warn(LinkReachWarning("a"))
        warnings.warn(UserWarning("b"))
    assert rec == [{"category": "simulator.cluster.setup.LinkReachWarning", "message": "a"},
                   {"category": "builtins.UserWarning", "message": "b"}]
    shown: set = set()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        reemit(rec, shown)
        reemit(rec, shown)  # the same again: already shown
        reemit([{"category": "nowhere.Gone", "message": "c"}], shown)
    assert [(w.category, str(w.message)) for w in got] == [
        (LinkReachWarning, "a"), (UserWarning, "b"), (UserWarning, "c")]
    assert merge(rec, rec[:1]) == rec


def test_a_cached_sweep_point_shows_its_warning_again(tmp_path):
    spec = SweepSpec.model_validate({"name": "w", "base": {**tiny_scenario(num_requests=20),
                                                           **TP4_PCIE},
                                     "grid": {"scheduler.max_num_seqs": [8, 16]}})
    for run in range(2):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            res = run_sweep(spec, tmp_path, outdir=tmp_path / "o", jobs=1, write=False)
        assert res.num_cached == 2 * run  # the second run simulates nothing
        msgs = _link_warnings(got)
        # both points warn the same: shown once per sweep, the cached run included
        assert len(msgs) == 1, (run, msgs)
        assert msgs[0].startswith("h100-pcie: the spec's interconnect joins 2 GPUs")


def test_a_cached_simulation_of_a_candidate_brings_its_warnings(tmp_path, monkeypatch):
    calls = []

    def fake_simulate(scenario, specs, *, setup=None, stop_when=None):
        calls.append(1)
        warnings.warn(UserWarning("approximated: 3 requests"))
        return {"summary": {"n": len(specs)}, "extra": {}}

    monkeypatch.setattr(search, "simulate_summary", fake_simulate)
    sc = tiny_scenario(num_requests=5)
    first = search.SimRunner(ResultCache(tmp_path), setup_factory=lambda s: "setup")
    r = first.run(sc, [])
    assert r["warnings"] == first.warnings == [
        {"category": "builtins.UserWarning", "message": "approximated: 3 requests"}]
    for k, v in first.new_cache.items():
        first.cache.put(k, v)
    again = search.SimRunner(ResultCache(tmp_path), setup_factory=lambda s: "setup")
    again.run(sc, [])
    assert len(calls) == 1 and again.num_cache_hits == 1
    assert again.warnings == first.warnings  # before: a hit carried none


def test_a_cached_plan_candidate_shows_its_warning_again(tmp_path):
    from simulator.planner.plan import run_plan
    d = tiny_plan(search_space={"hardware.gpu": ["h100-pcie"]},
                  baseline={"name": "today", "set": {"hardware.gpu": "h100-pcie"}},
                  prices={"h100-pcie": 2.0})
    d["base"] = {**tiny_scenario(num_requests=60), **TP4_PCIE}
    d["search"].update(max_requests=60, max_probes=3)
    spec = PlanSpec.model_validate(d)
    for run in range(2):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False)
        assert res.stats["num_simulations"] == (0 if run else res.stats["num_simulations"])
        assert all(r["cached"] == bool(run) for r in res.candidates)
        assert len(_link_warnings(got)) == 1, run


def test_the_cli_prints_a_cached_warning_as_one_line(tmp_path, capsys):
    from simulator.cli.main import main
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": {**tiny_scenario(num_requests=20), **TP4_PCIE},
                                 "grid": {"scheduler.max_num_seqs": [8, 16]}}))
    for _ in range(2):
        assert main(["sweep", str(p), "-q", "-j", "1", "--no-figures",
                     "-o", str(tmp_path / "o")]) == 0
        lines = [ln for ln in capsys.readouterr().err.splitlines() if "interconnect" in ln]
        assert len(lines) == 1 and lines[0].startswith(
            "servesim: warning: h100-pcie: the spec's interconnect joins 2 GPUs")
