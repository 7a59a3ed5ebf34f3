"""Progress of long work, visible both on a terminal and in logs.

One helper for every long command (``run``, ``compare``, ``sweep``, ``plan``, ``calibrate``,
``validate``)::

    from simulator.base.progress import progress
    with progress("sweep points", enabled=not args.quiet, force=args.progress) as cb:
        run_sweep(..., progress=cb)            # cb(done, total) as work finishes

- On a terminal (stderr is a TTY): a rich progress bar (count, elapsed, time left) that
  disappears when done.
- Otherwise (logs, CI, a pipe): plain lines on stderr,
  ``servesim: sweep points: 12/54 (22%), 31 s elapsed, ~110 s left``, at most one every
  ``interval_s`` seconds (default 10 s, ``$SERVESIM_PROGRESS_INTERVAL_S``), so short work
  prints nothing and long work shows it is alive. With ``force`` (``--progress``) a
  ``started`` line is printed at once and a line at every further 10% of the total; a final
  ``done`` line (``stopped`` when an exception, Ctrl-C or SIGTERM ended the work) follows
  whenever any line was printed.

The 10 s and 10% defaults are presentation choices (how often a log shows a sign of life),
not model constants.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

ENV_INTERVAL = "SERVESIM_PROGRESS_INTERVAL_S"
DEFAULT_INTERVAL_S = 10.0
#: forced plain lines: one each time another 1/FORCED_PARTS of the total is done
FORCED_PARTS = 10


def _interval_from_env() -> float:
    raw = os.environ.get(ENV_INTERVAL)
    if raw is None or not raw.strip():
        return DEFAULT_INTERVAL_S
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{ENV_INTERVAL}={raw!r}: not a non-negative number of seconds")
    return v


def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 600 else f"{s / 60:.1f} min"


class PlainProgress:
    """Plain-line progress reporter (the non-terminal half of :func:`progress`).

    Parameters
    ----------
    description : str
        What is counted (``simulating requests``, ``sweep points``).
    stream : file, optional
        Where lines go (default ``sys.stderr``).
    interval_s : float, optional
        Least seconds between two periodic lines (default from ``$SERVESIM_PROGRESS_INTERVAL_S``
        or 10 s).
    force : bool
        Also print at the start and at every 10% of the total.
    clock : callable, optional
        Monotonic time in seconds (tests pass a fake one).

    Raises
    ------
    ValueError
        If ``$SERVESIM_PROGRESS_INTERVAL_S`` is set but not a non-negative number.
    """

    def __init__(self, description: str, *, stream: TextIO | None = None,
                 interval_s: float | None = None, force: bool = False,
                 clock: Callable[[], float] = time.monotonic):
        self.description = description
        self.stream = stream
        self.interval_s = _interval_from_env() if interval_s is None else float(interval_s)
        self.force = force
        self.clock = clock
        self.t0 = clock()
        self.last_line = self.t0
        self.lines = 0
        self.done = 0
        self.total: int | None = None
        self.cached = 0  # of ``done``, how many came from a cache (no work was done for them)
        self._part = 0  # tenths of the total reported so far
        if force:
            self._emit("started")

    def _emit(self, text: str) -> None:
        print(f"servesim: {self.description}: {text}", file=self.stream or sys.stderr,
              flush=True)
        self.lines += 1
        self.last_line = self.clock()

    def _status(self, now: float) -> str:
        el = now - self.t0
        if self.total:
            frac = self.done / self.total
            text = f"{self.done:,}/{self.total:,} ({frac:.0%}), {_fmt_s(el)} elapsed"
            if 0 < frac < 1:
                text += f", ~{_fmt_s(el * (1 - frac) / frac)} left"
            return text
        return f"{self.done:,} done, {_fmt_s(el)} elapsed"

    #: callers may pass ``cached=`` (see :func:`report_cached`)
    accepts_cached = True

    def update(self, done: int, total: int | None = None, *, cached: int | None = None) -> None:
        """Record progress (``done`` of ``total`` units, ``cached`` of them taken from a
        cache) and print a line when one is due."""
        self.done = int(done)
        if cached is not None:
            self.cached = int(cached)
        if total is not None:
            self.total = int(total)
        now = self.clock()
        due = now - self.last_line >= self.interval_s
        if self.force and self.total:
            part = self.done * FORCED_PARTS // self.total  # exact in integers
            if part > self._part:
                due = True
                self._part = part
        if due and (self.total is None or self.done < self.total):
            self._emit(self._status(now))

    __call__ = update

    def close(self, stopped: bool = False) -> None:
        """Print the final line if any line was printed (or when forced): ``done, N/M in T``,
        or ``stopped, N/M in T`` when the work ended by an exception (Ctrl-C, SIGTERM, an
        error), so an interrupted log does not read as finished. Results taken from a cache
        are said so: ``done, all N from the cache, in T`` or ``done, N/M (K from the cache)
        in T``."""
        if self.lines or self.force:
            now = self.clock()
            word = "stopped" if stopped else "done"
            el = _fmt_s(now - self.t0)
            if self.cached and self.cached == self.done == self.total and not stopped:
                self._emit(f"{word}, all {self.total:,} from the cache, in {el}")
                return
            n = f"{self.done:,}" + (f"/{self.total:,}" if self.total else "")
            if self.cached:
                n += f" ({self.cached:,} from the cache)"
            self._emit(f"{word}, {n} in {el}")


def show_warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning as one ``servesim: warning:`` line on stderr (no source echo): the
    CLI's :data:`warnings.showwarning`, also installed in its process-pool workers."""
    text = str(message).strip().splitlines()[0] if str(message).strip() else category.__name__
    own = category.__module__.startswith("simulator")
    print(f"servesim: warning: {text if own else f'{category.__name__}: {text}'}",
          file=sys.stderr, flush=True)


