"""Measured kernel tables (format v2): load a GPU profile's table sets, answer operator times.

A GPU profile folder ``hardware_profiles/<gpu>/`` holds ``spec.yaml`` and any number of *table
sets*, one per engine version, in ``tables/<engine>-<version>/`` (``provenance.yaml`` plus one
file per operator family, ``<family>.parquet`` or ``<family>.csv``, same columns). A flat
harness folder (tables next to ``spec.yaml``, harness v1) is one table set too. Times are
**seconds per call, one layer, one GPU** in column ``median_s``; rows are keyed by the operator's
shape at the TP shard, not by model name (see ``hardware_profiles/README.md`` for the columns).

Method (DESIGN.md section 3). For an operator with roofline bound ``R(x)`` (the functions
``*_roofline_s`` of :mod:`simulator.perf.tables.bounds`, re-exported here: FLOPs at the
datasheet peak vs bytes at the datasheet HBM bandwidth, whichever is longer) and measured time ``t_i`` at grid point ``x_i``, the achieved efficiency
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

The fill of unmeasured grid cells: :mod:`simulator.perf.tables.grid`.

A query ``x`` with keys ``q`` (its bound ``R_q``) is answered from the grid of
``log R_q(node) - log e(node)`` at the nodes: inside the grid ``t = exp(L(u(x)))``, ``L`` the
multilinear interpolant, so measured points come back exactly, between them the log
efficiency *and* the log bound are interpolated linearly in log size (the bound taken at the
nodes: evaluating ``max(compute, memory)`` or a bound with a fixed byte term exactly between
nodes would add curvature that measured kernel times do not follow; the leave-one-out error
of decode attention drops from a 3.6% to a 1.5% median along the context axis, H100
vLLM 0.19.0, with no loss elsewhere); beyond the grid, from the nearest edge ``x_edge`` (``x``
clipped to the grid per axis), :func:`~simulator.perf.tables.lookup.beyond_grid`: above a
measured axis the edge's efficiency held, ``t = R_q(x) / e(x_edge)``; below it or along an
axis measured at one value, a launch floor plus a linear regime
(:func:`~simulator.perf.tables.lookup.affine_transfer`). A numeric key that was not measured
(``q_heads``, ``kv_heads``, ``head_dim``, ``window``, a MoE shape, ``num_gpus``) is answered
from the nearest measured key group, its times carried node by node to the query's bound by
:func:`~simulator.perf.tables.lookup.affine_transfer`, and :meth:`TableSet.nearest_note` says
so. A missing family or dtype makes :meth:`TableSet.has` False; callers fall back to the
roofline and label it.

Sibling transfer (sibling profiles). A spec with ``efficiency_tables_from: <sibling>`` (a
board of the same die with no measurement of its own: A100 PCIe from A100 SXM4, H100 PCIe from
H100 SXM) gets the sibling's table sets as :class:`TableSet` objects whose ``measured_gpu`` is
the sibling. At every grid node the time the sibling spent *above* its own roofline bound is
held in seconds over the board's bound, ``t = R_board(node) + (t_sib(node) - R_sib(node))``
(``TableLookup._excess_times``; where the sibling ran faster than its bound, ``t_sib < R_sib``,
the time is at least the efficiency transfer ``R_board / e``, so never 0 or below); between
nodes the log time is interpolated as for any set, beyond the grid the edge node's achieved
efficiency on the board is held against the roofline ratio. The rule was chosen over holding
the sibling's efficiency (``t = R_board / e``, ``transfer="efficiency"``) and copying its times
on the one same-die pair with both sides measured (H100 SXM <-> H200 SXM):
``benchmarks/bench_sibling_transfer.py``, figures in ``hardware_profiles/README.md``. Only
:data:`TRANSFERRED_FAMILIES` (compute kernels) are carried over; all-reduce and NCCL tables
(another link) and engine CPU tables are not, so the board's spec link model answers
communication. :meth:`TableSet.label` names both GPUs.

Speed: key resolution and grids are cached per key; a scalar query is a few ``bisect`` calls
and at most eight grid reads (pure Python, microseconds); array queries are vectorised.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulator.catalog.hardware import GPUSpec, get_gpu
from simulator.perf.tables.bounds import (
    all_reduce_roofline_s,
    attention_decode_roofline_s,
    attention_prefill_roofline_s,
    collective_roofline_s,
    dtype_bytes,
    elementwise_roofline_s,
    gemm_roofline_s,
    lm_head_roofline_s,
    moe_roofline_s,
)
from simulator.perf.tables.files import (
    FAMILIES,
    PROVENANCE_FILE,
    SCHEMAS,
    TABLES_DIR,
    TableFiles,
    _version_key,
    read_table_file,
    version_key,
)
from simulator.perf.tables.grid import _Grid  # noqa: F401 - read by benchmarks/bench_tables_loo.py
from simulator.perf.tables.lookup import TableLookup, _single_node_moved, beyond_grid

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = [
    "FAMILIES",
    "PROVENANCE_FILE",
    "SCHEMAS",
    "TABLES_DIR",
    "TRANSFERRED_FAMILIES",
    "TRANSFER_RULES",
    "TableFiles",
    "TableLookup",
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
    "version_key",
]


#: families a sibling transfer carries to a sibling GPU (compute kernels on one die): not
#: ``all_reduce``/``nccl`` (the sibling's link, not this GPU's: its spec's link model answers)
#: nor ``cpu_overhead`` (the sibling node's host CPU, an engine term)
TRANSFERRED_FAMILIES = ("gemm", "attention_prefill", "attention_decode", "moe", "elementwise",
                        "lm_head")
#: rules of a transferred set at the grid nodes (:class:`TableSet` ``transfer``): the sibling's
#: excess time above its roofline held in seconds (shipped), or its achieved efficiency held
TRANSFER_RULES = ("excess", "efficiency")


class TableSet(TableLookup):
    """One table set: a ``tables/<engine>-<version>/`` folder, or a flat harness folder.

    Parameters
    ----------
    folder : Path
        The set's folder (``provenance.yaml`` and the family files).
    gpu : GPUSpec
        The GPU whose operator times are asked: its datasheet figures give the bounds that
        queries are answered against.
    measured_gpu : GPUSpec, optional
        The GPU the tables were measured on, whose datasheet figures turn measured times into
        achieved efficiencies (default ``gpu``). Another GPU makes this a *transferred* set
        (:func:`table_sets`): only :data:`TRANSFERRED_FAMILIES` answer, and :meth:`label`
        says whose measurement over whose roofline.
    transfer : str
        Rule of a transferred set at the grid nodes (:data:`TRANSFER_RULES`): ``excess``
        (default) holds the sibling's time above its roofline bound in seconds,
        ``t = R_gpu + t_sib - R_sib``; ``efficiency`` holds its achieved efficiency,
        ``t = R_gpu / e``. Ignored for a GPU's own tables. Beyond the grid both hold the edge
        node's achieved efficiency on ``gpu`` against the roofline ratio.

    Attributes
    ----------
    name : str
        Folder name for a set (``vllm-0.19.0``), ``<engine>-<version>`` for a flat folder.
    engine, engine_version : str
        From ``provenance.yaml`` (a flat harness folder without them: ``harness`` and its
        ``harness_version``).
    device_name : str
        The device string the tables were measured on.
    efficiency_from : str
        Profile name of ``measured_gpu`` when it is not ``gpu`` (a transferred set), else "".

    Raises
    ------
    ValueError
        When ``provenance.yaml`` is not valid YAML (table files are read on first use and
        raise then, one line naming the file).
    """

    def __init__(self, folder: Path, gpu: GPUSpec, measured_gpu: GPUSpec | None = None,
                 transfer: str = "excess"):
        if transfer not in TRANSFER_RULES:
            raise ValueError(f"transfer={transfer!r}: expected one of {', '.join(TRANSFER_RULES)}")
        super().__init__(folder, gpu)
        self.transfer = transfer
        self.measured_gpu = gpu if measured_gpu is None else measured_gpu
        self.efficiency_from = "" if self.measured_gpu.name == gpu.name \
            else self.measured_gpu.name

    def _source(self, op: str) -> Path | None:
        if self.efficiency_from and op not in TRANSFERRED_FAMILIES:
            return None   # communication and engine CPU tables belong to the measured node
        return super()._source(op)

    def label(self, op: str) -> str:
        """One-line provenance of table ``op`` (see :meth:`TableFiles.label`); a transferred
        set says ``measured excess time of <sibling> (<device>, vLLM <version>; <source>) over
        <gpu>'s datasheet roofline`` (rule ``excess``: the sibling's time above its own bound,
        added to this GPU's) or ``measured efficiency of <sibling> (...) on <gpu>'s datasheet
        roofline`` (rule ``efficiency``)."""
        base = super().label(op)
        if not base or not self.efficiency_from:
            return base
        inner = base.removeprefix("measured ")
        if self.transfer == "excess":
            return (f"measured excess time of {self.efficiency_from} {inner} over "
                    f"{self.gpu.name}'s datasheet roofline")
        return (f"measured efficiency of {self.efficiency_from} {inner} on {self.gpu.name}'s "
                "datasheet roofline")

    #: table sources whose GEMMs were timed replaying a CUDA graph (aiconfigurator's collector:
    #: ``collector/vllm/collect_gemm.py`` calls ``benchmark_with_power(use_cuda_graph=True)``
    #: for bf16 and fp8 GEMMs)
    GRAPH_TIMED_SOURCES = ("aiconfigurator",)
    #: smallest GEMMs whose median time is the graph-replay floor
    GRAPH_FLOOR_KERNELS = 20

    def graph_kernel_floor_s(self, dtype: str = "bf16") -> float | None:
        """Seconds of a minimal kernel replayed from a CUDA graph on this GPU: the median of
        the :attr:`GRAPH_FLOOR_KERNELS` fastest measured GEMMs of ``dtype`` (``m, n, k`` of
        a few dozen: no work, only the kernel's own start and end; 2.5 us on the H100 SXM,
        2.5-2.7 us A100 SXM, 2.3-2.5 us H200, 1.8-1.9 us L40S and RTX PRO 6000). None when the
        set's GEMM table was not timed under CUDA graphs (:attr:`GRAPH_TIMED_SOURCES`), is
        transferred from a sibling, or has no rows of ``dtype``."""
        if self.efficiency_from or self._source("gemm") is None:
            return None
        if self.provenance("gemm").get("source_project") not in self.GRAPH_TIMED_SOURCES:
            return None
        fam = self._family("gemm")
        dt = str(dtype).lower()
        dt = "bf16" if dt == "fp16" else dt
        times = [fam.t[idx] for key, idx in fam.groups.items() if key[0] == dt]
        if not times:
            return None
        t = np.concatenate(times)
        k = min(self.GRAPH_FLOOR_KERNELS, t.size)
        return float(np.median(np.partition(t, k - 1)[:k]))  # the k fastest, unordered

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
            t = float(beyond_grid(
                t, gemm_roofline_s(float(m), float(n), float(k), self.gpu, dt),
                gemm_roofline_s(float(moved[0]), float(moved[1]), float(moved[2]), self.gpu, dt),
                tg.linear_eff, _single_node_moved((m, n, k), tg.vals)))
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
        if isinstance(ctx_mean, (list, tuple)):
            ctx_mean = np.asarray(ctx_mean, float)
        tg, num, rdt = self._decode_key(q_heads, kv_heads, head_dim, kv_dtype, dtype, window,
                                        kernel)
        return self._eval("attention_decode", tg, {"batch": batch, "ctx_mean": ctx_mean}, num,
                          rdt)

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
    out = _transferred_sets(gpu) if gpu.efficiency_tables_from else []
    if d is None:
        return out
    d = Path(d)
    own = []
    if _has_tables(d):
        own.append(TableSet(d, gpu))
    t = d / TABLES_DIR
    if t.is_dir():
        for sub in sorted(t.iterdir()):
            if sub.is_dir() and ((sub / PROVENANCE_FILE).is_file() or _has_tables(sub)):
                own.append(TableSet(sub, gpu))
    mine = {s.name for s in own}
    out = own + [s for s in out if s.name not in mine]   # own measurements first
    out.sort(key=lambda s: (s.engine == "nccl", s.engine,
                            tuple(-x for x in _version_key(s.engine_version)),
                            not s.is_primary, bool(s.efficiency_from), s.name))
    return out


def _transferred_sets(gpu: GPUSpec) -> list[TableSet]:
    """The engine table sets of ``gpu.efficiency_tables_from`` (a same-die sibling), their
    excess time above the sibling's roofline held over ``gpu``'s own datasheet roofline
    (:class:`TableSet` rule ``excess``; :data:`TRANSFERRED_FAMILIES` only; the sibling's NCCL
    support sets are not carried over).

    Raises
    ------
    ValueError
        When the sibling is not in the catalog or transfers its own tables from another GPU.
    """
    try:
        sib = get_gpu(gpu.efficiency_tables_from)
    except ValueError as e:
        raise ValueError(f"GPU profile {gpu.name!r}: efficiency_tables_from: {e}") from None
    if sib.efficiency_tables_from:
        raise ValueError(f"GPU profile {gpu.name!r}: efficiency_tables_from "
                         f"{sib.name!r} itself transfers tables from "
                         f"{sib.efficiency_tables_from!r}; name a measured profile")
    return [TableSet(s.folder, gpu, measured_gpu=sib) for s in table_sets(sib)
            if s.engine != "nccl"]


def select_table_set(gpu: GPUSpec, engine: str = "vllm", version: str | None = None, *,
                     sets: list[TableSet] | None = None) -> TableSet | None:
    """The table set of ``engine`` (``vllm``; ``harness`` for a flat calibrated folder) and
    ``version`` (None: the newest) for ``gpu``; None when ``version`` is None and there is none.
    ``sets``: ``table_sets(gpu)`` when the caller has it already (else discovered here).

    Where several sets measure one version (e.g. ``vllm-0.19.0`` imported from aiconfigurator
    and ``vllm-0.19.0-lss`` from LLMServingSim), the primary set (folder ``<engine>-<version>``)
    answers; a variant set answers when it is the only one, or when ``version`` names it
    (``0.19.0-lss`` or ``vllm-0.19.0-lss``).

    Raises
    ------
    ValueError
        When ``version`` is given and absent; the message names the available versions.
    """
    sets = [s for s in (table_sets(gpu) if sets is None else sets) if s.engine == engine]
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
