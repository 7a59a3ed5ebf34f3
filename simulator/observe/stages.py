"""Per-stage comparison of a replay: each request is counted in the load stage it was sent in
(an inference-perf stage, a GuideLLM benchmark; a record without stages is one stage), and
each stage's recorded statistics are compared with the simulation's, computed **in the
record's own definitions** (:data:`~simulator.observe.record.METRIC_DEFINITIONS`):

* ``ttft``, ``e2e``: per successful request, client-side when the record is
  (:mod:`simulator.observe.client_side`);
* ``tpot``: ``glossary`` (last - first token) / (n - 1); ``inference_perf`` (last - first
  SSE line) / (2n + 1), the last line (``[DONE]``) following the last token at once;
* ``tpot_per_token`` (``inference_perf`` only, derived): the record's ``tpot`` x (2n + 1) /
  (n - 1), i.e. per token (exact for the fixed output length of ``ignore_eos`` runs), against
  the simulation's glossary TPOT: the same errors as ``tpot``, in readable units;
* ``itl``: the gaps between a request's tokens, pooled over the stage's successful requests
  (the simulation's from its step table: a request emitting at consecutive steps has the
  steps' spacing as gaps); ``inference_perf`` adds n + 2 gaps of zero per request (a data line
  to its blank line, the last token to ``[DONE]``), so its percentiles below ~50% are those
  zeros: a statistic whose simulated value is such a zero is not compared (the record's is
  the client's line-reading time, ~0.1 ms, which servesim does not model);
* statistics: ``inference_perf`` as ``numpy.percentile`` (linear) of the per-request (ITL:
  per-gap) values, inference-perf's own; otherwise :func:`simulator.metrics.latency.latency_stats`;
* success: completed, and (client time-out) finished at the client within the request's
  ``cancel_after_s``; everything else sent in the stage is a failure;
* throughput: successes / (last end - first send) of the stage's requests (a failure ends at
  its time-out), inference-perf's definition; output tokens / s the same with the engine's
  token counts (an inference-perf record counts re-tokenised text: its stated figure is kept
  beside, and compared as its requests / s x output tokens per request).

Signed % error = (simulated - recorded) / recorded x 100, as everywhere.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics.latency import latency_stats, per_request_latencies
from simulator.observe.compare import STATS, pct_error
from simulator.observe.record import RecordedRun, RecordedStage

__all__ = ["STAGE_METRICS", "compare_stages", "expanded_percentiles", "stage_error_rows",
           "stage_token_gaps"]

#: Metrics compared per stage, in table order.
STAGE_METRICS = ("ttft", "tpot", "tpot_per_token", "itl", "e2e")
_Q = (50.0, 90.0, 99.0)


def expanded_percentiles(values, weights, qs) -> list[float]:
    """``numpy.percentile(np.repeat(values, weights), qs)`` (linear interpolation) without
    building the repeated array; fractional weights extend the same rule (a value of weight
    ``w`` covers ``w`` positions of the sorted sample).

    Parameters
    ----------
    values : array_like of float
    weights : array_like of float
        Multiplicities (>= 0; their sum > 0).
    qs : sequence of float
        Percentiles in [0, 100].
    """
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    keep = w > 0
    v, cum = v[keep], np.cumsum(w[keep])
    n = float(cum[-1])

    def at(i: float) -> float:
        return float(v[min(int(np.searchsorted(cum, i, side="right")), v.size - 1)])

    out = []
    for q in qs:
        h = q / 100.0 * max(n - 1.0, 0.0)
        lo = float(np.floor(h))
        a, b = at(lo), at(min(lo + 1.0, max(n - 1.0, 0.0)))
        out.append(a + (h - lo) * (b - a))
    return out


def _stats(values, weights=None, linear: bool = False) -> dict[str, Any]:
    v = np.asarray(values, dtype=float)
    if not linear:
        s = latency_stats(v, weights)
        return {k: s[k] for k in ("mean", *("p50", "p90", "p99"), "count")}
    w = np.ones(v.size) if weights is None else np.asarray(weights, dtype=float)
    ok = np.isfinite(v) & (w > 0)
    v, w = v[ok], w[ok]
    if not v.size:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "count": 0}
    p = expanded_percentiles(v, w, _Q)
    total = float(w.sum())
    return {"mean": float(np.sum(v * w) / total), "p50": p[0], "p90": p[1], "p99": p[2],
            "count": int(total) if total.is_integer() else total}


def stage_token_gaps(requests: pd.DataFrame, steps: pd.DataFrame | None, stage_of: np.ndarray,
                     keep: np.ndarray, num_stages: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each stage's inter-token gaps (seconds) with multiplicities, from the step table.

    A request that emitted its first token at the end of step ``i0`` and its last at the end
    of step ``i1`` of its replica, one token per step, has the ``i1 - i0`` gaps between those
    steps' ends: exact (the recorder's own samples) for a request that ran in every step in
    between. A preempted request sat out some of them: its ``C = i1 - i0`` covered gaps are
    weighted ``(n - 1) / C`` each, so it still counts ``n - 1`` gaps (its long gap across the
    preemption is spread over the steps it waited: percentiles approximate; the mean is
    computed exactly elsewhere from the spans).

    Parameters
    ----------
    requests : pandas.DataFrame
        The simulation's request table (engine times), row ``i`` = request ``i``.
    steps : pandas.DataFrame or None
        The step table (``replica_id``, ``end_time_s``).
    stage_of : numpy.ndarray
        Each request's stage.
    keep : numpy.ndarray of bool
        Requests whose gaps count (the successful ones).
    num_stages : int

    Returns
    -------
    list of (numpy.ndarray, numpy.ndarray)
        Per stage: gap values and float weights (only gaps with weight > 0).
    """
    out = [(np.zeros(0), np.zeros(0)) for _ in range(num_stages)]
    if steps is None or not len(steps):
        return out
    first = requests["first_token_time_s"].to_numpy(dtype=float)
    fin = requests["finish_time_s"].to_numpy(dtype=float)
    rep = requests["replica_id"].to_numpy()
    emitted = requests["num_emitted_tokens"].fillna(0).to_numpy(dtype=float)
    acc: list[list] = [[] for _ in range(num_stages)]
    for r, g in steps.groupby("replica_id", sort=True):
        ends = np.sort(g["end_time_s"].to_numpy(dtype=float))
        if ends.size < 2:
            continue
        gaps = np.diff(ends)
        sel = keep & (rep == r) & np.isfinite(first) & np.isfinite(fin)
        i0 = np.searchsorted(ends, first[sel] - 1e-9)
        i1 = np.searchsorted(ends, fin[sel] - 1e-9)
        cover = (i1 - i0).astype(float)
        w = np.where(cover > 0, np.maximum(emitted[sel] - 1.0, 0.0) / np.maximum(cover, 1.0),
                     0.0)
        st = stage_of[sel]
        for k in range(num_stages):
            d = np.zeros(ends.size + 1)
            m = st == k
            np.add.at(d, i0[m], w[m])
            np.add.at(d, i1[m], -w[m])
            cov = np.cumsum(d)[: gaps.size]
            nz = cov > 1e-9
            acc[k].append((gaps[nz], cov[nz]))
    for k in range(num_stages):
        if acc[k]:
            out[k] = (np.concatenate([a for a, _ in acc[k]]),
                      np.concatenate([b for _, b in acc[k]]))
    return out


