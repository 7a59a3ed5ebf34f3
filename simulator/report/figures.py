"""Matplotlib figures of one run (latency CDFs, per-replica time series) and the figure
helpers every report uses (:func:`figure`, :func:`save_png`, :func:`default_style`,
:func:`cdf_points`).

Every plotting function takes the engine's tables and an output path, writes one PNG and
returns the path. Figures are built with the object-oriented API (:class:`matplotlib.figure.Figure`
rendered by the Agg canvas): nothing goes through ``pyplot``, so no window opens, no global
figure list grows, and the caller's interactive backend is left alone. Output is
deterministic: the default style is used regardless of the user's ``matplotlibrc``, and the
PNG carries no ``Software`` (version) entry and no timestamp, so the same data gives
byte-identical files with the same matplotlib and fonts. matplotlib is imported on first use
(it is the heaviest import of a report, and most runs in a sweep or plan draw nothing).

Large runs stay fast: a CDF is drawn through at most :data:`MAX_CDF_POINTS` points, and a time
series with many steps is binned by time (each bin shows the step-time-weighted mean of the
steps starting in it), so a 300k-step run plots in well under a second per figure.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation
    from matplotlib.figure import Figure

__all__ = [
    "FIGURE_FILES",
    "MAX_CDF_POINTS",
    "MAX_REPLICA_LINES",
    "MAX_TIME_BINS",
    "cdf_points",
    "default_style",
    "figure",
    "plain_text",
    "plot_batch_size",
    "plot_e2e_cdf",
    "plot_kv_usage",
    "plot_queue_length",
    "plot_speculative_speedup",
    "plot_ttft_cdf",
    "save_png",
    "write_figures",
]

#: File name of each figure :func:`write_figures` writes, keyed by figure name.
FIGURE_FILES: dict[str, str] = {
    "ttft_cdf": "ttft_cdf.png",
    "e2e_cdf": "e2e_cdf.png",
    "queue_length": "queue_length.png",
    "batch_size": "batch_size.png",
    "kv_usage": "kv_usage.png",
}

#: Most points drawn per CDF line (quantiles of the sample beyond that).
MAX_CDF_POINTS = 2000
#: Most time bins per time-series figure.
MAX_TIME_BINS = 400
#: Up to this many replicas get one line each; beyond, the figure shows the mean over
#: replicas with a min-max band.
MAX_REPLICA_LINES = 8
#: Steps per replica up to which the raw step series is drawn instead of time bins.
_RAW_STEPS_LIMIT = 2 * MAX_TIME_BINS
#: Most groups (slices) drawn as separate CDF lines.
_MAX_GROUP_LINES = 8

_FIGSIZE = (7.0, 3.6)  # inches
_DPI = 100
_PNG_METADATA = {"Software": None}


# --------------------------------------------------------------------------------------------
# common helpers (every report's figures)
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def default_style() -> Iterator[None]:
    """matplotlib's default style, whatever the user's ``matplotlibrc`` says."""
    import matplotlib.style as mpl_style
    with mpl_style.context("default"):
        yield


def plain_text(value: object) -> str:
    """A name from the user's files (a slice, a variant, a plan label) as figure text, shown
    as written: every ``$`` escaped, so ``$x$`` is not read as TeX (``$\\foo$`` would even
    fail to parse and stop the figure)."""
    return str(value).replace("$", r"\$")


def figure(figsize: tuple[float, float], *, dpi: float = _DPI,
           layout: str | None = None) -> Figure:
    """A new :class:`~matplotlib.figure.Figure` on an Agg canvas (no pyplot, no window).

    Parameters
    ----------
    figsize : (float, float)
        Width and height in inches.
    dpi : float
        Dots per inch (the PNG is ``figsize x dpi`` pixels).
    layout : str, optional
        matplotlib layout engine (``"constrained"``; default none).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize, dpi=dpi, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def save_png(fig: Figure, path: str | Path, *, dpi: float | None = None,
             tight: bool = False) -> Path:
    """Write ``fig`` as a deterministic PNG (no ``Software`` entry, no timestamp).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or pathlib.Path
        Output file (parent folders are created).
    dpi : float, optional
        Dots per inch (default: the figure's).
    tight : bool
        Apply ``tight_layout`` first.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    kw = {} if dpi is None else {"dpi": dpi}
    with warnings.catch_warnings():
        # a long label from the user's files (a tenant, a plan label) can leave the axes no
        # room: matplotlib then keeps the layout as it is and says so; the figure is still
        # complete, and the report's tables show every label in full
        warnings.filterwarnings("ignore", "(constrained_layout|Tight layout) not applied",
                                UserWarning)
        if tight:
            fig.tight_layout()
        fig.savefig(path, format="png", metadata=_PNG_METADATA, **kw)
    return path


def _new_figure() -> tuple[Figure, object]:
    fig = figure(_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig: Figure, path: str | Path) -> Path:
    return save_png(fig, path, dpi=_DPI)


def _no_data(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes,
            color="0.4")


def _col(df: pd.DataFrame, name: str) -> np.ndarray:
    import pandas as pd
    if name in df.columns:
        return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float)
    return np.full(len(df), np.nan)


# --------------------------------------------------------------------------------------------
# CDFs
# --------------------------------------------------------------------------------------------
def cdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the finite ``values`` through at most :data:`MAX_CDF_POINTS` points.

    Returns the sorted values and their cumulative fractions ``(i + 1) / n`` (in (0, 1]);
    beyond :data:`MAX_CDF_POINTS` samples, evenly spaced order statistics (first and last
    included).
    """
    v = np.sort(values[np.isfinite(values)])
    n = v.size
    if n == 0:
        return v, v
    if n > MAX_CDF_POINTS:
        idx = np.unique(np.linspace(0, n - 1, MAX_CDF_POINTS).round().astype(np.int64))
    else:
        idx = np.arange(n)
    return v[idx], (idx + 1) / n


