"""Capacity plans: search every candidate configuration, size it, pick the cheapest that
passes every gate, or fall back to the named baseline.

For each candidate (a point of ``search_space``; one replica) the planner searches the
capacity under the SLOs (:mod:`simulator.planner.search`), sizes the replicas for the target
rate with the headroom, confirms the sized cluster by simulation and prices it:

* ``usd_per_hour = gpus x usd_per_gpu_hour`` (``gpus = replicas x tensor_parallel_size x pipeline_parallel_size``);
* ``cost_per_1m_input_tokens_usd = usd_per_hour / (target x mean prompt tokens x 3600) x 1e6``
  and likewise for output tokens and for both together: at a fixed target rate the whole
  GPU cost is divided by one token kind at a time, as the run summary does (DESIGN.md
  glossary: input and output shown apart; the figures are alternative views, not a split).

The recommendation is the passing candidate with the lowest ``usd_per_hour``; ties
(:data:`TIE_RULE`): the baseline's configuration wins (a passing baseline that costs as much
as the cheapest passing candidate is recommended itself, status ``baseline``), then the last
known-good's (status ``last_known_good``), then fewer GPUs, then more headroom (more deployed
capacity), then list order. With no passing candidate the plan
recommends the baseline (status ``baseline_fallback``) when the baseline passes, and
recommends nothing (status ``none_passed``; the baseline is still reported for comparison)
when it fails too; either way it lists which gates failed. The Pareto front is drawn from every feasible capacity probe:
output tokens/s per GPU against tokens/s per user (``1 / mean TPOT``).

With ``search.prune_dominated`` the baseline and last known-good are evaluated first and
every candidate carries the lowest passing cost among them as a bound: one that cannot cost
at most the bound is skipped (:mod:`simulator.planner.prune`); when no candidate within the
bound passes, the plan evaluates them all unpruned, so the recommendation is the unpruned
plan's. Tasks start slowest first (:func:`~simulator.planner.evaluate.longest_first`).

size: pending its owner's split (issue 14 part 4; owner: wave3-topology): run_plan() 99 lines, _row() 85 lines.
"""
from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulator.base.outdir import clear_outputs, named_output_folder
from simulator.catalog.hardware import get_gpu
from simulator.experiments.cache import ResultCache, scenario_identity
from simulator.experiments.grid import config_label, expand_grid, set_path
from simulator.experiments.runner import (
    absolute_spec_paths,
    guard_outputs,
    output_folder,
    prepare_points,
    spec_file,
)
from simulator.metrics.summary import json_safe as _json_safe
from simulator.planner.bottleneck import bottleneck_note
from simulator.planner.evaluate import evaluate_configurations, longest_first
from simulator.planner.figures import FIGURES
from simulator.planner.gates import gate_failure
from simulator.planner.provenance import compare_provenance
from simulator.planner.prune import is_skipped
from simulator.planner.report import write_plan_report
from simulator.planner.simulate import specs_rate
from simulator.planner.spec import (
    PlanError,
    PlanSpec,
    check_names_up_front,
    load_quality_table,
    refuse_pools_base,
    resolve_base_source,
)
from simulator.scenario.config import ScenarioError, validate_scenario
from simulator.scenario.overrides import apply_overrides, cli_overrides
from simulator.workload import WorkloadConfig, load_workload, synthesised_labels

__all__ = ["TIE_RULE", "PlanResult", "longest_first", "pareto_front", "run_plan"]


@dataclass
class PlanResult:
    """What :func:`run_plan` produced (see :meth:`to_json`)."""

    plan: PlanSpec
    status: str
    recommendation: dict
    candidates: list[dict]
    baseline: dict
    pareto: list[dict]
    workload: dict
    stats: dict
    base_scenario: dict
    outdir: Path | None = None
    files: dict[str, Path] = field(default_factory=dict)
    fallback: dict = field(default_factory=dict)
    last_known_good: dict | None = None
    quality: dict | None = None

    def to_json(self) -> dict:
        """The plan as JSON-safe data (what ``plan.json`` holds)."""
        return _json_safe({
            "name": self.plan.name,
            "status": self.status,
            "recommendation": self.recommendation,
            "baseline": _strip(self.baseline),
            "fallback": {k: (_strip(v) if k == "config" else v)
                         for k, v in self.fallback.items()},
            "last_known_good": (_strip(self.last_known_good)
                                if self.last_known_good is not None else None),
            "quality_table": self.quality,
            "candidates": [_strip(c) for c in self.candidates],
            "pareto_front": self.pareto,
            "workload": self.workload,
            "settings": json.loads(self.plan.model_dump_json()),
            "stats": self.stats,
        })


