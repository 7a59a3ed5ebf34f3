"""The interpolation grid of one key group of a measured kernel table: log achieved
efficiency on a rectangular grid over ``u = log2(size)`` coordinates (method:
:mod:`simulator.perf.tables.sets`).

Grid cells that were not measured are filled with what a query would return were they
absent (the default fill, ``hybrid``): cells between measured cells along an axis by
interpolation in ``u`` of log time (log bound minus log efficiency) through the measured cells
of that grid line, the median over the axes along which the cell is bracketed (the mean for
two; the median of three resists a tile-boundary step on one axis). The interpolant along a
line is Akima's (``scipy.interpolate.Akima1DInterpolator``; H. Akima, "A new method of
interpolation and smooth curve fitting based on local procedures", J. ACM 17(4), 1970), the
chord where a line holds two measured cells; where the two measured cells that bracket the
cell have a log-log slope ``d ln t / d ln size`` in [0, 1] (what ``t = a + b size``, a launch
floor plus a linear regime, gives) it is averaged in log with the affine chord in linear size
through them, which is exact for that form. Cells bracketed along no axis take the median of
the chords along the grid diagonals that bracket them (an edge of a staircase of measured
cells, e.g. decode batch x context capped by memory: the anti-diagonal keeps the KV tokens in
flight), else the mean over axes of the efficiency of the nearest measured cell on each grid
line through them (held efficiency, as a query beyond the grid). Chosen over Akima alone, the
chord, PCHIP, modified Akima, a natural cubic spline, the same kinds on log efficiency, the
affine chord alone, weighting axes by their bracketing gap, and diagonal estimates for every
cell, by the held-out error of every shipped table (``benchmarks/bench_tables_loo.py
--method``; figures in ``hardware_profiles/README.md``); the other kinds stay selectable
(:data:`FILL_METHODS`). Queries between measured nodes stay multilinear in ``u``
(:meth:`_Grid.at`).
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from simulator.perf.tables.fill_cache import cached_fill

#: Scalar axis values whose interpolation index and weight a grid remembers (a decode run's
#: batch size takes at most ``max_num_seqs`` values; the bound only caps memory).
_AXIS_MEMO_MAX = 4096
#: Queries of at most this many points are interpolated in plain Python (numpy's per-call
#: overhead dominates below it; the arithmetic is the same IEEE double either way).
_SMALL_QUERY = 8
#: Queries along one grid line (one axis an array, the others scalars) of at most this many
#: points are interpolated point by point in plain Python (:meth:`_Grid._at_line`).
_LINE_QUERY = 48


def _u(x, zero: bool):
    """Interpolation coordinate of a size: ``log2(x)`` (``log2(1 + x)`` on axes that hold 0);
    sizes below 1 are clipped to 1 (the grid holds its edge there anyway)."""
    if isinstance(x, np.ndarray):
        return np.log2(1.0 + np.maximum(x, 0.0)) if zero else np.log2(np.maximum(x, 1.0))
    return math.log2(1.0 + max(x, 0.0)) if zero else math.log2(max(x, 1.0))


#: interpolants of the fill along one axis (method names of :func:`_fill`): ``linear`` in
#: ``u``, or a scipy cubic through every measured cell of the line (``pchip``:
#: ``PchipInterpolator``, shape-preserving; ``akima``/``makima``: ``Akima1DInterpolator``;
#: ``natural``: ``CubicSpline`` with natural ends)
FILL_KINDS = ("linear", "pchip", "akima", "makima", "natural")
#: fill methods: a kind, optionally ``-eff`` (interpolate log efficiency instead of log time);
#: ``hybrid``: Akima on log time, averaged (in log) with the affine chord ``t = a + b x`` in
#: linear size where the bracketing pair's log-log slope lies in [0, 1], and cells bracketed
#: along no axis filled along the grid diagonals or by the mean held efficiency (:func:`_fill`)
FILL_METHODS = FILL_KINDS + tuple(f"{k}-eff" for k in FILL_KINDS) + ("hybrid",)
FILL_METHOD = "hybrid"
#: log-log slope range ``d ln t / d ln x`` of a bracketing pair within which the ``hybrid`` fill
#: also uses the affine chord: ``t = a + b x`` with ``a, b >= 0`` (a launch-bound floor plus a
#: linear regime) has a slope in [0, 1] between any two sizes, so the pair is consistent with it
AFFINE_SLOPE = (0.0, 1.0)


def _cubic(kind: str, xs: np.ndarray, ys: np.ndarray):
    """A scipy cubic interpolant of kind ``kind`` through ``(xs, ys[:, j])`` for every row
    ``j`` (``ys``: points x rows)."""
    from scipy.interpolate import Akima1DInterpolator, CubicSpline, PchipInterpolator
    if kind == "pchip" or len(xs) < 3:   # through two points every kind is the chord
        return PchipInterpolator(xs, ys, axis=0)
    if kind in ("akima", "makima"):
        return Akima1DInterpolator(xs, ys, axis=0, method=kind)
    return CubicSpline(xs, ys, axis=0, bc_type="natural")


def _line_estimates(x: np.ndarray, ua: np.ndarray, kind: str,
                    affine: bool = False) -> np.ndarray | None:
    """Estimates of the bracketed NaN cells of the rows of ``x`` (rows x n, NaN = empty)
    by interpolation along the row in ``u`` (``ua``); NaN where not bracketed. None when
    no cell is bracketed. ``affine`` (``x`` log time): where the bracketing pair's log-log
    slope lies in :data:`AFFINE_SLOPE`, the estimate is the mean of the interpolant's and
    the affine chord's (:func:`_affine_blend`)."""
    n = x.shape[1]
    fin = np.isfinite(x)
    idx = np.arange(n)
    prev = np.maximum.accumulate(np.where(fin, idx, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(fin, idx, n)[:, ::-1], axis=1)[:, ::-1]
    ok = ~fin & (prev >= 0) & (nxt < n)
    if not ok.any():
        return None
    val = np.full_like(x, np.nan)
    if kind == "linear":
        r, i = np.nonzero(ok)
        lo, hi = prev[r, i], nxt[r, i]
        w = (ua[i] - ua[lo]) / (ua[hi] - ua[lo])
        val[r, i] = x[r, lo] * (1.0 - w) + x[r, hi] * w
        return val
    rows = np.flatnonzero(ok.any(axis=1))
    pats, inv = np.unique(fin[rows], axis=0, return_inverse=True)
    for p, pat in enumerate(pats):
        rr = rows[inv.ravel() == p]
        holes = np.flatnonzero(ok[rr[0]])
        f = _cubic(kind, ua[pat], x[np.ix_(rr, np.flatnonzero(pat))].T)
        val[np.ix_(rr, holes)] = np.asarray(f(ua[holes])).T
    if affine:
        _affine_blend(val, x, ua, ok, prev, nxt)
    return val


def _affine_blend(val: np.ndarray, x: np.ndarray, ua: np.ndarray, ok, prev, nxt) -> None:
    """Average (in log) the estimates ``val`` of log time at the cells ``ok`` with the chord
    ``t = t_lo + (t_hi - t_lo) (s - s_lo) / (s_hi - s_lo)`` in linear size ``s = 2**u``
    through the bracketing measured cells, where their log-log slope
    ``(ln t_hi - ln t_lo) / (ln s_hi - ln s_lo)`` lies in :data:`AFFINE_SLOPE` (in place).

    The chord is exact for ``t = a + b s`` (a launch-bound floor plus a linear regime), which
    the log-log interpolants bend; the mean hedges between the two where the pair allows
    either (on ``u = log2(1 + size)`` axes ``s`` is ``1 + size``: the same chord).
    """
    r, i = np.nonzero(ok)
    lo, hi = prev[r, i], nxt[r, i]
    tl, th = x[r, lo], x[r, hi]
    slope = (th - tl) / ((ua[hi] - ua[lo]) * math.log(2.0))
    use = (slope >= AFFINE_SLOPE[0]) & (slope <= AFFINE_SLOPE[1])
    if not use.any():
        return
    r, i, lo, hi, tl, th = r[use], i[use], lo[use], hi[use], tl[use], th[use]
    s_lo, s_hi = np.exp2(ua[lo]), np.exp2(ua[hi])
    w = (np.exp2(ua[i]) - s_lo) / (s_hi - s_lo)
    aff = np.log(np.exp(tl) * (1.0 - w) + np.exp(th) * w)
    val[r, i] = 0.5 * (val[r, i] + aff)


def _fill(g: np.ndarray, us: list[np.ndarray], lr: np.ndarray | None = None,
          method: str = FILL_METHOD) -> np.ndarray:
    """Fill the NaN cells of the log-efficiency grid ``g`` (module docstring).

    Cells bracketed along an axis get the median over such axes of the interpolation along
    the axis in ``u`` of log *time* ``lr - g`` (``lr``: log bound at the nodes; None, or a
    ``-eff`` method: of ``g`` itself), i.e. the value a query would get were the cell absent.
    Cells bracketed nowhere hold the log efficiency of the nearest measured cell along an
    axis (as a query beyond the grid); with ``hybrid`` they first take the median of the
    chords in ``u`` along the grid diagonals that bracket them (:func:`_diagonal_estimates`),
    else the mean over axes of the nearest cell's held log efficiency (:func:`_hold`).
    ``method``: one of :data:`FILL_METHODS` (the kind of interpolant along an axis).

    Raises
    ------
    ValueError
        For an unknown ``method``, or a grid without a finite cell.
    """
    if method not in FILL_METHODS:
        raise ValueError(f"unknown fill method {method!r}; known: {', '.join(FILL_METHODS)}")
    hybrid = method == "hybrid"
    kind = "akima" if hybrid else method.removesuffix("-eff")
    if method.endswith("-eff"):
        lr = None
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
            val = _line_estimates(x, us[a], kind, affine=hybrid and lr is not None)
            if val is None:
                continue
            shape = list(np.moveaxis(g, a, -1).shape)
            ests.append(np.moveaxis(val.reshape(shape), -1, a))
        if hybrid and not ests:
            ests = _diagonal_estimates(base, us)
        if ests:
            stack = np.stack(ests)
            m = np.isfinite(stack).any(axis=0)
            if m.any():
                est = np.nanmedian(stack[:, m], axis=0)
                g[m] = est if lr is None else lr[m] - est
                continue
        held = _hold(g, us, mean=hybrid)
        if held is None:
            raise ValueError("empty efficiency grid")
        g = held
    return g


def _nearest_along(x: np.ndarray, ua: np.ndarray):
    """Per cell of the rows of ``x`` (rows x n), the index of the nearest finite cell of its
    row in ``u`` (``ua``; the lower one on a tie) and whether the row has one."""
    n = x.shape[1]
    fin = np.isfinite(x)
    idx = np.arange(n)
    prev = np.maximum.accumulate(np.where(fin, idx, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(fin, idx, n)[:, ::-1], axis=1)[:, ::-1]
    dp = np.where(prev >= 0, ua - ua[np.maximum(prev, 0)], np.inf)
    dn = np.where(nxt < n, ua[np.minimum(nxt, n - 1)] - ua, np.inf)
    near = np.where(dp <= dn, prev, nxt)
    return np.clip(near, 0, n - 1), np.isfinite(np.minimum(dp, dn))


def _hold(g: np.ndarray, us: list[np.ndarray], mean: bool) -> np.ndarray | None:
    """``g`` with empty cells that have a measured cell on a grid line through them set to
    that cell's log efficiency (held efficiency): along the first axis that has one
    (``mean`` False), or the mean over every axis that has one (``mean`` True). None when
    no empty cell has one."""
    held, count = np.zeros_like(g), np.zeros(g.shape)
    for a in range(g.ndim):
        n = g.shape[a]
        if n < 2:
            continue
        x = np.moveaxis(g, a, -1).reshape(-1, n)
        near, has = _nearest_along(x, us[a])
        v = np.where(has & ~np.isfinite(x), np.take_along_axis(x, near, axis=1), np.nan)
        shape = list(np.moveaxis(g, a, -1).shape)
        v = np.moveaxis(v.reshape(shape), -1, a)
        ok = np.isfinite(v)
        if not ok.any():
            continue
        held[ok] += v[ok]
        count[ok] += 1
        if not mean:
            break
    m = count > 0
    if not m.any():
        return None
    out = g.copy()
    out[m] = held[m] / count[m]
    return out


def _diagonal_estimates(base: np.ndarray, us: list[np.ndarray]) -> list[np.ndarray]:
    """Chord estimates of the empty cells of ``base`` along the two diagonals of every pair
    of axes (steps ``(+1, +1)`` and ``(+1, -1)`` in index), between the nearest finite cells
    on either side, weighted by distance in the ``(u_a, u_b)`` plane; NaN where a diagonal
    does not bracket the cell. One array per (pair, direction) that brackets a cell."""
    empty = np.argwhere(np.isnan(base))
    out = []
    for a in range(base.ndim):
        for b in range(a + 1, base.ndim):
            for sgn in (1, -1):
                est = np.full(len(empty), np.nan)
                side = []
                for k in (1, -1):
                    val, dist = np.full(len(empty), np.nan), np.full(len(empty), np.nan)
                    todo = np.ones(len(empty), bool)
                    for step in range(1, max(base.shape[a], base.shape[b])):
                        c = empty.copy()
                        c[:, a] += k * step
                        c[:, b] += k * sgn * step
                        inside = ((c[:, a] >= 0) & (c[:, a] < base.shape[a]) & (c[:, b] >= 0)
                                  & (c[:, b] < base.shape[b]))
                        todo &= inside
                        if not todo.any():
                            break
                        v = np.full(len(empty), np.nan)
                        v[todo] = base[tuple(c[todo].T)]
                        hit = todo & np.isfinite(v)
                        val[hit] = v[hit]
                        dist[hit] = np.hypot(us[a][c[hit, a]] - us[a][empty[hit, a]],
                                             us[b][c[hit, b]] - us[b][empty[hit, b]])
                        todo &= ~hit
                    side.append((val, dist))
                (vp, dp), (vm, dm) = side
                ok = np.isfinite(vp) & np.isfinite(vm)
                if ok.any():
                    w = dm[ok] / (dm[ok] + dp[ok])
                    est[ok] = vm[ok] * (1.0 - w) + vp[ok] * w
                    full = np.full(base.shape, np.nan)
                    full[tuple(empty.T)] = est
                    out.append(full)
    return out


class _Grid:
    """Log efficiency on a grid over ``u`` coordinates (filled; a table's: via ``fill_cache``)."""

    __slots__ = (
        "_at_memo",
        "_axis_memo",
        "flat",
        "le",
        "linear_eff",
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
        self._setup(names, vals, zero, g.reshape(shape), lr, cache=True)

    @classmethod
    def from_cells(cls, names, vals, zero, raw: np.ndarray, lr=None,
                   method: str = FILL_METHOD) -> _Grid:
        """A grid from its axis values, raw (unfilled, NaN = not measured) log efficiency and
        log bound at the nodes (``lr``, for the fill; see :func:`_fill`, which also documents
        ``method``)."""
        self = cls.__new__(cls)
        self._setup(names, vals, zero, raw, lr, method)
        return self

    def _setup(self, names, vals, zero, raw, lr=None, method=FILL_METHOD, cache=False):
        self.names = tuple(names)
        self.zero = tuple(bool(z) for z in zero)
        self.vals = list(vals)
        self.shape = tuple(len(v) for v in vals)
        self.raw = raw
        self.lr = lr
        self.measured = int(np.isfinite(raw).sum())
        self.us = [_u(v, z) for v, z in zip(self.vals, self.zero)]
        self.le = (cached_fill(raw, self.us, lr, method, _fill) if cache
                   else _fill(raw, self.us, lr, method))
        self.flat = self.le.ravel().tolist()
        self.ulists = [u.tolist() for u in self.us]
        st, acc = [], 1
        for d in reversed(self.shape):
            st.append(acc)
            acc *= d
        self.strides = tuple(reversed(st))
        self._axis_memo, self._at_memo, self.linear_eff = {}, {}, None

    def with_values(self, values: np.ndarray) -> _Grid:
        """The same axes carrying other (filled) values, e.g. log time for one query key."""
        g = _Grid.__new__(_Grid)
        for a in ("names", "vals", "us", "ulists", "zero", "strides", "shape", "measured"):
            setattr(g, a, getattr(self, a))
        g.raw = g.lr = g.linear_eff = None
        g._axis_memo, g._at_memo = {}, {}
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
        """Interpolated value at one point (scalar sizes, one per axis).

        An integer size (a batch, a GEMM's ``n`` and ``k``) has its node offset and weight
        remembered per axis (``math.log2``, bisect: the same values every time)."""
        base = 0
        corners = None   # (offset, weight) per cell corner; None: the one corner (0, 1.0)
        memo = self._at_memo
        strides = self.strides
        for a, x in enumerate(xs):
            if type(x) is int:
                hit = memo.get((a, x))
                if hit is None:
                    hit = self._at_axis(a, x)
                    if len(memo) < _AXIS_MEMO_MAX:
                        memo[(a, x)] = hit
            else:
                hit = self._at_axis(a, x)
            off, w = hit
            base += off
            if w is None:
                continue
            st = strides[a]
            if corners is None:   # 1.0 x (1 - w) and 1.0 x w, exactly
                corners = [(0, 1.0 - w), (st, w)]
            else:
                corners = [(o, f * (1.0 - w)) for o, f in corners] + \
                          [(o + st, f * w) for o, f in corners]
        flat = self.flat
        if corners is None:
            return 0.0 + flat[base]
        out = 0.0
        for o, f in corners:
            out += f * flat[base + o]
        return out

    def _at_axis(self, a: int, x) -> tuple[int, float | None]:
        """Node offset and weight of scalar size ``x`` on axis ``a`` for :meth:`at` (weight
        None: at or beyond an end node, or a one-node axis)."""
        ul = self.ulists[a]
        n = len(ul)
        if n == 1:
            return 0, None
        u = math.log2(1.0 + max(x, 0.0)) if self.zero[a] else math.log2(max(x, 1.0))
        if u <= ul[0]:
            return 0, None
        if u >= ul[-1]:
            return (n - 1) * self.strides[a], None
        i = bisect.bisect_right(ul, u) - 1
        return i * self.strides[a], (u - ul[i]) / (ul[i + 1] - ul[i])

    def at_array(self, xs) -> np.ndarray:
        """Interpolated values at many points (arrays broadcast together, one per axis).

        The same arithmetic element by element whatever the broadcast length (``log2`` on
        numpy; clipping, bracketing and weights in IEEE double either way): an axis given as
        a scalar (e.g. the batch of a decode run) gets its interpolation index and weight
        computed once (and remembered), each corner's weight is the product of the per-axis
        factors in axis order, and queries of at most ``_SMALL_QUERY`` points run in plain
        Python, so results do not depend on how the query is batched.
        """
        arrs = [np.asarray(x, float) for x in xs]
        shapes = [a.shape for a in arrs if a.ndim]
        if len(shapes) == 1:   # one array among scalars (a decode run): its own shape
            shape = shapes[0]
        else:
            shape = np.broadcast_shapes(*(a.shape for a in arrs))
        size = math.prod(shape)
        small = size <= _SMALL_QUERY
        if len(shape) == 1 and size <= _LINE_QUERY:
            line = self._at_line(arrs)
            if line is not None:
                return line
        parts = []   # (stride, offset, weight, 1 - weight): scalars, lists (small) or arrays
        for a, (x, u_ax, z, st) in enumerate(zip(arrs, self.us, self.zero, self.strides)):
            n = len(u_ax)
            if n == 1:
                continue
            if x.ndim == 0:
                parts.append((st, *self._scalar_part(a, x)))
                continue
            if x.shape != shape:
                x = np.broadcast_to(x, shape)
            x = x.ravel()
            if small:
                ul = self.ulists[a]
                u0, u1 = ul[0], ul[-1]
                offs, ws, oms = [], [], []
                for u in (np.log2(1.0 + np.maximum(x, 0.0)) if z
                          else np.log2(np.maximum(x, 1.0))).tolist():
                    u = min(max(u, u0), u1)
                    i = min(max(bisect.bisect_right(ul, u) - 1, 0), n - 2)
                    lo = ul[i]
                    w = (u - lo) / (ul[i + 1] - lo)
                    offs.append(i * st)
                    ws.append(w)
                    oms.append(1.0 - w)
                parts.append((st, offs, ws, oms))
            else:
                i, w = self._axis_weights(a, x)
                parts.append((st, i * st, w, 1.0 - w))
        if small:
            return np.array([self._corners(parts, e) for e in range(size)],
                            dtype=float).reshape(shape)
        le = self.le.ravel()
        out = np.zeros(size)
        idx = sum(p[1] for p in parts)
        for mask in range(1 << len(parts)):
            wt = None
            off = 0
            for b, (st, _, w, om) in enumerate(parts):
                if mask >> b & 1:
                    f = w
                    off += st
                else:
                    f = om
                wt = f if wt is None else wt * f
            out += le[idx + off] if wt is None else wt * le[idx + off]
        return out.reshape(shape)

    def _scalar_part(self, a: int, x: np.ndarray) -> tuple[int, float, float]:
        """(offset, weight, 1 - weight) of scalar size ``x`` on axis ``a`` (remembered)."""
        key = (a, float(x))
        memo = self._axis_memo
        hit = memo.get(key)
        if hit is None:
            i, w = self._axis_weights(a, x.reshape(1))
            hit = (int(i[0]) * self.strides[a], float(w[0]), float(1.0 - w[0]))
            if len(memo) < _AXIS_MEMO_MAX:
                memo[key] = hit   # a scalar axis (a decode run's batch) recurs
        return hit

    def _at_line(self, arrs) -> np.ndarray | None:
        """:meth:`at_array` along one line of the grid: one axis given as a 1-d array (a
        decode run's context), every other axis a scalar, at most two axes of more than one
        node (None otherwise: the general path answers). Plain Python per point, the same
        IEEE operations in the same order as :meth:`_corners` (``0.0`` first, corners by
        mask, each weight the product of the per-axis factors in axis order)."""
        var = -1
        fixed = []   # (position among the interpolated axes, stride, offset, w, 1 - w)
        for a, x in enumerate(arrs):
            if len(self.us[a]) == 1:
                continue
            if x.ndim:
                if var >= 0:
                    return None
                var, pos = a, len(fixed)
            else:
                fixed.append((self.strides[a], *self._scalar_part(a, x)))
        if var < 0 or len(fixed) > 1:
            return None
        ul, st = self.ulists[var], self.strides[var]
        u0, u1, top = ul[0], ul[-1], len(ul) - 2
        x = arrs[var]
        us = (np.log2(1.0 + np.maximum(x, 0.0)) if self.zero[var]
              else np.log2(np.maximum(x, 1.0))).tolist()
        flat, br = self.flat, bisect.bisect_right
        out = []
        if fixed:
            s1, o1, w1, m1 = fixed[0]
            s01 = st + s1
        for u in us:
            if u < u0:
                u = u0
            elif u > u1:
                u = u1
            i = br(ul, u) - 1
            if i < 0:
                i = 0
            elif i > top:
                i = top
            lo = ul[i]
            w = (u - lo) / (ul[i + 1] - lo)
            m = 1.0 - w
            if not fixed:
                b = i * st
                out.append((0.0 + m * flat[b]) + w * flat[b + st])
            elif pos == 0:   # the varying axis first: its factor leads each product
                b = i * st + o1
                out.append((((0.0 + (m * m1) * flat[b]) + (w * m1) * flat[b + st])
                            + (m * w1) * flat[b + s1]) + (w * w1) * flat[b + s01])
            else:
                b = o1 + i * st
                out.append((((0.0 + (m1 * m) * flat[b]) + (w1 * m) * flat[b + s1])
                            + (m1 * w) * flat[b + st]) + (w1 * w) * flat[b + s01])
        return np.array(out, dtype=float)

    def _axis_weights(self, a: int, x: np.ndarray):
        """Lower bracketing node index and linear weight in ``u`` along axis ``a`` at sizes
        ``x`` (1-d), clipped to the axis's range."""
        u_ax, n = self.us[a], len(self.us[a])
        u = np.log2(1.0 + np.maximum(x, 0.0)) if self.zero[a] else np.log2(np.maximum(x, 1.0))
        u = np.minimum(np.maximum(u, u_ax[0]), u_ax[-1])   # = np.clip, without its wrapper
        i = np.minimum(np.maximum(np.searchsorted(u_ax, u, side="right") - 1, 0), n - 2)
        lo = u_ax[i]
        return i, (u - lo) / (u_ax[i + 1] - lo)

    def _corners(self, parts, e: int) -> float:
        """Point ``e`` of a small query: the weighted sum over the cell's corners (the same
        order and products as the array path)."""
        base = 0
        fs = []
        for st, off, w, om in parts:
            if isinstance(off, list):
                off, w, om = off[e], w[e], om[e]
            base += off
            fs.append((st, w, om))
        flat = self.flat
        out = 0.0
        for mask in range(1 << len(fs)):
            wt = None
            off = base
            for b, (st, w, om) in enumerate(fs):
                if mask >> b & 1:
                    f = w
                    off += st
                else:
                    f = om
                wt = f if wt is None else wt * f
            out += flat[off] if wt is None else wt * flat[off]
        return out
