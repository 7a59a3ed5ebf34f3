"""Which rule carries a measured kernel table to a shape it did not measure?

Usage::

    python benchmarks/bench_table_transfer.py -o reports/bench_table_transfer [--gpu h100-sxm]
        [--rows 150] [--seed 0]

A query the tables cannot answer directly is answered from a measured neighbour in two
places (:mod:`simulator.perf.tables.lookup`):

- **head layouts** (``q_heads``, ``kv_heads``) that were not measured, e.g. Llama-2-7B's 32 KV
  heads against tables of 1-8: the nearest measured layout's time is carried to the query's
  roofline bound;
- **sizes beyond the grid** (a context longer than the longest measured, a prefill chunk
  after a cached prefix when only ``start = 0`` was measured, a chunk shorter than the
  shortest): the edge node's time is carried to the query's bound.

Two rules are compared on held-out measurements of the shipped table sets:

``efficiency``
    the efficiency ``e = R / t`` held: ``t = R_query / e`` (the rule until 2026-12-06);
``shipped``
    head layouts, sizes below the grid and axes measured at one value only: a launch floor
    plus a linear regime, ``t = t_from + (R_query - R_from) / max(e, e_lin)`` with ``e_lin``
    the kernel's linear-regime efficiency
    (:func:`simulator.perf.tables.lookup.affine_transfer`); sizes above the grid along a
    measured axis: the edge's efficiency held (:func:`simulator.perf.tables.lookup.beyond_grid`).

Head layouts: every measured layout of every attention table (decode and prefill) is held out
and predicted from the nearest other measured layout (the resolver's distance) at up to
``--rows`` of its measured rows (``numpy.random.default_rng(seed)``). Edges: for every key
group and every grid axis with at least four measured values, the rows at the largest value
are held out and predicted from a grid built without them (``up``), and likewise the smallest
(``down``). The error is ``|predicted / measured - 1|`` in percent; the table gives the median
and p90 per (set, family, case) and rule, and ``transfer_points.csv`` every prediction.
Not part of the test run (about a minute per GPU).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_tables_loo import _query_groups

from simulator.catalog.hardware import get_gpu
from simulator.perf.tables.sets import table_sets

FAMILIES = ("attention_decode", "attention_prefill", "gemm")
GPUS = ("h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s", "rtx-pro-6000-server")


def _predict(ts, op, grid, numv_query, numv_from, rdt, xs, rule):
    """Seconds at the sizes ``xs`` (dict of arrays) of key ``numv_query`` from ``grid``
    (measured at key ``numv_from``) by ``rule``."""
    moved = numv_query != numv_from
    tg = ts._tgrid(op, grid, numv_query, rdt, cache=False,
                   chosen=numv_from if (moved and rule == "shipped") else None)
    if rule == "efficiency":
        tg.linear_eff = None   # the edge's efficiency held beyond the grid
    out = []
    for j in range(len(next(iter(xs.values())))):
        x = {c: float(v[j]) for c, v in xs.items()}
        out.append(float(ts._eval(op, tg, x, numv_query, rdt)))
    return np.array(out)


def _rows(rng, idx, n):
    return idx if len(idx) <= n else np.sort(rng.choice(idx, size=n, replace=False))


def _heads(ts, op, rows, rng):
    """Each measured head layout predicted from the nearest other measured layout."""
    fam = ts._family(op)
    s = fam.schema
    groups = list(_query_groups(ts, op))
    out = []
    for idx, numv, rdt, cat in groups:
        others = [(i2, n2) for i2, n2, r2, c2 in groups
                  if r2 == rdt and c2 == cat and n2 != numv
                  and all(n2[c] == numv[c] for c in s.num if c not in ("q_heads", "kv_heads"))]
        if not others:
            continue

        def dist(n2, numv=numv):
            d = [abs(math.log2((1.0 + n2[c]) / (1.0 + numv[c]))) for c in s.num]
            return (d[0], sum(d[1:]))
        src_idx, src_num = min(others, key=lambda o: (dist(o[1]), sorted(o[1].items())))
        grid = ts._build(fam, None, src_num, rdt, idx=src_idx)
        pick = _rows(rng, idx, rows)
        xs = {c: fam.grid_cols[c][pick] for c in s.grid}
        meas = fam.t[pick]
        case = "heads " + "/".join(f"{int(src_num[c])}->{int(numv[c])}"
                                   for c in ("q_heads", "kv_heads"))
        for rule in ("efficiency", "shipped"):
            pred = _predict(ts, op, grid, numv, src_num, rdt, xs, rule)
            out += [(ts.gpu.name, ts.name, op, "heads", case, rule, 100 * (p / m - 1))
                    for p, m in zip(pred, meas)]
    return out


def _edges(ts, op, rows, rng):
    """Rows at each axis's largest (``up``) and smallest (``down``) measured value predicted
    from a grid built without them."""
    fam = ts._family(op)
    s = fam.schema
    out = []
    for idx, numv, rdt, _cat in _query_groups(ts, op):
        for a in s.grid:
            col = fam.grid_cols[a][idx]
            vals = np.unique(col)
            if len(vals) < 4:
                continue
            for direction, held in (("up", col == vals[-1]), ("down", col == vals[0])):
                keep = idx[~held]
                grid = ts._build(fam, None, numv, rdt, idx=keep)
                pick = _rows(rng, idx[held], rows)
                xs = {c: fam.grid_cols[c][pick] for c in s.grid}
                meas = fam.t[pick]
                for rule in ("efficiency", "shipped"):
                    pred = _predict(ts, op, grid, numv, numv, rdt, xs, rule)
                    out += [(ts.gpu.name, ts.name, op, f"edge {direction}", f"{a} {direction}",
                             rule, 100 * (p / m - 1)) for p, m in zip(pred, meas)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--gpu", action="append", help="GPU profile(s); default five measured")
    ap.add_argument("--rows", type=int, default=150, help="held-out rows per group and case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", nargs="*", default=list(FAMILIES))
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    rows = []
    for g in a.gpu or GPUS:
        for ts in table_sets(get_gpu(g)):
            if ts.engine != "vllm":
                continue
            for op in a.families:
                if ts._source(op) is None or ts.meta.get("tables", {}).get(op, {}).get("reuse_of"):
                    continue
                print(f"{g} {ts.name} {op}", flush=True)
                if op.startswith("attention"):
                    rows += _heads(ts, op, a.rows, rng)
                rows += _edges(ts, op, a.rows, rng)
    df = pd.DataFrame(rows, columns=["gpu", "set", "family", "kind", "case", "rule", "err_pct"])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "transfer_points.csv", index=False)
    df["abs"] = df.err_pct.abs()
    summ = (df.groupby(["family", "kind", "rule"]).agg(
        points=("abs", "size"), median_abs_pct=("abs", "median"),
        p90_abs_pct=("abs", lambda v: float(np.percentile(v, 90))),
        median_signed_pct=("err_pct", "median")).reset_index())
    per_set = (df.groupby(["gpu", "set", "family", "kind", "rule"]).agg(
        points=("abs", "size"), median_abs_pct=("abs", "median"),
        p90_abs_pct=("abs", lambda v: float(np.percentile(v, 90)))).reset_index())
    summ.to_csv(out / "transfer_summary.csv", index=False)
    per_set.to_csv(out / "transfer_per_set.csv", index=False)
    md = ["# Carrying measured kernel tables to unmeasured shapes: efficiency held vs shipped", "",
          summ.to_markdown(index=False, floatfmt=".1f"), "",
          "Per set:", "", per_set.to_markdown(index=False, floatfmt=".1f"), ""]
    (out / "transfer.md").write_text("\n".join(md))
    print(summ.to_markdown(index=False, floatfmt=".1f"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
