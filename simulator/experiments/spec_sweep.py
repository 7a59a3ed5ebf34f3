"""Acceptance economics, the experiment: a scenario with and without its ``speculative``
block, on the same requests, at several arrival rates (``servesim spec-sweep``).

- :func:`compare_with_baseline`: one load; the two summaries and their net effect
  (:func:`simulator.speculative.economics.net_effect`);
- :func:`sweep_rates`: every rate multiplier (``workload.rate_scale``) x {with, without}
  speculation through the family runner (:func:`simulator.experiments.runner.run_family`:
  each rate's request list is loaded once and replayed by both runs; ``jobs > 1`` runs them
  in a local process pool, ``backend="ray"`` on Ray), as the tidy table of
  :func:`simulator.speculative.economics.sweep_rows`;
- :func:`run_spec_sweep`: the sweep and its report (:mod:`simulator.report.spec_sweep`).

The baseline run drops the ``speculative`` block and nothing else: it gets the KV memory the
draft would take.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.base.outdir import clear_outputs, make_output_folder, named_output_folder
from simulator.base.request import RequestSpec
from simulator.experiments.runner import Workloads, guard_outputs, run_family
from simulator.metrics.speculative import speculative_summary
from simulator.report.spec_sweep import FIGURE_FILE, REPORT_STEM, write_spec_sweep_report
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import Scenario
from simulator.speculative.economics import DEFAULT_RATES, net_effect, sweep_rows
from simulator.workload import load_workload

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = [
    "baseline_scenario",
    "compare_with_baseline",
    "run_once",
    "run_spec_sweep",
    "scenario_at_rate",
    "sweep_rates",
]


#: The files of a spec-sweep in its output folder
SPEC_SWEEP_FILES = (f"{REPORT_STEM}.md", f"{REPORT_STEM}.html", f"{REPORT_STEM}.csv",
                    FIGURE_FILE, "spec_sweep.json")


def baseline_scenario(scenario: Scenario) -> Scenario:
    """``scenario`` without its ``speculative`` block (named ``<name>_no_spec``)."""
    return scenario.model_copy(update={"speculative": None,
                                       "name": f"{scenario.name}_no_spec"})


def scenario_at_rate(scenario: Scenario, rate: float) -> Scenario:
    """``scenario`` with its ``workload.rate_scale`` multiplied by ``rate``."""
    wl = scenario.workload.model_copy(update={"rate_scale": scenario.workload.rate_scale * rate})
    return scenario.model_copy(update={"workload": wl})


def run_once(scenario: Scenario, base_dir: Path | None,
                     specs: Sequence[RequestSpec] | None = None) -> dict[str, Any]:
    """Simulate one scenario without writing; its summary with the speculative block.

    Adds ``arrival_rate_rps``: requests / (last - first arrival) of ``specs`` (requests/s;
    None for a single arrival time).
    """
    res = run_scenario(scenario, base_dir, specs=specs, write=False, figures=False)
    summary = dict(res.summary)
    if scenario.speculative is not None and not summary.get("speculative"):
        summary["speculative"] = speculative_summary(res.sim)
    if specs:
        last = max(s.arrival_time_s for s in specs)
        first = min(s.arrival_time_s for s in specs)
        summary["arrival_rate_rps"] = (len(specs) / (last - first)) if last > first else None
    return summary


def compare_with_baseline(scenario: Scenario, base_dir: Path | None = None,
                          specs: list[RequestSpec] | None = None) -> dict[str, Any]:
    """Run ``scenario`` with and without speculation on the same requests.

    Parameters
    ----------
    scenario : Scenario
        With a ``speculative`` block.
    base_dir : pathlib.Path, optional
        Folder relative paths of the scenario resolve against.
    specs : list of RequestSpec, optional
        The requests (default: the scenario's workload).

    Returns
    -------
    dict
        ``speculative`` and ``baseline`` (run summaries; the first carries
        ``summary["speculative"]``) and ``net`` (:func:`~simulator.speculative.economics.net_effect`).

    Raises
    ------
    ValueError
        If the scenario has no ``speculative`` block.
    """
    if scenario.speculative is None:
        raise ValueError("the scenario has no speculative: block to compare against")
    if specs is None:
        specs = load_workload(scenario.workload, scenario.seed, base_dir)
    spec = run_once(scenario, base_dir, specs)
    base = run_once(baseline_scenario(scenario), base_dir, specs)
    return {"speculative": spec, "baseline": base, "net": net_effect(spec, base)}


def _worker(task: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """One run of the sweep (runs in a worker): ``{"summary"}`` of the task's scenario."""
    specs = shared["workloads"][task["workload"]]
    return {"summary": run_once(task["scenario"], task["base_dir"], specs)}


def sweep_rates(scenario: Scenario, base_dir: Path | None = None,
                rates: Sequence[float] = DEFAULT_RATES, *, jobs: int = 1,
                backend: str = "local", address: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> tuple[pd.DataFrame, dict]:
    """Run the scenario with and without speculation at each arrival-rate multiplier.

    Parameters
    ----------
    scenario : Scenario
        With a ``speculative`` block.
    base_dir : pathlib.Path, optional
        Folder relative paths of the scenario resolve against.
    rates : sequence of float
        Multipliers of the scenario's ``workload.rate_scale`` (each > 0).
    jobs, backend, address
        Where the runs go (:func:`simulator.experiments.executor.run_tasks`); runs are
        independent and deterministic, so results do not depend on them.
    progress : callable, optional
        ``progress(done, total)`` after each run.

    Returns
    -------
    (pandas.DataFrame, dict)
        The tidy table (one row per rate and slice, slice ``"all"`` for the whole run,
        sorted by slice then rate; columns of
        :func:`~simulator.speculative.economics.sweep_rows`) and
        ``{rate: {"speculative": summary, "baseline": summary}}``.

    Raises
    ------
    ValueError
        If the scenario has no ``speculative`` block or a rate is not positive.
    """
    import pandas as pd

    if scenario.speculative is None:
        raise ValueError("the scenario has no speculative: block to sweep")
    rates = [float(r) for r in rates]
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError(f"rates must be positive numbers, got {rates}")
    workloads = Workloads()
    tasks = []
    for r in rates:
        at_rate = scenario_at_rate(scenario, r)
        wid = workloads.add(at_rate.workload, at_rate.seed, base_dir)
        for with_spec in (True, False):
            sc = at_rate if with_spec else baseline_scenario(at_rate)
            tasks.append({"key": f"{r!r}:{'speculative' if with_spec else 'baseline'}",
                          "rate": r, "with_spec": with_spec, "scenario": sc,
                          "base_dir": base_dir, "workload": wid})
    out, _ran = run_family(_worker, tasks, shared={"workloads": workloads.lists},
                           backend=backend, jobs=jobs, address=address, progress=progress,
                           what="runs")
    results: dict[float, dict] = {r: {} for r in rates}
    for t in tasks:
        results[t["rate"]]["speculative" if t["with_spec"] else "baseline"] = \
            out[t["key"]]["summary"]
    k = scenario.speculative.num_speculative_tokens
    rows = []
    for r in rates:
        rows += sweep_rows(r, results[r]["speculative"], results[r]["baseline"], k)
    df = pd.DataFrame(rows).sort_values(["slice", "rate_scale"], kind="stable")
    return df.reset_index(drop=True), results


def run_spec_sweep(scenario: Scenario, base_dir: Path | None, rates: Sequence[float], *,
                   outdir: str | Path | None = None, source: str = "", figures: bool = True,
                   jobs: int = 1, backend: str = "local", address: str | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   scenario_file: str | Path | None = None
                   ) -> tuple[pd.DataFrame, dict, dict[str, Path]]:
    """:func:`sweep_rates` and its report in ``outdir``.

    Parameters
    ----------
    scenario, base_dir, rates, jobs, backend, address, progress
        See :func:`sweep_rates`.
    outdir : path, optional
        Output folder (default ``reports/<name>_spec_sweep``).
    source : str
        The workload source named in the report.
    figures : bool
        Draw the figure.
    scenario_file : path, optional
        The scenario file (an input no output may overwrite; the scenario's trace, model
        and GPU files are checked too).

    Returns
    -------
    (pandas.DataFrame, dict, dict)
        The table, the runs, and the files written
        (:func:`simulator.report.spec_sweep.write_spec_sweep_report`).
    """
    out = make_output_folder(Path(outdir) if outdir else named_output_folder(
        "reports/{name}_spec_sweep", scenario.name, "scenario name"))  # before any run
    guard_outputs(out, SPEC_SWEEP_FILES, [scenario_file], [scenario], base_dir)
    df, results = sweep_rates(scenario, base_dir, rates, jobs=jobs, backend=backend,
                              address=address, progress=progress)
    clear_outputs(out, SPEC_SWEEP_FILES)  # an earlier sweep's (its figure after --no-figures)
    files = write_spec_sweep_report(out, df, results, scenario, source=source, figures=figures)
    return df, results, files
