"""Import NVIDIA AIConfigurator's measured vLLM kernel tables into servesim table sets.

Usage::

    servesim calibrate import-aic ../shared/reference/aiconfigurator -o hardware_profiles/
    servesim calibrate import-aic SRC -o DIR --gpu h100_sxm --versions 0.19.0 0.24.0

``SRC`` is a copy of AIConfigurator's ``systems/`` folder (``<gpu>.yaml`` files and
``data/<gpu>/<family>/<framework>/<version>/*.parquet``; github.com/ai-dynamo/aiconfigurator,
``aic-core/src/aiconfigurator_core/systems/``, Apache-2.0). For every GPU and vLLM version it
writes ``DIR/<profile>/tables/vllm-<version>/`` (``provenance.yaml`` and one zstd Parquet file
per family: ``gemm``, ``attention_prefill``, ``attention_decode``, ``all_reduce``, ``moe``) and
the GPU's NCCL table once, as ``DIR/<profile>/tables/nccl-<version>/nccl.parquet``, which every
vLLM set points at. Needs numpy, pandas, pyarrow and scipy only (no torch).

What the import changes (each table's ``provenance.yaml`` record lists it under ``changes``):

- units: latencies are milliseconds -> ``median_s`` seconds (/ 1e3); communication message
  sizes are elements of ``allreduce_dtype`` / ``nccl_dtype`` -> ``bytes`` (x 2 for bf16 and
  fp16 ``half``);
- names: ``gemm_dtype``/``attn_dtype``/``moe_dtype`` ``bfloat16 -> bf16``, ``fp8 -> fp8``;
  ``kv_cache_dtype`` likewise; context attention ``batch_size -> batch, isl -> q, start = 0``;
  generation attention ``batch_size -> batch, ctx_mean = isl + step`` (``isl`` is 1 and
  ``step`` the tokens already generated, so the kernel attends ``isl + step`` tokens);
  ``num_heads -> q_heads``, ``num_key_value_heads -> kv_heads``, ``window_size -> window`` (0
  when absent); custom all-reduce ``backend vllm_graph -> graph, vllm_eager -> eager``; MoE
  ``hidden_size, inter_size, moe_tp_size, moe_ep_size -> hidden, inter, moe_tp, moe_ep``;
  ``kernel_source -> kernel``; NCCL ``op_name -> op``, ``half -> fp16``;
- rows: only the dtypes servesim models (bf16 and fp8; fp16 for NCCL) are kept, other dtypes
  (``fp8_block``, ``nvfp4``, ``int4_wo``, ``w4a16_mxfp4``, NCCL ``int8``) are dropped and counted;
  repeated measurements of one coordinate are replaced by their median;
- columns: only the format's columns (plus ``kernel``) are written;
- outliers (:func:`drop_outliers`): along each table's size axis (GEMM ``m``; prefill ``q``;
  decode ``ctx_mean``; communication ``bytes``; MoE ``num_tokens``), with every other column
  fixed, time should not fall as the problem grows. Per line, ``log(time)`` is fitted by
  isotonic (monotone non-decreasing) regression and the point furthest from the fit is
  dropped while it is more than :data:`OUTLIER_FACTOR` (1.5x) off, keeping at least three
  points. 1.5x sits above the source's own repeat noise: over the 81,886 coordinates of these
  five families plus NCCL that it measured more than once, two measurements of one shape
  differ by at most 1.14x at the 99th and 1.37x at the 99.9th percentile (0.05% differ by more
  than 1.5x). Measurement noise and tile-quantization steps (which are monotone) stay; isolated
  spikes such as the single GEMM shapes the reference README reports up to 2.7x off go. The
  count per table is in ``outliers_dropped``.

Kernels: AIConfigurator's collector runs vLLM's own kernel selection, so each row's
``kernel_source`` is what vLLM dispatched for that shape (e.g. on L40S, FlashAttention 2 for a
bf16 KV cache, FlashInfer for an fp8 one, the decode wrapper for one-token prefill chunks).
Where two kernels were timed at the same coordinate (FA3 and FA4 on Hopper with vLLM 0.24),
the default is the one vLLM picks: FlashAttention 3 on sm90, FA4 on sm100, FA2 otherwise
(``vllm/v1/attention/backends/fa_utils.py`` ``get_flash_attn_version``; vLLM's CUDA backend
priority puts FLASH_ATTN first except on sm100, ``vllm/platforms/cuda.py``). The set's
``provenance.yaml`` names them in ``default_kernel``; other kernels stay selectable.

Versions and reuse: a GPU's vLLM versions are those that have a folder for any of the five
families. For one family and version: native rows are used when present; a ``reuse.yaml``
entry names a donor version: without native rows the table points at the donor set
(``reuse_of``, no data copied); with native rows (``self-overlap``), the donor fills the
coordinates the native table lacks (``fill_from``, merged when read, as aiconfigurator's
first-wins source order does). With neither, the nearest earlier version that has the table
is pointed at (aiconfigurator's shared-layer rule for earlier siblings). The NCCL table is the
one the GPU's system YAML names (``misc.nccl_version``).

The output is deterministic: rows sorted, Parquet written without library metadata, YAML with
a fixed key order, no timestamps.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from simulator.base.outdir import make_output_folder
from simulator.cli.args import output_path

#: a point this many times off the monotone fit of its line is dropped (module docstring)
OUTLIER_FACTOR = 1.5
SOURCE_PROJECT = "aiconfigurator"
SOURCE_URL = "https://github.com/ai-dynamo/aiconfigurator"
SOURCE_PREFIX = "aic-core/src/aiconfigurator_core/systems"
LICENSE = "Apache-2.0"

#: aiconfigurator system folder -> servesim profile name
GPU_PROFILES = {"h100_sxm": "h100-sxm", "a100_sxm": "a100-sxm-80gb", "h200_sxm": "h200-sxm",
                "l40s": "l40s", "rtx_pro_6000_server": "rtx-pro-6000-server"}
#: servesim family -> (aiconfigurator op-family folder, framework folder, table name)
SOURCES = {
    "gemm": ("gemm", "vllm", "gemm_perf"),
    "attention_prefill": ("attention", "vllm", "context_attention_perf"),
    "attention_decode": ("attention", "vllm", "generation_attention_perf"),
    "all_reduce": ("comm", "vllm", "custom_allreduce_perf"),
    "moe": ("moe", "vllm", "moe_perf"),
}
_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "fp8": "fp8"}
#: output columns per family, in order (``kernel`` is an extra column for gemm)
COLUMNS = {
    "gemm": ["dtype", "m", "n", "k", "median_s", "kernel"],
    "attention_prefill": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                          "kernel", "batch", "q", "start", "median_s"],
    "attention_decode": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                         "kernel", "batch", "ctx_mean", "median_s"],
    "all_reduce": ["dtype", "backend", "num_gpus", "bytes", "median_s"],
    "nccl": ["op", "dtype", "num_gpus", "bytes", "median_s"],
    "moe": ["dtype", "distribution", "kernel", "num_tokens", "hidden", "inter", "topk",
            "num_experts", "moe_tp", "moe_ep", "median_s"],
}
#: the size axis along which time must not fall (outlier rule)
SIZE_AXIS = {"gemm": "m", "attention_prefill": "q", "attention_decode": "ctx_mean",
             "all_reduce": "bytes", "nccl": "bytes", "moe": "num_tokens"}
#: FlashAttention version vLLM defaults to per SM generation (vLLM fa_utils.py)
_FA_BY_SM = {90: "fa3", 100: "fa4"}


class ImportErrorAIC(ValueError):
    """A malformed source folder or table (one line naming the file)."""


# ------------------------------------------------------------------------------ conversion
def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - any reader failure is a bad source file
        raise ImportErrorAIC(f"{path}: cannot read: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}") from None


def _need(df: pd.DataFrame, cols, path: Path) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ImportErrorAIC(f"{path}: lacks column(s) {', '.join(missing)}")


def convert(family: str, df: pd.DataFrame, path: Path | str = "<table>") -> tuple[pd.DataFrame,
                                                                                   list, int]:
    """Convert one aiconfigurator table to the servesim format (units, names, dtypes).

    Parameters
    ----------
    family : str
        ``gemm``, ``attention_prefill``, ``attention_decode``, ``all_reduce``, ``nccl``, ``moe``.
    df : DataFrame
        The source table as read.
    path : str or Path
        Named in error messages.

    Returns
    -------
    (DataFrame, list of str, int)
        The converted rows (columns :data:`COLUMNS`), the ``changes`` lines describing the
        conversion, and the number of source rows dropped for their dtype.

    Raises
    ------
    ImportErrorAIC
        When a required source column is missing.
    """
    path = Path(str(path))
    ms = "latency ms -> median_s seconds (/ 1e3)"
    n0 = len(df)
    if family == "gemm":
        _need(df, ["gemm_dtype", "m", "n", "k", "latency"], path)
        d = df[df["gemm_dtype"].isin(list(_DTYPES))]
        out = pd.DataFrame({"dtype": d["gemm_dtype"].map(_DTYPES), "m": d["m"], "n": d["n"],
                            "k": d["k"], "median_s": d["latency"] / 1e3,
                            "kernel": d.get("kernel_source", pd.Series("", index=d.index))})
        ch = [ms, "gemm_dtype bfloat16 -> dtype bf16, fp8 -> fp8; kernel_source -> kernel"]
    elif family in ("attention_prefill", "attention_decode"):
        cols = ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim",
                "attn_dtype", "kv_cache_dtype", "latency"]
        if family == "attention_decode":
            cols.append("step")
        _need(df, cols, path)
        d = df[df["attn_dtype"].isin(list(_DTYPES)) & df["kv_cache_dtype"].isin(list(_DTYPES))]
        window = d["window_size"] if "window_size" in d.columns else 0
        out = pd.DataFrame({
            "dtype": d["attn_dtype"].map(_DTYPES), "kv_dtype": d["kv_cache_dtype"].map(_DTYPES),
            "q_heads": d["num_heads"], "kv_heads": d["num_key_value_heads"],
            "head_dim": d["head_dim"], "window": window,
            "kernel": d.get("kernel_source", pd.Series("", index=d.index)),
            "batch": d["batch_size"]}, index=d.index)
        if family == "attention_prefill":
            out["q"] = d["isl"]
            out["start"] = 0
            ch = [ms, "batch_size -> batch, isl -> q, start = 0 (no cached prefix measured)"]
        else:
            out["ctx_mean"] = d["isl"] + d["step"]
            ch = [ms, ("batch_size -> batch; ctx_mean = isl + step (isl 1, step = tokens "
                       "already generated: the kernel attends isl + step tokens)")]
        out["median_s"] = d["latency"] / 1e3
        ch.append("attn_dtype/kv_cache_dtype bfloat16 -> bf16, fp8 -> fp8; num_heads -> q_heads, "
                  "num_key_value_heads -> kv_heads, window_size -> window"
                  + ("" if "window_size" in d.columns else " (absent: 0 = full attention)")
                  + "; kernel_source -> kernel; beam_width (1) dropped")
    elif family == "all_reduce":
        _need(df, ["allreduce_dtype", "num_gpus", "message_size", "backend", "latency"], path)
        d = df[df["allreduce_dtype"].isin(["bfloat16", "float16", "half"])]
        out = pd.DataFrame({
            "dtype": d["allreduce_dtype"].map({"bfloat16": "bf16", "float16": "fp16",
                                               "half": "fp16"}),
            "backend": d["backend"].map({"vllm_graph": "graph", "vllm_eager": "eager"})
            .fillna(d["backend"]),
            "num_gpus": d["num_gpus"], "bytes": d["message_size"] * 2,
            "median_s": d["latency"] / 1e3})
        ch = [ms, "message_size (elements of allreduce_dtype) -> bytes (x 2, bf16)",
              ("backend vllm_graph -> graph, vllm_eager -> eager; vLLM's "
               "tensor_model_parallel_all_reduce as vLLM dispatches it (custom all-reduce or "
               "NCCL)")]
    elif family == "nccl":
        _need(df, ["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"], path)
        d = df[df["nccl_dtype"].isin(["half", "float16", "bfloat16"])]
        out = pd.DataFrame({
            "op": d["op_name"],
            "dtype": d["nccl_dtype"].map({"half": "fp16", "float16": "fp16",
                                          "bfloat16": "bf16"}),
            "num_gpus": d["num_gpus"], "bytes": d["message_size"] * 2,
            "median_s": d["latency"] / 1e3})
        ch = [ms, "message_size (elements of nccl_dtype) -> bytes (x 2, half = fp16)",
              "op_name -> op; nccl_dtype half -> dtype fp16 (answers bf16 queries: same bytes)"]
    elif family == "moe":
        _need(df, ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                   "moe_tp_size", "moe_ep_size", "distribution", "latency"], path)
        d = df[df["moe_dtype"].isin(list(_DTYPES))]
        out = pd.DataFrame({
            "dtype": d["moe_dtype"].map(_DTYPES), "distribution": d["distribution"],
            "kernel": d.get("kernel_source", pd.Series("", index=d.index)),
            "num_tokens": d["num_tokens"], "hidden": d["hidden_size"], "inter": d["inter_size"],
            "topk": d["topk"], "num_experts": d["num_experts"], "moe_tp": d["moe_tp_size"],
            "moe_ep": d["moe_ep_size"], "median_s": d["latency"] / 1e3})
        ch = [ms, ("moe_dtype bfloat16 -> dtype bf16, fp8 -> fp8; hidden_size -> hidden, "
                   "inter_size -> inter, moe_tp_size -> moe_tp, moe_ep_size -> moe_ep; "
                   "kernel_source -> kernel")]
    else:
        raise ImportErrorAIC(f"{path}: unknown family {family!r}")
    dropped = n0 - len(out)
    if dropped:
        cols = {"gemm": ["gemm_dtype"], "moe": ["moe_dtype"], "all_reduce": ["allreduce_dtype"],
                "nccl": ["nccl_dtype"]}.get(family, ["attn_dtype", "kv_cache_dtype"])
        rest = df.loc[~df.index.isin(out.index)]
        gone = sorted({str(v) for c in cols for v in rest[c]}
                      - {"bfloat16", "bf16", "fp8", "half", "float16"})
        kept = "fp16/bf16" if family in ("all_reduce", "nccl") else "bf16, fp8"
        ch.append(f"{dropped} rows of dtypes servesim does not model dropped (kept {kept}"
                  + (f"; dropped {', '.join(gone)}" if gone else "") + ")")
    out = out[COLUMNS[family]].copy()
    for c in COLUMNS[family]:
        if c in ("dtype", "kv_dtype", "kernel", "backend", "distribution", "op"):
            out[c] = out[c].fillna("").astype(str)
        elif c != "median_s":
            out[c] = out[c].astype("int64")
    out["median_s"] = out["median_s"].astype(float)
    ok = np.isfinite(out["median_s"].to_numpy()) & (out["median_s"].to_numpy() > 0)
    if (~ok).any():
        ch.append(f"{int((~ok).sum())} rows with a non-positive or missing latency dropped")
        out = out[ok]
    return out.reset_index(drop=True), ch, dropped


def dedupe(family: str, df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Replace repeated measurements of one coordinate (every column but ``median_s``) by
    their median. Returns the rows and how many source rows were merged away."""
    keys = [c for c in COLUMNS[family] if c != "median_s"]
    g = df.groupby(keys, sort=True, dropna=False)["median_s"].median().reset_index()
    return g[COLUMNS[family]], len(df) - len(g)


