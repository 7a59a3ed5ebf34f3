"""Test-suite wide setup: make ``tests/helpers.py`` importable as ``helpers``."""
from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


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