def _plot_cdf(values: np.ndarray, groups: np.ndarray | None, path: str | Path, *,
              xlabel: str, title: str, slo_s: float | None) -> Path:
    with default_style():
        fig, ax = _new_figure()
        x, y = cdf_points(values)
        if x.size == 0:
            _no_data(ax, "samples")
        else:
            ax.plot(x, y, drawstyle="steps-post", color="black", lw=1.6, label="all", zorder=3)
            names = [] if groups is None else sorted(set(groups.tolist()))
            if 1 < len(names) <= _MAX_GROUP_LINES:
                for name in names:
                    gx, gy = cdf_points(values[groups == name])
                    if gx.size:
                        ax.plot(gx, gy, drawstyle="steps-post", lw=1.0,
                                label=plain_text(name))
            for q in (0.5, 0.9, 0.99):
                ax.axhline(q, color="0.6", lw=0.6, ls=":")
            if slo_s is not None:
                ax.axvline(float(slo_s), color="tab:red", lw=1.0, ls="--",
                           label=f"SLO {float(slo_s) * 1e3:g} ms")
            ax.set_xlim(left=0.0)
            ax.legend(loc="lower right", fontsize="small")
        ax.set_ylim(0.0, 1.01)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of requests")
        ax.set_title(title)
        return _save(fig, path)


