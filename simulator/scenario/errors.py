"""The error of a bad scenario file or override (one readable line; the CLI prints it and
exits 2)."""
from __future__ import annotations


class ScenarioError(ValueError):
    """A scenario file or override is invalid (message: one readable line)."""
