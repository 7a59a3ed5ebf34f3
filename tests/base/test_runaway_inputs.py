"""Runaway inputs and "where is the problem?" (issue 26 items 4 and 8), one test per defect:
each input is refused in one line naming its file / key / flag, before any simulation, in
bounded memory; the limits themselves are checked at their boundaries, with counts derived by
hand. The hostile corpus (``tests/hostile/test_corpus_runaway.py``) runs the families."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import yaml

from simulator.base import input_limits
from simulator.base.input_limits import (
    InputLimitError,
    bounded_lines,
    check_yaml_nodes,
    load_json,
    load_yaml,
    short_repr,
)
from simulator.cli.main import main
from simulator.scenario.yaml_files import load_yaml_text
from tests.helpers import roofline_scenario_text

BASE = roofline_scenario_text("runaway", 20, "{dist: uniform, low: 16, high: 200}",
                              "{dist: uniform, low: 1, high: 40}")


def _err(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def _base(tmp_path: Path) -> Path:
    p = tmp_path / "base.yaml"
    p.write_text(BASE)
    return p


def _laughs(levels: int, width: int = 9) -> str:
    parts = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    parts += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels)]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------- alias bombs
def test_alias_bomb_refused_before_any_object_is_built(capsys, tmp_path, monkeypatch):
    """The 9-level "billion laughs" (9^10 values in 1 KB) hung past 2 GB (its repr was built
    for the error message). Now: refused from the node graph, before construction."""
    built = []
    real = yaml.constructor.BaseConstructor.construct_document
    monkeypatch.setattr(yaml.constructor.BaseConstructor, "construct_document",
                        lambda self, node: built.append(1) or real(self, node))
    p = tmp_path / "bomb.yaml"
    p.write_text(BASE + _laughs(10) + "workload2: *a9\n")
    tracemalloc.start()
    rc = main(["run", str(p), "-q", "--no-figures", "-o", str(tmp_path / "o")])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rc == 2
    # a6 is the first anchor past 10^6 values: 1 + 9 (1 + 9 (...)) = (9^8 - 1) / 8 = 5.4e6
    assert _err(capsys) == [
        (f"servesim: error: {p}:17: a6: holds more than 1,000,000 values with its aliases "
        "expanded (the most servesim reads from one YAML document; an alias bomb?)")]
    assert built == []
    assert peak < 32 * 2**20


def test_expanded_value_count_is_exact():
    """``{a0: &a0 [x, x, x], a1: [*a0, *a0, *a0]}``: the root mapping (1), its two keys (2),
    a0's list and items (1 + 3 = 4) and a1's list of three copies (1 + 3 x 4 = 13): 20 values.
    The limit is inclusive."""
    doc = yaml.compose("{a0: &a0 [x, x, x], a1: [*a0, *a0, *a0]}", Loader=yaml.SafeLoader)
    check_yaml_nodes(doc, max_values=20)
    with pytest.raises(InputLimitError, match="holds more than 19 values"):
        check_yaml_nodes(doc, max_values=19)


def test_recursive_alias_refused():
    with pytest.raises(InputLimitError, match="line 1: r.1: a recursive alias"):
        load_yaml("r: &r [1, *r]")
    with pytest.raises(InputLimitError, match="a recursive alias"):
        load_yaml_text("r: &r {a: *r}")


def test_error_values_are_shown_lazily():
    """A shared structure of 9^10 leaves (built without the check) shows in 60 characters
    without its repr being built; small values show exactly as ``repr``."""
    bomb = yaml.load(_laughs(10) + "top: *a9\n", Loader=yaml.CSafeLoader)
    tracemalloc.start()
    shown = short_repr(bomb)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert shown == repr({"a0": ["lol"] * 9})[:57] + "..."
    assert peak < 2**20
    for v in ([1, 2], "x", 1e300, {"a": [1, None]}, True, -3):
        assert short_repr(v) == repr(v)
    assert short_repr(10**5000) == "<an integer of ~5,001 digits>"  # 10^5000: 5,001 digits


# ---------------------------------------------------------------------------- nesting
@pytest.mark.parametrize("loader", [load_yaml, load_yaml_text], ids=["libyaml", "scenario"])
def test_yaml_nesting_bound_is_100_levels(loader):
    """A list nested n deep holds n levels: 100 pass, 101 are refused (flow and block)."""
    assert loader("[" * 100 + "]" * 100) == _nested(100)
    with pytest.raises(InputLimitError, match="nested deeper than 100 levels"):
        loader("[" * 101 + "]" * 101)
    with pytest.raises(InputLimitError, match="nested deeper than 100 levels"):
        loader("- " * 50_000 + "1")
    # nesting through aliases counts: 3 levels of text, 151 of value
    deep = "d0: &d0 [1]\n" + "".join(f"d{i}: &d{i} [*d{i - 1}]\n" for i in range(1, 151))
    with pytest.raises(InputLimitError, match="d100: nested deeper than 100 levels"):
        loader(deep)


def _nested(n: int) -> list:
    v: list = []
    for _ in range(n - 1):
        v = [v]
    return v


def test_json_nesting_bound_is_100_levels():
    """Brackets inside strings do not count; the line of the 101st level is named."""
    assert load_json("[" * 100 + "]" * 100) == _nested(100)
    assert load_json('{"s": "' + "[" * 500 + '"}') == {"s": "[" * 500}
    with pytest.raises(InputLimitError, match="line 3: nested deeper than 100 levels"):
        load_json('{"a": 1,\n"b": 2,\n"c": ' + "[" * 50_000 + "]" * 50_000 + "}")


def test_nested_scenario_value_is_one_line(capsys, tmp_path):
    """50,000 levels in a scenario were a RecursionError (an internal error)."""
    p = tmp_path / "deep.yaml"
    p.write_text(BASE + "x: " + "{a: " * 50_000 + "1" + "}" * 50_000 + "\n")
    assert main(["run", str(p), "-q", "--no-figures", "-o", str(tmp_path / "o")]) == 2
    assert _err(capsys) == [f"servesim: error: {p}:11: nested deeper than 100 levels"]


# ---------------------------------------------------------------------------- numbers
def _spec(tmp_path: Path, **over) -> Path:
    from simulator.base.resources import data_dir
    text = (data_dir("hardware_profiles") / "h100-sxm" / "spec.yaml").read_text()
    over = {"name": "big", "aliases": "[]", **over}
    lines = [f"{ln.split(':', 1)[0]}: {over[ln.split(':', 1)[0]]}"
             if ln.split(":", 1)[0] in over else ln for ln in text.splitlines()]
    p = tmp_path / "gpu.yaml"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_gpu_spec_hbm_bytes_out_of_range(capsys, tmp_path):
    """``hbm_bytes: 1e30`` was an OverflowError mid-simulation (the block count passed
    int64); now refused with the key and its range; 2^50 (the ceiling) runs."""
    p = _spec(tmp_path, hbm_bytes="1.0e30")
    argv = ["run", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(tmp_path / "o"),
            "--set", f"hardware.gpu={p}"]
    assert main(argv) == 2
    # (YAML 1.1 reads 1.0e30, no sign after the e, as text: the spec reads text numbers)
    line, = _err(capsys)  # the scenario, the flag (its value cut) and the key name the spec
    assert line.startswith(f"servesim: error: {_base(tmp_path)}: --set hardware.gpu="), line
    assert line.endswith(f": hardware.gpu: {p}: hbm_bytes='1.0e30' is out of range: "
                         "allowed (0, 1.1259e+15]"), line
    _spec(tmp_path, hbm_bytes=str(2**50))
    assert main(argv) == 0, _err(capsys)
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["num_completed"] + s["num_rejected"] == 20


def test_config_json_size_out_of_range(tmp_path):
    from simulator.catalog.model_config import load_hf_config
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 1e30,
           "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 100}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"hidden_size=1e\+30 is out of range \(at most "
                                         r"2,147,483,647 in magnitude\)"):
        load_hf_config(p)
    p.write_text(json.dumps({**cfg, "hidden_size": 64, "num_hidden_layers": 10**9}))
    with pytest.raises(ValueError, match="num_hidden_layers=1000000000 is out of range"):
        load_hf_config(p)
    p.write_text(json.dumps(cfg).replace("1e+30", "Infinity"))  # json reads Infinity
    with pytest.raises(ValueError, match="hidden_size=inf is not an integer"):
        load_hf_config(p)


def test_integer_of_5000_digits_names_its_key(capsys, tmp_path):
    """Python's "Exceeds the limit (4300 digits)" without a key, before; now the key and
    "too large", from a file (with its line) and from ``--set``."""
    digits = "9" * 5000
    p = tmp_path / "s.yaml"
    p.write_text(BASE + f"scheduler: {{max_num_seqs: {digits}}}\n")
    assert main(["run", str(p), "-q", "--no-figures", "-o", str(tmp_path / "o")]) == 2
    assert _err(capsys) == [(f"servesim: error: {p}:11: scheduler.max_num_seqs: an integer of "
                            "5,000 digits is too large (at most 4,300 digits)")]
    assert main(["run", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(tmp_path / "o"),
                 "--set", f"scheduler.max_num_seqs={digits}"]) == 2
    line, = _err(capsys)
    assert line == ("servesim: error: --set scheduler.max_num_seqs=" + "9" * 54 + "...: an "
                    "integer of 5,000 digits is too large (at most 4,300 digits)")
    with pytest.raises(InputLimitError, match="line 2: n: an integer of 5,000 digits"):
        load_json('{"a": 1,\n"n": ' + digits + "}")


def test_fallback_replicas_count_against_the_memory_budget(capsys, tmp_path):
    """A degrade fallback of 10^12 replicas ran (and hung building them): its replicas are
    now part of the run's memory estimate."""
    assert main(["run", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(tmp_path / "o"),
                 "--set", "scheduler.admission.fallback={num_replicas: 1000000000000}"]) == 2
    line, = _err(capsys)
    assert "1,000,000,000,001 replicas" in line and "memory budget" in line, line


