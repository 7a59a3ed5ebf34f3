"""``scheduler.step_policy``: vLLM V1 mixed decode-first steps vs V0 prefill-first steps,
hand-derived with a constant 10 ms step."""
from __future__ import annotations

import pytest
from helpers import make_scenario, run_sim, spec, synthetic_workload

from simulator.scenario.config import ScenarioError, validate_scenario


def _run(policy: str):
    sc = make_scenario({"scheduler": {"step_policy": policy, "enable_chunked_prefill": False},
                        "perf": {"source": "constant", "constant": {"step_s": 0.01}}})
    # A: prompt 100, 10 tokens, at 0; B: prompt 100, 2 tokens, at 0.025 (during A's decode)
    return run_sim(sc, [spec(0, 0.0, 100, 10), spec(1, 0.025, 100, 2)])


def test_decode_first_mixes_the_new_prompt_into_the_decode_step():
    out = _run("decode_first")
    req = out.requests().set_index("request_id")
    # steps at 0, .01, .02, then .03 = A decode + B prefill: A never pauses, 10 tokens by .10
    assert req.loc[0, "finish_time_s"] == pytest.approx(0.10)
    assert req.loc[1, "first_token_time_s"] == pytest.approx(0.04)
    assert req.loc[1, "finish_time_s"] == pytest.approx(0.05)
    assert len(out.steps()) == 10


def test_prefill_first_runs_the_new_prompt_alone():
    out = _run("prefill_first")
    req = out.requests().set_index("request_id")
    st = out.steps()
    # the .03 step is B's prefill alone: A pauses one step and finishes at .11
    assert req.loc[0, "finish_time_s"] == pytest.approx(0.11)
    assert req.loc[1, "first_token_time_s"] == pytest.approx(0.04)
    assert req.loc[1, "finish_time_s"] == pytest.approx(0.05)
    assert len(st) == 11
    row = st[st["start_time_s"].round(6) == 0.03].iloc[0]
    assert (row["num_prefill_tokens"], row["num_decode_tokens"]) == (100, 0)


def test_prefill_first_needs_chunked_prefill_off():
    with pytest.raises(ScenarioError, match="enable_chunked_prefill: false"):
        validate_scenario({"scheduler": {"step_policy": "prefill_first"},
                           "workload": synthetic_workload()})
