"""The day plan's report (:mod:`simulator.planner.day`): the fleets compared, the day hour
by hour, and the figure of load, replicas and TTFT p99 over the day."""
from __future__ import annotations

import json
from pathlib import Path

from simulator.base.outdir import clear_outputs
from simulator.planner.spec import slo_text
from simulator.report.day import DAY_FIGURE, plot_day
from simulator.report.escape import Md, md_code
from simulator.report.format import adaptive, adaptive_ms, adaptive_pct, adaptive_usd
from simulator.report.render import write_report
from simulator.report.tables import markdown_table

__all__ = ["fleet_rows", "verdict", "write_day_plan"]

FLEET_HEADER = ["fleet", "replicas", "$ per day", "$ per 1M output tokens", "GPU-hours",
                "attainment (day)", "worst hour", "cold-start violations", "kWh per day",
                "power mean / peak (kW)", "J per output token"]


def fleet_rows(plan: dict) -> list[list[str]]:
    """One formatted row per fleet (:data:`FLEET_HEADER`); a fleet not evaluated shows why."""
    out = []
    for f in plan["fleets"]:
        if "error" in f:
            out.append([f["label"], adaptive(f["replicas"]), f["error"], "", "", "", "", "",
                        "", "", ""])
            continue
        cold = f.get("cold_start_violations")
        out.append([f["label"], _replicas(f), adaptive_usd(f["cost_usd"]),
                    adaptive_usd(f["cost_per_1m_output_tokens_usd"]), adaptive(f["gpu_hours"]),
                    adaptive_pct(f["slo_attainment"]),
                    f"{adaptive_pct(f['worst_hour_attainment'])} (hour {f['worst_hour']})",
                    "n/a (windowed)" if cold is None else adaptive(cold), *_energy_cells(f)])
    return out


def _energy_cells(f: dict) -> list[str]:
    """kWh over the day, mean / peak power in kW and J per output token of a fleet ("n/a"
    without a power model for its GPU, or when windowed)."""
    e = f.get("energy")
    if not e:
        return ["n/a"] * 3
    return [adaptive(e["energy_kwh"]),
            f"{adaptive(e['mean_power_w'] / 1e3)} / {adaptive(e['peak_power_w'] / 1e3)}",
            adaptive(e["joules_per_output_token"])]


def _replicas(f: dict) -> str:
    held = [r["mean_replicas_held"] for r in f["rows"] if r.get("mean_replicas_held") is not None]
    if held and max(held) - min(held) > 1e-9:
        return f"{adaptive(min(held))} to {adaptive(max(held))} (hourly means)"
    return adaptive(f["replicas"])


def _hour_table(plan: dict) -> tuple[list[str], list[list[str]]]:
    fleets = [f for f in plan["fleets"] if "error" not in f]
    header = ["hour", "arrivals/s"]
    for f in fleets:
        header += [f"{f['label']}: replicas", f"{f['label']}: attainment",
                   f"{f['label']}: TTFT p99 (ms)"]
    rows = []
    if not fleets:
        return header, rows
    by_hour = [{r["hour"]: r for r in f["rows"]} for f in fleets]
    for r0 in fleets[0]["rows"]:
        h = r0["hour"]
        row = [str(h), adaptive(r0["arrival_rate_rps"])]
        for bh in by_hour:
            r = bh.get(h, {})
            row += [adaptive(r.get("mean_replicas_held")), adaptive_pct(r.get("slo_attainment")),
                    adaptive_ms(r.get("ttft_p99_s"))]
        rows.append(row)
    return header, rows


