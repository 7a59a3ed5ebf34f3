"""Records as H100 / A100 users have them: device strings as torch prints them, vLLM versions
from 0.6 (V0) to releases newer than any shipped table set, Hugging Face model ids, local
checkpoint paths, missing optional settings. Each test checks the choice a careful engineer
would make (GPU, engine generation and profile, table set, batch budgets) and that its source
is stated; a GPU or model the simulator lacks is a one-line error."""
from __future__ import annotations

import json

import pytest
from record_factories import base_meta, bench_result, synthetic_stats_rows, write_vllm_run

from simulator.cli.main import main
from simulator.observe import build_replay_scenario, read_recorded
from simulator.observe.engine_defaults import batch_defaults, engine_generation, release_tuple
from simulator.observe.settings import match_gpu
from simulator.scenario.config import ScenarioError

GIB = 2**30


def _rows(rs):
    return {r.key: (r.value, r.source) for r in rs.rows}


def _run(tmp_path, device="NVIDIA H100 80GB HBM3", version="0.19.0", drop=(), **ek):
    meta = base_meta(**ek)
    for k in drop:
        meta["engine_kwargs"].pop(k)
    meta["vllm_version"] = version
    if device is not None:
        meta["hardware"] = {"device_name": device}
    return read_recorded(write_vllm_run(tmp_path, synthetic_stats_rows(6), meta))


# ------------------------------------------------------------------------------ versions
@pytest.mark.parametrize(("text", "rel", "gen"), [
    ("0.19.0", (0, 19, 0), "v1"), ("0.11.1rc2.dev5+g1234abc", (0, 11, 1), "v1"),
    ("v0.6.3.post1", (0, 6, 3), "v0"), ("0.8", (0, 8, 0), "v1"), ("0.7.3", (0, 7, 3), "v0"),
    ("main", None, None), (None, None, None)])
def test_release_and_generation(text, rel, gen):
    assert release_tuple(text) == rel
    assert engine_generation(text) == gen


@pytest.mark.parametrize(("version", "device", "mem", "want"), [
    ("0.11.0", "NVIDIA H100 80GB HBM3", 80 * GIB, (8192, 1024)),   # >= 70 GiB, not an A100
    ("0.11.0", "NVIDIA A100-SXM4-80GB", 80 * GIB, (2048, 256)),    # an A100 (vLLM PR #17885)
    ("0.19.0", "NVIDIA GeForce RTX 4090", 24 * GIB, (2048, 256)),  # under 70 GiB
    ("0.8.5", "NVIDIA H200", 139 * GIB, (8192, 1024)),             # 0.8: h100 / h200 by name
    ("0.8.5", "NVIDIA RTX PRO 6000", 96 * GIB, (2048, 256)),       # 0.8: not by name
    (None, "NVIDIA H100 80GB HBM3", 80 * GIB, (8192, 1024)),       # unknown: newest rule
])
def test_vllm_serve_batch_defaults(version, device, mem, want):
    mbt, seqs, rule = batch_defaults(version, device, mem)
    assert (mbt, seqs) == want
    assert device in rule


# ------------------------------------------------------------------------------ devices
@pytest.mark.parametrize(("device", "gpu"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    # sibling boards: their own spec, the same-die sibling's kernel efficiency (labelled)
    ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"), ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    # a board with no profile (94 GB HBM3, NVL bridge): not substituted
    ("NVIDIA H100 NVL", None), ("NVIDIA B300 Made-Up", None)])
def test_torch_device_strings(device, gpu):
    assert match_gpu(device) == gpu


