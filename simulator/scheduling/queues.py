"""The waiting queue of one replica: first come first served, or by priority.

``fcfs``
    A deque in arrival order; a preempted request goes back to the front (vLLM: preempted
    requests are resumed first).
``priority``
    A binary heap ordered by ``(priority, arrival_time_s, request_id)`` (vLLM's priority
    policy: a lower value is more important; ties by arrival). A preempted request re-enters
    at its own key.
"""
from __future__ import annotations

import heapq
from collections import deque
from itertools import islice

from simulator.base.compiled_core import register_pickling
from simulator.scheduling.state import ReqState

QUEUE_POLICIES = ("fcfs", "priority")


class RequestQueue:
    """Waiting requests of one replica.

    Parameters
    ----------
    policy : {"fcfs", "priority"}

    Raises
    ------
    ValueError
        On an unknown policy (the message lists the valid ones).
    """

    __slots__ = ("_deque", "_heap", "priority")

    def __init__(self, policy: str = "fcfs") -> None:
        if policy not in QUEUE_POLICIES:
            raise ValueError(f"scheduler.policy must be fcfs or priority, got {policy!r}")
        self.priority = policy == "priority"
        self._deque: deque[ReqState] = deque()
        self._heap: list = []  # (priority, arrival, id, req)

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return ("priority" if self.priority else "fcfs",), {}

    def __len__(self) -> int:
        return len(self._heap) if self.priority else len(self._deque)

    def peek(self) -> ReqState | None:
        """The next request to admit (None when empty)."""
        if self.priority:
            return self._heap[0][3] if self._heap else None
        return self._deque[0] if self._deque else None

    def pop(self) -> ReqState:
        """Remove and return the next request (IndexError when empty)."""
        if self.priority:
            return heapq.heappop(self._heap)[3]
        return self._deque.popleft()

    def push(self, r: ReqState, front: bool = False) -> None:
        """Queue ``r``; ``front`` (FCFS only) puts it first, as a preempted request goes."""
        if self.priority:
            heapq.heappush(self._heap, (r.priority, r.arrival_time_s, r.request_id, r))
        elif front:
            self._deque.appendleft(r)
        else:
            self._deque.append(r)

    def remove(self, r: ReqState) -> bool:
        """Take ``r`` out wherever it is; False when it is not queued. O(queue length)."""
        if self.priority:
            heap = self._heap
            for i, item in enumerate(heap):
                if item[3] is r:
                    heap[i] = heap[-1]
                    heap.pop()
                    heapq.heapify(heap)
                    return True
            return False
        try:
            self._deque.remove(r)
            return True
        except ValueError:
            return False

    def ordered(self) -> list[ReqState]:
        """All queued requests in admission order (a snapshot)."""
        if self.priority:
            return [it[3] for it in sorted(self._heap, key=lambda x: x[:3])]
        return list(self._deque)

    def head(self, n: int) -> list[ReqState]:
        """The first ``n`` requests in admission order (O(n) for FCFS, O(len) for priority)."""
        if self.priority:
            return [it[3] for it in heapq.nsmallest(n, self._heap)]
        return list(islice(self._deque, n))


register_pickling(RequestQueue)
