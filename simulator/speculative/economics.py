"""Acceptance economics, the arithmetic: gains of speculation, the sweep table, crossovers.

Speculation trades target compute for fewer sequential steps. At low load a decode step is
memory-bound: verifying ``k + 1`` tokens per sequence costs about one plain decode step,
so every accepted draft is nearly free latency (Leviathan et al. 2023, Thm 3.8, with the
draft's cost ``c``). As the load grows, batches grow, the verification pass turns
compute-bound and costs up to ``k + 1`` plain steps, and the drafting cost grows with the
batch too: beyond a *crossover* load, speculation stops paying, first for the slice that
accepts least.

This module is pure arithmetic on run summaries (no simulation, no files):

- :func:`net_effect`: two runs' figures side by side with the gain of each;
- :func:`sweep_rows`: one rate's rows of the tidy sweep table (whole run and each slice);
- :func:`find_crossover` / :func:`crossovers`: where a gain falls below 1 as load grows;
- :func:`verify_over_plain`: verification and drafting time over plain decode time.

The experiment that produces the summaries is :mod:`simulator.experiments.spec_sweep`
(``servesim spec-sweep``); its report is :mod:`simulator.report.spec_sweep`.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = [
    "ALL",
    "CROSSOVER_TOLERANCE",
    "DEFAULT_RATES",
    "SPEEDUP_METRICS",
    "crossovers",
    "find_crossover",
    "gain_ratio",
    "net_effect",
    "sweep_rows",
    "verify_over_plain",
]

#: Default arrival-rate multipliers of ``servesim spec-sweep``.
DEFAULT_RATES: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Speedup metrics of the sweep table: (column, label).
SPEEDUP_METRICS: tuple[tuple[str, str], ...] = (
    ("tpot_speedup", "TPOT p50 speedup"),
    ("throughput_gain", "output throughput gain"),
    ("e2e_speedup", "E2E p50 speedup"),
)
#: The ``slice`` of the whole-run rows of the sweep table.
ALL = "all"
#: A gain counts as a loss below ``1 - CROSSOVER_TOLERANCE`` (1%): run-to-run noise of a
#: throughput ratio below saturation (0.999) must not read as a loss.
CROSSOVER_TOLERANCE = 0.01


def gain_ratio(num: Any, den: Any) -> float | None:
    """``num / den`` as a float; None when either is missing, not finite, or ``den`` is 0."""
    if num is None or den is None:
        return None
    num, den = float(num), float(den)
    if den == 0.0 or not math.isfinite(num) or not math.isfinite(den):
        return None
    return num / den


def _stat(s: Mapping[str, Any], key: str, q: str):
    return (s.get(key) or {}).get(q)


def _entry(sv, bv, higher_is_better: bool) -> dict[str, Any]:
    return {"spec": sv, "base": bv,
            "ratio": gain_ratio(sv, bv) if higher_is_better else gain_ratio(bv, sv)}


def _group(s: Mapping[str, Any], b: Mapping[str, Any], overall: bool) -> dict[str, Any]:
    out = {
        "tpot_p50_s": _entry(_stat(s, "tpot_s", "p50"), _stat(b, "tpot_s", "p50"), False),
        "tpot_mean_s": _entry(_stat(s, "tpot_s", "mean"), _stat(b, "tpot_s", "mean"), False),
        "ttft_p99_s": _entry(_stat(s, "ttft_s", "p99"), _stat(b, "ttft_s", "p99"), False),
        "e2e_p50_s": _entry(_stat(s, "e2e_latency_s", "p50"), _stat(b, "e2e_latency_s", "p50"),
                            False),
        "output_token_throughput_tps": _entry(s.get("output_token_throughput_tps"),
                                              b.get("output_token_throughput_tps"), True),
    }
    if overall:
        out["itl_p50_s"] = _entry(_stat(s, "itl_s", "p50"), _stat(b, "itl_s", "p50"), False)
        out["request_throughput_rps"] = _entry(s.get("request_throughput_rps"),
                                               b.get("request_throughput_rps"), True)
        for key in ("cost_per_1m_tokens_usd", "cost_per_1m_output_tokens_usd"):
            out[key] = _entry(s.get(key), b.get(key), False)
    return out


def net_effect(spec: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """Net effect of speculation: the two runs' figures side by side.

    Parameters
    ----------
    spec, base : mapping
        Summaries (:func:`simulator.metrics.summary.summarize`) of the run with and without
        speculation on the same requests.

    Returns
    -------
    dict
        ``overall`` and ``by_slice`` entries, each ``{metric: {"spec", "base", "ratio"}}``
        where ``ratio`` is the *gain* (``base / spec`` for latencies and costs, ``spec /
        base`` for throughputs; > 1 means speculation helps). Metrics: ``tpot_p50_s``,
        ``tpot_mean_s``, ``ttft_p99_s``, ``e2e_p50_s``, ``itl_p50_s`` (overall only),
        ``output_token_throughput_tps``, ``request_throughput_rps`` (overall only),
        ``cost_per_1m_tokens_usd`` and ``cost_per_1m_output_tokens_usd`` (overall only).
    """
    by_slice = {}
    for name in sorted(set(spec.get("by_slice", {})) & set(base.get("by_slice", {}))):
        by_slice[name] = _group(spec["by_slice"][name], base["by_slice"][name], False)
    return {"overall": _group(spec, base, True), "by_slice": by_slice}


def _row(rate: float, name: str, spec, base, s, b, sps, sp, k: int) -> dict[str, Any]:
    row = {
        "rate_scale": rate, "slice": name,
        "arrival_rate_rps": base.get("arrival_rate_rps"),
        "num_requests": s.get("num_requests"),
        "mean_batch_size_base": base.get("mean_batch_size"),
        "mean_batch_size_spec": spec.get("mean_batch_size"),
        "mean_num_waiting_base": base.get("mean_num_waiting"),
        "mean_num_waiting_spec": spec.get("mean_num_waiting"),
        "tpot_p50_base_s": _stat(b, "tpot_s", "p50"),
        "tpot_p50_spec_s": _stat(s, "tpot_s", "p50"),
        "e2e_p50_base_s": _stat(b, "e2e_latency_s", "p50"),
        "e2e_p50_spec_s": _stat(s, "e2e_latency_s", "p50"),
        "ttft_p99_base_s": _stat(b, "ttft_s", "p99"),
        "ttft_p99_spec_s": _stat(s, "ttft_s", "p99"),
        "throughput_base_tps": b.get("output_token_throughput_tps"),
        "throughput_spec_tps": s.get("output_token_throughput_tps"),
        "cost_per_1m_tokens_base_usd": base.get("cost_per_1m_tokens_usd"),
        "cost_per_1m_tokens_spec_usd": spec.get("cost_per_1m_tokens_usd"),
        "mean_acceptance_length": sps.get("mean_acceptance_length"),
        "expected_tokens_per_step": sps.get("expected_tokens_per_step"),
        "draft_acceptance_rate": sps.get("acceptance_rate"),
        "configured_acceptance_alpha": sps.get("configured_acceptance_alpha"),
        "draft_time_share": sps.get("draft_time_share"),
        "draft_cost_ratio_batch1": sp.get("draft_cost_ratio_batch1"),
        "num_speculative_tokens": k,
        # what bounds each run (simulator.metrics.bounds; run-level, the same on every slice)
        "bound_base": (base.get("bounds") or {}).get("bound"),
        "bound_spec": (spec.get("bounds") or {}).get("bound"),
    }
    row["tpot_speedup"] = gain_ratio(row["tpot_p50_base_s"], row["tpot_p50_spec_s"])
    row["e2e_speedup"] = gain_ratio(row["e2e_p50_base_s"], row["e2e_p50_spec_s"])
    row["ttft_p99_gain"] = gain_ratio(row["ttft_p99_base_s"], row["ttft_p99_spec_s"])
    row["throughput_gain"] = gain_ratio(row["throughput_spec_tps"], row["throughput_base_tps"])
    row["cost_ratio"] = gain_ratio(row["cost_per_1m_tokens_spec_usd"],
                                   row["cost_per_1m_tokens_base_usd"])
    return row


def sweep_rows(rate: float, spec: Mapping[str, Any], base: Mapping[str, Any],
               k: int) -> list[dict[str, Any]]:
    """One rate's rows of the sweep table: the whole run (slice :data:`ALL`), then each slice.

    Parameters
    ----------
    rate : float
        The rate multiplier (``workload.rate_scale`` factor).
    spec, base : mapping
        Summaries with and without speculation; ``spec["speculative"]`` is the speculative
        block, ``base["arrival_rate_rps"]`` the offered load (requests/s).
    k : int
        Draft tokens per step.

    Returns
    -------
    list of dict
        Latencies in seconds, throughputs in tokens/s, costs in USD per 1M tokens, the
        gains ``tpot_speedup``, ``e2e_speedup``, ``ttft_p99_gain``, ``throughput_gain``
        (> 1: speculation helps) and ``cost_ratio`` (< 1: cheaper). The whole run's closed
        form ``expected_tokens_per_step`` is the drafts-weighted mean of the slices'.
    """
    sp = spec.get("speculative") or {}
    names = sorted(set(spec.get("by_slice", {})) & set(base.get("by_slice", {})))
    rows = [_row(rate, ALL, spec, base, spec, base, sp, sp, k)] + [
        _row(rate, n, spec, base, spec["by_slice"][n], base["by_slice"][n],
             sp.get("by_slice", {}).get(n, {}), sp, k) for n in names]
    if sp:
        expected = [r["expected_tokens_per_step"] for r in rows[1:]
                    if r["expected_tokens_per_step"] is not None]
        if expected and rows[0]["expected_tokens_per_step"] is None:
            w = [sp["by_slice"][r["slice"]]["num_drafts"] for r in rows[1:]]
            if sum(w):
                rows[0]["expected_tokens_per_step"] = float(np.dot(w, expected) / sum(w))
    return rows


def find_crossover(rates: Iterable[float], gains: Iterable[float | None],
                   tolerance: float = CROSSOVER_TOLERANCE) -> dict[str, Any]:
    """Where a gain first falls below ``1 - tolerance`` as the load grows.

    The crossover is interpolated linearly in ``log(rate)`` between the last rate with a
    gain >= ``1 - tolerance`` and the first with a gain below it.

    Parameters
    ----------
    rates : iterable of float
        Rate multipliers (any order; sorted here).
    gains : iterable of float or None
        Gain at each rate (> 1: speculation helps); None values are skipped.
    tolerance : float, default :data:`CROSSOVER_TOLERANCE`
        Fraction below 1 a gain must fall to count as a loss (>= 0).

    Returns
    -------
    dict
        ``status``: ``"crossover"`` (``rate`` holds the interpolated multiplier),
        ``"never_pays"`` (below the level already at the lowest rate), ``"always_pays"``
        (never below it in the swept range) or ``"no_data"``; ``rate``: float or None;
        ``level``: ``1 - tolerance``.
    """
    level = 1.0 - float(tolerance)
    pts = sorted((float(r), float(g)) for r, g in zip(rates, gains)
                 if g is not None and math.isfinite(float(g)))
    if not pts:
        return {"status": "no_data", "rate": None, "level": level}
    if pts[0][1] < level:
        return {"status": "never_pays", "rate": None, "level": level}
    for (r0, g0), (r1, g1) in itertools.pairwise(pts):
        if g1 < level <= g0:
            f = (g0 - level) / (g0 - g1)
            return {"status": "crossover", "level": level,
                    "rate": float(math.exp(math.log(r0) + f * (math.log(r1) - math.log(r0))))}
    return {"status": "always_pays", "rate": None, "level": level}


def _rps_per_rate(g: pd.DataFrame) -> float | None:
    v = g["arrival_rate_rps"].astype(float) / g["rate_scale"].astype(float)
    v = v[np.isfinite(v)]
    return float(v.median()) if len(v) else None


def crossovers(df: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`find_crossover` for every slice and speedup metric of a sweep table.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of :func:`sweep_rows` over the swept rates.

    Returns
    -------
    dict
        ``{slice: {metric: find_crossover(...) plus "arrival_rate_rps"}}`` (the crossover
        multiplier times the median requests/s per unit multiplier).
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, g in df.groupby("slice", sort=False):
        out[name] = {}
        rps_per_rate = _rps_per_rate(g)
        for col, _ in SPEEDUP_METRICS:
            c = find_crossover(g["rate_scale"], g[col])
            c["arrival_rate_rps"] = (c["rate"] * rps_per_rate
                                     if c["rate"] is not None and rps_per_rate else None)
            out[name][col] = c
    return out


def verify_over_plain(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    """(verification, drafting) time over plain decode time of a speculative run.

    Pooled over its pure-decode drafting steps (``summary["speculative"]
    ["verification_cost_by_batch"]``, each bin weighted by its step count); None without
    such steps.
    """
    bins = (summary.get("speculative") or {}).get("verification_cost_by_batch", [])
    v = sum(b["mean_verify_time_s"] * b["num_steps"] for b in bins)
    p = sum(b["mean_plain_decode_time_s"] * b["num_steps"] for b in bins)
    d = sum(b["mean_draft_time_s"] * b["num_steps"] for b in bins)
    if not p:
        return None
    return v / p, d / p