def _strip(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("confirm_extra",)}




# ---------------------------------------------------------------------- helpers
def pareto_front(points: list[dict], x: str, y: str) -> list[dict]:
    """Points not dominated in (``x`` up, ``y`` up), sorted by ``x`` ascending.

    A point is dominated when another is at least as good on both axes and better on one.
    Points missing either value are ignored.
    """
    pts = [p for p in points if p.get(x) is not None and p.get(y) is not None]
    pts.sort(key=lambda p: (-p[x], -p[y]))
    front, best_y = [], -math.inf
    for p in pts:
        if p[y] > best_y:
            front.append(p)
            best_y = p[y]
    return sorted(front, key=lambda p: p[x])


def _load_pool(base: dict, search, base_dir: Path):
    w = dict(base["workload"])
    start = float(w.get("start_s") or 0.0) + search.start_s
    w["start_s"] = start
    if search.window_s is not None:
        end = start + search.window_s
        if w.get("end_s") is not None:
            end = min(end, float(w["end_s"]))
        w["end_s"] = end
    cfg = WorkloadConfig.model_validate(w)
    return load_workload(cfg, int(base["seed"]), base_dir), w


# ---------------------------------------------------------------------- the plan
def run_plan(plan: PlanSpec, spec_dir: Path | None = None, *,
             scenario_overrides: list[str] | None = None, trace: str | None = None,
             jobs: int = 1, backend: str = "local", address: str | None = None,
             use_cache: bool = True, outdir: str | Path | None = None, write: bool = True,
             figures: bool = True, progress: Callable[[int, int], None] | None = None,
             setup_factory: Callable | None = None,
             notify: Callable[[str], None] | None = None,
             source: str | Path | None = None) -> PlanResult:
    """Run a capacity plan and (optionally) write its report.

    Parameters
    ----------
    plan : PlanSpec
    spec_dir : Path, optional
        Folder of the plan file (relative ``base`` paths resolve against it).
    scenario_overrides : list of str, optional
        ``a.b=v`` overrides of the base scenario (after ``plan.set``).
    trace : str, optional
        Replay this trace file instead of the base workload's.
    jobs, backend, address
        See :func:`simulator.experiments.executor.run_tasks`.
    use_cache : bool
        Reuse cached simulations and candidate results from ``OUTDIR/.cache/``.
    outdir : path, optional
        Overrides ``plan.output_dir``.
    write, figures : bool
        Write ``plan.md``, ``plan.html``, ``plan.json`` and the tables; draw figures.
    progress : callable, optional
        ``progress(done, total)`` over the candidates.
    setup_factory : callable, optional
        Replaces :func:`simulator.cluster.setup.build_setup` (tests).
    notify : callable, optional
        ``notify(line)``: one line when the plan changes course (pruning abandoned, so the
        candidates are evaluated again and ``progress`` restarts from 0).
    source : path, optional
        The plan file (an input no output may overwrite).

    Raises
    ------
    PlanError
        Invalid base scenario, candidate, price, or an empty workload window.
    """
    t0 = time.perf_counter()
    base_raw, base_dir, base_sc = _base_scenario(plan, spec_dir, scenario_overrides, trace)
    base_dict = json.loads(base_sc.model_dump_json())
    # the output folder before the request pool loads (its warnings, its time)
    out = output_folder(outdir if outdir is not None else named_output_folder(
        plan.output_dir, plan.name, "plan name", PlanError), create=write or use_cache)
    pool, pool_w, target = _pool(plan, base_dict, base_dir)
    mean_in = float(np.mean([s.num_prompt_tokens for s in pool]))
    mean_out = float(np.mean([s.num_output_tokens for s in pool]))
    all_ov, all_cfg, n_cand = _configurations(plan, base_raw, (base_dir, spec_dir))
    lkg = plan.last_known_good
    quality = (load_quality_table(plan.quality, spec_dir) if plan.quality is not None
               else None)
    if write or use_cache:  # no output over an input (plan, base, trace, quality table ...)
        guard_outputs(out, [*PLAN_FILES, "figures/", ".cache/"],
                      [spec_file(source, "plan"), _base_file(plan.base, spec_dir)],
                      [*all_cfg, plan.model_dump(mode="json")], base_dir, PlanError, (spec_dir,))
    cache = ResultCache(out / ".cache", enabled=use_cache)
    ev = evaluate_configurations(plan, all_ov, all_cfg, pool, target, base_raw, base_sc, base_dict,
                   cache, use_cache, setup_factory, backend=backend, jobs=jobs,
                   address=address, progress=progress, n_cand=n_cand,
                   prune=plan.search.prune_dominated)
    slices = sorted({s.slice for s in pool})
    row_ctx = (plan, target, mean_in, mean_out, quality, all_ov, all_cfg, slices, n_cand)
    rows = _rows(ev, row_ctx)
    if ev["bound"] is not None and not _any_within(rows[:n_cand], ev["bound"]):
        # no candidate at or below the bound passed: an unpruned plan would recommend a
        # skipped one over the fallback, so evaluate them all
        pruned_sims = sum(r.get("num_simulations", 0) for r in ev["new"])
        if notify is not None:
            notify(f"pruning abandoned: no candidate within the bound ${ev['bound']:,.2f}/h "
                   f"passed; evaluating all {n_cand} candidates unpruned (progress restarts; "
                   f"{pruned_sims} simulation(s) spent so far)")
        ev = evaluate_configurations(plan, all_ov, all_cfg, pool, target, base_raw, base_sc, base_dict,
                       cache, use_cache, setup_factory, backend=backend, jobs=jobs,
                       address=address, progress=progress, n_cand=n_cand, prune=False)
        ev["pruning_abandoned_after_simulations"] = pruned_sims
        rows = _rows(ev, row_ctx)
    cand_rows, base_row = rows[:n_cand], rows[n_cand]
    lkg_row = rows[n_cand + 1] if lkg is not None else None
    ranked = sorted(cand_rows, key=_rank_key)
    for r_i, row in enumerate(ranked):
        row["rank"] = r_i + 1 if row["passed"] else None
    status, chosen, runners, reason, fallback = _recommend(plan, ranked, base_row, lkg_row)
    rec = {"status": status, "reason": reason, "config": _strip(chosen),
           "runners_up": [_strip(r) for r in runners],
           "target_rate_rps": target, "bottleneck": bottleneck_note(chosen)}

    new, row_task, results_by_key = ev["new"], ev["row_task"], ev["results"]
    n_sims = sum(r.get("num_simulations", 0) for r in new)
    n_hits = sum(r.get("num_cache_hits", 0) for r in new) + \
        sum(1 for k in set(row_task) if results_by_key[k].get("cached"))
    stats = {"num_candidates": len(cand_rows), "num_configurations_evaluated":
             len(set(row_task)), "num_simulations": n_sims, "num_cache_hits": n_hits,
             "worker_cpu_s": sum(r.get("cpu_s", 0.0) for r in new),
             "wall_s": time.perf_counter() - t0, "jobs": jobs, "backend": backend,
             # pruning given up (no candidate within the bound passed): the simulations spent
             # in the pruned pass before the unpruned one (None: not given up)
             "pruning_abandoned_after_simulations":
                 ev.get("pruning_abandoned_after_simulations")}
    workload = {"num_requests_pool": len(pool), "pool_rate_rps": specs_rate(pool),
                "target_rate_rps": target, "mean_prompt_tokens": mean_in,
                "mean_output_tokens": mean_out, "window": {k: pool_w.get(k) for k in
                                                          ("start_s", "end_s")},
                "source": base_dict["workload"].get("trace") or "synthetic",
                "probe_requests": min(len(pool), plan.search.max_requests)}
    workload["slices"] = slices
    workload["synthesised"] = synthesised_labels(base_sc.workload)
    res = PlanResult(plan, status, rec, ranked, base_row, _pareto(rows), workload, stats,
                     base_dict, out, fallback=fallback, last_known_good=lkg_row,
                     quality=(json.loads(quality.model_dump_json()) if quality else None))
    if write:
        out.mkdir(parents=True, exist_ok=True)
        clear_outputs(out, PLAN_FILES)  # an earlier plan's (its figures after --no-figures)
        res.files = write_plan_report(res, out, figures=figures)
        res.stats["wall_s"] = time.perf_counter() - t0
    return res


