"""The day: a run's per-hour table (``summary["by_hour"]``, :mod:`simulator.metrics.hourly`)
and the figure of load, replicas and latency over the day, for the run report and the day
plan's report (several fleets on one figure)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.report.figures import default_style, figure, plain_text, save_png
from simulator.report.format import NA, adaptive, adaptive_ms, adaptive_pct, adaptive_usd
from simulator.report.render import render, write_report

__all__ = ["DAY_FIGURE", "DAY_HEADER", "day_rows", "day_section", "day_totals_rows", "plot_day",
           "windowed_note", "write_day_report"]

#: The file name of the day figure in a run folder or a day plan's folder.
DAY_FIGURE = "day.png"
#: The per-hour table's columns.
DAY_HEADER = ["hour", "arrivals/s", "arrivals", "completed", "rejected", "attainment",
              "TTFT p50 (ms)", "TTFT p99 (ms)", "TPOT mean (ms)", "output tokens",
              "replicas held", "serving", "GPU-hours", "cost"]


def _completed(r: Mapping[str, Any]) -> str:
    """Completed requests; in a windowed day, of the window's simulated arrivals."""
    if r.get("num_simulated") is None:
        return adaptive(r.get("num_completed"))
    return f"{adaptive(r.get('num_completed'))} of {adaptive(r['num_simulated'])} simulated"


def day_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The per-hour table's formatted rows (:data:`DAY_HEADER`)."""
    return [[f"{int(r['hour']):d}", adaptive(r.get("arrival_rate_rps")),
             adaptive(r.get("num_arrivals")), _completed(r),
             adaptive(r.get("num_rejected")), adaptive_pct(r.get("slo_attainment")),
             adaptive_ms(r.get("ttft_p50_s")), adaptive_ms(r.get("ttft_p99_s")),
             adaptive_ms(r.get("tpot_mean_s")), adaptive(r.get("num_output_tokens")),
             adaptive(r.get("mean_replicas_held")), adaptive(r.get("mean_replicas_serving")),
             adaptive(r.get("gpu_hours")), adaptive_usd(r.get("cost_usd"))] for r in rows]


def windowed_note(windowed: Mapping[str, Any] | None) -> str | None:
    """The sentence stating a windowed day's approximation (None for a whole run)."""
    if not windowed:
        return None
    return (f"Approximation: each hour is simulated as a {windowed['window_s']:g} s window "
            f"sampled from it ({windowed['placement']}), warmed up by the "
            f"{windowed['lead_in_s']:g} s before it (not counted), on that hour's fleet; "
            "its rates, attainment and latencies stand for the whole hour and its GPU-hours "
            "and cost are the fleet held for the whole hour (the last hour: until the day's "
            "last arrival). "
            f"{windowed['simulated_share']:.1%} of the day's arrivals were simulated. "
            f"{_moved(windowed)}{windowed.get('error_note') or ''}").strip()


def _moved(windowed: Mapping[str, Any]) -> str:
    """The hours whose window was placed at their first arrival, as a sentence ('' if none)."""
    moved = windowed.get("hours_placed_at_first_arrival") or []
    if not moved:
        return ""
    return (f"Hour(s) {', '.join(map(str, moved))} had no arrival in the centred window: "
            "their window starts at their first arrival. ")


def day_section(summary: Mapping[str, Any], *, figure_name: str | None = None
                ) -> dict[str, Any] | None:
    """The context of the run report's "The day, hour by hour" section (None without
    ``by_hour``): ``rows`` (:func:`day_rows`), ``period_s``, ``note`` (the windowed
    approximation, or None), ``figure`` (the figure file, or None) and ``worst``
    (the lowest hourly attainment and its hour)."""
    bh = summary.get("by_hour")
    if not bh:
        return None
    rows = bh.get("rows") or []
    att = [(r["slo_attainment"], r["hour"]) for r in rows if r.get("slo_attainment") is not None]
    worst = min(att, default=None)
    return {"rows": day_rows(rows), "period_s": adaptive(float(bh.get("period_s", 3600.0))),
            "note": windowed_note(bh.get("windowed")), "figure": figure_name,
            "worst": None if worst is None else
            {"attainment": adaptive_pct(worst[0]), "hour": worst[1]},
            "total_gpu_hours": adaptive(sum(float(r.get("gpu_hours") or 0.0) for r in rows)),
            "total_cost": adaptive_usd(sum(float(r.get("cost_usd") or 0.0) for r in rows)),
            "na": NA}


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rows])


