"""``report.md`` and a self-contained ``report.html`` of a replay, from its ``validation.json``
content, through the report toolkit (:mod:`simulator.report.render`: the template
``simulator/report/templates/validation_report.md.j2``; the HTML page is the same Markdown
with its figures embedded as base64 PNGs, so it is one file to mail or attach)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.report.escape import md_code
from simulator.report.render import markdown_to_html, render, write_report

__all__ = ["render_report", "write_reports"]

_METRIC_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E latency",
                  "queue_delay": "queue delay", "tpot_per_token": "TPOT per token (derived)"}
_FIGURE_TITLES = {"request_scatter.png": "Per request: simulated vs recorded TTFT and E2E",
                  "latency_cdfs.png": "Latency CDFs: recorded (solid) vs simulated (dashed)",
                  "running_waiting.png": "Running and waiting requests over time"}


def _ms(x: Any) -> str:
    if x is None:
        return "-"
    v = float(x) * 1e3
    return f"{v:,.1f} ms" if abs(v) >= 10 else f"{v:.2f} ms"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{float(x):+.1f}%"


def _val(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if x is None:
        return "null"
    if isinstance(x, float):
        return f"{x:g}"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, list):
        s = ", ".join(map(str, x))
        return f"[{s[:60]}...]" if len(s) > 60 else f"[{s}]"
    return str(x)


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _stage_rows(stages: list[dict]) -> tuple[list[list[str]], list[list[str]]]:
    """Rows of the per-stage tables: errors per metric, and counts / throughput."""
    rows, counts = [], []
    for s in stages:
        for m in ("ttft", "tpot", "tpot_per_token", "itl", "e2e"):
            e = s["pct_error"].get(m)
            rec = s["recorded"].get(m) or {}
            if e is None or rec.get("mean") is None:
                continue
            label = _METRIC_LABELS.get(m, m)
            rows.append([_cell(s["name"]), label, _ms(rec.get("mean")),
                         _ms(s["simulated"][m].get("mean")),
                         *(_pct(e.get(k)) for k in ("mean", "p50", "p90", "p99"))])
        c, t = s["counts"], s["throughput"]
        rps = (t["recorded"].get("requests_per_s"), t["simulated"].get("requests_per_s"))
        counts.append([_cell(s["name"]),
                       f"{c['recorded']['success']} / {c['simulated']['success']}",
                       f"{c['recorded']['failure']} / {c['simulated']['failure']}",
                       " / ".join("-" if x is None else f"{x:.3f}" for x in rps),
                       _pct(t["pct_error"].get("requests_per_s"))])
    return rows, counts


def _context(v: dict[str, Any], figures: list[str]) -> dict[str, Any]:
    err_rows = []
    for m in ("ttft", "tpot", "itl", "e2e", "queue_delay"):
        d = v["metrics"][m]
        if not d["real"]["count"]:
            continue  # the record has no such samples (e.g. no per-token times)
        for s in ("mean", "p50", "p90", "p99"):
            err_rows.append([_METRIC_LABELS[m], s, _ms(d["real"][s]), _ms(d["sim"][s]),
                             _pct(d["pct_error"][s])])
    mk = v["makespan"]
    err_rows.append(["makespan", "-", _ms(mk["real_s"]), _ms(mk["sim_s"]),
                     _pct(mk["pct_error"])])
    per = [[_METRIC_LABELS[m], f"{d['median_abs_pct']:.1f}%" if d["median_abs_pct"] is not None
            else "-", f"{d['p90_abs_pct']:.1f}%" if d["p90_abs_pct"] is not None else "-",
            _pct(d["mean_signed_pct"])] for m, d in v["per_request"].items()]
    peer_rows = []
    peer = v.get("peer")
    if peer:
        for m in ("ttft", "tpot", "e2e"):
            for s in ("mean", "p50", "p90", "p99"):
                theirs = peer["metrics"].get(m, {}).get(s)
                if theirs is None:
                    continue
                peer_rows.append([_METRIC_LABELS[m], s, f"{theirs['real']:,.1f} ms",
                                  f"{theirs['sim']:,.1f} ms", f"{theirs['pct_error']:+.1f}%",
                                  _pct(v["metrics"][m]["pct_error"][s])])
    kv = v["kv_cache"]
    stage_rows, stage_count_rows = _stage_rows(v.get("stages") or [])
    api = v.get("api_server") or {}
    api_line = None
    if api:
        api_line = (f"{'added' if api['applied'] else 'not added'} ({api['why']}): "
                    f"{_ms(api['per_request_s'])} per request, "
                    f"{_ms(api['per_output_token_s'])} per streamed token")
    return {
        "stage_rows": stage_rows,
        "stage_count_rows": stage_count_rows,
        "api_line": api_line,
        "v": v,
        "title": f"servesim validate --recorded: {v['run']['name']}",
        "err_rows": err_rows,
        "per_rows": per,
        "peer_rows": peer_rows,
        "settings": [[md_code(r["key"]), _val(r["value"]), r["source"]] for r in v["settings"]],
        "features": [[md_code(k), _val(d["value"]), d["source"]]
                     for k, d in v.get("engine_features", {}).items()],
        "planner_vs_recorded": _pct(kv.get("planner_vs_recorded_pct")),
        "provenance": sorted(v.get("provenance", {}).items()),
        "kv": kv,
        "figures": [(_FIGURE_TITLES.get(f, f), f) for f in figures],
        "counts": v["counts"],
    }


def render_report(validation: dict[str, Any], figures: list[str], *, html: bool = False,
                  figure_dir: str | Path | None = None) -> str:
    """Render the Markdown (or HTML) report of a replay.

    Parameters
    ----------
    validation : dict
        The ``validation.json`` content (:func:`simulator.observe.validate.validate_recorded`).
    figures : list of str
        PNG file names to show (in order).
    html : bool
        Render the self-contained HTML report instead of Markdown.
    figure_dir : str or Path, optional
        Where the PNGs are (HTML: they are read and embedded as base64 data URIs).

    Returns
    -------
    str
    """
    md = render("validation_report.md.j2", **_context(validation, figures))
    return markdown_to_html(md, figure_dir=figure_dir) if html else md


def write_reports(outdir: str | Path, validation: dict[str, Any], figures: list[str]) -> list[Path]:
    """Write ``report.md`` and ``report.html`` into ``outdir`` (figures already there).

    Returns
    -------
    list of Path
        The two files.
    """
    files = write_report(outdir, "report", render_report(validation, figures))
    return [files["md"], files["html"]]
