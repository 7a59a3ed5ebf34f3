"""An empty ``workload.trace`` is refused in one line as an empty path, not read as the
scenario's folder."""
from __future__ import annotations


def _one_line_rc2(capsys, argv) -> str:
    from simulator.cli.main import main
    rc = main(argv)
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_empty_trace_path_is_named(capsys):
    """Before: "scenarios: is a directory, not a trace file" (the empty path resolved to the
    scenario's folder)."""
    err = _one_line_rc2(capsys, ["run", "default", "-q", "--set", "workload.trace="])
    assert err == ("servesim: error: default: --set workload.trace=: workload.trace: value '': "
                   "empty path: give the trace file (or leave trace out for a synthetic "
                   "workload)")
