"""The report phase without per-row objects or kept copies (issue 12 part 3): the request
table built from typed chunks is the frame ``DataFrame.from_records`` makes of the same rows,
label comparisons by code say what ``astype(str)`` said, the ITL arrays are read lazily,
the step table has ``shape`` / ``head`` / iteration and a clear error once closed, and a
run's result pickles."""
from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from helpers import make_scenario, summary_without_wall, synthetic_workload

from simulator.metrics import records
from simulator.metrics.columns import Labels
from simulator.metrics.latency import latency_stats
from simulator.metrics.records import REQUEST_COLUMNS, STEP_COLUMNS, RunRecorder
from simulator.metrics.step_table import ClosedTableError
from simulator.runs.scenario import run_scenario


def _scenario(n: int = 90):
    # two tenants and slices, a short queue (some requests rejected: a second reason label)
    return make_scenario(
        {"cluster": {"num_replicas": 2},
         "scheduler": {"max_num_seqs": 4, "admission": {"max_waiting": 2}}},
        workload=synthetic_workload(n=n, rate_rps=60.0, tenants={"a": 0.5, "b": 0.5},
                                    slices={"chat": 0.25, "code": 0.75}))


def test_request_table_is_the_frame_of_its_rows(monkeypatch):
    """Oracle: the rows the recorder made, as pandas builds them (and sorts them)."""
    rows = []
    row = RunRecorder._row

    def keep(self, r, t):
        rows.append(row(self, r, t))
        return rows[-1]

    monkeypatch.setattr(RunRecorder, "_row", keep)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 7)  # many chunks, packed mid-run
    res = run_scenario(_scenario(), write=False)
    want = (pd.DataFrame.from_records(rows, columns=REQUEST_COLUMNS)
            .sort_values("request_id", kind="stable").reset_index(drop=True))
    got = res.requests
    assert len(res.sim.recorder._requests_done) == 90  # packed during the run
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert set(got["reject_reason"]) == {"", "queue_full"}
    assert set(got["tenant"]) == {"a", "b"} and str(got["tenant"].dtype) == "str"


def test_labels_compare_as_the_strings_did():
    df = pd.DataFrame({"status": pd.array(["completed", None, "rejected", "completed"],
                                          dtype=object),
                       "tenant": [1, "1", 2.5, None]})
    st = Labels(df, "status")
    assert (st == "completed").tolist() == [True, False, False, True]
    assert (st == "").tolist() == [False, True, False, False]  # null -> the default ""
    assert (st != "rejected").tolist() == [True, True, False, True]
    assert st.isin(("rejected", "waiting")).tolist() == [False, False, True, False]
    assert (st == "absent").tolist() == [False] * 4
    # astype(str) of 1 and "1" is the same label "1"; null is "default"; sorted by name
    assert Labels(df, "tenant", "default").counts() == {"1": 2, "2.5": 1, "default": 1}
    assert Labels(df, "slice", "default").counts() == {"default": 4}  # missing column
    assert Labels(df.iloc[:0], "slice", "default").counts() == {}


def test_result_reads_the_itl_arrays_lazily_and_pickles(monkeypatch):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 32)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)  # steps and ITL on disk
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 16)
    res = run_scenario(_scenario(), write=False,
                       stop_when=lambda r, now: False)  # a closure on the recorder
    assert res.step_table.is_spooled and res.sim.recorder._itl_spool is not None
    assert res._itl_values_s is None  # nothing read yet: the summary had the statistics
    v, w = res.itl_values_s, res.itl_weights
    assert v.dtype == np.float64 and w.dtype == np.int64 and len(v) == len(w) > 100
    assert latency_stats(v, w) == res.summary["itl_s"]  # the spooled stats are the arrays'
    back = pickle.loads(pickle.dumps(res))
    assert summary_without_wall(back.summary) == summary_without_wall(res.summary)
    pd.testing.assert_frame_equal(back.requests, res.requests)
    for c in STEP_COLUMNS:
        np.testing.assert_array_equal(back.step_table.column(c), res.step_table.column(c))
    np.testing.assert_array_equal(back.itl_values_s, v)
    np.testing.assert_array_equal(back.itl_weights, w)
    assert all(rep.env is None and rep.wake is None for rep in back.sim.replicas)
    assert res.sim.replicas[0].env is not None  # the live result keeps its handles
    assert back.sim.recorder.finish.__func__ is RunRecorder.finish


@pytest.mark.parametrize("spool_after", [0, 10**6])  # on disk / in memory
def test_step_table_shape_head_iteration_and_closing(monkeypatch, spool_after):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 4)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", spool_after)
    rec = RunRecorder()
    for i in range(10):  # replica i % 2, step i // 2: sorted rows (0,0) (0,1) ... (1,4)
        t = float(i)
        rec.add_step((i % 2, i // 2, t, 0.5, t + 0.5, 1, 0, 1, 0, 1, 0, 3, 8, 0, 7, 0))
    t = rec.step_table()
    assert t.is_spooled == (spool_after == 0)
    assert t.shape == (10, len(STEP_COLUMNS))
    h = t.head(3)
    assert list(h.columns) == STEP_COLUMNS and h["replica_id"].tolist() == [0, 0, 0]
    assert h["step_index"].tolist() == [0, 1, 2] and h["start_time_s"].tolist() == [0.0, 2.0, 4.0]
    assert len(t.head(0)) == 0 and len(t.head(50)) == 10 and len(t.head(-7)) == 3
    chunks = list(iter(t))
    assert sum(len(c) for c in chunks) == 10
    assert pd.concat(chunks)["step_index"].tolist() == [0, 1, 2, 3, 4] * 2
    sub = t.loc[t["replica_id"].to_numpy() == 1]
    assert sub.shape == (5, len(STEP_COLUMNS)) and sub.head(2)["start_time_s"].tolist() == [1.0, 3.0]
    t.close()
    if spool_after == 0:
        for read in (lambda: t.column("step_time_s"), lambda: t["batch_size"], t.to_pandas,
                     lambda: t.head(2), lambda: list(t), lambda: sub.column("step_index")):
            with pytest.raises(ClosedTableError, match="step table was closed"):
                read()
        assert len(t) == 10 and t.shape == (10, len(STEP_COLUMNS))  # metadata stays
    else:  # nothing on disk: still readable
        assert t.column("step_index").tolist() == [0, 1, 2, 3, 4] * 2
