"""Hostile traces, round two (issue 26 classes 2, 3, 7, 8, 9): generated families of trace
files, each case either refused (exit 2, exactly one line ``servesim: error: ...`` naming the
file and its line, row or column, no traceback) or run to the end with every request
accounted for (completed + rejected + cancelled + unfinished == the input count), and for a
re-based epoch trace the same latencies as its relative twin. No case leaves a file in the
temporary folder.

Families (ids say which):

- ``epoch-*``: the same 10 requests with arrivals ``T0 + k * 0.1 s`` written as Unix epoch
  seconds / ms / us / ns in every format (generic CSV and JSONL, Vidur, Mooncake, Parquet
  numbers and timestamps, Azure dates in years 0001-9999): they replay exactly as the twin
  with arrivals ``k * 0.1 s`` (same first-token and finish times, float for float).
- ``pqtype-*``: Parquet column types x columns: odd types refused naming the column,
  numeric widths, decimals and categoricals read.
- ``label-*``: label encodings (lone surrogates, valid pairs, binary Parquet, bytes that are
  not UTF-8) in ``tenant`` / ``slice``.
- ``bigint-*``: integers above 2**31, 2**53, 2**63 in every integer column, shown exactly.
- ``clock-*``: clocks that cannot resolve a step (``rate_scale``, tiny synthetic rates, a
  trace mixing 0 and epoch values, the 2**26 s boundary).
"""
from __future__ import annotations

import datetime as dt
import gc
import json
import tempfile
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_corpus import BASE, _check_needles, _refused, completes

from simulator.cli.main import main

K = 10
PROMPTS = [50 + 7 * k for k in range(K)]
OUTPUTS = [5 + k for k in range(K)]
T0_S = 1_700_000_000  # 2023-11-14 22:13:20 UTC
PER_S = {"s": 1, "ms": 10 ** 3, "us": 10 ** 6, "ns": 10 ** 9}
GC_HEAD = "arrival_time_s,num_prompt_tokens,num_output_tokens"


@pytest.fixture
def clean_tmp(tmp_path, monkeypatch):
    """A private $TMPDIR that must be empty again when the case ends."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield tmp
    if any(tmp.iterdir()):  # unreferenced spools go as at process exit (collected only then:
        gc.collect()        # a full collection costs ~0.1 s late in a session)
    assert sorted(p.name for p in tmp.iterdir()) == []


@pytest.fixture
def base(tmp_path):
    p = tmp_path / "base.yaml"
    p.write_text(BASE)
    return str(p)


def _run(base, out, trace=None, sets=()):
    argv = ["run", base, "-q", "--no-figures", "-o", str(out)]
    if trace is not None:
        argv += ["--trace", str(trace)]
    for s in sets:
        argv += ["--set", s]
    return argv


# ---------------------------------------------------------------------------- epoch twins
def _epoch_text(unit: str, k: int) -> str:
    """Row k's arrival, T0 + k * 0.1 s, written in ``unit`` as a file would (text)."""
    if unit == "s":
        return f"{T0_S + k // 10}.{k % 10}"
    return str(T0_S * PER_S[unit] + k * PER_S[unit] // 10)


def _epoch_value(unit: str, k: int):
    """The same as a JSON / Parquet number (an integer, or a float for seconds)."""
    text = _epoch_text(unit, k)
    return float(text) if unit == "s" else int(text)


def _write_rows(path, head, rows):
    path.write_text(head + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))


