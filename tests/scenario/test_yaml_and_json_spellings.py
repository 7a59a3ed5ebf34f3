"""Scenario values as YAML 1.2 and JSON spell them: ``1e9`` is a number (PyYAML's YAML 1.1
reads a string), and priority classes round-trip through JSON."""
from __future__ import annotations

from helpers import small_scenario

from simulator.scenario.config import validate_scenario
from simulator.scenario.overrides import parse_override
from simulator.scenario.yaml_files import load_yaml_text


def test_yaml_scientific_floats_are_numbers():
    """YAML 1.2 reads 1e9 as a float; PyYAML (YAML 1.1) would read the string "1e9", which
    strict validation then rejects."""
    assert load_yaml_text("a: 1e9\nb: -2.5E-3\nc: 1e\nd: '1e5'") == {
        "a": 1e9, "b": -0.0025, "c": "1e", "d": "1e5"}
    assert parse_override("slo.ttft_s=5e-1") == (["slo", "ttft_s"], 0.5)


def test_priority_classes_round_trip_through_json():
    sc = small_scenario(workload={"priorities": {0: 0.25, 2: 0.75}})
    again = validate_scenario(sc.model_dump(mode="json"))
    assert again.workload.priorities == {0: 0.25, 2: 0.75}