def _isotonic_keep(t: np.ndarray, factor: float) -> np.ndarray:
    from scipy.optimize import isotonic_regression
    lt = np.log(t)
    keep = np.ones(len(t), dtype=bool)
    lim = np.log(factor)
    while keep.sum() > 3:
        idx = np.flatnonzero(keep)
        fit = isotonic_regression(lt[idx]).x
        r = np.abs(lt[idx] - fit)
        j = int(np.argmax(r))
        if r[j] <= lim:
            break
        keep[idx[j]] = False
    return keep


def drop_outliers(family: str, df: pd.DataFrame, factor: float = OUTLIER_FACTOR,
                  alternates: frozenset = frozenset()) -> tuple[pd.DataFrame, int]:
    """Drop points more than ``factor`` times off the monotone fit of their line.

    A line is every row with the same values of all columns but the family's size axis
    (:data:`SIZE_AXIS`) and ``median_s``; the rows of kernels vLLM dispatches by shape are one
    line across kernels (``kernel`` ignored), an ``alternates`` kernel is a line of its own.
    See the module docstring for the rule. Returns the kept rows and the number dropped.
    """
    axis = SIZE_AXIS[family]
    d = df.copy()
    line_cols = [c for c in COLUMNS[family] if c not in (axis, "median_s", "kernel")]
    if "kernel" in d.columns:
        d["_line_kernel"] = np.where(d["kernel"].isin(alternates), d["kernel"], "*")
        line_cols.append("_line_kernel")
    d = d.sort_values(line_cols + [axis], kind="mergesort").reset_index(drop=True)
    keep = np.ones(len(d), dtype=bool)
    for idx in d.groupby(line_cols, sort=False).indices.values():
        if len(idx) < 4:
            continue
        t = d["median_s"].to_numpy(float)[idx]
        keep[idx] = _isotonic_keep(t, factor)
    d = d[keep].drop(columns=[c for c in ("_line_kernel",) if c in d.columns])
    return d.reset_index(drop=True), int((~keep).sum())


