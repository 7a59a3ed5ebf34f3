"""Hostile corpus, outputs family (issue 26 parts 5, 6 and 9): where a command writes, what it
may not overwrite, the names it puts on disk, its help text.

Families (each case asserts the exit status, one readable line on stderr or none, and, by
``tests/hostile/conftest.py``, an empty private ``$TMPDIR`` afterwards):

- ``RUN_OVER_INPUT``: ``servesim run`` whose output folder holds one of its inputs (the
  scenario, the trace, a model ``config.json``, a GPU spec, an engine profile) under the name
  of a run output: refused in one line naming both, the input unchanged, nothing written;
- ``FAMILY_OVER_INPUT``: the same for ``compare``, ``sweep``, ``plan``, ``spec-sweep`` and
  ``trace --to-parquet`` (their own outputs, a variant's run folder, ``.cache/``,
  ``figures/``, symbolic and hard links);
- ``UNSAFE_NAMES`` x commands: a scenario / sweep / plan name used in a default output
  folder that is not one folder name (``../../x``, ``/abs``, NUL, ``CON``, ...): refused in
  one line, nothing created outside the case's folder; with ``-o`` the same name runs;
- ``HELP``: ``--help`` of every command and subcommand: exit 0, plain text (no docstring
  markup), nothing on stderr;
- ``RERUNS``: a second run into the same folder without figures leaves none of the first
  run's figures, and keeps the user's own files.

A refusal is: exit code 2, exactly one line on stderr starting ``servesim: error:``, no
``Traceback`` / ``internal error``, and the case's needles.
"""
from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest
from helpers import REPO_ROOT, roofline_scenario_text
from test_corpus import _check_needles
from test_corpus import _refused as refused

from simulator.cli.main import SUBCOMMANDS, build_parser, main

SCENARIO = roofline_scenario_text("outs", 10, "{dist: uniform, low: 16, high: 120}",
                                  "{dist: uniform, low: 2, high: 20}")
SPECULATIVE = ("speculative: {method: ngram, num_speculative_tokens: 2, "
               "acceptance: {model: iid, acceptance_rate: 0.6}}\n")
TRACE = "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,2\n0.1,20,3\n0.2,30,4\n"
MODEL_CONFIG = REPO_ROOT / "hardware_profiles/cpu-amd-epyc-1t/servesim-tiny-llama/config.json"
GPU_SPEC = REPO_ROOT / "hardware_profiles/h100-sxm/spec.yaml"
ENGINE_PROFILE = REPO_ROOT / "engine_profiles/vllm-v1.yaml"
MARKUP = re.compile(r"``|:[A-Za-z][\w:-]*:`|`")


def _refused(capsys, argv, needles=()) -> str:
    line = refused(capsys, argv)
    _check_needles(line, needles)
    return line


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


# ---------------------------------------------------------------------------- run
#: input kind -> (how the run is told about it, the file's text)
_KINDS = {
    "scenario": (None, SCENARIO),
    "model config.json": ("model", MODEL_CONFIG.read_text()),
    "GPU spec": ("hardware.gpu", GPU_SPEC.read_text()),
    "engine profile": ("perf.engine", ENGINE_PROFILE.read_text()),
}
#: run outputs an input may be named like (every file a run folder holds but the tables,
#: which the trace cases below cover)
_RUN_NAMES = ("summary.json", "scenario.yaml", "report.md", "report.html", "ttft_cdf.png",
              "kv_usage.png", "steps.parquet")
RUN_OVER_INPUT = [(k, n) for k in _KINDS for n in _RUN_NAMES] + [
    ("trace", "requests.csv"), ("trace", "steps.csv")]


@pytest.mark.parametrize("kind, name", RUN_OVER_INPUT,
                         ids=[f"{k}-as-{n}" for k, n in RUN_OVER_INPUT])
