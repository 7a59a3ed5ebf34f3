"""Validation and conversion of trace columns (lists of raw values -> numpy arrays), shared
by the trace readers (:mod:`simulator.workload.readers`, :mod:`simulator.workload.parquet`)
and the recorded-run readers (:mod:`simulator.observe`).

A column is validated as a whole with numpy; only when it fails is the first offending row
located, and :class:`_Errors` raises the error on the earliest line of a table as one
:class:`~simulator.workload.errors.WorkloadError` naming ``file:line``. Values are shown as
the file wrote them (an integer above 2**53 exactly, a long value cut at 40 characters).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from simulator.base.schema import MAX_TOKENS_REPRESENTABLE
from simulator.workload.clock import REBASE_FROM_S, exact_residuals, finish_arrivals
from simulator.workload.columns import TraceColumns
from simulator.workload.errors import WorkloadError

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
    except (ValueError, TypeError, OverflowError):
        return None


def _scalar_float(v) -> float | None:
    if _is_missing(v) or isinstance(v, bool):
        return None
    try:
        return float(np.asarray([v], dtype=np.float64)[0])
    except (ValueError, TypeError, OverflowError):
        return None


class OutOfRangeNumber(float):
    """A JSON number beyond the float range (``1e400``), read as ``±inf`` (what ``json``
    makes of it) that remembers how the file wrote it (``text``), so that a message says the
    number is out of range instead of showing ``inf``."""

    text: str

    def __new__(cls, text: str):
        obj = super().__new__(cls, text)
        obj.text = text
        return obj


def json_float(text: str) -> float:
    """``parse_float`` of the trace readers' JSON decoder: ``float(text)``, or an
    :class:`OutOfRangeNumber` when the number overflows the float range."""
    x = float(text)
    return OutOfRangeNumber(text) if math.isinf(x) else x


#: the spellings of an infinity a CSV cell may use on purpose (not an overflow)
_INF_WORDS = {"inf", "infinity"}


def _out_of_range_text(v) -> str | None:
    """``v`` as the file wrote it (a JSON number bare, a text cell quoted, cut at 40
    characters) when it is a finite number too large for a float (``1e400``, a 400-digit
    integer: both read as infinity), else None."""
    if isinstance(v, OutOfRangeNumber):
        return v.text if len(v.text) <= 40 else v.text[:37] + "..."
    if isinstance(v, str):
        t = v.strip()
        if t.lstrip("+-").lower() in _INF_WORDS:
            return None
        try:
            return _shown_value(t) if math.isinf(float(t)) else None
        except ValueError:
            return None
    return None


def _shown_value(v, limit: int = 40) -> str:
    """A raw value as the file gave it, for a message: text as written (stripped), an integer
    exactly (above 2**53 too), at most ``limit`` characters (a 5,000-digit number is cut)."""
    if isinstance(v, str):
        text = repr(v.strip())
    elif isinstance(v, int) and not isinstance(v, bool):
        try:
            text = str(v)
        except ValueError:  # beyond Python's int -> str digit limit
            text = f"<an integer of about {int(v.bit_length() * 0.30103)} digits>"
    else:
        text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _describe_bad_number(v, name: str, kind: str) -> str:
    if _is_missing(v):
        return f"{name} is missing"
    big = _out_of_range_text(v)
    if big is not None:
        limit = (f"an integer here is at most {MAX_TOKENS_REPRESENTABLE:,} in magnitude"
                 if kind == "an integer" else
                 "beyond the largest number a float holds, about 1.8e308")
        return f"{name} {big} is out of range ({limit})"
    return f"{name} {_shown_value(v)} is not {kind}"


def _json_numbers(vals: list, lines: np.ndarray, name: str, errors: _Errors) -> None:
    """JSON traces carry numbers as JSON numbers: a string (``"1200"``) or a boolean in a
    numeric field is an error, not converted. Missing values (absent or ``null``) pass; a
    Parquet decimal is a number."""
    for i, v in enumerate(vals):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
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
            # the value as written: float64 rounds integers above 2**53 (9007199254740993
            # would print as ...992)
            shown = vals[i].strip() if isinstance(vals[i], str) else _shown_value(vals[i])
            if len(shown) > 40:
                shown = shown[:37] + "..."
            if f > MAX_TOKENS_REPRESENTABLE:
                errors.add(int(lines[i]), f"{name} {shown} must be <= "
                                          f"{MAX_TOKENS_REPRESENTABLE:,} (2**31 - 1)")
            else:
                errors.add(int(lines[i]), f"{name} {shown} must be >= {lo}")
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
            errors.add(int(lines[i]), f"{name} {_shown_value(vals[i])} must be {rel}")
        else:
            errors.add(int(lines[i]), _describe_bad_number(vals[i], name, "a finite number"))
        return np.zeros(len(vals), dtype=np.float64)
    return arr


def _str_column(vals: list, lines: np.ndarray | None = None, name: str = "label",
                errors: _Errors | None = None) -> list[str]:
    """Labels (tenant, slice): one shared ``str`` object per distinct label of the batch, so
    a long trace's label lists cost a pointer a row, not a string a row. With ``errors``,
    each distinct label must be encodable as UTF-8 (a JSON ``"\\ud800"`` escape decodes to a
    lone surrogate that no output file can hold): the first that is not is an error naming
    its row, found before any simulation."""
    shared: dict[str, str] = {}
    get = shared.setdefault
    out = [get(x, x) for x in ("default" if _is_missing(v) else str(v).strip() for v in vals)]
    if errors is not None:
        for label in shared:
            try:
                label.encode("utf-8")
            except UnicodeEncodeError as e:
                i = out.index(label)
                bad = label[e.start:e.end].encode("utf-8", "backslashreplace").decode()
                errors.add(int(lines[i]), f"{name} {_shown_value(label)} is not valid Unicode "
                                          f"text ({bad}: {e.reason}); labels must be UTF-8")
                break
    return out


#: Nanoseconds in a second, and the largest span in whole seconds whose nanoseconds fit in
#: int64 (2**63 ns, ~292 years).
_NS = 1_000_000_000
_MAX_NS_SPAN_S = (2 ** 63 - 1) // _NS - 1


#: Whole years that datetime64[ns] holds (it spans 1677-09-21 .. 2262-04-11).
_NS_FIRST_YEAR, _NS_LAST_YEAR = "1678", "2261"


def _azure_timestamps(vals: list, lines: np.ndarray, name: str, errors: _Errors
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Whole seconds since the Unix epoch (int64) and nanoseconds within the second of
    ``YYYY-MM-DD HH:MM:SS[.f…]`` strings, exactly, for any year 0000-9999 (a
    ``datetime64[ns]`` holds only 1677-2262 and wraps silently beyond)."""
    match = _TIMESTAMP_RE.fullmatch
    zeros = np.zeros(len(vals), dtype=np.int64)
    for i, v in enumerate(vals):
        if not isinstance(v, str) or not match(v):
            if _is_missing(v):
                msg = f"{name} is missing"
            else:
                msg = f"{name} {_shown_value(v)} is not YYYY-MM-DD HH:MM:SS[.fffffff]"
            errors.add(int(lines[i]), msg)
            return zeros, zeros
    if not vals:
        return zeros, zeros
    try:
        if _NS_FIRST_YEAR <= min(vals)[:4] and max(vals)[:4] <= _NS_LAST_YEAR:
            # every year within datetime64[ns] (the strings sort by year): the fast parse
            ns = np.asarray(vals, dtype="datetime64[ns]").astype(np.int64)
            return ns // _NS, ns % _NS
        parts = np.char.partition(np.asarray(vals, dtype=str), ".")
        sec = parts[:, 0].astype("datetime64[s]").astype(np.int64)
    except ValueError:  # impossible dates such as 2023-13-45
        for i, v in enumerate(vals):
            try:
                np.datetime64(v.partition(".")[0], "s")
            except ValueError:
                errors.add(int(lines[i]), f"{name} {v!r} is not a valid date and time")
                break
        return zeros, zeros
    frac = parts[:, 2]
    ns = np.char.ljust(frac, 9, "0").astype(np.int64) if (np.char.str_len(frac) > 0).any() \
        else zeros
    return sec, ns


