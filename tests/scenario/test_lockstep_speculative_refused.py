"""Data-parallel ranks in lockstep with speculative decoding are refused by the scenario
schema; independent replicas are accepted."""
from __future__ import annotations

import pytest

from simulator.scenario.config import ScenarioError, validate_scenario


def test_lockstep_with_speculative_decoding_is_refused():
    raw = {"model": "qwen3-30b-a3b", "workload": {"trace": "traces/default_conv_1k.csv"},
           "cluster": {"num_replicas": 2,
                                                 "enable_expert_parallel": True},
           "speculative": {"method": "eagle", "num_speculative_tokens": 2,
                           "acceptance": {"model": "iid", "acceptance_rate": 0.6}}}
    with pytest.raises(ScenarioError, match="cluster.dp_lockstep: data-parallel ranks"):
        validate_scenario(raw)
    raw["cluster"]["dp_lockstep"] = False  # independent replicas: accepted
    assert validate_scenario(raw).cluster.dp_lockstep_active is False
