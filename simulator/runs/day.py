"""A day by windows: a stated approximation of a day-long run, for a laptop
(``servesim run SCENARIO --day-windows K``).

A day at 16 req/s is 1.4M requests, minutes to tens of minutes of simulation on one core. The
windowed day simulates, in every hour ``h`` of the workload (bins ``[h x 3600, (h + 1) x
3600)`` of its clock), one window of ``window_s`` seconds centred in the hour,
``[w0, w0 + window_s)`` with ``w0 = h x 3600 + (3600 - window_s) / 2``, preceded by a lead-in
of ``lead_in_s`` seconds whose requests are simulated but not counted (they bring the queues,
batches and KV cache to the hour's state; the replicas start idle and empty at the lead-in's
start). Each window runs alone, on the fleet of that hour (``fleet_by_hour``, default the
scenario's ``cluster.num_replicas``; an autoscaled scenario starts each window from
``cluster.num_replicas``). The requests are the workload's own (the same ids, lengths and
arrival times as in the whole day), so each hour's load is exact and its latencies sampled.

Per hour (``summary["by_hour"]["rows"]``, the keys of :mod:`simulator.metrics.hourly`):

* ``num_arrivals`` and ``arrival_rate_rps``: the hour's whole workload (exact, not sampled);
  ``num_simulated``: the window's arrivals, of which ``num_completed``, ``num_rejected``,
  ``num_cancelled``, ``slo_attainment``, ``ttft_p50_s``, ``ttft_p99_s`` and ``tpot_mean_s``
  are measured (they stand for the whole hour: the approximation);
* ``num_output_tokens``: the window's completions' tokens x ``num_arrivals /
  num_simulated`` (an estimate);
* ``mean_replicas_held`` / ``mean_replicas_serving``: the window's means; ``gpu_hours``:
  the mean held x GPUs per replica x the hour (the last hour: until the day's last arrival),
  ``cost_usd`` its price.

An hour none of whose arrivals falls in its centred window (a sparse or partial hour) gets its
window at its first arrival instead (``by_hour["windowed"]["hours_placed_at_first_arrival"]``);
a workload spanning less than two hours is refused (simulate it whole).

The approximation is written into the summary (``by_hour["windowed"]``: window, lead-in,
placement, the share of the day's arrivals simulated) and into the report, never silently.
Its error against a whole-day simulation is measured in ``docs/results/day.md``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from simulator.base.gc_freeze import gc_frozen
from simulator.cluster.setup import build_setup
from simulator.metrics.fleet import fixed_fleet_spans
from simulator.metrics.hourly import HOUR_S, hourly_rows
from simulator.metrics.summary import json_safe
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import Scenario
from simulator.workload.loader import RequestStream

__all__ = ["PLACEMENT", "day_totals", "run_day_windows", "window_bounds", "window_row"]

#: Where a window sits in its hour (stated in every windowed summary).
PLACEMENT = "centred in the hour"


def window_bounds(hour: int, window_s: float, lead_in_s: float,
                  period_s: float = HOUR_S) -> tuple[float, float, float]:
    """``(lead-in start, window start, window end)`` of ``hour`` (s on the workload clock)."""
    w0 = hour * period_s + (period_s - window_s) / 2.0
    return w0 - lead_in_s, w0, w0 + window_s


def _check(window_s: float, lead_in_s: float, period_s: float) -> None:
    if not (math.isfinite(window_s) and 0 < window_s <= period_s):
        raise ValueError(f"--day-window-s: the window ({window_s:g} s) must be > 0 and at most "
                         f"the hour ({period_s:g} s)")
    if not (math.isfinite(lead_in_s) and lead_in_s >= 0):
        raise ValueError(f"--lead-in-s: {lead_in_s:g} s must be >= 0")


def run_day_windows(scenario: Scenario, base_dir: Path | None, specs: RequestStream, *,
                    window_s: float, lead_in_s: float = 300.0,
                    fleet_by_hour: Mapping[int, int] | None = None,
                    progress: Callable[[int, int], None] | None = None) -> dict:
    """Simulate one window per hour of ``specs`` and summarise the day (module docstring).

    Parameters
    ----------
    scenario : Scenario
        One pool (no ``pools``).
    base_dir : Path or None
    specs : RequestStream
        The whole day's workload (:func:`simulator.workload.load_workload` with ``lazy=True``).
    window_s, lead_in_s : float
        Seconds simulated and counted per hour, and seconds simulated before each window.
    fleet_by_hour : mapping of int to int, optional
        Replicas of each hour (missing hours: ``cluster.num_replicas``).
    progress : callable, optional
        ``progress(done, total)`` after each window.

    Returns
    -------
    dict
        The day's summary: ``by_hour`` (``period_s``, ``windowed``, ``rows``) and the day's
        totals (:func:`day_totals`).

    Raises
    ------
    ValueError
        On a window not in ``(0, 3600]`` s, a negative lead-in, or a scenario with pools.
    """
    _check(window_s, lead_in_s, HOUR_S)
    if scenario.pools:
        raise ValueError(f"scenario '{scenario.name}' declares pools: a windowed day runs one "
                         "pool (leave out --day-windows)")
    cols = specs.cols
    t = np.asarray(cols.arrival_s, dtype=np.float64)
    span_s = float(t.max() - t.min()) if len(t) else 0.0
    if span_s < 2 * HOUR_S:
        raise ValueError(f"--day-window-s: the workload's arrivals span {span_s:,.0f} s; a day "
                         "by windows samples hours of a workload of two hours or more "
                         "(simulate this one whole: leave --day-window-s out)")
    hours = np.floor(t / HOUR_S).astype(np.int64)
    first, last = int(hours.min()), int(hours.max())
    moved: list[int] = []
    with gc_frozen():
        setup = build_setup(scenario, base_dir)
    rows, simulated = [], 0
    todo = list(range(first, last + 1))
    for n_done, h in enumerate(todo):
        lead0, w0, w1 = window_bounds(h, window_s, lead_in_s)
        in_hour = t[hours == h]
        n_hour = len(in_hour)
        if n_hour and not np.any((in_hour >= w0) & (in_hour < w1)):
            # none of the hour's arrivals in its centred window (a sparse or partial hour):
            # the window starts at the hour's first arrival instead (listed in the summary)
            w0 = min(float(in_hour.min()), (h + 1) * HOUR_S - window_s)
            lead0, w1 = w0 - lead_in_s, w0 + window_s
            moved.append(h)
        n_rep = int((fleet_by_hour or {}).get(h, scenario.cluster.num_replicas))
        idx = np.flatnonzero((t >= lead0) & (t < w1))
        row = window_row(scenario, base_dir, specs, idx, h, (w0, w1), num_replicas=n_rep,
                         setup=setup)
        simulated += int(row["num_simulated"])
        # the last hour is held until its last arrival (a whole-day run: its last finish)
        held_s = HOUR_S if h < last else float(t.max()) - h * HOUR_S
        row.update(_whole_hour(row, n_hour, n_rep, scenario.gpus_per_replica,
                               setup.usd_per_gpu_hour, held_s))
        rows.append(row)
        if progress is not None:
            progress(n_done + 1, len(todo))
    windowed = {"window_s": float(window_s), "lead_in_s": float(lead_in_s),
                "placement": PLACEMENT, "num_windows": len(rows),
                "hours_placed_at_first_arrival": moved,
                "last_hour_held_s": float(t.max()) - last * HOUR_S,
                "simulated_share": simulated / len(t) if len(t) else 0.0}
    summary = {"by_hour": {"period_s": HOUR_S, "windowed": windowed, "rows": rows}}
    summary.update(day_totals(rows, scenario))
    return json_safe(summary)


def window_row(scenario: Scenario, base_dir, specs: RequestStream, idx: np.ndarray, hour: int,
               window: tuple[float, float], *, num_replicas: int | None = None,
               setup=None) -> dict:
    """Simulate the requests ``idx`` of ``specs`` (a lead-in and a window) alone, on
    ``num_replicas`` replicas (default the scenario's), and measure the window: the row of
    :func:`simulator.metrics.hourly.hourly_rows` over the arrivals in ``window`` only, with
    ``hour``, ``start_s`` and ``num_simulated`` (``setup``: the replicas' set-up when already
    built). The day plan sizes its static peak on such a row of the peak hour."""
    w0, w1 = window
    n_rep = scenario.cluster.num_replicas if num_replicas is None else num_replicas
    empty = {"hour": hour, "start_s": hour * HOUR_S, "num_simulated": 0, "num_completed": 0,
             "num_rejected": 0, "num_cancelled": 0, "slo_attainment": None,
             "ttft_p50_s": None, "ttft_p99_s": None, "tpot_mean_s": None,
             "num_output_tokens": 0, "mean_replicas_held": float(n_rep),
             "mean_replicas_serving": float(n_rep)}
    if idx.size == 0:
        return empty
    sub = RequestStream(specs.cols.take(idx), specs._ps)
    sc = scenario.model_copy(deep=True)
    sc.cluster.num_replicas = n_rep
    res = run_scenario(sc, base_dir, specs=sub, write=False, figures=False, setup=setup)
    req = res.requests
    arr = req["arrival_time_s"].to_numpy(dtype=float)
    counted = req.loc[(arr >= w0) & (arr < w1)]
    if not len(counted):
        return empty
    spans = res.sim.replica_spans or fixed_fleet_spans(n_rep)
    (row,) = hourly_rows(counted, spans, window=(w0, w1), slo=sc.slo.model_dump(),
                         gpus_per_replica=sc.gpus_per_replica,
                         usd_per_gpu_hour=res.setup.usd_per_gpu_hour, period_s=w1 - w0,
                         origin_s=w0)
    row.update(hour=hour, start_s=hour * HOUR_S, num_simulated=len(counted))
    return row


def _whole_hour(row: dict, n_hour: int, n_rep: int, gpus_per_replica: int,
                usd_per_gpu_hour: float, held_s: float = HOUR_S) -> dict:
    """The hour's exact load and its fleet's GPU-hours and cost over ``held_s`` seconds of it;
    tokens scaled to the hour."""
    held = row.get("mean_replicas_held")
    held = float(n_rep) if held is None else float(held)
    gpu_h = held * gpus_per_replica * held_s / 3600.0
    sim = int(row["num_simulated"])
    return {"duration_s": held_s, "num_arrivals": n_hour, "arrival_rate_rps": n_hour / HOUR_S,
            "num_output_tokens": (float(row["num_output_tokens"]) * n_hour / sim if sim
                                  else 0.0),
            "mean_replicas_held": held, "gpu_hours": gpu_h,
            "cost_usd": gpu_h * float(usd_per_gpu_hour)}


def day_totals(rows: list[dict], scenario: Scenario | None = None) -> dict:
    """The day from its hours: ``num_requests``, ``slo_attainment`` (the hours' attainments
    weighted by their arrivals: the day's share of requests meeting every SLO),
    ``worst_hour_attainment`` and ``worst_hour``, ``gpu_hours``, ``cost_usd``,
    ``num_output_tokens``, ``cost_per_1m_output_tokens_usd``, ``peak_replicas`` (the largest
    hourly mean held)."""
    n = sum(int(r["num_arrivals"]) for r in rows)
    w = [(r["slo_attainment"], r["num_arrivals"], r["hour"]) for r in rows
         if r.get("slo_attainment") is not None]
    weight = sum(x[1] for x in w)
    att = sum(a * k for a, k, _ in w) / weight if weight else None
    worst = min(w, default=None)
    gpu_h = sum(float(r["gpu_hours"]) for r in rows)
    cost = sum(float(r["cost_usd"]) for r in rows)
    tok = sum(float(r["num_output_tokens"] or 0.0) for r in rows)
    return {"num_requests": n, "slo_attainment": att,
            "worst_hour_attainment": None if worst is None else worst[0],
            "worst_hour": None if worst is None else worst[2],
            "gpu_hours": gpu_h, "cost_usd": cost, "num_output_tokens": tok,
            "cost_per_1m_output_tokens_usd": cost / tok * 1e6 if tok else None,
            "peak_replicas": max((float(r["mean_replicas_held"] or 0.0) for r in rows),
                                 default=0.0),
            "slo": None if scenario is None else scenario.slo.model_dump()}
