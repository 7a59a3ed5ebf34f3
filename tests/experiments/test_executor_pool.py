"""The local process pool of the executor (issue 26 part 5): a stop or an error ends it at
once (the running tasks are not drained), the stopped exception says how many tasks finished,
a worker that dies is named, and the pool's temporary folder goes whatever happens.

"Not drained" is observed without a clock: a slow task writes a marker file when it
completes (after 60 s); a pool that waited for it would leave the marker behind.
"""
from __future__ import annotations

import multiprocessing.util
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from simulator.experiments.executor import POOL_TMP_PREFIX, RemoteTraceback, WorkerDied, run_tasks


def _task(task, shared):
    """``quick``: returns at once (and leaves a file in the worker's temporary folder);
    ``slow``: writes ``task["marker"]`` after 60 s; ``fail``: raises; ``die``: SIGKILLs its
    own worker."""
    kind = task["kind"]
    if kind == "quick":
        fd, _name = tempfile.mkstemp(prefix="left-by-task-")  # in the worker's folder
        os.close(fd)
        return {"kind": kind, "tmp": tempfile.gettempdir()}
    if kind == "slow":
        time.sleep(60)
        Path(task["marker"]).write_text("drained")
        return {"kind": kind}
    if kind == "fail":
        raise ValueError("task failed on purpose")
    os.kill(os.getpid(), signal.SIGKILL)
    return {}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    # multiprocessing's own folder of this process (the forkserver's socket: it lives as long
    # as the process) is made first, outside the folder under test
    multiprocessing.util.get_temp_dir()
    folder = tmp_path / "TMPDIR"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_results_in_task_order_and_every_temporary_file_removed(private_tmp):
    out = run_tasks(_task, [{"kind": "quick"} for _ in range(5)], jobs=2)
    assert [r["kind"] for r in out] == ["quick"] * 5
    # each worker's files were in its own folder inside the pool's, under $TMPDIR
    assert all(Path(r["tmp"]).parent.name.startswith(POOL_TMP_PREFIX) for r in out)
    assert all(Path(r["tmp"]).parent.parent == private_tmp for r in out)
    assert list(private_tmp.iterdir()) == []


def test_a_failing_task_stops_the_pool_without_draining_it(private_tmp, tmp_path):
    marker = tmp_path / "marker"
    tasks = [{"kind": "slow", "marker": str(marker)}, {"kind": "fail"},
             {"kind": "slow", "marker": str(marker)}]
    with pytest.raises(ValueError, match="task failed on purpose") as e:
        run_tasks(_task, tasks, jobs=2)
    assert isinstance(e.value.__cause__, RemoteTraceback)        # the worker's traceback
    assert "_task" in str(e.value.__cause__)
    assert not marker.exists()               # the slow task was stopped, not waited for
    assert list(private_tmp.iterdir()) == []


def test_a_stop_carries_how_many_tasks_finished(private_tmp, tmp_path):
    marker = tmp_path / "marker"
    tasks = [{"kind": "quick"}, {"kind": "slow", "marker": str(marker)},
             {"kind": "slow", "marker": str(marker)}]
    seen = []

    def progress(done, total):
        seen.append(done)
        raise KeyboardInterrupt  # Ctrl-C after the first result, while the slow ones run

    with pytest.raises(KeyboardInterrupt) as e:
        run_tasks(_task, tasks, jobs=2, on_result=lambda i, r: seen.append(("kept", i)),
                  progress=progress, stop_note=lambda done, total: f"{done} of {total} done")
    assert seen == [("kept", 0), 1]
    assert e.value.__notes__ == ["1 of 3 done"]
    assert not marker.exists()
    assert list(private_tmp.iterdir()) == []


def test_a_worker_that_dies_is_named(private_tmp):
    with pytest.raises(WorkerDied, match=r"ended while it ran task 1 \(killed by SIGKILL"):
        run_tasks(_task, [{"kind": "quick"}, {"kind": "die"}], jobs=2)
    assert list(private_tmp.iterdir()) == []
