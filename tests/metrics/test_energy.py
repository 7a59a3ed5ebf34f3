"""Energy of hand-built step tables and replica spans equals the hand integral
(simulator/metrics/energy.py)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from simulator.metrics import energy as energy_mod
from simulator.metrics.energy import EnergyParams, energy_profile, energy_summary
from simulator.metrics.fleet import ReplicaSpan, fixed_fleet_spans
from simulator.perf.power import PowerModel, StepWork

#: hand-friendly constants: 1 GFLOP a token, 1 GB of weights, no attention, no KV bytes;
#: peaks of 1 TFLOP/s and 1 TB/s
WORK = StepWork(flops_per_token=1e9, attn_flops_per_pair=0.0, weight_bytes=1e9,
                kv_bytes_per_token=0.0)
PM = PowerModel(gpu="hand", idle_w=50.0, static_w=100.0, compute_w=1000.0, memory_w=200.0,
                limit_w=700.0)


def params(tp: int = 2, **kw) -> EnergyParams:
    return EnergyParams(power=PM, work=WORK, peak_flops_per_s=1e12, hbm_bytes_per_s=1e12,
                        tensor_parallel_size=tp, idle_w=kw.pop("idle_w", PM.idle_w), **kw)


def steps(rows) -> pd.DataFrame:
    """rows: (replica, start, end, decode tokens)."""
    df = pd.DataFrame(rows, columns=["replica_id", "start_time_s", "end_time_s",
                                     "num_decode_tokens"])
    df["step_time_s"] = df.end_time_s - df.start_time_s
    df["num_prefill_tokens"] = 0
    df["num_prefill_seqs"] = 0
    df["num_decode_seqs"] = df.num_decode_tokens
    df["kv_tokens_used"] = 0
    return df


def test_busy_and_idle_energy_equal_the_hand_integral():
    # step 1: 100 tokens in 1 s -> u_c = 1e11 / 1e12 = 0.1, u_m = 1e9 / 1e12 = 0.001:
    #   P = 100 + 1000 x 0.1 + 200 x 0.001 = 200.2 W per GPU
    # step 2: 100 tokens in 0.5 s -> u_c = 0.2, u_m = 0.002: P = 100 + 200 + 0.4 = 300.4 W
    st = steps([(0, 0.0, 1.0, 100), (0, 2.0, 2.5, 100)])
    prof = energy_profile(st, fixed_fleet_spans(1), (0.0, 10.0), params(tp=2))
    busy = 2 * (200.2 * 1.0 + 300.4 * 0.5)
    idle = 2 * 50.0 * (10.0 - 1.5)
    assert prof.busy_j == pytest.approx(busy, rel=1e-12)
    assert prof.idle_j == pytest.approx(idle, rel=1e-12)
    s = energy_summary({"": prof}, num_output_tokens=200)
    assert s["energy_j"] == pytest.approx(busy + idle, rel=1e-12)
    assert s["joules_per_output_token"] == pytest.approx((busy + idle) / 200, rel=1e-12)
    assert s["mean_power_w"] == pytest.approx((busy + idle) / 10.0, rel=1e-12)
    # per second: [0,1) busy at 2 x 200.2; [1,2) idle at 2 x 50; [2,3) 0.5 s at 2 x 300.4 and
    # 0.5 s idle at 2 x 50; then idle
    hand = [2 * 200.2, 2 * 50.0, 2 * (0.5 * 300.4 + 0.5 * 50.0)] + [2 * 50.0] * 7
    assert prof.bins_j == pytest.approx(hand, rel=1e-12)
    assert s["peak_power_w"] == pytest.approx(2 * 200.2, rel=1e-12)
    assert s["energy_kwh"] == pytest.approx((busy + idle) / 3.6e6, rel=1e-12)
    assert s["kwh_per_day"] is None and "not extrapolated" in s["kwh_per_day_note"]


def test_idle_only_replica_draws_idle_power_times_its_held_time():
    st = steps([(0, 0.0, 1.0, 100)])
    spans = [ReplicaSpan(0, -math.inf, -math.inf, math.inf, math.inf),
             ReplicaSpan(1, 3.0, 4.0, 6.0, 7.0)]  # held 3..7: 4 s inside the window
    both = energy_profile(st, spans, (0.0, 10.0), params(tp=1))
    alone = energy_profile(st, spans[:1], (0.0, 10.0), params(tp=1))
    assert both.idle_j - alone.idle_j == pytest.approx(50.0 * 4.0, rel=1e-12)
    assert both.busy_j == alone.busy_j
    # a span clipped by the window: held 3..7, window 5..20 -> 2 s
    only = energy_profile(steps([]), spans[1:], (5.0, 20.0), params(tp=3))
    assert only.idle_j == pytest.approx(3 * 50.0 * 2.0, rel=1e-12) and only.busy_j == 0.0


def test_power_is_bounded_by_the_limit_and_a_cap():
    st = steps([(0, 0.0, 0.1, 1000)])  # u_c = 1e12 / (0.1 x 1e12) = 10 -> clipped to 1
    prof = energy_profile(st, fixed_fleet_spans(1), (0.0, 0.1), params(tp=1))
    assert prof.busy_j == pytest.approx(700.0 * 0.1, rel=1e-12)  # min(100+1000+0.02, 700)
    capped = energy_profile(st, fixed_fleet_spans(1), (0.0, 0.1), params(tp=1, limit_w=350.0))
    assert capped.busy_j == pytest.approx(350.0 * 0.1, rel=1e-12)


def test_steps_are_clipped_to_the_window_and_read_in_chunks(monkeypatch):
    rng = np.random.default_rng(0)
    starts = np.sort(rng.uniform(0, 50, 40))
    rows = [(int(i % 2), float(s), float(s + rng.uniform(0.01, 0.9)), int(rng.integers(1, 300)))
            for i, s in enumerate(starts)]
    st = steps(rows)
    whole = energy_profile(st, fixed_fleet_spans(2), (10.0, 40.0), params())
    monkeypatch.setattr(energy_mod, "CHUNK_ROWS", 3)
    chunked = energy_profile(st, fixed_fleet_spans(2), (10.0, 40.0), params())
    assert chunked.busy_j == pytest.approx(whole.busy_j, rel=1e-12)
    # by hand: each step's power x its overlap with [10, 40]
    wk = params()
    uc = np.array([r[3] * 1e9 / ((r[2] - r[1]) * 1e12) for r in rows])
    um = np.array([1e9 / ((r[2] - r[1]) * 1e12) for r in rows])
    p = np.minimum(700.0, 100 + 1000 * np.minimum(uc, 1) + 200 * np.minimum(um, 1))
    ov = np.array([max(0.0, min(r[2], 40.0) - max(r[1], 10.0)) for r in rows])
    assert whole.busy_j == pytest.approx(float((p * ov).sum()) * wk.gpus_per_replica, rel=1e-9)
    # the bins hold the whole energy
    assert whole.bins_j.sum() == pytest.approx(whole.busy_j + whole.idle_j, rel=1e-9)


def test_unknown_idle_is_not_counted_and_said():
    st = steps([(0, 0.0, 1.0, 100)])
    prof = energy_profile(st, fixed_fleet_spans(1), (0.0, 10.0), params(idle_w=None))
    s = energy_summary({"": prof}, num_output_tokens=100)
    assert s["idle_energy_j"] is None and s["idle_counted"] is False
    assert s["energy_j"] == pytest.approx(2 * 200.2, rel=1e-12)
    assert any("idle" in n and "not counted" in n for n in s["notes"])


def test_pools_add_and_price():
    a = energy_profile(steps([(0, 0.0, 1.0, 100)]), fixed_fleet_spans(1), (0.0, 4.0), params())
    b = energy_profile(steps([(0, 1.0, 2.0, 100)]), fixed_fleet_spans(1), (0.0, 4.0), params())
    s = energy_summary({"prefill": a, "decode": b}, num_output_tokens=10, usd_per_kwh=0.2)
    tot = a.busy_j + a.idle_j + b.busy_j + b.idle_j
    assert s["energy_j"] == pytest.approx(tot, rel=1e-12)
    assert s["energy_cost_usd"] == pytest.approx(tot / 3.6e6 * 0.2, rel=1e-12)
    assert set(s["by_pool"]) == {"prefill", "decode"}
    assert s["by_pool"]["prefill"]["energy_j"] == pytest.approx(a.busy_j + a.idle_j)


def test_a_day_long_window_gives_kwh_per_day():
    prof = energy_profile(steps([]), fixed_fleet_spans(1), (0.0, 2 * 86400.0),
                          params(tp=1), resolution_s=3600.0)
    s = energy_summary({"": prof}, num_output_tokens=0)
    assert s["kwh_per_day"] == pytest.approx(50.0 * 86400 / 3.6e6, rel=1e-12)
    assert s["joules_per_output_token"] is None


def test_bad_inputs_name_the_cause():
    with pytest.raises(ValueError, match="no replica span"):
        energy_profile(steps([(3, 0.0, 1.0, 1)]), fixed_fleet_spans(1), (0.0, 2.0), params())
    st = steps([(0, 0.0, 1.0, 1)]).drop(columns=["kv_tokens_used"])
    with pytest.raises(ValueError, match="kv_tokens_used"):
        energy_profile(st, fixed_fleet_spans(1), (0.0, 2.0), params())
    with pytest.raises(ValueError, match="before it starts"):
        energy_profile(steps([]), fixed_fleet_spans(1), (2.0, 1.0), params())


def test_a_very_long_window_gets_longer_bins_and_says_so(monkeypatch):
    monkeypatch.setattr(energy_mod, "MAX_BINS", 10)
    prof = energy_profile(steps([(0, 0.0, 1.0, 100)]), fixed_fleet_spans(1), (0.0, 100.0),
                          params(tp=1))
    assert prof.resolution_s == 10.0 and len(prof.bins_j) == 10
    assert any("10 s bins" in n for n in prof.notes)
    assert prof.bins_j.sum() == pytest.approx(prof.busy_j + prof.idle_j, rel=1e-12)


def _spread_one_at_a_time(bins, edges, s, e, rate):
    """The definition: each interval's overlap with each bin, intervals inside one bin first
    (in order), then each crossing interval's first bin, last bin and whole bins between."""
    a, b, one, a_one, cross = energy_mod._bin_places(edges, s, e)
    np.add.at(bins, a_one, rate[one] * (e[one] - s[one]))
    for i in cross:
        ai, bi, r = a[i], b[i], rate[i]
        bins[ai] += r * (edges[ai + 1] - s[i])
        bins[bi] += r * (e[i] - edges[bi])
        for k in range(ai + 1, bi):
            bins[k] += r * (edges[k + 1] - edges[k])


