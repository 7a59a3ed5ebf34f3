"""A run folder holds summary.json only when every file of the run was written: it is removed
first and written last, so an interrupted write (Ctrl-C, a full disk) leaves a folder without
one, never an earlier run's summary beside this run's partial tables."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import simulator.runs.scenario as run_mod
from simulator.cli.main import main


def _run(out) -> int:
    return main(["run", "default", "-q", "--no-figures", "-o", str(out),
                 "--set", "workload.max_requests=5"])


def test_summary_is_written_last_and_an_interrupted_write_leaves_none(tmp_path, monkeypatch):
    out = tmp_path / "o"
    assert _run(out) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["num_requests"] == 5

    def interrupted(*_a, **_k):
        assert not (out / "summary.json").exists()  # the earlier run's is gone already
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "write_run_report", interrupted)
    req = pd.read_parquet(out / "requests.parquet")
    steps = pd.read_parquet(out / "steps.parquet")
    with pytest.raises(KeyboardInterrupt):
        run_mod.write_run_folder(out, first, req, steps, {}, {}, title="t", figures=False,
                                 table_format="parquet")
    assert not (out / "summary.json").exists()


def test_a_complete_rerun_writes_it_again(tmp_path):
    out = tmp_path / "o"
    assert _run(out) == 0 and _run(out) == 0
    assert json.loads((out / "summary.json").read_text())["num_requests"] == 5
