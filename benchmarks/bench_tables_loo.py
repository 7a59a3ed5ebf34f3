"""Operator-level leave-one-out benchmark of the shipped measured kernel tables.

Usage::

    python benchmarks/bench_tables_loo.py -o reports/bench_tables_loo [--gpu h100-sxm]
        [--gemm-sample 2000] [--seed 0]
    # compare fill methods on the same held-out cells, 300 per (set, family) (~10 min for 8):
    python benchmarks/bench_tables_loo.py -o /tmp/loo_cmp --sample 300 --no-cost \
        --method linear --method akima [--families gemm ...]

For every shipped table set (``hardware_profiles/<gpu>/tables/<engine>-<version>/``) and
operator family it holds in its own right (a family that only points at another set's table,
``reuse_of``, is the donor's table and is listed as such, not measured twice), each measured
point is held out in turn and predicted from the rest with the query code of
:mod:`simulator.perf.tables.sets`: the point's grid cell is emptied, the grid refilled exactly as
when a table is loaded, and the point queried as any query is. The error is
``|predicted / measured - 1|`` in percent.

Key groups are the ones queries use (per dtype for GEMM; per dtype, KV dtype, head layout and
window, vLLM's default kernels, for attention; per shape for MoE; per backend and GPU count
for communication). For the big GEMM grids (up to 36k points per dtype) a deterministic
stratified sample is held out instead of every point: per dtype, the points are stratified by
their ``m`` value (74 strata in the 0.19+ grids, 21 in 0.14), and ``ceil(S / strata)`` points
are drawn per stratum without replacement with ``numpy.random.default_rng(seed)`` (S =
``--gemm-sample``, default 2000), so every ``m`` (and with it every tile-boundary pair such as
64/65) is represented equally. ``--sample N`` instead draws ``N`` cells per (set, family)
uniformly over all its key groups (``default_rng(seed)``), for quick comparisons.

``--method`` (repeatable) names the fill of :mod:`simulator.perf.tables.grid` used to predict
each held-out cell (``FILL_METHODS``: ``linear``, ``pchip``, ``akima``, ``makima``,
``natural``, each also as ``-eff``, interpolating log efficiency instead of log time, and
``hybrid``; default
the one queries use, ``FILL_METHOD``): every method predicts the same held-out cells, and a
summary per method (rows meeting each target, median over rows of the median and p90) closes
``loo.md``; ``loo_points.csv`` holds every held-out cell's signed error, its grid position
(``where``: ``cell index:axis length`` per axis and the sizes) and, per axis, the gap in ``u``
between the measured cells that bracket it once it is held out (``gaps_u``; ``-``: none does,
the cell is an edge of its line's measured cells).

Prints one table (GPU, set, family, points, median and p90 absolute % error, and the same
over interior points only: points strictly inside the measured range along every axis, i.e.
interpolated rather than extrapolated by held efficiency) and writes it as ``loo.csv`` and
``loo.md``; also the scalar query cost after warm-up (microseconds per call, Llama-3.1-8B TP1
shapes on the newest H100 set), which the hot loop depends on. Not part of the test run.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.catalog.hardware import gpu_catalog
from simulator.perf.tables.grid import FILL_METHOD, FILL_METHODS
from simulator.perf.tables.sets import SCHEMAS, _Grid, table_sets

TARGET_MEDIAN_PCT, TARGET_P90_PCT = 3.0, 10.0   # the task's targets per family and GPU


def _query_groups(ts, op):
    """(rows index, numeric key values, dtypes for the bound) of every key group a query of
    ``op`` resolves to with the default kernel selection."""
    fam = ts._family(op)
    s = fam.schema
    nc, nn = len(s.cat), len(s.num)
    by = {}
    for key in fam.groups:
        k = key[-1]
        if fam.defaults is not None and k not in fam.defaults and len(fam.kernels) > 1:
            continue
        by.setdefault(key[:nc + nn], []).append(key)
    for gk in sorted(by):
        keys = by[gk]
        cat = dict(zip(s.cat, gk[:nc]))
        numv = dict(zip(s.num, map(float, gk[nc:])))
        if op.startswith("attention"):
            rdt = (cat["dtype"], cat["kv_dtype"])
        elif op == "nccl":
            rdt = (cat["dtype"], cat["op"])
        else:
            rdt = (cat["dtype"],)
        cand = ts._candidates(fam, {c: (v,) if c in ("dtype", "kv_dtype") else v
                                    for c, v in cat.items()}, None)
        keys = [k for k in keys if k in cand] or keys
        idx = np.sort(np.concatenate([fam.groups[k] for k in keys]))
        yield idx, numv, rdt, cat


def _group_cells(ts, op, idx, numv, rdt):
    """The grid of one key group, the grid coordinates of its rows, the flat cell of each row
    and the first row of every measured cell (one held-out point per cell)."""
    fam = ts._family(op)
    s = fam.schema
    grid = ts._build(fam, None, numv, rdt, idx=idx)
    coords = {c: fam.grid_cols[c][idx] for c in s.grid}
    cells = [np.searchsorted(grid.vals[a], coords[c]) for a, c in enumerate(s.grid)]
    flat = np.ravel_multi_index(cells, grid.shape)
    _, first = np.unique(flat, return_index=True)
    return grid, coords, cells, flat, first


def _stratified(first, cells, sample, rng):
    """``ceil(sample / strata)`` cells per value of the first axis (GEMM: ``m``)."""
    m_cell = cells[0][first]
    strata = np.unique(m_cell)
    per = math.ceil(sample / len(strata))
    pick = np.concatenate([rng.choice(first[m_cell == v], size=min(per, (m_cell == v).sum()),
                                      replace=False) for v in strata])
    pick.sort()
    return pick


def _loo_points(ts, op, g, pick, methods) -> list[tuple]:
    """Held-out error of the points ``pick`` of one key group ``g`` for each fill method:
    rows ``(method, abs_pct, signed_pct, interior)``."""
    idx, numv, rdt, grid, coords, _cells, flat = g
    fam = ts._family(op)
    s = fam.schema
    out = []
    raw = grid.raw
    for j in pick:
        cell = np.unravel_index(flat[j], grid.shape)
        r = raw.copy()
        r[cell] = np.nan
        if not np.isfinite(r).any():
            continue
        x = {c: float(coords[c][j]) for c in s.grid}
        meas = float(fam.t[idx][j])
        interior = all(len(v) == 1 or (0 < i < len(v) - 1) for v, i in zip(grid.vals, cell))
        gaps = _bracket_gaps(r, grid.us, cell)
        where = ("cell " + "/".join(f"{i}:{len(v)}" for i, v in zip(cell, grid.vals))
                 + " x " + "/".join(f"{x[c]:g}" for c in s.grid))
        for method in methods:
            g2 = _Grid.from_cells(grid.names, grid.vals, grid.zero, r, grid.lr, method=method)
            pred = ts._eval(op, ts._tgrid(op, g2, numv, rdt, cache=False), x, numv, rdt)
            err = 100.0 * (pred / meas - 1.0)
            out.append((method, abs(err), err, interior, gaps, where))
    return out


def _bracket_gaps(raw, us, cell) -> str:
    """Per axis, the gap in ``u`` between the measured cells that bracket ``cell`` along it
    (``-`` where none does: the cell is at the edge of its line's measured cells)."""
    out = []
    for a, u in enumerate(us):
        line = raw[tuple(slice(None) if b == a else i for b, i in enumerate(cell))]
        fin = np.flatnonzero(np.isfinite(line))
        i = cell[a]
        lo, hi = fin[fin < i], fin[fin > i]
        out.append(f"{u[hi[0]] - u[lo[-1]]:.2f}" if len(lo) and len(hi) else "-")
    return "/".join(out)


def _loo_family(ts, op, gemm_sample, sample, methods, rng) -> pd.DataFrame:
    """Held-out errors of one (set, family): every measured cell, a stratified GEMM sample
    (``gemm_sample`` per dtype), or with ``sample`` a uniform sample of that many cells over
    the family's key groups (the same cells for every method)."""
    groups = []
    for idx, numv, rdt, _ in _query_groups(ts, op):
        if len(idx) < 2:
            continue
        groups.append((idx, numv, rdt, *_group_cells(ts, op, idx, numv, rdt)))
    picks = [g[-1] for g in groups]
    if sample is not None:
        sizes = np.array([len(p) for p in picks])
        total = int(sizes.sum())
        chosen = np.sort(rng.choice(total, size=min(sample, total), replace=False))
        edges = np.concatenate([[0], np.cumsum(sizes)])
        picks = [p[chosen[(chosen >= lo) & (chosen < hi)] - lo]
                 for p, lo, hi in zip(picks, edges[:-1], edges[1:])]
    elif op == "gemm" and gemm_sample is not None:
        picks = [p if len(p) <= gemm_sample else _stratified(p, g[5], gemm_sample, rng)
                 for p, g in zip(picks, groups)]
    rows = []
    for g, pick in zip(groups, picks):
        rows += _loo_points(ts, op, g[:-1], pick, methods)
    return pd.DataFrame(rows, columns=["method", "abs_pct", "signed_pct", "interior",
                                       "gaps_u", "where"])


def _summary(d: pd.DataFrame) -> dict:
    inner = d[d["interior"]]["abs_pct"]
    q = (lambda v, p: float(v.quantile(p)) if len(v) else float("nan"))
    return {"points": len(d), "median_pct": q(d["abs_pct"], 0.5),
            "p90_pct": q(d["abs_pct"], 0.9), "interior_points": len(inner),
            "interior_median_pct": q(inner, 0.5), "interior_p90_pct": q(inner, 0.9)}


def run(gpus=None, gemm_sample=2000, seed=0, log=print, *, sample=None, families=None,
        methods=None, points_out=None) -> pd.DataFrame:
    """Leave-one-out rows per (GPU, set, family, fill method); see the module docstring.

    ``sample``: held-out cells per (set, family), drawn uniformly with
    ``numpy.random.default_rng(seed)`` (None: every cell; GEMM ``gemm_sample`` per dtype);
    ``families``: operator families to run (None: all); ``methods``: fill methods of
    :data:`simulator.perf.tables.grid.FILL_METHODS` compared on the same points (None: the
    default); ``points_out``: a list that receives one DataFrame of per-point errors per row.
    """
    methods = list(methods or [FILL_METHOD])
    rows = []
    for name, gpu in gpu_catalog().items():
        if gpus and name not in gpus:
            continue
        for ts in table_sets(gpu):
            for op in ts.families():
                if op not in SCHEMAS or (families and op not in families):
                    continue
                rec = ts.record(op)
                if rec.get("reuse_of"):
                    rows.append({"gpu": name, "set": ts.name, "family": op, "points": 0,
                                 "note": f"= {rec['reuse_of']}"})
                    continue
                t0 = time.perf_counter()
                d = _loo_family(ts, op, gemm_sample, sample, methods,
                                np.random.default_rng(seed))
                note = ("fill: " + ", ".join(rec["fill_from"])) if rec.get("fill_from") \
                    else ("sample" if op == "gemm" or sample is not None else "")
                for method in methods:
                    dm = d[d["method"] == method]
                    row = {"gpu": name, "set": ts.name, "family": op, "method": method,
                           **_summary(dm), "note": note}
                    rows.append(row)
                    if points_out is not None:
                        points_out.append(dm.assign(gpu=name, set=ts.name, family=op))
                    log(f"{name:20s} {ts.name:13s} {op:18s} {method:13s} {row['points']:6d} "
                        f"{row['median_pct']:6.2f} {row['p90_pct']:6.2f}  "
                        f"({time.perf_counter() - t0:.1f} s)")
    return pd.DataFrame(rows)


def query_cost_us(n: int = 20000) -> dict:
    """Microseconds per scalar query after warm-up (Llama-3.1-8B TP1, newest H100 set)."""
    gpu = gpu_catalog()["h100-sxm"]
    ts = table_sets(gpu)[0]
    kw = {"q_heads": 32, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16"}
    calls = {
        "gemm": lambda: ts.gemm(257, 6144, 4096, "bf16"),
        "attention_prefill": lambda: ts.attention_prefill(300, 700, **kw),
        "attention_decode": lambda: ts.attention_decode(64, 1500.0, **kw),
        "all_reduce": lambda: ts.all_reduce(2.0e6, 2),
        "moe": lambda: ts.moe(64, hidden=4096, inter=14336, topk=2, num_experts=8),
    }
    out = {}
    for k, f in calls.items():
        f()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        out[k] = (time.perf_counter() - t0) / n * 1e6
    return out


def to_markdown(df: pd.DataFrame) -> str:
    """The rows as a Markdown table (a ``method`` column when several methods ran)."""
    multi = "method" in df.columns and df["method"].dropna().nunique() > 1
    mh, ms = ("method | ", "---|") if multi else ("", "")
    head = (f"| GPU | set | family | {mh}points | median % | p90 % | interior points | "
            f"interior median % | interior p90 % | note |\n|---|---|---|{ms}---:|---:|---:|"
            "---:|---:|---:|---|\n")
    lines = []
    for r in df.itertuples():
        m = f"{r.method} | " if multi else ""
        if not r.points:
            if not multi or r.method == df["method"].dropna().iloc[0] or r.method != r.method:
                lines.append(f"| {r.gpu} | {r.set} | {r.family} | {'| ' if multi else ''}"
                             f"| | | | | | {r.note} |")
            continue
        lines.append(f"| {r.gpu} | {r.set} | {r.family} | {m}{r.points} | {r.median_pct:.2f} | "
                     f"{r.p90_pct:.2f} | {r.interior_points} | {r.interior_median_pct:.2f} | "
                     f"{r.interior_p90_pct:.2f} | {r.note} |")
    return head + "\n".join(lines) + "\n"


def compare(df: pd.DataFrame) -> pd.DataFrame:
    """Per fill method over the measured (set, family) rows: rows meeting each target and
    both, and the median over rows of the median and p90 error (percent)."""
    d = df[df["points"] > 0]
    out = []
    for method, g in d.groupby("method", sort=False):
        ok_m = g["median_pct"] <= TARGET_MEDIAN_PCT
        ok_p = g["p90_pct"] <= TARGET_P90_PCT
        out.append({"method": method, "rows": len(g), "median_ok": int(ok_m.sum()),
                    "p90_ok": int(ok_p.sum()), "both_ok": int((ok_m & ok_p).sum()),
                    "median_of_median_pct": float(g["median_pct"].median()),
                    "median_of_p90_pct": float(g["p90_pct"].median()),
                    "max_p90_pct": float(g["p90_pct"].max())})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=Path("reports/bench_tables_loo"))
    ap.add_argument("--gpu", "--gpus", action="append",
                    help="profile name (repeatable; default all)")
    ap.add_argument("--families", action="append",
                    help="operator family (repeatable; default all)")
    ap.add_argument("--method", action="append", choices=FILL_METHODS,
                    help=f"fill method (repeatable: compared on the same points; default "
                         f"{FILL_METHOD})")
    ap.add_argument("--sample", type=int, default=None,
                    help="held-out cells per (set, family), uniform with --seed (default: "
                         "every cell, GEMM --gemm-sample)")
    ap.add_argument("--gemm-sample", type=int, default=2000,
                    help="held-out GEMM points per dtype (stratified by m; default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cost", action="store_true", help="skip the query-cost timing")
    args = ap.parse_args(argv)
    pts: list = []
    df = run(args.gpu, args.gemm_sample, args.seed, sample=args.sample,
             families=args.families, methods=args.method, points_out=pts)
    args.output.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.output / "loo.csv", index=False, float_format="%.3f")
    if pts:
        pd.concat(pts, ignore_index=True).to_csv(args.output / "loo_points.csv", index=False,
                                                 float_format="%.4f")
    md = to_markdown(df)
    if not args.no_cost:
        cost = query_cost_us()
        md += ("\nScalar query cost after warm-up (us per call, Llama-3.1-8B TP1 shapes, "
               f"{table_sets(gpu_catalog()['h100-sxm'])[0].name} on h100-sxm): "
               + ", ".join(f"{k} {v:.1f}" for k, v in cost.items()) + "\n")
    cmp_ = compare(df)
    md += "\n" + cmp_.to_markdown(index=False, floatfmt=".2f") + "\n"
    (args.output / "loo.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
