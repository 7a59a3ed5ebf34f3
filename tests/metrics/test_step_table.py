"""The step table spooled to disk (issue 12 part 3): exact at chunk boundaries, written in
slices with the bytes of a one-shot write, read a column at a time by the summary with the
numbers of the in-memory table, and request outcomes packed without losing a request."""
from __future__ import annotations

import gc
import hashlib
import math
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from helpers import make_scenario, summary_without_wall, synthetic_workload

from simulator.metrics import column_buffers, records, step_order, step_table
from simulator.metrics.records import STEP_COLUMNS, STEP_FLOAT_COLUMNS, RunRecorder
from simulator.metrics.step_stats import kv_and_batching_stats
from simulator.metrics.tables_io import parquet_options, write_table
from simulator.runs.scenario import run_scenario


def _row(i: int) -> tuple:
    rid = i % 3  # three replicas interleaved: the spool must be re-sorted
    idx = i // 3
    t = 0.25 * i
    return (rid, idx, t, 0.125, t + 0.125, i % 5, 7 * i, 2 * i, 1, i % 4, i % 6, i % 9, 64,
            0, 3 * i, i % 2)


def _sorted_columns(n: int) -> dict[str, np.ndarray]:
    rows = sorted((_row(i) for i in range(n)), key=lambda r: (r[0], r[1]))
    return {c: np.array([r[k] for r in rows],
                        dtype=np.float64 if c in STEP_FLOAT_COLUMNS else np.int64)
            for k, c in enumerate(STEP_COLUMNS)}


@pytest.mark.parametrize("extra", [None, 0, 1])  # 0 rows, exactly one chunk, one row more
def test_spooled_table_is_exact_at_chunk_boundaries(monkeypatch, extra):
    chunk = 16
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", chunk)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)  # every packed chunk goes to disk
    n = 0 if extra is None else chunk + extra
    rec = RunRecorder()
    for i in range(n):
        rec.add_step(_row(i))
    t = rec.step_table()
    assert len(t) == n and t.columns == STEP_COLUMNS
    assert t.is_spooled == (n >= chunk)
    want = _sorted_columns(n)
    for c in STEP_COLUMNS:
        got = t.column(c)
        if n:
            np.testing.assert_array_equal(got, want[c], err_msg=c)
            assert got.dtype == want[c].dtype, c
        else:
            assert got.size == 0
    df = t.to_pandas()
    assert len(df) == n and list(df.columns) == STEP_COLUMNS


def test_spool_folder_is_removed_with_the_table(monkeypatch):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 4)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    rec = RunRecorder()
    for i in range(10):
        rec.add_step(_row(i))
    t = rec.step_table()
    folder = t._spool.folder
    assert folder.is_dir() and len(list(folder.glob("*.bin"))) == len(STEP_COLUMNS)
    # 10 rows x 8 bytes per float64 column file, x 4 for the int64 columns (stored narrow:
    # every value fits int32)
    sizes = {p.stem: p.stat().st_size for p in folder.glob("*.bin")}
    assert sizes == {c: 80 if c in STEP_FLOAT_COLUMNS else 40 for c in STEP_COLUMNS}
    del rec, t
    gc.collect()
    assert not folder.exists()


def test_loc_view_equals_the_frame_filter(monkeypatch):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 5)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    rec = RunRecorder()
    for i in range(23):
        rec.add_step(_row(i))
    t = rec.step_table()
    df = t.to_pandas()
    mask = df["start_time_s"].to_numpy() >= 2.0
    sub = t.loc[mask]
    assert len(sub) == int(mask.sum()) == 23 - 8  # start 0.25 i >= 2  <=>  i >= 8
    sub2 = sub.loc[sub["replica_id"].to_numpy() == 1]
    want = df.loc[mask]
    want = want.loc[want["replica_id"] == 1]
    for c in STEP_COLUMNS:
        np.testing.assert_array_equal(sub2.column(c), want[c].to_numpy(), err_msg=c)


