"""The run report (``report.md`` and a self-contained ``report.html``) and the terminal summary.

:func:`write_run_report` turns one run's summary (:func:`simulator.metrics.summary.summarize`
plus the keys :func:`simulator.runs.scenario.run_scenario` adds), its tables and its scenario into the
report and the PNG figures it shows (:mod:`simulator.report.figures`). The report is
deterministic (no timestamps, sorted groups, the wall time left out), so it can be diffed
between runs and kept as a golden file. :func:`print_summary_table` prints the headline
numbers with rich.

The layout is the template ``templates/run.md.j2`` (with ``run_speculative.md.j2`` for runs
with speculative decoding); this module prepares its context, every number formatted here
(:mod:`simulator.report.format`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator import __version__
from simulator.report.autoscale import autoscale_headline, autoscale_section
from simulator.report.bounds import bounds_section
from simulator.report.day import DAY_FIGURE, day_section, plot_day
from simulator.report.degrade import degrade_section
from simulator.report.energy import energy_section, kwh_price_text
from simulator.report.escape import md_code
from simulator.report.figures import FIGURE_FILES, write_figures
from simulator.report.format import NA, adaptive, adaptive_ms, adaptive_pct, adaptive_usd, fmt, pct
from simulator.report.offload import offload_section
from simulator.report.render import context_mapping, render, write_report

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = [
    "HTML_FILE",
    "REPORT_FILE",
    "format_summary_rows",
    "price_sheet_rows",
    "print_summary_table",
    "render_run_report",
    "speculative_section",
    "synthesised_note",
    "write_run_report",
]

#: File name of the Markdown report inside the output folder.
REPORT_FILE = "report.md"
#: File name of the self-contained HTML page of the same report.
HTML_FILE = "report.html"

_FIGURE_TITLES: dict[str, str] = {
    "ttft_cdf": "TTFT CDF",
    "e2e_cdf": "E2E latency CDF",
    "queue_length": "Queue length over time",
    "batch_size": "Batch size over time",
    "kv_usage": "KV-cache usage over time",
}

_LATENCIES: tuple[tuple[str, str], ...] = (
    ("ttft_s", "TTFT"),
    ("tpot_s", "TPOT"),
    ("itl_s", "ITL"),
    ("e2e_latency_s", "E2E latency"),
    ("queue_delay_s", "Queue delay"),
)

#: Summary keys of the "KV memory and batching" section, in order.
_KV_KEYS = ("max_concurrency", "mean_kv_fragmentation", "kv_reserved_bytes_mean",
            "kv_used_bytes_mean", "kv_wasted_bytes_mean", "padding_waste", "num_swap_outs",
            "prefix_cache_hit_tokens", "num_gpu_blocks", "kv_cache_tokens")


# --------------------------------------------------------------------------------------------
# headline
# --------------------------------------------------------------------------------------------
def _stat(summary: Mapping[str, Any], key: str, stat: str) -> Any:
    return (summary.get(key) or {}).get(stat)


def _latency_row(label: str, stats: Mapping[str, Any] | None) -> list[str]:
    stats = stats or {}
    return [label] + [adaptive_ms(stats.get(k)) for k in ("mean", "p50", "p90", "p99", "max")] \
        + [adaptive(stats.get("count", 0))]


def _slo_text(summary: Mapping[str, Any]) -> str:
    slo = summary.get("slo") or {}
    parts = [f"{name} <= {adaptive_ms(slo.get(key))} ms"
             for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
             if slo.get(key) is not None]
    target = summary.get("slo_attainment_target")
    text = ", ".join(parts) if parts else "none configured (every completed request counts)"
    if target is not None:
        text += f"; attainment target {adaptive_pct(target)}"
    return text


def _offload_rows(s: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The headline row of a run with KV offload tiers (none without)."""
    off = s.get("kv_offload")
    if not off:
        return []
    hits = " + ".join(f"{adaptive_pct(t.get('hit_rate'))} {t.get('medium')}"
                      for t in off.get("tiers", []))
    return [("KV offload tier hits (of prompt tokens)",
             f"{hits}; mean load wait {adaptive_ms(off.get('load_wait_mean_s'))} ms")]


