"""Trace format detection (``format: auto``) and the check that a file looks like the format
stated for it, shared by :mod:`simulator.workload.readers` (which re-exports
:func:`detect_format`).

Detection: a ServeGen folder or ``chunk-N-trace.csv``; Parquet by extension or magic bytes
(read as Azure, Vidur or Mooncake when its columns are that format's); JSON Lines by
extension or a first line starting with ``{`` (Mooncake when the first record has its
fields); otherwise CSV, by its header.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from simulator.base.input_limits import bounded_lines, clip_text
from simulator.workload.config import REQUIRED_GENERIC_FIELDS
from simulator.workload.errors import TraceFormatMismatch, WorkloadError
from simulator.workload.parquet import parquet_format
from simulator.workload.schemas import AZURE_COLUMNS, MOONCAKE_FIELDS, VIDUR_COLUMNS, schema_format
from simulator.workload.servegen import is_servegen_path

__all__ = ["PARQUET_MAGIC", "detect_format"]

_JSON_EXTS = {".jsonl", ".json", ".ndjson"}
_CSV_EXTS = {".csv", ".txt"}


def _not_utf8(path: Path, shown: str, e: UnicodeDecodeError, what: str = "") -> str:
    """``file:line: [what]not UTF-8 text (...)`` for a decode error of a text read (the
    decoder reads ahead, so the line is found again by decoding the file line by line, in
    bytes)."""
    with open(path, "rb") as f:
        for no, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as le:
                return (f"{shown}:{no}: {what}not UTF-8 text (byte {raw[le.start]:#04x} at "
                        f"column {le.start + 1} of the line: {le.reason})")
    return f"{shown}: {what}not UTF-8 text ({e})"


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


def _first_nonblank_line(path: Path, shown: str) -> str:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            for text in bounded_lines(f, shown, error=WorkloadError):
                if text.strip():
                    return text.strip()
    except UnicodeDecodeError as e:  # the decoder reads ahead: a later line may be the one
        raise WorkloadError(_not_utf8(path, shown, e, "cannot read: ")) from e
    except OSError as e:
        raise WorkloadError(f"{shown}: cannot read ({e})") from e
    raise WorkloadError(f"{shown}: empty file")


#: what each stated format's file holds, for :func:`_check_stated_format`
_FORMAT_KIND = {"mooncake": "JSON Lines", "generic_jsonl": "JSON Lines", "azure": "CSV",
                "vidur": "CSV", "generic_csv": "CSV", "parquet": "Parquet"}


def _check_stated_format(p: Path, shown: str, fmt: str) -> None:
    """Refuse a file that is plainly not of the stated format ``fmt`` (JSON Lines stated for
    a CSV file, CSV for JSON Lines, text for Parquet or Parquet for text) before its reader
    reports the first line as a bad row. A file that cannot be told (empty, not UTF-8) is
    left to the reader.

    Raises
    ------
    TraceFormatMismatch
        Naming the file, the stated format and what the file looks like.
    """
    want = _FORMAT_KIND.get(fmt)
    if want is None:  # servegen: a folder or chunk files, checked by its reader
        return
    try:
        with open(p, "rb") as f:
            parquet = f.read(4) == PARQUET_MAGIC
        first = "" if parquet else _first_nonblank_line(p, shown)
    except (OSError, WorkloadError):
        return
    if parquet:  # a Parquet copy of azure / vidur / mooncake rows is read as Parquet
        if want == "Parquet" or fmt in ("azure", "vidur", "mooncake"):
            return
        looks = "it is a Parquet file"
    else:
        has = ("JSON Lines" if first.startswith(("{", "[")) else "CSV" if "," in first
               else "neither CSV nor JSON")
        if has == want or (want == "CSV" and has != "JSON Lines"):  # one column: its reader
            return
        looks = f"its first line {clip_text(repr(first), 60)} is {has}"
    raise TraceFormatMismatch(f"{shown}: does not look like the stated format {fmt!r} "
                              f"({want}): {looks}")


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
        or ``servegen`` (a folder of ``chunk-N-trace.csv`` files, or one such file). A
        Parquet file (``.parquet`` / ``.pq`` or the ``PAR1`` magic bytes) is ``azure``,
        ``vidur`` or ``mooncake`` when its columns are that format's (as a CSV header is
        recognised), else ``parquet`` (the generic columns).

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
        return parquet_format(p, shown, columns)
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
    fmt = schema_format(header, mooncake=False)
    if fmt is not None:
        return "generic_csv" if fmt == "generic" else fmt
    raise WorkloadError(
        f"{shown}: cannot detect the trace format from the header {header}; expected Azure "
        f"({','.join(AZURE_COLUMNS)}), Vidur ({','.join(VIDUR_COLUMNS)}), generic "
        f"({','.join(REQUIRED_GENERIC_FIELDS)}), Parquet (.parquet) or a ServeGen "
        f"chunk-N-trace.csv; set format and/or columns")