def _md5(path) -> str:
    return hashlib.md5(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("n", [0, 7, 15])
def test_sliced_writes_have_the_bytes_of_one_write(monkeypatch, tmp_path, n):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 4)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    monkeypatch.setattr(step_table, "WRITE_ROWS", 7)  # 15 rows: slices of 7, 7, 1
    rec = RunRecorder()
    for i in range(n):
        rec.add_step(_row(i))
    t = rec.step_table()
    arrow = pa.Table.from_pandas(t.to_pandas(), preserve_index=False)
    # dictionary pages and encodings as tables_io chooses them (tested on their own below)
    pq.write_table(arrow, tmp_path / "one.parquet", row_group_size=7,
                   **parquet_options(arrow.schema))
    pcsv.write_csv(arrow, tmp_path / "one.csv")
    (tmp_path / "s").mkdir()
    got_pq = write_table(t, tmp_path / "s", "steps", "parquet")
    got_csv = write_table(t, tmp_path / "s", "steps", "csv")
    assert _md5(got_pq) == _md5(tmp_path / "one.parquet")
    assert _md5(got_csv) == _md5(tmp_path / "one.csv")
    assert pq.ParquetFile(got_pq).metadata.num_row_groups == max(1, math.ceil(n / 7))


def _spooled_table(monkeypatch, n: int):
    """The step table of ``n`` rows of :func:`_row`, spooled (chunks of 8 rows)."""
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 8)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    rec = RunRecorder()
    for i in range(n):
        rec.add_step(_row(i))
    return rec.step_table()


def test_kv_stats_of_a_spooled_table_match_the_hand_formula(monkeypatch):
    n = 30
    got = kv_and_batching_stats(_spooled_table(monkeypatch, n), block_size=16,
                                kv_bytes_per_token=2.0)
    # by hand: every step lasts 0.125 s, so time weights are equal; blocks i % 9, tokens
    # min(3 i, 16 blocks); padding i % 2 of batch i % 5
    i = np.arange(n)
    reserved = (i % 9) * 16.0
    tokens = np.minimum(3.0 * i, reserved)
    assert got["max_concurrency"] == 4
    assert got["padding_waste"] == pytest.approx((i % 2).sum() / (i % 5).sum())
    assert got["kv_reserved_bytes_mean"] == pytest.approx(reserved.mean() * 2.0)
    assert got["kv_used_bytes_mean"] == pytest.approx(tokens.mean() * 2.0)
    assert got["num_replicas_with_steps"] == 3


def test_replica_count_and_window_end_read_a_spooled_table_by_slices(monkeypatch):
    """The replicas counted and the last step end of a spooled table read a slice at a time
    (slices of 7 rows, replicas 0, 1, 2 first seen in different slices) equal those of the
    same table in memory: 3 replicas, the largest end by hand."""
    from simulator.metrics.summary import _measurement_window

    monkeypatch.setattr(step_table, "WRITE_ROWS", 7)
    n = 30
    table = _spooled_table(monkeypatch, n)
    assert table.is_spooled
    frame = table.to_pandas()
    got = kv_and_batching_stats(table, block_size=16, kv_bytes_per_token=2.0)
    assert got["num_replicas_with_steps"] == 3
    assert got == kv_and_batching_stats(frame, block_size=16, kv_bytes_per_token=2.0)
    import pandas as pd
    requests = pd.DataFrame({"arrival_time_s": [1.0], "finish_time_s": [np.nan]})
    end = 0.25 * (n - 1) + 0.125  # the last step's end
    assert _measurement_window(requests, table, None) == (1.0, end)
    assert _measurement_window(requests, frame, None) == (1.0, end)


def _small_scenario():
    return make_scenario({"cluster": {"num_replicas": 2}},
                         workload=synthetic_workload(n=120, rate_rps=30.0))


