"""Measured kernel tables (format v2): load a GPU profile's table sets, answer operator times.

A GPU profile folder ``hardware_profiles/<gpu>/`` holds ``spec.yaml`` and any number of *table
sets*, one per engine version, in ``tables/<engine>-<version>/`` (``provenance.yaml`` plus one
file per operator family, ``<family>.parquet`` or ``<family>.csv``, same columns). A flat
harness folder (tables next to ``spec.yaml``, harness v1) is one table set too. Times are
**seconds per call, one layer, one GPU** in column ``median_s``; rows are keyed by the operator's
shape at the TP shard, not by model name (see ``hardware_profiles/README.md`` for the columns).

Method (DESIGN.md section 3). For an operator with roofline bound ``R(x)`` (the functions
``*_roofline_s`` below: FLOPs at the datasheet peak vs bytes at the datasheet HBM bandwidth,
whichever is longer) and measured time ``t_i`` at grid point ``x_i``, the achieved efficiency
is ``e_i = R(x_i) / t_i``. Per key group (e.g. one dtype for GEMM; one dtype, KV dtype, head
layout and window for attention) the ``log e_i`` sit on a rectangular grid over the size
coordinates ``u = log2(size)`` (``log2(1 + size)`` for an axis that may be 0, ``start``):

============================  ===============================  ===================================
family                        key columns                      grid axes (u coordinates)
============================  ===============================  ===================================
``gemm``                      ``dtype``                        ``m`` x ``n`` x ``k``
``attention_prefill``         dtype, kv_dtype, kernel; heads,  ``q`` x ``batch`` x ``start``
                              head_dim, window (nearest)
``attention_decode``          same                             ``ctx_mean`` x ``batch``
``all_reduce``                dtype, backend; num_gpus         ``bytes``
``nccl``                      op, dtype; num_gpus              ``bytes``
``moe``                       dtype, distribution, kernel;     ``num_tokens``
                              hidden, inter, topk, experts,
                              moe_tp, moe_ep (nearest)
``elementwise``, ``lm_head``  dtype; shape (nearest)           ``tokens`` / ``rows``
============================  ===============================  ===================================

Grid cells that were not measured are filled with what a query would return were they
absent: cells between measured cells along an axis by linear interpolation in ``u`` of log
time (log bound minus log efficiency) between the nearest measured cells on both sides, the
median over the axes along which the cell is bracketed (the mean for two; the median of three
resists a tile-boundary step on one axis); cells bracketed nowhere hold the efficiency of the
nearest measured cell.

A query ``x`` with keys ``q`` (its bound ``R_q``) is answered from the grid of
``log R_q(node) - log e(node)`` at the nodes: inside the grid ``t = exp(L(u(x)))``, ``L`` the
multilinear interpolant, so measured points come back exactly, between them the log
efficiency *and* the log bound are interpolated linearly in log size (the bound taken at the
nodes: evaluating ``max(compute, memory)`` or a bound with a fixed byte term exactly between
nodes would add curvature that measured kernel times do not follow; the leave-one-out error
of decode attention drops from a 3.6% to a 1.5% median along the context axis, H100
vLLM 0.19.0, with no loss elsewhere); beyond the grid ``t = R_q(x) / e(x_edge)``, the achieved
efficiency of the nearest edge held against the roofline (``x_edge`` = ``x`` clipped to the
grid per axis). A numeric key that was not measured (``q_heads``, ``kv_heads``, ``head_dim``,
``window``, a MoE shape, ``num_gpus``) is answered from the nearest measured key group, its
efficiency transferred node by node to the query's bound, and :meth:`TableSet.nearest_note`
says so. A missing family or dtype makes :meth:`TableSet.has` False; callers fall back to the
roofline and label it.

Speed: key resolution and grids are cached per key; a scalar query is a few ``bisect`` calls
and at most eight grid reads (pure Python, microseconds); array queries are vectorised.
"""
from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..hardware import GPUSpec

__all__ = [
    "FAMILIES",
    "TableSet",
    "all_reduce_roofline_s",
    "attention_decode_roofline_s",
    "attention_prefill_roofline_s",
    "collective_roofline_s",
    "dtype_bytes",
    "elementwise_roofline_s",
    "gemm_roofline_s",
    "lm_head_roofline_s",
    "moe_roofline_s",
    "read_table_file",
    "select_table_set",
    "table_sets",
]

PROVENANCE_FILE = "provenance.yaml"
TABLES_DIR = "tables"

#: bytes per element of the dtypes the tables hold (IEEE/OCP formats: bf16/fp16 16 bit,
#: fp8 e4m3 8 bit, float32 32 bit)
_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1,
                "float32": 4, "fp32": 4}
#: bytes of one activation element (vLLM runs activations, outputs and the attention compute
#: in bf16 even with FP8 weights or an FP8 KV cache)
_ACT_BYTES = 2

