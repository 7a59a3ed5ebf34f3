"""Unit tests of the ``servesim spec`` subcommand hook."""
from __future__ import annotations

import argparse

import pytest

from simulator.cli.main import register_spec as register


def _parse(argv):
    parser = argparse.ArgumentParser(prog="servesim")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    return parser.parse_args(["spec", *argv])


def test_single_point(capsys):
    args = _parse(["--acceptance-rate", "0.8", "--num-speculative-tokens", "5",
                   "--draft-cost", "0"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "3.6893" in out  # Leviathan Table 1: alpha 0.8, gamma 5 -> 3.69x
    assert "break-even" in out


def test_sweep_writes_png(tmp_path, capsys):
    png = tmp_path / "sweep.png"
    args = _parse(["--draft-cost", "0.05", "--sweep", "-o", str(png)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "k=8" in out and "0.95" in out and "2.95" in out  # a=0.8, k=5, c=0.05
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["-a", "1.5", "-k", "3", "-c", "0.1"], "acceptance-rate"),
        (["-a", "-0.1", "-k", "3", "-c", "0.1"], "acceptance-rate"),
        (["-a", "0.5", "-k", "0", "-c", "0.1"], "num-speculative-tokens"),
        (["-a", "0.5", "-k", "3", "-c", "-1"], "draft-cost"),
        (["-a", "0.5", "-k", "3", "-c", "nan"], "draft-cost"),
        (["-c", "0.1"], "required unless --sweep"),
        (["-a", "0.5", "-c", "0.1", "--sweep"], "together"),
        (["-a", "0.5", "-k", "3", "-c", "0.1", "-o", "x.png"], "needs --sweep"),
    ],
)
def test_bad_values_raise_value_error(argv, match):
    args = _parse(argv)
    with pytest.raises(ValueError, match=match) as info:
        args.func(args)
    assert "\n" not in str(info.value)