# narrow_max 200: the spool's int columns widen mid-run (step indices, KV tokens pass 200 in
# later chunks), as a real run's would past int32
@pytest.mark.parametrize("narrow_max, pooled", [(None, False), (200, False), (None, True)])
def test_spooled_run_equals_the_in_memory_run(monkeypatch, tmp_path, narrow_max, pooled):
    if narrow_max is not None:
        monkeypatch.setattr(step_table, "_NARROW_MAX", narrow_max)
    if pooled:  # the summary's reads all through reused buffers (column_buffers)
        monkeypatch.setattr(column_buffers, "MIN_POOLED_BYTES", 0)
    sc = _small_scenario()
    # the same chunk size both ways (it orders the ITL samples, hence the ITL mean's sum)
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 64)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 10**6)
    mem = run_scenario(sc, outdir=tmp_path / "mem", figures=False)
    assert not mem.step_table.is_spooled
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 16)
    spooled = run_scenario(sc, outdir=tmp_path / "disk", figures=False)
    assert spooled.step_table.is_spooled
    assert len(spooled.step_table) > 64
    if narrow_max is not None:  # some columns widened on the way, some stayed narrow
        stored = set(spooled.step_table._spool._stored.values())
        assert {np.dtype(np.int64), np.dtype(np.int32)} <= stored
    assert summary_without_wall(spooled.summary) == summary_without_wall(mem.summary)
    for f in ("steps.parquet", "requests.parquet", "report.md"):
        assert _md5(tmp_path / "mem" / f) == _md5(tmp_path / "disk" / f), f
    # the summary's busy-time mean batch size, by hand from the frame
    st = mem.steps
    dt = st["step_time_s"].to_numpy()
    assert spooled.summary["mean_batch_size"] == pytest.approx(
        float(np.dot(st["batch_size"].to_numpy(), dt) / dt.sum()))
    # every request that entered is in the table once (invariant 1)
    ids = spooled.requests["request_id"].to_numpy()
    assert len(ids) == 120 and np.array_equal(ids, np.arange(120))
    assert spooled.sim.recorder._requests_done is spooled.requests  # packed during the run


def test_spooled_runs_are_byte_identical(monkeypatch, tmp_path):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 50)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 1)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 10)
    sc = _small_scenario()
    for fmt in ("parquet", "csv"):
        a = run_scenario(sc, outdir=tmp_path / f"a{fmt}", figures=False, table_format=fmt)
        b = run_scenario(sc, outdir=tmp_path / f"b{fmt}", figures=False, table_format=fmt)
        assert a.step_table.is_spooled and b.step_table.is_spooled
        for stem in ("steps", "requests"):
            assert _md5(tmp_path / f"a{fmt}" / f"{stem}.{fmt}") == \
                _md5(tmp_path / f"b{fmt}" / f"{stem}.{fmt}")


def test_finished_requests_are_packed_and_freed(monkeypatch):
    from helpers import req
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 3)
    rec = RunRecorder()
    rs = [req(i, prompt=10 + i, output=5) for i in range(10)]
    for r in rs:
        rec.admit(r)
    # requests 0-5 exit at t = 1..6 one by one; 6-8 together at t = 7; 9 stays waiting
    for i, r in enumerate(rs[:6]):
        rec.finish(r, float(i + 1), "rejected", "queue_full")
    for r in rs[6:9]:
        rec.finish(r, 7.0, "rejected", "queue_timeout")
    held = {r.request_id for r in rec.all_requests}
    # packs at the 3rd finish (t=3: 0, 1 exited before), the 5th... never a request that
    # exited at the pack's own time; 9 (never finished) is always held
    assert 9 in held and len(held) < 10 and rec._request_chunks
    assert not held & {0, 1}
    df = rec.requests_frame()
    assert df["request_id"].tolist() == list(range(10))  # every admitted request, once
    want_exit = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0, 7.0, math.nan]
    np.testing.assert_array_equal(df["exit_time_s"].to_numpy(), np.array(want_exit))
    assert df["status"].tolist() == ["rejected"] * 9 + ["waiting"]
    assert df["reject_reason"].tolist() == ["queue_full"] * 6 + ["queue_timeout"] * 3 + [""]
    assert df["num_prompt_tokens"].tolist() == [10 + i for i in range(10)]
    assert rec.requests_frame() is df and rec.all_requests == []  # rows handed over once


