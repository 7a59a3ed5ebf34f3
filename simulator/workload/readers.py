"""Trace readers: Azure LLM inference 2023 CSV, Vidur processed CSV, Mooncake JSONL, and
generic CSV / JSONL with a column mapping.

Every reader produces a :class:`TraceColumns` (numpy columns + the source line of each row),
validated as a whole with numpy; only when a column fails is the first offending row located,
so that the :class:`~simulator.workload.errors.WorkloadError` names ``file:line``.
Line numbers are 1-based and count every physical line (a CSV header is line 1; a JSONL file
has no header, so its first record is line 1). Blank lines are skipped.

Formats (see ``traces/README.md`` for examples):

- ``azure``: ``TIMESTAMP,ContextTokens,GeneratedTokens``; ``TIMESTAMP`` is
  ``YYYY-MM-DD HH:MM:SS[.f…]`` (up to 9 fractional digits, parsed exactly as integer
  nanoseconds); arrival times are seconds after the earliest row (the first row of a sorted file).
- ``vidur``: ``arrived_at`` (s), ``num_prefill_tokens``, ``num_decode_tokens``; other columns
  are ignored.
- ``mooncake``: JSON Lines with ``timestamp`` (ms), ``input_length``, ``output_length`` and
  optional ``hash_ids`` (ids of 512-token prefix blocks). Equal timestamps are kept as they
  are (no spreading); ties keep file order.
- ``generic_csv`` / ``generic_jsonl``: our field names (``arrival_time_s``,
  ``num_prompt_tokens``, ``num_output_tokens``), or the file's names via ``columns``;
  ``time_unit`` ``s`` or ``ms``.
- ``parquet``: the generic fields as typed Parquet columns (strings in a numeric column are
  errors, nulls are "not given"), plus ``prefix_hash_ids`` (list of int64) with
  ``prefix_block_tokens``; what :func:`write_parquet_trace` writes. Errors name the 1-based
  row (``file.parquet:17: ...``).
- ``servegen``: a ServeGen folder or client file; requests are generated from its per-client
  rate windows and length tables (:mod:`simulator.workload.servegen`).

Any format may carry the optional columns ``tenant``, ``priority``, ``slice``,
``cancel_after_s`` (s), ``max_tokens`` and ``n`` (sequences per request: parallel sampling,
>= 1); an empty cell (or JSON ``null``) means "not given".

size: pending its owner's split (issue 14 part 4; owner: wave2-scale): 830 lines.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulator.input_limits import bounded_lines, json_line_problem, short_repr
from simulator.request import RequestSpec
from simulator.resources import not_a_file_reason
from simulator.schema import MAX_TOKENS_REPRESENTABLE
from simulator.workload.columns import MOONCAKE_BLOCK_TOKENS, TraceColumns
from simulator.workload.config import GENERIC_FIELDS, REQUIRED_GENERIC_FIELDS
from simulator.workload.errors import WorkloadError
from simulator.workload.servegen import is_servegen_path, read_servegen

#: Rows read, validated and converted at a time by the CSV and Parquet readers (a 10^7-row
#: trace never exists as Python objects at once; its columns are numpy arrays).
READ_BATCH_ROWS = 65_536

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
VIDUR_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length")
OPTIONAL_FIELDS = ("tenant", "priority", "slice", "cancel_after_s", "max_tokens", "n")

_JSON_EXTS = {".jsonl", ".json", ".ndjson"}
_CSV_EXTS = {".csv", ".txt"}
_TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?")


# --------------------------------------------------------------------------- validation

@dataclass
class _Errors:
    """Collects the first bad row per column; raises the one on the earliest line."""

    path: str
    found: list[tuple[int, str]] = field(default_factory=list)

    def add(self, line: int, msg: str) -> None:
        self.found.append((line, msg))

    def raise_if_any(self) -> None:
        if self.found:
            line, msg = min(self.found, key=lambda e: e[0])
            raise WorkloadError(f"{self.path}:{line}: {msg}")


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _to_float_array(vals: list) -> np.ndarray | None:
    """Vectorised conversion; ``None`` when some element does not convert."""
    if any(v is True or v is False for v in vals):
        return None
    try:
        return np.asarray(vals, dtype=np.float64)
    except (ValueError, TypeError):
        return None


def _scalar_float(v) -> float | None:
    if _is_missing(v) or isinstance(v, bool):
        return None
    try:
        return float(np.asarray([v], dtype=np.float64)[0])
    except (ValueError, TypeError):
        return None


def _describe_bad_number(v, name: str, kind: str) -> str:
    if _is_missing(v):
        return f"{name} is missing"
    return f"{name} {short_repr(v)} is not {kind}"


def _json_numbers(vals: list, lines: np.ndarray, name: str, errors: _Errors) -> None:
    """JSON traces carry numbers as JSON numbers: a string (``"1200"``) or a boolean in a
    numeric field is an error, not converted. Missing values (absent or ``null``) pass."""
    for i, v in enumerate(vals):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            kind = {bool: "boolean", str: "string", list: "list", dict: "JSON object"}.get(
                type(v), type(v).__name__)
            shown = json.dumps(v)
            if len(shown) > 40:
                shown = shown[:37] + "..."
            errors.add(int(lines[i]), f"{name} {shown} is a {kind}, not a number")
            return


def _json_labels(vals: list, lines: np.ndarray, name: str, errors: _Errors) -> None:
    """JSON traces carry labels (tenant, slice) as JSON strings: a number, boolean, list or
    object there is an error, not turned into its Python ``str`` (``true`` -> ``'True'``).
    Missing values (absent or ``null``) pass."""
    for i, v in enumerate(vals):
        if v is not None and not isinstance(v, str):
            kind = {bool: "boolean", int: "number", float: "number", list: "list",
                    dict: "JSON object"}.get(type(v), type(v).__name__)
            shown = json.dumps(v)
            if len(shown) > 40:
                shown = shown[:37] + "..."
            errors.add(int(lines[i]), f"{name} {shown} is a {kind}, not a string")
            return


def _int_column(vals: list, lines: np.ndarray, name: str, errors: _Errors, *, min_value: int | None,
                optional: bool = False) -> np.ndarray:
    """Integer column (tokens, priority). Optional columns map missing cells to 0.

    Values must lie in ``[min_value, MAX_TOKENS_REPRESENTABLE]`` (2**31 - 1, the int32 range
    of an engine's sequence lengths; priorities: ``|p| <= 2**31 - 1``)."""
    arr = None
    if not optional:
        arr = _to_float_array(vals)
    if arr is None:
        # Slow path (or optional column): element-wise, to find the first bad row.
        out = np.zeros(len(vals), dtype=np.float64)
        for i, v in enumerate(vals):
            if optional and _is_missing(v):
                out[i] = np.nan
                continue
            f = _scalar_float(v)
            if f is None or not math.isfinite(f) or f != int(f):
                errors.add(int(lines[i]), _describe_bad_number(v, name, "an integer"))
                return np.zeros(len(vals), dtype=np.int64)
            out[i] = f
        arr = out
    present = ~np.isnan(arr) if optional else np.ones(arr.shape, dtype=bool)
    bad = present & (~np.isfinite(arr) | (np.floor(arr) != arr))
    lo = min_value if min_value is not None else -MAX_TOKENS_REPRESENTABLE
    bad |= present & np.isfinite(arr) & ((arr < lo) | (arr > MAX_TOKENS_REPRESENTABLE))
    if bad.any():
        i = int(np.argmax(bad))
        v, f = vals[i], arr[i]
        if math.isfinite(f) and f == math.floor(f):
            if f > MAX_TOKENS_REPRESENTABLE:
                errors.add(int(lines[i]), f"{name} {int(f)} must be <= "
                                          f"{MAX_TOKENS_REPRESENTABLE:,} (2**31 - 1)")
            else:
                errors.add(int(lines[i]), f"{name} {int(f)} must be >= {lo}")
        else:
            errors.add(int(lines[i]), _describe_bad_number(v, name, "an integer"))
        return np.zeros(len(vals), dtype=np.int64)
    return np.where(present, arr, 0).astype(np.int64)


def _float_column(vals: list, lines: np.ndarray, name: str, errors: _Errors, *,
                  positive: bool, optional: bool = False, signed: bool = False) -> np.ndarray:
    """Finite float column, >= 0 (or > 0 when ``positive``; any sign when ``signed``, for
    times on a clock whose origin is the file's); optional -> NaN where missing."""
    arr = None if optional else _to_float_array(vals)
    if arr is None:
        out = np.empty(len(vals), dtype=np.float64)
        for i, v in enumerate(vals):
            if optional and _is_missing(v):
                out[i] = np.nan
                continue
            f = _scalar_float(v)
            if f is None or not math.isfinite(f):
                errors.add(int(lines[i]), _describe_bad_number(v, name, "a finite number"))
                return np.zeros(len(vals), dtype=np.float64)
            out[i] = f
        arr = out
    present = ~np.isnan(arr) if optional else np.ones(arr.shape, dtype=bool)
    bad = present & ~np.isfinite(arr)
    if not signed:
        bad |= present & np.isfinite(arr) & ((arr <= 0) if positive else (arr < 0))
    if bad.any():
        i = int(np.argmax(bad))
        if math.isfinite(arr[i]):
            rel = "> 0" if positive else ">= 0"
            errors.add(int(lines[i]), f"{name} {vals[i]!r} must be {rel}")
        else:
            errors.add(int(lines[i]), _describe_bad_number(vals[i], name, "a finite number"))
        return np.zeros(len(vals), dtype=np.float64)
    return arr


def _str_column(vals: list) -> list[str]:
    """Labels (tenant, slice): one shared ``str`` object per distinct label of the batch, so
    a long trace's label lists cost a pointer a row, not a string a row."""
    shared: dict[str, str] = {}
    get = shared.setdefault
    return [get(x, x) for x in ("default" if _is_missing(v) else str(v).strip() for v in vals)]


def _azure_timestamps_ns(vals: list[str], lines: np.ndarray, name: str,
                         errors: _Errors) -> np.ndarray:
    """Exact integer nanoseconds since the epoch of ``YYYY-MM-DD HH:MM:SS[.f…]`` strings."""
    match = _TIMESTAMP_RE.fullmatch
    for i, v in enumerate(vals):
        if v is None or not match(v):
            if _is_missing(v):
                msg = f"{name} is missing"
            else:
                msg = f"{name} {v!r} is not YYYY-MM-DD HH:MM:SS[.fffffff]"
            errors.add(int(lines[i]), msg)
            return np.zeros(len(vals), dtype=np.int64)
    try:
        return np.asarray(vals, dtype="datetime64[ns]").astype(np.int64)
    except ValueError:  # pragma: no cover - impossible dates such as 2023-13-45
        for i, v in enumerate(vals):
            try:
                np.datetime64(v, "ns")
            except ValueError:
                errors.add(int(lines[i]), f"{name} {v!r} is not a valid date and time")
                break
        return np.zeros(len(vals), dtype=np.int64)


def _check_max_tokens(cols: TraceColumns, errors: _Errors) -> None:
    if cols.max_tokens is None:
        return
    bad = (cols.max_tokens > 0) & (cols.max_tokens < cols.output)
    if bad.any():
        i = int(np.argmax(bad))
        errors.add(int(cols.lines[i]), f"max_tokens {int(cols.max_tokens[i])} is below the "
                                       f"output length {int(cols.output[i])}")


# --------------------------------------------------------------------------- raw tables

def _iter_csv_tables(path: Path, shown: str, batch_rows: int | None = None
                     ) -> Iterator[tuple[list[str], list[list[str]], np.ndarray]]:
    """Header, rows (lists of strings) and their 1-based line numbers, ``batch_rows`` rows
    (default :data:`READ_BATCH_ROWS`) at a time; at least one batch (maybe without rows)."""
    batch_rows = batch_rows or READ_BATCH_ROWS
    header = None
    rows: list[list[str]] = []
    lines: list[int] = []
    prev = 0
    yielded = False
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(bounded_lines(f, shown, error=WorkloadError))
            for row in reader:
                start = prev + 1
                prev = reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if header is None:
                    header = _csv_header(row, shown, start)
                    continue
                rows.append(row)
                lines.append(start)
                if len(rows) >= batch_rows:
                    yield header, _check_fields(header, rows, lines, shown), \
                        np.asarray(lines, dtype=np.int64)
                    rows, lines, yielded = [], [], True
    except (csv.Error, UnicodeDecodeError) as e:
        raise WorkloadError(f"{shown}:{prev + 1}: cannot parse CSV ({e})") from e
    except OSError as e:
        raise WorkloadError(f"{shown}: cannot open ({e})") from e
    if header is None:
        raise WorkloadError(f"{shown}: empty file (no header)")
    if rows or not yielded:
        yield header, _check_fields(header, rows, lines, shown), np.asarray(lines, dtype=np.int64)


def _read_csv_table(path: Path, shown: str) -> tuple[list[str], list[list[str]], np.ndarray]:
    """Header, every row (lists of strings) and their 1-based line numbers, at once."""
    header, rows, lines = [], [], []
    for header, r, ln in _iter_csv_tables(path, shown):
        rows += r
        lines.append(ln)
    return header, rows, np.concatenate(lines)


def _csv_header(row: list[str], shown: str, line: int) -> list[str]:
    header = [h.strip() for h in row]
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise WorkloadError(f"{shown}:{line}: duplicate column(s) {dup}")
    return header


def _check_fields(header: list[str], rows: list[list[str]], lines: list[int],
                  shown: str) -> list[list[str]]:
    if rows:
        lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        bad = lens != len(header)
        if bad.any():
            i = int(np.argmax(bad))
            raise WorkloadError(f"{shown}:{lines[i]}: {lens[i]} fields, but the header has "
                                f"{len(header)}")
    return rows


def _not_utf8(path: Path, shown: str, e: UnicodeDecodeError) -> str:
    """``file:line: not UTF-8 text (...)`` for a decode error of a text read (the decoder
    reads ahead, so the line is found again by decoding the file line by line, in bytes)."""
    with open(path, "rb") as f:
        for no, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as le:
                return (f"{shown}:{no}: not UTF-8 text (byte {raw[le.start]:#04x} at column "
                        f"{le.start + 1} of the line: {le.reason})")
    return f"{shown}: not UTF-8 text ({e})"


class _DuplicateKey(ValueError):
    """A JSON object that names a key twice (the key is ``args[0]``)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook``: the object as a dict, refusing a key given twice (``json`` would
    keep the last silently, as YAML duplicates are refused)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


#: one decoder for every JSONL line (refuses duplicate keys; ~as fast as ``json.loads``)
_JSONL_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def _iter_jsonl_tables(path: Path, shown: str, batch_rows: int | None = None
                       ) -> Iterator[tuple[list[dict], np.ndarray]]:
    """JSON objects and their 1-based line numbers, ``batch_rows`` records (default
    :data:`READ_BATCH_ROWS`) at a time; at least one batch (maybe without records)."""
    batch_rows = batch_rows or READ_BATCH_ROWS
    objs: list[dict] = []
    lines: list[int] = []
    loads = _JSONL_DECODER.decode
    yielded = False
    try:
        with open(path, encoding="utf-8-sig") as f:
            for no, text in enumerate(bounded_lines(f, shown, error=WorkloadError), start=1):
                if not text.strip():
                    continue
                try:
                    obj = loads(text)
                except json.JSONDecodeError as e:
                    # 1-based column on the line; a cut line fails past its newline, which
                    # is shown as the column just after its last character
                    col = min(e.pos, len(text.rstrip("\r\n"))) + 1
                    raise WorkloadError(f"{shown}:{no}:{col}: invalid JSON ({e.msg})") from None
                except _DuplicateKey as e:
                    raise WorkloadError(f"{shown}:{no}: key {e.args[0]!r} appears twice in the "
                                        "record") from None
                except (RecursionError, ValueError) as e:  # nesting, an integer's digits
                    why = json_line_problem(text, e)
                    if why is None:
                        raise
                    raise WorkloadError(f"{shown}:{no}: {why}") from None
                if not isinstance(obj, dict):
                    raise WorkloadError(f"{shown}:{no}: expected a JSON object, got "
                                        f"{type(obj).__name__}")
                objs.append(obj)
                lines.append(no)
                if len(objs) >= batch_rows:
                    yield objs, np.asarray(lines, dtype=np.int64)
                    objs, lines, yielded = [], [], True
    except UnicodeDecodeError as e:
        raise WorkloadError(_not_utf8(path, shown, e)) from e
    except OSError as e:
        raise WorkloadError(f"{shown}: cannot open ({e})") from e
    if objs or not yielded:
        yield objs, np.asarray(lines, dtype=np.int64)


class _SeenKeys:
    """The keys of a JSONL trace's records so far, in first-seen order (the "columns" of a
    file whose records may differ in their keys), updated batch by batch."""

    def __init__(self):
        self.keys: dict[str, None] = {}

    def update(self, objs: list[dict]) -> None:
        keys = self.keys
        for o in objs:
            if len(o) != len(keys) or any(k not in keys for k in o):
                for k in o:
                    keys.setdefault(k)

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def names(self) -> list[str]:
        return list(self.keys)


def _read_jsonl_table(path: Path, shown: str) -> tuple[list[dict], np.ndarray]:
    """Every JSON object of a JSONL file and its 1-based line number, at once (small files:
    recorded runs; traces are read in batches, :func:`_iter_jsonl_tables`)."""
    objs: list[dict] = []
    lines = []
    for o, ln in _iter_jsonl_tables(path, shown):
        objs += o
        lines.append(ln)
    return objs, np.concatenate(lines)


def _csv_col(header: list[str], rows: list[list[str]], name: str) -> list[str]:
    j = header.index(name)
    return [r[j] for r in rows]


def _json_col(objs: list[dict], name: str) -> list:
    return [o.get(name) for o in objs]


def _finish_columns(cols: TraceColumns, get, have, names: dict[str, str], errors: _Errors,
                    json_numbers: bool = False) -> TraceColumns:
    """What every reader does once a table's (or batch's) three required columns are read:
    the optional fields (:func:`_optional_columns`), the ``max_tokens`` check, then every
    error of the table raised at once (a :class:`WorkloadError` naming file:line)."""
    _optional_columns(cols, get, have, names, errors, json_numbers=json_numbers)
    _check_max_tokens(cols, errors)
    errors.raise_if_any()
    return cols


def _optional_columns(cols: TraceColumns, get, have, names: dict[str, str],
                      errors: _Errors, json_numbers: bool = False) -> None:
    """Fill the optional fields whose (mapped) column exists (``json_numbers``: numeric
    fields must be JSON numbers)."""
    lines = cols.lines
    for fld in OPTIONAL_FIELDS:
        src = names.get(fld, fld)
        if not have(src):
            continue
        vals = get(src)
        if json_numbers and fld in ("priority", "cancel_after_s", "max_tokens", "n"):
            _json_numbers(vals, lines, src, errors)
        if fld in ("tenant", "slice"):
            if json_numbers and cols.format in ("generic_jsonl", "mooncake"):
                _json_labels(vals, lines, src, errors)  # a Parquet column may be typed
            setattr(cols, fld, _str_column(vals))
        elif fld == "priority":
            pr = _int_column(vals, lines, src, errors, min_value=None, optional=True)
            cols.priority = pr
        elif fld == "cancel_after_s":
            cols.cancel_after_s = _float_column(vals, lines, src, errors, positive=True,
                                                optional=True)
        elif fld == "max_tokens":
            cols.max_tokens = _int_column(vals, lines, src, errors, min_value=1, optional=True)
        elif fld == "n":
            cols.n = _int_column(vals, lines, src, errors, min_value=1, optional=True)


# --------------------------------------------------------------------------- readers

def _need(header_or_keys, required, shown: str, fmt: str, where: str) -> None:
    missing = [c for c in required if c not in header_or_keys]
    if missing:
        raise WorkloadError(f"{shown}: format {fmt!r} needs column(s) "
                            f"{', '.join(map(repr, missing))}; {where} has "
                            f"{', '.join(map(repr, header_or_keys))}")


def _read_azure(path: Path, shown: str) -> TraceColumns:
    parts, ns_parts = [], []
    for header, rows, lines in _iter_csv_tables(path, shown):
        _need(header, AZURE_COLUMNS, shown, "azure", "the header")
        errors = _Errors(shown)
        ts, ctx, gen = AZURE_COLUMNS
        ns_parts.append(_azure_timestamps_ns(_csv_col(header, rows, ts), lines, ts, errors))
        prompt = _int_column(_csv_col(header, rows, ctx), lines, ctx, errors, min_value=1)
        output = _int_column(_csv_col(header, rows, gen), lines, gen, errors, min_value=1)
        cols = TraceColumns(shown, "azure", np.zeros(len(lines)), prompt, output, lines)
        parts.append(_finish_columns(cols, lambda c, h=header, r=rows: _csv_col(h, r, c),
                                     header.__contains__, {}, errors))
    cols = TraceColumns.concat(parts, consume=True)
    ns = np.concatenate(ns_parts)
    # Relative to the earliest row, exactly in integer ns, then one rounding to float seconds.
    cols.arrival_s = (ns - ns.min()) / 1e9 if len(ns) else np.zeros(0)
    return cols


def _read_vidur(path: Path, shown: str) -> TraceColumns:
    parts = []
    for header, rows, lines in _iter_csv_tables(path, shown):
        _need(header, VIDUR_COLUMNS, shown, "vidur", "the header")
        errors = _Errors(shown)
        ta, pf, dc = VIDUR_COLUMNS
        arrival = _float_column(_csv_col(header, rows, ta), lines, ta, errors, positive=False)
        prompt = _int_column(_csv_col(header, rows, pf), lines, pf, errors, min_value=1)
        output = _int_column(_csv_col(header, rows, dc), lines, dc, errors, min_value=1)
        cols = TraceColumns(shown, "vidur", arrival, prompt, output, lines)
        parts.append(_finish_columns(cols, lambda c, h=header, r=rows: _csv_col(h, r, c),
                                     header.__contains__, {}, errors))
    return TraceColumns.concat(parts, consume=True)


def _hash_ids(vals: list, lines: np.ndarray, errors: _Errors,
              prompt: np.ndarray) -> list[tuple[int, ...] | None]:
    """Mooncake ``hash_ids``: a list of integers, one per 512-token block of the prompt, so
    ``len(hash_ids) == ceil(input_length / 512)`` (the Mooncake trace format; FAST'25 release
    README); a row without the field (or ``null``) has no shareable prefix."""
    out: list[tuple[int, ...] | None] = []
    bt = MOONCAKE_BLOCK_TOKENS
    for i, v in enumerate(vals):
        if v is None:
            out.append(None)
            continue
        if not isinstance(v, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) for h in v):
            errors.add(int(lines[i]), f"hash_ids {str(v)[:60]!r} is not a list of integers")
            return [None] * len(vals)
        need = -(-int(prompt[i]) // bt)
        if prompt[i] > 0 and len(v) != need:
            errors.add(int(lines[i]), f"hash_ids has {len(v)} entries but input_length "
                                      f"{int(prompt[i])} needs ceil({int(prompt[i])} / {bt}) "
                                      f"= {need} (one id per {bt}-token block)")
            return [None] * len(vals)
        out.append(tuple(v) if v else None)
    return out


def _read_mooncake(path: Path, shown: str) -> TraceColumns:
    """Read a Mooncake JSONL trace :data:`READ_BATCH_ROWS` records at a time."""
    seen = _SeenKeys()
    parts = []
    for objs, lines in _iter_jsonl_tables(path, shown):
        seen.update(objs)
        parts.append(_mooncake_batch(objs, lines, shown, seen))
    return TraceColumns.concat(parts, consume=True)


def _mooncake_batch(objs: list[dict], lines: np.ndarray, shown: str,
                    seen: _SeenKeys) -> TraceColumns:
    errors = _Errors(shown)
    raw = {c: _json_col(objs, c) for c in MOONCAKE_FIELDS}
    for c in MOONCAKE_FIELDS:
        _json_numbers(raw[c], lines, c, errors)
    ts = _float_column(raw["timestamp"], lines, "timestamp", errors, positive=False)
    prompt = _int_column(raw["input_length"], lines, "input_length", errors, min_value=1)
    output = _int_column(raw["output_length"], lines, "output_length", errors, min_value=1)
    cols = TraceColumns(shown, "mooncake", ts / 1000.0, prompt, output, lines)
    if "hash_ids" in seen:
        cols.prefix_hash_ids = _hash_ids(_json_col(objs, "hash_ids"), lines, errors, prompt)
        cols.prefix_block_tokens = MOONCAKE_BLOCK_TOKENS
    return _finish_columns(cols, lambda c: _json_col(objs, c), seen.__contains__, {}, errors,
                           json_numbers=True)


def _generic(shown: str, fmt: str, get, have, present_names: list[str], n_rows: int,
             lines: np.ndarray, columns: dict[str, str] | None, time_unit: str,
             json_numbers: bool = False) -> TraceColumns:
    names = dict(columns or {})
    for fld, src in names.items():
        if n_rows and not have(src):
            raise WorkloadError(f"{shown}: column {src!r} (mapped from {fld!r}) not found; "
                                f"the file has {', '.join(map(repr, present_names))}")
    missing = [f for f in REQUIRED_GENERIC_FIELDS if not have(names.get(f, f))]
    if missing and n_rows:
        raise WorkloadError(
            f"{shown}: format {fmt!r} needs a column for {', '.join(map(repr, missing))} "
            f"(map it with columns: {{field: file_column}}); the file has "
            f"{', '.join(map(repr, present_names))}")
    errors = _Errors(shown)
    a_src = names.get("arrival_time_s", "arrival_time_s")
    p_src = names.get("num_prompt_tokens", "num_prompt_tokens")
    o_src = names.get("num_output_tokens", "num_output_tokens")
    if json_numbers:
        for src in (a_src, p_src, o_src):
            _json_numbers(get(src), lines, src, errors)
    arrival = _float_column(get(a_src), lines, a_src, errors, positive=False)
    if time_unit == "ms":
        arrival = arrival / 1000.0
    prompt = _int_column(get(p_src), lines, p_src, errors, min_value=1)
    output = _int_column(get(o_src), lines, o_src, errors, min_value=1)
    cols = TraceColumns(shown, fmt, arrival, prompt, output, lines)
    return _finish_columns(cols, get, have, names, errors, json_numbers=json_numbers)


def _read_generic_csv(path: Path, shown: str, columns, time_unit) -> TraceColumns:
    return TraceColumns.concat([
        _generic(shown, "generic_csv", lambda c, h=header, r=rows: _csv_col(h, r, c),
                 header.__contains__, header, len(rows) or 1, lines, columns, time_unit)
        for header, rows, lines in _iter_csv_tables(path, shown)], consume=True)


def _read_generic_jsonl(path: Path, shown: str, columns, time_unit) -> TraceColumns:
    """Read a generic JSONL trace :data:`READ_BATCH_ROWS` records at a time. A field is a
    column once any record so far has it (records without it: not given). A mapped column
    (``columns``) of a required field must be in the first batch (every record needs it);
    a mapped optional column anywhere in the file."""
    seen = _SeenKeys()
    mapped = dict(columns or {})
    optional = {s for f, s in mapped.items() if f not in REQUIRED_GENERIC_FIELDS}

    def have(c: str) -> bool:
        return c in seen or c in optional  # an optional column may come later: not given

    parts = []
    for objs, lines in _iter_jsonl_tables(path, shown):
        seen.update(objs)
        parts.append(_generic(shown, "generic_jsonl", lambda c, o=objs: _json_col(o, c),
                              have, seen.names(), len(objs), lines, mapped, time_unit,
                              json_numbers=True))
    if any(len(p) for p in parts):
        for fld, src in mapped.items():
            if src not in seen:
                raise WorkloadError(f"{shown}: column {src!r} (mapped from {fld!r}) not "
                                    f"found; the file has {', '.join(map(repr, seen.names()))}")
    return TraceColumns.concat(parts, consume=True)


# --------------------------------------------------------------------------- detection

# --------------------------------------------------------------------------- parquet

PARQUET_MAGIC = b"PAR1"
_PARQUET_EXTS = {".parquet", ".pq"}


def _is_parquet(p: Path) -> bool:
    if p.suffix.lower() in _PARQUET_EXTS:
        return True
    try:
        with open(p, "rb") as f:
            return f.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def _read_parquet(path: Path, shown: str, columns, time_unit) -> TraceColumns:
    """Read a Parquet trace one record batch (:data:`READ_BATCH_ROWS` rows) at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        pf = pq.ParquetFile(path)
        names = list(pf.schema_arrow.names)
        dup = sorted({c for c in names if names.count(c) > 1})
        if dup:
            raise WorkloadError(f"{shown}: duplicate column(s) {dup}")
        parts, offset = [], 0
        for batch in pf.iter_batches(batch_size=READ_BATCH_ROWS):
            parts.append(_parquet_batch(batch, names, offset, shown, columns, time_unit))
            offset += batch.num_rows
        if not parts:  # no rows: validate the columns all the same
            empty = pa.RecordBatch.from_pylist([], schema=pf.schema_arrow)
            parts.append(_parquet_batch(empty, names, 0, shown, columns, time_unit))
    except (pa.ArrowException, OSError) as e:
        raise WorkloadError(f"{shown}: not a readable Parquet file ({e})") from None
    return TraceColumns.concat(parts, consume=True)


