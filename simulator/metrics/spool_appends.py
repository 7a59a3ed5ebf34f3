"""A step spool's appends written on a thread of their own, in batches.

A long run spools its step table (and its inter-token gaps) to raw column files as it goes
(:class:`~simulator.metrics.step_table.ColumnSpool`): a decode-run chunk of a few thousand
rows a column at a time, about 7 GB of ``write`` calls in the ServeGen day (90 million steps).
Each write copies into the page cache, and the kernel's work for it (new page-cache pages,
the copy) ran on the simulation's thread: ``_append_bytes`` was 4% of the day's simulation
(6.4 s in ``py-spy``), while the machine's second core had nothing to do. Here the spool
hands the column arrays over instead (:meth:`SpoolAppends.add`): they are gathered into a
batch of about :data:`BATCH_BYTES`, and a thread writes each batch, each column's arrays in
one ``os.writev`` (the system call runs without the interpreter lock, beside the simulation),
to files it keeps open.

The files end up with the same bytes in the same order: one thread writes every batch, in
the order they were handed over, and a column's arrays in the order they were added. A
reader waits for every write first (:meth:`SpoolAppends.wait`), and a write that failed (a
full disk) raises its ``OSError`` there and at every :meth:`SpoolAppends.add` after it (any
other error of the thread too): the run stops with it, as it did at the failing write before
(a few chunks later). Several threads may read at once (a long run's summary lane and steps
writer): they wait together. A forked child forgets the parent's thread and locks; the
parent's writes in flight are not waited for there. At most :data:`MAX_QUEUED` full
batches wait for the thread (the simulation waits for it beyond that), so the memory held is
bounded: ``(MAX_QUEUED + 1) x BATCH_BYTES`` at most (the batches handed over, the one being
gathered).
"""
from __future__ import annotations

import os
import shutil
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["BATCH_BYTES", "MAX_QUEUED", "SpoolAppends", "remove_spool"]

#: Bytes gathered before a batch goes to the writing thread. The thread takes the interpreter
#: lock back after each system call, which can take a switch interval (5 ms) while the
#: simulation runs: a batch's one ``writev`` per column keeps those waits few (16 columns: 80
#: ms a batch at most, while the ServeGen day's simulation gathers 8 MiB in about 160 ms on
#: this project's machine). Small enough that the batches held (24 MiB at most) stay a small
#: part of a run's peak memory (the million-request run: 1.36 GiB with 16 MiB batches, 1.30
#: before).
BATCH_BYTES = 8 << 20

#: Full batches handed to the thread and not written yet (the one it writes included) before
#: :meth:`SpoolAppends.add` waits for it.
MAX_QUEUED = 2

#: Buffers per ``os.writev`` call (POSIX's ``IOV_MAX`` is at least 16; Linux allows 1024).
_IOV_MAX = 1024

#: Flags of a spool file opened to append (binary on every system)
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)


def _write_all(fd: int, arrays: list[np.ndarray]) -> None:
    """Write the bytes of ``arrays`` (contiguous) to ``fd`` in order: ``os.writev`` of up to
    :data:`_IOV_MAX` at a time where the system has it, the rest of a partial write (the
    system may take part of a call) again until nothing is left."""
    views = [memoryview(a).cast("B") for a in arrays if a.nbytes]
    writev = getattr(os, "writev", None)
    while views:
        head = views[:_IOV_MAX]
        done = writev(fd, head) if writev is not None else os.write(fd, head[0])
        # drop what was written: whole buffers, then the front of a partial one
        while views and done >= len(views[0]):
            done -= len(views[0])
            views.pop(0)
        if done:
            views[0] = views[0][done:]


