"""The replay scenario: GPU lookup by device string, the precedence of defaults < engine
defaults < scenario file < record < flags, the source of every setting, and the DP/EP
approximation."""
from __future__ import annotations

import json

import pytest
from record_factories import base_meta, write_vllm_run

from simulator.observe import build_replay_scenario, read_recorded
from simulator.observe.settings import gpu_name_matches, match_gpu
from simulator.scenario.config import ScenarioError


def _rows(rs):
    return {r.key: (r.value, r.source) for r in rs.rows}


def _meta(**kw):
    m = base_meta(**kw)
    m["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    return m


def test_gpu_device_strings():
    assert match_gpu("NVIDIA H100 80GB HBM3") == "h100-sxm"    # an alias, exactly
    assert match_gpu("nvidia h100-sxm5") == "h100-sxm"         # normalised: h100sxm5
    assert match_gpu("Quantum GPU 9000") is None
    assert gpu_name_matches("NVIDIA GeForce RTX 4090", ["rtx-4090"])
    assert gpu_name_matches("RTXPRO6000", ["RTX PRO 6000"])
    assert not gpu_name_matches("A100", ["h100"])


def test_settings_from_the_record_with_sources(tmp_path):
    run = read_recorded(write_vllm_run(tmp_path, meta=_meta()))
    rs = build_replay_scenario(run)
    sc, rows = rs.scenario, _rows(rs)
    assert sc.hardware.gpu == "h100-sxm"
    assert rows["hardware.gpu"][1] == ("meta.json hardware.device_name 'NVIDIA H100 80GB HBM3' "
                                       "-> GPU catalog h100-sxm")
    assert sc.model == "llama-3.1-8b"
    assert rows["scheduler.max_num_seqs"] == (8, "meta.json engine_kwargs.max_num_seqs")
    want = (64, "meta.json engine_kwargs.max_num_batched_tokens")
    assert rows["scheduler.max_num_batched_tokens"] == want
    assert rows["seed"] == (7, "meta.json engine_kwargs.seed")
    assert rows["perf.engine_version"] == ("0.19.0", "meta.json vllm_version")
    assert rows["perf.engine"][0] == "vllm-v1"
    # not recorded: vLLM 0.19's own defaults, labelled as such
    assert rows["kv_cache.enable_prefix_caching"][0] is True
    assert rows["kv_cache.enable_prefix_caching"][1].startswith("vLLM 0.19 default")
    assert rows["kv_cache.block_size"][0] == 16
    # neither recorded nor an engine default: servesim's
    assert rows["kv_cache.num_gpu_blocks"] == (None, "servesim default")
    assert rs.approximations == []


def test_precedence_scenario_record_flags(tmp_path):
    run = read_recorded(write_vllm_run(tmp_path, meta=_meta()))
    s = tmp_path / "s.yaml"
    s.write_text("scheduler:\n  max_num_seqs: 99\n  max_model_len: 4096\n"
                 "kv_cache:\n  enable_prefix_caching: false\n"
                 "workload:\n  trace: other.csv\n")
    rs = build_replay_scenario(run, scenario=s, gpu="a100-sxm-80gb",
                               sets=["scheduler.max_num_batched_tokens=128"])
    rows = _rows(rs)
    assert rows["scheduler.max_num_seqs"][0] == 8                 # record beats scenario
    assert rows["scheduler.max_model_len"] == (4096, "scenario s.yaml")   # record has none
    assert rows["kv_cache.enable_prefix_caching"] == (False, "scenario s.yaml")  # > default
    assert rows["hardware.gpu"] == ("a100-sxm-80gb", "flag --gpu")            # flag > record
    assert rows["scheduler.max_num_batched_tokens"] == (
        128, "flag --set scheduler.max_num_batched_tokens=128")
    assert rs.scenario.workload.trace == "replay_requests.csv"
    assert any("workload is replaced" in n for n in rs.notes)


def test_gpu_and_model_never_default(tmp_path):
    run = read_recorded(write_vllm_run(tmp_path))  # meta.json names no device
    with pytest.raises(ScenarioError, match="the record names no GPU; pass --gpu"):
        build_replay_scenario(run)
    assert build_replay_scenario(run, gpu="h100-sxm").scenario.hardware.gpu == "h100-sxm"
    m = _meta()
    m["hardware"]["device_name"] = "Quantum GPU 9000"
    run = read_recorded(write_vllm_run(tmp_path / "b", meta=m))
    with pytest.raises(ScenarioError, match="'Quantum GPU 9000' .* has no profile in the GPU catalog"):
        build_replay_scenario(run)
    m = _meta(model="Org/Unknown-1B")
    m["model"] = "Org/Unknown-1B"
    run = read_recorded(write_vllm_run(tmp_path / "c", meta=m))
    with pytest.raises(ScenarioError, match="'Org/Unknown-1B' .* is not in the model catalog"):
        build_replay_scenario(run)


def test_model_config_from_the_runs_repository(tmp_path):
    m = _meta(model="Org/Tiny-1B")
    m["model"] = "Org/Tiny-1B"
    run_dir = write_vllm_run(tmp_path, meta=m)
    cfg = tmp_path / "configs" / "model" / "Org" / "Tiny-1B.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"num_hidden_layers": 4, "hidden_size": 256,
                               "num_attention_heads": 4, "num_key_value_heads": 2,
                               "intermediate_size": 768, "vocab_size": 4096,
                               "max_position_embeddings": 4096}))
    rs = build_replay_scenario(read_recorded(run_dir))
    value, source = _rows(rs)["model"]
    assert value == str(cfg)
    assert "configs/model/Org/Tiny-1B.json" in source


