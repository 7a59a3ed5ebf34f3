"""Key resolution and evaluation of measured kernel tables: which key group answers a query
(exact keys, the nearest measured numeric keys, dtype families, default kernels), its grid
carried to the query's roofline bound, and the interpolated time (method:
:mod:`simulator.perf.tables.sets`). :class:`TableLookup` is the base of
:class:`~simulator.perf.tables.sets.TableSet`, which adds one method per operator family.
"""
from __future__ import annotations

import math

import numpy as np

from simulator.perf.tables import libm
from simulator.perf.tables.bounds import (
    _DTYPE_FAMILY,
    all_reduce_roofline_s,
    attention_decode_roofline_s,
    attention_prefill_roofline_s,
    collective_roofline_s,
    elementwise_roofline_s,
    gemm_roofline_s,
    lm_head_roofline_s,
    moe_roofline_s,
)
from simulator.perf.tables.files import _COMM, FAMILIES, SCHEMAS, TableFiles, _Family
from simulator.perf.tables.grid import _Grid

#: share of a grid's measured nodes (those with the largest roofline bound) whose median
#: achieved efficiency is the kernel's linear-regime efficiency (at least 3 nodes)
LINEAR_REGIME_SHARE = 0.05


def linear_regime_efficiency(log_bound: np.ndarray, log_eff: np.ndarray,
                             measured: np.ndarray | None = None) -> float:
    """The efficiency a kernel reaches where its work dominates: the median achieved
    efficiency ``R / t`` over the measured grid nodes with the largest roofline bound (the top
    :data:`LINEAR_REGIME_SHARE`, at least 3), at most 1.

    Parameters
    ----------
    log_bound, log_eff : ndarray
        Natural log of the roofline bound (seconds) and of the achieved efficiency at each
        grid node (same shape).
    measured : ndarray of bool, optional
        Nodes that hold a measurement (filled nodes are left out); default every node.

    Returns
    -------
    float
        In (0, 1]; 1.0 when no node qualifies.
    """
    lb = np.asarray(log_bound, float).ravel()
    le = np.asarray(log_eff, float).ravel()
    ok = np.isfinite(lb) & np.isfinite(le)
    if measured is not None:
        ok &= np.asarray(measured, bool).ravel()
    if not ok.any():
        return 1.0
    lb, le = lb[ok], le[ok]
    k = max(3, math.ceil(LINEAR_REGIME_SHARE * lb.size))
    top = np.argsort(-lb, kind="stable")[:k]
    return float(min(1.0, math.exp(float(np.median(le[top])))))


def linear_efficiency(grid: _Grid) -> float:
    """:func:`linear_regime_efficiency` of a measured grid (its log bound and log efficiency
    at the nodes; remembered on the grid)."""
    if grid.linear_eff is None:
        lr = grid.lr if grid.lr is not None else np.zeros(grid.shape)
        meas = np.isfinite(grid.raw) if grid.raw is not None else None
        grid.linear_eff = linear_regime_efficiency(lr, grid.le, meas)
    return grid.linear_eff


def affine_transfer(t_from, r_from, r_to, e_lin: float):
    """Time of a kernel whose roofline bound changes from ``r_from`` to ``r_to`` (seconds),
    given its time ``t_from`` at ``r_from``: a launch floor plus a linear regime.

    ``t = t_from + (r_to - r_from) / max(e, e_lin)``, ``e = r_from / t_from`` the achieved
    efficiency. Where the kernel already runs at or above its linear-regime efficiency
    ``e_lin`` this is ``r_to / e`` (the efficiency held, as for large GEMMs); where it runs
    below it (launch- or latency-bound: a small decode batch, a prefill chunk of a few
    tokens) the time above the linear part stays a fixed floor and only the added work is
    priced, at ``e_lin``. Always > 0 (below the edge, ``t >= r_to / e_lin``). The rule of
    the sibling transfer (time above the bound held in seconds,
    ``benchmarks/bench_sibling_transfer.py``) with the bound's slope at the kernel's own
    large-size efficiency; chosen over holding the efficiency by held-out head groups and
    grid edges of the measured tables (``benchmarks/bench_table_transfer.py``).

    Parameters
    ----------
    t_from, r_from, r_to : float or ndarray
        Seconds (broadcast together).
    e_lin : float
        Linear-regime efficiency in (0, 1] (:func:`linear_regime_efficiency`).
    """
    t_from = np.asarray(t_from, float)
    r_from = np.asarray(r_from, float)
    e = r_from / t_from
    hold = e >= e_lin
    out = np.where(hold, t_from * (np.asarray(r_to, float) / r_from),
                   t_from + (np.asarray(r_to, float) - r_from) / e_lin)
    return out if out.ndim else float(out)


