"""Trace readers on small files written here (all expected values by hand)."""
from __future__ import annotations

import math
import re

import pytest

from simulator.workload import WorkloadError, detect_format, read_trace

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def ticks(t: float) -> int:
    """Seconds -> integer 100 ns ticks."""
    return round(t * 1e7)


# ------------------------------------------------------------------ Azure

def test_azure_crlf_seven_digit_fractions_exact(write):
    p = write("az.csv", AZURE_HEADER
              + "2024-01-02 03:04:05.1234567,100,10\n"
              + "2024-01-02 03:04:05.1234568,200,20\n"   # +100 ns
              + "2024-01-02 03:04:06.0000000,300,30\n"   # +0.8765433 s from row 1
              + "2024-01-02 23:59:59.9999999,400,40\n"
              + "2024-01-03 00:00:00.0000000,500,50\n",  # +100 ns across midnight
              crlf=True)
    assert detect_format(p) == "azure"
    reqs = read_trace(p)
    assert [r.num_prompt_tokens for r in reqs] == [100, 200, 300, 400, 500]
    assert [r.num_output_tokens for r in reqs] == [10, 20, 30, 40, 50]
    t = [r.arrival_time_s for r in reqs]
    assert t[0] == 0.0
    assert ticks(t[1]) == 1
    assert ticks(t[2]) == 8_765_433
    # 03:04:05.1234567 -> 23:59:59.9999999 = 20 h 55 min 54.8765432 s
    expected_4 = (20 * 3600 + 55 * 60 + 54) * 10**7 + 8_765_432
    assert ticks(t[3]) == expected_4
    assert ticks(t[4]) - ticks(t[3]) == 1
    assert t[1] == 100 / 1e9  # correctly rounded from exact integer nanoseconds
    assert [r.request_id for r in reqs] == [0, 1, 2, 3, 4]
    assert [r.source_line for r in reqs] == [2, 3, 4, 5, 6]
    assert all(r.max_tokens is None and r.tenant == "default" for r in reqs)


def test_azure_unsorted_rows_are_sorted_relative_to_earliest(write):
    p = write("az.csv", AZURE_HEADER
              + "2024-01-02 00:00:02.5000000,1,1\n"
              + "2024-01-02 00:00:01.0000000,2,2\n"
              + "2024-01-02 00:00:02.5000000,3,3\n", crlf=True)
    reqs = read_trace(p)
    assert [r.num_prompt_tokens for r in reqs] == [2, 1, 3]  # ties keep file order
    assert [r.arrival_time_s for r in reqs] == [0.0, 1.5, 1.5]
    assert [r.source_line for r in reqs] == [3, 2, 4]


def test_azure_fewer_fraction_digits_and_lf(write):
    p = write("az.csv", AZURE_HEADER + "2024-01-02 00:00:00,5,6\n2024-01-02 00:00:00.25,7,8\n")
    assert [r.arrival_time_s for r in read_trace(p)] == [0.0, 0.25]


def test_azure_optional_columns(write):
    p = write("az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens,tenant,priority,slice,"
              "cancel_after_s,max_tokens\n"
              "2024-01-02 00:00:00.0000000,5,6,acme,2,code,1.5,64\n"
              "2024-01-02 00:00:01.0000000,5,6,,,,,\n", crlf=True)
    a, b = read_trace(p)
    assert (a.tenant, a.priority, a.slice, a.cancel_after_s, a.max_tokens) == (
        "acme", 2, "code", 1.5, 64)
    assert (b.tenant, b.priority, b.slice, b.cancel_after_s, b.max_tokens) == (
        "default", 0, "default", None, None)


@pytest.mark.parametrize("row, line, message", [
    ("2024-01-02 00:00:01.0000000,5,abc", 3, "GeneratedTokens 'abc' is not an integer"),
    ("2024-01-02 00:00:01.0000000,5,0", 3, "GeneratedTokens 0 must be >= 1"),
    ("2024-01-02 00:00:01.0000000,-4,3", 3, "ContextTokens -4 must be >= 1"),
    ("2024-01-02 00:00:01.0000000,5.5,3", 3, "ContextTokens '5.5' is not an integer"),
    ("2024-01-02 00:00:01.0000000,5,", 3, "GeneratedTokens is missing"),
    ("2024-01-02 00:00:01.0000000,5", 3, "2 fields, but the header has 3"),
    ("2024-01-02 00:00:01.0000000,5,6,7", 3, "4 fields, but the header has 3"),
    ("2024-01-02 00:00,5,6", 3, "TIMESTAMP '2024-01-02 00:00' is not YYYY-MM-DD"),
    ("yesterday,5,6", 3, "TIMESTAMP 'yesterday' is not"),
])
def test_azure_malformed_row_names_file_and_line(write, row, line, message):
    p = write("bad.csv", AZURE_HEADER + "2024-01-02 00:00:00.0000000,5,6\n" + row + "\n"
              + "2024-01-02 00:00:02.0000000,5,6\n", crlf=True)
    with pytest.raises(WorkloadError) as ei:
        read_trace(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}:{line}: "), msg
    assert message in msg


