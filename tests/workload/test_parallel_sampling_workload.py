"""Parallel sampling in the workload (issue 15 part 5): the optional trace column ``n`` (CSV,
Parquet round trip) and ``workload.parallel_sampling`` (all requests or some slices)."""
from __future__ import annotations

import pytest

from simulator.workload import (
    WorkloadConfig,
    WorkloadError,
    load_workload,
    read_columns,
    write_parquet_trace,
)

CSV = ("arrival_time_s,num_prompt_tokens,num_output_tokens,n\n"
       "0.0,37,5,4\n"
       "0.5,20,3,\n"
       "1.0,64,9,1\n")


def test_trace_column_n_and_its_parquet_round_trip(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(CSV)
    cfg = WorkloadConfig(trace=str(p), format="generic_csv")
    specs = load_workload(cfg, 0)
    assert [s.n for s in specs] == [4, 1, 1]   # an empty cell means 1
    out = tmp_path / "t.parquet"
    write_parquet_trace(read_columns(p, "generic_csv"), out)
    again = load_workload(WorkloadConfig(trace=str(out), format="parquet"), 0)
    assert [s.n for s in again] == [4, 1, 1]


def test_trace_column_n_below_one_is_an_error_naming_the_row(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens,n\n0.0,37,5,0\n")
    with pytest.raises(WorkloadError, match=r"t\.csv:2"):
        load_workload(WorkloadConfig(trace=str(p), format="generic_csv"), 0)


def test_workload_key_sets_n_for_the_chosen_slices(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens,slice\n"
                 "0.0,37,5,code\n0.5,20,3,chat\n")
    cfg = WorkloadConfig(trace=str(p), format="generic_csv",
                         parallel_sampling={"n": 3, "use_beam_search": True,
                                            "slices": ["code"]})
    specs = load_workload(cfg, 0)
    assert [(s.n, s.use_beam_search) for s in specs] == [(3, True), (1, False)]
