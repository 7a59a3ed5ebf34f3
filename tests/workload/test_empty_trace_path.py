"""An empty ``workload.trace`` is refused in one line as an empty path, not read as the
scenario's folder."""
from __future__ import annotations

from helpers import cli_error_line


def test_empty_trace_path_is_named(capsys):
    """Before: "scenarios: is a directory, not a trace file" (the empty path resolved to the
    scenario's folder)."""
    err = cli_error_line(capsys, ["run", "default", "-q", "--set", "workload.trace="])
    assert err == ("servesim: error: default: --set workload.trace=: workload.trace: value '': "
                   "empty path: give the trace file (or leave trace out for a synthetic "
                   "workload)")
