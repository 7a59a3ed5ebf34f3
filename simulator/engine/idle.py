"""A replica with nothing to schedule: when to try again, or which request can never start.

The one rule the replica process (:mod:`simulator.engine.loop`) and lockstep DP ranks
(:mod:`simulator.engine.lockstep`) share.
"""
from __future__ import annotations

from typing import Final

from simulator.metrics.records import RunRecorder
from simulator.scheduling.interface import Scheduler

#: :func:`idle_wait`'s answer when it rejected the head request: schedule again at once
HEAD_REJECTED: Final = "head_rejected"


def idle_wait(sched: Scheduler, rec: RunRecorder, now: float) -> float | str | None:
    """What a scheduler that has work but scheduled nothing at ``now`` waits for.

    Parameters
    ----------
    sched : Scheduler
        With work (``has_work()``) and nothing scheduled at ``now``.
    rec : RunRecorder
        Records the rejection.
    now : float
        Clock, seconds.

    Returns
    -------
    float, None or HEAD_REJECTED
        The time to try again at (:meth:`Scheduler.idle_until`); None to wait for an
        arrival; :data:`HEAD_REJECTED` when nothing runs and nothing will ever start (the
        head request does not fit an empty replica): it was rejected as ``kv_capacity``.
    """
    wait = sched.idle_until(now)
    if wait is None and not sched.running and sched.num_waiting:
        head = sched.queue.peek()
        assert head is not None  # num_waiting > 0
        sched.remove_waiting(head)
        sched.kv.free(head)  # a request whose KV load landed holds blocks
        rec.reject(head, now, "kv_capacity")
        return HEAD_REJECTED
    return wait
