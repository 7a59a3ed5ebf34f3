"""The scheduler interface: what the engine, lockstep DP ranks and the routers ask of a replica's
scheduler.

:class:`~simulator.scheduling.continuous.ContinuousScheduler`,
:class:`~simulator.scheduling.static.StaticScheduler` and
:class:`~simulator.scheduling.speculative.SpeculativeScheduler` implement it. A step goes:
:meth:`Scheduler.schedule` reports what the next iteration does (a
:class:`~simulator.scheduling.continuous.StepOutput`: its shape, the KV blocks it swaps, its
draft work), the pricer of :meth:`Scheduler.step_pricer` prices it (perf side:
:class:`~simulator.perf.step_cost.StepPricer`), the engine sleeps that long and
:meth:`Scheduler.update` applies it. With nothing to schedule the engine sleeps until
:meth:`Scheduler.idle_until` or an arrival. A run of identical decode steps may be planned
(:meth:`Scheduler.plan_jump`) and committed in one go (:meth:`Scheduler.commit_jump`,
:mod:`simulator.scheduling.emission`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from simulator.kv import KVCacheManager
    from simulator.perf.step_cost import StepPricer
    from simulator.scheduling.continuous import StepOutput
    from simulator.scheduling.emission import Jump
    from simulator.scheduling.queues import RequestQueue
    from simulator.scheduling.state import ReqState

__all__ = ["Scheduler"]


@runtime_checkable
class Scheduler(Protocol):
    """One replica's scheduler, as the engine drives it (module docstring).

    Attributes
    ----------
    kv : KVCacheManager
        The replica's KV cache (routers read its usage).
    running : list of ReqState
        Requests holding KV and scheduled in the iterations (in scheduling order).
    queue : RequestQueue
        The waiting requests (its head is the next to start).
    """

    kv: KVCacheManager
    running: list[ReqState]
    queue: RequestQueue

    @property
    def num_waiting(self) -> int:
        """Requests in the waiting queue."""
        ...

    def has_work(self) -> bool:
        """Whether a request runs or waits."""
        ...

    def num_outstanding(self) -> int:
        """Requests routed here and not finished (what a real router can count)."""
        ...

    def waiting_requests(self) -> list[ReqState]:
        """The waiting requests in queue order."""
        ...

    def add_request(self, r: ReqState, now: float) -> bool:
        """Queue ``r`` at clock ``now`` (seconds); False when it was rejected instead."""
        ...

    def remove_waiting(self, r: ReqState) -> bool:
        """Take ``r`` out of the waiting queue (False when it is not there)."""
        ...

    def cancel(self, r: ReqState, now: float) -> None:
        """The client of ``r`` cancelled at ``now``."""
        ...

    def schedule(self, now: float) -> StepOutput | None:
        """The next iteration at clock ``now``; None when nothing can run now."""
        ...

    def step_pricer(self, perf) -> StepPricer:
        """The perf-side pricer of this scheduler's steps on the performance model ``perf``."""
        ...

    def update(self, out: StepOutput, start: float, end: float) -> None:
        """Apply the iteration ``out`` that ran from ``start`` to ``end`` (seconds)."""
        ...

    def idle_until(self, now: float) -> float | None:
        """With nothing to schedule at ``now``: when to try again though nothing arrives
        (None: only an arrival changes anything)."""
        ...

    def plan_jump(self, out: StepOutput) -> Jump | None:
        """A fast-forward of ``out`` and the identical decode steps after it, or None."""
        ...

    def commit_jump(self, jump: Jump, upto_step: int) -> None:
        """Apply the first ``upto_step`` steps of ``jump`` (priced by the engine)."""
        ...