def test_a_spooled_table_pickles_with_its_data(monkeypatch):
    import pickle
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 4)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    rec = RunRecorder()
    for i in range(11):
        rec.add_step(_row(i))
    t = rec.step_table()
    back = pickle.loads(pickle.dumps(t))
    assert back.is_spooled and back._spool.folder != t._spool.folder
    want = _sorted_columns(11)
    for c in STEP_COLUMNS:
        np.testing.assert_array_equal(back.column(c), want[c], err_msg=c)


@pytest.mark.parametrize("table_format", ["parquet", "csv"])
def test_interrupted_table_write_leaves_no_table(tmp_path, table_format):
    """Review finding: a write cut after one slice left a readable, truncated table."""
    import pandas as pd

    from simulator.metrics.tables_io import write_frames

    def frames():
        yield pd.DataFrame({"a": [1, 2, 3]})
        raise KeyboardInterrupt

    path = tmp_path / f"t.{table_format}"
    with pytest.raises(KeyboardInterrupt):
        write_frames(frames(), path, table_format)
    assert list(tmp_path.iterdir()) == []
    write_frames(iter([pd.DataFrame({"a": [1]}), pd.DataFrame({"a": [2]})]), path, table_format)
    assert list(tmp_path.iterdir()) == [path]
    assert pd.read_parquet(path)["a"].tolist() == [1, 2] if table_format == "parquet" else \
        pd.read_csv(path)["a"].tolist() == [1, 2]


def test_read_ahead_keeps_order_errors_and_one_item_ahead():
    from simulator.metrics.tables_io import read_ahead

    taken = []

    def items():
        for i in range(5):
            taken.append(i)
            yield i
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for x in read_ahead(items()):
            got.append(x)
            time.sleep(0.01)  # let the reader run ahead if it would
            assert len(taken) <= x + 2  # the item used and at most one more taken
    assert got == [0, 1, 2, 3, 4]  # every item before the error, in order
    assert list(read_ahead(iter([]))) == []


def test_parquet_dictionary_pages_for_text_and_few_valued_count_columns(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"n": np.arange(1000, dtype=np.int64) % 7,
                       "t": np.linspace(0.0, 1.0, 1000),
                       "status": ["completed", "rejected"] * 500,
                       "batch_size": np.arange(1000, dtype=np.int64) % 5,
                       "replica_id": np.repeat(np.arange(4, dtype=np.int64), 250)})
    path = write_table(df, tmp_path, "t", "parquet")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    enc = {meta.column(i).path_in_schema: set(meta.column(i).encodings)
           for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in enc["status"]
    assert "RLE_DICTIONARY" in enc["batch_size"] and "RLE_DICTIONARY" in enc["replica_id"]
    assert "RLE_DICTIONARY" not in enc["n"] and "RLE_DICTIONARY" not in enc["t"]
    back = pq.read_table(path).to_pandas()
    for c in df.columns:
        assert back[c].tolist() == df[c].tolist()


def test_parquet_encoded_and_dictionary_columns_are_apart():
    # pyarrow refuses a column with both a dictionary and another encoding ("To use
    # 'column_encoding' set 'use_dictionary' to False"): every write would fail
    from simulator.metrics.tables_io import COLUMN_ENCODINGS, DICTIONARY_COLUMNS

    assert not DICTIONARY_COLUMNS & set(COLUMN_ENCODINGS)


def test_parquet_delta_and_split_encodings_by_column_name_and_type(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"step_index": np.arange(1000, dtype=np.int64),
                       "kv_blocks_used": np.cumsum(rng.integers(-1, 3, 1000)),
                       "start_time_s": np.cumsum(rng.random(1000)),
                       "step_time_s": np.where(np.arange(1000) % 9 == 0, np.nan, rng.random(1000)),
                       "end_time_s": np.arange(1000, dtype=np.int64),  # not floating: plain
                       "t": rng.random(1000)})                          # not named: plain
    path = write_table(df, tmp_path, "t", "parquet")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    enc = {meta.column(i).path_in_schema: set(meta.column(i).encodings)
           for i in range(meta.num_columns)}
    assert "DELTA_BINARY_PACKED" in enc["step_index"] and "DELTA_BINARY_PACKED" in enc["kv_blocks_used"]
    assert "BYTE_STREAM_SPLIT" in enc["start_time_s"] and "BYTE_STREAM_SPLIT" in enc["step_time_s"]
    for c in ("end_time_s", "t"):
        assert not enc[c] & {"DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT", "RLE_DICTIONARY"}
    back = pq.read_table(path).to_pandas()
    pd.testing.assert_frame_equal(back, df)  # NaN read back as NaN, every value equal