def _stairs(h: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hour starts and values extended by the last hour's end (a post step shows it)."""
    if not h.size:
        return h, v
    return np.append(h, h[-1] + 1.0), np.append(v, v[-1])


def plot_day(fleets: Mapping[str, Sequence[Mapping[str, Any]]], path: str | Path, *,
             ttft_slo_s: float | None = None, title: str | None = None) -> Path:
    """Draw load, replicas and p99 TTFT over the day (one PNG, three panels sharing the
    hour axis).

    Parameters
    ----------
    fleets : mapping of str to rows
        Label -> ``by_hour`` rows of one run (the run report: one fleet; the day plan: one
        per fleet). The load panel shows the first fleet's arrivals per second.
    path : str or Path
    ttft_slo_s : float, optional
        Drawn as a dashed line on the latency panel.
    title : str, optional

    Returns
    -------
    pathlib.Path
    """
    with default_style():
        fig = figure((7.5, 7.0), layout="constrained")
        ax_load, ax_rep, ax_lat = fig.subplots(3, 1, sharex=True)
        first = next(iter(fleets.values()), [])
        hours = _series(first, "hour")
        ax_load.step(*_stairs(hours, _series(first, "arrival_rate_rps")), where="post",
                     color="0.25")
        ax_load.set_ylabel("arrivals / s")
        for i, (label, rows) in enumerate(fleets.items()):
            h = _series(rows, "hour")
            color = f"C{i}"
            ax_rep.step(*_stairs(h, _series(rows, "mean_replicas_held")), where="post",
                        color=color, label=plain_text(label))
            ax_lat.plot(h + 0.5, 1e3 * _series(rows, "ttft_p99_s"), marker="o", ms=3,
                        color=color, label=plain_text(label))
        ax_rep.set_ylabel("replicas held (mean)")
        ax_rep.set_ylim(bottom=0)
        ax_lat.set_ylabel("TTFT p99 (ms)")
        ax_lat.set_yscale("log")
        if ttft_slo_s is not None:
            ax_lat.axhline(1e3 * ttft_slo_s, color="0.4", ls="--", lw=1, label="TTFT SLO")
        ax_lat.set_xlabel("hour of the day")
        if len(fleets) > 1 or ttft_slo_s is not None:
            ax_lat.legend(fontsize=8)
        if len(fleets) > 1:
            ax_rep.legend(fontsize=8)
        for ax in (ax_load, ax_rep, ax_lat):
            ax.grid(True, alpha=0.3)
        if title:
            ax_load.set_title(plain_text(title))
        return save_png(fig, path)


def day_totals_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The day's totals (:func:`simulator.runs.day.day_totals`' keys) as table rows."""
    worst = summary.get("worst_hour")
    return [
        ("Requests (the whole day)", adaptive(summary.get("num_requests"))),
        ("SLO attainment (arrival-weighted over the hours)",
         adaptive_pct(summary.get("slo_attainment"))),
        ("Worst hour attainment", adaptive_pct(summary.get("worst_hour_attainment"))
         + ("" if worst is None else f" (hour {worst})")),
        ("GPU-hours", adaptive(summary.get("gpu_hours"))),
        ("Cost per day", adaptive_usd(summary.get("cost_usd"))),
        ("Output tokens", adaptive(summary.get("num_output_tokens"))),
        ("Cost per 1M output tokens", adaptive_usd(summary.get("cost_per_1m_output_tokens_usd"))),
        ("Peak replicas (hourly mean)", adaptive(summary.get("peak_replicas"))),
    ]


def write_day_report(out: Path, summary: Mapping[str, Any], *, title: str,
                     figures: bool = True) -> dict[str, Path]:
    """Write a windowed day's ``report.md`` / ``report.html`` (and ``day.png``) into ``out``.

    Returns
    -------
    dict
        ``{"md": path, "html": path}``.
    """
    name = None
    if figures:
        name = plot_day({"fleet": summary["by_hour"]["rows"]}, Path(out) / DAY_FIGURE,
                        ttft_slo_s=(summary.get("slo") or {}).get("ttft_s")).name
    text = render("day_windows.md.j2", title=title, totals=day_totals_rows(summary),
                  day=day_section(summary, figure_name=name))
    return write_report(out, "report", text, title=title)