def verdict(plan: dict) -> str:
    """Plain text: what each fleet costs per day against the static peak and how it holds
    the SLO, hour by hour."""
    ok = [f for f in plan["fleets"] if "error" not in f]
    peak = next((f for f in ok if f["kind"] == "static_peak"), None)
    if peak is None:
        return "No fleet was evaluated."
    target = plan["slo"]["attainment_target"]
    n_peak = plan["arrivals_by_hour"][str(plan["peak_hour"])]
    parts = [(f"The peak hour ({plan['peak_hour']}, {n_peak:,} arrivals) needs "
              f"{peak['replicas']} replicas to meet the {adaptive_pct(target)} attainment "
              f"target; held all day they cost {adaptive_usd(peak['cost_usd'])} per day.")]
    for f in ok:
        if f is peak:
            continue
        saving = 1.0 - f["cost_usd"] / peak["cost_usd"] if peak["cost_usd"] else None
        misses = sum(1 for r in f["rows"] if r.get("slo_attainment") is not None
                     and r["slo_attainment"] < target)
        than = ("as much" if saving is None or abs(saving) < 5e-4 else
                f"{adaptive_pct(abs(saving))} {'less' if saving > 0 else 'more'}")
        parts.append(f"The {f['label']} fleet costs {adaptive_usd(f['cost_usd'])} per day "
                     f"({than}) with {adaptive_pct(f['slo_attainment'])} "
                     f"attainment over the day; {misses} of {len(f['rows'])} hours miss the "
                     f"target (worst: hour {f['worst_hour']}, "
                     f"{adaptive_pct(f['worst_hour_attainment'])}).")
    for f in plan["fleets"]:
        if "error" in f:
            parts.append(f"The {f['label']} fleet was {f['error']}.")
    return " ".join(parts)


def write_day_plan(plan: dict, out: Path, *, figures: bool = True) -> dict[str, str]:
    """Write ``plan.json``, ``plan.md`` / ``plan.html`` and ``day.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    clear_outputs(out, ["plan.json", "plan.md", "plan.html", DAY_FIGURE])
    plan["verdict"] = verdict(plan)
    fig = None
    ok = {f["label"]: f["rows"] for f in plan["fleets"] if "error" not in f}
    if figures and ok:
        fig = plot_day(ok, out / DAY_FIGURE, ttft_slo_s=plan["slo"].get("ttft_s"),
                       title=f"{plan['name']}: load, replicas and TTFT p99").name
    header, rows = _hour_table(plan)
    sizing = "; ".join(f"{s['replicas']} replicas: {adaptive_pct(s['slo_attainment'])}"
                       for s in plan["sizing"])
    md = Md("# servesim plan (day): {}\n\nBase {}, {} requests over the day, SLOs per request "
            "{} (attainment >= {}).\n\n**Verdict.** {}\n\n{}\n\n").format(
        plan["name"], md_code(plan["base"]), f"{plan['num_requests']:,}",
        slo_text(plan["slo"]), adaptive_pct(plan["slo"]["attainment_target"]),
        plan["verdict"], markdown_table(FLEET_HEADER, fleet_rows(plan)))
    if plan["windowed"]:
        w = plan["windowed"]
        md += Md("**Approximation: every fleet was simulated as one {} s window per hour "
                 "(centred in the hour), each after a {} s lead-in that is not counted, on that "
                 "hour's fleet (simulator/runs/day.py); an hour's attainment and latencies are "
                 "its window's, its GPU-hours the fleet held for the whole hour. Cold-start "
                 "violations are not counted in this mode.**\n\n").format(
            adaptive(w["window_s"]), adaptive(w["lead_in_s"]))
    if fig:
        md += Md("![Load, replicas and TTFT p99 over the day]({})\n\n").format(Md(fig))
    md += Md("## The day, hour by hour\n\n{}\n\n").format(markdown_table(header, rows))
    md += Md("## How the fleets were sized\n\nStatic peak: the fewest replicas whose "
             "simulation of the peak hour alone (after a {} s lead-in, not counted) meets the "
             "target ({}). Static mean: the static peak's replicas x the mean hour's arrivals "
             "({}) / the peak hour's, rounded up. Autoscaled: the plan's day.autoscale "
             "(cluster.autoscale), starting from the static mean's replicas. $ per day is the "
             "GPU-hours (the integral of the replicas held) times the price; $ per 1M output "
             "tokens divides it by the output tokens of the day's completions. A cold-start "
             "violation is a request that missed an SLO while a replica added by the "
             "autoscaler was in its cold start (simulator/metrics/fleet.py). Energy: the GPUs' busy "
             "power per step and idle power while held (simulator/metrics/energy.py; n/a for "
             "a GPU without a sourced power model, or a windowed day); the peak is the largest "
             "mean over one second.\n").format(
        adaptive(plan["lead_in_s"]), sizing, adaptive(plan["mean_hour_arrivals"]))
    (out / "plan.json").write_text(json.dumps(plan, indent=2, sort_keys=True, default=str) + "\n")
    pages = write_report(out, "plan", md, title=f"servesim plan (day): {plan['name']}")
    files = {"json": str(out / "plan.json"), "md": str(pages["md"]), "html": str(pages["html"])}
    if fig:
        files["figure"] = str(out / fig)
    return files