#: The files a capacity plan writes in its output folder (beside its ``.cache/``)
PLAN_FILES = ("plan.md", "plan.html", "plan.json", "plan_table.csv", "plan_table.parquet",
              "pareto.csv", "probes.csv", *(f"figures/{f}" for f in FIGURES.values()))


def _base_file(base, spec_dir: Path | None) -> str | None:
    """The base scenario's file (None for an inline base)."""
    return None if isinstance(base, dict) else resolve_base_source(base, spec_dir)[2]


def _base_scenario(plan: PlanSpec, spec_dir: Path | None, scenario_overrides, trace):
    """The plan's base scenario (``plan.set``, the overrides, the plan's SLOs, one replica):
    its raw form, folder and validated scenario.

    Raises
    ------
    PlanError
        An invalid base scenario, one that declares ``pools:`` (or candidates that set
        them: a topology plan sizes pools), or an unknown GPU in ``prices``.
    """
    base_raw, base_dir, source = resolve_base_source(plan.base, spec_dir)
    try:
        for k, v in plan.set.items():
            set_path(base_raw, k, v)
        ovr = cli_overrides(scenario_overrides, trace)
        base_raw = apply_overrides(base_raw, ovr)
        refuse_pools_base(base_raw, source, "capacity plan", _varied_paths(plan))
        slo_raw = dict(base_raw.get("slo") or {})
        slo_raw.update({k: v for k, v in plan.slo.model_dump().items() if v is not None})
        base_raw["slo"] = slo_raw
        base_raw.setdefault("cluster", {})
        base_raw["cluster"] = {**(base_raw["cluster"] or {}), "num_replicas": 1}
        absolute_spec_paths(base_raw, (base_dir, spec_dir))
        base_sc = validate_scenario(base_raw, source="plan base scenario", overrides=ovr)
    except ScenarioError as e:
        raise PlanError(str(e)) from None
    check_names_up_front(base_raw, (base_dir, spec_dir), "capacity plan",
                         {k for paths in _varied_paths(plan).values() for k in paths})
    for k in plan.prices:
        try:
            get_gpu(k)
        except ValueError as e:
            raise PlanError(f"plan prices: {e}") from None
    return base_raw, base_dir, base_sc


