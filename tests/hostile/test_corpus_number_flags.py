"""Hostile corpus, counts and seeds on the command line: no count option refuses a
whole-number float (``1e3``), and a negative seed is refused by every command that takes
``--seed``."""
from __future__ import annotations

import argparse
import json

import pytest
from command_cases import GC, SCENARIO, SPECULATIVE, _parser_actions, _ran, _refused

from simulator.cli.args import seed_number


def _int_typed() -> list[str]:
    """Options of any subcommand still parsed with ``int`` (refuses ``1e3``)."""
    return [f"{' '.join(w)} {a.option_strings}" for w, a in _parser_actions() if a.type is int]


def test_no_count_argument_refuses_a_whole_number_float():
    assert _int_typed() == []


def test_kv_counts_accept_1e3(capsys):
    common = ["kv", "--model", "llama-3.1-8b", "--context", "1000", "--json"]
    a = _ran(capsys, [*common, "--batch", "1e3", "--tp", "1e0", "--block-size", "1.6e1"])
    b = _ran(capsys, [*common, "--batch", "1000", "--tp", "1", "--block-size", "16"])
    assert json.loads(a) == json.loads(b) and json.loads(a)["batch"] == 1000


def test_spec_k_accepts_a_whole_number_float(capsys):
    a = _ran(capsys, ["spec", "-a", "0.6", "-k", "4e0", "-c", "0.1"])
    assert a == _ran(capsys, ["spec", "-a", "0.6", "-k", "4", "-c", "0.1"])


def _seed_flags() -> list[list[str]]:
    return sorted(w for w, a in _parser_actions() if "--seed" in a.option_strings)


SEEDS = _seed_flags()


@pytest.mark.parametrize("words", SEEDS, ids=[" ".join(w) for w in SEEDS])
def test_a_negative_seed_is_refused_by_every_command(capsys, tmp_path, words):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO + SPECULATIVE)
    t = tmp_path / "t.csv"
    t.write_text(GC)
    positional = {"run": [s], "compare": [s], "spec-sweep": [s], "trace": [t]}
    writes = ["-o", tmp_path / "o"] if words[-1] in ("run", "compare", "spec-sweep") else []
    _refused(capsys, [*words, *positional.get(words[-1], []), "--seed", "-1", *writes],
             ["--seed", "-1"])
    assert not (tmp_path / "o").exists()


def test_seed_type():
    assert seed_number("0") == 0 and seed_number("1e3") == 1000
    for bad in ("-1", "-1e3", "0.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            seed_number(bad)
