"""The acceptance-economics report of ``servesim spec-sweep``: ``acceptance_economics.md``, a
self-contained ``acceptance_economics.html``, the figure, the tidy table and the runs.

The layout is ``templates/spec_sweep.md.j2``; its "Reading the numbers" bullets come from
:mod:`simulator.report.spec_sweep_reading`. Inputs are plain data: the sweep table and the
per-rate summaries of :func:`simulator.experiments.spec_sweep.sweep_rates` and the swept
scenario, so a report can be re-rendered from ``spec_sweep.json`` without simulating.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.bounds import BOUND_LABELS
from simulator.metrics.speculative import configured_alpha
from simulator.report.figures import default_style, figure, plain_text, save_png
from simulator.report.format import fmt, ms, pct, ratio
from simulator.report.render import render, write_report
from simulator.report.spec_sweep_reading import reading_the_numbers
from simulator.speculative.economics import (
    ALL,
    CROSSOVER_TOLERANCE,
    SPEEDUP_METRICS,
    crossovers,
    verify_over_plain,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["FIGURE_FILE", "REPORT_STEM", "plot_economics", "print_spec_sweep_table",
           "render_spec_sweep_markdown", "write_spec_sweep_report"]

#: The report's file stem (``.md`` and ``.html``) and its figure.
REPORT_STEM = "acceptance_economics"
FIGURE_FILE = "acceptance_economics.png"

_NA = "n/a"


def _f(x, spec: str = "{:.2f}") -> str:
    return fmt(x, spec, _NA)


def _ms(x) -> str:
    return ms(x, "{:.2f}", _NA)


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------
def plot_economics(df: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """PNG: TPOT p50 speedup, output throughput gain and E2E p50 speedup vs arrival rate.

    One line per slice (and ``all``); a dashed line at 1 (no gain).

    Parameters
    ----------
    df : pandas.DataFrame
        The sweep table.
    path : str or pathlib.Path
        Output file (parent folders are created).
    title : str, optional
        Figure title.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    with default_style():
        fig = figure((13.0, 4.0))
        names = [ALL] + sorted(n for n in df["slice"].unique() if n != ALL)
        rates = sorted(df["rate_scale"].unique())
        for i, (col, label) in enumerate(SPEEDUP_METRICS):
            ax = fig.add_subplot(1, 3, i + 1)
            for name in names:
                g = df[df["slice"] == name].sort_values("rate_scale")
                ax.plot(g["rate_scale"], g[col].astype(float), marker="o", markersize=4,
                        label=plain_text(name), linewidth=2.2 if name == ALL else 1.4,
                        color="black" if name == ALL else None)
            ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1)
            ax.set_xscale("log", base=2)
            ax.set_xticks(rates)
            ax.set_xticklabels([f"{r:g}" for r in rates])
            ax.minorticks_off()
            ax.set_xlabel("arrival rate multiplier (workload.rate_scale)")
            ax.set_ylabel(f"{label} (x)")
            ax.set_title(label, fontsize=10)
            ax.grid(True, alpha=0.3)
            if i == 0:
                ax.legend(fontsize=8, title="slice", title_fontsize=8)
        if title:
            fig.suptitle(plain_text(title), fontsize=11)
        return save_png(fig, path, dpi=100, tight=True)


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def _crossover_text(c: dict) -> str:
    if c["status"] == "crossover":
        rps = c.get("arrival_rate_rps")
        return f"x{c['rate']:.2f}" + (f" (~{rps:.1f} req/s)" if rps else "")
    return {"never_pays": "below 1 at every rate", "always_pays": "not reached (pays throughout)",
            "no_data": _NA}[c["status"]]