#: query dtype -> table dtypes that may answer it, preferred first. fp16 and bf16 run at the
#: same tensor-core rate and move the same bytes (datasheets list one figure for both).
_DTYPE_FAMILY = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp8": ("fp8",)}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``bf16``/``fp16`` 2, ``fp8``/``int8`` 1, ``float32`` 4).

    Raises
    ------
    ValueError
        For a dtype outside that list.
    """
    try:
        return _DTYPE_BYTES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(_DTYPE_BYTES))}") \
            from None


def _peak(gpu: GPUSpec, dtype: str) -> float:
    return gpu.flops_per_s("fp8" if str(dtype).lower() in ("fp8", "int8") else "bf16")


def _maximum(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(b, a)


def _minimum(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(b, a)


# ============================================================================== roofline bounds
def gemm_roofline_s(m, n, k, gpu: GPUSpec, dtype: str = "bf16"):
    """Roofline lower bound of one GEMM ``[m, k] x [k, n]`` (seconds; scalar or array ``m``).

    ``FLOPs = 2 m n k`` at the datasheet peak of ``dtype`` (FP8 tensor rate for ``fp8``);
    ``bytes = (m k + k n) x bytes(dtype) + m n x 2`` (inputs and weights in ``dtype``, output
    in bf16, as vLLM's FP8 linear layers emit) at the datasheet HBM bandwidth; the bound is
    the larger of the two (Williams, Waterman & Patterson, "Roofline", CACM 2009).
    """
    wb = dtype_bytes(dtype)
    flops = 2.0 * m * n * k
    byts = (m * k + k * n) * wb + m * n * _ACT_BYTES
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def _causal_pairs(q, start, window):
    """Query-key pairs of a causal chunk: queries at positions ``start+1 .. start+q``, each
    attending ``min(position, window)`` keys (``window`` 0 = full attention)."""
    full = q * start + q * (q + 1) / 2.0
    if not window:
        return full
    w = float(window)
    # positions p <= w attend p keys, positions p > w attend w keys
    lo = _minimum(start, w)
    hi = _minimum(start + q, w)
    below = (hi * (hi + 1) - lo * (lo + 1)) / 2.0
    return below + (start + q - hi) * w


def attention_prefill_roofline_s(q, start, gpu: GPUSpec, *, batch=1, q_heads, kv_heads,
                                 head_dim, kv_dtype="bf16", dtype="bf16", window=0):
    """Roofline lower bound of causal prefill attention (seconds).

    ``batch`` sequences each run a chunk of ``q`` new tokens after ``start`` cached tokens.
    ``FLOPs = 4 x head_dim x q_heads x pairs`` per sequence (QK^T and PV, 2 FLOPs per
    multiply-add each), ``pairs`` the causal query-key pairs (each query at position ``p``
    attends ``min(p, window)`` keys); ``bytes`` = the K and V of the attended span
    (``min(start + q, q + window - 1)`` tokens x ``2 x kv_heads x head_dim x bytes(kv_dtype)``)
    plus Q read and O written in bf16. Compute runs at the ``dtype`` peak.
    """
    pairs = _causal_pairs(q, start, window)
    span = start + q if not window else _minimum(start + q, q + float(window) - 1)
    flops = 4.0 * head_dim * q_heads * pairs * batch
    byts = batch * (span * 2.0 * kv_heads * head_dim * dtype_bytes(kv_dtype)
                    + 2.0 * q * q_heads * head_dim * _ACT_BYTES)
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def attention_decode_roofline_s(batch, ctx_mean, gpu: GPUSpec, *, q_heads, kv_heads, head_dim,
                                kv_dtype="bf16", dtype="bf16", window=0):
    """Roofline lower bound of one decode attention step (seconds; scalar or array ``ctx_mean``).

    ``batch`` sequences, one new query token each, attending ``ctx = min(ctx_mean, window)``
    tokens (the new one included). ``FLOPs = 4 x head_dim x q_heads x ctx x batch``;
    ``bytes = batch x ctx x 2 x kv_heads x head_dim x bytes(kv_dtype)`` (the KV cache read, the
    term that dominates) plus Q and O in bf16.
    """
    ctx = ctx_mean if not window else _minimum(ctx_mean, float(window))
    flops = 4.0 * head_dim * q_heads * ctx * batch
    byts = batch * (ctx * 2.0 * kv_heads * head_dim * dtype_bytes(kv_dtype)
                    + 2.0 * q_heads * head_dim * _ACT_BYTES)
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def _link(gpu: GPUSpec) -> tuple[float, float]:
    bw = gpu.interconnect_bandwidth_bytes_per_s or gpu.host_link_bandwidth_bytes_per_s
    return float(bw), float(gpu.interconnect_latency_s or 0.0)


#: (steps, bandwidth factor) of the ring algorithms per collective on p GPUs, for a message of
#: b bytes as nccl-tests sizes it: all-reduce 2(p-1) steps moving 2(p-1)/p b per GPU;
#: all-gather, reduce-scatter and all-to-all p-1 steps moving (p-1)/p b (Thakur, Rabenseifner
#: & Gropp 2005; nccl-tests doc/PERFORMANCE.md bus-bandwidth factors)
_COLLECTIVES = {"all_reduce": (2.0, 2.0), "all_gather": (1.0, 1.0),
                "reduce_scatter": (1.0, 1.0), "alltoall": (1.0, 1.0)}


def collective_roofline_s(op: str, nbytes, num_gpus: int, gpu: GPUSpec):
    """Latency-bandwidth (Hockney) lower bound of a ring collective (seconds).

    ``t = s (p - 1) x latency + f (p - 1) / p x nbytes / bandwidth`` with ``(s, f)`` = (2, 2)
    for ``all_reduce`` and (1, 1) for ``all_gather``, ``reduce_scatter``, ``alltoall``;
    bandwidth per direction and latency from the spec (``interconnect_bandwidth_bytes_per_s``,
    else the host link; ``interconnect_latency_s``, 0 when not stated). 0 for one GPU.

    Raises
    ------
    ValueError
        For an unknown ``op``.
    """
    if op not in _COLLECTIVES:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(_COLLECTIVES)}")
    p = float(num_gpus)
    if p <= 1:
        return 0.0 * nbytes
    s, f = _COLLECTIVES[op]
    bw, lat = _link(gpu)
    return s * (p - 1) * lat + f * (p - 1) / p * nbytes / bw


def all_reduce_roofline_s(nbytes, num_gpus: int, gpu: GPUSpec):
    """Lower bound of one all-reduce of ``nbytes`` over ``num_gpus`` (seconds; see
    :func:`collective_roofline_s`)."""
    return collective_roofline_s("all_reduce", nbytes, num_gpus, gpu)


def moe_roofline_s(num_tokens, gpu: GPUSpec, *, hidden, inter, topk, num_experts, moe_tp=1,
                   moe_ep=1, dtype="bf16"):
    """Roofline lower bound of one fused MoE layer on one GPU (seconds).

    Each token goes to ``topk`` of ``num_experts`` experts (SwiGLU: gate+up ``hidden x 2
    inter``, down ``inter x hidden``); a GPU holds ``num_experts / moe_ep`` experts, each split
    ``moe_tp`` ways (``inter / moe_tp`` columns). With uniform routing a GPU computes
    ``num_tokens x topk / moe_ep`` token-expert pairs, ``6 x hidden x inter / moe_tp`` FLOPs
    each, and reads the weights of the experts it touches, ``E_loc x (1 - (1 - topk /
    num_experts)^num_tokens)`` of its ``E_loc`` (expected distinct experts hit),
    ``3 x hidden x inter / moe_tp x bytes(dtype)`` each, plus the token activations in bf16.
    """
    il = inter / moe_tp
    e_loc = num_experts / moe_ep
    pairs = num_tokens * topk / moe_ep
    touched = e_loc * (1.0 - (1.0 - min(topk / num_experts, 1.0)) ** num_tokens)
    flops = 6.0 * hidden * il * pairs
    byts = (touched * 3.0 * hidden * il * dtype_bytes(dtype)
            + pairs * (2.0 * hidden + 2.0 * il) * _ACT_BYTES)
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def elementwise_roofline_s(tokens, gpu: GPUSpec, *, hidden, intermediate, dtype="bf16"):
    """Memory-bound bound of one layer's norms, rotary, activation and residual adds (seconds):
    ``tokens x bytes(dtype) x (8 hidden + 3 intermediate)`` bytes (the count of
    :meth:`simulator.perf.roofline.RooflinePerfModel.elementwise_time`) at the HBM bandwidth."""
    return tokens * dtype_bytes(dtype) * (8.0 * hidden + 3.0 * intermediate) \
        / gpu.hbm_bandwidth_bytes_per_s


def lm_head_roofline_s(rows, gpu: GPUSpec, *, hidden, vocab, dtype="bf16"):
    """Roofline bound of the LM head, a ``[rows, hidden] x [hidden, vocab]`` GEMM (seconds)."""
    return gemm_roofline_s(rows, vocab, hidden, gpu, dtype)


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


# ============================================================================== grids
def _u(x, zero: bool):
    """Interpolation coordinate of a size: ``log2(x)`` (``log2(1 + x)`` on axes that hold 0);
    sizes below 1 are clipped to 1 (the grid holds its edge there anyway)."""
    if isinstance(x, np.ndarray):
        return np.log2(1.0 + np.maximum(x, 0.0)) if zero else np.log2(np.maximum(x, 1.0))
    return math.log2(1.0 + max(x, 0.0)) if zero else math.log2(max(x, 1.0))


def _fill(g: np.ndarray, us: list[np.ndarray], lr: np.ndarray | None = None) -> np.ndarray:
    """Fill the NaN cells of the log-efficiency grid ``g`` (module docstring).

    Cells bracketed along an axis get the median over such axes of the linear interpolation
    in ``u`` of log *time* ``lr - g`` (``lr``: log bound at the nodes; None: of ``g`` itself),
    i.e. the value a query would get were the cell absent; cells bracketed nowhere hold the
    log efficiency of the nearest measured cell along an axis (as a query beyond the grid).
    """
    g = g.copy()
    nd = g.ndim
    while np.isnan(g).any():
        base = g if lr is None else lr - g
        ests = []
        for a in range(nd):
            n = g.shape[a]
            if n < 3:
                continue
            x = np.moveaxis(base, a, -1).reshape(-1, n)
            fin = np.isfinite(x)
            idx = np.arange(n)
            prev = np.maximum.accumulate(np.where(fin, idx, -1), axis=1)
            nxt = np.minimum.accumulate(np.where(fin, idx, n)[:, ::-1], axis=1)[:, ::-1]
            ok = ~fin & (prev >= 0) & (nxt < n)
            if not ok.any():
                continue
            r, i = np.nonzero(ok)
            lo, hi = prev[r, i], nxt[r, i]
            ua = us[a]
            w = (ua[i] - ua[lo]) / (ua[hi] - ua[lo])
            val = np.full_like(x, np.nan)
            val[r, i] = x[r, lo] * (1.0 - w) + x[r, hi] * w
            shape = list(np.moveaxis(g, a, -1).shape)
            ests.append(np.moveaxis(val.reshape(shape), -1, a))
        if ests:
            stack = np.stack(ests)
            m = np.isfinite(stack).any(axis=0)
            if m.any():
                est = np.nanmedian(stack[:, m], axis=0)
                g[m] = est if lr is None else lr[m] - est
                continue
        for a in range(nd):   # no bracket anywhere: hold the nearest measured cell along an axis
            n = g.shape[a]
            if n < 2:
                continue
            x = np.moveaxis(g, a, -1).reshape(-1, n).copy()
            fin = np.isfinite(x)
            rows = np.flatnonzero(fin.any(axis=1) & ~fin.all(axis=1))
            if not len(rows):
                continue
            ua = us[a]
            for r in rows:
                have = np.flatnonzero(fin[r])
                for i in np.flatnonzero(~fin[r]):
                    j = have[np.argmin(np.abs(ua[have] - ua[i]))]
                    x[r, i] = x[r, j]
            shape = list(np.moveaxis(g, a, -1).shape)
            g = np.moveaxis(x.reshape(shape), -1, a).copy()
            break
        else:
            raise ValueError("empty efficiency grid")
    return g


class _Grid:
    """Log achieved efficiency on a rectangular grid over ``u`` coordinates (filled)."""

    __slots__ = (
        "flat",
        "le",
        "lr",
        "measured",
        "names",
        "raw",
        "shape",
        "strides",
        "ulists",
        "us",
        "vals",
        "zero",
    )

    def __init__(self, names, coords: list[np.ndarray], le_rows: np.ndarray, zero, bound=None):
        vals, inv = [], []
        for c in coords:
            v, i = np.unique(np.asarray(c, float), return_inverse=True)
            vals.append(v)
            inv.append(i)
        shape = tuple(len(v) for v in vals)
        flat_idx = np.ravel_multi_index(inv, shape)
        n = int(np.prod(shape))
        s = np.bincount(flat_idx, weights=le_rows, minlength=n)
        c = np.bincount(flat_idx, minlength=n)
        g = np.full(n, np.nan)
        g[c > 0] = s[c > 0] / c[c > 0]
        lr = None
        if bound is not None:
            r = bound(dict(zip(names, np.meshgrid(*vals, indexing="ij"))))
            lr = np.log(np.maximum(np.broadcast_to(np.asarray(r, float), shape), 1e-300))
        self._setup(names, vals, zero, g.reshape(shape), lr)

    @classmethod
    def from_cells(cls, names, vals, zero, raw: np.ndarray, lr=None) -> _Grid:
        """A grid from its axis values, raw (unfilled, NaN = not measured) log efficiency and
        log bound at the nodes (``lr``, for the fill; see :func:`_fill`)."""
        self = cls.__new__(cls)
        self._setup(names, vals, zero, raw, lr)
        return self

    def _setup(self, names, vals, zero, raw, lr=None):
        self.names = tuple(names)
        self.zero = tuple(bool(z) for z in zero)
        self.vals = list(vals)
        self.shape = tuple(len(v) for v in vals)
        self.raw = raw
        self.lr = lr
        self.measured = int(np.isfinite(raw).sum())
        self.us = [_u(v, z) for v, z in zip(self.vals, self.zero)]
        self.le = _fill(raw, self.us, lr)
        self.flat = self.le.ravel().tolist()
        self.ulists = [u.tolist() for u in self.us]
        st, acc = [], 1
        for d in reversed(self.shape):
            st.append(acc)
            acc *= d
        self.strides = tuple(reversed(st))

    def with_values(self, values: np.ndarray) -> _Grid:
        """The same axes carrying other (filled) values, e.g. log time for one query key."""
        g = _Grid.__new__(_Grid)
        for a in ("names", "vals", "us", "ulists", "zero", "strides", "shape", "measured"):
            setattr(g, a, getattr(self, a))
        g.raw = g.lr = None
        g.le = np.asarray(values, float).reshape(self.shape)
        g.flat = g.le.ravel().tolist()
        return g

    def nodes(self) -> list[np.ndarray]:
        """Axis values at every grid node (``numpy.meshgrid``, ij order), one array per axis."""
        return np.meshgrid(*self.vals, indexing="ij")

    def clip(self, xs):
        """``xs`` clipped to the grid's range per axis, or None when it lies inside."""
        out, moved = [], False
        for x, v in zip(xs, self.vals):
            lo, hi = v[0], v[-1]
            if x < lo or x > hi:
                moved = True
                x = lo if x < lo else hi
            out.append(x)
        return out if moved else None

    def at(self, xs) -> float:
        """Interpolated value at one point (scalar sizes, one per axis)."""
        base = 0
        corners = [(0, 1.0)]
        for x, ul, z, st in zip(xs, self.ulists, self.zero, self.strides):
            n = len(ul)
            if n == 1:
                continue
            u = math.log2(1.0 + max(x, 0.0)) if z else math.log2(max(x, 1.0))
            if u <= ul[0]:
                continue
            if u >= ul[-1]:
                base += (n - 1) * st
                continue
            i = bisect.bisect_right(ul, u) - 1
            w = (u - ul[i]) / (ul[i + 1] - ul[i])
            base += i * st
            corners = [(o, f * (1.0 - w)) for o, f in corners] + \
                      [(o + st, f * w) for o, f in corners]
        flat = self.flat
        return sum(f * flat[base + o] for o, f in corners)

    def at_array(self, xs) -> np.ndarray:
        """Interpolated values at many points (arrays broadcast together, one per axis)."""
        arrs = np.broadcast_arrays(*[np.asarray(x, float) for x in xs])
        shape = arrs[0].shape
        idx = np.zeros(arrs[0].size, dtype=np.int64)
        parts = []
        for x, u_ax, z, st in zip(arrs, self.us, self.zero, self.strides):
            n = len(u_ax)
            if n == 1:
                continue
            u = np.clip(_u(x.ravel(), z), u_ax[0], u_ax[-1])
            i = np.clip(np.searchsorted(u_ax, u, side="right") - 1, 0, n - 2)
            w = (u - u_ax[i]) / (u_ax[i + 1] - u_ax[i])
            idx += i * st
            parts.append((st, w))
        out = np.zeros(idx.size)
        le = self.le.ravel()
        for mask in range(1 << len(parts)):
            wt = np.ones(idx.size)
            off = idx.copy()
            for b, (st, w) in enumerate(parts):
                if mask >> b & 1:
                    wt = wt * w
                    off = off + st
                else:
                    wt = wt * (1.0 - w)
            out += wt * le[off]
        return out.reshape(shape)


# ============================================================================== table sets
def _version_key(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", str(v))) or (0,)


def version_key(v: str) -> tuple:
    """Sort key of a version string (``0.19.0`` < ``0.22.0``; non-numeric parts sort first)."""
    return _version_key(v)


def _read_yaml(p: Path) -> dict:
    if not p.is_file():
        return {}
    try:
        doc = yaml.safe_load(p.read_text()) or {}
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
        self.kernels = sorted(set(df["kernel"]))
        self.defaults = defaults if defaults else None


class TableSet:
    """One table set: a ``tables/<engine>-<version>/`` folder, or a flat harness folder.

    Parameters
    ----------
    folder : Path
        The set's folder (``provenance.yaml`` and the family files).
    gpu : GPUSpec
        The GPU the tables were measured on: its datasheet figures give the roofline bounds.

    Attributes
    ----------
    name : str
        Folder name for a set (``vllm-0.19.0``), ``<engine>-<version>`` for a flat folder.
    engine, engine_version : str
        From ``provenance.yaml`` (a flat harness folder without them: ``harness`` and its
        ``harness_version``).
    device_name : str
        The device string the tables were measured on.

    Raises
    ------
    ValueError
        When ``provenance.yaml`` is not valid YAML (table files are read on first use and
        raise then, one line naming the file).
    """

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

    # ---------------------------------------------------------------- key resolution
    def _dtypes(self, op: str, dtype: str) -> tuple:
        d = str(dtype).lower()
        fam = _DTYPE_FAMILY.get(d, (d,))
        if op not in _COMM:
            fam = fam[:1] if d != "fp16" else fam
        return fam

    def _candidates(self, fam: _Family, cat: dict, kernel: str | None) -> list[tuple]:
        s = fam.schema
        out = []
        for key in fam.groups:
            kv = dict(zip((*s.cat, *s.num, "kernel"), key))
            ok = True
            for c, want in cat.items():
                if c in ("dtype", "kv_dtype") and self._any_dtype:
                    continue
                if isinstance(want, tuple):
                    if kv[c] not in want:
                        ok = False
                        break
                elif kv[c] != want:
                    ok = False
                    break
            if not ok:
                continue
            k = kv["kernel"]
            if kernel is not None:
                if k != kernel:
                    continue
            elif fam.defaults is not None and k not in fam.defaults and len(fam.kernels) > 1:
                continue
            out.append(key)
        if kernel is None and fam.defaults is None and len(fam.kernels) > 1 and out:
            # several kernels and no stated default: the kernel with the most rows
            nrow: dict = {}
            for key in out:
                nrow[key[-1]] = nrow.get(key[-1], 0) + len(fam.groups[key])
            best = min(nrow, key=lambda k: (-nrow[k], k))
            out = [key for key in out if key[-1] == best]
        return out

    def _cat_query(self, op: str, keys: dict) -> dict:
        s = SCHEMAS[op]
        cat = {}
        for c in s.cat:
            v = keys.get(c)
            if v is None:
                continue
            if c in ("dtype", "kv_dtype"):
                cat[c] = self._dtypes(op, v)
            else:
                cat[c] = str(v)
        return cat

    def has(self, op: str, **keys) -> bool:
        """Whether this set holds a table for family ``op`` matching the categorical ``keys``.

        ``keys``: ``dtype``, ``kv_dtype``, ``backend`` (``graph``, ``eager``, or ``nccl`` =
        the NCCL table's all-reduce), ``distribution``, ``kernel``, ``collective`` (the NCCL
        op); numeric keys (heads, shapes, ``num_gpus``) are accepted and ignored (they are
        answered from the nearest measured key). Never raises for a missing table.
        """
        if op == "all_reduce" and keys.get("backend") == "nccl":
            return self.has("nccl", collective="all_reduce", dtype=keys.get("dtype", "bf16"))
        if op not in FAMILIES or self._source(op) is None:
            return False
        if op == "cpu_overhead":
            return True
        fam = self._family(op)
        if fam is None:
            return False
        keys = dict(keys)
        if op == "nccl" and "collective" in keys:
            keys["op"] = keys.pop("collective")
        return bool(self._candidates(fam, self._cat_query(op, keys), keys.get("kernel")))

    def _resolve(self, op: str, cat: dict, num: dict, kernel, rdt: tuple):
        ck = (op, tuple(sorted((k, v) for k, v in cat.items())),
              tuple(sorted(num.items())), kernel, rdt)
        hit = self._res.get(ck)
        if hit is not None:
            return hit
        fam = self._family(op) if self._source(op) is not None else None
        if fam is None:
            raise ValueError(f"table set {self.name} ({self.folder}) has no {op} table")
        cq = self._cat_query(op, cat)
        cand = self._candidates(fam, cq, kernel)
        if not cand:
            have = sorted({tuple(k[:len(fam.schema.cat)]) for k in fam.groups})
            raise ValueError(f"table set {self.name}: no {op} rows for "
                             + ", ".join(f"{k}={v}" for k, v in cat.items())
                             + (f", kernel={kernel}" if kernel else "")
                             + f"; it has {', '.join('/'.join(h) for h in have[:12])}")
        s = fam.schema
        nc = len(s.cat)
        # prefer the first dtype of a family (bf16 before fp16), then the nearest numeric key
        prefs = {c: cq[c] for c in cq if isinstance(cq[c], tuple)
                 and not (self._any_dtype and c in ("dtype", "kv_dtype"))}

        def pref_rank(key):
            return tuple(prefs[c].index(key[s.cat.index(c)]) for c in prefs)

        best_rank = min(pref_rank(k) for k in cand)
        cand = [k for k in cand if pref_rank(k) == best_rank]
        nums = sorted({k[nc:nc + len(s.num)] for k in cand})

        def dist(vals):
            d = [abs(math.log2((1.0 + float(v)) / (1.0 + float(num.get(c, v)))))
                 for c, v in zip(s.num, vals)]
            return (d[0], sum(d[1:])) if d else (0.0,)

        chosen = min(nums, key=lambda v: (dist(v), v)) if nums else ()
        groups = tuple(k for k in cand if k[nc:nc + len(s.num)] == chosen)
        note = ""
        diffs = [(c, num[c], v) for c, v in zip(s.num, chosen)
                 if c in num and float(num[c]) != float(v)]
        if diffs:
            note = (f"{op}: no table rows for " + ", ".join(f"{c}={q:g}" for c, q, _ in diffs)
                    + "; efficiency of the nearest measured " +
                    ", ".join(f"{c}={v:g}" for c, _, v in diffs) + " used")
        sub = list(prefs)
        got = {c: groups[0][s.cat.index(c)] for c in sub}
        for c in sub:
            if got[c] != cq[c][0]:
                msg = f"{op}: {c}={got[c]} rows answer {c}={cq[c][0]} (same bytes moved)"
                note = "; ".join(x for x in (note, msg) if x)
        gk = (op, groups, rdt)
        grid = self._grids.get(gk)
        if grid is None:
            grid = self._build(fam, groups, dict(zip(s.num, map(float, chosen))), rdt)
            self._grids[gk] = grid
        hit = (grid, note, dict(zip(s.num, map(float, chosen))))
        self._res[ck] = hit
        return hit

    def _build(self, fam: _Family, groups, numv: dict, rdt: tuple, idx=None) -> _Grid:
        if idx is None:
            idx = np.concatenate([fam.groups[g] for g in groups])
            idx.sort()
        s = fam.schema
        coords = [fam.grid_cols[c][idx] for c in s.grid]
        r = self._roofline(fam.op, dict(zip(s.grid, coords)), numv, rdt)
        e = r / fam.t[idx]
        ok = np.isfinite(e) & (e > 0)
        if not ok.any():
            raise ValueError(f"table set {self.name}: {fam.op} rows give no finite efficiency")
        return _Grid(s.grid, [c[ok] for c in coords], np.log(e[ok]),
                     [c in s.zero for c in s.grid],
                     bound=lambda nodes: self._roofline(fam.op, nodes, numv, rdt))

    def _roofline(self, op: str, x: dict, numv: dict, rdt: tuple):
        """Roofline of family ``op`` at sizes ``x`` (axis name -> value/array), numeric keys
        ``numv`` and dtypes ``rdt`` (``(dtype,)`` or ``(dtype, kv_dtype)``)."""
        g = self.gpu
        dt = rdt[0]
        if op == "gemm":
            return gemm_roofline_s(x["m"], x["n"], x["k"], g, dt)
        if op == "attention_prefill":
            return attention_prefill_roofline_s(
                x["q"], x["start"], g, batch=x["batch"], q_heads=numv["q_heads"],
                kv_heads=numv["kv_heads"], head_dim=numv["head_dim"], kv_dtype=rdt[1],
                dtype=dt, window=numv["window"])
        if op == "attention_decode":
            return attention_decode_roofline_s(
                x["batch"], x["ctx_mean"], g, q_heads=numv["q_heads"], kv_heads=numv["kv_heads"],
                head_dim=numv["head_dim"], kv_dtype=rdt[1], dtype=dt, window=numv["window"])
        if op == "all_reduce":
            return all_reduce_roofline_s(x["bytes"], numv["num_gpus"], g)
        if op == "nccl":
            return collective_roofline_s(rdt[1], x["bytes"], numv["num_gpus"], g)
        if op == "moe":
            return moe_roofline_s(x["num_tokens"], g, hidden=numv["hidden"], inter=numv["inter"],
                                  topk=numv["topk"], num_experts=numv["num_experts"],
                                  moe_tp=numv["moe_tp"], moe_ep=numv["moe_ep"], dtype=dt)
        if op == "elementwise":
            return elementwise_roofline_s(x["tokens"], g, hidden=numv["hidden"],
                                          intermediate=numv["intermediate"], dtype=dt)
        if op == "lm_head":
            return lm_head_roofline_s(x["rows"], g, hidden=numv["hidden"], vocab=numv["vocab"],
                                      dtype=dt)
        raise ValueError(f"unknown table family {op!r}")

    def _tgrid(self, op: str, grid: _Grid, num: dict, rdt: tuple, cache: bool = True) -> _Grid:
        """Log time of a query key at the grid nodes: ``log R_q(node) - log e(node)``."""
        key = (id(grid), op, tuple(sorted(num.items())), rdt)
        hit = self._tgrids.get(key) if cache else None
        if hit is not None:
            return hit[1]
        r = self._roofline(op, dict(zip(grid.names, grid.nodes())), num, rdt)
        r = np.maximum(np.broadcast_to(np.asarray(r, float), grid.shape), 1e-300)
        tg = grid.with_values(np.log(r) - grid.le)
        if cache:
            self._tgrids[key] = (grid, tg)   # keep grid alive: its id stays unique
        return tg

    def _eval(self, op: str, tg: _Grid, x: dict, num: dict, rdt: tuple):
        """Seconds at sizes ``x`` from a log-time grid (see the module docstring)."""
        pos = [x[c] for c in tg.names]
        if any(isinstance(v, np.ndarray) for v in pos):
            xc = dict(x)
            moved = False
            for c, v in zip(tg.names, tg.vals):
                xv = np.asarray(x[c], float)
                if xv.min() < v[0] or xv.max() > v[-1]:
                    moved = True
                    xv = np.clip(xv, v[0], v[-1])
                xc[c] = xv
            t = np.exp(tg.at_array(pos))
            if not moved:  # inside the grid: the roofline ratio is exactly 1
                return t
            ratio = np.asarray(self._roofline(op, x, num, rdt), float) / \
                np.asarray(self._roofline(op, xc, num, rdt), float)
            return t * ratio
        t = math.exp(tg.at(pos))
        moved = tg.clip(pos)
        if moved is not None:
            xc = dict(x)
            xc.update(zip(tg.names, moved))
            t *= float(self._roofline(op, x, num, rdt)) / float(self._roofline(op, xc, num, rdt))
        return t

    def _time(self, op: str, cat: dict, num: dict, kernel, rdt: tuple, x: dict):
        key = (op, tuple(sorted(cat.items())), tuple(sorted(num.items())), kernel, rdt, "t")
        tg = self._res.get(key)
        if tg is None:
            grid = self._resolve(op, cat, num, kernel, rdt)[0]
            tg = self._tgrid(op, grid, num, rdt)
            self._res[key] = tg
        return self._eval(op, tg, x, num, rdt)

    def nearest_note(self, op: str, **keys) -> str:
        """Why a query with ``keys`` is not answered from its own key group ("" when it is):
        the nearest measured numeric key used instead, or an fp16 table answering bf16."""
        op2, cat, num, kernel, rdt = self._query_keys(op, keys)
        return self._resolve(op2, cat, num, kernel, rdt)[1]

    def _query_keys(self, op: str, keys: dict):
        keys = dict(keys)
        if op == "all_reduce" and keys.get("backend") == "nccl":
            op, keys = "nccl", {"op": "all_reduce", "dtype": keys.get("dtype", "bf16"),
                                "num_gpus": keys.get("num_gpus")}
        if op == "nccl" and "collective" in keys:
            keys["op"] = keys.pop("collective")
        s = SCHEMAS[op]
        cat = {c: keys[c] for c in s.cat if keys.get(c) is not None}
        num = {c: float(keys[c]) for c in s.num if keys.get(c) is not None}
        dt = str(keys.get("dtype", "bf16")).lower()
        if op.startswith("attention"):
            rdt = (dt, str(keys.get("kv_dtype") or dt).lower())
        elif op == "nccl":
            rdt = (dt, str(keys.get("op")))
        else:
            rdt = (dt,)
        return op, cat, num, keys.get("kernel"), rdt

    # ---------------------------------------------------------------- operators
    def gemm(self, m, n: int, k: int, dtype: str = "bf16"):
        """Seconds of one ``[m, k] x [k, n]`` GEMM, one GPU.

        Parameters
        ----------
        m : int, float or ndarray
            Rows (tokens in the step); an array is answered element-wise (vectorised).
        n, k : int
            Output and input features at the TP shard.
        dtype : str
            ``bf16`` (``fp16`` answers from bf16 rows) or ``fp8``.

        Returns
        -------
        float or ndarray
            Seconds (the shape of ``m``).

        Raises
        ------
        ValueError
            When the set has no GEMM rows for ``dtype`` (check :meth:`has` first).
        """
        dt = str(dtype).lower()
        key = ("gemm", dt)
        tg = self._res.get(key)
        if tg is None:
            grid = self._resolve("gemm", {"dtype": dt}, {}, None, (dt,))[0]
            tg = self._tgrid("gemm", grid, {}, (dt,))
            self._res[key] = tg
        if isinstance(m, np.ndarray):
            return self._eval("gemm", tg, {"m": m.astype(float), "n": n, "k": k}, {}, (dt,))
        t = math.exp(tg.at((m, n, k)))
        moved = tg.clip((m, n, k))
        if moved is not None:
            t *= gemm_roofline_s(float(m), float(n), float(k), self.gpu, dt) / \
                gemm_roofline_s(float(moved[0]), float(moved[1]), float(moved[2]), self.gpu, dt)
        return t

    def attention_prefill(self, q, start, *, batch=1, q_heads, kv_heads, head_dim,
                          kv_dtype="bf16", dtype="bf16", window=0, kernel=None) -> float:
        """Seconds of causal prefill attention, one layer, one GPU.

        Parameters
        ----------
        q, start : int or float
            New (query) tokens per sequence and tokens already cached before the chunk.
        batch : int
            Sequences with that chunk shape.
        q_heads, kv_heads, head_dim : int
            Head layout at the TP shard (an unmeasured one uses the nearest measured).
        kv_dtype, dtype : str
            KV-cache dtype (``bf16``, ``fp8``) and compute dtype (``bf16``).
        window : int
            Sliding window in tokens (0: full attention).
        kernel : str or None
            A kernel named in the table; None: the engine's default (``default_kernel``).

        Raises
        ------
        ValueError
            No prefill table, or no rows for these dtypes / that kernel.
        """
        num = {"q_heads": float(q_heads), "kv_heads": float(kv_heads),
               "head_dim": float(head_dim), "window": float(window)}
        rdt = (str(dtype).lower(), str(kv_dtype).lower())
        return self._time("attention_prefill", {"dtype": rdt[0], "kv_dtype": rdt[1]}, num,
                          kernel, rdt, {"q": q, "start": start, "batch": batch})

    def attention_decode(self, batch: int, ctx_mean, *, q_heads, kv_heads, head_dim,
                         kv_dtype="bf16", dtype="bf16", window=0, kernel=None):
        """Seconds of one decode attention step, one layer, one GPU.

        Parameters
        ----------
        batch : int
            Decode sequences (one new token each).
        ctx_mean : float or ndarray
            Tokens attended per sequence, the new one included (an array: vectorised).
        q_heads, kv_heads, head_dim, kv_dtype, dtype, window, kernel
            As for :meth:`attention_prefill`.

        Returns
        -------
        float or ndarray
            Seconds (the shape of ``ctx_mean``).

        Raises
        ------
        ValueError
            No decode table, or no rows for these dtypes / that kernel.
        """
        num = {"q_heads": float(q_heads), "kv_heads": float(kv_heads),
               "head_dim": float(head_dim), "window": float(window)}
        rdt = (str(dtype).lower(), str(kv_dtype).lower())
        if isinstance(ctx_mean, (list, tuple)):
            ctx_mean = np.asarray(ctx_mean, float)
        return self._time("attention_decode", {"dtype": rdt[0], "kv_dtype": rdt[1]}, num,
                          kernel, rdt, {"batch": batch, "ctx_mean": ctx_mean})

    def all_reduce(self, nbytes, num_gpus: int, backend: str = "graph",
                   dtype: str = "bf16") -> float:
        """Seconds of one all-reduce of ``nbytes`` bytes over ``num_gpus`` GPUs (0 for one).

        Parameters
        ----------
        nbytes : float
            Message size in bytes (hidden states: tokens x hidden x 2 for bf16).
        num_gpus : int
            GPUs in the group (an unmeasured count uses the nearest measured one).
        backend : str
            ``graph`` (vLLM's all-reduce under CUDA graphs), ``eager``, or ``nccl`` (the NCCL
            table's all-reduce rows).
        dtype : str
            Element type (``bf16``; ``fp16`` rows answer it: same bytes).

        Raises
        ------
        ValueError
            No such table or backend.
        """
        if num_gpus <= 1:
            return 0.0
        if backend == "nccl":
            return self.collective("all_reduce", nbytes, num_gpus, dtype)
        dt = str(dtype).lower()
        return self._time("all_reduce", {"dtype": dt, "backend": backend},
                          {"num_gpus": float(num_gpus)}, None, (dt,), {"bytes": nbytes})

    def collective(self, op: str, nbytes, num_gpus: int, dtype: str = "bf16") -> float:
        """Seconds of one NCCL collective over ``num_gpus`` GPUs (0 for one GPU).

        Parameters
        ----------
        op : str
            ``all_gather``, ``all_reduce``, ``reduce_scatter`` or ``alltoall``.
        nbytes : float
            Message size in bytes as nccl-tests sizes it.
        num_gpus : int
            GPUs in the group (nearest measured count when absent).
        dtype : str
            Element type (``bf16`` queries read the fp16 rows: same bytes).

        Raises
        ------
        ValueError
            No NCCL table, or no rows for ``op``.
        """
        if num_gpus <= 1:
            return 0.0
        dt = str(dtype).lower()
        return self._time("nccl", {"op": op, "dtype": dt}, {"num_gpus": float(num_gpus)}, None,
                          (dt, op), {"bytes": nbytes})

    def moe(self, num_tokens, *, hidden, inter, topk, num_experts, moe_tp=1, moe_ep=1,
            dtype="bf16", distribution="balanced") -> float:
        """Seconds of one fused MoE layer (experts' GEMMs, routing) on one GPU.

        Parameters
        ----------
        num_tokens : int
            Tokens entering the layer.
        hidden, inter : int
            Model hidden size and one expert's intermediate size (before ``moe_tp``).
        topk, num_experts : int
            Experts per token and experts in the layer.
        moe_tp, moe_ep : int
            Tensor- and expert-parallel degree of the MoE layer.
        dtype : str
            ``bf16`` or ``fp8`` weights.
        distribution : str
            Token-to-expert routing of the measurement (``balanced``, ``power_law_1.01``,
            ``power_law_1.2``), matched exactly.

        Raises
        ------
        ValueError
            No MoE table, or no rows for that dtype / distribution.
        """
        num = {"hidden": float(hidden), "inter": float(inter), "topk": float(topk),
               "num_experts": float(num_experts), "moe_tp": float(moe_tp),
               "moe_ep": float(moe_ep)}
        dt = str(dtype).lower()
        return self._time("moe", {"dtype": dt, "distribution": distribution}, num, None, (dt,),
                          {"num_tokens": num_tokens})

    def elementwise(self, tokens, *, hidden, intermediate, q_heads, kv_heads, head_dim,
                    dtype="bf16") -> float:
        """Seconds of one layer's norms, rotary, activation and residual adds (harness)."""
        num = {"hidden": float(hidden), "intermediate": float(intermediate),
               "q_heads": float(q_heads), "kv_heads": float(kv_heads),
               "head_dim": float(head_dim)}
        dt = str(dtype).lower()
        return self._time("elementwise", {"dtype": dt}, num, None, (dt,), {"tokens": tokens})

    def lm_head(self, rows, *, hidden, vocab, dtype="bf16") -> float:
        """Seconds of the LM head over ``rows`` sampled positions (harness)."""
        dt = str(dtype).lower()
        return self._time("lm_head", {"dtype": dt}, {"hidden": float(hidden),
                                                     "vocab": float(vocab)},
                          None, (dt,), {"rows": rows})

    def cpu_overhead(self, num_seqs, num_tokens=None, *, num_layers, hidden) -> float:
        """Engine CPU time per step (seconds): ``a + b x num_seqs + c x num_tokens``.

        ``a, b, c >= 0`` is the weighted (``sqrt(num_samples)``) non-negative least-squares
        line (``scipy.optimize.lsq_linear``) through the step residuals of the rows of
        ``cpu_overhead`` for the nearest measured ``(num_layers, hidden)``.

        Raises
        ------
        ValueError
            When the set has no ``cpu_overhead`` table.
        """
        a, b, c = self.cpu_overhead_params(num_layers=num_layers, hidden=hidden)
        toks = num_seqs if num_tokens is None else num_tokens
        return max(0.0, a + b * num_seqs + c * toks)

    def cpu_overhead_params(self, *, num_layers, hidden) -> tuple[float, float, float]:
        """``(a_s, b_s_per_seq, c_s_per_token)`` of :meth:`cpu_overhead`."""
        key = (float(num_layers), float(hidden))
        hit = self._cpu.get(key)
        if hit is not None:
            return hit
        df = self._family("cpu_overhead") if self._source("cpu_overhead") else None
        if df is None or not len(df):
            raise ValueError(f"table set {self.name} has no cpu_overhead table")
        shapes = sorted(set(zip(df["num_layers"].astype(float), df["hidden"].astype(float))))
        near = min(shapes, key=lambda s: (abs(math.log2(s[0] / key[0])) +
                                          abs(math.log2(s[1] / key[1])), s))
        rows = df[(df["num_layers"].astype(float) == near[0])
                  & (df["hidden"].astype(float) == near[1])]
        hit = _fit_overhead(rows)
        self._cpu[key] = hit
        return hit


def _fit_overhead(rows: pd.DataFrame) -> tuple[float, float, float]:
    from scipy.optimize import lsq_linear
    y = rows["residual_s"].to_numpy(float)
    s = rows["num_seqs"].to_numpy(float)
    t = rows["num_tokens"].to_numpy(float)
    w = np.sqrt(rows["num_samples"].to_numpy(float)) if "num_samples" in rows.columns \
        else np.ones_like(y)
    ok = np.isfinite(y) & np.isfinite(w)
    y, s, t, w = y[ok], s[ok], t[ok], w[ok]
    if not len(y):
        return 0.0, 0.0, 0.0
    if len(y) < 3:
        return max(float(np.median(y)), 0.0), 0.0, 0.0
    a = np.column_stack([np.ones_like(s), s, t]) * w[:, None]
    sol = lsq_linear(a, y * w, bounds=(0.0, np.inf))
    return tuple(float(v) for v in sol.x)


# ============================================================================== discovery
def _has_tables(folder: Path) -> bool:
    return any((folder / f"{op}{ext}").is_file() for op in FAMILIES
               for ext in (".parquet", ".csv"))


def table_sets(gpu: GPUSpec) -> list[TableSet]:
    """Every table set of ``gpu``'s profile folder, newest engine version first.

    Sets under ``tables/`` (any engine) and the flat harness folder (tables next to
    ``spec.yaml``). Order: engine sets before support sets (``nccl-*``, collective-library
    tables that engine sets point at), then by engine name, then newest version first; of
    several sets of one engine version, the *primary* set (folder named exactly
    ``<engine>-<version>``) comes before variant sets (``vllm-0.19.0-lss``: another source's
    measurement of that version), which follow by folder name.
    """
    d = gpu.profile_dir
    if d is None:
        return []
    d = Path(d)
    out = []
    if _has_tables(d):
        out.append(TableSet(d, gpu))
    t = d / TABLES_DIR
    if t.is_dir():
        for sub in sorted(t.iterdir()):
            if sub.is_dir() and ((sub / PROVENANCE_FILE).is_file() or _has_tables(sub)):
                out.append(TableSet(sub, gpu))
    out.sort(key=lambda s: (s.engine == "nccl", s.engine,
                            tuple(-x for x in _version_key(s.engine_version)),
                            not s.is_primary, s.name))
    return out


def select_table_set(gpu: GPUSpec, engine: str = "vllm", version: str | None = None
                     ) -> TableSet | None:
    """The table set of ``engine`` (``vllm``; ``harness`` for a flat calibrated folder) and
    ``version`` (None: the newest) for ``gpu``; None when ``version`` is None and there is none.

    Where several sets measure one version (e.g. ``vllm-0.19.0`` imported from aiconfigurator
    and ``vllm-0.19.0-lss`` from LLMServingSim), the primary set (folder ``<engine>-<version>``)
    answers; a variant set answers when it is the only one, or when ``version`` names it
    (``0.19.0-lss`` or ``vllm-0.19.0-lss``).

    Raises
    ------
    ValueError
        When ``version`` is given and absent; the message names the available versions.
    """
    sets = [s for s in table_sets(gpu) if s.engine == engine]
    if version is None:
        return sets[0] if sets else None
    want = str(version)
    if want.startswith(f"{engine}-"):
        want = want[len(engine) + 1:]
    for s in sets:
        if s.name == f"{engine}-{want}":
            return s
    for s in sets:   # primary sets sort first (table_sets)
        if s.engine_version == want:
            return s
    have = ", ".join(s.name[len(engine) + 1:] if s.name.startswith(f"{engine}-")
                     else s.engine_version for s in sets) or "none"
    raise ValueError(f"GPU profile {gpu.name!r} has no {engine} {want} tables; "
                     f"available: {have}")
