"""Parquet traces in and out, and the loud note when the workload config synthesises
tenants, priorities, cancellations or slices instead of reading them from the trace."""
from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import REPO_ROOT

from simulator.cli.main import main
from simulator.workload import (
    WorkloadConfig,
    WorkloadError,
    WorkloadWarning,
    detect_format,
    load_workload,
    read_columns,
    read_trace,
    synthesised_labels,
    write_parquet_trace,
)

GENERIC = ("arrival_time_s,num_prompt_tokens,num_output_tokens,tenant,priority,slice,"
           "cancel_after_s,max_tokens\n"
           "0.5,812,97,acme,1,chat,2.5,100\n"
           "0.25,64,12,globex,0,code,,\n"
           "1.75,2210,388,acme,,chat,0.75,400\n")


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.arrival_time_s, x.num_prompt_tokens, x.num_output_tokens, x.max_tokens,
                x.tenant, x.priority, x.slice, x.cancel_after_s, x.prefix_hash_ids,
                x.prefix_block_tokens) == \
               (y.arrival_time_s, y.num_prompt_tokens, y.num_output_tokens, y.max_tokens,
                y.tenant, y.priority, y.slice, y.cancel_after_s, y.prefix_hash_ids,
                y.prefix_block_tokens)


def test_generic_csv_round_trips_through_parquet(write, tmp_path):
    src = write("g.csv", GENERIC)
    out = write_parquet_trace(read_columns(src), tmp_path / "g.parquet")
    assert detect_format(out) == "parquet"
    _same(read_trace(src), read_trace(out))
    t = pq.read_table(out)
    assert t.column_names == ["arrival_time_s", "num_prompt_tokens", "num_output_tokens",
                              "tenant", "slice", "priority", "cancel_after_s", "max_tokens"]
    assert t.column("arrival_time_s").to_pylist() == [0.25, 0.5, 1.75]   # arrival order
    assert t.column("max_tokens").to_pylist() == [None, 100, 400]
    assert t.schema.metadata[b"servesim.format"] == b"generic_csv"


def test_mooncake_prefix_ids_round_trip(tmp_path):
    src = REPO_ROOT / "traces" / "tiny_mooncake_like.jsonl"
    out = write_parquet_trace(read_columns(src), tmp_path / "m.pq")
    a, b = read_trace(src), read_trace(out)
    _same(a, b)
    assert any(s.prefix_hash_ids for s in b)


def test_parquet_detected_by_magic_bytes_and_mapped_columns(tmp_path):
    p = tmp_path / "no_extension"
    pq.write_table(pa.table({"t_ms": [0, 1500], "in": [10, 20], "out": [1, 2]}), p)
    assert detect_format(p) == "parquet"
    reqs = read_trace(p, columns={"arrival_time_s": "t_ms", "num_prompt_tokens": "in",
                                  "num_output_tokens": "out"}, time_unit="ms")
    assert [r.arrival_time_s for r in reqs] == [0.0, 1.5]


@pytest.mark.parametrize("table, msg", [
    ({"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": ["10", "20"],
      "num_output_tokens": [1, 1]}, r"x.parquet:1: num_prompt_tokens \"10\" is a string"),
    ({"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 0],
      "num_output_tokens": [1, 1]}, r"x.parquet:2: num_prompt_tokens 0 must be >= 1"),
    ({"arrival_time_s": [0.0], "num_output_tokens": [1]},
     r"needs a column for 'num_prompt_tokens'"),
    ({"arrival_time_s": [0.0], "num_prompt_tokens": [3], "num_output_tokens": [1],
      "prefix_hash_ids": [[1, 2]]}, r"'prefix_hash_ids' needs 'prefix_block_tokens'"),
])
def test_bad_parquet_rows_name_the_row(tmp_path, table, msg):
    p = tmp_path / "x.parquet"
    pq.write_table(pa.table(table), p)
    with pytest.raises(WorkloadError, match=msg):
        read_trace(p)


def test_not_parquet_is_a_readable_error(tmp_path):
    p = tmp_path / "y.parquet"
    p.write_bytes(b"PAR1 not really")
    with pytest.raises(WorkloadError, match="not a readable Parquet file"):
        read_trace(p)


