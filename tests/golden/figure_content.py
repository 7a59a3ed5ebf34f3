"""What a matplotlib figure shows, as JSON-safe data (for golden figure tests).

:func:`figure_content` lists, per axes: title, axis labels and scales, tick labels, legend
entries, free texts, every line's x/y data, every scatter's offsets, every filled band's
vertices and every bar's position and size. Numbers are rounded to 6 significant digits so
that the comparison is about what is drawn, not about the last bits of a float; colours,
fonts and pixel positions are left out (they are style, and they change with matplotlib
versions while the content does not).
"""
from __future__ import annotations

import math

import numpy as np

_BANDS = ("PolyCollection", "FillBetweenPolyCollection")


def _num(x) -> float | str | None:
    x = float(x)
    if not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return float(f"{x:.6g}")


def _arr(a) -> list:
    return [_num(v) for v in np.asarray(a, dtype=float).ravel()]


def _axes_content(ax) -> dict:
    d = {"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
         "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
         "texts": [t.get_text() for t in ax.texts],
         "yticklabels": [t.get_text() for t in ax.get_yticklabels()],
         "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
         "lines": [{"label": ln.get_label(), "x": _arr(ln.get_xdata()),
                    "y": _arr(ln.get_ydata())} for ln in ax.get_lines()],
         "collections": [], "patches": []}
    for c in ax.collections:
        e = {"type": type(c).__name__, "label": c.get_label()}
        off = np.asarray(c.get_offsets())
        if len(off):
            e["offsets"] = [_arr(r) for r in off]
        if type(c).__name__ in _BANDS:
            e["paths"] = [[_arr(v) for v in p.vertices] for p in c.get_paths()]
        d["collections"].append(e)
    for p in ax.patches:
        if hasattr(p, "get_width"):
            d["patches"].append({"label": p.get_label(), "xy": _arr(p.get_xy()),
                                 "w": _num(p.get_width()), "h": _num(p.get_height())})
    leg = ax.get_legend()
    d["legend"] = [t.get_text() for t in leg.get_texts()] if leg else []
    return d


def figure_content(fig) -> dict:
    """The content of a :class:`matplotlib.figure.Figure` (see the module docstring)."""
    sup = fig._suptitle.get_text() if fig._suptitle is not None else ""
    return {"suptitle": sup, "axes": [_axes_content(ax) for ax in fig.axes]}
