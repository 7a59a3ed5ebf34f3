"""The family runner: points from a base, request lists loaded once, the cache, the executor;
and the experiments that use it give the same results in process and in a process pool."""
from __future__ import annotations

import pandas as pd
import pytest
import yaml
from helpers import synthetic_workload

from simulator.experiments.cache import ResultCache
from simulator.experiments.compare import run_compare
from simulator.experiments.runner import Workloads, prepare_points, run_family
from simulator.experiments.spec_sweep import sweep_rates
from simulator.scenario.config import Scenario, ScenarioError

BASE = {"name": "fam", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"}, "seed": 3,
        "workload": synthetic_workload(20, 5.0, output_median=20)}


def _double(task, shared):
    return {"value": 2 * task["x"] + shared["offset"]}


def test_prepare_points_applies_and_validates():
    pts = prepare_points(BASE, [{"scheduler.max_num_seqs": 8}, {"hardware.gpu": "a100-sxm-80gb"}])
    default = Scenario.model_validate(BASE).scheduler.max_num_seqs
    assert [p["scheduler"]["max_num_seqs"] for p in pts] == [8, default]
    assert pts[1]["hardware"]["gpu"] == "a100-sxm-80gb" and BASE["hardware"]["gpu"] == "h100-sxm"
    with pytest.raises(ScenarioError, match=r"sweep point 0 \(.*\)"):
        prepare_points(BASE, [{"scheduler.max_num_seqs": -1}])


def test_workloads_load_each_distinct_list_once():
    w = Workloads()
    sc = Scenario.model_validate(BASE)
    a = w.add(sc.workload, 3)
    assert w.add(sc.workload.model_dump(mode="json"), 3) == a  # same list, same id
    b = w.add(sc.workload, 4)                                   # another seed: another list
    assert (a, b) == ("w0", "w1") and len(w) == 2
    assert len(w.lists[a]) == 20
    assert [s.arrival_time_s for s in w.lists[a]] != [s.arrival_time_s for s in w.lists[b]]


def test_run_family_dedupes_caches_and_runs_the_rest(tmp_path):
    cache = ResultCache(tmp_path / "c")
    tasks = [{"key": "a", "x": 1}, {"key": "b", "x": 2}, {"key": "a", "x": 1}]
    seen = []
    out, ran = run_family(_double, tasks, shared={"offset": 10}, cache=cache,
                          progress=lambda d, t: seen.append((d, t)))
    assert out == {"a": {"value": 12}, "b": {"value": 14}} and ran == {"a", "b"}
    assert seen[-1] == (2, 2)  # the duplicate ran once
    again, ran2 = run_family(_double, tasks, shared={"offset": 99}, cache=cache)
    assert again == out and ran2 == set()  # every key from the cache
    skipped, _ = run_family(_double, [{"key": "z", "x": 0}], shared={"offset": 1},
                            cache=cache, cache_entries=lambda k, r: [])
    assert skipped["z"] == {"value": 1} and cache.get("z") is None


def test_run_family_in_a_process_pool_keeps_task_order():
    tasks = [{"key": str(i), "x": i} for i in range(5)]
    out, _ = run_family(_double, tasks, shared={"offset": 0}, jobs=2)
    assert [out[str(i)]["value"] for i in range(5)] == [0, 2, 4, 6, 8]


def _comparable(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=["sim_wall_s"])


def test_compare_in_a_pool_equals_in_process(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(BASE))
    vary = ["scheduler.max_num_seqs=4,64"]
    a = run_compare(p, vary, write=False)
    b = run_compare(p, vary, write=False, jobs=2)
    pd.testing.assert_frame_equal(_comparable(a.table), _comparable(b.table))
    assert a.same_requests and [v.name for v in b.variants] == ["max_num_seqs=4",
                                                                "max_num_seqs=64"]


def test_spec_sweep_in_a_pool_equals_in_process():
    raw = {**BASE, "speculative": {"method": "draft_model", "draft_model": "llama-3.2-1b",
                                   "num_speculative_tokens": 2,
                                   "acceptance": {"model": "iid", "acceptance_rate": 0.7}}}
    sc = Scenario.model_validate(raw)
    df1, r1 = sweep_rates(sc, None, [0.5, 2.0])
    df2, _r2 = sweep_rates(sc, None, [0.5, 2.0], jobs=2)
    pd.testing.assert_frame_equal(df1, df2)
    # both runs of a rate replay the same requests: same count and output tokens
    for r in (0.5, 2.0):
        assert r1[r]["speculative"]["num_output_tokens"] == r1[r]["baseline"][
            "num_output_tokens"]


def _double_or_stop(task, shared):
    if task["x"] < 0:
        raise KeyboardInterrupt  # the user pressed Ctrl-C while this task ran
    return {"value": 2 * task["x"]}


def test_an_interrupted_family_keeps_its_finished_tasks(tmp_path):
    # review finding: results were cached only after every task finished, so Ctrl-C lost
    # all finished work; now each is stored as it finishes
    cache = ResultCache(tmp_path / "c")
    tasks = [{"key": "a", "x": 1}, {"key": "b", "x": 2}, {"key": "stop", "x": -1}]
    with pytest.raises(KeyboardInterrupt):
        run_family(_double_or_stop, tasks, cache=cache)
    assert cache.get("a") == {"value": 2} and cache.get("b") == {"value": 4}
    assert cache.get("stop") is None
    out, ran = run_family(_double_or_stop, tasks[:2], cache=cache)
    assert ran == set() and out == {"a": {"value": 2}, "b": {"value": 4}}


def test_run_tasks_reports_each_result_as_it_finishes():
    from simulator.experiments.executor import run_tasks
    seen: list[tuple[int, int]] = []
    out = run_tasks(_double, [{"x": 1}, {"x": 2}, {"x": 3}], shared={"offset": 0}, jobs=2,
                    on_result=lambda i, r: seen.append((i, r["value"])))
    assert [r["value"] for r in out] == [2, 4, 6]
    assert sorted(seen) == [(0, 2), (1, 4), (2, 6)]  # every task once, whatever the order


def test_pool_workers_print_warnings_as_the_cli_does(capsys):
    """A worker of a CLI sweep (-j 2) prints a warning as one ``servesim: warning:`` line, as
    the CLI's own process does (before: Python's ``engine.py:143: LinkReachWarning: ...`` plus
    the source line echoed)."""
    import warnings

    from simulator.base.progress import show_warning_line
    from simulator.experiments import executor
    from simulator.workload.errors import WorkloadWarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        executor._init_worker({"k": 1}, True)
        assert warnings.showwarning is show_warning_line and executor._SHARED == {"k": 1}
        warnings.warn(WorkloadWarning("outputs clipped\nsecond line"), stacklevel=1)
    assert capsys.readouterr().err == "servesim: warning: outputs clipped\n"
    with warnings.catch_warnings():
        before = warnings.showwarning
        executor._init_worker({}, False)        # a Python caller's own format is kept
        assert warnings.showwarning is before
