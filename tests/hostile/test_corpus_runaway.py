"""Hostile-input corpus, runaway inputs and "where is the problem?" (issue 26 items 4 and 8):
generated families of inputs that once hung, ran past gigabytes, raised internal errors or
named no file. Each case must exit with its status, print exactly one readable line
(``servesim: error: ...``, or argparse's ``servesim CMD: error: ...`` for a flag) naming the
file, key or flag, never a traceback, leave no temporary file (``$TMPDIR`` and ``*.part``),
and, for a refused input, stay within :data:`PEAK_BYTES` of Python memory (traced): a bomb
or an unbounded read would allocate far more before failing.

Families (each row one case; ids name the family and its parameters):

- ``ALIAS``: YAML alias bombs of several shapes (list and mapping "billion laughs", merge
  keys, one wide list referenced many times, a recursive alias, nesting through aliases) x
  every way a YAML value reaches servesim (scenario file, ``--set``, sweep file, plan file,
  GPU spec, engine profile, compare scenario).
- ``DEPTH``: values nested 50,000 deep (flow list, flow mapping, block list) x the YAML
  inputs (``compare --vary`` too), and JSON nested 50,000 deep x the JSON inputs
  (``config.json``, a JSONL trace line of Mooncake and generic JSONL, a recorded run's bench
  JSON).
- ``NUMBERS``: numbers out of any sane range x every numeric key of a GPU spec and of a
  Hugging Face ``config.json``; integers of 5,000 digits x scenario keys (file, ``--set``
  and ``--vary``), JSON and trace inputs, and command-line counts.
- ``LINES``: a trace line over the line limit (lowered to 4,096 characters, files of ~1 MB)
  x the five text trace formats x (no newline at all, a long line after a good row) x
  (``servesim run --trace``, ``servesim trace``).
- ``GRIDS``: sweep and plan grids over their point cap, caps raised past the ceiling.
- ``VARIANTS``: ``servesim compare`` variant counts over ``--max-variants``, bad caps, and
  ``spec-sweep`` rate counts.
- ``PATHS``: a symbolic link loop, a link to a missing file, a FIFO, a folder, a character
  device and a path through a file x every input flag (scenario, ``--trace``, GPU spec,
  model config, engine profile, sweep and plan files, ``servesim trace``, compare,
  ``validate --recorded``).
- ``NOSPACE``: a full disk (``ENOSPC`` raised by the write) x every kind of output (Parquet
  and CSV tables, ``scenario.yaml``, the report, ``summary.json``, figures, a comparison, a
  sweep table, ``trace --to-parquet``): exit 1, one line naming the file or output folder.
"""
from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from test_corpus import BASE

from simulator.base import input_limits
from simulator.base.resources import data_dir
from simulator.cli.main import main

#: the most Python memory (traced) a refused input may take: far below what a bomb expands
#: to (10^9 values) or what reading a whole trace line costs; a refusal needs a few MB
PEAK_BYTES = 48 * 2**20
LINE_LIMIT = 4096  # characters: input_limits.MAX_LINE_CHARS for the LINES family
#: the most a LINES case may allocate: half the 1 MB line; reading the line whole costs more
LINE_PEAK_BYTES = 2**19
NOSPACE = "No space left on device"
_LINE = re.compile(r"^servesim(?: [\w-]+)?: error: \S")


@pytest.fixture
def clean_tmp(tmp_path, monkeypatch):
    """A private ``$TMPDIR`` that must be empty after the case; no ``*.part`` left anywhere
    under the case's folder."""
    t = tmp_path / "TMPDIR"
    t.mkdir()
    monkeypatch.setenv("TMPDIR", str(t))
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    yield
    assert sorted(p.name for p in t.iterdir()) == []
    assert sorted(str(p) for p in tmp_path.rglob("*.part")) == []


def _one_line(capsys, argv, rc_expected: int, *, bound_memory: bool = True,
              peak_bytes: int = PEAK_BYTES) -> str:
    """Run ``servesim argv``; check the status, one readable error line and (refusals) the
    traced memory peak (below ``peak_bytes``); return the line."""
    if bound_memory:
        tracemalloc.start()
    try:
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:  # argparse: a bad flag value
            rc = e.code
    finally:
        peak = tracemalloc.get_traced_memory()[1] if bound_memory else 0
        if bound_memory:
            tracemalloc.stop()
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert rc == rc_expected, (rc, err[:2000])
    assert len(lines) == 1, err[:2000]
    line = lines[0]
    assert _LINE.match(line), line
    assert "Traceback" not in line and "internal error" not in line, line
    assert len(line) < 600, line  # readable: no value printed whole
    assert peak < peak_bytes, f"{peak / 2**20:.2f} MB traced"
    return line