def _varied_paths(plan: PlanSpec) -> dict[str, list[str]]:
    """The field paths a plan's candidates, baseline and last known-good set, by where."""
    out = {"search_space": list(plan.search_space),
           "candidates": [k for c in plan.candidates or [] for k in c],
           "baseline.set": list(plan.baseline.set)}
    if plan.last_known_good is not None:
        out["last_known_good.set"] = list(plan.last_known_good.set)
    return out


def _pool(plan: PlanSpec, base_dict: dict, base_dir: Path):
    """The request pool of the plan's window, its window and the target rate (requests/s).

    Raises
    ------
    PlanError
        The workload cannot be loaded or the window holds fewer than 2 requests.
    """
    try:
        pool, pool_w = _load_pool(base_dict, plan.search, base_dir)
    except ValueError as e:
        hint = " (pass the trace with --trace PATH)" if "not found" in str(e) else ""
        raise PlanError(f"plan workload: {e}{hint}") from None
    if len(pool) < 2:
        raise PlanError(f"plan workload: the window holds {len(pool)} request(s); need >= 2")
    target = plan.target_rate_rps if plan.target_rate_rps is not None else \
        (plan.rate_scale or 1.0) * specs_rate(pool)
    return pool, pool_w, target


def _configurations(plan: PlanSpec, base_raw: dict, folders) -> tuple[list, list, int]:
    """Every configuration evaluated: the candidates, the baseline, the last known-good
    (overrides and resolved scenarios, in that order) and the number of candidates."""
    overrides = expand_grid(plan.search_space, plan.candidates)
    lkg = plan.last_known_good
    try:  # every configuration valid and its names known before any is evaluated
        configs = prepare_points(base_raw, overrides, source="plan candidate", folders=folders)
        base_configs = prepare_points(base_raw, [plan.baseline.set], source="plan baseline",
                                      folders=folders)
        lkg_configs = (prepare_points(base_raw, [lkg.set], source="plan last_known_good",
                                      folders=folders) if lkg is not None else [])
    except ScenarioError as e:
        raise e if isinstance(e, PlanError) else PlanError(str(e)) from None
    all_ov = overrides + [plan.baseline.set] + ([lkg.set] if lkg is not None else [])
    return all_ov, configs + base_configs + lkg_configs, len(configs)


