"""The run's step table, in memory for a small run and spooled to disk for a large one.

A run appends its per-step rows in packed chunks (:class:`~simulator.metrics.records.
RunRecorder`, :data:`~simulator.metrics.records.STEP_CHUNK_ROWS` rows a chunk). The first
chunks stay in memory; once a run has packed :data:`SPOOL_AFTER_CHUNKS` chunks every chunk is
appended to one raw file per column in a spool folder instead (native-endian float64, and
int64 columns as int32 while every value fits: :data:`NARROW_INT`; no header, written in
batches by a thread of their own: :mod:`~simulator.metrics.spool_appends`), so the loop holds
a few chunks of steps at most. At the end the spool takes the
table's canonical order, ``(replica_id, step_index)``: the permutation is computed from those
two columns (:func:`key_order`) and kept (4 bytes a row), and every read gathers its rows in
that order from the column files as appended (memory-mapped); when the rows came in long runs
of consecutive steps (each replica's rows together and in step order, thousands a chunk:
:class:`~simulator.engine.step_rows.DecodeRunRows`), the order is kept as those pieces instead,
found from the keys without a permutation (:func:`~simulator.metrics.step_order.key_pieces`,
as the chunks are appended: :class:`~simulator.metrics.step_order.KeyRuns`), and a read copies
one slice per piece. The resulting
:class:`StepTable` reads a column back whole, exactly as it was recorded, or writes the table
to Parquet / CSV in row slices, without the spool ever being rewritten.

Why raw columns and not a Parquet spool: the rows arrive in completion order, interleaved
over replicas (and a fast-forwarded decode run lands after steps of other replicas that
ended earlier), so the spool must be permuted before anything is written; a column file
is gathered in any order through a memory map, and a summary reads one column without
decoding pages. Every statistic read from a :class:`StepTable` is computed over the same
array, in the same order, as over the DataFrame it replaces, so the summary is
bit-identical.

:class:`StepTable` answers the narrow part of the DataFrame interface the readers of the
step table use (``len``, ``columns``, ``name in table``, ``table[name]`` as a Series,
``table.loc[mask]``, ``to_pandas()``, ``shape``, ``head(n)``), so small-run code keeps
working on either; iterating gives row chunks as DataFrames (not column names), and a closed
table raises :class:`ClosedTableError` when read.
"""
from __future__ import annotations

import os
import tempfile
import weakref
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulator.metrics.column_buffers import empty
from simulator.metrics.spool_appends import SpoolAppends, remove_spool
from simulator.metrics.step_order import KeyRuns, key_order, key_pieces, pieces_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Chunks kept in memory before the step table spools to disk: a run of up to this many
#: chunks (65,536 rows each, 8 MiB packed: 64 MiB in all) never touches the disk. Eight
#: keep an hour of one busy replica in memory (the 8B/H100 Azure hour: 350,000 steps), where
#: the spool's writes and gathered reads cost 0.05 s of its 2.5 s.
SPOOL_AFTER_CHUNKS = 8

#: Rows per Parquet row group and per CSV write: pyarrow's default maximum row group length
#: (``pyarrow.parquet.write_table``), so a table written in slices has the bytes of the same
#: table written at once.
WRITE_ROWS = 1024 * 1024


class ClosedTableError(ValueError):
    """A closed step table (or spool) was read: its files are gone (like reading a closed
    file, a ``ValueError``)."""


def _dtype(name: str, float_columns: frozenset) -> np.dtype:
    return np.dtype(np.float64 if name in float_columns else np.int64)


#: How a spool stores an int64 column while every value fits: half the bytes to write and to
#: gather back (a million-request run spools 20 million steps; its int64 columns were
#: 2.1 GB of page-cache writes, 9% of the run's time in ``perf``). Read back as int64.
NARROW_INT = np.dtype(np.int32)
_NARROW_MIN, _NARROW_MAX = np.iinfo(NARROW_INT).min, np.iinfo(NARROW_INT).max


