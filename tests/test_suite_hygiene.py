"""The test suite itself: no wall-clock or measured-error bounds (they break under load and
live in benchmarks/), slow tests excluded by default, and data tests that fail (not skip)
when $SERVESIM_SHARED points at the wrong place."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO_ROOT, shared_path

TESTS = Path(__file__).resolve().parent
CLOCKS = re.compile(r"\btime\.(perf_counter|time|monotonic|process_time)\s*\(")


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
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -m slow" in ci and "timeout" in ci and "600" in ci


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
