"""Summarise one run's records into a flat, JSON-safe dictionary of metrics.

Inputs are the engine's two tidy tables (one row per request, one row per engine step) and the
inter-token-latency samples; the output is what reports, golden files and the planner read.
Every definition follows the glossary in ``DESIGN.md`` §4.

Choices made here (each one also stated where it is implemented):

* **Measurement window.** Unless ``window`` is given it runs from the first arrival to the
  latest time the records show: the last finish time or the end of the last engine step,
  whichever is later (so a run that ends with unfinished work is measured to its end, not to
  its last completion).
* **Which requests count where.** Counts, SLO attainment and latency statistics cover the
  requests that *arrived* inside the window; throughput and goodput count completions that
  *finished* inside it. With the default window both sets are every request of the run.
* **Latency populations.** TTFT covers every request that got a first token (a request still
  running at the end has one); queue delay covers every request that was scheduled; TPOT and
  E2E cover completed requests only (they need a finish time). TPOT is undefined, and left
  out, for requests that emitted fewer than 2 tokens.
* **Percentiles** use the inverse-CDF definition (:func:`weighted_percentiles`), so every
  reported percentile is an observed value and weighted ITL samples give the same answer as
  the expanded sample would.
* **KV usage and batch size** are averaged over *busy* time: each step is weighted by its
  duration ``step_time_s``; idle gaps between steps are not counted.
* **ITL** samples come aggregated for the whole run, so the window does not filter them.

Summary keys (what :func:`summarize` returns):

* ``num_requests``, ``num_completed``, ``num_rejected``, ``num_cancelled``,
  ``num_unfinished`` (``waiting`` + ``running`` at the end): requests that arrived
  in the window; ``reject_reasons``: ``{reason: count}`` over those requests.
* ``ttft_s``, ``tpot_s``, ``itl_s``, ``e2e_latency_s``, ``queue_delay_s``: statistics
  dicts (:func:`~simulator.metrics.latency.latency_stats`, seconds). TTFT covers requests
  with a first token, queue delay requests that were scheduled, TPOT and E2E completed
  requests (TPOT only those with >= 2 emitted tokens); ITL the whole run's samples.
* ``request_throughput_rps``, ``output_token_throughput_tps``,
  ``total_token_throughput_tps``: completed requests, their emitted tokens, and their
  prompt + emitted tokens, finishing inside the window, per second of ``duration_s``.
* ``goodput_rps``: completed requests finishing inside the window that met every
  configured SLO, per second.
* ``slo_attainment``: fraction of the window's requests meeting every SLO (rejected,
  cancelled and unfinished requests count as misses; see
  :func:`~simulator.metrics.latency.slo_mask`);
  ``slo_attainment_target``; ``slo_met``: attainment >= target (``None`` without a
  target); ``slo``: the bounds used.
* ``num_preemptions``: sum of ``num_preemptions`` over the window's requests.
* ``mean_kv_cache_usage``, ``max_kv_cache_usage``: ``kv_blocks_used /
  num_gpu_blocks`` per step (fraction), the mean weighted by ``step_time_s`` over the
  steps starting in the window, i.e. averaged over *busy* time only (idle gaps,
  when nothing runs, are not counted); ``mean_batch_size``, ``mean_num_waiting``:
  the same busy-time weighting; ``num_steps``.
* ``window_start_s``, ``window_end_s``, ``duration_s`` (seconds).
* ``num_input_tokens``, ``num_output_tokens``: prompt and emitted tokens (every
  sequence of a request with ``n > 1``) of the
  completed requests finishing in the window; ``num_cached_prompt_tokens`` and
  ``prefix_cache_hit_rate`` (cached / prompt tokens) over the same requests.
* ``num_gpus``, ``usd_per_gpu_hour``, ``gpu_hours`` (= ``num_gpus x duration_s /
  3600``; an autoscaled fleet: the GPU-seconds held within the window / 3600, ``num_gpus``
  the most held at once), ``cost_usd`` (= ``gpu_hours x usd_per_gpu_hour``).
* ``cost_per_1m_output_tokens_usd``: ``cost_usd / num_output_tokens x 1e6``, i.e. the
  cost per 1M output tokens if *all* GPU time is charged to output tokens;
  ``cost_per_1m_input_tokens_usd``: likewise if all GPU time is charged to input
  (prompt) tokens; ``cost_per_1m_tokens_usd``: the cost per 1M tokens of input and
  output together. The three are alternative views of the same cost, not a split:
  they must not be added. ``None`` when the token count is zero.
* ``sim_wall_s``; ``sim_speedup`` (simulated ``duration_s`` / ``sim_wall_s``).
* ``by_slice``, ``by_tenant``: ``{name: {num_requests, num_completed, num_rejected,
  ttft_s, tpot_s, e2e_latency_s, slo_attainment, goodput_rps,
  output_token_throughput_tps}}`` with the same definitions per group; a group's
  rates count its requests that arrived *and* finished in the window, per second of
  the run's ``duration_s``. Groups are sorted by name.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.base.quantiles import weighted_percentiles
from simulator.metrics.columns import Labels, labels, nansum, numeric
from simulator.metrics.latency import (
    latency_stats,
    output_tokens,
    per_request_latencies,
    slo_mask,
)
from simulator.metrics.step_stats import divide_by_column

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

#: ``weighted_percentiles`` is :mod:`simulator.base.quantiles`'s, re-exported for the callers
#: that take it from here
__all__ = ["finite_float", "json_safe", "summarize", "weighted_percentiles"]

_UNFINISHED = ("waiting", "running")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def finite_float(x: Any) -> float | None:
    """``float(x)`` when it is a finite number, else ``None`` (None, NaN, inf, non-numbers)."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def json_safe(x: Any) -> Any:
    """Recursively make ``x`` JSON-safe: numpy scalars and arrays become Python values,
    NaN/inf become ``None``, paths become strings, mapping keys become strings."""
    if isinstance(x, Mapping):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_json_safe(v) for v in x.tolist()]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return finite_float(x)
    if isinstance(x, PurePath):
        return str(x)
    return x


