"""Day plan: static peak, static mean and autoscaled fleets on the same day, priced and
judged hour by hour (``servesim plan FILE`` for a file with a ``day`` section).

The base scenario's workload is the day (e.g. a trace tiled to 24 h and rate-shaped by a
diurnal profile, :mod:`simulator.workload.diurnal`). The plan

1. counts the workload's arrivals per hour (bins of 3600 s of its clock) and takes the
   **peak hour** (most arrivals; the earliest on a tie) and the **mean hour** (the day's
   arrivals over its hours);
2. sizes the **static peak** fleet: the fewest replicas, 1 .. ``day.max_replicas``, whose
   simulation of the peak hour alone (its arrivals, after a lead-in of ``day.lead_in_s``
   seconds of the hour before, not counted) meets the SLO attainment target;
3. sizes the **static mean** fleet: the static peak's replicas x mean hour / peak hour
   arrivals, rounded up (at least 1): provisioned for the average load;
4. takes the **autoscaled** fleet from ``day.autoscale`` (the ``cluster.autoscale`` block of
   the scenario schema, starting from the static mean's replicas, min/max as given);
5. simulates the whole day on each fleet (or one window per hour with ``day.windows``,
   :mod:`simulator.runs.day`, the approximation stated) and reports per fleet: $ per day
   (GPU-hours x price: the integral of the replicas held), $ per 1M output tokens, the day's
   SLO attainment and its worst hour, cold-start violations (the run's
   ``autoscale.cold_start_slo_misses``, :func:`simulator.metrics.fleet.autoscale_summary`)
   and GPU-hours, with the per-hour table and the figure of load, replicas and TTFT p99 over
   the day.

A fleet whose scenario is refused (e.g. ``cluster.autoscale`` in a build whose schema does
not have it yet) is reported as not evaluated, with the reason; the other fleets still are.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from pydantic import Field, ValidationError

from simulator.base.outdir import make_output_folder, named_output_folder
from simulator.base.schema import StrictModel
from simulator.experiments.executor import run_tasks
from simulator.experiments.runner import guard_outputs, spec_file
from simulator.experiments.warned import recording, reemit
from simulator.metrics.fleet import fixed_fleet_spans
from simulator.metrics.hourly import HOUR_S, hourly_rows
from simulator.planner.day_report import write_day_plan
from simulator.planner.spec import PlanError, format_spec_error, resolve_base, resolve_base_source
from simulator.runs.day import day_totals, run_day_windows, window_bounds, window_row
from simulator.runs.scenario import run_scenario
from simulator.scenario.autoscale import AutoscaleConfig
from simulator.scenario.config import ScenarioError, SLOConfig, validate_scenario
from simulator.scenario.overrides import apply_overrides, blame_override, cli_overrides
from simulator.workload import load_workload
from simulator.workload.loader import RequestStream

__all__ = ["DAY_PLAN_FILES", "DayPlanSpec", "load_day_plan", "run_day_plan"]

#: The files a day plan writes in its output folder.
DAY_PLAN_FILES = ("plan.json", "plan.md", "plan.html", "day.png")


class DayWindows(StrictModel):
    """Evaluate each fleet by one window per hour (:mod:`simulator.runs.day`)."""

    window_s: float = Field(gt=0, le=HOUR_S)
    lead_in_s: float = Field(default=300.0, ge=0)


class DaySettings(StrictModel):
    """The ``day`` section of a day plan (module docstring): ``max_replicas`` bounds the
    static peak's sizing, ``lead_in_s`` the peak hour's warm-up, ``autoscale`` is the
    autoscaled fleet's ``cluster.autoscale`` and ``windows`` evaluates every fleet by one
    window per hour instead of the whole day."""

    max_replicas: int = Field(default=16, ge=1)
    lead_in_s: float = Field(default=300.0, ge=0)
    autoscale: AutoscaleConfig | None = None
    windows: DayWindows | None = None


class DayPlanSpec(StrictModel):
    """A day plan file."""

    name: str = "day_plan"
    base: str | dict
    day: DaySettings = DaySettings()
    slo: SLOConfig | None = None
    output_dir: str = "reports/plan_{name}"


def load_day_plan(raw: dict, source: str, overrides=None) -> DayPlanSpec:
    """Validate a day plan mapping (``--plan-set`` overrides already applied).

    Raises
    ------
    PlanError
        One line naming the file, the ``--plan-set`` item responsible (if any), the key
        path and what is allowed.
    """
    try:
        return DayPlanSpec.model_validate({k: v for k, v in raw.items() if k != "__file__"})
    except ValidationError as e:
        who = blame_override(e, overrides)
        raise PlanError(format_spec_error(e, DayPlanSpec, f"{source}: {who}" if who
                                          else str(source))) from None


def hourly_arrivals(specs: RequestStream) -> dict[int, int]:
    """Arrivals per hour of the workload clock (hours without arrivals inside its span: 0)."""
    h = np.floor(np.asarray(specs.cols.arrival_s, dtype=np.float64) / HOUR_S).astype(np.int64)
    lo, hi = int(h.min()), int(h.max())
    counts = np.bincount(h - lo, minlength=hi - lo + 1)
    return {lo + i: int(c) for i, c in enumerate(counts.tolist())}


def _fleet_raw(base_raw: dict, replicas: int, autoscale: dict | None) -> dict:
    """The base scenario with ``replicas`` replicas, autoscaled by ``autoscale`` or static (a
    base's own ``cluster.autoscale`` is dropped: a static fleet never scales)."""
    raw = apply_overrides(base_raw, [f"cluster.num_replicas={replicas}"])
    cluster = {k: v for k, v in (raw.get("cluster") or {}).items() if k != "autoscale"}
    if autoscale is not None:
        cluster["autoscale"] = dict(autoscale)
    raw["cluster"] = cluster
    return raw


def _peak_hour_passes(sc, base_dir, specs: RequestStream, hour: int, lead_in_s: float) -> dict:
    """Simulate the peak hour alone on ``sc``'s fleet: its attainment and whether it passes."""
    lead0, h0, h1 = window_bounds(hour, HOUR_S, lead_in_s)
    t = np.asarray(specs.cols.arrival_s, dtype=np.float64)
    idx = np.flatnonzero((t >= lead0) & (t < h1))
    att = window_row(sc, base_dir, specs, idx, hour, (h0, h1))["slo_attainment"]
    return {"replicas": sc.cluster.num_replicas, "slo_attainment": att,
            "passed": att is not None and att >= sc.slo.attainment_target}


def day_fleet_worker(task: dict, shared: dict) -> dict:
    """Simulate one fleet over the day (runs in a worker): its rows, totals and warnings."""
    with recording() as warned:
        out = _evaluate_fleet(task, shared["specs"])
    return {"fleet": out, "warnings": warned}


def _evaluate_fleet(task: dict, specs: RequestStream) -> dict:
    sc = validate_scenario(task["raw"], source=task["label"])
    win = task["windows"]
    if win is not None:
        summ = run_day_windows(sc, task["base_dir"], specs, window_s=win["window_s"],
                               lead_in_s=win["lead_in_s"])
        rows, cold = summ["by_hour"]["rows"], None
    else:
        res = run_scenario(sc, task["base_dir"], specs=specs, write=False, figures=False)
        spans = res.sim.replica_spans or fixed_fleet_spans(
            sc.cluster.num_replicas)
        rows = hourly_rows(res.requests, spans, window=(res.summary["window_start_s"],
                                                        res.summary["window_end_s"]),
                           slo=sc.slo.model_dump(), gpus_per_replica=sc.gpus_per_replica,
                           usd_per_gpu_hour=res.setup.usd_per_gpu_hour)
        # requests that missed an SLO while a started replica was not serving yet (the
        # autoscale block's count; a static fleet has none)
        cold = int((res.summary.get("autoscale") or {}).get("cold_start_slo_misses", 0))
    totals = day_totals(rows, sc)
    totals.pop("slo", None)
    return {"label": task["label"], "kind": task["kind"], "replicas": task["replicas"],
            "rows": rows, "cold_start_violations": cold, **totals,
            "energy": None if win is not None else fleet_energy(res.summary.get("energy"))}


def fleet_energy(e: dict | None) -> dict | None:
    """A fleet's energy over the day (the run's ``energy`` block,
    :mod:`simulator.metrics.energy`): kWh, mean and peak power (W), J per output token, the
    energy cost (USD, with ``cost.usd_per_kwh``); None when the GPU has no power model."""
    if not e or not e.get("available"):
        return None
    return {k: e.get(k) for k in ("energy_kwh", "mean_power_w", "peak_power_w",
                                  "joules_per_output_token", "energy_cost_usd",
                                  "idle_counted")}


def _size_peak(spec: DayPlanSpec, base_raw: dict, base_dir, specs: RequestStream, peak: int,
               notify) -> list[dict]:
    """The peak-hour runs on 1, 2, ... replicas up to the first that passes (or
    ``day.max_replicas``)."""
    sizing = []
    for n in range(1, spec.day.max_replicas + 1):
        sc = validate_scenario(_fleet_raw(base_raw, n, None), source=f"peak hour, {n} replicas")
        r = _peak_hour_passes(sc, base_dir, specs, peak, spec.day.lead_in_s)
        sizing.append(r)
        if notify is not None:
            notify(f"peak hour {peak}: {n} replicas: attainment "
                   f"{(r['slo_attainment'] or 0.0):.1%}")
        if r["passed"]:
            break
    return sizing


def _evaluate_fleets(fleets: list[tuple], base_raw: dict, base_dir, specs: RequestStream,
                     win: dict | None, ex: dict) -> list[dict]:
    """Every fleet over the day, in ``fleets`` order; one whose scenario is refused is a row
    with its ``error``."""
    tasks, results = [], []
    for label, kind, n, auto in fleets:
        raw = _fleet_raw(base_raw, n, auto)
        try:
            validate_scenario(raw, source=label)
        except ScenarioError as e:  # refused: reported, the other fleets still run
            results.append({"label": label, "kind": kind, "replicas": n,
                            "error": f"not evaluated: {e}"})
            continue
        tasks.append({"label": label, "kind": kind, "replicas": n, "raw": raw,
                      "base_dir": base_dir, "windows": win})
    shown: set = set()
    done = run_tasks(day_fleet_worker, tasks, shared={"specs": specs}, backend=ex["backend"],
                     jobs=min(max(1, ex["jobs"]), max(1, len(tasks))), address=ex["address"])
    for d in done:
        reemit(d["warnings"], shown)
        results.append(d["fleet"])
    order = {k: i for i, (_l, k, _n, _a) in enumerate(fleets)}
    return sorted(results, key=lambda f: order[f["kind"]])


def run_day_plan(spec: DayPlanSpec, spec_dir: Path | None, *, trace: str | None = None,
                 scenario_overrides=None, outdir=None, jobs: int = 1, backend: str = "local",
                 address: str | None = None, source: str | Path | None = None,
                 figures: bool = True, notify=None) -> dict:
    """Size and simulate the fleets of ``spec`` and write ``plan.json``, ``plan.md`` /
    ``plan.html`` and ``day.png`` (module docstring).

    Returns
    -------
    dict
        ``name``, ``base``, ``peak_hour``, ``arrivals_by_hour``, ``sizing`` (the peak-hour
        runs), ``fleets`` (one entry per fleet: totals, rows; or ``error``), ``windowed``,
        ``files``.

    Raises
    ------
    PlanError
        On an unusable base scenario, or when no fleet up to ``day.max_replicas`` carries
        the peak hour.
    """
    base_raw, base_dir = resolve_base(spec.base, spec_dir)
    if base_raw.get("pools") is not None:
        raise PlanError(f"{spec.base}: a day plan sizes one pool; give a base without pools")
    ov = cli_overrides(scenario_overrides, trace)
    if spec.slo is not None:
        ov += [f"slo.{k}={'null' if v is None else v}" for k, v in spec.slo.model_dump().items()]
    base_raw = apply_overrides(base_raw, ov)
    base_sc = validate_scenario(base_raw, source=str(spec.base), overrides=ov)
    specs = load_workload(base_sc.workload, base_sc.seed, base_dir, lazy=True)
    out_dir = make_output_folder(Path(outdir) if outdir else named_output_folder(
        spec.output_dir, spec.name, "plan name", PlanError), PlanError)
    guard_outputs(out_dir, list(DAY_PLAN_FILES),
                  [spec_file(source, "plan"), None if isinstance(spec.base, dict) else
                   resolve_base_source(spec.base, spec_dir)[2]], [base_raw], base_dir,
                  PlanError)
    counts = hourly_arrivals(specs)
    peak = max(counts, key=lambda h: (counts[h], -h))
    mean = sum(counts.values()) / len(counts)
    sizing = _size_peak(spec, base_raw, base_dir, specs, peak, notify)
    n_peak = sizing[-1]["replicas"]
    if not sizing[-1]["passed"]:
        raise PlanError(f"{source or spec.name}: no fleet of 1 to {spec.day.max_replicas} "
                        f"replicas meets the SLO attainment target in the peak hour ({peak}); "
                        "raise day.max_replicas")
    n_mean = max(1, math.ceil(n_peak * mean / counts[peak]))
    fleets = [("static peak", "static_peak", n_peak, None),
              ("static mean", "static_mean", n_mean, None)]
    auto = spec.day.autoscale
    if auto is not None:  # starts from the static mean, within [min_replicas, max_replicas]
        fleets.append(("autoscaled", "autoscaled",
                       min(max(n_mean, auto.min_replicas), auto.max_replicas),
                       auto.model_dump(mode="json", exclude_unset=True)))
    win = spec.day.windows.model_dump() if spec.day.windows is not None else None
    results = _evaluate_fleets(fleets, base_raw, base_dir, specs, win,
                               {"jobs": jobs, "backend": backend, "address": address})
    plan = {"name": spec.name, "base": str(spec.base), "peak_hour": peak,
            "mean_hour_arrivals": mean, "arrivals_by_hour": {str(k): v for k, v in
                                                             counts.items()},
            "num_requests": len(specs), "slo": base_sc.slo.model_dump(),
            "lead_in_s": spec.day.lead_in_s, "sizing": sizing, "fleets": results,
            "windowed": win}
    plan["files"] = write_day_plan(plan, out_dir, figures=figures)
    return plan