def _epoch_file(tmp, fmt: str, unit: str):
    rows = range(K)
    if fmt == "csv":
        p = tmp / "e.csv"
        _write_rows(p, GC_HEAD, [(_epoch_text(unit, k), PROMPTS[k], OUTPUTS[k]) for k in rows])
    elif fmt == "vidur":
        p = tmp / "v.csv"
        _write_rows(p, "arrived_at,num_prefill_tokens,num_decode_tokens",
                    [(_epoch_text(unit, k), PROMPTS[k], OUTPUTS[k]) for k in rows])
    elif fmt == "jsonl":
        p = tmp / "e.jsonl"
        p.write_text("".join(json.dumps({"arrival_time_s": _epoch_value(unit, k),
                                         "num_prompt_tokens": PROMPTS[k],
                                         "num_output_tokens": OUTPUTS[k]}) + "\n" for k in rows))
    elif fmt == "mooncake":
        p = tmp / "m.jsonl"
        p.write_text("".join(json.dumps({"timestamp": _epoch_value(unit, k),
                                         "input_length": PROMPTS[k],
                                         "output_length": OUTPUTS[k]}) + "\n" for k in rows))
    elif fmt in ("parquet", "parquet-ts"):
        p = tmp / "e.parquet"
        if fmt == "parquet":
            t = pa.array([_epoch_value(unit, k) for k in rows])
        else:
            t = pa.array([T0_S * PER_S[unit] + k * PER_S[unit] // 10 for k in rows],
                         pa.int64()).cast(pa.timestamp(unit, tz="UTC"))
        pq.write_table(pa.table({"arrival_time_s": t, "num_prompt_tokens": PROMPTS,
                                 "num_output_tokens": OUTPUTS}), p)
    else:  # azure: from `unit` (a year, or a date and time), rows 0.1 s apart
        start = (dt.datetime(int(unit), 6, 1) if unit.isdigit()
                 else dt.datetime.fromisoformat(unit))
        stamps = [str(start + dt.timedelta(microseconds=100_000 * k)) for k in rows]
        stamps = [s if "." in s else s + ".0" for s in stamps]
        if fmt == "azure":
            p = tmp / "a.csv"
            _write_rows(p, "TIMESTAMP,ContextTokens,GeneratedTokens",
                        [(s, PROMPTS[k], OUTPUTS[k]) for k, s in enumerate(stamps)])
        else:
            p = tmp / "a.parquet"
            pq.write_table(pa.table({"TIMESTAMP": stamps, "ContextTokens": PROMPTS,
                                     "GeneratedTokens": OUTPUTS}), p)
    return p


EPOCH_CASES = (
    [(f, u) for f in ("csv", "jsonl", "parquet", "vidur") for u in PER_S]
    + [("parquet-ts", u) for u in ("ms", "us", "ns")]  # timestamp[s] cannot hold 0.1 s
    + [("mooncake", u) for u in ("ms", "us", "ns")]  # Mooncake's unit is ms: s is no epoch
    + [("azure", str(y)) for y in (1, 1600, 1677, 1970, 2024, 2262, 2263, 2500, 9999)]
    + [("azure-parquet", y) for y in ("1600", "2024", "2500")]
    # across the ends of datetime64[ns] (1677-09-21 00:12:43.145, 2262-04-11 23:47:16.854),
    # where the rows used to wrap and reorder
    + [("azure", t) for t in ("1677-09-21 00:12:42.5", "2262-04-11 23:47:16.5")]
    + [("azure-parquet", t) for t in ("1677-09-21 00:12:42.5", "2262-04-11 23:47:16.5")]
)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The relative twin's requests table: arrivals k / 10 s (what "0.3" reads as)."""
    tmp = tmp_path_factory.mktemp("twin")
    trace = tmp / "twin.csv"
    _write_rows(trace, GC_HEAD, [(repr(k / 10), PROMPTS[k], OUTPUTS[k]) for k in range(K)])
    (tmp / "base.yaml").write_text(BASE)
    out = tmp / "o"
    assert main(_run(str(tmp / "base.yaml"), out, trace)) == 0
    return pd.read_parquet(out / "requests.parquet").sort_values("request_id")


@pytest.mark.parametrize("fmt, unit", EPOCH_CASES, ids=[f"epoch-{f}-{u}" for f, u in EPOCH_CASES])
def test_epoch_trace_replays_as_its_relative_twin(capsys, base, tmp_path, clean_tmp, twin, fmt,
                                                  unit):
    out = tmp_path / "o"
    df = completes(capsys, _run(base, out, _epoch_file(tmp_path, fmt, unit)), out, K)
    for col in ("arrival_time_s", "num_prompt_tokens", "first_token_time_s", "finish_time_s"):
        assert df[col].tolist() == twin[col].tolist(), col
    assert (df.first_token_time_s > df.arrival_time_s).all()  # not a clock that lost a step


# ---------------------------------------------------------------------------- Parquet types
def _odd(kind: str):
    return {
        "bool": pa.array([True, False, True]),
        "list": pa.array([[1], [2], [3]]),
        "struct": pa.array([{"a": 1}] * 3),
        "time64": pa.array([dt.time(1), dt.time(2), dt.time(3)]),
        "map": pa.array([[("a", 1)]] * 3, pa.map_(pa.string(), pa.int64())),
        "binary": pa.array([b"1", b"2", b"3"]),
        "timestamp": pa.array([dt.datetime(2024, 1, 1)] * 3, pa.timestamp("ms")),
        "double": pa.array([1.5, 2.5, 3.5]),
    }[kind]


PQ_REFUSED = (
    [("arrival_time_s", k) for k in ("bool", "list", "struct", "time64", "map", "binary")]
    + [(c, k) for c in ("num_prompt_tokens", "num_output_tokens", "priority", "max_tokens", "n",
                        "cancel_after_s")
       for k in ("bool", "list", "struct", "time64", "timestamp", "binary")]
    + [(c, k) for c in ("tenant", "slice") for k in ("bool", "double", "list", "struct",
                                                     "timestamp")]
)


@pytest.mark.parametrize("column, kind", PQ_REFUSED,
                         ids=[f"pqtype-refused-{c}-{k}" for c, k in PQ_REFUSED])
def test_parquet_type_that_does_not_fit_is_refused(capsys, base, tmp_path, clean_tmp, column,
                                                   kind):
    p = tmp_path / "t.parquet"
    cols = {"arrival_time_s": [0.0, 0.5, 1.0], "num_prompt_tokens": [10, 20, 30],
            "num_output_tokens": [2, 3, 4], column: _odd(kind)}
    pq.write_table(pa.table(cols), p)
    line = _refused(capsys, _run(base, tmp_path / "o", p))
    _check_needles(line, [str(p), f"column '{column}' has the Parquet (Arrow) type"])
    assert not (tmp_path / "o").exists()


PQ_ACCEPTED = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "decimal", "dictionary"]


