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

size: pending its owner's split (issue 14 part 4; owner: wave2-scale): 665 lines, summarize() 199 lines.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.base.quantiles import as_weights, kept_samples, weighted_percentiles

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = [
    "STAT_KEYS",
    "latency_stats",
    "per_request_latencies",
    "slo_mask",
    "summarize",
    "weighted_percentiles",
]

#: Keys of every statistics dictionary returned by :func:`latency_stats`.
STAT_KEYS: tuple[str, ...] = ("mean", "p50", "p90", "p99", "max", "count")

_PERCENTILES = (50.0, 90.0, 99.0)

_UNFINISHED = ("waiting", "running")


# --------------------------------------------------------------------------------------------
# percentiles and statistics
# --------------------------------------------------------------------------------------------
def latency_stats(values, weights=None) -> dict[str, float | int | None]:
    """Mean, percentiles, maximum and count of a sample of latencies.

    Parameters
    ----------
    values : array_like of float, shape (n,)
        Latencies in seconds. NaN values are ignored.
    weights : array_like of float, shape (n,), optional
        Multiplicity of each value (e.g. the engine's aggregated ITL gaps). ``None`` means one.

    Returns
    -------
    dict
        ``{"mean", "p50", "p90", "p99", "max"}`` in seconds (Python floats) and ``"count"``
        (the number of samples, the sum of the weights). Percentiles follow
        :func:`weighted_percentiles`. With no samples every value is ``None`` except
        ``count``, which is 0.
    """
    v = np.asarray(values, dtype=float).ravel()
    w = np.ones_like(v) if weights is None else as_weights(weights)
    if w.shape != v.shape:
        raise ValueError(f"values and weights differ in shape: {v.shape} vs {w.shape}")
    v, w = kept_samples(v, w)
    if v.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None, "count": 0}
    total = float(w.sum())
    mean = float(np.dot(v, w.astype(float, copy=False)) / total)  # float weights: BLAS dot
    p50, p90, p99 = weighted_percentiles(v, w, _PERCENTILES)
    count: float | int = int(total) if float(total).is_integer() else total
    return {
        "mean": mean,
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(v.max()),
        "count": count,
    }


# --------------------------------------------------------------------------------------------
# per-request quantities
# --------------------------------------------------------------------------------------------
def _num(df: pd.DataFrame, col: str, default: float = np.nan, *,
         copy: bool = False) -> np.ndarray:
    """Column ``col`` as a float array (``default`` everywhere when the column is missing);
    ``copy``: never a view of the table's own data (the caller may write into it)."""
    import pandas as pd
    if col in df.columns:
        if hasattr(df, "float_column"):  # a StepTable: numeric, cast without a whole copy
            return df.float_column(col, copy=copy)
        return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, copy=copy)
    return np.full(len(df), default, dtype=float)


class _Labels:
    """A label column (status, slice, tenant, reject reason) as integer codes into its
    distinct names: what ``df[col].fillna(default).astype(str)`` says, row by row, without
    one Python ``str`` per row (a million-row request table would make a million of them
    for every comparison). Missing column or null cell: ``default``.

    Attributes
    ----------
    codes : ndarray of intp, shape (n,)
        Index into ``names`` per row.
    names : list of str
        Distinct names (first occurrence order; equal strings merged).
    """

    def __init__(self, df: pd.DataFrame, col: str, default: str = ""):
        import pandas as pd

        n = len(df)
        if col not in df.columns:
            self.codes = np.zeros(n, dtype=np.intp)
            self.names = [default]
            return
        codes, uniques = pd.factorize(df[col], use_na_sentinel=True)
        index: dict[str, int] = {}
        remap = [index.setdefault(str(u), len(index)) for u in uniques]
        remap.append(index.setdefault(default, len(index)))  # code -1 (null): the default
        self.codes = np.asarray(remap, dtype=np.intp)[codes]
        self.names = list(index)

    def __eq__(self, name: object) -> np.ndarray:  # type: ignore[override]
        """Boolean mask of the rows labelled ``name``."""
        try:
            return self.codes == self.names.index(name)
        except ValueError:
            return np.zeros(self.codes.shape, dtype=bool)

    def __ne__(self, name: object) -> np.ndarray:  # type: ignore[override]
        return ~(self == name)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, names) -> np.ndarray:
        """Boolean mask of the rows labelled with any of ``names``."""
        want = [i for i, k in enumerate(self.names) if k in names]
        return np.isin(self.codes, want)

    def counts(self, mask: np.ndarray | None = None) -> dict[str, int]:
        """``{name: rows}`` over the rows of ``mask`` (all rows by default), names that
        occur only, sorted by name."""
        codes = self.codes if mask is None else self.codes[mask]
        c = np.bincount(codes, minlength=len(self.names))
        return {k: int(c[i]) for i, k in sorted(enumerate(self.names), key=lambda e: e[1])
                if c[i]}