def _needles(line: str, needles) -> None:
    for n in ([needles] if isinstance(needles, str) else needles):
        assert n in line, (n, line)


def _base(tmp: Path) -> Path:
    p = tmp / "base.yaml"
    p.write_text(BASE)
    return p


def _gpu_spec_text(**over) -> str:
    """The shipped H100 SXM spec with keys replaced (``over``: key -> YAML text)."""
    text = (data_dir("hardware_profiles") / "h100-sxm" / "spec.yaml").read_text()
    over = {"name": "hostile-gpu", "aliases": "[]", **over}
    lines = []
    for ln in text.splitlines():
        key = ln.split(":", 1)[0]
        lines.append(f"{key}: {over.pop(key)}" if key in over else ln)
    return "\n".join(lines + [f"{k}: {v}" for k, v in over.items()]) + "\n"


# ============================================================================ ALIAS
def _laughs(levels: int = 9, width: int = 9) -> str:
    parts = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    parts += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels)]
    return "{" + ", ".join(parts) + "}"


def _laughs_map(levels: int = 8, width: int = 9) -> str:
    parts = ["m0: &m0 {" + ", ".join(f"k{j}: lol" for j in range(width)) + "}"]
    parts += [f"m{i}: &m{i} {{" + ", ".join(f"k{j}: *m{i - 1}" for j in range(width)) + "}"
              for i in range(1, levels)]
    return "{" + ", ".join(parts) + "}"


def _merge(levels: int = 8, width: int = 10) -> str:
    parts = ["b0: &b0 {" + ", ".join(f"x{j}: lol" for j in range(width)) + "}"]
    parts += [f"b{i}: &b{i} {{<<: *b{i - 1}, k{i}: [" + ", ".join([f"*b{i - 1}"] * width)
              + "]}" for i in range(1, levels)]
    return "{" + ", ".join(parts) + "}"


def _wide() -> str:  # 600 references to one list of 2,000: 1.2 million values
    return ("{w: &w [" + ", ".join(map(str, range(2000))) + "], top: ["
            + ", ".join(["*w"] * 600) + "]}")


def _alias_depth() -> str:  # nesting 151 deep through aliases, 3 levels in the text
    return "{" + ", ".join(["d0: &d0 [1]"] + [f"d{i}: &d{i} [*d{i - 1}]"
                                               for i in range(1, 151)]) + "}"


BIG = "holds more than 1,000,000 values with its aliases expanded"
SHAPES = {
    "laughs": (_laughs, BIG),
    "laughs-map": (_laughs_map, BIG),
    "merge": (_merge, BIG),
    "wide": (_wide, BIG),
    "recursive": (lambda: "{r: &r [1, *r]}", "a recursive alias"),
    "alias-depth": (_alias_depth, "nested deeper than 100 levels"),
}


def _yaml_input(kind: str, tmp: Path, key: str, value: str) -> tuple[list, list[str]]:
    """argv and needles feeding ``key: value`` (YAML flow text) through input ``kind``."""
    base = _base(tmp)
    out = tmp / "o"
    if kind == "run":
        p = tmp / "s.yaml"
        p.write_text(BASE + f"{key}: {value}\n")
        return ["run", p, "-q", "--no-figures", "-o", out], [f"{p}:{BASE.count(chr(10)) + 1}:"]
    if kind == "set":
        return (["run", base, "-q", "--no-figures", "-o", out, "--set", f"{key}={value}"],
                [f"--set {key}="])
    if kind == "vary":  # a list item of compare --vary (no commas in the value)
        return (["compare", base, "-q", "--no-figures", "-o", out, "--vary",
                 f"{key}=1,{value}"], [f"--vary {key}=1,"])
    if kind == "compare":
        p = tmp / "s.yaml"
        p.write_text(BASE + f"{key}: {value}\n")
        return ["compare", p, "-q", "--no-figures", "-o", out], [str(p)]
    if kind == "sweep":
        p = tmp / "sweep.yaml"
        p.write_text(f"name: s\nbase: {base}\nset:\n  {key}: {value}\ngrid: {{seed: [1, 2]}}\n")
        return ["sweep", p, "-q", "-o", out], [f"{p}:4:"]
    if kind == "plan":
        p = tmp / "plan.yaml"
        p.write_text(f"name: p\nbase: {base}\ntarget_rate_rps: 1\nslo: {{ttft_s: 1.0}}\n"
                     f"search_space: {{seed: [1, 2]}}\n{key}: {value}\n")
        return ["plan", p, "-q", "-o", out], [f"{p}:6:"]
    if kind == "gpu":
        p = tmp / "gpu.yaml"
        p.write_text(_gpu_spec_text(**{key: value}))
        return (["run", base, "-q", "--no-figures", "-o", out, "--set", f"hardware.gpu={p}"],
                [str(p)])
    if kind == "engine":
        p = tmp / "engine.yaml"
        p.write_text("name: hostile\nengine: vllm\n" + f"{key}: {value}\n")
        return (["run", base, "-q", "--no-figures", "-o", out, "--set", f"perf.engine={p}"],
                [f"{p}:3:"])
    raise AssertionError(kind)


