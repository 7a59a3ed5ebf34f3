"""The fidelity page (``benchmarks/bench_fidelity.py``): one Markdown page over every recorded
run and published summary replayed, and the CSV of every number on it.

Inputs are plain dicts, so the page can be built from known values:

``run`` (one recorded run)
    ``name``, ``collection`` (its top folder under the recorded-runs root), ``record`` (what
    the record holds, one phrase), ``engine_version``, ``tables`` (the kernel tables the
    replay used, one phrase), ``num_requests``, ``stages`` (the
    ``validation.json`` ``stages`` list of :func:`simulator.observe.stages.compare_stages`),
    ``metrics`` (``validation.json`` ``metrics``: servesim's errors over the compared requests
    of a per-request record, or None), ``ks`` (:func:`~simulator.observe.fidelity.per_request_ks`
    or None), ``peer``
    (:func:`~simulator.observe.fidelity.peer_comparison` or None), ``peer_name``,
    ``peer_published`` (:func:`~simulator.observe.readers.read_peer_summary` or None),
    ``peer_error`` (why the peer could not be compared, or None), ``error`` (the run's one-line
    error when it could not be replayed, else None).
``summary`` (one published ``vllm bench serve`` summary)
    ``record``, ``gpu``, ``metrics`` (``{name: {"published", "simulated", "pct_error"}}``),
    ``engine``, ``error``.
``fit``
    :func:`~simulator.observe.fidelity.fit_report_summary`.

A run is *overload* when its record lost at least 1% of a stage's requests
(:data:`OVERLOAD_FAILED_FRACTION`: a test of queueing and time-outs more than of step times); it is
*not fitted* when the engine profile's fit report does not list it among the runs fitted on.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simulator.observe.compare import STATS
from simulator.observe.fidelity import FIT_KINDS, KS_METRICS
from simulator.report.render import render

__all__ = ["CSV_COLUMNS", "OVERLOAD_FAILED_FRACTION", "PAGE_METRICS", "csv_rows", "error_chart_rows", "fit_status",
           "headline", "is_overload", "render_page", "stage_label", "summary_chart_rows"]

#: Latency metrics with a table on the page (ITL only where the record has it).
PAGE_METRICS = ("ttft", "tpot", "itl", "e2e")
#: Share of a stage's requests the record must have lost for the run to count as overload
#: (the inference-perf H100 overload runs lose 33-85%; a run losing a handful of requests to
#: time-outs is not one).
OVERLOAD_FAILED_FRACTION = 0.01
#: Columns of the page's CSV (every number on the page).
CSV_COLUMNS = ("section", "run", "stage", "stage_name", "metric", "stat", "unit", "recorded",
               "simulated", "pct_error", "value", "note")
_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E latency",
           "duration_s": "duration"}
_KIND_LABELS = {"in": "in sample", "loro": "leave one run out", "lomo": "leave one model out",
                "logo": "leave one GPU out"}
#: The published summary statistics, grouped as the page shows them.
_SUMMARY_GROUPS = (("duration", ("duration_s",)),
                   ("TTFT mean / p50 / p99", ("ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms")),
                   ("TPOT mean / p50 / p99", ("tpot_mean_ms", "tpot_median_ms", "tpot_p99_ms")),
                   ("ITL mean", ("itl_mean_ms",)))


def _pct(x: Any) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{float(x):+.1f}%"


def _ms(x: Any) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    v = float(x) * 1e3
    return f"{v:,.0f} ms" if abs(v) >= 100 else f"{v:.2f} ms"


def is_overload(run: dict) -> bool:
    """Whether the record lost at least :data:`OVERLOAD_FAILED_FRACTION` of a stage's
    requests."""
    for s in run.get("stages") or []:
        rec = s.get("counts", {}).get("recorded", {})
        fail, ok = rec.get("failure") or 0, rec.get("success") or 0
        if fail and fail >= OVERLOAD_FAILED_FRACTION * (fail + ok):
            return True
    return False


def fit_status(name: str, fit: dict) -> str:
    """``fitted on`` (the fit used the run), ``not fitted`` with the fit's reason, or ``not
    fitted`` when the profile has no fit report."""
    if not fit.get("fitted"):
        return "not fitted"
    entry = fit["per_run"].get(name)
    if name in fit["runs"] or (entry and entry["fitted"]):
        return "fitted on"
    why = entry["why_not"] if entry else ""
    return f"not fitted ({why})" if why else "not fitted"


def stage_label(run: dict, stage: dict) -> str:
    """``run`` for a one-stage run, else ``run, stage k (rate req/s)``."""
    if len(run.get("stages") or []) <= 1:
        return run["name"]
    rate = stage.get("rate")
    return f"{run['name']}, stage {stage['index']}" + (f" ({rate:g} req/s)" if rate else "")


def _flags(run: dict, fit: dict) -> str:
    out = []
    if run.get("error"):
        out.append("not replayed")
    if is_overload(run):
        out.append("overload")
    st = fit_status(run["name"], fit)
    if st != "fitted on":
        out.append(st)
    return ", ".join(out)


# ------------------------------------------------------------------------ tables
def _metric_rows(runs: Sequence[dict], metric: str) -> list[list[str]]:
    rows = []
    for run in runs:
        for s in run.get("stages") or []:
            m = "tpot_per_token" if metric == "tpot" and "tpot_per_token" in s["pct_error"] \
                else metric
            err = s["pct_error"].get(m)
            if err is None or all(v is None for v in err.values()):
                continue
            cells = ["n/c" if f"{m}.{k}" in s.get("not_compared", {}) else _pct(err.get(k))
                     for k in STATS]
            rec = s["recorded"].get(m) or {}
            sim = s["simulated"].get(m) or {}
            rows.append([stage_label(run, s), *cells, _ms(rec.get("mean")),
                         _ms(sim.get("mean"))])
    return rows


def _count_rows(runs: Sequence[dict]) -> list[list[str]]:
    rows = []
    for run in runs:
        for s in run.get("stages") or []:
            c, t = s["counts"], s["throughput"]
            rps = t["recorded"].get("requests_per_s")
            rows.append([stage_label(run, s), "-" if rps is None else f"{rps:.3f}",
                         _pct(t["pct_error"].get("requests_per_s")),
                         _pct(t["pct_error"].get("output_tokens_per_s")),
                         f"{c['recorded']['success']} / {c['simulated']['success']}",
                         _pct(c["pct_error"].get("success")),
                         f"{c['recorded']['failure']} / {c['simulated']['failure']}",
                         _pct(c["pct_error"].get("failure"))])
    return rows


def _triple(d: dict | None) -> str:
    if not d:
        return "-"
    return " / ".join("-" if d.get(m) is None else f"{d[m]:+.1f}" for m in KS_METRICS)


def _fit_rows(runs: Sequence[dict], fit: dict) -> list[list[str]]:
    names = [r["name"] for r in runs]
    names += [n for n in fit["per_run"] if n not in names]
    rows = []
    for n in names:
        e = fit["per_run"].get(n) or {}
        rows.append([n, fit_status(n, fit), *(_triple(e.get(k)) for k in FIT_KINDS)])
    return rows


def _peer_rows(runs: Sequence[dict]) -> list[list[str]]:
    rows = []
    for run in runs:
        ks, peer, pub = run.get("ks"), run.get("peer"), run.get("peer_published")
        if not ks:
            continue
        for m in KS_METRICS:
            ours = ((run.get("metrics") or {}).get(m) or {}).get("pct_error") or {}
            theirs = (peer["metrics"][m]["pct_error"] if peer else {})
            published = (pub or {}).get("metrics", {}).get(m, {})
            cells = [" / ".join((_pct(ours.get(k)), _pct(theirs.get(k)),
                                 _pct((published.get(k) or {}).get("pct_error"))))
                     for k in STATS]
            k_ours = ks[m]["ks"]
            k_peer = peer["metrics"][m]["ks"] if peer else None
            rows.append([run["name"], _LABELS[m], "-" if k_ours is None else f"{k_ours:.3f}",
                         "-" if k_peer is None else f"{k_peer:.3f}", *cells])
    return rows


def _summary_rows(summaries: Sequence[dict]) -> list[list[str]]:
    rows = []
    for s in summaries:
        if s.get("error"):
            rows.append([s["record"], s.get("gpu") or "-", *["-"] * len(_SUMMARY_GROUPS),
                         f"not replayed: {s['error']}"])
            continue
        cells = [" / ".join(_pct(s["metrics"][k]["pct_error"]) for k in keys)
                 for _, keys in _SUMMARY_GROUPS]
        rows.append([s["record"], s.get("gpu") or "-", *cells, s.get("engine") or ""])
    return rows


def headline(runs: Sequence[dict]) -> list[list[str]]:
    """Per collection, over the stages of its replayed runs that are not overload: the number
    of runs and stages and the median and largest |signed error| of the mean TTFT, TPOT and
    E2E."""
    groups: dict[str, list[dict]] = {}
    for r in runs:
        if not r.get("error") and not is_overload(r):
            groups.setdefault(r.get("collection") or "", []).append(r)
    rows = []
    for coll, rs in groups.items():
        stages = [s for r in rs for s in r["stages"]]
        cells = []
        for m in KS_METRICS:
            v = np.abs([s["pct_error"][m]["mean"] for s in stages
                        if (s["pct_error"].get(m) or {}).get("mean") is not None])
            cells.append("-" if not v.size else
                         f"{float(np.median(v)):.1f}% / {float(v.max()):.1f}%")
        rows.append([coll, str(len(rs)), str(len(stages)), *cells])
    return rows


# ------------------------------------------------------------------------ figures' data
def error_chart_rows(runs: Sequence[dict]) -> list[dict]:
    """Rows of :func:`~simulator.observe.fidelity_figures.plot_signed_errors` for the
    replayed runs: one per stage, TTFT / TPOT / E2E statistics and the requests / s error
    (``throughput``, stat ``value``); overload runs muted."""
    rows = []
    for run in runs:
        for s in run.get("stages") or []:
            errs = {m: dict(s["pct_error"].get(m) or {}) for m in KS_METRICS}
            errs["throughput"] = {"value": s["throughput"]["pct_error"].get("requests_per_s")}
            label = stage_label(run, s) + (" (overload)" if is_overload(run) else "")
            rows.append({"label": label, "muted": is_overload(run), "errors": errs})
    return rows


def summary_chart_rows(summaries: Sequence[dict]) -> list[dict]:
    """Rows of :func:`~simulator.observe.fidelity_figures.plot_signed_errors` for the
    published summaries: duration, TTFT, TPOT and ITL."""
    rows = []
    for s in summaries:
        if s.get("error"):
            continue
        e = {k: v["pct_error"] for k, v in s["metrics"].items()}
        rows.append({"label": f"{s['record']} ({s.get('gpu')})", "muted": False, "errors": {
            "duration": {"value": e.get("duration_s")},
            "ttft": {"mean": e.get("ttft_mean_ms"), "p50": e.get("ttft_median_ms"),
                     "p99": e.get("ttft_p99_ms")},
            "tpot": {"mean": e.get("tpot_mean_ms"), "p50": e.get("tpot_median_ms"),
                     "p99": e.get("tpot_p99_ms")},
            "itl": {"mean": e.get("itl_mean_ms")}}})
    return rows


# ------------------------------------------------------------------------ CSV
def _row(section, run, metric, stat, unit, recorded=None, simulated=None, pct=None, value=None,
         stage=None, stage_name=None, note="") -> dict:
    return {"section": section, "run": run, "stage": stage, "stage_name": stage_name,
            "metric": metric, "stat": stat, "unit": unit, "recorded": recorded,
            "simulated": simulated, "pct_error": pct, "value": value, "note": note}


def _stage_csv(run: dict) -> list[dict]:
    out = []
    for s in run.get("stages") or []:
        at = {"stage": s["index"], "stage_name": s["name"]}
        for m, errs in s["pct_error"].items():
            for k, e in errs.items():
                out.append(_row("stage", run["name"], m, k, "s", s["recorded"][m].get(k),
                                s["simulated"][m].get(k), e,
                                note=s.get("not_compared", {}).get(f"{m}.{k}", ""), **at))
        for grp, unit in (("counts", "requests"), ("throughput", "per s")):
            g = s[grp]
            for k, e in g["pct_error"].items():
                out.append(_row(grp, run["name"], grp, k, unit, g["recorded"].get(k),
                                g["simulated"].get(k), e, **at))
    return out


def _peer_csv(run: dict) -> list[dict]:
    out = []
    for m, d in (run.get("ks") or {}).items():
        out.append(_row("ks", run["name"], m, "ks", "", value=d["ks"],
                        note=f"{d['count']} compared requests"))
    peer, name = run.get("peer"), run.get("peer_name") or "peer"
    if peer:
        for m, d in peer["metrics"].items():
            for k in STATS:
                out.append(_row("peer", run["name"], m, k, "s", d["real"][k], d["sim"][k],
                                d["pct_error"][k], note=f"{name}, servesim's definitions"))
            out.append(_row("peer_ks", run["name"], m, "ks", "", value=d["ks"], note=name))
    for m, stats in ((run.get("peer_published") or {}).get("metrics") or {}).items():
        for k, d in stats.items():
            out.append(_row("peer_published", run["name"], m, k, "ms", d["real"], d["sim"],
                            d["pct_error"], note=f"{name}'s own summary and definitions"))
    return out


def csv_rows(runs: Sequence[dict], summaries: Sequence[dict], fit: dict) -> list[dict]:
    """Every number of the page, one per row (:data:`CSV_COLUMNS`): ``section`` ``stage``
    (latency statistics, seconds), ``counts``, ``throughput``, ``ks``, ``peer`` (the peer's
    per-request answer by servesim's definitions), ``peer_ks``, ``peer_published`` (their own
    summary, ms), ``fit`` (signed % per kind), ``fit_constant``, ``fit_median_abs_pct``,
    ``public_summary`` (published against simulated), ``error`` (a run not replayed)."""
    out: list[dict] = []
    for run in runs:
        if run.get("error"):
            out.append(_row("error", run["name"], "", "", "", note=run["error"]))
        out += _stage_csv(run) + _peer_csv(run)
    for name, e in fit["per_run"].items():
        for k in FIT_KINDS:
            for m, v in (e.get(k) or {}).items():
                out.append(_row("fit", name, m, k, "%", pct=v, note=fit_status(name, fit)))
    out += [_row("fit_constant", "", k, "", "", value=v) for k, v in fit["constants"].items()]
    out += [_row("fit_median_abs_pct", "", k, "", "%", value=v)
            for k, v in fit["median_abs_pct"].items()]
    for s in summaries:
        if s.get("error"):
            out.append(_row("error", s["record"], "", "", "", note=s["error"]))
            continue
        for k, d in s["metrics"].items():
            out.append(_row("public_summary", s["record"], k, "", k.rsplit("_", 1)[-1],
                            d["published"], d["simulated"], d["pct_error"], note=s.get("gpu")))
    return out


# ------------------------------------------------------------------------ page
def render_page(header: dict, runs: Sequence[dict], summaries: Sequence[dict], fit: dict,
                figures: dict[str, Any]) -> str:
    """The page's Markdown (template ``fidelity_page.md.j2``).

    Parameters
    ----------
    header : dict
        ``command``, ``commit``, ``date``, ``servesim_version``, ``root``, ``profile``,
        ``summaries_source`` (the summaries file, None without one), ``csv`` (the CSV's file
        name).
    runs, summaries, fit
        See the module docstring.
    figures : dict
        ``errors`` (the runs' error chart file name or None), ``summaries`` (the summaries'
        chart or None), ``cdfs`` (``[(run name, file name)]``).

    Returns
    -------
    str
    """
    ok = [r for r in runs if not r.get("error")]
    peer_names = sorted({r["peer_name"] for r in runs if r.get("peer_name")})
    tables = {m: _metric_rows(ok, m) for m in PAGE_METRICS}
    return render(
        "fidelity_page.md.j2", h=header,
        runs=[[r["name"], r.get("record") or "-", str(len(r.get("stages") or [])) if
               not r.get("error") else "-", f"{r['num_requests']:,}" if r.get("num_requests")
               else "-", r.get("engine_version") or "-", r.get("tables") or "-",
               _flags(r, fit)] for r in runs],
        num_runs=len(runs), num_ok=len(ok),
        overload=[r["name"] for r in ok if is_overload(r)],
        not_fitted=[r["name"] for r in runs if fit_status(r["name"], fit) != "fitted on"],
        headline=headline(ok),
        metric_tables=[(_LABELS[m], rows) for m, rows in tables.items() if rows],
        count_rows=_count_rows(ok), fit=fit, fit_rows=_fit_rows(runs, fit) if fit["fitted"]
        else [], fit_kinds=[_KIND_LABELS[k] for k in FIT_KINDS],
        peer_rows=_peer_rows(ok), peer_name=", ".join(peer_names) or "peer",
        peer_errors=[(r["name"], r["peer_error"]) for r in ok if r.get("peer_error")],
        summary_rows=_summary_rows(summaries), summary_groups=[g for g, _ in _SUMMARY_GROUPS],
        errors=[(r["name"], r["error"]) for r in runs if r.get("error")],
        figures=figures)
