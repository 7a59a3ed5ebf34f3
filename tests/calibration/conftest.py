"""Fixtures of the calibration tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (timings on tiny shapes are steadier; restored
    after)."""
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