def test_error_reports_earliest_line_across_columns(write):
    p = write("bad.csv", AZURE_HEADER
              + "2024-01-02 00:00:00.0000000,5,6\n"
              + "2024-01-02 00:00:01.0000000,5,x\n"    # line 3: output bad
              + "2024-01-02 00:00:02.0000000,y,6\n")   # line 4: prompt bad
    with pytest.raises(WorkloadError, match=re.escape(f"{p}:3: GeneratedTokens 'x'")):
        read_trace(p)


def test_blank_lines_count_in_line_numbers(write):
    p = write("bad.csv", AZURE_HEADER + "\n2024-01-02 00:00:00.0000000,5,6\n\n"
              "2024-01-02 00:00:01.0000000,5,zz\n")
    with pytest.raises(WorkloadError, match=re.escape(f"{p}:5: GeneratedTokens 'zz'")):
        read_trace(p)


def test_max_tokens_below_output_is_an_error(write):
    p = write("bad.csv", "arrived_at,num_prefill_tokens,num_decode_tokens,max_tokens\n"
              "0,5,6,10\n1,5,20,10\n")
    with pytest.raises(WorkloadError, match=re.escape(f"{p}:3: max_tokens 10 is below")):
        read_trace(p)


# ------------------------------------------------------------------ Vidur

def test_vidur_reader_ignores_extra_columns(write):
    p = write("v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens,pd_ratio\n"
              "0.0,374,44,8.5\n4.314579,396,109,3.6\n4.5,879,55,16\n")
    assert detect_format(p) == "vidur"
    reqs = read_trace(p)
    assert [(r.arrival_time_s, r.num_prompt_tokens, r.num_output_tokens) for r in reqs] == [
        (0.0, 374, 44), (4.314579, 396, 109), (4.5, 879, 55)]


def test_vidur_negative_and_nonfinite_times(write):
    p = write("v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n-1.5,1,1\n")
    with pytest.raises(WorkloadError, match=re.escape(f"{p}:3: arrived_at '-1.5' must be >= 0")):
        read_trace(p)
    p = write("v2.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\nnan,1,1\n")
    with pytest.raises(WorkloadError, match=re.escape(f"{p}:3: arrived_at 'nan' is not")):
        read_trace(p)


def test_vidur_integral_floats_accepted(write):
    p = write("v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,374.0,44\n")
    assert read_trace(p)[0].num_prompt_tokens == 374


# ------------------------------------------------------------------ Mooncake

MOONCAKE = (
    '{"timestamp": 0, "input_length": 1000, "output_length": 6, "hash_ids": [0, 1]}\n'
    '{"timestamp": 0, "input_length": 513, "output_length": 4, "hash_ids": [0, 2]}\n'
    '\n'
    '{"timestamp": 3000, "input_length": 20, "output_length": 3, "hash_ids": [7]}\n'
)


def test_mooncake_reader(write):
    p = write("m.jsonl", MOONCAKE)
    assert detect_format(p) == "mooncake"
    reqs = read_trace(p)
    assert [r.arrival_time_s for r in reqs] == [0.0, 0.0, 3.0]  # equal timestamps kept
    assert [r.prefix_hash_ids for r in reqs] == [(0, 1), (0, 2), (7,)]
    assert all(r.prefix_block_tokens == 512 for r in reqs)
    assert [r.num_prompt_tokens for r in reqs] == [1000, 513, 20]
    assert [r.num_output_tokens for r in reqs] == [6, 4, 3]
    assert [r.source_line for r in reqs] == [1, 2, 4]


