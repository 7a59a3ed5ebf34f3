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


def test_a_block_size_vllm_does_not_accept_warns():
    """vLLM's CacheConfig takes block_size 1, 8, 16, 32, 64, 128 or 256; a 100,000-token block
    ran silently (4 blocks in all, at most 3 sequences at once: helper)."""
    from simulator.cluster.setup import VLLM_BLOCK_SIZES, BlockSizeWarning, build_setup
    from simulator.scenario.config import load_scenario

    sc, base = load_scenario("default", ["kv_cache.block_size=100000"])
    with pytest.warns(BlockSizeWarning, match=r"kv_cache.block_size 100000 is not one vLLM "
                                              r"accepts \(1, 8, 16, 32, 64, 128, 256\)"):
        build_setup(sc, base)
    for bs in VLLM_BLOCK_SIZES[1:]:
        sc, base = load_scenario("default", [f"kv_cache.block_size={bs}"])
        with warnings.catch_warnings():
            warnings.simplefilter("error", BlockSizeWarning)
            build_setup(sc, base)
    # a contiguous reservation has no blocks to size: nothing to say
    sc, base = load_scenario("default", ["kv_cache.block_size=100",
                                         "kv_cache.allocation=contiguous"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", BlockSizeWarning)
        build_setup(sc, base)
