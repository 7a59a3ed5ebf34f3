"""The one executor of servesim: where the tasks of an experiment run (in process, a local
process pool, or a Ray cluster). Sweeps, plans, comparisons and spec-sweeps all go through
:func:`run_tasks` (through :func:`simulator.experiments.runner.run_family` or directly).

Every backend runs ``fn(task, shared)`` for each task and returns the results in task order.
``shared`` holds the large read-only inputs every task needs (the request lists); it is sent
once per worker (process pool initializer) or once per cluster (``ray.put``), not per task.

``fn`` must be a module-level function (picklable by reference) for the process pool and
Ray; the in-process backend (``jobs=1``) accepts any callable.

Temporary files and stops (issue 26 part 5): the workers of a local pool keep their temporary
files (a long run's step and ITL spools) in one folder of the pool, ``servesim-pool-*`` under
``$TMPDIR``, which the pool removes when it ends, whatever ends it (success, a task's error, a
signal); a worker removes its own part when it exits or receives SIGTERM. When the caller is
stopped (Ctrl-C, SIGTERM turned into an exception by the CLI) or a task fails, the pool is
not drained: the tasks not started are cancelled, the running workers are sent SIGTERM (and
SIGKILL after :data:`STOP_GRACE_S`), and the exception carries a note saying how many tasks
had finished (``stop_note``); the results already handed to ``on_result`` are kept.
"""
from __future__ import annotations

import collections
import contextlib
import gc
import math
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import multiprocessing.util as mp_util
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simulator.base.progress import show_warning_line

__all__ = ["BACKENDS", "DEFAULT_RAY_CONNECT_TIMEOUT_S", "ENV_RAY_CONNECT_TIMEOUT",
           "POOL_TMP_PREFIX", "STOP_GRACE_S", "RemoteTraceback", "WorkerDied", "add_note",
           "check_ray_address", "default_jobs", "ray_available", "run_tasks"]

BACKENDS = ("local", "ray")

#: Seconds a ``--address`` gets to accept a TCP connection before ``--backend ray`` gives up
#: (``ray.init`` itself retries an unreachable GCS for minutes). A presentation choice, not a
#: model constant; ``$SERVESIM_RAY_CONNECT_TIMEOUT_S`` overrides it.
DEFAULT_RAY_CONNECT_TIMEOUT_S = 10.0
ENV_RAY_CONNECT_TIMEOUT = "SERVESIM_RAY_CONNECT_TIMEOUT_S"
#: Ray's default ports: the GCS of ``ray start --head`` and the Ray Client server (``ray://``)
_RAY_GCS_PORT, _RAY_CLIENT_PORT = 6379, 10001

Progress = Callable[[int, int], None]
#: ``stop_note(done, total)`` -> the note a stopped run's exception carries
StopNote = Callable[[int, int], str]

#: Prefix of a local pool's temporary folder (under ``$TMPDIR``; removed when the pool ends)
POOL_TMP_PREFIX = "servesim-pool-"
#: Seconds the workers of a stopped pool get to exit on SIGTERM before SIGKILL (a worker in a
#: long numpy call runs its handler when the call returns; whatever it leaves goes with the
#: pool's folder)
STOP_GRACE_S = 2.0

_SHARED: Mapping[str, Any] | None = None
#: this worker's temporary folder (inside its pool's), removed on exit and on SIGTERM
_WORKER_TMP: str | None = None


def add_note(exc: BaseException, text: str) -> None:
    """Append ``text`` to ``exc.__notes__`` (``BaseException.add_note`` of Python 3.11, also
    on 3.10); the CLI prints the notes of a stopped run on its one line."""
    notes = getattr(exc, "__notes__", None)
    if not isinstance(notes, list):
        notes = []
        try:
            exc.__notes__ = notes
        except AttributeError:  # pragma: no cover - an exception type without a __dict__
            return
    notes.append(text)


