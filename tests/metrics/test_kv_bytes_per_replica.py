"""KV byte means over replicas of different models (a degrade fallback set): each step is
charged its own replica's KV bytes per token (found by an independent audit: the fallback's
steps were charged the primary model's 4x larger figure)."""
from __future__ import annotations

import pandas as pd
import pytest

from simulator.metrics.step_stats import kv_and_batching_stats


def _steps() -> pd.DataFrame:
    # replica 0: 2 blocks (32 tokens reserved), 20 tokens, 1 s; replica 1: 1 block, 10 tokens,
    # 3 s (block_size 16)
    return pd.DataFrame({"replica_id": [0, 1], "step_time_s": [1.0, 3.0],
                         "kv_blocks_used": [2, 1], "kv_tokens_used": [20, 10],
                         "batch_size": [4, 2], "num_padding_seqs": [0, 0]})


def test_each_replica_is_charged_its_own_bytes_per_token():
    s = kv_and_batching_stats(_steps(), 16, {0: 1000.0, 1: 250.0})
    # by hand: reserved = (32 x 1000 x 1 + 16 x 250 x 3) / 4 s = (32,000 + 12,000) / 4
    assert s["kv_reserved_bytes_mean"] == pytest.approx(11_000.0, rel=1e-15)
    # used = (20 x 1000 x 1 + 10 x 250 x 3) / 4 = (20,000 + 7,500) / 4
    assert s["kv_used_bytes_mean"] == pytest.approx(6_875.0, rel=1e-15)
    assert s["kv_wasted_bytes_mean"] == pytest.approx(4_125.0, rel=1e-15)
    # fragmentation is in tokens, whatever the bytes: (12 x 1 + 6 x 3) / (32 x 1 + 16 x 3)
    assert s["mean_kv_fragmentation"] == pytest.approx(30 / 80, rel=1e-15)


def test_equal_figures_give_the_scalar_result():
    one = kv_and_batching_stats(_steps(), 16, 1000.0)
    same = kv_and_batching_stats(_steps(), 16, {0: 1000.0, 1: 1000.0})
    assert one == same
    assert one["kv_reserved_bytes_mean"] == (32 * 1 + 16 * 3) / 4 * 1000.0
