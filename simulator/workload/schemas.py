"""The trace formats' columns, one batch at a time: what each reader does once a table (a CSV
batch, JSON records, a Parquet record batch) is in hand, whatever file it came from. Each
``*_batch`` function takes ``get(column) -> list of raw values`` and ``have(column) -> bool``,
validates, and returns :class:`~simulator.workload.columns.TraceColumns` with the arrival
column still in raw file units (finished by
:func:`simulator.workload.values._finish_clock`, or :func:`_finish_azure`).
"""
from __future__ import annotations

import numpy as np

from simulator.workload.columns import MOONCAKE_BLOCK_TOKENS, TraceColumns
from simulator.workload.config import REQUIRED_GENERIC_FIELDS
from simulator.workload.errors import WorkloadError
from simulator.workload.sessions import read_session_batch
from simulator.workload.values import (
    _azure_relative_s,
    _azure_timestamps,
    _check_max_tokens,
    _Errors,
    _float_column,
    _int_column,
    _json_labels,
    _json_numbers,
    _raw_times,
    _shown_value,
    _str_column,
)

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

VIDUR_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")

MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length")

OPTIONAL_FIELDS = ("tenant", "priority", "slice", "cancel_after_s", "max_tokens", "n")

_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1

#: File units per second of a generic trace's ``time_unit``.
_TIME_DIVISOR = {"s": 1, "ms": 1000}


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
            setattr(cols, fld, _str_column(vals, lines, src, errors))
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


