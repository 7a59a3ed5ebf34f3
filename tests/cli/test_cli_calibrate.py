"""``servesim calibrate`` / ``validate`` registration and the no-torch error (no torch needed)."""
from __future__ import annotations

import sys

import pytest

from simulator.cli.main import build_parser, main


def test_subcommands_registered():
    p = build_parser()
    a = p.parse_args(["calibrate", "--device", "cpu", "--quick"])
    assert a.command == "calibrate" and a.quick and a.output is None and a.threads == 1
    v = p.parse_args(["validate", "--device", "cpu", "-o", "x"])
    assert v.command == "validate" and v.output == "x" and v.runs == 2


@pytest.mark.parametrize("cmd", ["calibrate", "validate"])
def test_without_torch_one_line_exit_2(cmd, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert main([cmd, "--device", "cpu", "-o", "/tmp/never-written"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs torch" in err[0] and ".[calibrate]" in err[0]


def test_simulator_does_not_import_torch():
    import subprocess
    code = ("import sys, simulator, simulator.cli.main, simulator.perf, simulator.perf.tables.flat_profile, "
            "simulator.perf.fitted, simulator.cli.calibrate, calibration, calibration.fit_vidur; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