YAML_KINDS = ("run", "set", "compare", "sweep", "plan", "gpu", "engine")
ALIAS = [(f"alias-{shape}-{kind}", shape, kind) for shape in SHAPES for kind in YAML_KINDS]


@pytest.mark.parametrize("shape, kind", [c[1:] for c in ALIAS], ids=[c[0] for c in ALIAS])
def test_alias_bomb_refused(capsys, tmp_path, clean_tmp, shape, kind):
    make, problem = SHAPES[shape]
    key = "notes" if kind == "gpu" else "x_bomb"
    argv, where = _yaml_input(kind, tmp_path, key, make())
    line = _one_line(capsys, argv, 2)
    _needles(line, where + [problem, key])


# ============================================================================ DEPTH
DEEP = 50_000
YAML_DEEP = {
    "flow-list": "[" * DEEP + "]" * DEEP,
    "flow-map": "{a: " * DEEP + "1" + "}" * DEEP,
    "block-list": "\n" + "- " * DEEP + "1",  # one line, 50,000 block levels
}
DEPTH_YAML = [(f"depth-{style}-{kind}", style, kind) for style in YAML_DEEP
              for kind in ("run", "set", "vary", "sweep", "gpu", "engine")
              if not (style == "block-list" and kind in ("set", "vary"))]  # flags: one line


@pytest.mark.parametrize("style, kind", [c[1:] for c in DEPTH_YAML],
                         ids=[c[0] for c in DEPTH_YAML])
def test_yaml_nesting_refused(capsys, tmp_path, clean_tmp, style, kind):
    value = YAML_DEEP[style]
    if style == "block-list" and kind in ("run", "sweep", "gpu", "engine"):
        value = value.replace("\n", "\n  " if kind == "sweep" else "\n ")
    key = "notes" if kind == "gpu" else "x_deep"
    argv, where = _yaml_input(kind, tmp_path, key, value)
    where = [w.rsplit(":", 2)[0] if w.endswith(":") else w for w in where]  # line: the deep one
    line = _one_line(capsys, argv, 2)
    _needles(line, where + ["nested deeper than 100 levels"])


JSON_DEEP = {"list": "[" * DEEP + "]" * DEEP, "map": '{"a": ' * DEEP + "1" + "}" * DEEP}


def _json_input(kind: str, tmp: Path, deep: str) -> tuple[list, list[str]]:
    base = _base(tmp)
    out = tmp / "o"
    if kind == "config":
        p = tmp / "config.json"
        p.write_text('{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n'
                     f'"x": {deep}}}\n')
        return (["run", base, "-q", "--no-figures", "-o", out, "--set", f"model={p}"],
                [f"{p}:2:"])
    if kind in ("mooncake", "generic_jsonl"):
        p = tmp / "t.jsonl"
        ok = ('{"timestamp": 0, "input_length": 10, "output_length": 2}' if kind == "mooncake"
              else '{"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2}')
        p.write_text(ok + "\n" + ok[:-1] + f', "x": {deep}}}\n')
        return (["run", base, "-q", "--no-figures", "-o", out, "--set", f"workload.trace={p}",
                 "--set", "workload.synthetic=null", "--set", f"workload.format={kind}"],
                [f"{p}:2:"])
    if kind == "bench":
        p = tmp / "bench.json"
        p.write_text('{"backend": "vllm",\n' + f'"x": {deep}}}\n')
        return ["validate", "--recorded", p, "-o", out, "--no-figures"], [f"{p}:2:"]
    raise AssertionError(kind)


DEPTH_JSON = [(f"depth-json-{shape}-{kind}", shape, kind) for shape in JSON_DEEP
              for kind in ("config", "mooncake", "generic_jsonl", "bench")]


@pytest.mark.parametrize("shape, kind", [c[1:] for c in DEPTH_JSON],
                         ids=[c[0] for c in DEPTH_JSON])
def test_json_nesting_refused(capsys, tmp_path, clean_tmp, shape, kind):
    argv, where = _json_input(kind, tmp_path, JSON_DEEP[shape])
    line = _one_line(capsys, argv, 2)
    _needles(line, where + ["nested deeper than 100 levels"])