def beyond_grid(t_edge, r_x, r_edge, e_lin: float | None, unmeasured_axis: bool = False):
    """Time at a size beyond the grid from the edge node's time ``t_edge`` (the query clipped
    to the grid; ``r_x``, ``r_edge``: the roofline bounds, seconds).

    Past the largest measured size (``r_x > r_edge``) the edge's efficiency is held,
    ``t_edge r_x / r_edge``: a kernel that grows along a measured axis keeps the efficiency
    it reached there. Below the smallest (``r_x <= r_edge``), or along an axis measured at
    one value only (``unmeasured_axis``: e.g. a prefill chunk after a cached prefix when only
    ``start = 0`` was timed), :func:`affine_transfer` with the kernel's linear-regime
    efficiency ``e_lin``: a launch-bound edge keeps its floor instead of scaling it with the
    bound. ``e_lin`` None: the efficiency held everywhere. On held-out edges of the shipped
    H100 attention tables (``benchmarks/bench_table_transfer.py``) holding is the better rule
    upward (median / p90 error 5.6 / 18.1% against 14.6 / 43.4% for decode attention) and the
    affine one downward (1.5 / 5.7% against 46.4 / 50.4%).
    """
    if e_lin is None:
        return t_edge * (r_x / r_edge)
    if unmeasured_axis:
        return affine_transfer(t_edge, r_edge, r_x, e_lin)
    held = t_edge * (r_x / r_edge)
    if np.ndim(held) == 0:
        return held if r_x > r_edge else affine_transfer(t_edge, r_edge, r_x, e_lin)
    return np.where(np.asarray(r_x) > np.asarray(r_edge), held,
                    affine_transfer(t_edge, r_edge, r_x, e_lin))


def _single_node_moved(pos, vals) -> bool:
    """Whether a size of ``pos`` differs from the one value of an axis measured only there
    (such an axis says nothing about how the kernel scales along it)."""
    for p, v in zip(pos, vals):
        if len(v) == 1 and np.any(np.asarray(p, float) != v[0]):
            return True
    return False


def _outside(pos, vals) -> bool:
    """Whether any size of ``pos`` (scalars or arrays, one per axis) lies outside its axis's
    node range ``vals`` (a small array is compared as Python floats: the same comparisons
    without numpy's per-call cost)."""
    for p, v in zip(pos, vals):
        lo, hi = v[0], v[-1]
        if isinstance(p, np.ndarray):
            if 0 < p.size <= 64:
                lst = p.ravel().tolist()
                if min(lst) < lo or max(lst) > hi:
                    return True
            elif p.min() < lo or p.max() > hi:
                return True
        elif p < lo or p > hi:
            return True
    return False