def _str(df: pd.DataFrame, col: str, default: str = "") -> _Labels:
    """Column ``col`` as :class:`_Labels` (``default`` when missing or null)."""
    return _Labels(df, col, default)


def output_tokens(requests: pd.DataFrame) -> np.ndarray:
    """Output tokens per request over all its sequences: ``num_emitted_tokens`` (per
    sequence) x ``n`` (sequences; 1 when the table has no ``n`` column)."""
    return _num(requests, "num_emitted_tokens", 0.0) * _num(requests, "n", 1.0)


def per_request_latencies(requests: pd.DataFrame) -> pd.DataFrame:
    """Per-request latencies by the glossary definitions.

    Parameters
    ----------
    requests : pandas.DataFrame
        The engine's request table (see :func:`summarize`).

    Returns
    -------
    pandas.DataFrame
        Same index as ``requests`` with float columns, in seconds, NaN where undefined:

        * ``ttft_s`` = first token time - arrival time;
        * ``tpot_s`` = (finish time - first token time) / (emitted tokens - 1), only for
          completed requests with at least 2 emitted tokens;
        * ``e2e_latency_s`` = finish time - arrival time, only for completed requests;
        * ``queue_delay_s`` = first scheduled time - arrival time.
    """
    import pandas as pd
    arrival = _num(requests, "arrival_time_s")
    first_sched = _num(requests, "first_scheduled_time_s")
    first_tok = _num(requests, "first_token_time_s")
    finish = _num(requests, "finish_time_s")
    emitted = _num(requests, "num_emitted_tokens", 0.0)
    completed = _str(requests, "status") == "completed"
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(
            completed & (emitted >= 2), (finish - first_tok) / (emitted - 1.0), np.nan
        )
    e2e = np.where(completed, finish - arrival, np.nan)
    return pd.DataFrame(
        {
            "ttft_s": first_tok - arrival,
            "tpot_s": tpot,
            "e2e_latency_s": e2e,
            "queue_delay_s": first_sched - arrival,
        },
        index=requests.index,
    )


