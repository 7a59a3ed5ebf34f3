"""Measured kernel table files: the per-family schema (key columns, grid axes, defaults),
reading one table file, and :class:`TableFiles`, the files and provenance of one table set
(own, reused and filled-in families; labels). Queries are :class:`~simulator.perf.tables.sets.TableSet`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from simulator.base.resources import not_text_reason, safe_load_yaml
from simulator.catalog.hardware import GPUSpec

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

PROVENANCE_FILE = "provenance.yaml"
TABLES_DIR = "tables"


# ============================================================================== schemas
@dataclass(frozen=True)
class _Schema:
    cat: tuple          # categorical keys, matched exactly (``kernel`` handled apart)
    num: tuple          # numeric keys, nearest measured group when absent
    grid: tuple         # size axes (primary first)
    zero: frozenset = frozenset()   # axes that may hold 0 (u = log2(1 + x))
    defaults: dict = field(default_factory=dict)   # value of a column a file may lack


_ATTN_NUM = ("head_dim", "kv_heads", "q_heads", "window")
SCHEMAS: dict[str, _Schema] = {
    "gemm": _Schema(("dtype",), (), ("m", "n", "k")),
    "attention_prefill": _Schema(("dtype", "kv_dtype"), _ATTN_NUM, ("q", "batch", "start"),
                                 frozenset({"start"}), {"batch": 1, "window": 0}),
    "attention_decode": _Schema(("dtype", "kv_dtype"), _ATTN_NUM, ("ctx_mean", "batch"),
                                frozenset(), {"window": 0}),
    "all_reduce": _Schema(("dtype", "backend"), ("num_gpus",), ("bytes",)),
    "nccl": _Schema(("op", "dtype"), ("num_gpus",), ("bytes",)),
    "moe": _Schema(("dtype", "distribution"),
                   ("hidden", "inter", "topk", "num_experts", "moe_tp", "moe_ep"),
                   ("num_tokens",), frozenset(), {"moe_tp": 1, "moe_ep": 1}),
    "elementwise": _Schema(("dtype",), ("hidden", "intermediate", "q_heads", "kv_heads",
                                        "head_dim"), ("tokens",)),
    "lm_head": _Schema(("dtype",), ("hidden", "vocab"), ("rows",)),
}
#: operator families a table set may hold (``cpu_overhead``: engine step residuals, harness only)
FAMILIES = tuple(SCHEMAS) + ("cpu_overhead",)
_CPU_COLUMNS = ("num_layers", "hidden", "num_seqs", "num_tokens", "residual_s")
#: families whose dtype is the bytes moved, not an arithmetic (a bf16 query may read fp16 rows)
_COMM = {"all_reduce", "nccl"}


def _required_columns(op: str) -> list[str]:
    if op == "cpu_overhead":
        return list(_CPU_COLUMNS)
    s = SCHEMAS[op]
    cols = [c for c in (*s.cat, *s.num, *s.grid) if c not in s.defaults]
    if op.startswith("attention"):
        cols = [c for c in cols if c != "kv_dtype"]   # defaults to dtype (harness v1)
    return cols + ["median_s"]


def read_table_file(path: str | Path, op: str) -> pd.DataFrame:
    """Read one table file (Parquet or CSV) of family ``op`` and complete optional columns.

    Missing optional columns get their documented defaults (``batch`` 1, ``window`` 0,
    ``kv_dtype`` = ``dtype``, ``kernel`` empty = single kernel, ``moe_tp``/``moe_ep`` 1). Rows
    with a non-positive or missing time are dropped; a decode table with a ``dist`` column
    (harness v1: ``uniform`` and ``skewed`` context mixes) keeps its ``uniform`` rows.

    Raises
    ------
    ValueError
        One line naming the file: unreadable, unknown family, or missing required columns.
    """
    import pandas as pd
    p = Path(path)
    if op not in FAMILIES:
        raise ValueError(f"{p}: unknown table family {op!r}; known: {', '.join(FAMILIES)}")
    try:
        if p.suffix == ".parquet":
            df = pd.read_parquet(p)
        else:
            df = pd.read_csv(p)
    except Exception as e:  # noqa: BLE001 - any reader failure is a bad input file
        raise ValueError(f"{p}: cannot read latency table: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}") from None
    missing = [c for c in _required_columns(op) if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: latency table lacks column(s) {', '.join(missing)}")
    if op == "cpu_overhead":
        return df
    s = SCHEMAS[op]
    for c, v in s.defaults.items():
        if c not in df.columns:
            df[c] = v
    if op.startswith("attention") and "kv_dtype" not in df.columns:
        df["kv_dtype"] = df["dtype"]
    if op == "attention_decode" and "dist" in df.columns and (df["dist"] == "uniform").any():
        # harness v1 also times skewed context mixes at the same ctx_mean; ctx_mean means
        # "tokens per sequence" (uniform), so those rows are not averaged in
        df = df[df["dist"] == "uniform"].reset_index(drop=True)
    if "kernel" not in df.columns:
        df["kernel"] = ""
    df["kernel"] = df["kernel"].fillna("").astype(str)
    for c in s.cat:
        df[c] = df[c].astype(str)
    t = pd.to_numeric(df["median_s"], errors="coerce")
    if t.isna().all() and len(df):
        raise ValueError(f"{p}: column median_s holds no numbers")
    df["median_s"] = t
    for c in (*s.num, *s.grid):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    ok = np.isfinite(df["median_s"].to_numpy(float)) & (df["median_s"].to_numpy(float) > 0)
    for c in (*s.num, *s.grid):
        ok &= np.isfinite(df[c].to_numpy(float))
    return df[ok].reset_index(drop=True)


def _version_key(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", str(v))) or (0,)


def version_key(v: str) -> tuple:
    """Sort key of a version string (``0.19.0`` < ``0.22.0``; non-numeric parts sort first)."""
    return _version_key(v)


def _read_yaml(p: Path) -> dict:
    if not p.is_file():
        return {}
    try:
        doc = safe_load_yaml(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: {not_text_reason(e)}; a provenance file is YAML text") from None
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: provenance must be a mapping")  # noqa: TRY004 - user input
    return doc


class _Family:
    """One operator family of a set: rows, group index, kernel defaults."""

    def __init__(self, op: str, df: pd.DataFrame, defaults: set | None):
        self.op = op
        self.df = df
        self.schema = SCHEMAS[op]
        s = self.schema
        self.grid_cols = {c: df[c].to_numpy(float) for c in s.grid}
        self.t = df["median_s"].to_numpy(float)
        keys = [*s.cat, *s.num, "kernel"]
        self.groups = {k if isinstance(k, tuple) else (k,): v
                       for k, v in df.groupby(keys, sort=True).indices.items()}
        self.kernels = sorted(df["kernel"].unique().tolist())   # not a Python loop over rows
        self.defaults = defaults if defaults else None


class TableFiles:
    """The files and provenance of one table set (the base of
    :class:`~simulator.perf.tables.sets.TableSet`, which documents the parameters)."""

    def __init__(self, folder: Path, gpu: GPUSpec):
        self.folder = Path(folder)
        self.gpu = gpu
        self.meta = _read_yaml(self.folder / PROVENANCE_FILE)
        m = self.meta
        self.flat = (self.folder / "spec.yaml").is_file()
        default_engine = "harness" if self.flat else self.folder.name.split("-")[0]
        self.engine = str(m.get("engine") or default_engine)
        ver = m.get("engine_version") or m.get("harness_version")
        if not ver and not self.flat and "-" in self.folder.name:
            ver = self.folder.name.split("-", 1)[1]
        self.engine_version = str(ver or "")
        self.name = (f"{self.engine}-{self.engine_version}" if self.flat else self.folder.name)
        self.device_name = str(m.get("device_name") or gpu.name)
        self._records = m.get("tables") if isinstance(m.get("tables"), dict) else {}
        self._any_dtype = str(m.get("dtype_policy", "")).lower() == "any"
        self._fam: dict[str, _Family | None] = {}
        self._res: dict = {}
        self._grids: dict = {}
        self._tgrids: dict = {}
        self._cpu: dict = {}

    def __repr__(self) -> str:
        return f"TableSet({self.name!r}, {self.folder})"

    #: the caches filled on first use (tables read, grids built): 27 MB for a run on the
    #: H100 tables, so a pickled set (a RunResult sent between processes) leaves them out
    #: and reads the files of :attr:`folder` again when next asked (same files, same answers;
    #: a process on another machine needs the same profile folder there)
    _LAZY = ("_fam", "_res", "_grids", "_tgrids", "_cpu")

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for k in self._LAZY:
            state[k] = {}
        return state

    @property
    def is_primary(self) -> bool:
        """Whether this is the primary set of its engine version: a flat folder, or a folder
        named exactly ``<engine>-<version>`` (not a variant such as ``vllm-0.19.0-lss``)."""
        return self.flat or self.name == f"{self.engine}-{self.engine_version}"

    # ---------------------------------------------------------------- files
    def _file(self, folder: Path, op: str) -> Path | None:
        for ext in (".parquet", ".csv"):
            p = folder / f"{op}{ext}"
            if p.is_file():
                return p
        return None

    def _donor(self, name: str) -> Path:
        d = self.folder.parent / str(name)
        if not d.is_dir():
            raise ValueError(f"{self.folder / PROVENANCE_FILE}: reused table set {name!r} "
                             f"not found next to it ({d})")
        return d

    def _default_kernels(self, meta: dict, op: str) -> set | None:
        dk = (meta.get("default_kernel") or {}).get(op)
        if not dk:
            return None
        return {dk} if isinstance(dk, str) else {str(x) for x in dk}

    def record(self, op: str) -> dict:
        """The ``provenance.yaml`` record of ``op`` as written (reuse not resolved)."""
        r = self._records.get(op)
        return dict(r) if isinstance(r, dict) else {}

    def families(self) -> list[str]:
        """Operator families this set can answer (own files, reused or filled ones)."""
        return [op for op in FAMILIES if self._source(op) is not None]

    def _source(self, op: str) -> Path | None:
        rec = self.record(op)
        if rec.get("reuse_of"):
            d = self.folder.parent / str(rec["reuse_of"])
            return self._file(d, op) if d.is_dir() else None
        return self._file(self.folder, op)

    def _family(self, op: str) -> _Family | None:
        import pandas as pd
        if op in self._fam:
            return self._fam[op]
        fam = None
        rec = self.record(op)
        defaults = self._default_kernels(self.meta, op)
        if rec.get("reuse_of"):
            d = self._donor(rec["reuse_of"])
            path = self._file(d, op)
            if path is None:
                raise ValueError(f"{self.folder / PROVENANCE_FILE}: {op} reuses "
                                 f"{rec['reuse_of']}, which has no {op} table")
            defaults = self._default_kernels(_read_yaml(d / PROVENANCE_FILE), op)
        else:
            path = self._file(self.folder, op)
        if path is not None and op in SCHEMAS:
            df = read_table_file(path, op)
            for donor in rec.get("fill_from") or ():
                d = self._donor(donor)
                dp = self._file(d, op)
                if dp is None:
                    continue
                ddf = read_table_file(dp, op)
                dk = self._default_kernels(_read_yaml(d / PROVENANCE_FILE), op)
                if dk:
                    ddf = ddf[ddf["kernel"].isin(dk)]
                s = SCHEMAS[op]
                coord = [*s.cat, *s.num, *s.grid]
                have = pd.MultiIndex.from_frame(df[coord])
                new = ~pd.MultiIndex.from_frame(ddf[coord]).isin(have)
                df = pd.concat([df, ddf[new]], ignore_index=True)
            fam = _Family(op, df, defaults)
        elif path is not None:   # cpu_overhead
            fam = read_table_file(path, op)
        self._fam[op] = fam
        return fam

    # ---------------------------------------------------------------- provenance
    def provenance(self, op: str) -> dict:
        """The provenance record of table ``op`` (reuse resolved: the donor's record, with
        ``reuse_of`` naming the donor set); empty dict when the set has no such table."""
        rec = self.record(op)
        if rec.get("reuse_of"):
            d = self.folder.parent / str(rec["reuse_of"])
            donor = _read_yaml(d / PROVENANCE_FILE)
            out = dict((donor.get("tables") or {}).get(op) or {})
            out.update({k: v for k, v in rec.items() if k not in out or k == "reuse_of"})
            return out
        if not rec and self._source(op) is not None:
            keys = ("kind", "harness_version", "torch_version", "cuda_version", "driver",
                    "date", "method", "device_name")
            return {k: self.meta[k] for k in keys if k in self.meta}
        return rec

    def label(self, op: str) -> str:
        """One-line provenance of table ``op``, e.g. ``measured (NVIDIA H100 80GB HBM3, vLLM
        0.19.0; aiconfigurator 095f58a gemm_perf.parquet)``; empty when absent."""
        if self._source(op) is None:
            return ""
        rec = self.provenance(op)
        if self.flat:
            date = str(rec.get("date") or self.meta.get("date") or "")[:10]
            hv = rec.get("harness_version") or self.meta.get("harness_version") or "?"
            return f"measured ({self.device_name}, servesim harness {hv}" \
                + (f", {date})" if date else ")")
        eng = {"vllm": "vLLM", "nccl": "NCCL"}.get(self.engine, self.engine)
        what = f"{eng} {self.engine_version}".strip()
        if rec.get("reuse_of"):
            what += f" reusing {rec['reuse_of']}"
        if rec.get("fill_from"):
            what += f" + missing shapes from {', '.join(map(str, rec['fill_from']))}"
        if rec.get("source_project"):
            files = rec.get("file", "")
            files = files if isinstance(files, list) else [files]
            names = ", ".join(sorted({Path(str(f)).name for f in files if f}))
            src = f"{rec['source_project']} {str(rec.get('commit', ''))[:7]} {names}".strip()
        else:
            date = str(rec.get("date") or "")[:10]
            hv = rec.get("harness_version")
            src = ", ".join(x for x in (f"servesim harness {hv}" if hv else "", date) if x)
        return f"measured ({self.device_name}, {what}{'; ' + src if src else ''})"