def test_run_never_writes_over_an_input(capsys, tmp_path, kind, name):
    out = tmp_path / "out"
    out.mkdir()
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    argv = ["run", str(scenario), "-o", str(out), "-q", "--no-figures"]
    victim = out / name
    if kind == "scenario":
        victim.write_text(SCENARIO)
        argv[1] = str(victim)
    elif kind == "trace":
        victim.write_text(TRACE)
        argv += ["--trace", str(victim), "--table-format", name.rsplit(".", 1)[1]]
    else:
        key, text = _KINDS[kind]
        victim.write_text(text)
        argv += ["--set", f"{key}={victim}"]
    before = _files(tmp_path)
    _refused(capsys, argv, [f"the output {victim} would overwrite the input {victim}"])
    assert _files(tmp_path) == before  # nothing overwritten, nothing written


# ---------------------------------------------------------------------------- other commands
def _sweep_file(base: Path, name: str = "outs") -> str:
    return (f"name: {json.dumps(name)}\nbase: {json.dumps(str(base))}\n"
            "grid:\n  scheduler.max_num_seqs: [4, 8]\n")


def _plan_file(base: Path, name: str = "outs") -> str:
    return (f"name: {json.dumps(name)}\nbase: {json.dumps(str(base))}\ntarget_rate_rps: 5\n"
            "slo: {ttft_s: 2.0}\nsearch_space:\n  scheduler.max_num_seqs: [4, 8]\n"
            "search: {max_requests: 10, max_probes: 2}\n")


def _family_case(case: str, tmp: Path) -> tuple[list[str], Path]:
    """(argv, the input that would be overwritten) of a ``FAMILY_OVER_INPUT`` case."""
    out = tmp / "out"
    base = tmp / "base.yaml"
    base.write_text(SCENARIO)
    trace = tmp / "t.csv"
    trace.write_text(TRACE)
    cmd, what = case.split(":", 1)
    if cmd == "compare":
        vary = ["--vary", "scheduler.max_num_seqs=4,8"]
        if what in ("compare.md", "compare.json", "compare_ttft_cdf.png"):
            (out / what).write_text(SCENARIO)
            return ["compare", str(out / what), "-o", str(out), "-q", *vary], out / what
        if what == "trace as compare.csv":
            (out / "compare.csv").write_text(TRACE)
            return (["compare", str(base), "-o", str(out), "-q", "--trace",
                     str(out / "compare.csv"), *vary], out / "compare.csv")
        # an input in a variant's run folder, named like a run output
        v = out / "max_num_seqs=4"  # the variant's run folder
        v.mkdir()
        (v / what).write_text(TRACE)
        return (["compare", str(base), "-o", str(out), "-q", "--trace", str(v / what), *vary],
                v / what)
    if cmd == "sweep":
        sweep = tmp / "sw.yaml"
        sweep.write_text(_sweep_file(base))
        argv = ["sweep", str(sweep), "-o", str(out), "-q", "-j", "1"]
        if what in ("sweep.md", "sweep.csv", "sweep.png"):
            (out / what).write_text(_sweep_file(base))
            argv[1] = str(out / what)
            return argv, out / what
        if what == "base as sweep.html":
            (out / "sweep.html").write_text(SCENARIO)
            sweep.write_text(_sweep_file(out / "sweep.html"))
            return argv, out / "sweep.html"
        (out / ".cache").mkdir()
        (out / ".cache" / "t.csv").write_text(TRACE)  # an input in the cache folder
        return argv + ["--trace", str(out / ".cache" / "t.csv")], out / ".cache" / "t.csv"
    if cmd == "plan":
        plan = tmp / "p.yaml"
        plan.write_text(_plan_file(base))
        argv = ["plan", str(plan), "-o", str(out), "-q", "-j", "1"]
        if what in ("plan.json", "plan.md", "plan_table.csv"):
            (out / what).write_text(_plan_file(base))
            argv[1] = str(out / what)
            return argv, out / what
        if what == "base as plan.html":
            (out / "plan.html").write_text(SCENARIO)
            plan.write_text(_plan_file(out / "plan.html"))
            return argv, out / "plan.html"
        if what == "trace as probes.csv":
            (out / "probes.csv").write_text(TRACE)
            return argv + ["--trace", str(out / "probes.csv")], out / "probes.csv"
        (out / "figures").mkdir()
        (out / "figures" / "capacity.png").write_text(GPU_SPEC.read_text())
        return (argv + ["--set", f"hardware.gpu={out / 'figures' / 'capacity.png'}"],
                out / "figures" / "capacity.png")
    if cmd == "spec-sweep":
        (out / what).write_text(SCENARIO + SPECULATIVE)
        return (["spec-sweep", str(out / what), "-o", str(out), "-q", "--rates", "1"],
                out / what)
    # trace --to-parquet
    if what == "same file":
        return ["trace", str(trace), "--to-parquet", str(trace)], trace
    if what == "dot-dot":
        return ["trace", str(trace), "--to-parquet", str(tmp / "x" / ".." / "t.csv")], trace
    link = tmp / "t.parquet"
    if what == "symlink":
        link.symlink_to(trace)
    else:
        os.link(trace, link)
    return ["trace", str(trace), "--to-parquet", str(link)], trace


