"""Synthetic lengths beyond 2**31 - 1 tokens are an error, not a silent clip (an explicit
``max`` clips, as documented)."""
from __future__ import annotations

import pytest

from simulator.workload import WorkloadConfig, WorkloadError, load_workload


def test_synthetic_lengths_beyond_int32_are_an_error_not_a_clip():
    """lognormal sigma 1000: almost every draw is exp(+-hundreds) (infinite or 0 tokens);
    without an explicit max the draws above 2**31 - 1 are an error."""
    cfg = WorkloadConfig.model_validate(
        {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1}, "num_requests": 50,
                       "prompt_tokens": {"dist": "lognormal", "median": 100, "sigma": 1000},
                       "output_tokens": {"dist": "fixed", "value": 1}}})
    with pytest.raises(WorkloadError, match=r"of 50 samples of lognormal\(median=100, "
                                            r"sigma=1000\) exceed 2,147,483,647 tokens"):
        load_workload(cfg, 0)
    # with an explicit max the same draws are clipped to it, as documented
    cfg = cfg.model_copy(deep=True)
    raw = cfg.model_dump()
    raw["synthetic"]["prompt_tokens"]["max"] = 4096
    lengths = [r.num_prompt_tokens for r in load_workload(WorkloadConfig.model_validate(raw), 0)]
    assert max(lengths) == 4096 and min(lengths) >= 1
