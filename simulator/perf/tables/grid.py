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

import math

import numpy as np

from simulator.perf.tables import libm
from simulator.perf.tables.fill_cache import cached_fill
from simulator.perf.tables.grid_point import GridPoint, u_coordinate

#: Array queries of at most this many points are answered point by point
#: (:class:`~simulator.perf.tables.grid_point.GridPoint`: numpy's per-call overhead dominates
#: below it); larger ones by the same arithmetic on arrays. Either way a point's value is the
#: same to the bit.
_POINT_QUERY = 64


def _u(x, zero: bool):
    """Interpolation coordinate of a size: ``log2(x)`` (``log2(1 + x)`` on axes that hold 0);
    sizes below 1 are clipped to 1 (the grid holds its edge there anyway). The C library's
    ``log2`` element by element (:mod:`simulator.perf.tables.libm`: numpy's depends on the
    CPU)."""
    if isinstance(x, np.ndarray):
        flat = x.astype(float).ravel().tolist()
        return np.fromiter((u_coordinate(v, zero) for v in flat), dtype=float,
                           count=len(flat)).reshape(x.shape)
    return u_coordinate(float(x), zero)


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
    s_lo, s_hi = libm.exp2(ua[lo]), libm.exp2(ua[hi])
    w = (libm.exp2(ua[i]) - s_lo) / (s_hi - s_lo)
    aff = libm.log(libm.exp(tl) * (1.0 - w) + libm.exp(th) * w)
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
    """Log efficiency on a grid over ``u`` coordinates (filled; a table's: via ``fill_cache``).

    Point queries go through :attr:`point` (:class:`~simulator.perf.tables.grid_point.GridPoint`,
    the one implementation of the interpolation's arithmetic)."""

    __slots__ = (
        "flat",
        "le",
        "linear_eff",
        "lr",
        "measured",
        "names",
        "point",
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
            lr = libm.log(np.maximum(np.broadcast_to(np.asarray(r, float), shape), 1e-300))
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
        self.ulists = [u.tolist() for u in self.us]
        st, acc = [], 1
        for d in reversed(self.shape):
            st.append(acc)
            acc *= d
        self.strides = tuple(reversed(st))
        self.linear_eff = None
        self._set_values(cached_fill(raw, self.us, lr, method, _fill) if cache
                         else _fill(raw, self.us, lr, method))

    def _set_values(self, le: np.ndarray) -> None:
        self.le = le
        self.flat = le.ravel().tolist()
        self.point = GridPoint(self.flat, self.ulists, list(self.strides), list(self.zero),
                               [float(v[0]) for v in self.vals],
                               [float(v[-1]) for v in self.vals])

    def with_values(self, values: np.ndarray) -> _Grid:
        """The same axes carrying other (filled) values, e.g. log time for one query key."""
        g = _Grid.__new__(_Grid)
        for a in ("names", "vals", "us", "ulists", "zero", "strides", "shape", "measured"):
            setattr(g, a, getattr(self, a))
        g.raw = g.lr = g.linear_eff = None
        g._set_values(np.asarray(values, float).reshape(self.shape))
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
        """Interpolated value at one point (scalar sizes, one per axis):
        :meth:`GridPoint.at <simulator.perf.tables.grid_point.GridPoint.at>`."""
        return self.point.at([float(x) for x in xs])

    def at_array(self, xs) -> np.ndarray:
        """Interpolated values at many points (arrays broadcast together, one per axis).

        Each value is :meth:`at`'s at that point, to the bit, whatever the broadcast length:
        queries of at most :data:`_POINT_QUERY` points are answered point by point, larger
        ones by the same operations on arrays (``u`` by the C library's ``log2``, clipping,
        bracketing and weights in IEEE double, each corner's weight the product of the
        per-axis factors in axis order, corners summed in mask order from ``0.0``; an axis at
        an end node enters with the factors ``1.0`` and ``0.0``, which leave every product and
        sum unchanged).
        """
        arrs = [np.asarray(x, float) for x in xs]
        shape = np.broadcast_shapes(*(a.shape for a in arrs))
        size = math.prod(shape)
        if size <= _POINT_QUERY:
            cols = [np.broadcast_to(a, shape).ravel().tolist() for a in arrs]
            at = self.point.at
            return np.array([at(list(p)) for p in zip(*cols)], dtype=float).reshape(shape)
        parts = []   # (stride, offset, weight, 1 - weight) per axis of more than one node
        for a, (x, u_ax, st) in enumerate(zip(arrs, self.us, self.strides)):
            if len(u_ax) == 1:
                continue
            i, w = self._axis_weights(a, np.broadcast_to(x, shape).ravel())
            parts.append((st, i * st, w, 1.0 - w))
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

    def _axis_weights(self, a: int, x: np.ndarray):
        """Lower bracketing node index and linear weight in ``u`` along axis ``a`` at sizes
        ``x`` (1-d), clipped to the axis's range."""
        u_ax, n = self.us[a], len(self.us[a])
        u = _u(x, self.zero[a])
        u = np.minimum(np.maximum(u, u_ax[0]), u_ax[-1])   # = np.clip, without its wrapper
        i = np.minimum(np.maximum(np.searchsorted(u_ax, u, side="right") - 1, 0), n - 2)
        lo = u_ax[i]
        return i, (u - lo) / (u_ax[i + 1] - lo)
