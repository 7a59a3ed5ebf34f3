"""Extract a matplotlib Figure's content (data, labels) as JSON-safe data."""
import math
import numpy as np

def _num(x):
    x = float(x)
    if not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return float(f"{x:.6g}")

def _arr(a):
    a = np.asarray(a, dtype=float).ravel()
    return [_num(v) for v in a]

def figure_content(fig):
    out = {"suptitle": fig._suptitle.get_text() if fig._suptitle is not None else "", "axes": []}
    for ax in fig.axes:
        d = {"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
             "xscale": ax.get_xscale(), "yscale": ax.get_yscale(), "lines": [], "collections": [],
             "patches": [], "texts": [t.get_text() for t in ax.texts],
             "yticklabels": [t.get_text() for t in ax.get_yticklabels()],
             "xticklabels": [t.get_text() for t in ax.get_xticklabels()]}
        for ln in ax.get_lines():
            d["lines"].append({"label": ln.get_label(), "x": _arr(ln.get_xdata()),
                               "y": _arr(ln.get_ydata())})
        for c in ax.collections:
            e = {"type": type(c).__name__, "label": c.get_label()}
            off = c.get_offsets()
            if len(off):
                e["offsets"] = [_arr(r) for r in np.asarray(off)]
            paths = c.get_paths()
            if type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection"):
                e["paths"] = [[_arr(v) for v in p.vertices] for p in paths]
            d["collections"].append(e)
        for p in ax.patches:
            if hasattr(p, "get_width"):
                d["patches"].append({"label": p.get_label(), "xy": _arr(p.get_xy()),
                                     "w": _num(p.get_width()), "h": _num(p.get_height())})
        leg = ax.get_legend()
        d["legend"] = [t.get_text() for t in leg.get_texts()] if leg else []
        out["axes"].append(d)
    return out
