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
import pytest
from figure_content import figure_content
from md_tables import normalize_markdown
from report_cases import (
    CASES,
    SELF_CHECK_FIGURES,
    VALIDATION_FIGURES,
    WRITERS,
    case_json,
)

UPDATE = os.environ.get("SERVESIM_UPDATE_GOLDEN") == "1"


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


# ---------------------------------------------------------------------------- reports
@pytest.mark.parametrize("name", ["run_plain", "run_spec"])
def test_run_report(name, tmp_path, drawn):
    files = WRITERS[name](name, tmp_path)
    _check_text(CASES / name, "report.md", files["md"].read_text(encoding="utf-8"))
    _check_figures(CASES / name, drawn)


def test_compare_report(tmp_path, drawn):
    files = WRITERS["compare"]("compare", tmp_path)
    _check_text(CASES / "compare", "compare.md", files["md"].read_text(encoding="utf-8"))
    _check_figures(CASES / "compare", drawn)


def test_spec_sweep_report(tmp_path, drawn):
    files = WRITERS["spec_sweep"]("spec_sweep", tmp_path)
    _check_text(CASES / "spec_sweep", "acceptance_economics.md",
                files["md"].read_text(encoding="utf-8"))
    _check_figures(CASES / "spec_sweep", drawn)


@pytest.mark.parametrize("name", ["plan", "plan_none"])
def test_plan_report(name, tmp_path, drawn):
    files = WRITERS[name](name, tmp_path)
    _check_text(CASES / name, "plan.md", files["md"].read_text(encoding="utf-8"))
    _check_figures(CASES / name, drawn)


def test_validation_report():
    from simulator.observe.report import render_report
    _check_text(CASES / "validate", "report.md",
                render_report(case_json("validate", "validation.json"), VALIDATION_FIGURES))


def test_self_check_report():
    from calibration.validate import render_report
    _check_text(CASES / "self_check", "report.md",
                render_report(case_json("self_check", "validation.json"), SELF_CHECK_FIGURES))
