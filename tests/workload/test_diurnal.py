"""Days of traffic: tiling a trace (``workload.tile_to_s``) and rate-shaping arrivals by a
diurnal profile (``workload.rate_profile``), :mod:`simulator.workload.diurnal`."""
from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

from simulator.workload import WorkloadConfig, WorkloadError, load_workload
from simulator.workload.diurnal import RateCurve

VIDUR_HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
MOON = '{{"timestamp": {t}, "input_length": 1024, "output_length": 5, "hash_ids": [{a}, {b}]}}\n'


def cfg(**kw) -> WorkloadConfig:
    return WorkloadConfig.model_validate(kw)


def per_hour(t: np.ndarray, hours: int) -> list[int]:
    return np.histogram(t, bins=np.arange(hours + 1) * 3600.0)[0].tolist()


# ------------------------------------------------------------------------- time warp
def test_step_curve_puts_the_hand_derived_count_in_each_hour(write):
    """One arrival a second for 4 h through a 4-h step profile 1, 2, 0, 1: F grows 3600 s
    in hour 0, 7200 in hour 1, 0 in hour 2, 3600 in hour 3 (A = 14400 = the trace's
    length), so hour by hour 3600, 7200, 0 and 3600 arrivals land (rate 1/s x f)."""
    rows = "".join(f"{t},10,2\n" for t in range(14_400))
    path = write("const.csv", VIDUR_HEADER + rows)
    prof = {"points": [[0, 1], [3600, 2], [7200, 0], [10800, 1]], "interpolation": "step",
            "period_s": 14_400}
    reqs = load_workload(cfg(trace=str(path), rate_profile=prof), seed=0)
    t = np.array([r.arrival_time_s for r in reqs])
    assert per_hour(t, 4) == [3600, 7200, 0, 3600]
    assert np.all(np.diff(t) >= 0)  # order kept
    # content kept: request i is still the trace's row i
    assert [r.source_line for r in reqs[:3]] == [2, 3, 4]
    # in hour 1 (rate 2) the gaps halve: the arrival at t=3601 goes to 3600.5
    assert t[3601] == pytest.approx(3600.5)


def test_warp_inverts_the_cumulative_rate():
    c = RateCurve([0, 20_000, 50_000], [0.2, 1.7, 0.9], interpolation="linear")
    tau = np.linspace(0, 3 * 86_400, 5001)
    assert np.abs(c.warp(c.cumulative(tau)) - tau).max() < 1e-6
    # a profile of 2 everywhere halves every time (as rate_scale: 2 does)
    two = RateCurve([0], [2.0], interpolation="step")
    assert two.warp(np.array([0.0, 10.0, 86_400.0 * 2])).tolist() == [0.0, 5.0, 86_400.0]


@pytest.mark.parametrize("interpolation", ["linear", "step"])
def test_shaped_poisson_arrivals_follow_the_curve(interpolation):
    """A Poisson process of rate r, time-changed by F^-1, is the inhomogeneous Poisson
    process of intensity r x f: given their count, the arrivals are iid with CDF
    F(tau) / F(T) on [0, T]. KS test against it, and against the unshaped (uniform) CDF,
    which must be rejected (the test can fail)."""
    rng = np.random.default_rng(7)
    c = RateCurve([0, 6 * 3600, 14 * 3600, 20 * 3600], [0.3, 1.0, 2.2, 0.8],
                  interpolation=interpolation)
    n = 20_000
    base = np.sort(rng.uniform(0.0, c.area, n))  # rate n / A on [0, A): one period
    tau = c.warp(base)
    assert tau.max() <= 86_400.0 + 1e-6
    p_ok = stats.kstest(tau, lambda x: c.cumulative(x) / c.area).pvalue
    p_flat = stats.kstest(tau, stats.uniform(0, 86_400).cdf).pvalue
    assert p_ok > 1e-3
    assert p_flat < 1e-6


def test_a_zero_rate_stretch_gets_no_arrival():
    c = RateCurve([0, 3600], [1.0, 0.0], period_s=7200, interpolation="step")
    t = c.warp(np.arange(0, 10_800, 0.5))
    assert not np.any((np.mod(t, 7200) > 3600) & (np.mod(t, 7200) < 7200))


# ------------------------------------------------------------------------- tiling
def test_tiling_counts_times_and_ids(write):
    """5 rows at t = 0..4: period = span x N / (N - 1) = 4 x 5 / 4 = 5 s; tiled to 12 s:
    copies at 0, 5 and 10 s, the last holding the rows at 10 and 11 s only (12 rows)."""
    path = write("five.csv", VIDUR_HEADER + "".join(f"{t},{10 + t},2\n" for t in range(5)))
    reqs = load_workload(cfg(trace=str(path), tile_to_s=12), seed=0)
    assert [r.arrival_time_s for r in reqs] == [float(t) for t in range(12)]
    assert [r.request_id for r in reqs] == list(range(12))
    assert [r.num_prompt_tokens for r in reqs] == [10, 11, 12, 13, 14] * 2 + [10, 11]
    # an explicit period: copies at 0 and 7 s, each whole (tile_to_s = 14)
    reqs = load_workload(cfg(trace=str(path), tile_to_s=14, tile_period_s=7), seed=0)
    assert [r.arrival_time_s for r in reqs] == [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]