def _azure_batch(get, have, lines: np.ndarray, shown: str, *, typed: bool = False,
                 ts_parts: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> tuple[TraceColumns, np.ndarray, np.ndarray]:
    """One batch of Azure rows: the columns (arrival still 0) and the ``TIMESTAMP`` as
    (whole seconds, nanoseconds) since the epoch; ``ts_parts`` when the timestamps come
    typed (a Parquet timestamp column); ``typed``: values are Parquet/JSON objects, not
    text."""
    errors = _Errors(shown)
    ts, ctx, gen = AZURE_COLUMNS
    if typed:
        _json_numbers(get(ctx), lines, ctx, errors)
        _json_numbers(get(gen), lines, gen, errors)
    sec, ns = ts_parts if ts_parts is not None else _azure_timestamps(get(ts), lines, ts, errors)
    prompt = _int_column(get(ctx), lines, ctx, errors, min_value=1)
    output = _int_column(get(gen), lines, gen, errors, min_value=1)
    cols = TraceColumns(shown, "azure", np.zeros(len(lines)), prompt, output, lines)
    return _finish_columns(cols, get, have, {}, errors, json_numbers=typed), sec, ns


def _finish_azure(parts: list[tuple[TraceColumns, np.ndarray, np.ndarray]]) -> TraceColumns:
    """Join Azure batches; arrival times are seconds after the earliest row."""
    cols = TraceColumns.concat([c for c, _, _ in parts], consume=True)
    sec = np.concatenate([s for _, s, _ in parts])
    ns = np.concatenate([n for _, _, n in parts])
    if len(sec):
        cols.arrival_s, i0 = _azure_relative_s(sec, ns)
        when = str(np.datetime64(int(sec[i0]), "s")).replace("T", " ")
        frac = f".{int(ns[i0]):09d}".rstrip("0") if ns[i0] else ""
        cols.time_origin = (f"{AZURE_COLUMNS[0]} {when}{frac} at {cols.path}:"
                            f"{int(cols.lines[i0])}")
    else:
        cols.arrival_s = np.zeros(0)
    return cols


def _vidur_batch(get, have, lines: np.ndarray, shown: str, *, typed: bool = False,
                 absolute: bool = False) -> TraceColumns:
    """One batch of Vidur rows (arrival in raw seconds, finished by :func:`_finish_clock`)."""
    errors = _Errors(shown)
    ta, pf, dc = VIDUR_COLUMNS
    if typed:
        for c in VIDUR_COLUMNS:
            _json_numbers(get(c), lines, c, errors)
    arrival, lo = _raw_times(get(ta), lines, ta, errors, 1, absolute=absolute)
    prompt = _int_column(get(pf), lines, pf, errors, min_value=1)
    output = _int_column(get(dc), lines, dc, errors, min_value=1)
    cols = TraceColumns(shown, "vidur", arrival, prompt, output, lines, arrival_lo=lo)
    return _finish_columns(cols, get, have, {}, errors, json_numbers=typed)


def _hash_ids(vals: list, lines: np.ndarray, errors: _Errors, prompt: np.ndarray,
              name: str = "hash_ids") -> list[tuple[int, ...] | None]:
    """Mooncake ``hash_ids``: a list of integers, one per 512-token block of the prompt, so
    ``len(hash_ids) == ceil(input_length / 512)`` (the Mooncake trace format; FAST'25 release
    README); a row without the field (or ``null``) has no shareable prefix. Ids are
    64-bit integers (a Parquet copy stores them as int64): one beyond is an error."""
    out: list[tuple[int, ...] | None] = []
    bt = MOONCAKE_BLOCK_TOKENS
    for i, v in enumerate(vals):
        if v is None:
            out.append(None)
            continue
        bad = _bad_ids(v)
        if bad:
            errors.add(int(lines[i]), f"{name} {bad}")
            return [None] * len(vals)
        need = -(-int(prompt[i]) // bt)
        if prompt[i] > 0 and len(v) != need:
            errors.add(int(lines[i]), f"{name} has {len(v)} entries but input_length "
                                      f"{int(prompt[i])} needs ceil({int(prompt[i])} / {bt}) "
                                      f"= {need} (one id per {bt}-token block)")
            return [None] * len(vals)
        out.append(tuple(v) if v else None)
    return out


def _bad_ids(v) -> str | None:
    """Why ``v`` is not a list of 64-bit integer prefix ids (``None`` when it is)."""
    if not isinstance(v, list) or not all(isinstance(h, int) and not isinstance(h, bool)
                                          for h in v):
        return f"{str(v)[:60]!r} is not a list of integers"
    for h in v:
        if not _INT64_MIN <= h <= _INT64_MAX:
            return (f"id {_shown_value(h)} is outside the 64-bit integer range "
                    "(-2**63 .. 2**63 - 1)")
    return None


def _mooncake_batch(get, have, lines: np.ndarray, shown: str, *,
                    absolute: bool = False) -> TraceColumns:
    """One batch of Mooncake records (JSON objects or Parquet rows: typed values); the
    timestamp stays in raw milliseconds until :func:`_finish_clock`."""
    errors = _Errors(shown)
    for c in MOONCAKE_FIELDS:
        _json_numbers(get(c), lines, c, errors)
    ts, lo = _raw_times(get("timestamp"), lines, "timestamp", errors, 1000, absolute=absolute)
    prompt = _int_column(get("input_length"), lines, "input_length", errors, min_value=1)
    output = _int_column(get("output_length"), lines, "output_length", errors, min_value=1)
    cols = TraceColumns(shown, "mooncake", ts, prompt, output, lines, arrival_lo=lo)
    if have("hash_ids"):
        cols.prefix_hash_ids = _hash_ids(get("hash_ids"), lines, errors, prompt)
        cols.prefix_block_tokens = MOONCAKE_BLOCK_TOKENS
    return _finish_columns(cols, get, have, {}, errors, json_numbers=True)


def _generic(shown: str, fmt: str, get, have, present_names: list[str], n_rows: int,
             lines: np.ndarray, columns: dict[str, str] | None, time_unit: str,
             json_numbers: bool = False, absolute: bool = False) -> TraceColumns:
    """One batch of a generic trace; the arrival column stays in raw file units (``time_unit``)
    until :func:`_finish_clock` (``absolute``: typed timestamps, always re-based)."""
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
    arrival, lo = _raw_times(get(a_src), lines, a_src, errors, _TIME_DIVISOR[time_unit],
                             absolute=absolute)
    prompt = _int_column(get(p_src), lines, p_src, errors, min_value=1)
    output = _int_column(get(o_src), lines, o_src, errors, min_value=1)
    cols = TraceColumns(shown, fmt, arrival, prompt, output, lines, arrival_lo=lo)
    read_session_batch(cols, get, have, names, errors, json_numbers=json_numbers)
    return _finish_columns(cols, get, have, names, errors, json_numbers=json_numbers)


def schema_format(names, columns: dict[str, str] | None = None, *,
                  mooncake: bool = True) -> str | None:
    """The trace format whose columns ``names`` (a header, a Parquet schema) hold, in one
    order for every reader: Azure, Vidur, Mooncake (unless ``mooncake`` is False: a CSV
    header, Mooncake being JSON Lines), generic; ``None`` for none. A ``columns`` mapping
    means a generic trace."""
    if columns is not None:
        return "generic"
    if all(c in names for c in AZURE_COLUMNS):
        return "azure"
    if all(c in names for c in VIDUR_COLUMNS):
        return "vidur"
    if mooncake and all(c in names for c in MOONCAKE_FIELDS):
        return "mooncake"
    if all(c in names for c in REQUIRED_GENERIC_FIELDS):
        return "generic"
    return None
