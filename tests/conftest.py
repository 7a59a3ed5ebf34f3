"""Test-suite wide setup: make ``tests/helpers.py`` importable as ``helpers``; the cache of
filled table grids (``simulator.perf.tables.fill_cache``) in a fresh folder of the session, not the
user's ``~/.cache`` (child processes inherit it); and no unexplained warning: a warning that
reaches pytest fails the run (a test that expects one asserts it with ``pytest.warns`` or
filters it with ``@pytest.mark.filterwarnings`` and a comment giving the reason)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


_CACHE_DIR: str | None = None


def pytest_configure(config):
    global _CACHE_DIR
    _CACHE_DIR = tempfile.mkdtemp(prefix="servesim-test-cache-")
    os.environ["SERVESIM_CACHE_DIR"] = _CACHE_DIR


def pytest_unconfigure(config):
    if _CACHE_DIR is not None:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)


#: Warnings pytest recorded in this session, ``(where, "Category: message")``.
UNEXPLAINED_WARNINGS: list[tuple[str, str]] = []


def pytest_warning_recorded(warning_message, when, nodeid, location):
    where = nodeid or (f"{location[0]}:{location[1]}" if location else "(collection)")
    what = f"{warning_message.category.__name__}: {warning_message.message}"
    UNEXPLAINED_WARNINGS.append((where, what))


def pytest_sessionfinish(session, exitstatus):
    """A run whose tests all passed fails when a warning went unexplained."""
    if UNEXPLAINED_WARNINGS and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if UNEXPLAINED_WARNINGS:
        terminalreporter.section("unexplained warnings (they fail the run)", red=True)
        for where, what in UNEXPLAINED_WARNINGS:
            terminalreporter.write_line(f"{where}: {what[:300]}")
        terminalreporter.write_line(
            "fix the cause, or assert an expected warning with pytest.warns, or filter it in "
            "its test (@pytest.mark.filterwarnings) with a comment giving the reason")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` when no CUDA device is visible (torch imported only then), and
    tests marked ``pure_core`` when the compiled core runs."""
    import pytest
    gpu = [it for it in items if it.get_closest_marker("gpu") is not None]
    if gpu and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for it in gpu:
            it.add_marker(skip)
    from simulator.base.compiled_core import status
    if status().compiled:
        skip = pytest.mark.skip(reason="instruments the core's methods by patching its classes, "
                                       "which compiled code does not see: runs on the "
                                       "pure-Python build (SERVESIM_PURE_PYTHON=1; CI runs both)")
        for it in items:
            if it.get_closest_marker("pure_core") is not None:
                it.add_marker(skip)