def plot_ttft_cdf(requests: pd.DataFrame, path: str | Path, *, slo_s: float | None = None,
                  by: str | None = "slice") -> Path:
    """Empirical CDF of time to first token.

    Parameters
    ----------
    requests : pandas.DataFrame
        The engine's request table (``arrival_time_s``, ``first_token_time_s`` in seconds).
        Requests without a first token are left out.
    path : str or pathlib.Path
        Output PNG file (parent folders are created).
    slo_s : float, optional
        TTFT bound in seconds, drawn as a vertical line.
    by : str or None, default "slice"
        Column whose groups get their own line when there are 2 to 8 of them.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    ttft = _col(requests, "first_token_time_s") - _col(requests, "arrival_time_s")
    groups = (requests[by].astype(str).to_numpy(dtype=object)
              if by is not None and by in requests.columns else None)
    return _plot_cdf(ttft, groups, path, xlabel="TTFT (s)", title="Time to first token",
                     slo_s=slo_s)


def plot_e2e_cdf(requests: pd.DataFrame, path: str | Path, *, slo_s: float | None = None,
                 by: str | None = "slice") -> Path:
    """Empirical CDF of end-to-end latency of completed requests.

    Parameters
    ----------
    requests : pandas.DataFrame
        The engine's request table (``status``, ``arrival_time_s``, ``finish_time_s`` in
        seconds).
    path : str or pathlib.Path
        Output PNG file (parent folders are created).
    slo_s : float, optional
        E2E bound in seconds, drawn as a vertical line.
    by : str or None, default "slice"
        Column whose groups get their own line when there are 2 to 8 of them.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    done = (requests["status"].astype(str) == "completed").to_numpy() \
        if "status" in requests.columns else np.zeros(len(requests), dtype=bool)
    e2e = np.where(done, _col(requests, "finish_time_s") - _col(requests, "arrival_time_s"),
                   np.nan)
    groups = (requests[by].astype(str).to_numpy(dtype=object)
              if by is not None and by in requests.columns else None)
    return _plot_cdf(e2e, groups, path, xlabel="end-to-end latency (s)",
                     title="End-to-end latency (completed requests)", slo_s=slo_s)


