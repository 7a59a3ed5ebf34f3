"""Unit tests for simulator.metrics.summary on small hand-built tables.

Every expected value below is computed by hand from the tables in ``_requests`` / ``_steps``.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from simulator.metrics.latency import STAT_KEYS, latency_stats, per_request_latencies, slo_mask
from simulator.metrics.summary import summarize, weighted_percentiles

NAN = float("nan")

# id, status, reason, slice, tenant, arrival, first_sched, first_token, finish, emitted, prompt,
# preemptions
_ROWS = [
    (0, "completed", "", "chat", "a", 0.0, 0.5, 1.0, 3.0, 5, 100, 0),
    (1, "completed", "", "code", "a", 1.0, 1.0, 1.5, 2.5, 3, 200, 1),
    (2, "completed", "", "chat", "b", 2.0, 2.5, 4.0, 4.0, 1, 50, 0),
    (3, "rejected", "kv_capacity", "code", "b", 3.0, NAN, NAN, NAN, 0, 4000, 0),
    (4, "running", "", "chat", "a", 4.0, 4.5, 5.0, NAN, 2, 100, 2),
    (5, "cancelled", "", "chat", "b", 5.0, NAN, NAN, NAN, 0, 100, 0),
]
# Per request (s): TTFT 1.0, 0.5, 2.0, -, 1.0, -   TPOT 0.5, 0.5, -, -, -, -
#                  E2E 3.0, 1.5, 2.0, -, -, -      queue delay 0.5, 0.0, 0.5, -, 0.5, -


def _requests() -> pd.DataFrame:
    cols = ["request_id", "status", "reject_reason", "slice", "tenant", "arrival_time_s",
            "first_scheduled_time_s", "first_token_time_s", "finish_time_s",
            "num_emitted_tokens", "num_prompt_tokens", "num_preemptions"]
    df = pd.DataFrame(_ROWS, columns=cols)
    df["replica_id"] = np.where(df["status"] == "rejected", -1, 0)
    df["priority"] = 0
    df["num_output_tokens"] = [5, 3, 1, 10, 8, 4]
    df["num_cached_prompt_tokens"] = [0, 100, 0, 0, 0, 0]
    return df


def _steps() -> pd.DataFrame:
    # start, step_time, batch, kv_used, waiting; one replica with 100 blocks; idle 4.5..6.0
    rows = [(0.5, 1.0, 1, 10, 0), (1.5, 1.0, 2, 30, 1), (2.5, 2.0, 2, 20, 0),
            (6.0, 2.0, 1, 50, 0)]
    df = pd.DataFrame(rows, columns=["start_time_s", "step_time_s", "batch_size",
                                     "kv_blocks_used", "num_waiting"])
    df.insert(0, "replica_id", 0)
    df.insert(1, "step_index", range(len(df)))
    df["end_time_s"] = df["start_time_s"] + df["step_time_s"]
    df["num_gpu_blocks"] = 100
    for c in ("num_prefill_tokens", "num_decode_tokens", "num_prefill_seqs", "num_decode_seqs",
              "num_preempted"):
        df[c] = 0
    return df


SLO = {"ttft_s": 1.0, "tpot_s": 0.5, "e2e_s": None, "attainment_target": 0.5}
ITL_VALUES = np.array([0.1, 0.2, 0.5])
ITL_WEIGHTS = np.array([3, 1, 1])


def _summary(**kw):
    args = {"slo": SLO, "usd_per_gpu_hour": 2.0, "num_gpus": 2, "sim_wall_s": 0.5, "window": None}
    args.update(kw)
    return summarize(_requests(), _steps(), ITL_VALUES, ITL_WEIGHTS, **args)


# ------------------------------------------------------------------------------------------
# weighted percentiles
# ------------------------------------------------------------------------------------------
QS = np.arange(0.0, 100.0001, 0.5)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 100, 101])
def test_equal_weights_match_numpy_inverted_cdf(n):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 12, n).astype(float)  # many repeated values
    expected = np.percentile(x, QS, method="inverted_cdf")
    assert np.array_equal(weighted_percentiles(x, None, QS), expected)
    assert np.array_equal(weighted_percentiles(x, np.ones(n), QS), expected)
    assert np.array_equal(weighted_percentiles(x, np.full(n, 3.0), QS), expected)


@pytest.mark.parametrize("seed", range(5))
def test_integer_weights_match_expanded_sample(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 20, 40).astype(float)
    w = rng.integers(1, 6, 40)
    expected = np.percentile(np.repeat(x, w), QS, method="inverted_cdf")
    assert np.array_equal(weighted_percentiles(x, w, QS), expected)


def test_float_weights_match_numpy_weighted_quantile():
    rng = np.random.default_rng(7)
    x = rng.normal(size=50)
    w = rng.uniform(0.1, 3.0, 50)
    try:
        expected = np.percentile(x, QS, weights=w, method="inverted_cdf")
    except TypeError:  # numpy < 2.0 has no weights
        pytest.skip("numpy without weighted percentiles")
    assert np.allclose(weighted_percentiles(x, w, QS), expected)


def test_weighted_percentiles_by_hand():
    # cumulative weights 1, 4, 5 of 5: 20% -> 1.0 (exactly reached), 21% -> 2.0, 80% -> 2.0
    r = weighted_percentiles([3.0, 1.0, 2.0], [1, 1, 3], [0, 20, 21, 80, 81, 100])
    assert r.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_weighted_percentiles_ignores_nan_and_zero_weight():
    r = weighted_percentiles([np.nan, 0.0, 5.0, 7.0], [1, 0, 1, 1], [0, 50, 100])
    assert r.tolist() == [5.0, 5.0, 7.0]
    assert np.isnan(weighted_percentiles([], [], [50])).all()
    assert weighted_percentiles([4.0], None, 50).shape == (1,)


@pytest.mark.parametrize("kw", [
    {"values": [1.0], "weights": [-1.0], "qs": [50]},
    {"values": [1.0], "weights": [1.0, 2.0], "qs": [50]},
    {"values": [1.0], "weights": None, "qs": [101]},
    {"values": [1.0], "weights": [np.inf], "qs": [50]},
])
def test_weighted_percentiles_rejects_bad_input(kw):
    with pytest.raises(ValueError):
        weighted_percentiles(**kw)


def test_latency_stats():
    s = latency_stats([0.5, 1.0, np.nan, 1.0, 2.0])
    assert s == {"mean": 1.125, "p50": 1.0, "p90": 2.0, "p99": 2.0, "max": 2.0, "count": 4}
    empty = latency_stats([np.nan])
    assert tuple(empty) == STAT_KEYS
    assert empty == {"mean": None, "p50": None, "p90": None, "p99": None, "max": None,
                     "count": 0}
    w = latency_stats(ITL_VALUES, ITL_WEIGHTS)  # expanded: 0.1 0.1 0.1 0.2 0.5
    assert w["mean"] == pytest.approx(0.2)
    assert (w["p50"], w["p90"], w["p99"], w["max"], w["count"]) == (0.1, 0.5, 0.5, 0.5, 5)


# ------------------------------------------------------------------------------------------
# per-request quantities and SLO mask
# ------------------------------------------------------------------------------------------
def test_per_request_latencies():
    lat = per_request_latencies(_requests())
    np.testing.assert_allclose(lat["ttft_s"], [1.0, 0.5, 2.0, NAN, 1.0, NAN])
    np.testing.assert_allclose(lat["tpot_s"], [0.5, 0.5, NAN, NAN, NAN, NAN])
    np.testing.assert_allclose(lat["e2e_latency_s"], [3.0, 1.5, 2.0, NAN, NAN, NAN])
    np.testing.assert_allclose(lat["queue_delay_s"], [0.5, 0.0, 0.5, NAN, 0.5, NAN])


def test_slo_mask_rules():
    req = _requests()
    assert slo_mask(req, SLO).tolist() == [True, True, False, False, False, False]
    # TPOT bound only: request 2 emitted 1 token (TPOT undefined) passes
    assert slo_mask(req, {"tpot_s": 0.4}).tolist() == [False, False, True, False, False, False]
    # no bound at all: every completed request meets "every SLO"
    assert slo_mask(req, {}).tolist() == [True, True, True, False, False, False]
    assert slo_mask(req, {"e2e_s": 2.0}).tolist() == [False, True, True, False, False, False]


# ------------------------------------------------------------------------------------------
# summarize
# ------------------------------------------------------------------------------------------
def test_summary_accounting_and_latencies():
    s = _summary()
    assert (s["num_requests"], s["num_completed"], s["num_rejected"], s["num_cancelled"],
            s["num_unfinished"]) == (6, 3, 1, 1, 1)
    assert s["num_requests"] == (s["num_completed"] + s["num_rejected"] + s["num_cancelled"]
                                 + s["num_unfinished"])
    assert s["reject_reasons"] == {"kv_capacity": 1}
    assert s["ttft_s"] == {"mean": 1.125, "p50": 1.0, "p90": 2.0, "p99": 2.0, "max": 2.0,
                           "count": 4}
    assert s["tpot_s"] == {"mean": 0.5, "p50": 0.5, "p90": 0.5, "p99": 0.5, "max": 0.5,
                           "count": 2}
    assert s["e2e_latency_s"]["mean"] == pytest.approx(6.5 / 3)
    assert (s["e2e_latency_s"]["p50"], s["e2e_latency_s"]["p90"],
            s["e2e_latency_s"]["count"]) == (2.0, 3.0, 3)
    assert s["queue_delay_s"]["mean"] == pytest.approx(0.375)
    assert s["itl_s"]["count"] == 5 and s["itl_s"]["mean"] == pytest.approx(0.2)
    assert s["num_preemptions"] == 3


def test_summary_window_throughput_goodput_attainment():
    s = _summary()
    # window: first arrival 0.0 to the last step end 8.0 (later than the last finish 4.0)
    assert (s["window_start_s"], s["window_end_s"], s["duration_s"]) == (0.0, 8.0, 8.0)
    assert s["request_throughput_rps"] == pytest.approx(3 / 8)
    assert s["num_output_tokens"] == 9 and s["num_input_tokens"] == 350
    assert s["output_token_throughput_tps"] == pytest.approx(9 / 8)
    assert s["total_token_throughput_tps"] == pytest.approx(359 / 8)
    assert s["prefix_cache_hit_rate"] == pytest.approx(100 / 350)
    # requests 0 and 1 meet TTFT <= 1 s and TPOT <= 0.5 s; 2 misses TTFT; 3..5 never complete
    assert s["goodput_rps"] == pytest.approx(2 / 8)
    assert s["slo_attainment"] == pytest.approx(2 / 6)
    assert s["slo_attainment_target"] == 0.5
    assert s["slo_met"] is False
    assert _summary(slo={**SLO, "attainment_target": 0.3})["slo_met"] is True
    assert _summary(slo={"ttft_s": None, "tpot_s": None, "e2e_s": None,
                         "attainment_target": None})["slo_met"] is None


def test_summary_tpot_undefined_passes_like_vllm():
    s = _summary(slo={"tpot_s": 0.4})
    assert s["slo_attainment"] == pytest.approx(1 / 6)  # only request 2 (1 token)
    assert s["goodput_rps"] == pytest.approx(1 / 8)


def test_summary_kv_and_batch_are_busy_time_weighted():
    s = _summary()
    # usage 0.1, 0.3, 0.2, 0.5 over step times 1, 1, 2, 2 (idle 4.5..6.0 not counted)
    assert s["mean_kv_cache_usage"] == pytest.approx((0.1 + 0.3 + 0.4 + 1.0) / 6)
    assert s["max_kv_cache_usage"] == pytest.approx(0.5)
    assert s["mean_batch_size"] == pytest.approx((1 + 2 + 4 + 2) / 6)
    assert s["mean_num_waiting"] == pytest.approx(1 / 6)
    assert s["num_steps"] == 4


def test_summary_cost_arithmetic():
    # 2 GPUs x 1800 s = 1 GPU-hour; x $2/GPU-hour = $2; 9 output tokens, 350 input tokens
    s = _summary(window=(0.0, 1800.0))
    assert s["gpu_hours"] == pytest.approx(1.0)
    assert s["cost_usd"] == pytest.approx(2.0)
    assert s["cost_per_1m_output_tokens_usd"] == pytest.approx(2.0 / 9 * 1e6)
    assert s["cost_per_1m_input_tokens_usd"] == pytest.approx(2.0 / 350 * 1e6)
    assert s["cost_per_1m_tokens_usd"] == pytest.approx(2.0 / 359 * 1e6)
    d = _summary()  # default window: 8 s
    assert d["gpu_hours"] == pytest.approx(2 * 8 / 3600)
    assert d["cost_usd"] == pytest.approx(2 * 2 * 8 / 3600)
    assert d["sim_wall_s"] == 0.5 and d["sim_speedup"] == pytest.approx(16.0)


def test_summary_explicit_window():
    s = _summary(window=(2.0, 8.0))
    # requests arriving in [2, 8]: 2, 3, 4, 5 -> one completed (2), which misses TTFT
    assert (s["num_requests"], s["num_completed"], s["num_unfinished"]) == (4, 1, 1)
    assert s["slo_attainment"] == 0.0
    # completions finishing in [2, 8]: requests 0 (3.0), 1 (2.5), 2 (4.0)
    assert s["request_throughput_rps"] == pytest.approx(3 / 6)
    assert s["goodput_rps"] == pytest.approx(2 / 6)
    # steps starting in [2, 8]: usage 0.2 (2 s) and 0.5 (2 s)
    assert s["mean_kv_cache_usage"] == pytest.approx(0.35)
    with pytest.raises(ValueError):
        _summary(window=(5.0, 1.0))


def test_summary_groups():
    s = _summary()
    assert list(s["by_slice"]) == ["chat", "code"]
    chat, code = s["by_slice"]["chat"], s["by_slice"]["code"]
    assert (chat["num_requests"], chat["num_completed"]) == (4, 2)
    assert chat["slo_attainment"] == pytest.approx(1 / 4)
    assert chat["goodput_rps"] == pytest.approx(1 / 8)
    assert chat["ttft_s"]["count"] == 3 and chat["tpot_s"]["count"] == 1
    assert (code["num_requests"], code["num_completed"], code["num_rejected"]) == (2, 1, 1)
    assert code["slo_attainment"] == pytest.approx(1 / 2)
    assert s["by_tenant"]["a"]["slo_attainment"] == pytest.approx(2 / 3)
    assert s["by_tenant"]["b"]["slo_attainment"] == 0.0
    for group in (*s["by_slice"].values(), *s["by_tenant"].values()):
        assert {"num_requests", "num_completed", "ttft_s", "tpot_s", "e2e_latency_s",
                "slo_attainment", "goodput_rps"} <= set(group)


REQUIRED_KEYS = {
    "num_requests", "num_completed", "num_rejected", "num_cancelled", "num_unfinished",
    "reject_reasons", "ttft_s", "tpot_s", "itl_s", "e2e_latency_s", "queue_delay_s",
    "request_throughput_rps", "output_token_throughput_tps", "total_token_throughput_tps",
    "goodput_rps", "slo_attainment", "slo_met", "num_preemptions", "mean_kv_cache_usage",
    "max_kv_cache_usage", "mean_batch_size", "duration_s", "gpu_hours", "cost_usd",
    "cost_per_1m_output_tokens_usd", "cost_per_1m_input_tokens_usd", "cost_per_1m_tokens_usd",
    "sim_wall_s", "by_slice", "by_tenant",
}


def _walk(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v)
    else:
        yield x


def test_summary_is_json_safe_and_complete():
    s = _summary()
    assert REQUIRED_KEYS <= set(s)
    json.dumps(s, allow_nan=False)
    for v in _walk(s):
        assert v is None or isinstance(v, (bool, int, float, str))
        assert not (isinstance(v, float) and not math.isfinite(v))


def test_summary_empty_run():
    s = summarize(_requests().iloc[:0], _steps().iloc[:0], None, None,
                  slo=SLO, usd_per_gpu_hour=2.0, num_gpus=1, sim_wall_s=0.0, window=None)
    json.dumps(s, allow_nan=False)
    assert s["num_requests"] == 0 and s["duration_s"] == 0.0
    assert s["request_throughput_rps"] is None and s["slo_attainment"] is None
    assert s["ttft_s"]["p50"] is None and s["mean_kv_cache_usage"] is None
    assert s["cost_per_1m_tokens_usd"] is None and s["by_slice"] == {}


def test_summary_all_rejected():
    req = _requests()
    req["status"] = "rejected"
    req["reject_reason"] = ["queue_full"] * 4 + ["kv_capacity"] * 2
    for c in ("first_scheduled_time_s", "first_token_time_s", "finish_time_s"):
        req[c] = NAN
    s = summarize(req, _steps().iloc[:0], slo=SLO, usd_per_gpu_hour=1.0, num_gpus=1,
                  sim_wall_s=None, window=None)
    assert s["reject_reasons"] == {"kv_capacity": 2, "queue_full": 4}
    assert s["slo_attainment"] == 0.0 and s["goodput_rps"] == 0.0
    assert s["cost_per_1m_output_tokens_usd"] is None
    assert s["ttft_s"]["count"] == 0


# inf + -inf in the sums: numpy warns of the NaN it makes, in both functions alike
@pytest.mark.filterwarnings("ignore:invalid value encountered in reduce:RuntimeWarning")
@pytest.mark.parametrize("values", [[1.5, 2.25, -3.0], [1.5, np.nan, 2.0],
                                    [np.inf, -np.inf, np.nan, 4.0], []])
def test_finite_or_and_nansum_are_numpys(values):
    """The column helpers give numpy's nan_to_num and nansum, bit for bit, with and without
    non-finite values (a long column of random values: the pairwise sum's blocks too)."""
    from simulator.metrics.columns import finite_or, nansum

    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(size=20_000) * 1e3, np.asarray(values, dtype=float)])
    assert np.float64(nansum(x)).tobytes() == np.float64(np.nansum(x)).tobytes()
    want = np.nan_to_num(x.copy(), nan=-1.0)
    got = finite_or(x.copy(), -1.0)
    assert got.tobytes() == want.tobytes()
