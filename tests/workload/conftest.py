"""Shared helpers for the workload tests."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import shared_path


@pytest.fixture
def shared_file():
    """``shared_file("traces/x.csv")`` -> the path; skips when the shared folder is absent,
    fails when ``$SERVESIM_SHARED`` is set but lacks the file (``helpers.shared_path``)."""
    return shared_path


@pytest.fixture
def write(tmp_path):
    """``write("x.csv", text, crlf=False)`` writes bytes exactly and returns the path."""

    def _write(name: str, text: str, crlf: bool = False) -> Path:
        p = tmp_path / name
        data = text.replace("\n", "\r\n") if crlf else text
        p.write_bytes(data.encode("utf-8"))
        return p

    return _write
