"""The Azure LLM inference trace 2023 (conversation, one hour, 19,366 requests) replayed on
Llama-3.1-8B / one H100 SXM (``scenarios/azure_conv_llama3_8b_h100.yaml``).

Runs when the trace is in the project's shared folder (``$SERVESIM_SHARED``, default next to
the repository; skipped when absent, failed when the variable is set but wrong); marked
``slow`` (19,366 requests). Checks that every request is accounted for and that the headline
latencies fall in a plausible band for an 8B model on one H100: TTFT p50 between 10 ms and
1 s, TPOT p50 between 3 ms and 50 ms (a decode step of an 8B model reads ~16 GB of weights at
~3.35 TB/s: >= ~5 ms; well under 50 ms at this load).
"""
from __future__ import annotations

import pytest
from helpers import REPO_ROOT, shared_path

from simulator.runs.scenario import run_scenario
from simulator.scenario.config import load_scenario

TRACE = "traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
SCENARIO = REPO_ROOT / "scenarios" / "azure_conv_llama3_8b_h100.yaml"
N_REQUESTS = 19_366


@pytest.mark.slow
def test_azure_conv_trace_replay():
    trace = shared_path(TRACE)
    sc, base = load_scenario(SCENARIO, [f"workload.trace={trace}"])
    res = run_scenario(sc, base, write=False, figures=False)
    s = res.summary
    df = res.requests
    assert len(df) == N_REQUESTS and df.request_id.is_unique
    assert s["num_requests"] == N_REQUESTS
    assert (s["num_completed"] + s["num_rejected"] + s["num_cancelled"]
            + s["num_unfinished"]) == N_REQUESTS
    assert s["num_completed"] > 0.99 * N_REQUESTS
    assert 0.010 < s["ttft_s"]["p50"] < 1.0
    assert 0.003 < s["tpot_s"]["p50"] < 0.050
    # the trace spans one hour
    assert 3500 < df.arrival_time_s.max() - df.arrival_time_s.min() < 3700