@pytest.mark.parametrize("case", ["steps", "repeated", "gap", "negative", "big_ids", "empty"])
def test_key_order_is_lexsort(case):
    """The counting placement of (replica_id, step_index) gives numpy.lexsort's permutation
    where each replica's steps are numbered 0..n-1 (rows interleaved as a run appends them),
    and the other keys fall back to the sort with the same answer."""
    rng = np.random.default_rng(7)
    rid = rng.integers(0, 5, 2_000)
    step = np.zeros_like(rid)
    for r in range(5):
        where = np.flatnonzero(rid == r)
        step[where] = rng.permutation(len(where))  # every step once, out of order
    if case == "repeated":
        rid[10] = rid[11]  # row 10 takes row 11's (replica, step): one pair twice
        step[10] = step[11]
    elif case == "gap":
        step[rid == 2] += 1  # replica 2's steps start at 1
    elif case == "negative":
        step[0] = -1
    elif case == "big_ids":
        rid = rid * 10_000
    elif case == "empty":
        rid, step = rid[:0], step[:0]
    got = step_order.key_order(rid, step)
    want = np.lexsort((step, rid))
    assert got.tolist() == want.tolist()
    if case == "steps":  # the counting placement answered (int32), not the sort (int64)
        assert got.dtype == np.int32


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc (Linux)")
def test_spool_appends_leave_no_file_open():
    """Each append opens a column's file, writes the chunk's bytes and closes it: a spool
    holds no descriptor between appends (a process may hold many spooled results)."""
    gc.collect()
    before = _open_fds()
    spool = step_table.ColumnSpool(["k", "v", "x"], frozenset({"x"}))
    for i in range(3):
        spool.append({"k": np.array([1, 0]), "v": np.array([i, -i]), "x": np.array([0.5, i])})
        assert _open_fds() == before
    spool.sort_by("k", "v")
    assert spool.read("v").tolist() == [-2, -1, 0, 0, 1, 2]
    spool.close()
    assert _open_fds() == before


def test_a_chunk_without_a_column_is_refused_before_any_write():
    spool = step_table.ColumnSpool(["k", "v"], frozenset())
    spool.append({"k": np.array([1]), "v": np.array([2])})
    with pytest.raises(KeyError, match="lacks column"):
        spool.append({"k": np.array([3])})
    assert spool.num_rows == 1
    assert spool.read("k").tolist() == [1] and spool.read("v").tolist() == [2]
    spool.close()


def test_spool_widens_a_narrow_column_when_a_value_does_not_fit():
    """An int64 column is stored as int32 while its values fit; the first chunk with a value
    beyond int32 rewrites the file as int64, and every read (as appended, sorted, as
    float64) gives back exactly the values appended."""
    spool = step_table.ColumnSpool(["k", "v", "x"], frozenset({"x"}))
    first = {"k": np.array([1, 0, 1]), "v": np.array([5, -7, 2**31 - 1]),
             "x": np.array([0.5, 1.5, 2.5])}
    spool.append(first)
    assert spool.path("v").stat().st_size == 3 * 4
    big = {"k": np.array([0, 1]), "v": np.array([-(2**40), 3]), "x": np.array([3.5, 4.5])}
    spool.append(big)
    assert spool.path("v").stat().st_size == 5 * 8 and spool.path("k").stat().st_size == 5 * 4
    want = [5, -7, 2**31 - 1, -(2**40), 3]
    assert spool.read("v").dtype == np.int64 and spool.read("v").tolist() == want
    assert spool.read("v", 1, 4).tolist() == want[1:4]
    assert spool.read_float("v").tolist() == [float(x) for x in want]
    spool.sort_by("k", "v")  # by (k, v): rows 3, 1 (k = 0), then 4, 0, 2 (k = 1)
    assert spool.read("v").tolist() == [-(2**40), -7, 3, 5, 2**31 - 1]
    assert spool.read("k").dtype == np.int64 and spool.read("k").tolist() == [0, 0, 1, 1, 1]
    spool.close()