def test_tensor_data_and_expert_parallel(tmp_path):
    m = _meta(tensor_parallel_size=2)
    rs = build_replay_scenario(read_recorded(write_vllm_run(tmp_path, meta=m)))
    assert rs.scenario.cluster.tensor_parallel_size == 2
    assert rs.scenario.cluster.num_replicas == 1 and rs.approximations == []
    # an MoE model: DP2 x EP2 -> 2 replicas, each with half the experts
    m = _meta(model="Qwen/Qwen3-30B-A3B", data_parallel_size=2, enable_expert_parallel=True)
    rs = build_replay_scenario(read_recorded(write_vllm_run(tmp_path / "ep", meta=m)))
    assert rs.scenario.cluster.num_replicas == 2
    assert rs.scenario.cluster.router == "least_outstanding"
    assert rs.scenario.cluster.enable_expert_parallel is True
    assert rs.scenario.cluster.expert_parallel_size == 2
    assert any("DP2 x EP2" in a and "1/2 of the experts" in a for a in rs.approximations)
    assert rs.engine_features["enable_expert_parallel"]["value"] is True
    # a dense model: vLLM ignores the flag, and the replay says so
    m = _meta(data_parallel_size=2, enable_expert_parallel=True)
    rs = build_replay_scenario(read_recorded(write_vllm_run(tmp_path / "dense", meta=m)))
    assert rs.scenario.cluster.enable_expert_parallel is False
    assert any("no experts" in n for n in rs.notes)


def test_bad_override_is_a_scenario_error(tmp_path):
    run = read_recorded(write_vllm_run(tmp_path, meta=_meta()))
    with pytest.raises(ScenarioError, match="unknown key 'scheduler.max_seqs'"):
        build_replay_scenario(run, sets=["scheduler.max_seqs=3"])


def test_unmodelled_record_settings_are_named(tmp_path):
    m = _meta(enable_lora=True)   # (quantization fp8 is modelled: perf.weight_dtype fp8)
    rs = build_replay_scenario(read_recorded(write_vllm_run(tmp_path, meta=m)))
    assert any(n.startswith("record setting enable_lora=True (meta.json "
                            "engine_kwargs.enable_lora) has no servesim equivalent")
               for n in rs.notes)
