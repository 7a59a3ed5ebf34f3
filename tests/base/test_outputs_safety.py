"""Outputs versus inputs and newcomer trip-ups (issue 26 parts 6 and 9), one test per defect:

- ``-o .`` next to the scenario file named ``scenario.yaml`` (or a trace named
  ``requests.csv``) overwrote (deleted) it: refused in one line naming both, before anything
  runs, the input left as it was;
- ``name: ../../x`` put ``reports/{name}`` outside ``reports/``: a name used in a default
  output folder must be one folder name;
- a ``--no-figures`` rerun into the same folder left the last run's figures beside the new
  tables: a run clears its own known output files, never another file;
- ``servesim --help`` printed docstring markup (double backticks, ``:data:`` roles);
- after ``servesim run default -o default``, ``servesim run default`` failed with
  ``default: is a directory``: a folder does not hide a shipped scenario of its name.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from simulator.base.outdir import (
    OutputFolderError,
    check_outputs_spare_inputs,
    clear_outputs,
    named_output_folder,
    unsafe_name_reason,
)
from simulator.base.resources import find_yaml_file
from simulator.cli.args import plain_text
from simulator.cli.main import main
from simulator.report.figures import FIGURE_FILES
from tests.helpers import roofline_scenario_text

SCENARIO = roofline_scenario_text("safety", 12, "{dist: uniform, low: 16, high: 200}",
                                  "{dist: uniform, low: 2, high: 40}")
TRACE = "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,2\n0.5,20,3\n1,30,4\n"


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("servesim: error: "), err
    return err[0]


def test_run_into_the_scenarios_folder_does_not_overwrite_the_scenario(tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    assert main(["run", "scenario.yaml", "-o", ".", "-q", "--no-figures"]) == 2
    line = _one_error_line(capsys)
    assert "-o .: the output scenario.yaml would overwrite the input " in line
    assert str(tmp_path / "scenario.yaml") in line
    assert (tmp_path / "scenario.yaml").read_text() == SCENARIO  # left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenario.yaml"]  # nothing ran


@pytest.mark.parametrize("table_format", ["csv", "parquet"])
def test_a_trace_named_like_a_run_table_is_not_overwritten(tmp_path, capsys, table_format):
    """``requests.csv`` is written by a csv run and deleted by a parquet run (a folder never
    holds both formats): either would destroy the trace."""
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "requests.csv").write_text(TRACE)
    assert main(["run", str(tmp_path / "s.yaml"), "--trace", str(tmp_path / "requests.csv"),
                 "-o", str(tmp_path), "-q", "--no-figures",
                 "--table-format", table_format]) == 2
    line = _one_error_line(capsys)
    assert f"the output {tmp_path / 'requests.csv'} would overwrite the input " \
           f"{tmp_path / 'requests.csv'}" in line
    assert (tmp_path / "requests.csv").read_text() == TRACE


@pytest.mark.parametrize("name", ["report.html", "summary.json", "steps.parquet"])
def test_a_folder_named_like_an_output_file_is_refused_before_the_run(tmp_path, capsys, name):
    # it failed halfway before (tables and report.md written, no summary.json), exit 1
    (tmp_path / "s.yaml").write_text(SCENARIO)
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    assert main(["run", str(tmp_path / "s.yaml"), "-o", str(out), "-q", "--no-figures"]) == 2
    line = _one_error_line(capsys)
    assert f"-o {out}: {out / name} is a folder, where the run writes a file" in line
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing ran


def test_an_output_place_that_cannot_be_looked_at_is_left_to_the_write(tmp_path, monkeypatch):
    # Path.is_dir raises PermissionError under a folder the user cannot enter (Python 3.11):
    # the check passes it on (the write reports it, one line, exit 2), never an OSError here
    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_dir", refuse)
    check_outputs_spare_inputs(tmp_path / "locked" / "sub", ["out.parquet"], [])


def test_an_output_folder_that_cannot_be_looked_at_is_one_line(tmp_path, capsys, monkeypatch):
    # under a folder the user cannot enter, Path.exists raises PermissionError (Python 3.11):
    # the output folder's own line and exit 2, not the generic OSError line and exit 1
    (tmp_path / "s.yaml").write_text(SCENARIO)
    out = tmp_path / "locked" / "sub"
    real = Path.exists

    def exists(self, *args, **kwargs):
        if self == out or out in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    assert main(["run", str(tmp_path / "s.yaml"), "-o", str(out), "-q", "--no-figures"]) == 2
    line = _one_error_line(capsys)
    assert f"output folder {out}: cannot create it (Permission denied)" in line


def test_a_symlinked_or_hard_linked_output_is_the_input(tmp_path):
    (tmp_path / "in.csv").write_text(TRACE)
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").symlink_to(tmp_path / "in.csv")
    os.link(tmp_path / "in.csv", out / "summary.json")
    for name in ("report.md", "summary.json"):
        with pytest.raises(OutputFolderError, match=f"the output {out / name} would overwrite "
                                                    f"the input {tmp_path / 'in.csv'}"):
            check_outputs_spare_inputs(out, [name], [(tmp_path / "in.csv").resolve()])
    check_outputs_spare_inputs(out, ["steps.csv"], [(tmp_path / "in.csv").resolve()])
    # a folder output owns everything in it
    (out / ".cache").mkdir()
    (out / ".cache" / "t.csv").write_text(TRACE)
    with pytest.raises(OutputFolderError, match=r"the output .*\.cache would overwrite"):
        check_outputs_spare_inputs(out, [".cache/"], [(out / ".cache" / "t.csv").resolve()])


@pytest.mark.parametrize("name, why", [
    ("../../x", "path separator"), ("/etc", "path separator"), ("a\\b", "path separator"),
    ("..", "not a folder name"), (".", "not a folder name"), ("", "empty"), ("  ", "empty"),
    ("a\0b", "control character"), ("a\nb", "control character"),
    ("x" * 256, "longer than 255 bytes"), ("é" * 128, "longer than 255 bytes"),
    ("CON", "Windows reserves"), ("nul.txt", "Windows reserves"), ("com1", "Windows reserves"),
])
def test_unsafe_folder_names(name, why):
    assert why in unsafe_name_reason(name)
    with pytest.raises(OutputFolderError, match="rename it, or give the output folder with -o"):
        named_output_folder("reports/{name}", name, "scenario name")


@pytest.mark.parametrize("name", ["default", "a.b-c_d", "x" * 255, "é" * 127, "console",
                                  "COM10", "..a"])
def test_safe_folder_names(name):
    assert unsafe_name_reason(name) is None
    assert named_output_folder("reports/{name}", name) == Path("reports") / name
    # a template without {name} does not use it: any name goes
    assert named_output_folder("out/fixed", "../x") == Path("out/fixed")


def test_a_scenario_name_cannot_lead_out_of_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(SCENARIO.replace("name: safety", "name: ../../x"))
    assert main(["run", "s.yaml", "-q", "--no-figures"]) == 2
    line = _one_error_line(capsys)
    assert "scenario name '../../x' cannot name the output folder reports/{name}" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # no reports/, no ../x
    # with -o the name names nothing on disk
    assert main(["run", "s.yaml", "-q", "--no-figures", "-o", "out"]) == 0
    assert (tmp_path / "out" / "summary.json").is_file()


def test_a_no_figures_rerun_clears_the_last_runs_figures_only(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "s.yaml"), "-q", "-o", str(out)]) == 0
    drawn = {p.name for p in out.glob("*.png")}
    assert drawn and drawn <= set(FIGURE_FILES.values())
    (out / "notes.txt").write_text("mine")           # the user's own file
    (out / "extra.png").write_text("mine too")       # not a name a run writes
    assert main(["run", str(tmp_path / "s.yaml"), "-q", "--no-figures", "-o", str(out)]) == 0
    assert not list(out.glob("*_cdf.png")) and not (out / "batch_size.png").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "extra.png").read_text() == "mine too"
    assert (out / "summary.json").is_file() and (out / "requests.parquet").is_file()


def test_clear_outputs_removes_a_link_not_its_target(tmp_path):
    (tmp_path / "target.png").write_text("keep")
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "capacity.png").symlink_to(tmp_path / "target.png")
    (out / "plan.md").write_text("old")
    removed = clear_outputs(out, ["plan.md", "figures/capacity.png", "figures/pareto.png"])
    assert sorted(p.relative_to(out).as_posix() for p in removed) == [
        "figures/capacity.png", "plan.md"]
    assert (tmp_path / "target.png").read_text() == "keep"
    assert not (out / "figures").exists()  # left empty: removed
    assert out.is_dir()


def _all_parsers(parser):
    """``(command, parser)`` for the parser and every subcommand's, nested ones too."""
    import argparse
    out, stack = [], [("servesim", parser)]
    while stack:
        name, p = stack.pop()
        out.append((name, p))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend((f"{name} {k}", sp) for k, sp in a.choices.items())
    return out


