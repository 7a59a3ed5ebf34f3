"""simulator/base/progress.py: plain progress lines in logs (not a terminal), a bar on a terminal,
nothing with -q. Times come from a fake clock, so the expected lines are exact."""
from __future__ import annotations

import io

import pytest

from simulator.base.progress import PlainProgress, progress
from simulator.cli.main import main


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_periodic_lines_only_after_the_interval():
    """Interval 10 s: updates at t = 3 and 9 s print nothing; t = 12 s prints (12 s since the
    start); t = 15 s does not (3 s since that line); t = 25 s does. 50 of 200 after 25 s
    leaves 150 at 2 per second: ~75 s."""
    clk, out = Clock(), io.StringIO()
    p = PlainProgress("sweep points", stream=out, interval_s=10, clock=clk)
    for t, done in ((3, 5), (9, 10), (12, 20), (15, 30), (25, 50)):
        clk.t = t
        p.update(done, 200)
    clk.t = 100
    p.update(200, 200)
    p.close()
    assert out.getvalue().splitlines() == [
        "servesim: sweep points: 20/200 (10%), 12 s elapsed, ~108 s left",
        "servesim: sweep points: 50/200 (25%), 25 s elapsed, ~75 s left",
        "servesim: sweep points: done, 200/200 in 100 s",
    ]


def test_short_work_prints_nothing():
    clk, out = Clock(), io.StringIO()
    p = PlainProgress("x", stream=out, interval_s=10, clock=clk)
    clk.t = 2
    p.update(4, 4)
    p.close()
    assert out.getvalue() == ""


def test_forced_lines_at_start_and_every_tenth():
    """--progress: a start line, then one line per crossed 10% (here 10%, 30% and 90%; the
    jump from 10% to 30% crosses 20% and 30% but prints one line), then done."""
    clk, out = Clock(), io.StringIO()
    p = PlainProgress("run", stream=out, interval_s=1e9, force=True, clock=clk)
    for done in (1, 10, 11, 30, 31, 90, 100):
        clk.t += 1
        p.update(done, 100)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "servesim: run: started"
    assert [ln.split(": ")[2].split(",")[0] for ln in lines[1:-1]] == [
        "10/100 (10%)", "30/100 (30%)", "90/100 (90%)"]
    assert lines[-1] == "servesim: run: done, 100/100 in 7 s"


def test_disabled_yields_none_and_writes_nothing():
    out = io.StringIO()
    with progress("x", enabled=False, stream=out) as cb:
        assert cb is None
    assert out.getvalue() == ""


def test_not_a_terminal_uses_plain_lines():
    out = io.StringIO()  # isatty() is False
    with progress("x", force=True, stream=out) as cb:
        cb(1, 2)
    assert out.getvalue().splitlines()[0] == "servesim: x: started"


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, RuntimeError])
def test_interrupted_work_ends_with_stopped_not_done(exc):
    """Ctrl-C, SIGTERM (the CLI's handler exits) or an error part-way: the last line says
    ``stopped, 7/12``; before, it read ``done, 7/12`` and an interrupted plan looked finished."""
    out = io.StringIO()
    with pytest.raises(exc), progress("plan candidates", force=True, stream=out) as cb:
        cb(7, 12)
        raise exc
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("servesim: plan candidates: stopped, 7/12 in ")
    out = io.StringIO()
    with progress("plan candidates", force=True, stream=out) as cb:
        cb(12, 12)
    assert out.getvalue().splitlines()[-1].startswith("servesim: plan candidates: done, 12/12 in ")


def test_bad_interval_variable(monkeypatch):
    monkeypatch.setenv("SERVESIM_PROGRESS_INTERVAL_S", "-1")
    with pytest.raises(ValueError, match="SERVESIM_PROGRESS_INTERVAL_S='-1'"):
        PlainProgress("x")


def test_cli_run_progress_in_a_log(tmp_path, capsys):
    """`servesim run --progress` with stderr captured (not a terminal) writes plain lines."""
    rc = main(["run", "default", "--progress", "--no-figures", "-o", str(tmp_path / "o"),
               "--set", "workload.max_requests=40"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 0
    assert err[0] == "servesim: simulating requests: started"
    assert err[-1].startswith("servesim: simulating requests: done, 40/40 in ")