# ============================================================================ NUMBERS
D5000 = "9" * 5000
GPU_NUMBERS = [(f"gpu-{k}-{spelled}", k, v)
               for k in ("bf16_flops_per_s", "fp8_flops_per_s", "hbm_bytes",
                         "hbm_bandwidth_bytes_per_s", "interconnect_bandwidth_bytes_per_s",
                         "host_link_bandwidth_bytes_per_s", "usd_per_gpu_hour",
                         "interconnect_latency_s")
               for spelled, v in (("1e30", "1.0e30"), ("int-10e30", str(10**30)))]
GPU_NUMBERS += [("gpu-num_sms-huge", "num_sms", str(10**30)),
                ("gpu-interconnect_max_gpus-huge", "interconnect_max_gpus", str(10**30))]


@pytest.mark.parametrize("key, value", [c[1:] for c in GPU_NUMBERS],
                         ids=[c[0] for c in GPU_NUMBERS])
def test_gpu_spec_number_out_of_range(capsys, tmp_path, clean_tmp, key, value):
    p = tmp_path / "gpu.yaml"
    p.write_text(_gpu_spec_text(**{key: value}))
    line = _one_line(capsys, ["run", _base(tmp_path), "-q", "--no-figures", "-o",
                              tmp_path / "o", "--set", f"hardware.gpu={p}"], 2)
    _needles(line, [str(p), f"{key}=", "is out of range: allowed"])


HF_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size",
           "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
           "sliding_window", "num_local_experts")
HF_NUMBERS = [(f"config-{k}-{spelled}", k, v, why) for k in HF_KEYS
              for spelled, v, why in (("1e30", "1e30", "is out of range"),
                                      ("Infinity", "Infinity", "is not an integer"))]


@pytest.mark.parametrize("key, value, why", [c[1:] for c in HF_NUMBERS],
                         ids=[c[0] for c in HF_NUMBERS])
def test_config_json_number_out_of_range(capsys, tmp_path, clean_tmp, key, value, why):
    cfg = {"model_type": "mistral", "num_hidden_layers": 4, "hidden_size": 256,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
           "vocab_size": 1000, "max_position_embeddings": 4096, "sliding_window": 128}
    text = json.dumps(cfg)[:-1] + f', "{key}": {value}}}'
    if key == "num_local_experts":
        text = text[:-1] + ', "num_experts_per_tok": 2}'
    p = tmp_path / "config.json"
    p.write_text(text)
    line = _one_line(capsys, ["run", _base(tmp_path), "-q", "--no-figures", "-o",
                              tmp_path / "o", "--set", f"model={p}"], 2)
    _needles(line, [str(p), f"{key}=", why])


SCENARIO_KEYS = ("scheduler.max_num_seqs", "seed", "workload.synthetic.num_requests",
                 "kv_cache.block_size", "cluster.num_replicas")
DIGITS = [(f"digits-{k}-{how}", k, how) for k in SCENARIO_KEYS
          for how in ("file", "set", "vary")]


@pytest.mark.parametrize("key, how", [c[1:] for c in DIGITS], ids=[c[0] for c in DIGITS])
def test_scenario_integer_of_5000_digits(capsys, tmp_path, clean_tmp, key, how):
    if how == "set":
        argv = ["run", _base(tmp_path), "-q", "--no-figures", "-o", tmp_path / "o", "--set",
                f"{key}={D5000}"]
        needles = [f"--set {key}="]
    elif how == "vary":
        argv = ["compare", _base(tmp_path), "-q", "--no-figures", "-o", tmp_path / "o",
                "--vary", f"{key}=1,{D5000}"]
        needles = [f"--vary {key}=1,99"]
    else:
        *parents, last = key.split(".")
        nested = f"{last}: {D5000}"
        for part in reversed(parents):
            nested = f"{part}: {{{nested}}}"
        p = tmp_path / "s.yaml"
        p.write_text(BASE.replace("num_requests: 20", f"num_requests: {D5000}")
                     if key == "workload.synthetic.num_requests" else BASE + f"{nested}\n")
        argv = ["run", p, "-q", "--no-figures", "-o", tmp_path / "o"]
        needles = [str(p), key]
    line = _one_line(capsys, argv, 2)
    _needles(line, needles + ["an integer of 5,000 digits is too large"])