def _aligned(requests: pd.DataFrame, n: int) -> pd.DataFrame:
    """The request table with row ``i`` = request ``i`` (0..n-1; missing ones NaN)."""
    return requests.set_index("request_id").reindex(np.arange(n)).reset_index()


def _sim_side(d: dict, defs: str, gaps, per_tok: float) -> dict[str, dict]:
    """The simulation's statistics of one stage (``d``: its successful requests' arrays)."""
    lin = defs == "inference_perf"
    gv, gw = gaps
    gv = gv + per_tok
    out = {"ttft": _stats(d["ttft"], linear=lin), "e2e": _stats(d["e2e"], linear=lin)}
    n = d["n"]
    span = float(np.nansum(d["e2e"] - d["ttft"]))   # client side: gaps incl. per_tok
    if lin:
        out["tpot"] = _stats((d["e2e"] - d["ttft"]) / (2.0 * n + 1.0), linear=True)
        out["tpot_per_token"] = _stats(d["tpot"], linear=True)
        zeros = float((n + 2).sum())
        vals, ws = np.concatenate((gv, [0.0])), np.concatenate((gw, [zeros]))
        out["itl"] = _stats(vals, ws, linear=True) if ws.sum() else _stats([], linear=True)
        lines = float((2.0 * n + 1.0).sum())
    else:
        out["tpot"] = _stats(d["tpot"])
        out["itl"] = _stats(gv, gw) if gw.size else _stats([])
        lines = float(np.maximum(n - 1.0, 0.0).sum())
    if out["itl"]["mean"] is not None and lines > 0:
        out["itl"]["mean"] = span / lines   # exact, preempted requests included
    return out


