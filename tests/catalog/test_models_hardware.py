"""Model catalog, Hugging Face config loading, parameter counts (vs facts.yaml
``params_derived_b``), GPU catalog, aliases and custom spec files."""
from __future__ import annotations

import json

import pytest
import yaml

from simulator.catalog.hardware import get_gpu, gpu_catalog, load_gpu_spec
from simulator.catalog.models import CATALOG, get_model, load_hf_config

LLAMA31_8B_CONFIG = {
    "_name_or_path": "meta-llama/Llama-3.1-8B", "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_lookup_by_id_hf_id_alias_and_case():
    m = get_model("llama-3.1-8b")
    assert get_model("meta-llama/Llama-3.1-8B") is m
    assert get_model("META-LLAMA/LLAMA-3.1-8B-INSTRUCT") is m
    assert get_model("  Llama-3.1-8B ") is m
    assert get_model("mistralai/Mixtral-8x7B-Instruct-v0.1") is CATALOG["mixtral-8x7b"]
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.head_dim,
            m.intermediate_size, m.vocab_size) == (32, 4096, 32, 8, 128, 14336, 128256)
    with pytest.raises(ValueError, match="llama-3.1-8b"):  # lists the known ids
        get_model("gpt-5")


@pytest.mark.parametrize("name,billions", [
    ("llama-3.1-8b", 8.03), ("llama-3-8b", 8.03), ("llama-3-70b", 70.55),
    ("llama-3.1-70b", 70.55), ("llama-2-7b", 6.74), ("llama-2-70b", 68.98),
    ("mistral-7b", 7.24), ("mixtral-8x7b", 46.70), ("qwen2.5-72b", 72.71),
    ("qwen2.5-7b", 7.62), ("llama-3.2-1b", 1.24), ("tinyllama-1.1b", 1.10),
    ("llama-3.1-405b", 405.85),
])
def test_param_counts_match_facts(name, billions):
    assert get_model(name).num_params() / 1e9 == pytest.approx(billions, abs=0.01)


def test_moe_active_params():
    m = get_model("mixtral-8x7b")
    assert m.num_active_params() / 1e9 == pytest.approx(12.88, abs=0.01)
    # dense models: active == total
    assert get_model("llama-3-70b").num_active_params() == get_model("llama-3-70b").num_params()
    assert m.weight_bytes("fp8") * 2 == m.weight_bytes("bf16")


def test_hf_config_file_and_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA31_8B_CONFIG))
    m = load_hf_config(tmp_path / "config.json")
    ref = get_model("llama-3.1-8b")
    fields = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
              "intermediate_size", "vocab_size", "max_position_embeddings", "num_experts")
    assert [getattr(m, f) for f in fields] == [getattr(ref, f) for f in fields]
    assert m.num_params() == ref.num_params()
    assert m.hf_id == "meta-llama/Llama-3.1-8B"
    assert get_model(str(tmp_path)).num_params() == ref.num_params()  # a folder works too


def test_hf_config_defaults_and_nested_text_config(tmp_path):
    cfg = {"text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                           "intermediate_size": 128, "vocab_size": 100,
                           "num_local_experts": 4}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cfg))
    m = load_hf_config(p, name="tiny")
    assert m.name == "tiny" and m.num_layers == 2
    assert m.num_kv_heads == 4 and m.head_dim == 16  # defaults: MHA, hidden / heads
    assert m.num_experts == 4 and m.experts_per_token == 2
    assert m.max_position_embeddings == 4096


def test_hf_config_errors(tmp_path):
    cfg = dict(LLAMA31_8B_CONFIG)
    del cfg["intermediate_size"]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="intermediate_size"):
        load_hf_config(p)
    p.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        load_hf_config(p)


def test_gpu_catalog_and_aliases():
    cat = gpu_catalog()
    assert {"h100-sxm", "a100-sxm-80gb", "h200-sxm"} <= set(cat)
    h100 = get_gpu("h100-sxm")
    for alias in ("h100", "H100-SXM5", "NVIDIA H100 80GB HBM3"):
        assert get_gpu(alias) == h100
    # datasheet figures (facts.yaml h100-sxm5-80gb: 989.4 dense BF16, 3.35 TB/s, 80 GB)
    assert h100.bf16_flops_per_s == 989.4e12 and h100.hbm_bandwidth_bytes_per_s == 3.35e12
    # CUDA's total of an H100 80GB HBM3 (torch total_memory=81089MB), below the 80 GiB of HBM
    assert h100.hbm_bytes == 81089 * 2**20 < 80 * 2**30 and h100.flops_per_s("fp8") == 1978.9e12
    a100 = get_gpu("a100")
    assert a100.fp8_flops_per_s is None and a100.flops_per_s("fp8") == a100.bf16_flops_per_s
    assert get_gpu("h200").hbm_bytes == 143156 * 2**20  # torch total_memory=143156MB
    with pytest.raises(ValueError, match="h100-sxm"):
        get_gpu("tpu-v9")