def slo_mask(requests: pd.DataFrame, slo: Mapping[str, Any] | None,
             latencies: pd.DataFrame | None = None) -> np.ndarray:
    """Which requests met every configured SLO.

    A request meets the SLOs when it completed and each configured bound holds (``<=``):
    ``ttft_s`` on TTFT, ``tpot_s`` on TPOT and ``e2e_s`` on E2E latency. A bound that is
    ``None`` (or absent) is not checked. The TPOT check passes when TPOT is undefined (fewer
    than 2 emitted tokens), as vLLM's benchmark does. Rejected, cancelled and unfinished
    requests never meet the SLOs.

    Parameters
    ----------
    requests : pandas.DataFrame
        The engine's request table.
    slo : mapping or None
        Bounds in seconds under keys ``ttft_s``, ``tpot_s``, ``e2e_s``; other keys ignored.
    latencies : pandas.DataFrame, optional
        The result of :func:`per_request_latencies` for ``requests`` (computed if omitted).

    Returns
    -------
    ndarray of bool, shape (len(requests),)
    """
    lat = per_request_latencies(requests) if latencies is None else latencies
    ok = _str(requests, "status") == "completed"
    slo = slo or {}
    ttft_b, tpot_b, e2e_b = slo.get("ttft_s"), slo.get("tpot_s"), slo.get("e2e_s")
    if ttft_b is not None:
        ok &= lat["ttft_s"].to_numpy() <= float(ttft_b)
    if tpot_b is not None:
        tpot = lat["tpot_s"].to_numpy()
        ok &= np.isnan(tpot) | (tpot <= float(tpot_b))
    if e2e_b is not None:
        ok &= lat["e2e_latency_s"].to_numpy() <= float(e2e_b)
    return np.asarray(ok, dtype=bool)


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


def _nansum(x: np.ndarray) -> float:
    """Sum ignoring NaN, as a Python float."""
    return float(np.nansum(x))


