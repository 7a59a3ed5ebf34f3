"""A token budget below ``max_num_seqs`` warns, as vLLM's SchedulerConfig refuses it; equal
is allowed."""
from __future__ import annotations

import warnings

import pytest


def test_token_budget_below_max_num_seqs_warns_as_vllm_refuses(tmp_path):
    """vLLM's SchedulerConfig refuses max_num_batched_tokens < max_num_seqs; servesim used to
    run it silently (a 40 s run reporting a 60 s mean TTFT)."""
    from simulator.cluster.setup import SchedulerBudgetWarning, build_setup
    from simulator.scenario.config import load_scenario

    sc, base = load_scenario("default", ["scheduler.max_num_batched_tokens=100"])
    with pytest.warns(SchedulerBudgetWarning, match="max_num_batched_tokens 100 is below "
                                                    "scheduler.max_num_seqs 256"):
        build_setup(sc, base)
    sc, base = load_scenario("default", ["scheduler.max_num_batched_tokens=256"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SchedulerBudgetWarning)
        build_setup(sc, base)  # equal is allowed, as in vLLM
