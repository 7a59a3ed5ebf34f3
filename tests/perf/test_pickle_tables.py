"""A pickled run result leaves its table set's loaded tables out and reads them again on
first use (session 6): before, the pickle held 27 MB of H100 tables."""
from __future__ import annotations

import pickle

import pandas as pd
from helpers import REPO_ROOT

from simulator.perf.step_shape import StepShape
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import load_scenario


def test_run_result_round_trip_without_the_loaded_tables():
    sc, base = load_scenario(REPO_ROOT / "scenarios" / "default.yaml")
    sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"max_requests": 50})})
    res = run_scenario(sc, base, write=False, figures=False)
    tables = res.setup.perf.ops.tables
    assert tables._fam  # the run read its tables
    blob = pickle.dumps(res)
    back = pickle.loads(blob)
    assert back.summary == res.summary
    pd.testing.assert_frame_equal(back.requests, res.requests)
    pd.testing.assert_frame_equal(back.steps, res.steps)
    assert back.setup.perf.ops.tables._fam == {}  # not carried: read again on demand
    shape = StepShape(prefill_q=[512], prefill_start=[0], num_decode=8,
                      decode_ctx_total=8 * 700, num_sampled=9)
    assert back.setup.perf.step_time(shape) == res.setup.perf.step_time(shape)
    # the tables alone pickled to 27 MB; the result is now its records and small parts
    assert len(blob) < 5_000_000