def format_summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The headline metrics of a summary as ``(label, formatted value)`` rows.

    Parameters
    ----------
    summary : mapping
        A dictionary from :func:`simulator.metrics.summary.summarize`.

    Returns
    -------
    list of (str, str)
        Rows in report order; missing values show as ``n/a``.
    """
    s = summary
    accounted = (
        f"{adaptive(s.get('num_requests'))} arrived: {adaptive(s.get('num_completed'))} "
        f"completed, {adaptive(s.get('num_rejected'))} rejected, "
        f"{adaptive(s.get('num_cancelled'))} cancelled, "
        f"{adaptive(s.get('num_unfinished'))} unfinished"
    )
    rows = [("Requests", accounted)]
    for key, label in _LATENCIES[:4]:
        rows.append((f"{label} p50 / p90 / p99 (ms)",
                     " / ".join(adaptive_ms(_stat(s, key, q)) for q in ("p50", "p90", "p99"))))
    attainment = adaptive_pct(s.get("slo_attainment"))
    if s.get("slo_attainment_target") is not None:
        verdict = {True: "met", False: "missed", None: NA}[s.get("slo_met")]
        attainment += f" (target {adaptive_pct(s.get('slo_attainment_target'))}: {verdict})"
    kv = (f"{adaptive_pct(s.get('mean_kv_cache_usage'))} mean, "
          f"{adaptive_pct(s.get('max_kv_cache_usage'))} max")
    gpu_hours = (f"{adaptive(s.get('gpu_hours'))} ({adaptive(s.get('num_gpus'))} GPUs at "
                 f"{adaptive_usd(s.get('usd_per_gpu_hour'))}/h)")
    rows += [
        ("Request throughput", adaptive(s.get("request_throughput_rps"), " req/s")),
        ("Output token throughput", adaptive(s.get("output_token_throughput_tps"), " tok/s")),
        ("Total token throughput", adaptive(s.get("total_token_throughput_tps"), " tok/s")),
        ("Goodput", adaptive(s.get("goodput_rps"), " req/s")),
        ("SLO attainment", attainment),
        ("Preemptions", adaptive(s.get("num_preemptions"))),
        ("KV-cache usage (busy time)", kv),
        *_offload_rows(s),
        *autoscale_headline(s),
        ("Mean batch size (busy time)", adaptive(s.get("mean_batch_size"))),
        ("Measured duration", adaptive(s.get("duration_s"), " s")),
        ("GPU-hours", gpu_hours),
        ("Cost", adaptive_usd(s.get("cost_usd"))),
        ("Cost per 1M output tokens", adaptive_usd(s.get("cost_per_1m_output_tokens_usd"))),
        ("Cost per 1M input tokens", adaptive_usd(s.get("cost_per_1m_input_tokens_usd"))),
        ("Cost per 1M tokens (input + output)", adaptive_usd(s.get("cost_per_1m_tokens_usd"))),
    ]
    if s.get("phase_cost") is not None:
        pc = s["phase_cost"]
        rows += [
            ("Price per 1M input tokens (prefill GPU time)",
             adaptive_usd(s.get("price_per_1m_input_tokens_usd"))
             + f" ({adaptive_pct(pc.get('prefill_share'))} of busy GPU time)"),
            ("Price per 1M output tokens (decode GPU time)",
             adaptive_usd(s.get("price_per_1m_output_tokens_usd"))),
        ]
    if s.get("sim_wall_s") is not None:
        speed = s.get("sim_speedup")
        rows.append(("Simulation wall time", adaptive(s.get("sim_wall_s"), " s")
                     + (f" ({adaptive(speed)}x real time)" if speed is not None else "")))
    return rows


# --------------------------------------------------------------------------------------------
# scenario
# --------------------------------------------------------------------------------------------
def _get(d: Mapping[str, Any], path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _first(d: Mapping[str, Any], *paths: str) -> Any:
    for p in paths:
        v = _get(d, p)
        if v is not None and not isinstance(v, Mapping):
            return v
        if isinstance(v, Mapping):
            named = v.get("name") or v.get("id") or v.get("kind") or v.get("type")
            if named is not None:
                return named
    return None


def _flatten(d: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key in d:
        value = d[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if value:
                yield from _flatten(value, name + ".")
            else:
                yield name, "{}"
        elif isinstance(value, (list, tuple)):
            if len(value) <= 8 and all(not isinstance(v, (Mapping, list, tuple)) for v in value):
                yield name, "[" + ", ".join(map(str, value)) + "]"
            else:
                yield name, f"[{len(value)} items]"
        else:
            yield name, value


#: Most ``k=v`` items of a nested section in the scenario table (all are in the settings).
_COMPACT_MAX_ITEMS = 12


def _compact(value: Any) -> str | None:
    """A nested section (e.g. ``scheduler``) as ``k=v, ...`` on one line.

    Unset (``None``) entries are left out and at most ``_COMPACT_MAX_ITEMS`` are shown; the
    full list is in the report's "All scenario settings" block.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return str(value)
    items = [f"{k}={v}" for k, v in _flatten(value) if v is not None]
    if len(items) > _COMPACT_MAX_ITEMS:
        items = items[:_COMPACT_MAX_ITEMS] + ["..."]
    return ", ".join(items) or None


