"""Measured latency tables: interpolation inside the grid, held efficiency beyond it (no torch).

A calibrated profile folder (``servesim calibrate ... -o hardware_profiles/NAME``) holds
``spec.yaml``, ``provenance.yaml`` and one CSV per operator class. Rows are keyed by the
operator's *shape* at the TP shard, not by model name, so one folder can serve every model
whose shapes it measured (AIConfigurator's layout idea, see shared/reference/peers.md 1.1):

==========================  ==========================================  =====================
file                        key columns (per GPU / TP shard)            size axis (grid)
==========================  ==========================================  =====================
``gemm.csv``                ``k, n`` (input, output features)           ``m`` tokens
``attention_prefill.csv``   ``q_heads, kv_heads, head_dim``             ``q`` x ``start``
``attention_decode.csv``    ``q_heads, kv_heads, head_dim``             ``batch`` x ``ctx_mean``
``elementwise.csv``         ``hidden, intermediate, q_heads, kv_heads,  ``tokens``
                            head_dim``
``lm_head.csv``             ``hidden, vocab``                           ``rows``
``all_reduce.csv``          ``num_gpus``                                ``bytes``
``cpu_overhead.csv``        ``num_layers, hidden``                      ``num_seqs``, tokens
==========================  ==========================================  =====================

Every measured row also has ``dtype``, ``median_s`` (the statistic used), ``p25_s``,
``p75_s``, ``iqr_rel`` (IQR / median), ``noisy`` (``iqr_rel > 0.2``), ``num_samples`` and
``samples_s`` (the raw samples, space separated). Times are seconds per call for one layer on
one device.

Model (:class:`TablePerfModel`): for an operator with roofline time ``R(x)`` (the datasheet
roofline of :class:`~simulator.perf.roofline.RooflinePerfModel` on the profile's ``spec.yaml``)
and measured time ``t_i`` at grid point ``x_i``, the achieved efficiency is ``e_i = R(x_i)/t_i``.
A query ``x`` is answered as ``R(x) / e(x)`` where ``e`` is the piecewise-linear (1-D) or
bilinear (2-D, ``scipy.interpolate.RegularGridInterpolator``) interpolant of ``e_i`` over
``log2(1 + size)`` coordinates, evaluated at ``x`` clipped to the grid. Inside the grid this
returns the measured time at grid points and interpolates between them; beyond it, it holds the
efficiency of the nearest grid edge against the roofline (``t = R(x) / e(edge)``). Operator
classes without a table fall back to the profile's fitted or datasheet roofline, and
:meth:`TablePerfModel.provenance` says which is which. The CPU overhead is a least-squares line
``a + b * num_seqs + c * num_tokens`` through the measured step residuals.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from simulator.base.resources import not_text_reason, not_yaml_reason, safe_load_yaml
from simulator.catalog.hardware import GPUSpec
from simulator.catalog.models import ModelSpec
from simulator.perf.roofline import ACT_BYTES, RooflinePerfModel
from simulator.perf.tables import libm

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

TABLE_FILES = {
    "gemm": "gemm.csv",
    "attention_prefill": "attention_prefill.csv",
    "attention_decode": "attention_decode.csv",
    "elementwise": "elementwise.csv",
    "lm_head": "lm_head.csv",
    "all_reduce": "all_reduce.csv",
    "cpu_overhead": "cpu_overhead.csv",
}
PROVENANCE_FILE = "provenance.yaml"
MEASUREMENT_COLUMNS = ["dtype", "median_s", "p25_s", "p75_s", "iqr_rel", "noisy", "num_samples",
                       "samples_s"]
KEY_COLUMNS = {
    "gemm": ["k", "n"],
    "attention_prefill": ["q_heads", "kv_heads", "head_dim"],
    "attention_decode": ["q_heads", "kv_heads", "head_dim"],
    "elementwise": ["hidden", "intermediate", "q_heads", "kv_heads", "head_dim"],
    "lm_head": ["hidden", "vocab"],
    "all_reduce": ["num_gpus"],
    "cpu_overhead": ["num_layers", "hidden"],
}
GRID_COLUMNS = {
    "gemm": ["m"],
    "attention_prefill": ["q", "start"],
    "attention_decode": ["batch", "ctx_mean"],
    "elementwise": ["tokens"],
    "lm_head": ["rows"],
    "all_reduce": ["bytes"],
    "cpu_overhead": ["num_seqs", "num_tokens"],
}
#: dtypes a requested serving dtype may be answered with (GPU tables)
DTYPE_MATCH = {"bf16": {"bf16", "bfloat16", "fp16", "float16"},
               "fp16": {"bf16", "bfloat16", "fp16", "float16"},
               "fp8": {"fp8", "float8_e4m3fn"}}


# ------------------------------------------------------------------------------ shapes
def shard_shapes(model: ModelSpec, tensor_parallel_size: int) -> dict:
    """Per-GPU shapes of ``model`` at TP ``tensor_parallel_size`` (the tables' key values).

    Returns
    -------
    dict
        ``gemms`` (op -> (k, n)), ``q_heads``, ``kv_heads``, ``head_dim``, ``hidden``,
        ``intermediate`` (per GPU), ``vocab`` (per GPU), ``num_layers``.
    """
    tp = int(tensor_parallel_size)
    m = model
    q_heads = m.num_attention_heads // tp
    kv_heads = max(1, math.ceil(m.num_kv_heads / tp))
    d, h = m.head_dim, m.hidden_size
    return {
        "gemms": {"qkv_proj": (h, (q_heads + 2 * kv_heads) * d), "o_proj": (q_heads * d, h),
                  "mlp_gate_up": (h, 2 * m.intermediate_size // tp),
                  "mlp_down": (m.intermediate_size // tp, h)},
        "q_heads": q_heads, "kv_heads": kv_heads, "head_dim": d, "hidden": h,
        "intermediate": m.intermediate_size // tp, "vocab": m.vocab_size // tp,
        "num_layers": m.num_layers,
    }


def read_profile_tables(profile_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Every table CSV present in ``profile_dir`` (op class -> DataFrame)."""
    import pandas as pd
    out = {}
    d = Path(profile_dir)
    for op, fname in TABLE_FILES.items():
        p = d / fname
        if p.is_file():
            try:
                out[op] = pd.read_csv(p)
            except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
                raise ValueError(f"{p}: cannot read latency table: {e}") from None
            missing = [c for c in KEY_COLUMNS[op] + GRID_COLUMNS[op] if c not in out[op].columns]
            if op != "cpu_overhead" and "median_s" not in out[op].columns:
                missing.append("median_s")
            if missing:
                raise ValueError(f"{p}: latency table lacks column(s) {', '.join(missing)}")
    return out


def read_provenance(profile_dir: str | Path) -> dict:
    """``provenance.yaml`` of a profile folder (empty dict when absent)."""
    p = Path(profile_dir) / PROVENANCE_FILE
    if not p.is_file():
        return {}
    try:
        doc = safe_load_yaml(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ValueError(not_yaml_reason(p, e)) from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: {not_text_reason(e)}; provenance.yaml is YAML text") from None
    return doc if isinstance(doc, dict) else {}


def _select(df: pd.DataFrame, keys: dict, dtypes: set | None) -> pd.DataFrame:
    m = np.ones(len(df), dtype=bool)
    for c, v in keys.items():
        m &= np.isclose(df[c].to_numpy(dtype=float), float(v))
    if dtypes is not None and "dtype" in df.columns:
        m &= df["dtype"].astype(str).str.lower().isin(dtypes).to_numpy()
    out = df[m]
    if "median_s" in out.columns:
        out = out[np.isfinite(out["median_s"].to_numpy(dtype=float))
                  & (out["median_s"].to_numpy(dtype=float) > 0)]
    return out


# ------------------------------------------------------------------------------ interpolants
def _u(x):
    """Interpolation coordinate: log2(1 + size) (the C library's ``log2``:
    :mod:`simulator.perf.tables.libm`)."""
    return libm.log2(1.0 + np.maximum(np.asarray(x, dtype=float), 0.0))


class EfficiencyCurve:
    """Achieved efficiency vs one size, piecewise linear in ``log2(1 + size)``, held at the ends.

    Parameters
    ----------
    x : array_like
        Grid sizes (duplicates are averaged).
    eff : array_like
        Efficiency ``R(x) / t(x)`` at each grid size.
    """

    def __init__(self, x, eff):
        import pandas as pd
        df = pd.DataFrame({"x": np.asarray(x, dtype=float), "e": np.asarray(eff, dtype=float)})
        df = df[np.isfinite(df.e) & (df.e > 0)].groupby("x", as_index=False)["e"].mean()
        if df.empty:
            raise ValueError("empty efficiency curve")
        self.x = df["x"].to_numpy()
        self.u = _u(self.x)
        self.e = df["e"].to_numpy()

    def __call__(self, x):
        return np.interp(_u(x), self.u, self.e)


class EfficiencyGrid:
    """Achieved efficiency on a 2-D grid, bilinear in ``log2(1 + size)`` coordinates.

    Queries are clipped to the grid (efficiency of the nearest edge is held). Missing cells of
    the rectangular grid are filled from the nearest measured cell.
    """

    def __init__(self, x, y, eff):
        import pandas as pd
        from scipy.interpolate import NearestNDInterpolator, RegularGridInterpolator
        df = pd.DataFrame({"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float),
                           "e": np.asarray(eff, dtype=float)})
        df = df[np.isfinite(df.e) & (df.e > 0)].groupby(["x", "y"], as_index=False)["e"].mean()
        if df.empty:
            raise ValueError("empty efficiency grid")
        xs = np.unique(df["x"].to_numpy())
        ys = np.unique(df["y"].to_numpy())
        grid = df.pivot(index="x", columns="y", values="e").reindex(index=xs, columns=ys).to_numpy()
        if np.isnan(grid).any():
            pts = np.column_stack([_u(df["x"]), _u(df["y"])])
            near = NearestNDInterpolator(pts, df["e"].to_numpy())
            gx, gy = np.meshgrid(_u(xs), _u(ys), indexing="ij")
            fill = near(gx, gy)
            grid = np.where(np.isnan(grid), fill, grid)
        self.xs, self.ys = xs, ys
        self.ux, self.uy = _u(xs), _u(ys)
        self.grid = grid
        if len(xs) == 1 or len(ys) == 1:
            self._rgi = None
        else:
            self._rgi = RegularGridInterpolator((self.ux, self.uy), grid, method="linear")
        self._rows: dict = {}

    def __call__(self, x, y):
        ux = np.clip(_u(x), self.ux[0], self.ux[-1])
        uy = np.clip(_u(y), self.uy[0], self.uy[-1])
        ux, uy = np.broadcast_arrays(ux, uy)
        if self._rgi is None:
            if len(self.xs) == 1 and len(self.ys) == 1:
                return np.full(ux.shape, self.grid[0, 0])
            if len(self.xs) == 1:
                return np.interp(uy, self.uy, self.grid[0])
            return np.interp(ux, self.ux, self.grid[:, 0])
        pts = np.stack([ux.ravel(), uy.ravel()], axis=1)
        return self._rgi(pts).reshape(ux.shape)

    def row(self, x: float) -> tuple[np.ndarray, np.ndarray]:
        """(``uy`` grid, efficiency along ``y`` at fixed ``x``): cached for fast 1-D lookups."""
        r = self._rows.get(x)
        if r is None:
            r = (self.uy, np.asarray(self(np.full(len(self.ys), x), self.ys), dtype=float))
            self._rows[x] = r
        return r


# ------------------------------------------------------------------------------ model
class TablePerfModel(RooflinePerfModel):
    """Step-time model from measured latency tables (see module docstring).

    Parameters
    ----------
    model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype
        As for :class:`RooflinePerfModel`; ``gpu`` is the profile the tables belong to.
    tables : dict of DataFrame
        :func:`read_profile_tables` output (rows of other shapes are ignored).
    provenance : dict
        ``provenance.yaml`` of the profile.
    fallback : RooflinePerfModel
        Model for operator classes without a table (fitted or datasheet roofline).
    dtypes : set of str or None
        Table ``dtype`` values accepted (None: any).
    """

    kind = "table"

    def __init__(self, model: ModelSpec, gpu: GPUSpec, tensor_parallel_size: int,
                 weight_dtype: str, kv_cache_dtype: str, tables: dict, provenance: dict,
                 fallback: RooflinePerfModel, dtypes: set | None = None):
        super().__init__(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype)
        self.fallback = fallback
        self.meta = provenance
        self.shapes = shard_shapes(model, self.tp)
        device = provenance.get("device_name") or gpu.name
        date = str(provenance.get("date", "date unknown"))[:10]
        self.measured_label = f"measured ({device}, {date})"
        sh = self.shapes
        self._gemm: dict[str, EfficiencyCurve] = {}
        self._prefill = self._decode = self._ew = self._lm = self._ar = None
        self._cpu: tuple[float, float, float] | None = None
        self._cpu_note = ""
        moe = bool(model.num_experts)
        g = tables.get("gemm")
        if g is not None:
            for op, (k, n) in sh["gemms"].items():
                if moe and op.startswith("mlp"):
                    continue
                rows = _select(g, {"k": k, "n": n}, dtypes)
                if len(rows):
                    m = rows["m"].to_numpy(dtype=float)
                    ref = np.array([RooflinePerfModel.gemm_time(self, op, int(v)) for v in m])
                    self._gemm[op] = EfficiencyCurve(m, ref / rows["median_s"].to_numpy(dtype=float))
        akey = {"q_heads": sh["q_heads"], "kv_heads": sh["kv_heads"], "head_dim": sh["head_dim"]}
        t = tables.get("attention_prefill")
        if t is not None:
            rows = _select(t, akey, dtypes)
            if len(rows):
                q = rows["q"].to_numpy(dtype=float)
                s = rows["start"].to_numpy(dtype=float)
                ref = np.array([RooflinePerfModel.attn_prefill_time(self, int(a), int(b))
                                for a, b in zip(q, s)])
                self._prefill = EfficiencyGrid(q, s, ref / rows["median_s"].to_numpy(dtype=float))
        t = tables.get("attention_decode")
        if t is not None:
            rows = _select(t, akey, dtypes)
            if len(rows):
                b = rows["batch"].to_numpy(dtype=float)
                c = rows["ctx_mean"].to_numpy(dtype=float)
                ref = np.array([float(RooflinePerfModel.attn_decode_time(self, int(bb), bb * cc))
                                for bb, cc in zip(b, c)])
                self._decode = EfficiencyGrid(b, c, ref / rows["median_s"].to_numpy(dtype=float))
        t = tables.get("elementwise")
        if t is not None:
            rows = _select(t, {"hidden": sh["hidden"], "intermediate": sh["intermediate"], **akey},
                           dtypes)
            if len(rows):
                x = rows["tokens"].to_numpy(dtype=float)
                ref = np.array([RooflinePerfModel.elementwise_time(self, int(v)) for v in x])
                self._ew = EfficiencyCurve(x, ref / rows["median_s"].to_numpy(dtype=float))
        t = tables.get("lm_head")
        if t is not None:
            rows = _select(t, {"hidden": sh["hidden"], "vocab": sh["vocab"]}, dtypes)
            if len(rows):
                x = rows["rows"].to_numpy(dtype=float)
                ref = np.array([RooflinePerfModel.lm_head_time(self, int(v)) for v in x])
                self._lm = EfficiencyCurve(x, ref / rows["median_s"].to_numpy(dtype=float))
        t = tables.get("all_reduce")
        if t is not None and self.tp > 1:
            rows = _select(t, {"num_gpus": self.tp}, dtypes)
            if len(rows):
                x = rows["bytes"].to_numpy(dtype=float)
                ref = np.array([RooflinePerfModel.all_reduce_time(
                    self, v / (model.hidden_size * ACT_BYTES)) for v in x])
                self._ar = EfficiencyCurve(x, ref / rows["median_s"].to_numpy(dtype=float))
        t = tables.get("cpu_overhead")
        if t is not None:
            rows = _select(t, {"num_layers": sh["num_layers"], "hidden": sh["hidden"]}, None)
            if len(rows) >= 1 and "residual_s" in rows.columns:
                self._cpu = fit_cpu_overhead(rows)
        self._prov = self._build_provenance()

    # ---------------------------------------------------------------- provenance
    def _build_provenance(self) -> dict[str, str]:
        fb = self.fallback.provenance()
        m = self.measured_label
        prov = dict(fb)
        ops = list(self.shapes["gemms"])
        if self._gemm:
            have = [o for o in ops if o in self._gemm]
            prov["gemm"] = m if len(have) == len(ops) else (
                f"{m} for {', '.join(have)}; {fb.get('gemm', 'datasheet')} for the rest")
        for name, obj in (("attention_prefill", self._prefill), ("attention_decode", self._decode),
                          ("elementwise", self._ew), ("lm_head", self._lm),
                          ("all_reduce", self._ar)):
            if obj is not None:
                prov[name] = m
        if self.tp <= 1:
            prov["all_reduce"] = "none (TP=1)"
        if self._cpu is not None:
            prov["cpu_overhead"] = m.replace("measured (", "measured (engine step residuals, ", 1)
        return prov

    def provenance(self) -> dict[str, str]:
        """Operator class -> ``measured (<device>, <date>)``, ``fitted (...)`` or ``datasheet``."""
        return dict(self._prov)

    # ---------------------------------------------------------------- operators
    def gemm_time(self, op: str, num_tokens: int) -> float:
        c = self._gemm.get(op)
        if c is None:
            return self.fallback.gemm_time(op, num_tokens)
        return RooflinePerfModel.gemm_time(self, op, num_tokens) / float(c(num_tokens))

    def attn_prefill_time(self, q: int, start: int) -> float:
        if self._prefill is None:
            return self.fallback.attn_prefill_time(q, start)
        return RooflinePerfModel.attn_prefill_time(self, q, start) / float(self._prefill(q, start))

    def attn_decode_time(self, num_seqs: int, ctx_total, q_per_seq: int = 1):
        if self._decode is None or num_seqs <= 0:
            return self.fallback.attn_decode_time(num_seqs, ctx_total, q_per_seq)
        ref = RooflinePerfModel.attn_decode_time(self, num_seqs, ctx_total, q_per_seq)
        uy, row = self._decode.row(num_seqs)
        mean = np.asarray(ctx_total, dtype=float) / num_seqs
        eff = np.interp(_u(mean), uy, row)
        out = ref / eff
        return out if np.ndim(ctx_total) else float(out)

    def elementwise_time(self, num_tokens: int, graph: bool = False) -> float:
        if self._ew is None:
            return self.fallback.elementwise_time(num_tokens, graph)
        return RooflinePerfModel.elementwise_time(self, num_tokens) / float(self._ew(num_tokens))

    def lm_head_time(self, num_rows: int) -> float:
        if num_rows <= 0:
            return 0.0
        if self._lm is None:
            return self.fallback.lm_head_time(num_rows)
        return RooflinePerfModel.lm_head_time(self, num_rows) / float(self._lm(num_rows))

    def all_reduce_time(self, num_tokens: int, graph: bool = False) -> float:
        if self.tp <= 1:
            return 0.0
        if self._ar is None:
            return self.fallback.all_reduce_time(num_tokens)
        byts = num_tokens * self.model.hidden_size * ACT_BYTES
        return RooflinePerfModel.all_reduce_time(self, num_tokens) / float(self._ar(byts))

    @property
    def has_cpu_overhead_table(self) -> bool:
        """Whether this profile measured the engine's CPU time per step (``cpu_overhead``)."""
        return self._cpu is not None

    def cpu_overhead_time(self, num_seqs: int, num_tokens: int | None = None) -> float:
        """Engine CPU time per step: ``a + b * num_seqs + c * num_tokens`` (seconds)."""
        if self._cpu is None:
            return self.fallback.cpu_overhead_time(num_seqs)
        a, b, c = self._cpu
        toks = num_seqs if num_tokens is None else num_tokens
        return max(0.0, a + b * num_seqs + c * toks)

    def op_times(self, shape) -> dict[str, float]:
        out = super().op_times(shape)
        out["cpu_overhead"] = self.cpu_overhead_time(shape.num_seqs, shape.num_tokens)
        return out

    @property
    def cpu_overhead_params(self) -> tuple[float, float, float] | None:
        """(a, b, c) of the CPU-overhead line (seconds, s/seq, s/token), or None."""
        return self._cpu


def fit_cpu_overhead(rows: pd.DataFrame) -> tuple[float, float, float]:
    """Robust fit ``residual_s = a + b * num_seqs + c * num_tokens`` (``a, b, c >= 0``).

    Rows come from ``cpu_overhead.csv``: one per engine step shape, the median over
    ``num_samples`` steps of (step wall time - the operator times measured in that step).
    ``scipy.optimize.least_squares`` with a Cauchy loss (scale: 10% of the median residual),
    each row weighted by ``sqrt(num_samples)``, so that a few steps hit by a page fault or a
    scheduler hiccup do not pull the line.
    """
    from scipy.optimize import least_squares
    y = rows["residual_s"].to_numpy(dtype=float)
    s = rows["num_seqs"].to_numpy(dtype=float)
    t = rows["num_tokens"].to_numpy(dtype=float)
    w = np.sqrt(rows["num_samples"].to_numpy(dtype=float)) if "num_samples" in rows.columns \
        else np.ones_like(y)
    ok = np.isfinite(y) & np.isfinite(w)
    y, s, t, w = y[ok], s[ok], t[ok], w[ok]
    if len(y) == 0:
        return 0.0, 0.0, 0.0
    med = float(np.median(y))
    if len(y) < 3 or np.ptp(s) == 0:
        return max(med, 0.0), 0.0, 0.0
    scale = max(abs(med) * 0.1, 1e-6)

    def res(p):
        return w * (p[0] + p[1] * s + p[2] * t - y) / scale

    sol = least_squares(res, [max(med, 0.0), 0.0, 0.0], bounds=([0.0] * 3, [np.inf] * 3),
                        loss="cauchy", f_scale=1.0)
    a, b, c = (float(v) for v in sol.x)
    return a, b, c


def load_table_perf_model(model: ModelSpec, gpu: GPUSpec, tensor_parallel_size: int = 1,
                          weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16",
                          required: bool = False) -> TablePerfModel | None:
    """A :class:`TablePerfModel` when ``gpu``'s profile folder has tables for this model/TP.

    "Has tables" means ``gemm.csv`` holds rows for all four GEMM shapes of the model at this
    TP degree (in a matching dtype); the other operator classes are optional.

    Returns
    -------
    TablePerfModel or None
        None when there are no tables for this model/TP (and ``required`` is False).

    Raises
    ------
    ValueError
        ``required`` and no tables (the message says what is missing and how to measure it),
        or a table file is unreadable.
    """
    from simulator.perf.fitted import build_fitted_or_roofline
    tp = int(tensor_parallel_size)
    where = gpu.profile_dir
    if where is None or not (Path(where) / TABLE_FILES["gemm"]).is_file():
        if required:
            raise ValueError(f"GPU profile {gpu.name!r} has no latency tables "
                             f"({where or 'no folder'}); measure them with "
                             f"'servesim calibrate --model {model.name} -o <profile folder>'")
        return None
    tables = read_profile_tables(where)
    prov = read_provenance(where)
    dtypes = _accepted_dtypes(weight_dtype, prov, tables.get("gemm"))
    shapes = shard_shapes(model, tp)
    g = tables["gemm"]
    missing = [f"{op} ({k}x{n})" for op, (k, n) in shapes["gemms"].items()
               if not (model.num_experts and op.startswith("mlp"))
               and _select(g, {"k": k, "n": n}, dtypes).empty]
    if missing:
        if required:
            raise ValueError(f"{where}: no latency tables for model {model.name} at TP {tp} "
                             f"(missing GEMM shapes {', '.join(missing)}, dtype {weight_dtype}); "
                             f"run 'servesim calibrate --model {model.name} --tensor-parallel-size "
                             f"{tp} -o {where}'")
        return None
    fallback = build_fitted_or_roofline(model, gpu, tp, weight_dtype, kv_cache_dtype)
    return TablePerfModel(model, gpu, tp, weight_dtype, kv_cache_dtype, tables, prov, fallback,
                          dtypes)


def _accepted_dtypes(weight_dtype: str, prov: dict, gemm: pd.DataFrame | None) -> set | None:
    """Table dtypes that may answer ``weight_dtype``.

    A CPU profile (``provenance.yaml`` ``dtype_policy: any``) measured in float32 answers every
    requested dtype (the CPU engine runs float32); GPU tables must match the dtype family.
    """
    if str(prov.get("dtype_policy", "")).lower() == "any":
        return None
    if gemm is None or "dtype" not in gemm.columns:
        return None
    return DTYPE_MATCH.get(weight_dtype, {weight_dtype})
