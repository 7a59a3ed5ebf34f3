"""The plan report: ``plan.md``, a self-contained ``plan.html``, ``plan.json``, tables, figures.

Figures (PNG under ``figures/``, embedded as base64 in the HTML): cost vs SLO attainment at
the target rate, capacity per configuration, the Pareto front (output tokens/s per GPU vs
tokens/s per user), latency vs load (p99 TTFT and p99 TPOT against the probe rate) for the
top configurations, and the busy-time bottleneck of the recommendation (compute-bound,
memory-bound and overhead shares over all steps, steps with prefill work and pure-decode
steps, each step classified on its own shape). Figures use the
object-oriented matplotlib API (no ``pyplot`` state).
"""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import jinja2
import matplotlib.style as mpl_style
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .grid import flatten_summary
from .sweep import write_table

__all__ = ["FIGURES", "candidates_table", "plan_figures", "write_plan_report"]

#: Figure name -> file name (under ``figures/``).
FIGURES = {
    "cost_vs_attainment": "cost_vs_attainment.png",
    "capacity": "capacity.png",
    "pareto": "pareto.png",
    "latency_vs_load": "latency_vs_load.png",
    "bottleneck": "bottleneck.png",
}

_MAX_BARS = 30
_MAX_TABLE_ROWS = 40