class TableLookup(TableFiles):
    """Key resolution, grids and evaluation of one table set."""

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
                    + "; times of the nearest measured " +
                    ", ".join(f"{c}={v:g}" for c, _, v in diffs)
                    + " carried to its roofline bound (launch floor + linear regime)")
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
        # efficiency against the bound of the GPU the rows were measured on (a transferred
        # set's queries are then answered against its own GPU's bound: TableSet.measured_gpu)
        mg = getattr(self, "measured_gpu", self.gpu)
        r = self._roofline(fam.op, dict(zip(s.grid, coords)), numv, rdt, mg)
        e = r / fam.t[idx]
        ok = np.isfinite(e) & (e > 0)
        if not ok.any():
            raise ValueError(f"table set {self.name}: {fam.op} rows give no finite efficiency")
        return _Grid(s.grid, [c[ok] for c in coords], libm.log(e[ok]),
                     [c in s.zero for c in s.grid],
                     bound=lambda nodes: self._roofline(fam.op, nodes, numv, rdt, mg))

    def _roofline(self, op: str, x: dict, numv: dict, rdt: tuple, gpu=None):
        """Roofline of family ``op`` at sizes ``x`` (axis name -> value/array), numeric keys
        ``numv`` and dtypes ``rdt`` (``(dtype,)`` or ``(dtype, kv_dtype)``) on ``gpu``
        (default the set's GPU)."""
        g = self.gpu if gpu is None else gpu
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

    def _tgrid(self, op: str, grid: _Grid, num: dict, rdt: tuple, cache: bool = True,
               chosen: dict | None = None) -> _Grid:
        """Log time of a query key at the grid nodes, on the GPU the tables were measured on
        (a transferred set's by :meth:`_excess_times`).

        For the measured key itself ``log R_q(node) - log e(node)`` (the measured time). A key
        that was not measured (``chosen``, the nearest measured numeric key, differs from
        ``num``) gets the measured time plus the change of the roofline bound at the kernel's
        linear-regime efficiency (:func:`affine_transfer`), not the measured efficiency held
        against the new bound: a launch-bound node keeps its floor instead of scaling it.
        """
        key = (id(grid), op, tuple(sorted(num.items())), rdt)
        hit = self._tgrids.get(key) if cache else None
        if hit is not None:
            return hit[1]
        nodes = dict(zip(grid.names, grid.nodes()))
        r = self._roofline(op, nodes, num, rdt)
        r = np.maximum(np.broadcast_to(np.asarray(r, float), grid.shape), 1e-300)
        moved = chosen is not None and any(
            c in num and float(num[c]) != float(v) for c, v in chosen.items())
        if getattr(self, "efficiency_from", "") and self.transfer == "excess":
            tg = grid.with_values(libm.log(self._excess_times(
                op, grid, nodes, num, rdt, r, chosen if moved else None)))
        elif moved:
            tg = grid.with_values(libm.log(self._key_transfer(op, grid, nodes, chosen, rdt, r)))
        else:
            tg = grid.with_values(libm.log(r) - grid.le)
        meas = np.isfinite(grid.raw) if grid.raw is not None else None
        tg.linear_eff = linear_regime_efficiency(libm.log(r), libm.log(r) - tg.le, meas)
        if cache:
            self._tgrids[key] = (grid, tg)   # keep grid alive: its id stays unique
        return tg

    def _key_transfer(self, op: str, grid: _Grid, nodes: dict, chosen: dict, rdt: tuple,
                      r: np.ndarray, gpu=None) -> np.ndarray:
        """Seconds at the grid nodes for a query key that was not measured: the nearest
        measured key's time ``t_m = R_m / e`` carried to the query's bound ``r`` by
        :func:`affine_transfer` (``R_m``: the measured key's bound on ``gpu``, default this
        set's GPU)."""
        rm = self._roofline(op, nodes, chosen, rdt, gpu)
        rm = np.maximum(np.broadcast_to(np.asarray(rm, float), grid.shape), 1e-300)
        return affine_transfer(rm * libm.exp(-grid.le), rm, r, linear_efficiency(grid))

    def _excess_times(self, op: str, grid: _Grid, nodes: dict, num: dict, rdt: tuple,
                      r: np.ndarray, chosen: dict | None = None) -> np.ndarray:
        """Seconds at the grid nodes of a transferred set (sibling rule "excess"): the time
        the sibling spent above its own roofline bound held in seconds over this GPU's bound,
        ``t = R_q(node) + (t_sib(node) - R_sib(node))``.

        ``t_sib = R_sib / e`` is the sibling's time for the query key (its measured node time
        when the key was measured; the nearest key ``chosen``'s time carried to the query key
        by :func:`affine_transfer` otherwise), ``R_sib`` and ``R_q`` (``r``, seconds) the
        query key's bounds on the
        sibling's and on this GPU's datasheet. Guard: where the sibling ran *faster* than its
        bound (``t_sib < R_sib``, ``e > 1``: L2-resident operands) the negative excess could
        drive the time to zero or below; there the time is at least ``R_q / e`` (the
        efficiency transfer of the same node, > 0), so no node falls below what efficiency
        transfer gives. Chosen by ``benchmarks/bench_sibling_transfer.py`` (H100 SXM <-> H200
        SXM, figures in ``hardware_profiles/README.md``).
        """
        mg = self.measured_gpu
        rs = self._roofline(op, nodes, num, rdt, mg)
        rs = np.maximum(np.broadcast_to(np.asarray(rs, float), grid.shape), 1e-300)
        inv_e = libm.exp(-grid.le)
        if chosen is not None:   # the query key was not measured: its time on the sibling
            inv_e = self._key_transfer(op, grid, nodes, chosen, rdt, rs, mg) / rs
        excess = rs * inv_e - rs
        t = r + excess
        low = excess < 0.0
        if low.any():
            t = np.where(low, np.maximum(t, r * inv_e), t)
        return t

    def _eval(self, op: str, tg: _Grid, x: dict, num: dict, rdt: tuple):
        """Seconds at sizes ``x`` from a log-time grid (method: :mod:`simulator.perf.tables.sets`)."""
        pos = [x[c] for c in tg.names]
        arr = False
        for v in pos:  # any array among the sizes (a plain loop: this runs every step)
            if isinstance(v, np.ndarray):
                arr = True
                break
        if arr:
            t = libm.exp(tg.at_array(pos))
            if not _outside(pos, tg.vals):
                return t   # inside the grid: the roofline ratio is exactly 1
            xc = dict(x)
            for c, v in zip(tg.names, tg.vals):
                xc[c] = np.clip(np.asarray(x[c], float), v[0], v[-1])
            return beyond_grid(t, np.asarray(self._roofline(op, x, num, rdt), float),
                               np.asarray(self._roofline(op, xc, num, rdt), float),
                               tg.linear_eff, _single_node_moved(pos, tg.vals))
        t = math.exp(tg.at(pos))
        moved = tg.clip(pos)
        if moved is not None:
            xc = dict(x)
            xc.update(zip(tg.names, moved))
            t = float(beyond_grid(t, float(self._roofline(op, x, num, rdt)),
                                  float(self._roofline(op, xc, num, rdt)), tg.linear_eff,
                                  _single_node_moved(pos, tg.vals)))
        return t

    def _time_grid(self, op: str, cat: dict, num: dict, kernel, rdt: tuple) -> _Grid:
        """The log-time grid answering a query key (resolved once, then remembered)."""
        key = (op, tuple(sorted(cat.items())), tuple(sorted(num.items())), kernel, rdt, "t")
        tg = self._res.get(key)
        if tg is None:
            grid, _, chosen = self._resolve(op, cat, num, kernel, rdt)
            tg = self._tgrid(op, grid, num, rdt, chosen=chosen)
            self._res[key] = tg
        return tg

    def attention_decode_grid(self, *, q_heads, kv_heads, head_dim, kv_dtype="bf16",
                              dtype="bf16", window=0, kernel=None) -> _Grid:
        """The log-time grid :meth:`attention_decode` answers these keys from inside its
        range (:class:`~simulator.perf.step_times.DecodeAttention` queries it)."""
        return self._decode_key(q_heads, kv_heads, head_dim, kv_dtype, dtype, window, kernel)[0]

    def _decode_key(self, q_heads, kv_heads, head_dim, kv_dtype, dtype, window, kernel):
        """(time grid, numeric keys, dtypes) of a decode key, remembered (every step asks)."""
        qk = ("attention_decode/keys", q_heads, kv_heads, head_dim, kv_dtype, dtype, window,
              kernel)
        hit = self._res.get(qk)
        if hit is None:
            num = {"q_heads": float(q_heads), "kv_heads": float(kv_heads),
                   "head_dim": float(head_dim), "window": float(window)}
            rdt = (str(dtype).lower(), str(kv_dtype).lower())
            cat = {"dtype": rdt[0], "kv_dtype": rdt[1]}
            hit = (self._time_grid("attention_decode", cat, num, kernel, rdt), num, rdt)
            self._res[qk] = hit
        return hit

    def _time(self, op: str, cat: dict, num: dict, kernel, rdt: tuple, x: dict):
        return self._eval(op, self._time_grid(op, cat, num, kernel, rdt), x, num, rdt)

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