_json_safe = json_safe


def _ratio(num: float, den: float) -> float | None:
    """``num / den``, or ``None`` when the denominator is zero or not finite."""
    if den is None or not math.isfinite(den) or den <= 0:
        return None
    return float(num) / float(den)


def _time_weighted(values: np.ndarray, durations: np.ndarray, *,
                   own: bool = False) -> float | None:
    """Mean of ``values`` weighted by ``durations`` (plain mean if all durations are 0).
    ``own``: ``values`` is the caller's to overwrite (a fresh array: the products are formed
    in it, no third column-sized array; the same products and sum)."""
    keep = ~np.isnan(values)
    if not keep.all():  # copies only when something is dropped or replaced (long tables)
        values, durations = values[keep], durations[keep]
        own = True
    if np.isnan(durations).any():
        durations = np.nan_to_num(durations, nan=0.0)
    if values.size == 0:
        return None
    total = durations.sum()
    if total > 0:
        prod = np.multiply(values, durations, out=values if own else None)
        return float(np.sum(prod) / total)
    return float(values.mean())


def _measurement_window(requests: pd.DataFrame, steps: pd.DataFrame,
                        window: tuple[float, float] | None) -> tuple[float, float]:
    """The window ``(start_s, end_s)``: given, or first arrival to the last recorded time."""
    if window is not None:
        start, end = float(window[0]), float(window[1])
        if not end >= start:
            raise ValueError(f"window end must be >= start, got {window}")
        return start, end

    def extreme(df: pd.DataFrame, col: str, fn) -> float | None:
        """``fn`` (min or max) of the column's finite values, None without any; one column
        at a time and no filtered copy when all are finite; a spooled step table a slice at
        a time (``column_slices``: the extreme of the slices' extremes, the same value; a
        whole 90-million-row column read, cast and masked cost 1.7 s of the ServeGen day's
        summary)."""
        if hasattr(df, "column_slices") and col in df.columns:
            parts = [fn(x) for x in (v[np.isfinite(v)] for _, _, v in df.column_slices(col))
                     if x.size]
            return float(fn(parts)) if parts else None
        x = numeric(df, col)
        ok = np.isfinite(x)
        if not ok.all():
            x = x[ok]
        return float(fn(x)) if x.size else None

    first_arrival = extreme(requests, "arrival_time_s", np.min)
    if first_arrival is not None:
        start = first_arrival
    else:
        first_step = extreme(steps, "start_time_s", np.min)
        start = first_step if first_step is not None else 0.0
    # the end: the largest finite arrival, finish or step end (or the start)
    ends = [start] + [e for e in (extreme(requests, "arrival_time_s", np.max),
                                  extreme(requests, "finish_time_s", np.max),
                                  extreme(steps, "end_time_s", np.max)) if e is not None]
    return start, max(ends)


