"""Closed-loop sessions: a turn arrives when the previous one has answered, plus think time.

A session (``RequestSpec.session_id``) is a chain of turns whose prompts repeat the history
(DESIGN.md section 3d). With ``workload.session_arrival: closed`` (the default) turn ``k + 1``
arrives at the completion of turn ``k`` (its last token) plus its ``think_time_s``: the user
reads the answer, then types; its recorded or generated arrival time only orders the spec
list. With ``open`` every turn arrives at its own time, whatever became of the previous one.

A turn that does not complete (rejected or cancelled) ends its session: the later turns are
never sent, and each is recorded as rejected (reason ``session_abandoned``) at the moment its
predecessor ended, so every request of the workload is accounted for. A turn whose
predecessor is not in this run (another pool of a gateway, a cut window) arrives on time.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import simpy

from simulator.base.request import RequestSpec
from simulator.metrics.records import RunRecorder
from simulator.scheduling.state import ReqState
from simulator.workload.loader import RequestStream

#: the reject reason of the turns after a turn that did not complete
SESSION_ABANDONED = "session_abandoned"


def split_session_turns(scenario, specs: Sequence[RequestSpec]
                        ) -> tuple[Sequence[RequestSpec], dict[tuple[int, int], RequestSpec]]:
    """Split ``specs`` into those that arrive on time (in order) and the closed-loop turns
    released by their predecessor's end, keyed ``(session_id, turn_index)``.

    Returns ``(specs, {})`` unchanged when sessions arrive open loop or there are none.
    """
    wl = getattr(scenario, "workload", None)
    if getattr(wl, "session_arrival", "closed") != "closed":
        return specs, {}
    if isinstance(specs, RequestStream):  # from the columns (no spec built twice)
        present = specs.session_turns()
    else:
        present = {(s.session_id, s.turn_index) for s in specs if s.session_id is not None}
    if not present:
        return specs, {}
    first: list[RequestSpec] = []
    follow: dict[tuple[int, int], RequestSpec] = {}
    for s in specs:
        sid = s.session_id
        if sid is not None and s.turn_index > 0 and (sid, s.turn_index - 1) in present:
            follow[(sid, s.turn_index)] = s
        else:
            first.append(s)
    return first, follow


def install_session_turns(env: simpy.Environment, rec: RunRecorder,
                          follow: dict[tuple[int, int], RequestSpec],
                          arrive: Callable[[RequestSpec], None],
                          delay_to: Callable[[float, float], float]) -> None:
    """Release each held turn of ``follow`` when its predecessor ends: ``arrive(spec)`` at
    completion + think time, or a ``session_abandoned`` rejection at once when the
    predecessor was rejected or cancelled (which in turn ends the turns after it).
    ``delay_to(now, t)`` is the engine's exact delay from ``now`` to ``t``."""
    finish = rec.finish

    def finish_and_follow(r, now: float, status: str, reason: str) -> None:
        finish(r, now, status, reason)
        s = r.spec
        if s.session_id is None:
            return
        nxt = follow.pop((s.session_id, s.turn_index + 1), None)
        if nxt is None:
            return
        if status == "completed":
            t = now + nxt.think_time_s
            turn = dataclasses.replace(nxt, arrival_time_s=t)
            env.timeout(delay_to(now, t)).callbacks.append(lambda _ev: arrive(turn))
            return
        gone = ReqState(dataclasses.replace(nxt, arrival_time_s=now))
        rec.admit(gone)
        rec.reject(gone, now, SESSION_ABANDONED)  # through this hook: ends the next turn too

    rec.finish = finish_and_follow  # type: ignore[method-assign]
