"""Hostile corpus, trace messages: a trace that is not the stated format (a Parquet file
stated as text included), a corrupt Parquet file, numbers beyond the float range or written
as infinity, and a missing trace are each refused in one whole line naming the file."""
from __future__ import annotations

import pytest
from command_cases import GC, SCENARIO, _refused, _with

MC = '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'


STATED = [
    ("g.csv", GC, "mooncake", "its first line 'arrival_time_s,num_prompt_tokens,"),
    ("g.csv", GC, "generic_jsonl", "is CSV"),
    ("g.csv", GC, "parquet", "is CSV"),
    ("m.jsonl", MC, "azure", "is JSON Lines"),
    ("m.jsonl", MC, "generic_csv", "is JSON Lines"),
    ("h.txt", "hello\n", "mooncake", "is neither CSV nor JSON"),
]


@pytest.mark.parametrize("name, text, fmt, looks", STATED, ids=[f"{s[0]}-{s[2]}" for s in STATED])
def test_a_trace_that_is_not_the_stated_format(capsys, tmp_path, name, text, fmt, looks):
    t = tmp_path / name
    t.write_text(text)
    s = tmp_path / "s.yaml"
    s.write_text(_with(f"workload: {{trace: {t}, format: {fmt}}}\n"))
    stated = f"{t}: does not look like the stated format {fmt!r}"
    _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o"], [stated, looks, "workload.format"])
    _refused(capsys, ["trace", t, "--format", fmt], [stated, looks, "--format"])


def test_a_parquet_file_stated_as_text(capsys, tmp_path):
    pd = pytest.importorskip("pandas")
    t = tmp_path / "t.parquet"
    pd.DataFrame({"arrival_time_s": [0.0], "num_prompt_tokens": [10],
                  "num_output_tokens": [2]}).to_parquet(t)
    _refused(capsys, ["trace", t, "--format", "generic_csv"],
             ["does not look like the stated format 'generic_csv' (CSV): it is a Parquet file"])


def test_a_corrupt_parquet_file_is_named_in_one_whole_line(capsys, tmp_path):
    pd = pytest.importorskip("pandas")
    good = tmp_path / "good.parquet"
    pd.DataFrame({"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 20],
                  "num_output_tokens": [2, 3]}).to_parquet(good)
    data = good.read_bytes()
    t = tmp_path / "t.parquet"
    t.write_bytes(data[:4] + b"\0" * 50 + data[54:])  # the first page header zeroed
    line = _refused(capsys, ["trace", t], [f"{t}: not a readable Parquet file ("])
    assert line.endswith(")") and line.count("(") == line.count(")"), line


OUT_OF_RANGE = [
    ("g.jsonl", '{"arrival_time_s": 1e400, "num_prompt_tokens": 10, "num_output_tokens": 2}\n',
     "arrival_time_s 1e400 is out of range"),
    ("m.jsonl", '{"timestamp": -1e400, "input_length": 10, "output_length": 2}\n',
     "timestamp -1e400 is out of range"),
    ("n.jsonl", '{"arrival_time_s": 0, "num_prompt_tokens": 1e999, "num_output_tokens": 2}\n',
     "num_prompt_tokens 1e999 is out of range (an integer here is at most 2,147,483,647"),
    ("g.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens\n1E400,10,2\n",
     "arrival_time_s '1E400' is out of range"),
]


@pytest.mark.parametrize("name, text, needle", OUT_OF_RANGE, ids=[c[0] for c in OUT_OF_RANGE])
def test_a_number_beyond_the_float_range_is_out_of_range(capsys, tmp_path, name, text, needle):
    t = tmp_path / name
    t.write_text(text)
    line = _refused(capsys, ["trace", t], [f"{t}:", needle])
    assert " inf " not in line, line


def test_infinity_written_as_such_is_not_finite(capsys, tmp_path):
    t = tmp_path / "g.csv"
    t.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\ninf,10,2\n")
    _refused(capsys, ["trace", t], ["arrival_time_s 'inf' is not a finite number"])


def test_a_missing_trace_reads_like_the_other_missing_files(capsys, tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    line = _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o", "--trace", "nope.csv"],
                    ["trace file 'nope.csv' not found (looked in: "])
    assert "traces file" not in line
    looked = line.split("looked in: ", 1)[1].rstrip(")").split(", ")
    assert len(looked) == len(set(looked)), looked  # each folder once
