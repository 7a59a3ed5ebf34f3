"""The test suite itself: no wall-clock or measured-error bounds (they break under load and
live in benchmarks/), slow tests excluded by default, data tests that fail (not skip)
when $SERVESIM_SHARED points at the wrong place, and test files named for the behaviour they
pin, in the folder of the layer it lives in (issue 28 part 5)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO_ROOT, shared_path

TESTS = Path(__file__).resolve().parent
CLOCKS = re.compile(r"\btime\.(perf_counter|time|monotonic|process_time)\s*\(")

#: Folders of suites that cut across the layers: the DESIGN.md invariants, the hostile-input
#: corpus, golden outputs, fidelity against theory and records, hypothesis properties, and
#: the docs site's commands and reference.
CROSS_CUTTING = frozenset({"invariants", "hostile", "golden", "fidelity", "property", "docs"})
#: The checks of the code base as a whole, in tests/ itself.
ROOT_TESTS = frozenset({"test_import_graph.py", "test_module_size.py", "test_suite_hygiene.py"})
#: Words that name the work that made a test (an issue, a review, a wave of fixes), not the
#: behaviour it pins; as one ``_``-separated part of a file name, with or without a number.
WORK_WORD = re.compile(r"(hardening|review|wave|issue|session|round|fix)(e?s)?\d*")


def _layers() -> set[str]:
    """The layer folders: one per package of simulator/, and calibration/."""
    sim = REPO_ROOT / "simulator"
    return {p.name for p in sim.iterdir() if (p / "__init__.py").is_file()} | {"calibration"}


def _work_words(name: str) -> list[str]:
    """The parts of a file name (``test_review3.py``) that name work rather than behaviour
    (``round`` of ``round_robin`` is behaviour)."""
    parts = Path(name).stem.split("_")
    return [w for i, w in enumerate(parts) if WORK_WORD.fullmatch(w)
            and not (w == "round" and parts[i + 1:i + 2] == ["robin"])]


def _test_files() -> list[Path]:
    """Every file pytest collects tests from (``test_*.py``, ``*_test.py``), relative to
    tests/."""
    found = set(TESTS.rglob("test_*.py")) | set(TESTS.rglob("*_test.py"))
    return sorted(p.relative_to(TESTS) for p in found if "__pycache__" not in p.parts)


def test_no_test_reads_the_wall_clock():
    """A test that times itself asserts something about the machine, not the simulator."""
    offenders = []
    for p in sorted(TESTS.rglob("*.py")):
        if p.name == Path(__file__).name:
            continue
        for no, line in enumerate(p.read_text().splitlines(), 1):
            if CLOCKS.search(line):
                offenders.append(f"{p.relative_to(REPO_ROOT)}:{no}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_slow_tests_are_excluded_by_default():
    text = (REPO_ROOT / "pyproject.toml").read_text()  # (tomllib needs Python 3.11)
    assert re.search(r"^addopts = \".*-m 'not slow'.*\"$", text, re.MULTILINE), "addopts"
    assert '"slow: ' in text


def test_ci_runs_slow_tests_within_a_budget():
    """The slow pass runs under ``timeout`` within a whole-run budget that leaves CI inside
    its 30 minutes (both builds' default suites come first)."""
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -m slow" in ci and "timeout" in ci
    budget = re.search(r"^budget=\$\{CI_BUDGET_S:-(\d+)\}$", ci, re.MULTILINE)
    assert budget and 600 <= int(budget.group(1)) <= 25 * 60, "CI_BUDGET_S default"


def test_shared_set_but_wrong_fails(monkeypatch, tmp_path):
    monkeypatch.setenv("SERVESIM_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(pytest.fail.Exception, match="SERVESIM_SHARED=.* is not a folder"):
        shared_path("traces/x.csv")
    (tmp_path / "s").mkdir()
    monkeypatch.setenv("SERVESIM_SHARED", str(tmp_path / "s"))
    with pytest.raises(pytest.fail.Exception, match="has no file traces/x.csv"):
        shared_path("traces/x.csv")


def test_shared_set_and_right_returns_the_path(monkeypatch, tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "x.csv").write_text("a\n")
    monkeypatch.setenv("SERVESIM_SHARED", str(tmp_path))
    assert shared_path("traces/x.csv") == tmp_path / "traces" / "x.csv"


def test_shared_unset_and_absent_skips(monkeypatch):
    monkeypatch.delenv("SERVESIM_SHARED", raising=False)
    with pytest.raises(pytest.skip.Exception, match="set SERVESIM_SHARED"):
        shared_path("traces/certainly-not-there-8c1f.csv")


def _pytest_run(tmp_path, test_source: str):
    """Run pytest on one test file beside a copy of this suite's conftest (the hooks under
    test); returns (exit code, output)."""
    import shutil
    import subprocess
    import sys
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_w.py").write_text(test_source)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", "--rootdir", str(tmp_path), "-c", "/dev/null",
                        str(tmp_path / "test_w.py")], check=False, capture_output=True,
                       text=True, cwd=tmp_path, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_an_unexplained_warning_fails_the_run(tmp_path):
    """The suite ends with no unexplained warning (issue 26): one that reaches pytest fails
    the run even when every test passed, and names the test; an asserted or filtered one
    does not."""
    rc, out = _pytest_run(tmp_path, "import warnings\n\ndef test_x():\n"
                                    "    warnings.warn('stray', UserWarning)\n")
    assert rc == 1, out
    assert "unexplained warnings" in out and "test_w.py::test_x: UserWarning: stray" in out
    rc, out = _pytest_run(tmp_path, (
        "import warnings\n\nimport pytest\n\n\ndef test_x():\n"
        "    with pytest.warns(UserWarning, match='expected'):\n"
        "        warnings.warn('expected', UserWarning)\n\n\n"
        "@pytest.mark.filterwarnings('ignore:known:UserWarning')  # the reason\n"
        "def test_y():\n    warnings.warn('known', UserWarning)\n"))
    assert rc == 0, out
    assert "unexplained" not in out


def test_no_file_is_named_after_the_work_that_made_it():
    """A test file says what it pins (``test_max_tokens_at_arrival.py``), not which issue,
    review or wave of fixes made it (``test_hardening.py``, ``test_review3.py``)."""
    for bad in ("test_hardening.py", "test_review3.py", "test_plan_review.py", "test_wave2.py",
                "test_issue28_x.py", "test_session10_inputs.py", "test_round2.py",
                "test_fixes.py"):
        assert _work_words(bad), bad
    for good in ("test_prefix_affinity.py", "test_round_robin.py", "test_fixed_point.py"):
        assert not _work_words(good), good
    named = [f"{p}: {', '.join(_work_words(p.name))}"
             for p in sorted(q.relative_to(TESTS) for q in TESTS.rglob("*.py"))
             if "__pycache__" not in p.parts and _work_words(p.name)]
    assert not named, "name these for the behaviour they pin:\n" + "\n".join(named)


def test_every_test_file_lives_in_a_layer_or_cross_cutting_folder():
    """tests/<layer>/test_<behaviour>.py, <layer> a folder of simulator/ (or calibration);
    suites across the layers in their own folders; tests/ itself holds only the checks of the
    code base as a whole."""
    layers = _layers()
    misplaced = []
    for p in _test_files():
        if len(p.parts) == 1:
            ok = p.name in ROOT_TESTS
        else:
            ok = len(p.parts) == 2 and p.parts[0] in layers | CROSS_CUTTING
        if not ok:
            misplaced.append(str(p))
    assert not misplaced, (
        f"test files outside tests/<layer>/ (layers: {', '.join(sorted(layers))}; across "
        f"layers: {', '.join(sorted(CROSS_CUTTING))}):\n" + "\n".join(misplaced))
