"""Degrade policies (issue 15 part 1): firing, hysteresis, hold time, precedence, the actions
through the engine, and the report section. Expected values are derived by hand in comments."""
from __future__ import annotations

import pytest
from helpers import ConstantStepPerf

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.metrics.degrade import degrade_effects
from simulator.scenario.config import ScenarioError, validate_scenario
from simulator.scenario.degrade import DegradePolicyConfig
from simulator.scheduling.degrade import DegradeController, DegradeSignals

STEP_S = 0.01




def _policy(**kw) -> DegradePolicyConfig:
    kw.setdefault("name", "p")
    kw.setdefault("action", "shed")
    return DegradePolicyConfig.model_validate(kw)


def _scenario(degrade, fallback=None, **extra):
    adm = {"degrade": degrade}
    if fallback is not None:
        adm["fallback"] = fallback
    return validate_scenario({
        "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "scheduler": {"max_num_seqs": 1, "max_num_batched_tokens": 512, "admission": adm},
        "kv_cache": {"block_size": 16},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}},
        **extra})


def _run(sc, specs):
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(STEP_S)
    fb = setup.extra.get("fallback")
    if fb is not None:
        fb.perf = ConstantStepPerf(STEP_S)
    return simulate(sc, setup, specs, check_transitions=True)


# ---------------------------------------------------------------- controller on synthetic state
def test_fires_on_any_threshold_and_releases_below_the_band_after_the_hold():
    c = DegradeController([_policy(when={"num_waiting": 10, "kv_occupancy": 0.9},
                                   release_fraction=0.5, min_hold_s=2.0)])
    c.evaluate(0.0, DegradeSignals(kv_occupancy=0.5, num_waiting=9))
    assert not c.states[0].active                       # 9 < 10 and 0.5 < 0.9
    c.evaluate(1.0, DegradeSignals(kv_occupancy=0.95, num_waiting=0))
    assert c.states[0].active                           # 0.95 >= 0.9: one signal suffices
    assert c.states[0].episodes[0].trigger == "kv_occupancy"
    c.evaluate(2.0, DegradeSignals(kv_occupancy=0.0, num_waiting=0))
    assert c.states[0].active                           # held 1 s < min_hold_s 2 s
    c.evaluate(3.5, DegradeSignals(kv_occupancy=0.46, num_waiting=0))
    assert c.states[0].active                           # 0.46 >= 0.5 x 0.9 = 0.45: in the band
    c.evaluate(4.0, DegradeSignals(kv_occupancy=0.44, num_waiting=4))
    assert not c.states[0].active                       # 0.44 < 0.45 and 4 < 5, held 3 s
    s = c.summary()[0]
    assert s["num_episodes"] == 1 and s["active_s"] == pytest.approx(3.0)   # 1.0 .. 4.0
    assert s["first_fired_s"] == 1.0


def test_no_flapping_inside_the_hysteresis_band():
    # signal oscillating 9, 11, 9, 11 around the threshold 10 with release at 0.8 x 10 = 8:
    # one episode, never released
    c = DegradeController([_policy(when={"num_waiting": 10})])
    for t, w in enumerate([9, 11, 9, 11, 9, 11]):
        c.evaluate(float(t), DegradeSignals(num_waiting=w))
    c.close(10.0)
    s = c.summary()[0]
    assert s["num_episodes"] == 1 and s["active_s"] == pytest.approx(9.0)  # 1 .. close at 10