def test_cli_trace_to_parquet(write, tmp_path, capsys):
    src = write("g.csv", GENERIC)
    out = tmp_path / "copy" / "g.parquet"
    assert main(["trace", str(src), "--to-parquet", str(out)]) == 0
    text = capsys.readouterr().out
    assert '"parquet":' in text and '"count": 3' in text
    _same(read_trace(src), read_trace(out))
    assert main(["trace", str(src), "--end-s", "1.0", "--to-parquet", str(out)]) == 0
    capsys.readouterr()
    assert len(read_trace(out)) == 2
    assert main(["trace", str(src), "--end-s", "0"]) == 2
    assert "--end-s 0 must be > --start-s 0" in capsys.readouterr().err



def test_cli_trace_window_re_bases_the_parquet_copy(write, tmp_path, capsys):
    # GENERIC arrivals 0.25, 0.5, 1.75; --start-s 0.5 keeps 0.5 and 1.75, written re-based
    # to t - 0.5 = 0.0 and 1.25 (traces/README.md), the prompts staying with their rows
    src = write("g.csv", GENERIC)
    out = tmp_path / "w.parquet"
    assert main(["trace", str(src), "--start-s", "0.5", "--to-parquet", str(out)]) == 0
    capsys.readouterr()
    got = read_trace(out)
    assert [r.arrival_time_s for r in got] == [0.0, 1.25]
    assert [r.num_prompt_tokens for r in got] == [812, 2210]


def test_cli_trace_empty_window_and_nan_are_refused(write, capsys):
    src = write("g.csv", GENERIC)
    # [2, 3) s holds none of 0.25, 0.5, 1.75: an error line, exit 2 (as servesim run)
    assert main(["trace", str(src), "--start-s", "2", "--end-s", "3"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == (f"servesim: error: {src}: no requests in the window [2, 3) s (3 in the "
                       "trace); widen --start-s / --end-s\n")
    assert main(["trace", str(src), "--end-s", "nan"]) == 2
    assert "--end-s nan must be a number of seconds > --start-s 0" in capsys.readouterr().err
    assert main(["trace", str(src), "--start-s", "nan"]) == 2
    assert "--start-s nan must be a finite number of seconds >= 0" in capsys.readouterr().err


# --------------------------------------------------------------------------- synthesised labels
def test_share_tables_and_patience_are_announced(write):
    src = write("a.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,5,5\n1,6,6\n")
    cfg = WorkloadConfig.model_validate({
        "trace": str(src), "tenants": {"a": 0.5, "b": 0.5}, "priorities": {0: 0.5, 1: 0.5},
        "patience": {"dist": "fixed", "value": 5.0}})
    assert synthesised_labels(cfg) == {"tenant": "workload.tenants",
                                       "priority": "workload.priorities",
                                       "cancel_after_s": "workload.patience"}
    with pytest.warns(WorkloadWarning, match=r"tenant, priority, cancel_after_s assigned at "
                                             r"random by the workload config"):
        load_workload(cfg, 0)
    plain = WorkloadConfig.model_validate({"trace": str(src)})
    assert synthesised_labels(plain) == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_workload(plain, 0)


def test_summary_key_and_report_line(tmp_path):
    from helpers import make_scenario, synthetic_workload

    from simulator.report.run import render_run_report
    from simulator.runs.scenario import run_scenario
    sc = make_scenario({}, workload=synthetic_workload(30, 10.0, slices={"x": 0.5, "y": 0.5}))
    s = run_scenario(sc, write=False).summary
    assert s["workload_synthesised"] == {"slice": "workload.slices"}
    md = render_run_report(s, {"name": "t", "workload": {"synthetic": {}}}, figures=())
    assert "> **Note: synthesised request labels: slice (workload.slices)" in md
    assert "## Price sheet (phase-attributed cost)" in md
    plain = make_scenario({}, workload=synthetic_workload(10, 10.0))
    s2 = run_scenario(plain, write=False).summary
    assert s2["workload_synthesised"] == {}
    assert "Note: synthesised" not in render_run_report(s2, {"name": "t"}, figures=())