def _scenario_rows(sc: Mapping[str, Any], summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, Any]] = [
        ("Name", _first(sc, "name", "scenario.name")),
        ("Model", _first(sc, "model", "model.name")),
        ("GPU", _first(sc, "hardware.gpu", "gpu", "hardware", "cluster.gpu")),
        ("Replicas", _first(sc, "cluster.num_replicas", "num_replicas", "replicas",
                            "cluster.replicas")),
        ("Tensor parallel", _first(sc, "cluster.tensor_parallel_size",
                                   "parallel.tensor_parallel_size", "tensor_parallel_size",
                                   "cluster.tp", "tp")),
        ("Router", _first(sc, "cluster.router", "router")),
        ("Scheduler", _compact(sc.get("scheduler"))),
        ("Workload", _compact(sc.get("workload"))),
        ("Seed", _first(sc, "seed")),
        ("GPUs in total", summary.get("num_gpus")),
    ]
    return [(label, str(value)) for label, value in rows if value is not None]


def _provenance_rows(sc: Mapping[str, Any]) -> list[tuple[str, str]]:
    prov = sc.get("provenance")
    if not prov:
        return []
    if isinstance(prov, Mapping):
        out = []
        for op in sorted(prov, key=str):
            label = prov[op]
            if isinstance(label, Mapping):
                label = _compact(label)
            out.append((str(op), str(label)))
        return out
    if isinstance(prov, (list, tuple)):
        return [(str(i), str(v)) for i, v in enumerate(prov)]
    return [("all", str(prov))]