def test_tiled_copies_share_prefixes_within_a_copy_only(write):
    rows = MOON.format(t=0, a=1, b=2) + MOON.format(t=1000, a=1, b=3)
    path = write("m.jsonl", rows)
    reqs = load_workload(cfg(trace=str(path), format="mooncake", tile_to_s=6), seed=0)
    assert len(reqs) == 6
    ids = [r.prefix_hash_ids for r in reqs]
    assert ids[0] == (1, 2) and ids[1] == (1, 3)  # copy 0 is the trace
    for k in (1, 2):
        a, b = ids[2 * k], ids[2 * k + 1]
        assert a[0] == b[0]  # the shared first block stays shared inside the copy
        assert not set(a) & set(ids[0] + ids[1])  # nothing shared with copy 0
        assert all(0 <= i < 2**63 for i in a + b)
    assert ids[2] != ids[4]
    again = load_workload(cfg(trace=str(path), format="mooncake", tile_to_s=6), seed=0)
    assert [r.prefix_hash_ids for r in again] == ids  # deterministic


def test_tile_then_shape_a_day(write):
    """An hour tiled to a day, shaped by a profile of mean 1: the day keeps its request
    count and its mean rate; the peak hour has f's peak share."""
    rows = "".join(f"{t},10,2\n" for t in range(3600))  # 1 req/s, period 3600 s
    path = write("hour.csv", VIDUR_HEADER + rows)
    prof = {"points": [[0, 0.5], [43_200, 1.5]], "interpolation": "step"}
    reqs = load_workload(cfg(trace=str(path), tile_to_s=86_400, rate_profile=prof), seed=0)
    t = np.array([r.arrival_time_s for r in reqs])
    assert len(reqs) == 86_400
    counts = per_hour(t, 24)
    assert counts[:12] == [1800] * 12 and counts[12:] == [5400] * 12


# ------------------------------------------------------------------------- errors
@pytest.mark.parametrize("prof, msg", [
    ({"points": [[0, 1], [100, -1]]}, r"points\.1: relative_rate=-1\.0 must be finite and >= 0"),
    ({"points": [[0, 0], [100, 0]]}, r"every relative_rate is 0"),
    ({"points": [[100, 1], [50, 1]]}, r"points\.1: time_of_day_s=50\.0 is not after"),
    ({"points": [[86_400, 1]]}, r"points\.0: time_of_day_s=86400\.0 outside \[0, period_s=86400\)"),
    ({"points": [[0, 1, 2]]}, r"points\.0: give \[time_of_day_s, relative_rate\]"),
    ({"points": [[0, 1]], "csv": "x.csv"}, r"exactly one of points and csv"),
    ({"points": [[0, 1]], "interpolation": "cubic"}, r"interpolation"),
])
def test_bad_profiles_are_refused_naming_the_key(prof, msg):
    with pytest.raises(ValidationError, match=msg) as e:
        cfg(synthetic={"arrival": {"process": "poisson", "rate_rps": 1}, "num_requests": 3,
                       "prompt_tokens": {"dist": "fixed", "value": 4},
                       "output_tokens": {"dist": "fixed", "value": 2}}, rate_profile=prof)
    assert "rate_profile" in str(e.value)


def test_bad_profile_csv_names_file_and_line(write):
    trace = write("t.csv", VIDUR_HEADER + "0,10,2\n1,10,2\n")
    bad = write("p.csv", "time_of_day_s,relative_rate\n0,1\n3600,-2\n")
    with pytest.raises(WorkloadError, match=r"p\.csv:3: relative_rate=-2\.0 must be"):
        load_workload(cfg(trace=str(trace), rate_profile={"csv": str(bad)}), seed=0)
    nocol = write("q.csv", "hour,rate\n0,1\n")
    with pytest.raises(WorkloadError, match=r"needs the columns time_of_day_s, relative_rate"):
        load_workload(cfg(trace=str(trace), rate_profile={"csv": str(nocol)}), seed=0)
    text = write("r.csv", "time_of_day_s,relative_rate\n0,1\nx,2\n")
    with pytest.raises(WorkloadError, match=r"r\.csv:3: time_of_day_s 'x' is not a number"):
        load_workload(cfg(trace=str(trace), rate_profile={"csv": str(text)}), seed=0)


def test_tiling_errors(write):
    one = write("one.csv", VIDUR_HEADER + "0,10,2\n")
    with pytest.raises(WorkloadError, match=r"tile_to_s: .* no period; give workload\."
                                            r"tile_period_s"):
        load_workload(cfg(trace=str(one), tile_to_s=100), seed=0)
    two = write("two.csv", VIDUR_HEADER + "0,10,2\n10,10,2\n")
    with pytest.raises(WorkloadError, match=r"tile_period_s=5 must be > the trace's span 10"):
        load_workload(cfg(trace=str(two), tile_to_s=100, tile_period_s=5), seed=0)
    with pytest.raises(ValidationError, match="tile_period_s applies with tile_to_s"):
        cfg(trace=str(two), tile_period_s=5)


def test_the_shipped_profile_is_servegens_measured_day(tmp_path):
    """traces/diurnal_servegen_deepseek_r1.csv is what traces/diurnal_profile.py computes from
    the ServeGen folder (byte for byte), and its hours are the bench's figures: 7.16 to
    35.13 req/s against a mean of 16.01 (1,383,669 requests over 86,400 s)."""
    from helpers import REPO_ROOT, load_file_module, shared_path

    folder = shared_path("traces/servegen/reason/deepseek-r1", kind="dir")
    mod = load_file_module(REPO_ROOT / "traces" / "diurnal_profile.py", "diurnal_profile")
    rates = mod.hourly_rates(folder)
    assert rates.sum() * 3600 == pytest.approx(1_383_669)
    assert (round(rates.min(), 2), round(rates.max(), 2)) == (7.16, 35.13)
    out = tmp_path / "p.csv"
    assert mod.main([str(folder), str(out)]) == 0
    shipped = REPO_ROOT / "traces" / "diurnal_servegen_deepseek_r1.csv"
    assert out.read_bytes() == shipped.read_bytes()
