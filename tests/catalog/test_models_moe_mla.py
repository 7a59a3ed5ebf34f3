"""MoE, MLA and sliding-window model configs: parameter counts and KV bytes worked out by
hand from the config numbers written in each test, the ground-truth configs of the recorded
vLLM runs, per-GPU shapes, and the one-line refusals of configs servesim cannot cost."""
from __future__ import annotations

import json

import pytest
from helpers import SHARED_DIR

from simulator.catalog.models import CATALOG, get_model, load_hf_config

GT_MODELS = SHARED_DIR / "reference" / "groundtruth" / "llmservingsim" / "configs" / "model"

QWEN3_30B_A3B = {  # as Qwen/Qwen3-30B-A3B-Instruct-2507 config.json
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
    "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 2048, "intermediate_size": 6144,
    "max_position_embeddings": 262144, "max_window_layers": 48, "mlp_only_layers": [],
    "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32,
    "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "sliding_window": None, "tie_word_embeddings": False,
    "use_sliding_window": False, "vocab_size": 151936}

DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3 config.json (facts.yaml)
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "first_k_dense_replace": 3, "hidden_size": 7168, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280}

QWEN15_MOE = {  # Qwen/Qwen1.5-MoE-A2.7B config.json: one gated shared expert
    "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
    "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_key_value_heads": 16,
    "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "vocab_size": 151936, "tie_word_embeddings": False, "max_position_embeddings": 8192,
    "use_sliding_window": False, "sliding_window": 32768}


