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
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from simulator.base.outdir import clear_outputs, named_output_folder
from simulator.catalog.hardware import get_gpu
from simulator.experiments.cache import ResultCache
from simulator.experiments.grid import expand_grid, set_path
from simulator.experiments.input_files import absolute_spec_path
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
from simulator.planner.plan_rows import plan_rows, without_extra
from simulator.planner.recommend import (
    TIE_RULE,
    any_within,
    pareto_front,
    plan_pareto,
    rank_key,
    recommend,
)
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
            "baseline": without_extra(self.baseline),
            "fallback": {k: (without_extra(v) if k == "config" else v)
                         for k, v in self.fallback.items()},
            "last_known_good": (without_extra(self.last_known_good)
                                if self.last_known_good is not None else None),
            "quality_table": self.quality,
            "candidates": [without_extra(c) for c in self.candidates],
            "pareto_front": self.pareto,
            "workload": self.workload,
            "settings": json.loads(self.plan.model_dump_json()),
            "stats": self.stats,
        })




# ---------------------------------------------------------------------- helpers
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
    all_ov, all_cfg, n_cand = _configurations(plan, base_raw, (base_dir, spec_dir), source)
    quality = (load_quality_table(plan.quality, spec_dir) if plan.quality is not None
               else None)
    if write or use_cache:  # no output over an input (plan, base, trace, quality table ...)
        guard_outputs(out, [*PLAN_FILES, "figures/", ".cache/"],
                      [spec_file(source, "plan"), _base_file(plan.base, spec_dir)],
                      [*all_cfg, plan.model_dump(mode="json")], base_dir, PlanError, (spec_dir,))
    cache = ResultCache(out / ".cache", enabled=use_cache)
    evaluate = partial(evaluate_configurations, plan, all_ov, all_cfg, pool, target, base_raw,
                       base_sc, base_dict, cache, use_cache, setup_factory, backend=backend,
                       jobs=jobs, address=address, progress=progress, n_cand=n_cand)
    slices = sorted({s.slice for s in pool})
    row_ctx = (plan, target, mean_in, mean_out, quality, all_ov, all_cfg, slices, n_cand)
    ev, rows = _evaluate_rows(evaluate, row_ctx, plan.search.prune_dominated, notify)
    ranked, base_row, lkg_row, rec, fallback = _recommendation(plan, rows, n_cand, target)
    stats = _stats(ev, len(ranked), t0, jobs, backend)
    workload = _workload_record(plan, pool, pool_w, target, (mean_in, mean_out), base_dict,
                                slices, base_sc)
    res = PlanResult(plan, rec["status"], rec, ranked, base_row, plan_pareto(rows), workload, stats,
                     base_dict, out, fallback=fallback, last_known_good=lkg_row,
                     quality=(json.loads(quality.model_dump_json()) if quality else None))
    if write:
        out.mkdir(parents=True, exist_ok=True)
        clear_outputs(out, PLAN_FILES)  # an earlier plan's (its figures after --no-figures)
        res.files = write_plan_report(res, out, figures=figures)
        res.stats["wall_s"] = time.perf_counter() - t0
    return res


def _evaluate_rows(evaluate: Callable[..., dict], row_ctx: tuple, prune: bool,
                   notify: Callable[[str], None] | None) -> tuple[dict, list[dict]]:
    """Evaluate every configuration (``evaluate(prune=...)``, pruning dominated candidates
    when ``prune``) and build the plan's rows (:func:`~simulator.planner.plan_rows.plan_rows`
    with ``row_ctx``); when no candidate within the dominance bound passed, evaluate them all
    again unpruned (an unpruned plan would recommend a skipped one over the fallback),
    telling ``notify``."""
    n_cand = row_ctx[-1]
    ev = evaluate(prune=prune)
    rows = plan_rows(ev, row_ctx)
    if ev["bound"] is None or any_within(rows[:n_cand], ev["bound"]):
        return ev, rows
    pruned_sims = sum(r.get("num_simulations", 0) for r in ev["new"])
    if notify is not None:
        notify(f"pruning abandoned: no candidate within the bound ${ev['bound']:,.2f}/h "
               f"passed; evaluating all {n_cand} candidates unpruned (progress restarts; "
               f"{pruned_sims} simulation(s) spent so far)")
    ev = evaluate(prune=False)
    ev["pruning_abandoned_after_simulations"] = pruned_sims
    return ev, plan_rows(ev, row_ctx)