def _rows(ev: dict, ctx) -> list[dict]:
    """One plan row per evaluated configuration (candidates, baseline, last known-good), with
    the quality gate, the provenance comparison, ``same_config_as`` (``"baseline"`` or
    ``"last_known_good"`` for a candidate whose resolved scenario is that one's, else None;
    see :func:`_rank_key`) and ``status`` (:func:`_status_text`).

    ``ctx``: the plan, the target (requests/s), the mean prompt and output tokens, the quality
    table, every configuration's overrides and resolved scenario, the slices and the number
    of candidates."""
    plan, target, mean_in, mean_out, quality, all_ov, all_cfg, slices, n_cand = ctx
    lkg = plan.last_known_good
    ident = [scenario_identity(c) for c in all_cfg]
    rows = []
    for i, (ov, key, m) in enumerate(zip(all_ov, ev["row_task"], ev["meta"])):
        is_base = i == n_cand
        is_lkg = i == n_cand + 1
        name = plan.baseline.name if is_base else (lkg.name if is_lkg else None)
        row = _row(i, ov, ev["results"][key], m, plan, target, mean_in, mean_out, name=name,
                   is_baseline=is_base)
        row["is_last_known_good"] = is_lkg
        row["same_config_as"] = next(
            (w for w, j in (("baseline", n_cand), ("last_known_good", n_cand + 1))
             if i < n_cand and j < len(ident) and ident[i] == ident[j]), None)
        if quality is not None:
            _quality_gate(row, all_cfg[i], quality, plan.quality, slices)
        rows.append(row)
    for row, cmp in zip(rows, compare_provenance([row.get("provenance") for row in rows])):
        row["provenance_weaker"] = cmp["weaker"]
        row["provenance_note"] = cmp["note"]
        row["provenance_weaker_operators"] = cmp["weaker_operators"]
    setter = next((r for r in rows[n_cand:] if ev["bound"] is not None
                   and _same_cost(r, {"usd_per_hour": ev["bound"]})), None)
    for row in rows:
        row["status"] = _status_text(row, setter)
    return rows


def _status_text(row: dict, setter: dict | None) -> str:
    """``pass``, ``fail: <gates>`` or ``skipped: dominated by <the deployment that set the
    bound> ($/h)`` (a skipped candidate has no capacity: ``capacity_rps`` is None)."""
    if row.get("dominance"):
        who = (f"{'the baseline' if setter['is_baseline'] else 'the last known-good'} "
               f"'{setter['label']}'" if setter is not None else "a passing fallback")
        return (f"skipped: dominated by {who} at "
                f"${row['dominance']['bound_usd_per_hour']:,.2f}/h")
    return "pass" if row["passed"] else "fail: " + ", ".join(row["failed_gates"])


def _any_within(cand_rows: list[dict], bound: float) -> bool:
    """Whether a candidate costing at most the dominance bound passed every gate, the quality
    gate included.

    This alone makes the pruned plan's answer the unpruned one's: every skipped candidate
    costs more than the bound, so the cheapest passing candidate is among those evaluated,
    whichever deployment set the bound.
    """
    return any(r["passed"] and r["usd_per_hour"] <= bound * (1 + 1e-12) for r in cand_rows)