def default_kernels(family: str, df: pd.DataFrame, sm_version: int | None) -> tuple[list, list]:
    """(default kernels, alternate kernels) of an attention or MoE table (module docstring)."""
    if "kernel" not in df.columns:
        return [], []
    ks = sorted(set(df["kernel"]))
    if len(ks) <= 1:
        return ks, []
    coord = [c for c in COLUMNS[family] if c not in ("kernel", "median_s")]
    pref = _FA_BY_SM.get(int(sm_version or 0), "fa2")
    counts = df["kernel"].value_counts().to_dict()

    def rank(k):
        return (0 if k.endswith(pref) else 1, -counts.get(k, 0), k)

    losers = set()
    multi = df.groupby(coord, sort=False)["kernel"].agg(lambda s: tuple(sorted(set(s))))
    for combo in sorted(set(multi[multi.map(len) > 1])):
        best = min(combo, key=rank)
        losers.update(k for k in combo if k != best)
    return [k for k in ks if k not in losers], sorted(losers)


# ------------------------------------------------------------------------------ writing
def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` as zstd Parquet without pandas/library metadata (deterministic bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pa.Table.from_pandas(df, preserve_index=False)
    t = t.replace_schema_metadata(None)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, path, compression="zstd", compression_level=19, use_dictionary=True,
                   write_statistics=False)


def _dump_yaml(doc: dict, path: Path, header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100,
                          allow_unicode=True)
    path.write_text(header + text)


# ------------------------------------------------------------------------------ source layout
def _source_commit(src: Path) -> str:
    for p in (src / "README.md", src.parent / "README.md"):
        if p.is_file():
            m = re.search(r"commit\s+([0-9a-f]{40})", p.read_text())
            if m:
                return m.group(1)
    return "unknown"


def _data_root(src: Path) -> Path:
    src = Path(src)
    if (src / "data").is_dir():
        return src / "data"
    if src.name == "data" and src.is_dir():
        return src
    raise ImportErrorAIC(f"{src}: not an aiconfigurator systems folder (no data/ inside)")


def _system_yaml(src_root: Path, gpu: str) -> dict:
    p = src_root / f"{gpu}.yaml"
    if not p.is_file():
        return {}
    try:
        return yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ImportErrorAIC(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None


def _reuse_entries(d: Path) -> list[dict]:
    p = d / "reuse.yaml"
    if not p.is_file():
        return []
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ImportErrorAIC(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    ent = doc.get("reuse") if isinstance(doc, dict) else None
    if not isinstance(ent, list):
        raise ImportErrorAIC(f"{p}: expected a top-level 'reuse' list")
    out = []
    for e in ent:
        if not isinstance(e, dict) or "table" not in e or "from_version" not in e:
            raise ImportErrorAIC(f"{p}: each reuse entry needs 'table' and 'from_version'")
        out.append({k: str(e.get(k, "")) for k in ("table", "from_version", "reason",
                                                   "approved_by")})
    return out


def _versions(root: Path, gpu: str) -> list[str]:
    vs = set()
    for opdir, fw, _ in SOURCES.values():
        d = root / gpu / opdir / fw
        if d.is_dir():
            vs.update(p.name for p in d.iterdir() if p.is_dir())
    return sorted(vs, key=_vkey)


def _vkey(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v))


class _Plan:
    """How one family of one version is sourced: native rows, reuse, fill, earlier sibling."""

    def __init__(self, mode: str, native: Path | None = None, donors=(), reason: str = ""):
        self.mode, self.native, self.donors, self.reason = mode, native, list(donors), reason


def _plan(root: Path, gpu: str, family: str, version: str, versions: list[str]) -> _Plan | None:
    opdir, fw, table = SOURCES[family]

    def native(v):
        p = root / gpu / opdir / fw / v / f"{table}.parquet"
        return p if p.is_file() else None

    def resolve(v, seen=()):
        """Version whose native file answers version ``v`` (following reuse declarations)."""
        if v in seen:
            return None
        if native(v):
            return v
        for e in _reuse_entries(root / gpu / opdir / fw / v):
            if e["table"] == table:
                r = resolve(e["from_version"], (*seen, v))
                if r:
                    return r
        return None

    here = native(version)
    decl = [e for e in _reuse_entries(root / gpu / opdir / fw / version) if e["table"] == table]
    donors = []
    for e in decl:
        r = resolve(e["from_version"], (version,))
        if r and r != version and r not in [d for d, _ in donors]:
            donors.append((r, e))
    if here and donors:
        return _Plan("fill", here, donors, "")
    if here:
        return _Plan("native", here)
    if donors:
        return _Plan("reuse", None, donors[:1], "")
    earlier = [v for v in versions if _vkey(v) < _vkey(version)]
    for v in reversed(earlier):
        r = resolve(v)
        if r:
            return _Plan("earlier", None, [(r, {})],
                         f"no {table} for vLLM {version} in the source and no reuse.yaml entry; "
                         f"aiconfigurator's shared-layer rule reads the nearest earlier "
                         f"version that has one ({v})")
    return None


# ------------------------------------------------------------------------------ import
def _import_table(family: str, path: Path, src_root: Path, commit: str, sm: int | None,
                  rel: str) -> tuple[pd.DataFrame, dict, list, list]:
    raw = _read(path)
    df, changes, _ = convert(family, raw, path)
    df, dups = dedupe(family, df)
    if dups:
        changes.append(f"{dups} repeated measurements of an existing coordinate merged "
                       "(median per coordinate)")
    defaults, alternates = (default_kernels(family, df, sm)
                            if family in ("attention_prefill", "attention_decode", "moe")
                            else ([], []))
    df, nout = drop_outliers(family, df, alternates=frozenset(alternates))
    changes.append(f"outliers: {nout} points more than {OUTLIER_FACTOR:g}x off the isotonic "
                   f"(non-decreasing in {SIZE_AXIS[family]}) fit of log time along "
                   f"{SIZE_AXIS[family]} dropped (calibration/import_aic.py drop_outliers)")
    if alternates:
        changes.append(f"kernels timed at the same coordinates as vLLM's default kept as "
                       f"alternates (kernel=...): {', '.join(alternates)}")
    keys = [c for c in COLUMNS[family] if c != "median_s"]
    df = df.sort_values(keys, kind="mergesort").reset_index(drop=True)
    versions_in = sorted(set(map(str, raw["version"]))) if "version" in raw.columns else []
    devices = sorted(set(map(str, raw["device"]))) if "device" in raw.columns else []
    rec = {
        "source_project": SOURCE_PROJECT, "source_url": SOURCE_URL, "commit": commit,
        "file": f"{SOURCE_PREFIX}/{rel}", "engine_version": path.parent.name,
        "engine_version_in_file": versions_in, "device": devices[0] if len(devices) == 1
        else devices, "license": LICENSE, "changes": changes,
        "rows_source": len(raw), "rows": len(df), "outliers_dropped": int(nout),
    }
    if "kernel" in df.columns:
        rec["kernels"] = sorted(set(df["kernel"]))
    return df, rec, defaults, alternates


def import_aic(src: str | Path, out_dir: str | Path, gpus=None, versions=None,
               commit: str | None = None, log=None) -> list[Path]:
    """Convert aiconfigurator's vLLM tables under ``src`` into servesim table sets.

    Parameters
    ----------
    src : path
        aiconfigurator ``systems/`` folder (holding ``data/`` and ``<gpu>.yaml``), or its
        ``data/`` folder.
    out_dir : path
        Folder of GPU profiles (``hardware_profiles/``); sets go to
        ``<out_dir>/<profile>/tables/``.
    gpus : list of str, optional
        aiconfigurator GPU folders (``h100_sxm``) or servesim profile names (``h100-sxm``);
        default: every GPU under ``data/``.
    versions : list of str, optional
        vLLM versions to write (default: all the source holds for that GPU).
    commit : str, optional
        Source commit to record (default: parsed from ``README.md`` next to ``data/``).
    log : callable, optional
        Receives one progress line per set.

    Returns
    -------
    list of Path
        The table-set folders written.

    Raises
    ------
    ValueError
        (``ImportErrorAIC``) one line naming the file or folder at fault: no ``data/``, an
        unknown GPU or version, an unreadable table, a missing column.
    """
    log = log or (lambda s: None)
    root = _data_root(Path(src))
    src_root = root.parent
    commit = commit or _source_commit(src_root)
    out_dir = Path(out_dir)
    available = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not available:
        raise ImportErrorAIC(f"{root}: no GPU folder inside (expected aiconfigurator's "
                             "data/<gpu>/<op>/vllm/<version>/ tables, e.g. data/h100_sxm/)")
    rev = {GPU_PROFILES.get(a, a.replace("_", "-")): a for a in available}
    todo = available
    if gpus:
        todo = []
        for g in gpus:
            g2 = rev.get(g, g)
            if g2 not in available:
                raise ImportErrorAIC(f"{root}: no GPU {g!r}; available: {', '.join(available)}")
            todo.append(g2)
    # -o before any note or table: a file in the way, /proc, /dev/null (one line, exit 2)
    make_output_folder(out_dir, ImportErrorAIC)
    written = []
    for gpu in todo:
        profile = GPU_PROFILES.get(gpu, gpu.replace("_", "-"))
        sysy = _system_yaml(src_root, gpu)
        sm = (sysy.get("gpu") or {}).get("sm_version")
        nccl_ver = str((sysy.get("misc") or {}).get("nccl_version") or "")
        all_versions = _versions(root, gpu)
        want = all_versions
        if versions:
            asked = [str(v) for v in versions]
            want = [v for v in all_versions if v in asked]
            missing = sorted(set(asked) - set(all_versions))
            if missing and gpus:
                raise ImportErrorAIC(f"{root / gpu}: no vLLM version(s) {', '.join(missing)}; "
                                     f"available: {', '.join(all_versions)}")
        tables_dir = out_dir / profile / "tables"
        if not (out_dir / profile / "spec.yaml").is_file():
            log(f"note: {out_dir / profile / 'spec.yaml'} is missing; write one (datasheet "
                "figures with sources) before using these tables")
        nccl_set = None
        ndir = root / gpu / "comm" / "nccl" / nccl_ver
        if nccl_ver and (ndir / "nccl_perf.parquet").is_file():
            nccl_set = f"nccl-{nccl_ver}"
            p = ndir / "nccl_perf.parquet"
            df, rec, _, _ = _import_table("nccl", p, src_root, commit, sm,
                                          str(p.relative_to(src_root)))
            rec["engine_version"] = nccl_ver
            rec["changes"].append(f"the NCCL version named by {gpu}.yaml misc.nccl_version; "
                                  "other NCCL versions in the source not imported")
            d = tables_dir / nccl_set
            write_parquet(df, d / "nccl.parquet")
            _dump_yaml({"kind": "measured", "engine": "nccl", "engine_version": nccl_ver,
                        "device_name": _device(df, rec, sysy, gpu), "gpu_profile": profile,
                        "tables": {"nccl": rec}}, d / "provenance.yaml", _HEADER)
            written.append(d)
            log(f"{profile}/tables/{nccl_set}: nccl {rec['rows']} rows")
        device_names = {}
        for v in want:
            prov_tables, defaults, summary = {}, {}, []
            d = tables_dir / f"vllm-{v}"
            for fam, (_, _, table) in SOURCES.items():
                plan = _plan(root, gpu, fam, v, all_versions)
                if plan is None:
                    continue
                if plan.mode in ("native", "fill"):
                    rel = str(plan.native.relative_to(src_root))
                    df, rec, dk, _ = _import_table(fam, plan.native, src_root, commit, sm, rel)
                    write_parquet(df, d / f"{fam}.parquet")
                    device_names.setdefault(v, rec["device"])
                    if plan.mode == "fill":
                        rec["fill_from"] = [f"vllm-{dv}" for dv, _ in plan.donors]
                        rec["fill_reason"] = "; ".join(
                            f"reuse.yaml: {table} from {e.get('from_version')} "
                            f"({e.get('reason', '')})" for _, e in plan.donors)
                        rec["changes"].append(
                            "coordinates absent here are read from "
                            + ", ".join(rec["fill_from"])
                            + " (its default kernels) when the set is loaded, not copied")
                        for dv, _ in plan.donors:
                            dk = sorted(set(dk) | set(_donor_defaults(root, gpu, fam, dv, sm)))
                    if dk and fam != "gemm":
                        defaults[fam] = dk[0] if len(dk) == 1 else dk
                    prov_tables[fam] = rec
                    summary.append(f"{fam} {rec['rows']}" + (" +fill" if plan.mode == "fill"
                                                             else ""))
                else:
                    dv, e = plan.donors[0]
                    reason = plan.reason or (f"aiconfigurator reuse.yaml: {table} from_version "
                                             f"{e.get('from_version')} ({e.get('reason', '')}; "
                                             f"approved_by {e.get('approved_by', '')})")
                    prov_tables[fam] = {"reuse_of": f"vllm-{dv}", "reuse_reason": reason}
                    ddk = _donor_defaults(root, gpu, fam, dv, sm)
                    if ddk and fam != "gemm":
                        defaults[fam] = ddk[0] if len(ddk) == 1 else ddk
                    summary.append(f"{fam} -> vllm-{dv}")
            if nccl_set:
                prov_tables["nccl"] = {"reuse_of": nccl_set,
                                       "reuse_reason": f"the GPU's NCCL table ({gpu}.yaml "
                                                       f"misc.nccl_version {nccl_ver})"}
            if not prov_tables:
                continue
            doc = {"kind": "measured", "engine": "vllm", "engine_version": v,
                   "device_name": device_names.get(v) or _device_any(root, gpu, sysy),
                   "gpu_profile": profile, "sm_version": sm}
            if defaults:
                doc["default_kernel"] = defaults
            doc["tables"] = prov_tables
            _dump_yaml(doc, d / "provenance.yaml", _HEADER)
            written.append(d)
            log(f"{profile}/tables/vllm-{v}: " + ", ".join(summary))
    if not written:
        raise ImportErrorAIC(f"{root}: no vLLM kernel table for GPU(s) {', '.join(todo)}"
                             + (f" at version(s) {', '.join(map(str, versions))}"
                                if versions else "")
                             + " (expected <gpu>/{gemm,attention,comm,moe}/vllm/<version>/"
                             "*_perf.parquet)")
    return written


_HEADER = ("# servesim table set (format v2), derived from NVIDIA AIConfigurator's measured\n"
           "# kernel tables (Apache-2.0) by calibration/import_aic.py; each table's record names\n"
           "# the source file, commit and the changes made. Regenerate, do not edit.\n")


def _device(df, rec, sysy, gpu) -> str:
    d = rec.get("device")
    return d if isinstance(d, str) and d else gpu


def _device_any(root: Path, gpu: str, sysy: dict) -> str:
    for p in sorted((root / gpu).rglob("*.parquet")):
        try:
            import pyarrow.parquet as pq
            t = pq.read_table(p, columns=["device"])
            vals = sorted(set(t.column("device").to_pylist()))
            if len(vals) == 1 and vals[0]:
                return str(vals[0])
        except Exception:  # noqa: BLE001, S112 - a file without the column: try the next
            continue
    return gpu


def _donor_defaults(root: Path, gpu: str, fam: str, version: str, sm) -> list:
    if fam not in ("attention_prefill", "attention_decode", "moe"):
        return []
    opdir, fw, table = SOURCES[fam]
    p = root / gpu / opdir / fw / version / f"{table}.parquet"
    if not p.is_file():
        return []
    df, _, _ = convert(fam, _read(p), p)
    return default_kernels(fam, df, sm)[0]


# ------------------------------------------------------------------------------ CLI
def main(argv: list[str] | None = None) -> int:
    """``python -m calibration.import_aic SRC -o DIR [--gpu G ...] [--versions V ...]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    try:
        run(args)
    except ValueError as e:
        print(f"import-aic: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The import-aic arguments (shared by ``servesim calibrate import-aic``)."""
    ap.add_argument("src", help="aiconfigurator systems folder (holding data/ and <gpu>.yaml)")
    ap.add_argument("-o", "--output", required=True, type=output_path,
                    help="folder of GPU profiles to write into (hardware_profiles/)")
    ap.add_argument("--gpu", action="append", metavar="G",
                    help="aiconfigurator GPU folder or servesim profile name (repeatable; "
                         "default: all)")
    ap.add_argument("--versions", nargs="+", metavar="V", help="vLLM versions (default: all)")
    ap.add_argument("--commit", help="source commit to record (default: from README.md)")
    ap.add_argument("-q", "--quiet", action="store_true")


def run(args) -> list[Path]:
    """Run an import from parsed :func:`add_arguments` arguments; prints one line per set."""
    log = (lambda s: None) if getattr(args, "quiet", False) else print
    out = import_aic(args.src, args.output, gpus=args.gpu, versions=args.versions,
                     commit=args.commit, log=log)
    if not getattr(args, "quiet", False):
        print(f"wrote {len(out)} table set(s) under {args.output}")
    return out


if __name__ == "__main__":
    sys.exit(main())
