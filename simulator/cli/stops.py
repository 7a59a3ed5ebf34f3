"""How ``servesim`` stops on a signal: SIGTERM unwinds like Ctrl-C (exit 143, temporary
spools removed), SIGINT exits 130, each with one line and the notes of the work that finished
(how many sweep points are cached), also when C code turned the signal's exception into
another one while it ran (:func:`stop_exception`)."""
from __future__ import annotations

import signal
import threading

__all__ = ["STOP_SIGNAL", "Terminated", "exit_cleanly_on_stop_signals", "stop_exception",
           "stop_notes"]


def stop_notes(e: BaseException) -> str:
    """``: NOTE; NOTE`` from the notes a stopped run's exception carries (how many points of
    a sweep finished and are cached: :func:`simulator.experiments.executor.add_note`), on the
    same line; empty without notes."""
    notes = [" ".join(str(n).split()) for n in getattr(e, "__notes__", None) or []]
    return f": {'; '.join(notes)}" if notes else ""


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so temporary files (the step spool) are removed."""


#: the stop signal received while ``main`` runs (SIGINT or SIGTERM; None: none)
STOP_SIGNAL: list[int | None] = [None]


def stop_exception(e: Exception) -> BaseException | None:
    """The exception a stop signal raised, when C code turned it into ``e``: a
    ``KeyboardInterrupt`` that lands inside an extension module's initialisation (pandas'
    parser imports ``pandas`` from C) comes out as that module's ``ImportError``, and the
    command would end as an internal error instead of an interruption. None when no stop
    signal arrived. The new exception keeps ``e``'s notes (how many points finished)."""
    sig = STOP_SIGNAL[0]
    if sig is None:
        return None
    stop: BaseException = Terminated() if sig == signal.SIGTERM else KeyboardInterrupt()
    for note in getattr(e, "__notes__", None) or []:
        stop.add_note(note)
    return stop


def exit_cleanly_on_stop_signals():
    """Turn SIGTERM (``kill``, ``timeout``, batch schedulers) into :class:`Terminated` while
    ``main`` runs, where the default action would kill the process before its clean-up, and
    note SIGINT (Ctrl-C's ``KeyboardInterrupt``, when Python's default handler is in place) in
    :data:`STOP_SIGNAL`; returns the function that restores the previous handlers. A no-op
    off the main thread; a signal whose handler is not the default is left alone."""
    STOP_SIGNAL[0] = None
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def _raise(signum, frame):
        STOP_SIGNAL[0] = signum
        raise Terminated()

    def _interrupt(signum, frame):
        STOP_SIGNAL[0] = signum
        raise KeyboardInterrupt

    changed = []
    if previous[signal.SIGTERM] is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise)
        changed.append(signal.SIGTERM)
    if previous[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
        changed.append(signal.SIGINT)

    def restore() -> None:
        for s in changed:
            signal.signal(s, previous[s])
    return restore