@pytest.mark.parametrize("tracked", [False, True])  # pieces found as appended (keys=)
@pytest.mark.parametrize("min_piece_rows", [3, 10**9])  # read in pieces / gathered row by row
def test_a_spool_of_long_runs_reads_in_pieces(monkeypatch, min_piece_rows, tracked):
    """A spool whose rows came a replica's steps at a time, in step order (the engine's
    DecodeRunRows), keeps its order as pieces of consecutive rows and copies a slice per piece;
    every read (whole, any row range, as float64, a narrow and a widened int column) gives the
    rows of ``numpy.lexsort`` of what was appended, as the row-by-row gather does. A spool told
    its keys finds the same pieces as the chunks arrive and its sort reads no column."""
    monkeypatch.setattr(step_order, "MIN_PIECE_ROWS", min_piece_rows)
    spool = step_table.ColumnSpool(["rid", "step", "x", "big"], frozenset({"x"}),
                                   keys=("rid", "step") if tracked else None)
    appended = []
    # (replica, first step, rows): replica 1 first, runs of 3 to 6 rows, the two interleaved
    for rid, first, n in [(1, 0, 5), (0, 0, 4), (1, 5, 3), (0, 4, 6), (0, 10, 3), (1, 8, 4)]:
        step = np.arange(first, first + n)
        chunk = {"rid": np.full(n, rid), "step": step, "x": 0.5 * step + 100 * rid,
                 "big": step * 2**33 + rid}  # past int32: stored as int64
        spool.append(chunk)
        appended.append(chunk)
    every = {c: np.concatenate([a[c] for a in appended]) for c in spool.columns}
    order = np.lexsort((every["step"], every["rid"]))
    want = {c: v[order] for c, v in every.items()}
    raw, reads = spool._raw, []
    monkeypatch.setattr(spool, "_raw", lambda *a: reads.append(a) or raw(*a))
    scans: list = []
    monkeypatch.setattr(step_table, "key_pieces",
                        lambda *a: scans.append(a) or step_order.key_pieces(*a))
    spool.sort_by("rid", "step")
    assert bool(reads) == (not tracked or min_piece_rows > 3)  # tracked: no key read back
    assert bool(scans) == (not tracked)  # tracked: the pieces (or None) known already
    monkeypatch.setattr(spool, "_raw", raw)
    if min_piece_rows == 3:  # 25 rows in 5 pieces: the chunks, replica 0's last two adjacent
        assert spool._order is None and spool._pieces is not None
        assert spool._pieces == ([0, 4, 13, 18, 21, 25], [5, 12, 0, 9, 21])
    else:
        assert spool._order is not None and spool._pieces is None
    assert spool.path("step").stat().st_size == 25 * 4  # narrow on disk
    n = spool.num_rows
    for c in spool.columns:
        got = spool.read(c)
        assert got.dtype == (np.float64 if c == "x" else np.int64)
        assert got.tolist() == want[c].tolist(), c
        assert spool.read_float(c).tolist() == want[c].astype(np.float64).tolist(), c
        for a in range(0, n + 1, 3):
            for b in range(a, n + 2, 4):
                assert spool.read(c, a, b).tolist() == want[c][a:b].tolist(), (c, a, b)
    with pytest.raises(ValueError, match="sorted step spool"):
        spool.append(appended[0])
    spool.close()