# ---------------------------------------------------------------------------- trace lines
def test_line_without_newline_is_not_read_whole(capsys, tmp_path, monkeypatch):
    """A trace with no newline was read whole (1 GB file -> 1.8 GB) then failed with an
    uncaught CSV error. With the limit lowered to 4 KiB, a 4 MB file costs < 256 KiB."""
    monkeypatch.setattr(input_limits, "MAX_LINE_CHARS", 4096)
    p = tmp_path / "t.csv"
    p.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n" + "1" * (4 << 20))
    tracemalloc.start()
    rc = main(["trace", str(p)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rc == 2
    assert _err(capsys) == [
        (f"servesim: error: {p}:3: line longer than 4,096 characters (servesim reads trace "
        "lines of at most 4,096; is this a trace file with one record per line?)")]
    assert peak < 2**18


@pytest.mark.parametrize("newline", ["\n", "\r\n", None])
def test_line_limit_boundary(tmp_path, newline):
    """A line of exactly the limit passes with any end of line (or none, at the end of the
    file); one more character fails."""
    p = tmp_path / "t.txt"
    if newline is None:
        p.write_text("a" * 10)
        with open(p, newline="") as f:
            assert list(bounded_lines(f, "t.txt", limit=10)) == ["a" * 10]
        p.write_text("a" * 11)
        lines, at = ["a" * 11], 1
    else:
        p.write_bytes(("a" * 10 + newline + "b" * 11 + newline).encode())
        lines, at = ["a" * 10 + newline, "b" * 11 + newline], 2
    with open(p, newline="") as f:
        it = bounded_lines(f, "t.txt", limit=10)
        for _ in range(at - 1):
            assert next(it) == lines[0]
        with pytest.raises(InputLimitError, match=f"t.txt:{at}: line longer than 10 "):
            next(it)


# ---------------------------------------------------------------------------- grids
def test_sweep_cap_is_bounded_and_grid_never_expanded(capsys, tmp_path, monkeypatch):
    """``max_points: 1000000000`` let a 10^8-point grid expand (> 4 GB). The cap is now at
    most MAX_GRID_POINTS (50,000), and counting never expands."""
    from simulator.planner import sweep
    monkeypatch.setattr(sweep, "expand_grid", _never)
    p = tmp_path / "sweep.yaml"
    rng = "[" + ", ".join(map(str, range(100))) + "]"
    grid = ", ".join(f"k{i}.x: {rng}" for i in range(4))  # 100^4 = 10^8 points
    p.write_text(f"name: s\nbase: {_base(tmp_path)}\nmax_points: 1000000000\n"
                 f"grid: {{{grid}}}\n")
    assert main(["sweep", str(p), "-q", "-o", str(tmp_path / "o")]) == 2
    line, = _err(capsys)
    assert "max_points: value 1000000000: Input should be less than or equal to 50000" in line
    p.write_text(f"name: s\nbase: {_base(tmp_path)}\nmax_points: 50000\ngrid: {{{grid}}}\n")
    assert main(["sweep", str(p), "-q", "-o", str(tmp_path / "o")]) == 2
    line, = _err(capsys)
    assert "100,000,000 points (x 100 x x 100 x x 100 x x 100) > max_points 50,000" in line


def _never(*a, **k):
    raise AssertionError("expanded or built before the count was checked")


def test_grid_size_is_counted_not_expanded(monkeypatch):
    from simulator.experiments import grid
    monkeypatch.setattr(grid.itertools, "product", _never)
    g = {"a": list(range(1000)), "b": list(range(1000)), "c": list(range(1000))}
    assert grid.grid_size(g, [{}, {}]) == 2 * 1000**3
    with pytest.raises(ValueError, match=r"grid: 2,000,000,000 configurations \(a 1000 x b "
                                         r"1000 x c 1000 x points 2\) > 50,000"):
        grid.expand_grid(g, [{}, {}])


def test_compare_refuses_10000_variants_before_building_one(capsys, tmp_path, monkeypatch):
    from simulator.experiments import compare
    monkeypatch.setattr(compare, "load_scenario", _never)
    values = ",".join(map(str, range(1, 101)))
    argv = ["compare", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(tmp_path / "o"),
            "--vary", f"seed={values}", "--vary", f"scheduler.max_num_seqs={values}"]
    assert main(argv) == 2
    assert _err(capsys) == [
        ("servesim: error: --vary: 10,000 variants (seed 100 x scheduler.max_num_seqs 100) > "
        "--max-variants 100; narrow the --vary lists, raise --max-variants (up to 50,000), or "
        "run a sweep file (servesim sweep) for a large grid")]
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------- outputs
def test_full_disk_names_the_table_and_leaves_no_part_file(tmp_path, monkeypatch):
    import pandas as pd
    import pyarrow.parquet as pq

    from simulator.base.outdir import OutputWriteError
    from simulator.metrics.tables_io import write_table

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    with pytest.raises(OutputWriteError) as e:
        write_table(pd.DataFrame({"x": [1, 2]}), tmp_path, "requests")
    assert e.value.errno == errno.ENOSPC
    assert str(e.value) == (f"{tmp_path / 'requests.parquet'}: cannot write (No space left on "
                            "device); free space there or choose another -o")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_full_disk_without_a_path_names_the_output_folder(capsys, tmp_path, monkeypatch):
    """``[Errno 28] No space left on device`` (no path) was the whole message."""
    import pathlib
    real = pathlib.Path.write_text

    def write_text(self, *a, **k):
        if self.name == "summary.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *a, **k)
    monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    out = tmp_path / "o"
    assert main(["run", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(out)]) == 1
    assert _err(capsys) == [(f"servesim: error: output folder {out}: cannot write (No space "
                            "left on device); free space there or choose another -o")]


_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_second_run_into_a_busy_folder_stops_before_simulating(capsys, tmp_path, monkeypatch):
    """Two runs into one ``-o`` died on a raw ``.part`` rename; now the folder is locked by
    the run writing it (flock, held by another process here) and a second run stops at once,
    before simulating; once the holder is gone the run goes ahead, and the lock goes with
    the command (no descriptor left open)."""
    from simulator.cli import main as cli
    out = tmp_path / "o"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        real = cli.run_scenario
        monkeypatch.setattr(cli, "run_scenario", _never)
        assert main(["run", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(out)]) == 2
        assert _err(capsys) == [(f"servesim: error: output folder {out}: another servesim run "
                                "is writing it now; wait for it to finish or choose another -o")]
    finally:
        holder.communicate("")
    monkeypatch.setattr(cli, "run_scenario", real)
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    assert main(["run", str(_base(tmp_path)), "-q", "--no-figures", "-o", str(out)]) == 0
    assert (out / "summary.json").is_file()
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds


# ---------------------------------------------------------------------------- paths
def test_unusable_paths_say_why(capsys, tmp_path):
    """A symbolic link loop, a FIFO, a link to a missing file were all "not found"."""
    loop = tmp_path / "loop.yaml"
    os.symlink(tmp_path / "loop2.yaml", loop)
    os.symlink(loop, tmp_path / "loop2.yaml")
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    dangling = tmp_path / "gone.yaml"
    os.symlink(tmp_path / "missing.yaml", dangling)
    cases = [
        (["run", str(loop)], (f"scenario file '{loop}': is a symbolic link loop (too many "
                             "levels of symbolic links)")),
        (["run", str(dangling)], (f"scenario file '{dangling}': is a symbolic link to a "
                                 f"missing file ({tmp_path / 'missing.yaml'})")),
        (["trace", str(fifo)], f"{fifo}: is a named pipe (FIFO), not a trace file"),
        # (the scenario and the flag, its value cut, before the key)
        (["run", str(_base(tmp_path)), "--set", f"model={fifo}"],
         (f"{_base(tmp_path)}: --set model=", (f": model: model config file '{fifo}': is a "
          "named pipe (FIFO), not a model config file"))),
        (["run", str(_base(tmp_path)), "--set", f"hardware.gpu={loop}"],
         (f"{_base(tmp_path)}: --set hardware.gpu=", (f": hardware.gpu: GPU spec file "
          f"'{loop}': is a symbolic link loop"))),
    ]
    for argv, needle in cases:
        if argv[0] == "run":
            argv += ["-q", "--no-figures", "-o", str(tmp_path / "o")]
        assert main(argv) == 2
        line, = _err(capsys)
        head, tail = needle if isinstance(needle, tuple) else (needle, "")
        assert line.startswith(f"servesim: error: {head}") and tail in line, (needle, line)


@pytest.mark.parametrize("fmt", ["auto", "vidur"])
def test_csv_field_over_csv_limit_is_one_line(capsys, tmp_path, fmt):
    """A 300,000-character line (within the line limit, past the csv module's 131,072-character
    field limit) was an uncaught ``csv.Error`` when the format was detected."""
    p = tmp_path / "t.csv"
    p.write_text("x" * 300_000)
    assert main(["trace", str(p), "--format", fmt]) == 2
    line, = _err(capsys)
    where = f"{p}: cannot parse the CSV header" if fmt == "auto" else f"{p}:1: cannot parse CSV"
    assert line.startswith(f"servesim: error: {where}"), line
    assert "field larger than field limit (131072)" in line, line


def test_os_errors_name_the_right_place(tmp_path):
    """A full disk naming no file is put on the output folder being written; an error that
    names its file, or says where it happened (the step spool in $TMPDIR), keeps its place."""
    from simulator.base.outdir import (
        describe_os_error,
        hold_output_folders,
        make_output_folder,
        release_output_folders,
    )
    hold_output_folders()
    try:
        out = make_output_folder(tmp_path / "o")
        assert describe_os_error(OSError(errno.ENOSPC, "No space left on device")) == (
            f"output folder {out}: cannot write (No space left on device); free space there "
            "or choose another -o")
        spool = OSError("cannot write the run's step spool in /tmp (No space left on device); "
                        "point TMPDIR at a folder with more free space")
        assert describe_os_error(spool) == str(spool)
        assert describe_os_error(PermissionError(errno.EACCES, "Permission denied",
                                                 "/x/report.html")) == (
            "/x/report.html: Permission denied")
    finally:
        release_output_folders()
    assert describe_os_error(OSError(errno.ENOSPC, "No space left on device")) == (
        "[Errno 28] No space left on device")  # no command, no folder: as it is


@pytest.mark.parametrize("depth,refused", [(100, False), (101, True), (900, True)])
def test_jsonl_trace_lines_nest_at_most_the_documented_depth(tmp_path, depth, refused):
    # an unused key nested `depth` levels (the record itself is level 1): the README's bound
    # of 100 levels holds for JSONL trace lines as for every other JSON input
    from simulator.workload import WorkloadError, read_trace
    p = tmp_path / "t.jsonl"
    deep = "[" * (depth - 1) + "]" * (depth - 1)
    p.write_text('{"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2}\n'
                 '{"arrival_time_s": 1, "num_prompt_tokens": 10, "num_output_tokens": 2, '
                 f'"x": {deep}}}\n')
    if refused:
        with pytest.raises(WorkloadError, match=r"t\.jsonl:2: nested deeper than 100 levels"):
            read_trace(p)
    else:
        assert len(read_trace(p)) == 2