def _recommend(plan: PlanSpec, ranked: list[dict], base_row: dict, lkg_row: dict | None):
    """The recommendation: the cheapest passing candidate, else the fallback (the last
    known-good, or the baseline) when it passes; its status, runners-up, reason and the
    fallback record."""
    fb_row = lkg_row if lkg_row is not None else base_row
    fb_kind = "last_known_good" if lkg_row is not None else "baseline"
    fb_what = "last known-good" if lkg_row is not None else "baseline"
    passing = [r for r in ranked if r["passed"]]
    if passing:
        status, chosen = "candidate", passing[0]
        runners = passing[1: 1 + plan.top_k]
        n_skip = sum(1 for r in ranked if is_skipped(r))
        reason = (f"cheapest of {len(passing)} passing candidate(s) out of {len(ranked)}"
                  + (f" ({n_skip} skipped: dominated by the cost of a passing "
                     f"{fb_what})" if n_skip else ""))
        tie = [r for r in (base_row, lkg_row) if r is not None and r["passed"]
               and _same_cost(r, chosen) and _preference(r) < _preference(chosen)]
        if tie:
            # the tie rule: what runs today (then the last known-good) wins at equal cost
            won = min(tie, key=_preference)
            kind = "baseline" if won["is_baseline"] else "last_known_good"
            reason = (f"the {kind.replace('_', ' ')} '{won['label']}' passes at the cost of "
                      f"the cheapest passing candidate '{chosen['label']}' "
                      f"(${chosen['usd_per_hour']:,.2f}/h) and wins the tie ({TIE_RULE}); "
                      + reason)
            status, chosen, runners = kind, won, passing[: plan.top_k]
        elif len(passing) > 1 and _same_cost(passing[0], passing[1]):
            reason += f"; equal-cost tie settled {TIE_RULE}"
        same = chosen.get("same_config_as") if status == "candidate" else None
        if same:  # the cheapest candidate is what runs today: say so, nothing to change
            reason += (f"; it is the {str(same).replace('_', ' ')}'s configuration, so the "
                       "recommendation is to keep it")
    else:
        chosen = fb_row
        runners = []
        counts = Counter(g for r in ranked for g in r["failed_gates"])
        top = ", ".join(f"{g} ({n})" for g, n in counts.most_common(6))
        reason = f"no candidate passed every gate (failed gates, by candidates: {top})"
        if fb_row["passed"]:
            status = f"{fb_kind}_fallback"
            reason += f"; falling back to {fb_what} '{fb_row['label']}'"
        else:
            # nothing to recommend: the fallback is reported (for comparison), not endorsed
            status = "none_passed"
            reason += (f"; the {fb_what} '{fb_row['label']}' fails "
                       f"{', '.join(fb_row['failed_gates'])} too: "
                       + ("keep the last known-good deployment" if lkg_row is not None else
                          "nothing to recommend and no last_known_good given to fall back to"))
    fallback = {"kind": fb_kind, "name": fb_row["label"], "config": _strip(fb_row),
                "is_recommended": chosen is fb_row,
                "source": ("plan last_known_good (given by the user)" if lkg_row is not None
                           else "plan baseline (no last_known_good given)")}
    return status, chosen, runners, reason, fallback


def _pareto(rows: list[dict]) -> list[dict]:
    """The Pareto front of every feasible capacity probe of every configuration."""
    points = []
    for row in rows:
        for p in row["probes"]:
            if p["feasible"]:
                points.append({"config_index": row["index"], "label": row["label"],
                               "rate_rps": p["rate_rps"],
                               "output_tps_per_gpu": p["output_tps_per_gpu"],
                               "tps_per_user": p["tps_per_user"]})
    return pareto_front(points, "output_tps_per_gpu", "tps_per_user")


#: the tie rule, wherever a cheapest configuration is chosen (README "Reading a capacity plan")
TIE_RULE = ("at equal USD per hour: the baseline's configuration, then the last known-good's, "
            "then fewer GPUs, then more deployed capacity (headroom), then list order")

_PREFERENCE = {"baseline": 0, "last_known_good": 1}


def _preference(r: dict) -> int:
    """0 for the baseline's configuration, 1 for the last known-good's, 2 for any other."""
    if r.get("is_baseline"):
        return 0
    if r.get("is_last_known_good"):
        return 1
    return _PREFERENCE.get(r.get("same_config_as"), 2)


def _rank_key(r: dict):
    """Passing first, then :data:`TIE_RULE`: USD per hour, the baseline's (then the last
    known-good's) configuration, fewer GPUs, more headroom, list order."""
    inf = math.inf
    return (not r["passed"], r["usd_per_hour"] if r["usd_per_hour"] is not None else inf,
            _preference(r), r["gpus"] if r["gpus"] is not None else inf,
            -(r["headroom"] if r["headroom"] is not None else -inf), r["index"])


