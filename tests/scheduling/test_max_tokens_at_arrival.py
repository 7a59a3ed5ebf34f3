"""A request whose declared ``max_tokens`` takes it beyond ``max_model_len`` is rejected at
arrival, as vLLM's OpenAI server does: it never generates and its TTFT is not counted.
Expected values derived by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import (
    make_scheduler,
    req,
    run_constant_step,
    small_scenario,
    specs_from_rows,
)

from simulator.metrics.summary import summarize

STEP_S = 0.01


def test_max_tokens_beyond_max_model_len_is_rejected_at_arrival():
    """max_model_len 1000: 100 + 900 = 1000 fits; 100 + 901 = 1001 does not (vLLM's OpenAI
    server rejects it at arrival: "'max_tokens' ... is too large"); 999 + nothing fits one
    output token (999 + 1 = 1000)."""
    s = make_scheduler(max_model_len=1000, num_blocks=1000)  # 4,000 tokens of KV: all fit
    ok = req(0, 100, 50, max_tokens=900)
    too = req(1, 100, 50, max_tokens=901)
    edge = req(2, 999, 1)
    assert s.add_request(ok, 0.0) and s.add_request(edge, 0.0)
    assert not s.add_request(too, 0.0)
    assert (too.status, too.reject_reason) == ("rejected", "max_tokens_too_large")
    assert math.isnan(too.first_token_time_s) and too.num_emitted == 0


@pytest.mark.parametrize("policy", ["continuous", "static"])
def test_rejected_request_never_generates_and_its_ttft_is_not_counted(policy):
    """Two requests at t = 0 with max_model_len 1000. Request 0 (prompt 100, max_tokens 950,
    output 950) would reach 1000 tokens after 900 outputs: before the fix it was admitted,
    generated 900 tokens and was then rejected with its TTFT in the statistics. Now it is
    rejected at arrival. Request 1 (prompt 100, 5 outputs) runs alone: its prompt fits one
    8192-token step, so its first token comes after one 10 ms step: TTFT = 0.01 s, the only
    TTFT sample."""
    sc = small_scenario(scheduler={"max_model_len": 1000, "policy": policy,
                              "batch_timeout_s": 0.0})
    specs = specs_from_rows([(0.0, 100, 950, {"max_tokens": 950}), (0.0, 100, 5)])
    sim, _ = run_constant_step(sc, specs, STEP_S)
    df = sim.requests().set_index("request_id")
    assert df.loc[0, "status"] == "rejected"
    assert df.loc[0, "reject_reason"] == "max_tokens_too_large"
    assert df.loc[0, "num_emitted_tokens"] == 0 and np.isnan(df.loc[0, "first_token_time_s"])
    assert df.loc[0, "exit_time_s"] == 0.0  # at arrival
    assert df.loc[1, "status"] == "completed"
    s = summarize(sim.requests(), sim.steps(), slo={}, usd_per_gpu_hour=1.0, num_gpus=1)
    assert s["ttft_s"]["count"] == 1
    assert s["ttft_s"]["mean"] == pytest.approx(STEP_S)
    assert s["reject_reasons"] == {"max_tokens_too_large": 1}
