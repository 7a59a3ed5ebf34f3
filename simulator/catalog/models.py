"""Model catalog: the architecture figures the performance and memory models need.

Every catalog entry keeps the source it was taken from (Hugging Face ``config.json`` files,
as compiled in ``shared/reference/facts.yaml`` or recorded next to the ground-truth runs).
Models are named by lowercase ids (``llama-3.1-8b``) and may also be named by their Hugging
Face id (``meta-llama/Llama-3.1-8B``, ``Qwen/Qwen3-32B``) or by a path to a Hugging Face
``config.json`` (or a folder holding one).

The architecture record and its formulas (parameters, KV bytes per token) are
:mod:`simulator.catalog.model_spec`; reading a Hugging Face ``config.json`` (what is modelled, what
is refused) is :mod:`simulator.catalog.model_config`. Both are re-exported here.
"""
from __future__ import annotations

from pathlib import Path

from simulator.base.resources import not_a_file_reason, path_problem
from simulator.catalog.model_config import KNOWN_MODEL_TYPES, load_hf_config
from simulator.catalog.model_spec import (
    ATTENTION_KINDS,
    DTYPE_BYTES,
    ModelSpec,
    _dtype_bytes,
    _pad_vocab,
)

# ---------------------------------------------------------------------------- catalog
_HF = "Hugging Face config.json as compiled in shared/reference/facts.yaml: "
_GT = ("Hugging Face config.json recorded with the vLLM ground-truth runs "
       "(shared/reference/groundtruth/llmservingsim/configs/model/")
_QWEN3_MOE = {  # Qwen3-30B-A3B: identical in the base and Instruct-2507 configs
    "num_experts": 128, "experts_per_token": 8, "model_type": "qwen3_moe", "dense_intermediate_size": 6144,
    "qk_norm": True}

