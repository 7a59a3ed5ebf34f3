"""The plan report: ``plan.md``, a self-contained ``plan.html``, ``plan.json``, tables, figures.

Figures (PNG under ``figures/``, embedded as base64 in the HTML): cost vs SLO attainment at
the target rate, capacity per configuration, the Pareto front (output tokens/s per GPU vs
tokens/s per user), latency vs load (p99 TTFT and p99 TPOT against the probe rate) for the
top configurations, and the busy-time bottleneck of the recommendation (compute-bound,
memory-bound and overhead shares over all steps, steps with prefill work and pure-decode
steps, each step classified on its own shape). Figures use the
object-oriented matplotlib API (no ``pyplot`` state; :mod:`simulator.report.figures`).

The text is the template ``simulator/report/templates/plan.md.j2`` (the HTML page is the
same Markdown rendered by :func:`simulator.report.render.write_report`). Fields a plan result
carries beyond the ones laid out here are shown generically, so a new field of the planner
reaches the report before it gets a place of its own: extra keys of the recommended
configuration as rows of its table, a ``gates`` mapping per candidate as a "Gates by
candidate" table, and extra fields of the :class:`~simulator.planner.plan.PlanResult` under
"More results".
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..experiments.grid import flatten_summary
from ..report.figures import default_style, figure, save_png
from ..report.format import fmt
from ..report.render import render, write_report
from ..report.tables import write_table

__all__ = ["FIGURES", "candidates_table", "plan_figures", "render_plan_markdown",
           "write_plan_report"]

#: Figure name -> file name (under ``figures/``).
FIGURES = {
    "cost_vs_attainment": "cost_vs_attainment.png",
    "capacity": "capacity.png",
    "pareto": "pareto.png",
    "latency_vs_load": "latency_vs_load.png",
    "bottleneck": "bottleneck.png",
}
_FIG_TITLES = {"cost_vs_attainment": "Cost vs SLO attainment",
               "capacity": "Capacity per configuration", "pareto": "Pareto front",
               "latency_vs_load": "Latency vs load (top configurations)",
               "bottleneck": "Bottleneck of the recommendation"}

_MAX_BARS = 30
_MAX_TABLE_ROWS = 40

#: Candidate fields the tables and the recommendation lay out (the rest is shown generically).
_KNOWN_CANDIDATE_KEYS = frozenset({
    "cached", "capacity_rate_scale", "capacity_rps", "capacity_rps_per_gpu", "confirm_extra",
    "confirm_summary", "confirmations", "cost_per_1m_input_tokens_usd",
    "cost_per_1m_output_tokens_usd", "cost_per_1m_tokens_usd", "error", "failed_gates", "gpu",
    "gpus", "headroom", "index", "is_baseline", "label", "num_simulations",
    "output_tps_per_gpu_at_capacity", "overrides", "passed", "price_source", "probes", "rank",
    "replicas", "search_note", "slice_ttft_p99_s_at_target", "slo_attainment_at_target",
    "tensor_parallel_size", "tpot_p99_s_at_target", "tps_per_user_at_capacity",
    "ttft_p99_s_at_target", "usd_per_gpu_hour", "usd_per_hour", "gates"})
#: PlanResult fields the report lays out (the rest goes to "More results").
_KNOWN_RESULT_FIELDS = frozenset({"plan", "status", "recommendation", "candidates", "baseline",
                                  "pareto", "workload", "stats", "base_scenario", "outdir",
                                  "files"})


# ---------------------------------------------------------------------- formatting
def _f(x: Any, spec: str = "{:.3g}", none: str = "-") -> str:
    return fmt(x, spec, none)


def _usd(x: Any) -> str:
    return _f(x, "${:,.2f}")


def _usd4(x: Any) -> str:
    return _f(x, "${:,.4f}")


def _ms(x: Any) -> str:
    return _f(None if x is None else 1000.0 * x, "{:.0f} ms")


def _generic(value: Any) -> str:
    """Any field value as text: numbers to 4 significant digits, mappings as ``k: v; ...``."""
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_generic(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_generic(v) for v in value) or "-"
    return _f(value, "{:.4g}")


def candidates_table(result) -> pd.DataFrame:
    """One row per evaluated configuration (ranked candidates, then the baseline)."""
    rows = []
    for r in list(result.candidates) + [result.baseline]:
        row = {k: v for k, v in r.items() if k not in (
            "probes", "confirmations", "confirm_summary", "confirm_extra", "overrides",
            "slice_ttft_p99_s_at_target", "failed_gates")}
        row["failed_gates"] = ";".join(r["failed_gates"])
        for k, v in r["overrides"].items():
            row[f"set.{k}"] = v if not isinstance(v, (dict, list)) else json.dumps(v)
        for k, v in (r.get("slice_ttft_p99_s_at_target") or {}).items():
            row[f"slice_ttft_p99_s_at_target.{k}"] = v
        row["probes"] = len(r["probes"])
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- figures
def _fig(w: float = 7.0, h: float = 3.8):
    return figure((w, h), dpi=100)


def _save(fig, path: Path) -> Path:
    return save_png(fig, path, tight=True)


def _fig_cost(result, path: Path) -> Path:
    fig = _fig()
    ax = fig.add_subplot(1, 1, 1)
    target = result.base_scenario["slo"].get("attainment_target")
    rows = [r for r in result.candidates if r["usd_per_hour"] is not None]
    for passed, marker, color, lab in ((True, "o", "tab:green", "passes every gate"),
                                       (False, "x", "tab:red", "fails a gate")):
        sel = [r for r in rows if r["passed"] == passed and
               r["slo_attainment_at_target"] is not None]
        if sel:
            ax.scatter([r["usd_per_hour"] for r in sel],
                       [r["slo_attainment_at_target"] for r in sel],
                       marker=marker, color=color, label=lab, alpha=0.8)
    b = result.baseline
    if b["usd_per_hour"] is not None and b["slo_attainment_at_target"] is not None:
        ax.scatter([b["usd_per_hour"]], [b["slo_attainment_at_target"]], marker="s",
                   facecolors="none", edgecolors="black", s=90, label=f"baseline ({b['label']})")
    c = result.recommendation["config"]
    if c.get("usd_per_hour") is not None and c.get("slo_attainment_at_target") is not None:
        ax.scatter([c["usd_per_hour"]], [c["slo_attainment_at_target"]], marker="*",
                   color="gold", edgecolors="black", s=220, label="recommended", zorder=5)
    if target is not None:
        ax.axhline(float(target), color="grey", ls="--", lw=1, label="attainment target")
    ax.set_xlabel("deployment cost at the target rate (USD per hour)")
    ax.set_ylabel("SLO attainment at the target rate")
    ax.set_title("Cost vs SLO attainment (sized deployments)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def _fig_capacity(result, path: Path) -> Path:
    rows = [r for r in result.candidates][:_MAX_BARS]
    if result.baseline not in rows:
        rows = rows + [result.baseline]
    rows = rows[::-1]
    fig = _fig(7.5, max(2.5, 0.24 * len(rows) + 1.0))
    ax = fig.add_subplot(1, 1, 1)
    colors = ["tab:green" if r["passed"] else "tab:red" for r in rows]
    ax.barh(range(len(rows)), [r["capacity_rps"] for r in rows], color=colors, alpha=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([("[baseline] " if r["is_baseline"] else "") + r["label"] for r in rows],
                       fontsize=6)
    ax.set_xlabel("capacity per replica under the SLOs (requests/s)")
    ax.set_title("Capacity per configuration (green: passes; cheapest at the top)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def _fig_pareto(result, path: Path) -> Path:
    fig = _fig()
    ax = fig.add_subplot(1, 1, 1)
    pts = [(p, r) for r in result.candidates + [result.baseline] for p in r["probes"]
           if p["feasible"] and p.get("output_tps_per_gpu") is not None
           and p.get("tps_per_user") is not None]
    if pts:
        ax.scatter([p["output_tps_per_gpu"] for p, _ in pts], [p["tps_per_user"] for p, _ in pts],
                   s=12, color="tab:blue", alpha=0.35, label="feasible operating points")
    chosen = result.recommendation["config"]
    mine = [p for p in chosen.get("probes", []) if p["feasible"]
            and p.get("output_tps_per_gpu") is not None]
    if mine:
        ax.scatter([p["output_tps_per_gpu"] for p in mine], [p["tps_per_user"] for p in mine],
                   s=40, color="gold", edgecolors="black", label="recommended config", zorder=4)
    if result.pareto:
        ax.plot([p["output_tps_per_gpu"] for p in result.pareto],
                [p["tps_per_user"] for p in result.pareto], "-o", color="black", ms=4,
                label="Pareto front")
    ax.set_xlabel("output tokens/s per GPU")
    ax.set_ylabel("tokens/s per user (1 / mean TPOT)")
    ax.set_title("Throughput per GPU vs speed per user (SLO-feasible probes)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no SLO-feasible probe", ha="center", va="center",
                transform=ax.transAxes)
    return _save(fig, path)


def _top_rows(result) -> list[dict]:
    rec = result.recommendation
    rows = [rec["config"]] + list(rec["runners_up"])
    if not any(r.get("is_baseline") for r in rows):
        rows.append(result.baseline)
    return rows[: result.plan.top_k + 1]


def _fig_latency(result, path: Path) -> Path:
    fig = _fig(9.0, 3.8)
    slo = result.base_scenario["slo"]
    axes = [fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)]
    for r in _top_rows(result):
        pr = sorted(r.get("probes", []), key=lambda p: p["rate_rps"])
        if not pr:
            continue
        lab = ("[baseline] " if r.get("is_baseline") else "") + r["label"]
        for ax, key in zip(axes, ("ttft_p99_s", "tpot_p99_s")):
            xs = [p["rate_rps"] for p in pr if p.get(key) is not None]
            ys = [p[key] for p in pr if p.get(key) is not None]
            ax.plot(xs, ys, "-o", ms=3, label=lab)
    for ax, key, title in ((axes[0], "ttft_s", "p99 TTFT"), (axes[1], "tpot_s", "p99 TPOT")):
        if slo.get(key) is not None:
            ax.axhline(slo[key], color="grey", ls="--", lw=1, label=f"SLO {key}")
        ax.set_yscale("log")
        ax.set_xlabel("arrival rate per replica (requests/s)")
        ax.set_ylabel(f"{title} (s)")
        ax.set_title(f"{title} vs load")
        ax.grid(alpha=0.3, which="both")
    if axes[1].get_legend_handles_labels()[0]:
        axes[1].legend(fontsize=6)
    return _save(fig, path)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fig_bottleneck(result, path: Path) -> Path | None:
    b = (result.recommendation.get("bottleneck") or {}).get("shares")
    if not b:
        return None
    # one bar per group, each as long as the group's share of busy time
    bars = [("all steps", 1.0, b)]
    for key, label in (("prefill_steps", "steps with prefill"),
                       ("decode_steps", "pure-decode steps")):
        g = b.get(key) or {}
        if g.get("time_share"):
            bars.append((f"{label}\n({g.get('step_share', 0):.0%} of steps)",
                         float(g["time_share"]), g))
    fig = _fig(7.0, 1.0 + 0.55 * len(bars))
    ax = fig.add_subplot(1, 1, 1)
    colors = (("compute_bound", "tab:orange"), ("memory_bound", "tab:blue"),
              ("overhead", "tab:grey"))
    for y, (_, width, g) in enumerate(bars):
        left = 0.0
        for k, color in colors:
            v = float(g.get(k) or 0.0) * width
            ax.barh([y], [v], left=left, color=color,
                    label=(f"{k.replace('_', '-')} {float(b.get(k, 0.0)):.0%}"
                           if y == 0 else None))
            left += v
    ax.set_xlim(0, 1)
    ax.set_yticks(range(len(bars)))
    ax.set_yticklabels([lab for lab, _, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of busy time (each step classified on its own shape)")
    ax.legend(fontsize=8, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return _save(fig, path)


def plan_figures(result, folder: Path) -> dict[str, Path]:
    """Draw every plan figure into ``folder``; returns name -> path of those drawn."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    with default_style():
        for name, fn in (("cost_vs_attainment", _fig_cost), ("capacity", _fig_capacity),
                         ("pareto", _fig_pareto), ("latency_vs_load", _fig_latency),
                         ("bottleneck", _fig_bottleneck)):
            p = fn(result, folder / FIGURES[name])
            if p is not None:
                out[name] = p
    return out


