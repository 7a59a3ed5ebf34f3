"""Parquet traces: read one record batch at a time, with the column types checked first, and
write (:func:`write_parquet_trace`).

Schema. A Parquet trace is read as the format its columns name, as a CSV header is
recognised: Azure (``TIMESTAMP``, ``ContextTokens``, ``GeneratedTokens``), Vidur
(``arrived_at``, ``num_prefill_tokens``, ``num_decode_tokens``), Mooncake (``timestamp`` in
ms, ``input_length``, ``output_length``, optional ``hash_ids``) or the generic fields (or a
``columns`` mapping) with ``prefix_hash_ids`` / ``prefix_block_tokens``. ServeGen data has
no Parquet form (its client files are rate windows, not requests).

Column types (checked on the schema, before any row is read; a type that does not fit is
an error naming the file and the column):

- times (arrival): integers, floating point or decimals in the format's unit
  (``time_unit``); a **timestamp** or **date** column (any unit or time zone: absolute
  instants) is re-based to its earliest row, exactly in its own unit; a **duration** column
  is an offset in its own unit. Times of day (``time32`` / ``time64``) are refused: they
  wrap at midnight.
- token counts, ``priority``, ``max_tokens``, ``n``, ``prefix_block_tokens``,
  ``session_id``, ``turn_index`` (or ``turn``): integers, floating point with integral
  values, or decimals.
- ``cancel_after_s``, ``think_time_s``: numbers in seconds, or a duration.
- labels (``tenant``, ``slice``): text, or integers (their decimal text); binary data is
  decoded as UTF-8 (bytes that are not UTF-8 are an error naming the row).
- prefix ids (``prefix_hash_ids``, ``hash_ids``): lists of integers (64-bit).
- any of them dictionary-encoded (categorical): read as its values' type. A column of the
  null type is "not given" throughout.

Booleans, lists or structs where a number or label belongs, timestamps outside the arrival
column and the like are refused. Row errors name the 1-based row (``file.parquet:17: ...``);
a null in a required column is "missing", in an optional one "not given".
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.workload.columns import MOONCAKE_BLOCK_TOKENS, TraceColumns
from simulator.workload.config import GENERIC_FIELDS
from simulator.workload.errors import WorkloadError
from simulator.workload.schemas import (
    _TIME_DIVISOR,
    AZURE_COLUMNS,
    MOONCAKE_FIELDS,
    VIDUR_COLUMNS,
    _azure_batch,
    _bad_ids,
    _finish_azure,
    _generic,
    _mooncake_batch,
    _vidur_batch,
    schema_format,
)
from simulator.workload.values import _Errors, _finish_clock, _int_column, _json_numbers

__all__ = ["parquet_format", "read_parquet", "write_parquet_trace"]

#: Units of Arrow timestamp / duration types per second.
_UNIT_DIVISOR = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
_SECONDS_PER_DAY = 86_400

#: What each role accepts, for messages.
_EXPECTED = {
    "time": "a time: numbers in the format's unit, a timestamp, a date or a duration",
    "int": "a number (integer, floating point or decimal)",
    "float": "a number of seconds (integer, floating point, decimal or a duration)",
    "label": "a label: text (string) or integers",
    "ids": "a list of integer prefix ids",
    "azure_ts": "a time: text YYYY-MM-DD HH:MM:SS[.f], a timestamp or a date",
}


@dataclass
class _Column:
    """How one Parquet column is read: ``convert`` (Arrow array -> Python values) and, for
    the arrival column, its unit (``divisor`` per second), whether it holds absolute
    instants (``absolute``: the type's name) and whether its epoch unit may be guessed."""

    convert: Callable
    divisor: int = 1
    absolute: str | None = None
    guess_unit: bool = True
    parts: Callable | None = None  # Azure TIMESTAMP typed: array -> (seconds, nanoseconds)
    binary: bool = False  # labels stored as bytes: decoded as UTF-8 row by row


def _pa():
    import pyarrow as pa

    return pa


def _is_text(t) -> bool:
    pa = _pa()
    return (pa.types.is_string(t) or pa.types.is_large_string(t)
            or getattr(pa.types, "is_string_view", lambda _: False)(t))


def _is_binary(t) -> bool:
    pa = _pa()
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t)
            or getattr(pa.types, "is_binary_view", lambda _: False)(t))


