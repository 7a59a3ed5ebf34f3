"""One point of a table grid, interpolated in plain typed Python (part of the compiled core).

:class:`GridPoint` holds what a filled :class:`~simulator.perf.tables.grid._Grid` needs to
answer a query at one point: the node coordinates ``u`` of every axis (``log2(size)``, or
``log2(1 + size)`` on axes that hold 0), the filled values in C order, and the strides. It is
the one implementation of a point query: :meth:`_Grid.at` and every array query
(:meth:`_Grid.at_array`, element by element) call it, so a value does not depend on how the
queries were batched, and the step pricer calls it directly from the compiled core
(:mod:`simulator.perf.step_times`).

The interpolation is multilinear in ``u`` between the cell's corner nodes; a size at or beyond
an end node takes that node (the caller decides what happens beyond the grid). Its logarithm
is the C library's ``log2`` (``math.log2``), never numpy's: numpy selects SIMD code for its
transcendental functions by the CPU it runs on (AVX-512 and AVX2 give different last bits:
on this project's machine ``np.exp`` differs from the C library's ``exp`` on 4.6% of values and
between the two instruction sets), which would make a run's bytes depend on the machine.

The arithmetic is fixed (the order of the corner products and of their sum is part of every
priced step time): the corner of mask ``m`` (bit ``a`` set: the upper node along axis ``a``)
has weight ``prod_a (w_a if bit a else 1 - w_a)`` multiplied in axis order, corners are summed
in mask order starting from ``0.0``, and an axis at an end node (or with one node) takes no
part in the products.
"""
from __future__ import annotations

import math
from typing import Final

from simulator.base.compiled_core import register_pickling

__all__ = ["GridPoint", "u_coordinate"]


#: the C library's ``log2`` (``math.log2``), held once: the compiled core calls it without
#: looking the name up in the ``math`` module at every call (mypyc keeps a ``Final`` name in
#: a C variable; it has no native ``log2``)
_LOG2: Final = math.log2


def u_coordinate(x: float, zero: bool) -> float:
    """Interpolation coordinate of a size: ``log2(max(x, 1))``, or ``log2(1 + max(x, 0))``
    on an axis that holds 0 (sizes below the axis's floor are clipped to it)."""
    if zero:
        return _LOG2(1.0 + (x if x > 0.0 else 0.0))  # noqa: FURB136 - a C compare, compiled
    return _LOG2(x if x > 1.0 else 1.0)  # noqa: FURB136


def _cell(ul: list[float], u: float, below: int = -1) -> int:
    """Where coordinate ``u`` falls among an axis's nodes ``ul`` (increasing): -1 at or
    below the first node (or a one-node axis), ``len(ul) - 1`` at or above the last, else the
    index of the node below it (a NaN falls in the cell the search starts from: 0 without
    ``below``, as the comparisons have it).

    ``below``: the cell of a coordinate known to be at most ``u`` (a decode run's steps ask
    for growing contexts), where the search starts: the same answer, without passing the
    nodes below it again."""
    n = len(ul)
    if n == 1 or u <= ul[0]:
        return -1
    if u >= ul[n - 1]:
        return n - 1
    i = below + 1 if below > 0 else 1
    while ul[i] <= u:   # bisect_right over <= 17 nodes: the first node above u
        i += 1
    return i - 1


