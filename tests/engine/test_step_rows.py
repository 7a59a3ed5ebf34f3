"""DecodeRunRows: the step rows of several committed decode runs, built at once, are the rows
of each run written out by hand (constant columns repeated, step index, clock, blocks and KV
tokens per step), and the recorder still counts one decode run per run."""
from __future__ import annotations

import numpy as np

from simulator.engine.step_rows import DecodeRunRows
from simulator.metrics.records import STEP_COLUMNS, RunRecorder
from simulator.scheduling.continuous import StepOutput


def _out(batch: int, waiting: int, kv_tokens: int, padding: int = 0) -> StepOutput:
    out = StepOutput()
    out.reqs = [object()] * batch
    out.num_decode_tokens = out.num_decode_seqs = batch - padding
    out.num_waiting = waiting
    out.kv_tokens = kv_tokens
    out.num_padding_seqs = padding
    return out


def test_rows_of_two_runs_by_hand():
    rec = RunRecorder()
    rows = DecodeRunRows(rec)
    # run 1: replica 0, steps 5..7 (3 of 4 planned), batch 3, 2 waiting, 300 KV tokens held
    rows.add(0, 5, 3, 1.0, np.array([0.5, 0.25, 0.125, 9.0]),
             np.array([1.5, 1.75, 1.875, 10.875]), _out(3, 2, 300),
             np.array([10, 10, 11, 11]), 64)
    # run 2: replica 0, steps 9..10, batch 4 with 1 padding slot (static batching), 4 waiting
    rows.add(0, 9, 2, 4.0, np.array([1.0, 2.0]), np.array([5.0, 7.0]),
             _out(4, 4, 100, padding=1), np.array([20, 21]), 64)
    assert rec.num_steps == 0  # gathered, not recorded yet
    rows.flush()
    t = rec.step_table()
    got = {c: t.column(c).tolist() for c in STEP_COLUMNS}
    assert got["step_index"] == [5, 6, 7, 9, 10]
    assert got["start_time_s"] == [1.0, 1.5, 1.75, 4.0, 5.0]  # a run starts at its own clock
    assert got["step_time_s"] == [0.5, 0.25, 0.125, 1.0, 2.0]
    assert got["end_time_s"] == [1.5, 1.75, 1.875, 5.0, 7.0]
    assert got["batch_size"] == [3, 3, 3, 4, 4]
    assert got["num_decode_seqs"] == got["num_decode_tokens"] == [3, 3, 3, 3, 3]
    assert got["num_waiting"] == [2, 2, 2, 4, 4]
    assert got["kv_blocks_used"] == [10, 10, 11, 20, 21]
    # KV tokens grow by one per useful sequence per step: 300 + 3 j, then 100 + (4 - 1) j
    assert got["kv_tokens_used"] == [300, 303, 306, 100, 103]
    assert got["num_padding_seqs"] == [0, 0, 0, 1, 1]
    for c in ("num_prefill_tokens", "num_prefill_seqs", "num_preempted"):
        assert got[c] == [0] * 5
    assert got["replica_id"] == [0] * 5 and got["num_gpu_blocks"] == [64] * 5
    assert rec.num_step_chunks == 2  # one per decode run, as when each run was its own chunk


def test_flush_without_rows_records_nothing():
    rec = RunRecorder()
    DecodeRunRows(rec).flush()
    assert rec.num_steps == 0 and rec.num_step_chunks == 0
