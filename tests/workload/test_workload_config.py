"""Workload schema validation."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from simulator.workload import LengthDist, PatienceConfig, WorkloadConfig
from simulator.workload.config import ArrivalConfig, SyntheticConfig

SYN = {"arrival": {"process": "poisson", "rate_rps": 1.0}, "num_requests": 5,
       "prompt_tokens": {"dist": "fixed", "value": 10},
       "output_tokens": {"dist": "fixed", "value": 5}}


@pytest.mark.parametrize("spec, message", [
    ({"dist": "fixed"}, "requires 'value'"),
    ({"dist": "lognormal", "median": 10}, "requires 'sigma'"),
    ({"dist": "lognormal", "median": 0, "sigma": 1}, "median must be > 0"),
    ({"dist": "uniform", "low": 5, "high": 2}, "low <= high"),
    ({"dist": "fixed", "value": 3, "median": 4}, "'median' is not used by dist='fixed'"),
    ({"dist": "empirical"}, "exactly one of 'values'"),
    ({"dist": "empirical", "values": [1, 2], "from_trace": "x.csv"}, "exactly one of"),
    ({"dist": "empirical", "values": [1, 2], "weights": [1]}, "1 weights for 2 values"),
    ({"dist": "empirical", "values": [0]}, ">= 1 token"),
    ({"dist": "fixed", "value": 3, "min": 10, "max": 5}, "below min"),
    ({"dist": "fixed", "value": 3, "bogus": 1}, "Extra inputs"),
])
def test_length_dist_validation(spec, message):
    with pytest.raises(ValidationError, match=message):
        LengthDist.model_validate(spec)


def test_length_dist_ok():
    d = LengthDist(dist="empirical", from_trace="t.csv")
    assert d.column is None and d.min == 1


@pytest.mark.parametrize("spec, message", [
    ({"dist": "exponential"}, "requires 'mean_s'"),
    ({"dist": "fixed", "value": 0}, "must be > 0"),
    ({"dist": "uniform", "low": 3, "high": 1}, "0 <= low <= high"),
    ({"dist": "exponential", "mean_s": 1, "fraction": 1.5}, "less than or equal"),
])
def test_patience_validation(spec, message):
    with pytest.raises(ValidationError, match=message):
        PatienceConfig.model_validate(spec)


def test_arrival_and_synthetic_validation():
    with pytest.raises(ValidationError, match="poisson process has cv=1"):
        ArrivalConfig(process="poisson", rate_rps=1.0, cv=2.0)
    with pytest.raises(ValidationError, match="greater than 0"):
        ArrivalConfig(process="gamma", rate_rps=0.0)
    with pytest.raises(ValidationError, match="num_requests, duration_s, or both"):
        SyntheticConfig.model_validate({**SYN, "num_requests": None})


@pytest.mark.parametrize("spec, message", [
    ({}, "exactly one of 'trace' and 'synthetic'"),
    ({"trace": "a.csv", "synthetic": SYN}, "exactly one of"),
    ({"trace": "a.csv", "tenants": {"a": 0.5, "b": 0.4}}, "must sum to 1"),
    ({"trace": "a.csv", "priorities": {0: 1.2, 1: -0.2}}, "must be >= 0"),
    ({"trace": "a.csv", "slices": {}}, "empty share table"),
    ({"trace": "a.csv", "rate_scale": 0}, "greater than 0"),
    ({"trace": "a.csv", "start_s": 5, "end_s": 5}, "must be > start_s"),
    ({"trace": "a.csv", "columns": {"arrival": "t"}}, "unknown field"),
    ({"trace": "a.csv", "format": "azure", "columns": {"arrival_time_s": "t"}},
     "applies to generic formats"),
    ({"trace": "a.csv", "format": "mooncake", "time_unit": "ms"}, "applies to generic"),
    ({"synthetic": SYN, "format": "azure"}, "apply to a trace only"),
    ({"trace": "a.csv", "shared_prefixes": [{"name": "p", "num_tokens": 4},
                                            {"name": "p", "num_tokens": 8}]}, "duplicate"),
    ({"trace": "a.csv", "shared_prefixes": [{"name": "p", "num_tokens": 0}]}, "greater than 0"),
    ({"trace": "a.csv", "max_requests": 0}, "greater than or equal to 1"),
    ({"trace": "a.csv", "typo_field": 1}, "Extra inputs"),
])
def test_workload_config_validation(spec, message):
    with pytest.raises(ValidationError, match=message):
        WorkloadConfig.model_validate(spec)


def test_shares_tolerance_and_int_keys():
    c = WorkloadConfig.model_validate({"trace": "a.csv",
                                       "priorities": {"0": 0.3333333, "1": 0.6666667},
                                       "tenants": {"a": 0.1, "b": 0.2, "c": 0.7}})
    assert set(c.priorities) == {0, 1}
    assert isinstance(ValidationError, type) and issubclass(ValidationError, ValueError)
