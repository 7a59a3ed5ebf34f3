"""Dominance pruning as the plan reports it: the Method line counts the dominance probes,
abandoned pruning says so in one line, skipped candidates show no capacity and say why, and
free GPUs are evaluated, not errors."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from planner_testlib import tiny_plan

from simulator.planner.plan import run_plan
from simulator.planner.recommend import any_within
from simulator.planner.report import _speedups_text
from simulator.planner.spec import PlanSpec


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