@pytest.mark.parametrize("line2, message", [
    ('{"timestamp": 5, "input_length": 10}', "output_length is missing"),
    ('{"timestamp": 5, "input_length": 10, "output_length": "x"}',
     'output_length "x" is a string, not a number'),
    ('{"timestamp": "5", "input_length": 10, "output_length": 2}',
     'timestamp "5" is a string, not a number'),
    ('{"timestamp": 5, "input_length": "10", "output_length": 2}',
     'input_length "10" is a string, not a number'),
    ('{"timestamp": true, "input_length": 10, "output_length": 2}',
     "timestamp true is a boolean, not a number"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 2, "max_tokens": "9"}',
     'max_tokens "9" is a string, not a number'),
    # len(hash_ids) == ceil(input_length / 512): 1025 tokens are 3 blocks (512 + 512 + 1)
    ('{"timestamp": 5, "input_length": 1025, "output_length": 2, "hash_ids": [1, 2]}',
     "hash_ids has 2 entries but input_length 1025 needs ceil(1025 / 512) = 3"),
    ('{"timestamp": 5, "input_length": 512, "output_length": 2, "hash_ids": [1, 2]}',
     "hash_ids has 2 entries but input_length 512 needs ceil(512 / 512) = 1"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": []}',
     "hash_ids has 0 entries but input_length 10 needs ceil(10 / 512) = 1"),
    ('{"timestamp": 5, "input_length": 3000000000, "output_length": 2}',
     "input_length 3000000000 must be <= 2,147,483,647"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 0}', "output_length 0 must be >= 1"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": [1, "a"]}',
     "hash_ids"),
    # a cut line: test_truncated_jsonl_line_names_file_line_and_column (file:line:column)
    ('[1, 2, 3]', "expected a JSON object"),
    ('{"timestamp": -5, "input_length": 10, "output_length": 2}', "timestamp -5 must be >= 0"),
    # labels must be JSON strings (before: true became the tenant 'True', {"x": 1} a slice)
    ('{"timestamp": 5, "input_length": 10, "output_length": 2, "tenant": true}',
     "tenant true is a boolean, not a string"),
    ('{"timestamp": 5, "input_length": 10, "output_length": 2, "slice": 5}',
     "slice 5 is a number, not a string"),
])
def test_mooncake_malformed(write, line2, message):
    p = write("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
              + line2 + "\n")
    with pytest.raises(WorkloadError) as ei:
        read_trace(p, format="mooncake")
    assert str(ei.value).startswith(f"{p}:2: ")
    assert message in str(ei.value)


def test_truncated_jsonl_line_names_file_line_and_column(write):
    # line 2 is cut after '"output_length": 2' (55 characters); the decoder wants ',' or
    # '}' as the 56th character, so the message is file:2:56
    line2 = '{"timestamp": 5, "input_length": 10, "output_length": 2'
    assert len(line2) == 55
    p = write("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
              + line2 + "\n")
    with pytest.raises(WorkloadError) as ei:
        read_trace(p, format="mooncake")
    assert str(ei.value) == (f"{p}:2:56: invalid JSON (Expecting ',' delimiter)")
    # a bad character mid-line: 'x' is the 15th character of line 2
    p = write("n.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
              '{"timestamp": x, "input_length": 10, "output_length": 2}\n')
    with pytest.raises(WorkloadError) as ei:
        read_trace(p, format="mooncake")
    assert str(ei.value) == f"{p}:2:15: invalid JSON (Expecting value)"



def test_jsonl_duplicate_key_names_file_line_and_key(write):
    # json keeps the last of two equal keys silently; a trace record refuses it, as YAML does
    p = write("d.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
              '{"timestamp": 5, "input_length": 10, "output_length": 3, "timestamp": 7}\n')
    with pytest.raises(WorkloadError) as ei:
        read_trace(p, format="mooncake")
    assert str(ei.value) == f"{p}:2: key 'timestamp' appears twice in the record"


def test_jsonl_non_utf8_byte_names_file_and_line(tmp_path):
    # 500 good lines (~29 kB, past the text decoder's read-ahead), then line 501 with byte
    # 0xff as its 15th byte: the message names line 501, not a byte offset of the file
    good = b'{"timestamp": 0, "input_length": 10, "output_length": 2}\n' * 500
    bad = b'{"timestamp": \xff, "input_length": 10, "output_length": 2}\n'
    assert bad.index(b"\xff") == 14
    p = tmp_path / "m.jsonl"
    p.write_bytes(good + bad + good)
    with pytest.raises(WorkloadError) as ei:
        read_trace(p, format="mooncake")
    assert str(ei.value) == (f"{p}:501: not UTF-8 text (byte 0xff at column 15 of the line: "
                             "invalid start byte)")


