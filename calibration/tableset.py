"""Latency table sets in the v2 format: write, read, check (pandas; no torch).

A GPU profile folder ``<gpu>/`` holds ``spec.yaml`` and table sets
``<gpu>/tables/<engine>-<version>/``, each with ``provenance.yaml`` and one file per operator
family, Parquet (``.parquet``) or CSV (``.csv``) with the same columns. Times are seconds per
call, one layer, one GPU, in ``median_s``; rows are keyed by operator shape at the TP shard.
Optional measurement columns (``p25_s, p75_s, iqr_rel, noisy, num_samples, samples_s``) and
free extra columns (``model``, ``op``, ``impl``, ``block_size``, ``cuda_graph``, ``note``)
ride along; readers ignore what they do not know.

==================  ==============================================  =======================
family              key columns                                     grid columns
==================  ==============================================  =======================
gemm                dtype                                           m, n, k
attention_prefill   dtype, kv_dtype, q_heads, kv_heads, head_dim,   batch, q, start
                    window, kernel
attention_decode    dtype, kv_dtype, q_heads, kv_heads, head_dim,   batch, ctx_mean
                    window, kernel
all_reduce          dtype, backend                                  num_gpus, bytes
nccl                op, dtype                                       num_gpus, bytes
moe                 dtype, distribution, kernel                     num_tokens, hidden, inter,
                                                                    topk, num_experts,
                                                                    moe_tp, moe_ep
elementwise         dtype, hidden, intermediate, q_heads,           tokens
                    kv_heads, head_dim
lm_head             dtype, hidden, vocab                            rows
cpu_overhead        num_layers, hidden                              num_seqs, num_tokens
==================  ==============================================  =======================

The flat harness profile of format v1 (tables at the folder root, e.g.
``hardware_profiles/cpu-amd-epyc-1t/``) reads as one set: a missing ``batch`` is 1,
``window`` 0, ``kv_dtype`` the ``dtype``, ``kernel`` empty (one kernel); of its decode rows
(``dist`` uniform / skewed) only the uniform ones carry the v2 meaning (every sequence
``ctx_mean`` long) and are kept.
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

PROVENANCE_FILE = "provenance.yaml"
TABLES_DIR = "tables"
#: engine name of the sets this harness writes
HARNESS_ENGINE = "servesim-harness"

KEYS = {
    "gemm": ["dtype"],
    "attention_prefill": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                          "kernel"],
    "attention_decode": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                         "kernel"],
    "all_reduce": ["dtype", "backend"],
    "nccl": ["op", "dtype"],
    "moe": ["dtype", "distribution", "kernel"],
    "elementwise": ["dtype", "hidden", "intermediate", "q_heads", "kv_heads", "head_dim"],
    "lm_head": ["dtype", "hidden", "vocab"],
    "cpu_overhead": ["num_layers", "hidden"],
}
GRID = {
    "gemm": ["m", "n", "k"],
    "attention_prefill": ["batch", "q", "start"],
    "attention_decode": ["batch", "ctx_mean"],
    "all_reduce": ["num_gpus", "bytes"],
    "nccl": ["num_gpus", "bytes"],
    "moe": ["num_tokens", "hidden", "inter", "topk", "num_experts", "moe_tp", "moe_ep"],
    "elementwise": ["tokens"],
    "lm_head": ["rows"],
    "cpu_overhead": ["num_seqs", "num_tokens"],
}
FAMILIES = tuple(KEYS)
#: string-valued key columns (the others are integers)
STRING_KEYS = {"dtype", "kv_dtype", "kernel", "backend", "op", "distribution"}
MEASUREMENT_COLUMNS = ["median_s", "p25_s", "p75_s", "iqr_rel", "noisy", "num_samples",
                       "samples_s"]
#: names that mean the same dtype (torch / aiconfigurator spellings -> ours)
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                 "float8_e4m3fn": "fp8", "fp8_e4m3": "fp8", "float": "float32",
                 "fp32": "float32"}


def normalize_dtype(name) -> str:
    """Our spelling of a dtype name (``bfloat16`` -> ``bf16``, ``half`` -> ``fp16``, ...)."""
    s = str(name).strip().lower()
    return DTYPE_ALIASES.get(s, s)


def table_set_name(engine: str, version: str) -> str:
    """Folder name ``<engine>-<version>`` of a table set."""
    return f"{engine}-{version}"


def key_and_grid(family: str) -> list[str]:
    """Key columns then grid columns of ``family`` (the identity of a row)."""
    return KEYS[family] + GRID[family]


# ------------------------------------------------------------------------------ reading
@dataclass
class TableSetData:
    """One table set read into memory (normalised to the v2 columns).

    Attributes
    ----------
    folder : Path
        The set's folder (for a flat v1 profile: the profile folder).
    name : str
        Folder name (``servesim-harness-2.0``) or the profile's name for a flat one.
    provenance : dict
        ``provenance.yaml``.
    tables : dict of str to DataFrame
        Family -> rows.
    flat : bool
        Read from a flat (v1) profile.
    """

    folder: Path
    name: str
    provenance: dict
    tables: dict
    flat: bool

    def default_kernel(self, family: str) -> str | None:
        """The kernel the engine uses by default for ``family`` (``default_kernel`` in the
        provenance; else the table's only kernel; else its most frequent one)."""
        df = self.tables.get(family)
        if df is None or "kernel" not in df.columns:
            return None
        dk = (self.provenance.get("default_kernel") or {}).get(family)
        kernels = df["kernel"].astype(str)
        if dk is not None and (kernels == str(dk)).any():
            return str(dk)
        counts = kernels.value_counts()
        return str(counts.index[0]) if len(counts) else None


def _table_files(folder: Path) -> dict[str, Path]:
    out = {}
    for fam in FAMILIES:
        pq, csv = folder / f"{fam}.parquet", folder / f"{fam}.csv"
        if pq.is_file() and csv.is_file():
            raise ValueError(f"{folder}: both {pq.name} and {csv.name} exist; keep one")
        if pq.is_file():
            out[fam] = pq
        elif csv.is_file():
            out[fam] = csv
    return out


def read_table(path: str | Path) -> pd.DataFrame:
    """One table file (``.parquet`` or ``.csv``).

    Raises
    ------
    ValueError
        Unreadable file (the message names it).
    """
    p = Path(path)
    try:
        if p.suffix == ".parquet":
            return pd.read_parquet(p)
        return pd.read_csv(p)
    except Exception as e:  # noqa: BLE001 - pyarrow/pandas raise many types
        raise ValueError(f"{p}: cannot read latency table: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}") from None


def read_provenance(folder: str | Path) -> dict:
    """``provenance.yaml`` of a set (empty when absent).

    Raises
    ------
    ValueError
        Not valid YAML or not a mapping.
    """
    p = Path(folder) / PROVENANCE_FILE
    if not p.is_file():
        return {}
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: expected a mapping at the top level")  # noqa: TRY004
    return doc


def list_table_sets(profile: str | Path) -> list[Path]:
    """Table-set folders under ``profile/tables/`` (sorted by name)."""
    d = Path(profile) / TABLES_DIR
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir())