def _other_digits_cases():
    ok_moon = '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
    return [
        ("digits-config-json", "config.json",
         '{"model_type": "llama", "num_hidden_layers": 2,\n"hidden_size": ' + D5000 + "}",
         "model", ["hidden_size: an integer of 5,000 digits is too large"]),
        ("digits-mooncake-line", "t.jsonl",
         ok_moon + '{"timestamp": 1, "input_length": ' + D5000 + ', "output_length": 2}\n',
         "trace", [":2:", "input_length: an integer of 5,000 digits is too large"]),
        ("digits-generic-jsonl-line", "t.jsonl",
         '{"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": ' + D5000
         + "}\n", "trace", [":1:", "num_output_tokens: an integer of 5,000 digits"]),
        ("digits-generic-csv-cell", "t.csv",
         "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,2\n1," + D5000 + ",2\n",
         "trace", [":3:", "num_prompt_tokens"]),
        ("digits-gpu-spec", "gpu.yaml", _gpu_spec_text(hbm_bytes=D5000), "gpu",
         ["hbm_bytes: an integer of 5,000 digits is too large"]),
        ("digits-engine-profile", "engine.yaml",
         "name: hostile\nengine: vllm\ncpu: {step_s: {value: " + D5000 + "}}\n", "engine",
         [":3:", "cpu.step_s.value: an integer of 5,000 digits is too large"]),
    ]


OTHER_DIGITS_IDS = [c[0] for c in _other_digits_cases()]


@pytest.mark.parametrize("i", range(len(OTHER_DIGITS_IDS)), ids=OTHER_DIGITS_IDS)
def test_input_integer_of_5000_digits(capsys, tmp_path, clean_tmp, i):
    _id, name, content, how, needles = _other_digits_cases()[i]
    p = tmp_path / name
    p.write_text(content)
    argv = ["run", _base(tmp_path), "-q", "--no-figures", "-o", tmp_path / "o"]
    argv += {"model": ["--set", f"model={p}"], "trace": ["--trace", p],
             "gpu": ["--set", f"hardware.gpu={p}"], "engine": ["--set", f"perf.engine={p}"]}[how]
    line = _one_line(capsys, argv, 2)
    _needles(line, [str(p)] + needles)


FLAG_DIGITS = [
    ("flag-run-seed", ["run", "default", "--seed", D5000], "argument --seed"),
    ("flag-trace-seed", ["trace", "default_conv_1k.csv", "--seed", D5000], "argument --seed"),
    ("flag-compare-max-variants", ["compare", "default", "--max-variants", D5000],
     "argument --max-variants"),
    ("flag-spec-k", ["spec", "-a", "0.5", "-k", D5000, "-c", "0.1"],
     "argument --num-speculative-tokens/-k"),
    ("flag-spec-k-400-digits", ["spec", "-a", "0.5", "-k", "9" * 400, "-c", "0.1"],
     "--num-speculative-tokens must be in [1, 10,000]"),
] + [(f"flag-kv-{flag}-400-digits",
      ["kv", "--model", "llama-3.1-8b", "--batch", "1", "--context", "100", f"--{flag}",
       "9" * 400], f"{key} must be <= 2,147,483,647, got 99999999999999999999...(400 digits)")
     for flag, key in (("batch", "batch"), ("context", "context"),
                       ("tensor-parallel-size", "tensor_parallel_size"),
                       ("block-size", "block_size"),
                       ("max-num-batched-tokens", "max_num_batched_tokens"))]


@pytest.mark.parametrize("argv, needle", [c[1:] for c in FLAG_DIGITS],
                         ids=[c[0] for c in FLAG_DIGITS])
def test_flag_number_too_large(capsys, clean_tmp, argv, needle):
    line = _one_line(capsys, argv, 2)
    _needles(line, [needle])


# ============================================================================ LINES
GOOD_ROW = {
    "azure": ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "2024-01-01 00:00:00,10,2\n"),
    "vidur": ("arrived_at,num_prefill_tokens,num_decode_tokens\n", "0,10,2\n"),
    "generic_csv": ("arrival_time_s,num_prompt_tokens,num_output_tokens\n", "0,10,2\n"),
    "mooncake": ("", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'),
    "generic_jsonl": ("", ('{"arrival_time_s": 0, "num_prompt_tokens": 10, '
                          '"num_output_tokens": 2}\n')),
}
LINES = [(f"line-{fmt}-{where}-{cmd}", fmt, where, cmd) for fmt in GOOD_ROW
         for where in ("no-newline", "after-a-row") for cmd in ("run", "trace")]


