"""The comparison report of ``servesim compare``: ``compare.md``, a self-contained
``compare.html``, ``compare.csv``, ``compare.json`` and the overlaid figures.

Inputs are a :class:`simulator.experiments.compare.CompareResult` (read through its fields:
``scenario_name``, ``varies``, ``variants`` with their ``name``, ``assignments``,
``scenario``, ``requests``, ``steps``, ``block_size`` and ``kv_bytes_per_token_per_gpu``,
``table``, ``same_requests``, ``num_workloads``). The layout is ``templates/compare.md.j2``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.bounds import BOUND_LABELS
from simulator.metrics.summary import json_safe
from simulator.perf.provenance import sources_by_label
from simulator.report.escape import Md, md_code
from simulator.report.figures import default_style, figure, plain_text, save_png
from simulator.report.format import yaml_value
from simulator.report.render import render, write_report

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["CSV_FILE", "FIGURE_FILES", "HTML_FILE", "JSON_FILE", "REPORT_FILE", "TABLE_COLUMNS",
           "print_compare_table", "render_compare_markdown", "table_rows",
           "write_compare_figures", "write_compare_report"]

REPORT_FILE = "compare.md"
HTML_FILE = "compare.html"
CSV_FILE = "compare.csv"
JSON_FILE = "compare.json"
FIGURE_FILES = {
    "ttft_cdf": "compare_ttft_cdf.png",
    "e2e_cdf": "compare_e2e_cdf.png",
    "kv_memory": "compare_kv_memory.png",
    "batch_size": "compare_batch_size.png",
}
_FIGURE_TITLES = (("ttft_cdf", "TTFT CDF"), ("e2e_cdf", "E2E latency CDF"),
                  ("kv_memory", "KV used vs reserved"), ("batch_size", "Batch size over time"))

#: (column, label, format: a ``str.format`` spec or a function of the value) of the
#: side-by-side table (printed and in compare.md); the table has one row per entry and one
#: column per variant.
TABLE_COLUMNS: tuple[tuple[str, str, str | Callable[[Any], str]], ...] = (
    ("num_completed", "completed requests", "{:,.0f}"),
    ("num_rejected", "rejected requests", "{:,.0f}"),
    ("num_cancelled", "cancelled requests", "{:,.0f}"),
    ("num_unfinished", "unfinished requests (at the end)", "{:,.0f}"),
    ("ttft_p50_ms", "TTFT p50 (ms)", "{:,.1f}"),
    ("ttft_p99_ms", "TTFT p99 (ms)", "{:,.1f}"),
    ("tpot_p50_ms", "TPOT p50 (ms)", "{:,.2f}"),
    ("tpot_p99_ms", "TPOT p99 (ms)", "{:,.2f}"),
    ("request_throughput_rps", "throughput (req/s)", "{:,.2f}"),
    ("output_token_throughput_tps", "output tokens/s", "{:,.0f}"),
    ("goodput_rps", "goodput (req/s)", "{:,.2f}"),
    ("max_concurrency", "max concurrency (batch)", "{:,.0f}"),
    ("mean_batch_size", "mean batch size", "{:,.1f}"),
    ("kv_fragmentation_pct", "KV fragmentation (%)", "{:,.1f}"),
    ("kv_reserved_gb_mean", "KV reserved (GB, mean)", "{:,.2f}"),
    ("kv_wasted_gb_mean", "KV wasted (GB, mean)", "{:,.2f}"),
    ("padding_waste_pct", "padding waste (%)", "{:,.1f}"),
    ("num_preemptions", "preemptions", "{:,.0f}"),
    ("tier_hit_pct", "KV offload tier hit rate (%)", "{:,.1f}"),
    ("tier_load_wait_mean_ms", "KV load wait, mean (ms)", "{:,.2f}"),
    ("bound", "bound (what bounds the run)", lambda v: BOUND_LABELS.get(v, str(v))),
    ("bound_share_pct", "bound's share (%)", "{:,.1f}"),
    ("mean_replicas_held", "replicas held, mean (autoscaled)", "{:,.2f}"),
    ("gpu_hours", "GPU-hours", "{:,.3f}"),
    ("cost_per_1m_tokens_usd", "cost per 1M tokens ($)", "{:,.4f}"),
    ("joules_per_output_token", "GPU energy per output token (J)", "{:,.4f}"),
    ("energy_kwh", "GPU energy (kWh)", "{:,.4f}"),
)
#: Rows of :data:`TABLE_COLUMNS` shown only when the table has their column (a table written
#: before the run verdict existed has no ``bound``).
_OPTIONAL_COLUMNS = frozenset({"bound", "bound_share_pct", "joules_per_output_token",
                               "energy_kwh"})
#: Rows shown only when some variant has KV offload tiers (``kv_cache.offload``): prompt tokens
#: served from the tiers over all prompt tokens, and the mean wait for a load
_TIER_COLUMNS = frozenset({"tier_hit_pct", "tier_load_wait_mean_ms"})
#: Rows shown only when some variant autoscales (``cluster.autoscale``): the replicas held on
#: average and the GPU-hours they cost (every variant's, fixed fleets' too)
_AUTOSCALE_COLUMNS = frozenset({"mean_replicas_held", "gpu_hours"})
#: Rows shown only when some variant counts any: the requests that entered the run and did not
#: complete (with ``completed requests``, every request of the run is accounted for)
_NONZERO_COLUMNS = frozenset({"num_rejected", "num_cancelled", "num_unfinished"})

#: Most points drawn per CDF line.
_MAX_CDF_POINTS = 2000
#: Most time bins per time-series line (raw steps below twice as many).
_MAX_TIME_BINS = 400
_STYLES = ("-", "--", "-.", ":")
_FIGSIZE = (7.5, 4.0)  # inches


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
def _axes():
    fig = figure(_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def _cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(values[np.isfinite(values)])
    if v.size == 0:
        return v, v
    y = np.arange(1, v.size + 1) / v.size
    if v.size > _MAX_CDF_POINTS:
        idx = np.unique(np.linspace(0, v.size - 1, _MAX_CDF_POINTS).astype(np.int64))
        v, y = v[idx], y[idx]
    return v, y


def _binned(t: np.ndarray, dt: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step-time-weighted mean of ``v`` in up to ``_MAX_TIME_BINS`` time bins (raw if few)."""
    if t.size <= 2 * _MAX_TIME_BINS:
        return t, v
    edges = np.linspace(t.min(), t.max(), _MAX_TIME_BINS + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, _MAX_TIME_BINS - 1)
    w = np.where(dt > 0, dt, 1e-12)
    num = np.bincount(idx, weights=v * w, minlength=_MAX_TIME_BINS)
    den = np.bincount(idx, weights=w, minlength=_MAX_TIME_BINS)
    keep = den > 0
    mid = 0.5 * (edges[:-1] + edges[1:])
    return mid[keep], num[keep] / den[keep]