@pytest.mark.parametrize("kind", PQ_ACCEPTED, ids=[f"pqtype-tokens-{k}" for k in PQ_ACCEPTED])
def test_parquet_numeric_types_are_read(capsys, base, tmp_path, clean_tmp, kind):
    vals = [10, 20, 30]
    if kind == "decimal":
        arr = pa.array([Decimal(v) for v in vals], pa.decimal128(6, 1))
    elif kind == "dictionary":
        arr = pa.array(vals).dictionary_encode()
    elif kind == "float16":
        import numpy as np
        arr = pa.array(np.asarray(vals, dtype=np.float16))
    else:
        arr = pa.array(vals, getattr(pa, kind)())
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"arrival_time_s": [0.0, 0.5, 1.0], "num_prompt_tokens": arr,
                             "num_output_tokens": [2, 3, 4]}), p)
    out = tmp_path / "o"
    df = completes(capsys, _run(base, out, p), out, 3)
    assert df.num_prompt_tokens.tolist() == vals


# ---------------------------------------------------------------------------- labels
GJ = '{{"arrival_time_s": {t}, "num_prompt_tokens": 10, "num_output_tokens": 2{extra}}}\n'
BAD_LABELS = ["\\ud800", "\\udfff", "x\\udbff", "\\udc00y"]
GOOD_LABELS = [("\\ud83d\\ude00", "\U0001F600"), ("\\u00e9t\\u00e9", "été"), ("a b", "a b")]
LABEL_CASES = (
    [("jsonl-bad", f, v) for f in ("tenant", "slice") for v in BAD_LABELS]
    + [("jsonl-good", f, v) for f in ("tenant", "slice") for v in GOOD_LABELS]
    + [(kind, f, None) for kind in ("parquet-binary-bad", "parquet-binary-good", "csv-bytes")
       for f in ("tenant", "slice")]
)


