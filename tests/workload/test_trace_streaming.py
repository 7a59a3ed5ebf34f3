"""Traces read in batches and requests built lazily (issue 12 part 3): the batched readers
give the columns of a one-shot read at any batch size, a bad row in a later batch is still
named by file and line, and a RequestStream holds exactly the requests of the list."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulator.workload import (
    WorkloadConfig,
    WorkloadError,
    load_workload,
    read_columns,
    readers,
    write_parquet_trace,
)
from simulator.workload.loader import RequestStream

ROWS = [(0.25 * i, 10 + i, 1 + i % 4, ["a", "b", "c"][i % 3]) for i in range(7)]


def _generic_csv(tmp_path, rows=ROWS, bad_line=None):
    text = "arrival_time_s,num_prompt_tokens,num_output_tokens,slice\n"
    for k, (t, p, o, s) in enumerate(rows):
        line = k + 2  # header is line 1
        text += f"{t},{'x' if line == bad_line else p},{o},{s}\n"
    path = tmp_path / "t.csv"
    path.write_text(text)
    return path


def _azure_csv(tmp_path):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    for i in range(7):
        text += f"2023-11-16 18:15:{10 + i:02d}.{i:07d},{100 + i},{5 + i}\n"
    path = tmp_path / "azure.csv"
    path.write_text(text)
    return path


def _as_dict(cols):
    return {f.name: (v.tolist() if isinstance(v, np.ndarray) else v)
            for f in dataclasses.fields(cols) for v in [getattr(cols, f.name)]}


@pytest.mark.parametrize("batch", [1, 2, 3, 7, 8])
def test_batched_reads_equal_the_one_shot_read(monkeypatch, tmp_path, batch):
    gen = _generic_csv(tmp_path)
    az = _azure_csv(tmp_path)
    pq_path = tmp_path / "t.parquet"
    write_parquet_trace(read_columns(gen, "generic_csv"), pq_path)
    whole = {f: _as_dict(read_columns(p, f)) for p, f in
             ((gen, "generic_csv"), (az, "azure"), (pq_path, "parquet"))}
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", batch)
    for p, f in ((gen, "generic_csv"), (az, "azure"), (pq_path, "parquet")):
        assert _as_dict(read_columns(p, f)) == whole[f], f
    # by hand: the azure arrivals are seconds after the first row, exactly
    got = read_columns(az, "azure")
    assert got.arrival_s.tolist() == pytest.approx([i + i * 1e-7 for i in range(7)], abs=1e-12)
    assert got.lines.tolist() == list(range(2, 9))
    assert read_columns(gen, "generic_csv").slice == ["a", "b", "c", "a", "b", "c", "a"]


@pytest.mark.parametrize("bad_line", [2, 5, 8])  # first batch, a middle one, the last row
def test_a_bad_row_in_any_batch_names_its_line(monkeypatch, tmp_path, bad_line):
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", 2)
    path = _generic_csv(tmp_path, bad_line=bad_line)
    with pytest.raises(WorkloadError, match=rf"t\.csv:{bad_line}: num_prompt_tokens 'x'"):
        load_workload(WorkloadConfig(trace=str(path), format="generic_csv"), 0, lazy=True)


def test_a_bad_parquet_row_in_a_later_batch_names_its_row(monkeypatch, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", 3)
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"arrival_time_s": [0.0, 1.0, 2.0, 3.0, 4.0],
                             "num_prompt_tokens": [5, 5, 5, 5, 0],   # row 5: below 1
                             "num_output_tokens": [1, 1, 1, 1, 1]}), path)
    with pytest.raises(WorkloadError, match=r"bad\.parquet:5: num_prompt_tokens"):
        read_columns(path, "parquet")


def test_request_stream_holds_the_list_requests(tmp_path):
    path = _generic_csv(tmp_path)
    cfg = WorkloadConfig(trace=str(path), format="generic_csv",
                         parallel_sampling={"n": 2, "slices": ["b"]})
    eager = load_workload(cfg, 0)
    lazy = load_workload(cfg, 0, lazy=True)
    assert isinstance(lazy, RequestStream) and len(lazy) == len(eager) == 7
    assert list(lazy) == eager
    assert lazy[3] == eager[3] and lazy[-1] == eager[-1] and lazy[1:4] == eager[1:4]
    assert [s.n for s in lazy] == [1, 2, 1, 1, 2, 1, 1]  # slice b only
    assert lazy.slices() == {"a", "b", "c"}
    p, o, mt, cancel = lazy.budget_columns()
    assert p.tolist() == [10 + i for i in range(7)] and o.tolist() == [1 + i % 4 for i in range(7)]
    assert not mt.any() and not cancel.any()
    with pytest.raises(IndexError):
        lazy[7]


def test_request_stream_builds_specs_in_batches(tmp_path):
    path = _generic_csv(tmp_path)
    lazy = load_workload(WorkloadConfig(trace=str(path), format="generic_csv"), 0, lazy=True)
    it = lazy.cols.iter_specs(batch_rows=3)
    ids = [s.request_id for s in it]
    assert ids == list(range(7))


def test_budget_estimate_reads_the_stream_columns(tmp_path):
    from helpers import make_scenario

    from simulator.base.budget import estimate_scenario_run
    from simulator.cluster.setup import build_setup
    path = tmp_path / "t.csv"
    path.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens,max_tokens,"
                    "cancel_after_s\n0.0,37,5,8,\n0.5,20,3,,2.0\n1.0,64,9,,\n")
    sc = make_scenario({"workload": {"trace": str(path), "format": "generic_csv"}},
                       workload={"trace": str(path), "format": "generic_csv"})
    setup = build_setup(sc)
    lazy = load_workload(sc.workload, 0, lazy=True)
    _p, _o, mt, cancel = lazy.budget_columns()
    assert mt.tolist() == [8.0, 0.0, 0.0] and cancel.tolist() == [False, True, False]
    assert estimate_scenario_run(sc, setup, lazy) == estimate_scenario_run(sc, setup, list(lazy))


def _jsonl(tmp_path, name, records):
    import json
    path = tmp_path / name
    path.write_text("".join(("\n" if r is None else json.dumps(r) + "\n") for r in records))
    return path


def _generic_records():
    # 7 records, a blank line after the 3rd; "tenant" first appears in record 5 and the
    # mapped "who" (-> slice) in record 6: batches of 2 see them late
    recs = []
    for i in range(7):
        r = {"t": 0.5 * i, "num_prompt_tokens": 10 + i, "num_output_tokens": 1 + i % 3}
        if i >= 4:
            r["tenant"] = ["x", "y"][i % 2]
        if i == 5:
            r["who"] = "s1"
        recs.append(r)
    return recs[:3] + [None] + recs[3:]


@pytest.mark.parametrize("batch", [1, 2, 3, 8])
def test_jsonl_batched_reads_equal_the_one_shot_read(monkeypatch, tmp_path, batch):
    gen = _jsonl(tmp_path, "g.jsonl", _generic_records())
    moon = _jsonl(tmp_path, "m.jsonl", [
        {"timestamp": 1000 * i, "input_length": 600, "output_length": 3,
         **({"hash_ids": [i, i + 1]} if i in (3, 4) else {})} for i in range(6)])
    cols = {"arrival_time_s": "t", "slice": "who"}
    whole = {"g": _as_dict(read_columns(gen, "generic_jsonl", cols)),
             "m": _as_dict(read_columns(moon, "mooncake"))}
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", batch)
    assert _as_dict(read_columns(gen, "generic_jsonl", cols)) == whole["g"]
    assert _as_dict(read_columns(moon, "mooncake")) == whole["m"]
    # by hand: lines skip the blank 4th line; labels default where a record has none
    g = read_columns(gen, "generic_jsonl", cols)
    assert g.lines.tolist() == [1, 2, 3, 5, 6, 7, 8]
    assert g.tenant == ["default"] * 4 + ["x", "y", "x"]
    assert g.slice == ["default"] * 5 + ["s1", "default"]
    assert g.arrival_s.tolist() == [0.5 * i for i in range(7)]
    m = read_columns(moon, "mooncake")
    assert m.prefix_hash_ids == [None, None, None, (3, 4), (4, 5), None]
    assert m.arrival_s.tolist() == [float(i) for i in range(6)]  # ms -> s


@pytest.mark.parametrize("bad", [2, 7])  # first batch / the last one
def test_a_bad_jsonl_record_in_any_batch_names_its_line(monkeypatch, tmp_path, bad):
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", 2)
    recs = [{"arrival_time_s": i, "num_prompt_tokens": 5, "num_output_tokens": 1}
            for i in range(7)]
    recs[bad - 1]["num_prompt_tokens"] = "5"
    path = _jsonl(tmp_path, "b.jsonl", recs)
    with pytest.raises(WorkloadError, match=rf"b\.jsonl:{bad}: num_prompt_tokens \"5\" is a "
                                            "string"):
        read_columns(path, "generic_jsonl")


def test_a_mapped_jsonl_column_never_seen_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", 2)
    recs = [{"arrival_time_s": i, "num_prompt_tokens": 5, "num_output_tokens": 1}
            for i in range(5)]
    path = _jsonl(tmp_path, "c.jsonl", recs)
    with pytest.raises(WorkloadError, match=r"column 'user' \(mapped from 'tenant'\) not found"):
        read_columns(path, "generic_jsonl", {"tenant": "user"})
    with pytest.raises(WorkloadError, match=r"column 'ts' \(mapped from 'arrival_time_s'\)"):
        read_columns(path, "generic_jsonl", {"arrival_time_s": "ts"})


def test_jsonl_reader_holds_one_batch_of_records(monkeypatch, tmp_path):
    """Bounded by the batch: the parser never holds more than READ_BATCH_ROWS records."""
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", 3)
    recs = [{"arrival_time_s": i, "num_prompt_tokens": 5, "num_output_tokens": 1}
            for i in range(10)]
    path = _jsonl(tmp_path, "d.jsonl", recs)
    sizes = [len(objs) for objs, _ in readers._iter_jsonl_tables(path, "d.jsonl")]
    assert sizes == [3, 3, 3, 1]
    assert len(read_columns(path, "generic_jsonl")) == 10
