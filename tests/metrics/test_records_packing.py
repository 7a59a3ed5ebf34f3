"""RunRecorder packs step rows and ITL samples into columnar chunks (bounded memory for long
runs); the tables it returns must be exactly what the rows said, whatever the chunk size."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.metrics import records
from simulator.metrics.latency import latency_stats
from simulator.metrics.records import STEP_COLUMNS, RunRecorder


def _row(rid: int, idx: int) -> tuple:
    # every column a distinct function of (replica, index) so a mix-up cannot pass
    t = 10.0 * rid + 0.1 * idx
    return (rid, idx, t, 0.1, t + 0.1, idx % 7, 3 * idx, 5 * idx, 1, 2, rid, 11 * idx, 999,
            0, 13 * idx, 0)


def _chunk(rid: int, first: int, k: int) -> dict:
    rows = [_row(rid, first + j) for j in range(k)]
    return {c: np.array([r[i] for r in rows]) for i, c in enumerate(STEP_COLUMNS)}


def _fill(rec: RunRecorder) -> list[tuple]:
    """Two replicas interleaved in time, single steps and decode-run chunks mixed."""
    want = []
    for i in range(0, 30, 3):
        for rid in (1, 0):
            rec.add_step(_row(rid, i))
            rec.add_step_chunk(_chunk(rid, i + 1, 2))
            want += [_row(rid, i), _row(rid, i + 1), _row(rid, i + 2)]
    return sorted(want, key=lambda r: (r[0], r[1]))


@pytest.mark.parametrize("spool_after", [0, 10**6])
@pytest.mark.parametrize("chunk_rows", [1, 4, 7, 10_000])
def test_steps_frame_is_exact_for_any_chunk_size(monkeypatch, chunk_rows, spool_after):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", spool_after)
    rec = RunRecorder()
    want = _fill(rec)
    assert rec.num_steps == 60 and rec.num_step_chunks == 20
    df = rec.steps_frame()
    assert list(df.columns) == STEP_COLUMNS and len(df) == 60
    for i, c in enumerate(STEP_COLUMNS):
        expect = np.array([r[i] for r in want])
        np.testing.assert_array_equal(df[c].to_numpy(), expect, err_msg=c)
        assert df[c].dtype == (np.float64 if c.endswith("_s") else np.int64), c
    # a second call gives the same table (the packed chunk is kept, sorted)
    assert rec.steps_frame().equals(df)
    if chunk_rows < 60:  # packed at least once: spooled to disk, or merged into one chunk
        assert rec.step_table().is_spooled == (spool_after == 0)
        assert rec.step_table().is_spooled or len(rec._packed) == 1


@pytest.mark.parametrize("spool_after", [0, 10**6])  # on disk / in memory
def test_itl_samples_survive_packing(monkeypatch, spool_after):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 3)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", spool_after)
    rec = RunRecorder()
    rec.add_itl(0.5, 2)
    rec.add_itl_array(np.array([0.1, 0.2]), 4)
    rec.add_itl(0.3, 1)
    rec.add_itl(0.4, 1)
    rec.add_itl_array(np.array([]), 9)  # empty: ignored
    rec.add_itl_array(np.array([0.7]), 3)
    v, w = rec.itl_samples()
    # a spool stays (read again on every call) until the recorder goes
    assert (rec._itl_spool is not None) == (spool_after == 0)
    got = sorted(zip(v.tolist(), w.tolist()))
    assert got == [(0.1, 4), (0.2, 4), (0.3, 1), (0.4, 1), (0.5, 2), (0.7, 3)]
    assert w.dtype == np.int64 and v.dtype == np.float64
    v2, w2 = rec.itl_samples()  # idempotent
    np.testing.assert_array_equal(v, v2)
    np.testing.assert_array_equal(w, w2)
    # the statistics read from the spool (float weights) are those of the arrays; by hand:
    # weights 4+4+1+1+2+3 = 15, sum of value x weight = 0.4+0.8+0.3+0.4+1.0+2.1 = 5.0
    st = rec.itl_stats()
    assert st == latency_stats(v, w)
    assert st["count"] == 15 and isinstance(st["count"], int)
    assert st["mean"] == pytest.approx(5.0 / 15)
    # inverse CDF: cumulative weights 4, 8, 9, 10, 12, 15 over 0.1, 0.2, 0.3, 0.4, 0.5, 0.7
    assert (st["p50"], st["p90"], st["p99"], st["max"]) == (0.2, 0.7, 0.7, 0.7)


def test_empty_recorder_gives_empty_tables():
    rec = RunRecorder()
    assert rec.steps_frame().empty and list(rec.steps_frame().columns) == STEP_COLUMNS
    v, w = rec.itl_samples()
    assert v.size == 0 and w.size == 0


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_batched_single_gaps_pack_as_single_calls(monkeypatch, batch):
    """``add_itls`` (a step's gaps in one call) leaves the samples in the order, and packed at
    the same sample, as ``add_itl`` called once per gap: the packed arrays are equal to the
    bit, also when a batch crosses the buffer's limit."""
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 5)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 2)
    rng = np.random.default_rng(batch)
    gaps = (rng.random(40) * 0.05).tolist()
    weights = rng.integers(1, 4, 40).tolist()
    one, many = RunRecorder(), RunRecorder()
    for i, (g, w) in enumerate(zip(gaps, weights)):
        one.add_itl(g, w)
        if i % 9 == 4:   # decode runs' gaps between the single ones
            one.add_itl_array([g, g / 2], w)
    for a in range(0, 40, batch):
        vals, ws = gaps[a:a + batch], weights[a:a + batch]
        for j in range(len(vals)):   # the same decode runs, after the same single gaps
            if (a + j) % 9 == 4:
                many.add_itls(vals[:j + 1], ws[:j + 1])
                many.add_itl_array([vals[j], vals[j] / 2], ws[j])
                vals, ws = vals[j + 1:], ws[j + 1:]
                break
        if vals:
            many.add_itls(vals, ws)
    v1, w1 = one.itl_samples()
    v2, w2 = many.itl_samples()
    assert v1.tobytes() == v2.tobytes() and w1.tolist() == w2.tolist()
    assert sorted(v1.tolist()) == sorted(gaps + [g for i, g in enumerate(gaps) if i % 9 == 4]
                                         + [g / 2 for i, g in enumerate(gaps) if i % 9 == 4])


