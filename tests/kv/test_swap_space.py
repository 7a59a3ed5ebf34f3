"""``kv_cache.swap_space_gb`` is GiB, as vLLM's ``--swap-space`` (issue 32 item 2).

Llama-3.2-1B, bf16 KV: 2 x 16 layers x 8 KV heads x 64 head dims x 2 B = 32,768 B a token; a
16-token block is 524,288 B = 2**19 B. 4 GiB of swap = 4 x 2**30 / 2**19 = 8,192 blocks (read
as 4e9 bytes it was 7,629). 0.3 GiB = 322,122,547.2 B / 524,288 = 614.4 -> 614 blocks (decimal:
572).
"""
from __future__ import annotations

import pytest

from simulator.cluster.setup import build_setup
from simulator.kv.planner import swap_space_blocks
from simulator.scenario.config import validate_scenario

BLOCK_BYTES = 2 * 16 * 8 * 64 * 2 * 16


def _setup(swap_gib: float):
    return build_setup(validate_scenario({
        "model": "llama-3.2-1b", "hardware": {"gpu": "h100-sxm"},
        "perf": {"source": "constant", "constant": {"step_s": 0.01}},
        "scheduler": {"preemption_mode": "swap"},
        "kv_cache": {"block_size": 16, "swap_space_gb": swap_gib},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}}}))


def test_block_bytes_of_the_small_model():
    assert BLOCK_BYTES == 524_288 == 2**19


@pytest.mark.parametrize(("gib", "blocks"), [(4.0, 8_192), (0.3, 614), (0.0, 0)])
def test_swap_blocks_by_hand(gib, blocks):
    assert swap_space_blocks(gib, BLOCK_BYTES) == blocks
    limits = _setup(gib).limits
    assert limits.swap_block_bytes == BLOCK_BYTES
    assert limits.swap_space_blocks == blocks


def test_swap_bytes_are_gib_not_gb():
    # one block's worth of GiB holds exactly one block; the same number read as GB would not
    one = BLOCK_BYTES / 2**30
    assert swap_space_blocks(one, BLOCK_BYTES) == 1
    assert int(one * 1e9 // BLOCK_BYTES) == 0


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_bad_swap_space_refused(bad):
    with pytest.raises(ValueError, match="swap_space_gb"):
        swap_space_blocks(bad, BLOCK_BYTES)
