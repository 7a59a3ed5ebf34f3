"""Day plan (:mod:`simulator.planner.day`): static peak sized on the peak hour, static mean
from the hourly counts, autoscaled, priced over the day, on a day whose capacity is derived
by hand.

The day: 3,150 requests, one every 4 s (prompt 64, output 8 tokens), shaped by a 4-h step
profile 0.5 / 2 / 0.5 / 0.5 (F over the period: 12,600 s = 3,150 x 4 s), so 450, 1800,
450 and 450 arrivals per hour, every 8 s outside hour 1 and every 2 s in it. A constant step of 0.4 s and ``max_num_seqs: 1``: a request
takes 8 steps (its prefill emits the first token, 7 decode steps the rest), 3.2 s on its
replica, and its TTFT is one step, 0.4 s, when it does not queue. In hour 1 one replica
serves 1 / 3.2 s < 1 / 2 s (its queue grows: almost every TTFT passes the 0.5 s SLO); two
replicas take the arrivals in turn, each one every 4 s > 3.2 s, so none queues. Hence the
static peak is 2 replicas and the static mean ceil(2 x 787.5 / 1800) = 1.
"""
from __future__ import annotations

import math

import pytest
from helpers import cli_error_line

from simulator.planner.day import hourly_arrivals, load_day_plan, run_day_plan
from simulator.scenario.config import validate_scenario
from simulator.workload import load_workload

VIDUR_HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
PRICE = 2.0


def _base(tmp_path) -> dict:
    trace = tmp_path / "t.csv"
    trace.write_text(VIDUR_HEADER + "".join(f"{4 * i},64,8\n" for i in range(3150)))
    return {"name": "b", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
            "perf": {"source": "constant", "constant": {"step_s": 0.4}},
            "scheduler": {"max_num_seqs": 1}, "cluster": {"router": "least_outstanding"},
            "workload": {"trace": str(trace), "rate_profile": {
                "points": [[0, 0.5], [3600, 2.0], [7200, 0.5], [10800, 0.5]],
                "interpolation": "step", "period_s": 14_400}},
            "slo": {"ttft_s": 0.5, "attainment_target": 0.9},
            "cost": {"usd_per_gpu_hour": PRICE}}


def _spec(tmp_path, **day):
    raw = {"name": "d", "base": _base(tmp_path), "output_dir": str(tmp_path / "out"),
           "day": {"max_replicas": 3, "lead_in_s": 300, **day}}
    return load_day_plan(raw, "plan.yaml")


def test_hourly_counts(tmp_path):
    sc = validate_scenario(_base(tmp_path))
    specs = load_workload(sc.workload, 0, lazy=True)
    assert hourly_arrivals(specs) == {0: 450, 1: 1800, 2: 450, 3: 450}