def test_spooled_chunks_hold_each_replicas_rows_together(monkeypatch):
    # once the run spools, a decode-run chunk is appended as it comes (one replica's
    # consecutive steps) and the single steps a packed chunk at a time, grouped by replica,
    # so reads gather from few places; the table read back is sorted whatever the appended
    # order (test above)
    from simulator.metrics.step_table import ColumnSpool
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 12)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    appended = []
    append = ColumnSpool.append

    def spy(self, chunk):
        appended.append((chunk["replica_id"].copy(), chunk["step_index"].copy()))
        append(self, chunk)

    monkeypatch.setattr(ColumnSpool, "append", spy)
    rec = RunRecorder()
    _fill(rec)
    rec.step_table()
    assert len(appended) >= 4
    for rid, _ in appended:
        assert list(rid) == sorted(rid)
    # the first packed chunk (12 rows, before the spool existed) holds both replicas; after
    # it, each decode-run chunk of _fill (2 rows, steps i + 1 and i + 2) goes alone
    assert set(appended[0][0].tolist()) == {0, 1}
    alone = [(rid.tolist(), idx.tolist()) for rid, idx in appended[1:] if len(rid) == 2]
    assert len(alone) >= 4
    for rid, idx in alone:
        assert rid[0] == rid[1] and idx[1] == idx[0] + 1 and idx[0] % 3 == 1
    # every row once
    rows = sorted((r, i) for rid, idx in appended for r, i in zip(rid.tolist(), idx.tolist()))
    assert rows == [(r, i) for r in (0, 1) for i in range(30)]
