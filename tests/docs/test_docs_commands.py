"""Every command the docs show works.

- The tutorial (``docs/tutorial.md``) runs end to end: each ``servesim`` line of its
  ``console``/``bash`` blocks runs (``python -m simulator.cli``, a fresh process, in a temporary
  folder standing in for the repository root) and exits 0, each ``python`` block runs after the
  commands before it, every ``reports/...`` file the page names exists afterwards, and what the
  page says the runs show holds (4x the load misses the SLO target, a second replica meets it;
  static batching trails continuous batching; the plan recommends a deployment).
- The README's tour: every ``servesim`` command of its ``console`` block is one the tutorial
  runs, or runs here.
- Every ``servesim`` command shown anywhere in the docs, the README and ``benchmarks/README.md``
  parses with the real argparse parser (a renamed flag fails here).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from simulator.cli.main import build_parser

DOCS = REPO_ROOT / "docs"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = ("console", "bash", "sh", "shell")


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def servesim_commands(body: str) -> list[list[str]]:
    """The ``servesim ...`` command lines of a shell block (``\\`` continuations joined, a
    ``$`` prompt and ``#`` comments dropped), split as the shell would."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        line = line.strip().removeprefix("$ ")
        if line.startswith("servesim "):
            out.append(shlex.split(line, comments=True))
    return out


def run_servesim(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "simulator.cli", *argv[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture()
def repo_like(tmp_path):
    """An empty folder with the repository's shipped data folders linked in: commands written
    for the repository root run there without writing into the checkout."""
    for name in ("traces", "scenarios", "hardware_profiles"):
        (tmp_path / name).symlink_to(REPO_ROOT / name, target_is_directory=True)
    return tmp_path


def tutorial_commands() -> list[list[str]]:
    text = (DOCS / "tutorial.md").read_text()
    return [c for lang, body in blocks(text) if lang in SHELL for c in servesim_commands(body)]


def test_the_tutorial_runs_end_to_end(repo_like, monkeypatch):
    text = (DOCS / "tutorial.md").read_text()
    ran, outputs = [], {}
    for lang, body in blocks(text):
        if lang in SHELL:
            for argv in servesim_commands(body):
                r = run_servesim(argv, repo_like)
                assert r.returncode == 0, f"{shlex.join(argv)}:\n{r.stderr[-3000:]}"
                ran.append(argv)
                outputs[shlex.join(argv)] = r.stdout
        elif lang == "python":
            monkeypatch.chdir(repo_like)
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                exec(compile(body, "docs/tutorial.md", "exec"), {})  # noqa: S102 (our own page)
            assert printed.getvalue().strip(), "a tutorial snippet printed nothing"
    assert len(ran) >= 6, ran
    assert {a[1] for a in ran} >= {"run", "compare", "plan", "kv", "trace", "profiles"}

    named = set(re.findall(r"`(reports/[^`\s]+)`", text))
    assert named, "the tutorial names no output file"
    missing = sorted(p for p in named if not (repo_like / p).exists())
    assert not missing, f"the tutorial names files its commands did not write: {missing}"

    # what the page says the runs show
    def summary(name):
        return json.loads((repo_like / "reports" / name / "summary.json").read_text())

    base, fast, two = summary("default"), summary("default-4x"), summary("default-4x-2r")
    assert base["slo_attainment"] >= base["slo_attainment_target"]
    assert fast["slo_attainment"] < fast["slo_attainment_target"]  # "falls below its target"
    assert two["slo_attainment"] >= two["slo_attainment_target"]   # "brings it back"
    assert any("missed" in out for cmd, out in outputs.items() if "rate_scale=4 -o" in cmd)

    compared = json.loads((repo_like / "reports/compare-default/compare.json").read_text())
    by_name = {v["name"]: v["metrics"] for v in compared["variants"]}
    assert set(by_name) == {"static", "continuous"}
    assert by_name["static"]["ttft_p99_ms"] > by_name["continuous"]["ttft_p99_ms"]
    assert by_name["static"]["request_throughput_rps"] < \
        by_name["continuous"]["request_throughput_rps"]

    plan = json.loads((repo_like / "reports/plan_default/plan.json").read_text())
    assert plan["status"] not in ("none_passed",), plan["status"]
    assert plan["recommendation"]["config"]


def test_the_readme_tour_runs(repo_like):
    """The README's five tour commands: each one the tutorial runs, or run here."""
    text = (REPO_ROOT / "README.md").read_text()
    tour = [c for lang, body in blocks(text) if lang == "console" for c in servesim_commands(body)]
    assert len(tour) == 5, [shlex.join(c) for c in tour]
    covered = {shlex.join(c) for c in tutorial_commands()}
    for argv in tour:
        if shlex.join(argv) in covered:
            continue
        r = run_servesim(argv, repo_like)
        assert r.returncode == 0, f"{shlex.join(argv)}:\n{r.stderr[-3000:]}"


def documented_commands() -> list[tuple[str, list[str]]]:
    """(file, argv) of every ``servesim`` line in a shell block of the docs and READMEs."""
    files = sorted(DOCS.rglob("*.md")) + [REPO_ROOT / "README.md",
                                          REPO_ROOT / "benchmarks" / "README.md"]
    out = []
    for path in files:
        if not path.exists() or "results" in path.relative_to(REPO_ROOT).parts:
            continue
        for lang, body in blocks(path.read_text()):
            if lang in SHELL:
                out += [(path.relative_to(REPO_ROOT).as_posix(), c)
                        for c in servesim_commands(body)]
    return out


def test_every_documented_command_parses():
    found = documented_commands()
    assert len(found) > 30
    for where, argv in found:
        parser = build_parser(argv[1])
        try:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                parser.parse_args(argv[1:])
        except SystemExit as e:
            pytest.fail(f"{where}: {shlex.join(argv)}: exit {e.code}: {err.getvalue().strip()}")