def default_jobs() -> int:
    """CPU cores this process may use (``os.sched_getaffinity`` where available)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def ray_available() -> bool:
    """Whether ``import ray`` works."""
    try:
        import ray  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return False
    return True


def _connect_timeout_s() -> float:
    raw = os.environ.get(ENV_RAY_CONNECT_TIMEOUT)
    if raw is None or not raw.strip():
        return DEFAULT_RAY_CONNECT_TIMEOUT_S
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{ENV_RAY_CONNECT_TIMEOUT}={raw!r}: not a positive number of seconds")
    return v


def check_ray_address(address: str, timeout_s: float | None = None) -> None:
    """Fail fast when nothing accepts a TCP connection at a Ray ``address``.

    ``ray.init(address=...)`` on an address nothing listens on retries for minutes; this
    probe opens (and closes) one TCP connection to the address's host and port first, within
    ``timeout_s``. ``auto`` (and an empty address) are left to Ray, which fails at once when
    it finds no running cluster.

    Parameters
    ----------
    address : str
        ``host:port`` (the GCS, port 6379 when left out) or ``ray://host:port`` (the Ray
        Client server, port 10001 when left out); an IPv6 host in brackets.
    timeout_s : float, optional
        Seconds to wait for the connection (default ``$SERVESIM_RAY_CONNECT_TIMEOUT_S`` or
        :data:`DEFAULT_RAY_CONNECT_TIMEOUT_S`).

    Raises
    ------
    ValueError
        One line: a malformed address, or the address and why the connection failed (refused,
        timed out, unknown host) with what to do.
    """
    if not address or address.strip().lower() == "auto":
        return
    client = address.startswith("ray://")
    rest = address[len("ray://"):] if client else address
    host, sep, port_s = rest.rpartition(":")
    if not sep or "]" in port_s:  # no port (an IPv6 host in brackets has colons of its own)
        host, port_s = rest, ""
    host = host.strip("[]")
    try:
        port = int(port_s) if port_s else (_RAY_CLIENT_PORT if client else _RAY_GCS_PORT)
    except ValueError:
        port = -1
    if not host or not 0 < port < 65536:
        raise ValueError(f"--address {address}: not a Ray address; use host:port "
                         "(the GCS of 'ray start --head'), ray://host:port or auto")
    t = _connect_timeout_s() if timeout_s is None else float(timeout_s)
    try:
        with socket.create_connection((host, port), timeout=t):
            pass
    except TimeoutError:
        why = f"no answer within {t:g} s"
    except OSError as e:
        why = e.strerror or type(e).__name__
    else:
        return
    raise ValueError(f"--address {address}: no Ray cluster reachable at {host}:{port} ({why}); "
                     "start one there (ray start --head), fix the address, or leave "
                     "--address out to start a local instance")


def _init_worker(shared: Mapping[str, Any], one_line_warnings: bool = False,
                 tmp_parent: str | None = None) -> None:
    """Hold ``shared`` for the worker's tasks; with ``one_line_warnings`` (the parent is the
    CLI) print warnings as the CLI does (one ``servesim: warning:`` line, not Python's
    two-line ``file:line: Category: ...`` with the source echoed).

    With ``tmp_parent`` (a pool worker): the worker's temporary files go to a folder of its
    own inside ``tmp_parent`` (``$TMPDIR`` and :data:`tempfile.tempdir`), removed when the
    worker exits (a pool worker ends with ``os._exit``: ``weakref.finalize`` and ``atexit``
    never run there) or on SIGTERM (then the worker exits at once, status 143); Ctrl-C's
    SIGINT, sent to the whole process group by a terminal, is ignored: the parent stops the
    pool.
    """
    global _SHARED, _WORKER_TMP
    _SHARED = shared
    if one_line_warnings:
        warnings.showwarning = show_warning_line
    if tmp_parent is None:
        return
    _WORKER_TMP = tempfile.mkdtemp(prefix=f"worker-{os.getpid()}-", dir=tmp_parent)
    os.environ["TMPDIR"] = _WORKER_TMP
    tempfile.tempdir = _WORKER_TMP
    mp_util.Finalize(None, shutil.rmtree, args=(_WORKER_TMP, True), exitpriority=100)
    signal.signal(signal.SIGTERM, _worker_terminated)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()  # the shared inputs: later collections (one per task) skip them


def _worker_terminated(signum, frame) -> None:  # pragma: no cover - runs in a pool worker
    """SIGTERM in a pool worker: remove its temporary folder and exit now (128 + signal)."""
    if _WORKER_TMP is not None:
        shutil.rmtree(_WORKER_TMP, ignore_errors=True)
    os._exit(128 + signum)


def _call_in_worker(fn: Callable, task: Any) -> Any:
    try:
        return fn(task, _SHARED)
    finally:
        # what the task left in reference cycles (a run's recorder holding its ITL spool)
        # goes now, with its temporary files, not when the worker exits
        gc.collect()


def _call_with(fn: Callable, task: Any, shared: Mapping[str, Any]) -> Any:
    return fn(task, shared)


def _mp_context(preload: str | None = None):
    methods = mp.get_all_start_methods()
    # forkserver: safe with threads in the parent (progress bars), cheap per worker
    ctx = mp.get_context("forkserver" if "forkserver" in methods else None)
    if preload and ctx.get_start_method() == "forkserver":
        # the server (started once per parent process) imports the task's module, so every
        # worker of this and later pools forks with it loaded instead of importing it anew
        ctx.set_forkserver_preload([preload])
    return ctx


def run_tasks(fn: Callable[[Any, Mapping[str, Any]], Any], tasks: Sequence[Any], *,
              shared: Mapping[str, Any] | None = None, backend: str = "local", jobs: int = 1,
              address: str | None = None, progress: Progress | None = None,
              order: Sequence[int] | None = None,
              on_result: Callable[[int, Any], None] | None = None,
              stop_note: StopNote | None = None) -> list[Any]:
    """Run ``fn(task, shared)`` for every task; results in task order.

    Parameters
    ----------
    fn : callable
        Module-level worker function (``jobs=1`` local: any callable).
    tasks : sequence
        Picklable task descriptions.
    shared : mapping, optional
        Read-only inputs common to all tasks (sent once per worker).
    backend : {"local", "ray"}
        ``local``: in process when ``jobs == 1``, else a pool of ``jobs`` worker
        processes (one pipe each; forkserver where available). ``ray``: one
        Ray task per task (1 CPU each) on the cluster at ``address``, or on a local Ray
        instance started with ``ray.init(num_cpus=jobs)`` and shut down afterwards.
    jobs : int
        Worker processes (local) or CPUs of the local Ray instance.
    address : str, optional
        Ray cluster address (``auto``, ``ray://host:10001``); nodes need the same servesim
        installed.
    progress : callable, optional
        ``progress(done, total)`` after every finished task.
    order : sequence of int, optional
        The order tasks are started in (a permutation of their indices; default: task
        order). Starting the longest first balances a pool (longest-processing-time
        first); results stay in task order whatever the order.
    on_result : callable, optional
        ``on_result(index, result)`` as each task finishes (before ``progress``), so that a
        caller can keep finished work (cache it) even when a later task, or the user with
        Ctrl-C, stops the run.
    stop_note : callable, optional
        ``stop_note(done, total)``: the note (:func:`add_note`) an exception that stops the
        run (Ctrl-C's ``KeyboardInterrupt``, the CLI's SIGTERM) carries, e.g. ``3 of 8 sweep
        points finished (cached)``; ``done`` counts the results handed to ``on_result``.

    Raises
    ------
    ValueError
        Unknown backend, ``jobs < 1``, Ray requested but not installed, a Ray ``address``
        nothing answers at within the connect timeout (:func:`check_ray_address`), or an
        ``order`` that is not a permutation of the task indices.
    """
    shared = dict(shared or {})
    tasks = list(tasks)
    total = len(tasks)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    if order is None:
        order = range(total)
    elif sorted(order) != list(range(total)):
        raise ValueError(f"order must be a permutation of the {total} task indices")
    if total == 0:
        return []
    done = [0]

    def finished(i: int, r: Any) -> None:
        if on_result is not None:
            on_result(i, r)
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    try:
        if backend == "ray":
            return _run_ray(fn, tasks, shared, jobs, address, order, finished)
        if jobs == 1 or total == 1:
            return [_in_process(fn, i, t, shared, finished) for i, t in enumerate(tasks)]
        return _run_pool(fn, tasks, shared, jobs, order, finished)
    except BaseException as e:
        if stop_note is not None and not isinstance(e, Exception):  # a stop, not an error
            add_note(e, stop_note(done[0], total))
        raise


def _in_process(fn, i: int, task, shared, finished) -> Any:
    out = fn(task, shared)
    finished(i, out)
    return out


def _pool_worker(conn, fn: Callable, shared: Mapping[str, Any], one_line_warnings: bool,
                 tmp_parent: str) -> None:  # pragma: no cover - runs in a pool worker
    """A pool worker's loop: ``(index, task)`` in, ``(index, ok, result or exception,
    traceback text)`` out, until ``None`` (or the parent's end of the pipe closes)."""
    _init_worker(shared, one_line_warnings, tmp_parent)
    del shared
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        i, task = msg
        try:
            out = (i, True, _call_in_worker(fn, task), "")
        except Exception as e:  # noqa: BLE001 - sent back, raised by the parent
            out = (i, False, e, traceback.format_exc())
        try:
            conn.send(out)
        except Exception as e:  # noqa: BLE001 - a result or exception that cannot be pickled
            conn.send((i, False, RuntimeError(f"task {i}: its result cannot be sent back "
                                              f"({type(e).__name__}: {e})"), ""))
        del out, task, msg


class RemoteTraceback(Exception):
    """The traceback of a task's exception in a pool worker (its ``__cause__``)."""


class WorkerDied(RuntimeError):
    """A pool worker ended while it ran a task (killed by a signal, out of memory)."""


def _run_pool(fn, tasks, shared, jobs, order, finished) -> list[Any]:
    """The local process pool of :func:`run_tasks` (results in task order).

    Each worker is a process with a pipe of its own (no queue, no helper thread: nothing
    that a killed worker can leave blocked); a task goes to a worker when it is idle, in
    ``order``. On any exception (a task's error, a stop) the workers are stopped at once
    (:func:`_close_pool`), and the pool's temporary folder goes whatever happens.
    """
    results: list[Any] = [None] * len(tasks)
    todo = collections.deque(order)
    tmp = tempfile.mkdtemp(prefix=POOL_TMP_PREFIX)
    ctx = _mp_context(getattr(fn, "__module__", None))
    workers: list[tuple[Any, Any]] = []
    clean = False
    try:
        one_line = warnings.showwarning is show_warning_line
        for _ in range(min(jobs, len(tasks))):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_pool_worker, args=(there, fn, shared, one_line, tmp),
                               daemon=True, name="servesim-worker")
            proc.start()
            there.close()
            workers.append((proc, here))
        running: dict[Any, tuple[int, Any]] = {}

        def feed(proc, conn) -> None:
            if todo:
                i = todo.popleft()
                conn.send((i, tasks[i]))
                running[conn] = (i, proc)
            else:
                conn.send(None)  # no more work: the worker exits

        for proc, conn in workers:
            feed(proc, conn)
        while running:
            for conn in mp_connection.wait(list(running)):
                i, proc = running.pop(conn)
                try:
                    j, ok, value, tb = conn.recv()
                except (EOFError, OSError):
                    proc.join(1.0)
                    raise WorkerDied(f"a worker process ended while it ran task {i} "
                                     f"({_exit_reason(proc.exitcode)})") from None
                if not ok:
                    if tb:
                        raise value from RemoteTraceback(tb)
                    raise value
                results[j] = value
                finished(j, value)
                feed(proc, conn)
        clean = True
    finally:
        with _signals_held():  # a second Ctrl-C must not cut the clean-up short
            _close_pool(workers, clean)
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (" - out of memory?" if name == "SIGKILL" else "")
    return f"exit status {code}"


