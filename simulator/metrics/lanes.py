"""A second lane for a long run's summary: passes over the step table on one background
thread while the main thread computes the rest.

A day-long run's step table holds ~90 million rows, and its summary is a sequence of
independent passes over them (the busy-time bins of
:func:`~simulator.metrics.step_bottleneck.step_bins`, the KV and batching statistics, the
energy profile, the request statistics, the phase cost): 58 s on one core for the ServeGen
day. The passes are numpy over column-sized arrays and gathers from the memory-mapped spool,
which release the GIL, so two lanes use the machine's second core. The lane takes the passes
that read the step table in slices (little memory of their own); those holding several
whole columns at once stay on the main thread (:data:`LANE_MIN_ROWS` says why).

Determinism: each job is a function of the step table (read only) and its arguments, computed
whole on one thread, and its result is read where the sequential code computed it, so the
summary is the same, bit for bit, with or without the lane. Without a background thread
(:data:`LANE_MIN_ROWS`) a job runs when its result is asked for: the exact order of the
sequential code (the same work, the same first exception).
"""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Self

__all__ = ["LANE_MIN_ROWS", "Lane"]

#: Step rows from which a run's summary uses the background lane and writes its steps table
#: while the summary is computed (:class:`~simulator.runs.scenario.StepsWriter`): 2**25. Each
#: concurrent pass holds its own column-sized arrays and memory-maps the spool's column files
#: it gathers from, so the peak memory grows with the passes at once: measured on the
#: million-request run (20 million steps), 1.46 GiB sequential and 1.83 to 2.11 GiB with the
#: lanes, for a summary and write of ~17 s that they shorten by a few seconds (within the
#: run's noise); on the ServeGen day (90 million steps) they cut ~40 s of its ~80 s summary
#: and write.
LANE_MIN_ROWS = 1 << 25


class _Deferred:
    """A job run on the caller's thread when its result is first asked for."""

    __slots__ = ("_args", "_done", "_fn", "_value")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self._fn, self._args = fn, args
        self._done = False
        self._value: Any = None

    def result(self) -> Any:
        if not self._done:
            self._value = self._fn(*self._args)
            self._done = True
            self._fn, self._args = None, ()
        return self._value


class Lane:
    """Jobs on one background thread (``background=True``), or deferred to their
    :meth:`result` call on the caller's thread.

    Use as a context manager: leaving it waits for the running job and drops those not
    started (an exception in the main lane is not hidden behind a background one).

    Parameters
    ----------
    background : bool
        Whether to start the thread (a run with at least :data:`LANE_MIN_ROWS` steps).
    """

    def __init__(self, background: bool) -> None:
        self._pool = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="servesim-summary")
                      if background else None)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future | _Deferred:
        """Queue ``fn(*args)``; its ``result()`` returns its value or raises its exception."""
        if self._pool is None:
            return _Deferred(fn, args)
        return self._pool.submit(fn, *args)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
