"""Parquet column types (issue 26 class 3) and Parquet files with a known trace's columns
(class 9): timestamps, dates, decimals and durations convert to seconds, odd types are refused
naming the file and the column, and Azure / Vidur / Mooncake columns are read as in CSV."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simulator.cli.main import main
from simulator.workload import WorkloadError, detect_format, read_columns, read_trace

TOK = {"num_prompt_tokens": [10, 20, 30], "num_output_tokens": [2, 3, 4]}


def _pq(tmp_path, cols: dict, name="t.parquet"):
    p = tmp_path / name
    pq.write_table(pa.table(cols), p)
    return p


def _arrivals(p, **kw):
    return [r.arrival_time_s for r in read_trace(p, **kw)]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_timestamp_column_is_seconds_after_the_earliest_row(tmp_path, unit):
    t0 = dt.datetime(2024, 3, 5, 9, 0, 0)
    # rows out of order: 1.5 s, 0 s, 4 s after t0 (UTC and a time zone alike)
    at = [t0 + dt.timedelta(seconds=1.5), t0, t0 + dt.timedelta(seconds=4)]
    if unit == "s":
        at = [t0 + dt.timedelta(seconds=s) for s in (1, 0, 4)]
    for tz in (None, "Europe/Paris"):
        p = _pq(tmp_path, {"arrival_time_s": pa.array(at, pa.timestamp(unit, tz=tz)), **TOK})
        cols = read_columns(p)
        assert cols.arrival_s.tolist() == ([1.0, 0.0, 4.0] if unit == "s" else [1.5, 0.0, 4.0])
        assert cols.time_origin.startswith("arrival_time_s ")
        assert "2024-03-05 09:00:00 UTC" in cols.time_origin and cols.time_origin.endswith(":2")


def test_timestamps_far_outside_the_nanosecond_range(tmp_path):
    # 1600 and 2500: a datetime64[ns] wraps; in microseconds they are plain integers
    for year in (1600, 2500):
        at = [dt.datetime(year, 1, 1), dt.datetime(year, 1, 1, 0, 0, 2, 500_000)]
        p = _pq(tmp_path, {"arrival_time_s": pa.array(at, pa.timestamp("us")),
                           "num_prompt_tokens": [1, 2], "num_output_tokens": [1, 1]})
        assert _arrivals(p) == [0.0, 2.5]


def test_date_columns_are_days(tmp_path):
    days = [dt.date(2024, 1, 3), dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    for typ in (pa.date32(), pa.date64()):
        p = _pq(tmp_path, {"arrival_time_s": pa.array(days, typ), **TOK})
        assert read_columns(p).arrival_s.tolist() == [172_800.0, 0.0, 86_400.0]


def test_decimal_and_duration_columns(tmp_path):
    p = _pq(tmp_path, {"arrival_time_s": pa.array([Decimal("0.25"), Decimal("1.50"),
                                                   Decimal(0)], pa.decimal128(6, 2)),
                       "num_prompt_tokens": pa.array([Decimal(10), Decimal(20),
                                                      Decimal(30)], pa.decimal128(5, 0)),
                       "num_output_tokens": [2, 3, 4],
                       "cancel_after_s": pa.array([dt.timedelta(milliseconds=1500), None,
                                                   dt.timedelta(seconds=2)],
                                                  pa.duration("ms"))})
    cols = read_columns(p)
    assert cols.arrival_s.tolist() == [0.25, 1.5, 0.0]
    assert cols.prompt.tolist() == [10, 20, 30]
    assert cols.cancel_after_s.tolist()[0] == 1.5 and cols.cancel_after_s.tolist()[2] == 2.0
    d = _pq(tmp_path, {"arrival_time_s": pa.array([dt.timedelta(microseconds=250_000),
                                                   dt.timedelta(0), dt.timedelta(seconds=3)],
                                                  pa.duration("us")), **TOK}, "d.parquet")
    assert read_columns(d).arrival_s.tolist() == [0.25, 0.0, 3.0]
    assert read_columns(d).time_origin is None  # a duration is an offset: no re-base


def test_other_numeric_widths_and_categoricals(tmp_path):
    p = _pq(tmp_path, {"arrival_time_s": pa.array([0.5, 0.0, 0.25], pa.float16()),
                       "num_prompt_tokens": pa.array([10, 20, 30], pa.uint16()),
                       "num_output_tokens": pa.array([2, 3, 4], pa.int8()),
                       "tenant": pa.array(["a", "b", "a"]).dictionary_encode(),
                       "slice": pa.array(["x", "y", None], pa.large_string()),
                       "priority": pa.array([1, 2, 1]).dictionary_encode()})
    reqs = read_trace(p)
    assert [r.arrival_time_s for r in reqs] == [0.0, 0.25, 0.5]
    assert [(r.tenant, r.slice, r.priority) for r in reqs] == [("b", "y", 2), ("a", "default", 1),
                                                               ("a", "x", 1)]


@pytest.mark.parametrize("column, array, kind", [
    ("arrival_time_s", pa.array([dt.time(1), dt.time(2), dt.time(3)]), "time64[us]"),
    ("arrival_time_s", pa.array([True, False, True]), "bool"),
    ("arrival_time_s", pa.array([b"1", b"2", b"3"]), "binary"),
    ("arrival_time_s", pa.array([[0.0], [1.0], [2.0]]), "list<element: double>"),
    ("num_prompt_tokens", pa.array([{"a": 1}] * 3), "struct<a: int64>"),
    ("num_prompt_tokens", pa.array([dt.datetime(2024, 1, 1)] * 3), "timestamp[us]"),
    ("num_output_tokens", pa.array([dt.timedelta(1)] * 3), "duration[us]"),
    ("num_output_tokens", pa.array([True] * 3).dictionary_encode(), "bool"),
    ("cancel_after_s", pa.array([dt.datetime(2024, 1, 1)] * 3), "timestamp[us]"),
    ("priority", pa.array([1.5, None, None], pa.float64()).cast(pa.string()).cast(pa.binary()),
     "binary"),
    ("tenant", pa.array([1.5, 2.5, 3.5]), "double"),
    ("tenant", pa.array([True, False, True]), "bool"),
    ("slice", pa.array([["a"], ["b"], ["c"]]), "list<element: string>"),
    ("max_tokens", pa.array([[5], [5], [5]]), "list<element: int64>"),
])
def test_types_that_do_not_fit_are_refused_naming_the_column(tmp_path, capsys, column, array,
                                                             kind):
    cols = {"arrival_time_s": [0.0, 1.0, 2.0], **TOK, column: array}
    p = _pq(tmp_path, cols)
    with pytest.raises(WorkloadError) as e:
        read_trace(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: column '{column}' has the Parquet (Arrow) type {kind}"), msg
    assert main(["trace", str(p)]) == 2
    err = capsys.readouterr().err
    assert err == f"servesim: error: {msg}\n"


def test_nulls_and_strings_in_numeric_columns_name_the_row(tmp_path):
    p = _pq(tmp_path, {"arrival_time_s": pa.array([None, None, None], pa.null()), **TOK})
    with pytest.raises(WorkloadError, match=r"t.parquet:1: arrival_time_s is missing"):
        read_trace(p)
    p = _pq(tmp_path, {"arrival_time_s": [0.0, None, 2.0], **TOK})
    with pytest.raises(WorkloadError, match=r"t.parquet:2: arrival_time_s is missing"):
        read_trace(p)
    # a null column of an optional field is "not given" throughout
    p = _pq(tmp_path, {"arrival_time_s": [0.0, 1.0, 2.0], **TOK,
                       "tenant": pa.array([None] * 3, pa.null())})
    assert {r.tenant for r in read_trace(p)} == {"default"}


# --------------------------------------------------------------------------- known formats
AZ_ROWS = [("2024-03-05 09:00:00.1250000", 812, 97), ("2024-03-05 09:00:00.1250001", 64, 12),
           ("2024-03-05 09:00:01.9000000", 2210, 388)]


def _same_requests(a, b):
    key = [(r.arrival_time_s, r.num_prompt_tokens, r.num_output_tokens, r.prefix_hash_ids,
            r.source_line) for r in a]
    assert key == [(r.arrival_time_s, r.num_prompt_tokens, r.num_output_tokens,
                    r.prefix_hash_ids, r.source_line) for r in b]


def test_azure_columns_in_parquet_read_as_the_azure_csv(tmp_path, capsys):
    csv = tmp_path / "az.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   + "".join(f"{t},{c},{g}\n" for t, c, g in AZ_ROWS))
    # as text, and as a nanosecond timestamp column
    text = _pq(tmp_path, {"TIMESTAMP": [t for t, _, _ in AZ_ROWS],
                          "ContextTokens": [c for _, c, _ in AZ_ROWS],
                          "GeneratedTokens": [g for _, _, g in AZ_ROWS]}, "az_text.parquet")
    ns = [1_709_629_200_125_000_000, 1_709_629_200_125_000_100, 1_709_629_201_900_000_000]
    typed = _pq(tmp_path, {"TIMESTAMP": pa.array(ns, pa.timestamp("ns")),
                           "ContextTokens": [c for _, c, _ in AZ_ROWS],
                           "GeneratedTokens": [g for _, _, g in AZ_ROWS]}, "az_ts.parquet")
    ref = read_trace(csv)
    # README's hand-derived arrivals: 0, 100 ns, 1.775 s
    assert [r.arrival_time_s for r in ref] == [0.0, 1e-7, 1.775]
    for p in (text, typed):
        assert detect_format(p) == "azure"
        got = read_trace(p)
        assert [(r.arrival_time_s, r.num_prompt_tokens) for r in got] == \
               [(r.arrival_time_s, r.num_prompt_tokens) for r in ref]
        assert main(["trace", str(p)]) == 0
        assert json.loads(capsys.readouterr().out)["format"] == "azure"


def test_vidur_and_mooncake_columns_in_parquet(tmp_path):
    v_csv = tmp_path / "v.csv"
    v_csv.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n1.5,20,3\n")
    v_pq = _pq(tmp_path, {"arrived_at": [0.0, 1.5], "num_prefill_tokens": [10, 20],
                          "num_decode_tokens": [2, 3]}, "v.parquet")
    assert detect_format(v_pq) == "vidur"
    # Parquet rows are numbered from 1, CSV lines from the header: compare the values
    assert [(r.arrival_time_s, r.num_prompt_tokens) for r in read_trace(v_pq)] == \
           [(r.arrival_time_s, r.num_prompt_tokens) for r in read_trace(v_csv)]
    m = _pq(tmp_path, {"timestamp": [0, 1500], "input_length": [1100, 300],
                       "output_length": [5, 1], "hash_ids": [[0, 1, 2], None]}, "m.parquet")
    assert detect_format(m) == "mooncake"
    reqs = read_trace(m)
    assert [(r.arrival_time_s, r.prefix_hash_ids, r.prefix_block_tokens) for r in reqs] == \
           [(0.0, (0, 1, 2), 512), (1.5, None, 512)]
    # Mooncake's own check: one id per 512-token block
    bad = _pq(tmp_path, {"timestamp": [0], "input_length": [1100], "output_length": [5],
                         "hash_ids": [[0, 1]]}, "mb.parquet")
    with pytest.raises(WorkloadError, match=r"mb.parquet:1: hash_ids has 2 entries but "
                                            r"input_length 1100 needs ceil\(1100 / 512\) = 3"):
        read_trace(bad)


def test_explicit_formats_on_parquet(tmp_path):
    p = _pq(tmp_path, {"arrived_at": [0.0, 1.5], "num_prefill_tokens": [10, 20],
                       "num_decode_tokens": [2, 3]}, "v.parquet")
    assert _arrivals(p, format="parquet") == [0.0, 1.5]  # the schema decides
    assert _arrivals(p, format="vidur") == [0.0, 1.5]
    with pytest.raises(WorkloadError, match="format 'azure' needs column"):
        read_trace(p, format="azure")