def _is_number(t) -> bool:
    pa = _pa()
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _decoded(arr):
    """A dictionary-encoded (categorical) array as its values."""
    pa = _pa()
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _to_list(arr) -> list:
    pa = _pa()
    arr = _decoded(arr)
    if pa.types.is_floating(arr.type) and arr.type.bit_width < 64:  # float16 / float32
        arr = arr.cast(pa.float64())
    return arr.to_pylist()


def _ints(arr) -> list:
    """Integer values of a timestamp / date / duration array in its own unit (date32: days
    as seconds)."""
    pa = _pa()
    arr = _decoded(arr)
    if pa.types.is_date32(arr.type):
        return [None if v is None else v * _SECONDS_PER_DAY
                for v in arr.cast(pa.int32()).to_pylist()]
    return arr.cast(pa.int64()).to_pylist()


def _time_unit_of(t) -> tuple[int, str] | None:
    """``(divisor, kind)`` of a timestamp, date or duration type (None otherwise)."""
    pa = _pa()
    if pa.types.is_timestamp(t):
        return _UNIT_DIVISOR[t.unit], f"timestamp[{t.unit}]"
    if pa.types.is_date32(t):
        return 1, "date32"
    if pa.types.is_date64(t):
        return 1000, "date64"
    if pa.types.is_duration(t):
        return _UNIT_DIVISOR[t.unit], f"duration[{t.unit}]"
    return None


def _plan(t, name: str, role: str, shown: str, divisor: int) -> _Column:
    """How to read column ``name`` of Arrow type ``t`` in ``role`` (module docstring)."""
    pa = _pa()
    value_t = t.value_type if pa.types.is_dictionary(t) else t
    if pa.types.is_null(value_t):
        return _Column(lambda a: [None] * len(a), divisor)
    timed = _time_unit_of(value_t)
    if role == "time":
        if _is_number(value_t) or _is_text(value_t):  # text: a row error names the row
            return _Column(_to_list, divisor)
        if timed:
            div, kind = timed
            absolute = None if kind.startswith("duration") else f"Parquet {kind}"
            return _Column(_ints, div, absolute=absolute, guess_unit=False)
    elif role == "azure_ts":
        if _is_text(value_t):
            return _Column(_to_list)
        if timed and not timed[1].startswith("duration"):
            return _Column(_to_list, parts=lambda a, d=timed[0]: _split_seconds(_ints(a), d))
    elif role == "int" and (_is_number(value_t) or _is_text(value_t)):
        return _Column(_to_list)
    elif role == "float":
        if _is_number(value_t) or _is_text(value_t):
            return _Column(_to_list)
        if timed and timed[1].startswith("duration"):
            return _Column(lambda a, d=timed[0]: [None if v is None else v / d
                                                  for v in _ints(a)])
    elif role == "label":
        if _is_text(value_t) or pa.types.is_integer(value_t):
            return _Column(_to_list)
        if _is_binary(value_t):
            return _Column(_to_list, binary=True)  # decoded per row by _labels
    elif role == "ids" and (pa.types.is_list(value_t) or pa.types.is_large_list(value_t)
                            or pa.types.is_fixed_size_list(value_t)) \
            and (pa.types.is_integer(value_t.value_type) or pa.types.is_null(value_t.value_type)):
        return _Column(_to_list)
    raise WorkloadError(f"{shown}: column {name!r} has the Parquet (Arrow) type {t}, which is "
                        f"not {_EXPECTED[role]}")