@pytest.mark.parametrize("fmt, where, cmd", [c[1:] for c in LINES], ids=[c[0] for c in LINES])
def test_long_trace_line_refused(capsys, tmp_path, clean_tmp, monkeypatch, fmt, where, cmd):
    monkeypatch.setattr(input_limits, "MAX_LINE_CHARS", LINE_LIMIT)
    header, row = GOOD_ROW[fmt]
    filler = "7" * (1 << 20)  # 1 MB: 256 times the limit
    if where == "no-newline":
        text, bad = filler, 1
    else:
        long_row = (row.rstrip("\n")[:-1] + f', "x": "{filler}"}}' if fmt.endswith("jsonl")
                    or fmt == "mooncake" else row.rstrip("\n") + filler)
        text = header + row + long_row + "\n" + row
        bad = 3 if header else 2
    p = tmp_path / ("t.jsonl" if fmt in ("mooncake", "generic_jsonl") else "t.csv")
    p.write_text(text)
    argv = (["run", _base(tmp_path), "-q", "--no-figures", "-o", tmp_path / "o", "--set",
             f"workload.trace={p}", "--set", "workload.synthetic=null", "--set",
             f"workload.format={fmt}"] if cmd == "run" else ["trace", p, "--format", fmt])
    line = _one_line(capsys, argv, 2, peak_bytes=LINE_PEAK_BYTES)
    _needles(line, [f"{p}:{bad}: line longer than 4,096 characters"])


# ============================================================================ GRIDS
def _grid_cases(base: Path):
    rng = lambda n: "[" + ", ".join(map(str, range(1, n + 1))) + "]"
    sweep = f"name: s\nbase: {base}\n"
    plan = f"name: p\nbase: {base}\ntarget_rate_rps: 1\nslo: {{ttft_s: 1.0}}\n"
    return [
        ("grid-sweep-over-default-cap", "sweep",
         sweep + f"grid: {{seed: {rng(200)}, scheduler.max_num_seqs: {rng(100)}}}\n",
         ["20,000 points (seed 200 x max_num_seqs 100) > max_points 10,000"]),
        ("grid-sweep-10e12-points", "sweep",
         sweep + "grid: {" + ", ".join(f"k{i}.x: {rng(1000)}" for i in range(4)) + "}\n",
         ["1,000,000,000,000 points", "> max_points 10,000"]),
        ("grid-sweep-cap-past-ceiling", "sweep",
         sweep + f"max_points: 1000000000\ngrid: {{seed: {rng(3)}}}\n",
         ["max_points: value 1000000000", "less than or equal to 50000"]),
        ("grid-sweep-raised-cap-still-over", "sweep",
         sweep + "max_points: 50000\ngrid: {seed: " + rng(300) + ", scheduler.max_num_seqs: "
         + rng(300) + "}\n", ["90,000 points", "> max_points 50,000"]),
        ("grid-sweep-points-times-grid", "sweep",
         sweep + "points: [" + ", ".join(f"{{seed: {i}}}" for i in range(200)) + "]\n"
         + f"grid: {{scheduler.max_num_seqs: {rng(100)}}}\n",
         ["20,000 points (max_num_seqs 100 x points 200)"]),
        ("grid-plan-over-default-cap", "plan",
         plan + f"search_space: {{seed: {rng(200)}, scheduler.max_num_seqs: {rng(100)}}}\n",
         ["20,000 candidates", "> max_candidates 10,000"]),
        ("grid-plan-cap-past-ceiling", "plan",
         plan + "max_candidates: 1000000000\nsearch_space: {seed: [1, 2]}\n",
         ["max_candidates: value 1000000000", "less than or equal to 50000"]),
        ("grid-sweep-cap-5000-digits", "sweep",
         sweep + f"max_points: {D5000}\ngrid: {{seed: [1, 2]}}\n",
         ["max_points: an integer of 5,000 digits is too large"]),
    ]


GRID_IDS = [c[0] for c in _grid_cases(Path("base.yaml"))]


@pytest.mark.parametrize("i", range(len(GRID_IDS)), ids=GRID_IDS)
def test_grid_counted_before_expanding(capsys, tmp_path, clean_tmp, i):
    _id, cmd, text, needles = _grid_cases(_base(tmp_path))[i]
    p = tmp_path / f"{cmd}.yaml"
    p.write_text(text)
    line = _one_line(capsys, [cmd, p, "-q", "-o", tmp_path / "o"], 2)
    _needles(line, [str(p)] + needles)


# ============================================================================ VARIANTS
def _values(n: int) -> str:
    return ",".join(str(i) for i in range(1, n + 1))


