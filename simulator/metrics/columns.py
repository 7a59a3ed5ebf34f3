"""A request or step table's columns as numpy arrays, read once and without one Python object
per row: numbers as float arrays (:func:`numeric`), labels (status, slice, tenant, reject
reason) as integer codes into their distinct names (:class:`Labels`). A missing column reads
as its default everywhere.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = ["Labels", "column_chunks", "finite_column", "finite_or", "labels", "nansum",
           "numeric"]


def numeric(df: pd.DataFrame, col: str, default: float = np.nan, *,
            copy: bool = False) -> np.ndarray:
    """Column ``col`` as a float array (``default`` everywhere when the column is missing);
    ``copy``: never a view of the table's own data (the caller may write into it)."""
    import pandas as pd
    if col in df.columns:
        if hasattr(df, "float_column"):  # a StepTable: numeric, cast without a whole copy
            return df.float_column(col, copy=copy)
        return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, copy=copy)
    return np.full(len(df), default, dtype=float)


def column_chunks(table, names: Sequence[str],
                  rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Consecutive row slices of the columns ``names`` (at least one) of a
    :class:`~simulator.metrics.step_table.StepTable`, each ``{column: array}``, ``rows`` rows
    at a time (default the table's :data:`~simulator.metrics.step_table.WRITE_ROWS`): read a
    slice at a time from a spooled table (:meth:`~simulator.metrics.step_table.StepTable.
    column_slices`), no DataFrame built for a slice."""
    for parts in zip(*(table.column_slices(c, rows) for c in names)):
        yield {c: v for c, (_, _, v) in zip(names, parts)}


def finite_or(x: np.ndarray, default: float = 0.0) -> np.ndarray:
    """``numpy.nan_to_num(x, copy=False, nan=default)``: ``x`` itself, NaN replaced by
    ``default`` and infinities by the largest finite floats, in place. A column with no
    such value (the usual case) costs one pass instead of numpy's three with their three
    masks (a 20-million-step column: one 20 MB mask instead of three)."""
    if np.isfinite(x).all():
        return x
    return np.nan_to_num(x, copy=False, nan=default)


def finite_column(df: pd.DataFrame, col: str, default: float = 0.0) -> np.ndarray:
    """Column ``col`` as a fresh float64 array, NaN read as ``default`` and infinities as the
    largest finite floats (:func:`finite_or` of :func:`numeric`); ``default`` everywhere when
    the column is missing. A spooled step table's int column is cast a slice at a time: one
    column-sized array, not three."""
    if col in df.columns:
        return finite_or(numeric(df, col, copy=True), default)
    return np.full(len(df), default, dtype=float)


def nansum(x: np.ndarray) -> float:
    """``numpy.nansum(x)`` as a Python float, the same bits: ``numpy.sum`` of ``x`` itself
    when nothing is NaN (``nansum`` always sums a copy with NaN replaced by 0, which holds
    the same values in the same order)."""
    if not np.isnan(x).any():
        return float(np.sum(x))
    return float(np.nansum(x))


class Labels:
    """A label column (status, slice, tenant, reject reason) as integer codes into its
    distinct names: what ``df[col].fillna(default).astype(str)`` says, row by row, without
    one Python ``str`` per row (a million-row request table would make a million of them
    for every comparison). Missing column or null cell: ``default``.

    Attributes
    ----------
    codes : ndarray of intp, shape (n,)
        Index into ``names`` per row.
    names : list of str
        Distinct names (first occurrence order; equal strings merged).
    """

    def __init__(self, df: pd.DataFrame, col: str, default: str = ""):
        import pandas as pd

        n = len(df)
        if col not in df.columns:
            self.codes = np.zeros(n, dtype=np.intp)
            self.names = [default]
            return
        codes, uniques = pd.factorize(df[col], use_na_sentinel=True)
        index: dict[str, int] = {}
        remap = [index.setdefault(str(u), len(index)) for u in uniques]
        remap.append(index.setdefault(default, len(index)))  # code -1 (null): the default
        self.codes = np.asarray(remap, dtype=np.intp)[codes]
        self.names = list(index)

    def __eq__(self, name: object) -> np.ndarray:  # type: ignore[override]
        """Boolean mask of the rows labelled ``name``."""
        try:
            return self.codes == self.names.index(name)
        except ValueError:
            return np.zeros(self.codes.shape, dtype=bool)

    def __ne__(self, name: object) -> np.ndarray:  # type: ignore[override]
        return ~(self == name)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, names) -> np.ndarray:
        """Boolean mask of the rows labelled with any of ``names``."""
        want = [i for i, k in enumerate(self.names) if k in names]
        return np.isin(self.codes, want)

    def counts(self, mask: np.ndarray | None = None) -> dict[str, int]:
        """``{name: rows}`` over the rows of ``mask`` (all rows by default), names that
        occur only, sorted by name."""
        codes = self.codes if mask is None else self.codes[mask]
        c = np.bincount(codes, minlength=len(self.names))
        return {k: int(c[i]) for i, k in sorted(enumerate(self.names), key=lambda e: e[1])
                if c[i]}


def labels(df: pd.DataFrame, col: str, default: str = "") -> Labels:
    """Column ``col`` as :class:`Labels` (``default`` when missing or null)."""
    return Labels(df, col, default)