def _parquet_batch(batch, names: list[str], offset: int, shown: str, columns,
                   time_unit) -> TraceColumns:
    """Validate and convert one record batch whose first row is row ``offset + 1``."""
    cache: dict[str, list] = {}

    def get(c: str) -> list:
        if c not in cache:
            cache[c] = batch.column(c).to_pylist()
        return cache[c]

    n = batch.num_rows
    lines = np.arange(offset + 1, offset + n + 1, dtype=np.int64)
    cols = _generic(shown, "parquet", get, names.__contains__, names, n or 1, lines, columns,
                    time_unit, json_numbers=True)
    if "prefix_hash_ids" in names:
        errors = _Errors(shown)
        if "prefix_block_tokens" not in names:
            raise WorkloadError(f"{shown}: column 'prefix_hash_ids' needs 'prefix_block_tokens' "
                                "(tokens per prefix id)")
        ids: list[tuple[int, ...] | None] = []
        for i, v in enumerate(get("prefix_hash_ids")):
            if v is None or v == []:
                ids.append(None)
            elif isinstance(v, list) and all(isinstance(h, int) and not isinstance(h, bool)
                                             for h in v):
                ids.append(tuple(v))
            else:
                errors.add(int(lines[i]), f"prefix_hash_ids {str(v)[:60]!r} is not a list of "
                                          "integers")
                break
        _json_numbers(get("prefix_block_tokens"), lines, "prefix_block_tokens", errors)
        bt = _int_column(get("prefix_block_tokens"), lines, "prefix_block_tokens", errors,
                         min_value=1, optional=True)
        errors.raise_if_any()
        cols.prefix_hash_ids = ids
        cols.prefix_block_tokens = [int(b) if b > 0 else MOONCAKE_BLOCK_TOKENS
                                    for b in bt.tolist()]
    return cols


