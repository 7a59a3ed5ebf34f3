"""Reading a Hugging Face ``config.json`` into a :class:`~simulator.catalog.model_spec.ModelSpec`,
one function per architecture family (MoE experts, MLA attention, sliding windows).

What is modelled
----------------
Decoder-only transformers with

- **GQA/MHA attention** (``attention_kind == "gqa"``): Llama, Mistral, Qwen2/2.5/3 (QKV bias for
  the Qwen2 family, per-head q/k RMSNorm for Qwen3), PhiMoE.
- **MLA attention** (``attention_kind == "mla"``; DeepSeek-V2/V3): queries through a low-rank
  ``q_lora_rank`` bottleneck (or a plain projection when it is null), keys/values through a
  shared ``kv_lora_rank`` latent plus one ``qk_rope_head_dim`` rotary key per token.
- **Dense or MoE MLPs**: routed experts of width ``moe_intermediate_size`` (Mixtral: its
  ``intermediate_size``), ``num_experts_per_tok`` of them per token, optional shared experts
  (DeepSeek ``n_shared_experts``, Qwen2-MoE ``shared_expert_intermediate_size`` + its sigmoid
  gate) and dense layers among the MoE ones (DeepSeek ``first_k_dense_replace`` /
  ``moe_layer_freq``; Qwen-MoE ``decoder_sparse_step`` / ``mlp_only_layers``).
- **Sliding-window attention**: which layers slide and the window (Mistral ``sliding_window``
  on every layer; Qwen2/3 ``use_sliding_window`` + ``max_window_layers``; explicit
  ``layer_types`` lists).

Ignored on purpose (no effect on cost): ``norm_topk_prob`` (renormalises the top-k routing
weights: same GEMMs), ``scoring_func``, ``routed_scaling_factor``, ``n_group``/``topk_group``
(which experts are chosen, not how many), ``rope_scaling`` (changes rotary angles only; its
cos/sin cache size follows ``max_position_embeddings``), dropout and initialiser settings.

Refused with one line naming the file and the field (never approximated): encoder-decoder
models (``is_encoder_decoder``), cross-attention (``cross_attention_layers``), linear
attention / state-space hybrids (``layers_block_type``, ``linear_attn_config``,
``full_attention_interval``, ``mamba_*`` / ``ssm_*`` fields, non-attention ``layer_types``
entries), chunked local attention (``attention_chunk_size``), and a ``model_type`` servesim
does not know that carries a field changing the cost model.

"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from simulator.base.input_limits import InputLimitError, load_json, short_repr
from simulator.base.resources import not_text_reason
from simulator.catalog.model_spec import ModelSpec

# ---------------------------------------------------------------------------- HF configs
#: model types whose every cost-relevant field servesim reads
KNOWN_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
    "deepseek_v2", "deepseek_v3", "phimoe"})
_QWEN_FAMILY = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
_ENCODER_DECODER_TYPES = frozenset({
    "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper", "led", "prophetnet",
    "blenderbot", "m2m_100", "nllb_moe", "switch_transformers", "longt5", "fsmt"})
_HYBRID_TYPES = frozenset({
    "mamba", "mamba2", "jamba", "zamba", "zamba2", "falcon_h1", "falcon_mamba", "bamba",
    "nemotron_h", "granitemoehybrid", "qwen3_next", "plamo2", "lfm2", "minimax_text_01",
    "minimax_m1", "rwkv", "rwkv6", "recurrent_gemma", "mllama"})
_HYBRID_FIELDS = ("layers_block_type", "linear_attn_config", "full_attention_interval",
                  "attn_layer_indices", "attn_layer_period", "hybrid_override_pattern",
                  "layer_block_types", "block_types")
_HYBRID_PREFIXES = ("mamba_", "ssm_", "linear_", "conv_kernel", "time_step_")
#: fields that change the cost of an unknown model type (matched as words of the key)
_COST_WORDS = re.compile(r"(expert|moe|lora_rank|nextn|window|sliding|local|chunk|mamba|ssm|"
                         r"linear|conv|sparse|shared|rope_head|nope|cross|encoder|layer_types|"
                         r"block_type|dense_replace|kv_lora|q_lora|mla|indexer|topk|num_groups)")
_READ_FIELDS = frozenset({
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "max_position_embeddings", "num_local_experts",
    "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
    "n_shared_experts", "shared_expert_intermediate_size", "first_k_dense_replace",
    "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "sliding_window",
    "use_sliding_window", "max_window_layers", "layer_types", "tie_word_embeddings",
    "attention_bias", "mlp_bias", "lm_head_bias", "kv_lora_rank", "q_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "topk_method", "partial_rotary_factor",
    "model_type", "_name_or_path", "text_config", "is_encoder_decoder"})
#: routing / training fields of MoE configs that do not change the cost (docstring)
_COST_NEUTRAL = frozenset({
    "norm_topk_prob", "router_aux_loss_coef", "output_router_logits", "router_jitter_noise",
    "input_jitter_noise", "scoring_func", "routed_scaling_factor", "n_group", "topk_group",
    "aux_loss_alpha", "seq_aux", "expert_dropout", "moe_router_dtype"})


def _refuse(path: Path, field_name: str, why: str) -> ValueError:
    return ValueError(f"{path}: {field_name}: {why}; servesim models decoder-only transformers "
                      "with GQA or MLA attention and dense or MoE MLPs")


def _check_modellable(cfg: dict, path: Path) -> None:
    """Refuse configs servesim cannot cost (one line naming the field)."""
    mt = str(cfg.get("model_type") or "")
    if cfg.get("is_encoder_decoder"):
        raise _refuse(path, "is_encoder_decoder=true",
                      "encoder-decoder models (decoder cross-attention to an encoder) are not modelled")
    if mt in _ENCODER_DECODER_TYPES:
        raise _refuse(path, f"model_type={mt!r}", "encoder-decoder models are not modelled")
    if "cross_attention_layers" in cfg:
        raise _refuse(path, "cross_attention_layers",
                      "cross-attention layers (to image/encoder states) are not modelled")
    if cfg.get("attention_chunk_size"):
        raise _refuse(path, "attention_chunk_size",
                      "chunked local attention (Llama-4 style) is not modelled")
    for f in _HYBRID_FIELDS:
        if f in cfg:
            raise _refuse(path, f, "linear-attention / state-space hybrid layers are not modelled")
    for k in cfg:
        if k.startswith(_HYBRID_PREFIXES) and cfg.get(k) is not None:
            raise _refuse(path, k, "linear-attention / state-space (Mamba) layers are not modelled")
    if mt in _HYBRID_TYPES:
        raise _refuse(path, f"model_type={mt!r}",
                      "linear-attention / state-space hybrids and cross-attention models are not modelled")
    lt = cfg.get("layer_types")
    if lt is not None:
        bad = sorted({str(t) for t in lt} - {"full_attention", "sliding_attention"})
        if bad:
            raise _refuse(path, f"layer_types contains {bad[0]!r}",
                          "only full and sliding-window attention layers are modelled")
    if mt and mt not in KNOWN_MODEL_TYPES:
        for k in cfg:
            if (k in _READ_FIELDS or k in _COST_NEUTRAL or cfg.get(k) in (None, False, 0, [], {})):
                continue
            if _COST_WORDS.search(k):
                raise ValueError(
                    f"{path}: model_type {mt!r} is not one servesim knows "
                    f"({', '.join(sorted(KNOWN_MODEL_TYPES))}) "
                    f"and its field {k!r} changes the cost in a way servesim does not read; "
                    "refusing rather than approximating")


#: the largest magnitude of an integer field of a config (int32, as engines store sizes)
MAX_CONFIG_INT = 2**31 - 1
#: the most layers a config may declare (per-layer lists are built from the count)
MAX_CONFIG_LAYERS = 100_000


def _int_field(cfg: dict, key: str, default=None):
    v = cfg.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or int(v) != v:
        raise ValueError(f"{key}={short_repr(v)} is not an integer")
    top = MAX_CONFIG_LAYERS if key == "num_hidden_layers" else MAX_CONFIG_INT
    if abs(v) > top:
        raise ValueError(f"{key}={short_repr(v)} is out of range (at most {top:,} in "
                         "magnitude)")
    return int(v)


def _req_int(cfg: dict, key: str) -> int:
    """A required integer field (``KeyError`` when absent; text such as ``"4096"`` is refused,
    as :func:`_int_field` does)."""
    if cfg.get(key) is None:
        raise KeyError(key)
    return _int_field(cfg, key)


def _first_int(cfg: dict, *keys: str, default: int = 0) -> int:
    """The first of ``keys`` with a truthy value, as an integer (checked), else ``default``."""
    for k in keys:
        if cfg.get(k):
            return _int_field(cfg, k)
    return default


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json``.

    Reads the transformer shape (``num_hidden_layers``, ``hidden_size``,
    ``num_attention_heads``, ``num_key_value_heads`` (default: attention heads), ``head_dim``
    (default hidden/heads), ``intermediate_size``, ``vocab_size``, ``max_position_embeddings``,
    ``tie_word_embeddings``, ``attention_bias``), MoE fields (``num_local_experts`` /
    ``num_experts`` / ``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
    ``n_shared_experts``, ``shared_expert_intermediate_size``, ``first_k_dense_replace``,
    ``moe_layer_freq``, ``decoder_sparse_step``, ``mlp_only_layers``, ``topk_method``), MLA
    fields (``kv_lora_rank``, ``q_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``,
    ``v_head_dim``) and sliding-window fields (``sliding_window``, ``use_sliding_window``,
    ``max_window_layers``, ``layer_types``). A nested ``text_config`` (multimodal wrappers) is
    read when the top level has no ``num_hidden_layers``.

    Raises
    ------
    ValueError
        If the file is not valid JSON, lacks a required field, has a bad value (named in the
        message), or describes a model servesim cannot cost (see the module docstring).
    """
    path = Path(path)
    try:
        cfg = load_json(path.read_text(encoding="utf-8-sig"))
    except InputLimitError as e:  # nesting, an integer of too many digits
        raise ValueError(e.at(str(path))) from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: {not_text_reason(e)}; a Hugging Face config.json is JSON "
                         "text") from None
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read Hugging Face config: {e}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: a Hugging Face config.json must hold a JSON object")  # noqa: TRY004
    if isinstance(cfg.get("text_config"), dict) and "num_hidden_layers" not in cfg:
        cfg = {**cfg, **cfg["text_config"]}
    _check_modellable(cfg, path)
    try:
        spec = _spec_from_config(cfg, path, name)
    except KeyError as e:
        raise ValueError(f"{path}: Hugging Face config lacks required field {e.args[0]!r}") from None
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"{path}: bad value in Hugging Face config: {e}") from None
    for f in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
              "intermediate_size", "vocab_size", "max_position_embeddings"):
        if getattr(spec, f) < 1:
            raise ValueError(f"{path}: Hugging Face config has {f}={getattr(spec, f)}; "
                             "it must be a positive integer")
    if spec.attention_kind == "gqa" and spec.num_attention_heads % spec.num_kv_heads:
        raise ValueError(f"{path}: num_attention_heads ({spec.num_attention_heads}) is not a "
                         f"multiple of num_key_value_heads ({spec.num_kv_heads})")
    return spec