def _close_pool(workers: list, clean: bool) -> None:
    """Reap the workers: after a clean run they were told to exit; otherwise (an error, a
    stop) each is sent SIGTERM (it removes its temporary folder and exits). Any still there
    after :data:`STOP_GRACE_S` is killed."""
    if not clean:
        for proc, _conn in workers:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc, conn in workers:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        with contextlib.suppress(OSError):
            conn.close()


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT and SIGTERM back (delivered on exit) in the main thread, where Python
    runs signal handlers; a no-op elsewhere or where ``pthread_sigmask`` is missing."""
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _run_ray(fn, tasks, shared, jobs, address, order, finished) -> list[Any]:
    try:
        import ray
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"--backend ray needs Ray (pip install 'ray[default]'): {e}") from None
    started = False
    if not ray.is_initialized():
        if address:
            check_ray_address(address)  # ray.init alone retries an unreachable one for minutes
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        shared_ref = ray.put(shared)
        remote = ray.remote(num_cpus=1)(_call_with)
        index = {remote.remote(fn, tasks[i], shared_ref): i for i in order}
        refs = list(index)
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for r in ready:
                    results[index[r]] = ray.get(r)
                    finished(index[r], results[index[r]])
        except BaseException:
            for r in pending:  # stopped: the tasks still queued or running go too
                with contextlib.suppress(Exception):  # best effort; shutdown follows
                    ray.cancel(r, force=True)
            raise
        return results
    finally:
        if started:
            ray.shutdown()