def resolve_table_set(path: str | Path) -> tuple[Path, bool]:
    """The table-set folder that ``path`` names, and whether it is a flat (v1) profile.

    ``path`` may be a set folder (table files inside), a profile folder with exactly one set
    under ``tables/``, or a flat profile (tables at its root).

    Raises
    ------
    ValueError
        Not a folder; a profile with several sets (the message lists them); no tables.
    """
    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"{p}: no such folder")
    if _table_files(p):
        return p, "engine" not in read_provenance(p)  # a v2 set names its engine
    sets = list_table_sets(p)
    if len(sets) == 1:
        return sets[0], False
    if len(sets) > 1:
        names = ", ".join(s.name for s in sets)
        raise ValueError(f"{p}: holds several table sets ({names}); name one: "
                         f"{p / TABLES_DIR / sets[0].name}")
    raise ValueError(f"{p}: no latency tables (neither <family>.parquet/.csv nor "
                     f"{TABLES_DIR}/<engine>-<version>/)")


def normalize_table(family: str, df: pd.DataFrame, source: str = "") -> pd.DataFrame:
    """Fill the v2 defaults of a table (see module docstring) and normalise dtype names.

    Raises
    ------
    ValueError
        A key or grid column (or ``median_s``) is missing after the defaults.
    """
    df = df.copy()
    if family in ("attention_prefill", "attention_decode"):
        if "batch" not in df.columns:
            df["batch"] = 1
        if "window" not in df.columns:
            df["window"] = 0
        if "kv_dtype" not in df.columns and "dtype" in df.columns:
            df["kv_dtype"] = df["dtype"]
        if "kernel" not in df.columns:
            df["kernel"] = ""
        if family == "attention_decode" and "dist" in df.columns:
            df = df[df["dist"].astype(str) == "uniform"]
    for c in ("dtype", "kv_dtype"):
        if c in df.columns:
            df[c] = df[c].map(normalize_dtype)
    need = key_and_grid(family) + ([] if family == "cpu_overhead" else ["median_s"])
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{source or family}: latency table lacks column(s) "
                         f"{', '.join(missing)}")
    for c in key_and_grid(family):
        if c in STRING_KEYS:
            df[c] = df[c].fillna("").astype(str)
    return df.reset_index(drop=True)