def _moe_fields(cfg: dict, layers: int, inter: int) -> dict:
    """Routed and shared experts and the dense layers among the MoE ones (Mixtral, PhiMoE:
    every layer; DeepSeek-V2/V3 ``first_k_dense_replace`` / ``moe_layer_freq``; Qwen2/3-MoE
    ``decoder_sparse_step`` / ``mlp_only_layers``, as vLLM's ``qwen3_moe.py`` reads them).
    The keys are :class:`ModelSpec` fields; a config whose every layer is dense gives a dense
    model."""
    experts = _first_int(cfg, "num_local_experts", "num_experts", "n_routed_experts")
    topk = _first_int(cfg, "num_experts_per_tok")
    if experts and not topk:
        topk = 2  # transformers' MixtralConfig / Qwen2MoeConfig default num_experts_per_tok
    if topk > max(experts, 0) and experts:
        raise ValueError(f"num_experts_per_tok={topk} exceeds the {experts} experts")
    moe_inter = _int_field(cfg, "moe_intermediate_size")
    expert_inter = moe_inter if (experts and moe_inter) else inter
    dense_inter = inter if (experts and moe_inter) else None
    dense_layers: tuple[int, ...] = ()
    n_shared, shared_inter, shared_gate = 0, 0, False
    if experts:
        if "first_k_dense_replace" in cfg or "moe_layer_freq" in cfg:  # DeepSeek-V2/V3
            k = _int_field(cfg, "first_k_dense_replace", 0) or 0
            freq = _int_field(cfg, "moe_layer_freq", 1) or 1
            dense_layers = tuple(i for i in range(layers) if not (i >= k and i % freq == 0))
        else:  # Qwen2/3-MoE (vLLM qwen3_moe.py: MoE iff not mlp_only and (i+1) % step == 0)
            step = _int_field(cfg, "decoder_sparse_step", 1) or 1
            only = {int(i) for i in (cfg.get("mlp_only_layers") or [])}
            dense_layers = tuple(i for i in range(layers)
                                 if i in only or (i + 1) % step != 0)
        if len(dense_layers) == layers:
            experts, topk, expert_inter, dense_inter, dense_layers = 0, 0, inter, None, ()
        n_sh = _int_field(cfg, "n_shared_experts", 0) or 0
        sh_size = _int_field(cfg, "shared_expert_intermediate_size", 0) or 0
        if n_sh:
            n_shared, shared_inter = n_sh, n_sh * expert_inter
        elif sh_size:
            n_shared, shared_inter, shared_gate = 1, sh_size, True
    return {"num_experts": experts, "experts_per_token": topk,
            "intermediate_size": int(expert_inter), "dense_intermediate_size": dense_inter,
            "dense_layer_indices": dense_layers, "num_shared_experts": n_shared,
            "shared_expert_intermediate_size": shared_inter, "shared_expert_gate": shared_gate,
            "moe_router_bias": bool(experts) and cfg.get("topk_method") == "noaux_tc"}