VARIANTS = [
    ("variants-10000", ["--vary", f"scheduler.max_num_seqs={_values(100)}", "--vary",
                        f"seed={_values(100)}"],
     ["10,000 variants (scheduler.max_num_seqs 100 x seed 100) > --max-variants 100"]),
    ("variants-101", ["--vary", f"seed={_values(101)}"], ["101 variants", "--max-variants 100"]),
    ("variants-raised-cap-still-over", ["--max-variants", "50000", "--vary",
                                        f"seed={_values(300)}", "--vary",
                                        f"scheduler.max_num_seqs={_values(200)}"],
     ["60,000 variants", "> --max-variants 50,000"]),
    ("variants-cap-past-ceiling", ["--max-variants", "1000000"],
     ["--max-variants 1000000: must be an integer in [1, 50,000]"]),
    ("variants-cap-zero", ["--max-variants", "0"], ["--max-variants 0: must be"]),
]


@pytest.mark.parametrize("extra, needles", [c[1:] for c in VARIANTS],
                         ids=[c[0] for c in VARIANTS])
def test_compare_variants_counted_before_running(capsys, tmp_path, clean_tmp, monkeypatch,
                                                 extra, needles):
    from simulator.experiments import compare
    monkeypatch.setattr(compare, "load_scenario", _never)  # no variant is even built
    line = _one_line(capsys, ["compare", _base(tmp_path), "-q", "--no-figures", "-o",
                              tmp_path / "o", *extra], 2)
    _needles(line, needles)


def _never(*a, **k):
    raise AssertionError("a variant was built before the count was checked")


def test_spec_sweep_rate_count_refused(capsys, tmp_path, clean_tmp):
    rates = ",".join(f"{0.01 * i:.2f}" for i in range(1, 202))
    line = _one_line(capsys, ["spec-sweep", "spec_mixed_slices", "--rates", rates, "-q",
                              "-o", tmp_path / "o"], 2)
    _needles(line, ["--rates: 201 rates (two runs each) > 100"])


# ============================================================================ PATHS
def _path_kind(kind: str, tmp: Path, name: str) -> Path:
    """A path of ``kind`` named ``name`` in ``tmp``."""
    p = tmp / name
    if kind == "loop":
        a = tmp / f"{name}.other"
        os.symlink(a, p)
        os.symlink(p, a)
    elif kind == "dangling":
        os.symlink(tmp / "nowhere.yaml", p)
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "folder":
        p.mkdir()
    elif kind == "chardev":
        return Path("/dev/null")
    elif kind == "through-file":
        (tmp / "plain").write_text("x\n")
        return tmp / "plain" / name
    return p


PATH_WHY = {"loop": "symbolic link loop", "dangling": "symbolic link to a missing file",
            "fifo": "is a named pipe (FIFO)", "folder": "director",
            "chardev": "is a character device", "through-file": "a part of its path is a file"}
FLAGS = ("run", "trace-flag", "gpu", "model", "engine", "sweep", "plan", "trace-cmd",
         "compare", "recorded")
#: (flag, kind) -> a needle other than PATH_WHY[kind] (the flag's own wording)
PATH_WHY_FOR = {
    ("gpu", "folder"): "a folder with no spec.yaml",
    ("model", "folder"): "config.json' not found",
    ("trace-flag", "folder"): "is a directory, not a trace file",
    ("trace-cmd", "folder"): "is a directory, not a trace file",
    ("recorded", "folder"): "no requests.jsonl",
}
PATHS = [(f"path-{kind}-{flag}", kind, flag) for kind in PATH_WHY for flag in FLAGS]


def _path_argv(flag: str, p: Path, tmp: Path) -> list:
    base = _base(tmp)
    out = tmp / "o"
    run = ["run", base, "-q", "--no-figures", "-o", out]
    return {
        "run": ["run", p, "-q", "--no-figures", "-o", out],
        "trace-flag": [*run, "--trace", p],
        "gpu": [*run, "--set", f"hardware.gpu={p}"],
        "model": [*run, "--set", f"model={p}"],
        "engine": [*run, "--set", f"perf.engine={p}"],
        "sweep": ["sweep", p, "-q", "-o", out],
        "plan": ["plan", p, "-q", "-o", out],
        "trace-cmd": ["trace", p],
        "compare": ["compare", p, "-q", "--no-figures", "-o", out],
        "recorded": ["validate", "--recorded", p, "-o", out, "--no-figures"],
    }[flag]


@pytest.mark.parametrize("kind, flag", [c[1:] for c in PATHS], ids=[c[0] for c in PATHS])
def test_unusable_input_path_named(capsys, tmp_path, clean_tmp, kind, flag):
    suffix = {"model": ".json", "recorded": ".jsonl", "trace-flag": ".csv",
              "trace-cmd": ".csv"}.get(flag, ".yaml")
    p = _path_kind(kind, tmp_path, f"input{suffix}")
    line = _one_line(capsys, _path_argv(flag, p, tmp_path), 2)
    assert "not found" not in line or kind == "folder", line
    _needles(line, [str(p) if kind != "folder" or flag != "model" else str(p / "config.json"),
                    PATH_WHY_FOR.get((flag, kind), PATH_WHY[kind])])


