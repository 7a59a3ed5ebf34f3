"""Fit size-dependent roofline efficiencies to Vidur's public A100/H100 operator timings.

Usage::

    python -m calibration.fit_vidur --vidur-dir ../shared/reference/vidur -o hardware_profiles/

Reads (never copies) the per-operator medians that Vidur measured on A100-80GB and H100-80GB
(Agrawal et al., "Vidur: A Large-Scale Simulation Framework for LLM Inference", MLSys 2024;
github.com/microsoft/vidur at commit 7d47513, MIT license, Copyright (c) Microsoft Corporation):

- ``data/profiling/compute/<sku>/<model>/mlp.csv``: per-layer, per-GPU GEMM and elementwise
  times (ms) vs tokens, for several models at TP 1/2/4/8;
- ``data/profiling/network/<sku>_dgx/all_reduce.csv``: NCCL all-reduce (ms) vs bytes, intra-node;
- ``legacy/a100/attention.csv`` (Vidur commit acb95f6): FlashAttention decode and prefill (ms)
  for the Llama-2-70B attention shape at TP 2 on A100.

For each GPU it fits the shape-based forms of :mod:`simulator.perf.fitted` with
``scipy.optimize.least_squares`` on log(time) (soft-L1 loss, so a few noisy points do not
dominate) and writes ``<out>/<gpu>/fitted.yaml``: the parameters, the sources, and a
cross-validation table. Error metric: |predicted / measured - 1| in percent, median and p90 over
rows. Cross-validation holds out whole groups, so it measures the generalisation that matters
(a model, TP degree or batch size the fit has not seen):

- GEMM and elementwise ops: leave-one-model-out (each model's rows predicted by a fit to the
  other models);
- all-reduce: leave-one-TP-degree-out;
- attention decode / prefill: leave-one-batch-size-out / leave-one-chunk-size-out.

The table also gives the error of the datasheet roofline (``RooflinePerfModel`` defaults) on the
same rows, for comparison.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from simulator.catalog.hardware import get_gpu, load_gpu_spec
from simulator.catalog.models import ModelSpec
from simulator.perf.fitted import (
    ELEMENTWISE_OPS,
    FittedPerfModel,
    all_reduce_form,
    attn_decode_form,
    attn_prefill_form,
    elementwise_bytes,
    elementwise_form,
    gemm_form,
)
from simulator.perf.roofline import RooflinePerfModel

FIT_VERSION = "1.0"
VIDUR_COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"
VIDUR_LEGACY_ATTN_COMMIT = "acb95f6cd118071401fa805a0b0bc11bd2018fc6"
CITATION = ("Vidur (Agrawal et al., MLSys 2024), github.com/microsoft/vidur @ 7d47513, "
            "MIT license, Copyright (c) Microsoft Corporation")
#: SKU in Vidur's tree -> our profile, NVLink node type, SM count (NVIDIA A100/H100 whitepapers)
GPUS = {
    "a100": {"profile": "a100-sxm-80gb", "node": "a100_dgx", "num_sms": 108},
    "h100": {"profile": "h100-sxm", "node": "h100_dgx", "num_sms": 132},
}
VIDUR_GEMM_OPS = {"attn_pre_proj": "qkv", "attn_post_proj": "o", "mlp_up_proj": "up",
                  "mlp_down_proj": "down"}
VIDUR_EW_OPS = {"input_layernorm": "rmsnorm", "post_attention_layernorm": "rmsnorm",
                "attn_rope": "rope", "mlp_act": "act", "add": "add"}
OUR_GEMM_NAME = {"qkv": "qkv_proj", "o": "o_proj", "up": "mlp_gate_up", "down": "mlp_down"}


# ------------------------------------------------------------------------------ parameters
@dataclass(frozen=True)
class Param:
    """One fitted parameter: ``log`` (positive) or ``logit`` (fraction in (0, 1))."""

    name: str
    kind: str
    init: float

    def to_x(self, v: float) -> float:
        if self.kind == "log":
            return math.log(v)
        v = min(max(v, 1e-6), 1 - 1e-6)
        return math.log(v / (1 - v))

    def from_x(self, x: float) -> float:
        return math.exp(x) if self.kind == "log" else 1.0 / (1.0 + math.exp(-x))


GEMM_PARAMS = [Param("t0_c", "log", 3e-6), Param("e_max", "logit", 0.7),
               Param("m_half", "log", 64.0), Param("e_mem", "logit", 0.85),
               Param("p", "log", 4.0), Param("gamma", "log", 0.2), Param("t0_m", "log", 3e-6)]
EW_PARAMS = [Param("t0", "log", 3e-6), Param("e", "logit", 0.5), Param("p", "log", 2.0)]
AR_PARAMS = [Param("t0", "log", 1e-5), Param("alpha", "log", 0.3), Param("e", "logit", 0.7),
             Param("q", "log", 2.0)]
AD_PARAMS = [Param("t0", "log", 1e-5), Param("t_seq", "log", 1e-7), Param("e", "logit", 0.8),
             Param("p", "log", 1.0)]
AP_PARAMS = [Param("t0", "log", 5e-6), Param("e_max", "logit", 0.4), Param("c_half", "log", 1e3),
             Param("q_half", "log", 4.0)]


def _round(v: float, sig: int = 6) -> float:
    if v == 0 or not math.isfinite(v):
        return float(v)
    return float(f"{v:.{sig}g}")


def fit_params(params: list[Param], predict, t: np.ndarray, start: dict | None = None) -> dict:
    """Least-squares fit of ``predict(dict) -> seconds`` to times ``t`` in log space.

    Returns the parameters rounded to 6 significant digits (what ``fitted.yaml`` stores).
    """
    x0 = np.array([p.to_x((start or {}).get(p.name, p.init)) for p in params])
    logt = np.log(t)

    def res(x):
        d = {p.name: p.from_x(v) for p, v in zip(params, x)}
        with np.errstate(all="ignore"):
            r = np.log(predict(d)) - logt
        return np.nan_to_num(r, nan=10.0, posinf=10.0, neginf=-10.0)

    sol = least_squares(res, x0, loss="soft_l1", f_scale=0.05, max_nfev=4000)
    return {p.name: _round(p.from_x(v)) for p, v in zip(params, sol.x)}


def abs_pct(pred, meas) -> np.ndarray:
    return np.abs(np.asarray(pred, dtype=float) / np.asarray(meas, dtype=float) - 1.0) * 100.0


def _stats(err: np.ndarray) -> tuple[float, float]:
    return round(float(np.median(err)), 2), round(float(np.percentile(err, 90)), 2)


# ------------------------------------------------------------------------------ data
def _vidur_model_spec(row, name: str, tp: int) -> ModelSpec:
    h, nq = int(row["n_embd"]), int(row["n_head"])
    return ModelSpec(name=name, hf_id=None, num_layers=1, hidden_size=h, num_attention_heads=nq,
                     num_kv_heads=int(row["n_kv_head"]), head_dim=h // nq,
                     intermediate_size=int(row["n_expanded_embd"]),
                     vocab_size=int(row["vocab_size"]), max_position_embeddings=4096)


def load_compute(vidur_dir: Path, sku: str) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """GEMM rows and elementwise rows (seconds) from every ``mlp.csv`` of ``sku``.

    Returns
    -------
    gemm : DataFrame
        ``model, tp, op (qkv|o|up|down), m, k, n, t``.
    ew : DataFrame
        ``model, tp, op (rmsnorm|rope|act|add), tokens, bytes, t``.
    specs : dict
        Model name -> :class:`ModelSpec` rebuilt from the CSV's shape columns.
    """
    files = sorted((vidur_dir / "data" / "profiling" / "compute" / sku).glob("*/*/mlp.csv"))
    if not files:
        raise ValueError(f"no mlp.csv under {vidur_dir}/data/profiling/compute/{sku}")
    g_parts, e_parts, specs = [], [], {}
    for f in files:
        d = pd.read_csv(f)
        name = f.parent.name
        spec = _vidur_model_spec(d.iloc[0], name, 1)
        specs[name] = spec
        for tp, dt in d.groupby("num_tensor_parallel_workers"):
            tp = int(tp)
            rp = RooflinePerfModel(spec, _DUMMY_GPU, tp)
            m = dt["num_tokens"].to_numpy(dtype=float)
            for col, op in VIDUR_GEMM_OPS.items():
                k, n = rp.gemms[OUR_GEMM_NAME[op]]
                g_parts.append(pd.DataFrame({
                    "model": name, "tp": tp, "op": op, "m": m, "k": float(k), "n": float(n),
                    "t": dt[f"time_stats.{col}.median"].to_numpy(dtype=float) * 1e-3}))
            byts = elementwise_bytes(spec, tp, m)
            for col, op in VIDUR_EW_OPS.items():
                e_parts.append(pd.DataFrame({
                    "model": name, "tp": tp, "op": op, "col": col, "tokens": m,
                    "bytes": byts[op],
                    "t": dt[f"time_stats.{col}.median"].to_numpy(dtype=float) * 1e-3}))
    gemm = pd.concat(g_parts, ignore_index=True)
    ew = pd.concat(e_parts, ignore_index=True)
    return gemm[gemm.t > 0], ew[ew.t > 0], specs


def load_all_reduce(vidur_dir: Path, node: str) -> pd.DataFrame:
    """Intra-node all-reduce rows: ``p`` (GPUs), ``bytes``, ``t`` (s)."""
    f = vidur_dir / "data" / "profiling" / "network" / node / "all_reduce.csv"
    d = pd.read_csv(f)
    d = d[d["num_workers"] == d["devices_per_node"]]
    return pd.DataFrame({"p": d["num_workers"].to_numpy(dtype=float),
                         "bytes": d["size"].to_numpy(dtype=float),
                         "t": d["time_stats.all_reduce.median"].to_numpy(dtype=float) * 1e-3})


def load_legacy_attention(vidur_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Decode rows (``b, ctx_total, t``) and prefill rows (``q, s, t``) of the legacy table."""
    f = vidur_dir / "legacy" / "a100" / "attention.csv"
    a = pd.read_csv(f)
    r0 = a.iloc[0]
    tp = int(r0["num_tensor_parallel_workers"])
    shape = {"q_heads": int(r0["n_q_head"]) // tp,
             "kv_heads": max(1, -(-int(r0["n_kv_head"]) // tp)),
             "head_dim": int(r0["n_embd"]) // int(r0["n_q_head"]), "tp": tp,
             "n_embd": int(r0["n_embd"]), "n_q_head": int(r0["n_q_head"]),
             "n_kv_head": int(r0["n_kv_head"])}
    dec = a[~a["is_prefill"].astype(bool)]
    pre = a[a["is_prefill"].astype(bool)]
    b = dec["batch_size"].to_numpy(dtype=float)
    decode = pd.DataFrame({"b": b, "ctx_total": b * dec["kv_cache_size"].to_numpy(dtype=float),
                           "t": dec["time_stats.attn_decode.median"].to_numpy(dtype=float) * 1e-3})
    prefill = pd.DataFrame({"q": pre["prefill_chunk_size"].to_numpy(dtype=float),
                            "s": pre["kv_cache_size"].to_numpy(dtype=float),
                            "t": pre["time_stats.attn_prefill.median"].to_numpy(dtype=float) * 1e-3})
    return decode[decode.t > 0], prefill[prefill.t > 0], shape


class _Dummy:
    """Placeholder GPU for building GEMM shapes (only the model/TP matter)."""

    bf16_flops_per_s = 1e15
    hbm_bandwidth_bytes_per_s = 1e12
    interconnect_bandwidth_bytes_per_s = 1e11
    host_link_bandwidth_bytes_per_s = 1e10

    def flops_per_s(self, _dtype):
        return self.bf16_flops_per_s


_DUMMY_GPU = _Dummy()


# ------------------------------------------------------------------------------ fitting
def _group_cv(df: pd.DataFrame, key: str, params, make_pred, start: dict) -> np.ndarray:
    """Leave-one-``key``-out predictions for every row of ``df``."""
    out = np.empty(len(df))
    for val in df[key].unique():
        held = (df[key] == val).to_numpy()
        tr = df[~held]
        prm = fit_params(params, make_pred(tr), tr["t"].to_numpy(), start)
        out[held] = make_pred(df[held])(prm)
    return out


def fit_gpu(vidur_dir: Path, sku: str, profiles_dir: Path, log=print) -> dict:
    """Fit every operator class of one GPU; returns the ``fitted.yaml`` document."""
    info = GPUS[sku]
    local = profiles_dir / info["profile"] / "spec.yaml"
    spec = load_gpu_spec(local) if local.is_file() else get_gpu(info["profile"])
    peak, bw = spec.bf16_flops_per_s, spec.hbm_bandwidth_bytes_per_s
    link = spec.interconnect_bandwidth_bytes_per_s
    sms = info["num_sms"]
    gemm, ew, vspecs = load_compute(vidur_dir, sku)
    loo: list[dict] = []    # cross-validation rows, appended by each fit in turn
    ops: dict = {"gemm": _fit_gemm(gemm, vspecs, spec, sms, sku, loo, log),
                 "elementwise": _fit_elementwise(ew, vspecs, spec, sku, loo, log),
                 "all_reduce": _fit_all_reduce(vidur_dir, info["node"], spec, sku, loo, log)}
    # attention: A100 only (the legacy FlashAttention table)
    if sku == "a100" and (vidur_dir / "legacy" / "a100" / "attention.csv").is_file():
        ops.update(_fit_attention(vidur_dir, spec, sku, loo, log))
    models = ", ".join(sorted(vspecs))
    doc = {
        "gpu": info["profile"],
        "kind": "fitted",
        "num_sms": sms,
        "source": (f"{CITATION}: data/profiling/compute/{sku}/*/mlp.csv ({models}; TP 1/2/4/8), "
                   f"data/profiling/network/{info['node']}/all_reduce.csv"
                   + (", legacy a100/attention.csv @acb95f6" if "attention_decode" in ops else "")),
        "source_short": f"Vidur {sku} mlp.csv @7d47513",
        "fitted_by": f"calibration/fit_vidur.py v{FIT_VERSION}",
        "fitted_on": _dt.date.today().isoformat(),
        "spec_constants": {"bf16_flops_per_s": peak, "hbm_bandwidth_bytes_per_s": bw,
                           "interconnect_bandwidth_bytes_per_s": link},
        "forms": "see simulator/perf/fitted.py (times in seconds, efficiencies as fractions)",
        "operators": ops,
        "cross_validation": {
            "metric": "|predicted/measured - 1| in percent over rows (median, p90)",
            "table": loo},
    }
    _check_model_matches_forms(doc, spec, vspecs, gemm)
    return doc


def _fit_gemm(gemm: pd.DataFrame, vspecs: dict, spec, sms: int, sku: str, loo: list,
              log) -> dict:
    """GEMM parameters: one set per op (qkv, o, up, down) and one over all (``any``); each
    op's cross-validation row appended to ``loo``."""
    peak, bw = spec.bf16_flops_per_s, spec.hbm_bandwidth_bytes_per_s

    def gemm_pred(d):
        m, k, n = d["m"].to_numpy(), d["k"].to_numpy(), d["n"].to_numpy()
        return lambda prm: gemm_form(prm, m, k, n, peak, bw, sms)

    ds_gemm = _datasheet_gemm(gemm, vspecs, spec)
    gemm_params = {}
    for op in ["qkv", "o", "up", "down", "any"]:
        d = gemm if op == "any" else gemm[gemm.op == op]
        prm = fit_params(GEMM_PARAMS, gemm_pred(d), d["t"].to_numpy())
        gemm_params[op] = prm
        if op == "any":
            continue
        ins = abs_pct(gemm_pred(d)(prm), d["t"])
        cv = abs_pct(_group_cv(d, "model", GEMM_PARAMS, gemm_pred, prm), d["t"])
        ds = abs_pct(ds_gemm[d.index], d["t"])
        loo.append(_row(f"gemm.{op}", len(d), ins, cv, ds, "leave-one-model-out"))
        log(f"  {sku} gemm.{op}: in-sample {_stats(ins)} LOMO {_stats(cv)} datasheet {_stats(ds)}")
    return gemm_params


def _fit_elementwise(ew: pd.DataFrame, vspecs: dict, spec, sku: str, loo: list, log) -> dict:
    """Elementwise parameters per op; cross-validation rows per op and for the per-layer
    total (2 norms + rope + act + 2 residual adds) appended to ``loo``."""
    bw = spec.hbm_bandwidth_bytes_per_s

    def ew_pred(d):
        b = d["bytes"].to_numpy()
        return lambda prm: elementwise_form(prm, b, bw)

    ew_params, ew_cv_pred, ew_in_pred = {}, pd.Series(0.0, index=ew.index), \
        pd.Series(0.0, index=ew.index)
    for op in ELEMENTWISE_OPS:
        d = ew[ew.op == op]
        prm = fit_params(EW_PARAMS, ew_pred(d), d["t"].to_numpy())
        ew_params[op] = prm
        pin = ew_pred(d)(prm)
        pcv = _group_cv(d, "model", EW_PARAMS, ew_pred, prm)
        ew_in_pred[d.index], ew_cv_pred[d.index] = pin, pcv
        ins, cv = abs_pct(pin, d["t"]), abs_pct(pcv, d["t"])
        loo.append(_row(f"elementwise.{op}", len(d), ins, cv, None, "leave-one-model-out"))
        log(f"  {sku} elementwise.{op}: in-sample {_stats(ins)} LOMO {_stats(cv)}")
    # per-layer total: 2 norms + rope + act + 2 residual adds
    key = ["model", "tp", "tokens"]
    w = ew["col"].map({"add": 2.0}).fillna(1.0)
    tot = pd.DataFrame({"meas": ew["t"] * w, "pin": ew_in_pred * w, "pcv": ew_cv_pred * w})
    tot[key] = ew[key]
    tot = tot.groupby(key, as_index=False)[["meas", "pin", "pcv"]].sum()
    ds_ew = _datasheet_ew(tot, vspecs, spec)
    ins, cv, ds = abs_pct(tot["pin"], tot["meas"]), abs_pct(tot["pcv"], tot["meas"]), \
        abs_pct(ds_ew, tot["meas"])
    loo.append(_row("elementwise (layer total)", len(tot), ins, cv, ds, "leave-one-model-out"))
    log(f"  {sku} elementwise total: in-sample {_stats(ins)} LOMO {_stats(cv)} datasheet {_stats(ds)}")
    return ew_params


def _fit_all_reduce(vidur_dir: Path, node: str, spec, sku: str, loo: list, log) -> dict:
    """All-reduce parameters from the node's ``all_reduce.csv`` (leave-one-TP-degree-out)."""
    link = spec.interconnect_bandwidth_bytes_per_s
    ar = load_all_reduce(vidur_dir, node)

    def ar_pred(d):
        b, p = d["bytes"].to_numpy(), d["p"].to_numpy()
        return lambda prm: all_reduce_form(prm, b, p, link)

    prm = fit_params(AR_PARAMS, ar_pred(ar), ar["t"].to_numpy())
    ins = abs_pct(ar_pred(ar)(prm), ar["t"])
    cv = abs_pct(_group_cv(ar, "p", AR_PARAMS, ar_pred, prm), ar["t"])
    ds = abs_pct(_datasheet_ar(ar, spec), ar["t"])
    loo.append(_row("all_reduce", len(ar), ins, cv, ds, "leave-one-TP-degree-out"))
    log(f"  {sku} all_reduce: in-sample {_stats(ins)} LOTPO {_stats(cv)} datasheet {_stats(ds)}")
    return {**prm, "source": f"Vidur {node}/all_reduce.csv @7d47513, "
                             "intra-node NVLink, TP 2/4/8"}


def _fit_attention(vidur_dir: Path, spec, sku: str, loo: list, log) -> dict:
    """``attention_decode`` and ``attention_prefill`` parameters from Vidur's legacy A100
    FlashAttention table."""
    peak, bw = spec.bf16_flops_per_s, spec.hbm_bandwidth_bytes_per_s
    dec, pre, shp = load_legacy_attention(vidur_dir)
    kvb = 2 * shp["kv_heads"] * shp["head_dim"] * 2
    src = (f"Vidur legacy a100/attention.csv @acb95f6, FlashAttention, {shp['q_heads']} q / "
           f"{shp['kv_heads']} kv heads per GPU, head_dim {shp['head_dim']}")

    def ad_pred(d):
        b, s = d["b"].to_numpy(), d["ctx_total"].to_numpy()
        return lambda prm: attn_decode_form(prm, b, s, kvb, bw)

    prm = fit_params(AD_PARAMS, ad_pred(dec), dec["t"].to_numpy())
    ins = abs_pct(ad_pred(dec)(prm), dec["t"])
    cv = abs_pct(_group_cv(dec, "b", AD_PARAMS, ad_pred, prm), dec["t"])
    ds_d, ds_p = _datasheet_attn(dec, pre, shp, spec)
    loo.append(_row("attention_decode", len(dec), ins, cv, abs_pct(ds_d, dec["t"]),
                    "leave-one-batch-size-out"))
    log(f"  {sku} attention_decode: in-sample {_stats(ins)} LOBO {_stats(cv)}")
    ops = {"attention_decode": {**prm, "source": src}}

    def ap_pred(d):
        q, s = d["q"].to_numpy(), d["s"].to_numpy()
        return lambda prm: attn_prefill_form(prm, q, s, shp["head_dim"], shp["q_heads"], peak)

    prm = fit_params(AP_PARAMS, ap_pred(pre), pre["t"].to_numpy())
    ins = abs_pct(ap_pred(pre)(prm), pre["t"])
    cv = abs_pct(_group_cv(pre, "q", AP_PARAMS, ap_pred, prm), pre["t"])
    loo.append(_row("attention_prefill", len(pre), ins, cv, abs_pct(ds_p, pre["t"]),
                    "leave-one-chunk-size-out"))
    log(f"  {sku} attention_prefill: in-sample {_stats(ins)} LOQO {_stats(cv)}")
    ops["attention_prefill"] = {**prm, "source": src}
    return ops


def _row(op, n, ins, cv, ds, method) -> dict:
    r = {"operator": op, "rows": int(n), "cv_method": method,
         "cv_median_abs_pct": _stats(cv)[0], "cv_p90_abs_pct": _stats(cv)[1],
         "in_sample_median_abs_pct": _stats(ins)[0]}
    if ds is not None:
        r["datasheet_median_abs_pct"] = _stats(ds)[0]
    return r


# ------------------------------------------------------------------------------ datasheet
def _datasheet_gemm(gemm: pd.DataFrame, vspecs: dict, gpu) -> pd.Series:
    out = pd.Series(np.nan, index=gemm.index)
    for (name, tp, op), d in gemm.groupby(["model", "tp", "op"]):
        rp = RooflinePerfModel(vspecs[name], gpu, int(tp))
        out[d.index] = [rp.gemm_time(OUR_GEMM_NAME[op], int(m)) for m in d["m"]]
    return out


def _datasheet_ew(tot: pd.DataFrame, vspecs: dict, gpu) -> np.ndarray:
    out = np.empty(len(tot))
    for i, (name, tp, t) in enumerate(zip(tot["model"], tot["tp"], tot["tokens"])):
        out[i] = RooflinePerfModel(vspecs[name], gpu, int(tp)).elementwise_time(int(t))
    return out


def _datasheet_ar(ar: pd.DataFrame, gpu) -> np.ndarray:
    # hidden 1 (the all-reduce formula reads only the hidden size); 8 heads so every TP degree
    # of the data (1..8) shards the model
    unit = ModelSpec("unit", None, 1, 1, 8, 8, 1, 8, 1, 1)
    out = np.empty(len(ar))
    for i, (p, b) in enumerate(zip(ar["p"], ar["bytes"])):
        out[i] = RooflinePerfModel(unit, gpu, int(p)).all_reduce_time(b / 2.0)
    return out


def _datasheet_attn(dec, pre, shp, gpu):
    spec = ModelSpec("vidur-attn", None, 1, shp["n_embd"], shp["n_q_head"], shp["n_kv_head"],
                     shp["head_dim"], 4 * shp["n_embd"], 32000, 4096)
    rp = RooflinePerfModel(spec, gpu, shp["tp"])
    d = np.array([float(rp.attn_decode_time(int(b), s)) for b, s in zip(dec["b"], dec["ctx_total"])])
    p = np.array([rp.attn_prefill_time(int(q), int(s)) for q, s in zip(pre["q"], pre["s"])])
    return d, p


def _check_model_matches_forms(doc: dict, gpu, vspecs: dict, gemm: pd.DataFrame) -> None:
    """The simulator's FittedPerfModel must reproduce the fitted forms (guards against drift)."""
    row = gemm.iloc[len(gemm) // 2]
    fm = FittedPerfModel(vspecs[row["model"]], gpu, int(row["tp"]), fitted=doc)
    a = fm.gemm_time(OUR_GEMM_NAME[row["op"]], int(row["m"]))
    b = float(gemm_form(doc["operators"]["gemm"][row["op"]], row["m"], row["k"], row["n"],
                        gpu.bf16_flops_per_s, gpu.hbm_bandwidth_bytes_per_s, doc["num_sms"]))
    if not math.isclose(a, b, rel_tol=1e-9):
        raise RuntimeError(f"FittedPerfModel.gemm_time {a} != fitted form {b}")


# ------------------------------------------------------------------------------ output
def loo_markdown(docs: dict) -> str:
    """Markdown table of the cross-validation errors of several fitted profiles."""
    lines = [("| GPU | operator | rows | CV method | CV median % | CV p90 % | in-sample median % "
             "| datasheet roofline median % |"),
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for gpu, doc in docs.items():
        for r in doc["cross_validation"]["table"]:
            lines.append(f"| {gpu} | {r['operator']} | {r['rows']} | {r['cv_method']} | "
                         f"{r['cv_median_abs_pct']:.1f} | {r['cv_p90_abs_pct']:.1f} | "
                         f"{r['in_sample_median_abs_pct']:.1f} | "
                         + (f"{r['datasheet_median_abs_pct']:.1f} |"
                            if "datasheet_median_abs_pct" in r else "- |"))
    return "\n".join(lines)


HEADER = """\
# Fitted roofline efficiencies for {gpu} (servesim; generated by calibration/fit_vidur.py).
# Fitted to public operator timings -- NOT copies of them:
#   {citation}
# Forms and units: simulator/perf/fitted.py (seconds; efficiencies are fractions of the
# datasheet peaks in spec.yaml). Regenerate:
#   python -m calibration.fit_vidur --vidur-dir ../shared/reference/vidur -o hardware_profiles/
"""


def write_fitted(doc: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    p = out_dir / "fitted.yaml"
    p.write_text(HEADER.format(gpu=doc["gpu"], citation=CITATION)
                 + yaml.safe_dump(doc, sort_keys=False, width=100))
    return p


def default_vidur_dir() -> Path | None:
    """``../shared/reference/vidur`` next to the repository (or the working directory)."""
    here = Path(__file__).resolve().parents[1]
    for c in (here.parent / "shared" / "reference" / "vidur",
              Path.cwd().parent / "shared" / "reference" / "vidur"):
        if (c / "data" / "profiling").is_dir():
            return c
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibration.fit_vidur", description=__doc__.splitlines()[0])
    ap.add_argument("--vidur-dir", type=Path, default=None,
                    help="Vidur reference data folder (default: ../shared/reference/vidur)")
    ap.add_argument("-o", "--output", type=Path, default=Path("hardware_profiles"),
                    help="hardware_profiles folder to write <gpu>/fitted.yaml into")
    ap.add_argument("--gpu", choices=sorted(GPUS), action="append",
                    help="fit only this SKU (repeatable; default: all)")
    args = ap.parse_args(argv)
    vd = args.vidur_dir or default_vidur_dir()
    if vd is None or not (Path(vd) / "data" / "profiling").is_dir():
        print("fit_vidur: Vidur data not found; pass --vidur-dir", file=sys.stderr)
        return 2
    docs = {}
    for sku in args.gpu or sorted(GPUS):
        print(f"fitting {sku} ...", flush=True)
        doc = fit_gpu(Path(vd), sku, args.output)
        path = write_fitted(doc, args.output / GPUS[sku]["profile"])
        docs[doc["gpu"]] = doc
        print(f"wrote {path}")
    print()
    print(loo_markdown(docs))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
