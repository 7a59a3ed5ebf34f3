"""A long run's summary passes on a second thread (simulator.metrics.lanes) and its steps table
written while the summary is computed (simulator.runs.scenario.StepsWriter): the same summary
and the same file bytes as the sequential code, errors raised where they were, and a failed
run leaves no table behind."""
from __future__ import annotations

import hashlib
import threading

import pytest
from helpers import make_scenario, summary_without_wall, synthetic_workload

import simulator.runs.scenario as run_mod
from simulator.metrics import lanes, records
from simulator.metrics.lanes import Lane
from simulator.metrics.tables_io import WriteCancelled, write_table


def _md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_a_lane_without_thread_runs_each_job_when_its_result_is_asked():
    calls = []

    def job(name, fail=False):
        calls.append(name)
        if fail:
            raise ValueError(name)
        return name.upper()

    with Lane(False) as lane:
        a = lane.submit(job, "a")
        b = lane.submit(job, "b", True)
        c = lane.submit(job, "c")
        assert calls == []  # nothing ran yet: the sequential code's order is the caller's
        assert c.result() == "C"
        assert a.result() == "A" and a.result() == "A"  # once
        with pytest.raises(ValueError, match="b"):
            b.result()
    assert calls == ["c", "a", "b"]


def test_a_lane_with_thread_runs_jobs_off_the_caller_and_raises_at_result():
    names = []

    def job(x):
        names.append(threading.current_thread().name)
        if x < 0:
            raise ValueError("negative")
        return x * 2

    with Lane(True) as lane:
        ok, bad = lane.submit(job, 21), lane.submit(job, -1)
        assert ok.result() == 42
        with pytest.raises(ValueError, match="negative"):
            bad.result()
    assert names and all(n.startswith("servesim-summary") for n in names)


def _spooled(monkeypatch):
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 64)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 0)
    monkeypatch.setattr(records, "REQUEST_CHUNK_ROWS", 16)
    return make_scenario({"cluster": {"num_replicas": 2}},
                         workload=synthetic_workload(n=120, rate_rps=30.0))


def _threads(monkeypatch, name: str) -> list[str]:
    """Record the thread each call of ``run_mod.<name>`` runs on."""
    seen: list[str] = []
    real = getattr(run_mod, name)

    def wrapped(*a, **k):
        seen.append(threading.current_thread().name)
        return real(*a, **k)

    monkeypatch.setattr(run_mod, name, wrapped)
    return seen


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_summary_and_files_are_the_same_with_the_second_threads(monkeypatch, tmp_path, fmt):
    sc = _spooled(monkeypatch)
    monkeypatch.setattr(run_mod, "LANE_MIN_ROWS", 10**12)  # sequential, written afterwards
    seq = run_scenario_at(sc, tmp_path / "seq", fmt)
    bins = _threads(monkeypatch, "step_bins")
    energy = _threads(monkeypatch, "run_energy")
    tables = _threads(monkeypatch, "write_table")  # the background steps write
    monkeypatch.setattr(run_mod, "LANE_MIN_ROWS", 0)  # every pass that can goes to the lanes
    par = run_scenario_at(sc, tmp_path / "par", fmt)
    assert par.step_table.is_spooled
    assert bins == ["servesim-summary_0"] and energy == ["servesim-summary_0"]
    assert tables == ["servesim-steps_0"]
    assert summary_without_wall(par.summary) == summary_without_wall(seq.summary)
    for f in (f"steps.{fmt}", f"requests.{fmt}", "report.md", "summary.json"):
        if f == "summary.json":
            continue  # its wall-clock fields differ; compared above
        assert _md5(tmp_path / "seq" / f) == _md5(tmp_path / "par" / f), f
    assert sorted(p.name for p in (tmp_path / "par").iterdir()) == \
        sorted(p.name for p in (tmp_path / "seq").iterdir())


def run_scenario_at(sc, out, fmt):
    return run_mod.run_scenario(sc, outdir=out, figures=False, table_format=fmt)


def _earlier_run(monkeypatch, sc, out) -> dict[str, str]:
    """Run ``sc`` into ``out`` (sequentially) and return its files' digests."""
    monkeypatch.setattr(run_mod, "LANE_MIN_ROWS", 10**12)
    run_mod.run_scenario(sc, outdir=out, figures=False)
    monkeypatch.setattr(run_mod, "LANE_MIN_ROWS", 0)
    return {p.name: _md5(p) for p in out.iterdir()}


def _failing_summary(*_a, **_k):
    raise RuntimeError("summary failed")


def _fails_and_keeps(monkeypatch, sc, out, before: dict, write_table, summarize_run) -> None:
    """Run ``sc`` into ``out`` with these stand-ins: it raises the summary's error and leaves
    the earlier run's files as they were (``before``), nothing of its own (no table, no
    ``.part``)."""
    monkeypatch.setattr(run_mod, "write_table", write_table)
    monkeypatch.setattr(run_mod, "summarize_run", summarize_run)
    with pytest.raises(RuntimeError, match="summary failed"):
        run_mod.run_scenario(sc, outdir=out, figures=False)
    assert {p.name: _md5(p) for p in out.iterdir()} == before


def test_a_failed_summary_stops_the_steps_write_and_keeps_the_earlier_run(monkeypatch,
                                                                          tmp_path):
    sc = _spooled(monkeypatch)
    out = tmp_path / "o"
    before = _earlier_run(monkeypatch, sc, out)
    assert "summary.json" in before and "steps.parquet" in before
    real = run_mod.write_table

    def after_stop(df, folder, stem, fmt, stop=None, ahead=True):
        assert stop is not None and stop.wait(30)  # starts once the run has failed
        return real(df, folder, stem, fmt, stop, ahead)

    _fails_and_keeps(monkeypatch, sc, out, before, after_stop, _failing_summary)


def test_a_written_table_of_a_failed_run_is_removed(monkeypatch, tmp_path):
    """Review finding: the write done before the summary failed left a lone steps table (and
    the folder had been cleared of the earlier run's outputs before the summary)."""
    sc = _spooled(monkeypatch)
    out = tmp_path / "o"
    before = _earlier_run(monkeypatch, sc, out)
    written = threading.Event()
    real = run_mod.write_table

    def signal(*a, **k):
        try:
            return real(*a, **k)
        finally:
            written.set()

    def failing_after_write(*_a, **_k):
        assert written.wait(30)
        assert (out / f"{run_mod.StepsWriter.INFLIGHT_STEM}.parquet").is_file()
        raise RuntimeError("summary failed")

    _fails_and_keeps(monkeypatch, sc, out, before, signal, failing_after_write)


def test_a_stopped_table_write_raises_and_leaves_nothing(monkeypatch, tmp_path):
    sc = _spooled(monkeypatch)
    res = run_mod.run_scenario(sc, write=False, figures=False)
    stop = threading.Event()
    stop.set()
    out = tmp_path / "t"
    out.mkdir()
    with pytest.raises(WriteCancelled):
        write_table(res.step_table, out, "steps", "parquet", stop)
    assert list(out.iterdir()) == []
    assert lanes.LANE_MIN_ROWS > 0
