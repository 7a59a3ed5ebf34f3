"""Progress of work whose results came from a cache: the final line says so (a fully
cached plan printed "done, 0 in 2 s"). Fake clock: the expected lines are exact."""
from __future__ import annotations

import io

from planner_testlib import tiny_plan

from simulator.base.progress import PlainProgress, report_cached
from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanSpec


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _rep():
    clk, out = Clock(), io.StringIO()
    return clk, out, PlainProgress("plan candidates", stream=out, force=True, clock=clk)


def test_all_from_the_cache():
    clk, out, p = _rep()
    report_cached(p, 4, 4, 4)
    clk.t = 2
    p.close()
    assert out.getvalue().splitlines() == [
        "servesim: plan candidates: started",
        "servesim: plan candidates: done, all 4 from the cache, in 2 s"]


def test_some_from_the_cache():
    clk, out, p = _rep()
    report_cached(p, 1, 4, 1)   # 1 hit, then 3 evaluated: 4/4, 1 of them cached
    for d in (2, 3, 4):
        p.update(d, 4)
    clk.t = 30
    p.close()
    assert out.getvalue().splitlines()[-1] == (
        "servesim: plan candidates: done, 4/4 (1 from the cache) in 30 s")


def test_report_cached_to_a_plain_callback():
    seen = []
    report_cached(lambda d, n: seen.append((d, n)), 3, 5, 3)  # no cached= keyword for it
    report_cached(None, 3, 5, 3)
    assert seen == [(3, 5)]


def test_fully_cached_plan_reports_every_candidate_as_cached(tmp_path):
    spec = PlanSpec.model_validate(tiny_plan(
        search_space={"scheduler.max_num_seqs": [16, 64]},
        search={"window_s": None, "max_requests": 60, "rel_tol": 0.5, "max_probes": 4}))
    run_plan(spec, None, outdir=tmp_path, jobs=1)
    clk, out, p = _rep()
    run_plan(spec, None, outdir=tmp_path, jobs=1, progress=p)
    p.close()
    # 2 candidates (h100-sxm at seqs 16 and 64) + the baseline (h100-sxm at the base's
    # seqs, one of the two: one evaluation for both), every one a cache hit
    assert (p.done, p.total, p.cached) == (2, 2, 2)
    assert out.getvalue().splitlines()[-1] == (
        "servesim: plan candidates: done, all 2 from the cache, in 0 s")