def write_parquet_trace(cols: TraceColumns, path: str | os.PathLike, *,
                        metadata: dict[str, str] | None = None) -> Path:
    """Write a trace as a Parquet file that ``format: parquet`` reads back identically.

    Columns: ``arrival_time_s`` (float64, seconds on the trace's clock),
    ``num_prompt_tokens``, ``num_output_tokens`` (int64), and those the trace has:
    ``tenant``, ``slice`` (string), ``priority`` (int64), ``cancel_after_s`` (float64, null
    where not given), ``max_tokens`` (int64, null where not given), ``prefix_hash_ids``
    (list of int64, null where none) with ``prefix_block_tokens`` (int64). Rows are in arrival
    order (stable: ties keep file order), as every reader returns them. The file's metadata
    records the source file and format (``servesim.source``, ``servesim.format``) plus
    ``metadata``.

    Parameters
    ----------
    cols : TraceColumns
        A trace as :func:`read_columns` returns it.
    path : str or path-like
        Output file (its folder is created).
    metadata : dict of str to str, optional
        Extra key/value pairs for the file's metadata (e.g. the seed of a generated trace).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    WorkloadError
        If the file cannot be written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    order = np.argsort(cols.arrival_s, kind="stable")
    c = cols.take(order)
    data: dict[str, pa.Array] = {
        "arrival_time_s": pa.array(c.arrival_s, type=pa.float64()),
        "num_prompt_tokens": pa.array(c.prompt, type=pa.int64()),
        "num_output_tokens": pa.array(c.output, type=pa.int64()),
    }
    if c.tenant is not None:
        data["tenant"] = pa.array(c.tenant, type=pa.string())
    if c.slice is not None:
        data["slice"] = pa.array(c.slice, type=pa.string())
    if c.priority is not None:
        data["priority"] = pa.array(c.priority, type=pa.int64())
    if c.cancel_after_s is not None:
        data["cancel_after_s"] = pa.array(c.cancel_after_s, type=pa.float64(),
                                          mask=np.isnan(c.cancel_after_s))
    if c.max_tokens is not None:
        data["max_tokens"] = pa.array(c.max_tokens, type=pa.int64(), mask=c.max_tokens <= 0)
    if c.n is not None:
        data["n"] = pa.array(c.n, type=pa.int64(), mask=c.n <= 0)
    if c.prefix_hash_ids is not None:
        data["prefix_hash_ids"] = pa.array([list(h) if h else None for h in c.prefix_hash_ids],
                                           type=pa.list_(pa.int64()))
        bt = c.prefix_block_tokens
        data["prefix_block_tokens"] = pa.array(bt if isinstance(bt, list) else [bt] * len(c),
                                               type=pa.int64())
    meta = {"servesim.source": str(cols.path), "servesim.format": str(cols.format)}
    meta.update({str(k): str(v) for k, v in (metadata or {}).items()})
    table = pa.table(data).replace_schema_metadata(meta)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out)
    except OSError as e:
        raise WorkloadError(f"{out}: cannot write ({e.strerror or e})") from None
    return out


def _first_nonblank_line(path: Path, shown: str) -> str:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            for text in bounded_lines(f, shown, error=WorkloadError):
                if text.strip():
                    return text.strip()
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError(f"{shown}: cannot read ({e})") from e
    raise WorkloadError(f"{shown}: empty file")


def detect_format(path: str | os.PathLike, columns: dict[str, str] | None = None) -> str:
    """Detect a trace file's format from its extension and first line.

    Parameters
    ----------
    path : str or path-like
        The trace file.
    columns : dict or None
        A generic column mapping; when given, the result is ``generic_csv`` or
        ``generic_jsonl``.

    Returns
    -------
    str
        ``azure``, ``vidur``, ``mooncake``, ``generic_csv``, ``generic_jsonl``, ``parquet``
        (``.parquet`` / ``.pq`` or the ``PAR1`` magic bytes) or ``servegen`` (a folder of
        ``chunk-N-trace.csv`` files, or one such file).

    Raises
    ------
    WorkloadError
        If the file cannot be read or is empty, or a folder is not ServeGen data.
    """
    p = Path(path)
    shown = str(path)
    if p.is_dir():
        if is_servegen_path(p):
            return "servegen"
        raise WorkloadError(f"{shown}: is a directory, not a trace file (nor a ServeGen "
                            "folder: it has no chunk-N-trace.csv)")
    if _is_parquet(p):
        return "parquet"
    if is_servegen_path(p):
        return "servegen"
    first = _first_nonblank_line(p, shown)
    ext = p.suffix.lower()
    is_json = ext in _JSON_EXTS or (ext not in _CSV_EXTS and first.startswith("{"))
    if is_json:
        if columns is not None:
            return "generic_jsonl"
        try:
            obj = json.loads(first)
        except (ValueError, RecursionError):  # not JSON, too deep, an integer too long
            return "generic_jsonl"  # the reader reports the line
        if isinstance(obj, dict) and all(k in obj for k in MOONCAKE_FIELDS):
            return "mooncake"
        return "generic_jsonl"
    if columns is not None:
        return "generic_csv"
    try:
        header = [h.strip() for h in next(csv.reader([first]))]
    except csv.Error as e:  # a header field over csv's field size limit
        raise WorkloadError(f"{shown}: cannot parse the CSV header ({e})") from None
    if all(c in header for c in AZURE_COLUMNS):
        return "azure"
    if all(c in header for c in VIDUR_COLUMNS):
        return "vidur"
    if all(c in header for c in REQUIRED_GENERIC_FIELDS):
        return "generic_csv"
    raise WorkloadError(
        f"{shown}: cannot detect the trace format from the header {header}; expected Azure "
        f"({','.join(AZURE_COLUMNS)}), Vidur ({','.join(VIDUR_COLUMNS)}), generic "
        f"({','.join(REQUIRED_GENERIC_FIELDS)}), Parquet (.parquet) or a ServeGen "
        f"chunk-N-trace.csv; set format and/or columns")


def read_columns(path: str | os.PathLike, format: str = "auto",
                 columns: dict[str, str] | None = None, time_unit: str = "s", *,
                 seed: int = 0, start_s: float = 0.0, end_s: float | None = None,
                 servegen=None) -> TraceColumns:
    """Read a trace into a :class:`TraceColumns` (file order). See :func:`read_trace`.

    ``seed``, ``start_s``, ``end_s`` and ``servegen`` (a
    :class:`~simulator.workload.config.ServeGenConfig`) apply to ServeGen data only: its
    requests are generated (windows overlapping ``[start_s, end_s)``, seeded); the other
    formats return every row and ignore them.
    """
    shown = str(path)
    p = Path(path)
    if not p.is_file() and not (p.is_dir() and format in ("auto", "servegen")):
        raise WorkloadError(f"{shown}: {not_a_file_reason(p)}")
    if columns is not None:
        unknown = sorted(set(columns) - set(GENERIC_FIELDS))
        if unknown:
            raise WorkloadError(f"columns: unknown field(s) {unknown}; known: {GENERIC_FIELDS}")
    if time_unit not in ("s", "ms"):
        raise WorkloadError(f"time_unit must be 's' or 'ms', got {time_unit!r}")
    fmt = detect_format(p, columns) if format == "auto" else format
    if servegen is not None and fmt != "servegen":
        raise WorkloadError(f"{shown}: workload.servegen applies to ServeGen data, not {fmt!r}")
    generic = fmt in ("generic_csv", "generic_jsonl", "parquet")
    if not generic and (columns is not None or time_unit != "s"):
        raise WorkloadError(f"{shown}: columns/time_unit apply to generic formats, not {fmt!r}")
    if fmt == "azure":
        return _read_azure(p, shown)
    if fmt == "vidur":
        return _read_vidur(p, shown)
    if fmt == "mooncake":
        return _read_mooncake(p, shown)
    if fmt == "generic_csv":
        return _read_generic_csv(p, shown, columns, time_unit)
    if fmt == "generic_jsonl":
        return _read_generic_jsonl(p, shown, columns, time_unit)
    if fmt == "parquet":
        return _read_parquet(p, shown, columns, time_unit)
    if fmt == "servegen":
        sg = servegen
        return read_servegen(p, seed, start_s=start_s, end_s=end_s,
                             clients=getattr(sg, "clients", None),
                             prompt_tokens=getattr(sg, "prompt_tokens", None),
                             output_tokens=getattr(sg, "output_tokens", None))
    raise WorkloadError(f"unknown trace format {format!r}")


def read_trace(path: str | os.PathLike, format: str = "auto",
               columns: dict[str, str] | None = None, time_unit: str = "s", *,
               seed: int = 0) -> list[RequestSpec]:
    """Read a trace file into request specs.

    Parameters
    ----------
    path : str or path-like
        The file (used as given; :func:`load_workload` resolves scenario paths first).
    format : str
        ``auto`` (by extension, header or folder), ``azure``, ``vidur``, ``mooncake``,
        ``generic_csv``, ``generic_jsonl``, ``parquet`` or ``servegen``.
    columns : dict of str to str, or None
        Generic formats: our field name (``arrival_time_s``, ``num_prompt_tokens``,
        ``num_output_tokens``, ``tenant``, ``priority``, ``slice``, ``cancel_after_s``,
        ``max_tokens``) -> the file's column name. Unmapped fields use their own name.
    time_unit : ``"s"`` or ``"ms"``
        Unit of a generic trace's arrival time column.
    seed : int
        Seed of the requests generated from ServeGen data (other formats: unused).

    Returns
    -------
    list of RequestSpec
        Sorted by arrival time in seconds on the trace's clock (stable: ties keep file
        order), ``request_id`` 0..N-1 in that order, ``source_line`` the file line. Azure
        times are relative to the earliest row; the other formats keep the file's clock.

    Raises
    ------
    WorkloadError
        If the file is missing, the format cannot be detected, a column is missing, or a row
        is malformed (missing or non-numeric field, token count < 1, negative time,
        ``max_tokens`` below the output length); the message names ``file:line``.
    """
    cols = read_columns(path, format, columns, time_unit, seed=seed)
    order = np.argsort(cols.arrival_s, kind="stable")
    return cols.take(order).to_specs()