def _rec_side(run: RecordedRun, st: RecordedStage, rows: pd.DataFrame,
              n_fixed: int | None) -> dict[str, dict]:
    """The record's statistics of one stage: its own (aggregate records), else computed from
    its per-request outcomes (``rows``: the stage's completed requests)."""
    if st.stats is not None:
        out = {m: dict(st.stats[m]) if st.stats.get(m) else _stats([], linear=True)
               for m in ("ttft", "tpot", "itl", "e2e")}
        if n_fixed is not None and n_fixed >= 2 and st.stats.get("tpot"):
            f = (2.0 * n_fixed + 1.0) / (n_fixed - 1.0)
            out["tpot_per_token"] = {k: (None if out["tpot"].get(k) is None else
                                         out["tpot"][k] * f) for k in ("mean", *STATS[1:])}
        return out
    out = {"ttft": _stats(rows["ttft_s"]), "tpot": _stats(rows["tpot_s"]),
           "e2e": _stats(rows["e2e_latency_s"])}
    if "itl_s" in rows.columns:
        g = [np.asarray(x, dtype=float) for x in rows["itl_s"] if x]
        out["itl"] = _stats(np.concatenate(g) if g else [])
    return out


def _errors(rec: dict, sim: dict, defs: str) -> tuple[dict, dict]:
    err: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for m in STAGE_METRICS:
        if m not in rec or m not in sim:
            continue
        err[m] = {}
        for s in STATS:
            r, x = rec[m].get(s), sim[m].get(s)
            if m == "itl" and defs == "inference_perf" and x == 0.0:
                err[m][s] = None
                skipped[f"itl.{s}"] = ("falls in the zero gaps of inference-perf's line count "
                                       "(the record's value is the client's line-reading time)")
                continue
            err[m][s] = pct_error(x, r)
    return err, skipped


def _window_rate(arrival, end, ok, tokens) -> dict[str, float | None]:
    """Successes / s and their output tokens / s over (last end - first send)."""
    a = np.asarray(arrival, dtype=float)
    e = np.asarray(end, dtype=float)
    if not a.size or not np.isfinite(e).any():
        return {"requests_per_s": None, "output_tokens_per_s": None}
    span = float(np.nanmax(e) - np.nanmin(a))
    if span <= 0:
        return {"requests_per_s": None, "output_tokens_per_s": None}
    return {"requests_per_s": float(ok.sum()) / span,
            "output_tokens_per_s": float(np.asarray(tokens, dtype=float)[ok].sum()) / span}


def _sim_arrays(run: RecordedRun, sim_client: pd.DataFrame, specs) -> dict[str, np.ndarray]:
    n = len(specs)
    req = _aligned(sim_client, n)
    lat = per_request_latencies(req)
    arrival = np.array([s.arrival_time_s for s in specs])
    deadline = np.array([np.inf if s.cancel_after_s is None else s.cancel_after_s
                         for s in specs])
    status = req["status"].fillna("missing").to_numpy(dtype=object)
    e2e = lat["e2e_latency_s"].to_numpy(dtype=float)
    done = status == "completed"
    ok = done & (e2e <= deadline)
    fin = req["finish_time_s"].to_numpy(dtype=float)
    end = np.fmin(np.where(np.isfinite(fin), fin, np.inf), arrival + deadline)
    end = np.where(np.isfinite(end), end, arrival)
    return {"arrival": arrival, "ok": ok, "status": status, "late": done & ~ok, "end": end,
            "ttft": lat["ttft_s"].to_numpy(dtype=float), "e2e": e2e,
            "tpot": lat["tpot_s"].to_numpy(dtype=float),
            "n": req["num_emitted_tokens"].fillna(0).to_numpy(dtype=float)}