def test_decide_precedence_class_and_cap_arithmetic():
    shed = _policy(name="shed_low", action="shed", min_priority=2, when={"num_waiting": 1})
    cap = _policy(name="cap", action="cap_max_tokens", max_tokens=100, slices=["chat"],
                  when={"num_waiting": 1})
    cap2 = _policy(name="cap_tight", action="cap_max_tokens", max_tokens=50, slices=["chat"],
                   when={"num_waiting": 1})
    c = DegradeController([shed, cap, cap2])
    c.evaluate(0.0, DegradeSignals(num_waiting=1))
    low = RequestSpec(0, 0.0, 10, 500, priority=2, slice="chat")
    assert c.decide(low).shed == "shed_low"             # shed wins over the caps
    chat = RequestSpec(1, 0.0, 10, 500, max_tokens=800, slice="chat")
    d = c.decide(chat)
    # the tighter cap applies: 50 tokens; 500 - 50 = 450 not generated
    assert d.capped_by == "cap_tight" and d.spec.max_tokens == 50
    assert d.spec.num_output_tokens == 50
    short = RequestSpec(2, 0.0, 10, 30, slice="chat")
    d = c.decide(short)                                 # declared None > cap: capped, but
    assert d.spec.num_output_tokens == 30               # the answer is shorter than the cap
    assert c.decide(RequestSpec(3, 0.0, 10, 500, max_tokens=40, slice="chat")).capped_by == ""
    assert c.decide(RequestSpec(4, 0.0, 10, 500, slice="code")).capped_by == ""
    s = {p["name"]: p for p in c.summary()}
    assert s["cap_tight"]["num_output_tokens_not_generated"] == 450   # 450 + 0
    assert s["cap_tight"]["num_requests"] == 2 and s["shed_low"]["num_requests"] == 1
    # of the two capped requests only the 500-token answer was longer than the cap
    assert s["cap_tight"]["num_requests_shortened"] == 1
    assert s["cap"]["num_requests"] == 0


@pytest.mark.parametrize("bad, words", [
    ({"name": "a", "action": "cap_max_tokens", "when": {"num_waiting": 1}}, "needs max_tokens"),
    ({"name": "a", "action": "shed", "when": {}}, "at least one threshold"),
    ({"name": "a", "action": "disable_speculation", "slices": ["x"],
      "when": {"num_waiting": 1}}, "whole replicas"),
    ({"name": "a", "action": "throttle", "when": {"num_waiting": 1}}, "action"),
    ({"name": "a", "action": "fallback", "when": {"num_waiting": 1}}, "fallback is not set"),
])
def test_bad_policies_are_one_line_errors(bad, words):
    with pytest.raises(ScenarioError) as e:
        _scenario([bad])
    msg = str(e.value)
    assert words in msg and "\n" not in msg and "degrade" in msg


def test_duplicate_names_rejected():
    p = {"name": "a", "action": "shed", "when": {"num_waiting": 1}}
    with pytest.raises(ScenarioError, match="used twice"):
        _scenario([p, dict(p)])


# ---------------------------------------------------------------- actions through the engine
def test_shed_rejects_with_reason_and_every_request_is_accounted_for():
    # max_num_seqs 1; five requests at t=0 arrive before the replica first runs, so the
    # waiting count seen at arrival k is k: r0 (0), r1 (1) admitted, r2 sees 2 >= 2 and fires
    # the policy: r2, r3, r4 shed. r0 then r1 run 10 steps each (1 prefill + 9 decodes) to
    # t = 0.2 s; r5 at t = 1.0 sees 0 waiting < 0.8 x 2: released, admitted.
    sc = _scenario([{"name": "shed_all", "action": "shed", "when": {"num_waiting": 2}}])
    specs = [RequestSpec(i, 0.0, 10, 10) for i in range(5)] + [RequestSpec(5, 1.0, 10, 10)]
    sim = _run(sc, specs)
    req = sim.requests().set_index("request_id")
    assert list(req.status) == ["completed", "completed", "rejected", "rejected", "rejected",
                                "completed"]
    assert set(req.loc[[2, 3, 4], "reject_reason"]) == {"degrade_shed"}
    p = sim.degrade[0]
    assert p["num_requests"] == 3 and p["request_ids"] == [2, 3, 4]
    assert p["episodes"][0]["start_s"] == 0.0 and p["episodes"][0]["end_s"] == 1.0
    assert len(req) == 6  # conservation: every arrival has a row


