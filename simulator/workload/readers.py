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
- ``vidur``: ``arrived_at`` (s), ``num_prefill_tokens``, ``num_decode_tokens`` (others ignored).
- ``mooncake``: JSON Lines with ``timestamp`` (ms), ``input_length``, ``output_length`` and
  optional ``hash_ids`` (ids of 512-token prefix blocks). Equal timestamps are kept as they
  are (no spreading); ties keep file order.
- ``generic_csv`` / ``generic_jsonl``: our field names (``arrival_time_s``,
  ``num_prompt_tokens``, ``num_output_tokens``), or the file's names via ``columns``;
  ``time_unit`` ``s`` or ``ms``.
- ``parquet``: the generic fields as typed Parquet columns (strings in a numeric column are
  errors, nulls are "not given"), plus ``prefix_hash_ids`` (list of int64) with
  ``prefix_block_tokens``; what :func:`~simulator.workload.parquet.write_parquet_trace`
  writes. A Parquet file with Azure's, Vidur's or Mooncake's columns is read as that format.
  Column types are checked first (:mod:`simulator.workload.parquet`); errors name the
  1-based row (``file.parquet:17: ...``) or the column.
- ``servegen``: a ServeGen folder or client file, requests generated from its per-client rate
  windows and length tables (:mod:`simulator.workload.servegen`).

Any format may carry the optional columns ``tenant``, ``priority``, ``slice``, ``cancel_after_s``
(s), ``max_tokens`` and ``n`` (sequences per request, >= 1); an empty cell or ``null``: not given.
The generic formats may carry multi-turn sessions: ``session_id``, ``turn_index`` (or
``turn``) and ``think_time_s`` (:mod:`simulator.workload.sessions`).