def read_table_set(path: str | Path) -> TableSetData:
    """Read a table set (or the only set of a profile, or a flat v1 profile).

    Raises
    ------
    ValueError
        See :func:`resolve_table_set`, :func:`read_table`, :func:`normalize_table`.
    """
    folder, flat = resolve_table_set(path)
    prov = read_provenance(folder)
    tables = {fam: normalize_table(fam, read_table(f), str(f))
              for fam, f in _table_files(folder).items()}
    return TableSetData(folder, folder.name, prov, tables, flat)


def check_table_set(path: str | Path) -> dict[str, int]:
    """Check a table set the way a reader relies on it; rows per family.

    Every file reads, has its key and grid columns and a positive finite ``median_s``
    (``residual_s`` for ``cpu_overhead``), grid columns are integers >= 0, and no two rows
    share key + grid. A v2 set's ``provenance.yaml`` names ``kind``, ``engine``,
    ``engine_version``, ``device_name`` and has a record per table.

    Raises
    ------
    ValueError
        The first problem found (file and cause in one line).
    """
    data = read_table_set(path)
    if not data.tables:
        raise ValueError(f"{data.folder}: no latency tables")
    if not data.flat:
        prov = data.provenance
        for k in ("kind", "engine", "engine_version", "device_name"):
            if not prov.get(k):
                raise ValueError(f"{data.folder / PROVENANCE_FILE}: missing {k!r}")
        recs = prov.get("tables") or {}
        for fam in data.tables:
            if fam not in recs:
                raise ValueError(f"{data.folder / PROVENANCE_FILE}: no record for table {fam!r}")
    out = {}
    for fam, df in data.tables.items():
        src = f"{data.folder}/{fam}"
        tcol = "residual_s" if fam == "cpu_overhead" else "median_s"
        t = pd.to_numeric(df[tcol], errors="coerce").to_numpy(dtype=float)
        if fam != "cpu_overhead" and not (np.isfinite(t) & (t > 0)).all():
            raise ValueError(f"{src}: {tcol} must be positive and finite in every row")
        for c in GRID[fam]:
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
            if not (np.isfinite(v) & (v >= 0) & (v == np.round(v))).all():
                raise ValueError(f"{src}: column {c} must hold integers >= 0")
        dup = df.duplicated(key_and_grid(fam))
        if dup.any():
            raise ValueError(f"{src}: {int(dup.sum())} rows repeat a key + grid point")
        out[fam] = len(df)
    return out


