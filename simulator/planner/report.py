"""The plan report: ``plan.md``, a self-contained ``plan.html``, ``plan.json``, tables, figures.

The text is the template ``simulator/report/templates/plan.md.j2``; the HTML page is the same
Markdown rendered by :func:`simulator.report.render.write_report` with the figures
(:mod:`simulator.planner.figures`) embedded. This module prepares the template's context,
every number formatted here (:mod:`simulator.report.format`).

Fields a plan result carries beyond the ones laid out here are shown generically, so a new
field of the planner reaches the report before it gets a place of its own: extra keys of the
recommended configuration as rows of its table, a ``gates`` mapping per candidate as a
"Gates by candidate" table, and extra fields of the :class:`~simulator.planner.plan.PlanResult`
under "More results".
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.experiments.grid import flatten_summary
from simulator.planner.figures import FIGURE_TITLES, FIGURES, plan_figures
from simulator.planner.prune import is_skipped
from simulator.planner.search import is_lower_bound
from simulator.planner.spec import slo_text
from simulator.report.degrade import degrade_text
from simulator.report.escape import Md
from simulator.report.format import fmt
from simulator.report.render import render, write_report
from simulator.report.tables import write_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["FIGURES", "candidates_table", "plan_figures", "render_plan_markdown",
           "write_plan_report"]

#: Most candidates in each table (the files have them all).
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
    "ttft_p99_s_at_target", "usd_per_gpu_hour", "usd_per_hour", "gates",
    "is_last_known_good", "price_per_1m_input_tokens_usd", "price_per_1m_output_tokens_usd",
    "prefill_share_at_target", "slice_tpot_p99_s_at_target", "peak_kv_cache_usage_at_target",
    "gate_failures", "provenance", "provenance_weaker", "provenance_note",
    "provenance_weaker_operators", "quality", "degrade_at_target", "status", "same_config_as"})
#: PlanResult fields the report lays out (the rest goes to "More results").
_KNOWN_RESULT_FIELDS = frozenset({"plan", "status", "recommendation", "candidates", "baseline",
                                  "pareto", "workload", "stats", "base_scenario", "outdir",
                                  "files", "fallback", "last_known_good", "quality"})


# ---------------------------------------------------------------------- formatting
def _f(x: Any, spec: str = "{:.3g}", none: str = "-") -> str:
    return fmt(x, spec, none)


def capacity_text(r: Mapping[str, Any], key: str = "capacity_rps",
                  spec: str = "{:.2f}") -> str:
    """A configuration's capacity (``key``: ``capacity_rps`` or ``capacity_rps_per_gpu`` of a
    plan row ``r``) for a table cell, formatted by ``spec``: ``-`` when not measured (None: a
    skipped candidate) or when the search found no feasible rate (0.0 with no
    ``capacity_rate_scale``); ``>= X`` when only a lower bound (no probed rate failed); else
    the number (a measured zero included)."""
    x = r.get(key)
    if x is None or (x == 0 and r.get("capacity_rate_scale") is None):
        return "-"
    return (">= " if is_lower_bound(r) else "") + _f(x, spec)


def headroom_text(r: Mapping[str, Any]) -> str:
    """A configuration's headroom over the target for a table cell (``>= N%`` where its
    capacity is a lower bound: :func:`~simulator.planner.search.is_lower_bound`)."""
    x = _f(r.get("headroom"), "{:.0%}")
    return f">= {x}" if is_lower_bound(r) and r.get("headroom") is not None else x


def _capacity_row(c: Mapping[str, Any]) -> str:
    """The "capacity per replica" cell of the recommended configuration."""
    if capacity_text(c) == "-":
        return ("- (no probed rate meets the SLOs)" if c.get("capacity_rps") is not None
                else "- (not measured)")
    return f"{capacity_text(c)} requests/s ({capacity_text(c, 'capacity_rps_per_gpu')} per GPU)"


def _usd(x: Any) -> str:
    return _f(x, "${:,.2f}")


def _usd4(x: Any) -> str:
    return _f(x, "${:,.4f}")


def _ms(x: Any) -> str:
    return _f(None if x is None else 1000.0 * x, "{:.0f} ms")


def _pct(x: Any) -> str:
    return _f(None if x is None else 100.0 * x, "{:.1f}%")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _generic(value: Any) -> str:
    """Any field value as text: numbers to 4 significant digits, mappings as ``k: v; ...``."""
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_generic(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_generic(v) for v in value) or "-"
    return _f(value, "{:.4g}")


def candidates_table(result) -> pd.DataFrame:
    """One row per evaluated configuration (ranked candidates, then the baseline)."""
    import pandas as pd

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


# ---------------------------------------------------------------------- text
_HEAD = ["rank", "configuration", "capacity/replica (rps)", "replicas", "GPUs", "headroom",
         "USD/h", "USD/1M in (prefill)", "USD/1M out (decode)", "attainment", "p99 TTFT",
         "p99 TPOT", "peak KV", "provenance", "gates (failing: value vs bound)"]


def _cand_cells(r: Mapping[str, Any]) -> list[str]:
    return [str(r.get("rank") or ("baseline" if r.get("is_baseline") else
                                  ("fallback" if r.get("is_last_known_good") else "-"))),
            _name(r),
            capacity_text(r, "capacity_rps"), _f(r["replicas"], "{}"), _f(r["gpus"], "{}"),
            headroom_text(r), _usd(r["usd_per_hour"]),
            _usd4(r.get("price_per_1m_input_tokens_usd")),
            _usd4(r.get("price_per_1m_output_tokens_usd")),
            _f(r["slo_attainment_at_target"], "{:.3f}"),
            _ms(r["ttft_p99_s_at_target"]), _ms(r["tpot_p99_s_at_target"]),
            _pct(r.get("peak_kv_cache_usage_at_target")),
            _provenance_cell(r),
            "pass" if r["passed"] else _gates_cell(r)]


def _by_slice(r: Mapping[str, Any], key: str) -> str:
    return ", ".join(f"{k}: {_ms(v)}" for k, v in (r.get(key) or {}).items()) or "-"


def _chosen_rows(c: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The "Recommended configuration" table, then any field it does not lay out."""
    rows = [
        ("configuration", _name(c)),
        ("overrides of the base", json.dumps(c.get("overrides", {}), sort_keys=True) or "{}"),
        ("GPU", f"{c['gpu']} at {_usd(c['usd_per_gpu_hour'])}/GPU-hour ({c['price_source']})"),
        ("tensor parallel size", str(c["tensor_parallel_size"])),
        ("capacity per replica", _capacity_row(c)),
        ("replicas", _f(c["replicas"], "{}")),
        ("GPUs needed", _f(c["gpus"], "{}")),
        ("headroom over the target", headroom_text(c)),
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
        ("p99 TTFT by slice", _by_slice(c, "slice_ttft_p99_s_at_target")),
        ("p99 TPOT by slice", _by_slice(c, "slice_tpot_p99_s_at_target")),
        ("peak KV-cache use at the target", _pct(c.get("peak_kv_cache_usage_at_target"))),
        ("quality", _quality_text(c)),
        ("provenance", _provenance_text(c)),
        ("gates", "all pass" if c["passed"] else _gates_cell(c)),
    ]
    rows += [(k, _generic(v)) for k, v in c.items() if k not in _KNOWN_CANDIDATE_KEYS]
    return rows


