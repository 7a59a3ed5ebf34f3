"""Hostile corpus, empty output paths (``EMPTY_OUTPUT``): ``-o ''`` (and ``trace
--to-parquet ''``) for every command of the parser that has the flag is refused in one line
naming the flag, with nothing written in the working folder."""
from __future__ import annotations

import argparse

import pytest
from command_cases import SCENARIO, _parser_actions, _refused

from simulator.cli.args import output_path


def _output_flags() -> list[tuple[list[str], str]]:
    """(subcommand words, flag) of every output flag of the parser (``-o``, ``--to-parquet``)."""
    return sorted((w, a.option_strings[0]) for w, a in _parser_actions()
                  if {"-o", "--to-parquet"} & set(a.option_strings))


EMPTY_OUTPUT = _output_flags()


@pytest.mark.parametrize("words, flag", EMPTY_OUTPUT,
                         ids=[" ".join(w) + f" {f}" for w, f in EMPTY_OUTPUT])
@pytest.mark.parametrize("value", ["", "  "])
def test_empty_output_refused(capsys, tmp_path, monkeypatch, words, flag, value):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SCENARIO)
    positional = {"run": ["s.yaml"], "compare": ["s.yaml"], "spec-sweep": ["s.yaml"],
                  "sweep": ["s.yaml"], "plan": ["s.yaml"], "trace": ["t.csv"]}
    argv = [*words, *positional.get(words[-1], []), flag, value]
    _refused(capsys, argv, [flag, "empty path"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # nothing written here


def test_every_command_with_an_output_flag_is_covered():
    cmds = {" ".join(w) for w, _f in EMPTY_OUTPUT}
    assert {"run", "compare", "sweep", "plan", "spec-sweep", "spec", "trace", "calibrate",
            "validate", "calibrate fit-engine"} <= cmds


def test_output_path_type_keeps_any_other_path():
    assert output_path("out") == "out" and output_path(" x ") == " x "
    with pytest.raises(argparse.ArgumentTypeError):
        output_path("")
