"""Top-level ``model`` / ``hardware`` that no pool reads are refused, as unused top-level
``cluster`` keys are (session 6), and the shipped mixed-GPU scenario states none."""
from __future__ import annotations

import pytest
import yaml
from helpers import REPO_ROOT

from simulator.config import ScenarioError, load_scenario, validate_scenario

POOLS = [{"name": "A", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"}},
         {"name": "B", "model": "llama-3.1-70b", "hardware": {"gpu": "a100-sxm-80gb"},
          "match": {"tenants": ["b"]}}]
RAW = {"workload": {"trace": "t.csv"}, "pools": POOLS}


def test_no_top_level_model_or_hardware_is_fine():
    validate_scenario(RAW)
    # the defaults cannot be told from an unset section in a resolved scenario: allowed
    validate_scenario({**RAW, "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"}})


@pytest.mark.parametrize("key, value", [("model", "llama-3.1-70b"),
                                        ("hardware", {"gpu": "a100-sxm-80gb"})])
def test_a_top_level_section_every_pool_replaces_is_refused(key, value):
    with pytest.raises(ScenarioError) as e:
        validate_scenario({**RAW, key: value})
    assert f"{key}: unused: every pool states its own {key}" in str(e.value)
    assert "\n" not in str(e.value)
    # a pool without its own reads the top-level one: allowed
    pools = [{k: v for k, v in POOLS[0].items() if k != key}, POOLS[1]]
    validate_scenario({**RAW, key: value, "pools": pools})


def test_the_shipped_mixed_gpu_scenario_states_no_unused_section():
    path = REPO_ROOT / "scenarios" / "pools_mixed_gpu.yaml"
    raw = yaml.safe_load(path.read_text())
    assert "model" not in raw and "hardware" not in raw  # before: both, read by no pool
    sc = load_scenario(path)[0]
    assert [(p.model, p.hardware.gpu) for p in sc.pools] == [
        ("llama-3.1-8b", "h100-sxm"), ("llama-3.1-70b", "a100-sxm-80gb")]
