"""Sweeps and SLO-constrained capacity planning (local process pool or Ray).

Public API::

    run_sweep(spec, spec_dir, ...) -> SweepResult        # servesim sweep
    run_plan(spec, spec_dir, ...) -> PlanResult          # servesim plan
    search_capacity(scenario_dict, specs, ...) -> dict   # SLO-constrained capacity
    find_capacity(probe, ...) -> (scale, records, note)  # the search algorithm
    load_sweep_spec(path), load_plan_spec(path)          # validated files (PlanError)

The execution backends, the result cache and the field-path grids are shared with the other
experiments: :mod:`simulator.experiments`. Speed (issue 12 part 2): probes stop once their
verdict is known (:mod:`.early_stop`, ``search.early_stop``), candidates that cannot cost
less than a passing baseline are skipped (:mod:`.prune`, ``search.prune_dominated``), and
:mod:`.evaluate` runs the configurations in those phases, slowest first.
"""
from __future__ import annotations

from simulator.planner.gates import check_gates
from simulator.planner.plan import PlanResult, pareto_front, run_plan
from simulator.planner.search import SimRunner, find_capacity, replicas_for, search_capacity
from simulator.planner.spec import PlanError, PlanSpec, SweepSpec, load_plan_spec, load_sweep_spec
from simulator.planner.sweep import SweepResult, run_sweep

__all__ = [
    "PlanError",
    "PlanResult",
    "PlanSpec",
    "SimRunner",
    "SweepResult",
    "SweepSpec",
    "check_gates",
    "find_capacity",
    "load_plan_spec",
    "load_sweep_spec",
    "pareto_front",
    "replicas_for",
    "run_plan",
    "run_sweep",
    "search_capacity",
]