def _split_seconds(vals: list, divisor: int) -> tuple[list, list]:
    """Whole seconds and nanoseconds within the second of integer instants in ``divisor``
    units per second (``None`` kept)."""
    sec = [None if v is None else v // divisor for v in vals]
    ns = [None if v is None else (v % divisor) * (1_000_000_000 // divisor) for v in vals]
    return sec, ns


def _roles(fmt: str, columns: dict[str, str] | None) -> dict[str, str]:
    """Column name -> role for a schema (only the columns that format reads)."""
    optional = {"tenant": "label", "slice": "label", "priority": "int", "max_tokens": "int",
                "n": "int", "cancel_after_s": "float"}
    if fmt == "azure":
        fixed = {AZURE_COLUMNS[0]: "azure_ts", AZURE_COLUMNS[1]: "int", AZURE_COLUMNS[2]: "int"}
    elif fmt == "vidur":
        fixed = {VIDUR_COLUMNS[0]: "time", VIDUR_COLUMNS[1]: "int", VIDUR_COLUMNS[2]: "int"}
    elif fmt == "mooncake":
        fixed = {MOONCAKE_FIELDS[0]: "time", MOONCAKE_FIELDS[1]: "int",
                 MOONCAKE_FIELDS[2]: "int", "hash_ids": "ids"}
    else:
        mapped = dict(columns or {})
        by_field = {"arrival_time_s": "time", "num_prompt_tokens": "int",
                    "num_output_tokens": "int", "session_id": "int", "turn_index": "int",
                    "think_time_s": "float", **optional}
        fixed = {mapped.get(f, f): by_field[f] for f in GENERIC_FIELDS}
        if "turn_index" not in mapped:  # the short name a session trace may use
            fixed.setdefault("turn", "int")
        fixed.update({"prefix_hash_ids": "ids", "prefix_block_tokens": "int"})
        return fixed
    return {**fixed, **optional}


def _one_line(e: BaseException) -> str:
    """An Arrow error's text on one line: its lines joined with ``; `` (Arrow's messages span
    several lines, and the command line shows only the first of a message)."""
    lines = [t.strip() for t in str(e).splitlines() if t.strip()]
    return "; ".join(lines) or type(e).__name__


def parquet_format(path: Path, shown: str, columns: dict[str, str] | None = None) -> str:
    """``azure``, ``vidur`` or ``mooncake`` when a Parquet file's columns are that format's
    (read from its footer only), else ``parquet`` (generic columns).

    Raises
    ------
    WorkloadError
        If the file is not readable Parquet.
    """
    import pyarrow.parquet as pq
    pa = _pa()
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowException, OSError) as e:
        raise WorkloadError(f"{shown}: not a readable Parquet file ({_one_line(e)})") from None
    fmt = schema_format(names, columns)
    return "parquet" if fmt in (None, "generic") else fmt


def read_parquet(path: Path, shown: str, fmt: str, columns, time_unit: str, *,
                 batch_rows: int = 65_536) -> TraceColumns:
    """Read a Parquet trace one record batch (``batch_rows`` rows) at a time.

    Parameters
    ----------
    path : pathlib.Path
    shown : str
        The file as named in messages.
    fmt : str
        ``parquet`` (the schema decides: module docstring), ``azure``, ``vidur`` or
        ``mooncake``.
    columns : dict or None
        Generic column mapping.
    time_unit : ``"s"`` or ``"ms"``
        Unit of a numeric generic arrival column.
    batch_rows : int
        Rows per record batch (:data:`simulator.workload.readers.READ_BATCH_ROWS`).

    Returns
    -------
    TraceColumns

    Raises
    ------
    WorkloadError
        Not readable Parquet, a duplicate or missing column, a column of a type that does
        not fit its field (naming the column), or a bad row (naming ``file:row``).
    """
    import pyarrow.parquet as pq
    pa = _pa()
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        names = list(schema.names)
        dup = sorted({c for c in names if names.count(c) > 1})
        if dup:
            raise WorkloadError(f"{shown}: duplicate column(s) {dup}")
        schema_fmt = schema_format(names, columns) if fmt == "parquet" else fmt
        schema_fmt = "generic" if schema_fmt in (None, "parquet") else schema_fmt
        required = {"azure": AZURE_COLUMNS, "vidur": VIDUR_COLUMNS,
                    "mooncake": MOONCAKE_FIELDS}.get(schema_fmt, ())
        missing = [c for c in required if c not in names]
        if missing:
            raise WorkloadError(f"{shown}: format {schema_fmt!r} needs column(s) "
                                f"{', '.join(map(repr, missing))}; the file has "
                                f"{', '.join(map(repr, names))}")
        divisor = _TIME_DIVISOR[time_unit] if schema_fmt == "generic" else (
            1000 if schema_fmt == "mooncake" else 1)
        roles = _roles(schema_fmt, columns)
        if "turn_index" in names or (columns or {}).get("session_id",
                                                         "session_id") not in names:
            roles.pop("turn", None)  # 'turn' is read only in turn_index's place
        plan = {c: _plan(schema.field(c).type, c, role, shown, divisor)
                for c, role in roles.items() if c in names}
        parts, offset = [], 0
        for batch in pf.iter_batches(batch_size=batch_rows):
            parts.append(_batch(schema_fmt, batch, names, plan, offset, shown, columns,
                                time_unit))
            offset += batch.num_rows
        if not parts:  # no rows: validate the columns all the same
            empty = pa.RecordBatch.from_pylist([], schema=schema)
            parts.append(_batch(schema_fmt, empty, names, plan, 0, shown, columns, time_unit))
    except (pa.ArrowException, OSError) as e:
        raise WorkloadError(f"{shown}: not a readable Parquet file ({_one_line(e)})") from None
    if schema_fmt == "azure":
        return _finish_azure(parts)
    key = {"vidur": VIDUR_COLUMNS[0], "mooncake": MOONCAKE_FIELDS[0]}.get(
        schema_fmt, (columns or {}).get("arrival_time_s", "arrival_time_s"))
    cols = TraceColumns.concat(parts, consume=True)
    t = plan.get(key)
    if t is None:
        return _finish_clock(cols, divisor, key)
    return _finish_clock(cols, t.divisor, key, guess_unit=t.guess_unit, absolute=t.absolute)


def _batch(fmt: str, batch, names: list[str], plan: dict[str, _Column], offset: int,
           shown: str, columns, time_unit: str):
    """Validate and convert one record batch whose first row is row ``offset + 1``."""
    cache: dict[str, list] = {}
    n = batch.num_rows
    lines = np.arange(offset + 1, offset + n + 1, dtype=np.int64)

    def get(c: str) -> list:
        if c not in cache:
            col = batch.column(c)
            cache[c] = plan[c].convert(col) if c in plan else col.to_pylist()
            if c in plan and plan[c].binary:
                cache[c] = _labels(cache[c], lines, c, shown)
        return cache[c]

    have = names.__contains__
    if fmt == "azure":
        ts = plan[AZURE_COLUMNS[0]]
        parts = None
        if ts.parts is not None:
            sec, ns = ts.parts(batch.column(AZURE_COLUMNS[0]))
            missing = [i for i, v in enumerate(sec) if v is None]
            if missing:
                raise WorkloadError(f"{shown}:{int(lines[missing[0]])}: "
                                    f"{AZURE_COLUMNS[0]} is missing")
            parts = (np.asarray(sec, dtype=np.int64), np.asarray(ns, dtype=np.int64))
        return _azure_batch(get, have, lines, shown, typed=True, ts_parts=parts)
    if fmt == "vidur":
        return _vidur_batch(get, have, lines, shown, typed=True,
                            absolute=plan[VIDUR_COLUMNS[0]].absolute is not None)
    if fmt == "mooncake":
        return _mooncake_batch(get, have, lines, shown,
                               absolute=plan[MOONCAKE_FIELDS[0]].absolute is not None)
    a_src = (columns or {}).get("arrival_time_s", "arrival_time_s")
    absolute = a_src in plan and plan[a_src].absolute is not None
    cols = _generic(shown, "parquet", get, have, names, n or 1, lines, columns, time_unit,
                    json_numbers=True, absolute=absolute)
    if "prefix_hash_ids" in names:
        _prefix_columns(cols, get, names, lines, shown)
    return cols


def _labels(vals: list, lines: np.ndarray, name: str, shown: str) -> list:
    """Binary labels decoded as UTF-8; bytes that are not UTF-8 are an error naming the row
    (never the label ``b'...'``)."""
    out = []
    for i, v in enumerate(vals):
        if isinstance(v, bytes):
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError as e:
                raise WorkloadError(f"{shown}:{int(lines[i])}: {name} {v[:40]!r} is not UTF-8 "
                                    f"text (byte {v[e.start]:#04x} at {e.start}: "
                                    f"{e.reason})") from None
        out.append(v)
    return out


def _prefix_columns(cols: TraceColumns, get, names: list[str], lines: np.ndarray,
                    shown: str) -> None:
    """``prefix_hash_ids`` (lists of 64-bit integers) with their ``prefix_block_tokens``: a
    row with ids must state its block tokens (a null there is an error, not 512)."""
    errors = _Errors(shown)
    if "prefix_block_tokens" not in names:
        raise WorkloadError(f"{shown}: column 'prefix_hash_ids' needs 'prefix_block_tokens' "
                            "(tokens per prefix id)")
    ids: list[tuple[int, ...] | None] = []
    for i, v in enumerate(get("prefix_hash_ids")):
        if v is None or v == []:
            ids.append(None)
            continue
        bad = _bad_ids(v)
        if bad:
            errors.add(int(lines[i]), f"prefix_hash_ids {bad}")
            break
        ids.append(tuple(v))
    raw_bt = get("prefix_block_tokens")
    _json_numbers(raw_bt, lines, "prefix_block_tokens", errors)
    bt = _int_column(raw_bt, lines, "prefix_block_tokens", errors, min_value=1, optional=True)
    for i, h in enumerate(ids):
        if h is not None and bt[i] <= 0:
            errors.add(int(lines[i]), "prefix_block_tokens is missing for a row with "
                                      "prefix_hash_ids (tokens per prefix id; no default)")
            break
    errors.raise_if_any()
    cols.prefix_hash_ids = ids
    # rows without ids: the value is unused; Mooncake's 512 where none is given
    cols.prefix_block_tokens = [int(b) if b > 0 else MOONCAKE_BLOCK_TOKENS
                                for b in bt.tolist()]


def write_parquet_trace(cols: TraceColumns, path: str | os.PathLike, *,
                        metadata: dict[str, str] | None = None) -> Path:
    """Write a trace as a Parquet file that ``format: parquet`` reads back identically.

    Columns: ``arrival_time_s`` (float64, seconds on the trace's clock),
    ``num_prompt_tokens``, ``num_output_tokens`` (int64), and those the trace has:
    ``tenant``, ``slice`` (string), ``priority`` (int64), ``cancel_after_s`` (float64, null
    where not given), ``max_tokens`` (int64, null where not given), ``prefix_hash_ids``
    (list of int64, null where none) with ``prefix_block_tokens`` (int64), ``session_id``,
    ``turn_index`` (int64) and ``think_time_s`` (float64; null for requests alone and where
    not given). Rows are in arrival
    order (stable: ties keep file order), as every reader returns them. The file's metadata
    records the source file and format (``servesim.source``, ``servesim.format``), the
    origin of a re-based clock (``servesim.time_origin``, when the source held timestamps)
    plus ``metadata``.

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
    if c.session_id is not None:
        data["session_id"] = pa.array(c.session_id, type=pa.int64(), mask=c.session_id < 0)
        data["turn_index"] = pa.array(c.turn_index, type=pa.int64(), mask=c.turn_index < 0)
        data["think_time_s"] = pa.array(c.think_time_s, type=pa.float64(),
                                        mask=np.isnan(c.think_time_s))
    if c.prefix_hash_ids is not None:
        data["prefix_hash_ids"] = pa.array([list(h) if h else None for h in c.prefix_hash_ids],
                                           type=pa.list_(pa.int64()))
        bt = c.prefix_block_tokens
        data["prefix_block_tokens"] = pa.array(bt if isinstance(bt, list) else [bt] * len(c),
                                               type=pa.int64())
    meta = {"servesim.source": str(cols.path), "servesim.format": str(cols.format)}
    if cols.time_origin:  # the source's timestamps were re-based: where its clock's 0 is
        meta["servesim.time_origin"] = cols.time_origin
    meta.update({str(k): str(v) for k, v in (metadata or {}).items()})
    table = pa.table(data).replace_schema_metadata(meta)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out)
    except OSError as e:
        raise WorkloadError(f"{out}: cannot write ({e.strerror or e})") from None
    return out
