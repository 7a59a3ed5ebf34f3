"""Hostile corpus, fresh-clone review family: what a new user met in a first session.

Families (each refusal: exit 2, exactly one line on stderr, ``servesim: error:`` for a
command's own checks or ``servesim CMD: error: argument ...`` for a flag argparse refuses,
no ``Traceback``; and, by ``tests/hostile/conftest.py``, an empty private ``$TMPDIR``):

- ``SHADOW``: a scenario, sweep, plan or base named by a bare name whose ``-o`` folder has
  the same name, in a folder where neither exists yet (the README's own ``servesim run default
  -o default``): the command runs on the shipped file (here: a ``$SERVESIM_HOME`` of its own),
  for every command that takes a scenario and ``-o``;
- ``EMPTY_OUTPUT``: ``-o ''`` (and ``trace --to-parquet ''``) for every command of the parser
  that has the flag: refused naming the flag, nothing written in the working folder;
- ``NOT_TEXT``: a YAML / JSON input that is not UTF-8 (engine profile, GPU spec, model
  ``config.json``, scenario, sweep, plan, a sweep's base, a profile folder's ``fitted.yaml``,
  a ServeGen dataset): one line naming the file, the key that named it and "not a text file";
- ``SWEEP_NAMES``: a sweep point or plan candidate naming an unknown GPU, model, draft model
  or engine profile: refused before any point runs, naming the file and the point;
- ``FILE_NAMES``: an unknown model / GPU / engine profile or a tensor-parallel size that does
  not divide the heads, set in a scenario FILE: the line names the file and the key;
- trace messages (a stated format the file is not, ``1e400``, a corrupt Parquet file, a
  missing trace), counts and seeds on the command line, table widths off a terminal, and a
  constant step time of 0.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from helpers import REPO_ROOT, roofline_scenario_text

from simulator.base.resources import find_yaml_file
from simulator.cli.args import PLAIN_TABLE_WIDTH, output_path, seed_number, table_console
from simulator.cli.main import build_parser, main

LINE = re.compile(r"^servesim(?: [\w-]+)*: error: \S")
SCENARIO = roofline_scenario_text("tiny", 8, "{dist: uniform, low: 16, high: 120}",
                                  "{dist: uniform, low: 2, high: 12}")
SPECULATIVE = ("speculative: {method: ngram, num_speculative_tokens: 2, "
               "acceptance: {model: iid, acceptance_rate: 0.6}}\n")
NOT_UTF8 = b"\xff\xfe name: x\n"  # byte 0xff at offset 0
NOT_TEXT = "not a text file (byte 0xff at offset 0 is not UTF-8)"


def _refused(capsys, argv, needles=()) -> str:
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse refuses a flag's value
        rc = e.code
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1, err
    line = lines[0]
    assert LINE.match(line), line
    assert "Traceback" not in line and "internal error" not in line, line
    for n in needles:
        assert n in line, (n, line)
    return line


def _ran(capsys, argv) -> str:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "error" not in err, err
    return out


# ============================================================================ SHADOW
def _sweep_text(name: str, base: str) -> str:
    return f"name: {name}\nbase: {base}\ngrid:\n  scheduler.max_num_seqs: [4, 8]\n"


def _plan_text(name: str, base: str) -> str:
    return (f"name: {name}\nbase: {base}\ntarget_rate_rps: 5\nslo: {{ttft_s: 2.0}}\n"
            "search_space:\n  scheduler.max_num_seqs: [4, 8]\n"
            "search: {max_requests: 10, max_probes: 2}\n")


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


# ============================================================================ EMPTY_OUTPUT
def _parser_actions():
    """(subcommand words, action) of every option of every (sub)command of the parser."""
    stack = [([], build_parser())]
    while stack:
        words, p = stack.pop()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend((words + [k], sp) for k, sp in a.choices.items())
            else:
                yield words, a


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


# ============================================================================ NOT_TEXT
def _not_text_case(kind: str, tmp: Path) -> tuple[list, list[str]]:
    """(argv, needles) of a ``NOT_TEXT`` case: the file of ``kind`` holds bytes that are not
    UTF-8."""
    base = tmp / "base.yaml"
    base.write_text(SCENARIO)
    bad = tmp / "bad.yaml"
    bad.write_bytes(NOT_UTF8)
    run = ["run", base, "-q", "--no-figures", "-o", tmp / "o"]
    if kind == "engine profile":
        return [*run, "--set", f"perf.engine={bad}"], ["perf.engine", "--set perf.engine="]
    if kind == "GPU spec":
        return [*run, "--set", f"hardware.gpu={bad}"], ["hardware.gpu", "a GPU spec is YAML"]
    if kind == "model config.json":
        (tmp / "m").mkdir()
        (tmp / "m" / "config.json").write_bytes(NOT_UTF8)
        return [*run, "--set", f"model={tmp / 'm'}"], [str(tmp / "m" / "config.json"), "model"]
    if kind == "fitted.yaml":  # a GPU profile folder of the user's
        prof = tmp / "gpu"
        prof.mkdir()
        (prof / "spec.yaml").write_text((REPO_ROOT / "hardware_profiles/h100-sxm/spec.yaml")
                                        .read_text().replace("name: h100-sxm", "name: mygpu"))
        (prof / kind).write_bytes(NOT_UTF8)
        return ([*run, "--set", f"hardware.gpu={prof}", "--set", "perf.source=auto"],
                [str(prof / kind)])
    if kind == "scenario":
        return ["run", bad, "-q", "-o", tmp / "o"], ["a scenario file is YAML text"]
    if kind == "sweep":
        return ["sweep", bad, "-q", "-o", tmp / "o"], ["a sweep file is YAML text"]
    if kind == "plan":
        return ["plan", bad, "-q", "-o", tmp / "o"], ["a plan file is YAML text"]
    if kind == "sweep base":
        sw = tmp / "sw.yaml"
        sw.write_text(_sweep_text("sw", str(bad)))
        return ["sweep", sw, "-q", "-o", tmp / "o"], ["base: "]
    # a ServeGen dataset (its chunk-N-trace.csv is fine)
    sg = tmp / "sg"
    sg.mkdir()
    (sg / "chunk-1-trace.csv").write_text("0,0.5,1.0,Gamma,1.0,2.0\n")
    (sg / "chunk-1-dataset.json").write_bytes(NOT_UTF8)
    return ["trace", sg], [str(sg / "chunk-1-dataset.json"), "a ServeGen dataset is JSON"]


NOT_TEXT_KINDS = ["engine profile", "GPU spec", "model config.json", "fitted.yaml",
                  "scenario", "sweep", "plan", "sweep base", "ServeGen dataset"]


@pytest.mark.parametrize("kind", NOT_TEXT_KINDS)
def test_input_that_is_not_utf8_names_the_file(capsys, tmp_path, kind):
    argv, needles = _not_text_case(kind, tmp_path)
    line = _refused(capsys, argv, [NOT_TEXT, *needles])
    assert "codec" not in line, line
    assert str(tmp_path) in line, line


# ============================================================================ SWEEP_NAMES
BAD_NAMES = [
    ("hardware.gpu", "[h100-sxm, no-such-gpu]", "gpu=no-such-gpu", "unknown GPU 'no-such-gpu'"),
    ("model", "[llama-3.1-8b, no-such-model]", "model=no-such-model",
     "unknown model 'no-such-model'"),
    ("perf.engine", "[vllm-v1, no-such-engine]", "engine=no-such-engine",
     "unknown engine profile 'no-such-engine'"),
    ("speculative", ("[null, {method: draft_model, draft_model: no-such-draft, "
                    "num_speculative_tokens: 2, acceptance: {acceptance_rate: 0.5}}]"),
     "speculative=", "unknown model 'no-such-draft'"),
]


@pytest.mark.parametrize("key, values, label, why", BAD_NAMES, ids=[b[0] for b in BAD_NAMES])
@pytest.mark.parametrize("family", ["sweep", "plan"])
def test_catalog_names_of_every_point_checked_before_any_runs(capsys, tmp_path, monkeypatch,
                                                              family, key, values, label, why):
    base = tmp_path / "base.yaml"
    base.write_text(SCENARIO)
    f = tmp_path / f"{family}.yaml"
    if family == "sweep":
        f.write_text(f"name: s\nbase: {base}\ngrid:\n  {key}: {values}\n")
    else:
        f.write_text(_plan_text("p", str(base)).replace(
            "scheduler.max_num_seqs: [4, 8]", f"{key}: {values}"))

    def never(*a, **k):
        raise AssertionError("a point ran before every point's names were checked")

    monkeypatch.setattr("simulator.experiments.runner.run_tasks", never)
    point = "sweep point 1" if family == "sweep" else "plan candidate point 1"
    dotted = "speculative.draft_model" if key == "speculative" else key
    _refused(capsys, [family, f, "-q", "-j", "1", "-o", tmp_path / "o"],
             [str(f) if family == "sweep" else point, f"{point} ({label}", f"{dotted}: {why}"])
    assert not (tmp_path / "o").exists()


# ============================================================================ FILE_NAMES
FILE_NAMES = [
    ("model: nosuch-model\n", "model: unknown model 'nosuch-model'"),
    ("hardware: {gpu: nosuch-gpu}\n", "hardware.gpu: unknown GPU 'nosuch-gpu'"),
    ("perf: {source: roofline, engine: nosuch-engine}\n",
     "perf.engine: unknown engine profile 'nosuch-engine'"),
    ("cluster: {tensor_parallel_size: 3}\n", "cluster.tensor_parallel_size=3 cannot shard"),
]


def _with(text: str) -> str:
    """SCENARIO with its top-level section of ``text`` (and the section's indented lines)
    replaced by ``text``."""
    key = text.split(":", 1)[0]
    kept, inside = [], False
    for ln in SCENARIO.splitlines(keepends=True):
        if not ln.startswith(" "):
            inside = ln.startswith(f"{key}:")
        if not inside:
            kept.append(ln)
    return "".join(kept) + text


@pytest.mark.parametrize("section, needle", FILE_NAMES, ids=[n[0].split(":")[0]
                                                             for n in FILE_NAMES])
@pytest.mark.parametrize("cmd", ["run", "spec-sweep", "compare"])
def test_a_bad_name_in_a_scenario_file_names_the_file_and_the_key(capsys, tmp_path, cmd,
                                                                  section, needle):
    s = tmp_path / "s.yaml"
    s.write_text(_with(section) + (SPECULATIVE if cmd == "spec-sweep" else ""))
    extra = {"run": [], "spec-sweep": ["--rates", "1"],
             "compare": ["--vary", "scheduler.max_num_seqs=4,8"]}[cmd]
    _refused(capsys, [cmd, s, "-q", "-o", tmp_path / "o", *extra], [f"{s}: {needle}"])
    assert not (tmp_path / "o").exists()


def test_a_bad_name_set_with_a_flag_names_the_flag_too(capsys, tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o", "--set", "hardware.gpu=nope"],
             [f"{s}: --set hardware.gpu=nope: hardware.gpu: unknown GPU 'nope'"])


# ============================================================================ traces
GC = "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,2\n"
MC = '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
STATED = [
    ("g.csv", GC, "mooncake", "its first line 'arrival_time_s,num_prompt_tokens,"),
    ("g.csv", GC, "generic_jsonl", "is CSV"),
    ("g.csv", GC, "parquet", "is CSV"),
    ("m.jsonl", MC, "azure", "is JSON Lines"),
    ("m.jsonl", MC, "generic_csv", "is JSON Lines"),
    ("h.txt", "hello\n", "mooncake", "is neither CSV nor JSON"),
]


@pytest.mark.parametrize("name, text, fmt, looks", STATED, ids=[f"{s[0]}-{s[2]}" for s in STATED])
def test_a_trace_that_is_not_the_stated_format(capsys, tmp_path, name, text, fmt, looks):
    t = tmp_path / name
    t.write_text(text)
    s = tmp_path / "s.yaml"
    s.write_text(_with(f"workload: {{trace: {t}, format: {fmt}}}\n"))
    stated = f"{t}: does not look like the stated format {fmt!r}"
    _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o"], [stated, looks, "workload.format"])
    _refused(capsys, ["trace", t, "--format", fmt], [stated, looks, "--format"])


def test_a_parquet_file_stated_as_text(capsys, tmp_path):
    pd = pytest.importorskip("pandas")
    t = tmp_path / "t.parquet"
    pd.DataFrame({"arrival_time_s": [0.0], "num_prompt_tokens": [10],
                  "num_output_tokens": [2]}).to_parquet(t)
    _refused(capsys, ["trace", t, "--format", "generic_csv"],
             ["does not look like the stated format 'generic_csv' (CSV): it is a Parquet file"])


def test_a_corrupt_parquet_file_is_named_in_one_whole_line(capsys, tmp_path):
    pd = pytest.importorskip("pandas")
    good = tmp_path / "good.parquet"
    pd.DataFrame({"arrival_time_s": [0.0, 1.0], "num_prompt_tokens": [10, 20],
                  "num_output_tokens": [2, 3]}).to_parquet(good)
    data = good.read_bytes()
    t = tmp_path / "t.parquet"
    t.write_bytes(data[:4] + b"\0" * 50 + data[54:])  # the first page header zeroed
    line = _refused(capsys, ["trace", t], [f"{t}: not a readable Parquet file ("])
    assert line.endswith(")") and line.count("(") == line.count(")"), line


OUT_OF_RANGE = [
    ("g.jsonl", '{"arrival_time_s": 1e400, "num_prompt_tokens": 10, "num_output_tokens": 2}\n',
     "arrival_time_s 1e400 is out of range"),
    ("m.jsonl", '{"timestamp": -1e400, "input_length": 10, "output_length": 2}\n',
     "timestamp -1e400 is out of range"),
    ("n.jsonl", '{"arrival_time_s": 0, "num_prompt_tokens": 1e999, "num_output_tokens": 2}\n',
     "num_prompt_tokens 1e999 is out of range (an integer here is at most 2,147,483,647"),
    ("g.csv", "arrival_time_s,num_prompt_tokens,num_output_tokens\n1E400,10,2\n",
     "arrival_time_s '1E400' is out of range"),
]


@pytest.mark.parametrize("name, text, needle", OUT_OF_RANGE, ids=[c[0] for c in OUT_OF_RANGE])
def test_a_number_beyond_the_float_range_is_out_of_range(capsys, tmp_path, name, text, needle):
    t = tmp_path / name
    t.write_text(text)
    line = _refused(capsys, ["trace", t], [f"{t}:", needle])
    assert " inf " not in line, line


def test_infinity_written_as_such_is_not_finite(capsys, tmp_path):
    t = tmp_path / "g.csv"
    t.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\ninf,10,2\n")
    _refused(capsys, ["trace", t], ["arrival_time_s 'inf' is not a finite number"])


def test_a_missing_trace_reads_like_the_other_missing_files(capsys, tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    line = _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o", "--trace", "nope.csv"],
                    ["trace file 'nope.csv' not found (looked in: "])
    assert "traces file" not in line
    looked = line.split("looked in: ", 1)[1].rstrip(")").split(", ")
    assert len(looked) == len(set(looked)), looked  # each folder once


# ============================================================================ numbers
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


# ============================================================================ tables
def test_tables_off_a_terminal_are_not_cut(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    base = tmp_path / "base.yaml"
    base.write_text(SCENARIO)
    sw = tmp_path / "sw.yaml"
    sw.write_text(f"name: sw\nbase: {base}\ngrid:\n  hardware.gpu: [h100-sxm, h200-sxm]\n"
                  "  scheduler.max_num_seqs: [4]\n")
    out = _ran(capsys, ["sweep", sw, "-j", "1", "-o", tmp_path / "o", "--no-figures"])
    assert "gpu=h100-sxm" in out and "gpu=h200-sxm" in out, out
    assert "…" not in out, out
    plan = tmp_path / "p.yaml"
    plan.write_text(_plan_text("p", str(base)))
    out = _ran(capsys, ["plan", plan, "-j", "1", "-o", tmp_path / "po", "--no-figures"])
    assert "TTFT p99 (s)" in out, out
    assert "…" not in out, out


def test_table_console_width(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert table_console().width == PLAIN_TABLE_WIDTH  # pytest's stdout is no terminal
    monkeypatch.setenv("COLUMNS", "123")
    assert table_console().width == 123
    monkeypatch.setenv("COLUMNS", "wide")
    assert table_console().width == PLAIN_TABLE_WIDTH


# ============================================================================ constant 0
@pytest.mark.parametrize("constant", ["{step_s: 0, per_token_s: 0, per_seq_s: 0}", "{}"])
def test_a_constant_step_time_of_zero_is_refused(capsys, tmp_path, constant):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o", "--set", "perf.source=constant",
                      "--set", f"perf.constant={constant}"],
             [str(s), "perf.constant: step_s, per_token_s and per_seq_s are all 0",
              "give at least one of them > 0"])


def test_a_constant_model_of_zero_is_refused_by_the_api():
    from simulator.perf import ConstantPerfModel
    with pytest.raises(ValueError, match="all 0"):
        ConstantPerfModel()
    assert ConstantPerfModel(per_seq_s=1e-3).per_seq_s == 1e-3


def test_corpus_size():
    n = (len(SHADOW) + 2 * len(EMPTY_OUTPUT) + len(NOT_TEXT_KINDS) + 2 * len(BAD_NAMES)
         + 3 * len(FILE_NAMES) + len(STATED) + len(OUT_OF_RANGE) + len(SEEDS))
    assert n >= 60, n