def test_no_help_text_prints_docstring_markup():
    from simulator.cli.main import build_parser
    parsers = _all_parsers(build_parser())
    names = {n for n, _ in parsers}
    assert {"servesim run", "servesim kv", "servesim calibrate import-aic",
            "servesim validate"} <= names
    import re
    markup = re.compile(r"``|:[A-Za-z][\w:-]*:`|`")
    for name, p in parsers:
        text = p.format_help()
        assert not markup.search(text), (name, markup.search(text)[0], text)


def test_plain_text_converts_roles_and_literals():
    assert plain_text("``servesim`` command line: every subcommand in one table, "
                      ":data:`SUBCOMMANDS`.") == \
        "servesim command line: every subcommand in one table, SUBCOMMANDS."
    assert plain_text(":func:`~simulator.runs.scenario.run_scenario` and :py:class:`a.B` and "
                      ":ref:`the guide <guide-label>`; `plain`") == \
        "run_scenario and a.B and the guide; plain"
    assert plain_text("no markup: 5 % of x, a 'quote'") == "no markup: 5 % of x, a 'quote'"


def test_a_folder_does_not_hide_the_shipped_scenario(tmp_path, capsys, monkeypatch):
    """``servesim run default -o default`` then ``servesim run default``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "summary.json").write_text("{}")  # an earlier run's folder
    shipped = find_yaml_file("default")                      # the loader's lookup
    assert shipped.name == "default.yaml" and shipped.parent.name == "scenarios"
    assert find_yaml_file("./default").resolve() == (tmp_path / "default").resolve()  # as typed
    (tmp_path / "nosuch").mkdir()
    assert find_yaml_file("nosuch") == Path("nosuch")        # no shipped scenario of it
    assert main(["run", "default", "-q", "--no-figures", "--set",
                 "workload.max_requests=5", "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "summary.json").is_file()
    assert main(["run", "./default", "-q", "-o", str(tmp_path / "out2")]) == 2
    assert "is a directory, not a scenario file" in _one_error_line(capsys)
    assert main(["run", "nosuch", "-q", "-o", str(tmp_path / "out2")]) == 2
    assert "nosuch: is a directory, not a scenario file" in _one_error_line(capsys)


RECORDED = ("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
            "0.0,100,5,0.05,0.25\n0.5,64,3,0.04,0.14\n")


def test_validate_never_writes_over_the_recorded_run(tmp_path, capsys):
    """``validate --recorded R -o DIR`` with the record named like one of its outputs."""
    rec = tmp_path / "requests_compared.csv"
    rec.write_text(RECORDED)
    assert main(["validate", "--recorded", str(rec), "--gpu", "h100-sxm", "--model",
                 "llama-3.1-8b", "-o", str(tmp_path), "-q", "--no-figures"]) == 2
    line = _one_error_line(capsys)
    assert f"the output {rec} would overwrite the input {rec}" in line
    assert rec.read_text() == RECORDED
    # into another folder it runs
    assert main(["validate", "--recorded", str(rec), "--gpu", "h100-sxm", "--model",
                 "llama-3.1-8b", "-o", str(tmp_path / "v"), "-q", "--no-figures"]) == 0
    assert (tmp_path / "v" / "validation.json").is_file()


def test_fit_engine_never_writes_over_its_base_profile(tmp_path, capsys):
    """``calibrate fit-engine RUNS --base P.yaml -o P.yaml``: refused before the fit."""
    base = tmp_path / "mine.yaml"
    text = (Path(__file__).resolve().parents[2] / "engine_profiles" / "vllm-v1.yaml").read_text()
    base.write_text(text)
    runs = []
    for i in range(2):
        runs.append(tmp_path / f"r{i}.csv")
        runs[-1].write_text(RECORDED)
    assert main(["calibrate", "fit-engine", *map(str, runs), "--base", str(base),
                 "-o", str(base), "--gpu", "h100-sxm", "--model", "llama-3.1-8b"]) == 2
    line = _one_error_line(capsys)
    assert f"-o: the output {base} would overwrite the input {base}" in line
    assert base.read_text() == text