def _target_rows(result) -> list[tuple[str, str]]:
    w, plan, slo = result.workload, result.plan, result.base_scenario["slo"]
    fb = result.fallback or {}
    return [
        ("target arrival rate", f"{_f(w['target_rate_rps'], '{:.3f}')} requests/s"),
        ("workload", (f"{w['source']} ({_window(w['window'])}, {w['num_requests_pool']} "
                      f"requests at {_f(w['pool_rate_rps'], '{:.3f}')} requests/s; mean "
                      f"{w['mean_prompt_tokens']:.0f} prompt / {w['mean_output_tokens']:.0f} "
                      "output tokens)")),
        ("SLOs (per request)", slo_text(slo)),
        ("attainment target", _f(slo.get("attainment_target"), "{:.3f}")),
        ("gates", _gates_text(plan.gates.model_dump())),
        ("quality gate", _quality_gate_text(result)),
        ("fallback", f"{fb.get('name', '-')} ({fb.get('source', '-')})"),
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
            "Prices per 1M input / output tokens split the deployment's hourly cost by the "
            "prefill share of the confirmation run's busy GPU time (per step: pure prefill "
            "or decode steps to their phase, mixed steps by operator times; idle time pro "
            "rata) and divide each phase by the tokens the target rate brings per hour. "
            + _speedups_text(result)
            + f"{st['num_simulations']} simulation(s) run, {st['num_cache_hits']} cache "
            f"hit(s), {st['wall_s']:.1f} s wall clock, backend {st['backend']} with "
            f"{st['jobs']} job(s).")