def _group_summary(req: pd.DataFrame, lat: pd.DataFrame, met: np.ndarray,
                   finished_in_window: np.ndarray, duration_s: float) -> dict[str, Any]:
    """Per-group metrics (``by_slice`` / ``by_tenant`` entries)."""
    status = labels(req, "status")
    completed = status == "completed"
    n = len(req)
    out_tokens = output_tokens(req)
    return {
        "num_requests": n,
        "num_completed": int(completed.sum()),
        "num_rejected": int((status == "rejected").sum()),
        "num_cancelled": int((status == "cancelled").sum()),
        "num_unfinished": int(status.isin(_UNFINISHED).sum()),
        "ttft_s": latency_stats(lat["ttft_s"].to_numpy()),
        "tpot_s": latency_stats(lat["tpot_s"].to_numpy()),
        "e2e_latency_s": latency_stats(lat["e2e_latency_s"].to_numpy()),
        "slo_attainment": _ratio(int(met.sum()), n),
        "goodput_rps": _ratio(int((met & finished_in_window).sum()), duration_s),
        "output_token_throughput_tps": _ratio(
            float(out_tokens[completed & finished_in_window].sum()), duration_s
        ),
    }


def _by_group(requests: pd.DataFrame, lat: pd.DataFrame, met: np.ndarray,
              finished_in_window: np.ndarray, duration_s: float,
              col: str) -> dict[str, dict[str, Any]]:
    """Per-group summaries keyed by the group's name, sorted by name."""
    keys = labels(requests, col, "default")
    out: dict[str, dict[str, Any]] = {}
    for key in keys.counts():
        m = keys == key
        if m.all():  # one group (a long table's usual case): no copy of the rows
            out[key] = _group_summary(requests, lat, met, finished_in_window, duration_s)
            continue
        out[key] = _group_summary(
            requests.loc[m], lat.loc[m], met[m], finished_in_window[m], duration_s
        )
    return out