CATALOG: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 128, 11008, 32000, 4096,
              aliases=("meta-llama/Llama-2-7b-chat-hf",), model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-2-7b-hf config.json"),
    ModelSpec("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 128, 13824, 32000, 4096,
              aliases=("meta-llama/Llama-2-13b-chat-hf",), model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-2-13b-hf config.json"),
    ModelSpec("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 128, 28672, 32000, 4096,
              aliases=("meta-llama/Llama-2-70b-chat-hf",), model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-2-70b-hf config.json"),
    ModelSpec("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8192,
              aliases=("meta-llama/Meta-Llama-3-8B-Instruct",), model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3-8B config.json"),
    ModelSpec("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, 8192,
              aliases=("meta-llama/Meta-Llama-3-70B-Instruct",), model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3-70B config.json"),
    ModelSpec("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 131072,
              model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-3.1-8B config.json",
              aliases=("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct",
                       "meta-llama/Meta-Llama-3.1-8B-Instruct")),
    ModelSpec("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, 131072,
              model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-3.1-70B-Instruct config.json",
              aliases=("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B",
                       "meta-llama/Meta-Llama-3.1-70B-Instruct",
                       # Llama 3.3 70B Instruct: the same config.json (layers, heads, rope)
                       "meta-llama/Llama-3.3-70B-Instruct")),
    ModelSpec("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256,
              131072, model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3.1-405B-Instruct config.json (8 KV heads)"),
    ModelSpec("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 131072,
              tie_word_embeddings=True, model_type="llama",
              aliases=("meta-llama/Llama-3.2-1B-Instruct",),
              source=_HF + "huggingface.co/meta-llama/Llama-3.2-1B config.json"),
    ModelSpec("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", 22, 2048, 32,
              4, 64, 5632, 32000, 2048, model_type="llama",
              source=_HF + "huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json"),
    ModelSpec("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768,
              sliding_window=4096, model_type="mistral",
              # v0.1 Instruct has the base config.json (v0.2 / v0.3 do not: no sliding window,
              # rope 1e6, v0.3 a 32768 vocab; not aliased)
              aliases=("mistral-7b-v0.1", "mistralai/Mistral-7B-Instruct-v0.1"),
              source=_HF + "huggingface.co/mistralai/Mistral-7B-v0.1 config.json "
                     "(sliding_window 4096 on every layer)"),
    ModelSpec("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768,
              num_experts=8, experts_per_token=2, model_type="mixtral",
              aliases=("mixtral-8x7b-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
              source=_HF + "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json "
                     "(intermediate_size 14336 per expert); arXiv 2401.04088"),
    ModelSpec("servesim-tiny-llama", None, 4, 256, 4, 2, 64, 768, 4096, 4096,
              aliases=("tiny", "servesim-tiny"), model_type="llama",
              source="servesim's own random-weight validation model (calibration/tiny_model.py); "
                     "the model `servesim calibrate`/`validate` run by default"),
    ModelSpec("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, 131072,
              qkv_bias=True, model_type="qwen2",
              # Instruct: the same layers, heads and vocab; its config.json states
              # max_position_embeddings 32768 (a replay takes max_model_len from the record)
              aliases=("Qwen/Qwen2.5-7B-Instruct",),
              source=_HF + "huggingface.co/Qwen/Qwen2.5-7B config.json"),
    ModelSpec("qwen2.5-72b", "Qwen/Qwen2.5-72B", 80, 8192, 64, 8, 128, 29568, 152064, 131072,
              qkv_bias=True, aliases=("Qwen/Qwen2.5-72B-Instruct",), model_type="qwen2",
              source=_HF + "huggingface.co/Qwen/Qwen2.5-72B config.json"),
    ModelSpec("qwen3-8b", "Qwen/Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, 40960,
              qk_norm=True, model_type="qwen3",
              source="huggingface.co/Qwen/Qwen3-8B config.json (36 layers, 32/8 heads, head_dim "
                     "128, intermediate 12288, vocab 151936, max_position_embeddings 40960, untied); "
                     "model card: 8.2 B parameters"),
    ModelSpec("qwen3-32b", "Qwen/Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, 40960,
              qk_norm=True, model_type="qwen3",
              source=_GT + "Qwen/Qwen3-32B.json); model card huggingface.co/Qwen/Qwen3-32B: "
                     "32.8 B parameters"),
    ModelSpec("qwen3-14b", "Qwen/Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, 40960,
              qk_norm=True, model_type="qwen3",
              source="huggingface.co/Qwen/Qwen3-14B config.json (hidden 5120, intermediate 17408, "
                     "40 layers, 40 heads, 8 KV heads, head_dim 128, vocab 151936, "
                     "max_position_embeddings 40960, untied embeddings); model card: 14.8 B "
                     "parameters"),
    ModelSpec("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 94, 4096, 64, 4, 128, 1536, 151936,
              40960, **{**_QWEN3_MOE, "dense_intermediate_size": 12288},
              source="huggingface.co/Qwen/Qwen3-235B-A22B config.json (94 layers, hidden 4096, "
                     "64 heads, 4 KV heads, head_dim 128, moe_intermediate_size 1536, 128 "
                     "experts, top-8, decoder_sparse_step 1, mlp_only_layers [], vocab 151936, "
                     "max_position_embeddings 40960; the Instruct-2507 config differs only in "
                     "262144 positions); model card: 235 B total, 22 B activated"),
    ModelSpec("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 48, 2048, 32, 4, 128, 768, 151936, 40960,
              **_QWEN3_MOE,
              source="huggingface.co/Qwen/Qwen3-30B-A3B config.json (max_position_embeddings 40960); "
                     "architecture as " + _GT + "Qwen/Qwen3-30B-A3B-Instruct-2507.json: "
                     "moe_intermediate_size 768, 128 experts, top-8, decoder_sparse_step 1, "
                     "mlp_only_layers []); model card: 30.5 B total, 3.3 B activated"),
    ModelSpec("qwen3-30b-a3b-instruct-2507", "Qwen/Qwen3-30B-A3B-Instruct-2507", 48, 2048, 32, 4,
              128, 768, 151936, 262144, **_QWEN3_MOE,
              source=_GT + "Qwen/Qwen3-30B-A3B-Instruct-2507.json; max_position_embeddings 262144)"),
    ModelSpec("deepseek-v3", "deepseek-ai/DeepSeek-V3", 61, 7168, 128, 128, 192, 2048, 129280, 163840,
              num_experts=256, experts_per_token=8, model_type="deepseek_v3",
              dense_intermediate_size=18432, dense_layer_indices=(0, 1, 2),
              num_shared_experts=1, shared_expert_intermediate_size=2048, moe_router_bias=True,
              attention_kind="mla", q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64,
              qk_nope_head_dim=128, v_head_dim=128,
              aliases=("deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3-Base",
                       "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528"),
              source=_HF + "deepseek-ai/DeepSeek-V3 config.json (MLA q_lora 1536, kv_lora 512, "
                     "rope 64, nope 128, v 128; 256 routed + 1 shared expert of 2048, top-8, "
                     "first_k_dense_replace 3, dense intermediate 18432, noaux_tc router); "
                     "arXiv 2412.19437: 671 B total, 37 B activated (MTP module not counted)"),
]}

_ALIASES: dict[str, str] = {}
for _m in CATALOG.values():
    for _a in (_m.name, _m.hf_id, *_m.aliases):
        if _a:
            _ALIASES[_a.lower()] = _m.name


def model_names() -> list[str]:
    """Sorted catalog ids."""
    return sorted(CATALOG)


def get_model(name_or_path: str) -> ModelSpec:
    """Look a model up by catalog id, Hugging Face id, or path to a ``config.json``.

    Raises
    ------
    ValueError
        If the name is neither in the catalog nor an existing config path (the message lists
        the catalog ids), or the config cannot be modelled (see :func:`load_hf_config`).
    """
    key = str(name_or_path).strip()
    if key.lower() in _ALIASES:
        return CATALOG[_ALIASES[key.lower()]]
    p = Path(key).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if p.is_file():
        return load_hf_config(p)
    if p.exists() or path_problem(p):  # a FIFO, a device, a link loop, a dangling link
        raise ValueError(f"model config file {str(p)!r}: "
                         f"{not_a_file_reason(p, 'model config file')}")
    if "/" in key and (key.lower().endswith(".json") or p.parent.exists() or key.startswith((".", "~"))):
        raise ValueError(f"model config file {str(p)!r} not found (give a Hugging Face "
                         "config.json, a folder holding one, or a catalog id: 'servesim "
                         "profiles' lists them)")
    raise ValueError(f"unknown model {key!r}; known: {', '.join(model_names())} "
                     "(or give a path to a Hugging Face config.json)")


__all__ = ["ATTENTION_KINDS", "CATALOG", "DTYPE_BYTES", "KNOWN_MODEL_TYPES", "ModelSpec",
           "_dtype_bytes", "_pad_vocab", "get_model", "load_hf_config", "model_names"]
