"""The stored report inputs of ``tests/golden/reports/<case>/input/`` and the writers that turn
each case into its report files (for the golden tests and the browser tests).

Import with ``from report_cases import ...`` (``tests/conftest.py`` puts this folder on the
path). Every writer returns ``{"md": path, "html": path}`` (plus what else it wrote) and needs
no simulation: the inputs are a run's summary and tables, a comparison's per-variant tables,
a plan result, a spec-sweep table and runs, a validation record.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

CASES = Path(__file__).resolve().parent / "golden" / "reports"
#: The figures the two validation reports show (the stored validation inputs do not hold
#: their data: their pages are checked without them).
SELF_CHECK_FIGURES = ["step_pred_vs_meas.png", "latency_cdfs.png", "request_scatter.png"]
VALIDATION_FIGURES = ["request_scatter.png", "latency_cdfs.png", "running_waiting.png"]


def case_json(case: str, name: str):
    return json.loads((CASES / case / "input" / name).read_text())


def case_table(case: str, name: str) -> pd.DataFrame:
    return pd.read_parquet(CASES / case / "input" / name)


def write_run_case(case: str, outdir: Path) -> dict[str, Path]:
    from simulator.report.run import write_run_report
    scenario = case_json(case, "scenario.json")
    md = write_run_report(outdir, case_json(case, "summary.json"),
                          case_table(case, "requests.parquet"), case_table(case, "steps.parquet"),
                          scenario, title=f"servesim run: {scenario['name']}")
    return {"md": md, "html": md.with_suffix(".html")}


def compare_result(case: str = "compare"):
    from simulator.experiments.compare import CompareResult, Variant
    from simulator.scenario.config import Scenario
    meta = case_json(case, "compare.json")
    variants = [Variant(v["name"], [tuple(a) for a in v["assignments"]],
                        Scenario.model_validate(v["scenario"]), {},
                        case_table(case, f"{v['name']}_requests.parquet"),
                        case_table(case, f"{v['name']}_steps.parquet"), v["block_size"],
                        v["kv_bytes_per_token_per_gpu"]) for v in meta["variants"]]
    return CompareResult(meta["scenario_name"], [(k, vals) for k, vals in meta["varies"]],
                         variants, case_table(case, "table.parquet"), meta["same_requests"],
                         meta["num_workloads"])


def write_compare_case(case: str, outdir: Path) -> dict[str, Path]:
    from simulator.report.compare import write_compare_report
    files = write_compare_report(compare_result(case), outdir)
    return {**files, "md": files["markdown"]}


def write_spec_sweep_case(case: str, outdir: Path) -> dict[str, Path]:
    from simulator.report.spec_sweep import write_spec_sweep_report
    from simulator.scenario.config import Scenario
    results = {float(k): v for k, v in case_json(case, "results.json").items()}
    scenario = Scenario.model_validate(case_json(case, "scenario.json"))
    return write_spec_sweep_report(outdir, case_table(case, "table.parquet"), results,
                                   scenario, source="synthetic workload")


def plan_result(case: str):
    from simulator.planner.plan import PlanResult
    from simulator.planner.spec import PlanSpec
    d = case_json(case, "plan_result.json")
    return PlanResult(PlanSpec.model_validate(d["plan"]), d["status"], d["recommendation"],
                      d["candidates"], d["baseline"], d["pareto"], d["workload"], d["stats"],
                      d["base_scenario"], fallback=d.get("fallback") or {},
                      last_known_good=d.get("last_known_good"), quality=d.get("quality"))


def write_plan_case(case: str, outdir: Path) -> dict[str, Path]:
    from simulator.planner.report import write_plan_report
    return write_plan_report(plan_result(case), outdir)


def write_validation_case(case: str, outdir: Path, figures: list[str] = ()) -> dict[str, Path]:
    from simulator.observe.report import write_reports
    md, html = write_reports(outdir, case_json(case, "validation.json"), list(figures))
    return {"md": md, "html": html}


def write_self_check_case(case: str, outdir: Path, figures: list[str] = ()) -> dict[str, Path]:
    from calibration.validate import render_report
    from simulator.report.render import write_report
    return write_report(outdir, "report", render_report(case_json(case, "validation.json"),
                                                        list(figures)))


#: Case name -> writer(case, outdir) (figures drawn where the case has their data).
WRITERS = {
    "run_plain": write_run_case,
    "run_spec": write_run_case,
    "compare": write_compare_case,
    "spec_sweep": write_spec_sweep_case,
    "plan": write_plan_case,
    "plan_none": write_plan_case,
    "validate": write_validation_case,
    "self_check": write_self_check_case,
}