def _speedups_text(result) -> str:
    """How many runs stopped early and candidates were skipped (empty when none)."""
    # a candidate with the baseline's (or last known-good's) configuration shares its
    # evaluation: its runs are counted once, as stats.num_simulations counts them
    rows = [r for r in _evaluated(result) if not r.get("same_config_as")]
    runs = [p for r in rows for p in (r.get("probes") or [])
            + (r.get("confirmations") or [])
            + ([r["dominance_probe"]] if r.get("dominance_probe") else [])]
    n_dom = sum(1 for r in rows if r.get("dominance_probe"))
    n_stop = sum(1 for p in runs if p.get("stopped_early"))
    n_skip = sum(1 for r in result.candidates if is_skipped(r))
    out = ""
    if n_stop:
        kinds = "probe, dominance-probe and confirmation" if n_dom else \
            "probe and confirmation"
        out += (f"{n_stop} of {len(runs)} {kinds} runs stopped as soon as "
                "their finished requests proved a gate failed (search.early_stop). ")
    if n_skip:
        out += (f"{n_skip} candidate(s) skipped: they cannot cost at most a passing "
                "baseline's USD/h (search.prune_dominated). ")
    return out


def _evaluated(result) -> list[dict]:
    """Every evaluated configuration: the candidates, the baseline, the last known-good."""
    return list(result.candidates) + [result.baseline] + (
        [result.last_known_good] if result.last_known_good else [])


def _gate_tables(result) -> dict[str, list]:
    """Failed-gate counts, each configuration's failures and the provenance tables."""
    fails: dict[str, int] = {}
    for r in result.candidates:
        for g in r["failed_gates"]:
            fails[g] = fails.get(g, 0) + 1
    shown = list(result.candidates)[:_MAX_TABLE_ROWS] + _evaluated(result)[
        len(result.candidates):]
    return {
        "gate_rows": [[g, str(n)] for g, n in sorted(fails.items(), key=lambda kv: -kv[1])],
        "failure_rows": [[_name(r), f["text"]] for r in _evaluated(result)
                         for f in (r.get("gate_failures") or [])],
        "prov_rows": [[_name(r),
                       (r.get("provenance") or {}).get("label") or "unknown",
                       "WEAKER" if r.get("provenance_weaker") else "-"] for r in shown],
        "weaker_rows": [[_name(r), r.get("provenance_note") or ""]
                        for r in _evaluated(result) if r.get("provenance_weaker")],
    }


def _gate_cell(g: Any) -> str:
    """One gate of one candidate's ``gates`` mapping: ``pass`` / ``fail`` and its value
    against its limit."""
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
            [[_name(r)] + [_gate_cell(r["gates"][g]) if g in r["gates"] else "-"
                           for g in names] for r in rows])


def _more_results(result) -> list[tuple[str, str]]:
    """Fields of the plan result the report does not lay out (shown as they are)."""
    if not dataclasses.is_dataclass(result):
        return []
    return [(f.name, _generic(getattr(result, f.name))) for f in dataclasses.fields(result)
            if f.name not in _KNOWN_RESULT_FIELDS]


def _context(result, figs: dict[str, Path]) -> dict[str, Any]:
    rec = result.recommendation
    fb = result.fallback or {}
    side_head, side_rows = _side_by_side(rec["config"], fb.get("config"), fb,
                                         none_passed=result.status == "none_passed")
    note = rec.get("bottleneck") or {}
    base_rows = [_cand_cells(result.baseline)] + (
        [_cand_cells(result.last_known_good)] if result.last_known_good else [])
    return {
        "title": f"Capacity plan: {result.plan.name}",
        "status": result.status,
        "headline": _headline(result),
        "reason": rec["reason"],
        "synthesised": _synthesised_text(result),
        "target_kv": _target_rows(result),
        "side_head": side_head,
        "side_rows": side_rows,
        "chosen_kv": _chosen_rows(rec["config"]),
        "bottleneck_text": _capital(note.get("summary") or note.get("text", "")),
        "bottleneck_advice": [_capital(a) for a in note.get("advice") or []],
        "head": _HEAD,
        "runner_rows": [_cand_cells(r) for r in rec["runners_up"]],
        "base_rows": base_rows,
        **_gate_tables(result),
        "gates_by_candidate": _gates_by_candidate(result),
        "all_rows": [_cand_cells(r) for r in result.candidates[:_MAX_TABLE_ROWS]],
        "more": max(0, len(result.candidates) - _MAX_TABLE_ROWS),
        "pareto_rows": [[p["label"], _f(p["rate_rps"], "{:.2f}"),
                         _f(p["output_tps_per_gpu"], "{:.0f}"), _f(p["tps_per_user"], "{:.1f}")]
                        for p in result.pareto],
        "more_results": _more_results(result),
        "method": _method(result),
        "figs": [(name, p.name) for name, p in figs.items()],
        "fig_titles": FIGURE_TITLES,
    }


