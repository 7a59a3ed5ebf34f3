"""Per-hour results (``summary["by_hour"]``, :mod:`simulator.metrics.hourly`): values derived
by hand from small request tables and replica spans, and a run's totals."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers import make_scenario, synthetic_workload

from simulator.metrics.fleet import ReplicaSpan, fixed_fleet_spans, replica_seconds
from simulator.metrics.hourly import hourly_rows, wants_by_hour
from simulator.runs.scenario import run_scenario

NAN = math.nan
SLO = {"ttft_s": 1.0, "tpot_s": 0.1}


def _requests() -> pd.DataFrame:
    """Hour 0: r0 completes in its SLOs (TTFT 0.5 s, TPOT 5 s / 50 = 0.1 s), r1 is
    rejected; hour 1: r2 completes with TTFT 2 s (misses), r3 cancelled; r2 finishes at
    7300 s, after hour 1's end, in the drain that the last hour with arrivals runs on to."""
    rows = [
        # id, arrival, status, sched, first token, finish, emitted
        (0, 100.0, "completed", 100.0, 100.5, 105.5, 51),   # TPOT 5/50 = 0.1: meets
        (1, 200.0, "rejected", NAN, NAN, NAN, 0),
        (2, 7100.0, "completed", 7101.0, 7102.0, 7300.0, 11),  # TTFT 2 s: misses
        (3, 4000.0, "cancelled", NAN, NAN, NAN, 0),
    ]
    return pd.DataFrame(rows, columns=["request_id", "arrival_time_s", "status",
                                       "first_scheduled_time_s", "first_token_time_s",
                                       "finish_time_s", "num_emitted_tokens"])


def test_rows_by_hand():
    rows = hourly_rows(_requests(), fixed_fleet_spans(3), window=(100.0, 7300.0), slo=SLO,
                       gpus_per_replica=2, usd_per_gpu_hour=1.5)
    assert [r["hour"] for r in rows] == [0, 1]  # the last arrival (7100 s) is in hour 1
    h0, h1 = rows
    assert h0["duration_s"] == 3500.0 and h1["duration_s"] == 3700.0  # hour 1 + the drain
    assert (h0["num_arrivals"], h0["num_completed"], h0["num_rejected"]) == (2, 1, 1)
    assert h0["slo_attainment"] == 0.5  # the rejected request is a miss
    assert h0["ttft_p50_s"] == h0["ttft_p99_s"] == 0.5
    assert h0["tpot_mean_s"] == pytest.approx(0.1)
    assert h0["num_output_tokens"] == 51
    assert h0["arrival_rate_rps"] == pytest.approx(2 / 3500.0)
    assert (h1["num_arrivals"], h1["num_cancelled"], h1["slo_attainment"]) == (2, 1, 0.0)
    assert h1["ttft_p99_s"] == 2.0
    assert h1["num_output_tokens"] == 11  # r2 finished at 7300 s, in the drain
    # a fixed fleet of 3 replicas x 2 GPUs: GPU-hours = 6 x the hour's duration in hours
    assert [r["gpu_hours"] for r in rows] == pytest.approx([6 * 3500 / 3600, 6 * 3700 / 3600])
    assert [r["cost_usd"] for r in rows] == pytest.approx([1.5 * r["gpu_hours"] for r in rows])
    assert all(r["mean_replicas_held"] == 3.0 for r in rows)
    # an empty hour between two busy ones is a row of its own
    req = _requests()
    req.loc[2, ["arrival_time_s", "first_scheduled_time_s", "first_token_time_s",
                "finish_time_s"]] = [7300.0, 7301.0, 7302.0, 7500.0]
    req.loc[3, "arrival_time_s"] = 7400.0
    rows = hourly_rows(req, fixed_fleet_spans(1), window=(100.0, 7500.0), slo=SLO)
    assert [(r["hour"], r["num_arrivals"], r["slo_attainment"]) for r in rows] == [
        (0, 2, 0.5), (1, 0, None), (2, 2, 0.0)]


def test_gpu_hours_are_the_integral_of_the_spans():
    """Replica 0 held throughout; replica 1 provisioned at 1800 s, serving from 1890 s,
    draining at 5400 s and released at 5700 s. Hour 0 holds 3600 + 1800 replica-s, hour 1
    3600 + 2100, hour 2 3600; serving 3600 + 1710, 3600 + 1800, 3600."""
    spans = fixed_fleet_spans(1) + [ReplicaSpan(1, 1800.0, 1890.0, 5400.0, 5700.0)]
    t = np.array([0.0, 3600.0, 7200.0])  # one request in each hour
    req = pd.DataFrame({"request_id": [0, 1, 2], "arrival_time_s": t,
                        "status": ["completed"] * 3, "first_scheduled_time_s": t,
                        "first_token_time_s": t + 0.1, "finish_time_s": t + 0.2,
                        "num_emitted_tokens": [2] * 3})
    rows = hourly_rows(req, spans, window=(0.0, 10_800.0), gpus_per_replica=2)
    assert [r["gpu_hours"] for r in rows] == pytest.approx([2 * 5400 / 3600, 2 * 5700 / 3600,
                                                            2.0])
    assert [r["mean_replicas_held"] for r in rows] == pytest.approx([1.5, 5700 / 3600, 1.0])
    assert [r["mean_replicas_serving"] for r in rows] == pytest.approx([5310 / 3600, 1.5, 1.0])
    total = sum(r["gpu_hours"] for r in rows)
    assert total == pytest.approx(2 * replica_seconds(spans, 0.0, 10_800.0) / 3600)


def test_bad_window_and_period():
    with pytest.raises(ValueError, match="before it starts"):
        hourly_rows(_requests(), fixed_fleet_spans(1), window=(10.0, 5.0))
    with pytest.raises(ValueError, match="period_s"):
        hourly_rows(_requests(), fixed_fleet_spans(1), window=(0.0, 5.0), period_s=0.0)


def test_a_run_of_hours_reports_by_hour_and_a_short_one_does_not():
    """10,000 Poisson arrivals at 1 req/s shaped 0.5 / 2 / 1 by hour (step): by_hour's GPU-hours add up
    to the summary's (a fixed fleet), and its arrival counts to the requests."""
    w = synthetic_workload(10_000, 1.0)
    w["rate_profile"] = {"points": [[0, 0.5], [3600, 2.0], [7200, 1.0]],
                         "interpolation": "step", "period_s": 10_800}
    sc = make_scenario({"cluster": {"num_replicas": 2}, "cost": {"usd_per_gpu_hour": 2.0},
                        "slo": {"ttft_s": 0.5}}, workload=w)
    s = run_scenario(sc, write=False).summary
    bh = s["by_hour"]
    assert bh["windowed"] is None and bh["period_s"] == 3600.0
    rows = bh["rows"]
    assert sum(r["num_arrivals"] for r in rows) == s["num_requests"] == 10_000
    assert sum(r["gpu_hours"] for r in rows) == pytest.approx(s["gpu_hours"], rel=1e-12)
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(s["cost_usd"], rel=1e-12)
    # hour 1 has 4x hour 0's rate (2 / 0.5): within Poisson noise of 1800 and 7200
    assert rows[0]["num_arrivals"] == pytest.approx(1800, abs=4 * 1800 ** 0.5)
    assert rows[1]["num_arrivals"] == pytest.approx(7200, abs=4 * 7200 ** 0.5)
    short = run_scenario(make_scenario(workload=synthetic_workload(50, 5.0)), write=False)
    assert "by_hour" not in short.summary
    assert wants_by_hour(7200.0) and not wants_by_hour(7199.9)