class GridPoint:
    """Point queries of one filled grid (module docstring).

    Parameters
    ----------
    flat : list of float
        The filled grid's values in C order (``shape`` = the axes' node counts).
    ulists : list of list of float
        Per axis, the nodes' ``u`` coordinates, increasing.
    strides : list of int
        Per axis, the offset in ``flat`` of one step along it.
    zero : list of bool
        Per axis, whether it holds size 0 (``u = log2(1 + size)``).
    lo, hi : list of float
        Per axis, its smallest and largest node size (for :meth:`inside`).
    """

    __slots__ = ("flat", "hi", "lo", "naxes", "strides", "ulists", "zero")

    def __init__(self, flat: list[float], ulists: list[list[float]], strides: list[int],
                 zero: list[bool], lo: list[float], hi: list[float]) -> None:
        self.flat: list[float] = [float(v) for v in flat]
        self.ulists: list[list[float]] = [[float(u) for u in ul] for ul in ulists]
        self.strides: list[int] = [int(s) for s in strides]
        self.zero: list[bool] = [bool(z) for z in zero]
        self.lo: list[float] = [float(v) for v in lo]
        self.hi: list[float] = [float(v) for v in hi]
        self.naxes: int = len(self.ulists)

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.flat, self.ulists, self.strides, self.zero, self.lo, self.hi), {}

    def inside(self, xs: list[float]) -> bool:
        """Whether every size of ``xs`` (one per axis) lies within its axis's node range."""
        lo = self.lo
        hi = self.hi
        for a in range(self.naxes):
            x = xs[a]
            if x < lo[a] or x > hi[a]:
                return False
        return True

    def at(self, xs: list[float]) -> float:
        """The interpolated value at sizes ``xs`` (one per axis, in the grid's axis order)."""
        flat = self.flat
        base = 0
        offs: list[int] = []
        wts: list[float] = []
        for a in range(self.naxes):
            ul = self.ulists[a]
            n = len(ul)
            if n == 1:
                continue
            st = self.strides[a]
            u = u_coordinate(xs[a], self.zero[a])
            c = _cell(ul, u)
            if c < 0:
                continue
            base += c * st
            if c == n - 1:
                continue
            w = (u - ul[c]) / (ul[c + 1] - ul[c])
            if not offs:   # 1.0 x (1 - w) and 1.0 x w, exactly
                offs = [0, st]
                wts = [1.0 - w, w]
            else:
                m = len(offs)
                nw = 1.0 - w
                for j in range(m):
                    offs.append(offs[j] + st)
                    wts.append(wts[j] * w)
                for j in range(m):
                    wts[j] = wts[j] * nw
        if not offs:
            return 0.0 + flat[base]
        out = 0.0
        for j in range(len(offs)):
            out += wts[j] * flat[base + offs[j]]
        return out

    def inside2(self, x0: float, x1: float) -> bool:
        """:meth:`inside` of a two-axis grid's point ``(x0, x1)``, without a list."""
        lo = self.lo
        hi = self.hi
        return not (x0 < lo[0] or x0 > hi[0] or x1 < lo[1] or x1 > hi[1])

    def at2(self, x0: float, x1: float) -> float:
        """:meth:`at` of a two-axis grid's point ``(x0, x1)``: the same operations in the same
        order (so the same bits), with the weights in local floats instead of lists (the
        decode-attention table's query, once per priced decode step)."""
        b0, in0, w0, _ = self.axis2(0, x0)
        b1, in1, w1, _ = self.axis2(1, x1)
        return self.corners2(b0 + b1, in0, w0, in1, w1)

    def axis2(self, a: int, x: float, below: int = -1) -> tuple[int, bool, float, int]:
        """One axis's part of :meth:`at2` at size ``x``: the cell's offset in ``flat``,
        whether ``x`` lies inside a cell (not at or beyond an end node), its weight there
        (0.0 when not) and the cell (:func:`_cell`; ``below``: the cell of a size at most
        ``x``, where its search starts). A caller asking many points along the other axis
        computes it once."""
        ul = self.ulists[a]
        u = u_coordinate(x, self.zero[a])
        c = _cell(ul, u, below)
        base = c * self.strides[a] if c > 0 else 0
        inside = 0 <= c < len(ul) - 1
        w = (u - ul[c]) / (ul[c + 1] - ul[c]) if inside else 0.0
        return base, inside, w, c

    def corners2(self, base: int, in0: bool, w0: float, in1: bool, w1: float) -> float:
        """:meth:`at2`'s sum over the cell's corners (from :meth:`axis2` of both axes; ``base``
        the sum of their offsets)."""
        flat = self.flat
        out = 0.0
        if in0 and in1:  # corners in mask order, weights multiplied in axis order
            st0 = self.strides[0]
            st1 = self.strides[1]
            a = 1.0 - w0
            b = 1.0 - w1
            out += (a * b) * flat[base]
            out += (w0 * b) * flat[base + st0]
            out += (a * w1) * flat[base + st1]
            out += (w0 * w1) * flat[base + (st0 + st1)]
            return out
        if in0:
            out += (1.0 - w0) * flat[base]
            out += w0 * flat[base + self.strides[0]]
            return out
        if in1:
            out += (1.0 - w1) * flat[base]
            out += w1 * flat[base + self.strides[1]]
            return out
        return 0.0 + flat[base]


register_pickling(GridPoint)