def test_cap_cuts_the_answer_and_counts_tokens_not_generated():
    # r0 sees 0 waiting (admitted whole: 10 tokens); r1 (chat) sees 1 >= 1: capped to 4 (6 not
    # generated); r2 (code) is outside the class: 10 tokens
    sc = _scenario([{"name": "cap_chat", "action": "cap_max_tokens", "max_tokens": 4,
                     "slices": ["chat"], "when": {"num_waiting": 1}}])
    specs = [RequestSpec(0, 0.0, 10, 10, slice="chat"), RequestSpec(1, 0.0, 10, 10, slice="chat"),
             RequestSpec(2, 0.0, 10, 10, slice="code")]
    sim = _run(sc, specs)
    req = sim.requests().set_index("request_id")
    assert (req.status == "completed").all()
    assert list(req.num_emitted_tokens) == [10, 4, 10]
    assert sim.degrade[0]["num_output_tokens_not_generated"] == 6


def test_fallback_routes_to_the_fallback_replica_set_and_pays_for_its_gpus():
    # r0 sees 0 waiting -> primary replica 0; r1, r2 see 1, 2 >= 1 -> fallback replicas 1, 2
    # (round robin over the set of 2)
    sc = _scenario([{"name": "to_small", "action": "fallback", "when": {"num_waiting": 1}}],
                   fallback={"model": "llama-3.2-1b", "num_replicas": 2})
    assert sc.num_gpus == 3  # 1 primary + 2 fallback replicas at TP 1
    specs = [RequestSpec(i, 0.0, 10, 10) for i in range(3)]
    sim = _run(sc, specs)
    req = sim.requests().set_index("request_id")
    assert list(req.replica_id) == [0, 1, 2]
    assert (req.status == "completed").all()
    assert sim.replicas[1].setup.model.name != sim.replicas[0].setup.model.name
    assert sorted(sim.steps().replica_id.unique()) == [0, 1, 2]


def test_fallback_busy_time_in_the_summary(tmp_path):
    # as above: r1 and r2 each run 10 steps of 10 ms on a fallback replica -> 0.2 s busy
    from simulator.runs.scenario import run_scenario
    sc = _scenario([{"name": "to_small", "action": "fallback", "when": {"num_waiting": 1}}],
                   fallback={"model": "llama-3.2-1b", "num_replicas": 2})
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(STEP_S)
    setup.extra["fallback"].perf = ConstantStepPerf(STEP_S)
    res = run_scenario(sc, specs=[RequestSpec(i, 0.0, 10, 10) for i in range(3)],
                       outdir=tmp_path, setup=setup, figures=False)
    assert res.summary["num_fallback_replicas"] == 2
    assert res.summary["fallback_busy_s"] == pytest.approx(0.2)
    assert "they were busy 0.2 s" in (tmp_path / "report.md").read_text()


def test_disable_speculation_stops_drafts_while_active():
    spec = {"method": "draft_model", "draft_model": "llama-3.2-1b", "num_speculative_tokens": 3,
            "acceptance": {"model": "iid", "acceptance_rate": 0.5}}
    specs = [RequestSpec(i, 0.0, 32, 20) for i in range(4)]

    def run(degrade):
        sc = _scenario(degrade, speculative=spec)
        sc.scheduler.max_num_seqs = 4
        return simulate(sc, build_setup(sc), specs)

    from simulator.metrics.speculative import speculative_summary
    base = speculative_summary(run([]))
    # fired by r1's arrival at t=0 (1 waiting), before the replica's first step; held for
    # 1e6 s, so every step runs without drafts
    off = speculative_summary(run([{"name": "nospec", "action": "disable_speculation",
                                    "min_hold_s": 1e6, "when": {"num_waiting": 1}}]))
    assert base["num_drafts"] > 0
    assert off["num_drafts"] == 0
    assert off["num_steps_speculation_paused"] == off["num_steps"] > 0
    assert off["num_verified_tokens"] == base["num_verified_tokens"] == 3


