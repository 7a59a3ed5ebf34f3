"""Compare two latency table sets, family by family (pandas/scipy; no torch).

``servesim calibrate compare OURS THEIRS [-o DIR]`` runs :func:`compare_table_sets` and
:func:`write_compare_report`. For every operator family present in both sets, each row of
OURS is paired with a row of THEIRS that has the same key columns (dtype, heads, backend,
...; ``kernel`` aside, see below) and the same shape columns (:data:`EXACT_GRID`: a GEMM's
``n, k``, a collective's ``num_gpus``, an MoE layer's sizes), and the same size point, or
else the **nearest** size point (GEMM ``m``; attention batch, query and context lengths;
message bytes; token counts): nearest in ``log2(1 + size)`` coordinates (city-block distance over the family's grid
columns, ``scipy.spatial.cKDTree``), accepted only when every grid coordinate is within a
factor ``max_grid_factor`` (default 2) of ours, i.e. ``(1 + a) / (1 + b)`` in
``[1/2, 2]``. Both sources grid sizes at least by octaves, so where their ranges overlap the
nearest point is within a factor 2; a row with no such partner is *unmatched* (outside the
other set's range) and counted, not paired. Every pair says whether it is ``exact`` or
``nearest`` and how far apart the points are.

Attention (and MoE) tables may hold several kernels; each set is compared on its default
kernel (``default_kernel`` of its provenance, else its only or most frequent kernel), and the
report names both.

The result per family is the distribution of ``ratio = ours median_s / theirs median_s``:
count, median, 10th and 90th percentiles (over all pairs, and over exact pairs alone).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.report.escape import md_code, md_text
from simulator.report.tables import cell

from .tableset import GRID, KEYS, TableSetData, read_table_set

#: families whose rows carry a ``kernel`` key
KERNEL_FAMILIES = ("attention_prefill", "attention_decode", "moe")
#: grid columns that describe the operator's *shape* rather than its size: they must match
#: exactly (a GEMM of another width is another operator, not a nearby grid point)
EXACT_GRID = {"gemm": ["n", "k"], "all_reduce": ["num_gpus"], "nccl": ["num_gpus"],
              "moe": ["hidden", "inter", "topk", "num_experts", "moe_tp", "moe_ep"]}


@dataclass
class CompareResult:
    """Pairs and per-family summary of a comparison (see module docstring)."""

    ours: TableSetData
    theirs: TableSetData
    pairs: pd.DataFrame
    summary: pd.DataFrame
    max_grid_factor: float
    notes: list = field(default_factory=list)


def _label(s: TableSetData) -> str:
    p = s.provenance
    dev = p.get("device_name") or "device unknown"
    eng = f"{p.get('engine')} {p.get('engine_version')}" if p.get("engine") else \
        f"flat profile (harness {p.get('harness_version', '?')})"
    return f"{s.name} ({eng}; {dev})"


def _pair_family(fam: str, a: pd.DataFrame, b: pd.DataFrame, max_factor: float) -> pd.DataFrame:
    """Pairs of ``a`` rows with ``b`` rows (same keys; exact or nearest grid point)."""
    from scipy.spatial import cKDTree
    keys = [k for k in KEYS[fam] if k != "kernel"] + EXACT_GRID.get(fam, [])
    grid = [c for c in GRID[fam] if c not in EXACT_GRID.get(fam, [])]
    lim = float(np.log2(max_factor))
    out = []
    b_groups = {k: g for k, g in b.groupby(keys, sort=False)} if keys else {(): b}
    a_groups = a.groupby(keys, sort=False) if keys else [((), a)]
    for key, ga in a_groups:
        key = key if isinstance(key, tuple) else (key,)
        gb = b_groups.get(key)
        ua = np.log2(1.0 + ga[grid].to_numpy(dtype=float))
        rec = {k: v for k, v in zip(keys, key)}
        if gb is None or gb.empty:
            for i in range(len(ga)):
                out.append({**rec, **{c: ga[c].iloc[i] for c in grid}, "match": "none"})
            continue
        ub = np.log2(1.0 + gb[grid].to_numpy(dtype=float))
        tree = cKDTree(ub)
        dist, idx = tree.query(ua, k=1, p=1)
        tb = gb["median_s"].to_numpy(dtype=float)
        ta = ga["median_s"].to_numpy(dtype=float)
        for i in range(len(ga)):
            j = int(idx[i])
            row = {**rec, **{c: ga[c].iloc[i] for c in grid}}
            per = np.abs(ua[i] - ub[j])
            if (per > lim + 1e-12).any():
                out.append({**row, "match": "none"})
                continue
            exact = bool(dist[i] == 0.0)
            out.append({**row, **{f"theirs_{c}": gb[c].iloc[j] for c in grid},
                        "ours_s": ta[i], "theirs_s": tb[j], "ratio": ta[i] / tb[j],
                        "match": "exact" if exact else "nearest",
                        "log2_distance": float(dist[i])})
    df = pd.DataFrame(out)
    df.insert(0, "family", fam)
    front = ["family", "match", "ratio", "ours_s", "theirs_s", "log2_distance"]
    return df[[c for c in front if c in df.columns] + [c for c in df.columns if c not in front]]


def compare_table_sets(ours, theirs, max_grid_factor: float = 2.0) -> CompareResult:
    """Pair the rows of two table sets and summarise ``ours / theirs`` per family.

    Parameters
    ----------
    ours, theirs : path or TableSetData
        Table-set folders, profile folders with one set, or flat profiles
        (:func:`calibration.tableset.read_table_set`).
    max_grid_factor : float
        Largest ratio ``(1 + a) / (1 + b)`` between paired grid coordinates (> 1).

    Returns
    -------
    CompareResult

    Raises
    ------
    ValueError
        Unreadable sets, ``max_grid_factor <= 1``, or no family in common.
    """
    if not max_grid_factor > 1.0:
        raise ValueError(f"max_grid_factor must be > 1, got {max_grid_factor}")
    a = ours if isinstance(ours, TableSetData) else read_table_set(ours)
    b = theirs if isinstance(theirs, TableSetData) else read_table_set(theirs)
    common = [f for f in KEYS if f in a.tables and f in b.tables and f != "cpu_overhead"]
    if not common:
        raise ValueError(f"{a.folder} and {b.folder} have no operator family in common "
                         f"(ours: {', '.join(sorted(a.tables)) or 'none'}; theirs: "
                         f"{', '.join(sorted(b.tables)) or 'none'})")
    pairs, summ, notes = [], [], []
    for fam in common:
        ta, tb = a.tables[fam], b.tables[fam]
        ka = kb = ""
        if fam in KERNEL_FAMILIES and "kernel" in ta.columns:
            ka, kb = a.default_kernel(fam) or "", b.default_kernel(fam) or ""
            ta = ta[ta["kernel"].astype(str) == ka]
            tb = tb[tb["kernel"].astype(str) == kb]
        p = _pair_family(fam, ta, tb, max_grid_factor)
        pairs.append(p)
        m = p[p["match"] != "none"] if "match" in p else p.iloc[0:0]
        ex = m[m["match"] == "exact"]
        r, rx = m.get("ratio", pd.Series(dtype=float)), ex.get("ratio", pd.Series(dtype=float))
        q = np.percentile(r, [10, 50, 90]) if len(r) else [np.nan] * 3
        qx = np.percentile(rx, [10, 50, 90]) if len(rx) else [np.nan] * 3
        summ.append({"family": fam, "kernel_ours": ka, "kernel_theirs": kb,
                     "rows_ours": len(ta), "rows_theirs": len(tb), "matched": len(m),
                     "exact": len(ex), "nearest": len(m) - len(ex),
                     "unmatched": len(p) - len(m),
                     "ratio_median": q[1], "ratio_p10": q[0], "ratio_p90": q[2],
                     "exact_ratio_median": qx[1], "exact_ratio_p10": qx[0],
                     "exact_ratio_p90": qx[2]})
    only = sorted((set(a.tables) ^ set(b.tables)) - {"cpu_overhead"})
    if only:
        notes.append(f"families in one set only (not compared): {', '.join(only)}")
    return CompareResult(a, b, pd.concat(pairs, ignore_index=True), pd.DataFrame(summ),
                         float(max_grid_factor), notes)


def _fmt(v, nd: int = 3) -> str:
    return "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{nd}f}"


def report_markdown(res: CompareResult) -> str:
    """The comparison as Markdown (sources, method, one row per family); folder names,
    devices, engines, kernels and notes come from the table sets' files and are escaped
    (:mod:`simulator.report.escape`)."""
    lines = ["# Latency tables: ours / theirs", "",
             f"- ours: {md_code(res.ours.folder)} — {md_text(_label(res.ours))}",
             f"- theirs: {md_code(res.theirs.folder)} — {md_text(_label(res.theirs))}",
             (f"- pairing: same key columns; the same grid point (*exact*) or the nearest one "
              f"in log2(1 + size) with every grid coordinate within a factor "
              f"{res.max_grid_factor:g} (*nearest*); rows with no such partner are unmatched."),
             "- ratio = ours median_s / theirs median_s (> 1: ours slower).", "",
             ("| family | kernels (ours / theirs) | our rows | matched (exact + nearest) | "
              "unmatched | ratio median | p10 | p90 | exact-only median |"),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for _, s in res.summary.iterrows():
        kern = f"{s.kernel_ours or '-'} / {s.kernel_theirs or '-'}" \
            if s.family in KERNEL_FAMILIES else "-"
        lines.append(f"| {cell(s.family)} | {cell(kern)} | {s.rows_ours} | {s.matched} ({s.exact} + "
                     f"{s.nearest}) | {s.unmatched} | {_fmt(s.ratio_median)} | "
                     f"{_fmt(s.ratio_p10)} | {_fmt(s.ratio_p90)} | "
                     f"{_fmt(s.exact_ratio_median)} |")
    if res.notes:
        lines += [""] + [f"Note: {md_text(n)}" for n in res.notes]
    return "\n".join(lines) + "\n"


def write_compare_report(res: CompareResult, out_dir: str | Path) -> dict[str, Path]:
    """Write ``compare.md``, ``compare_summary.csv`` and ``compare_pairs.csv`` to ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": d / "compare.md", "summary": d / "compare_summary.csv",
             "pairs": d / "compare_pairs.csv"}
    paths["markdown"].write_text(report_markdown(res))
    res.summary.to_csv(paths["summary"], index=False, float_format="%.6g")
    res.pairs.to_csv(paths["pairs"], index=False, float_format="%.6g")
    return paths