@pytest.mark.parametrize("kind, field, value", LABEL_CASES,
                         ids=[f"label-{k}-{f}-{i}" for i, (k, f, _) in enumerate(LABEL_CASES)])
def test_label_encodings(capsys, base, tmp_path, clean_tmp, kind, field, value):
    out = tmp_path / "o"
    if kind.startswith("jsonl"):
        p = tmp_path / "l.jsonl"
        esc = value if kind == "jsonl-bad" else value[0]
        p.write_text(GJ.format(t=0, extra="") + GJ.format(t=0.5, extra=f', "{field}": "{esc}"'))
        if kind == "jsonl-bad":
            line = _refused(capsys, _run(base, out, p))
            _check_needles(line, [f"{p}:2: {field} ", "is not valid Unicode text",
                                  "labels must be UTF-8"])
            assert not out.exists()
        else:
            df = completes(capsys, _run(base, out, p), out, 2)
            assert df[field].tolist() == ["default", value[1]]
        return
    if kind == "csv-bytes":
        p = tmp_path / "l.csv"
        p.write_bytes(f"{GC_HEAD},{field}\n0,10,2,a\n0.5,10,2,".encode() + b"\xe9t\xe9\n")
        line = _refused(capsys, _run(base, out, p))
        # the decoder reads ahead: the line is found again (3), and the byte's column
        _check_needles(line, [f"{p}:3: cannot read: not UTF-8 text (byte 0xe9 at column "])
        return
    p = tmp_path / "l.parquet"
    data = [b"a", b"\xc3\xa9" if kind.endswith("good") else b"\xe9t\xe9"]
    pq.write_table(pa.table({"arrival_time_s": [0.0, 0.5], "num_prompt_tokens": [10, 10],
                             "num_output_tokens": [2, 2], field: pa.array(data, pa.binary())}), p)
    if kind.endswith("good"):
        df = completes(capsys, _run(base, out, p), out, 2)
        assert df[field].tolist() == ["a", "é"]  # decoded, never the label "b'a'"
    else:
        line = _refused(capsys, _run(base, out, p))
        _check_needles(line, [f"{p}:2: {field} b'\\xe9t\\xe9' is not UTF-8 text"])


# ---------------------------------------------------------------------------- big integers
BIG = [2 ** 31, 2 ** 53 + 1, 2 ** 63 + 1, 10 ** 30]
BIG_COLUMNS = ["num_prompt_tokens", "num_output_tokens", "max_tokens", "n", "priority"]
BIG_CASES = [(fmt, c, v) for fmt in ("csv", "jsonl") for c in BIG_COLUMNS for v in BIG]


@pytest.mark.parametrize("fmt, column, value", BIG_CASES,
                         ids=[f"bigint-{f}-{c}-{v.bit_length()}bits" for f, c, v in BIG_CASES])
