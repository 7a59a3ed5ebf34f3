"""An interrupted plan resumes from the candidates it finished (they are cached as they
finish, not when the whole plan does)."""
from __future__ import annotations

import pytest
from planner_testlib import tiny_plan

from simulator.planner.plan import run_plan
from simulator.planner.spec import PlanSpec


def _factory(stop_on: str | None):
    from simulator.cluster.setup import build_setup

    def factory(sc):
        if sc.hardware.gpu == stop_on:
            raise KeyboardInterrupt  # Ctrl-C while this candidate is evaluated
        return build_setup(sc)
    factory.cache_id = "review-interrupt"  # the same cache keys for both factories
    return factory


def test_an_interrupted_plan_resumes_from_its_finished_candidates(tmp_path):
    # H100 first (the baseline shares its evaluation), then the A100: interrupted there
    d = tiny_plan(search_space={"hardware.gpu": ["h100-sxm", "a100-sxm-80gb"]})
    spec = PlanSpec.model_validate(d)
    with pytest.raises(KeyboardInterrupt):
        run_plan(spec, None, outdir=tmp_path, jobs=1, write=False,
                 setup_factory=_factory("a100-sxm-80gb"))
    res = run_plan(spec, None, outdir=tmp_path, jobs=1, write=False,
                   setup_factory=_factory(None))
    # before: nothing was cached until every candidate finished, so both ran again
    h100 = next(r for r in res.candidates if r["gpu"] == "h100-sxm")
    a100 = next(r for r in res.candidates if r["gpu"] == "a100-sxm-80gb")
    assert h100["cached"] and h100["num_simulations"] == 0
    assert not a100["cached"] and a100["num_simulations"] > 0
