"""Recorded real-engine runs: readers, replay, comparison (``servesim validate --recorded``).

Public API::

    read_recorded(path) -> RecordedRun              # vLLM run folder / requests.jsonl,
                                                    # inference-perf folder, vllm bench serve
                                                    # or GuideLLM JSON, generic CSV
    build_replay_scenario(run, scenario=, gpu=, model=, sets=) -> ReplayScenario
    compare_outcomes(outcomes, sim_requests, itl_values, itl_weights) -> dict
    compare_stages(run, sim_client, sim_engine, steps, specs) -> list of dict   # per stage
    validate_recorded(path, scenario=, gpu=, model=, sets=, out_dir=) -> RecordedValidation
    prefix_hash_ids(token_ids, block_size) -> tuple[int, ...]
    RecordedRun, RecordedStage, Setting, RecordError (a ValueError)

Formats: ``traces/README.md`` ("Recorded runs"); the CLI: ``servesim validate --recorded``.
"""
from __future__ import annotations

from simulator.observe.compare import compare_outcomes
from simulator.observe.readers import find_recorded_runs, prefix_hash_ids, read_recorded
from simulator.observe.record import RecordedRun, RecordedStage, RecordError, Setting
from simulator.observe.settings import ReplayScenario, build_replay_scenario
from simulator.observe.stages import compare_stages
from simulator.observe.validate import RecordedValidation, validate_recorded

__all__ = [
    "RecordError",
    "RecordedRun",
    "RecordedStage",
    "RecordedValidation",
    "ReplayScenario",
    "Setting",
    "build_replay_scenario",
    "compare_outcomes",
    "compare_stages",
    "find_recorded_runs",
    "prefix_hash_ids",
    "read_recorded",
    "validate_recorded",
]
