"""Figures of the fidelity page (``benchmarks/bench_fidelity.py``): signed errors per run and
stage (one panel per metric), and per-request CDFs of a run, recorded against simulated and a
peer simulator's answer.

Same conventions as :mod:`simulator.observe.figures`: matplotlib's object-oriented API, the
default style whatever the user's ``matplotlibrc``, PNGs without version or time metadata (the
same data gives the same bytes), at a modest resolution (the page is committed).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.style as mpl_style
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from simulator.report.figures import cdf_points

__all__ = ["plot_cdf_overlay", "plot_signed_errors"]

_DPI = 80
_META = {"Software": None}
#: Marker of each statistic in the error chart.
_STAT_STYLE = {"mean": ("o", "tab:blue"), "p50": ("s", "tab:green"),
               "p90": ("^", "tab:orange"), "p99": ("v", "tab:red"),
               "value": ("D", "tab:purple")}
#: Line style of each series in the CDF chart (recorded, servesim, peer).
_SERIES_STYLE = ({"color": "black", "lw": 1.6}, {"color": "tab:blue", "lw": 1.4, "ls": "--"},
                 {"color": "tab:orange", "lw": 1.4, "ls": ":"})


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=_DPI, metadata=_META)
    return path


def plot_signed_errors(rows: Sequence[Mapping], panels: Sequence[tuple[str, str]],
                       path: str | Path, *, title: str = "", value_label: str = "value",
                       limit_pct: float = 50.0) -> Path:
    """A dot chart of signed % errors: one panel per metric, one line per run (or stage), one
    marker per statistic, the +-5% and +-10% bands shaded.

    Each panel's axis spans its largest |error| (at least +-12%) up to ``limit_pct``; an error
    beyond that is drawn at the edge as a triangle pointing outwards, with its value.

    Parameters
    ----------
    rows : sequence of mapping
        Top to bottom: ``{"label": str, "muted": bool, "errors": {metric: {stat: float or
        None}}}`` (``muted`` rows, e.g. overload runs, are drawn grey); stats among ``mean``,
        ``p50``, ``p90``, ``p99``, ``value`` (a metric with one figure).
    panels : sequence of (str, str)
        ``(metric, panel title)`` in order.
    path : str or Path
        Output PNG.
    title : str
        The figure's title.
    value_label : str
        The legend's name for the ``value`` statistic.
    limit_pct : float
        The widest axis, in % (> 0).

    Returns
    -------
    Path
    """
    n = max(len(rows), 1)
    with mpl_style.context("default"):
        fig = Figure(figsize=(3.0 * len(panels) + 2.6, 1.9 + 0.24 * n), dpi=_DPI,
                     layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
        y = np.arange(len(rows))[::-1]
        seen: set[str] = set()
        for ax, (metric, label) in zip(axes, panels):
            pts = [(yi, stat, float(e), bool(row.get("muted"))) for yi, row in zip(y, rows)
                   for stat, e in (row["errors"].get(metric) or {}).items()
                   if e is not None and np.isfinite(e) and stat in _STAT_STYLE]
            big = max((abs(p[2]) for p in pts), default=0.0)
            lim = min(limit_pct, max(12.0, 1.1 * big))
            ax.axvspan(-10, 10, color="0.93", lw=0)
            ax.axvspan(-5, 5, color="0.85", lw=0)
            ax.axvline(0, color="black", lw=0.8)
            for yi, stat, e, muted in pts:
                marker, color = _STAT_STYLE[stat]
                color = "0.6" if muted else color
                if abs(e) > lim:
                    x = float(np.sign(e)) * lim
                    ax.plot([x], [yi], marker=">" if e > 0 else "<", ls="none", ms=6,
                            color=color, clip_on=False)
                    ax.annotate(f"{e:+.0f}%", (x, yi), xytext=(-4 if e > 0 else 4, 4),
                                textcoords="offset points", fontsize="x-small", color=color,
                                ha="right" if e > 0 else "left")
                else:
                    ax.plot([e], [yi], marker=marker, ls="none", ms=5, color=color)
                seen.add(stat)
            ax.set_xlim(-lim, lim)
            ax.set_title(label, fontsize="medium")
            ax.set_xlabel("signed error (%)")
            ax.grid(True, axis="x", alpha=0.3)
        axes[0].set_yticks(y, [r["label"] for r in rows], fontsize="small")
        axes[0].set_ylim(-0.7, len(rows) - 0.3)
        stats = [k for k in _STAT_STYLE if k in seen]
        if stats:
            handles = [Line2D([], [], marker=_STAT_STYLE[k][0], color=_STAT_STYLE[k][1],
                              ls="none", ms=5) for k in stats]
            labels = [value_label if k == "value" else k for k in stats]
            if any(r.get("muted") for r in rows):
                handles.append(Line2D([], [], marker="o", color="0.6", ls="none", ms=5))
                labels.append("overload (any statistic)")
            fig.legend(handles, labels, loc="outside lower center", ncols=len(labels),
                       fontsize="small")
        if title:
            fig.suptitle(title, fontsize="medium")
        return _save(fig, Path(path))


def plot_cdf_overlay(samples: Mapping[str, Mapping[str, Sequence[float]]],
                     panels: Sequence[tuple[str, str, float]], path: str | Path, *,
                     title: str = "") -> Path:
    """Overlaid empirical CDFs per metric: the first series solid black (recorded), the
    second dashed (servesim), the third dotted (a peer).

    Parameters
    ----------
    samples : mapping
        ``{metric: {series label: values}}`` (values in seconds; non-finite ones dropped).
    panels : sequence of (str, str, float)
        ``(metric, x-axis label, scale)``: values are multiplied by ``scale`` (1e3: ms). A
        panel whose values span more than two decades is drawn on a log axis.
    path : str or Path
        Output PNG.
    title : str
        The figure's title.

    Returns
    -------
    Path
    """
    with mpl_style.context("default"):
        fig = Figure(figsize=(3.6 * len(panels), 3.2), dpi=_DPI, layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels)))
        for ax, (metric, xlabel, scale) in zip(axes, panels):
            lo, hi = np.inf, 0.0
            for (label, values), style in zip((samples.get(metric) or {}).items(),
                                              _SERIES_STYLE):
                x, yv = cdf_points(np.asarray(values, dtype=float) * scale)
                if not x.size:
                    continue
                ax.plot(x, yv, drawstyle="steps-post", label=label, **style)
                pos = x[x > 0]
                if pos.size:
                    lo, hi = min(lo, float(pos.min())), max(hi, float(pos.max()))
            if np.isfinite(lo) and hi / lo > 100.0:
                ax.set_xscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("fraction of requests")
            ax.set_ylim(0, 1.01)
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small", loc="lower right")
        if title:
            fig.suptitle(title, fontsize="medium")
        return _save(fig, Path(path))