@pytest.mark.parametrize(("device", "gpu", "sibling"), [
    ("NVIDIA H100 PCIe", "h100-pcie", "h100-sxm"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb", "a100-sxm-80gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb", "a100-sxm-80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb", "a100-sxm-80gb")])
def test_sibling_board_record_replays_with_transfer_stated(tmp_path, device, gpu, sibling):
    rs = build_replay_scenario(_run(tmp_path, device=device, version="0.22.0"))
    assert rs.scenario.hardware.gpu == gpu
    assert _rows(rs)["hardware.gpu"][1].endswith(f"{device!r} -> GPU catalog {gpu}")
    hit = [a for a in rs.approximations if "no kernel measurement of its own" in a]
    assert len(hit) == 1 and f"measured excess time of {sibling}" in hit[0]
    assert "communication tables are not transferred" in hit[0]
    # vLLM 0.22.0 is shipped for both siblings: no version approximation
    assert rs.scenario.perf.engine_version == "0.22.0"


def test_gpu_without_profile_one_line_error_and_exit_code(tmp_path, capsys):
    run = _run(tmp_path / "a", device="NVIDIA H100 NVL")
    with pytest.raises(ScenarioError, match="'NVIDIA H100 NVL' .* has no profile in the GPU "
                                            "catalog .*h100-sxm.*not substituted"):
        build_replay_scenario(run)
    folder = write_vllm_run(tmp_path / "b", synthetic_stats_rows(4), {
        **base_meta(), "hardware": {"device_name": "NVIDIA H100 NVL"}})
    rc = main(["validate", "--recorded", str(folder), "-o", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "H100 NVL" in err and "--gpu" in err


# ------------------------------------------------------------------------------ engine
def test_v0_record_gets_v0_engine_and_its_defaults(tmp_path):
    # vLLM 0.6: V0 engine; no prefix caching; no chunked prefill with max_model_len 4096, so
    # the token budget is max(4096, 2048) = 4096 in prefill-only steps; 256 sequences
    rs = build_replay_scenario(_run(tmp_path, version="0.6.3.post1", max_model_len=4096,
                                    drop=("max_num_seqs", "max_num_batched_tokens")))
    rows = _rows(rs)
    want = "meta.json vllm_version 0.6.3.post1 (vLLM < 0.8 runs its V0 engine)"
    assert rows["perf.engine"] == ("vllm-v0", want)
    assert rows["kv_cache.enable_prefix_caching"][0] is False
    assert rows["scheduler.enable_chunked_prefill"][0] is False
    assert rows["scheduler.max_num_batched_tokens"][0] == 4096
    assert rows["scheduler.max_num_seqs"][0] == 256
    assert rs.scenario.scheduler.step_policy == "prefill_first"
    # the oldest shipped H100 set (every one is newer than 0.6.3), the rule stated
    assert rows["perf.engine_version"][0] == "0.14.0"
    assert any("vLLM 0.14.0 is used, the oldest shipped set" in a for a in rs.approximations)


def test_v0_long_context_switches_chunked_prefill_on(tmp_path):
    # Llama-3.1-8B: 131072 positions > 32768 -> vLLM 0.6 turns chunked prefill on, 512 tokens
    rs = build_replay_scenario(_run(tmp_path, version="0.6.3", drop=(
        "max_num_seqs", "max_num_batched_tokens")))
    rows = _rows(rs)
    assert rows["scheduler.enable_chunked_prefill"][0] is True
    assert rows["scheduler.max_num_batched_tokens"][0] == 512
    assert any("chunked prefill is switched on" in a for a in rs.approximations)


@pytest.mark.parametrize(("device", "gpu", "seqs", "mbt"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm", 1024, 8192),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb", 256, 2048)])
def test_v1_record_without_budgets_gets_vllm_serve_defaults(tmp_path, device, gpu, seqs, mbt):
    rs = build_replay_scenario(_run(tmp_path, device=device, version="0.11.0",
                                    drop=("max_num_seqs", "max_num_batched_tokens")))
    rows = _rows(rs)
    assert rs.scenario.hardware.gpu == gpu
    assert rows["scheduler.max_num_seqs"][0] == seqs
    assert rows["scheduler.max_num_batched_tokens"][0] == mbt
    assert rows["scheduler.max_num_seqs"][1].startswith("vLLM >= 0.9 vllm serve default on "
                                                        + device)
    want = ("vLLM 0.11 default (not in the record; the value a 0.19.0 resolved config shows "
            "when the option is left unset)")
    assert rows["kv_cache.enable_prefix_caching"] == (True, want)
    assert any("does not state max_num_seqs" in a for a in rs.approximations)


def test_recorded_budgets_are_kept(tmp_path):
    rs = build_replay_scenario(_run(tmp_path, version="0.11.0"))   # base_meta: 8 seqs, 64 tokens
    rows = _rows(rs)
    assert rows["scheduler.max_num_seqs"] == (8, "meta.json engine_kwargs.max_num_seqs")
    assert not any("does not state" in a for a in rs.approximations)


@pytest.mark.parametrize(("device", "version", "pick", "why"), [
    ("NVIDIA A100-SXM4-80GB", "0.19.0", "0.14.0", "the newest shipped set not newer"),
    ("NVIDIA H100 80GB HBM3", "0.30.0", "0.24.0", "the newest shipped set not newer"),
    ("NVIDIA H100 80GB HBM3", "0.11.1rc2.dev5+g1234abc", "0.14.0", "the oldest shipped set"),
    ("NVIDIA H100 80GB HBM3", "0.19.0rc1", "0.19.0", "a build of the same release"),
    ("NVIDIA H100 80GB HBM3", "0.19.0", "0.19.0", None)])
def test_table_set_by_release(tmp_path, device, version, pick, why):
    rs = build_replay_scenario(_run(tmp_path, device=device, version=version))
    assert rs.scenario.perf.engine_version == pick
    hit = [a for a in rs.approximations if "no measured kernel tables" in a]
    if why is None:
        assert hit == []
    else:
        assert len(hit) == 1 and why in hit[0] and f"vLLM {version}" in hit[0]


# ------------------------------------------------------------------------------ models
@pytest.mark.parametrize(("model", "want"), [
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b"),
    ("/models/Llama-3.1-8B-Instruct", "llama-3.1-8b"),                 # local checkpoint
    ("/data/hf/meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b")])
def test_model_ids_and_local_paths(tmp_path, model, want):
    rs = build_replay_scenario(_run(tmp_path, model=model))
    assert rs.scenario.model == want


def test_model_from_the_hugging_face_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    snap = cache / "models--Org--Small-Llama" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (cache / "models--Org--Small-Llama" / "refs").mkdir()
    (cache / "models--Org--Small-Llama" / "refs" / "main").write_text("abc123\n")
    (snap / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4,
        "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
        "intermediate_size": 1024, "vocab_size": 32000, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    rs = build_replay_scenario(_run(tmp_path / "r", model="Org/Small-Llama"))
    assert rs.scenario.model == str(snap / "config.json")
    assert _rows(rs)["model"][1].endswith(f"Hugging Face cache {snap / 'config.json'}")


@pytest.mark.parametrize("model", ["mistralai/Mistral-7B-Instruct-v0.3",
                                   "deepseek-ai/DeepSeek-V2-Lite"])
def test_model_we_lack_is_one_line(tmp_path, monkeypatch, model):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(ScenarioError, match=f"'{model}' .* is not in the model catalog, the "
                                            "Hugging Face cache") as e:
        build_replay_scenario(_run(tmp_path, model=model))
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------ bench JSON
def test_bench_json_without_version_assumes_v1_and_says_so(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps(bench_result(device_name="NVIDIA H200")))
    rs = build_replay_scenario(read_recorded(p))
    rows = _rows(rs)
    assert rs.scenario.hardware.gpu == "h200-sxm"
    assert rows["kv_cache.enable_prefix_caching"][0] is True
    assert rows["kv_cache.enable_prefix_caching"][1].startswith("vLLM V1 default (assumed")
    assert rows["scheduler.max_num_seqs"][0] == 1024
    assert rows["perf.engine"][0] == "vllm-v1"
    assert any("names no vLLM version: h200-sxm's newest measured kernel tables (vLLM 0.24.0)"
               in a for a in rs.approximations)


# ------------------------------------------------------------------------------ more settings
def test_request_stats_without_version_are_v1(tmp_path):
    # RequestStateStats exist only in vLLM's V1 engine: V1 defaults, labelled as assumed
    meta = base_meta()
    del meta["vllm_version"]
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    rs = build_replay_scenario(read_recorded(write_vllm_run(tmp_path, synthetic_stats_rows(4),
                                                            meta)))
    rows = _rows(rs)
    assert rows["perf.engine"][0] == "vllm-v1"
    assert rows["kv_cache.enable_prefix_caching"][0] is True
    assert "assumed: the record names no vLLM version" in rows["kv_cache.enable_prefix_caching"][1]


def test_fp8_quantization_and_dtype_auto(tmp_path):
    rs = build_replay_scenario(_run(tmp_path / "q", quantization="fp8"))
    assert _rows(rs)["perf.weight_dtype"] == ("fp8", "meta.json engine_kwargs.quantization")
    rs = build_replay_scenario(_run(tmp_path / "a", dtype="auto"))
    assert _rows(rs)["perf.weight_dtype"][0] == "bf16"
    assert any("dtype 'auto'" in n for n in rs.notes)
    rs = build_replay_scenario(_run(tmp_path / "w", quantization="awq"))
    assert _rows(rs)["perf.weight_dtype"][0] == "bf16"
    assert any("quantization 'awq' is not modelled" in n for n in rs.notes)


def test_fp8_kv_cache_halves_the_kv_bytes(tmp_path):
    rs = build_replay_scenario(_run(tmp_path, kv_cache_dtype="fp8_e4m3"))
    assert _rows(rs)["kv_cache.kv_cache_dtype"] == ("fp8", "meta.json engine_kwargs.kv_cache_dtype")


def test_moe_on_a_table_set_without_balanced_rows_replays(tmp_path):
    # a100 vLLM 0.14.0 measured its fused MoE under power-law routing only: the replay costs
    # MoE layers with that table's mildest power law (and says so) instead of failing or
    # falling back to the dense-MLP fit (which priced a Qwen3-235B TP8 run 25% fast)
    from simulator.observe import validate_recorded
    folder = write_vllm_run(tmp_path, synthetic_stats_rows(4), {
        **base_meta(model="mistralai/Mixtral-8x7B-Instruct-v0.1", tensor_parallel_size=2),
        "vllm_version": "0.14.1", "hardware": {"device_name": "NVIDIA A100-SXM4-80GB"}})
    rv = validate_recorded(folder, write=False)
    assert rv.validation["counts"]["num_compared"] == 4
    assert rv.replay.scenario.perf.engine_version == "0.14.0"
    moe = rv.validation["provenance"]["moe"]
    assert moe.startswith("measured (NVIDIA A100-SXM4-80GB, vLLM 0.14.0"), moe
    assert "power_law_1.01 routing: the set measures no balanced routing" in moe


def test_v0_recorded_chunked_prefill_gets_its_token_budget(tmp_path):
    rs = build_replay_scenario(_run(tmp_path, version="0.6.3", max_model_len=4096,
                                    enable_chunked_prefill=True,
                                    drop=("max_num_batched_tokens",)))
    rows = _rows(rs)
    assert rows["scheduler.enable_chunked_prefill"] == (
        True, "meta.json engine_kwargs.enable_chunked_prefill")
    assert rows["scheduler.max_num_batched_tokens"][0] == 512
    assert rs.scenario.scheduler.step_policy == "decode_first"


def test_bench_json_e2els_name_for_latencies(tmp_path):
    # bench_result: request 0 TTFT 0.25 s + 9 gaps of 0.125 s -> E2E 1.375 s; here saved as e2els
    d = bench_result(device_name="NVIDIA H100 80GB HBM3", vllm_version="0.11.0")
    d["e2els"] = d.pop("latencies")
    d["e2els"][0] = 2.0            # differs from TTFT + gaps: shows which one is read
    p = tmp_path / "b.json"
    p.write_text(json.dumps(d))
    run = read_recorded(p)
    row = run.outcomes.set_index("record_request_id").loc["0"]
    assert row["e2e_latency_s"] == 2.0
    assert row["tpot_s"] == (2.0 - 0.25) / 9


def test_a_record_whose_max_model_len_the_plan_cannot_hold_replays_with_it_lowered(tmp_path):
    """Qwen3-32B on one H100 at vLLM's serve budgets: the memory plan leaves less KV than one
    40,960-token request needs, but the recorded engine served it, so the replay lowers
    max_model_len to what the plan holds (noted) instead of refusing; a --set value is kept."""
    from simulator.catalog.models import get_model
    from simulator.kv.planner import MaxModelLenError, plan_memory
    from simulator.observe.validate import validate_recorded
    meta = base_meta(model="Qwen/Qwen3-32B", max_num_seqs=256, max_num_batched_tokens=2048)
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    folder = write_vllm_run(tmp_path / "rec", synthetic_stats_rows(6), meta)
    v = validate_recorded(folder, write=False)
    capped = v.replay.scenario.scheduler.max_model_len
    assert any("lowered to" in a and "max_model_len" in a for a in v.replay.approximations)
    assert v.validation["counts"]["num_compared"] == 6  # every recorded request replayed
    assert v.validation["scenario"]["scheduler"]["max_model_len"] == capped
    # the cap is the longest request the planned blocks hold: one block more is refused
    kw = {"gpu_memory_utilization": 0.9, "block_size": 16, "max_num_batched_tokens": 2048,
          "max_num_seqs": 256, "num_sms": 132, "compute_capability": (9, 0)}
    m = get_model("qwen3-32b")
    hbm = 81089 * 2**20
    assert plan_memory(m, hbm, max_model_len=capped, **kw).max_model_len == capped
    with pytest.raises(MaxModelLenError):
        plan_memory(m, hbm, max_model_len=capped + 16, **kw)
    assert capped < 40_960 == m.max_position_embeddings
    with pytest.raises(MaxModelLenError):
        validate_recorded(folder, write=False, sets=["scheduler.max_model_len=40960"])
