"""SIGTERM ends `servesim` like Ctrl-C: exit code 143, one line, temporary spools removed
(review finding: `kill` / `timeout` left a run's step spool in $TMPDIR)."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from simulator.cli import main as cli
from simulator.metrics.step_table import ColumnSpool


def test_sigterm_exits_143_and_removes_the_spool(monkeypatch, tmp_path, capsys):
    folders = []

    def command(args):
        spool = ColumnSpool(["x"], frozenset({"x"}), tmp_path)
        spool.append({"x": np.arange(4.0)})
        folders.append(spool.folder)
        assert spool.folder.is_dir()
        os.kill(os.getpid(), signal.SIGTERM)   # delivered here, in the main thread
        raise AssertionError("SIGTERM did not interrupt the command")

    class Parser:
        def parse_args(self, argv):
            return type("A", (), {"func": staticmethod(command)})()

    monkeypatch.setattr(cli, "build_parser", lambda first: Parser())
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["run"]) == 143
    assert capsys.readouterr().err.strip() == "servesim: terminated"
    assert signal.getsignal(signal.SIGTERM) is before        # handler restored
    assert folders and not folders[0].exists()               # the spool went with the frames


def test_spool_write_error_names_the_folder_and_tmpdir(tmp_path):
    spool = ColumnSpool(["x"], frozenset(), tmp_path)
    (spool.folder / "x.bin").mkdir()                          # opening it for append fails
    try:
        spool.append({"x": np.arange(3)})
        spool.read("x")  # written on the appends' thread: the error comes at the read
    except OSError as e:
        msg = str(e)
    else:  # pragma: no cover
        raise AssertionError("no error")
    assert str(tmp_path) in msg and "TMPDIR" in msg and "Is a directory" in msg
    with pytest.raises(OSError, match="TMPDIR"):  # and again: the rows are not all there
        spool.read("x")
    spool.close()
    assert not spool.folder.exists()


def test_a_closed_stdout_pipe_ends_quietly(monkeypatch, capsys):
    """``servesim trace F | head -1``: the reader goes away; servesim stops with status 1 and no
    message (before: ``servesim: error: [Errno 32] Broken pipe``, from the OSError handler)."""
    import io
    import json
    import sys

    class ClosedPipe(io.TextIOBase):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise io.UnsupportedOperation("no descriptor")

    def command(args):
        print(json.dumps({"count": 1}))
        sys.stdout.flush()
        raise AssertionError("the write did not fail")

    class Parser:
        def parse_args(self, argv):
            return type("A", (), {"func": staticmethod(command)})()

    monkeypatch.setattr(cli, "build_parser", lambda first: Parser())
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(["trace", "x.csv"]) == 1
    assert capsys.readouterr().err == ""


def _command_parser(monkeypatch, command):
    class Parser:
        def parse_args(self, argv):
            return type("A", (), {"func": staticmethod(command)})()

    monkeypatch.setattr(cli, "build_parser", lambda first: Parser())


def test_an_interrupt_that_c_code_turned_into_an_import_error_is_an_interruption(
        monkeypatch, capsys):
    """Ctrl-C landing while an extension module initialises (CI saw pandas' parser turn the
    KeyboardInterrupt into ``ImportError: pd_parser.c could not import module pandas``) ends
    as an interruption (130, one line, the run's notes kept), not as an internal error."""
    def command(args):
        try:
            os.kill(os.getpid(), signal.SIGINT)   # Python's handler raises here
        except KeyboardInterrupt:
            e = ImportError("pd_parser.c could not import module pandas")
            e.add_note("1 of 3 compare variants finished")
            raise e from None
        raise AssertionError("SIGINT did not interrupt the command")

    _command_parser(monkeypatch, command)
    # a shell's background job starts with SIGINT ignored (servesim leaves a handler it did
    # not install alone): give this test Python's own, as an interactive run has it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = signal.getsignal(signal.SIGINT)
        assert cli.main(["run"]) == 130
    finally:
        after = signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err.strip() == \
        "servesim: interrupted: 1 of 3 compare variants finished"
    assert after is before        # handler restored


def test_an_import_error_without_a_signal_stays_an_internal_error(monkeypatch, capsys):
    def command(args):
        raise ImportError("no module named nowhere")

    _command_parser(monkeypatch, command)
    assert cli.main(["run"]) == 1
    assert "internal error: ImportError" in capsys.readouterr().err