# ---------------------------------------------------------------------- formatting
def _f(x: Any, fmt: str = "{:.3g}", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        return fmt.format(x)
    return str(x)


def _usd(x: Any) -> str:
    return _f(x, "${:,.2f}")


def _usd4(x: Any) -> str:
    return _f(x, "${:,.4f}")


def _ms(x: Any) -> str:
    return _f(None if x is None else 1000.0 * x, "{:.0f} ms")


def _pct(x: Any) -> str:
    return _f(None if x is None else 100.0 * x, "{:.1f}%")


def candidates_table(result) -> pd.DataFrame:
    """One row per evaluated configuration (ranked candidates, then the baseline)."""
    rows = []
    for r in list(result.candidates) + [result.baseline]:
        row = {k: v for k, v in r.items() if k not in (
            "probes", "confirmations", "confirm_summary", "confirm_extra", "overrides",
            "slice_ttft_p99_s_at_target", "slice_tpot_p99_s_at_target", "failed_gates",
            "gate_failures", "provenance", "provenance_weaker_operators", "quality")}
        row["failed_gates"] = ";".join(r["failed_gates"])
        row["gate_failures"] = "; ".join(f["text"] for f in r.get("gate_failures") or [])
        row["provenance"] = (r.get("provenance") or {}).get("label")
        for k, v in ((r.get("quality") or {}).get("scores") or {}).items():
            row[f"quality.{k}"] = v
        for k, v in (r.get("slice_tpot_p99_s_at_target") or {}).items():
            row[f"slice_tpot_p99_s_at_target.{k}"] = v
        for k, v in r["overrides"].items():
            row[f"set.{k}"] = v if not isinstance(v, (dict, list)) else json.dumps(v)
        for k, v in (r.get("slice_ttft_p99_s_at_target") or {}).items():
            row[f"slice_ttft_p99_s_at_target.{k}"] = v
        row["probes"] = len(r["probes"])
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- figures
def _fig(w: float = 7.0, h: float = 3.8) -> Figure:
    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


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
    with mpl_style.context("default"):
        for name, fn in (("cost_vs_attainment", _fig_cost), ("capacity", _fig_capacity),
                         ("pareto", _fig_pareto), ("latency_vs_load", _fig_latency),
                         ("bottleneck", _fig_bottleneck)):
            p = fn(result, folder / FIGURES[name])
            if p is not None:
                out[name] = p
    return out


# ---------------------------------------------------------------------- text
def _context(result, figs: dict[str, Path]) -> dict[str, Any]:
    rec = result.recommendation
    c = rec["config"]
    slo = result.base_scenario["slo"]
    w = result.workload
    plan = result.plan

    def cand_cells(r: dict) -> list[str]:
        return [str(r.get("rank") or ("baseline" if r.get("is_baseline") else
                                      ("fallback" if r.get("is_last_known_good") else "-"))),
                _tag(r) + r["label"],
                _f(r["capacity_rps"], "{:.2f}"), _f(r["replicas"], "{}"), _f(r["gpus"], "{}"),
                _f(r["headroom"], "{:.0%}"), _usd(r["usd_per_hour"]),
                _usd4(r.get("price_per_1m_input_tokens_usd")),
                _usd4(r.get("price_per_1m_output_tokens_usd")),
                _f(r["slo_attainment_at_target"], "{:.3f}"),
                _ms(r["ttft_p99_s_at_target"]), _ms(r["tpot_p99_s_at_target"]),
                _pct(r.get("peak_kv_cache_usage_at_target")),
                _provenance_cell(r),
                "pass" if r["passed"] else _gates_cell(r)]

    head = ["rank", "configuration", "capacity/replica (rps)", "replicas", "GPUs", "headroom",
            "USD/h", "USD/1M in (prefill)", "USD/1M out (decode)", "attainment", "p99 TTFT",
            "p99 TPOT", "peak KV", "provenance", "gates (failing: value vs bound)"]
    all_rows = [cand_cells(r) for r in result.candidates[:_MAX_TABLE_ROWS]]
    runner_rows = [cand_cells(r) for r in rec["runners_up"]]
    base_rows = [cand_cells(result.baseline)] + (
        [cand_cells(result.last_known_good)] if result.last_known_good else [])
    fb = result.fallback or {}
    fb_row = fb.get("config")
    side_head, side_rows = _side_by_side(c, fb_row, fb)
    chosen_kv = [
        ("configuration", _tag(c) + c["label"]),
        ("overrides of the base", json.dumps(c.get("overrides", {}), sort_keys=True) or "{}"),
        ("GPU", f"{c['gpu']} at {_usd(c['usd_per_gpu_hour'])}/GPU-hour ({c['price_source']})"),
        ("tensor parallel size", str(c["tensor_parallel_size"])),
        ("capacity per replica", (f"{_f(c['capacity_rps'], '{:.2f}')} requests/s "
                                  f"({_f(c['capacity_rps_per_gpu'], '{:.2f}')} per GPU)")),
        ("replicas", _f(c["replicas"], "{}")),
        ("GPUs needed", _f(c["gpus"], "{}")),
        ("headroom over the target", _f(c["headroom"], "{:.0%}")),
        ("cost", f"{_usd(c['usd_per_hour'])} per hour"),
        ("price per 1M input tokens (prefill GPU time)",
         (f"{_usd4(c.get('price_per_1m_input_tokens_usd'))} (prefill "
          f"{_pct(c.get('prefill_share_at_target'))} of busy GPU time)")),
        ("price per 1M output tokens (decode GPU time)",
         _usd4(c.get("price_per_1m_output_tokens_usd"))),
        ("all GPU time per 1M input / output / all tokens (alternative views, not a split)",
         (f"{_usd4(c['cost_per_1m_input_tokens_usd'])} / "
          f"{_usd4(c['cost_per_1m_output_tokens_usd'])} / "
          f"{_usd4(c['cost_per_1m_tokens_usd'])}")),
        ("SLO attainment at the target", _f(c["slo_attainment_at_target"], "{:.4f}")),
        ("p99 TTFT / p99 TPOT at the target",
         f"{_ms(c['ttft_p99_s_at_target'])} / {_ms(c['tpot_p99_s_at_target'])}"),
        ("p99 TTFT by slice", ", ".join(f"{k}: {_ms(v)}" for k, v in
                                       (c.get("slice_ttft_p99_s_at_target") or {}).items())
         or "-"),
        ("p99 TPOT by slice", ", ".join(f"{k}: {_ms(v)}" for k, v in
                                       (c.get("slice_tpot_p99_s_at_target") or {}).items())
         or "-"),
        ("peak KV-cache use at the target", _pct(c.get("peak_kv_cache_usage_at_target"))),
        ("quality", _quality_text(c)),
        ("provenance", _provenance_text(c)),
        ("gates", "all pass" if c["passed"] else _gates_cell(c)),
    ]
    fails = {}
    for r in result.candidates:
        for g in r["failed_gates"]:
            fails[g] = fails.get(g, 0) + 1
    gate_rows = [[g, str(n)] for g, n in sorted(fails.items(), key=lambda kv: -kv[1])]
    failure_rows = [[_tag(r) + r["label"], f["text"]]
                    for r in list(result.candidates) + [result.baseline]
                    + ([result.last_known_good] if result.last_known_good else [])
                    for f in (r.get("gate_failures") or [])]
    prov_rows = [[_tag(r) + r["label"], (r.get("provenance") or {}).get("label") or "unknown",
                  "WEAKER" if r.get("provenance_weaker") else "-"]
                 for r in list(result.candidates)[:_MAX_TABLE_ROWS] + [result.baseline]
                 + ([result.last_known_good] if result.last_known_good else [])]
    weaker_rows = [[_tag(r) + r["label"], r.get("provenance_note") or ""]
                   for r in list(result.candidates) + [result.baseline]
                   + ([result.last_known_good] if result.last_known_good else [])
                   if r.get("provenance_weaker")]
    pareto_rows = [[p["label"], _f(p["rate_rps"], "{:.2f}"),
                    _f(p["output_tps_per_gpu"], "{:.0f}"), _f(p["tps_per_user"], "{:.1f}")]
                   for p in result.pareto]
    target_kv = [
        ("target arrival rate", f"{_f(w['target_rate_rps'], '{:.3f}')} requests/s"),
        ("workload", (f"{w['source']} ({_window(w['window'])}, {w['num_requests_pool']} "
                      f"requests at {_f(w['pool_rate_rps'], '{:.3f}')} requests/s; mean "
                      f"{w['mean_prompt_tokens']:.0f} prompt / {w['mean_output_tokens']:.0f} "
                      "output tokens)")),
        ("SLOs (per request)", ", ".join(f"{k} <= {_ms(slo[k])}" for k in
                                         ("ttft_s", "tpot_s", "e2e_s") if slo.get(k)) or "none"),
        ("attainment target", _f(slo.get("attainment_target"), "{:.3f}")),
        ("gates", _gates_text(plan.gates.model_dump())),
        ("quality gate", _quality_gate_text(result)),
        ("fallback", f"{fb.get('name', '-')} ({fb.get('source', '-')})"),
        ("headroom", f"{plan.headroom:.0%}"),
        ("candidates", str(len(result.candidates))),
    ]
    st = result.stats
    method = (f"Capacity searched on one replica with the first {w['probe_requests']} "
              f"requests of the window, arrival times divided by a rate scale (bracketing "
              f"x{plan.search.growth:g}, geometric bisection to {plan.search.rel_tol:.0%}, at "
              f"most {plan.search.max_probes} probes); replicas = ceil(target x "
              f"(1 + {plan.headroom:g}) / capacity), confirmed by a cluster simulation at the "
              f"target rate (router: {result.base_scenario['cluster']['router']}). "
              "Prices per 1M input / output tokens split the deployment's hourly cost by the "
              "prefill share of the confirmation run's busy GPU time (per step: pure prefill "
              "or decode steps to their phase, mixed steps by operator times; idle time pro "
              "rata) and divide each phase by the tokens the target rate brings per hour. "
              f"{st['num_simulations']} simulation(s) run, {st['num_cache_hits']} cache "
              f"hit(s), {st['wall_s']:.1f} s wall clock, backend {st['backend']} with "
              f"{st['jobs']} job(s).")
    return {
        "title": f"Capacity plan: {plan.name}",
        "status": result.status,
        "headline": _headline(result),
        "reason": rec["reason"],
        "target_kv": target_kv,
        "chosen_kv": chosen_kv,
        "bottleneck_text": ((rec.get("bottleneck") or {}).get("summary")
                            or (rec.get("bottleneck") or {}).get("text", "")),
        "bottleneck_advice": list((rec.get("bottleneck") or {}).get("advice") or []),
        "head": head,
        "runner_rows": runner_rows,
        "base_rows": base_rows,
        "all_rows": all_rows,
        "more": max(0, len(result.candidates) - _MAX_TABLE_ROWS),
        "gate_rows": gate_rows,
        "failure_rows": failure_rows,
        "weaker_rows": weaker_rows,
        "prov_rows": prov_rows,
        "side_head": side_head,
        "side_rows": side_rows,
        "synthesised": _synthesised_text(result),
        "pareto_rows": pareto_rows,
        "method": method,
        "figs": [(name, p.name) for name, p in figs.items()],
        "figs_b64": [(name, base64.b64encode(p.read_bytes()).decode()) for name, p in
                     figs.items()],
        "fig_titles": {"cost_vs_attainment": "Cost vs SLO attainment",
                       "capacity": "Capacity per configuration", "pareto": "Pareto front",
                       "latency_vs_load": "Latency vs load (top configurations)",
                       "bottleneck": "Bottleneck of the recommendation"},
    }


def _tag(r: dict) -> str:
    if r.get("is_baseline"):
        return "[baseline] "
    if r.get("is_last_known_good"):
        return "[last known-good] "
    return ""


def _gates_cell(r: dict) -> str:
    """Each failing gate with its value against its bound (``fail`` without details)."""
    det = r.get("gate_failures") or []
    if det:
        return "; ".join(f["text"] for f in det)
    return ", ".join(r.get("failed_gates") or []) or "fail"


def _provenance_cell(r: dict) -> str:
    p = r.get("provenance") or {}
    c = p.get("counts") or {}
    n = p.get("num_operators") or 0
    if not p:
        txt = "unknown"
    else:
        txt = "/".join(f"{c.get(k, 0)}{k[0].upper()}" for k in ("measured", "fitted",
                                                                 "datasheet")) + f" of {n}"
        if not p.get("engine_fitted_on") and p.get("engine_profile"):
            txt += ", engine unfitted"
    if r.get("provenance_weaker"):
        weak = ", ".join(r.get("provenance_weaker_operators") or {}) or "engine"
        txt = f"WEAKER ({weak}): " + txt
    return txt


def _provenance_text(r: dict) -> str:
    p = r.get("provenance") or {}
    txt = p.get("label") or "unknown"
    if r.get("provenance_note"):
        txt += f" -- {r['provenance_note']}"
    return txt


def _quality_text(r: dict) -> str:
    q = r.get("quality")
    if not q:
        return "no quality gate"
    sc = ", ".join(f"{k}: {_f(v, '{:.4g}', 'no score')} (min {_f(q['minimums'].get(k), '{:.4g}')})"
                   for k, v in q["scores"].items())
    return f"{q['metric']} from entry '{q['entry'] or 'none matched'}': {sc}"


def _quality_gate_text(result) -> str:
    q = result.quality
    g = result.plan.quality
    if not q or g is None:
        return "none"
    mins = ", ".join(f"{k} >= {v:g}" for k, v in sorted(g.min_score_by_slice.items()))
    every = f"every slice >= {g.min_score:g}" if g.min_score is not None else ""
    return (f"{q['metric']} ({q['source']}): " + "; ".join(x for x in (every, mins) if x)
            + f"; unscored slices {g.unscored}")


def _synthesised_text(result) -> str:
    synth = (result.workload or {}).get("synthesised") or {}
    if not synth:
        return ""
    fields = ", ".join(f"{f} ({k})" for f, k in synth.items())
    return (f"Synthesised request labels: {fields} were assigned at random by the workload "
            "config, not read from the trace; the per-slice gates and quality scores apply "
            "to those assigned shares")


_SIDE_FIELDS = (
    ("configuration", lambda r: _tag(r) + r["label"]),
    ("deployment", lambda r: (f"{r['replicas']} x TP{r['tensor_parallel_size']} {r['gpu']} = "
                              f"{r['gpus']} GPU(s)") if r.get("gpus") else "not sized"),
    ("USD per hour", lambda r: _usd(r.get("usd_per_hour"))),
    ("price per 1M input tokens (prefill)",
     lambda r: _usd4(r.get("price_per_1m_input_tokens_usd"))),
    ("price per 1M output tokens (decode)",
     lambda r: _usd4(r.get("price_per_1m_output_tokens_usd"))),
    ("SLO attainment at the target", lambda r: _f(r.get("slo_attainment_at_target"), "{:.4f}")),
    ("p99 TTFT / p99 TPOT", lambda r: f"{_ms(r.get('ttft_p99_s_at_target'))} / "
                                      f"{_ms(r.get('tpot_p99_s_at_target'))}"),
    ("peak KV-cache use", lambda r: _pct(r.get("peak_kv_cache_usage_at_target"))),
    ("quality", _quality_text),
    ("provenance", _provenance_text),
    ("gates", lambda r: "all pass" if r.get("passed") else _gates_cell(r)),
)


def _side_by_side(rec: dict, fb: dict | None, meta: dict) -> tuple[list[str], list[list[str]]]:
    """The recommendation and the fallback, field by field."""
    if not fb:
        return [], []
    what = "last known-good" if meta.get("kind") == "last_known_good" else "baseline"
    head = ["", "recommended", f"fallback ({what})"]
    if meta.get("is_recommended"):
        head[1] = "recommended (= the fallback)"
    return head, [[name, fn(rec), fn(fb)] for name, fn in _SIDE_FIELDS]


def _gates_text(g: dict) -> str:
    parts = []
    if g.get("slo_attainment"):
        parts.append("SLO attainment >= target")
    for flag, key, what in (("slice_ttft_p99", "slice_ttft_p99_s", "TTFT"),
                            ("slice_tpot_p99", "slice_tpot_p99_s", "TPOT")):
        if g.get(flag):
            per = g.get(key) or {}
            extra = f" ({', '.join(f'{k} <= {_ms(v)}' for k, v in per.items())})" if per else ""
            parts.append(f"every slice's p99 {what} <= its SLO{extra}")
    for key, text in (("max_rejected_fraction", "rejected fraction <= {}"),
                      ("max_preemptions_per_request", "preemptions per request <= {}"),
                      ("max_peak_kv_cache_usage", "peak KV-cache use <= {:.0%}"),
                      ("max_gpus", "GPUs <= {}"), ("max_usd_per_hour", "USD per hour <= {}"),
                      ("max_usd_per_1m_output_tokens",
                       "price per 1M output tokens (decode GPU time) <= ${}"),
                      ("max_usd_per_1m_input_tokens",
                       "price per 1M input tokens (prefill GPU time) <= ${}")):
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
        what = "last known-good" if c.get("is_last_known_good") else "baseline"
        return (f"No configuration passes the gates: every candidate and the {what} "
                f"'{c['label']}' fail ({', '.join(c['failed_gates'])} for the {what}); keep the "
                "last known-good deployment")
    who = (f"baseline '{c['label']}'" if c.get("is_baseline") else
           f"last known-good '{c['label']}'" if c.get("is_last_known_good") else c["label"])
    if c.get("gpus") is None:
        return f"Recommend {who} (could not be sized: {', '.join(c['failed_gates'])})"
    p_in = c.get("price_per_1m_input_tokens_usd")
    p_out = c.get("price_per_1m_output_tokens_usd")
    if p_in is not None and p_out is not None:
        prices = (f"{_usd4(p_in)} per 1M input and {_usd4(p_out)} per 1M output tokens "
                  "(phase-attributed)")
    else:
        prices = (f"{_usd4(c['cost_per_1m_input_tokens_usd'])} per 1M input and "
                  f"{_usd4(c['cost_per_1m_output_tokens_usd'])} per 1M output tokens "
                  "(all GPU time each)")
    fb = (result.fallback or {}).get("config")
    tail = ""
    if fb and fb.get("label") != c.get("label"):
        tail = f"; fallback: {_tag(fb).strip('[] ')} '{fb['label']}'"
    return (f"Recommend {who}: {c['replicas']} replica(s) x TP{c['tensor_parallel_size']} "
            f"{c['gpu']} = {c['gpus']} GPU(s), {_usd(c['usd_per_hour'])}/h, {prices}, "
            f"headroom {_f(c['headroom'], '{:.0%}')}{tail}")


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    def esc(s: str) -> str:
        return str(s).replace("|", "\\|")
    lines = ["| " + " | ".join(map(esc, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(lines)


def _markdown(ctx: dict) -> str:
    kv = ["field", "value"]
    parts = [f"# {ctx['title']}", "",
             f"**{ctx['headline']}.**", "",
             f"Status: `{ctx['status']}`: {ctx['reason']}.", ""]
    if ctx["synthesised"]:
        parts += [f"> **Note: {ctx['synthesised']}.**", ""]
    parts += ["## Target", "", _md_table(kv, [list(x) for x in ctx["target_kv"]]), ""]
    if ctx["side_rows"]:
        parts += ["## Recommendation and fallback", "",
                  _md_table(ctx["side_head"], ctx["side_rows"]), ""]
    parts += ["## Recommended configuration", "",
             _md_table(kv, [list(x) for x in ctx["chosen_kv"]]), "",
             "### Bottleneck", "", _capital(ctx["bottleneck_text"]) + ".", ""]
    if ctx["bottleneck_advice"]:
        parts += ["What the numbers suggest:", ""]
        parts += [f"- {_capital(a)}." for a in ctx["bottleneck_advice"]] + [""]
    parts += ["## Runners-up", ""]
    parts += [_md_table(ctx["head"], ctx["runner_rows"]) if ctx["runner_rows"]
              else "None (no other candidate passed every gate).", ""]
    parts += ["## Baseline" + (" and last known-good" if len(ctx["base_rows"]) > 1 else ""),
              "", _md_table(ctx["head"], ctx["base_rows"]), ""]
    if ctx["gate_rows"]:
        parts += ["## Failed gates", "",
                  "Candidates failing each gate (a candidate may fail several):", "",
                  _md_table(["gate", "candidates"], ctx["gate_rows"]), ""]
    if ctx["failure_rows"]:
        parts += ["### Why each configuration fails", "",
                  _md_table(["configuration", "failing gate: value vs bound"],
                            ctx["failure_rows"]), ""]
    if ctx["weaker_rows"]:
        parts += ["## Provenance warnings", "",
                  ("These configurations are ranked on weaker evidence than the best-backed "
                   "candidate (operator times from fitted efficiencies or the datasheet "
                   "roofline where another candidate's are measured):"), "",
                  _md_table(["configuration", "provenance"], ctx["weaker_rows"]), ""]
    parts += ["## Provenance per configuration", "",
              ("Where each configuration's operator times come from (measured tables with "
               "their engine version, fitted efficiencies, datasheet roofline) and which "
               "recorded runs the engine profile's constants were fitted on."), "",
              _md_table(["configuration", "evidence", "weaker than the best-backed?"],
                        ctx["prov_rows"]), ""]
    parts += ["## All candidates", "",
              "Ranked by cost at the target rate; failing candidates last.", "",
              _md_table(ctx["head"], ctx["all_rows"]), ""]
    if ctx["more"]:
        parts += [f"... and {ctx['more']} more (see `plan_table.csv`).", ""]
    parts += ["## Pareto front", "",
              ("Output tokens/s per GPU vs tokens/s per user (1 / mean TPOT) over every "
               "SLO-feasible capacity probe."), ""]
    parts += [_md_table(["configuration", "rate (rps/replica)", "output tok/s/GPU",
                         "tok/s/user"], ctx["pareto_rows"]) if ctx["pareto_rows"] else "Empty.",
              ""]
    if ctx["figs"]:
        parts += ["## Figures", ""]
        for name, fname in ctx["figs"]:
            parts += [f"### {ctx['fig_titles'][name]}", "", f"![{name}](figures/{fname})", ""]
    parts += ["## Method", "", ctx["method"], ""]
    return "\n".join(parts)


_HTML = jinja2.Template("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ c.title }}</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1150px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}.ok{color:#1a7f37}.bad{color:#b3261e}
.headline{font-size:1.15em;background:#f6f8fa;border-left:4px solid {{ '#1a7f37' if
c.status == 'candidate' else '#b3261e' }};padding:.6em 1em}
img{max-width:100%;border:1px solid #eee}
</style></head><body>
<h1>{{ c.title }}</h1>
<p class="headline"><b>{{ c.headline }}.</b><br>Status <code>{{ c.status }}</code>:
{{ c.reason }}.</p>
{% if c.synthesised %}<p class="bad"><b>Note: {{ c.synthesised }}.</b></p>{% endif %}
<h2>Target</h2>
<table>{% for k, v in c.target_kv %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}
</table>
{% if c.side_rows %}<h2>Recommendation and fallback</h2>
<table id="recommendation-vs-fallback"><tr>{% for h in c.side_head %}<th>{{ h }}</th>
{% endfor %}</tr>{% for r in c.side_rows %}<tr><th>{{ r[0] }}</th><td>{{ r[1] }}</td>
<td>{{ r[2] }}</td></tr>{% endfor %}</table>{% endif %}
<h2>Recommended configuration</h2>
<table>{% for k, v in c.chosen_kv %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}
</table>
<h3>Bottleneck</h3><p>{{ c.bottleneck_text[:1] | upper }}{{ c.bottleneck_text[1:] }}.</p>
{% if c.bottleneck_advice %}<p>What the numbers suggest:</p><ul>{% for a in c.bottleneck_advice
%}<li>{{ a[:1] | upper }}{{ a[1:] }}.</li>{% endfor %}</ul>{% endif %}
{% macro table(head, rows) %}<table><tr>{% for h in head %}<th>{{ h }}</th>{% endfor %}</tr>
{% for r in rows %}<tr>{% for v in r %}<td{% if loop.last %} class="{{ 'ok' if v == 'pass'
else 'bad' }}"{% endif %}>{{ v }}</td>{% endfor %}</tr>{% endfor %}</table>{% endmacro %}
<h2>Runners-up</h2>
{% if c.runner_rows %}{{ table(c.head, c.runner_rows) }}{% else %}<p>None (no other
candidate passed every gate).</p>{% endif %}
<h2>Baseline{% if c.base_rows|length > 1 %} and last known-good{% endif %}</h2>
{{ table(c.head, c.base_rows) }}
{% if c.gate_rows %}<h2>Failed gates</h2>
<table><tr><th>gate</th><th>candidates</th></tr>{% for g, n in c.gate_rows %}<tr><td>{{ g }}
</td><td>{{ n }}</td></tr>{% endfor %}</table>{% endif %}
{% if c.failure_rows %}<h3>Why each configuration fails</h3>
<table id="gate-failures"><tr><th>configuration</th><th>failing gate: value vs bound</th></tr>
{% for a, b in c.failure_rows %}<tr><td>{{ a }}</td><td class="bad">{{ b }}</td></tr>
{% endfor %}</table>{% endif %}
{% if c.weaker_rows %}<h2>Provenance warnings</h2><p>These configurations are ranked on weaker
evidence than the best-backed candidate:</p>
<table id="provenance-warnings"><tr><th>configuration</th><th>provenance</th></tr>
{% for a, b in c.weaker_rows %}<tr><td>{{ a }}</td><td class="bad">{{ b }}</td></tr>
{% endfor %}</table>{% endif %}
<h2>Provenance per configuration</h2>
<table id="provenance"><tr><th>configuration</th><th>evidence</th>
<th>weaker than the best-backed?</th></tr>{% for a, b, w in c.prov_rows %}<tr><td>{{ a }}</td>
<td>{{ b }}</td><td{% if w != '-' %} class="bad"{% endif %}>{{ w }}</td></tr>{% endfor %}
</table>
<h2>All candidates</h2><p>Ranked by cost at the target rate; failing candidates last.</p>
{{ table(c.head, c.all_rows) }}
{% if c.more %}<p>... and {{ c.more }} more (see plan_table.csv).</p>{% endif %}
<h2>Pareto front</h2><p>Output tokens/s per GPU vs tokens/s per user (1 / mean TPOT) over every
SLO-feasible capacity probe.</p>
<table><tr><th>configuration</th><th>rate (rps/replica)</th><th>output tok/s/GPU</th>
<th>tok/s/user</th></tr>{% for r in c.pareto_rows %}<tr>{% for v in r %}<td>{{ v }}</td>
{% endfor %}</tr>{% endfor %}</table>
{% for name, b64 in c.figs_b64 %}<h2>{{ c.fig_titles[name] }}</h2>
<img alt="{{ name }}" src="data:image/png;base64,{{ b64 }}">{% endfor %}
<h2>Method</h2><p>{{ c.method }}</p>
</body></html>
""", autoescape=True)


def write_plan_report(result, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """Write ``plan.md``, ``plan.html``, ``plan.json``, ``plan_table.{csv,parquet}``,
    ``pareto.csv``, ``probes.csv`` and ``figures/*.png``; returns name -> path."""
    outdir = Path(outdir)
    files: dict[str, Path] = {}
    figs = plan_figures(result, outdir / "figures") if figures else {}
    files.update({f"figure:{k}": v for k, v in figs.items()})
    ctx = _context(result, figs)
    (outdir / "plan.md").write_text(_markdown(ctx))
    (outdir / "plan.html").write_text(_HTML.render(c=ctx))
    (outdir / "plan.json").write_text(json.dumps(result.to_json(), indent=2, sort_keys=False)
                                      + "\n")
    files.update({"md": outdir / "plan.md", "html": outdir / "plan.html",
                  "json": outdir / "plan.json"})
    t = write_table(candidates_table(result), outdir, "plan_table")
    files.update({"table_csv": t["csv"], "table_parquet": t["parquet"]})
    pd.DataFrame(result.pareto).to_csv(outdir / "pareto.csv", index=False, float_format="%.9g")
    probes = []
    for r in list(result.candidates) + [result.baseline]:
        for kind, recs in (("probe", r["probes"]), ("confirmation", r["confirmations"])):
            for p in recs:
                row = {"config_index": r["index"], "label": r["label"], "kind": kind}
                row.update(flatten_summary({k: v for k, v in p.items()
                                            if k not in ("failed_gates", "gate_failures")}))
                row["failed_gates"] = ";".join(p.get("failed_gates") or [])
                row["gate_failures"] = "; ".join(f["text"] for f in
                                                 p.get("gate_failures") or [])
                probes.append(row)
    pd.DataFrame(probes).to_csv(outdir / "probes.csv", index=False, float_format="%.9g")
    files.update({"pareto": outdir / "pareto.csv", "probes": outdir / "probes.csv"})
    return files
