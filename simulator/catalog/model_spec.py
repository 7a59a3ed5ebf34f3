"""The architecture of a decoder-only transformer (:class:`ModelSpec`) and what follows from
it: parameter counts, KV-cache bytes per token, GEMM shapes.

The catalog of named models is :mod:`simulator.catalog.models`; reading a Hugging Face ``config.json``
into a :class:`ModelSpec` is :mod:`simulator.catalog.model_config`.

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

from dataclasses import dataclass, field

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

    def _require_mla(self) -> None:
        """Raise ``ValueError`` unless the model uses MLA attention."""
        if self.attention_kind != "mla":
            raise ValueError(f"model {self.name} does not use MLA attention")

    def mla_prefill_heads(self, tp: int = 1) -> tuple[int, int, int]:
        """MLA prefill (vLLM's ``forward_mha``: latents expanded by ``kv_b_proj``): ``(heads
        per GPU, q/k head dim = nope + rope, v head dim)``.

        Raises
        ------
        ValueError
            If the model does not use MLA.
        """
        self._require_mla()
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
        self._require_mla()
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


__all__ = ["ATTENTION_KINDS", "DTYPE_BYTES", "ModelSpec"]
