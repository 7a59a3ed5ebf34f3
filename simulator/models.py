"""Model catalog: the architecture figures the performance and memory models need.

Every catalog entry keeps the source it was taken from (Hugging Face ``config.json`` files,
as compiled in ``shared/reference/facts.yaml``). Models are named by lowercase ids
(``llama-3.1-8b``) and may also be named by their Hugging Face id (``meta-llama/Llama-3.1-8B``)
or by a path to a Hugging Face ``config.json`` (or a folder holding one).

Formulas
--------
- KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
  (DESIGN.md glossary; e.g. Llama-3-70B in bf16: 2 x 80 x 8 x 128 x 2 = 327,680 B).
- Parameter count (dense Llama-style decoder): embeddings V*h (+ untied LM head V*h) + per layer
  [h*(n_q + 2 n_kv)*d + n_q*d*h (attention) + 3*h*I*E (gated MLP, E experts) + h*E (router)
  + 2h (norms)] + h (final norm). Reproduces the ``params_derived_b`` figures of facts.yaml.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "float16": 2, "bfloat16": 2, "fp8": 1, "int8": 1,
               "fp32": 4, "float32": 4}


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
        Transformer shape (``num_kv_heads < num_attention_heads`` means GQA).
    intermediate_size : int
        MLP inner width (per expert for MoE).
    vocab_size : int
        Vocabulary size (LM head width).
    max_position_embeddings : int
        Longest context the model supports (tokens).
    num_experts, experts_per_token : int
        MoE routing (``num_experts == 0`` for dense models).
    tie_word_embeddings : bool
        Whether the LM head shares the embedding matrix.
    sliding_window : int or None
        Sliding-window attention span in tokens (caps attention context; None = full).
    source : str
        Where the figures come from.
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

    # ------------------------------------------------------------------ derived figures
    def kv_bytes_per_token(self, kv_cache_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """KV-cache bytes one token occupies, per GPU of a TP group.

        ``2 x layers x kv_heads x head_dim x bytes`` / TP (KV heads are split across the TP
        group; when TP exceeds the KV-head count the heads are replicated, vLLM-style).

        Raises
        ------
        ValueError
            If ``kv_cache_dtype`` is unknown.
        """
        b = _dtype_bytes(kv_cache_dtype)
        kv_heads_per_gpu = max(1, -(-self.num_kv_heads // tensor_parallel_size))
        return 2 * self.num_layers * kv_heads_per_gpu * self.head_dim * b

    @property
    def num_experts_eff(self) -> int:
        return max(1, self.num_experts)

    def num_params(self) -> int:
        """Total parameter count (all experts)."""
        h, d = self.hidden_size, self.head_dim
        attn = h * (self.num_attention_heads + 2 * self.num_kv_heads) * d
        attn += self.num_attention_heads * d * h
        mlp = 3 * h * self.intermediate_size * self.num_experts_eff
        router = h * self.num_experts if self.num_experts else 0
        per_layer = attn + mlp + router + 2 * h
        emb = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_layers * per_layer + emb + h

    def num_active_params(self) -> int:
        """Parameters touched per token (MoE: only ``experts_per_token`` experts)."""
        if not self.num_experts:
            return self.num_params()
        h = self.hidden_size
        inactive = 3 * h * self.intermediate_size * (self.num_experts - self.experts_per_token)
        return self.num_params() - self.num_layers * inactive

    def weight_bytes(self, weight_dtype: str = "bf16") -> int:
        """Bytes of all weights in ``weight_dtype`` (whole model, not per GPU)."""
        return self.num_params() * _dtype_bytes(weight_dtype)


def _dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(sorted(DTYPE_BYTES))}") from None


_HF = "Hugging Face config.json as compiled in shared/reference/facts.yaml: "
CATALOG: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 128, 11008, 32000, 4096,
              source=_HF + "huggingface.co/meta-llama/Llama-2-7b-hf config.json"),
    ModelSpec("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 128, 13824, 32000, 4096,
              source=_HF + "huggingface.co/meta-llama/Llama-2-13b-hf config.json"),
    ModelSpec("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 128, 28672, 32000, 4096,
              source=_HF + "huggingface.co/meta-llama/Llama-2-70b-hf config.json"),
    ModelSpec("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8192,
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3-8B config.json"),
    ModelSpec("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 64, 8, 128, 28672, 128256, 8192,
              source=_HF + "huggingface.co/meta-llama/Meta-Llama-3-70B config.json"),
    ModelSpec("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 131072,
              source=_HF + "huggingface.co/meta-llama/Llama-3.1-8B config.json",
              aliases=("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct",
                       "meta-llama/Meta-Llama-3.1-8B-Instruct")),
    ModelSpec("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, 131072,
              source=_HF + "huggingface.co/meta-llama/Llama-3.1-70B-Instruct config.json",
              aliases=("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B",
                       "meta-llama/Meta-Llama-3.1-70B-Instruct")),
    ModelSpec("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256,
              131072, source=_HF + "huggingface.co/meta-llama/Meta-Llama-3.1-405B-Instruct config.json (8 KV heads)"),
    ModelSpec("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 131072,
              tie_word_embeddings=True,
              source=_HF + "huggingface.co/meta-llama/Llama-3.2-1B config.json"),
    ModelSpec("tinyllama-1.1b", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", 22, 2048, 32,
              4, 64, 5632, 32000, 2048,
              source=_HF + "huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json"),
    ModelSpec("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768,
              sliding_window=4096, aliases=("mistral-7b-v0.1",),
              source=_HF + "huggingface.co/mistralai/Mistral-7B-v0.1 config.json (sliding_window 4096)"),
    ModelSpec("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", 32, 4096, 32, 8, 128, 14336, 32000, 32768,
              num_experts=8, experts_per_token=2, aliases=("mixtral-8x7b-v0.1",
                                                           "mistralai/Mixtral-8x7B-Instruct-v0.1"),
              source=_HF + "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json; arXiv 2401.04088"),
    ModelSpec("servesim-tiny-llama", None, 4, 256, 4, 2, 64, 768, 4096, 4096,
              aliases=("tiny", "servesim-tiny"),
              source="servesim's own random-weight validation model (calibration/tiny_model.py); "
                     "the model `servesim calibrate`/`validate` run by default"),
    ModelSpec("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, 131072,
              qkv_bias=True, source=_HF + "huggingface.co/Qwen/Qwen2.5-7B config.json"),
    ModelSpec("qwen2.5-72b", "Qwen/Qwen2.5-72B", 80, 8192, 64, 8, 128, 29568, 152064, 131072,
              qkv_bias=True, aliases=("Qwen/Qwen2.5-72B-Instruct",),
              source=_HF + "huggingface.co/Qwen/Qwen2.5-72B config.json"),
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
        If the name is neither in the catalog nor an existing config path; the message lists
        the catalog ids.
    """
    key = str(name_or_path).strip()
    if key.lower() in _ALIASES:
        return CATALOG[_ALIASES[key.lower()]]
    p = Path(key).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if p.is_file():
        return load_hf_config(p)
    raise ValueError(f"unknown model {key!r}; known: {', '.join(model_names())} "
                     "(or give a path to a Hugging Face config.json)")


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json``.

    Reads ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads`` (default: attention heads), ``head_dim`` (default
    hidden/heads), ``intermediate_size``, ``vocab_size``, ``max_position_embeddings``,
    ``num_local_experts``/``num_experts`` and ``num_experts_per_tok``, ``sliding_window``,
    ``tie_word_embeddings``.

    Raises
    ------
    ValueError
        If the file is not valid JSON or lacks a required field (named in the message).
    """
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read Hugging Face config: {e}") from None
    if "text_config" in cfg and "num_hidden_layers" not in cfg:
        cfg = {**cfg, **cfg["text_config"]}
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: a Hugging Face config.json must hold a JSON object")  # noqa: TRY004
    try:
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        if heads < 1:
            raise ValueError(f"num_attention_heads={heads} must be a positive integer")
        spec = ModelSpec(
            name=name or str(cfg.get("_name_or_path") or path.parent.name or path.stem).lower(),
            hf_id=cfg.get("_name_or_path"),
            num_layers=int(cfg["num_hidden_layers"]),
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            intermediate_size=int(cfg["intermediate_size"]),
            vocab_size=int(cfg["vocab_size"]),
            max_position_embeddings=int(cfg.get("max_position_embeddings") or 4096),
            num_experts=int(cfg.get("num_local_experts") or cfg.get("num_experts") or 0),
            experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", False) or "qwen2" in str(cfg.get("model_type", ""))),
            sliding_window=cfg.get("sliding_window") or None,
            source=f"Hugging Face config.json at {path}",
        )
    except KeyError as e:
        raise ValueError(f"{path}: Hugging Face config lacks required field {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: bad value in Hugging Face config: {e}") from None
    for f in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
              "intermediate_size", "vocab_size", "max_position_embeddings"):
        if getattr(spec, f) < 1:
            raise ValueError(f"{path}: Hugging Face config has {f}={getattr(spec, f)}; "
                             "it must be a positive integer")
    if spec.num_attention_heads % spec.num_kv_heads:
        raise ValueError(f"{path}: num_attention_heads ({spec.num_attention_heads}) is not a "
                         f"multiple of num_key_value_heads ({spec.num_kv_heads})")
    if spec.num_experts and not spec.experts_per_token:
        spec = replace(spec, experts_per_token=2)
    return spec
