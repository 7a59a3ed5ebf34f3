"""A recorder asked for the step-time breakdown (``RunRecorder(step_cost=True)``) carries its
five float columns through packing, the disk spool and its sort, exactly as recorded; one not
asked has the step table's columns only."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import make_scenario, synthetic_workload

from simulator.metrics import records
from simulator.metrics.records import (
    STEP_COLUMNS,
    STEP_COST_COLUMNS,
    STEP_FLOAT_COLUMNS,
    RunRecorder,
)
from simulator.runs.scenario import run_scenario

COLUMNS = STEP_COLUMNS + STEP_COST_COLUMNS


def _row(i: int) -> tuple:
    rid, idx, t = i % 3, i // 3, 0.25 * i  # three replicas interleaved: the spool re-sorts
    base = (rid, idx, t, 0.5, t + 0.5, i % 5, 7 * i, 2 * i, 1, i % 4, i % 6, i % 9, 64, 0,
            3 * i, i % 2)
    return base + (0.25 + i / 1024, 1 / 3, 0.125 - i / 1024, 0.0, 0.125)


def test_recorder_without_the_breakdown_has_the_step_columns_only():
    rec = RunRecorder()
    assert rec.step_columns == STEP_COLUMNS and rec.step_float_columns == STEP_FLOAT_COLUMNS
    rec = RunRecorder(step_cost=True)
    assert rec.step_columns == COLUMNS
    assert rec.step_float_columns == STEP_FLOAT_COLUMNS | set(STEP_COST_COLUMNS)


@pytest.mark.parametrize("spool", [False, True])
def test_breakdown_columns_survive_packing_spool_and_sort(monkeypatch, spool):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 8)
    if spool:
        monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)  # every chunk goes to disk
    rec = RunRecorder(step_cost=True)
    n = 30
    for i in range(20):
        rec.add_step(_row(i))
    # and a chunk, as a replica's decode runs arrive
    rows = [_row(i) for i in range(20, n)]
    rec.add_step_chunk({c: np.array([r[k] for r in rows]) for k, c in enumerate(COLUMNS)})
    t = rec.step_table()
    assert t.is_spooled == spool and t.columns == COLUMNS and len(t) == n
    want = sorted((_row(i) for i in range(n)), key=lambda r: (r[0], r[1]))
    for k, c in enumerate(COLUMNS):
        got = t.column(c)
        assert got.dtype == (np.float64 if c in rec.step_float_columns else np.int64), c
        np.testing.assert_array_equal(got, [r[k] for r in want], err_msg=c)
    assert list(t.to_pandas().columns) == COLUMNS


def test_a_spooled_run_writes_the_breakdown_of_the_in_memory_one(monkeypatch, tmp_path):
    sc = make_scenario({"perf": {"record_step_cost": True}},
                       workload=synthetic_workload(80, 20))
    small = run_scenario(sc, write=False, figures=False)
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 64)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 1)
    spooled = run_scenario(sc, outdir=tmp_path, figures=False, table_format="csv")
    assert spooled.step_table.is_spooled and not small.step_table.is_spooled
    written = pd.read_csv(tmp_path / "steps.csv")
    assert list(written.columns) == COLUMNS
    for c in COLUMNS:  # CSV keeps every double exactly
        np.testing.assert_array_equal(written[c].to_numpy(), small.steps[c].to_numpy(),
                                      err_msg=c)