FAMILY_OVER_INPUT = [
    "compare:compare.md", "compare:compare.json", "compare:compare_ttft_cdf.png",
    "compare:trace as compare.csv", "compare:requests.csv", "compare:summary.json",
    "sweep:sweep.md", "sweep:sweep.csv", "sweep:sweep.png", "sweep:base as sweep.html",
    "sweep:trace in .cache",
    "plan:plan.json", "plan:plan.md", "plan:plan_table.csv", "plan:base as plan.html",
    "plan:trace as probes.csv", "plan:GPU spec as figures/capacity.png",
    "spec-sweep:acceptance_economics.md", "spec-sweep:spec_sweep.json",
    "spec-sweep:acceptance_economics.png",
    "trace:same file", "trace:dot-dot", "trace:symlink", "trace:hard link",
]


@pytest.mark.parametrize("case", FAMILY_OVER_INPUT)
def test_commands_never_write_over_an_input(capsys, tmp_path, case):
    (tmp_path / "out").mkdir()
    argv, victim = _family_case(case, tmp_path)
    before = _files(tmp_path)
    line = _refused(capsys, argv, ["would overwrite the input", str(victim.resolve())])
    assert str(victim.parent.name) in line
    assert _files(tmp_path) == before


# ---------------------------------------------------------------------------- names
UNSAFE_NAMES = ["../../x", "a/b", "/abs/x", "..", ".", "a\\b", "a\0b", "CON", "tab\tx",
                "new\nline", "", "x" * 300]
NAME_COMMANDS = ["run", "compare", "sweep", "plan"]
NAME_CASES = [(c, n) for c in NAME_COMMANDS for n in UNSAFE_NAMES]


def _named(cmd: str, name: str, tmp: Path) -> tuple[list[str], str]:
    """(argv, who) of a command whose default output folder would use ``name``."""
    base = tmp / "base.yaml"
    named = SCENARIO.replace("name: outs", f"name: {json.dumps(name)}")
    if cmd in ("run", "compare"):
        base.write_text(named)
        extra = ["--vary", "scheduler.max_num_seqs=4,8"] if cmd == "compare" else []
        return [cmd, str(base), "-q", *extra], "scenario name"
    base.write_text(SCENARIO)
    f = tmp / f"{cmd}.yaml"
    f.write_text((_sweep_file if cmd == "sweep" else _plan_file)(base, name))
    return [cmd, str(f), "-q", "-j", "1"], f"{cmd} name"


@pytest.mark.parametrize("cmd, name", NAME_CASES,
                         ids=[f"{c}-{json.dumps(n)[:24]}" for c, n in NAME_CASES])