def _speedup_rows(df: pd.DataFrame, rates, slices) -> list[list[str]]:
    rows = []
    for r in rates:
        g = df[df["rate_scale"] == r].set_index("slice")
        a = g.loc[ALL]
        rows.append([f"{r:g}", _f(a["arrival_rate_rps"], "{:.1f}"),
                     (f"{_f(a['mean_batch_size_base'], '{:.1f}')} / "
                      f"{_f(a['mean_batch_size_spec'], '{:.1f}')}"),
                     (f"{_f(a['mean_num_waiting_base'], '{:.1f}')} / "
                      f"{_f(a['mean_num_waiting_spec'], '{:.1f}')}"),
                     f"{_ms(a['tpot_p50_base_s'])} / {_ms(a['tpot_p50_spec_s'])}",
                     ratio(a["tpot_speedup"])]
                    + [ratio(g.loc[n, "tpot_speedup"]) if n in g.index else _NA
                       for n in slices]
                    + [ratio(a["e2e_speedup"]), ratio(a["ttft_p99_gain"]),
                       ratio(a["throughput_gain"]),
                       (f"{_f(a['cost_per_1m_tokens_base_usd'], '${:.4f}')} / "
                        f"{_f(a['cost_per_1m_tokens_spec_usd'], '${:.4f}')}"),
                       f"{_bound(a.get('bound_base'))} / {_bound(a.get('bound_spec'))}"])
    return rows


def _bound(b) -> str:
    """A run's verdict in a cell (``-`` for a table written before runs had one)."""
    return BOUND_LABELS.get(b, _NA) if isinstance(b, str) else _NA


def _pooled(results: dict, rates, name: str) -> dict | None:
    """A slice's speculative counters pooled over every rate (None without drafts)."""
    drafts = acc_t = 0
    hist = exp = exp_rate = None
    for r in rates:
        b = (results[r]["speculative"].get("speculative") or {}).get("by_slice", {}).get(name)
        if not b:
            continue
        drafts += b["num_drafts"]
        acc_t += b["num_accepted_tokens"]
        h = np.asarray(b["accepted_length_hist"])
        hist = h if hist is None else hist + h
        exp, exp_rate = b["expected_tokens_per_step"], b["expected_acceptance_rate"]
    if not drafts:
        return None
    ks = np.arange(len(hist))
    mean = float((ks * hist).sum() / hist.sum())
    # standard error of the mean accepted length: sqrt(variance / samples)
    se = math.sqrt(float(((ks - mean) ** 2 * hist).sum() / hist.sum()) / hist.sum())
    return {"drafts": drafts, "accepted": acc_t, "se": se, "expected": exp,
            "expected_rate": exp_rate}


def _tokens_rows(results: dict, rates, slices, sp, k: int, c1) -> list[list[str]]:
    rows = []
    for n in slices:
        p = _pooled(results, rates, n)
        if p is None:
            continue
        exp = p["expected"]
        bound = exp / (1 + k * c1) if (exp is not None and c1 is not None) else None
        rows.append([n, f"{p['drafts']:,}",
                     fmt(configured_alpha(sp.acceptance_model(n)), "{:.3f}", "n/a (not i.i.d.)"),
                     _f(exp, "{:.3f}"),
                     f"{1 + p['accepted'] / p['drafts']:.3f} ± {p['se']:.3f}",
                     _f(p["expected_rate"], "{:.3f}"),
                     f"{p['accepted'] / (p['drafts'] * sp.num_verified_tokens):.3f}",
                     ratio(bound)])
    return rows


def _time_rows(results: dict, rates, slices) -> list[list[str]]:
    rows = []
    for r in rates:
        s = results[r]["speculative"]
        spb = s.get("speculative") or {}
        v, d = verify_over_plain(s) or (None, None)
        ests = []
        for n in slices:
            e = (spb.get("by_slice", {}).get(n) or {}).get("mean_acceptance_length")
            ests.append(ratio(e / (v + d)) if (e and v is not None and d is not None)
                        else _NA)
        busy = spb.get("busy_time_s")
        rows.append([f"{r:g}", _f(spb.get("mean_spec_batch_size"), "{:.1f}"),
                     pct(spb.get("draft_time_share"), "{:.0f}%", _NA),
                     pct(busy and spb["draft_prefill_time_s"] / busy, "{:.1f}%", _NA),
                     ratio(v), ratio(d)] + ests)
    return rows


