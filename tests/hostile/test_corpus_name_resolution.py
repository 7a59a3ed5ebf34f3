"""Hostile corpus, bare names and output folders (``SHADOW``): a scenario, sweep, plan or
base named by a bare name whose ``-o`` folder has the same name, in a folder where neither
exists yet (``servesim run default -o default``), runs on the shipped file (here: a
``$SERVESIM_HOME`` of its own), for every command that takes a scenario and ``-o``, and again
once the folder exists; a bare name never resolves to a folder while a file is left; a path
with a folder part means what it says.

Also the size of the whole command-line family (this file and the other ``test_corpus_*``
files that import :mod:`command_cases`). Every case runs with an empty private ``$TMPDIR``
(``tests/hostile/conftest.py``)."""
from __future__ import annotations

from pathlib import Path

import pytest
from command_cases import SCENARIO, SPECULATIVE, _plan_text, _ran, _refused, _sweep_text
from test_corpus_catalog_names import BAD_NAMES, FILE_NAMES
from test_corpus_empty_output import EMPTY_OUTPUT
from test_corpus_not_utf8 import NOT_TEXT_KINDS
from test_corpus_number_flags import SEEDS
from test_corpus_trace_messages import OUT_OF_RANGE, STATED

from simulator.base.resources import find_yaml_file


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A ``$SERVESIM_HOME`` whose ``scenarios/`` holds the small files the SHADOW cases name
    (the rest falls back to the shipped folders), and an empty working folder."""
    sc = tmp_path / "home" / "scenarios"
    sc.mkdir(parents=True)
    (sc / "tiny.yaml").write_text(SCENARIO)
    (sc / "tinyspec.yaml").write_text(SCENARIO + SPECULATIVE)
    (sc / "tinysweep.yaml").write_text(_sweep_text("tinysweep", "tiny"))
    (sc / "tinyplan.yaml").write_text(_plan_text("tinyplan", "tiny"))
    monkeypatch.setenv("SERVESIM_HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


#: (command line, the file the output folder must hold when the run used the shipped file)
SHADOW = {
    "run": (["run", "tiny", "-o", "tiny", "-q", "--no-figures"], "summary.json"),
    "compare": (["compare", "tiny", "--vary", "scheduler.max_num_seqs=4,8", "-o", "tiny", "-q",
                 "--no-figures"], "compare.json"),
    "spec-sweep": (["spec-sweep", "tinyspec", "--rates", "1", "-o", "tinyspec", "-q",
                    "--no-figures"], "spec_sweep.json"),
    "sweep": (["sweep", "tinysweep", "-o", "tinysweep", "-q", "-j", "1", "--no-figures"],
              "sweep.csv"),
    # the sweep's base is named like its output folder: read again after the folder exists
    "sweep base": (["sweep", "tinysweep", "-o", "tiny", "-q", "-j", "1", "--no-figures"],
                   "sweep.csv"),
    "plan": (["plan", "tinyplan", "-o", "tinyplan", "-q", "-j", "1", "--no-figures"],
             "plan.json"),
    "plan base": (["plan", "tinyplan", "-o", "tiny", "-q", "-j", "1", "--no-figures"],
                  "plan.json"),
}


@pytest.mark.parametrize("case", list(SHADOW))
def test_output_folder_named_like_the_input_does_not_shadow_it(capsys, home, case):
    argv, made = SHADOW[case]
    _ran(capsys, argv)
    out = home / argv[argv.index("-o") + 1]
    assert (out / made).is_file(), sorted(p.name for p in out.iterdir())
    # a second run into the now existing folder reads the same file (README's quick start)
    _ran(capsys, argv)


def test_a_bare_name_never_resolves_to_a_folder_while_a_file_is_left(home):
    shipped = home.parent / "home" / "scenarios" / "tiny.yaml"
    assert find_yaml_file("tiny") == shipped
    (home / "tiny").mkdir()  # an earlier run's output folder
    assert find_yaml_file("tiny") == shipped
    (home / "tiny.yaml").write_text(SCENARIO)  # a file here wins, with or without the folder
    assert find_yaml_file("tiny") == home / "tiny.yaml"
    (home / "lonely").mkdir()  # nothing but the folder: returned, for the caller to refuse
    assert find_yaml_file("lonely") == Path("lonely")
    with pytest.raises(FileNotFoundError, match="scenario file 'nothing' not found"):
        find_yaml_file("nothing")


def test_a_path_with_a_folder_part_means_what_it_says(capsys, home):
    (home / "tiny").mkdir()
    _refused(capsys, ["run", "./tiny", "-q", "-o", "out"],
             ["tiny: is a directory, not a scenario file"])


def test_corpus_size():
    n = (len(SHADOW) + 2 * len(EMPTY_OUTPUT) + len(NOT_TEXT_KINDS) + 2 * len(BAD_NAMES)
         + 3 * len(FILE_NAMES) + len(STATED) + len(OUT_OF_RANGE) + len(SEEDS))
    assert n >= 60, n