def _tag(r: dict) -> str:
    if r.get("is_baseline"):
        return "[baseline] "
    if r.get("is_last_known_good"):
        return "[last known-good] "
    return ""


def _name(r: dict) -> Md:
    """A configuration's tag and label as Markdown (the label escaped)."""
    return Md(_tag(r)) + r["label"]


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
    ("configuration", _name),
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
    ("degrade actions at the target", lambda r: degrade_text(r.get("degrade_at_target"))),
    ("provenance", _provenance_text),
    ("gates", lambda r: "all pass" if r.get("passed") else _gates_cell(r)),
)


def _side_by_side(rec: dict, fb: dict | None, meta: dict, *,
                  none_passed: bool = False) -> tuple[list[str], list[list[str]]]:
    """The recommendation and the fallback, field by field (with nothing passing, the first
    column is the fallback shown again, headed so: nothing is recommended)."""
    if not fb:
        return [], []
    what = "last known-good" if meta.get("kind") == "last_known_good" else "baseline"
    head = ["", "recommended", f"fallback ({what})"]
    if none_passed:
        head[1] = "nothing recommended (the fallback, failing)"
    elif meta.get("is_recommended"):
        head[1] = "recommended (= the fallback)"
    rows = [[name, fn(rec), fn(fb)] for name, fn in _SIDE_FIELDS]
    # the degrade row only when the scenario has degrade policies
    return head, [r for r in rows if not (r[0].startswith("degrade") and r[1] == r[2] == "-")]


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
                f"'{c['label']}' fail ({', '.join(c['failed_gates'])} for the {what}); "
                + ("keep the last known-good deployment" if c.get("is_last_known_good") else
                   "no last known-good deployment was given to fall back to"))
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
        fb_usd = fb.get("usd_per_hour")
        if fb_usd and c.get("usd_per_hour") is not None:  # what the change saves (or costs)
            d = c["usd_per_hour"] / fb_usd - 1
            what = (f"saves {-d:.0%} per hour" if d < 0 else
                    f"costs {d:.0%} more per hour" if d > 0 else "costs the same")
            fails = ("" if fb.get("passed") else f"; the {_tag(fb).strip('[] ')} fails "
                     f"{', '.join(fb.get('failed_gates') or ['a gate'])}")
            tail += f" at {_usd(fb_usd)}/h (the recommendation {what}{fails})"
    low = is_lower_bound(c)
    bound = (" (its capacity is a lower bound: no probed rate up to "
             f"{_f(c.get('capacity_rps'), '{:.2f}')} requests/s per replica failed; a longer "
             "trace, or a larger search.max_probes or search.max_rate_scale, brackets it)"
             ) if low else ""
    return (f"Recommend {who}: {c['replicas']} replica(s) x TP{c['tensor_parallel_size']} "
            f"{c['gpu']} = {c['gpus']} GPU(s), {_usd(c['usd_per_hour'])}/h, {prices}, "
            f"headroom {'at least ' if low else ''}{_f(c['headroom'], '{:.0%}')}{bound}{tail}")


def render_plan_markdown(result, figs: dict[str, Path] | None = None) -> str:
    """The text of ``plan.md`` (figures: ``{name: path}`` of those drawn, under ``figures/``)."""
    return render("plan.md.j2", **_context(result, figs or {}))


def _probes_table(result) -> pd.DataFrame:
    import pandas as pd

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
    return pd.DataFrame(probes)


def write_plan_report(result, outdir: Path, *, figures: bool = True) -> dict[str, Path]:
    """Write ``plan.md``, ``plan.html``, ``plan.json``, ``plan_table.{csv,parquet}``,
    ``pareto.csv``, ``probes.csv`` and ``figures/*.png``; returns name -> path."""
    import pandas as pd

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
