"""Simulated versus recorded outcomes of the same requests: the error table.

Definitions (one everywhere):

* per-request latencies by the glossary (``simulator.metrics.latency.per_request_latencies``
  for the simulation; the record's outcome columns for the real run);
* statistics by :func:`simulator.metrics.latency.latency_stats` (mean and inverse-CDF
  percentiles p50 / p90 / p99), the summary's own definition;
* signed % error = (simulated - real) / real x 100;
* the compared population: requests completed in both the record and the simulation (the
  report states how many that is and why any are missing); ITL compares the record's pooled
  gaps of those requests with the simulation's gaps of the whole run (the engine aggregates
  ITL samples per run);
* makespan = the last token of the last request - the first arrival.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics.latency import latency_stats, per_request_latencies

__all__ = ["METRICS", "STATS", "compare_outcomes", "paired_frame", "pct_error"]

#: Compared metrics: name -> (record column, simulation column) in seconds.
METRICS: dict[str, tuple[str, str]] = {
    "ttft": ("ttft_s", "ttft_s"),
    "tpot": ("tpot_s", "tpot_s"),
    "itl": ("itl_s", "itl_s"),
    "e2e": ("e2e_latency_s", "e2e_latency_s"),
    "queue_delay": ("queue_delay_s", "queue_delay_s"),
}
#: Statistics with an error figure.
STATS = ("mean", "p50", "p90", "p99")


def pct_error(sim: float | None, real: float | None) -> float | None:
    """Signed percent error (sim - real) / real x 100; None when either is missing or real is
    0."""
    if sim is None or real is None or not np.isfinite(sim) or not np.isfinite(real) or real == 0:
        return None
    return float((sim - real) / real * 100.0)


def paired_frame(outcomes: pd.DataFrame, sim_requests: pd.DataFrame) -> pd.DataFrame:
    """One row per replayed request: real and simulated latencies side by side.

    Parameters
    ----------
    outcomes : pandas.DataFrame
        :attr:`RecordedRun.outcomes`.
    sim_requests : pandas.DataFrame
        The simulation's request table (``RunResult.requests``).

    Returns
    -------
    pandas.DataFrame
        ``request_id``, ``record_request_id``, ``num_prompt_tokens``, ``num_output_tokens``,
        ``sim_status``, ``compared`` (completed in both), ``real_<m>_s`` and ``sim_<m>_s``
        for ``ttft``, ``tpot``, ``e2e``, ``queue_delay`` (seconds), ``real_arrival_s``,
        ``real_finish_s``, ``sim_finish_s``, ``sim_num_cached_prompt_tokens``,
        ``sim_num_preemptions``.
    """
    sim = sim_requests.set_index("request_id")
    lat = per_request_latencies(sim_requests).set_index(sim_requests["request_id"])
    rid = outcomes["request_id"].to_numpy()
    status = sim["status"].reindex(rid).fillna("missing").to_numpy(dtype=object)
    df = pd.DataFrame({
        "request_id": rid,
        "record_request_id": outcomes["record_request_id"].to_numpy(),
        "num_prompt_tokens": outcomes["num_prompt_tokens"].to_numpy(),
        "num_output_tokens": outcomes["num_output_tokens"].to_numpy(),
        "sim_status": status,
    })
    real_done = np.isfinite(outcomes["last_token_s"].to_numpy(dtype=float))
    df["compared"] = real_done & (status == "completed")
    for m in ("ttft", "tpot", "e2e", "queue_delay"):
        rc, sc = METRICS[m]
        df[f"real_{m}_s"] = outcomes[rc].to_numpy(dtype=float)
        df[f"sim_{m}_s"] = lat[sc].reindex(rid).to_numpy(dtype=float)
    df["real_arrival_s"] = outcomes["arrival_s"].to_numpy(dtype=float)
    df["real_finish_s"] = outcomes["last_token_s"].to_numpy(dtype=float)
    df["sim_finish_s"] = sim["finish_time_s"].reindex(rid).to_numpy(dtype=float)
    df["sim_num_cached_prompt_tokens"] = sim["num_cached_prompt_tokens"].reindex(rid).to_numpy()
    df["sim_num_preemptions"] = sim["num_preemptions"].reindex(rid).to_numpy()
    return df


def _stats(values) -> dict[str, Any]:
    return latency_stats(np.asarray(values, dtype=float))


def compare_outcomes(outcomes: pd.DataFrame, sim_requests: pd.DataFrame,
                     sim_itl_values_s=None, sim_itl_weights=None) -> dict[str, Any]:
    """The error table of a replay.

    Parameters
    ----------
    outcomes : pandas.DataFrame
        The record's outcomes (:data:`~simulator.observe.record.OUTCOME_COLUMNS`, plus
        ``itl_s`` when recorded).
    sim_requests : pandas.DataFrame
        The simulation's request table.
    sim_itl_values_s, sim_itl_weights : array_like, optional
        The simulation's inter-token gaps (seconds) and their multiplicities.

    Returns
    -------
    dict
        ``metrics``: ``{ttft|tpot|itl|e2e|queue_delay: {"real": stats, "sim": stats,
        "pct_error": {mean|p50|p90|p99: float or None}}}`` (stats in seconds, from
        :func:`~simulator.metrics.latency.latency_stats`); flat keys
        ``<metric>_<stat>_pct_error``; ``per_request``: ``{ttft|tpot|e2e: {"median_abs_pct",
        "p90_abs_pct", "mean_signed_pct"}}`` over the compared requests (|sim / real - 1| x
        100, percentiles by the same definition); ``makespan``: ``{"real_s", "sim_s",
        "pct_error"}`` and ``makespan_pct_error``; counts ``num_compared``,
        ``num_sim_completed``, ``num_sim_rejected``, ``num_sim_unfinished``.
    """
    pair = paired_frame(outcomes, sim_requests)
    ok = pair["compared"].to_numpy()
    res: dict[str, Any] = {"metrics": {}, "per_request": {}}
    for m in ("ttft", "tpot", "e2e", "queue_delay"):
        real = _stats(pair.loc[ok, f"real_{m}_s"])
        sim = _stats(pair.loc[ok, f"sim_{m}_s"])
        res["metrics"][m] = {"real": real, "sim": sim,
                             "pct_error": {s: pct_error(sim[s], real[s]) for s in STATS}}
    if "itl_s" in outcomes.columns:
        keep = set(pair.loc[ok, "request_id"].tolist())
        gaps = [g for rid, g in zip(outcomes["request_id"], outcomes["itl_s"])
                if rid in keep and g]
        real_itl = _stats(np.concatenate([np.asarray(g, dtype=float) for g in gaps])
                          if gaps else np.zeros(0))
    else:
        real_itl = latency_stats(np.zeros(0))
    if sim_itl_values_s is not None and len(sim_itl_values_s):
        sim_itl = latency_stats(np.asarray(sim_itl_values_s, dtype=float),
                                None if sim_itl_weights is None else
                                np.asarray(sim_itl_weights, dtype=float))
    else:
        sim_itl = latency_stats(np.zeros(0))
    res["metrics"]["itl"] = {"real": real_itl, "sim": sim_itl,
                             "pct_error": {s: pct_error(sim_itl[s], real_itl[s]) for s in STATS}}
    for m in ("ttft", "tpot", "itl", "e2e", "queue_delay"):
        for s in STATS:
            res[f"{m}_{s}_pct_error"] = res["metrics"][m]["pct_error"][s]
    for m in ("ttft", "tpot", "e2e"):
        r = pair.loc[ok, f"real_{m}_s"].to_numpy(dtype=float)
        s = pair.loc[ok, f"sim_{m}_s"].to_numpy(dtype=float)
        good = np.isfinite(r) & np.isfinite(s) & (r > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            signed = (s[good] / r[good] - 1.0) * 100.0
        a = latency_stats(np.abs(signed))
        res["per_request"][m] = {"median_abs_pct": a["p50"], "p90_abs_pct": a["p90"],
                                 "mean_signed_pct": (float(signed.mean()) if signed.size
                                                     else None),
                                 "count": int(signed.size)}
    real_span = _span(pair["real_arrival_s"], pair["real_finish_s"])
    sim_span = _span(pair["real_arrival_s"], pair["sim_finish_s"])
    res["makespan"] = {"real_s": real_span, "sim_s": sim_span,
                       "pct_error": pct_error(sim_span, real_span)}
    res["makespan_pct_error"] = res["makespan"]["pct_error"]
    st = pair["sim_status"].to_numpy(dtype=object)
    res["num_compared"] = int(ok.sum())
    res["num_sim_completed"] = int((st == "completed").sum())
    res["num_sim_rejected"] = int((st == "rejected").sum())
    res["num_sim_cancelled"] = int((st == "cancelled").sum())
    res["num_sim_unfinished"] = int(np.isin(st, ("waiting", "running", "missing")).sum())
    return res


def _span(arrival: pd.Series, finish: pd.Series) -> float | None:
    a = arrival.to_numpy(dtype=float)
    f = finish.to_numpy(dtype=float)
    f = f[np.isfinite(f)]
    if not f.size or not np.isfinite(a).any():
        return None
    return float(f.max() - np.nanmin(a))