def compare_stages(run: RecordedRun, sim_client: pd.DataFrame, sim_engine: pd.DataFrame,
                   steps: pd.DataFrame | None, specs, per_output_token_s: float = 0.0
                   ) -> list[dict[str, Any]]:
    """The per-stage comparison of a replay (module docstring for the definitions).

    Parameters
    ----------
    run : RecordedRun
        The record (``stages``; outcomes with a ``stage`` column when it has stages).
    sim_client, sim_engine : pandas.DataFrame
        The simulation's request table as the client sees it
        (:func:`~simulator.observe.client_side.client_view`) and as the engine recorded it.
    steps : pandas.DataFrame or None
        The simulation's step table (for the inter-token gaps).
    specs : list of RequestSpec
        The replayed requests (arrival, client time-out).
    per_output_token_s : float
        The API server's time per streamed token (added to every simulated gap).

    Returns
    -------
    list of dict
        One per stage: ``index``, ``name``, ``rate``, ``num_requests``, ``recorded`` and
        ``simulated`` (``{metric: {"mean", "p50", "p90", "p99", ...}}``, seconds),
        ``pct_error`` (``{metric: {stat: float or None}}``), ``not_compared``
        (``{"metric.stat": reason}``), ``counts`` and ``throughput`` (each ``recorded``,
        ``simulated``, ``pct_error``).
    """
    defs = run.metric_definitions
    n = len(specs)
    stages = run.stages or [RecordedStage(0, "whole run", 0.0, 0.0, n)]
    stage_of = (run.outcomes["stage"].to_numpy(dtype=np.int64) if "stage" in run.outcomes
                else np.zeros(n, dtype=np.int64))
    sim = _sim_arrays(run, sim_client, specs)
    gaps = stage_token_gaps(_aligned(sim_engine, n), steps, stage_of, sim["ok"], len(stages))
    real_done = np.isfinite(run.outcomes["last_token_s"].to_numpy(dtype=float))
    out_len = np.array([s.num_output_tokens for s in specs])
    res = []
    for st in stages:
        inn = stage_of == st.index
        ok = sim["ok"] & inn
        d = {k: sim[k][ok] for k in ("ttft", "e2e", "tpot", "n")}
        fixed = np.unique(out_len[inn])
        n_fixed = int(fixed[0]) if fixed.size == 1 else None
        rec = _rec_side(run, st, run.outcomes[inn & real_done], n_fixed)
        simm = _sim_side(d, defs, gaps[st.index], per_output_token_s)
        err, skipped = _errors(rec, simm, defs)
        counts = _counts(st, sim, inn, real_done)
        tput = _throughput(run, st, sim, inn, real_done, n_fixed)
        res.append({"index": st.index, "name": st.name, "rate": st.rate,
                    "num_requests": int(inn.sum()), "recorded": rec, "simulated": simm,
                    "pct_error": err, "not_compared": skipped, "counts": counts,
                    "throughput": tput, "source": st.source})
    return res


def _counts(st: RecordedStage, sim: dict, inn: np.ndarray, real_done: np.ndarray) -> dict:
    status = sim["status"][inn]
    rec = {"success": st.num_success if st.num_success is not None else int(real_done[inn].sum()),
           "failure": st.num_failure if st.num_failure is not None else 0}
    s_ok = int(sim["ok"][inn].sum())
    simc = {"success": s_ok, "failure": int(inn.sum()) - s_ok,
            "completed_after_timeout": int(sim["late"][inn].sum()),
            "cancelled": int((status == "cancelled").sum()),
            "rejected": int((status == "rejected").sum()),
            "unfinished": int(np.isin(status, ("waiting", "running", "missing")).sum())}
    return {"recorded": rec, "simulated": simc,
            "pct_error": {k: pct_error(float(simc[k]), float(rec[k])) for k in rec}}


def _throughput(run: RecordedRun, st: RecordedStage, sim: dict, inn: np.ndarray,
                real_done: np.ndarray, n_fixed: int | None) -> dict:
    s = _window_rate(sim["arrival"][inn], sim["end"][inn], sim["ok"][inn], sim["n"][inn])
    if st.stats is not None:   # the record's own figures
        rps = st.throughput.get("requests_per_s")
        r = {"requests_per_s": rps,
             "output_tokens_per_s": (rps * n_fixed if rps is not None and n_fixed else None),
             "output_tokens_per_s_as_recorded": st.throughput.get("output_tokens_per_s")}
    else:
        o = run.outcomes[inn]
        arr = o["arrival_s"].to_numpy(dtype=float)
        r = _window_rate(arr, arr + o["e2e_latency_s"].to_numpy(dtype=float),
                         real_done[inn], o["num_output_tokens"].to_numpy(dtype=float))
    return {"recorded": r, "simulated": s,
            "pct_error": {k: pct_error(s[k], r.get(k)) for k in s}}


def stage_error_rows(stages: list[dict]) -> list[dict[str, Any]]:
    """The per-stage comparison as flat rows (``stage_errors.csv``): ``stage``, ``name``,
    ``metric``, ``stat``, ``recorded``, ``simulated``, ``pct_error``, ``note``; latencies in
    seconds, counts, throughput in requests (tokens) per second."""
    rows = []
    for s in stages:
        for m, errs in s["pct_error"].items():
            for stat, e in errs.items():
                rows.append({"stage": s["index"], "name": s["name"], "metric": m, "stat": stat,
                             "recorded": s["recorded"][m].get(stat),
                             "simulated": s["simulated"][m].get(stat), "pct_error": e,
                             "note": s["not_compared"].get(f"{m}.{stat}", "")})
        for grp, stat_names in (("counts", ("success", "failure")),
                                ("throughput", ("requests_per_s", "output_tokens_per_s"))):
            g = s[grp]
            for k in stat_names:
                rows.append({"stage": s["index"], "name": s["name"], "metric": grp, "stat": k,
                             "recorded": g["recorded"].get(k), "simulated": g["simulated"].get(k),
                             "pct_error": g["pct_error"].get(k), "note": ""})
    return rows
