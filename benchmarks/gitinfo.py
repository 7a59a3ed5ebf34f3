"""The commit a benchmark's page was made at, for the pages under ``docs/results/``.

Not a benchmark: a helper of ``bench_fidelity.py`` and ``bench_speed.py``.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the folders whose uncommitted changes can change a benchmark's figures
MEASURED_PATHS = ("simulator", "benchmarks", "engine_profiles", "hardware_profiles")


def commit_label(repo: Path = REPO, paths: tuple[str, ...] = MEASURED_PATHS) -> str:
    """``git rev-parse --short HEAD`` of ``repo``, with `` + uncommitted changes`` when a tracked
    file under ``paths`` differs from it; ``unknown`` outside a git checkout."""
    def git(*a):
        return subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True,
                              check=False)
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode:
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", *paths).stdout.strip()
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")
