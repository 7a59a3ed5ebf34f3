"""The figures of the fidelity page (``benchmarks/bench_fidelity.py``) that
``validate --recorded`` does not compute itself: the KS distance between simulated and recorded
per-request distributions, a peer simulator's per-request answer compared with the record by
servesim's own definitions, and the leave-one-out report of the engine profile's fitted
constants.

Definitions (the same as :mod:`simulator.observe.compare`):

* per-request TTFT = first token - arrival, E2E = last token - arrival, TPOT = (E2E - TTFT) /
  (output tokens - 1) for requests with at least two output tokens;
* statistics by :func:`simulator.metrics.latency.latency_stats` (mean; p50 / p90 / p99 as the
  inverse empirical CDF) over the compared requests;
* signed % error = (simulated - recorded) / recorded x 100;
* KS distance: the two-sample Kolmogorov-Smirnov statistic ``sup_x |F_sim(x) - F_rec(x)|`` of
  the two empirical CDFs (:func:`scipy.stats.ks_2samp`): 0 for identical samples, 1 for
  samples that do not overlap.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp

from simulator.metrics.latency import latency_stats
from simulator.observe.compare import STATS, pct_error
from simulator.observe.record import RecordError

__all__ = ["FIT_KINDS", "KS_METRICS", "PEER_CSV_COLUMNS", "fit_report_summary", "ks_distance",
           "match_peer", "peer_comparison", "per_request_ks", "read_peer_requests"]

#: Per-request metrics with a KS distance and a peer comparison.
KS_METRICS = ("ttft", "tpot", "e2e")
#: Columns of LLMServingSim's ``outputs/sim.csv`` the comparison reads (times in nanoseconds
#: from the run's start: ``latency`` = finish - arrival, ``TTFT`` = first token - arrival).
PEER_CSV_COLUMNS = ("request id", "input", "output", "latency", "TTFT")
#: The fit report's error kinds: in sample, leave one run / model / GPU out.
FIT_KINDS = ("in", "loro", "lomo", "logo")
_OUTCOME_COLUMN = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_latency_s"}
_TRAILING_INT = re.compile(r"(\d+)$")


def ks_distance(a, b) -> float | None:
    """Two-sample KS statistic of the finite values of ``a`` and ``b``.

    Parameters
    ----------
    a, b : array_like of float
        The two samples (NaN and infinite values are left out).

    Returns
    -------
    float or None
        ``sup_x |F_a(x) - F_b(x)|`` in [0, 1]; None when either sample is empty.
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if not x.size or not y.size:
        return None
    return float(ks_2samp(x, y).statistic)