def test_effects_split_latency_by_episode():
    import pandas as pd
    req = pd.DataFrame({"request_id": [0, 1, 2, 3], "arrival_time_s": [0.0, 1.0, 2.0, 3.0],
                        "status": ["completed"] * 4,
                        "first_scheduled_time_s": [0.0, 1.0, 2.0, 3.0],
                        "first_token_time_s": [0.1, 1.5, 2.7, 3.2],
                        "finish_time_s": [1.0, 2.0, 3.0, 4.0],
                        "num_emitted_tokens": [5, 5, 5, 5]})
    pol = [{"name": "p", "episodes": [{"start_s": 1.0, "end_s": 3.0}], "request_ids": [1]}]
    e = degrade_effects(pol, req, 10.0)[0]
    # active: arrivals 1.0 and 2.0 (TTFT 0.5, 0.7); inactive: 0.0 and 3.0 (TTFT 0.1, 0.2);
    # inverse-CDF p50 of two values is the lower one, p99 the upper one
    assert e["num_arrived_active"] == 2 and e["num_arrived_inactive"] == 2
    assert e["ttft_p50_active_s"] == pytest.approx(0.5)
    assert e["ttft_p99_active_s"] == pytest.approx(0.7)
    assert e["ttft_p99_inactive_s"] == pytest.approx(0.2)
    assert "request_ids" not in e


def test_run_report_shows_each_policy_in_markdown_and_html(tmp_path):
    from simulator.runs.scenario import run_scenario
    sc = _scenario([{"name": "shed_all", "action": "shed", "when": {"num_waiting": 2}},
                    {"name": "cap_never", "action": "cap_max_tokens", "max_tokens": 2,
                     "when": {"num_waiting": 100}}])
    specs = [RequestSpec(i, 0.0, 10, 10) for i in range(5)] + [RequestSpec(5, 1.0, 10, 10)]
    setup = build_setup(sc)
    setup.perf.step_time = ConstantStepPerf(STEP_S).step_time
    res = run_scenario(sc, specs=specs, outdir=tmp_path, setup=setup, figures=False)
    # the same counts as the engine test above: 3 shed in one episode [0, 1) s
    (shed, cap) = res.summary["degrade"]
    assert shed["num_requests"] == 3 and shed["active_s"] == pytest.approx(1.0)
    assert cap["num_episodes"] == 0
    assert list(res.requests.sort_values("request_id").degrade_policy) == [
        "", "", "shed_all", "shed_all", "shed_all", ""]
    md = (tmp_path / "report.md").read_text()
    sec = md.split("## Degrade actions")[1].split("\n## ")[0]
    row = next(ln for ln in sec.splitlines() if ln.startswith("| shed_all"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "shed" and cells[3] == "1" and cells[6] == "3 shed (rejected)"
    assert "| cap_never" in sec and "Episodes" in sec
    html = (tmp_path / "report.html").read_text()
    assert 'id="degrade-actions"' in html and "shed_all" in html


def test_fallback_with_pools_is_a_one_line_error():
    with pytest.raises(ScenarioError) as e:
        _scenario([{"name": "f", "action": "fallback", "when": {"num_waiting": 1}}],
                  fallback={"num_replicas": 1},
                  pools=[{"name": "a"}, {"name": "b", "match": {"slices": ["code"]}}])
    msg = str(e.value)
    assert "not supported with pools" in msg and "\n" not in msg


def test_policies_act_per_pool_and_the_gateway_reports_each():
    # two pools, max_num_seqs 1 each (constant 10 ms steps); as in the shed test above, the
    # chat pool sees 0, 1, 2, 3, 4 waiting at its five t=0 arrivals: 3 shed; the code pool
    # sees 0, 1 at its two: none shed
    from simulator.runs.gateway import run_gateway
    sc = _scenario([{"name": "shed_all", "action": "shed", "when": {"num_waiting": 2}}],
                   perf={"source": "constant", "constant": {"step_s": STEP_S}},
                   pools=[{"name": "chat", "match": {"slices": ["chat"]}}, {"name": "code"}])
    specs = ([RequestSpec(i, 0.0, 10, 10, slice="chat") for i in range(5)]
             + [RequestSpec(5 + i, 0.0, 10, 10, slice="code") for i in range(2)])
    res = run_gateway(sc, specs=specs, write=False)
    by = {d["name"]: d for d in res.summary["degrade"]}
    assert by["chat: shed_all"]["num_requests"] == 3
    assert by["code: shed_all"]["num_requests"] == 0
    assert res.summary["reject_reasons"] == {"degrade_shed": 3}
    assert len(res.requests) == 7
