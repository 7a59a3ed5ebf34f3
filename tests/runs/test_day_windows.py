"""A day by windows (:mod:`simulator.runs.day`, ``servesim run --day-window-s``): the
approximation flags itself, each hour's load is exact, and with whole-hour windows on a
load whose requests never overlap it reproduces the full run's latencies."""
from __future__ import annotations

import json

import pytest
from helpers import cli_error_line, make_scenario

from simulator.cli.main import main
from simulator.runs.day import run_day_windows, window_bounds
from simulator.runs.scenario import run_scenario
from simulator.workload import load_workload

VIDUR_HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"


def _scenario(tmp_path, gap_s: float, hours: int = 3, replicas: int = 2):
    """One request every ``gap_s`` seconds for ``hours`` h (prompt 64, output 8)."""
    n = int(hours * 3600 / gap_s)
    trace = tmp_path / "t.csv"
    trace.write_text(VIDUR_HEADER + "".join(f"{i * gap_s},64,8\n" for i in range(n)))
    sc = make_scenario({"cluster": {"num_replicas": replicas}, "slo": {"ttft_s": 0.5},
                        "cost": {"usd_per_gpu_hour": 2.0}},
                       workload={"trace": str(trace)})
    return sc, load_workload(sc.workload, sc.seed, lazy=True)


def test_window_bounds():
    assert window_bounds(2, 600.0, 300.0) == (2 * 3600 + 1500 - 300, 2 * 3600 + 1500,
                                              2 * 3600 + 2100)


def test_windowed_day_flags_itself_and_keeps_each_hours_load(tmp_path):
    """1 req / 2 s for 3 h: 1800 arrivals per hour (exact), 300 simulated per 600 s window;
    2 replicas x 1 GPU x 1 h = 2 GPU-hours per hour at $2, the last hour until the last
    arrival (10,798 s: 3,598 s of it)."""
    sc, specs = _scenario(tmp_path, 2.0)
    s = run_day_windows(sc, None, specs, window_s=600.0, lead_in_s=120.0)
    w = s["by_hour"]["windowed"]
    assert w == {"window_s": 600.0, "lead_in_s": 120.0, "placement": "centred in the hour",
                 "num_windows": 3, "simulated_share": pytest.approx(900 / 5400),
                 "hours_placed_at_first_arrival": [], "last_hour_held_s": 3598.0}
    rows = s["by_hour"]["rows"]
    assert [r["num_arrivals"] for r in rows] == [1800] * 3
    assert [r["num_simulated"] for r in rows] == [300] * 3
    last = 2 * 3598 / 3600
    assert [r["gpu_hours"] for r in rows] == pytest.approx([2.0, 2.0, last])
    assert [r["cost_usd"] for r in rows] == pytest.approx([4.0, 4.0, 2 * last])
    assert s["num_requests"] == 5400
    assert s["gpu_hours"] == pytest.approx(4 + last) and s["cost_usd"] == pytest.approx(
        2 * (4 + last))
    # every request's output tokens: the window's 300 x 8, scaled to the hour's 1800
    assert [r["num_output_tokens"] for r in rows] == [1800 * 8] * 3


def test_whole_hour_windows_reproduce_a_run_without_overlap(tmp_path):
    """A request every 20 s finishing within a second: no request meets another, so each
    hour simulated alone (window 3600 s, no lead-in) gives the full run's latencies."""
    sc, specs = _scenario(tmp_path, 20.0, replicas=1)
    full = run_scenario(sc, specs=specs, write=False).summary["by_hour"]["rows"]
    win = run_day_windows(sc, None, specs, window_s=3600.0, lead_in_s=0.0)["by_hour"]["rows"]
    for a, b in zip(full, win):
        assert a["hour"] == b["hour"] and a["num_arrivals"] == b["num_arrivals"] == 180
        for k in ("ttft_p50_s", "ttft_p99_s", "tpot_mean_s", "slo_attainment"):
            assert b[k] == pytest.approx(a[k], rel=1e-9), k


def test_cli_windowed_run_writes_the_approximation(tmp_path, capsys):
    sc, _ = _scenario(tmp_path, 4.0)
    path = tmp_path / "sc.yaml"
    path.write_text(json.dumps(json.loads(sc.model_dump_json())))
    out = tmp_path / "out"
    assert main(["run", str(path), "--day-window-s", "300", "--lead-in-s", "60", "-o",
                 str(out), "--no-figures", "-q"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["by_hour"]["windowed"]["window_s"] == 300.0
    report = (out / "report.md").read_text()
    assert "**Approximation: each hour is simulated as a 300 s window" in report
    assert "of 75 simulated" in report  # completed of the window's 75 arrivals


@pytest.mark.parametrize("flags, msg", [
    (["--day-window-s", "0"], ("--day-window-s: the window (0 s) must be > 0 and at most the "
                              "hour (3600 s)")),
    (["--day-window-s", "4000"], "--day-window-s: the window (4000 s) must be > 0"),
    (["--day-window-s", "600", "--lead-in-s", "-1"], "--lead-in-s: -1 s must be >= 0"),
])
def test_cli_bad_windows(tmp_path, capsys, flags, msg):
    sc, _ = _scenario(tmp_path, 60.0, hours=1)
    path = tmp_path / "sc.yaml"
    path.write_text(json.dumps(json.loads(sc.model_dump_json())))
    line = cli_error_line(capsys, ["run", str(path), "-o", str(tmp_path / "o"), "-q", *flags])
    assert msg in line


def test_sparse_hours_get_their_window_at_their_first_arrival(tmp_path):
    """3 h of 1 req / 2 s, then 20 arrivals in the first 40 s of hour 3: the centred window
    of hour 3 (1500-2100 s into it) holds none, so it starts at the hour's first arrival."""
    trace = tmp_path / "t.csv"
    rows = [f"{i * 2.0},64,8\n" for i in range(5400)] + \
        [f"{10800 + 2.0 * i},64,8\n" for i in range(20)]
    trace.write_text(VIDUR_HEADER + "".join(rows))
    sc = make_scenario({"cluster": {"num_replicas": 1}, "slo": {"ttft_s": 0.5}},
                       workload={"trace": str(trace)})
    specs = load_workload(sc.workload, sc.seed, lazy=True)
    s = run_day_windows(sc, None, specs, window_s=600.0, lead_in_s=0.0)
    assert s["by_hour"]["windowed"]["hours_placed_at_first_arrival"] == [3]
    last = s["by_hour"]["rows"][3]
    assert last["num_arrivals"] == last["num_simulated"] == 20
    assert last["slo_attainment"] is not None
    assert s["by_hour"]["windowed"]["last_hour_held_s"] == 38.0


def test_a_workload_shorter_than_two_hours_is_refused(tmp_path, capsys):
    line = cli_error_line(capsys, ["run", "default", "--day-window-s", "60", "-o",
                                   str(tmp_path / "o")])
    assert "a day by windows samples hours of a workload of two hours or more" in line
    line = cli_error_line(capsys, ["run", "default", "--lead-in-s", "100", "-o",
                                   str(tmp_path / "o")])
    assert "--lead-in-s is the lead-in of each window of --day-window-s" in line
