"""The replay's error table: signed % errors of statistics computed by the summary's
definitions, the compared population, per-request errors and the makespan. Expected values are
worked out by hand from the frames built here."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from simulator.observe.compare import compare_outcomes, paired_frame, pct_error


def _outcomes(ttft, e2e, out, arrival):
    a = np.asarray(arrival, dtype=float)
    f = a + np.asarray(ttft, dtype=float)
    last = a + np.asarray(e2e, dtype=float)
    o = np.asarray(out)
    return pd.DataFrame({
        "request_id": np.arange(len(a)), "record_request_id": [f"r{i}" for i in range(len(a))],
        "arrival_s": a, "scheduled_s": a, "first_token_s": f, "last_token_s": last,
        "num_prompt_tokens": np.full(len(a), 10), "num_output_tokens": o,
        "ttft_s": f - a, "tpot_s": np.where(o > 1, (last - f) / (o - 1), np.nan),
        "e2e_latency_s": last - a, "queue_delay_s": np.zeros(len(a))})


def _sim(ttft, e2e, out, arrival, status=None):
    a = np.asarray(arrival, dtype=float)
    n = len(a)
    return pd.DataFrame({
        "request_id": np.arange(n), "replica_id": 0, "tenant": "default", "slice": "default",
        "priority": 0, "arrival_time_s": a, "num_prompt_tokens": 10, "num_output_tokens": out,
        "num_emitted_tokens": out, "num_cached_prompt_tokens": 0,
        "status": status or ["completed"] * n, "reject_reason": "",
        "first_scheduled_time_s": a, "first_token_time_s": a + np.asarray(ttft, dtype=float),
        "finish_time_s": a + np.asarray(e2e, dtype=float), "exit_time_s": np.nan,
        "num_preemptions": 0})


def test_pct_error_definition():
    assert pct_error(11.0, 10.0) == pytest.approx(10.0)
    assert pct_error(9.0, 10.0) == pytest.approx(-10.0)
    assert pct_error(1.0, 0.0) is None and pct_error(None, 1.0) is None


def test_every_statistic_ten_percent_high():
    arr = [0.0, 1.0, 2.0, 3.0]
    real = _outcomes([1, 2, 3, 4], [5, 6, 7, 8], [5, 5, 5, 5], arr)
    sim = _sim([1.1, 2.2, 3.3, 4.4], [5.5, 6.6, 7.7, 8.8], [5, 5, 5, 5], arr)
    r = compare_outcomes(real, sim)
    # inverse-CDF percentiles of 4 values: p50 = the 2nd smallest, p90 and p99 = the 4th
    m = r["metrics"]["ttft"]
    assert m["real"]["p50"] == 2.0 and m["real"]["p90"] == 4.0 and m["real"]["mean"] == 2.5
    for s in ("mean", "p50", "p90", "p99"):
        assert r[f"ttft_{s}_pct_error"] == pytest.approx(10.0)
        assert r[f"e2e_{s}_pct_error"] == pytest.approx(10.0)
        # TPOT = (e2e - ttft) / 4: real 1.0 each, sim 1.1 each
        assert r[f"tpot_{s}_pct_error"] == pytest.approx(10.0)
    assert r["per_request"]["ttft"]["median_abs_pct"] == pytest.approx(10.0)
    assert r["per_request"]["e2e"]["mean_signed_pct"] == pytest.approx(10.0)
    # makespan: last token 3 + 8 = 11 s real, 3 + 8.8 = 11.8 s simulated, from arrival 0
    assert r["makespan"]["real_s"] == 11.0 and r["makespan"]["sim_s"] == pytest.approx(11.8)
    assert r["makespan_pct_error"] == pytest.approx((11.8 - 11.0) / 11.0 * 100)
    assert r["num_compared"] == 4
    # no ITL in the record: no error figure
    assert r["itl_mean_pct_error"] is None


def test_only_requests_completed_in_both_are_compared():
    arr = [0.0, 1.0, 2.0]
    real = _outcomes([1, 2, 30], [5, 6, 70], [5, 5, 5], arr)
    sim = _sim([1, 2, 3], [5, 6, 7], [5, 5, 5], arr,
               status=["completed", "completed", "rejected"])
    r = compare_outcomes(real, sim)
    assert r["num_compared"] == 2 and r["num_sim_rejected"] == 1
    # the rejected request's 30 s TTFT is left out of both sides: errors are 0
    assert r["ttft_mean_pct_error"] == 0.0 and r["e2e_p99_pct_error"] == 0.0
    pair = paired_frame(real, sim)
    assert pair["compared"].tolist() == [True, True, False]
    assert pair["sim_status"].tolist() == ["completed", "completed", "rejected"]


def test_itl_pools_the_recorded_gaps():
    arr = [0.0, 1.0]
    real = _outcomes([1, 1], [2, 2], [3, 3], arr)
    real["itl_s"] = [(0.5, 0.5), (0.25, 0.75)]
    sim = _sim([1, 1], [2, 2], [3, 3], arr)
    r = compare_outcomes(real, sim, np.array([0.5, 0.6]), np.array([3, 1]))
    # recorded gaps 0.25, 0.5, 0.5, 0.75: mean 0.5; simulated 0.5 x3, 0.6 x1: mean 0.525
    assert r["metrics"]["itl"]["real"]["mean"] == 0.5
    assert r["metrics"]["itl"]["sim"]["mean"] == pytest.approx(0.525)
    assert r["itl_mean_pct_error"] == pytest.approx(5.0)
    assert math.isclose(r["metrics"]["itl"]["real"]["p50"], 0.5)
