"""``POOL_SECTIONS``, defined once: the sections a pool may state for itself, each replacing
the top-level one whole in the pool's own scenario; the top-level ``cluster`` is judged key by
key when every pool states its own, the other sections whole."""
from __future__ import annotations

import pytest

from simulator.runs.gateway import pool_scenario
from simulator.scenario.config import (
    POOL_SECTIONS,
    PoolConfig,
    Scenario,
    ScenarioError,
    validate_scenario,
)

POOLS = [{"name": "A", "cluster": {"num_replicas": 3}, "scheduler": {"max_num_seqs": 7},
          "kv_cache": {"block_size": 32}},
         {"name": "B", "match": {"tenants": ["b"]}}]
RAW = {"workload": {"trace": "t.csv"}, "pools": POOLS,
       "scheduler": {"max_num_seqs": 64, "max_num_batched_tokens": 4096},
       "cost": {"usd_per_gpu_hour": 3.0}}


def test_pool_sections_are_the_pool_fields_that_are_scenario_sections():
    shared = set(PoolConfig.model_fields) & set(Scenario.model_fields) - {"name"}
    assert set(POOL_SECTIONS) == shared and len(POOL_SECTIONS) == len(shared)


def test_pool_scenario_replaces_every_section_the_pool_states_whole():
    sc = validate_scenario(RAW)
    a, b = (pool_scenario(sc, p) for p in sc.pools)
    assert (a.cluster.num_replicas, a.scheduler.max_num_seqs, a.kv_cache.block_size) == (3, 7, 32)
    assert a.cost.usd_per_gpu_hour == 3.0  # not stated by A: the top-level one
    # replaced whole: a top-level key A's scheduler leaves out is not merged in (the default)
    assert a.scheduler.max_num_batched_tokens == 8192
    assert b.scheduler.max_num_batched_tokens == 4096
    assert (b.cluster.num_replicas, b.scheduler.max_num_seqs, b.kv_cache.block_size) == (1, 64, 16)
    assert (a.name, b.name) == ("scenario-A", "scenario-B")


def test_unused_cluster_is_judged_by_key_the_other_sections_whole():
    pools = [{**p, "cluster": {"num_replicas": 1}, "cost": {}} for p in POOLS]
    raw = {"workload": {"trace": "t.csv"}, "pools": pools}
    validate_scenario({**raw, "cluster": {}})  # a stated but empty cluster sets no key
    with pytest.raises(ScenarioError, match=r"cluster: key\(s\) router unused"):
        validate_scenario({**raw, "cluster": {"router": "random"}})
    with pytest.raises(ScenarioError, match="cost: unused: every pool states its own cost"):
        validate_scenario({**raw, "cost": {}})