def _azure_relative_s(sec: np.ndarray, ns: np.ndarray) -> tuple[np.ndarray, int]:
    """Seconds after the earliest of ``(sec, ns)`` timestamps (its index second): exact
    integer nanoseconds, then one rounding to float seconds; a span beyond int64
    nanoseconds (~292 years) in float seconds (the clock check refuses it later)."""
    i0 = int(np.lexsort((ns, sec))[0])
    dsec = sec - sec[i0]
    if int(dsec.max()) <= _MAX_NS_SPAN_S:
        return (dsec * _NS + (ns - ns[i0])) / 1e9, i0
    return dsec.astype(np.float64) + (ns - ns[i0]) / 1e9, i0


def _raw_times(vals: list, lines: np.ndarray, name: str, errors: _Errors, divisor: int, *,
               absolute: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Arrival times as the file wrote them (file units, float64) and, where they may be
    re-based (:mod:`simulator.workload.clock`), the exact remainder of each beyond float64.
    ``absolute``: typed timestamps (any sign: a date before 1970), always re-based."""
    hi = _float_column(vals, lines, name, errors, positive=False, signed=absolute)
    lo = None
    if hi.size and (absolute or float(hi.min()) / divisor >= REBASE_FROM_S):
        lo = exact_residuals(vals, hi)
    return hi, lo


def _finish_clock(cols: TraceColumns, divisor: int, key: str, **kw) -> TraceColumns:
    """Turn a read trace's raw arrival column into seconds, re-based to its first arrival
    when it holds timestamps (:func:`simulator.workload.clock.finish_arrivals`)."""
    cols.arrival_s, cols.time_origin = finish_arrivals(
        cols.arrival_s, cols.arrival_lo, divisor, cols.lines, cols.path, key, **kw)
    cols.arrival_lo = None
    return cols


def _check_max_tokens(cols: TraceColumns, errors: _Errors) -> None:
    if cols.max_tokens is None:
        return
    bad = (cols.max_tokens > 0) & (cols.max_tokens < cols.output)
    if bad.any():
        i = int(np.argmax(bad))
        errors.add(int(cols.lines[i]), f"max_tokens {int(cols.max_tokens[i])} is below the "
                                       f"output length {int(cols.output[i])}")
