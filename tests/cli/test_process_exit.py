"""``servesim`` as the process's own command (``main()`` without arguments, as the console
script and ``python -m simulator.cli`` call it) freezes the garbage collector when its command
ends, so the interpreter's shutdown skips its collections; ``main(argv)`` (tests, scripts)
leaves the collector as it is. The output is the same either way."""
import gc
import sys

import pytest

from simulator.cli.main import main

ARGV = ["spec", "--acceptance-rate", "0.7", "--num-speculative-tokens", "3",
        "--draft-cost", "0.05"]


@pytest.fixture(autouse=True)
def _unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_process_command_freezes_at_exit(monkeypatch, capsys):
    assert main(list(ARGV)) == 0
    as_library = capsys.readouterr().out
    assert gc.get_freeze_count() == 0  # main(argv): collector untouched
    monkeypatch.setattr(sys, "argv", ["servesim", *ARGV])
    assert main() == 0
    assert gc.get_freeze_count() > 0  # the process's command: frozen for the exit
    assert capsys.readouterr().out == as_library


def test_frozen_after_a_failed_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["servesim", "spec", "--acceptance-rate", "2",
                                      "--num-speculative-tokens", "3", "--draft-cost", "0"])
    assert main() == 2
    assert capsys.readouterr().err.startswith("servesim: error: ")
    assert gc.get_freeze_count() > 0