Clocks: a trace whose arrival times are timestamps (the first at 2**26 s or later) is
re-based to its first arrival, in the Unix epoch unit its magnitude shows
(:mod:`simulator.workload.clock`). Column validation lives in
:mod:`simulator.workload.values`, each format's batch conversion in
:mod:`simulator.workload.schemas`, Parquet in :mod:`simulator.workload.parquet`; format
detection in :mod:`simulator.workload.detect`; this module reads the files and dispatches.
"""
from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from simulator.base.input_limits import (
    MAX_NESTING_DEPTH,
    bounded_lines,
    json_line_problem,
    json_too_deep,
)
from simulator.base.request import RequestSpec
from simulator.base.resources import not_a_file_reason
from simulator.workload.columns import TraceColumns
from simulator.workload.config import GENERIC_FIELDS, REQUIRED_GENERIC_FIELDS
from simulator.workload.detect import (
    _check_stated_format,
    _is_parquet,
    _not_utf8,
    detect_format,
)
from simulator.workload.errors import WorkloadError
from simulator.workload.parquet import read_parquet  # pyarrow: imported inside
from simulator.workload.schemas import (  # noqa: F401 - the format constants, re-exported
    _TIME_DIVISOR,
    AZURE_COLUMNS,
    MOONCAKE_FIELDS,
    OPTIONAL_FIELDS,
    VIDUR_COLUMNS,
    _azure_batch,
    _finish_azure,
    _generic,
    _mooncake_batch,
    _vidur_batch,
    schema_format,
)
from simulator.workload.servegen import read_servegen
from simulator.workload.sessions import SESSION_BLOCK_TOKENS, finish_sessions
from simulator.workload.values import (  # noqa: F401 - re-exported (observe readers)
    _Errors,
    _finish_clock,
    _float_column,
    _int_column,
    json_float,
)

#: Rows read, validated and converted at a time by the CSV and Parquet readers (a 10^7-row
#: trace never exists as Python objects at once; its columns are numpy arrays).
READ_BATCH_ROWS = 65_536




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
    except UnicodeDecodeError as e:  # read ahead: the line is found again in bytes
        raise WorkloadError(_not_utf8(path, shown, e, "cannot parse CSV: ")) from e
    except csv.Error as e:
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


#: one decoder for every JSONL line (refuses duplicate keys; a number beyond the float range
#: keeps its text for the message; ~as fast as ``json.loads``)
_JSONL_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_float=json_float)


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
                if json_too_deep(text):
                    raise WorkloadError(f"{shown}:{no}: nested deeper than {MAX_NESTING_DEPTH} "
                                        "levels")
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
                        why = f"a number in the record cannot be read ({str(e).split(':')[0]})"
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


# --------------------------------------------------------------------------- readers

def _need(header_or_keys, required, shown: str, fmt: str, where: str) -> None:
    missing = [c for c in required if c not in header_or_keys]
    if missing:
        raise WorkloadError(f"{shown}: format {fmt!r} needs column(s) "
                            f"{', '.join(map(repr, missing))}; {where} has "
                            f"{', '.join(map(repr, header_or_keys))}")


def _read_azure(path: Path, shown: str) -> TraceColumns:
    parts = []
    for header, rows, lines in _iter_csv_tables(path, shown):
        _need(header, AZURE_COLUMNS, shown, "azure", "the header")
        parts.append(_azure_batch(lambda c, h=header, r=rows: _csv_col(h, r, c),
                                  header.__contains__, lines, shown))
    return _finish_azure(parts)


def _read_vidur(path: Path, shown: str) -> TraceColumns:
    parts = []
    for header, rows, lines in _iter_csv_tables(path, shown):
        _need(header, VIDUR_COLUMNS, shown, "vidur", "the header")
        parts.append(_vidur_batch(lambda c, h=header, r=rows: _csv_col(h, r, c),
                                  header.__contains__, lines, shown))
    return _finish_clock(TraceColumns.concat(parts, consume=True), 1, VIDUR_COLUMNS[0])


def _read_mooncake(path: Path, shown: str) -> TraceColumns:
    """Read a Mooncake JSONL trace :data:`READ_BATCH_ROWS` records at a time."""
    seen = _SeenKeys()
    parts = []
    for objs, lines in _iter_jsonl_tables(path, shown):
        seen.update(objs)
        parts.append(_mooncake_batch(lambda c, o=objs: _json_col(o, c), seen.__contains__,
                                     lines, shown))
    return _finish_clock(TraceColumns.concat(parts, consume=True), 1000, MOONCAKE_FIELDS[0])


def _arrival_key(columns: dict[str, str] | None) -> str:
    return (columns or {}).get("arrival_time_s", "arrival_time_s")


def _read_generic_csv(path: Path, shown: str, columns, time_unit) -> TraceColumns:
    cols = TraceColumns.concat([
        _generic(shown, "generic_csv", lambda c, h=header, r=rows: _csv_col(h, r, c),
                 header.__contains__, header, len(rows) or 1, lines, columns, time_unit)
        for header, rows, lines in _iter_csv_tables(path, shown)], consume=True)
    return _finish_clock(cols, _TIME_DIVISOR[time_unit], _arrival_key(columns))


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
    cols = TraceColumns.concat(parts, consume=True)
    return _finish_clock(cols, _TIME_DIVISOR[time_unit], _arrival_key(columns))


def read_columns(path: str | os.PathLike, format: str = "auto",
                 columns: dict[str, str] | None = None, time_unit: str = "s", *,
                 seed: int = 0, start_s: float = 0.0, end_s: float | None = None,
                 servegen=None, session_block_tokens: int = SESSION_BLOCK_TOKENS
                 ) -> TraceColumns:
    """Read a trace into a :class:`TraceColumns` (file order). See :func:`read_trace`.

    ``seed``, ``start_s``, ``end_s`` and ``servegen`` (a
    :class:`~simulator.workload.config.ServeGenConfig`) apply to ServeGen data only: its
    requests are generated (windows overlapping ``[start_s, end_s)``, seeded); the other
    formats return every row and ignore them. A generic trace's sessions get prefix ids of
    ``session_block_tokens`` tokens (:func:`simulator.workload.sessions.finish_sessions`).
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
    if format != "auto" and p.is_file():
        _check_stated_format(p, shown, fmt)
    if servegen is not None and fmt != "servegen":
        raise WorkloadError(f"{shown}: workload.servegen applies to ServeGen data, not {fmt!r}")
    generic = fmt in ("generic_csv", "generic_jsonl", "parquet")
    if not generic and (columns is not None or time_unit != "s"):
        raise WorkloadError(f"{shown}: columns/time_unit apply to generic formats, not {fmt!r}")
    if fmt in ("parquet", "azure", "vidur", "mooncake") and p.is_file() and _is_parquet(p):
        return finish_sessions(read_parquet(p, shown, fmt, columns, time_unit,
                                            batch_rows=READ_BATCH_ROWS), session_block_tokens)
    if fmt == "azure":
        return _read_azure(p, shown)
    if fmt == "vidur":
        return _read_vidur(p, shown)
    if fmt == "mooncake":
        return _read_mooncake(p, shown)
    if fmt == "generic_csv":
        return finish_sessions(_read_generic_csv(p, shown, columns, time_unit),
                               session_block_tokens)
    if fmt == "generic_jsonl":
        return finish_sessions(_read_generic_jsonl(p, shown, columns, time_unit),
                               session_block_tokens)
    if fmt == "parquet":  # not Parquet data (no PAR1 magic): what the Parquet reader says
        return read_parquet(p, shown, fmt, columns, time_unit,
                            batch_rows=READ_BATCH_ROWS)
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
        ``max_tokens``, ``n``, ``session_id``, ``turn_index``, ``think_time_s``) -> the
        file's column name. Unmapped fields use their own name.
    time_unit : ``"s"`` or ``"ms"``
        Unit of a generic trace's arrival time column.
    seed : int
        Seed of the requests generated from ServeGen data (other formats: unused).

    Returns
    -------
    list of RequestSpec
        Sorted by arrival time in seconds on the trace's clock (stable: ties keep file
        order), ``request_id`` 0..N-1 in that order, ``source_line`` the file line. Azure
        times (and Parquet timestamp / date columns) are relative to the earliest row; the
        other formats keep the file's clock unless its first arrival is 2**26 s (~2.1
        years) or later: such timestamps are re-based to the first arrival, in the Unix
        epoch unit their magnitude shows (:mod:`simulator.workload.clock`, with a
        :class:`~simulator.workload.errors.WorkloadWarning`).

    Raises
    ------
    WorkloadError
        If the file is missing, the format cannot be detected, a column is missing, or a row
        is malformed (missing or non-numeric field, token count < 1, negative time,
        ``max_tokens`` below the output length, a session with a missing or repeated turn);
        the message names ``file:line``.
    """
    cols = read_columns(path, format, columns, time_unit, seed=seed)
    order = np.argsort(cols.arrival_s, kind="stable")
    return cols.take(order).to_specs()
