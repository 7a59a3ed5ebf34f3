"""The plan's tie rule at equal cost: the baseline's configuration, the last known-good's,
fewer GPUs, more headroom, then list order; the topology plan's rank breaks ties by GPUs,
attainment, then list order."""
from __future__ import annotations

from planner_testlib import tiny_plan

from simulator.planner.plan import run_plan
from simulator.planner.recommend import TIE_RULE, rank_key
from simulator.planner.spec import PlanSpec
from simulator.planner.topology import _rank as topology_rank


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