class SpoolAppends:
    """Appends to files, written by a thread of its own in batches (see the module
    docstring). The thread starts at the first batch handed over and ends at :meth:`wait`
    or :meth:`close`; the files are open only while it runs.

    Parameters
    ----------
    batch_bytes : int
        Bytes gathered before a batch is handed to the thread (default :data:`BATCH_BYTES`).
    """

    def __init__(self, batch_bytes: int | None = None) -> None:
        self.batch_bytes = BATCH_BYTES if batch_bytes is None else batch_bytes
        self._batch: dict[str, list[np.ndarray]] = {}
        self._gathered = 0
        self._cond = threading.Condition()
        self._waiting = threading.Lock()  # wait() from several reading threads at once
        self._queue: deque[dict[str, list[np.ndarray]]] = deque()
        self._error: BaseException | None = None
        self._closed = False
        self._stopping = False        # the thread ends once the queue is empty
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._fds: dict[str, int] = {}

    def add(self, path: str, data: np.ndarray) -> None:
        """Append the bytes of ``data`` (a contiguous array, not changed afterwards) to the
        file at ``path`` (created if missing), after what was added before.

        Raises
        ------
        OSError
            A write of an earlier batch failed (or whatever else the writing thread raised).
        ValueError
            After :meth:`close`.
        """
        if self._closed:
            raise ValueError("the spool's appends are closed")
        self._raise_error()
        self._batch.setdefault(path, []).append(data)
        self._gathered += data.nbytes
        if self._gathered >= self.batch_bytes:
            self._hand_over()

    def wait(self) -> None:
        """Return once every byte added so far is in its file; the thread then stops and
        the files are closed (a spool read for its summary holds neither; a later
        :meth:`add` starts them again).

        Raises
        ------
        OSError
            A write failed (or whatever else the writing thread raised).
        """
        self._own_locks()
        with self._waiting:
            if self._batch:
                self._hand_over()
            self._stop_thread()
        self._raise_error()

    def close(self) -> None:
        """Stop the thread (the batches not written yet are dropped) and close the files."""
        if self._closed:
            return
        self._closed = True
        self._batch, self._gathered = {}, 0
        self._own_locks()
        with self._cond:
            self._queue.clear()
        self._stop_thread()

    def _stop_thread(self) -> None:
        """Let the thread write what is queued, end it and close the files."""
        thread = self._thread  # (this process's: every caller took its own locks first)
        if thread is not None:
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
            thread.join()
        self._thread, self._stopping = None, False
        self._close_files()

    def _raise_error(self) -> None:
        """Raise the failed write's error (again at every later call: the files lack rows)."""
        if self._error is not None:
            raise self._error

    def _hand_over(self) -> None:
        """Queue the gathered batch for the thread, waiting while :data:`MAX_QUEUED` are
        queued already."""
        batch, self._batch, self._gathered = self._batch, {}, 0
        self._own_locks()
        with self._cond:
            while len(self._queue) >= MAX_QUEUED and self._error is None:
                self._cond.wait()
            if self._error is None:
                self._queue.append(batch)
                self._cond.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="servesim-spool-appends",
                                            daemon=True)
            self._thread.start()

    def _own_locks(self) -> None:
        """In a forked child, forget the parent's thread, queue and locks (held, maybe, by
        threads that do not exist here) before any is used: :meth:`add` takes none, the
        batch's hand-over, :meth:`wait` and :meth:`close` call this first."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._cond = threading.Condition()
            self._waiting = threading.Lock()
            self._queue, self._thread = deque(), None

    def _run(self) -> None:
        """The thread: write the queued batches in order until told to stop."""
        cond = self._cond
        while True:
            with cond:
                while not self._queue and not self._stopping:
                    cond.wait()
                if not self._queue:
                    return
                batch = self._queue[0]  # (left queued while written: add waits for it)
            try:
                if self._error is None:
                    for path, arrays in batch.items():
                        _write_all(self._fd(path), arrays)
            except BaseException as e:  # noqa: BLE001 - raised by the next add or wait (a dead
                self._error = e            # thread would leave add waiting for it for ever)
            finally:
                with cond:  # (close may have emptied the queue meanwhile)
                    if self._queue and self._queue[0] is batch:
                        self._queue.popleft()
                    cond.notify_all()
                del batch

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, _APPEND, 0o666)
        return fd

    def _close_files(self) -> None:
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except OSError:
                pass


def remove_spool(folder: str, appends: SpoolAppends, pid: int | None = None) -> None:
    """A spool's finalizer: stop its appends' thread, then remove its folder, its files
    unlinked two at a time (the kernel frees a file's page cache as it is unlinked, without
    the interpreter lock: the ServeGen day's 7 GB of spool took 1.2 s to remove at the end of
    its run, about half that on two threads; 1.9 GB in 8 files: 0.27-0.33 s, 0.14 s).
    Nothing is raised: a file already gone, or no thread to be had at the interpreter's
    shutdown, leaves the rest to ``shutil.rmtree``. ``pid``: the process that made the spool;
    in another (a forked child dropping its copy) nothing is removed: the folder is the
    parent's."""
    if pid is not None and pid != os.getpid():
        return
    appends.close()
    try:
        files = [e.path for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
        if len(files) > 1:
            with ThreadPoolExecutor(2, thread_name_prefix="servesim-spool-remove") as pool:
                list(pool.map(_unlink_quietly, files))
    except (OSError, RuntimeError):
        pass
    shutil.rmtree(folder, True)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

