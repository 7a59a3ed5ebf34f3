"""A place in SimPy's event order kept for an event whose time is not known yet.

SimPy processes events in the order of ``(time, priority, event id)``, the id counting up as
events are scheduled: two events at the same float time run in the order they were scheduled.
A fast-forwarded decode run (:func:`simulator.engine.loop._run_jump`) prices its steps a
segment at a time and learns the time of its end only when its last segment is priced, yet
its end must run, among events at that very time, where it would had the whole run been
priced and its time-out scheduled when it started (the outputs are byte-identical either
way). :func:`reserve` takes the next event id when the run starts; :func:`trigger_at`
schedules the run's end with it once the time is known.

Both read SimPy's environment internals (``Environment._eid``, its event-id counter, and
``Environment._queue``, the heap of ``(time, priority, id, event)``; SimPy 4.1). Under another
major version of SimPy, or where they are not there, :func:`reserve` returns None and the
caller prices the whole run at its start instead (the same outputs, more work).
"""
from __future__ import annotations

from collections.abc import Callable
from heapq import heappush

import simpy
from simpy.events import NORMAL

__all__ = ["reserve", "trigger_at"]

#: whether the installed SimPy keeps its event order as this module reads it (SimPy 4)
KNOWN_SIMPY = simpy.__version__.split(".")[0] == "4"


def reserve(env: simpy.Environment) -> int | None:
    """The event id the next event scheduled on ``env`` would take, taken now for
    :func:`trigger_at` (None: this SimPy keeps its event order otherwise)."""
    counter = getattr(env, "_eid", None)
    if (not KNOWN_SIMPY or counter is None
            or not isinstance(getattr(env, "_queue", None), list)):
        return None
    return next(counter)


def trigger_at(env: simpy.Environment, slot: int, at_s: float,
               callback: Callable[[simpy.Event], None]) -> simpy.Event:
    """Schedule an event at clock ``at_s`` (seconds, not before ``env.now``) with event id
    ``slot`` (from :func:`reserve`), calling ``callback`` when it is processed: it runs where
    a time-out scheduled when ``slot`` was reserved would (a time-out triggers
    successfully with the value None, as this event does).

    Raises
    ------
    ValueError
        When ``at_s`` is before the clock.
    """
    if at_s < env.now:
        raise ValueError(f"trigger_at: {at_s!r} s is before the clock ({env.now!r} s)")
    ev = simpy.Event(env)
    ev._ok = True
    ev._value = None
    ev.callbacks.append(callback)
    heappush(env._queue, (at_s, NORMAL, slot, ev))
    return ev