@pytest.mark.parametrize("seed", range(40))
def test_spread_adds_as_one_interval_at_a_time_to_the_bit(seed, monkeypatch):
    """The vectorised spread (one add.at over the crossing intervals' additions in order)
    gives every bin the same float sum as adding interval by interval: short steps, long
    ones over many bins, steps starting on an edge, the window's last (shorter) bin."""
    rng = np.random.default_rng(seed)
    t0 = rng.random() * 10
    t1 = t0 + rng.random() * 50 + 0.1
    edges = energy_mod._bin_edges(t0, t1, float(rng.choice([0.05, 0.3, 1.0, 7.0])))
    n = int(rng.integers(0, 2000))
    s = rng.uniform(t0, t1, n)
    if seed % 2:
        s.sort()
    if seed % 3 == 0 and n:
        s[: n // 3] = edges[rng.integers(0, len(edges), n // 3)]
    e = np.minimum(s + rng.exponential(float(rng.choice([0.01, 0.5, 3.0])), n), t1)
    rate = rng.random(n) * 500
    if seed % 4 == 1:  # the crossing intervals' additions in groups of a few
        monkeypatch.setattr(energy_mod, "SPREAD_ADDS", int(rng.integers(1, 9)))
    want = rng.random(len(edges) - 1)
    got = want.copy()
    _spread_one_at_a_time(want, edges, s, e, rate)
    energy_mod._spread(got, edges, s, e, rate)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_missing_replica_ids_are_those_numpy_unique_finds():
    # the shortcut (every id from the least to the largest known) against the set of
    # numpy.unique's ids less the known ones, on ids with gaps, unknown ids and float ids
    rng = np.random.default_rng(3)
    cases = [(np.array([0, 1, 1, 0]), {0, 1}), (np.array([0, 3]), {0, 1, 3}),
             (np.array([2, 2]), {0, 1, 3}), (np.array([0, 5]), {0, 1}),
             (np.array([0.0, 1.5]), {0, 1}), (np.array([1.0, 1.0]), {1})]
    cases += [(rng.integers(0, 9, 50), set(rng.integers(0, 9, 6).tolist())) for _ in range(40)]
    for rid, known in cases:
        assert energy_mod._missing_ids(rid, known) == set(np.unique(rid).tolist()) - known