def _same_cost(a: dict, b: dict) -> bool:
    """Equal ``usd_per_hour`` (to a relative 1e-12: the same GPUs at the same price)."""
    x, y = a.get("usd_per_hour"), b.get("usd_per_hour")
    return x is not None and y is not None and abs(x - y) <= 1e-12 * max(abs(x), abs(y))


def _row(i: int, ov: dict, r: dict, m: dict, plan: PlanSpec, target: float, mean_in: float,
         mean_out: float, *, name: str | None, is_baseline: bool) -> dict:
    # None: not measured (a candidate skipped as dominated); 0.0: no feasible rate found
    cap = None if r.get("capacity_rps") is None else float(r["capacity_rps"])
    replicas = r.get("replicas")
    gpus = replicas * m["gpus_per_replica"] if replicas else None
    usd_h = gpus * m["price"] if gpus else None
    fails = list(r.get("failed_gates") or [])
    details = [dict(f) for f in (r.get("gate_failures") or [])]
    conf = (r.get("confirmations") or [None])[-1] or {}
    tok_h = target * 3600.0

    def per_m(tokens: float) -> float | None:
        return usd_h / (tok_h * tokens) * 1e6 if (usd_h is not None and tokens > 0) else None

    # phase-attributed prices: the sized deployment's hourly cost split by the prefill share
    # of the busy time of its target-rate confirmation (simulator.metrics.cost), each phase
    # divided by the tokens the target rate brings per hour
    share = ((r.get("confirm_summary") or {}).get("phase_cost") or {}).get("prefill_share")
    price_in = (usd_h * share / (tok_h * mean_in) * 1e6
                if (usd_h is not None and share is not None and mean_in > 0) else None)
    price_out = (usd_h * (1.0 - share) / (tok_h * mean_out) * 1e6
                 if (usd_h is not None and share is not None and mean_out > 0) else None)
    g = plan.gates
    for gate, value, bound, unit in (
            ("max_gpus", gpus, g.max_gpus, ""),
            ("max_usd_per_hour", usd_h, g.max_usd_per_hour, "usd"),
            ("max_usd_per_1m_output_tokens", price_out, g.max_usd_per_1m_output_tokens, "usd"),
            ("max_usd_per_1m_input_tokens", price_in, g.max_usd_per_1m_input_tokens, "usd")):
        if bound is None or gpus is None:
            continue
        if value is None or value > bound:
            fails.append(gate)
            what = {"max_gpus": "GPUs", "max_usd_per_hour": "USD per hour",
                    "max_usd_per_1m_output_tokens": "price per 1M output tokens",
                    "max_usd_per_1m_input_tokens": "price per 1M input tokens"}[gate]
            f = gate_failure(gate, None if value is None else float(value), float(bound),
                             unit=unit)
            f["text"] = (f"{what}: not measured (no phase split of the confirmation run)"
                         if value is None else f"{what} " + f["text"].split(" ", 1)[1])
            details.append(f)
    passed = r.get("status") == "ok" and not fails

    return {
        "index": i,
        "label": name or config_label(ov),
        "is_baseline": is_baseline,
        "overrides": ov,
        "gpu": m["gpu"],
        "tensor_parallel_size": m["tp"],
        "usd_per_gpu_hour": m["price"],
        "price_source": m["price_source"],
        "passed": passed,
        "failed_gates": fails,
        "gate_failures": details,
        "error": r.get("error"),
        "provenance": r.get("provenance"),
        "capacity_rps": cap,
        "capacity_rps_per_gpu": None if cap is None else cap / m["gpus_per_replica"],
        "capacity_rate_scale": r.get("capacity_rate_scale"),
        "search_note": r.get("search_note"),
        "replicas": replicas,
        "gpus": gpus,
        "headroom": (replicas * cap / target - 1.0) if (replicas and cap) else None,
        "usd_per_hour": usd_h,
        "cost_per_1m_input_tokens_usd": per_m(mean_in),
        "cost_per_1m_output_tokens_usd": per_m(mean_out),
        "cost_per_1m_tokens_usd": per_m(mean_in + mean_out),
        "prefill_share_at_target": share,
        "price_per_1m_input_tokens_usd": price_in,
        "price_per_1m_output_tokens_usd": price_out,
        "peak_kv_cache_usage_at_target": conf.get("max_kv_cache_usage"),
        "slice_tpot_p99_s_at_target": conf.get("slice_tpot_p99_s"),
        "slo_attainment_at_target": conf.get("slo_attainment"),
        "ttft_p99_s_at_target": conf.get("ttft_p99_s"),
        "tpot_p99_s_at_target": conf.get("tpot_p99_s"),
        "slice_ttft_p99_s_at_target": conf.get("slice_ttft_p99_s"),
        "output_tps_per_gpu_at_capacity": _at_capacity(r, "output_tps_per_gpu"),
        "tps_per_user_at_capacity": _at_capacity(r, "tps_per_user"),
        "probes": r.get("probes") or [],
        "confirmations": r.get("confirmations") or [],
        "confirm_summary": r.get("confirm_summary"),
        "degrade_at_target": (r.get("confirm_summary") or {}).get("degrade"),
        "confirm_extra": r.get("confirm_extra"),
        "num_simulations": r.get("num_simulations", 0),
        "cached": bool(r.get("cached")),
        "dominance": r.get("dominance"),
        "dominance_probe": r.get("dominance_probe"),
    }


