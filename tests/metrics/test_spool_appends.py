"""The spool's appends written on a thread of their own (simulator/metrics/spool_appends.py):
the files hold exactly what was added, in order; errors surface; the memory held is bounded;
no thread or file outlives a wait."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from simulator.metrics import spool_appends as sa
from simulator.metrics.spool_appends import SpoolAppends
from simulator.metrics.step_table import ColumnSpool


def _arrays(rng, n):
    """``n`` arrays of mixed dtypes and sizes (empty ones too)."""
    out = []
    for _ in range(n):
        size = int(rng.integers(0, 300))
        kind = rng.integers(3)
        out.append(rng.random(size) if kind == 0 else
                   rng.integers(-2**31, 2**31, size, dtype=np.int32) if kind == 1 else
                   rng.integers(-2**62, 2**62, size, dtype=np.int64))
    return out


def test_files_hold_what_was_added_in_order(tmp_path):
    rng = np.random.default_rng(7)
    paths = [str(tmp_path / f"c{i}.bin") for i in range(5)]
    added = {p: [] for p in paths}
    appends = SpoolAppends(batch_bytes=1000)  # many batches
    for a in _arrays(rng, 400):
        p = paths[int(rng.integers(len(paths)))]
        appends.add(p, a)
        added[p].append(a.tobytes())
    appends.wait()
    for p in paths:
        expect = b"".join(added[p])
        got = Path(p).read_bytes() if os.path.exists(p) else b""
        assert got == expect


def test_partial_writes_are_completed(tmp_path, monkeypatch):
    """The system may take part of a writev: the rest follows, in order."""
    real = os.writev
    calls = []

    def short_writev(fd, buffers):
        calls.append(len(buffers))
        first = bytes(buffers[0])
        take = max(1, len(first) // 3)  # a third of the first buffer only
        return real(fd, [first[:take]])

    monkeypatch.setattr(os, "writev", short_writev)
    path = str(tmp_path / "x.bin")
    data = [np.arange(i * 7, i * 7 + 50, dtype=np.int64) for i in range(20)]
    appends = SpoolAppends(batch_bytes=1 << 30)  # one batch: 20 buffers in one writev
    for a in data:
        appends.add(path, a)
    appends.wait()
    assert calls[0] == 20 and len(calls) > 20
    assert np.array_equal(np.fromfile(path, dtype=np.int64), np.concatenate(data))


def test_more_buffers_than_one_writev_takes(tmp_path, monkeypatch):
    monkeypatch.setattr(sa, "_IOV_MAX", 3)
    path = str(tmp_path / "x.bin")
    data = [np.full(4, i, dtype=np.int32) for i in range(10)]
    appends = SpoolAppends(batch_bytes=1 << 30)
    for a in data:
        appends.add(path, a)
    appends.wait()
    assert np.array_equal(np.fromfile(path, dtype=np.int32), np.concatenate(data))


def test_a_failed_write_is_raised_at_wait_and_after(tmp_path):
    bad = tmp_path / "d.bin"
    bad.mkdir()  # opening a folder to append fails
    good = str(tmp_path / "g.bin")
    appends = SpoolAppends(batch_bytes=1)
    appends.add(good, np.arange(3))
    appends.add(str(bad), np.arange(3))
    with pytest.raises(IsADirectoryError):
        appends.wait()
    with pytest.raises(IsADirectoryError):  # the files lack rows: every later call says so
        appends.add(good, np.arange(3))
    appends.close()


def test_wait_ends_the_thread_and_closes_the_files(tmp_path):
    before = threading.active_count()
    appends = SpoolAppends(batch_bytes=8)
    appends.add(str(tmp_path / "a.bin"), np.arange(4))
    assert threading.active_count() == before + 1
    appends.wait()
    assert threading.active_count() == before and not appends._fds
    appends.add(str(tmp_path / "a.bin"), np.arange(4, 8))  # starts again
    appends.wait()
    assert np.array_equal(np.fromfile(tmp_path / "a.bin", dtype=np.int64), np.arange(8))
    appends.close()
    with pytest.raises(ValueError, match="closed"):
        appends.add(str(tmp_path / "a.bin"), np.arange(1))


def test_batches_waiting_for_the_thread_are_bounded(tmp_path, monkeypatch):
    """While the thread cannot write, at most MAX_QUEUED batches wait: the next add waits
    (the simulation holds at most (MAX_QUEUED + 1) batches), and goes on once it writes."""
    release = threading.Event()
    real = sa._write_all

    def blocked(fd, arrays):
        release.wait(30)
        real(fd, arrays)

    monkeypatch.setattr(sa, "_write_all", blocked)
    path = str(tmp_path / "x.bin")
    appends = SpoolAppends(batch_bytes=8)  # each 8-byte add is a batch
    done = []

    def adder():
        for i in range(sa.MAX_QUEUED + 3):
            appends.add(path, np.array([i], dtype=np.int64))
        done.append(True)

    t = threading.Thread(target=adder)
    adder_waits = threading.Event()

    class Watched(threading.Condition):
        def wait(self, timeout=None):
            if threading.current_thread() is t:  # the adder waits for the thread
                adder_waits.set()
            return super().wait(timeout)

    appends._cond = Watched()
    t.start()
    assert adder_waits.wait(30)
    assert len(appends._queue) == sa.MAX_QUEUED and not done
    release.set()
    t.join(30)
    appends.wait()
    assert done
    assert np.array_equal(np.fromfile(path, dtype=np.int64), np.arange(sa.MAX_QUEUED + 3))


def test_close_drops_what_is_not_written(tmp_path):
    appends = SpoolAppends(batch_bytes=1 << 30)
    appends.add(str(tmp_path / "a.bin"), np.arange(10))
    appends.close()  # never handed over
    assert not (tmp_path / "a.bin").exists()
    appends.close()  # twice: nothing


def test_spool_reads_see_every_append(tmp_path, monkeypatch):
    """A ColumnSpool read right after its appends (no explicit wait) has every row."""
    monkeypatch.setattr(sa, "BATCH_BYTES", 64)
    spool = ColumnSpool(["v", "k"], frozenset({"v"}), tmp_path)
    spool._appends.batch_bytes = 64
    vs, ks = [], []
    for i in range(50):
        v, k = np.arange(i, i + 7) * 0.5, np.arange(i, i + 7)
        spool.append({"v": v, "k": k})
        vs.append(v)
        ks.append(k)
        if i % 9 == 0:  # reads between appends too
            assert np.array_equal(spool.read("v"), np.concatenate(vs))
    assert np.array_equal(spool.read("v"), np.concatenate(vs))
    assert np.array_equal(spool.read("k"), np.concatenate(ks))
    folder = spool.folder
    spool.close()
    assert not folder.exists()


def test_remove_spool_removes_every_file_and_the_folder(tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir()
    appends = SpoolAppends(batch_bytes=8)
    for i in range(5):
        appends.add(str(folder / f"c{i}.bin"), np.arange(10))
    (folder / "sub").mkdir()  # not a spool file: rmtree takes it
    sa.remove_spool(str(folder), appends)
    assert not folder.exists()
    with pytest.raises(ValueError, match="closed"):
        appends.add(str(folder / "c0.bin"), np.arange(1))
    sa.remove_spool(str(folder), appends)  # again: nothing raised


def test_reading_threads_wait_together(tmp_path):
    """Several threads reading a spool with appends pending (a long run's summary lane and
    steps writer read it first at once): every one waits for the writes (review finding: an
    unlocked wait joined a thread not started yet, or returned before the write)."""
    for trial in range(30):
        spool = ColumnSpool(["v"], frozenset({"v"}), tmp_path)
        spool._appends.batch_bytes = 1 << 30  # pending until the first read
        for i in range(20):
            spool.append({"v": np.arange(i * 10, i * 10 + 10, dtype=float)})
        errors, got = [], []

        def read(spool=spool, got=got, errors=errors):
            try:
                got.append(spool.read("v").sum())
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and got == [float(np.arange(200).sum())] * 4, trial
        spool.close()


def test_any_error_of_the_thread_is_raised_not_waited_for(tmp_path, monkeypatch):
    """An error other than OSError in the writing thread (memory) is raised by the next call,
    not left to hang the next add behind a dead thread."""
    def fail(fd, arrays):
        raise MemoryError("no memory for the write")

    monkeypatch.setattr(sa, "_write_all", fail)
    appends = SpoolAppends(batch_bytes=8)
    for i in range(sa.MAX_QUEUED + 2):  # more batches than may wait
        try:
            appends.add(str(tmp_path / "a.bin"), np.arange(2))
        except MemoryError:
            break
    with pytest.raises(MemoryError):
        appends.wait()
    appends.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_forked_child_neither_hangs_nor_removes_the_parents_spool(tmp_path):
    spool = ColumnSpool(["v"], frozenset({"v"}), tmp_path)
    spool.append({"v": np.arange(5.0)})
    spool._appends._cond.acquire()  # as the parent's thread may hold it at the fork
    pid = os.fork()
    if pid == 0:  # the child: close its copy (its finalizer) and leave
        import signal
        signal.alarm(20)  # a hang ends the child with SIGALRM
        try:
            spool.close()
            code = 0
        except BaseException:  # noqa: BLE001 - any failure is the child's exit code
            code = 3
        os._exit(code)
    spool._appends._cond.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert spool.folder.is_dir()  # the parent's folder stays
    assert np.array_equal(spool.read("v"), np.arange(5.0))
    spool.close()