def _latency(req: pd.DataFrame, which: str) -> np.ndarray:
    arr = req["arrival_time_s"].to_numpy(dtype=float)
    if which == "ttft":
        return req["first_token_time_s"].to_numpy(dtype=float) - arr
    done = (req["status"] == "completed").to_numpy()
    return np.where(done, req["finish_time_s"].to_numpy(dtype=float) - arr, np.nan)


def _cdf_figure(cr, which: str, label: str, path: Path) -> Path:
    fig, ax = _axes()
    for i, v in enumerate(cr.variants):
        x, y = _cdf(_latency(v.requests, which))
        if x.size:
            # line styles keep coinciding variants visible
            ax.step(x, y, where="post", label=plain_text(v.name), ls=_STYLES[i % len(_STYLES)],
                    lw=1.6 if i % len(_STYLES) == 0 else 1.2)
    ax.set_xscale("log")
    ax.set_xlabel(f"{label} (s, log scale)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"{label} CDF by variant")
    ax.legend(fontsize=8)
    return save_png(fig, path, dpi=100)


def _kv_figure(cr, colors, path: Path) -> Path:
    fig, ax = _axes()
    for v, c in zip(cr.variants, colors):
        st = v.steps
        if not len(st):
            continue
        bpt = v.kv_bytes_per_token_per_gpu
        t = st["start_time_s"].to_numpy(dtype=float)
        dt = st["step_time_s"].to_numpy(dtype=float)
        res_gb = st["kv_blocks_used"].to_numpy(dtype=float) * v.block_size * bpt / 1e9
        used_gb = st["kv_tokens_used"].to_numpy(dtype=float) * bpt / 1e9
        x, y = _binned(t, dt, res_gb)
        ax.plot(x, y, color=c, lw=1.2, label=plain_text(f"{v.name} reserved"))
        x, y = _binned(t, dt, used_gb)
        ax.plot(x, y, color=c, lw=1.0, ls="--", label=plain_text(f"{v.name} used"))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KV cache per GPU (GB)")
    ax.set_title("KV reserved (solid) vs used (dashed)")
    ax.legend(fontsize=7, ncol=2)
    return save_png(fig, path, dpi=100)


def _batch_figure(cr, colors, path: Path) -> Path:
    fig, ax = _axes()
    for i, (v, c) in enumerate(zip(cr.variants, colors)):
        st = v.steps
        if not len(st):
            continue
        x, y = _binned(st["start_time_s"].to_numpy(dtype=float),
                       st["step_time_s"].to_numpy(dtype=float),
                       st["batch_size"].to_numpy(dtype=float))
        ax.plot(x, y, color=c, lw=1.0, ls=_STYLES[i % len(_STYLES)], label=plain_text(v.name))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("batch size (sequences per step)")
    ax.set_title("Batch size over time")
    ax.legend(fontsize=8)
    return save_png(fig, path, dpi=100)


def write_compare_figures(cr, outdir: Path) -> dict[str, Path]:
    """Write the overlaid comparison figures; returns ``{figure name: path}``."""
    outdir = Path(outdir)
    colors = [f"C{i % 10}" for i in range(len(cr.variants))]
    with default_style():
        return {
            "ttft_cdf": _cdf_figure(cr, "ttft", "TTFT", outdir / FIGURE_FILES["ttft_cdf"]),
            "e2e_cdf": _cdf_figure(cr, "e2e", "E2E latency", outdir / FIGURE_FILES["e2e_cdf"]),
            "kv_memory": _kv_figure(cr, colors, outdir / FIGURE_FILES["kv_memory"]),
            "batch_size": _batch_figure(cr, colors, outdir / FIGURE_FILES["batch_size"]),
        }


# --------------------------------------------------------------------------------------------
# tables and report
# --------------------------------------------------------------------------------------------
def _cell(v: Any, spec: str | Callable[[Any], str]) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if callable(spec):
        return spec(v)
    try:
        return spec.format(v)
    except (TypeError, ValueError):
        return str(v)


def table_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells of the side-by-side table: one row per metric of
    :data:`TABLE_COLUMNS` (the verdict's rows only when the table has them, the offload tiers'
    when a variant had tiers, the rejected, cancelled and unfinished requests when a variant
    had any), one column per variant."""
    import pandas as pd

    recs = table.to_dict(orient="records")
    headers = ["metric"] + [str(r["variant"]) for r in recs]
    rows = []
    for c, h, f in TABLE_COLUMNS:
        if c in _OPTIONAL_COLUMNS and c not in table.columns:
            continue
        if c in _AUTOSCALE_COLUMNS and ("mean_replicas_held" not in table.columns
                                        or table["mean_replicas_held"].isna().all()):
            continue  # no variant autoscaled
        if c in _TIER_COLUMNS and (c not in table.columns or table[c].isna().all()):
            continue  # no variant had offload tiers
        if c in _NONZERO_COLUMNS and (c not in table.columns or not table[c].fillna(0).any()):
            continue  # no variant has such requests
        rows.append([h] + [_cell(None if pd.isna(r.get(c)) else r.get(c), f) for r in recs])
    return headers, rows


def _replicas_label(cluster) -> str:
    """``N``, or ``N (autoscaled MIN..MAX)`` for an autoscaled pool."""
    a = cluster.autoscale
    n = cluster.num_replicas
    return str(n) if a is None else f"{n} (autoscaled {a.min_replicas}..{a.max_replicas})"


def print_compare_table(table: pd.DataFrame, console=None, *, title: str = "servesim compare"):
    """Print the side-by-side table with rich; returns the :class:`rich.table.Table`."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # names as Text: a "[" in a name is no rich markup

    headers, rows = table_rows(table)
    t = Table(title=Text(title), header_style="bold")
    for i, h in enumerate(headers):
        # variant names break after their '-' separators so narrow terminals keep them whole
        t.add_column(Text(h if i == 0 else h.replace("-", "-\n")),
                     justify="left" if i == 0 else "right", no_wrap=i != 0)
    for r in rows:
        t.add_row(*map(Text, r))
    (console or Console()).print(t)
    return t


def render_compare_markdown(cr, figures: dict[str, Path] | None = None) -> str:
    """The text of ``compare.md``."""
    first = cr.variants[0] if cr.variants else None
    header = None
    if first is not None:
        def one(get, varied: str = "varied") -> str:
            """The variants' common value, or ``varied`` when a --vary changed it."""
            vals = {str(get(v)) for v in cr.variants}
            return vals.pop() if len(vals) == 1 else varied
        sc = first.scenario
        def code(get, varied: str) -> str:
            x = one(get, "")
            return md_code(x) if x else varied
        header = {"model": code(lambda v: v.scenario.model, "varied models"),
                  "gpu": code(lambda v: v.scenario.hardware.gpu, "varied GPUs"),
                  "replicas": one(lambda v: _replicas_label(v.scenario.cluster)),
                  "tp": one(lambda v: v.scenario.cluster.tensor_parallel_size),
                  "source": sc.workload.trace if sc.workload.trace else "synthetic",
                  "num_requests": one(lambda v: f"{len(v.requests):,}"),
                  "seed": one(lambda v: v.scenario.seed)}
    head, rows = table_rows(cr.table)
    return render(
        "compare.md.j2", name=cr.scenario_name, header=header,
        sources=(sources_by_label(cr.table["latency_sources"], cr.table["variant"])
                 if "latency_sources" in cr.table else []),
        varied=[(k, ", ".join(yaml_value(v) for v in vals)) for k, vals in cr.varies],
        same_requests=cr.same_requests, num_workloads=cr.num_workloads, table_header=head,
        bound="bound" in cr.table.columns,
        tiers=("tier_hit_pct" in cr.table.columns
               and not cr.table["tier_hit_pct"].isna().all()),
        table_rows=rows,
        static=any(yaml_value(v) == "static" for var in cr.variants for _k, v in var.assignments),
        figures=[(title, Path(figures[key]).name) for key, title in _FIGURE_TITLES
                 if figures and key in figures],
        runs=[(v.name, Md(", ").join(md_code(f"{k}={yaml_value(x)}") for k, x in v.assignments)
               or "(base)") for v in cr.variants])


def write_compare_report(cr, outdir: str | Path, *, figures: bool = True) -> dict[str, Path]:
    """Write ``compare.md``, ``compare.html``, ``compare.csv``, ``compare.json`` (and the
    figures) to ``outdir``; returns ``{"markdown", "html", "csv", "json", figure names}``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    figs = write_compare_figures(cr, out) if figures else {}
    cr.table.to_csv(out / CSV_FILE, index=False, float_format="%.6g")
    doc = {
        "scenario": cr.scenario_name,
        "varied": {k: vals for k, vals in cr.varies},
        "same_requests": cr.same_requests,
        "variants": [
            {"name": v.name, "settings": {k: x for k, x in v.assignments},
             "run_dir": v.name, "metrics": row}
            for v, row in zip(cr.variants, cr.table.to_dict(orient="records"))],
    }
    (out / JSON_FILE).write_text(json.dumps(json_safe(doc), indent=2) + "\n")
    pages = write_report(out, Path(REPORT_FILE).stem, render_compare_markdown(cr, figs))
    files = {"markdown": pages["md"], "html": pages["html"], "csv": out / CSV_FILE,
             "json": out / JSON_FILE}
    files.update(figs)
    return files
