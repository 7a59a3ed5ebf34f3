"""The figures of a capacity plan (PNG under ``figures/``; the HTML page embeds them).

Cost vs SLO attainment at the target rate, capacity per configuration, the Pareto front
(output tokens/s per GPU vs tokens/s per user), latency vs load (p99 TTFT and p99 TPOT against
the probe rate) for the top configurations, and the busy-time bottleneck of the
recommendation (compute-bound, memory-bound and overhead shares over all steps, steps with
prefill work and pure-decode steps, each step classified on its own shape). Built with the
report toolkit's figure helpers (:mod:`simulator.report.figures`: object-oriented matplotlib,
default style, deterministic PNGs).
"""
from __future__ import annotations

from pathlib import Path

from simulator.planner.prune import is_skipped
from simulator.report.figures import default_style, figure, plain_text, save_png

__all__ = ["FIGURES", "FIGURE_TITLES", "plan_figures"]

#: Figure name -> file name (under ``figures/``).
FIGURES = {
    "cost_vs_attainment": "cost_vs_attainment.png",
    "capacity": "capacity.png",
    "pareto": "pareto.png",
    "latency_vs_load": "latency_vs_load.png",
    "bottleneck": "bottleneck.png",
}
#: Figure name -> its section title in the report.
FIGURE_TITLES = {"cost_vs_attainment": "Cost vs SLO attainment",
                 "capacity": "Capacity per configuration", "pareto": "Pareto front",
                 "latency_vs_load": "Latency vs load (top configurations)",
                 "bottleneck": "Bottleneck of the recommendation"}

#: Most configurations drawn as capacity bars.
_MAX_BARS = 30


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
                   facecolors="none", edgecolors="black", s=90,
                   label=plain_text(f"baseline ({b['label']})"))
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
    # candidates skipped as dominated have no measured capacity: not drawn as zero bars
    rows = [r for r in result.candidates if not is_skipped(r)][:_MAX_BARS]
    if result.baseline not in rows:
        rows = rows + [result.baseline]
    rows = rows[::-1]
    fig = _fig(7.5, max(2.5, 0.24 * len(rows) + 1.0))
    ax = fig.add_subplot(1, 1, 1)
    colors = ["tab:green" if r["passed"] else "tab:red" for r in rows]
    ax.barh(range(len(rows)), [r["capacity_rps"] for r in rows], color=colors, alpha=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([plain_text(("[baseline] " if r["is_baseline"] else "") + r["label"])
                        for r in rows], fontsize=6)
    ax.set_xlabel("capacity per replica under the SLOs (requests/s)")
    n_skip = sum(1 for r in result.candidates if is_skipped(r))
    ax.set_title("Capacity per configuration (green: passes; cheapest at the top)"
                 + (f"; {n_skip} skipped as dominated not shown" if n_skip else ""), fontsize=9)
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
    top = _top_rows(result)
    for r in top:
        pr = sorted(r.get("probes", []), key=lambda p: p["rate_rps"])
        if not pr:
            continue
        lab = plain_text(("[baseline] " if r.get("is_baseline") else "") + r["label"])
        # a probe stopped early (its verdict proven) measured only the part that ran: its
        # latencies are not the full run's, so it is marked, not joined into the curve
        full = [p for p in pr if not p.get("stopped_early")]
        cut = [p for p in pr if p.get("stopped_early")]
        for ax, key in zip(axes, ("ttft_p99_s", "tpot_p99_s")):
            line, = ax.plot([p["rate_rps"] for p in full if p.get(key) is not None],
                            [p[key] for p in full if p.get(key) is not None], "-o", ms=3,
                            label=lab)
            xs = [p["rate_rps"] for p in cut if p.get(key) is not None]
            if xs:
                ax.scatter(xs, [p[key] for p in cut if p.get(key) is not None], marker="x",
                           s=24, color=line.get_color(), zorder=3)
    if any(p.get("stopped_early") for r in top for p in r.get("probes", [])):
        axes[0].scatter([], [], marker="x", color="grey",
                        label="x: stopped early (failed; partial run)")
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
    marks = [h for h, t in zip(*axes[0].get_legend_handles_labels()) if t.startswith("x:")]
    if marks:
        axes[0].legend(handles=marks, fontsize=6, loc="upper left")
    return _save(fig, path)


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