def test_day_plan_static_peak_mean_and_autoscaled(tmp_path):
    spec = _spec(tmp_path, autoscale={"min_replicas": 1, "max_replicas": 2,
                                      "policy": "running_requests", "target": 1.0,
                                      "interval_s": 15, "window_s": 30,
                                      "scale_down_cooldown_s": 300,
                                      "cold_start": {"cold_start_s": 60}})
    plan = run_day_plan(spec, tmp_path)
    assert plan["peak_hour"] == 1
    assert plan["mean_hour_arrivals"] == 787.5
    assert [(s["replicas"], s["passed"]) for s in plan["sizing"]] == [(1, False), (2, True)]
    assert plan["sizing"][1]["slo_attainment"] == 1.0  # no request queues on 2 replicas
    peak, mean, auto = plan["fleets"]
    assert (peak["label"], peak["replicas"]) == ("static peak", 2)
    assert (mean["label"], mean["replicas"]) == ("static mean", math.ceil(2 * 787.5 / 1800))
    # held all day: GPU-hours = replicas x the day's hours (the rows cover the whole window)
    hours = sum(r["duration_s"] for r in peak["rows"]) / 3600
    assert peak["gpu_hours"] == pytest.approx(2 * hours)
    assert peak["cost_usd"] == pytest.approx(2 * hours * PRICE)
    assert peak["slo_attainment"] == 1.0 and peak["cold_start_violations"] == 0
    # one replica cannot carry hour 1: its backlog (1800 - 3600 / 3.2 = 675 requests, 2160 s
    # of work) also delays every arrival of hour 2 (1440 s of its own work); hour 0 is clean
    att = {r["hour"]: r["slo_attainment"] for r in mean["rows"]}
    assert att[0] == 1.0 and att[1] < 0.9 and att[2] < 0.9
    assert mean["worst_hour"] in (1, 2) and mean["worst_hour_attainment"] < 0.9
    assert mean["cost_usd"] == pytest.approx(peak["cost_usd"] / 2, rel=1e-3)
    # autoscaled: between one and two replicas held; its 60 s cold start at the step up to
    # hour 1 leaves one replica taking a request every 2 s: some TTFTs pass 0.5 s meanwhile
    assert "error" not in auto, auto.get("error")
    assert mean["gpu_hours"] < auto["gpu_hours"] < peak["gpu_hours"]
    assert auto["cold_start_violations"] > 0
    held = [r["mean_replicas_held"] for r in auto["rows"]]
    assert min(held) == pytest.approx(1.0) and max(held) > 1.5
    # energy: with max_num_seqs 1 every fleet runs the same steps (one request each, the same
    # shapes), so the busy energy is the same and the fleets differ by idle power (115 W per
    # H100, hardware_profiles/h100-sxm/power.yaml) x the extra GPU-seconds held
    e_peak, e_mean = peak["energy"], mean["energy"]
    assert e_peak["idle_counted"] and e_mean["idle_counted"]
    extra_held_s = (peak["gpu_hours"] - mean["gpu_hours"]) * 3600
    assert (e_peak["energy_kwh"] - e_mean["energy_kwh"]) * 3.6e6 == pytest.approx(
        115.0 * extra_held_s, rel=1e-6)
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "| static peak" in md and "| autoscaled" in md and "day.png" in md
    assert "kWh per day" in md
    assert (tmp_path / "out" / "day.png").stat().st_size > 0


def test_day_plan_windowed_states_the_approximation(tmp_path):
    plan = run_day_plan(_spec(tmp_path, windows={"window_s": 600, "lead_in_s": 120}),
                        tmp_path, figures=False)
    peak = plan["fleets"][0]
    assert peak["cold_start_violations"] is None
    assert [r["num_arrivals"] for r in peak["rows"]] == [450, 1800, 450, 450]
    md = (tmp_path / "out" / "plan.md").read_text()
    assert "**Approximation: every fleet was simulated as one 600 s window per hour" in md


def test_day_plan_errors(tmp_path, capsys):
    with pytest.raises(Exception, match=r"day\.windows\.window_s"):
        _spec(tmp_path, windows={"window_s": 5000})
    plan = tmp_path / "p.yaml"
    plan.write_text("name: p\nbase: nothere.yaml\nday: {max_replicas: 0}\n")
    line = cli_error_line(capsys, ["plan", str(plan)])
    assert "day.max_replicas" in line


def test_static_fleets_of_an_autoscaled_base_do_not_scale(tmp_path):
    # a base that autoscales: the plan's static fleets drop its cluster.autoscale (their GPU-
    # hours are replicas x the day), the autoscaled fleet keeps the plan's
    base = _base(tmp_path)
    base["cluster"]["autoscale"] = {"min_replicas": 1, "max_replicas": 3, "target": 1.0,
                                    "cold_start": {"cold_start_s": 60}}
    raw = {"name": "d", "base": base, "output_dir": str(tmp_path / "out"),
           "day": {"max_replicas": 3, "lead_in_s": 300}}
    plan = run_day_plan(load_day_plan(raw, "plan.yaml"), tmp_path, figures=False)
    peak, mean = plan["fleets"]
    hours = sum(r["duration_s"] for r in peak["rows"]) / 3600
    assert peak["gpu_hours"] == pytest.approx(2 * hours)
    assert mean["gpu_hours"] == pytest.approx(1 * hours)
    assert peak["cold_start_violations"] == mean["cold_start_violations"] == 0
