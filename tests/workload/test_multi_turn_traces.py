"""Traces that carry multi-turn sessions: the generic columns ``session_id``, ``turn_index``
(or ``turn``) and ``think_time_s`` in CSV, JSONL and Parquet, the prefix id chains the
reader builds from them (hand-derived), and the errors that name the file and line."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import REPO_ROOT

from simulator.cli.main import main
from simulator.workload import (
    WorkloadError,
    describe_columns,
    describe_workload,
    read_columns,
    read_trace,
    write_parquet_trace,
)

HEAD = "arrival_time_s,num_prompt_tokens,num_output_tokens,session_id,turn_index,think_time_s\n"
#: file order is not arrival order; session 7's turn 2 prompt (200) is shorter than its
#: history (230 + 30: a client that truncated it)
ROWS = ["5.0,230,30,7,1,4.5",   # line 2
        "0.0,150,30,7,0,",      # line 3
        "1.0,40,10,,,",         # line 4: a request alone
        "9.0,200,40,7,2,3.0",   # line 5
        "2.0,100,20,3,0,",      # line 6
        "3.5,130,25,3,1,1.0"]   # line 7


def check_example(reqs, session_contract, header_lines=1):
    """The requests of :data:`ROWS` (after ``header_lines`` lines), derived by hand."""
    assert [r.arrival_time_s for r in reqs] == [0.0, 1.0, 2.0, 3.5, 5.0, 9.0]
    assert [r.source_line for r in reqs] == [x - 1 + header_lines for x in (3, 4, 6, 7, 2, 5)]
    assert [r.session_id for r in reqs] == [7, None, 3, 3, 7, 7]
    assert [r.turn_index for r in reqs] == [0, 0, 0, 1, 1, 2]
    assert [r.think_time_s for r in reqs] == [0.0, 0.0, 0.0, 1.0, 4.5, 3.0]
    ids = [r.prefix_hash_ids for r in reqs]
    assert ids[1] is None
    # ceil((prompt + output) / 16): 180 -> 12, 120 -> 8, 155 -> 10, 260 -> 17, 240 -> 15
    assert [len(ids[i]) for i in (0, 2, 3, 4, 5)] == [12, 8, 10, 17, 15]
    s7 = (ids[0], ids[4], ids[5])
    assert s7[1][:11] == s7[0][:11]    # floor(min(180, 230) / 16) = 11
    assert s7[2][:12] == s7[1][:12]    # floor(min(260, 200) / 16) = 12
    assert s7[2][12] != s7[1][12]
    assert ids[3][:7] == ids[2][:7]    # floor(min(120, 130) / 16) = 7
    # distinct blocks: 12 + 6 + 3 (session 7) and 8 + 3 (session 3)
    assert len({h for i in (0, 2, 3, 4, 5) for h in ids[i]}) == 32
    assert session_contract(reqs) == 5


def test_generic_csv_sessions(write, session_contract):
    p = write("t.csv", HEAD + "\n".join(ROWS) + "\n")
    check_example(read_trace(p), session_contract)


def test_generic_jsonl_sessions_with_the_turn_name_and_a_mapping(write, session_contract,
                                                                 tmp_path):
    recs = []
    for row in ROWS:
        t, pr, o, s, k, d = row.split(",")
        rec = {"arrival_time_s": float(t), "num_prompt_tokens": int(pr),
               "num_output_tokens": int(o)}
        if s:
            rec.update({"conv": int(s), "turn": int(k)})
        if d:
            rec["pause_s"] = float(d)
        recs.append(json.dumps(rec))
    p = write("t.jsonl", "\n".join(recs) + "\n")
    reqs = read_trace(p, columns={"session_id": "conv", "think_time_s": "pause_s"})
    check_example(reqs, session_contract, header_lines=0)


def test_parquet_sessions_and_its_copy_replay_identically(tmp_path, write, session_contract):
    table = pa.table({
        "arrival_time_s": [5.0, 0.0, 1.0, 9.0, 2.0, 3.5],
        "num_prompt_tokens": pa.array([230, 150, 40, 200, 100, 130], pa.int32()),
        "num_output_tokens": [30, 30, 10, 40, 20, 25],
        "session_id": pa.array([7, 7, None, 7, 3, 3], pa.int64()),
        "turn_index": pa.array([1.0, 0.0, None, 2.0, 0.0, 1.0], pa.float64()),
        "think_time_s": pa.array([4.5, None, None, 3.0, None, 1.0]),
    })
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    reqs = read_trace(p)
    # Parquet rows are numbered from 1 (no header)
    assert [r.source_line for r in reqs] == [2, 3, 5, 6, 1, 4]
    csv_reqs = read_trace(write("t.csv", HEAD + "\n".join(ROWS) + "\n"))
    assert [(r.session_id, r.turn_index, r.think_time_s, r.prefix_hash_ids) for r in reqs] == \
        [(r.session_id, r.turn_index, r.think_time_s, r.prefix_hash_ids) for r in csv_reqs]
    # a copy (what servesim trace --to-parquet writes) carries the columns and the ids
    copy = write_parquet_trace(read_columns(p), tmp_path / "copy.parquet")
    names = pq.read_schema(copy).names
    assert {"session_id", "turn_index", "think_time_s", "prefix_hash_ids"} <= set(names)
    again = read_trace(copy)
    assert [(r.arrival_time_s, r.session_id, r.turn_index, r.think_time_s,
             r.prefix_hash_ids, r.prefix_block_tokens) for r in again] == \
        [(r.arrival_time_s, r.session_id, r.turn_index, r.think_time_s,
          r.prefix_hash_ids, r.prefix_block_tokens) for r in reqs]
    assert session_contract(again) == 5


def test_session_chains_avoid_the_ids_other_rows_of_the_trace_carry(tmp_path, session_contract):
    # a request alone with ids -1 .. -5 (the first ids a chain would take) and one session
    table = pa.table({
        "arrival_time_s": [0.0, 1.0, 2.0],
        "num_prompt_tokens": [80, 40, 80],
        "num_output_tokens": [8, 16, 8],
        "session_id": pa.array([None, 1, 1], pa.int64()),
        "turn_index": pa.array([None, 0, 1], pa.int64()),
        "prefix_hash_ids": pa.array([[-1, -2, -3, -4, -5], None, None], pa.list_(pa.int64())),
        "prefix_block_tokens": pa.array([16, None, None], pa.int64()),
    })
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    reqs = read_trace(p)
    assert reqs[0].prefix_hash_ids == (-1, -2, -3, -4, -5)
    assert [len(r.prefix_hash_ids) for r in reqs[1:]] == [4, 6]  # ceil(56/16), ceil(88/16)
    assert not set(reqs[1].prefix_hash_ids) & set(reqs[0].prefix_hash_ids)
    assert session_contract(reqs) == 2


def test_session_block_tokens_of_a_trace(write):
    p = write("t.csv", HEAD + "\n".join(ROWS) + "\n")
    cols = read_columns(p, session_block_tokens=100)
    lens = {int(cols.lines[i]): len(h) for i, h in enumerate(cols.prefix_hash_ids) if h}
    # ceil((prompt + output) / 100)
    assert lens == {2: 3, 3: 2, 5: 3, 6: 2, 7: 2}
    assert cols.prefix_block_tokens == 100


@pytest.mark.parametrize("rows, line, message", [
    (["0,150,30,7,0,", "5,230,30,7,1,", "9,310,30,7,3,"], 4,
     "session 7: turn 3 follows turn 1 (line 3): turn 2 is missing"),
    (["0,150,30,7,0,", "5,230,30,7,1,", "9,310,30,7,1,"], 4,
     "session 7 has turn 1 twice (lines 3 and 4)"),
    (["0,150,30,7,1,", "5,230,30,7,2,"], 2, "session 7 starts at turn 1: turn 0 is missing"),
    (["0,150,30,7,0,", "5,230,30,abc,1,"], 3, "session_id 'abc' is not an integer"),
    (["0,150,30,1.5,0,"], 2, "session_id '1.5' is not an integer"),
    (["0,150,30,-2,0,"], 2, "session_id '-2' must be between 0 and 9,223,372,036,854,775,807"),
    (["0,150,30,7,x,"], 2, "turn_index 'x' is not an integer"),
    (["0,150,30,,0,"], 2, "turn_index is given but session_id is not"),
    (["0,150,30,7,,"], 2, "turn_index is missing for a turn of a session"),
    (["0,150,30,,,2.0"], 2, "think_time_s is given but session_id is not"),
    (["0,150,30,7,0,-1"], 2, "think_time_s '-1' must be >= 0"),
    # a bad value after a row of no session: its own line and cause (not the lone row's)
    (["0,100,50,1,0,", "1,100,50,,,", "5,200,50,1,1,-3"], 4, "think_time_s '-3' must be >= 0"),
    (["0,100,50,1,0,", "1,100,50,,,", "5,200,50,1,1,abc"], 4, "think_time_s 'abc'"),
    (["5,150,30,7,0,", "5,230,30,7,1,"], 3,
     "session 7: turn 1 arrives at 5 s, not after turn 0 (line 2) at 5 s"),
    (["4,230,30,7,1,", "5,150,30,7,0,"], 2,
     "session 7: turn 1 arrives at 4 s, not after turn 0 (line 3) at 5 s"),
    # two problems: the earliest line is named (a repeat at line 4, a gap at line 6)
    (["0,1,1,1,0,", "1,1,1,1,1,", "2,1,1,1,1,", "3,1,1,2,0,", "4,1,1,2,2,"], 4,
     "session 1 has turn 1 twice"),
])
def test_bad_session_rows_name_the_file_and_line(write, rows, line, message):
    p = write("t.csv", HEAD + "\n".join(rows) + "\n")
    with pytest.raises(WorkloadError) as e:
        read_trace(p)
    assert str(e.value).startswith(f"{p}:{line}: {message}")


def test_parallel_sampling_column_on_a_session_turn_is_an_error(write):
    p = write("t.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens,session_id,"
                       "turn_index,n\n0,10,5,1,0,\n1,20,5,1,1,2\n")
    with pytest.raises(WorkloadError, match=rf"^{p}:3: n 2 on turn 1 of session 1: a session "
                                            "turn has one answer"):
        read_trace(p)


@pytest.mark.parametrize("record, message", [
    ({"session_id": "7", "turn_index": 0}, 'session_id "7" is a string, not a number'),
    ({"session_id": 7, "turn_index": True}, "turn_index true is a boolean, not a number"),
    ({"session_id": 7.0, "turn_index": 0.5}, "turn_index 0.5 is not an integer"),
])
def test_jsonl_session_values_must_be_json_integers(write, record, message):
    base = {"arrival_time_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 5}
    p = write("t.jsonl", json.dumps(base) + "\n" + json.dumps({**base, **record}) + "\n")
    with pytest.raises(WorkloadError, match=f"^{p}:2: {message}"):
        read_trace(p)


def test_64_bit_session_ids_are_read_exactly(write):
    big = 2 ** 63 - 1
    p = write("t.csv", HEAD + f"0,10,5,{big},0,\n1,20,5,{big - 1},0,\n")
    assert [r.session_id for r in read_trace(p)] == [big, big - 1]


def test_given_ids_of_the_wrong_length_are_an_error(tmp_path):
    table = pa.table({"arrival_time_s": [0.0], "num_prompt_tokens": [40],
                      "num_output_tokens": [8], "session_id": [1], "turn_index": [0],
                      "prefix_hash_ids": pa.array([[1, 2]], pa.list_(pa.int64())),
                      "prefix_block_tokens": [16]})
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    with pytest.raises(WorkloadError, match=rf"^{p}:1: turn 0 of session 1 has 2 "
                                            r"prefix_hash_ids but .* need ceil\(\.\.\. / 16\) "
                                            "= 3"):
        read_trace(p)


def test_describe_reports_sessions(write):
    p = write("t.csv", HEAD + "\n".join(ROWS) + "\n")
    cols = read_columns(p)
    d = describe_columns(cols)
    assert d == describe_workload(read_trace(p))
    s = d["sessions"]
    assert s["count"] == 2 and s["turns"] == 5
    assert s["turns_per_session"] == {"mean": 2.5, "p50": 2, "max": 3}
    # think times of turns >= 1: 1.0, 4.5, 3.0
    assert s["think_time_s"] == {"mean": pytest.approx(8.5 / 3), "p50": 3.0, "p90": 4.5,
                                 "max": 4.5}
    # history: min(180, 230) + min(260, 200) + min(120, 130) of 150+230+200+100+130 tokens
    assert s["history_token_share"] == pytest.approx((180 + 200 + 120) / 810)
    plain = write("plain.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,1,1\n")
    assert "sessions" not in describe_columns(read_columns(plain))


def test_cli_refuses_a_session_gap_with_one_line_naming_the_line(write, tmp_path, capsys):
    p = write("gap.csv", HEAD + "0,150,30,7,0,\n5,230,30,7,2,\n")
    base = tmp_path / "b.yaml"
    # the scenario's own workload is synthetic sessions: --trace replaces it
    base.write_text(
        "name: gap\nmodel: llama-3.1-8b\nhardware: {gpu: h100-sxm}\nperf: {source: roofline}\n"
        "workload:\n  synthetic_sessions:\n    arrival: {process: poisson, rate_rps: 1}\n"
        "    num_sessions: 2\n    turns: {dist: fixed, value: 2}\n"
        "    think_time: {dist: fixed, value: 1}\n    message_tokens: {dist: fixed, value: 10}\n"
        "    answer_tokens: {dist: fixed, value: 5}\n")
    assert main(["run", str(base), "-q", "--no-figures", "-o", str(tmp_path / "ok")]) == 0
    assert main(["run", str(base), "--trace", str(p), "-q", "--no-figures", "-o",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == (f"servesim: error: {p}:3: session 7: turn 2 follows turn 0 (line 2): "
                   "turn 1 is missing\n")


def test_cli_trace_window_keeps_whole_sessions_and_its_copy_reads_back(write, tmp_path,
                                                                       capsys):
    p = write("t.csv", HEAD + "\n".join(ROWS) + "\n")
    out = tmp_path / "w.parquet"
    assert main(["trace", str(p), "--start-s", "1.5", "--to-parquet", str(out)]) == 0
    stats = json.loads(capsys.readouterr().out)
    # session 3 starts at 2.0 (kept whole); session 7 at 0.0 and the request alone at 1.0
    # are dropped, though session 7's later turns arrive after 1.5 s
    assert stats["count"] == 2 and stats["sessions"]["count"] == 1
    back = read_trace(out)
    assert [(r.arrival_time_s, r.session_id, r.turn_index) for r in back] == \
        [(0.5, 3, 0), (2.0, 3, 1)]
    assert np.array_equal([len(r.prefix_hash_ids) for r in back], [8, 10])


def test_parquet_session_columns_name_the_row_or_the_column(tmp_path):
    base = {"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 20],
            "num_output_tokens": [5, 5]}
    p = tmp_path / "f.parquet"
    pq.write_table(pa.table({**base, "session_id": [4.0, 1.5], "turn_index": [0, 0]}), p)
    with pytest.raises(WorkloadError, match=rf"^{p}:2: session_id 1.5 is not an integer$"):
        read_trace(p)
    q = tmp_path / "l.parquet"
    pq.write_table(pa.table({**base, "session_id": [[1], [2]], "turn_index": [0, 0]}), q)
    with pytest.raises(WorkloadError, match=rf"^{q}: column 'session_id' has the Parquet "
                                            r"\(Arrow\) type list<.*>, which is not a "
                                            "number"):
        read_trace(q)


def test_the_shipped_session_trace(session_contract):
    reqs = read_trace(REPO_ROOT / "traces" / "tiny_sessions.csv")
    assert session_contract(reqs) == 9 and len(reqs) == 11
    d = describe_workload(reqs)["sessions"]
    assert (d["count"], d["turns_per_session"]["max"]) == (3, 4)
    # each later turn repeats the turn before whole (its prompt = history + a message):
    # 600 + 900 + 1085 (session 0) + 2164 (1) + 390 + 555 (2) of 9704 session prompt tokens
    assert d["history_token_share"] == pytest.approx(5694 / 9704)
    by = {}
    for r in reqs:
        if r.session_id is not None:
            by.setdefault(r.session_id, []).append(r)
    for turns in by.values():
        for p, q in itertools.pairwise(turns):
            assert q.num_prompt_tokens > p.num_prompt_tokens + p.num_output_tokens


def test_a_turn_column_of_a_file_without_sessions_is_not_read(write, tmp_path):
    # e.g. a chat log whose 'turn' holds the speaker: no session column, so no session turns
    p = write("t.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens,turn\n0,5,5,user\n")
    assert read_trace(p)[0].session_id is None
    q = tmp_path / "t.parquet"
    pq.write_table(pa.table({"arrival_time_s": [0.0], "num_prompt_tokens": [5],
                             "num_output_tokens": [5], "turn": [[1, 2]]}), q)
    assert read_trace(q)[0].session_id is None
    # with a session column, 'turn' is the turn index
    r = write("s.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens,session_id,turn\n"
                       "0,5,5,3,0\n1,15,5,3,1\n")
    assert [(x.session_id, x.turn_index) for x in read_trace(r)] == [(3, 0), (3, 1)]


def test_request_stream_session_turns_from_columns(write):
    """The turns the engine holds back (``split_session_turns``) are read from a lazy
    workload's columns without building its specs: the same set as the specs give, by hand
    {(7, 0), (7, 1), (7, 2), (3, 0), (3, 1)}; a trace without sessions gives none."""
    from simulator.engine.sessions import split_session_turns
    from simulator.workload import WorkloadConfig, load_workload

    p = write("t.csv", HEAD + "\n".join(ROWS) + "\n")
    cfg = WorkloadConfig(trace=str(p), format="generic_csv")
    lazy = load_workload(cfg, 0, lazy=True)
    turns = lazy.session_turns()
    assert turns == {(7, 0), (7, 1), (7, 2), (3, 0), (3, 1)}
    assert turns == {(s.session_id, s.turn_index) for s in lazy if s.session_id is not None}

    class Sc:  # only the workload's session arrival is read
        workload = cfg

    first, follow = split_session_turns(Sc, lazy)
    eager_first, eager_follow = split_session_turns(Sc, list(lazy))
    assert first == eager_first and follow == eager_follow and sorted(follow) == [
        (3, 1), (7, 1), (7, 2)]
    plain = write("p.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,5,1\n1,6,2\n")
    alone = load_workload(WorkloadConfig(trace=str(plain), format="generic_csv"), 0, lazy=True)
    assert alone.session_turns() == set()
    assert split_session_turns(Sc, alone) == (alone, {})