def _verify_rows(summary: dict) -> list[list[str]]:
    rows = []
    for b in (summary.get("speculative") or {}).get("verification_cost_by_batch", []):
        rows.append([f"{b['batch_min']}-{b['batch_max']}", str(b["num_steps"]),
                     _ms(b["mean_plain_decode_time_s"]), _ms(b["mean_verify_time_s"]),
                     ratio(b["verify_over_plain_decode"]), _ms(b["mean_draft_time_s"]),
                     pct(b["draft_share"], "{:.0f}%", _NA)])
    return rows


def _reading_inputs(results: dict, rates) -> dict[str, dict]:
    """Per-rate figures of the speculative runs the "Reading the numbers" bullets use."""
    verify = {r: verify_over_plain(results[r]["speculative"]) for r in rates}
    prefill_share, counts = {}, {}
    for r in rates:
        spb = results[r]["speculative"].get("speculative") or {}
        busy = spb.get("busy_time_s")
        if busy:
            prefill_share[r] = float(spb.get("draft_prefill_time_s") or 0.0) / busy
        bins = spb.get("verification_cost_by_batch") or []
        if spb.get("num_steps"):
            counts[r] = (int(sum(b["num_steps"] for b in bins)), int(spb["num_steps"]))
    return {"verify": verify, "draft_prefill_share": prefill_share, "step_counts": counts}


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------
def _header(scenario, slices, rates, source: str) -> dict[str, Any]:
    sp = scenario.speculative
    acc = "; ".join(f"{n}: {sp.acceptance_model(n)!r}" for n in slices) or repr(
        sp.acceptance_model(None))
    return {"name": scenario.name, "model": scenario.model,
            "replicas": scenario.cluster.num_replicas,
            "tp": scenario.cluster.tensor_parallel_size, "gpu": scenario.hardware.gpu,
            "method": sp.method,
            "draft": sp.draft_model if sp.method == "draft_model" else sp.method,
            "k": sp.num_speculative_tokens, "cost_override": sp.draft_cost_ratio,
            "acceptance": acc, "source": source or "the scenario workload",
            "rates": ", ".join(f"{r:g}" for r in rates)}


def render_spec_sweep_markdown(df: pd.DataFrame, results: dict, scenario, *,
                               figure: str | None = FIGURE_FILE, source: str = "") -> str:
    """The text of ``acceptance_economics.md``.

    Parameters
    ----------
    df : pandas.DataFrame
        The sweep table (:func:`simulator.experiments.spec_sweep.sweep_rates`).
    results : dict
        ``{rate: {"speculative": summary, "baseline": summary}}``.
    scenario : Scenario
        The swept scenario (with its ``speculative`` block).
    figure : str or None
        File name of the PNG to show.
    source : str
        The workload source shown in the header (e.g. the trace path).

    Returns
    -------
    str
        Markdown text.
    """
    import pandas as pd

    sp = scenario.speculative
    k = sp.num_speculative_tokens
    rates = sorted(results)
    names = [ALL] + sorted(n for n in df["slice"].unique() if n != ALL)
    slices = names[1:]
    cross = crossovers(df)
    c1_series = df.loc[df["slice"] == ALL].sort_values("rate_scale")["draft_cost_ratio_batch1"]
    c1_series = pd.to_numeric(c1_series, errors="coerce").dropna()
    c1 = float(c1_series.iloc[0]) if len(c1_series) else (
        (results[rates[0]]["speculative"].get("speculative") or {}).get(
            "draft_cost_ratio_batch1"))
    hi = rates[-1]
    return render(
        "spec_sweep.md.j2", h=_header(scenario, slices, rates, source), figure=figure,
        tolerance_level=f"{1 - CROSSOVER_TOLERANCE:g}", slices=slices,
        speedup_header=(["rate x", "req/s", "batch base / spec", "waiting base / spec",
                         "TPOT p50 base / spec (ms)", "TPOT speedup"]
                        + [f"TPOT speedup {n}" for n in slices]
                        + ["E2E p50 speedup", "TTFT p99 gain", "throughput gain",
                           "$ per 1M tok base / spec", "bound base / spec"]),
        speedup_rows=_speedup_rows(df, rates, slices),
        speedup_labels=[lab for _, lab in SPEEDUP_METRICS],
        crossover_rows=[[n] + [_crossover_text(cross[n][col]) for col, _ in SPEEDUP_METRICS]
                        for n in names if n in cross],
        tokens_rows=_tokens_rows(results, rates, slices, sp, k, c1),
        c1=None if c1 is None else f"{c1:.3f}",
        time_header=(["rate x", "mean speculating batch", "draft share", "of which draft prefill",
                      "verify / plain", "draft / plain"] + [f"est. gain {n}" for n in slices]),
        time_rows=_time_rows(results, rates, slices),
        hi=f"{hi:g}", verify_rows=_verify_rows(results[hi]["speculative"]),
        reading=reading_the_numbers(df, k, cross=cross, **_reading_inputs(results, rates)))