# ------------------------------------------------------------------------------ writing
def _plain(obj):
    """YAML-safe plain data (numpy scalars, torch version strings, tuples)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return None if not math.isfinite(float(obj)) else float(obj)
    return str(obj)


def _text(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return v if isinstance(v, str) else f"{v:.4g}" if isinstance(v, float) else str(v)


def _typed(family: str, df: pd.DataFrame) -> pd.DataFrame:
    """Integer grid / shape keys, string keys, measurement columns first after the keys."""
    df = df.copy()
    for c in key_and_grid(family):
        if c in STRING_KEYS:
            df[c] = df[c].astype(str)
        else:
            df[c] = pd.to_numeric(df[c]).astype("int64")
    if "noisy" in df.columns:
        df["noisy"] = df["noisy"].astype(bool)
    if "samples_s" in df.columns:  # a CSV reads a single sample back as a float
        df["samples_s"] = df["samples_s"].map(_text)
    for c in df.columns:  # text columns with gaps (rows of older runs): one type for Parquet
        if df[c].dtype == object and any(isinstance(v, str) for v in df[c]):
            df[c] = df[c].map(_text)
    first = key_and_grid(family) + [c for c in MEASUREMENT_COLUMNS if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def merge_rows(family: str, old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    """``old`` rows not measured again in ``new``, plus ``new``; sorted by key + grid."""
    new = _typed(family, new)
    if old is not None and len(old):
        old = _typed(family, normalize_table(family, old))
        ident = key_and_grid(family)
        idx_new = pd.MultiIndex.from_frame(new[ident].astype(str))
        idx_old = pd.MultiIndex.from_frame(old[ident].astype(str))
        new = pd.concat([old[~idx_old.isin(idx_new)], new], ignore_index=True)
    return new.sort_values(key_and_grid(family), kind="stable").reset_index(drop=True)


def write_table(folder: Path, family: str, df: pd.DataFrame, file_format: str) -> Path:
    """Write one table as ``<family>.parquet`` (zstd) or ``.csv``; remove the other form."""
    folder.mkdir(parents=True, exist_ok=True)
    if file_format not in ("parquet", "csv"):
        raise ValueError(f"table file format must be parquet or csv, got {file_format!r}")
    p = folder / f"{family}.{file_format}"
    other = folder / f"{family}.{'csv' if file_format == 'parquet' else 'parquet'}"
    if file_format == "parquet":
        df.to_parquet(p, index=False, compression="zstd")
    else:
        df.to_csv(p, index=False, float_format="%.6g")
    if other.is_file():
        other.unlink()
    return p


def write_table_set(folder: str | Path, tables: dict, provenance: dict,
                    table_records: dict, file_format: str = "parquet") -> dict[str, int]:
    """Write (merge) a v2 table set: tables, then ``provenance.yaml``.

    Rows of an existing set are kept unless a new row has the same key + grid (then the new
    measurement replaces them), so several models can be calibrated into one set.

    Parameters
    ----------
    folder : path
        ``<profile>/tables/<engine>-<version>/`` (created).
    tables : dict of str to DataFrame or list of dict
        Family -> new rows.
    provenance : dict
        Top-level fields (``kind``, ``engine``, ``engine_version``, ``device_name``, ...);
        ``models`` and ``default_kernel`` are merged into the existing ones.
    table_records : dict
        Family -> record (source, versions, method, ...); ``rows`` is filled in here.
    file_format : str
        ``parquet`` or ``csv``.

    Returns
    -------
    dict
        Rows per family after the merge.

    Raises
    ------
    ValueError
        The folder holds a set measured on another device, or bad arguments.
    """
    folder = Path(folder)
    old_prov = read_provenance(folder) if folder.is_dir() else {}
    dev_old, dev_new = old_prov.get("device_name"), provenance.get("device_name")
    if dev_old and dev_new and dev_old != dev_new:
        raise ValueError(f"{folder}: measured on {dev_old!r}, this device is {dev_new!r}; "
                         f"write to another folder")
    existing = _table_files(folder) if folder.is_dir() else {}
    rows = {}
    for fam, new in tables.items():
        if fam not in KEYS:
            raise ValueError(f"unknown table family {fam!r}")
        df = new if isinstance(new, pd.DataFrame) else pd.DataFrame(list(new))
        if df.empty:
            continue
        old = read_table(existing[fam]) if fam in existing else None
        merged = merge_rows(fam, old, df)
        write_table(folder, fam, merged, file_format)
        rows[fam] = len(merged)
    for fam, f in existing.items():  # untouched tables keep their row counts
        if fam not in rows:
            rows[fam] = len(read_table(f))
    recs = dict(old_prov.get("tables") or {})
    for fam, rec in table_records.items():
        if fam in rows:
            recs[fam] = {**rec, "rows": rows[fam]}
    for fam, n in rows.items():
        if fam in recs:
            recs[fam]["rows"] = n
    doc = {**old_prov, **provenance}
    doc["default_kernel"] = {**(old_prov.get("default_kernel") or {}),
                             **(provenance.get("default_kernel") or {})} or None
    doc["models"] = {**(old_prov.get("models") or {}), **(provenance.get("models") or {})}
    doc["tables"] = {k: recs[k] for k in sorted(recs)}
    if doc["default_kernel"] is None:
        doc.pop("default_kernel")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROVENANCE_FILE).write_text(
        "# Provenance of this latency table set (servesim calibrate, format v2).\n"
        + yaml.safe_dump(_plain(doc), sort_keys=False, width=100))
    return rows


def now_iso() -> str:
    """Local time, ISO 8601 with offset, seconds (the ``date`` of a measurement)."""
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")
