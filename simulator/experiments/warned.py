"""Warnings of an experiment's tasks, kept with their results.

A sweep point or plan candidate may warn while it runs (a tensor-parallel group larger than
the GPUs its link joins, a memory budget the run may exceed, a workload approximation). The
result cache then serves that result on later runs without running it, and a warning printed
only while it ran would never be seen again. So a task runs under :func:`recording`, which
keeps its warnings (category and message) instead of printing them; they travel in the
result and its cache entry, and the driver shows them with :func:`reemit`, each distinct one
once per experiment, in the CLI's one-line form (the CLI's :data:`warnings.showwarning`), for
a fresh result and a cached one alike.
"""
from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

__all__ = ["WarningRecord", "merge", "recording", "reemit"]

#: ``{"category": "module.QualName", "message": str}``: one recorded warning (JSON-safe)
WarningRecord = dict


def _record(w: warnings.WarningMessage) -> WarningRecord:
    cat = w.category
    return {"category": f"{cat.__module__}.{cat.__qualname__}", "message": str(w.message)}


def merge(*groups: Iterable[Mapping] | None) -> list[WarningRecord]:
    """The records of ``groups`` in order, each distinct (category, message) once."""
    out, seen = [], set()
    for g in groups:
        for r in g or ():
            k = (r["category"], r["message"])
            if k not in seen:
                seen.add(k)
                out.append({"category": r["category"], "message": r["message"]})
    return out


@contextmanager
def recording() -> Iterator[list[WarningRecord]]:
    """Keep the warnings raised in the block instead of showing them.

    Yields a list that holds, once the block ends, the distinct warnings it raised (every
    occurrence is caught, whatever was shown before in this process, then deduplicated).
    """
    out: list[WarningRecord] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield out
        finally:
            out.extend(merge(_record(w) for w in caught))


def _category(name: str) -> type[Warning]:
    """The warning class named ``module.QualName`` when its module is loaded (nothing is
    imported here: servesim's warning modules are loaded by whatever ran the experiment),
    else :class:`UserWarning`."""
    mod, _, qual = name.rpartition(".")
    obj = sys.modules.get(mod)
    for part in qual.split(".") if obj is not None else ():
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) and issubclass(obj, Warning) else UserWarning


def reemit(records: Iterable[Mapping] | None, seen: set | None = None) -> None:
    """Show recorded warnings again (:func:`warnings.warn`, so the CLI prints each as one
    ``servesim: warning:`` line), skipping those already in ``seen`` (updated)."""
    for r in records or ():
        k = (r["category"], r["message"])
        if seen is not None:
            if k in seen:
                continue
            seen.add(k)
        warnings.warn(_category(r["category"])(r["message"]), stacklevel=2)