def test_integers_beyond_the_column_are_refused_as_written(capsys, base, tmp_path, clean_tmp,
                                                           fmt, column, value):
    row = {"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2, column: value}
    if fmt == "csv":  # line 2 valid, line 3 with the value
        good = {"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2}
        good.setdefault(column, 2)
        p = tmp_path / "b.csv"
        p.write_text("".join(",".join(str(r[c]) for c in row) + "\n"
                             for r in ({c: c for c in row}, good, row)))
        where = f"{p}:3:"
    else:
        p = tmp_path / "b.jsonl"
        p.write_text(GJ.format(t=0, extra="") + json.dumps(row) + "\n")
        where = f"{p}:2:"
    line = _refused(capsys, _run(base, tmp_path / "o", p))
    _check_needles(line, [where, f"{column} {value} must be <= 2,147,483,647 (2**31 - 1)"])


ID_CASES = [2 ** 63, 2 ** 64, -(2 ** 63) - 1]


@pytest.mark.parametrize("value", ID_CASES, ids=[f"bigint-hash_ids-{i}" for i in range(3)])
def test_prefix_ids_beyond_int64_are_refused(capsys, base, tmp_path, clean_tmp, value):
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                 + json.dumps({"timestamp": 5, "input_length": 10, "output_length": 2,
                               "hash_ids": [value]}) + "\n")
    line = _refused(capsys, _run(base, tmp_path / "o", p))
    _check_needles(line, [f"{p}:2: hash_ids id {value} is outside the 64-bit integer range"])


def test_bigint_parquet_uint64_tokens(capsys, base, tmp_path, clean_tmp):
    p = tmp_path / "u.parquet"
    pq.write_table(pa.table({"arrival_time_s": [0.0, 1.0],
                             "num_prompt_tokens": pa.array([10, 2 ** 64 - 1], pa.uint64()),
                             "num_output_tokens": [2, 2]}), p)
    line = _refused(capsys, _run(base, tmp_path / "o", p))
    _check_needles(line, [f"{p}:2: num_prompt_tokens 18446744073709551615 must be <="])


# ---------------------------------------------------------------------------- clocks
def _small_trace(tmp):
    p = tmp / "t.csv"
    _write_rows(p, GC_HEAD, [(repr(k / 10), PROMPTS[k], OUTPUTS[k]) for k in range(K)])
    return p


CLOCK_CASES = (
    [("trace", [f"workload.rate_scale={s}"], f"workload.rate_scale={s:g} puts the last arrival")
     for s in (1e-20, 1e-12, 1e-9)]
    + [("synthetic", [f"workload.rate_scale={s}"],
        f"workload.rate_scale={s:g} puts the last arrival of synthetic workload")
       for s in (1e-20, 1e-12, 1e-9)]
    + [("synthetic", [f"workload.synthetic.arrival.rate_rps={r}"],
        f"workload.synthetic.arrival.rate_rps={r:g}: the last arrival")
       for r in (1e-15, 1e-12, 1e-9)]
    + [(f"mixed-{u}", [], ":3: this arrival is at") for u in PER_S]
    + [("boundary", [], ":3: this arrival is at 6.711e+07 s")]
)


@pytest.mark.parametrize("kind, sets, needle", CLOCK_CASES,
                         ids=[f"clock-{k}-{i}" for i, (k, _, _) in enumerate(CLOCK_CASES)])
def test_clock_that_cannot_resolve_a_step_is_refused(capsys, base, tmp_path, clean_tmp, kind,
                                                     sets, needle):
    trace = None
    if kind == "trace":
        trace = _small_trace(tmp_path)
    elif kind.startswith("mixed"):  # a row at 0, so nothing is re-based: epoch values stay
        trace = tmp_path / "mix.csv"
        _write_rows(trace, GC_HEAD, [("0", 10, 2), (_epoch_text(kind[6:], 0), 10, 2)])
    elif kind == "boundary":  # 2**26 s: float64 spacing 2**-26 s > 1e-8 s
        trace = tmp_path / "edge.csv"
        _write_rows(trace, GC_HEAD, [("0", 10, 2), (repr(2.0 ** 26), 10, 2)])
    out = tmp_path / "o"
    line = _refused(capsys, _run(base, out, trace, sets))
    _check_needles(line, [needle, "resolves a step"])
    if trace is not None and kind != "trace":
        assert str(trace) in line
    assert not out.exists()


def test_clock_just_below_the_bound_runs(capsys, base, tmp_path, clean_tmp):
    # the float just below 2**26 s has spacing 2**-27 s (7.5e-9 s <= 1e-8 s): accepted
    trace = tmp_path / "edge.csv"
    _write_rows(trace, GC_HEAD, [("0", 10, 2), (repr(float.fromhex("0x1.fffffffffffffp+25")),
                                                10, 2)])
    out = tmp_path / "o"
    df = completes(capsys, _run(base, out, trace), out, 2)
    assert df.arrival_time_s.tolist() == [0.0, 2.0 ** 26 - 2.0 ** -27]


def test_corpus_traces_size():
    """At least 100 cases (the brief's bar for this family file)."""
    n = (len(EPOCH_CASES) + len(PQ_REFUSED) + len(PQ_ACCEPTED) + len(LABEL_CASES)
         + len(BIG_CASES) + len(ID_CASES) + 1 + len(CLOCK_CASES) + 1)
    assert n >= 100, n