def _spec(**over):
    d = {"name": "my-gpu", "bf16_flops_per_s": 100e12, "hbm_bytes": 24e9,
         "hbm_bandwidth_bytes_per_s": 1e12, "usd_per_gpu_hour": 1.5}
    d.update(over)
    return d


def test_custom_gpu_spec_path(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(_spec()))
    g = get_gpu(str(p))
    assert (g.name, g.bf16_flops_per_s, g.hbm_bytes, g.usd_per_gpu_hour) == \
        ("my-gpu", 100e12, 24e9, 1.5)
    assert g.profile_dir == tmp_path
    assert get_gpu(str(tmp_path)) == g  # a folder holding spec.yaml


@pytest.mark.parametrize("over,match", [
    ({"hbm_bytes": None}, "hbm_bytes"),
    ({"bf16_flops_per_s": "fast"}, "not a number"),
    ({"hbm_bandwidth_bytes_per_s": 0}, "must be positive"),
    ({"num_sms": 0}, "num_sms=0 must be an integer >= 1"),
    ({"num_sms": 13.5}, "num_sms=13.5 must be an integer"),
    ({"compute_capability": "nine"}, "compute_capability='nine' must be 'major.minor'"),
    ({"compute_capability": [9]}, "compute_capability"),
])
def test_custom_gpu_spec_errors(tmp_path, over, match):
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(_spec(**over)))
    with pytest.raises(ValueError, match=match):
        load_gpu_spec(p)


def test_missing_gpu_spec_file(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        load_gpu_spec(tmp_path / "none.yaml")


def test_gpu_spec_sm_count_and_compute_capability(tmp_path):
    """Stated as a string, a list or absent; the catalog's RTX 4090 (AD102: 128 SMs, sm89) and
    H100 SXM (132 SMs, sm90)."""
    for cc, want in (("8.9", (8, 9)), ([12, 0], (12, 0))):
        p = tmp_path / f"{want[0]}.yaml"
        p.write_text(yaml.safe_dump(_spec(num_sms=128, compute_capability=cc)))
        g = load_gpu_spec(p)
        assert (g.num_sms, g.compute_capability) == (128, want)
    p = tmp_path / "bare.yaml"
    p.write_text(yaml.safe_dump(_spec()))
    assert (load_gpu_spec(p).num_sms, load_gpu_spec(p).compute_capability) == (None, None)
    assert (get_gpu("rtx-4090").num_sms, get_gpu("rtx-4090").compute_capability) == (128, (8, 9))
    assert (get_gpu("h100-sxm").num_sms, get_gpu("h100-sxm").compute_capability) == (132, (9, 0))


def test_planner_reads_the_gpu_sm_count():
    """The KV plan of a run uses the spec's SM count: Llama-3.1-8B on the RTX 4090 at vLLM
    0.19 defaults of the recorded run (util 0.9, 2,048 batched tokens, 256 sequences) plans
    what plan_memory gives with 128 SMs and sm89, not the unknown-GPU rule."""
    from simulator.kv.planner import plan_memory
    g = get_gpu("rtx-4090")
    kw = dict(gpu_memory_utilization=0.9, block_size=16, max_num_batched_tokens=2048,
              max_num_seqs=256)
    known = plan_memory(get_model("llama-3.1-8b"), 25_250_627_584, num_sms=128,
                        compute_capability=(8, 9), **kw)
    unknown = plan_memory(get_model("llama-3.1-8b"), 25_250_627_584, **kw)
    spec = plan_memory(get_model("llama-3.1-8b"), 25_250_627_584, num_sms=g.num_sms,
                       compute_capability=g.compute_capability, **kw)
    assert spec.num_gpu_blocks == known.num_gpu_blocks == 2769 != unknown.num_gpu_blocks