def _config_value(cfg: dict, path: str):
    cur = cfg
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _matches(cfg: dict, match: dict) -> bool:
    """Whether a resolved configuration has every value of a quality entry's ``match``
    (``hardware.gpu`` by catalog name, so aliases match; other values by equality)."""
    for path, want in match.items():
        have = _config_value(cfg, path)
        if path == "hardware.gpu" and isinstance(want, str) and isinstance(have, str):
            try:
                if get_gpu(want).name == get_gpu(have).name:
                    continue
            except ValueError:
                pass
        if have != want:
            return False
    return True


def _quality_gate(row: dict, cfg: dict, table, gate, slices: list[str]) -> None:
    """Check a plan row against the quality table (in place): adds ``quality`` (the matched
    entry and the score per checked slice) and a ``quality[<slice>]`` failure per slice whose
    score is below its minimum or missing (``unscored: fail``).

    Checked slices: every slice of the workload when ``min_score`` is given, plus those named
    in ``min_score_by_slice``; the minimum of a slice is its own entry, else ``min_score``.
    """
    entry = next((e for e in table.scores if _matches(cfg, e.match)), None)
    checked = sorted(set(slices if gate.min_score is not None else [])
                     | set(gate.min_score_by_slice))
    scores: dict[str, float | None] = {}
    for sl in checked:
        bound = gate.min_score_by_slice.get(sl, gate.min_score)
        score = None
        if entry is not None:
            score = entry.slices.get(sl, entry.score)
        scores[sl] = score
        name = f"quality[{sl}]"
        if score is None:
            if gate.unscored == "fail":
                row["failed_gates"].append(name)
                row["gate_failures"].append(gate_failure(
                    name, None, float(bound), op=">=",
                    text=f"{sl} {table.metric}: no score for this configuration in the "
                         f"quality table (unscored: fail)"))
            continue
        if score < bound:
            row["failed_gates"].append(name)
            f = gate_failure(name, float(score), float(bound), op=">=")
            f["text"] = (f"{sl} {table.metric} {score:.4g} < minimum {bound:.4g} "
                         f"(short by {bound - score:.3g})")
            row["gate_failures"].append(f)
    label = None
    if entry is not None:
        label = entry.name or ", ".join(f"{k}={v}" for k, v in entry.match.items()) or "all"
    row["quality"] = {"metric": table.metric, "entry": label, "scores": scores,
                      "minimums": {sl: gate.min_score_by_slice.get(sl, gate.min_score)
                                   for sl in checked}}
    row["passed"] = row["passed"] and not any(
        g.startswith("quality[") for g in row["failed_gates"])


def _at_capacity(r: dict, key: str):
    s = r.get("capacity_rate_scale")
    for p in r.get("probes") or []:
        if s is not None and p.get("rate_scale") == s:
            return p.get(key)
    return None