# ============================================================================ NOSPACE
def _raise_nospace(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _nospace_on(monkeypatch, target: str) -> None:
    """Make the write ``target`` fail as a full disk does."""
    import pathlib

    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq
    if target == "parquet-writer":
        monkeypatch.setattr(pq.ParquetWriter, "write_table", _raise_nospace)
    elif target == "csv-writer":  # an extension type: replaced whole, not patched
        real_writer = pcsv.CSVWriter

        class FullDiskCSVWriter:
            def __init__(self, *a, **k):
                self._w = real_writer(*a, **k)

            def write_table(self, *a, **k):
                _raise_nospace()

            def close(self):
                self._w.close()
        monkeypatch.setattr(pcsv, "CSVWriter", FullDiskCSVWriter)
    elif target == "pq.write_table":
        monkeypatch.setattr(pq, "write_table", _raise_nospace)
    elif target.startswith("file:"):
        name = target[5:]
        real = pathlib.Path.write_text

        def write_text(self, *a, **k):
            if self.name == name:
                _raise_nospace()
            return real(self, *a, **k)
        monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    elif target == "savefig":
        import matplotlib.figure
        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", _raise_nospace)
    else:
        raise AssertionError(target)


NOSPACE_CASES = [
    ("nospace-run-parquet-table", "run", [], "parquet-writer", "requests.parquet: cannot write"),
    ("nospace-run-csv-table", "run", ["--table-format", "csv"], "csv-writer",
     "requests.csv: cannot write"),
    ("nospace-run-scenario-yaml", "run", [], "file:scenario.yaml", "output folder"),
    ("nospace-run-report-md", "run", [], "file:report.md", "output folder"),
    ("nospace-run-report-html", "run", [], "file:report.html", "output folder"),
    ("nospace-run-summary-json", "run", [], "file:summary.json", "output folder"),
    ("nospace-run-figures", "run-figures", [], "savefig", "output folder"),
    ("nospace-compare-tables", "compare", [], "parquet-writer", "requests.parquet: cannot write"),
    ("nospace-sweep-table", "sweep", [], "pq.write_table", "output folder"),
    ("nospace-trace-to-parquet", "trace", [], "pq.write_table", "out.parquet: cannot write"),
]


@pytest.mark.parametrize("cmd, extra, target, needle", [c[1:] for c in NOSPACE_CASES],
                         ids=[c[0] for c in NOSPACE_CASES])
def test_full_disk_names_the_output(capsys, tmp_path, clean_tmp, monkeypatch, cmd, extra,
                                    target, needle):
    base = _base(tmp_path)
    out = tmp_path / "o"
    small = ["--set", "workload.synthetic.num_requests=4"]
    if cmd in ("run", "run-figures"):
        argv = ["run", base, "-q", "-o", out, *small, *extra]
        if cmd == "run":
            argv.append("--no-figures")
    elif cmd == "compare":
        argv = ["compare", base, "-q", "--no-figures", "-o", out, "--vary", "seed=1,2", "-j",
                "1", *small]
    elif cmd == "sweep":
        p = tmp_path / "sweep.yaml"
        p.write_text(f"name: s\nbase: {base}\nset: {{workload.synthetic.num_requests: 4}}\n"
                     "grid: {seed: [1, 2]}\n")
        argv = ["sweep", p, "-q", "--no-cache", "-j", "1", "-o", out]
    else:
        argv = ["trace", data_dir("traces") / "default_conv_1k.csv", "--to-parquet",
                out / "out.parquet"]
        out.mkdir()
    _nospace_on(monkeypatch, target)
    rc = 2 if cmd == "trace" else 1  # trace --to-parquet: its own one-line error (exit 2)
    line = _one_line(capsys, argv, rc, bound_memory=False)
    _needles(line, [str(out), needle, NOSPACE])


def test_corpus_size():
    """At least 100 generated cases (the issue's bar for this family file)."""
    n = (len(ALIAS) + len(DEPTH_YAML) + len(DEPTH_JSON) + len(GPU_NUMBERS) + len(HF_NUMBERS)
         + len(DIGITS) + len(OTHER_DIGITS_IDS) + len(FLAG_DIGITS) + len(LINES) + len(GRID_IDS)
         + len(VARIANTS) + 1 + len(PATHS) + len(NOSPACE_CASES))
    assert n >= 100, n
