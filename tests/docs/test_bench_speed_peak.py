"""``benchmarks/bench_speed.py``'s peak memory of a child is the child's own: Linux's
``ru_maxrss`` of a child (``os.wait4``) keeps the peak of the process that forked it, so a
small child of a large benchmark process read as large as the benchmark (the page's
``idle_replicas_10k_rss`` read 0.0 MiB). Runs one ``servesim --version`` child; times
nothing."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO_ROOT, load_file_module


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        yield load_file_module(REPO_ROOT / "benchmarks" / "bench_speed.py", "bench_speed_peak")
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
        sys.modules.pop("bench_speed_peak", None)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux's /proc")
def test_a_small_child_of_a_large_process_reports_its_own_peak(bench):
    big = np.ones(512 * 2**20 // 8)  # this process holds 512 MiB more than the child needs
    _, rss, err = bench.run_child(["-m", "simulator.cli", "--version"])
    assert big[-1] == 1.0
    assert rss < 256 * 2**20, rss  # servesim --version: well under 256 MiB
    assert "PEAK_RSS_KIB" not in err  # the report line is taken out of stderr
