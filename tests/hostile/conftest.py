"""Every hostile case runs with a temporary folder of its own and leaves it empty (issue 26
part 5: "no leftover temp files").

The autouse fixture :func:`private_tmpdir` points ``$TMPDIR`` and :data:`tempfile.tempdir` at
a fresh folder for the case (child processes inherit the variable), and after the case
asserts that nothing is left in it: a step or ITL spool, a pool's ``servesim-pool-*`` folder,
a cache entry's ``.tmp-*`` file. Objects that own temporary files and are merely unreferenced
(a run's spool is removed by ``weakref.finalize``) are collected first, as the end of a
``servesim`` process would.

multiprocessing keeps one temporary folder per process (``pymp-*``, the forkserver's socket)
for the life of the process: it is created once, before the first case, in the session's own
temporary folder, so that it is not counted against the case that happens to start a pool.
"""
from __future__ import annotations

import gc
import multiprocessing.util
import os
import tempfile

import pytest


@pytest.fixture(scope="session", autouse=True)
def _multiprocessing_tempdir():
    """Create multiprocessing's per-process folder outside the cases' folders."""
    multiprocessing.util.get_temp_dir()
    yield


def leftovers(folder) -> list[str]:
    """What is left under ``folder`` (relative paths, sorted; empty when clean)."""
    out = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            out.append(os.path.relpath(os.path.join(root, name), folder))
    return sorted(out)


@pytest.fixture(autouse=True)
def private_tmpdir(tmp_path_factory, monkeypatch):
    """``$TMPDIR`` (and :data:`tempfile.tempdir`) for one case; asserts it is empty after."""
    folder = tmp_path_factory.mktemp("TMPDIR", numbered=True)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    left = leftovers(folder)
    if left:  # what a finished command no longer references goes, as at process exit (a full
        gc.collect()  # collection costs ~0.1 s in a long session: only when something is left)
        left = leftovers(folder)
    assert not left, f"temporary files left in $TMPDIR: {left[:10]}"
