"""Silent oddities of trace reading (issue 26 class 7) and labels that fail only after the
simulation (class 8, readers part): each is now exact or a one-line error naming the file,
the line (or row) and the key, found before any simulation starts."""
from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from simulator.cli.main import main
from simulator.observe.readers_csv import read_generic_csv
from simulator.observe.record import RecordError
from simulator.workload import WorkloadConfig, WorkloadError, load_workload, read_trace
from tests.helpers import roofline_scenario_text

AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GC = "arrival_time_s,num_prompt_tokens,num_output_tokens\n"
GJ = '{"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2}\n'
BASE = roofline_scenario_text("odd", 4, "{dist: fixed, value: 10}",
                              "{dist: fixed, value: 2}")


def _secs(a: str, b: str) -> float:
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    return (dt.datetime.strptime(b, fmt) - dt.datetime.strptime(a, fmt)).total_seconds()


@pytest.mark.parametrize("year", [1, 1600, 1677, 2262, 2263, 2500, 9999])
def test_azure_dates_outside_the_nanosecond_range_do_not_wrap(tmp_path, year):
    # datetime64[ns] holds 1677-09-21 .. 2262-04-11: beyond, it wrapped and reordered rows
    rows = [f"{year:04d}-06-01 00:00:01.5", f"{year:04d}-06-01 00:00:00.25",
            f"{year:04d}-06-02 00:00:00.0"]
    p = tmp_path / "a.csv"
    p.write_text(AZ + "".join(f"{t},{10 + i},2\n" for i, t in enumerate(rows)))
    reqs = read_trace(p)
    # hand-derived: 0.25 s is the earliest; the others 1.25 s and 1 day - 0.25 s after it
    assert [r.arrival_time_s for r in reqs] == [0.0, 1.25, 86_399.75]
    assert [r.source_line for r in reqs] == [3, 2, 4]
    assert _secs(rows[1] + "0", rows[2] + "0") == 86_399.75


def test_azure_rows_across_the_2262_wrap_keep_their_order(tmp_path):
    rows = ["2262-04-11 23:47:16.0", "2262-04-11 23:47:17.5"]  # the ns limit is 23:47:16.854
    p = tmp_path / "a.csv"
    p.write_text(AZ + "".join(f"{t},10,2\n" for t in rows))
    assert [r.arrival_time_s for r in read_trace(p)] == [0.0, 1.5]
    # centuries apart: read exactly, then refused by the clock check naming the later row
    far = tmp_path / "far.csv"
    far.write_text(AZ + "2024-01-01 00:00:00,10,2\n2300-01-01 00:00:00,10,2\n")
    span = (dt.datetime(2300, 1, 1) - dt.datetime(2024, 1, 1)).total_seconds()
    assert [r.arrival_time_s for r in read_trace(far)] == [0.0, span]
    with pytest.raises(WorkloadError, match=rf"^{far}:3: this arrival is at 8\.71e\+09 s"):
        load_workload(WorkloadConfig.model_validate({"trace": str(far)}), seed=0)


def test_binary_parquet_labels_are_decoded_or_refused(tmp_path):
    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 10],
                             "num_output_tokens": [2, 2],
                             "tenant": pa.array([b"a", "é".encode()], pa.binary()),
                             "slice": pa.array([b"x", None], pa.large_binary())}), p)
    assert [(r.tenant, r.slice) for r in read_trace(p)] == [("a", "x"), ("é", "default")]
    pq.write_table(pa.table({"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 10],
                             "num_output_tokens": [2, 2],
                             "tenant": pa.array([b"a", b"\xffz"], pa.binary())}), p)
    with pytest.raises(WorkloadError, match=r"b.parquet:2: tenant b'\\xffz' is not UTF-8 text "
                                            r"\(byte 0xff at 0: invalid start byte\)"):
        read_trace(p)


def test_null_prefix_block_tokens_is_an_error_not_512(tmp_path):
    p = tmp_path / "p.parquet"
    table = {"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 10],
             "num_output_tokens": [2, 2],
             "prefix_hash_ids": pa.array([None, [7]], pa.list_(pa.int64())),
             "prefix_block_tokens": pa.array([None, None], pa.int64())}
    pq.write_table(pa.table(table), p)
    with pytest.raises(WorkloadError, match=r"p.parquet:2: prefix_block_tokens is missing for a "
                                            r"row with prefix_hash_ids"):
        read_trace(p)
    # a row without ids needs none; a stated value is kept
    table["prefix_block_tokens"] = pa.array([None, 16], pa.int64())
    pq.write_table(pa.table(table), p)
    assert [(r.prefix_hash_ids, r.prefix_block_tokens) for r in read_trace(p)][1] == ((7,), 16)


