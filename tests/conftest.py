"""Test-suite wide setup: make ``tests/helpers.py`` importable as ``helpers``; the cache of
filled table grids (``simulator.perf.fill_cache``) in a fresh folder of the session, not the
user's ``~/.cache`` (child processes inherit it)."""
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


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` when no CUDA device is visible (torch imported only then)."""
    import pytest
    gpu = [it for it in items if it.get_closest_marker("gpu") is not None]
    if gpu and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for it in gpu:
            it.add_marker(skip)
