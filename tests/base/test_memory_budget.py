"""The pre-run memory estimate (bounds on step rows and blocks, by hand) and the memory
budget: refused with the estimate and the knob to turn, a warning between the bounds, a bad
``$SERVESIM_MEMORY_BUDGET_GB``, and a synthetic request count refused before generation."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from helpers import small_scenario, specs_from_rows

from simulator.base.budget import (
    BYTES_FIXED,
    BYTES_PER_BLOCK,
    BYTES_PER_REPLICA,
    BYTES_PER_REQUEST,
    BYTES_PER_STEP_ROW,
    MemoryBudgetWarning,
    ResourceError,
    check_run_budget,
    estimate_run,
    estimate_scenario_run,
    memory_budget,
)
from simulator.cluster.setup import build_setup
from simulator.workload import WorkloadConfig, load_workload


def _spec_lengths():
    return np.array([100, 300]), np.array([10, 50])


def test_estimate_bounds_by_hand():
    """prompts 100, 300; outputs 10, 50; 2 replicas of 1,000 16-token blocks; max_num_seqs 4;
    256 tokens per step. Step rows: >= max(50 (the longest output, one token per step),
    ceil(60 / (2 x 4))) = 50 and <= 60 outputs + ceil(100/256) + ceil(300/256) = 63.
    Blocks: ceil(110/16) + ceil(350/16) = 7 + 22 = 29 at most; >= 22 (the largest
    request)."""
    p, o = _spec_lengths()
    est = estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                       max_num_seqs=4, max_num_batched_tokens=256)
    assert est.step_rows == (50, 63) and est.blocks == (22, 29)
    low = (BYTES_FIXED + 2 * BYTES_PER_REQUEST + 2 * BYTES_PER_REPLICA
           + 50 * BYTES_PER_STEP_ROW + 22 * BYTES_PER_BLOCK)
    high = (BYTES_FIXED + 2 * BYTES_PER_REQUEST + 2 * BYTES_PER_REPLICA
            + 63 * BYTES_PER_STEP_ROW + 29 * BYTES_PER_BLOCK)
    assert est.bytes_low == pytest.approx(low) and est.bytes_high == pytest.approx(high)
    # speculation (k = 3: up to 4 tokens per step) and uncertain requests lower the floor:
    # ceil(50 / 4) = 13; without the 50-token request: max(10, ceil(10 / 8)) = 10
    assert estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                        max_num_seqs=4, max_num_batched_tokens=256,
                        tokens_per_step=4).step_rows[0] == 13
    assert estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                        max_num_seqs=4, max_num_batched_tokens=256,
                        runs=[True, False]).step_rows[0] == 10
    # with prefix caching every touched block stays cached: the floor is the ceiling
    assert estimate_run(p, o, num_replicas=2, num_gpu_blocks=1000, block_size=16,
                        max_num_seqs=4, max_num_batched_tokens=256,
                        prefix_caching=True).blocks == (29, 29)


def test_scenario_estimate_caps_outputs_at_max_model_len():
    """max_model_len 1000: prompt 100 with 5,000 true outputs stops at 900 (the step-row
    floor is 900); a 2,000-token prompt is rejected at arrival and emits nothing."""
    sc = small_scenario(scheduler={"max_model_len": 1000})
    setup = build_setup(sc)
    specs = specs_from_rows([(0.0, 100, 5000), (0.0, 2000, 7000)])
    est = estimate_scenario_run(sc, setup, specs)
    assert est.step_rows[0] == 900


def test_budget_refuses_with_estimate_and_knob(monkeypatch):
    """Budget 0.001 GB = 1,000,000 bytes, below the fixed 7.1 MB alone: refused; the largest
    variable part here is 1,000 replicas x 2,523 B."""
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", "0.001")
    assert memory_budget() == (1e6, "$SERVESIM_MEMORY_BUDGET_GB")
    p, o = _spec_lengths()
    est = estimate_run(p, o, num_replicas=1000, num_gpu_blocks=1000, block_size=16,
                       max_num_seqs=4, max_num_batched_tokens=256)
    with pytest.raises(ResourceError) as e:
        check_run_budget(est, "scenario 'x'")
    msg = str(e.value)
    assert msg.startswith("scenario 'x' needs an estimated") and "\n" not in msg
    assert "1,000 replicas" in msg and "fewer cluster.num_replicas" in msg
    assert "memory budget is 0.001 GB ($SERVESIM_MEMORY_BUDGET_GB)" in msg


def test_budget_warns_between_low_and_high(monkeypatch):
    p, o = _spec_lengths()
    est = estimate_run(p, o, num_replicas=1, num_gpu_blocks=1000, block_size=16,
                       max_num_seqs=4, max_num_batched_tokens=256)
    mid_gb = (est.bytes_low + est.bytes_high) / 2 / 1e9
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", repr(mid_gb))
    with pytest.warns(MemoryBudgetWarning, match="may need up to"):
        check_run_budget(est)
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", repr(2 * est.bytes_high / 1e9))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_run_budget(est)  # fits: silent


@pytest.mark.parametrize("value", ["abc", "0", "-2", "inf", "nan"])
def test_bad_budget_variable_is_an_error(monkeypatch, value):
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", value)
    with pytest.raises(ResourceError, match="SERVESIM_MEMORY_BUDGET_GB="):
        memory_budget()


def test_synthetic_request_count_is_refused_before_generation(monkeypatch):
    """10^12 requests x 1,213 B = 1.2e15 B: refused before a single request is drawn."""
    from simulator.workload import loader

    def boom(*a, **k):
        raise AssertionError("generation started")

    monkeypatch.setattr(loader, "generate_synthetic", boom)
    monkeypatch.setenv("SERVESIM_MEMORY_BUDGET_GB", "100")
    cfg = WorkloadConfig.model_validate(
        {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                       "num_requests": 10**12, "prompt_tokens": {"dist": "fixed", "value": 1},
                       "output_tokens": {"dist": "fixed", "value": 1}}})
    from simulator.base.budget import BYTES_PER_REQUEST
    gb = f"{1e12 * BYTES_PER_REQUEST / 1e9:.3g}"  # 10^12 requests x bytes each, in GB
    with pytest.raises(ResourceError, match=r"1,000,000,000,000 requests need an estimated "
                                            + re.escape(gb) + " GB"):
        load_workload(cfg, 0)
    # duration only: the expected count is rate x duration = 1 x 1e13
    cfg = WorkloadConfig.model_validate(
        {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1}, "duration_s": 1e13,
                       "prompt_tokens": {"dist": "fixed", "value": 1},
                       "output_tokens": {"dist": "fixed", "value": 1}}})
    with pytest.raises(ResourceError, match="10,000,000,000,000 requests"):
        load_workload(cfg, 0)