def _recommendation(plan: PlanSpec, rows: list[dict], n_cand: int, target: float):
    """The candidates ranked (``rank`` set on the passing ones), the baseline's and the last
    known-good's rows, the recommendation record and the fallback record."""
    cand_rows, base_row = rows[:n_cand], rows[n_cand]
    lkg_row = rows[n_cand + 1] if plan.last_known_good is not None else None
    ranked = sorted(cand_rows, key=rank_key)
    for r_i, row in enumerate(ranked):
        row["rank"] = r_i + 1 if row["passed"] else None
    status, chosen, runners, reason, fallback = recommend(plan, ranked, base_row, lkg_row)
    rec = {"status": status, "reason": reason, "config": without_extra(chosen),
           "runners_up": [without_extra(r) for r in runners],
           "target_rate_rps": target, "bottleneck": bottleneck_note(chosen)}
    return ranked, base_row, lkg_row, rec, fallback


def _workload_record(plan: PlanSpec, pool: list, pool_w: dict, target: float,
                     mean_tokens: tuple[float, float], base_dict: dict, slices: list[str],
                     base_sc) -> dict:
    """What the plan replayed: the pool (its size, rate, mean prompt and output tokens,
    window, source, slices, labels synthesised by the workload config) and the target."""
    workload = {"num_requests_pool": len(pool), "pool_rate_rps": specs_rate(pool),
                "target_rate_rps": target,
                "mean_prompt_tokens": mean_tokens[0], "mean_output_tokens": mean_tokens[1],
                "window": {k: pool_w.get(k) for k in ("start_s", "end_s")},
                "source": base_dict["workload"].get("trace") or "synthetic",
                "probe_requests": min(len(pool), plan.search.max_requests)}
    workload["slices"] = slices
    workload["synthesised"] = synthesised_labels(base_sc.workload)
    return workload


def _stats(ev: dict, num_candidates: int, t0: float, jobs: int, backend: str) -> dict:
    """How the plan ran: configurations evaluated, simulations run and served from the
    cache, worker CPU and wall seconds."""
    new, row_task, results_by_key = ev["new"], ev["row_task"], ev["results"]
    n_sims = sum(r.get("num_simulations", 0) for r in new)
    n_hits = sum(r.get("num_cache_hits", 0) for r in new) + \
        sum(1 for k in set(row_task) if results_by_key[k].get("cached"))
    return {"num_candidates": num_candidates, "num_configurations_evaluated":
            len(set(row_task)), "num_simulations": n_sims, "num_cache_hits": n_hits,
            "worker_cpu_s": sum(r.get("cpu_s", 0.0) for r in new),
            "wall_s": time.perf_counter() - t0, "jobs": jobs, "backend": backend,
            # pruning given up (no candidate within the bound passed): the simulations spent
            # in the pruned pass before the unpruned one (None: not given up)
            "pruning_abandoned_after_simulations":
                ev.get("pruning_abandoned_after_simulations")}


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
    # a key that is a relative spec path resolves as the candidates' paths do
    plan.prices = {absolute_spec_path(k, (base_dir, spec_dir)): v for k, v in plan.prices.items()}
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


def _configurations(plan: PlanSpec, base_raw: dict, folders, source=None
                    ) -> tuple[list, list, int]:
    """Every configuration evaluated: the candidates, the baseline, the last known-good
    (overrides and resolved scenarios, in that order) and the number of candidates. A bad
    one is a :class:`PlanError` naming the plan file (``source``, when given) and the
    configuration."""
    overrides = expand_grid(plan.search_space, plan.candidates)
    lkg = plan.last_known_good
    at = f"{source}: plan" if source else "plan"
    try:  # every configuration valid and its names known before any is evaluated
        configs = prepare_points(base_raw, overrides, source=f"{at} candidate", folders=folders)
        base_configs = prepare_points(base_raw, [plan.baseline.set], source=f"{at} baseline",
                                      folders=folders)
        lkg_configs = (prepare_points(base_raw, [lkg.set], source=f"{at} last_known_good",
                                      folders=folders) if lkg is not None else [])
    except ScenarioError as e:
        raise e if isinstance(e, PlanError) else PlanError(str(e)) from None
    all_ov = overrides + [plan.baseline.set] + ([lkg.set] if lkg is not None else [])
    return all_ov, configs + base_configs + lkg_configs, len(configs)


