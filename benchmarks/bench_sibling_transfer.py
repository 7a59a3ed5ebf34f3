"""Which sibling-transfer rule best predicts a same-die GPU's measurement?

The sibling profiles (``a100-sxm-40gb``, ``a100-pcie-80gb``, ``a100-pcie-40gb``, ``h100-pcie``)
have no measurement of their own: they answer compute kernels from a measured sibling's tables
(``efficiency_tables_from``, ``simulator/perf/tables/sets.py``). No table of those boards exists to
check a rule against, but one pair in the catalog is a test of it: H100 SXM and H200 SXM are both
GH100 with 132 SMs and the same clocks, differing in HBM (3.35 vs 4.8 TB/s, 80 vs 141 GB), and
both are measured (aiconfigurator, same vLLM versions). This script answers every measured row
(the engine's default kernel) of one from the other's tables by three rules, each through the
real table lookup (grid interpolation included):

``excess`` (shipped)
    The sibling's time above its own roofline bound held in seconds at the grid nodes,
    ``t = R_gpu + t_sib - R_sib`` (guarded where ``t_sib < R_sib``: at least ``R_gpu / e``):
    the transferred set as ``table_sets`` builds it (``TableSet`` rule ``excess``).
``efficiency``
    The sibling's achieved efficiency held, ``t = R_gpu / e`` (``TableSet(...,
    transfer="efficiency")``, the rule before 2026-12-02).
``copy``
    The sibling's times unchanged (its own table set).

It measures the part of the transfer error that comes from a different memory system on one
die; the A100 siblings differ from their source the same way (plus power limits for the PCIe
cards). The H100 PCIe also has fewer SMs (114) and lower clocks, which this pair cannot test.

Usage::

    python benchmarks/bench_sibling_transfer.py [--versions 0.19.0 0.22.0] [-o out.csv]

Prints, per direction, version and family, the median and p90 absolute error and the median
signed error (percent) of each rule's prediction, then per family the mean over the
direction x version pairs of each rule's median absolute error.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np
import pandas as pd

from simulator.catalog.hardware import get_gpu
from simulator.perf.tables.sets import TableSet, read_table_file, select_table_set

FAMILIES = ("gemm", "attention_decode", "attention_prefill", "moe")
#: the rules compared (column prefixes)
RULES = ("excess", "efficiency", "copy")
_ATT = ("q_heads", "kv_heads", "head_dim", "window")


def _predict(ts, fam: str, d: pd.DataFrame) -> np.ndarray:
    """The set's answer for every row of ``d`` (a measured table of family ``fam``)."""
    out = np.full(len(d), np.nan)
    if fam == "gemm":
        for (dt, n, k), g in d.groupby(["dtype", "n", "k"]):
            out[d.index.get_indexer(g.index)] = ts.gemm(g["m"].to_numpy(float), int(n), int(k),
                                                        dt)
        return out
    if fam == "attention_decode":
        cols = ["dtype", "kv_dtype", *_ATT, "batch"]
        for key, g in d.groupby(cols):
            kw = dict(zip(cols, key))
            b = int(kw.pop("batch"))
            out[d.index.get_indexer(g.index)] = ts.attention_decode(
                b, g["ctx_mean"].to_numpy(float), **{c: kw[c] for c in _ATT}, dtype=kw["dtype"],
                kv_dtype=kw["kv_dtype"])
        return out
    for i, r in enumerate(d.itertuples(index=False)):
        if fam == "attention_prefill":
            out[i] = ts.attention_prefill(r.q, r.start, batch=r.batch, q_heads=r.q_heads,
                                          kv_heads=r.kv_heads, head_dim=r.head_dim,
                                          kv_dtype=r.kv_dtype, dtype=r.dtype, window=r.window)
        else:
            out[i] = ts.moe(r.num_tokens, hidden=r.hidden, inter=r.inter, topk=r.topk,
                            num_experts=r.num_experts, moe_tp=r.moe_tp, moe_ep=r.moe_ep,
                            dtype=r.dtype, distribution=r.distribution)
    return out


def _stats(pred: np.ndarray, t: np.ndarray) -> tuple[float, float, float]:
    e = pred / t - 1.0
    e = e[np.isfinite(e)]
    return (float(np.median(np.abs(e))), float(np.quantile(np.abs(e), 0.9)),
            float(np.median(e)))


def _rows(src: str, dst: str, version: str) -> list[dict]:
    g_src, g_dst = get_gpu(src), get_gpu(dst)
    measured = select_table_set(g_dst, version=version)
    copied = select_table_set(g_src, version=version)
    moved_gpu = dataclasses.replace(g_dst, efficiency_tables_from=src, profile_dir=None)
    excess = select_table_set(moved_gpu, version=version)
    assert excess.transfer == "excess" and excess.efficiency_from == src
    held = TableSet(excess.folder, moved_gpu, measured_gpu=g_src, transfer="efficiency")
    res = []
    for fam in FAMILIES:
        if not (measured.has(fam) and excess.has(fam)):
            continue
        d = read_table_file(measured._source(fam), fam)
        # the engine's default kernel only (what a serving query asks; kernel names differ
        # between sets, so the answering set uses its own default kernel too)
        dk = (measured.meta.get("default_kernel") or {}).get(fam)
        if dk:
            d = d[d["kernel"].isin([dk] if isinstance(dk, str) else list(dk))]
        d = d.reset_index(drop=True)
        t = d["median_s"].to_numpy(float)
        row = {"source": src, "target": dst, "version": version, "family": fam,
               "rows": len(d)}
        sets = {"excess": excess, "efficiency": held, "copy": copied}
        for how in RULES:
            pred = _predict(sets[how], fam, d)
            (row[f"{how}_median_abs"], row[f"{how}_p90_abs"],
             row[f"{how}_median_signed"]) = _stats(pred, t)
        res.append(row)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="+", default=["0.19.0", "0.22.0", "0.24.0"])
    ap.add_argument("-o", "--output", default=None, help="write the table as CSV")
    a = ap.parse_args(argv)
    rows = []
    for v in a.versions:
        for src, dst in (("h100-sxm", "h200-sxm"), ("h200-sxm", "h100-sxm")):
            rows += _rows(src, dst, v)
    df = pd.DataFrame(rows)
    pct = [c for c in df.columns if c.endswith(("_abs", "_signed"))]
    show = df.copy()
    show[pct] = (100 * show[pct]).round(1)
    print(show.to_string(index=False))
    mean = df.groupby("family", sort=False)[[f"{h}_median_abs" for h in RULES]].mean()
    print("\nmean over direction x version pairs of the median absolute error (%):")
    print((100 * mean).round(1).to_string())
    if a.output:
        df.to_csv(a.output, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
