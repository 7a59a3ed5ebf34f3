"""Invariant 9 (determinism), fast-forward half: a run whose schedulers jump over runs of
identical decode steps (``simulate(fast_forward=True)``, the default) writes exactly the
records of the same run stepped one iteration at a time (``fast_forward=False``), for every
performance model and every scheduler (issue 12 part 4).

Exact means bit-equal: the request table and the per-step table compare with
``check_exact=True`` (NaN equal to NaN), and the inter-token gaps as multisets (stepping
records a gap per step, a jump one array per run: the same values, grouped differently).
A stepped pure-decode iteration is priced by the same ``decode_step_times`` as a jump and the
jump's clock accumulates step by step from its start, which is why equality is exact and not
approximate. Each case checks it is not vacuous: the fast run really jumped over many steps
(or, for speculative decoding, that the ``lookahead`` veto kept it from jumping at all).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import SUITE, make_scenario, prefix_specs, suite_case, synthetic_workload

from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.scheduling.continuous import ContinuousScheduler
from simulator.workload import load_workload

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _run(sc, specs, until, fast):
    jumps = []
    orig = ContinuousScheduler.plan_jump

    def counting(self, out):
        j = orig(self, out)
        if j is not None:
            jumps.append(j.k_steps)
        return j

    ContinuousScheduler.plan_jump = counting
    try:
        out = simulate(sc, build_setup(sc), specs, until_s=until, fast_forward=fast,
                       check_transitions=True)
    finally:
        ContinuousScheduler.plan_jump = orig
    return out, jumps


def _itl_multiset(out) -> np.ndarray:
    v, w = out.recorder.itl_samples()
    return np.sort(np.repeat(v, w))


def _assert_equivalent(sc, specs, until=None, *, expect_jumps=True):
    fast, jumps = _run(sc, specs, until, True)
    slow, none = _run(sc, specs, until, False)
    assert none == []
    if expect_jumps:
        # non-vacuous: many runs of >= 2 steps, covering hundreds of steps
        assert len(jumps) >= 5 and sum(jumps) >= 100, jumps
    else:
        assert jumps == []
    pd.testing.assert_frame_equal(fast.requests(), slow.requests(), check_exact=True)
    fs, ss = fast.steps(), slow.steps()
    assert len(fs) == len(ss)
    pd.testing.assert_frame_equal(fs.reset_index(drop=True), ss.reset_index(drop=True),
                                  check_exact=True, check_dtype=False)
    a, b = _itl_multiset(fast), _itl_multiset(slow)
    assert len(a) == len(b) and (a == b).all()
    assert fast.end_time_s == slow.end_time_s


def _specs(sc):
    return load_workload(sc.workload, sc.seed, None)


BASE = ({"kv_cache": {"num_gpu_blocks": 300}}, synthetic_workload(150, 15, output_median=150))


@pytest.mark.parametrize("source", ["roofline", "fitted", "table", "auto", "constant"])
def test_every_perf_model(source):
    over, wl = BASE
    perf = {"source": source, "engine": "vllm-v1"}
    if source == "constant":
        perf["constant"] = {"step_s": 0.004, "per_token_s": 1e-6, "per_seq_s": 2e-5}
    sc = make_scenario({**over, "perf": perf}, workload=wl)
    _assert_equivalent(sc, _specs(sc))


@pytest.mark.parametrize("name", ["preempt_chunked", "no_chunking", "priority",
                                  "prefix_caching", "swap_preemption", "contiguous",
                                  "max_model_len", "cancel_admission", "tenant_share",
                                  "multi_replica", "seq_limit_until"])
def test_every_continuous_feature(name):
    assert name in SUITE
    sc, specs, until = suite_case(name)
    _assert_equivalent(sc, specs, until)


def test_prefix_caching_on_measured_tables():
    sc = make_scenario({"kv_cache": {"num_gpu_blocks": 90, "enable_prefix_caching": True},
                        "perf": {"source": "auto", "engine": "vllm-v1"}})
    _assert_equivalent(sc, prefix_specs(200, 20.0))


@pytest.mark.parametrize("source", ["roofline", "auto"])
def test_static_batching(source):
    sc = make_scenario({"kv_cache": {"num_gpu_blocks": 2000},
                        "scheduler": {"policy": "static", "max_batch_size": 8,
                                      "batch_timeout_s": 0.05},
                        "perf": {"source": source, "engine": "vllm-v1"}},
                       workload=synthetic_workload(150, 10, max_tokens=600))
    _assert_equivalent(sc, _specs(sc))


def test_speculative_is_vetoed_and_unchanged():
    sc = make_scenario({"kv_cache": {"num_gpu_blocks": 400},
                        "speculative": {"method": "ngram", "num_speculative_tokens": 3,
                                        "acceptance": {"model": "iid", "acceptance_rate": 0.7}}},
                       workload=synthetic_workload(80, 8))
    _assert_equivalent(sc, _specs(sc), expect_jumps=False)


def test_pipeline_parallel_steps_every_iteration():
    # a PP replica's decode step is a PP cycle counted in the bubble's tallies: it never
    # jumps, so the run equals stepping (a run once priced on the stage model alone did not)
    sc = make_scenario({"cluster": {"pipeline_parallel_size": 2}},
                       workload=synthetic_workload(120, 15, output_median=150))
    _assert_equivalent(sc, _specs(sc), expect_jumps=False)