# --------------------------------------------------------------------------------------------
# time series
# --------------------------------------------------------------------------------------------
def _binned(t: np.ndarray, dt: np.ndarray, v: np.ndarray, rep_idx: np.ndarray, n_rep: int,
            t0: float, t1: float, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Step-time-weighted mean of ``v`` per (time bin, replica); NaN where a bin is empty.

    Returns bin centres (seconds, shape ``(n_bins,)``) and the means (shape
    ``(n_bins, n_rep)``).
    """
    width = (t1 - t0) / n_bins if t1 > t0 else 1.0
    b = np.clip(((t - t0) / width).astype(np.int64), 0, n_bins - 1)
    w = np.where(np.isfinite(dt) & (dt > 0), dt, 0.0)
    if not np.any(w > 0):
        w = np.ones_like(w)
    key = rep_idx * n_bins + b
    size = n_bins * n_rep
    num = np.bincount(key, weights=v * w, minlength=size)
    den = np.bincount(key, weights=w, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(den > 0, num / den, np.nan)
    centres = t0 + (np.arange(n_bins) + 0.5) * width
    return centres, mean.reshape(n_rep, n_bins).T


def _plot_series(steps: pd.DataFrame, values: np.ndarray, path: str | Path, *, ylabel: str,
                 title: str, ylim: tuple[float, float] | None = None) -> Path:
    with default_style():
        fig, ax = _new_figure()
        t = _col(steps, "start_time_s")
        ok = np.isfinite(t) & np.isfinite(values)
        if not np.any(ok):
            _no_data(ax, "steps")
        else:
            t, v = t[ok], values[ok]
            dt = _col(steps, "step_time_s")[ok]
            end = _col(steps, "end_time_s")[ok]
            reps = (steps["replica_id"].to_numpy()[ok] if "replica_id" in steps.columns
                    else np.zeros(t.size, dtype=np.int64))
            rep_ids, rep_idx = np.unique(reps, return_inverse=True)
            n_rep = rep_ids.size
            t0 = float(t.min())
            t1 = float(np.nanmax(np.concatenate([t, end[np.isfinite(end)]])))
            per_rep = np.bincount(rep_idx, minlength=n_rep)
            if n_rep <= MAX_REPLICA_LINES and per_rep.max() <= _RAW_STEPS_LIMIT:
                for i, rid in enumerate(rep_ids):
                    m = rep_idx == i
                    order = np.argsort(t[m], kind="stable")
                    ax.plot(t[m][order], v[m][order], drawstyle="steps-post", lw=1.0,
                            label=f"replica {rid}")
            else:
                n_bins = int(min(MAX_TIME_BINS, max(1, per_rep.max() // 2)))
                x, mean = _binned(t, dt, v, rep_idx, n_rep, t0, t1, n_bins)
                if n_rep <= MAX_REPLICA_LINES:
                    for i, rid in enumerate(rep_ids):
                        ax.plot(x, mean[:, i], lw=1.0, label=f"replica {rid}")
                else:
                    filled = np.isfinite(mean).any(axis=1)
                    lo = np.full(n_bins, np.nan)
                    hi = np.full(n_bins, np.nan)
                    avg = np.full(n_bins, np.nan)
                    lo[filled] = np.nanmin(mean[filled], axis=1)
                    hi[filled] = np.nanmax(mean[filled], axis=1)
                    avg[filled] = np.nanmean(mean[filled], axis=1)
                    ax.fill_between(x, lo, hi, color="tab:blue", alpha=0.25, lw=0,
                                    label=f"min-max over {n_rep} replicas")
                    ax.plot(x, avg, color="tab:blue", lw=1.2, label="mean over replicas")
            if n_rep > 1:
                ax.legend(loc="upper right", fontsize="small", ncols=2)
            ax.set_xlim(t0, t1 if t1 > t0 else t0 + 1.0)
        if ylim is not None:
            ax.set_ylim(*ylim)
        else:
            ax.set_ylim(bottom=0.0)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        return _save(fig, path)


def plot_queue_length(steps: pd.DataFrame, path: str | Path) -> Path:
    """Waiting-queue length over time, per replica.

    Parameters
    ----------
    steps : pandas.DataFrame
        The engine's step table (``replica_id``, ``start_time_s``, ``step_time_s``,
        ``end_time_s`` in seconds, ``num_waiting`` in requests).
    path : str or pathlib.Path
        Output PNG file (parent folders are created).

    Returns
    -------
    pathlib.Path
        ``path``.

    Notes
    -----
    With few steps each replica's series is drawn step by step. Otherwise time is cut into at
    most :data:`MAX_TIME_BINS` bins and each bin shows the mean over the steps starting in it,
    weighted by step time; bins in which a replica ran no step are left empty (idle).
    """
    return _plot_series(steps, _col(steps, "num_waiting"), path,
                        ylabel="waiting requests", title="Queue length")


def plot_batch_size(steps: pd.DataFrame, path: str | Path) -> Path:
    """Batch size (sequences per step) over time, per replica.

    Parameters
    ----------
    steps : pandas.DataFrame
        The engine's step table (``replica_id``, ``start_time_s``, ``step_time_s``,
        ``end_time_s`` in seconds, ``batch_size`` in sequences).
    path : str or pathlib.Path
        Output PNG file (parent folders are created).

    Returns
    -------
    pathlib.Path
        ``path``.

    Notes
    -----
    Binning as in :func:`plot_queue_length`.
    """
    return _plot_series(steps, _col(steps, "batch_size"), path,
                        ylabel="sequences per step", title="Batch size")


def plot_kv_usage(steps: pd.DataFrame, path: str | Path) -> Path:
    """KV-cache usage (``kv_blocks_used / num_gpu_blocks``, percent) over time, per replica.

    Parameters
    ----------
    steps : pandas.DataFrame
        The engine's step table (``replica_id``, ``start_time_s``, ``step_time_s``,
        ``end_time_s`` in seconds, ``kv_blocks_used``, ``num_gpu_blocks`` in blocks).
    path : str or pathlib.Path
        Output PNG file (parent folders are created).

    Returns
    -------
    pathlib.Path
        ``path``.

    Notes
    -----
    Binning as in :func:`plot_queue_length`.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        usage = 100.0 * _col(steps, "kv_blocks_used") / _col(steps, "num_gpu_blocks")
    usage[~np.isfinite(usage)] = np.nan
    return _plot_series(steps, usage, path, ylabel="KV blocks used (%)",
                        title="KV-cache usage", ylim=(0.0, 105.0))