# --------------------------------------------------------------------------------------------
# summary
# --------------------------------------------------------------------------------------------
def summarize(requests: pd.DataFrame, steps: pd.DataFrame, itl_values_s=None, itl_weights=None,
              *, slo: Mapping[str, Any] | None = None, usd_per_gpu_hour: float = 0.0,
              num_gpus: int = 1, sim_wall_s: float | None = None,
              window: tuple[float, float] | None = None,
              itl_stats: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Summarise one run: request accounting, latencies, throughput, SLOs, KV use and cost.

    Parameters
    ----------
    requests : pandas.DataFrame
        One row per request that entered the run, with columns ``request_id``, ``replica_id``,
        ``tenant``, ``slice``, ``priority``, ``arrival_time_s``, ``num_prompt_tokens``,
        ``num_output_tokens``, ``num_emitted_tokens``, ``num_cached_prompt_tokens``,
        ``status`` (``completed``, ``rejected``, ``cancelled``, ``waiting``, ``running``),
        ``reject_reason`` (``''`` if none), ``first_scheduled_time_s``,
        ``first_token_time_s``, ``finish_time_s`` (seconds, NaN when not reached) and
        ``num_preemptions``.
    steps : pandas.DataFrame
        One row per engine iteration, with columns ``replica_id``, ``step_index``,
        ``start_time_s``, ``step_time_s``, ``end_time_s`` (seconds), ``batch_size``,
        ``num_prefill_tokens``, ``num_decode_tokens``, ``num_prefill_seqs``,
        ``num_decode_seqs``, ``num_waiting``, ``kv_blocks_used``, ``num_gpu_blocks``,
        ``num_preempted``.
    itl_values_s, itl_weights : array_like of float, array_like of int, shape (k,), optional
        Distinct inter-token gaps in seconds (whole run), and the multiplicity of each gap
        (``None``: one each).
    slo : mapping, optional
        ``ttft_s``, ``tpot_s``, ``e2e_s`` (seconds) and ``attainment_target`` (fraction in
        [0, 1]); any may be ``None`` or absent, meaning not checked / no target.
    usd_per_gpu_hour : float, default 0.0
        GPU price in US dollars per GPU-hour.
    num_gpus : int, default 1
        GPUs the run occupies (replicas x tensor-parallel degree).
    sim_wall_s : float, optional
        Wall-clock seconds the simulation took (reported as is).
    window : tuple of (float, float), optional
        Measurement window ``(start_s, end_s)`` in simulated seconds. Default: from the first
        arrival to the latest of the last finish time and the last step's end (the end of the
        run when work remains unfinished).
    itl_stats : mapping, optional
        The ITL statistics already computed (``latency_stats`` of the samples, e.g.
        :meth:`simulator.metrics.records.RunRecorder.itl_stats`, which reads a long run's
        samples from disk); used as is instead of ``itl_values_s`` / ``itl_weights``.

    Returns
    -------
    dict
        JSON-safe (Python scalars, ``None`` for undefined values, never NaN); its keys are
        listed under *Summary keys* in this module's docstring.

    Raises
    ------
    ValueError
        If ``window`` ends before it starts or ``num_gpus`` is negative.
    """
    if num_gpus < 0:
        raise ValueError(f"num_gpus must be >= 0, got {num_gpus}")
    slo = dict(slo or {})
    start_s, end_s = _measurement_window(requests, steps, window)
    duration_s = end_s - start_s
    a = _Arrived.of(requests, slo, start_s, end_s)
    f = _Finished.of(requests, a, slo, start_s, end_s, windowed=window is not None)
    summary: dict[str, Any] = {
        **_request_counts(a),
        **_latencies(a.lat, itl_values_s, itl_weights, itl_stats),
        **f.throughput(duration_s),
        **_slo_attainment(a, slo),
        "num_preemptions": int(nansum(numeric(a.req, "num_preemptions", 0.0))),
        **_busy_time_means(steps, start_s, end_s),
        "window_start_s": start_s,
        "window_end_s": end_s,
        "duration_s": duration_s,
        **f.tokens(),
        **_cost(num_gpus, usd_per_gpu_hour, duration_s, f.n_in, f.n_out),
        "sim_wall_s": sim_wall_s,
        "sim_speedup": (_ratio(duration_s, sim_wall_s) if sim_wall_s is not None else None),
        "by_slice": _by_group(a.req, a.lat, a.met, a.finished_in_window, duration_s, "slice"),
        "by_tenant": _by_group(a.req, a.lat, a.met, a.finished_in_window, duration_s, "tenant"),
    }
    return _json_safe(summary)


# --------------------------------------------------------------------------------------------
# the parts of the summary
# --------------------------------------------------------------------------------------------
@dataclass
class _Arrived:
    """The requests that arrived in the window (``req``: the table itself, not a copy, when
    all did), their latencies, status labels, SLO mask and which of them completed and
    finished inside the window."""

    req: pd.DataFrame
    lat: pd.DataFrame
    status: Labels
    completed: np.ndarray
    met: np.ndarray
    finished_in_window: np.ndarray

    @classmethod
    def of(cls, requests: pd.DataFrame, slo: dict, start_s: float, end_s: float) -> _Arrived:
        arrival = numeric(requests, "arrival_time_s")
        in_window = (arrival >= start_s) & (arrival <= end_s)
        # no copy of a long table when every request arrived in the window (the default)
        req = requests.loc[in_window] if len(requests) and not in_window.all() else requests
        lat = per_request_latencies(req)
        status = labels(req, "status")
        completed = status == "completed"
        met = slo_mask(req, slo, lat)
        finish = numeric(req, "finish_time_s")
        return cls(req, lat, status, completed, met,
                   completed & (finish >= start_s) & (finish <= end_s))


@dataclass
class _Finished:
    """The completions finishing in the window, whenever they arrived (what throughput
    counts): their mask over ``requests`` (``done``), which met every SLO, and their prompt,
    output and cached prompt tokens."""

    done: np.ndarray
    met: np.ndarray
    n_in: float
    n_out: float
    n_cached: float

    @classmethod
    def of(cls, requests: pd.DataFrame, a: _Arrived, slo: dict, start_s: float, end_s: float,
           *, windowed: bool) -> _Finished:
        all_status = a.status if a.req is requests else labels(requests, "status")
        all_finish = numeric(requests, "finish_time_s")
        done = (all_status == "completed") & (all_finish >= start_s) & (all_finish <= end_s)
        if windowed and len(requests):
            met = slo_mask(requests, slo, per_request_latencies(requests))
        else:
            met = a.met if len(requests) else np.zeros(0, dtype=bool)
        # the completions' columns, row-selected (the same values in the same order as the
        # rows of ``requests.loc[done]``, without copying the table)
        n_in = nansum(numeric(requests, "num_prompt_tokens", 0.0)[done])
        n_out = nansum(output_tokens(requests)[done])
        n_cached = nansum(numeric(requests, "num_cached_prompt_tokens", 0.0)[done])
        return cls(done, met, n_in, n_out, n_cached)

    def throughput(self, duration_s: float) -> dict[str, Any]:
        """Completions, their output and all their tokens, and those meeting every SLO, per
        second of the window."""
        return {
            "request_throughput_rps": _ratio(int(self.done.sum()), duration_s),
            "output_token_throughput_tps": _ratio(self.n_out, duration_s),
            "total_token_throughput_tps": _ratio(self.n_in + self.n_out, duration_s),
            "goodput_rps": _ratio(int((self.met & self.done).sum()), duration_s),
        }

    def tokens(self) -> dict[str, Any]:
        """The completions' prompt, output and cached prompt tokens, and the cache hit rate."""
        return {
            "num_input_tokens": int(self.n_in),
            "num_output_tokens": int(self.n_out),
            "num_cached_prompt_tokens": int(self.n_cached),
            "prefix_cache_hit_rate": _ratio(self.n_cached, self.n_in),
        }


