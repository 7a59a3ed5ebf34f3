"""DecodeRunRows: the step rows of several committed decode runs, built at once, are the rows
of each run written out by hand (constant columns repeated, step index, clock, blocks and KV
tokens per step), and the recorder still counts one decode run per run; stepped rows gathered
with them are the rows recorded one by one."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.engine import step_rows
from simulator.engine.step_rows import DecodeRunRows, record_step, record_step_row
from simulator.metrics import records
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


class _Kv:
    def __init__(self, used: int) -> None:
        self.num_used_blocks, self.num_gpu_blocks = used, 64


class _Rep:
    def __init__(self, idx: int, step_index: int) -> None:
        self.idx, self.step_index, self.kv, self.run_rows = idx, step_index, _Kv(0), None


def _stepped(prefill: int, decodes: int, waiting: int, kv_tokens: int,
             preempted: int = 0) -> StepOutput:
    out = _out(decodes + (1 if prefill else 0), waiting, kv_tokens)
    out.num_decode_tokens = out.num_decode_seqs = decodes
    out.num_prefill_tokens, out.num_prefill_seqs = prefill, 1 if prefill else 0
    out.preempted = [object()] * preempted
    return out


def test_stepped_rows_gathered_with_the_runs_are_the_rows_recorded_one_by_one():
    """A stepped row gathered as a run of one step (``record_step_row``) is
    ``record_step``'s row, column for column; the replica's rows reach the recorder together,
    in step order, and only decode runs are counted as such."""
    steps = [(_stepped(512, 3, 2, 900, preempted=1), 10, 0.0, 0.25),
             (_stepped(0, 4, 0, 904), 11, 0.25, 0.125),
             (_stepped(64, 4, 5, 972), 12, 0.375, 0.5)]
    by_row, by_one = RunRecorder(), RunRecorder()
    rep_a, rep_b = _Rep(2, 0), _Rep(2, 0)
    for out, used, start, dt in steps:
        rep_a.kv.num_used_blocks = rep_b.kv.num_used_blocks = used
        record_step_row(by_row, rep_a, out, start, dt)
        record_step(by_one, rep_b, out, start, dt)
    assert rep_a.step_index == rep_b.step_index == 3
    assert by_row.num_steps == 0  # gathered by the replica's rows
    # a decode run after the stepped rows: replica 2, steps 3..4
    rep_a.run_rows.add(2, 3, 2, 0.875, [0.125, 0.125], [1.0, 1.125], _out(4, 0, 1000),
                       [13, 13], 64)
    rep_a.run_rows.flush()
    a, b = by_row.step_table(), by_one.step_table()
    for c in STEP_COLUMNS:
        assert a.column(c)[:3].tolist() == b.column(c).tolist(), c
    assert a.column("step_index").tolist() == [0, 1, 2, 3, 4]
    assert a.column("num_prefill_tokens").tolist() == [512, 0, 64, 0, 0]
    assert a.column("num_preempted").tolist() == [1, 0, 0, 0, 0]
    assert a.column("kv_tokens_used").tolist() == [900, 904, 972, 1000, 1004]
    assert a.column("end_time_s").tolist() == [0.25, 0.375, 0.875, 1.0, 1.125]
    assert by_row.num_step_chunks == 1 and by_one.num_step_chunks == 0  # one decode run


def test_stepped_rows_flush_at_the_bound_and_runs_at_theirs(monkeypatch):
    """Stepped rows alone flush at ``MAX_GATHERED_ROWS``; decode runs' rows flush at
    ``FLUSH_ROWS`` of their own (the stepped rows gathered meanwhile not counted)."""
    monkeypatch.setattr(step_rows, "FLUSH_ROWS", 4)
    monkeypatch.setattr(step_rows, "MAX_GATHERED_ROWS", 6)
    rec = RunRecorder()
    rep = _Rep(0, 0)
    for i in range(6):
        record_step_row(rec, rep, _stepped(0, 1, 0, 10 + i), 0.5 * i, 0.5)
    assert rec.num_steps == 0
    record_step_row(rec, rep, _stepped(0, 1, 0, 16), 3.0, 0.5)  # the seventh: six flushed
    assert rec.num_steps == 6
    rows = rep.run_rows
    rows.add(0, 7, 3, 3.5, [0.5] * 3, [4.0, 4.5, 5.0], _out(1, 0, 17), [1] * 3, 64)
    rows.add(0, 10, 1, 5.0, [0.5], [5.5], _out(1, 0, 20), [1], 64)  # 4 rows gathered (+1)
    assert rec.num_steps == 6
    rows.add(0, 11, 1, 5.5, [0.5], [6.0], _out(1, 0, 21), [1], 64)  # run rows >= 4: flushed
    assert rec.num_steps == 11
    rows.flush()
    assert rec.step_table().column("step_index").tolist() == list(range(12))


def test_stepped_rows_leave_the_order_of_the_itl_samples_as_it_was(monkeypatch):
    """The runs' gaps reach the recorder at the flushes their own rows make, also when the
    stepped rows gathered with them flush the rows earlier (``MAX_GATHERED_ROWS``): the ITL
    samples (single gaps and runs' gaps, packed in small chunks here) come out in the order of
    a recorder that takes the stepped rows one by one (``record_step``)."""
    monkeypatch.setattr(step_rows, "FLUSH_ROWS", 6)
    monkeypatch.setattr(step_rows, "MAX_GATHERED_ROWS", 4)
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 5)
    gathered, one_by_one = RunRecorder(), RunRecorder()
    rep_a, rep_b = _Rep(0, 0), _Rep(0, 0)
    rep_b.run_rows = DecodeRunRows(one_by_one)
    t = 0.0
    for i in range(40):
        out = _stepped(8, 2, 1, 100 + i)
        record_step_row(gathered, rep_a, out, t, 0.25)
        record_step(one_by_one, rep_b, out, t, 0.25)
        for rec in (gathered, one_by_one):
            rec.add_itl(0.001 * i, 1 + i % 3)
        t += 0.25
        if i % 3 == 0:  # a run of 3 steps and its 2 gaps between them, seen by 2 sequences
            ends = [t + 0.1 * (1 + j) + 0.001 * i for j in range(3)]
            for rep, rec in ((rep_a, gathered), (rep_b, one_by_one)):
                rep.run_rows.add(0, rep.step_index, 3, t, [0.1] * 3, ends, _out(2, 0, 50),
                                 [5] * 3, 64)
                rep.run_rows.add_itl_gaps(2, 2)
                rep.step_index += 3
            t = ends[-1]
    for rep in (rep_a, rep_b):
        rep.run_rows.flush()
    va, wa = gathered.itl_samples()
    vb, wb = one_by_one.itl_samples()
    assert len(va) == 40 + 14 * 2 and va.tolist() == vb.tolist() and wa.tolist() == wb.tolist()
    a, b = gathered.step_table(), one_by_one.step_table()
    for c in STEP_COLUMNS:
        assert a.column(c).tolist() == b.column(c).tolist(), c


def test_the_breakdown_rows_refuse_stepped_rows():
    """A run that records the steps' breakdown records its stepped rows with
    ``record_step_cost``; its gathered runs refuse a stepped row without it."""
    from simulator.engine.step_rows import DecodeRunCostRows

    rows = DecodeRunCostRows(RunRecorder(step_cost=True), pricer=None)
    with pytest.raises(ValueError, match="record_step_cost"):
        rows.add_step_row(_Rep(0, 0), _stepped(8, 1, 0, 9), 0.0, 0.5)
