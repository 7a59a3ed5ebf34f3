"""Tables of every report: Markdown tables (``DataFrame.to_markdown``) and the CSV + Parquet
files of a table.

:func:`markdown_table` is the one way a report draws a table: cells arrive formatted (strings,
see :mod:`simulator.report.format`) and are written as a GitHub pipe table by pandas'
``to_markdown`` (the ``tabulate`` package) with number parsing disabled, so ``0.50`` stays
``0.50`` and ``1,234`` stays ``1,234``. Columns are padded to a common width, so the
Markdown source reads as a table too.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.report.escape import Md, md_text

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation


__all__ = ["ALIGNMENTS", "cell", "markdown_table", "write_table"]

#: Column alignments :func:`markdown_table` accepts.
ALIGNMENTS = ("left", "right", "center")


def cell(value: Any) -> Md:
    """A value as the text of a Markdown table cell: escaped as Markdown text
    (:func:`~simulator.report.escape.md_text`; a final ``]`` is followed by `` |``, so it
    stays; :class:`~simulator.report.escape.Md` is kept), then ``|`` escaped and line breaks
    as spaces."""
    return Md(str(md_text(value, final_bracket=False)).replace("|", "\\|").replace("\n", " "))


def markdown_table(header: Sequence[Any], rows: Sequence[Sequence[Any]],
                   align: Sequence[str] | str | None = None) -> str:
    """A GitHub-flavoured Markdown pipe table (no trailing newline).

    Parameters
    ----------
    header : sequence
        Column titles.
    rows : sequence of sequences
        Cells, already formatted (anything else is passed through ``str``); every row has
        as many cells as ``header``. Titles and cells are data (:func:`cell`: escaped as
        Markdown text) unless they are :class:`~simulator.report.escape.Md`.
    align : sequence of str, str or None
        Per column ``"left"``, ``"right"`` or ``"center"``; one string for every column;
        ``None``: the first column left, the others left too.

    Returns
    -------
    Md
        The table, one row per line.

    Raises
    ------
    ValueError
        A row whose length differs from the header's, or an unknown alignment.
    """
    import pandas as pd
    header = [cell(h) for h in header]
    n = len(header)
    body = []
    for i, r in enumerate(rows):
        r = list(r)
        if len(r) != n:
            raise ValueError(f"table row {i} has {len(r)} cells, the header {n}")
        body.append([cell(v) for v in r])
    if align is None or isinstance(align, str):
        align = [align or "left"] * n
    align = list(align)
    if len(align) != n or any(a not in ALIGNMENTS for a in align):
        raise ValueError(f"alignments {align!r}: need {n} of {', '.join(ALIGNMENTS)}")
    if not body:  # tabulate drops the alignments of an empty table
        marks = {"left": ":---", "right": "---:", "center": ":---:"}
        return Md("| " + " | ".join(header) + " |\n|" + "|".join(marks[a] for a in align)
                  + "|")
    df = pd.DataFrame([[str(c) for c in r] for r in body], columns=range(n), dtype=object)
    return Md(df.to_markdown(index=False, headers=[str(h) for h in header], tablefmt="pipe",
                             disable_numparse=True, colalign=align))


def _arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns mixing types become strings (Parquet needs one type per column)."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype != object:
            continue
        kinds = {type(v) for v in df[c] if v is not None and not (isinstance(v, float)
                                                                   and math.isnan(v))}
        if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
            df[c] = [None if v is None else (v if isinstance(v, str) else json.dumps(v))
                     for v in df[c]]
        elif kinds == {bool}:
            df[c] = df[c].astype("boolean")
    return df


def write_table(table: pd.DataFrame, outdir: str | Path, stem: str) -> dict[str, Path]:
    """Write ``stem.parquet`` and ``stem.csv`` (``%.9g`` floats) into ``outdir``.

    Object columns that mix types (or hold lists and dicts) are written as JSON strings, so
    the Parquet file has one type per column.

    Returns
    -------
    dict
        ``{"parquet": path, "csv": path}``.
    """
    outdir = Path(outdir)
    pq, csv = outdir / f"{stem}.parquet", outdir / f"{stem}.csv"
    safe = _arrow_safe(table)
    safe.to_parquet(pq, index=False)
    safe.to_csv(csv, index=False, float_format="%.9g")
    return {"parquet": pq, "csv": csv}