def _request_counts(a: _Arrived) -> dict[str, Any]:
    """How the window's requests ended, and why those rejected were."""
    reasons = labels(a.req, "reject_reason")
    return {
        "num_requests": len(a.req),
        "num_completed": int(a.completed.sum()),
        "num_rejected": int((a.status == "rejected").sum()),
        "num_cancelled": int((a.status == "cancelled").sum()),
        "num_unfinished": int(a.status.isin(_UNFINISHED).sum()),
        "reject_reasons": reasons.counts(reasons != ""),
    }


def _latencies(lat: pd.DataFrame, itl_values_s, itl_weights,
               itl_stats: Mapping[str, Any] | None) -> dict[str, Any]:
    """The statistics of each latency (seconds); ITL from its given statistics or samples."""
    return {
        "ttft_s": latency_stats(lat["ttft_s"].to_numpy()),
        "tpot_s": latency_stats(lat["tpot_s"].to_numpy()),
        "itl_s": dict(itl_stats) if itl_stats is not None else latency_stats(
            np.zeros(0) if itl_values_s is None else itl_values_s,
            None if itl_values_s is None else itl_weights,
        ),
        "e2e_latency_s": latency_stats(lat["e2e_latency_s"].to_numpy()),
        "queue_delay_s": latency_stats(lat["queue_delay_s"].to_numpy()),
    }