class ColumnSpool:
    """Append-only raw column files in a temporary folder (removed with the object).

    Parameters
    ----------
    columns : list of str
        Column names, in table order.
    float_columns : frozenset of str
        Float64 columns (the others int64: on disk as :data:`NARROW_INT` while every value
        appended fits, the file widened to int64 for good at the first that does not; read
        back as int64 either way).
    folder : Path, optional
        Parent of the spool folder (default: the system temporary folder, ``TMPDIR``).
    keys : (str, str), optional
        The order :meth:`sort_by` will be asked for (``(primary, secondary)``): its pieces
        are then found as the chunks are appended (:class:`KeyRuns`), and the sort reads no
        key column back when they give the order.
    """

    def __init__(self, columns: list[str], float_columns: frozenset,
                 folder: Path | None = None, keys: tuple[str, str] | None = None):
        self.columns = list(columns)
        if keys is not None and not set(keys) <= set(self.columns):
            raise ValueError(f"spool keys {keys} are not among its columns {self.columns}")
        self._keys = keys
        #: the keys of :meth:`sort_by` once called
        self._sorted_by: tuple[str, str] | None = None
        self._runs: KeyRuns | None = None if keys is None else KeyRuns()
        self.float_columns = float_columns
        self.folder = Path(tempfile.mkdtemp(prefix="servesim-steps-", dir=folder))
        #: the appends, written on a thread of their own (every read waits for them first)
        self._appends = SpoolAppends()
        self._finalizer = weakref.finalize(self, remove_spool, str(self.folder), self._appends,
                                           os.getpid())
        #: per column, its file's path (a decode-run chunk of a few thousand rows is appended
        #: at a time: ``pathlib`` and a buffered file object for each cost more than the write)
        self._paths = {c: str(self.folder / f"{c}.bin") for c in self.columns}
        self.num_rows = 0
        #: the rows' canonical order (:meth:`sort_by`; None: as appended or in pieces)
        self._order: np.ndarray | None = None
        #: ... or that order as pieces of consecutive rows (:func:`pieces_of`)
        self._pieces: tuple[list[int], list[int]] | None = None
        #: each column's dtype on disk (set by the first append)
        self._stored: dict[str, np.dtype] = {}

    def path(self, name: str) -> Path:
        """Column ``name``'s file, every row appended so far written to it."""
        self._settle()
        return self.folder / f"{name}.bin"

    def _settle(self) -> None:
        """Wait for the appends in flight (:class:`~simulator.metrics.spool_appends.
        SpoolAppends`): every read of the files does."""
        try:
            self._appends.wait()
        except OSError as e:
            raise self._write_error(e) from None

    def _write_error(self, e: OSError) -> OSError:
        """A failed write, saying where the spool lives and how to move it (e.g. a full
        disk)."""
        return OSError(f"cannot write the run's step spool in {self.folder.parent} "
                       f"({e.strerror or e}); point TMPDIR at a folder with more free space")

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` removed the folder."""
        return not self._finalizer.alive

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedTableError(f"the step table was closed (its spool {self.folder} is "
                                   "removed); read it before StepTable.close()")

    def append(self, chunk: dict[str, np.ndarray]) -> None:
        """Append one packed chunk (every column, equal lengths, the spool's dtypes). The
        arrays are written to the files later, on the appends' thread: they must not be
        changed afterwards (the recorder hands over arrays it drops).

        Raises
        ------
        OSError
            A write of earlier rows failed (e.g. a full disk; this or the next read says
            where the spool lives).
        """
        self._check_open()
        if self._sorted_by is not None:
            raise ValueError("a sorted step spool takes no more rows")
        missing = [c for c in self.columns if c not in chunk]
        if missing:  # before any file is written
            raise KeyError(f"a step chunk lacks column(s) {', '.join(missing)}")
        n = len(chunk[self.columns[0]])
        for c in self.columns:
            values = np.asarray(chunk[c])
            data = np.ascontiguousarray(values, dtype=self._storage(c, values))
            try:
                self._appends.add(self._paths[c], data)
            except OSError as e:  # an earlier batch's write failed (e.g. a full disk)
                raise self._write_error(e) from None
        self.num_rows += n
        if self._runs is not None and self._keys is not None:
            self._runs.add(chunk[self._keys[0]], chunk[self._keys[1]])

    def _storage(self, name: str, values: np.ndarray) -> np.dtype:
        """The dtype ``values`` are appended as to column ``name``'s file: float64, int64, or
        :data:`NARROW_INT` while every value so far fits it (a file written narrow is rewritten
        as int64 when ``values`` do not fit)."""
        full = _dtype(name, self.float_columns)
        stored = self._stored.get(name)
        if full.kind == "f" or stored == full:
            self._stored[name] = full
            return full
        if not values.size or (values.min() >= _NARROW_MIN and values.max() <= _NARROW_MAX):
            self._stored[name] = NARROW_INT
            return NARROW_INT
        if stored is not None:  # widen what was written narrow (after the writes in flight)
            path = self.path(name)
            try:
                np.fromfile(path, dtype=stored).astype(full).tofile(path)
            except OSError as e:  # e.g. a full disk: said as an append's failure is
                raise self._write_error(e) from None
        self._stored[name] = full
        return full

    def _stored_dtype(self, name: str) -> np.dtype:
        """Column ``name``'s dtype on disk (its full dtype before the first append)."""
        return self._stored.get(name, _dtype(name, self.float_columns))

    def _bounds(self, start: int, stop: int | None) -> int:
        """The end of rows ``start:stop`` (at most :attr:`num_rows`), after checking that the
        spool is open and ``start`` is not negative."""
        self._check_open()
        if start < 0:
            raise ValueError(f"rows {start}:{stop} of a step spool: start must be >= 0")
        self._settle()
        return self.num_rows if stop is None else min(stop, self.num_rows)

    def _raw(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows ``start:stop`` of one column in its dtype on disk (a fresh array)."""
        stop = self._bounds(start, stop)
        dt = self._stored_dtype(name)
        if stop <= start:
            return np.zeros(0, dtype=dt)
        if self._pieces is not None:
            return self._copy_pieces(name, dt, dt, start, stop)
        order = self._order
        out = empty(stop - start, dt)  # (a pooled buffer in a summary: column_buffers)
        if order is None:
            with open(self._paths[name], "rb") as f:
                f.seek(start * dt.itemsize)
                if f.readinto(memoryview(out).cast("B")) != out.nbytes:
                    raise OSError(f"the step spool file {f.name} is shorter than its "
                                  f"{self.num_rows} rows (changed under the spool)")
            return out
        col = np.memmap(self._paths[name], dtype=dt, mode="r", shape=(self.num_rows,))
        try:  # (indices in range: a permutation of the rows; "clip" writes ``out`` directly)
            return np.take(col, order[start:stop], out=out, mode="clip")
        finally:
            del col   # unmapped now

    def _copy_pieces(self, name: str, stored: np.dtype, dtype: np.dtype, start: int,
                     stop: int) -> np.ndarray:
        """Rows ``start:stop`` (``start < stop <= num_rows``) of a spool sorted in pieces, as
        ``dtype``: one slice copy (and cast) per piece from the memory-mapped file."""
        assert self._pieces is not None
        starts, sources = self._pieces
        out = empty(stop - start, dtype)
        col = np.memmap(self._paths[name], dtype=stored, mode="r",
                        shape=(self.num_rows,)).view(np.ndarray)
        p = bisect_right(starts, start) - 1
        a = start
        while a < stop:
            b = min(starts[p + 1], stop)
            src = sources[p] + a - starts[p]
            out[a - start:b - start] = col[src:src + b - a]
            a = b
            p += 1
        del col  # unmapped now
        return out

    def read(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows ``start:stop`` of one column (a fresh array: float64 or int64; ``stop`` past
        :attr:`num_rows` reads to the end).

        Raises
        ------
        ClosedTableError
            If the spool was closed.
        ValueError
            If ``start`` is negative.
        """
        full = _dtype(name, self.float_columns)
        if self._stored_dtype(name) == full:
            return self._raw(name, start, stop)
        # a narrow column: widened a slice at a time into the one int64 array (a whole narrow
        # copy then its cast made two column-sized arrays: each new page of them zeroed by
        # the kernel, the largest part of a long run's summary time)
        return self._cast(name, full, start, stop)

    def read_float(self, name: str) -> np.ndarray:
        """One whole column as float64 (an int64 column cast exactly below 2**53), read and
        cast :data:`WRITE_ROWS` rows at a time: no int64 copy of the column exists."""
        if _dtype(name, self.float_columns) == np.float64:
            return self.read(name)
        return self._cast(name, np.dtype(np.float64), 0, None)

    def _cast(self, name: str, dtype: np.dtype, start: int, stop: int | None) -> np.ndarray:
        """Rows ``start:stop`` of one column as ``dtype``, read and cast into one fresh array
        a piece at a time (a spool sorted in pieces) or :data:`WRITE_ROWS` rows at a time."""
        stop = self._bounds(start, stop)
        if self._pieces is not None and stop > start:  # cast on the pieces' copies
            return self._copy_pieces(name, self._stored_dtype(name), dtype, start, stop)
        out = empty(max(0, stop - start), dtype)
        for a in range(start, stop, WRITE_ROWS):
            b = min(a + WRITE_ROWS, stop)
            out[a - start:b - start] = self._raw(name, a, b)
        return out

    def sort_by(self, primary: str, secondary: str) -> None:
        """Put the rows in ``(primary, secondary)`` order (stable): from now on every read
        gathers its rows in that order from the files as appended (a permutation held in
        memory, 4 bytes a row; the files are not rewritten: the rewrite was 15 s of a profiled
        35 s summary of a million-request run, 2.6 GB of spool, on this project's machine),
        or copies them a piece at a time when the rows came in long runs of consecutive keys
        (:func:`~simulator.metrics.step_order.key_pieces`: no permutation is computed).
        Sorting again by the same keys does nothing.

        Raises
        ------
        ValueError
            If the spool was sorted by other keys already.
        """
        self._check_open()
        if self._sorted_by is not None:
            if self._sorted_by != (primary, secondary):
                raise ValueError(f"the step spool is sorted by {self._sorted_by} already; "
                                 f"it cannot be sorted by {(primary, secondary)}")
            return
        self._sorted_by = (primary, secondary)
        runs, self._runs = self._runs, None
        tracked = False  # whether key_pieces of these keys is known (found as appended)
        if runs is not None and runs.valid and self._keys == (primary, secondary):
            tracked = True
            found = runs.pieces()
            if found is not None:
                self._use_pieces(found)
                return
        # int32 keys where the values fit (half the memory; the same order)
        keys = []
        for name in (secondary, primary):
            k = self._raw(name)
            if k.size and k.dtype.kind == "i" and k.min() >= 0 and k.max() < 2**31:
                k = k.astype(np.int32, copy=False)  # (stored narrow: already int32)
            keys.append(k)
        # (tracked: key_pieces of these keys is already known to be None)
        pieces = None if tracked else key_pieces(keys[1], keys[0])
        if pieces is not None:
            del keys
            self._use_pieces(pieces)
            return
        order = key_order(keys[1], keys[0])
        del keys
        if not np.any(order[1:] < order[:-1]):
            return  # already in order (a single replica, or runs that never interleave)
        self._pieces = pieces_of(order)
        if self._pieces is not None:
            return  # read in pieces: the permutation is not kept
        if order.size < 2**31:
            order = order.astype(np.int32, copy=False)  # half the memory; the same permutation
        self._order = order

    def _use_pieces(self, pieces: tuple[list[int], list[int]]) -> None:
        """Read in ``pieces`` (:func:`key_pieces`) from now on, unless they are the rows in
        the order appended."""
        if len(pieces[1]) > 1 or pieces[1][0] != 0:
            self._pieces = pieces

    def close(self) -> None:
        """Remove the spool folder now."""
        self._finalizer()

    def __getstate__(self) -> dict:
        # pickled (a result sent between processes) with its data; unpickled into a new
        # temporary folder of its own (a closed spool travels closed: no data)
        if self.closed:
            return {"columns": self.columns, "float_columns": self.float_columns,
                    "data": None}
        return {"columns": self.columns, "float_columns": self.float_columns,
                "data": {c: self.read(c) for c in self.columns}}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["columns"], state["float_columns"])
        if state["data"] is None:
            self.close()
        elif state["data"] and len(state["data"][self.columns[0]]):
            self.append(state["data"])


class _Loc:
    def __init__(self, table: StepTable):
        self._table = table

    def __getitem__(self, mask) -> StepTable:
        return self._table.filter(np.asarray(mask, dtype=bool))


class StepTable:
    """A step table whose columns live in memory or in a :class:`ColumnSpool`.

    Parameters
    ----------
    columns : list of str
        Column names in table order.
    float_columns : frozenset of str
        Float64 columns (the others are int64; an empty table has float columns only, as
        the DataFrame of an empty run always had).
    data : dict of str to ndarray, optional
        The columns in memory (canonical order), or None when ``spool`` holds them.
    spool : ColumnSpool, optional
        The columns on disk (already in canonical order).
    mask : ndarray of bool, optional
        Row selection (``table.loc[mask]``); None selects every row.
    """

    def __init__(self, columns: list[str], float_columns: frozenset, *,
                 data: dict[str, np.ndarray] | None = None, spool: ColumnSpool | None = None,
                 mask: np.ndarray | None = None):
        self._columns = list(columns)
        self._float = float_columns
        self._data = data
        self._spool = spool
        if mask is not None and np.count_nonzero(mask) == len(mask):
            mask = None  # every row: reads need no masked copy
        self._mask = mask
        if mask is not None:
            self._len = int(np.count_nonzero(mask))
        elif spool is not None:
            self._len = spool.num_rows
        else:
            self._len = len(next(iter(data.values()))) if data else 0

    # ------------------------------------------------------------------ DataFrame subset
    @property
    def columns(self) -> list[str]:
        """Column names in table order."""
        return list(self._columns)

    def __len__(self) -> int:
        return self._len

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, columns)``, as ``DataFrame.shape``."""
        return self._len, len(self._columns)

    def __iter__(self) -> Iterator[pd.DataFrame]:
        """The rows in consecutive DataFrame chunks (:meth:`iter_frames`: at most
        :data:`WRITE_ROWS` rows each, every row once, in order; one empty frame for an empty
        table). Unlike a DataFrame, iteration does not give the column names (those are
        :attr:`columns`): a long table is read a chunk at a time."""
        return self.iter_frames()

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first ``n`` rows as a DataFrame (only those rows are read from disk); a
        negative ``n``: all rows but the last ``-n``, as ``DataFrame.head``."""
        import pandas as pd

        n = max(0, self._len + n) if n < 0 else min(int(n), self._len)
        if self._base_len() == 0:
            return self.to_pandas()
        if self._spool is not None and self._mask is None:
            return pd.DataFrame({c: self._spool.read(c, 0, n) for c in self._columns},
                                copy=False)
        return pd.DataFrame({c: self.column(c)[:n] for c in self._columns}, copy=False)

    def _check_open(self) -> None:
        if self._spool is not None:
            self._spool._check_open()

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    @property
    def is_spooled(self) -> bool:
        """Whether the columns live on disk."""
        return self._spool is not None

    def column(self, name: str) -> np.ndarray:
        """One column as an array (read from disk for a spooled table; treat as read-only).

        Raises
        ------
        KeyError
            If ``name`` is not a column.
        """
        if name not in self._columns:
            raise KeyError(name)
        self._check_open()
        if self._base_len() == 0:
            x = np.zeros(0, dtype=float)
        elif self._spool is not None:
            x = self._spool.read(name)
        else:
            x = self._data[name]
        return x if self._mask is None else x[self._mask]

    def float_column(self, name: str, copy: bool = False) -> np.ndarray:
        """One column as float64 (int64 columns are cast exactly). A spooled int column is
        read and cast 1,048,576 rows at a time, so no int64 copy of the whole column exists;
        ``copy``: never the table's own buffer (the caller may write into it).

        Raises
        ------
        KeyError
            If ``name`` is not a column.
        """
        if name not in self._columns:
            raise KeyError(name)
        if name in self._float or self._spool is None or self._base_len() == 0:
            x = self.column(name)
            if x.dtype != np.float64:
                return x.astype(np.float64)
            own = self._spool is not None or self._mask is not None
            return x.copy() if copy and not own else x
        out = self._spool.read_float(name)
        return out if self._mask is None else out[self._mask]

    def column_slices(self, name: str,
                      rows: int | None = None) -> Iterator[tuple[int, int, np.ndarray]]:
        """One column as consecutive ``(start, stop, values)`` row slices of at most ``rows``
        rows (default :data:`WRITE_ROWS`) of this table: read a slice at a time from a
        spooled table without a row selection, else slices of :meth:`column`.

        Raises
        ------
        KeyError
            If ``name`` is not a column.
        """
        self._check_open()
        if name not in self._columns:
            raise KeyError(name)
        rows = WRITE_ROWS if rows is None else rows
        whole = None if (self._spool is not None and self._mask is None) else self.column(name)
        for a in range(0, self._len, rows):
            b = min(a + rows, self._len)
            yield a, b, (self._spool.read(name, a, b) if whole is None else whole[a:b])

    def __getitem__(self, name: str) -> pd.Series:
        import pandas as pd

        return pd.Series(self.column(name), name=name, copy=False)

    @property
    def loc(self) -> _Loc:
        """``table.loc[mask]``: the rows where the boolean ``mask`` is true (a view)."""
        return _Loc(self)

    def filter(self, mask: np.ndarray) -> StepTable:
        """The rows where ``mask`` (one bool per row of this table) is true."""
        if len(mask) != self._len:
            raise ValueError(f"mask has {len(mask)} entries for {self._len} rows")
        if self._mask is not None:
            full = self._mask.copy()
            full[full] = mask
            mask = full
        return StepTable(self._columns, self._float, data=self._data, spool=self._spool,
                         mask=mask)

    def _base_len(self) -> int:
        if self._spool is not None:
            return self._spool.num_rows
        return len(next(iter(self._data.values()))) if self._data else 0

    def to_pandas(self) -> pd.DataFrame:
        """The whole table as a DataFrame (every column in memory: for small runs and
        callers that need a frame)."""
        import pandas as pd

        self._check_open()
        if self._base_len() == 0:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in self._columns})
        return pd.DataFrame({c: self.column(c) for c in self._columns}, copy=False)

    def iter_frames(self, rows: int | None = None,
                    columns: Sequence[str] | None = None) -> Iterator[pd.DataFrame]:
        """Consecutive row slices of at most ``rows`` rows (default :data:`WRITE_ROWS`) as
        DataFrames (all rows, in order; one empty frame for an empty table).

        ``columns`` picks the columns the frames hold (those of the table among them, in
        table order; default every column): a spooled table reads only those from disk.
        """
        import pandas as pd

        self._check_open()
        rows = WRITE_ROWS if rows is None else rows
        wanted = None if columns is None else set(columns)
        names = self._columns if wanted is None else [c for c in self._columns if c in wanted]
        if self._mask is not None or self._spool is None or self._len == 0:
            df = self.to_pandas()
            if columns is not None:
                df = df[names]
            for a in range(0, max(len(df), 1), rows):
                yield df.iloc[a:a + rows]
            return
        for a in range(0, self._len, rows):
            yield pd.DataFrame({c: self._spool.read(c, a, a + rows) for c in names},
                               copy=False)

    def close(self) -> None:
        """Remove the spool folder; reading the table afterwards raises
        :class:`ClosedTableError` (a table in memory stays readable: nothing to remove)."""
        if self._spool is not None:
            self._spool.close()