# ---------------------------------------------------------------------- text
_HEAD = ["rank", "configuration", "capacity/replica (rps)", "replicas", "GPUs", "headroom",
         "USD/h", "USD/1M in", "USD/1M out", "attainment", "p99 TTFT", "p99 TPOT", "gates"]


def _label(r: Mapping[str, Any]) -> str:
    return ("[baseline] " if r.get("is_baseline") else "") + r["label"]


def _cand_cells(r: Mapping[str, Any]) -> list[str]:
    return [str(r.get("rank") or ("baseline" if r.get("is_baseline") else "-")), _label(r),
            _f(r["capacity_rps"], "{:.2f}"), _f(r["replicas"], "{}"), _f(r["gpus"], "{}"),
            _f(r["headroom"], "{:.0%}"), _usd(r["usd_per_hour"]),
            _usd4(r["cost_per_1m_input_tokens_usd"]),
            _usd4(r["cost_per_1m_output_tokens_usd"]),
            _f(r["slo_attainment_at_target"], "{:.3f}"),
            _ms(r["ttft_p99_s_at_target"]), _ms(r["tpot_p99_s_at_target"]),
            "pass" if r["passed"] else ", ".join(r["failed_gates"]) or "fail"]


def _chosen_rows(c: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The "Recommended configuration" table, then any field it does not lay out."""
    rows = [
        ("configuration", _label(c)),
        ("overrides of the base", json.dumps(c.get("overrides", {}), sort_keys=True) or "{}"),
        ("GPU", f"{c['gpu']} at {_usd(c['usd_per_gpu_hour'])}/GPU-hour ({c['price_source']})"),
        ("tensor parallel size", str(c["tensor_parallel_size"])),
        ("capacity per replica", (f"{_f(c['capacity_rps'], '{:.2f}')} requests/s "
                                  f"({_f(c['capacity_rps_per_gpu'], '{:.2f}')} per GPU)")),
        ("replicas", _f(c["replicas"], "{}")),
        ("GPUs needed", _f(c["gpus"], "{}")),
        ("headroom over the target", _f(c["headroom"], "{:.0%}")),
        ("cost", f"{_usd(c['usd_per_hour'])} per hour"),
        ("cost per 1M input tokens", _usd4(c["cost_per_1m_input_tokens_usd"])),
        ("cost per 1M output tokens", _usd4(c["cost_per_1m_output_tokens_usd"])),
        ("cost per 1M tokens (input + output)", _usd4(c["cost_per_1m_tokens_usd"])),
        ("SLO attainment at the target", _f(c["slo_attainment_at_target"], "{:.4f}")),
        ("p99 TTFT / p99 TPOT at the target",
         f"{_ms(c['ttft_p99_s_at_target'])} / {_ms(c['tpot_p99_s_at_target'])}"),
        ("p99 TTFT by slice", ", ".join(f"{k}: {_ms(v)}" for k, v in
                                       (c.get("slice_ttft_p99_s_at_target") or {}).items())
         or "-"),
        ("gates", "all pass" if c["passed"] else ", ".join(c["failed_gates"])),
    ]
    rows += [(k, _generic(v)) for k, v in c.items() if k not in _KNOWN_CANDIDATE_KEYS]
    return rows


def _gate_cell(g: Any) -> str:
    """One gate of one candidate: ``pass`` / ``fail`` and its value against its limit."""
    if not isinstance(g, Mapping):
        return _generic(g)
    verdict = {True: "pass", False: "fail"}.get(g.get("passed"), "")
    rest = {k: v for k, v in g.items() if k != "passed"}
    detail = (f"{_generic(rest['value'])} vs {_generic(rest['limit'])}"
              if set(rest) == {"value", "limit"} else _generic(rest) if rest else "")
    return " ".join(p for p in (verdict, f"({detail})" if detail and verdict else detail) if p)


def _gates_by_candidate(result) -> tuple[list[str], list[list[str]]] | None:
    """A table of every candidate's ``gates`` mapping, when the candidates carry one."""
    rows = [r for r in list(result.candidates[:_MAX_TABLE_ROWS]) + [result.baseline]
            if isinstance(r.get("gates"), Mapping)]
    if not rows:
        return None
    names: list[str] = []
    for r in rows:
        names += [g for g in r["gates"] if g not in names]
    return (["configuration"] + names,
            [[_label(r)] + [_gate_cell(r["gates"][g]) if g in r["gates"] else "-"
                            for g in names] for r in rows])


def _more_results(result) -> list[tuple[str, str]]:
    """Fields of the plan result the report does not lay out (shown as they are)."""
    if not dataclasses.is_dataclass(result):
        return []
    return [(f.name, _generic(getattr(result, f.name))) for f in dataclasses.fields(result)
            if f.name not in _KNOWN_RESULT_FIELDS]


def _target_rows(result) -> list[tuple[str, str]]:
    w, plan, slo = result.workload, result.plan, result.base_scenario["slo"]
    return [
        ("target arrival rate", f"{_f(w['target_rate_rps'], '{:.3f}')} requests/s"),
        ("workload", (f"{w['source']} ({_window(w['window'])}, {w['num_requests_pool']} "
                      f"requests at {_f(w['pool_rate_rps'], '{:.3f}')} requests/s; mean "
                      f"{w['mean_prompt_tokens']:.0f} prompt / {w['mean_output_tokens']:.0f} "
                      "output tokens)")),
        ("SLOs (per request)", ", ".join(f"{k} <= {_ms(slo[k])}" for k in
                                         ("ttft_s", "tpot_s", "e2e_s") if slo.get(k)) or "none"),
        ("attainment target", _f(slo.get("attainment_target"), "{:.3f}")),
        ("gates", _gates_text(plan.gates.model_dump())),
        ("headroom", f"{plan.headroom:.0%}"),
        ("candidates", str(len(result.candidates))),
    ]


def _method(result) -> str:
    w, plan, st = result.workload, result.plan, result.stats
    return (f"Capacity searched on one replica with the first {w['probe_requests']} "
            f"requests of the window, arrival times divided by a rate scale (bracketing "
            f"x{plan.search.growth:g}, geometric bisection to {plan.search.rel_tol:.0%}, at "
            f"most {plan.search.max_probes} probes); replicas = ceil(target x "
            f"(1 + {plan.headroom:g}) / capacity), confirmed by a cluster simulation at the "
            f"target rate (router: {result.base_scenario['cluster']['router']}). "
            f"{st['num_simulations']} simulation(s) run, {st['num_cache_hits']} cache "
            f"hit(s), {st['wall_s']:.1f} s wall clock, backend {st['backend']} with "
            f"{st['jobs']} job(s).")


def _context(result, figs: dict[str, Path]) -> dict[str, Any]:
    rec = result.recommendation
    fails: dict[str, int] = {}
    for r in result.candidates:
        for g in r["failed_gates"]:
            fails[g] = fails.get(g, 0) + 1
    note = rec.get("bottleneck") or {}
    return {
        "title": f"Capacity plan: {result.plan.name}",
        "status": result.status,
        "headline": _headline(result),
        "reason": rec["reason"],
        "target_kv": _target_rows(result),
        "chosen_kv": _chosen_rows(rec["config"]),
        "bottleneck_text": _capital(note.get("summary") or note.get("text", "")),
        "bottleneck_advice": [_capital(a) for a in note.get("advice") or []],
        "head": _HEAD,
        "runner_rows": [_cand_cells(r) for r in rec["runners_up"]],
        "base_rows": [_cand_cells(result.baseline)],
        "all_rows": [_cand_cells(r) for r in result.candidates[:_MAX_TABLE_ROWS]],
        "more": max(0, len(result.candidates) - _MAX_TABLE_ROWS),
        "gate_rows": [[g, str(n)] for g, n in sorted(fails.items(), key=lambda kv: -kv[1])],
        "gates_by_candidate": _gates_by_candidate(result),
        "pareto_rows": [[p["label"], _f(p["rate_rps"], "{:.2f}"),
                         _f(p["output_tps_per_gpu"], "{:.0f}"), _f(p["tps_per_user"], "{:.1f}")]
                        for p in result.pareto],
        "more_results": _more_results(result),
        "method": _method(result),
        "figs": [(name, p.name) for name, p in figs.items()],
        "fig_titles": _FIG_TITLES,
    }


def _gates_text(g: dict) -> str:
    parts = []
    if g.get("slo_attainment"):
        parts.append("SLO attainment >= target")
    if g.get("slice_ttft_p99"):
        per = g.get("slice_ttft_p99_s") or {}
        extra = f" ({', '.join(f'{k} <= {_ms(v)}' for k, v in per.items())})" if per else ""
        parts.append(f"every slice's p99 TTFT <= its SLO{extra}")
    for key, text in (("max_rejected_fraction", "rejected fraction <= {}"),
                      ("max_preemptions_per_request", "preemptions per request <= {}"),
                      ("max_gpus", "GPUs <= {}"), ("max_usd_per_hour", "USD per hour <= {}")):
        if g.get(key) is not None:
            parts.append(text.format(g[key]))
    return "; ".join(parts) or "none"


def _window(w: dict) -> str:
    start, end = w.get("start_s") or 0.0, w.get("end_s")
    if end is None:
        return f"from {start:g} s to the end" if start else "whole trace"
    return f"window [{start:g}, {end:g}) s"


def _headline(result) -> str:
    c = result.recommendation["config"]
    if result.status == "none_passed":
        return (f"No configuration passes the gates: every candidate and the baseline "
                f"'{c['label']}' fail ({', '.join(c['failed_gates'])} for the baseline); keep the "
                "last known-good deployment")
    who = f"baseline '{c['label']}'" if c.get("is_baseline") else c["label"]
    if c.get("gpus") is None:
        return f"Recommend {who} (could not be sized: {', '.join(c['failed_gates'])})"
    return (f"Recommend {who}: {c['replicas']} replica(s) x TP{c['tensor_parallel_size']} "
            f"{c['gpu']} = {c['gpus']} GPU(s), {_usd(c['usd_per_hour'])}/h, "
            f"{_usd4(c['cost_per_1m_input_tokens_usd'])} per 1M input and "
            f"{_usd4(c['cost_per_1m_output_tokens_usd'])} per 1M output tokens, "
            f"headroom {_f(c['headroom'], '{:.0%}')}")


def render_plan_markdown(result, figs: dict[str, Path] | None = None) -> str:
    """The text of ``plan.md`` (figures: ``{name: path}`` of those drawn, under ``figures/``)."""
    return render("plan.md.j2", **_context(result, figs or {}))


def _probes_table(result) -> pd.DataFrame:
    probes = []
    for r in list(result.candidates) + [result.baseline]:
        for kind, recs in (("probe", r["probes"]), ("confirmation", r["confirmations"])):
            for p in recs:
                row = {"config_index": r["index"], "label": r["label"], "kind": kind}
                row.update(flatten_summary({k: v for k, v in p.items()
                                            if k != "failed_gates"}))
                row["failed_gates"] = ";".join(p.get("failed_gates") or [])
                probes.append(row)
    return pd.DataFrame(probes)


def write_plan_report(result, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """Write ``plan.md``, ``plan.html``, ``plan.json``, ``plan_table.{csv,parquet}``,
    ``pareto.csv``, ``probes.csv`` and ``figures/*.png``; returns name -> path."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    figs = plan_figures(result, outdir / "figures") if figures else {}
    files.update({f"figure:{k}": v for k, v in figs.items()})
    pages = write_report(outdir, "plan", render_plan_markdown(result, figs))
    (outdir / "plan.json").write_text(json.dumps(result.to_json(), indent=2, sort_keys=False)
                                      + "\n")
    files.update({"md": pages["md"], "html": pages["html"], "json": outdir / "plan.json"})
    t = write_table(candidates_table(result), outdir, "plan_table")
    files.update({"table_csv": t["csv"], "table_parquet": t["parquet"]})
    pd.DataFrame(result.pareto).to_csv(outdir / "pareto.csv", index=False, float_format="%.9g")
    _probes_table(result).to_csv(outdir / "probes.csv", index=False, float_format="%.9g")
    files.update({"pareto": outdir / "pareto.csv", "probes": outdir / "probes.csv"})
    return files