def per_request_ks(pair: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The KS distance between the simulated and recorded values of each metric of
    :data:`KS_METRICS` over the compared requests.

    Parameters
    ----------
    pair : pandas.DataFrame
        :func:`simulator.observe.compare.paired_frame` output (``compared``, ``real_<m>_s``,
        ``sim_<m>_s``).

    Returns
    -------
    dict
        ``{metric: {"ks": float or None, "count": int}}`` (``count``: compared requests).
    """
    ok = pair["compared"].to_numpy(dtype=bool)
    return {m: {"ks": ks_distance(pair.loc[ok, f"sim_{m}_s"], pair.loc[ok, f"real_{m}_s"]),
                "count": int(ok.sum())} for m in KS_METRICS}


def _peer_column(df: pd.DataFrame, col: str, shown: str) -> np.ndarray:
    """A numeric column of the peer CSV, or :class:`RecordError` naming the first bad line."""
    vals = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(vals)
    if bad.any():
        i = int(np.argmax(bad))
        raise RecordError(f"{shown}:{i + 2}: column {col!r} is {df[col].iloc[i]!r}, not a number")
    return vals


def read_peer_requests(path: str | Path) -> pd.DataFrame:
    """A peer simulator's per-request answer (LLMServingSim ``outputs/sim.csv``).

    Parameters
    ----------
    path : str or Path
        The CSV: one row per request with at least :data:`PEER_CSV_COLUMNS` (times in
        nanoseconds).

    Returns
    -------
    pandas.DataFrame
        ``peer_request_id`` (str), ``num_prompt_tokens``, ``num_output_tokens`` (int),
        ``ttft_s``, ``e2e_latency_s``, ``tpot_s`` (seconds; TPOT = (E2E - TTFT) / (output - 1),
        NaN for one output token).

    Raises
    ------
    RecordError
        The file is missing or not CSV, lacks a column (all missing ones named), or holds a
        value that is not a number (``file:line`` and the column).
    """
    p = Path(path)
    shown = str(path)
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise RecordError(f"{shown}: peer simulator output not found") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise RecordError(f"{shown}: not a CSV file ({str(e).splitlines()[0]})") from None
    missing = [c for c in PEER_CSV_COLUMNS if c not in df.columns]
    if missing:
        raise RecordError(f"{shown}: missing column(s) {', '.join(map(repr, missing))} (a peer "
                          f"simulator CSV has {', '.join(map(repr, PEER_CSV_COLUMNS))})")
    out_tok = _peer_column(df, "output", shown)
    ttft = _peer_column(df, "TTFT", shown) * 1e-9
    e2e = _peer_column(df, "latency", shown) * 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(out_tok >= 2, (e2e - ttft) / (out_tok - 1.0), np.nan)
    return pd.DataFrame({
        "peer_request_id": df["request id"].str.strip().to_numpy(dtype=object),
        "num_prompt_tokens": _peer_column(df, "input", shown).astype(np.int64),
        "num_output_tokens": out_tok.astype(np.int64),
        "ttft_s": ttft, "e2e_latency_s": e2e, "tpot_s": tpot})


def _peer_key(record_request_id: str, peer_ids: set[str]) -> str | None:
    """The peer's id for a recorded request: the same string, else its trailing integer
    (``bench-17`` -> ``17``: LLMServingSim numbers requests by their workload line)."""
    rid = str(record_request_id).strip()
    if rid in peer_ids:
        return rid
    m = _TRAILING_INT.search(rid)
    if m and str(int(m.group(1))) in peer_ids:
        return str(int(m.group(1)))
    return None


def match_peer(outcomes: pd.DataFrame, peer: pd.DataFrame) -> pd.DataFrame:
    """The peer's latencies aligned to the record's requests.

    Parameters
    ----------
    outcomes : pandas.DataFrame
        :attr:`RecordedRun.outcomes` (``record_request_id``, token counts).
    peer : pandas.DataFrame
        :func:`read_peer_requests` output.

    Returns
    -------
    pandas.DataFrame
        One row per recorded request, in ``outcomes`` order: ``matched`` (bool) and
        ``peer_<m>_s`` for ``ttft``, ``tpot``, ``e2e`` (NaN where unmatched).

    Raises
    ------
    ValueError
        A matched pair whose prompt or output token counts differ (the ids do not name the
        same requests), naming both ids.
    """
    by_id = peer.drop_duplicates("peer_request_id").set_index("peer_request_id")
    ids = set(by_id.index)
    n = len(outcomes)
    out = {"matched": np.zeros(n, dtype=bool),
           **{f"peer_{m}_s": np.full(n, np.nan) for m in KS_METRICS}}
    for i, (rid, p_tok, o_tok) in enumerate(zip(outcomes["record_request_id"],
                                                outcomes["num_prompt_tokens"],
                                                outcomes["num_output_tokens"])):
        key = _peer_key(rid, ids)
        if key is None:
            continue
        row = by_id.loc[key]
        if (int(row["num_prompt_tokens"]), int(row["num_output_tokens"])) != (int(p_tok),
                                                                               int(o_tok)):
            raise ValueError(
                f"recorded request {rid!r} has {int(p_tok)} prompt / {int(o_tok)} output tokens "
                f"but the peer's request {key!r} has {int(row['num_prompt_tokens'])} / "
                f"{int(row['num_output_tokens'])}: the ids do not name the same requests")
        out["matched"][i] = True
        for m in KS_METRICS:
            out[f"peer_{m}_s"][i] = float(row[_OUTCOME_COLUMN[m]])
    return pd.DataFrame(out, index=outcomes.index)


def peer_comparison(outcomes: pd.DataFrame, peer: pd.DataFrame,
                    compared=None) -> dict[str, Any]:
    """A peer simulator's errors against the record, by servesim's definitions.

    Parameters
    ----------
    outcomes : pandas.DataFrame
        :attr:`RecordedRun.outcomes`.
    peer : pandas.DataFrame
        :func:`read_peer_requests` output.
    compared : array_like of bool, optional
        Per recorded request, whether servesim's replay compares it (``paired_frame``
        ``compared``); the peer is compared on those requests only, so both columns cover the
        same population. Default: every request the record completed.

    Returns
    -------
    dict
        ``metrics``: ``{ttft|tpot|e2e: {"real": stats, "sim": stats, "pct_error": {stat:
        float or None}, "ks": float or None}}`` (stats in seconds from
        :func:`~simulator.metrics.latency.latency_stats`); ``num_compared`` (requests in
        both), ``num_peer_rows``, ``num_unmatched`` (recorded requests the peer lacks).

    Raises
    ------
    ValueError
        See :func:`match_peer`.
    """
    aligned = match_peer(outcomes, peer)
    done = np.isfinite(outcomes["last_token_s"].to_numpy(dtype=float))
    if compared is not None:
        done &= np.asarray(compared, dtype=bool)
    ok = done & aligned["matched"].to_numpy()
    res: dict[str, Any] = {"metrics": {}, "num_compared": int(ok.sum()),
                           "num_peer_rows": len(peer),
                           "num_unmatched": int((~aligned["matched"].to_numpy()).sum())}
    for m in KS_METRICS:
        real_v = outcomes[_OUTCOME_COLUMN[m]].to_numpy(dtype=float)[ok]
        sim_v = aligned[f"peer_{m}_s"].to_numpy(dtype=float)[ok]
        real, sim = latency_stats(real_v), latency_stats(sim_v)
        res["metrics"][m] = {"real": real, "sim": sim,
                             "pct_error": {s: pct_error(sim[s], real[s]) for s in STATS},
                             "ks": ks_distance(sim_v, real_v)}
    return res


# ------------------------------------------------------------------------ fit report
def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _errors(d: Any) -> dict[str, float | None] | None:
    """``{ttft, tpot, e2e}`` of a fit-report entry (``{ttft: -1.2, ...}`` or the older
    ``{ttft_mean_pct_error: -1.2, ...}``); None when it holds none."""
    if not isinstance(d, dict):
        return None
    out = {m: _num(d.get(m, d.get(f"{m}_mean_pct_error"))) for m in KS_METRICS}
    return out if any(v is not None for v in out.values()) else None


def fit_report_summary(profile: Any) -> dict[str, Any]:
    """The ``fit_report`` of an engine profile document, read defensively.

    Two layouts are read: ``per_run: {run: {fitted, in, loro, lomo, logo}}`` with
    ``constants`` and ``median_abs_pct`` (``benchmarks/fit_engine_constants.py``), and the
    older ``in_sample`` / ``leave_one_run_out`` maps of ``<metric>_mean_pct_error``
    (``servesim calibrate fit-engine``). Anything else (no report, a malformed one) is "not
    fitted".

    Parameters
    ----------
    profile : dict or None
        The engine profile YAML as loaded.

    Returns
    -------
    dict
        ``fitted`` (bool), ``tool``, ``objective`` (str or None), ``constants`` (``{name:
        value}``), ``runs`` (the runs fitted on), ``per_run`` (``{run: {"fitted": bool,
        "why_not": str, kind: {ttft|tpot|e2e: float or None} or None for kind in
        FIT_KINDS}}``, signed %), ``median_abs_pct`` (``{key: float}``).
    """
    empty = {"fitted": False, "tool": None, "objective": None, "constants": {}, "runs": [],
             "per_run": {}, "median_abs_pct": {}}
    rep = profile.get("fit_report") if isinstance(profile, dict) else None
    if not isinstance(rep, dict) or not rep:
        return empty
    runs = [str(r) for r in rep.get("runs") or []] if isinstance(rep.get("runs"), list) else []
    per_run: dict[str, dict] = {}
    raw = rep.get("per_run")
    if isinstance(raw, dict):
        for name, d in raw.items():
            d = d if isinstance(d, dict) else {}
            fitted = d.get("fitted")
            per_run[str(name)] = {
                "fitted": bool(fitted) if isinstance(fitted, bool) else str(name) in runs,
                "why_not": str(d.get("why_not") or d.get("not_fitted_because") or ""),
                **{k: _errors(d.get(k)) for k in FIT_KINDS}}
    else:   # the older layout
        old = {"in": rep.get("in_sample"), "loro": rep.get("leave_one_run_out")}
        for k, d in old.items():
            for name, e in (d.items() if isinstance(d, dict) else ()):
                entry = per_run.setdefault(str(name), {"fitted": str(name) in runs,
                                                       "why_not": "",
                                                       **dict.fromkeys(FIT_KINDS)})
                entry[k] = _errors(e)
    consts = rep.get("constants")
    constants = ({str(k): v for k, v in consts.items() if _num(v) is not None}
                 if isinstance(consts, dict) else {})
    med = rep.get("median_abs_pct")
    medians = ({str(k): float(v) for k, v in med.items() if _num(v) is not None}
               if isinstance(med, dict) else {})
    if not runs and not per_run:
        return empty
    return {"fitted": True, "tool": _str_or_none(rep.get("tool")),
            "objective": _str_or_none(rep.get("objective")), "constants": constants,
            "runs": runs, "per_run": per_run, "median_abs_pct": medians}


def _str_or_none(x: Any) -> str | None:
    return None if x is None else " ".join(str(x).split())
