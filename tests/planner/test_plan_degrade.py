"""The plan runs its candidates with the base scenario's degrade policies and shows what they did
at the target beside the fallback (issue 15 part 1)."""
from __future__ import annotations

from planner_testlib import tiny_plan, tiny_scenario

from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanSpec
from simulator.report.degrade import degrade_text


def test_plan_carries_the_degrade_policy_to_every_candidate(tmp_path):
    base = tiny_scenario()
    # outputs of 8..64 tokens capped at 4 whenever a request waits: at the target rate
    # (20 req/s on few replicas) requests queue, so the cap fires and cuts answers
    base["scheduler"]["admission"] = {"degrade": [
        {"name": "cap_small", "action": "cap_max_tokens", "max_tokens": 4,
         "when": {"num_waiting": 1}}]}
    spec = PlanSpec.model_validate(tiny_plan(
        base=base, search_space={"scheduler.max_num_seqs": [64]},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    res = run_plan(spec, None, outdir=tmp_path / "report", jobs=1)
    rows = res.candidates + [res.baseline]
    for r in rows:
        (d,) = r["degrade_at_target"]
        assert d["name"] == "cap_small" and d["action"] == "cap_max_tokens"
        # every capped request had a true length of at least 8 > 4: >= 4 tokens cut each
        assert d["num_requests"] > 0
        assert d["num_output_tokens_not_generated"] >= 4 * d["num_requests"]
    md = next((tmp_path / "report").glob("plan.md")).read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| degrade actions at the target"))
    rec = res.recommendation["config"]
    assert degrade_text(rec["degrade_at_target"]) in line
    assert "capped" in line and "tokens not generated" in line


def test_degrade_text_by_hand():
    pols = [{"name": "cap", "action": "cap_max_tokens", "num_episodes": 2, "active_s": 4.1,
             "num_requests": 12, "num_output_tokens_not_generated": 3072},
            {"name": "shed", "action": "shed", "num_episodes": 0, "active_s": 0.0,
             "num_requests": 0, "num_output_tokens_not_generated": 0}]
    assert degrade_text(pols) == ("cap: 12 capped, 3,072 tokens not generated (2 episodes, "
                                  "4.10 s); shed: not fired")
    assert degrade_text(None) == "-"