@contextmanager
def progress(description: str, *, enabled: bool = True, force: bool = False,
             stream: TextIO | None = None) -> Iterator[Callable[[int, int], None] | None]:
    """Report progress of long work; yields ``callback(done, total)`` (None when disabled).

    Parameters
    ----------
    description : str
        What is counted.
    enabled : bool
        False (``-q``): no output at all; yields None.
    force : bool
        ``--progress``: on a terminal the bar is shown even for short work; in logs a line
        is printed at the start and at every 10%.
    stream : file, optional
        Default ``sys.stderr``; its ``isatty()`` chooses bar or plain lines.
    """
    if not enabled:
        yield None
        return
    out = stream or sys.stderr
    tty = bool(getattr(out, "isatty", lambda: False)())
    if not tty:
        rep = PlainProgress(description, stream=out, force=force)
        try:
            yield rep
        except BaseException:
            rep.close(stopped=True)
            raise
        rep.close()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    prog = Progress("[progress.description]{task.description}", BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                    transient=True, console=Console(file=out))
    task = None

    def cb(done: int, total: int | None = None, *, cached: int | None = None) -> None:
        nonlocal task
        if task is None:
            task = prog.add_task(description, total=total)
        prog.update(task, completed=done, total=total)

    cb.accepts_cached = True  # the bar shows cached results as done; the count is not shown

    prog.start()
    try:
        yield cb
    finally:
        prog.stop()


def report_cached(callback, done: int, total: int, cached: int) -> None:
    """Tell a progress callback that ``done`` of ``total`` units are finished, ``cached`` of
    them taken from a cache.

    Parameters
    ----------
    callback : callable or None
        A ``callback(done, total)``; the reporters of :func:`progress` (which set
        ``accepts_cached``) also receive ``cached=``, so their final line says how many
        results came from the cache. None: nothing is reported.
    done, total : int
        Units finished and units in all.
    cached : int
        Of ``done``, the units taken from a cache.
    """
    if callback is None:
        return
    if getattr(callback, "accepts_cached", False):
        callback(done, total, cached=cached)
    else:
        callback(done, total)


__all__ = ["DEFAULT_INTERVAL_S", "ENV_INTERVAL", "PlainProgress", "progress", "report_cached",
           "show_warning_line"]