def write_figures(outdir: str | Path, requests: pd.DataFrame, steps: pd.DataFrame, *,
                  slo: Mapping[str, object] | None = None) -> dict[str, Path]:
    """Write every figure of a run report into ``outdir``.

    Parameters
    ----------
    outdir : str or pathlib.Path
        Output folder (created if missing).
    requests : pandas.DataFrame
        The engine's request table.
    steps : pandas.DataFrame
        The engine's step table.
    slo : mapping, optional
        SLO bounds in seconds (``ttft_s``, ``e2e_s``) drawn on the CDFs.

    Returns
    -------
    dict of str to pathlib.Path
        Figure name (keys of :data:`FIGURE_FILES`) to the file written.
    """
    out = Path(outdir)
    slo = slo or {}
    ttft_b, e2e_b = slo.get("ttft_s"), slo.get("e2e_s")
    return {
        "ttft_cdf": plot_ttft_cdf(requests, out / FIGURE_FILES["ttft_cdf"],
                                  slo_s=None if ttft_b is None else float(ttft_b)),
        "e2e_cdf": plot_e2e_cdf(requests, out / FIGURE_FILES["e2e_cdf"],
                                slo_s=None if e2e_b is None else float(e2e_b)),
        "queue_length": plot_queue_length(steps, out / FIGURE_FILES["queue_length"]),
        "batch_size": plot_batch_size(steps, out / FIGURE_FILES["batch_size"]),
        "kv_usage": plot_kv_usage(steps, out / FIGURE_FILES["kv_usage"]),
    }


def plot_speculative_speedup(df: pd.DataFrame, path: str | Path) -> Path:
    """PNG of the closed-form speculative speedup versus acceptance rate, one line per ``k``
    (``servesim spec --sweep -o``).

    Parameters
    ----------
    df : pandas.DataFrame
        A :func:`simulator.speculative.calculator.sweep_table` result (columns
        ``acceptance_rate``, ``num_speculative_tokens``, ``draft_cost_ratio``, ``speedup``).
    path : str or pathlib.Path
        Output file; parent folders are created.

    Returns
    -------
    pathlib.Path
        The written path.

    Raises
    ------
    ValueError
        If required columns are missing or the table is empty.
    """
    need = {"acceptance_rate", "num_speculative_tokens", "draft_cost_ratio", "speedup"}
    missing = need - set(df.columns)
    if missing:
        raise ValueError(f"sweep table lacks columns: {', '.join(sorted(missing))}")
    if df.empty:
        raise ValueError("sweep table is empty")
    with default_style():
        fig = figure((7.0, 4.5))
        ax = fig.add_subplot(1, 1, 1)
        costs = sorted(df["draft_cost_ratio"].unique())
        for (c, k), g in df.groupby(["draft_cost_ratio", "num_speculative_tokens"], sort=True):
            g = g.sort_values("acceptance_rate")
            label = f"k={k}" if len(costs) == 1 else f"k={k}, c={c:g}"
            ax.plot(g["acceptance_rate"], g["speedup"], marker="o", markersize=3, label=label)
        ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1)
        ax.set_xlabel("acceptance rate a")
        ax.set_ylabel("expected speedup (batch 1)")
        title = "Speculative decoding: expected speedup (Leviathan et al. 2023, Thm 3.8)"
        if len(costs) == 1:
            title += f"\ndraft cost ratio c = {costs[0]:g}"
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        return save_png(fig, path, dpi=120, tight=True)