def _attention_fields(cfg: dict, heads: int, hidden: int) -> dict:
    """Head shape of GQA/MHA attention, or DeepSeek's MLA (a ``kv_lora_rank`` latent plus a
    ``qk_rope_head_dim`` rotary key; query/key head = nope + rope). The keys are
    :class:`ModelSpec` fields."""
    kv_lora = _int_field(cfg, "kv_lora_rank")
    if not kv_lora:
        head_dim = _first_int(cfg, "head_dim", default=hidden // heads)
        return {"head_dim": head_dim,
                "num_kv_heads": _first_int(cfg, "num_key_value_heads", default=heads)}
    try:
        rope, nope, v_dim = (_req_int(cfg, "qk_rope_head_dim"),
                             _req_int(cfg, "qk_nope_head_dim"), _req_int(cfg, "v_head_dim"))
    except KeyError as e:
        raise KeyError(f"{e.args[0]} (an MLA config with kv_lora_rank needs it)") from None
    kv_heads = _first_int(cfg, "num_key_value_heads", default=heads)
    return {"head_dim": nope + rope, "num_kv_heads": kv_heads, "attention_kind": "mla",
            "kv_lora_rank": kv_lora, "q_lora_rank": _int_field(cfg, "q_lora_rank"),
            "qk_rope_head_dim": rope, "qk_nope_head_dim": nope, "v_head_dim": v_dim}


def _sliding_window_fields(cfg: dict, mt: str, layers: int) -> dict:
    """Which layers slide and the window, with Hugging Face semantics (vLLM reads the same
    fields): Mistral ``sliding_window`` on every layer; Qwen2/3 only with
    ``use_sliding_window``, on the layers from ``max_window_layers``; explicit
    ``layer_types``. ``sliding_window_layer_indices`` is None when every layer slides."""
    window = cfg.get("sliding_window") or None
    window_layers: tuple[int, ...] | None = None
    if window is not None:
        window = _int_field(cfg, "sliding_window")
        if window < 1:
            raise ValueError(f"sliding_window={window} must be a positive integer")
    lt = cfg.get("layer_types")
    if mt in _QWEN_FAMILY and not cfg.get("use_sliding_window", False):
        window = None
    elif window and lt is not None:
        if len(lt) != layers:
            raise ValueError(f"layer_types has {len(lt)} entries for {layers} layers")
        window_layers = tuple(i for i, t in enumerate(lt) if t == "sliding_attention")
    elif window and mt in _QWEN_FAMILY:
        mwl = _int_field(cfg, "max_window_layers", layers)
        window_layers = tuple(range(min(mwl, layers), layers))
    if window and window_layers == ():
        window, window_layers = None, None
    if window_layers is not None and len(window_layers) == layers:
        window_layers = None
    return {"sliding_window": window, "sliding_window_layer_indices": window_layers}


def _spec_from_config(cfg: dict, path: Path, name: str | None) -> ModelSpec:
    mt = str(cfg.get("model_type") or "")
    heads = _req_int(cfg, "num_attention_heads")
    if heads < 1:
        raise ValueError(f"num_attention_heads={heads} must be a positive integer")
    hidden = _req_int(cfg, "hidden_size")
    layers = _req_int(cfg, "num_hidden_layers")
    inter = _int_field(cfg, "intermediate_size")
    if inter is None:
        raise KeyError("intermediate_size")
    moe = _moe_fields(cfg, layers, inter)
    attention = _attention_fields(cfg, heads, hidden)
    window = _sliding_window_fields(cfg, mt, layers)
    attn_bias = bool(cfg.get("attention_bias", False))
    qwen2 = mt.startswith("qwen2")
    return ModelSpec(
        name=name or str(cfg.get("_name_or_path")
                         or (path.parent.name if path.name == "config.json" else path.stem)
                         or path.stem).lower(),
        hf_id=cfg.get("_name_or_path"),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        vocab_size=_req_int(cfg, "vocab_size"),
        max_position_embeddings=_first_int(cfg, "max_position_embeddings", default=4096),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=attn_bias or qwen2,
        o_proj_bias=attn_bias and not qwen2,
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        lm_head_bias=bool(cfg.get("lm_head_bias", False)),
        norm_bias=mt == "phimoe",  # PhiMoE uses LayerNorm (weight and bias)
        qk_norm=mt in ("qwen3", "qwen3_moe"),
        model_type=mt,
        partial_rotary_factor=float(cfg.get("partial_rotary_factor") or 1.0),
        source=f"Hugging Face config.json at {path}",
        **attention, **moe, **window,
    )


__all__ = ["KNOWN_MODEL_TYPES", "load_hf_config"]
