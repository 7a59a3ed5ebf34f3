"""Write the run's big tables (requests, steps) as Parquet (default) or CSV.

Both writers are pyarrow's C++ ones: no per-value Python formatting. Floats keep full
precision: Parquet stores the IEEE doubles themselves; the CSV writer prints the shortest
decimal that reads back to the same double (``0.30000000000000004``, ``1e-7``), so nothing
is lost to a ``%.9g`` format. A missing value (NaN) is a Parquet null and an empty CSV
field. pyarrow is imported on first use (it costs ~0.1 s of start-up).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from simulator.base.outdir import OutputWriteError
from simulator.metrics import step_table
from simulator.metrics.columns import column_chunks

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from simulator.metrics.step_table import StepTable

T = TypeVar("T")

#: Valid values of ``table_format`` (``servesim run --table-format``).
TABLE_FORMATS: tuple[str, ...] = ("parquet", "csv")


def check_table_format(table_format: str) -> str:
    """Return ``table_format`` if valid.

    Raises
    ------
    ValueError
        One line naming the bad value and the valid choices.
    """
    if table_format not in TABLE_FORMATS:
        raise ValueError(f"table_format: {table_format!r} is not one of "
                         + ", ".join(TABLE_FORMATS))
    return table_format


class WriteCancelled(Exception):
    """A table write stopped by its ``stop`` event (:func:`write_table`): no file is left."""


def write_table(df: pd.DataFrame | StepTable, folder: Path, stem: str,
                table_format: str = "parquet", stop: threading.Event | None = None,
                ahead: bool = True) -> Path:
    """Write ``df`` to ``folder / (stem + "." + table_format)`` and return that path.

    A :class:`~simulator.metrics.step_table.StepTable` is written in row slices of
    :data:`~simulator.metrics.step_table.WRITE_ROWS` rows (one Parquet row group each, the
    size ``pyarrow.parquet.write_table`` uses), so a spooled table never sits in memory
    whole and the file has the bytes of the same table written at once.

    Parameters
    ----------
    df : pandas.DataFrame or StepTable
        The table (its index is not written).
    folder : Path
        Existing output folder.
    stem : str
        File name without suffix (``requests``, ``steps``).
    table_format : {"parquet", "csv"}
        Parquet (zstd-compressed, one file) or CSV (header row, ``,`` separated, strings
        quoted, shortest round-trip float text).
    stop : threading.Event, optional
        Checked before each slice of a step table: once set, the write stops (a write on a
        second thread whose run failed, :class:`~simulator.runs.scenario.StepsWriter`).
    ahead : bool
        Read a step table's next slice on a second thread while one is written
        (:func:`read_ahead`; only with several slices).

    Returns
    -------
    Path
        The file written. Same table => same bytes (no timestamps are stored).

    Raises
    ------
    ValueError
        If ``table_format`` is not one of :data:`TABLE_FORMATS`.
    WriteCancelled
        When ``stop`` was set (nothing is left under the table's name or its ``.part``).
    """
    check_table_format(table_format)
    path = Path(folder) / f"{stem}.{table_format}"
    if hasattr(df, "iter_frames"):
        frames = _slices(df)
        if stop is not None:
            frames = _until(frames, stop)
        if ahead and len(df) > step_table.WRITE_ROWS:  # read the next while this one is written
            frames = read_ahead(frames)
    else:
        frames = iter([df])
    write_frames(frames, path, table_format)
    return path


def _slices(table) -> Iterator:
    """A step table's row slices to write: ``{column: array}`` of :data:`~simulator.metrics.
    step_table.WRITE_ROWS` rows each (:meth:`~simulator.metrics.step_table.StepTable.
    column_slices`; no DataFrame is built for a slice, see :func:`write_frames`), or its one
    empty frame when it has no rows."""
    if len(table) == 0:
        yield from table.iter_frames()
        return
    yield from column_chunks(table, list(table.columns))


def _arrow_table(frame, schema):
    """One slice as a pyarrow Table: a DataFrame through ``from_pandas``; a ``{column:
    array}`` slice the same way when it is the first (its schema, with the pandas metadata,
    is the file's), else straight into that schema (the same arrays as ``from_pandas``
    makes, NaN read as null as it reads them: 17 ms a slice of 2**20 rows less, the
    DataFrame and its conversion)."""
    import pyarrow as pa

    if isinstance(frame, dict):
        if schema is None:
            import pandas as pd

            frame = pd.DataFrame(frame, copy=False)
        else:
            return pa.Table.from_arrays(
                [pa.array(frame[f.name], type=f.type, from_pandas=True) for f in schema],
                schema=schema)
    # one thread: the columns are numpy or Arrow already (zero-copy), and a pool of converter
    # threads costs more to start than it saves (~0.02 s a run)
    return pa.Table.from_pandas(frame, preserve_index=False, nthreads=1)


def _until(items: Iterator[T], stop: threading.Event) -> Iterator[T]:
    """``items`` while ``stop`` is not set; :class:`WriteCancelled` once it is."""
    for item in items:
        if stop.is_set():
            raise WriteCancelled("the table write was stopped")
        yield item


def read_ahead(items: Iterator[T]) -> Iterator[T]:
    """``items``, each one taken (in a second thread) while the one before is used: the
    slices of a spooled step table are gathered from its memory-mapped files (numpy, which
    lets go of the interpreter lock) while the one before is encoded and compressed (Arrow,
    which does too), so a long table's two halves of the work share the machine's cores.
    The same items in the same order; an exception raised taking one is raised where it
    would have been; one item is held ahead at most (one slice's memory)."""
    from concurrent.futures import ThreadPoolExecutor

    done = object()

    def take():
        return next(items, done)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="servesim-read-ahead") as pool:
        ahead = pool.submit(take)
        while True:
            item = ahead.result()
            if item is done:
                return
            ahead = pool.submit(take)
            yield item


#: Integer columns written with dictionary pages (besides every text column): the step
#: table's counts with a few distinct values a row group (a replica's id, the batch's size
#: and decode sequences and tokens: at most ``max_num_seqs`` or so), whose dictionary indices
#: bit-packed leave zstd a fraction of the bytes. Measured on row groups of the ServeGen
#: day's steps.parquet (1,048,576 rows each; pyarrow 26, zstd): 4.8 to 5.9 ms a column
#: instead of 12.3 to 17.4 ms, 0.01 to 0.06 MB instead of 0.26 to 0.61 MB; the table's
#: other numeric columns (times, indices, KV blocks and tokens) have many values, and a
#: dictionary made each slower and larger, so they are written plain (the 8B/H100 hour's
#: steps.parquet with dictionaries for every column: 0.074 s instead of 0.053 s). By name, in
#: any table written: the request table's ``replica_id`` gets them too.
DICTIONARY_COLUMNS = frozenset({"replica_id", "batch_size", "num_decode_seqs",
                                "num_decode_tokens"})


#: Step-table columns written with a Parquet encoding other than dictionary or plain: the
#: counters that move by small steps from row to row (a replica's step index, its KV blocks
#: and tokens in use) as ``DELTA_BINARY_PACKED`` (differences, bit-packed), the float64 times
#: as ``BYTE_STREAM_SPLIT`` (each byte position of the doubles together, which zstd compresses
#: better). Measured on three row groups of the ServeGen day's steps.parquet (1,048,576 rows
#: each; pyarrow 26, zstd), per column, plain -> this encoding: step_index 16.5 -> 5.1 ms and
#: 1.08 -> 0.01 MB, kv_blocks_used 12.2 -> 7.8 ms and 0.74 -> 0.30 MB, kv_tokens_used 17.3 ->
#: 8.0 ms and 1.32 -> 0.28 MB, start_time_s / end_time_s 9.5 -> 6.6 ms and 7.2 -> 4.7 MB,
#: step_time_s 9.7 -> 10.1 ms and 7.6 -> 5.7 MB; the whole row group 124.6 -> 96.9 ms, 25.5 ->
#: 15.9 MB. The other count columns were slower with the delta encoding (few distinct
#: values: plain or dictionary pages compress to almost nothing). Both encodings are in the
#: Parquet format since 2.x (pyarrow, DuckDB, Polars, Spark read them); values read back
#: equal. By name and type (an integer column for the delta encoding, a floating one for the
#: split), in any table written.
COLUMN_ENCODINGS = {"step_index": "DELTA_BINARY_PACKED", "kv_blocks_used": "DELTA_BINARY_PACKED",
                    "kv_tokens_used": "DELTA_BINARY_PACKED", "start_time_s": "BYTE_STREAM_SPLIT",
                    "step_time_s": "BYTE_STREAM_SPLIT", "end_time_s": "BYTE_STREAM_SPLIT"}


def column_encodings(schema) -> dict[str, str]:
    """The columns of a pyarrow ``schema`` with an encoding of :data:`COLUMN_ENCODINGS`
    (``{column: encoding}``, for ``pyarrow.parquet.ParquetWriter``'s ``column_encoding``):
    those named there whose type fits the encoding."""
    import pyarrow as pa

    fits = {"DELTA_BINARY_PACKED": pa.types.is_integer, "BYTE_STREAM_SPLIT": pa.types.is_floating}
    return {f.name: COLUMN_ENCODINGS[f.name] for f in schema
            if f.name in COLUMN_ENCODINGS and fits[COLUMN_ENCODINGS[f.name]](f.type)}


def dictionary_columns(schema) -> list[str]:
    """The columns of a pyarrow ``schema`` written with dictionary pages: text (string and
    dictionary) columns and the integer columns named in :data:`DICTIONARY_COLUMNS`."""
    import pyarrow as pa

    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or pa.types.is_dictionary(f.type)
            or (f.name in DICTIONARY_COLUMNS and pa.types.is_integer(f.type))]


def parquet_options(schema) -> dict:
    """The ``pyarrow.parquet.ParquetWriter`` options of a table of ``schema``: zstd, dictionary
    pages for :func:`dictionary_columns`, the encodings of :func:`column_encodings`."""
    return {"compression": "zstd", "use_dictionary": dictionary_columns(schema),
            "column_encoding": column_encodings(schema)}


def write_frames(frames: Iterator, path: Path, table_format: str) -> None:
    """Write consecutive slices of one table (same columns and dtypes) to ``path``: each
    slice is one Parquet ``write_table`` call (row groups of at most pyarrow's default
    length) or one CSV batch (the header once). At least one slice, possibly empty; a slice
    is a DataFrame or ``{column: array}`` (:func:`_arrow_table`).

    Raises
    ------
    simulator.base.outdir.OutputWriteError
        When the file cannot be written (a full disk, a quota): one line naming ``path`` and
        the cause; nothing is left behind (no ``.part`` file, no truncated table).
    """

    # written under a temporary name and renamed when complete: an interrupted or failed
    # write leaves no valid-looking but truncated table behind
    path = Path(path)
    part = path.with_name(path.name + ".part")
    writer = None
    schema = None
    done = False
    try:
        for frame in frames:
            table = _arrow_table(frame, schema)
            schema = table.schema
            if writer is None:
                if table_format == "parquet":
                    import pyarrow.parquet as pq

                    writer = pq.ParquetWriter(part, table.schema,
                                              **parquet_options(table.schema))
                else:
                    import pyarrow.csv as pcsv

                    writer = pcsv.CSVWriter(part, table.schema)
            writer.write_table(table)
        if writer is not None:
            w, writer = writer, None
            w.close()  # flushes: a full disk may show here
            os.replace(part, path)
        done = True
    except OSError as e:
        raise OutputWriteError(path, e) from None
    finally:
        if writer is not None:
            try:
                writer.close()
            except OSError:
                pass  # already failing: the first error is the one reported
        if not done:
            part.unlink(missing_ok=True)


def write_run_tables(folder: Path, tables: dict, table_format: str = "parquet") -> None:
    """Write each ``{stem: DataFrame}`` of a run with :func:`write_table` and delete the same
    stem in the other format (left by an earlier run into the same folder), so a folder never
    holds two disagreeing copies of a table.

    Raises
    ------
    ValueError
        If ``table_format`` is not one of :data:`TABLE_FORMATS`.
    """
    for stem, df in tables.items():
        write_table(df, folder, stem, table_format)
        drop_other_formats(folder, stem, table_format)


def drop_other_formats(folder: Path, stem: str, table_format: str) -> None:
    """Delete ``stem`` in every format but ``table_format`` from ``folder`` (a table an earlier
    run left there), so the folder never holds two disagreeing copies of a table."""
    for other in (f for f in TABLE_FORMATS if f != table_format):
        (Path(folder) / f"{stem}.{other}").unlink(missing_ok=True)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_table` (by its suffix) into a DataFrame.

    Raises
    ------
    ValueError
        If the suffix is neither ``.parquet`` nor ``.csv``.
    """
    import pandas as pd

    p = Path(path)
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".csv":
        return pd.read_csv(p)
    raise ValueError(f"{p}: table suffix must be .parquet or .csv")
