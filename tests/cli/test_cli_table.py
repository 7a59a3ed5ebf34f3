"""The subcommand table of ``servesim``: every row loads, ``--help`` lists them all, and a row
that cannot load stops the CLI with one readable line (exit 2) instead of vanishing."""
from __future__ import annotations

import importlib

import pytest

from simulator.cli import main as cli
from simulator.cli.main import SUBCOMMANDS, Subcommand, build_parser, main

EXPECTED = {"run", "compare", "sweep", "plan", "trace", "kv", "spec", "spec-sweep", "profiles",
            "calibrate", "validate"}


def _choices(parser) -> dict:
    return next(a for a in parser._actions if a.dest == "command").choices


def test_the_table_names_every_subcommand_once():
    names = [n for row in SUBCOMMANDS for n in row.names]
    assert len(names) == len(set(names)) and set(names) == EXPECTED


def test_every_row_loads_and_help_lists_it(capsys):
    assert set(_choices(build_parser())) == EXPECTED
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in EXPECTED:
        assert name in out, name


@pytest.mark.parametrize("row, fragment", [
    (Subcommand(("ghost",), "simulator.no_such_module", "register"),
     "subcommand ghost cannot load: simulator.no_such_module: ModuleNotFoundError"),
    (Subcommand(("run",), "simulator.cli.main", "no_such_function"),
     "subcommand run cannot load: simulator.cli.main: AttributeError"),
    (Subcommand(("spec", "extra"), "simulator.cli.main", "register_spec"),
     "simulator.cli.main.register_spec added spec; the subcommand table expects spec, extra"),
])
def test_a_row_that_cannot_load_fails_loudly(monkeypatch, capsys, row, fragment):
    monkeypatch.setattr(cli, "SUBCOMMANDS", (row,))
    assert main(["run", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("servesim: error: ") and fragment in err


def test_a_broken_dependency_names_the_subcommand(monkeypatch, capsys):
    """An ImportError inside a command module (a missing dependency) is reported, not hidden."""
    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "simulator.cli.plan":
            raise ImportError("No module named 'pyarrow'")
        return real(name, *a, **k)

    monkeypatch.setattr(cli.importlib, "import_module", fake)
    for argv in (["plan", "x.yaml"], ["--help"], ["no-such-command"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "subcommand sweep/plan cannot load: simulator.cli.plan: ImportError: No " \
               "module named 'pyarrow'" in err, argv


def test_a_subcommand_imports_only_its_own_row(monkeypatch, capsys):
    """Start-up: ``servesim run`` imports the module of the ``run`` row and no other row's."""
    real = importlib.import_module
    loaded = []

    def spy(name, *a, **k):
        loaded.append(name)
        return real(name, *a, **k)

    monkeypatch.setattr(cli.importlib, "import_module", spy)
    assert main(["run", "no-such-file.yaml"]) == 2  # parsed, then the file is missing
    assert "not found" in capsys.readouterr().err
    assert loaded == ["simulator.cli.main"]