def _write(tmp_path, cfg: dict, name: str = "config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return p


# ---------------------------------------------------------------------------- MoE
def test_qwen3_30b_a3b_counts_from_its_config(tmp_path):
    """Per layer: attention 2048 x (32 + 2 x 4) x 128 + 32 x 128 x 2048 = 18,874,368, q/k norms
    2 x 128, experts 128 x 3 x 2048 x 768 = 603,979,776, router 2048 x 128, norms 2 x 2048;
    embeddings + untied head 2 x 151936 x 2048; final norm 2048. Active: 8 experts."""
    m = load_hf_config(_write(tmp_path, QWEN3_30B_A3B))
    layer = 18_874_368 + 256 + 603_979_776 + 2048 * 128 + 2 * 2048
    total = 48 * layer + 2 * 151936 * 2048 + 2048
    active_layer = 18_874_368 + 256 + 8 * 3 * 2048 * 768 + 2048 * 128 + 2 * 2048
    active = 48 * active_layer + 2 * 151936 * 2048 + 2048
    assert m.num_params() == total == 30_532_122_624  # model card: 30.5 B
    assert m.num_active_params() == active == 3_353_032_704  # model card: 3.3 B activated
    assert (m.intermediate_size, m.dense_intermediate_size) == (768, 6144)
    assert (m.num_experts, m.experts_per_token, m.num_moe_layers, m.num_dense_layers) == (128, 8, 48, 0)
    assert m.qk_norm and not m.qkv_bias and m.sliding_window is None
    # KV: 2 x 48 layers x 4 heads x 128 x 2 B; TP 8 > 4 KV heads replicates: one head per GPU
    assert m.kv_bytes_per_token("bf16") == 2 * 48 * 4 * 128 * 2 == 98_304
    assert m.kv_bytes_per_token("bf16", 8) == 2 * 48 * 1 * 128 * 2
    assert get_model("qwen3-30b-a3b").num_params() == total
    assert get_model("Qwen/Qwen3-30B-A3B-Instruct-2507").max_position_embeddings == 262144
    assert get_model("Qwen/Qwen3-30B-A3B").max_position_embeddings == 40960


def test_mixtral_counts_match_facts():
    """Mixtral-8x7B: 32 layers x (attention 4096 x 48 x 128 + 32 x 128 x 4096, 8 experts x
    3 x 4096 x 14336, router 4096 x 8, norms) + 2 x 32000 x 4096 + 4096 (facts.yaml 46.70 B /
    12.88 B; arXiv 2401.04088: 47 B / 13 B)."""
    m = get_model("mixtral-8x7b")
    attn = 4096 * 48 * 128 + 32 * 128 * 4096
    layer = attn + 8 * 3 * 4096 * 14336 + 4096 * 8 + 2 * 4096
    active_layer = attn + 2 * 3 * 4096 * 14336 + 4096 * 8 + 2 * 4096
    assert m.num_params() == 32 * layer + 2 * 32000 * 4096 + 4096
    assert m.num_active_params() == 32 * active_layer + 2 * 32000 * 4096 + 4096
    assert round(m.num_params() / 1e9, 2) == 46.70 and round(m.num_active_params() / 1e9, 2) == 12.88


def test_qwen2_moe_shared_expert_and_gate(tmp_path):
    """Qwen1.5-MoE-A2.7B: per layer attention 2048 x 48 x 128 + 16 x 128 x 2048 + QKV bias
    48 x 128; 60 experts x 3 x 2048 x 1408; router 2048 x 60; shared 3 x 2048 x 5632 + gate 2048;
    norms 2 x 2048 (published 14.3 B total, 2.7 B activated)."""
    m = load_hf_config(_write(tmp_path, QWEN15_MOE))
    attn = 2048 * 48 * 128 + 16 * 128 * 2048 + 48 * 128
    shared = 3 * 2048 * 5632 + 2048
    layer = attn + 60 * 3 * 2048 * 1408 + 2048 * 60 + shared + 2 * 2048
    act_layer = attn + 4 * 3 * 2048 * 1408 + 2048 * 60 + shared + 2 * 2048
    emb = 2 * 151936 * 2048 + 2048
    assert m.num_params() == 24 * layer + emb == 14_315_784_192
    assert m.num_active_params() == 24 * act_layer + emb == 2_689_173_504
    assert (m.num_shared_experts, m.shared_expert_intermediate_size, m.shared_expert_gate) == (1, 5632, True)
    assert m.sliding_window is None  # use_sliding_window false: the window field is ignored


def test_dense_layers_among_moe_layers(tmp_path):
    """decoder_sparse_step=2: layer i is MoE iff (i + 1) % 2 == 0; mlp_only_layers forces dense."""
    cfg = {**QWEN3_30B_A3B, "num_hidden_layers": 6, "decoder_sparse_step": 2, "mlp_only_layers": [5]}
    m = load_hf_config(_write(tmp_path, cfg))
    assert m.dense_layer_indices == (0, 2, 4, 5) and m.moe_layer_indices == (1, 3)
    attn = 18_874_368 + 256 + 2 * 2048
    dense = 3 * 2048 * 6144
    moe = 128 * 3 * 2048 * 768 + 2048 * 128
    assert m.num_params() == 6 * attn + 4 * dense + 2 * moe + 2 * 151936 * 2048 + 2048
    # DeepSeek style: first_k_dense_replace 2, moe_layer_freq 2 -> MoE layers 2, 4
    ds = {**DEEPSEEK_V3, "num_hidden_layers": 6, "first_k_dense_replace": 2, "moe_layer_freq": 2}
    assert load_hf_config(_write(tmp_path, ds)).moe_layer_indices == (2, 4)


# ---------------------------------------------------------------------------- MLA
def test_deepseek_v3_mla_counts_and_kv(tmp_path):
    """MLA attention per layer: q_a 7168 x 1536 + norm 1536 + q_b 1536 x 128 x 192; kv_a 7168 x
    576 + norm 512 + kv_b 512 x 128 x 256; o 128 x 128 x 7168. Dense layers 0-2: 3 x 7168 x
    18432; MoE layers 3-60: 256 x 3 x 7168 x 2048 + shared 3 x 7168 x 2048 + router 7168 x 256
    + 256 score bias. Embeddings + head 2 x 129280 x 7168 (arXiv 2412.19437: 671 B / 37 B)."""
    m = load_hf_config(_write(tmp_path, DEEPSEEK_V3))
    attn = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
            + 128 * 128 * 7168)
    assert attn == 187_107_328
    expert = 3 * 7168 * 2048
    norms = 2 * 7168
    dense_layer = attn + norms + 3 * 7168 * 18432
    moe_layer = attn + norms + 256 * expert + expert + 7168 * 256 + 256
    act_moe_layer = attn + norms + 8 * expert + expert + 7168 * 256 + 256
    emb = 2 * 129280 * 7168 + 7168
    assert m.num_params() == 3 * dense_layer + 58 * moe_layer + emb == 671_026_419_200
    assert m.num_active_params() == 3 * dense_layer + 58 * act_moe_layer + emb == 37_552_297_472
    assert m.num_params() == get_model("deepseek-v3").num_params()
    # vLLM's MLA cache: one latent of kv_lora + rope per token and layer, not split by TP
    assert m.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2 == 70_272  # facts.yaml
    assert m.kv_bytes_per_token("bf16", 8) == 70_272
    assert m.kv_bytes_per_token("fp8") == 61 * 576
    assert (m.attention_kind, m.head_dim, m.num_dense_layers, m.num_moe_layers) == ("mla", 192, 3, 58)
    assert m.moe_router_bias and m.num_shared_experts == 1