def _group_rows(groups: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for name in sorted(groups, key=str):
        g = groups[name]
        rows.append([
            str(name),
            adaptive(g.get("num_requests")),
            adaptive(g.get("num_completed")),
            adaptive_ms(_stat(g, "ttft_s", "p50")),
            adaptive_ms(_stat(g, "ttft_s", "p99")),
            adaptive_ms(_stat(g, "tpot_s", "p50")),
            adaptive_ms(_stat(g, "tpot_s", "p99")),
            adaptive_ms(_stat(g, "e2e_latency_s", "p99")),
            adaptive_pct(g.get("slo_attainment")),
            adaptive(g.get("goodput_rps")),
        ])
    return rows


# --------------------------------------------------------------------------------------------
# optional sections
# --------------------------------------------------------------------------------------------
def _kv_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The "KV memory and batching" rows: bytes in GB, shares in percent (per GPU)."""
    rows = []
    for k in _KV_KEYS:
        v = summary.get(k)
        if v is None:
            continue
        if k.endswith("_bytes_mean"):
            val = f"{v / 1e9:.3f} GB"
        elif k in ("mean_kv_fragmentation", "padding_waste"):
            val = f"{100 * v:.1f}%"
        else:
            val = f"{v:,}" if isinstance(v, int) else f"{v}"
        rows.append((md_code(k), val))
    ps = summary.get("parallel_sampling")
    if ps:
        rows += [
            ("Parallel sampling", f"{ps['num_requests']:,} requests with n > 1 "
                                  f"({ps['num_sequences']:,} sequences run, "
                                  f"{ps['num_beam_search_requests']:,} beam search"
                                  + (f"; {ps['num_requests_not_run']:,} not run"
                                     if ps.get("num_requests_not_run") else "") + ")"),
            ("Blocks saved by copy-on-write sharing (peak)",
             (f"{ps['cow_blocks_saved_peak']:,} blocks = "
              f"{ps['cow_bytes_saved_peak'] / 1e9:.3f} GB vs n independent requests")),
            ("Partial prompt blocks copied on first write", f"{ps['num_cow_copies']:,}")]
    return rows


def synthesised_note(summary: Mapping[str, Any], scenario: Mapping[str, Any] | None = None
                     ) -> str | None:
    """One sentence saying which request fields the workload config assigned at random.

    Parameters
    ----------
    summary : mapping
        A run summary with ``workload_synthesised`` (``{field: config key}``, see
        :func:`simulator.workload.synthesised_labels`).
    scenario : mapping, optional
        The scenario (its ``workload.trace`` decides whether the sentence names a trace).

    Returns
    -------
    str or None
        ``None`` when nothing was synthesised.
    """
    synth = summary.get("workload_synthesised") or {}
    if not synth:
        return None
    trace = _get(scenario or {}, "workload.trace")
    fields = ", ".join(f"{f} ({k})" for f, k in synth.items())
    src = f"not read from the trace {trace}" if trace else "in a synthetic workload"
    return (f"synthesised request labels: {fields} were assigned at random by the workload "
            f"config, {src}; per-tenant, per-slice and per-priority results reflect the "
            "configured shares, not real clients")


def price_sheet_rows(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The context of the run report's "Price sheet" section (None without ``phase_cost``).

    Parameters
    ----------
    summary : mapping
        A run summary with ``phase_cost`` (:func:`simulator.metrics.cost.phase_cost`).

    Returns
    -------
    dict or None
        ``rows`` (prefill, decode, idle: GPU-seconds, share of busy time, cost, tokens,
        price per 1M tokens), ``check`` (input tokens x input price + output tokens x
        output price), ``cost``, ``rule`` and ``mixed`` (share of busy time in mixed steps).
    """
    pc = summary.get("phase_cost")
    if not pc:
        return None
    share = pc.get("prefill_share")
    return {
        "rows": [
            ["prefill (input)", adaptive(pc.get("prefill_gpu_s")), adaptive_pct(share),
             adaptive_usd(pc.get("prefill_cost_usd")), adaptive(summary.get("num_input_tokens")),
             adaptive_usd(pc.get("price_per_1m_input_tokens_usd"))],
            ["decode (output)", adaptive(pc.get("decode_gpu_s")),
             adaptive_pct(None if share is None else 1 - share),
             adaptive_usd(pc.get("decode_cost_usd")), adaptive(summary.get("num_output_tokens")),
             adaptive_usd(pc.get("price_per_1m_output_tokens_usd"))],
            ["idle (pro rata)", adaptive(pc.get("idle_gpu_s")), "-", "included above", "-",
             "-"]],
        "check": adaptive_usd(pc.get("price_check_usd")),
        "cost": adaptive_usd(summary.get("cost_usd")),
        "rule": pc.get("rule", ""),
        "mixed": adaptive_pct(pc.get("mixed_time_share")),
    }


def speculative_section(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The context of the run report's "Speculative decoding" section.

    Parameters
    ----------
    spec : mapping or None
        ``summary["speculative"]`` (:func:`simulator.metrics.speculative.speculative_summary`).

    Returns
    -------
    dict or None
        ``method``, ``draft``, ``k``, ``num_verified``, ``draft_share``, ``cost_ratio`` and
        the table ``rows`` (whole run, then each slice); None when ``spec`` is empty.
    """
    if not spec:
        return None
    rows = []
    blocks = [("all", spec)] + sorted((spec.get("by_slice") or {}).items())
    for name, b in blocks:
        whole = b is spec
        share = b.get("drafting_share_of_spec_steps" if whole else "draft_time_share")
        if whole:
            alpha_txt = "per slice"
        elif "configured_acceptance_alpha" in b:
            alpha_txt = fmt(b.get("configured_acceptance_alpha"), "{:.3f}", "n/a (not i.i.d.)")
        else:
            alpha_txt = NA
        rows.append([name, f"{b.get('num_drafts', 0):,}", alpha_txt,
                     fmt(b.get("acceptance_rate"), "{:.3f}", NA),
                     fmt(b.get("mean_acceptance_length"), "{:.3f}", NA),
                     fmt(b.get("expected_tokens_per_step"), "{:.3f}", NA),
                     fmt(b.get("accepted_tokens_per_draft"), "{:.3f}", NA),
                     pct(share, "{:.1f}%", NA)])
    return {"method": spec.get("method"), "draft": spec.get("draft_model") or spec.get("method"),
            "k": spec.get("num_speculative_tokens"), "num_verified": spec.get("num_verified_tokens"),
            "draft_share": pct(spec.get("draft_time_share"), "{:.1f}%", NA),
            "cost_ratio": fmt(spec.get("draft_cost_ratio_batch1"), "{:.3f}", NA), "rows": rows}


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def render_run_report(summary: Mapping[str, Any], scenario: Mapping[str, Any] | Any, *,
                      title: str | None = None,
                      figures: Iterable[str] = tuple(FIGURE_FILES),
                      day_figure: str | None = None) -> str:
    """Render the Markdown text of a run report (nothing is written).

    Parameters
    ----------
    summary : mapping
        A dictionary from :func:`simulator.metrics.summary.summarize`.
    scenario : mapping or pydantic model
        The scenario the run used. Looked up, when present: ``name``, ``model``, ``hardware``
        / ``gpu``, ``cluster.num_replicas``, ``cluster.tensor_parallel_size``,
        ``cluster.router``, ``scheduler``, ``workload``, ``seed``, ``provenance``
        (``{operator: label}``); every setting is also listed in a collapsed block.
    title : str, optional
        Report title (default ``servesim run: <scenario name>``).
    figures : iterable of str
        Names of the figures to embed (keys of :data:`FIGURE_FILES`).
    day_figure : str, optional
        The day figure's file to embed in the per-hour section (``summary["by_hour"]``).

    Returns
    -------
    str
        The Markdown document.
    """
    sc = context_mapping(scenario)
    name = _first(sc, "name", "scenario.name")
    if title is None:
        title = f"servesim run: {name}" if name else "servesim run"
    groups = []
    for key, label in (("by_slice", "slice"), ("by_tenant", "tenant")):
        g = summary.get(key) or {}
        if len(g) > 1:
            groups.append({"name": label, "rows": _group_rows(g)})
    context = {
        "title": title,
        "scenario_rows": _scenario_rows(sc, summary),
        "settings": [(md_code(k), v) for k, v in _flatten(sc) if not k.startswith("provenance")],
        # the wall time is the one non-deterministic figure: kept out of the report
        "headline": [row for row in format_summary_rows(summary)
                     if row[0] != "Simulation wall time"],
        "latency_rows": [_latency_row(label, summary.get(key)) for key, label in _LATENCIES],
        "slo_text": _slo_text(summary),
        "reject_rows": sorted((summary.get("reject_reasons") or {}).items()),
        "groups": groups,
        "figures": [(_FIGURE_TITLES.get(f, f), FIGURE_FILES[f]) for f in figures],
        "provenance_rows": _provenance_rows(sc),
        "price_sheet": price_sheet_rows(summary),
        "kv_rows": _kv_rows(summary),
        "synthesised_note": synthesised_note(summary, sc),
        "speculative": speculative_section(summary.get("speculative")),
        "degrade": degrade_section(summary),
        "offload": offload_section(summary),
        "day": day_section(summary, figure_name=day_figure),
        "autoscale_sections": autoscale_section(summary),
        "energy": energy_section(summary),
        "bounds": bounds_section(summary),
        "version": __version__,
    }
    return render("run.md.j2", **context)


def write_run_report(outdir: Path, summary: dict, requests: pd.DataFrame, steps: pd.DataFrame,
                     scenario: dict, *, title: str | None = None,
                     figures: bool = True) -> Path:
    """Write ``report.md``, ``report.html`` and the figures they show into ``outdir``.

    Parameters
    ----------
    outdir : pathlib.Path
        Output folder (created if missing). Receives the two reports and the PNGs named in
        :data:`simulator.report.figures.FIGURE_FILES`.
    summary : dict
        A dictionary from :func:`simulator.metrics.summary.summarize`.
    requests : pandas.DataFrame
        The run's request table (for the latency CDFs).
    steps : pandas.DataFrame
        The run's step table (for the time series).
    scenario : dict
        The scenario the run used (see :func:`render_run_report`).
    title : str, optional
        Report title.
    figures : bool, default True
        Draw and embed the figures.

    Returns
    -------
    pathlib.Path
        The path of ``report.md`` (``report.html`` is next to it).
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    names: tuple[str, ...] = ()
    day = None
    if figures:
        written = write_figures(out, requests, steps, slo=summary.get("slo"))
        names = tuple(written)
        if summary.get("by_hour"):
            day = plot_day({"fleet": summary["by_hour"]["rows"]}, out / DAY_FIGURE,
                           ttft_slo_s=(summary.get("slo") or {}).get("ttft_s")).name
    text = render_run_report(summary, scenario, title=title, figures=names, day_figure=day)
    return write_report(out, Path(REPORT_FILE).stem, text)["md"]


def _kwh_priced(scenario: Mapping[str, Any]) -> bool:
    """Whether the scenario (or one of its pools) states an electricity price."""
    sections = [scenario, *(scenario.get("pools") or [])]
    return any(((s or {}).get("cost") or {}).get("usd_per_kwh") is not None for s in sections)


def print_summary_table(summary: Mapping[str, Any], console=None, *,
                        title: str = "servesim run", scenario: Mapping[str, Any] | None = None):
    """Print the headline metrics as a compact rich table.

    Parameters
    ----------
    summary : mapping
        A dictionary from :func:`simulator.metrics.summary.summarize`.
    console : rich.console.Console, optional
        Where to print (a new stdout console by default).
    title : str, default "servesim run"
        Table title.
    scenario : mapping, optional
        The scenario (names the trace in the synthesised-labels note).

    Returns
    -------
    rich.table.Table
        The table that was printed.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # values as Text: a "[" in a name is no rich markup

    table = Table(title=Text(title), show_header=True, header_style="bold")
    table.add_column("Metric", no_wrap=True)
    table.add_column("Value")
    for label, value in format_summary_rows(summary):
        if label.startswith(("GPU-hours", "Cost per 1M input")):
            continue
        table.add_row(label, Text(value))
    for run in (bounds_section(summary) or {}).get("runs", []):
        table.add_row("What bounds the run" + (f" ({run['name']})" if run["name"] else ""),
                      Text(run["verdict"]))
    energy = summary.get("energy") or {}
    sc = context_mapping(scenario)
    if energy and not energy.get("available") and _kwh_priced(sc):  # asked for, not modelled
        table.add_row("GPU energy", Text(f"not modelled: {energy.get('reason') or NA}"))
    if energy.get("available"):  # the GPU has a power model (energy.md)
        cost = energy.get("energy_cost_usd")
        table.add_row("GPU energy", Text(
            f"{adaptive(energy.get('energy_kwh'), ' kWh')}, "
            f"{adaptive(energy.get('joules_per_output_token'), ' J')} per output token, "
            f"{adaptive(energy.get('mean_power_w'), ' W')} mean / "
            f"{adaptive(energy.get('peak_power_w'), ' W')} peak"
            + (f", {adaptive_usd(cost)} at {kwh_price_text(energy.get('usd_per_kwh'))}"
               if cost is not None else "")))
    note = synthesised_note(summary, sc)
    if note:
        table.add_row("[bold red]Note[/bold red]", Text(note))
    reasons = summary.get("reject_reasons") or {}
    if reasons:
        table.add_row("Reject reasons",
                      Text(", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))))
    (console or Console()).print(table)
    return table