def test_recorded_itl_longer_than_the_output_is_refused(tmp_path):
    # 4 output tokens have 3 gaps between them: a 4-gap list cannot be this request's
    head = "request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,itl_s\n"
    ok = tmp_path / "ok.csv"
    ok.write_text(head + 'r1,0,10,4,0.1,0.4,"[0.1, 0.1, 0.1]"\n')
    assert read_generic_csv(ok).outcomes["itl_s"].tolist() == [(0.1, 0.1, 0.1)]
    bad = tmp_path / "bad.csv"
    bad.write_text(head + 'r1,0,10,4,0.1,0.4,"[0.1, 0.1, 0.1]"\n'
                          'r2,1,10,4,0.1,0.5,"[0.1, 0.1, 0.1, 0.1]"\n')
    with pytest.raises(RecordError, match=r"bad.csv:3: itl_s has 4 gaps but output_tokens 4 has "
                                          r"at most 3"):
        read_generic_csv(bad)


@pytest.mark.parametrize("text", ["9007199254740993", "18446744073709551617",
                                  "123456789012345678901234567890"])
def test_integers_above_2_53_are_shown_as_written(tmp_path, text):
    # float64 rounds 2**53 + 1 to 2**53: the message must show the file's digits
    p = tmp_path / "g.csv"
    p.write_text(GC + f"0,{text},2\n")
    with pytest.raises(WorkloadError) as e:
        read_trace(p)
    assert str(e.value) == f"{p}:2: num_prompt_tokens {text} must be <= 2,147,483,647 (2**31 - 1)"
    j = tmp_path / "g.jsonl"
    j.write_text(GJ + json.dumps({"arrival_time_s": 1, "num_prompt_tokens": 10,
                                  "num_output_tokens": int(text)}) + "\n")
    with pytest.raises(WorkloadError, match=rf"g.jsonl:2: num_output_tokens {text} must be <="):
        read_trace(j)


def test_prefix_ids_beyond_int64_and_huge_numbers(tmp_path):
    m = tmp_path / "m.jsonl"
    m.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, '
                 f'"hash_ids": [{2 ** 63}]}}\n')
    with pytest.raises(WorkloadError, match=r"m.jsonl:1: hash_ids id 9223372036854775808 is "
                                            r"outside the 64-bit integer range"):
        read_trace(m)
    # a 5,001-digit integer: Python's digit limit, reported with the line and the key
    big = tmp_path / "big.jsonl"
    big.write_text(GJ + '{"arrival_time_s": 1, "num_prompt_tokens": 1' + "0" * 5000
                   + ', "num_output_tokens": 2}\n')
    with pytest.raises(WorkloadError, match=r"big.jsonl:2: num_prompt_tokens: an integer of "
                                            r"5,001 digits is too large \(at most 4,300"):
        read_trace(big)
    csv = tmp_path / "big.csv"
    csv.write_text(GC + "0,1" + "0" * 5000 + ",2\n")
    with pytest.raises(WorkloadError) as e:
        read_trace(csv)
    # beyond a float (it reads as infinity): out of range, not "not an integer" (40 chars)
    assert str(e.value) == (f"{csv}:2: num_prompt_tokens '1{'0' * 35}... is out of range (an "
                            "integer here is at most 2,147,483,647 in magnitude)")


@pytest.mark.parametrize("field, escaped", [("tenant", "\\ud800"), ("slice", "\\udfff"),
                                            ("tenant", "a\\ud83d")])
def test_lone_surrogate_labels_are_refused_before_the_run(tmp_path, capsys, field, escaped):
    p = tmp_path / "s.jsonl"
    p.write_text(GJ + '{"arrival_time_s": 1, "num_prompt_tokens": 10, "num_output_tokens": 2, '
                      f'"{field}": "{escaped}"}}\n')
    base = tmp_path / "b.yaml"
    base.write_text(BASE)
    out = tmp_path / "o"
    assert main(["run", str(base), "--trace", str(p), "-q", "--no-figures", "-o",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"servesim: error: {p}:2: {field} ")
    assert "is not valid Unicode text" in err and "surrogates not allowed" in err
    assert not out.exists()  # nothing simulated, nothing written


def test_a_valid_surrogate_pair_is_one_character(tmp_path):
    p = tmp_path / "ok.jsonl"
    p.write_text(GJ.replace("}", ', "tenant": "\\ud83d\\ude00"}'))
    assert read_trace(p)[0].tenant == "\U0001F600"


def test_share_table_labels_must_be_utf8(tmp_path, capsys):
    base = tmp_path / "b.yaml"
    base.write_text(BASE)
    rc = main(["run", str(base), "-q", "--no-figures", "-o", str(tmp_path / "o"),
               "--set", 'workload.tenants={"\\ud800": 1.0}'])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "workload.tenants" in err and "name '\\ud800' is not valid Unicode text" in err
