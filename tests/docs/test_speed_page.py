"""The speed results page (``benchmarks/speed_page.py``, written by ``bench_speed.py --page``)
from given figures: issue 29's per-build targets derived by hand, the table's verdicts and
factors, which figures a run selects, the build read from ``servesim --version`` (wrapped as
argparse prints it), and that every ``servesim`` command the page shows parses. Nothing here
runs or times servesim."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys

import pytest
from helpers import REPO_ROOT, load_file_module
from md_tables import tables

from simulator.cli.main import build_parser


@pytest.fixture(scope="module")
def sp():
    try:
        yield load_file_module(REPO_ROOT / "benchmarks" / "speed_page.py", "speed_page")
    finally:
        sys.modules.pop("speed_page", None)


def _info(sp, cores, **kw):
    return sp.PageInfo(commit="abc1234", date="2026-01-01", cpu="Test CPU", cpus=2,
                       load_before=0.5, load_after=0.7, repeat=3, repeat_big=1, cores=cores,
                       **kw)


def test_targets_follow_issue_29(sp):
    """Vidur's 57.6 s over 20x / 12x, the 3,600 s hour over 1,500x / 800x (with figures 0.6 s
    more); the rest shared."""
    t = {f.name: f.targets for f in sp.FIGURES}
    assert t["side_by_side_34b"]["compiled"] == pytest.approx(2.88)
    assert t["side_by_side_34b"]["pure"] == pytest.approx(4.8)
    assert t["llama8b_h100_hour"]["compiled"] == pytest.approx(2.4)
    assert t["llama8b_h100_hour"]["pure"] == pytest.approx(4.5)
    # the hour with figures: 0.6 s over each build's hour target (3600 / 1500 + 0.6 = 3.0,
    # 3600 / 800 + 0.6 = 5.1)
    assert t["llama8b_h100_hour_figures"]["compiled"] == pytest.approx(3.0)
    assert t["llama8b_h100_hour_figures"]["pure"] == pytest.approx(5.1)
    shared = {"plan_azure_conv": 30.0, "scale_1m": 120.0,
              "scale_1m_peak_rss": 1.5, "idle_replicas_10k_rss": 100.0,
              "startup_first_event": 0.5, "servegen_day": 180.0}
    for name, bound in shared.items():
        assert t[name] == {"compiled": bound, "pure": bound}, name


def test_servegen_day_is_opt_in(sp):
    default = sp.select([], [])
    assert "servegen_day" not in default
    assert len(default) == len(sp.FIGURES) - 1
    assert sp.select(["servegen"], []) == ["servegen_day"]
    assert sp.select(["scale"], ["scale_1m_peak"]) == ["scale_1m"]
    assert "side_by_side_34b" not in sp.select([], ["side"])


@pytest.mark.parametrize(("text", "core"), [
    ("servesim 0.1.0 (core: compiled (mypyc))\n", "compiled (mypyc)"),
    ("servesim 0.1.0 (core: pure Python (SERVESIM_PURE_PYTHON=1))\n",
     "pure Python (SERVESIM_PURE_PYTHON=1)"),
    # argparse wraps the version line at the terminal width
    (("servesim 0.1.0 (core: pure Python (this install has no compiled core (no C\n"
     "compiler or mypyc at install time)))\n"),
     ("pure Python (this install has no compiled core (no C compiler or mypyc at install "
     "time))")),
])
def test_parse_core_reads_the_version_line(sp, text, core):
    assert sp.parse_core(text) == core


def test_parse_core_refuses_other_output(sp):
    with pytest.raises(ValueError, match="core"):
        sp.parse_core("servesim 0.1.0\n")


def test_table_has_a_column_group_per_build_with_verdicts(sp):
    R = sp.Result
    results = {"compiled": {"side_by_side_34b": R(2.0), "llama8b_h100_hour": R(3.0),
                            "startup_first_event": R(0.4)},
               "pure": {"side_by_side_34b": R(5.0), "llama8b_h100_hour": R(4.0),
                        "startup_first_event": R(0.6)}}
    (rows,) = tables(sp.table(results, ["compiled", "pure"]))
    assert rows[0] == ["figure", "compiled: measured", "target", "met",
                       "pure: measured", "target", "met"]
    by = {r[0]: r[1:] for r in rows[1:]}
    assert set(by) == {"`side_by_side_34b`", "`llama8b_h100_hour`", "`startup_first_event`"}
    # 57.6 / 2.0 = 28.8x (target 2.88 s: met); 57.6 / 5.0 = 11.5x (target 4.8 s: missed)
    assert by["`side_by_side_34b`"] == ["2.00 s (28.8x faster than Vidur)", "<= 2.88 s", "yes",
                                        "5.00 s (11.5x faster than Vidur)", "<= 4.8 s", "no"]
    # 3600 / 3.0 = 1,200x (target 2.4 s: missed); 3600 / 4.0 = 900x (target 4.5 s: met)
    assert by["`llama8b_h100_hour`"] == ["3.00 s (1,200x real time)", "<= 2.4 s", "no",
                                         "4.00 s (900x real time)", "<= 4.5 s", "yes"]
    assert by["`startup_first_event`"] == ["0.40 s", "<= 0.5 s", "yes",
                                           "0.60 s", "<= 0.5 s", "no"]


def test_pure_only_page_says_why_and_marks_a_partial_day(sp):
    why = "the checkout's `servesim --version` says `core: pure Python (no compiler)`"
    results = {"pure": {"servegen_day": sp.Result(200.0, "first 3,600 s only", judged=False),
                        "idle_replicas_10k_rss": sp.Result(12.34)}}
    text = sp.page(results, _info(sp, {"pure": "pure Python (SERVESIM_PURE_PYTHON=1)"},
                                  not_measured_builds={"compiled": why},
                                  servegen_window_s=3600.0))
    assert f"- `compiled`: not measured: {why}" in text
    assert "- `pure`: `core: pure Python (SERVESIM_PURE_PYTHON=1)`" in text
    (rows,) = [t for t in tables(text) if t[0][0] == "figure"]
    assert rows[0] == ["figure", "pure: measured", "target", "met"]
    by = {r[0]: r[1:] for r in rows[1:]}
    # a shorter window than the day: no verdict although 200 s > 180 s
    assert by["`servegen_day`"] == ["200.00 s (first 3,600 s only)", "<= 180 s", "n/a"]
    assert by["`idle_replicas_10k_rss`"] == ["12.3 MiB", "<= 100 MiB", "yes"]
    assert "first 3,600 s of the day only" in text
    left = re.search(r"Not measured in this run: (.*)\.", text).group(1)
    assert "`side_by_side_34b`" in left and "servegen_day" not in left
    assert "commit `abc1234`" in text and "Test CPU, 2 CPUs" in text


def test_page_names_the_vidur_commit_and_its_commands_parse(sp):
    text = sp.page({"compiled": {}, "pure": {}},
                   _info(sp, {"compiled": "compiled (mypyc)", "pure": "pure Python (x)"}))
    assert sp.VIDUR_COMMIT in text and len(sp.VIDUR_COMMIT) == 40
    assert "57.6 s" in text
    assert "`servegen_day` (opt-in)" in text
    commands = [shlex.split(ln) for ln in text.splitlines() if ln.startswith("servesim ")]
    assert len(commands) == 2
    for argv in commands:
        with contextlib.redirect_stderr(io.StringIO()):
            build_parser(argv[1]).parse_args(argv[1:])
    vidur = re.search(r"python -m vidur\.main.*?\n```", text, re.DOTALL).group(0)
    flags = dict(re.findall(r"(--\S+) (\S+)", vidur))
    assert flags["--cluster_config_num_replicas"] == "3"
    assert flags["--replica_config_tensor_parallel_size"] == "2"
    assert flags["--global_scheduler_config_type"] == "round_robin"
    assert flags["--replica_scheduler_config_type"] == "vllm"
    assert flags["--request_generator_config_type"] == "trace_replay"
