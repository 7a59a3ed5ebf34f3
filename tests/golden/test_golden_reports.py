"""Golden reports: every report rendered from fixed inputs, against reviewed expected files.

Each case under ``reports/<case>/`` holds the *inputs* a report is made from (a run's
summary, request and step tables, a comparison's per-variant tables, a plan result, a
spec-sweep table, a validation record) and the *expected* output: the Markdown text and the
content of every figure (:func:`figure_content.figure_content`: titles, labels, legends and
every line / scatter / bar value to 6 significant digits). Rendering from stored inputs keeps
these tests independent of the simulator: a change of the performance model does not touch
them, a change of a report does.

Markdown is compared after :func:`md_tables.normalize_markdown` (table cells stripped, so column
padding does not count; alignment rows compared by alignment only): the prose, numbers and
table cells must be unchanged.

The inputs were produced by ``make_report_inputs.py`` (runs the simulator); the expected
files by this module. Refresh the expected files only on purpose::

    SERVESIM_UPDATE_GOLDEN=1 python -m pytest tests/golden/test_golden_reports.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib.figure as mpl_figure
import pandas as pd
import pytest
from figure_content import figure_content
from md_tables import normalize_markdown

CASES = Path(__file__).parent / "reports"
UPDATE = os.environ.get("SERVESIM_UPDATE_GOLDEN") == "1"
SELF_CHECK_FIGURES = ["step_pred_vs_meas.png", "latency_cdfs.png", "request_scatter.png"]
VALIDATION_FIGURES = ["request_scatter.png", "latency_cdfs.png", "running_waiting.png"]


# ---------------------------------------------------------------------------- comparison
def _check_text(case: Path, name: str, text: str) -> None:
    want_path = case / "expected" / name
    if UPDATE:
        want_path.write_text(text, encoding="utf-8")
    want = want_path.read_text(encoding="utf-8")
    got_lines, want_lines = normalize_markdown(text), normalize_markdown(want)
    for i, (g, w) in enumerate(zip(got_lines, want_lines)):
        assert g == w, f"{case.name}/{name} line {i + 1}:\n got: {g}\nwant: {w}"
    assert len(got_lines) == len(want_lines), f"{case.name}/{name}: line count"


def _check_figures(case: Path, figures: dict[str, dict]) -> None:
    want_path = case / "expected" / "figures.json"
    if UPDATE:
        want_path.write_text(json.dumps(figures, indent=0, sort_keys=True) + "\n")
    want = json.loads(want_path.read_text())
    assert sorted(figures) == sorted(want), case.name
    for name in want:
        assert figures[name] == want[name], f"{case.name}: figure {name} changed"


@pytest.fixture
def drawn(monkeypatch):
    """Collects the content of every figure saved while the test runs: {file name: content}."""
    seen: dict[str, dict] = {}
    original = mpl_figure.Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        seen[Path(fname).name if not str(fname).count("/figures/")
             else "figures/" + Path(fname).name] = figure_content(self)
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(mpl_figure.Figure, "savefig", savefig)
    return seen


def _json(case: Path, name: str):
    return json.loads((case / "input" / name).read_text())


def _table(case: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(case / "input" / name)


# ---------------------------------------------------------------------------- reports
@pytest.mark.parametrize("name", ["run_plain", "run_spec"])
def test_run_report(name, tmp_path, drawn):
    from simulator.report.run import write_run_report
    case = CASES / name
    path = write_run_report(tmp_path, _json(case, "summary.json"),
                            _table(case, "requests.parquet"), _table(case, "steps.parquet"),
                            _json(case, "scenario.json"),
                            title=f"servesim run: {_json(case, 'scenario.json')['name']}")
    _check_text(case, "report.md", path.read_text(encoding="utf-8"))
    _check_figures(case, drawn)


def _compare_result(case: Path):
    from simulator.config import Scenario
    from simulator.experiments.compare import CompareResult, Variant
    meta = _json(case, "compare.json")
    variants = [Variant(v["name"], [tuple(a) for a in v["assignments"]],
                        Scenario.model_validate(v["scenario"]), {},
                        _table(case, f"{v['name']}_requests.parquet"),
                        _table(case, f"{v['name']}_steps.parquet"), v["block_size"],
                        v["kv_bytes_per_token_per_gpu"]) for v in meta["variants"]]
    return CompareResult(meta["scenario_name"], [(k, vals) for k, vals in meta["varies"]],
                         variants, _table(case, "table.parquet"), meta["same_requests"],
                         meta["num_workloads"])


def test_compare_report(tmp_path, drawn):
    from simulator.report.compare import write_compare_report
    case = CASES / "compare"
    files = write_compare_report(_compare_result(case), tmp_path)
    _check_text(case, "compare.md", Path(files["markdown"]).read_text(encoding="utf-8"))
    _check_figures(case, drawn)


def test_spec_sweep_report(tmp_path, drawn):
    from simulator.config import Scenario
    from simulator.report.spec_sweep import write_spec_sweep_report
    case = CASES / "spec_sweep"
    results = {float(k): v for k, v in _json(case, "results.json").items()}
    scenario = Scenario.model_validate(_json(case, "scenario.json"))
    files = write_spec_sweep_report(tmp_path, _table(case, "table.parquet"), results, scenario,
                                    source="synthetic workload")
    _check_text(case, "acceptance_economics.md", files["md"].read_text(encoding="utf-8"))
    _check_figures(case, drawn)


def _plan_result(case: Path):
    from simulator.planner.plan import PlanResult
    from simulator.planner.spec import PlanSpec
    d = _json(case, "plan_result.json")
    return PlanResult(PlanSpec.model_validate(d["plan"]), d["status"], d["recommendation"],
                      d["candidates"], d["baseline"], d["pareto"], d["workload"], d["stats"],
                      d["base_scenario"])


@pytest.mark.parametrize("name", ["plan", "plan_none"])
def test_plan_report(name, tmp_path, drawn):
    from simulator.planner.report import write_plan_report
    case = CASES / name
    files = write_plan_report(_plan_result(case), tmp_path)
    _check_text(case, "plan.md", Path(files["md"]).read_text(encoding="utf-8"))
    _check_figures(case, drawn)


def test_validation_report(tmp_path):
    from simulator.observe.report import render_report
    case = CASES / "validate"
    _check_text(case, "report.md", render_report(_json(case, "validation.json"),
                                                 VALIDATION_FIGURES))


def test_self_check_report():
    from calibration.validate import render_report
    case = CASES / "self_check"
    _check_text(case, "report.md", render_report(_json(case, "validation.json"),
                                                 SELF_CHECK_FIGURES))