def test_deepseek_v3_shapes_per_gpu():
    """TP 8: 16 query heads per GPU; the MLA down-projection is replicated."""
    m = get_model("deepseek-v3")
    assert m.dense_gemm_shapes(8) == {
        "fused_qkv_a_proj": (7168, 1536 + 512 + 64), "q_b_proj": (1536, 16 * 192),
        "kv_b_proj": (512, 16 * (128 + 128)), "o_proj": (16 * 128, 7168),
        "mlp_gate_up": (7168, 2 * 18432 // 8), "mlp_down": (18432 // 8, 7168)}
    assert m.attention_heads(8) == (16, 1, 576)
    assert m.mla_prefill_heads(8) == (16, 192, 128)
    assert m.mla_absorbed_bmm_shapes(8) == {"mla_q_absorb": (16, 128, 512), "mla_v_up": (16, 512, 128)}
    assert m.moe_shape(8, 1) == {"hidden": 7168, "num_experts": 256, "experts_per_rank": 256,
                                 "topk": 8, "expert_intermediate_per_rank": 2048 // 8,
                                 "shared_intermediate_per_rank": 2048 // 8, "num_moe_layers": 58}
    ep = m.moe_shape(8, 8)
    assert (ep["experts_per_rank"], ep["expert_intermediate_per_rank"]) == (256 // 8, 2048)
    # per GPU at TP 8 (EP 1): replicated q_a/kv_a and norms, 1/8 of the rest
    attn = (7168 * 1536 + 1536 + 1536 * 16 * 192 + 7168 * 576 + 512 + 512 * 16 * 256
            + 16 * 128 * 7168)
    per_gpu = (61 * (attn + 2 * 7168) + 3 * 3 * 7168 * 2304
               + 58 * (256 * 3 * 7168 * 256 + 7168 * 256 + 256 + 3 * 7168 * 256)
               + 2 * (129280 // 8) * 7168 + 7168)
    assert m.num_params_per_gpu(8) == per_gpu


def test_mla_without_q_lora(tmp_path):
    """DeepSeek-V2-Lite style: q_lora_rank null -> a plain q projection h x H x (nope + rope)."""
    cfg = {**DEEPSEEK_V3, "q_lora_rank": None, "num_hidden_layers": 2, "first_k_dense_replace": 1,
           "hidden_size": 2048, "num_attention_heads": 16, "n_routed_experts": 4,
           "num_experts_per_tok": 2, "topk_method": "greedy"}
    m = load_hf_config(_write(tmp_path, cfg))
    assert m.q_lora_rank is None
    assert m.dense_gemm_shapes(1)["q_proj"] == (2048, 16 * 192)
    assert m.dense_gemm_shapes(1)["kv_a_proj_with_mqa"] == (2048, 512 + 64)
    attn = 2048 * 16 * 192 + 2048 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 2048
    assert m._attn_params() == attn
    assert not m.moe_router_bias


# ---------------------------------------------------------------------------- dense models
def test_dense_counts_and_shapes():
    """Qwen3-32B: 64 x (5120 x 80 x 128 + 64 x 128 x 5120 + 2 x 128 + 3 x 5120 x 25600 + 2 x
    5120) + 2 x 151936 x 5120 + 5120 (model card 32.8 B); Llama-3.1-8B 8.03 B (facts.yaml)."""
    q = get_model("Qwen/Qwen3-32B")
    assert q is CATALOG["qwen3-32b"]
    layer = 5120 * 80 * 128 + 64 * 128 * 5120 + 2 * 128 + 3 * 5120 * 25600 + 2 * 5120
    assert q.num_params() == 64 * layer + 2 * 151936 * 5120 + 5120 == 32_762_123_264
    assert get_model("qwen3-8b").num_params() == (
        36 * (4096 * 48 * 128 + 32 * 128 * 4096 + 256 + 3 * 4096 * 12288 + 8192)
        + 2 * 151936 * 4096 + 4096)
    ll = get_model("llama-3.1-8b")
    assert ll.num_params() == 8_030_261_248 and ll.num_dense_layers == 32 and ll.num_moe_layers == 0
    assert ll.dense_gemm_shapes(2) == {"qkv_proj": (4096, (16 + 2 * 4) * 128), "o_proj": (2048, 4096),
                                       "mlp_gate_up": (4096, 2 * 7168), "mlp_down": (7168, 4096)}
    assert ll.attention_heads(2) == (16, 4, 128) and ll.attention_heads(16) == (2, 1, 128)
    with pytest.raises(ValueError, match="does not divide"):
        ll.dense_gemm_shapes(3)
    with pytest.raises(ValueError, match="dense"):
        ll.moe_shape(1, 1)
    # MoE-only models have no dense MLP GEMM
    assert "mlp_gate_up" not in get_model("qwen3-30b-a3b").dense_gemm_shapes(1)


# ---------------------------------------------------------------------------- sliding window
def test_sliding_window_layers_and_context(tmp_path):
    mis = get_model("mistral-7b")
    assert mis.sliding_window_layers == tuple(range(32))
    assert mis.attended_context(10_000, 5) == 4096 and mis.attended_context(100, 5) == 100
    assert mis.total_attended_context(10_000) == 32 * 4096
    assert mis.attention_layer_groups() == [(4096, 32)]
    # Qwen2: use_sliding_window + max_window_layers 20 of 28 -> layers 20..27 slide
    q2 = {"model_type": "qwen2", "hidden_size": 512, "intermediate_size": 1024,
          "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 28,
          "vocab_size": 1000, "use_sliding_window": True, "sliding_window": 2048,
          "max_window_layers": 20}
    m = load_hf_config(_write(tmp_path, q2))
    assert m.sliding_window_layers == tuple(range(20, 28))
    assert m.attention_layer_groups() == [(None, 20), (2048, 8)]
    assert m.total_attended_context(5000) == 20 * 5000 + 8 * 2048
    assert m.attended_context(5000, 3) == 5000 and m.attended_context(5000, 25) == 2048
    with pytest.raises(IndexError):
        m.attended_context(10, 28)
    # layer_types lists name the sliding layers directly
    lt = {**q2, "model_type": "llama", "layer_types": ["sliding_attention", "full_attention"] * 14}
    assert load_hf_config(_write(tmp_path, lt)).sliding_window_layers == tuple(range(0, 28, 2))
    # use_sliding_window false, or sliding_window 0/null: no sliding layers
    assert load_hf_config(_write(tmp_path, {**q2, "use_sliding_window": False})).sliding_window_layers == ()
    assert get_model("qwen3-32b").sliding_window_layers == ()


# ---------------------------------------------------------------------------- ground truth
GT_EXPECTED = {  # (total B, active B, KV bytes per token bf16, sliding layers)
    "Qwen/Qwen3-30B-A3B-Instruct-2507.json": (30.53, 3.35, 98_304, 0),
    "Qwen/Qwen3-32B.json": (32.76, 32.76, 2 * 64 * 8 * 128 * 2, 0),
    "meta-llama/Llama-3.1-8B.json": (8.03, 8.03, 131_072, 0),
    "meta-llama/Llama-3.1-70B.json": (70.55, 70.55, 327_680, 0),
    "mistralai/Mixtral-8x7B-v0.1.json": (46.70, 12.88, 131_072, 0),
    # PhiMoE: 16 experts of 960, top-2, attention/LM-head/LayerNorm biases, window 2047 on
    # every layer (Phi-mini-MoE model card: 7.6 B total, 2.4 B activated)
    "microsoft/Phi-mini-MoE-instruct.json": (7.65, 2.36, 131_072, 32),
}


@pytest.mark.parametrize("rel", sorted(GT_EXPECTED))
def test_ground_truth_configs_load(rel):
    path = GT_MODELS / rel
    if not path.is_file():
        pytest.skip(f"shared/reference/groundtruth/.../configs/model/{rel} not available")
    m = load_hf_config(path)
    total, active, kv, n_sl = GT_EXPECTED[rel]
    assert round(m.num_params() / 1e9, 2) == total
    assert round(m.num_active_params() / 1e9, 2) == active
    assert m.kv_bytes_per_token("bf16") == kv
    assert len(m.sliding_window_layers) == n_sl
    assert m.name == json.loads(path.read_text()).get("_name_or_path", path.stem).lower()


def test_phimoe_biases_counted(tmp_path):
    """PhiMoE: per layer 4096 x 48 x 128 + 4096 x 4096 + QKV bias 48 x 128 + o bias 4096 +
    16 x 3 x 4096 x 960 + router 4096 x 16 + LayerNorms 2 x 2 x 4096; embeddings + head
    2 x 32064 x 4096 + head bias 32064 + final LayerNorm 2 x 4096."""
    cfg = {"model_type": "phimoe", "attention_bias": True, "lm_head_bias": True, "head_dim": 128,
           "hidden_size": 4096, "intermediate_size": 960, "max_position_embeddings": 4096,
           "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
           "num_key_value_heads": 8, "num_local_experts": 16, "sliding_window": 2047,
           "tie_word_embeddings": False, "vocab_size": 32064}
    m = load_hf_config(_write(tmp_path, cfg))
    layer = (4096 * 48 * 128 + 4096 * 4096 + 48 * 128 + 4096 + 16 * 3 * 4096 * 960
             + 4096 * 16 + 2 * 2 * 4096)
    assert m.num_params() == 32 * layer + 2 * 32064 * 4096 + 32064 + 2 * 4096 == 7_647_632_704


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("cfg,field", [
    ({"is_encoder_decoder": True, "model_type": "t5"}, "is_encoder_decoder"),
    ({"model_type": "whisper"}, "model_type='whisper'"),
    ({"model_type": "mllama", "cross_attention_layers": [3, 8]}, "cross_attention_layers"),
    ({"model_type": "jamba", "layers_block_type": ["mamba", "attention"]}, "layers_block_type"),
    ({"model_type": "falcon_h1", "mamba_d_ssm": 1024}, "mamba_d_ssm"),
    ({"model_type": "qwen3_next", "full_attention_interval": 4}, "full_attention_interval"),
    ({"model_type": "llama", "layer_types": ["full_attention", "linear_attention"]},
     "layer_types contains 'linear_attention'"),
    ({"model_type": "llama4_text", "attention_chunk_size": 8192}, "attention_chunk_size"),
    ({"model_type": "my_new_moe", "num_experts_per_group": 4}, "num_experts_per_group"),
    ({"model_type": "deepseek_v3", "kv_lora_rank": 512, "qk_rope_head_dim": 64,
      "qk_nope_head_dim": 128}, "v_head_dim"),
])
def test_unmodellable_configs_are_refused_in_one_line(tmp_path, cfg, field):
    base = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
            "num_hidden_layers": 2, "vocab_size": 100}
    p = _write(tmp_path, {**base, **cfg})
    with pytest.raises(ValueError) as ei:
        load_hf_config(p)
    msg = str(ei.value)
    assert str(p) in msg and field in msg and "\n" not in msg


def test_unknown_model_type_without_cost_fields_loads(tmp_path):
    """A new dense model type whose fields are all ones servesim reads is costed Llama-style."""
    p = _write(tmp_path, {"model_type": "newdense", "hidden_size": 256, "intermediate_size": 512,
                          "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100,
                          "rms_norm_eps": 1e-6, "router_aux_loss_coef": 0.0})
    m = load_hf_config(p)
    assert m.num_params() == 2 * (256 * 12 * 64 + 256 * 256 + 3 * 256 * 512 + 512) + 2 * 100 * 256 + 256


def test_catalog_entries_have_sources_and_hf_ids():
    for name in ("qwen3-32b", "qwen3-30b-a3b", "qwen3-30b-a3b-instruct-2507", "deepseek-v3",
                 "qwen3-8b"):
        m = CATALOG[name]
        assert m.source and m.hf_id and get_model(m.hf_id) is m
    assert get_model("deepseek-ai/DeepSeek-R1") is CATALOG["deepseek-v3"]
