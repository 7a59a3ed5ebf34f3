"""Epoch-scale clocks (issue 26 class 2): timestamps are re-based to the first arrival, in the
Unix-epoch unit their magnitude shows, exactly; a run whose clock cannot resolve a step is
refused before it starts, naming the trace line or the key that put the clock there."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from simulator.cli.main import main
from simulator.workload import (
    WorkloadConfig,
    WorkloadError,
    WorkloadWarning,
    load_workload,
    read_columns,
    read_trace,
)
from simulator.workload.clock import MAX_CLOCK_S, epoch_unit, exact_residuals
from tests.helpers import roofline_scenario_text

BASE = roofline_scenario_text("clocks", 20, "{dist: fixed, value: 100}",
                              "{dist: fixed, value: 20}")
GC = "arrival_time_s,num_prompt_tokens,num_output_tokens\n"
K = 10
#: 2023-11-14 22:13:20 UTC in each unit since the Unix epoch
T0_S = 1_700_000_000


def _csv(tmp_path, name, times, prompt=100):
    p = tmp_path / name
    p.write_text(GC + "".join(f"{t},{prompt + i},{20 + i}\n" for i, t in enumerate(times)))
    return p


def _read(path, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        reqs = read_trace(path, **kw)
    return [r.arrival_time_s for r in reqs], [str(x.message) for x in w
                                              if issubclass(x.category, WorkloadWarning)]


@pytest.mark.parametrize("unit, per_s, word", [("s", 1, "seconds"), ("ms", 10 ** 3,
                                                                     "milliseconds"),
                                               ("us", 10 ** 6, "microseconds"),
                                               ("ns", 10 ** 9, "nanoseconds")])
def test_epoch_integers_rebase_exactly_in_the_unit_their_magnitude_shows(tmp_path, unit, per_s,
                                                                          word):
    # row k at T0 + k * 0.1 s written in `unit`: integers for ms/us/ns, 0.1 s steps as
    # decimals for s; re-based they must be exactly the floats k / 10 (Python's correctly
    # rounded k / 10, what a relative trace "0.3" reads as)
    if per_s == 1:
        times = [f"{T0_S + k // 10}.{k % 10}" for k in range(K)]
    else:
        times = [str(T0_S * per_s + k * per_s // 10) for k in range(K)]
    got, warned = _read(_csv(tmp_path, "e.csv", times))
    assert got == [k / 10 for k in range(K)]
    assert len(warned) == 1
    assert f"look like Unix epoch {word}" in warned[0]
    assert f"({T0_S * per_s} = 2023-11-14 22:13:20 UTC)" in warned[0]
    assert "e.csv:2:" in warned[0]  # the first arrival's line


def test_epoch_ns_trace_replays_with_the_relative_twins_latencies(tmp_path, capsys):
    """The issue's case: arrivals at 1.7e18 ns + k * 1e8 ns used to give TTFT = E2E = 0 (the
    float64 clock at 1.7e18 s has a spacing of 256 s); re-based they replay exactly as the
    same rows at k * 0.1 s."""
    base = tmp_path / "s.yaml"
    base.write_text(BASE)
    epoch = _csv(tmp_path, "ns.csv", [str(T0_S * 10 ** 9 + k * 10 ** 8) for k in range(K)])
    twin = _csv(tmp_path, "rel.csv", [repr(k / 10) for k in range(K)])
    out = {}
    for name, trace in (("epoch", epoch), ("twin", twin)):
        o = tmp_path / name
        assert main(["run", str(base), "--trace", str(trace), "-q", "--no-figures", "-o",
                     str(o)]) == 0
        out[name] = pd.read_parquet(o / "requests.parquet").sort_values("request_id")
    err = capsys.readouterr().err
    assert "look like Unix epoch nanoseconds, not the declared seconds" in err
    a, b = out["epoch"], out["twin"]
    assert len(a) == K and (a.status == "completed").all()
    for col in ("arrival_time_s", "first_token_time_s", "finish_time_s"):
        assert a[col].tolist() == b[col].tolist(), col
    ttft = a.first_token_time_s - a.arrival_time_s
    assert (ttft > 0).all()  # not the zeros of a clock that lost its resolution


def test_mooncake_epoch_ms_and_generic_time_unit_ms(tmp_path):
    # Mooncake declares ms: 1.7e12 is epoch ms in its own unit ("the format's unit")
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps({"timestamp": T0_S * 1000 + 100 * k, "input_length": 10,
                                     "output_length": 2}) + "\n" for k in range(K)))
    got, warned = _read(p)
    assert got == [k / 10 for k in range(K)]
    assert "epoch milliseconds (the format's unit)" in warned[0]
    # epoch us in a generic file declared ms: taken as microseconds
    g = _csv(tmp_path, "g.csv", [str(T0_S * 10 ** 6 + k * 10 ** 5) for k in range(K)])
    got, warned = _read(g, time_unit="ms")
    assert got == [k / 10 for k in range(K)]
    assert "epoch microseconds, not the declared milliseconds" in warned[0]


def test_small_clocks_are_kept_as_they_are(tmp_path):
    # a relative trace starting 5 s in keeps its clock (no re-base, no warning): the
    # shipped traces' results do not move
    got, warned = _read(_csv(tmp_path, "r.csv", ["5", "5.5", "7"]))
    assert got == [5.0, 5.5, 7.0] and warned == []


def test_a_late_start_that_is_no_date_is_rebased_in_the_declared_unit(tmp_path):
    # 1e10 s is after 2**26 s but no epoch date in s, ms, us or ns: re-based, unit kept
    got, warned = _read(_csv(tmp_path, "l.csv", ["10000000000", "10000000002.5"]))
    assert got == [0.0, 2.5]
    assert "not a date between 1990 and 2100 in any unit" in warned[0]


def test_trace_command_reports_the_time_origin(tmp_path, capsys):
    p = _csv(tmp_path, "e.csv", [str(T0_S * 1000 + 250 * k) for k in range(4)])
    assert main(["trace", str(p)]) == 0
    cap = capsys.readouterr()
    stats = json.loads(cap.out)
    assert stats["duration_s"] == 0.75
    assert stats["time_origin"] == (f"arrival_time_s {T0_S * 1000} ms (2023-11-14 22:13:20 UTC)"
                                    f" at {p}:2")
    assert cap.err.startswith("servesim: warning: ") and cap.err.count("\n") == 1


def test_exact_residuals_keep_what_float64_rounds_away():
    # 1700000000123456789 is not a float64: the nearest is a multiple of 256 below it
    v = 1_700_000_000_123_456_789
    hi = np.asarray([float(v)])
    assert int(hi[0]) == 1_700_000_000_123_456_768
    assert exact_residuals([str(v)], hi).tolist() == [21.0]
    assert exact_residuals([v], hi).tolist() == [21.0]
    # a decimal second: 1700000000.3 is 1700000000.2999999523162841796875 in float64
    hi = np.asarray([1700000000.3])
    exact = 0.0000000476837158203125  # = 1700000000.3 - 1700000000.2999999523162841796875
    # text: integer part exact, the fraction parsed as a float (error < 2**-54 of 0.3)
    assert exact_residuals(["1700000000.3"], hi)[0] == pytest.approx(exact, abs=2 ** -54)
    assert exact_residuals([1700000000.3], hi)[0] == exact  # a JSON float: its shortest decimal


def test_epoch_unit_ranges():
    assert epoch_unit(631_152_000) == ("s", 1, "seconds")  # 1990-01-01
    assert epoch_unit(631_151_999) is None
    assert epoch_unit(4_102_444_799_999) == ("ms", 1000, "milliseconds")  # 2099-12-31
    assert epoch_unit(4_102_444_800_000) is None  # 2100-01-01 in ms
    assert epoch_unit(1.7e18)[0] == "ns"


def _cfg(**kw):
    return WorkloadConfig.model_validate(kw)


def test_the_clock_bound_is_two_to_the_26_seconds(tmp_path):
    """float64 spacing is 2**(e - 52) on [2**e, 2**(e+1)): 2**-27 = 7.45e-9 s just below
    2**26 s (within the 1e-8 s bound), 2**-26 = 1.49e-8 s from 2**26 s on (beyond it)."""
    assert MAX_CLOCK_S == 2.0 ** 26
    assert np.spacing(np.nextafter(MAX_CLOCK_S, 0)) == 2.0 ** -27
    assert np.spacing(MAX_CLOCK_S) == 2.0 ** -26
    ok = _csv(tmp_path, "ok.csv", ["0", repr(float(np.nextafter(MAX_CLOCK_S, 0)))])
    assert len(load_workload(_cfg(trace=str(ok)), seed=0)) == 2
    bad = _csv(tmp_path, "bad.csv", ["0", "1", repr(MAX_CLOCK_S)])
    with pytest.raises(WorkloadError, match=r"bad.csv:4: this arrival is at 6\.711e\+07 s"):
        load_workload(_cfg(trace=str(bad)), seed=0)


def test_a_trace_mixing_zero_and_epoch_values_is_refused_at_the_epoch_row(tmp_path):
    # the first arrival is 0, so nothing is re-based; the epoch-ms row lands at 1.7e12 s,
    # where the clock's spacing is 2**-12 s = 0.000244 s
    p = _csv(tmp_path, "mix.csv", ["0", "0.5", str(T0_S * 1000)])
    with pytest.raises(WorkloadError) as e:
        load_workload(_cfg(trace=str(p)), seed=0)
    assert str(e.value).startswith(f"{p}:4: this arrival is at 1.7e+12 s")
    assert "spacing at that time is 0.000244 s" in str(e.value)


@pytest.mark.parametrize("sets, needle", [
    (["workload.rate_scale=1e-20"], "workload.rate_scale=1e-20 puts the last arrival of"),
    (["workload.synthetic.arrival.rate_rps=1e-15"],
     "workload.synthetic.arrival.rate_rps=1e-15: the last arrival of the synthetic workload"),
    # 20 arrivals at 20 req/s end near 1 s; rate_scale 1e-8 puts them near 1e8 s > 2**26
    (["workload.rate_scale=1e-8"], ("workload.rate_scale=1e-08 puts the last arrival of "
                                    "synthetic workload at")),
])
def test_clocks_too_large_to_resolve_a_step_are_refused_by_key(tmp_path, capsys, sets, needle):
    base = tmp_path / "s.yaml"
    base.write_text(BASE)
    argv = ["run", str(base), "-q", "--no-figures", "-o", str(tmp_path / "o")]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("servesim: error: "), err
    assert needle in err and "resolves a step" in err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_rate_scale_refusal_on_a_trace_names_the_key_not_the_row(tmp_path):
    p = _csv(tmp_path, "t.csv", ["0", "1", "2"])
    with pytest.raises(WorkloadError, match=r"^workload.rate_scale=1e-08 puts the last arrival "
                                            r"of .*t.csv at 2e\+08 s"):
        load_workload(_cfg(trace=str(p), rate_scale=1e-8), seed=0)
    # the same times unscaled are fine; start_s shifts before the check
    assert len(load_workload(_cfg(trace=str(p)), seed=0)) == 3


def test_window_counts_from_the_first_arrival_of_a_rebased_trace(tmp_path):
    p = _csv(tmp_path, "e.csv", [str(T0_S * 1000 + 500 * k) for k in range(6)])  # 0..2.5 s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkloadWarning)
        reqs = load_workload(_cfg(trace=str(p), start_s=1.0, end_s=2.0), seed=0)
        cols = read_columns(p)
    assert [r.arrival_time_s for r in reqs] == [0.0, 0.5]  # rows at 1.0 and 1.5 s
    assert [r.source_line for r in reqs] == [4, 5]
    assert cols.time_origin.startswith(f"arrival_time_s {T0_S * 1000} ms")