def test_key_runs_refuse_keys_that_are_not_integers():
    """Float keys give no pieces (as :func:`key_pieces`): the spool sorts them itself."""
    found = step_order.KeyRuns()
    found.add(np.zeros(4, dtype=np.int64), np.arange(4))
    found.add(np.zeros(2), np.arange(4.0, 6.0))
    assert found.pieces() is None and not found.valid
    assert step_order.key_pieces(np.zeros(6), np.arange(6.0)) is None


def test_key_runs_give_up_on_short_runs(monkeypatch, tmp_path):
    """Runs averaging fewer than MIN_PIECE_ROWS rows, more than KEY_RUNS_GIVE_UP of them: the
    runs are dropped (not held for the whole run) and the spool sorts by reading its keys."""
    monkeypatch.setattr(step_order, "KEY_RUNS_GIVE_UP", 8)
    monkeypatch.setattr(step_order, "MIN_PIECE_ROWS", 4)
    spool = step_table.ColumnSpool(["rid", "step", "x"], frozenset({"x"}), folder=tmp_path,
                                   keys=("rid", "step"))
    for i in range(6):  # 12 rows, alternating replicas: 12 runs of one row
        spool.append({"rid": np.array([0, 1]), "step": np.array([i, i]),
                      "x": np.array([i, 10.0 + i])})
    assert spool._runs is not None and not spool._runs.valid and not spool._runs._src
    spool.sort_by("rid", "step")
    assert spool.read("x").tolist() == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15]
    spool.close()


def test_a_spool_sorts_once(tmp_path):
    """Sorting again by the same keys does nothing; by others is refused (the second order
    would be applied to the rows as appended); no rows after a sort, even one that found the
    rows in order; keys that are not columns are refused."""
    spool = step_table.ColumnSpool(["k", "s"], frozenset(), folder=tmp_path, keys=("k", "s"))
    spool.append({"k": np.array([0, 0, 1]), "s": np.array([0, 1, 0])})
    spool.sort_by("k", "s")
    spool.sort_by("k", "s")
    with pytest.raises(ValueError, match="sorted by"):
        spool.sort_by("s", "k")
    with pytest.raises(ValueError, match="takes no more rows"):
        spool.append({"k": np.array([2]), "s": np.array([0])})
    assert spool.read("k").tolist() == [0, 0, 1]
    spool.close()
    with pytest.raises(ValueError, match="not among its columns"):
        step_table.ColumnSpool(["k", "s"], frozenset(), folder=tmp_path, keys=("k", "t"))


def test_pieces_of_a_permutation():
    """The pieces of consecutive rows of a permutation, by hand; None when they are short."""
    order = np.array([4, 5, 6, 0, 1, 2, 3, 7], dtype=np.int32)
    assert step_order.pieces_of(order) is None  # 3 pieces of 8 rows: below 1,024 a piece
    old = step_order.MIN_PIECE_ROWS
    try:
        step_order.MIN_PIECE_ROWS = 2
        assert step_order.pieces_of(order) == ([0, 3, 7, 8], [4, 0, 7])
        step_order.MIN_PIECE_ROWS = 3  # 3 pieces x 3 rows > 8 rows
        assert step_order.pieces_of(order) is None
    finally:
        step_order.MIN_PIECE_ROWS = old


@pytest.mark.parametrize("case", ["runs", "one_run", "sorted", "repeated", "gap", "overlap",
                                  "negative", "big_ids", "empty"])