def test_names_stay_inside_the_output_folder(capsys, tmp_path, monkeypatch, cmd, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    argv, who = _named(cmd, name, tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    _refused(capsys, argv, [f"{who} {name!r} cannot name the output folder",
                            "rename it, or give the output folder with -o"])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert not Path("/abs").exists()


@pytest.mark.parametrize("name", ["../../x", "a/b", "CON"])
def test_an_unsafe_name_runs_with_an_output_folder(capsys, tmp_path, name):
    argv, _who = _named("run", name, tmp_path)
    assert main(argv + ["--no-figures", "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err == ""
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["num_requests"] == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "out"]


# ---------------------------------------------------------------------------- help
def _commands() -> list[list[str]]:
    out, stack = [], [([], build_parser())]
    while stack:
        words, p = stack.pop()
        out.append(words)
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend((words + [k], sp) for k, sp in a.choices.items())
    return sorted(out)


HELP = _commands()


@pytest.mark.parametrize("words", HELP, ids=[" ".join(w) or "servesim" for w in HELP])
def test_help_is_plain_text(capsys, words):
    with pytest.raises(SystemExit) as e:
        main([*words, "--help"])
    assert e.value.code == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("usage: servesim")
    m = MARKUP.search(out)
    assert m is None, (m and m[0], out)


def test_every_command_has_a_help_case():
    # servesim itself, every command of the table, calibrate's 4 subcommands
    assert len(HELP) == 1 + sum(len(r.names) for r in SUBCOMMANDS) + 4
    assert ["calibrate", "fit-engine"] in HELP and ["spec-sweep"] in HELP


# ---------------------------------------------------------------------------- reruns
def _rerun_argv(cmd: str, tmp: Path) -> tuple[list[str], list[str]]:
    """(argv, figure files of the first run relative to its output folder)."""
    base = tmp / "base.yaml"
    base.write_text(SCENARIO + (SPECULATIVE if cmd == "spec-sweep" else ""))
    out = str(tmp / "out")
    if cmd == "run":
        return ["run", str(base), "-q", "-o", out], ["ttft_cdf.png", "e2e_cdf.png"]
    if cmd == "compare":
        # in a pool of two workers: their temporary folders go too (conftest checks)
        return (["compare", str(base), "-q", "-o", out, "-j", "2",
                 "--vary", "scheduler.max_num_seqs=4,8"],
                ["compare_ttft_cdf.png", "max_num_seqs=4/ttft_cdf.png",
                 "max_num_seqs=8/ttft_cdf.png"])
    if cmd == "sweep":
        (tmp / "sw.yaml").write_text(_sweep_file(base))
        return ["sweep", str(tmp / "sw.yaml"), "-q", "-j", "1", "-o", out], ["sweep.png"]
    if cmd == "plan":
        (tmp / "p.yaml").write_text(_plan_file(base))
        return ["plan", str(tmp / "p.yaml"), "-q", "-j", "1", "-o", out], ["figures/capacity.png"]
    return (["spec-sweep", str(base), "-q", "-o", out, "--rates", "1"],
            ["acceptance_economics.png"])


RERUNS = ["run", "compare", "sweep", "plan", "spec-sweep"]


@pytest.mark.parametrize("cmd", RERUNS)
def test_a_rerun_without_figures_leaves_no_stale_figure(capsys, tmp_path, cmd):
    argv, figures = _rerun_argv(cmd, tmp_path)
    out = tmp_path / "out"
    assert main(argv) == 0, capsys.readouterr().err
    assert all((out / f).is_file() for f in figures), sorted(_files(out))
    (out / "mine.png").write_text("the user's own")
    assert main(argv + ["--no-figures"]) == 0
    capsys.readouterr()
    assert not any((out / f).exists() for f in figures), sorted(_files(out))
    assert (out / "mine.png").read_text() == "the user's own"


def test_corpus_size():
    """At least 80 generated cases (the brief's bar)."""
    n = (len(RUN_OVER_INPUT) + len(FAMILY_OVER_INPUT) + len(NAME_CASES) + 3 + len(HELP)
         + len(RERUNS))
    assert n >= 80, n


def test_the_shipped_scenario_wins_over_a_folder_of_its_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "default").mkdir()  # what `servesim run default -o default` leaves
    assert main(["run", "default", "-q", "--no-figures", "--set", "workload.max_requests=5",
                 "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err == ""
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["num_requests"] == 5
