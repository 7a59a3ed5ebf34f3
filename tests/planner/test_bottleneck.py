"""The plan's bottleneck note: per-step, time-weighted classification and advice."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import RooflinePerfModel, StepShape
from simulator.planner.bottleneck import bottleneck_note as _bottleneck_note
from simulator.planner.simulate import mean_step_shape, step_bottleneck


@pytest.fixture(scope="module")
def perf():
    return RooflinePerfModel(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1)


def _steps(rows: list[tuple[int, int, int, int, int]]) -> pd.DataFrame:
    """(count, prefill tokens, prefill seqs, decode seqs, kv tokens used) per kind of step;
    step times from the roofline of each step's own shape."""
    perf = RooflinePerfModel(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1)
    recs = []
    for n, pf, nps, nd, kv in rows:
        q = [pf // nps] * nps if pf else []
        shape = StepShape(prefill_q=q, prefill_start=[0] * len(q), num_decode=nd,
                          decode_ctx_total=max(nd, kv - pf), num_sampled=nd + len(q))
        t = perf.step_time(shape)
        recs += [{"num_prefill_tokens": pf, "num_prefill_seqs": nps, "num_decode_seqs": nd,
                  "num_decode_tokens": nd, "batch_size": nd + nps, "kv_tokens_used": kv,
                  "step_time_s": t}] * n
    return pd.DataFrame(recs)


PREFILL_HEAVY = [(195, 0, 0, 16, 16 * 800), (5, 8192, 2, 16, 8192 + 16 * 800)]


def test_time_weighted_shares_differ_from_the_mean_step(perf):
    # 195 short decode steps (16 sequences) and 5 long 8192-token prefill steps
    steps = _steps(PREFILL_HEAVY)
    shape = mean_step_shape(steps)
    assert sum(shape.prefill_q) == 205 and shape.num_decode == 16
    mean = perf.bottleneck_shares(shape)
    b = step_bottleneck(steps, perf)
    # the averaged step (205 prefill tokens + 16 decodes: below the ridge point) has
    # almost no compute-bound time ...
    assert mean["compute_bound"] < 0.05
    # ... while a third of the busy time is spent in compute-bound prefill steps
    assert b["compute_bound"] > 0.3
    pre, dec = b["prefill_steps"], b["decode_steps"]
    assert pre["step_share"] == pytest.approx(0.025) and pre["time_share"] > 0.3
    t = steps["step_time_s"]
    assert pre["time_share"] == pytest.approx(t[steps.num_prefill_tokens > 0].sum() / t.sum())
    assert pre["time_share"] + dec["time_share"] == pytest.approx(1.0)
    assert pre["compute_bound"] > 0.8 and dec["compute_bound"] == 0.0
    assert dec["memory_bound"] > 0.6
    assert sum(b[k] for k in ("compute_bound", "memory_bound", "overhead")) == pytest.approx(1)


def test_weighting_matches_per_step_evaluation(perf):
    # one step per bin: the binned answer equals classifying every step on its own
    steps = _steps([(1, 0, 0, 8, 8 * 300), (1, 512, 1, 8, 512 + 8 * 300),
                    (1, 2048, 1, 0, 2048), (1, 0, 0, 200, 200 * 900)])
    b = step_bottleneck(steps, perf)
    want = np.zeros(3)
    for r in steps.itertuples():
        q = [r.num_prefill_tokens] if r.num_prefill_tokens else []
        sh = perf.bottleneck_shares(StepShape(
            prefill_q=q, prefill_start=[0] * len(q), num_decode=r.num_decode_seqs,
            decode_ctx_total=max(r.num_decode_seqs, r.kv_tokens_used - r.num_prefill_tokens),
            num_sampled=r.num_decode_seqs + len(q)))
        want += r.step_time_s * np.array([sh["compute_bound"], sh["memory_bound"],
                                          sh["overhead"]])
    want /= steps["step_time_s"].sum()
    assert [b["compute_bound"], b["memory_bound"], b["overhead"]] == pytest.approx(want)
    assert b["num_bins"] == 4


def test_binning_keeps_long_runs_cheap(perf):
    rng = np.random.default_rng(0)
    n = 300_000
    pf = np.where(rng.random(n) < 0.1, rng.integers(1, 8192, n), 0)
    nd = rng.integers(0, 256, n)
    steps = pd.DataFrame({"num_prefill_tokens": pf, "num_prefill_seqs": (pf > 0).astype(int),
                          "num_decode_seqs": nd, "num_decode_tokens": nd,
                          "kv_tokens_used": nd * 500 + pf, "batch_size": nd + (pf > 0),
                          "step_time_s": 0.01 + pf * 1e-5})
    b = step_bottleneck(steps, perf)
    assert b["num_bins"] <= 14 * 10
    assert b["num_steps"] == n


def test_step_bottleneck_edge_cases(perf):
    assert step_bottleneck(None, perf) is None
    assert step_bottleneck(pd.DataFrame(), perf) is None
    steps = _steps([(3, 0, 0, 4, 400)])
    assert step_bottleneck(steps, object()) is None  # no bottleneck_shares
    b = step_bottleneck(steps, perf)
    assert b["prefill_steps"]["time_share"] == 0.0 and b["prefill_steps"]["compute_bound"] is None


def _row(b, **cs):
    return {"confirm_extra": {"bottleneck": b, "queue_share_of_ttft": cs.pop("queue", 0.1),
                              "kv_capacity_rejections": 0,
                              "batch_at_cap_time_share": cs.pop("at_cap", 0.0),
                              "scheduler": {"max_num_seqs": 64,
                                            "max_num_batched_tokens": 8192,
                                            "enable_chunked_prefill": True}},
            "confirm_summary": {"num_preemptions": cs.pop("preempt", 0),
                                "mean_kv_cache_usage": cs.pop("kv_mean", 0.1),
                                "max_kv_cache_usage": cs.pop("kv_peak", 0.2)}}


def test_note_advice_follows_the_numbers(perf):
    # prefill-heavy: advice points at prefill chunking / more GPUs, not at max_num_seqs
    note = _bottleneck_note(_row(step_bottleneck(_steps(PREFILL_HEAVY), perf)))
    text = note["text"]
    assert "steps with prefill work are 2% of steps but 3" in text  # 37% of busy time
    assert any(a.startswith("compute-bound prefill work is 3") and
               "max_num_batched_tokens (now 8192)" in a for a in note["advice"])
    assert not any("larger max_num_seqs" in a for a in note["advice"])

    # decode-heavy, batch at max_num_seqs, low KV use: raise max_num_seqs
    steps = _steps([(100, 0, 0, 64, 64 * 2000), (1, 256, 1, 64, 256 + 64 * 2000)])
    note = _bottleneck_note(_row(step_bottleneck(steps, perf), at_cap=0.9))
    assert "mostly memory-bound" in note["text"]
    assert any("a larger max_num_seqs" in a for a in note["advice"])
    assert not any("max_num_batched_tokens" in a for a in note["advice"])

    # the same, but the batch never reaches the cap: raising it would not help
    note = _bottleneck_note(_row(step_bottleneck(steps, perf), at_cap=0.0))
    assert any("never reaches max_num_seqs=64" in a for a in note["advice"])

    # preemptions: more KV memory
    note = _bottleneck_note(_row(step_bottleneck(steps, perf), preempt=12, kv_peak=1.0))
    assert note["advice"][0].startswith("KV capacity binds (12 preemption(s)")

    # a cached entry from before the per-step classification is not misread
    old = _row({"compute_bound": 0.01, "memory_bound": 0.82, "overhead": 0.17})
    note = _bottleneck_note(old)
    assert note["shares"] is None and "--no-cache" in note["text"]


def test_bins_read_in_chunks_equal_a_sort_by_key(monkeypatch):
    """The bins' sums (read a few rows at a time, from a spooled table too) are those of
    grouping the steps by key in table order (a stable sort), to the bit; missing cells
    (NaN) are left out of the decode-token and context sums."""
    from simulator.metrics import records
    from simulator.metrics import step_bottleneck as sb
    from simulator.metrics.cost import log2_bucket
    from simulator.metrics.records import STEP_COLUMNS, RunRecorder

    rng = np.random.default_rng(3)
    n = 500
    cols = {c: np.zeros(n, dtype=np.int64) for c in STEP_COLUMNS}
    cols["replica_id"] = np.zeros(n, dtype=np.int64)
    cols["step_index"] = np.arange(n)
    cols["num_prefill_tokens"] = np.where(rng.random(n) < 0.3, rng.integers(1, 9000, n), 0)
    cols["num_prefill_seqs"] = np.where(cols["num_prefill_tokens"] > 0, rng.integers(1, 4, n), 0)
    cols["num_decode_seqs"] = rng.integers(0, 300, n)
    cols["num_decode_tokens"] = cols["num_decode_seqs"] * rng.integers(1, 3, n)
    cols["kv_tokens_used"] = rng.integers(0, 2_000_000, n)
    times = rng.random(n) * 0.05
    for c in ("start_time_s", "end_time_s"):
        cols[c] = np.zeros(n)
    cols["step_time_s"] = times
    # by hand: a stable sort by key, each bin's values added in table order
    pf = cols["num_prefill_tokens"].astype(float)
    nd = cols["num_decode_seqs"].astype(float)
    key = log2_bucket(pf) * 64 + log2_bucket(nd)
    want_keys = sorted(set(key.tolist()))
    want_time = [0.0] * len(want_keys)
    for i in range(n):
        want_time[want_keys.index(key[i])] += float(times[i])
    want_ctx = [0.0] * len(want_keys)
    for i in range(n):
        want_ctx[want_keys.index(key[i])] += max(float(cols["kv_tokens_used"][i]) - pf[i], nd[i])

    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 64)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    rec = RunRecorder()
    rec.add_step_chunk(cols)
    table = rec.step_table()
    assert table.is_spooled
    frame = table.to_pandas()
    for rows in (1 << 20, 37):
        monkeypatch.setattr(sb, "CHUNK_ROWS", rows)
        for steps in (table, frame):
            b = sb._Bins.of(steps)
            assert b.count.sum() == n
            assert b.time.tolist() == want_time
            assert b.ctx_sum.tolist() == want_ctx
            assert b.prefill.tolist() == [k >= 64 for k in want_keys]
    frame.loc[frame.index[:10], "kv_tokens_used"] = np.nan  # unknown context: not counted
    b = sb._Bins.of(frame)
    assert b.ctx_num.sum() == n - 10