def write_spec_sweep_report(outdir: str | Path, df: pd.DataFrame, results: dict, scenario, *,
                            source: str = "", figures: bool = True) -> dict[str, Path]:
    """Write ``acceptance_economics.{md,html,csv,png}`` and ``spec_sweep.json`` to ``outdir``.

    Parameters
    ----------
    outdir : str or pathlib.Path
        Output folder (created).
    df, results
        From :func:`simulator.experiments.spec_sweep.sweep_rates`.
    scenario : Scenario
        The swept scenario.
    source : str
        Workload source shown in the report.
    figures : bool
        Write the PNG (and show it).

    Returns
    -------
    dict
        ``{"md", "html", "csv", "json"[, "figure"]}`` -> path.
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    if figures:
        files["figure"] = plot_economics(
            df, out / FIGURE_FILE, title=f"{scenario.name}: speculation gain vs load "
                                         f"(k={scenario.speculative.num_speculative_tokens})")
    files["csv"] = out / f"{REPORT_STEM}.csv"
    df.to_csv(files["csv"], index=False, float_format="%.6g")
    payload = {"scenario": json.loads(scenario.model_dump_json()),
               "crossovers": crossovers(df),
               "runs": {f"{r:g}": v for r, v in sorted(results.items())}}
    files["json"] = out / "spec_sweep.json"
    files["json"].write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    text = render_spec_sweep_markdown(df, results, scenario,
                                      figure=FIGURE_FILE if figures else None, source=source)
    files.update(write_report(out, REPORT_STEM, text))
    return files


def print_spec_sweep_table(df: pd.DataFrame, rates, console, *, title: str) -> None:
    """Print the TPOT p50 speedup per rate and slice and each slice's TPOT crossover."""
    from rich.table import Table
    from rich.text import Text  # names as Text: a "[" in a slice name is no rich markup

    names = [ALL] + sorted(n for n in df["slice"].unique() if n != ALL)
    t = Table(title=Text(title))
    t.add_column("rate x", justify="right")
    t.add_column("req/s", justify="right")
    for n in names:
        t.add_column(Text(str(n)), justify="right")
    for r in rates:
        g = df[df["rate_scale"] == r].set_index("slice")
        t.add_row(f"{r:g}", _f(g.loc[ALL, "arrival_rate_rps"], "{:.1f}"),
                  *[ratio(g.loc[n, "tpot_speedup"]) if n in g.index else _NA for n in names])
    console.print(t)
    cross = crossovers(df)
    for n in names:
        console.print(f"crossover (TPOT) {n}: {_crossover_text(cross[n]['tpot_speedup'])}",
                      highlight=False, markup=False)