# ------------------------------------------------------------------ generic

def test_generic_csv_with_mapping_and_ms(write):
    p = write("g.csv", "t_ms,in,out,who\n1500,10,3,alice\n500,20,4,bob\n")
    reqs = read_trace(p, columns={"arrival_time_s": "t_ms", "num_prompt_tokens": "in",
                                  "num_output_tokens": "out", "tenant": "who"}, time_unit="ms")
    assert [(r.arrival_time_s, r.num_prompt_tokens, r.tenant) for r in reqs] == [
        (0.5, 20, "bob"), (1.5, 10, "alice")]


def test_generic_csv_own_names_detected(write):
    p = write("g.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens,slice\n0.25,7,8,x\n")
    assert detect_format(p) == "generic_csv"
    (r,) = read_trace(p)
    assert (r.arrival_time_s, r.num_prompt_tokens, r.num_output_tokens, r.slice) == (
        0.25, 7, 8, "x")


def test_generic_jsonl(write):
    p = write("g.jsonl", '{"ts": 2, "p": 5, "o": 6, "priority": 1, "max_tokens": 9}\n'
                         '{"ts": 1, "p": 7, "o": 8, "cancel_after_s": 2.5}\n')
    cols = {"arrival_time_s": "ts", "num_prompt_tokens": "p", "num_output_tokens": "o"}
    assert detect_format(p, cols) == "generic_jsonl"
    a, b = read_trace(p, columns=cols)
    assert (a.arrival_time_s, a.num_prompt_tokens, a.cancel_after_s, a.priority) == (
        1.0, 7, 2.5, 0)
    assert (b.priority, b.max_tokens, b.cancel_after_s) == (1, 9, None)


def test_generic_missing_column_errors(write):
    p = write("g.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(WorkloadError, match="cannot detect the trace format"):
        read_trace(p)
    with pytest.raises(WorkloadError, match="needs a column for 'num_prompt_tokens'"):
        read_trace(p, format="generic_csv", columns={"arrival_time_s": "a"})
    with pytest.raises(WorkloadError, match="column 'zz' .*not found"):
        read_trace(p, columns={"arrival_time_s": "zz"})


def test_explicit_format_mismatch(write):
    p = write("v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n")
    with pytest.raises(WorkloadError, match="format 'azure' needs column"):
        read_trace(p, format="azure")
    with pytest.raises(WorkloadError, match="apply to generic formats"):
        read_trace(p, format="vidur", time_unit="ms")


def test_missing_and_empty_files(write, tmp_path):
    with pytest.raises(WorkloadError, match="not found"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(WorkloadError, match="empty file"):
        read_trace(write("e.csv", ""))


def test_header_only_gives_no_requests(write):
    assert read_trace(write("h.csv", AZURE_HEADER, crlf=True)) == []


def test_unknown_extension_sniffs_json(write):
    p = write("trace.log", MOONCAKE)
    assert detect_format(p) == "mooncake"
    assert math.isclose(read_trace(p)[-1].arrival_time_s, 3.0)


def test_generic_jsonl_labels_must_be_strings_even_in_a_late_batch(write, monkeypatch):
    """A label first seen in the third batch (READ_BATCH_ROWS lowered to 2) that is not a JSON
    string names its line; string labels and null in the same file read as given / default."""
    from simulator.workload import readers
    monkeypatch.setattr(readers, "READ_BATCH_ROWS", 2)
    rows = [f'{{"arrival_time_s": {i}, "num_prompt_tokens": 5, "num_output_tokens": 2}}'
            for i in range(4)]
    head = '{"arrival_time_s": 4, "num_prompt_tokens": 5, "num_output_tokens": 2, '
    good = [*rows, head + '"slice": "code", "tenant": null}']
    reqs = read_trace(write("g.jsonl", "\n".join(good) + "\n"), format="generic_jsonl")
    assert [r.slice for r in reqs] == ["default"] * 4 + ["code"]
    assert [r.tenant for r in reqs] == ["default"] * 5
    bad = [*rows, head + '"slice": {"x": 1}}']
    p = write("b.jsonl", "\n".join(bad) + "\n")
    with pytest.raises(WorkloadError) as ei:
        read_trace(p, format="generic_jsonl")
    assert str(ei.value) == f'{p}:5: slice {{"x": 1}} is a JSON object, not a string'