def _time_weighted(values: np.ndarray, durations: np.ndarray) -> float | None:
    """Mean of ``values`` weighted by ``durations`` (plain mean if all durations are 0)."""
    keep = ~np.isnan(values)
    if not keep.all():  # copies only when something is dropped or replaced (long tables)
        values, durations = values[keep], durations[keep]
    if np.isnan(durations).any():
        durations = np.nan_to_num(durations, nan=0.0)
    if values.size == 0:
        return None
    total = durations.sum()
    if total > 0:
        return float(np.dot(values, durations) / total)
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
        at a time and no filtered copy when all are finite (a long step table)."""
        x = _num(df, col)
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
    status = _str(req, "status")
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
    keys = _str(requests, col, "default")
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
def summarize(
    requests: pd.DataFrame,
    steps: pd.DataFrame,
    itl_values_s=None,
    itl_weights=None,
    *,
    slo: Mapping[str, Any] | None = None,
    usd_per_gpu_hour: float = 0.0,
    num_gpus: int = 1,
    sim_wall_s: float | None = None,
    window: tuple[float, float] | None = None,
    itl_stats: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
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
    itl_values_s : array_like of float, shape (k,), optional
        Distinct inter-token gaps in seconds (whole run).
    itl_weights : array_like of int, shape (k,), optional
        Multiplicity of each gap (``None``: one each).
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
        The ITL statistics already computed (:func:`latency_stats` of the samples, e.g.
        :meth:`simulator.metrics.records.RunRecorder.itl_stats`, which reads a long run's
        samples from disk); used as is instead of ``itl_values_s`` / ``itl_weights``.

    Returns
    -------
    dict
        JSON-safe (Python scalars, ``None`` for undefined values, never NaN). Keys:

        * ``num_requests``, ``num_completed``, ``num_rejected``, ``num_cancelled``,
          ``num_unfinished`` (``waiting`` + ``running`` at the end): requests that arrived
          in the window; ``reject_reasons``: ``{reason: count}`` over those requests.
        * ``ttft_s``, ``tpot_s``, ``itl_s``, ``e2e_latency_s``, ``queue_delay_s``: statistics
          dicts (:func:`latency_stats`, seconds). TTFT covers requests with a first token,
          queue delay requests that were scheduled, TPOT and E2E completed requests (TPOT
          only those with >= 2 emitted tokens); ITL the whole run's samples.
        * ``request_throughput_rps``, ``output_token_throughput_tps``,
          ``total_token_throughput_tps``: completed requests, their emitted tokens, and their
          prompt + emitted tokens, finishing inside the window, per second of ``duration_s``.
        * ``goodput_rps``: completed requests finishing inside the window that met every
          configured SLO, per second.
        * ``slo_attainment``: fraction of the window's requests meeting every SLO (rejected,
          cancelled and unfinished requests count as misses; see :func:`slo_mask`);
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
          3600``), ``cost_usd`` (= ``gpu_hours x usd_per_gpu_hour``).
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

    # ---- requests: those that arrived in the window ------------------------------------
    arrival = _num(requests, "arrival_time_s")
    in_window = (arrival >= start_s) & (arrival <= end_s)
    # no copy of a long table when every request arrived in the window (the default)
    req = requests.loc[in_window] if len(requests) and not in_window.all() else requests
    lat = per_request_latencies(req)
    status = _str(req, "status")
    completed = status == "completed"
    met = slo_mask(req, slo, lat)
    finish = _num(req, "finish_time_s")
    finished_in_window = completed & (finish >= start_s) & (finish <= end_s)
    # Completions finishing in the window that arrived before it are still throughput.
    all_status = status if req is requests else _str(requests, "status")
    all_finish = _num(requests, "finish_time_s")
    all_done = (all_status == "completed") & (all_finish >= start_s) & (all_finish <= end_s)
    if window is not None and len(requests):
        all_lat = per_request_latencies(requests)
        all_met = slo_mask(requests, slo, all_lat)
    else:
        all_met = met if len(requests) else np.zeros(0, dtype=bool)

    reasons = _str(req, "reject_reason")
    reject_reasons = reasons.counts(reasons != "")
    del reasons

    # the completions' columns, row-selected (the same values in the same order as the
    # rows of ``requests.loc[all_done]``, without copying the table)
    n_in = _nansum(_num(requests, "num_prompt_tokens", 0.0)[all_done])
    n_out = _nansum(output_tokens(requests)[all_done])
    n_cached = _nansum(_num(requests, "num_cached_prompt_tokens", 0.0)[all_done])

    # ---- steps starting in the window ----------------------------------------------------
    st_start = _num(steps, "start_time_s")
    st = steps.loc[(st_start >= start_s) & (st_start <= end_s)] if len(steps) else steps
    del st_start  # memory: one column of a long table at a time where possible
    usage = _num(st, "kv_blocks_used", copy=True)
    _divide_by_column(usage, st, "num_gpu_blocks")
    usage[~np.isfinite(usage)] = np.nan
    dt = _num(st, "step_time_s", 0.0)  # memory: read after the division's column went
    mean_usage = _time_weighted(usage, dt)
    max_usage = float(np.nanmax(usage)) if np.any(~np.isnan(usage)) else None
    del usage  # memory: before the next columns are read

    # ---- cost ----------------------------------------------------------------------------
    gpu_hours = num_gpus * duration_s / 3600.0
    cost_usd = gpu_hours * float(usd_per_gpu_hour)

    target = slo.get("attainment_target")
    attainment = _ratio(int(met.sum()), len(req))
    summary: dict[str, Any] = {
        "num_requests": len(req),
        "num_completed": int(completed.sum()),
        "num_rejected": int((status == "rejected").sum()),
        "num_cancelled": int((status == "cancelled").sum()),
        "num_unfinished": int(status.isin(_UNFINISHED).sum()),
        "reject_reasons": reject_reasons,
        "ttft_s": latency_stats(lat["ttft_s"].to_numpy()),
        "tpot_s": latency_stats(lat["tpot_s"].to_numpy()),
        "itl_s": dict(itl_stats) if itl_stats is not None else latency_stats(
            np.zeros(0) if itl_values_s is None else itl_values_s,
            None if itl_values_s is None else itl_weights,
        ),
        "e2e_latency_s": latency_stats(lat["e2e_latency_s"].to_numpy()),
        "queue_delay_s": latency_stats(lat["queue_delay_s"].to_numpy()),
        "request_throughput_rps": _ratio(int(all_done.sum()), duration_s),
        "output_token_throughput_tps": _ratio(n_out, duration_s),
        "total_token_throughput_tps": _ratio(n_in + n_out, duration_s),
        "goodput_rps": _ratio(int((all_met & all_done).sum()), duration_s),
        "slo": {k: slo.get(k) for k in ("ttft_s", "tpot_s", "e2e_s")},
        "slo_attainment": attainment,
        "slo_attainment_target": target,
        "slo_met": (None if target is None or attainment is None
                    else bool(attainment >= float(target))),
        "num_preemptions": int(_nansum(_num(req, "num_preemptions", 0.0))),
        "mean_kv_cache_usage": mean_usage,
        "max_kv_cache_usage": max_usage,
        "mean_batch_size": _time_weighted(_num(st, "batch_size"), dt),
        "mean_num_waiting": _time_weighted(_num(st, "num_waiting"), dt),
        "num_steps": len(st),
        "window_start_s": start_s,
        "window_end_s": end_s,
        "duration_s": duration_s,
        "num_input_tokens": int(n_in),
        "num_output_tokens": int(n_out),
        "num_cached_prompt_tokens": int(n_cached),
        "prefix_cache_hit_rate": _ratio(n_cached, n_in),
        "num_gpus": int(num_gpus),
        "usd_per_gpu_hour": float(usd_per_gpu_hour),
        "gpu_hours": gpu_hours,
        "cost_usd": cost_usd,
        "cost_per_1m_output_tokens_usd": _ratio(cost_usd * 1e6, n_out),
        "cost_per_1m_input_tokens_usd": _ratio(cost_usd * 1e6, n_in),
        "cost_per_1m_tokens_usd": _ratio(cost_usd * 1e6, n_in + n_out),
        "sim_wall_s": sim_wall_s,
        "sim_speedup": (_ratio(duration_s, sim_wall_s) if sim_wall_s is not None else None),
        "by_slice": _by_group(req, lat, met, finished_in_window, duration_s, "slice"),
        "by_tenant": _by_group(req, lat, met, finished_in_window, duration_s, "tenant"),
    }
    return _json_safe(summary)


def _divide_by_column(x: np.ndarray, steps: pd.DataFrame, col: str) -> None:
    """``x /= steps[col]`` in place (0/0 and x/0 give NaN and inf, silently). An int64
    column is divided as stored (each value cast exactly, no float copy), a slice at a time
    from a spooled step table (:meth:`~simulator.metrics.step_table.StepTable.
    column_slices`); a missing or non-numeric column divides by NaN."""
    if hasattr(steps, "column_slices") and col in steps.columns:
        parts = steps.column_slices(col)
    else:
        c = steps[col] if col in steps.columns else None
        if c is None or not isinstance(c.dtype, np.dtype) or c.dtype.kind not in "iuf":
            c = _num(steps, col)  # missing or not numeric: NaN where not
        else:
            c = c.to_numpy()
        parts = [(0, len(x), c)]
    with np.errstate(invalid="ignore", divide="ignore"):
        for a, b, d in parts:
            np.divide(x[a:b], d, out=x[a:b])


def _num_distinct(col: pd.Series) -> int:
    """``col.nunique()``; for small non-negative integers (replica ids) by counting, which
    needs no hash table over a long step table."""
    x = col.to_numpy()
    if x.dtype.kind in "iu" and x.size and x.min() >= 0 and x.max() < 1 << 24:
        return int(np.count_nonzero(np.bincount(x)))
    return int(col.nunique())


def _step_bytes_per_token(steps: pd.DataFrame,
                          kv_bytes_per_token: float | Mapping[int, float]):
    """One KV bytes-per-token figure for every step (a float), or one per step (an array, by
    the step's ``replica_id``) when the replicas' figures differ (a degrade fallback set of
    another model)."""
    if not isinstance(kv_bytes_per_token, Mapping):
        return float(kv_bytes_per_token)
    vals = set(kv_bytes_per_token.values())
    if len(vals) == 1:
        return float(vals.pop())
    lut = np.zeros(max(kv_bytes_per_token) + 1, dtype=float)
    for rid, b in kv_bytes_per_token.items():
        lut[rid] = b
    return lut[_num(steps, "replica_id").astype(np.int64)]


def kv_and_batching_stats(steps: pd.DataFrame, block_size: int,
                          kv_bytes_per_token: float | Mapping[int, float]) -> dict[str, Any]:
    """KV waste and batching figures from the steps frame (time-weighted over busy time).

    Parameters
    ----------
    steps : pandas.DataFrame
        The engine's step table (needs ``kv_blocks_used``, ``kv_tokens_used``,
        ``num_padding_seqs``, ``batch_size``, ``step_time_s``).
    block_size : int
        Tokens per KV block.
    kv_bytes_per_token : float or mapping of int to float
        KV bytes of one token on one GPU of a replica; ``{replica_id: bytes}`` when replicas
        differ (a degrade fallback set of another model): each step is charged its replica's.

    Returns
    -------
    dict
        ``max_concurrency`` (largest batch), ``padding_waste`` (share of slot-steps doing no
        useful work: sum of padding slots / sum of batch slots), ``kv_reserved_bytes_mean``,
        ``kv_used_bytes_mean``, ``kv_wasted_bytes_mean`` (per GPU: the mean over every replica's
        steps, each weighted by its duration, i.e. over the replicas' pooled busy time),
        ``mean_kv_fragmentation`` (time-weighted share of
        reserved KV bytes holding no token: 1 - tokens / (blocks x block_size)).
    """
    if steps is None or len(steps) == 0:
        return {"max_concurrency": 0, "padding_waste": None, "kv_reserved_bytes_mean": None,
                "kv_used_bytes_mean": None, "kv_wasted_bytes_mean": None,
                "mean_kv_fragmentation": None}
    # Memory: at most three step-length arrays and one temporary at a time (a 10^7-step
    # table is 80 MB a column); the arithmetic is that of the whole-frame expressions.
    # Each product below is formed in a buffer that is not needed afterwards, in the order
    # that keeps three columns alive at most (float casts of int columns are made a slice
    # at a time on a spooled table: ``_num``); every sum is over the same array as before.
    n_rep = max(1, _num_distinct(steps["replica_id"]))
    w = _num(steps, "step_time_s")
    wsum = w.sum() or 1.0
    reserved = _num(steps, "kv_blocks_used", copy=True)
    reserved *= block_size
    bpt = _step_bytes_per_token(steps, kv_bytes_per_token)
    reserved_w = (reserved * w).sum()
    reserved_sum = reserved.sum()
    reserved_b = (float(reserved_w / wsum) * bpt if isinstance(bpt, float)
                  else float((reserved * w * bpt).sum() / wsum))
    tokens = (_num(steps, "kv_tokens_used", copy=True) if "kv_tokens_used" in steps
              else reserved.copy())
    np.minimum(tokens, reserved, out=tokens)
    np.subtract(reserved, tokens, out=reserved)  # reserved - tokens
    reserved *= w
    frag = float(reserved.sum() / max(reserved_w, 1e-300))
    del reserved
    tokens *= w
    used_b = (float(tokens.sum() / wsum) * bpt if isinstance(bpt, float)
              else float((tokens * bpt).sum() / wsum))
    del tokens, w
    batch = _num(steps, "batch_size")
    pad = _num(steps, "num_padding_seqs") if "num_padding_seqs" in steps else 0 * batch
    return {
        "max_concurrency": int(batch.max()),
        "padding_waste": float(pad.sum() / batch.sum()) if batch.sum() else None,
        "kv_reserved_bytes_mean": reserved_b,
        "kv_used_bytes_mean": used_b,
        "kv_wasted_bytes_mean": reserved_b - used_b,
        "mean_kv_fragmentation": frag if reserved_sum else None,
        "num_replicas_with_steps": int(n_rep),
    }
