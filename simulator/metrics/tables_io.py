"""Write the run's big tables (requests, steps) as Parquet (default) or CSV.

Both writers are pyarrow's C++ ones: no per-value Python formatting. Floats keep full
precision: Parquet stores the IEEE doubles themselves; the CSV writer prints the shortest
decimal that reads back to the same double (``0.30000000000000004``, ``1e-7``), so nothing
is lost to a ``%.9g`` format. A missing value (NaN) is a Parquet null and an empty CSV
field. pyarrow is imported on first use (it costs ~0.1 s of start-up).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

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


def write_table(df: pd.DataFrame, folder: Path, stem: str, table_format: str = "parquet"
                ) -> Path:
    """Write ``df`` to ``folder / (stem + "." + table_format)`` and return that path.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (its index is not written).
    folder : Path
        Existing output folder.
    stem : str
        File name without suffix (``requests``, ``steps``).
    table_format : {"parquet", "csv"}
        Parquet (zstd-compressed, one file) or CSV (header row, ``,`` separated, strings
        quoted, shortest round-trip float text).

    Returns
    -------
    Path
        The file written. Same table => same bytes (no timestamps are stored).

    Raises
    ------
    ValueError
        If ``table_format`` is not one of :data:`TABLE_FORMATS`.
    """
    import pyarrow as pa

    check_table_format(table_format)
    path = Path(folder) / f"{stem}.{table_format}"
    table = pa.Table.from_pandas(df, preserve_index=False)
    if table_format == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path, compression="zstd")
    else:
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, path)
    return path


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
