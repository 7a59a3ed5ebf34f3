"""Shared helpers for the workload tests."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def find_shared() -> Path | None:
    """The project's read-only ``shared/`` folder (public traces), or None when absent.

    Looked up as ``$SERVESIM_SHARED`` or a ``shared/`` folder next to any ancestor of this file
    (the repository normally sits at ``<work>/main`` with ``<work>/shared`` beside it).
    """
    env = os.environ.get("SERVESIM_SHARED")
    if env and (Path(env) / "traces").is_dir():
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared"
        if (cand / "traces").is_dir():
            return cand
    return None


@pytest.fixture
def shared_file():
    """``shared_file("traces/x.csv")`` -> the path, or skip the test when it is absent."""

    def get(rel: str) -> Path:
        root = find_shared()
        if root is None or not (root / rel).is_file():
            pytest.skip(f"public data file shared/{rel} not available")
        return root / rel

    return get


@pytest.fixture
def write(tmp_path):
    """``write("x.csv", text, crlf=False)`` writes bytes exactly and returns the path."""

    def _write(name: str, text: str, crlf: bool = False) -> Path:
        p = tmp_path / name
        data = text.replace("\n", "\r\n") if crlf else text
        p.write_bytes(data.encode("utf-8"))
        return p

    return _write
