"""Stops and temporary files of the experiments (issue 26 part 5), on real ``servesim``
processes with a process pool (``-j 2``) and a private ``$TMPDIR``:

- ``compare -j 2`` whose runs spool their steps and ITL samples to disk leaves nothing in
  ``$TMPDIR`` (before: every worker's spools, 25 MB for 4 variants here, stayed);
- SIGTERM (or Ctrl-C's SIGINT) to the main process of ``sweep`` / ``compare`` / ``plan``
  once a point has finished stops it within seconds (before: 20-30 s while the pool drained)
  with exit status 143 (130), one line saying how many points finished, nothing left in
  ``$TMPDIR``, and the finished points kept: cached for a rerun (sweep, plan), complete run
  folders (compare).

Timing is never measured: "promptly" is ``Popen.wait(timeout=STOP_WITHIN_S)`` after the
signal, a bound far above the fraction of a second a stop takes and far below the time the
rest of the family would take; the start (imports, the first point) may take as long as a
loaded machine needs.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO_ROOT, roofline_scenario_text

#: seconds a stopped command gets to exit after the signal
STOP_WITHIN_S = 10
#: polls (0.2 s each) for the first finished point before the test gives up
START_POLLS = 3000

BASE = roofline_scenario_text("stops", 30000, "{dist: uniform, low: 16, high: 400}",
                              "{dist: uniform, low: 1, high: 300}", rate_rps=50)


#: ``python -m simulator.cli ARGS`` with Ctrl-C's handler in place: a child started from a
#: background job inherits SIGINT ignored, and Python then leaves it ignored
_MAIN = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
         "runpy.run_module('simulator.cli', run_name='__main__', alter_sys=True)")


def _start(args: list[str], tmpdir: Path) -> subprocess.Popen:
    tmpdir.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(REPO_ROOT))
    # a session of its own: a command that does not stop is killed with its workers (which
    # hold its output pipes) as a group
    return subprocess.Popen([sys.executable, "-c", _MAIN, *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _kill(p: subprocess.Popen) -> None:
    """Kill the command and every process of its group (its pool's workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
    p.communicate()


def _wait_for(p: subprocess.Popen, ready) -> None:
    for _ in range(START_POLLS):
        if ready():
            return
        if p.poll() is not None:
            _out, err = p.communicate()
            pytest.fail(f"the command ended (rc {p.returncode}) before a point finished: {err}")
        time.sleep(0.2)
    _kill(p)
    pytest.fail("no point finished in time")


def _stop(p: subprocess.Popen, sig: int) -> tuple[int, str]:
    p.send_signal(sig)
    try:
        _out, err = p.communicate(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        _kill(p)
        pytest.fail(f"still running {STOP_WITHIN_S} s after signal {sig}")
    return p.returncode, err


def _leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _cache_entries(out: Path) -> list[Path]:
    return sorted((out / ".cache").rglob("*.json")) if (out / ".cache").is_dir() else []


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_compare_in_a_pool_leaves_no_spool(tmp_path):
    """Runs long enough to spool (4 x 100,000 decode steps) in two workers: the command
    succeeds and $TMPDIR ends empty (before: one ITL spool per variant, 6.4 MB each)."""
    (tmp_path / "base.yaml").write_text(BASE)
    p = _start(["compare", str(tmp_path / "base.yaml"), "-j", "2", "-q", "--no-figures",
                "-o", str(tmp_path / "out"),
                "--set", ("workload={synthetic: {arrival: {process: poisson, rate_rps: 1}, "
                          "num_requests: 4, prompt_tokens: {dist: fixed, value: 10}, "
                          "output_tokens: {dist: fixed, value: 100000}}}"),
                "--set", "scheduler.max_num_seqs=1", "--set", "scheduler.max_model_len=200000"],
               tmp_path / "tmp")
    _out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    runs = sorted(tmp_path.glob("out/*/summary.json"))
    assert len(runs) == 4
    # the runs did spool: 4 requests x 100,000 tokens = 400,000 ITL samples each, more than
    # the 4 x 65,536 a run keeps in memory (simulator.metrics.records)
    assert all(json.loads(r.read_text())["num_steps"] > 4 * 65_536 for r in runs)
    assert _leftovers(tmp_path / "tmp") == []


def test_sweep_sigterm_stops_at_once_keeps_finished_points_cached(tmp_path):
    """Point 0 is small (1,000 requests), points 1 and 2 large (30,000): the small one
    finishes first, SIGTERM arrives while the large ones run."""
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "sweep.yaml").write_text(
        "name: stops\nbase: base.yaml\ngrid:\n"
        "  workload.synthetic.num_requests: [1000, 30000, 30001]\n")
    out = tmp_path / "out"
    args = ["sweep", str(tmp_path / "sweep.yaml"), "-j", "2", "--no-figures", "-o", str(out)]
    p = _start(args + ["-q"], tmp_path / "tmp")
    _wait_for(p, lambda: bool(_cache_entries(out)))
    rc, err = _stop(p, signal.SIGTERM)
    assert rc == 143, err
    line = _one_line(err)
    m = re.fullmatch(r"servesim: terminated: (\d) of 3 sweep points finished; the finished "
                     r"ones are cached in (.+): a rerun uses them", line)
    assert m, line
    finished = int(m[1])
    assert 1 <= finished < 3 and Path(m[2]) == out / ".cache"
    assert len(_cache_entries(out)) == finished
    assert _leftovers(tmp_path / "tmp") == []
    # a rerun of the small point takes it from the cache
    p = _start(args + ["--sweep-set", "grid={workload.synthetic.num_requests: [1000]}"],
               tmp_path / "tmp")
    stdout, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert "0 simulated, 1 from cache" in " ".join(stdout.split()), stdout
    assert _leftovers(tmp_path / "tmp") == []


def test_compare_sigint_stops_at_once_keeps_finished_run_folders(tmp_path):
    """As the sweep: a small variant finishes first, Ctrl-C while two large ones run."""
    (tmp_path / "base.yaml").write_text(BASE)
    out = tmp_path / "out"
    p = _start(["compare", str(tmp_path / "base.yaml"), "-j", "2", "-q", "--no-figures",
                "-o", str(out), "--vary", "workload.synthetic.num_requests=1000,20000,20001"],
               tmp_path / "tmp")
    _wait_for(p, lambda: any(out.glob("*/summary.json")))
    rc, err = _stop(p, signal.SIGINT)
    assert rc == 130, err
    line = _one_line(err)
    m = re.fullmatch(r"servesim: interrupted: (\d) of 3 variants finished \(their run "
                     r"folders in (.+) are complete\)", line)
    assert m, line
    assert int(m[1]) == len(list(out.glob("*/summary.json"))) >= 1 and Path(m[2]) == out
    assert (out / "num_requests=1000" / "summary.json").is_file()  # the small one
    assert not (out / "compare.md").exists()  # the comparison itself was not written
    assert _leftovers(tmp_path / "tmp") == []


def test_plan_sigterm_stops_at_once_keeps_finished_candidates_cached(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE.replace("num_requests: 30000", "num_requests: 3000"))
    (tmp_path / "plan.yaml").write_text(
        "name: stops\nbase: base.yaml\ntarget_rate_rps: 40\nslo: {ttft_s: 2.0}\n"
        "search_space:\n  scheduler.max_num_seqs: [4, 8, 16, 32]\n"
        "search: {max_requests: 1000, max_probes: 4}\n")
    out = tmp_path / "out"
    args = ["plan", str(tmp_path / "plan.yaml"), "-j", "2", "--no-figures", "-o", str(out)]
    p = _start(args + ["-q"], tmp_path / "tmp")
    _wait_for(p, lambda: bool(_cache_entries(out)))
    # the first entries appear while the first finished candidate's results are being stored
    # (its simulations', then its own): let that finish (milliseconds; a candidate takes
    # seconds) so that the stop comes after at least one candidate counts as finished
    time.sleep(0.3)
    rc, err = _stop(p, signal.SIGTERM)
    assert rc == 143, err
    line = _one_line(err)
    # 4 candidates and the baseline (the base scenario as it is, evaluated as every plan's)
    m = re.fullmatch(r"servesim: terminated: (\d) of 5 plan candidates finished \(0 of them "
                     r"from the cache\); the finished ones are cached in (.+): a rerun uses "
                     r"them", line)
    assert m, line
    finished = int(m[1])
    assert 1 <= finished < 5 and Path(m[2]) == out / ".cache"
    assert _leftovers(tmp_path / "tmp") == []
    # the rerun serves the finished candidates from the cache and evaluates the others
    p = _start(args, tmp_path / "tmp")
    stdout, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    m = re.search(r"(\d+) simulations, (\d+) cache hits", " ".join(stdout.split()))
    assert m and int(m[2]) >= finished and int(m[1]) > 0, stdout
    assert _leftovers(tmp_path / "tmp") == []
