"""Convert one aiconfigurator table into servesim's format (for :mod:`calibration.import_aic`).

Units, names and dtypes per family, with the ``changes`` lines the table's provenance record
carries; :mod:`calibration.import_aic`'s docstring lists every rule. Needs numpy and pandas.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .aic_source import ImportErrorAIC

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

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
_MS = "latency ms -> median_s seconds (/ 1e3)"
#: source dtype columns per family (rows of other dtypes are dropped and counted)
_DTYPE_COLUMNS = {"gemm": ["gemm_dtype"], "moe": ["moe_dtype"],
                  "all_reduce": ["allreduce_dtype"], "nccl": ["nccl_dtype"],
                  "attention_prefill": ["attn_dtype", "kv_cache_dtype"],
                  "attention_decode": ["attn_dtype", "kv_cache_dtype"]}
_STRING = ("dtype", "kv_dtype", "kernel", "backend", "distribution", "op")


def _need(df: pd.DataFrame, cols, path: Path) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ImportErrorAIC(f"{path}: lacks column(s) {', '.join(missing)}")


def _kernel(d: pd.DataFrame) -> pd.Series:
    import pandas as pd

    return d.get("kernel_source", pd.Series("", index=d.index))


def _gemm(family: str, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list]:
    import pandas as pd

    _need(df, ["gemm_dtype", "m", "n", "k", "latency"], path)
    d = df[df["gemm_dtype"].isin(list(_DTYPES))]
    out = pd.DataFrame({"dtype": d["gemm_dtype"].map(_DTYPES), "m": d["m"], "n": d["n"],
                        "k": d["k"], "median_s": d["latency"] / 1e3, "kernel": _kernel(d)})
    return out, [_MS, "gemm_dtype bfloat16 -> dtype bf16, fp8 -> fp8; kernel_source -> kernel"]


def _attention(family: str, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list]:
    import pandas as pd

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
        "head_dim": d["head_dim"], "window": window, "kernel": _kernel(d),
        "batch": d["batch_size"]}, index=d.index)
    if family == "attention_prefill":
        out["q"] = d["isl"]
        out["start"] = 0
        ch = [_MS, "batch_size -> batch, isl -> q, start = 0 (no cached prefix measured)"]
    else:
        out["ctx_mean"] = d["isl"] + d["step"]
        ch = [_MS, ("batch_size -> batch; ctx_mean = isl + step (isl 1, step = tokens "
                    "already generated: the kernel attends isl + step tokens)")]
    out["median_s"] = d["latency"] / 1e3
    ch.append("attn_dtype/kv_cache_dtype bfloat16 -> bf16, fp8 -> fp8; num_heads -> q_heads, "
              "num_key_value_heads -> kv_heads, window_size -> window"
              + ("" if "window_size" in d.columns else " (absent: 0 = full attention)")
              + "; kernel_source -> kernel; beam_width (1) dropped")
    return out, ch


def _all_reduce(family: str, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list]:
    import pandas as pd

    _need(df, ["allreduce_dtype", "num_gpus", "message_size", "backend", "latency"], path)
    d = df[df["allreduce_dtype"].isin(["bfloat16", "float16", "half"])]
    out = pd.DataFrame({
        "dtype": d["allreduce_dtype"].map({"bfloat16": "bf16", "float16": "fp16",
                                           "half": "fp16"}),
        "backend": d["backend"].map({"vllm_graph": "graph", "vllm_eager": "eager"})
        .fillna(d["backend"]),
        "num_gpus": d["num_gpus"], "bytes": d["message_size"] * 2,
        "median_s": d["latency"] / 1e3})
    return out, [_MS, "message_size (elements of allreduce_dtype) -> bytes (x 2, bf16)",
                 ("backend vllm_graph -> graph, vllm_eager -> eager; vLLM's "
                  "tensor_model_parallel_all_reduce as vLLM dispatches it (custom all-reduce "
                  "or NCCL)")]


def _nccl(family: str, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list]:
    import pandas as pd

    _need(df, ["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"], path)
    d = df[df["nccl_dtype"].isin(["half", "float16", "bfloat16"])]
    out = pd.DataFrame({
        "op": d["op_name"],
        "dtype": d["nccl_dtype"].map({"half": "fp16", "float16": "fp16", "bfloat16": "bf16"}),
        "num_gpus": d["num_gpus"], "bytes": d["message_size"] * 2,
        "median_s": d["latency"] / 1e3})
    return out, [_MS, "message_size (elements of nccl_dtype) -> bytes (x 2, half = fp16)",
                 ("op_name -> op; nccl_dtype half -> dtype fp16 (answers bf16 queries: same "
                  "bytes)")]


def _moe(family: str, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list]:
    import pandas as pd

    _need(df, ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
               "moe_tp_size", "moe_ep_size", "distribution", "latency"], path)
    d = df[df["moe_dtype"].isin(list(_DTYPES))]
    out = pd.DataFrame({
        "dtype": d["moe_dtype"].map(_DTYPES), "distribution": d["distribution"],
        "kernel": _kernel(d), "num_tokens": d["num_tokens"], "hidden": d["hidden_size"],
        "inter": d["inter_size"], "topk": d["topk"], "num_experts": d["num_experts"],
        "moe_tp": d["moe_tp_size"], "moe_ep": d["moe_ep_size"],
        "median_s": d["latency"] / 1e3})
    return out, [_MS, ("moe_dtype bfloat16 -> dtype bf16, fp8 -> fp8; hidden_size -> hidden, "
                       "inter_size -> inter, moe_tp_size -> moe_tp, moe_ep_size -> moe_ep; "
                       "kernel_source -> kernel")]


#: family -> its converter: (family, source table, path) -> (rows, changes)
_CONVERTERS = {"gemm": _gemm, "attention_prefill": _attention, "attention_decode": _attention,
               "all_reduce": _all_reduce, "nccl": _nccl, "moe": _moe}


def _dtype_note(family: str, df: pd.DataFrame, out: pd.DataFrame, dropped: int) -> str:
    """The ``changes`` line counting the source rows dropped for their dtype."""
    rest = df.loc[~df.index.isin(out.index)]
    gone = sorted({str(v) for c in _DTYPE_COLUMNS[family] for v in rest[c]}
                  - {"bfloat16", "bf16", "fp8", "half", "float16"})
    kept = "fp16/bf16" if family in ("all_reduce", "nccl") else "bf16, fp8"
    return (f"{dropped} rows of dtypes servesim does not model dropped (kept {kept}"
            + (f"; dropped {', '.join(gone)}" if gone else "") + ")")


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
        When a required source column is missing, or ``family`` is none of the above.
    """
    path = Path(str(path))
    if family not in _CONVERTERS:
        raise ImportErrorAIC(f"{path}: unknown family {family!r}")
    out, ch = _CONVERTERS[family](family, df, path)
    dropped = len(df) - len(out)
    if dropped:
        ch.append(_dtype_note(family, df, out, dropped))
    out = out[COLUMNS[family]].copy()
    for c in COLUMNS[family]:
        if c in _STRING:
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