def _slo_attainment(a: _Arrived, slo: dict) -> dict[str, Any]:
    """The SLO bounds used, the share of the window's requests meeting them all, the target
    and whether it was met (None without a target)."""
    target = slo.get("attainment_target")
    attainment = _ratio(int(a.met.sum()), len(a.req))
    return {
        "slo": {k: slo.get(k) for k in ("ttft_s", "tpot_s", "e2e_s")},
        "slo_attainment": attainment,
        "slo_attainment_target": target,
        "slo_met": (None if target is None or attainment is None
                    else bool(attainment >= float(target))),
    }


def _busy_time_means(steps: pd.DataFrame, start_s: float, end_s: float) -> dict[str, Any]:
    """KV usage, batch size and queue length of the steps starting in the window, averaged
    over busy time (each step weighted by its ``step_time_s``)."""
    st_start = numeric(steps, "start_time_s")
    st = steps.loc[(st_start >= start_s) & (st_start <= end_s)] if len(steps) else steps
    del st_start  # memory: one column of a long table at a time where possible
    usage = numeric(st, "kv_blocks_used", copy=True)
    divide_by_column(usage, st, "num_gpu_blocks")
    usage[~np.isfinite(usage)] = np.nan
    dt = numeric(st, "step_time_s", 0.0)  # memory: read after the division's column went
    max_usage = float(np.nanmax(usage)) if np.any(~np.isnan(usage)) else None
    # memory: each mean forms its products in its values' own array (two columns at a time)
    mean_usage = _time_weighted(usage, dt, own=True)
    del usage  # memory: before the next columns are read
    return {
        "mean_kv_cache_usage": mean_usage,
        "max_kv_cache_usage": max_usage,
        "mean_batch_size": _time_weighted(numeric(st, "batch_size", copy=True), dt, own=True),
        "mean_num_waiting": _time_weighted(numeric(st, "num_waiting", copy=True), dt,
                                           own=True),
        "num_steps": len(st),
    }


def _cost(num_gpus: int, usd_per_gpu_hour: float, duration_s: float, n_in: float,
          n_out: float) -> dict[str, Any]:
    """GPU-hours and their price, in all and per 1M input, output and all tokens."""
    gpu_hours = num_gpus * duration_s / 3600.0
    c = cost_fields(num_gpus, gpu_hours, gpu_hours * float(usd_per_gpu_hour), n_in, n_out)
    return {"num_gpus": c.pop("num_gpus"), "usd_per_gpu_hour": float(usd_per_gpu_hour), **c}


def cost_fields(num_gpus: int, gpu_hours: float, cost_usd: float, n_in: float,
                n_out: float) -> dict[str, Any]:
    """The summary's cost keys: ``num_gpus``, ``gpu_hours``, ``cost_usd`` and the cost per 1M
    output, input and all tokens (``None`` without tokens)."""
    return {
        "num_gpus": int(num_gpus),
        "gpu_hours": gpu_hours,
        "cost_usd": cost_usd,
        "cost_per_1m_output_tokens_usd": _ratio(cost_usd * 1e6, n_out),
        "cost_per_1m_input_tokens_usd": _ratio(cost_usd * 1e6, n_in),
        "cost_per_1m_tokens_usd": _ratio(cost_usd * 1e6, n_in + n_out),
    }
