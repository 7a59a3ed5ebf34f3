"""Phase-attributed cost (simulator.metrics.cost): the split rule on hand-built steps, the
price identity, and a whole run whose phase GPU time follows from its token counts."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import make_scenario, synthetic_workload

from simulator.metrics.cost import (
    log2_bucket,
    phase_cost,
    phase_gpu_seconds,
    step_prefill_fraction,
)
from simulator.runs.scenario import run_scenario


def _steps(rows):
    cols = ["step_time_s", "num_prefill_tokens", "num_decode_tokens", "num_prefill_seqs",
            "num_decode_seqs"]
    return pd.DataFrame(rows, columns=cols)


def test_pure_steps_go_wholly_to_their_phase():
    st = _steps([[0.10, 512, 0, 1, 0], [0.02, 0, 8, 0, 8], [0.03, 0, 8, 0, 8]])
    g = phase_gpu_seconds(st)
    assert g["prefill_gpu_s"] == pytest.approx(0.10)
    assert g["decode_gpu_s"] == pytest.approx(0.05)
    assert g["prefill_share"] == pytest.approx(0.10 / 0.15)
    assert g["num_mixed_steps"] == 0
    # TP = 4: every step occupies 4 GPUs
    g4 = phase_gpu_seconds(st, gpus_per_replica=4)
    assert g4["busy_gpu_s"] == pytest.approx(0.6)


def test_mixed_step_without_operator_times_is_split_by_token_share():
    st = _steps([[0.2, 300, 100, 1, 100]])
    g = phase_gpu_seconds(st)
    assert g["phase_split_method"] == "token_share"
    assert g["prefill_gpu_s"] == pytest.approx(0.2 * 300 / 400)


def test_operator_rule_by_hand():
    """attention to its phase, shared operators by token share (p=3, d=1 -> 3/4), LM head
    and sampler by sampled rows (1 prefill row, 3 decode rows -> 1/4), engine overhead by
    token share: 2 + 0.75 x 4 + 0.25 x 1 + 0.75 x 2 = 6.75 of 10."""
    times = {"attention_prefill": 2.0, "attention_decode": 1.0, "qkv_proj": 4.0,
             "lm_head": 1.0, "engine_overhead": 2.0}
    f = step_prefill_fraction(times, prefill_tokens=3, decode_tokens=1, prefill_rows=1,
                              decode_rows=3)
    assert f == pytest.approx(0.675)
    assert step_prefill_fraction({"constant": 1.0}, prefill_tokens=1, decode_tokens=1,
                                 prefill_rows=1, decode_rows=1) is None


class _LongContextPerf:
    """op_times of a step whose decode attention is as slow as all its GEMMs (long
    contexts): the operator split must charge decode more than the token share does."""

    def op_times(self, shape):
        tok = shape.num_tokens
        return {"qkv_proj": 1e-5 * tok, "attention_prefill": 1e-6 * sum(shape.prefill_q),
                "attention_decode": 1e-5 * tok, "lm_head": 0.0, "engine_overhead": 0.0}


def test_operator_split_charges_decode_attention_to_decode():
    st = _steps([[0.5, 1000, 100, 1, 100]])
    tok = phase_gpu_seconds(st)["prefill_share"]
    op = phase_gpu_seconds(st, _LongContextPerf())
    assert op["phase_split_method"] == "operator"
    # by hand: qkv 1e-5 x 1100 = 0.011, prefill attention 1e-6 x 1000 = 0.001, decode
    # attention 0.011: pre = 0.001 + (1000 / 1100) x 0.011 = 0.011 of 0.023
    assert op["prefill_share"] == pytest.approx(0.011 / 0.023)
    assert op["prefill_share"] < tok == pytest.approx(1000 / 1100)


def test_price_identity_and_idle_time_pro_rata():
    st = _steps([[0.3, 512, 0, 1, 0], [0.1, 0, 4, 0, 4]])
    pc = phase_cost(st, cost_usd=10.0, num_input_tokens=2_000_000, num_output_tokens=500_000,
                    num_gpus=1, duration_s=2.0)
    assert pc["idle_gpu_s"] == pytest.approx(1.6)
    assert pc["idle_share"] == pytest.approx(0.8)
    assert pc["prefill_cost_usd"] == pytest.approx(7.5)   # 10 x 0.3 / 0.4
    assert pc["decode_cost_usd"] == pytest.approx(2.5)
    assert pc["price_per_1m_input_tokens_usd"] == pytest.approx(7.5 / 2.0)
    assert pc["price_per_1m_output_tokens_usd"] == pytest.approx(2.5 / 0.5)
    assert (pc["price_per_1m_input_tokens_usd"] * 2.0 + pc["price_per_1m_output_tokens_usd"]
            * 0.5) == pytest.approx(10.0)
    assert pc["price_check_usd"] == pytest.approx(10.0)


def test_no_tokens_no_price_and_bad_input():
    st = _steps([[0.3, 512, 0, 1, 0]])
    pc = phase_cost(st, cost_usd=1.0, num_input_tokens=0, num_output_tokens=0, num_gpus=1,
                    duration_s=1.0)
    assert pc["price_per_1m_input_tokens_usd"] is None and pc["price_check_usd"] is None
    empty = phase_cost(_steps([]), cost_usd=1.0, num_input_tokens=5, num_output_tokens=5,
                       num_gpus=1, duration_s=1.0)
    assert empty["prefill_cost_usd"] is None
    with pytest.raises(ValueError, match="cost_usd must be >= 0"):
        phase_cost(st, cost_usd=-1.0, num_input_tokens=1, num_output_tokens=1, num_gpus=1,
                   duration_s=1.0)
    with pytest.raises(ValueError, match="step_time_s"):
        phase_gpu_seconds(pd.DataFrame({"num_prefill_tokens": [1]}))


def test_run_phase_time_follows_the_token_counts():
    """perf.source constant with only a per-token cost: a step lasts per_token_s x its tokens,
    so without preemption or prefix caching the prefill GPU time is per_token_s x all prompt
    tokens and the decode time per_token_s x (output - 1) per request (the first output token
    comes from the prefill step that finishes the prompt), whatever the batching."""
    per_tok = 2e-5
    sc = make_scenario({"perf": {"source": "constant", "constant": {"per_token_s": per_tok}},
                        "cost": {"usd_per_gpu_hour": 3.6}},
                       workload=synthetic_workload(120, 10.0))
    res = run_scenario(sc, write=False)
    s = res.summary
    assert s["num_completed"] == 120 and s["num_preemptions"] == 0
    req = res.requests
    pc = s["phase_cost"]
    assert pc["prefill_gpu_s"] == pytest.approx(per_tok * req["num_prompt_tokens"].sum())
    assert pc["decode_gpu_s"] == pytest.approx(per_tok * (req["num_output_tokens"] - 1).sum())
    assert pc["phase_split_method"] == "token_share"  # the constant model has no operators
    # the price sheet recovers the bill: 3.6 USD/h = 0.001 USD/s over the run
    cost = 0.001 * s["duration_s"]
    assert s["cost_usd"] == pytest.approx(cost)
    assert (s["price_per_1m_input_tokens_usd"] * s["num_input_tokens"] / 1e6
            + s["price_per_1m_output_tokens_usd"] * s["num_output_tokens"] / 1e6) == \
        pytest.approx(cost)
    busy = per_tok * (req["num_prompt_tokens"].sum() + (req["num_output_tokens"] - 1).sum())
    assert pc["idle_gpu_s"] == pytest.approx(s["duration_s"] - busy, abs=1e-9)


def test_run_with_an_operator_model_uses_the_operator_split():
    sc = make_scenario({}, workload=synthetic_workload(60, 8.0))
    s = run_scenario(sc, write=False).summary
    pc = s["phase_cost"]
    assert pc["phase_split_method"] == "operator"
    assert 0 < pc["prefill_share"] < 1
    assert pc["prefill_cost_usd"] + pc["decode_cost_usd"] == pytest.approx(s["cost_usd"])
    assert np.isfinite(s["price_per_1m_output_tokens_usd"])


def test_log2_bucket_by_hand():
    # 0 and below: bucket 0; then 1 | 2-3 | 4-7 | ... : 1 + floor(log2 x), exactly at the
    # powers of two (where a logarithm's last bit would decide) and just below them
    x = np.array([0, -3, 1, 2, 3, 4, 7, 8, 1023, 1024, 2.0**40 - 1, 2.0**40])
    assert log2_bucket(x).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, 10, 11, 40, 41]
