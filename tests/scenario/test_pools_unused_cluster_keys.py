"""Top-level ``cluster`` keys that every pool replaces are refused, even at their defaults;
a pool without its own ``cluster`` reads the top-level one."""
from __future__ import annotations

import pytest

from simulator.scenario.config import ScenarioError, validate_scenario


def test_top_level_cluster_keys_unused_by_every_pool_are_refused():
    pools = [{"name": "A", "cluster": {"num_replicas": 2}},
             {"name": "B", "cluster": {"num_replicas": 1}, "match": {"tenants": ["b"]}}]
    raw = {"workload": {"trace": "t.csv"}, "pools": pools}
    validate_scenario(raw)  # no top-level cluster: fine
    # a key stated at its default is unused all the same (before: let through)
    with pytest.raises(ScenarioError, match=r"cluster: key\(s\) num_replicas unused"):
        validate_scenario({**raw, "cluster": {"num_replicas": 1}})
    with pytest.raises(ScenarioError) as e:
        validate_scenario({**raw, "cluster": {"num_replicas": 3, "router": "least_kv"}})
    assert "cluster: key(s) num_replicas, router unused: every pool states its own cluster" \
        in str(e.value)
    # a pool without its own cluster reads the top-level one: allowed
    validate_scenario({**raw, "pools": [{"name": "A"}, pools[1]],
                       "cluster": {"num_replicas": 3}})