def test_key_pieces_are_the_pieces_of_the_key_order(monkeypatch, case):
    """The pieces found from runs of consecutive keys are those of ``numpy.lexsort``'s
    permutation (:func:`pieces_of`) wherever each replica's steps are numbered 0..n-1 once,
    rows appended a run at a time in any interleaving; any other keys give None (the spool
    then sorts them)."""
    monkeypatch.setattr(step_order, "MIN_PIECE_ROWS", 1)
    rng = np.random.default_rng(11)
    runs = []  # (replica, first step, length), each replica's runs in step order
    for r in range(5):
        step = 0
        for length in rng.integers(1, 40, 12):
            runs.append((r, step, int(length)))
            step += int(length)
    if case == "one_run":
        runs = [(3, 0, 50)]
    if case != "sorted":  # appended interleaved, each replica's runs still in step order
        by_replica = {r: [x for x in runs if x[0] == r] for r in range(5)}
        runs, left = [], {r: list(v) for r, v in by_replica.items() if v}
        while left:
            r = int(rng.choice(sorted(left)))
            runs.append(left[r].pop(0))
            if not left[r]:
                del left[r]
    rid = np.concatenate([np.full(n, r) for r, _, n in runs]).astype(np.int32)
    step = np.concatenate([np.arange(s, s + n) for _, s, n in runs]).astype(np.int32)
    valid = True
    if case == "repeated":    # one (replica, step) twice (and one missing)
        step[len(step) // 2] = step[len(step) // 2 - 1]
        valid = False
    elif case == "gap":       # replica 2's steps start at 1
        step[rid == 2] += 1
        valid = False
    elif case == "overlap":   # a run of replica 1 restarts one step early
        i = np.flatnonzero((rid == 1) & (step > 0))[5]
        step[i:][rid[i:] == 1] -= 1
        valid = False
    elif case == "negative":
        step[rid == 4] -= 7
        valid = False
    elif case == "big_ids":   # replicas numbered sparsely: the same pieces
        rid = rid * 10_000
    elif case == "empty":
        rid, step = rid[:0], step[:0]
        valid = False
    got = step_order.key_pieces(rid, step)
    # the same rows appended in chunks cut anywhere (runs going on from one chunk into the
    # next): KeyRuns finds the same pieces as the chunks arrive
    for trial in range(3):
        k = min(3 * trial + 1, max(len(rid) - 1, 0))
        cuts = sorted(rng.choice(np.arange(1, len(rid)), size=k, replace=False).tolist()) \
            if k else []
        runs_found = step_order.KeyRuns()
        for a, b in zip([0, *cuts], [*cuts, len(rid)]):
            runs_found.add(rid[a:b], step[a:b])
        assert runs_found.pieces() == got, (trial, cuts)
    if not valid:
        assert got is None
        return
    want = step_order.pieces_of(np.lexsort((step, rid)))
    assert got == want
    if case in ("sorted", "one_run"):  # already in key order: one piece from row 0
        assert got == ([0, len(rid)], [0])


def test_a_negative_start_is_refused(monkeypatch):
    """A read from a negative row is an error (not rows counted from the end), in pieces or
    gathered or as appended."""
    monkeypatch.setattr(step_order, "MIN_PIECE_ROWS", 1)
    spool = step_table.ColumnSpool(["k", "s", "v"], frozenset({"v"}))
    spool.append({"k": np.array([1, 1, 0, 0]), "s": np.array([0, 1, 0, 1]),
                  "v": np.array([0.5, 1.5, 2.5, 3.5])})
    for sort in (False, True):
        if sort:
            spool.sort_by("k", "s")
            assert spool._pieces == ([0, 2, 4], [2, 0])
        for read in (lambda: spool.read("v", -2), lambda: spool.read("k", -1, 3)):
            with pytest.raises(ValueError, match="start must be >= 0"):
                read()
        assert spool.read("v", 1, 9).tolist() == ([3.5, 0.5, 1.5] if sort else [1.5, 2.5, 3.5])
    spool.close()


def test_a_slice_given_as_arrays_is_the_table_from_pandas_makes():
    """tables_io writes a step table's later slices straight into the first slice's schema;
    the Arrow table is the one ``from_pandas`` makes of the same columns (NaN read as null,
    the pandas metadata kept)."""
    import pandas as pd

    from simulator.metrics.tables_io import _arrow_table

    d = {"replica_id": np.array([0, 0, 1], dtype=np.int64),
         "t": np.array([0.5, np.nan, 2.0]), "n": np.array([3, 4, 5], dtype=np.int64)}
    first = _arrow_table(dict(d), None)
    want = pa.Table.from_pandas(pd.DataFrame(d), preserve_index=False)
    got = _arrow_table(d, first.schema)
    assert got.equals(want) and got.schema.equals(want.schema, check_metadata=True)
    assert got["t"].null_count == 1
