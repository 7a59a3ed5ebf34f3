"""Top-level ``model`` / ``hardware`` / ``scheduler`` / ``kv_cache`` / ``perf`` / ``cost``
that no pool reads are refused, as unused top-level ``cluster`` keys are (session 6), whatever
their value once stated (in the file or by ``--set``); a resolved scenario (every section
written out) is judged by value. The shipped mixed-GPU scenario states none."""
from __future__ import annotations

import json

import pytest
import yaml
from helpers import REPO_ROOT

from simulator.scenario.config import Scenario, ScenarioError, load_scenario, validate_scenario

POOLS = [{"name": "A", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"}},
         {"name": "B", "model": "llama-3.1-70b", "hardware": {"gpu": "a100-sxm-80gb"},
          "match": {"tenants": ["b"]}}]
RAW = {"workload": {"trace": "t.csv"}, "pools": POOLS}


def test_no_top_level_model_or_hardware_is_fine():
    validate_scenario(RAW)


@pytest.mark.parametrize("key, value", [
    ("model", "llama-3.1-8b"),                 # the default, stated
    ("hardware", {"gpu": "h100-sxm"}),         # the default, stated
    ("hardware", {"gpu": "h100"}),             # an alias of the default
    ("cost", {"usd_per_gpu_hour": 50.0}),
    ("cost", {}),                              # an empty section is still stated
    ("scheduler", {"max_num_seqs": 256}),
    ("kv_cache", {"block_size": 16}),
    ("perf", {"source": "auto"}),
])
def test_a_stated_top_level_section_every_pool_replaces_is_refused_whatever_its_value(
        key, value):
    # before: only a value other than the default was refused (h100-sxm passed, its alias
    # h100 did not) and cost / scheduler / kv_cache / perf were never checked
    pools = [{**p, key: POOLS[0].get(key, value)} for p in POOLS]
    with pytest.raises(ScenarioError) as e:
        validate_scenario({**RAW, key: value, "pools": pools})
    assert f"{key}: unused: every pool states its own {key}" in str(e.value)
    assert "\n" not in str(e.value)
    # a pool without its own reads the top-level one: allowed
    validate_scenario({**RAW, key: value,
                       "pools": [{k: v for k, v in pools[0].items() if k != key}, pools[1]]})


def test_stated_cluster_keys_are_refused_even_at_their_defaults():
    pools = [{**p, "cluster": {"num_replicas": 1}} for p in POOLS]
    with pytest.raises(ScenarioError, match=r"cluster: key\(s\) num_replicas, router unused"):
        validate_scenario({**RAW, "pools": pools,
                           "cluster": {"router": "round_robin", "num_replicas": 1}})
    validate_scenario({**RAW, "pools": pools})


@pytest.mark.parametrize("override", ["cost.usd_per_gpu_hour=50", "hardware.gpu=h100-sxm",
                                      "model=llama-3.1-8b", "hardware.gpu=h100"])
def test_a_set_on_the_shipped_mixed_gpu_scenario_no_pool_reads_is_refused(override):
    path = REPO_ROOT / "scenarios" / "pools_mixed_gpu.yaml"
    key = override.split("=")[0].split(".")[0]
    with pytest.raises(ScenarioError, match=f"{key}: unused: every pool states its own {key}"):
        load_scenario(path, [override])


def test_a_resolved_scenario_is_judged_by_value_so_scenario_yaml_reruns():
    # a resolved scenario (scenario.yaml of a run) writes every section out, defaults
    # included: it cannot tell a stated section from a default and still loads
    path = REPO_ROOT / "scenarios" / "pools_mixed_gpu.yaml"
    sc = load_scenario(path)[0]
    dump = json.loads(sc.model_dump_json())
    assert set(dump) == set(Scenario.model_fields)
    assert validate_scenario(dump) == sc
    # ... but one set away from the default is still refused
    with pytest.raises(ScenarioError, match="cost: unused: every pool states its own cost"):
        validate_scenario({**dump, "cost": {"usd_per_gpu_hour": 50.0}})
    with pytest.raises(ScenarioError, match=r"cluster: key\(s\) num_replicas unused"):
        validate_scenario({**dump, "cluster": {**dump["cluster"], "num_replicas": 3}})


def test_the_shipped_mixed_gpu_scenario_states_no_unused_section():
    path = REPO_ROOT / "scenarios" / "pools_mixed_gpu.yaml"
    raw = yaml.safe_load(path.read_text())
    assert "model" not in raw and "hardware" not in raw  # before: both, read by no pool
    sc = load_scenario(path)[0]
    assert [(p.model, p.hardware.gpu) for p in sc.pools] == [
        ("llama-3.1-8b", "h100-sxm"), ("llama-3.1-70b", "a100-sxm-80gb")]
