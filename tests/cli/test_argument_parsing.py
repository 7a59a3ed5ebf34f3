"""Command-line arguments: an argparse error is one line (no usage block), ``--help`` still
prints the usage, and counts accept whole-number floats (``1e9``, ``300.0``) but refuse
fractions and non-numbers."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, line", [
    (["plan", "plan_default", "--max-requests", "1.5"],
     ("servesim plan: error: argument --max-requests: invalid int value: '1.5' "
      "(expected a whole number, such as 300 or 1e9)")),
    (["compare", "default", "--seed", "nan"],
     ("servesim compare: error: argument --seed: invalid int value: 'nan' "
      "(expected a whole number, such as 300 or 1e9)")),
    (["run", "default", "--seed", "x"],
     "servesim run: error: argument --seed: invalid int value: 'x' (expected a whole number)"),
    (["run"], "servesim run: error: the following arguments are required: scenario"),
    (["kv", "--batch", "x"],
     "servesim kv: error: argument --batch: invalid int value: 'x' (expected a whole number)"),
])
def test_argparse_errors_are_one_line(capsys, argv, line):
    """Before: four lines of usage, then the error."""
    from simulator.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err == line + "\n"


def test_help_still_prints_the_usage(capsys):
    from simulator.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["plan", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: servesim plan [-h]") and "--max-requests MAX_REQUESTS" in out


@pytest.mark.parametrize("text, value", [("300", 300), ("-3", -3), ("1e9", 10**9),
                                         ("300.0", 300), ("2.5e1", 25)])
def test_whole_number_accepts_integer_valued_floats(text, value):
    from simulator.cli.args import whole_number
    got = whole_number(text)
    assert got == value and type(got) is int


@pytest.mark.parametrize("text", ["1.5", "nan", "inf", "-inf", "1e400", "x", ""])
def test_whole_number_refuses_fractions_and_non_numbers(text):
    import argparse

    from simulator.cli.args import whole_number
    with pytest.raises(argparse.ArgumentTypeError, match="invalid int value"):
        whole_number(text)


def test_max_requests_1e9_parses_as_an_int():
    from simulator.cli.main import build_parser
    args = build_parser("plan").parse_args(["plan", "p.yaml", "--max-requests", "1e9"])
    assert args.max_requests == 1_000_000_000 and type(args.max_requests) is int
