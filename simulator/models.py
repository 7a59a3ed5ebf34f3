"""Model catalog: the architecture figures the performance and memory models need.

Every catalog entry keeps the source it was taken from (Hugging Face ``config.json`` files,
as compiled in ``shared/reference/facts.yaml`` or recorded next to the ground-truth runs).
Models are named by lowercase ids (``llama-3.1-8b``) and may also be named by their Hugging
Face id (``meta-llama/Llama-3.1-8B``, ``Qwen/Qwen3-32B``) or by a path to a Hugging Face
``config.json`` (or a folder holding one).

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

Formulas (per layer unless stated; h hidden, H query heads, K KV heads, d head dim, V vocab)
----------------------------------------------------------------------------------------
- KV bytes per token, GQA = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
  (DESIGN.md glossary; Llama-3-70B bf16: 2 x 80 x 8 x 128 x 2 = 327,680 B). Per GPU of a TP
  group the KV heads are split, or replicated once TP exceeds them (vLLM:
  ``max(1, K // tp)`` heads per GPU).
- KV bytes per token, MLA = layers x (kv_lora_rank + qk_rope_head_dim) x bytes: vLLM's
  ``MLAAttentionSpec`` caches one latent "head" of that size and no separate V
  (vllm/v1/kv_cache_interface.py; DeepSeek-V3 bf16: 61 x 576 x 2 = 70,272 B, facts.yaml). It is
  replicated on every GPU of a TP group.
- Parameters, GQA attention = h x (H + 2K) x d + H x d x h (+ (H + 2K) x d QKV bias, + h
  o-proj bias, + 2d q/k norms).
- Parameters, MLA attention = h x q_lora + q_lora (norm) + q_lora x H x (nope + rope)
  [or h x H x (nope + rope) without q_lora] + h x (kv_lora + rope) + kv_lora (norm)
  + kv_lora x H x (nope + v) + H x v x h.
- Parameters, MLP = 3 x h x I (gate, up, down) for a dense layer; E x 3 x h x I_e
  + h x E (router) [+ E score-correction bias, DeepSeek-V3 ``noaux_tc``] + 3 x h x I_shared
  [+ h shared-expert gate] for an MoE layer.
- Parameters, rest = 2h norms per layer (4h with LayerNorm biases) + V x h embeddings
  (+ V x h untied LM head, + V LM-head bias) + h final norm.
These reproduce the published totals: Llama-3.1-8B 8.03 B, Mixtral-8x7B 46.70 B / 12.88 B
active (facts.yaml), Qwen3-30B-A3B 30.53 B / 3.35 B active (model card: 30.5 B / 3.3 B),
Qwen3-32B 32.76 B (model card 32.8 B), DeepSeek-V3 671.03 B / 37.55 B active (technical report
arXiv 2412.19437: 671 B / 37 B).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "float16": 2, "bfloat16": 2, "fp8": 1, "int8": 1,
               "fp32": 4, "float32": 4}

ATTENTION_KINDS = ("gqa", "mla")


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a decoder-only transformer.

    Attributes
    ----------
    name : str
        Catalog id (lowercase).
    hf_id : str or None
        Hugging Face repository id.
    num_layers, hidden_size, num_attention_heads, num_kv_heads, head_dim : int
        Transformer shape (``num_kv_heads < num_attention_heads`` means GQA). For MLA models
        ``head_dim`` is the query/key head size (``qk_nope_head_dim + qk_rope_head_dim``) and
        ``num_kv_heads`` the nominal KV-head count of the config; the cache holds one latent
        per token instead (see :meth:`kv_bytes_per_token`).
    intermediate_size : int
        MLP inner width; for MoE models the width of one routed expert
        (``moe_intermediate_size``).
    vocab_size : int
        Vocabulary size (LM head width).
    max_position_embeddings : int
        Longest context the model supports (tokens).
    num_experts, experts_per_token : int
        Routed experts and how many each token uses (``num_experts == 0`` for dense models).
    tie_word_embeddings : bool
        Whether the LM head shares the embedding matrix.
    qkv_bias, o_proj_bias, mlp_bias, lm_head_bias, norm_bias : bool
        Bias vectors present (Qwen2: QKV only; Llama ``attention_bias``: QKV and o-proj;
        PhiMoE: attention, LM head and LayerNorm biases).
    qk_norm : bool
        Per-head RMSNorm on q and k (Qwen3).
    sliding_window : int or None
        Sliding-window attention span in tokens (None: every layer attends to the full
        context).
    sliding_window_layer_indices : tuple of int or None
        Layers that slide (None with a ``sliding_window``: every layer).
    source : str
        Where the figures come from.
    aliases : tuple of str
        Other names that resolve to this entry (Hugging Face ids of fine-tunes, ...).
    model_type : str
        The config's ``model_type`` (informative).
    dense_intermediate_size : int or None
        MLP width of the dense layers of an MoE model (HF ``intermediate_size`` when the config
        also has ``moe_intermediate_size``); None: ``intermediate_size``.
    dense_layer_indices : tuple of int
        Layers of an MoE model whose MLP is dense.
    num_shared_experts : int
        Shared experts every token runs through (DeepSeek ``n_shared_experts``; 1 for a
        Qwen2-MoE ``shared_expert_intermediate_size`` expert).
    shared_expert_intermediate_size : int
        Total inner width of the shared-expert MLP (DeepSeek: ``n_shared_experts x
        moe_intermediate_size``, vLLM fuses them into one MLP).
    shared_expert_gate : bool
        A ``h x 1`` sigmoid gate on the shared expert (Qwen2-MoE).
    moe_router_bias : bool
        A per-expert score-correction bias in the router (DeepSeek-V3 ``noaux_tc``).
    attention_kind : {'gqa', 'mla'}
        Attention family.
    q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim : int or None
        MLA shape (None / 0 for GQA models; ``q_lora_rank`` None means a plain q projection).
    partial_rotary_factor : float
        Fraction of the (query/key) head that is rotary (1.0 unless the config says).
    """

    name: str
    hf_id: str | None
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    num_experts: int = 0
    experts_per_token: int = 0
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    sliding_window: int | None = None
    source: str = ""
    aliases: tuple[str, ...] = field(default=())
    model_type: str = ""
    dense_intermediate_size: int | None = None
    dense_layer_indices: tuple[int, ...] = ()
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    shared_expert_gate: bool = False
    moe_router_bias: bool = False
    attention_kind: str = "gqa"
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window_layer_indices: tuple[int, ...] | None = None
    o_proj_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    norm_bias: bool = False
    qk_norm: bool = False
    partial_rotary_factor: float = 1.0

    def __post_init__(self):
        if self.attention_kind not in ATTENTION_KINDS:
            raise ValueError(f"model {self.name}: attention_kind {self.attention_kind!r} is not "
                             f"one of {', '.join(ATTENTION_KINDS)}")

    # ------------------------------------------------------------------ layer structure
    @property
    def num_experts_eff(self) -> int:
        """Routed experts, at least 1 (a dense MLP counts as one expert)."""
        return max(1, self.num_experts)

    @property
    def is_moe(self) -> bool:
        """Whether any layer routes tokens to experts."""
        return self.num_experts > 0

    @property
    def dense_mlp_intermediate_size(self) -> int:
        """Inner width of a dense MLP layer (for a dense model: ``intermediate_size``)."""
        if self.is_moe and self.dense_intermediate_size:
            return self.dense_intermediate_size
        return self.intermediate_size

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense MLP (all of them for a dense model)."""
        if not self.is_moe:
            return self.num_layers
        return len(self.dense_layer_indices)

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP routes tokens to experts (0 for a dense model)."""
        return self.num_layers - self.num_dense_layers

    @property
    def moe_layer_indices(self) -> tuple[int, ...]:
        """Indices of the MoE layers, ascending."""
        if not self.is_moe:
            return ()
        dense = set(self.dense_layer_indices)
        return tuple(i for i in range(self.num_layers) if i not in dense)

    @property
    def sliding_window_layers(self) -> tuple[int, ...]:
        """Indices of the layers whose attention is capped at ``sliding_window`` tokens."""
        if not self.sliding_window:
            return ()
        if self.sliding_window_layer_indices is None:
            return tuple(range(self.num_layers))
        return tuple(self.sliding_window_layer_indices)

    def layer_attention_windows(self) -> tuple[int | None, ...]:
        """Per layer, the attention window in tokens (None: the full context)."""
        sl = set(self.sliding_window_layers)
        return tuple(self.sliding_window if i in sl else None for i in range(self.num_layers))

    def attention_layer_groups(self) -> list[tuple[int | None, int]]:
        """``(window, number of layers)`` pairs: full-attention layers (window None) first.

        The performance model costs attention once per group with the context capped at the
        window: ``sum(n x attention(min(context, window)))``.
        """
        n_sl = len(self.sliding_window_layers)
        out: list[tuple[int | None, int]] = []
        if self.num_layers - n_sl:
            out.append((None, self.num_layers - n_sl))
        if n_sl:
            out.append((self.sliding_window, n_sl))
        return out

    def attended_context(self, context_tokens: int, layer: int) -> int:
        """Tokens layer ``layer`` attends to when the sequence holds ``context_tokens``.

        Raises
        ------
        IndexError
            If ``layer`` is not in ``range(num_layers)``.
        """
        if not 0 <= layer < self.num_layers:
            raise IndexError(f"layer {layer} out of range for {self.num_layers} layers")
        w = self.layer_attention_windows()[layer]
        return int(context_tokens) if w is None else min(int(context_tokens), w)

    def total_attended_context(self, context_tokens: int) -> int:
        """Sum over layers of the tokens attended to (layer-tokens) at ``context_tokens``."""
        return sum(n * (int(context_tokens) if w is None else min(int(context_tokens), w))
                   for w, n in self.attention_layer_groups())

    # ------------------------------------------------------------------ shapes per GPU
    def kv_heads_per_gpu(self, tensor_parallel_size: int = 1) -> int:
        """KV heads each GPU of a TP group holds: ``max(1, K // tp)`` (vLLM replicates KV
        heads once TP exceeds them; ``vllm/model_executor/models/llama.py``)."""
        return max(1, self.num_kv_heads // int(tensor_parallel_size))

    def attention_heads(self, tp: int = 1) -> tuple[int, int, int]:
        """``(query heads, KV heads, head dim)`` one GPU of a TP group attends with.

        GQA: ``(H / tp, max(1, K // tp), head_dim)``. MLA (vLLM's absorbed decode path): every
        query head attends over the single latent KV "head" of size ``kv_lora_rank +
        qk_rope_head_dim`` (values are its first ``kv_lora_rank`` entries), so
        ``(H / tp, 1, kv_lora_rank + qk_rope_head_dim)``; see :meth:`mla_prefill_heads` for
        the prefill path.
        """
        q = self.num_attention_heads // int(tp)
        if self.attention_kind == "mla":
            return (q, 1, self.kv_lora_rank + self.qk_rope_head_dim)
        return (q, self.kv_heads_per_gpu(tp), self.head_dim)

    def mla_prefill_heads(self, tp: int = 1) -> tuple[int, int, int]:
        """MLA prefill (vLLM's ``forward_mha``: latents expanded by ``kv_b_proj``): ``(heads
        per GPU, q/k head dim = nope + rope, v head dim)``.

        Raises
        ------
        ValueError
            If the model does not use MLA.
        """
        if self.attention_kind != "mla":
            raise ValueError(f"model {self.name} does not use MLA attention")
        return (self.num_attention_heads // int(tp), self.qk_nope_head_dim + self.qk_rope_head_dim,
                self.v_head_dim)

    def dense_gemm_shapes(self, tp: int = 1) -> dict[str, tuple[int, int]]:
        """Per-layer GEMMs one GPU of a TP group runs, ``op -> (k, n)`` (rows = tokens).

        GQA: ``qkv_proj`` (h, (H/tp + 2 max(1, K//tp)) d) and ``o_proj`` (H/tp d, h). MLA
        (vLLM ``deepseek_v2.py``): ``fused_qkv_a_proj`` (h, q_lora + kv_lora + rope), replicated
        on every GPU, then ``q_b_proj`` (q_lora, H/tp (nope + rope)); without ``q_lora_rank``
        ``q_proj`` (h, H/tp (nope + rope)) and ``kv_a_proj_with_mqa`` (h, kv_lora + rope);
        ``kv_b_proj`` (kv_lora, H/tp (nope + v)) runs on the latents of prefill tokens (decode
        absorbs it into per-head products: ``mla_absorbed_bmm_shapes``); ``o_proj`` (H/tp v,
        h). Dense MLP (dense models, and the dense layers of MoE models): ``mlp_gate_up``
        (h, 2 I/tp) and ``mlp_down`` (I/tp, h). Whether the QKV GEMM adds a bias is
        ``qkv_bias`` (a memory-bound epilogue; negligible next to the GEMM).

        Raises
        ------
        ValueError
            If ``tp`` does not divide the attention heads.
        """
        tp = int(tp)
        if tp < 1 or self.num_attention_heads % tp:
            raise ValueError(f"tensor_parallel_size={tp} does not divide the "
                             f"{self.num_attention_heads} attention heads of {self.name}")
        h, hq = self.hidden_size, self.num_attention_heads // tp
        out: dict[str, tuple[int, int]] = {}
        if self.attention_kind == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            kv_a = self.kv_lora_rank + self.qk_rope_head_dim
            if self.q_lora_rank:
                out["fused_qkv_a_proj"] = (h, self.q_lora_rank + kv_a)
                out["q_b_proj"] = (self.q_lora_rank, hq * qk)
            else:
                out["q_proj"] = (h, hq * qk)
                out["kv_a_proj_with_mqa"] = (h, kv_a)
            out["kv_b_proj"] = (self.kv_lora_rank, hq * (self.qk_nope_head_dim + self.v_head_dim))
            out["o_proj"] = (hq * self.v_head_dim, h)
        else:
            d = self.head_dim
            out["qkv_proj"] = (h, (hq + 2 * self.kv_heads_per_gpu(tp)) * d)
            out["o_proj"] = (hq * d, h)
        if self.num_dense_layers:
            inter = self.dense_mlp_intermediate_size // tp
            out["mlp_gate_up"] = (h, 2 * inter)
            out["mlp_down"] = (inter, h)
        return out

    def mla_absorbed_bmm_shapes(self, tp: int = 1) -> dict[str, tuple[int, int, int]]:
        """MLA decode's per-head batched GEMMs, ``op -> (heads per GPU, k, n)``: ``q_nope x
        W_UK`` (nope -> kv_lora) before attention and ``latent x W_UV`` (kv_lora -> v) after
        (vLLM ``MLACommonImpl``; rows = decode tokens).

        Raises
        ------
        ValueError
            If the model does not use MLA.
        """
        if self.attention_kind != "mla":
            raise ValueError(f"model {self.name} does not use MLA attention")
        hq = self.num_attention_heads // int(tp)
        return {"mla_q_absorb": (hq, self.qk_nope_head_dim, self.kv_lora_rank),
                "mla_v_up": (hq, self.kv_lora_rank, self.v_head_dim)}

    def moe_shape(self, tp: int = 1, ep: int = 1) -> dict[str, int]:
        """Shape of one MoE layer on one GPU.

        vLLM ``FusedMoE``: without expert parallelism (``ep == 1``) every GPU holds all
        experts with the inner width split by TP; with expert parallelism (``ep > 1``,
        vLLM ``--enable-expert-parallel``: EP group = TP x DP ranks, expert TP = 1) each GPU
        holds ``ceil(E / ep)`` whole experts. Shared experts are a TP-split dense MLP.

        Returns
        -------
        dict
            ``hidden``, ``num_experts`` (global), ``experts_per_rank``, ``topk``,
            ``expert_intermediate_per_rank`` (inner width per expert on this GPU),
            ``shared_intermediate_per_rank`` (0 without shared experts), ``num_moe_layers``.
            Routed GEMMs per token: gate/up ``(hidden, 2 x expert_inter)`` and down
            ``(expert_inter, hidden)`` for each of ``topk`` experts.

        Raises
        ------
        ValueError
            If the model is dense, or ``tp``/``ep`` are not positive or do not split the
            experts' inner width.
        """
        if not self.is_moe:
            raise ValueError(f"model {self.name} is dense: it has no MoE layers")
        tp, ep = int(tp), int(ep)
        if tp < 1 or ep < 1:
            raise ValueError(f"tensor_parallel_size ({tp}) and expert parallel size ({ep}) "
                             "must be >= 1")
        if ep > self.num_experts:
            raise ValueError(f"expert parallel size {ep} exceeds the {self.num_experts} experts "
                             f"of {self.name}")
        if ep == 1 and self.intermediate_size % tp:
            raise ValueError(f"tensor_parallel_size={tp} does not divide the expert width "
                             f"{self.intermediate_size} of {self.name}")
        return {
            "hidden": self.hidden_size,
            "num_experts": self.num_experts,
            "experts_per_rank": -(-self.num_experts // ep) if ep > 1 else self.num_experts,
            "topk": self.experts_per_token,
            "expert_intermediate_per_rank": (self.intermediate_size if ep > 1
                                             else self.intermediate_size // tp),
            "shared_intermediate_per_rank": self.shared_expert_intermediate_size // tp,
            "num_moe_layers": self.num_moe_layers,
        }

    # ------------------------------------------------------------------ KV bytes
    def kv_bytes_per_token(self, kv_cache_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """KV-cache bytes one token occupies (all layers), per GPU of a TP group.

        GQA: ``2 x layers x max(1, K // tp) x head_dim x bytes`` (KV heads split across the
        TP group, replicated once TP exceeds them). MLA: ``layers x (kv_lora_rank +
        qk_rope_head_dim) x bytes`` on every GPU (the latent is not split by TP).

        Raises
        ------
        ValueError
            If ``kv_cache_dtype`` is unknown.
        """
        b = _dtype_bytes(kv_cache_dtype)
        if self.attention_kind == "mla":
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * b
        return 2 * self.num_layers * self.kv_heads_per_gpu(tensor_parallel_size) * self.head_dim * b

    # ------------------------------------------------------------------ parameter counts
    def _attn_params(self, tp: int = 1, per_gpu: bool = False) -> int:
        h = self.hidden_size
        hq = self.num_attention_heads // tp if per_gpu else self.num_attention_heads
        if self.attention_kind == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            kv_a = self.kv_lora_rank + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * hq * qk
            else:
                q = h * hq * qk
            kv = h * kv_a + self.kv_lora_rank + self.kv_lora_rank * hq * (
                self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + hq * self.v_head_dim * h + (h if self.o_proj_bias else 0)
        d = self.head_dim
        hk = self.kv_heads_per_gpu(tp) if per_gpu else self.num_kv_heads
        n = h * (hq + 2 * hk) * d + hq * d * h
        if self.qkv_bias:
            n += (hq + 2 * hk) * d
        if self.o_proj_bias:
            n += h
        if self.qk_norm:
            n += 2 * d
        return n

    def _dense_mlp_params(self, inter: int) -> int:
        h = self.hidden_size
        return 3 * h * inter + ((2 * inter + h) if self.mlp_bias else 0)

    def _moe_params(self, active: bool, tp: int = 1, ep: int = 1, per_gpu: bool = False) -> int:
        h, e = self.hidden_size, self.num_experts
        if per_gpu:
            experts = (-(-e // ep)) if ep > 1 else e
            inter = self.intermediate_size if ep > 1 else self.intermediate_size // tp
            shared = self.shared_expert_intermediate_size // tp
        else:
            experts = self.experts_per_token if active else e
            inter, shared = self.intermediate_size, self.shared_expert_intermediate_size
        n = experts * self._dense_mlp_params(inter) + h * e + (e if self.moe_router_bias else 0)
        if shared:
            n += self._dense_mlp_params(shared) + (h if self.shared_expert_gate else 0)
        return n

    def _norm_params(self) -> int:
        return 2 * self.hidden_size * (2 if self.norm_bias else 1)

    def _param_count(self, active: bool = False, tp: int = 1, ep: int = 1,
                     per_gpu: bool = False) -> int:
        h, v = self.hidden_size, self.vocab_size
        attn = self._attn_params(tp, per_gpu)
        dense_inter = self.dense_mlp_intermediate_size // (tp if per_gpu else 1)
        n = self.num_layers * (attn + self._norm_params())
        n += self.num_dense_layers * self._dense_mlp_params(dense_inter)
        if self.is_moe:
            n += self.num_moe_layers * self._moe_params(active, tp, ep, per_gpu)
        if per_gpu:  # vLLM pads the vocabulary to a multiple of 64 and splits it over TP
            v = _pad_vocab(v) // tp
        n += v * h * (1 if self.tie_word_embeddings else 2)
        if self.lm_head_bias:
            n += v
        return n + h * (2 if self.norm_bias else 1)

    def num_params(self) -> int:
        """Total parameter count (all experts; the main model, not MTP/draft modules)."""
        return self._param_count()

    def num_active_params(self) -> int:
        """Parameters touched per token (MoE: ``experts_per_token`` routed experts plus the
        shared experts and every dense layer)."""
        if not self.is_moe:
            return self.num_params()
        return self._param_count(active=True)

    def num_params_per_gpu(self, tp: int = 1, ep: int = 1) -> int:
        """Parameters one GPU holds under vLLM's sharding.

        Split by TP: query heads, KV heads (``max(1, K // tp)`` per GPU, replicated beyond),
        MLP and shared-expert widths, MLA ``q_b_proj``/``kv_b_proj``/``o_proj``, and the
        vocabulary padded to a multiple of 64 (vLLM ``DEFAULT_VOCAB_PADDING_SIZE``,
        ``vocab_parallel_embedding.py``). Replicated: norms, row-parallel biases, routers, MLA
        ``q_a``/``kv_a`` projections and their norms. Experts: all with width ``I / tp``
        (``ep == 1``) or ``ceil(E / ep)`` whole experts (``ep > 1``).

        Raises
        ------
        ValueError
            If ``tp`` does not divide the attention heads, or ``ep > 1`` for a dense model.
        """
        tp, ep = int(tp), int(ep)
        if tp < 1 or self.num_attention_heads % tp:
            raise ValueError(f"tensor_parallel_size={tp} does not divide the "
                             f"{self.num_attention_heads} attention heads of {self.name}")
        if ep > 1 and not self.is_moe:
            raise ValueError(f"expert parallel size {ep} given for the dense model {self.name}")
        return self._param_count(tp=tp, ep=ep, per_gpu=True)

    def weight_bytes(self, weight_dtype: str = "bf16") -> int:
        """Bytes of all weights in ``weight_dtype`` (whole model, not per GPU).

        Raises
        ------
        ValueError
            If ``weight_dtype`` is unknown.
        """
        return self.num_params() * _dtype_bytes(weight_dtype)

    def weight_bytes_per_gpu(self, weight_dtype: str = "bf16", tp: int = 1, ep: int = 1) -> int:
        """Bytes of the weights one GPU holds (:meth:`num_params_per_gpu` x bytes).

        Raises
        ------
        ValueError
            As :meth:`num_params_per_gpu`, or for an unknown ``weight_dtype``.
        """
        return self.num_params_per_gpu(tp, ep) * _dtype_bytes(weight_dtype)

    @property
    def rotary_dim(self) -> int:
        """Rotary dimensions per head (MLA: ``qk_rope_head_dim``)."""
        if self.attention_kind == "mla":
            return self.qk_rope_head_dim
        return int(self.head_dim * self.partial_rotary_factor)

    def rope_cache_bytes(self, dtype: str = "bf16") -> int:
        """Bytes of vLLM's rotary cos/sin cache: ``max_position_embeddings x rotary_dim``
        elements in the model dtype, one per model (``RotaryEmbeddingBase``,
        vllm/model_executor/layers/rotary_embedding/base.py; allocated while loading, so it
        counts in vLLM's "Model loading took" figure: Llama-3.1-8B 16,060,522,496 B weights +
        131,072 x 128 x 2 = 33,554,432 B = 14.9889 GiB, the figure vLLM logs).

        Raises
        ------
        ValueError
            If ``dtype`` is unknown.
        """
        return self.max_position_embeddings * self.rotary_dim * _dtype_bytes(dtype)


def _dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(sorted(DTYPE_BYTES))}") from None


def _pad_vocab(vocab_size: int, pad_to: int = 64) -> int:
    """vLLM ``pad_vocab_size``: round up to a multiple of ``pad_to`` (64 by default)."""
    return -(-int(vocab_size) // pad_to) * pad_to


# ---------------------------------------------------------------------------- catalog
_HF = "Hugging Face config.json as compiled in shared/reference/facts.yaml: "
_GT = ("Hugging Face config.json recorded with the vLLM ground-truth runs "
       "(shared/reference/groundtruth/llmservingsim/configs/model/")
_QWEN3_MOE = {  # Qwen3-30B-A3B: identical in the base and Instruct-2507 configs
    "num_experts": 128, "experts_per_token": 8, "model_type": "qwen3_moe", "dense_intermediate_size": 6144,
    "qk_norm": True}

CATALOG: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 128, 11008, 32000, 4096,
              model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-2-7b-hf config.json"),
    ModelSpec("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 128, 13824, 32000, 4096,
              model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-2-13b-hf config.json"),
    ModelSpec("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 128, 28672, 32000, 4096,
              model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-2-70b-hf config.json"),
    ModelSpec("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8192,
              model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3-8B config.json"),
    ModelSpec("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, 8192,
              model_type="llama",
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
                       "meta-llama/Meta-Llama-3.1-70B-Instruct")),
    ModelSpec("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256,
              131072, model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3.1-405B-Instruct config.json (8 KV heads)"),
    ModelSpec("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 131072,
              tie_word_embeddings=True, model_type="llama",
              source=_HF + "huggingface.co/meta-llama/Llama-3.2-1B config.json"),
    ModelSpec("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", 22, 2048, 32,
              4, 64, 5632, 32000, 2048, model_type="llama",
              source=_HF + "huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json"),
    ModelSpec("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768,
              sliding_window=4096, aliases=("mistral-7b-v0.1",), model_type="mistral",
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
    if "/" in key and (key.lower().endswith(".json") or p.parent.exists() or key.startswith((".", "~"))):
        raise ValueError(f"model config file {str(p)!r} not found (give a Hugging Face "
                         f"config.json, or a catalog id: {', '.join(model_names())})")
    raise ValueError(f"unknown model {key!r}; known: {', '.join(model_names())} "
                     "(or give a path to a Hugging Face config.json)")


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


def _int_field(cfg: dict, key: str, default=None):
    v = cfg.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise ValueError(f"{key}={v!r} is not an integer")
    return int(v)


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
        cfg = json.loads(path.read_text())
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
    except (TypeError, ValueError) as e:
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


def _spec_from_config(cfg: dict, path: Path, name: str | None) -> ModelSpec:
    mt = str(cfg.get("model_type") or "")
    heads = int(cfg["num_attention_heads"])
    if heads < 1:
        raise ValueError(f"num_attention_heads={heads} must be a positive integer")
    hidden = int(cfg["hidden_size"])
    layers = int(cfg["num_hidden_layers"])
    inter = _int_field(cfg, "intermediate_size")
    if inter is None:
        raise KeyError("intermediate_size")

    # ---- MoE
    experts = int(cfg.get("num_local_experts") or cfg.get("num_experts")
                  or cfg.get("n_routed_experts") or 0)
    topk = int(cfg.get("num_experts_per_tok") or 0)
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

    # ---- attention
    kv_lora = _int_field(cfg, "kv_lora_rank")
    if kv_lora:
        try:
            rope, nope, v_dim = (int(cfg["qk_rope_head_dim"]), int(cfg["qk_nope_head_dim"]),
                                 int(cfg["v_head_dim"]))
        except KeyError as e:
            raise KeyError(f"{e.args[0]} (an MLA config with kv_lora_rank needs it)") from None
        mla = {"attention_kind": "mla", "kv_lora_rank": kv_lora,
               "q_lora_rank": _int_field(cfg, "q_lora_rank"), "qk_rope_head_dim": rope,
               "qk_nope_head_dim": nope, "v_head_dim": v_dim}
        head_dim, kv_heads = nope + rope, int(cfg.get("num_key_value_heads") or heads)
    else:
        mla = {}
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        kv_heads = int(cfg.get("num_key_value_heads") or heads)

    # ---- sliding window (HF semantics; vLLM reads the same fields)
    window = cfg.get("sliding_window") or None
    window_layers: tuple[int, ...] | None = None
    if window is not None:
        window = int(window)
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
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=int(expert_inter),
        vocab_size=int(cfg["vocab_size"]),
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 4096),
        num_experts=experts,
        experts_per_token=topk,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=attn_bias or qwen2,
        o_proj_bias=attn_bias and not qwen2,
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        lm_head_bias=bool(cfg.get("lm_head_bias", False)),
        norm_bias=mt == "phimoe",  # PhiMoE uses LayerNorm (weight and bias)
        qk_norm=mt in ("qwen3", "qwen3_moe"),
        sliding_window=window,
        sliding_window_layer_indices=window_layers,
        model_type=mt,
        dense_intermediate_size=dense_inter,
        dense_layer_indices=dense_layers,
        num_shared_experts=n_shared,
        shared_expert_intermediate_size=shared_inter,
        shared_expert_gate=shared_gate,
        moe_router_bias=bool(experts) and cfg.get("topk_method") == "noaux_tc",
        partial_rotary_factor=float(cfg.get("partial_rotary_factor") or 1.0),
        source=f"Hugging Face config.json at {path}",
        **mla,
    )


__all__ = ["ATTENTION_KINDS", "CATALOG", "DTYPE_BYTES", "KNOWN_MODEL_TYPES", "ModelSpec",
           "get_model", "load_hf_config", "model_names"]
