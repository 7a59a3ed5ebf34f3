"""Figures of a replay against its record: per-request scatter, overlaid CDFs, and running /
waiting counts over time.

Same conventions as :mod:`simulator.report.figures`: matplotlib's object-oriented API (no
``pyplot``), the default style whatever the user's ``matplotlibrc``, PNGs without version or
time metadata, so the same data gives the same bytes.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.style as mpl_style
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from simulator.report.figures import cdf_points as _cdf_points

__all__ = ["FIGURES", "plot_latency_cdfs", "plot_request_scatter", "plot_timeline",
           "sim_counts_at"]

#: File name of each figure, by name.
FIGURES = {"request_scatter": "request_scatter.png", "latency_cdfs": "latency_cdfs.png",
           "timeline": "running_waiting.png"}

_DPI = 100
_META = {"Software": None}
_REAL = {"color": "black", "lw": 1.6}
_SIM = {"color": "tab:blue", "lw": 1.4, "ls": "--"}


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=_DPI, metadata=_META)
    return path


def plot_request_scatter(pair: pd.DataFrame, path: str | Path) -> Path:
    """Simulated against recorded TTFT and E2E, one point per compared request (log axes,
    the diagonal and +-20% lines).

    Parameters
    ----------
    pair : pandas.DataFrame
        :func:`simulator.observe.compare.paired_frame` output.
    path : str or Path
        Output PNG.

    Returns
    -------
    Path
    """
    with mpl_style.context("default"):
        fig = Figure(figsize=(10.0, 4.4), dpi=_DPI, layout="constrained")
        axes = fig.subplots(1, 2)
        ok = pair["compared"].to_numpy()
        for ax, m, label in zip(axes, ("ttft", "e2e"), ("TTFT", "end-to-end latency")):
            r = pair.loc[ok, f"real_{m}_s"].to_numpy(dtype=float)
            s = pair.loc[ok, f"sim_{m}_s"].to_numpy(dtype=float)
            good = np.isfinite(r) & np.isfinite(s) & (r > 0) & (s > 0)
            ax.grid(True, alpha=0.3, which="both")
            if not good.any():
                ax.text(0.5, 0.5, "no compared requests", ha="center", transform=ax.transAxes)
                continue
            r, s = r[good], s[good]
            ax.loglog(r, s, ".", ms=4, alpha=0.7, color="tab:blue")
            lo, hi = min(r.min(), s.min()) * 0.8, max(r.max(), s.max()) * 1.25
            xs = np.array([lo, hi])
            ax.plot(xs, xs, "k-", lw=0.8, label="simulated = recorded")
            ax.plot(xs, xs * 1.2, "k:", lw=0.7, label="+-20%")
            ax.plot(xs, xs / 1.2, "k:", lw=0.7)
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(f"recorded {label} (s)")
            ax.set_ylabel(f"simulated {label} (s)")
            ax.set_title(f"{label} per request ({good.sum()} requests)")
            ax.legend(fontsize="small", loc="upper left")
        return _save(fig, Path(path))


def plot_latency_cdfs(pair: pd.DataFrame, path: str | Path, *, real_itl_s=None,
                      sim_itl_s=None, sim_itl_weights=None) -> Path:
    """Overlaid empirical CDFs (recorded solid, simulated dashed) of TTFT, TPOT, E2E and, when
    the record has inter-token gaps, ITL.

    Parameters
    ----------
    pair : pandas.DataFrame
        :func:`simulator.observe.compare.paired_frame` output (compared requests are drawn).
    path : str or Path
        Output PNG.
    real_itl_s : array_like, optional
        The record's inter-token gaps (seconds); adds the ITL panel.
    sim_itl_s, sim_itl_weights : array_like, optional
        The simulation's gaps and their multiplicities.

    Returns
    -------
    Path
    """
    panels = [("ttft", "TTFT (s)", 1.0), ("tpot", "TPOT (ms)", 1e3),
              ("e2e", "end-to-end latency (s)", 1.0)]
    has_itl = real_itl_s is not None and len(real_itl_s) > 0
    with mpl_style.context("default"):
        fig = Figure(figsize=(4.0 * (len(panels) + has_itl), 3.6), dpi=_DPI,
                     layout="constrained")
        axes = fig.subplots(1, len(panels) + has_itl)
        ok = pair["compared"].to_numpy()
        for ax, (m, xlabel, scale) in zip(axes, panels):
            for who, style in (("real", _REAL), ("sim", _SIM)):
                x, y = _cdf_points(pair.loc[ok, f"{who}_{m}_s"].to_numpy(dtype=float) * scale)
                if x.size:
                    ax.plot(x, y, drawstyle="steps-post",
                            label="recorded" if who == "real" else "simulated", **style)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("fraction of requests")
            ax.set_ylim(0, 1.01)
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:  # nothing drawn (no request compared)
                ax.legend(fontsize="small", loc="lower right")
        if has_itl:
            ax = axes[-1]
            x, y = _cdf_points(np.asarray(real_itl_s, dtype=float) * 1e3)
            ax.plot(x, y, drawstyle="steps-post", label="recorded", **_REAL)
            if sim_itl_s is not None and len(sim_itl_s):
                v = np.asarray(sim_itl_s, dtype=float) * 1e3
                w = (np.ones_like(v) if sim_itl_weights is None
                     else np.asarray(sim_itl_weights, dtype=float))
                o = np.argsort(v, kind="stable")
                cw = np.cumsum(w[o]) / w.sum()
                ax.plot(v[o], cw, drawstyle="steps-post", label="simulated", **_SIM)
            ax.set_xlabel("ITL (ms)")
            ax.set_ylabel("fraction of gaps")
            ax.set_ylim(0, 1.01)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small", loc="lower right")
        return _save(fig, Path(path))


def sim_counts_at(steps: pd.DataFrame, times) -> pd.DataFrame:
    """The simulation's running and waiting counts and KV usage at given times.

    For each replica, the step in progress at ``t`` (the last step starting at or before
    ``t`` and ending after it) gives its batch size (running), waiting-queue length and
    ``kv_blocks_used / num_gpu_blocks``; an idle replica counts 0. Running and waiting are
    summed over replicas, KV usage averaged.

    Parameters
    ----------
    steps : pandas.DataFrame
        The simulation's step table.
    times : array_like of float
        Seconds on the replay clock.

    Returns
    -------
    pandas.DataFrame
        ``time_s``, ``num_running``, ``num_waiting``, ``kv_cache_usage``.
    """
    t = np.asarray(times, dtype=float)
    run = np.zeros(t.size)
    wait = np.zeros(t.size)
    kv = np.zeros(t.size)
    n_rep = 0
    if len(steps):
        for _rep, g in steps.groupby("replica_id", sort=True):
            n_rep += 1
            g = g.sort_values("start_time_s", kind="stable")
            st = g["start_time_s"].to_numpy(dtype=float)
            en = g["end_time_s"].to_numpy(dtype=float)
            i = np.searchsorted(st, t, side="right") - 1
            ii = np.clip(i, 0, len(st) - 1)
            live = (i >= 0) & (t < en[ii])
            run += np.where(live, g["batch_size"].to_numpy(dtype=float)[ii], 0.0)
            wait += np.where(live, g["num_waiting"].to_numpy(dtype=float)[ii], 0.0)
            frac = g["kv_blocks_used"].to_numpy(dtype=float) / \
                g["num_gpu_blocks"].to_numpy(dtype=float)
            kv += np.where(live, frac[ii], 0.0)
    return pd.DataFrame({"time_s": t, "num_running": run, "num_waiting": wait,
                         "kv_cache_usage": kv / max(n_rep, 1)})


def _counts_from_requests(outcomes: pd.DataFrame, t: np.ndarray) -> pd.DataFrame:
    a = outcomes["arrival_s"].to_numpy(dtype=float)
    s = outcomes["scheduled_s"].to_numpy(dtype=float)
    f = outcomes["last_token_s"].to_numpy(dtype=float)
    tt = t[:, None]
    if np.isfinite(s).all():
        run = ((s <= tt) & (tt < f)).sum(1)
        wait = ((a <= tt) & (tt < s)).sum(1)
    else:
        run = ((a <= tt) & (tt < f)).sum(1)
        wait = np.full(t.size, np.nan)
    return pd.DataFrame({"time_s": t, "num_running": run.astype(float),
                         "num_waiting": wait.astype(float),
                         "kv_cache_usage": np.full(t.size, np.nan)})


def plot_timeline(outcomes: pd.DataFrame, steps: pd.DataFrame, path: str | Path, *,
                  timeseries: pd.DataFrame | None = None) -> tuple[Path, pd.DataFrame]:
    """Running and waiting requests (and KV usage when recorded) over time, recorded against
    simulated.

    The recorded curve is the engine's own timeseries when the record has one, else counts
    from the request timestamps (running: scheduled..last token; waiting: arrival..scheduled;
    without scheduled times one "in flight" curve, arrival..last token, against the
    simulation's running + waiting). The simulated curve is :func:`sim_counts_at` on the same
    times (the record's sample times, continued on its tick while the simulation runs longer,
    or 400 points over the run).

    Parameters
    ----------
    outcomes : pandas.DataFrame
        The record's outcomes (seconds from the first arrival).
    steps : pandas.DataFrame
        The simulation's step table.
    path : str or Path
        Output PNG.
    timeseries : pandas.DataFrame, optional
        The record's own samples (:data:`~simulator.observe.record.TIMESERIES_COLUMNS`).

    Returns
    -------
    (Path, pandas.DataFrame)
        The PNG and the plotted samples (``time_s``, ``real_*``, ``sim_*`` columns).
    """
    sim_end = float(steps["end_time_s"].max()) if len(steps) else 0.0
    if timeseries is not None and len(timeseries):
        real = timeseries.reset_index(drop=True)
        t = real["time_s"].to_numpy(dtype=float)
        if len(t) > 1 and sim_end > t[-1]:
            # the simulation outlasts the record: continue its curve on the record's tick
            dt = float(np.median(np.diff(t)))
            more = t[-1] + dt * np.arange(1, int(np.ceil((sim_end - t[-1]) / dt)) + 1)
            t = np.concatenate([t, more])
            real = pd.concat([real, pd.DataFrame({"time_s": more})], ignore_index=True)
        label = "recorded (engine timeseries)"
    else:
        end = max(float(np.nanmax(outcomes["last_token_s"].to_numpy(dtype=float))), sim_end)
        t = np.linspace(0.0, end, 400)
        real = _counts_from_requests(outcomes, t)
        label = "recorded (from request timestamps)"
    sim = sim_counts_at(steps, t)
    in_flight = real["num_waiting"].isna().all()
    merged = pd.DataFrame({"time_s": t})
    for c in ("num_running", "num_waiting", "kv_cache_usage"):
        merged[f"real_{c}"] = real[c].to_numpy(dtype=float)
        merged[f"sim_{c}"] = sim[c].to_numpy(dtype=float)
    has_kv = np.isfinite(merged["real_kv_cache_usage"]).any()
    rows = [("num_running", "in flight (requests)" if in_flight else "running (requests)")]
    if not in_flight:
        rows.append(("num_waiting", "waiting (requests)"))
    if has_kv:
        rows.append(("kv_cache_usage", "KV blocks in use (fraction)"))
    with mpl_style.context("default"):
        fig = Figure(figsize=(9.0, 2.4 * len(rows) + 0.6), dpi=_DPI, layout="constrained")
        axes = np.atleast_1d(fig.subplots(len(rows), 1, sharex=True))
        for ax, (c, ylabel) in zip(axes, rows):
            r = merged[f"real_{c}"].to_numpy()
            s = merged[f"sim_{c}"].to_numpy()
            if in_flight and c == "num_running":
                s = s + merged["sim_num_waiting"].to_numpy()
            ax.plot(t, r, label=label, **_REAL)
            ax.plot(t, s, label="simulated", **_SIM)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small", loc="upper right")
        axes[-1].set_xlabel("time since the first arrival (s)")
        return _save(fig, Path(path)), merged
