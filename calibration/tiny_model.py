"""A small Llama-architecture model with random weights, built in torch (no downloads).

RMSNorm, rotary embeddings, grouped-query attention and a SwiGLU MLP, as in Llama 2/3
(Touvron et al. 2023). The default :data:`TINY` (4 layers, hidden 256, 4 query / 2 KV heads of
64, MLP 768, vocabulary 4096) is the model ``servesim validate`` runs; its shape reaches the
simulator as a Hugging Face style ``config.json`` (:meth:`TinyConfig.write_config_json`), which
``simulator.catalog.models.get_model`` reads like any other model path.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from simulator.catalog.models import ModelSpec, get_model

TINY_NAME = "servesim-tiny-llama"
TINY_ALIASES = ("tiny", "servesim-tiny", TINY_NAME)


@dataclass(frozen=True)
class TinyConfig:
    """Shape of a Llama-style model (Hugging Face ``LlamaConfig`` field meanings)."""

    name: str = TINY_NAME
    num_layers: int = 4
    hidden_size: int = 256
    num_attention_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 768
    vocab_size: int = 4096
    max_position_embeddings: int = 4096
    rope_theta: float = 10000.0

    def hf_config(self) -> dict:
        """The ``config.json`` content (LlamaForCausalLM)."""
        return {
            "_name_or_path": self.name, "architectures": ["LlamaForCausalLM"],
            "model_type": "llama", "num_hidden_layers": self.num_layers,
            "hidden_size": self.hidden_size, "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_kv_heads, "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size, "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "rope_theta": self.rope_theta, "rms_norm_eps": 1e-5, "hidden_act": "silu",
            "tie_word_embeddings": False, "torch_dtype": "float32",
            "servesim_note": "random weights, built by calibration/tiny_model.py",
        }

    def write_config_json(self, folder: str | Path) -> Path:
        """Write ``folder/config.json`` and return its path."""
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        p = d / "config.json"
        p.write_text(json.dumps(self.hf_config(), indent=2) + "\n")
        return p

    def model_spec(self) -> ModelSpec:
        """The simulator's :class:`ModelSpec` of this shape."""
        return ModelSpec(name=self.name, hf_id=None, num_layers=self.num_layers,
                         hidden_size=self.hidden_size,
                         num_attention_heads=self.num_attention_heads,
                         num_kv_heads=self.num_kv_heads, head_dim=self.head_dim,
                         intermediate_size=self.intermediate_size, vocab_size=self.vocab_size,
                         max_position_embeddings=self.max_position_embeddings,
                         source="calibration/tiny_model.py (random weights)")

    @classmethod
    def from_model_spec(cls, m: ModelSpec) -> TinyConfig:
        """A config with ``m``'s shape (dense models only)."""
        if m.num_experts:
            raise ValueError(f"model {m.name}: MoE models are not supported by the harness")
        return cls(name=m.name, num_layers=m.num_layers, hidden_size=m.hidden_size,
                   num_attention_heads=m.num_attention_heads, num_kv_heads=m.num_kv_heads,
                   head_dim=m.head_dim, intermediate_size=m.intermediate_size,
                   vocab_size=m.vocab_size, max_position_embeddings=m.max_position_embeddings)

    def to_dict(self) -> dict:
        return asdict(self)


TINY = TinyConfig()


def resolve_model(name: str) -> TinyConfig:
    """``tiny`` (and aliases), a catalog id, or a path to a ``config.json``.

    Raises
    ------
    ValueError
        Unknown model (the message lists the catalog).
    """
    if str(name).strip().lower() in TINY_ALIASES:
        return TINY
    return TinyConfig.from_model_spec(get_model(name))


def weight_bytes(cfg: TinyConfig, dtype_bytes: int = 4) -> int:
    """Bytes of all weights of ``cfg`` (embedding, layers, LM head)."""
    h, d = cfg.hidden_size, cfg.head_dim
    layer = (h * (cfg.num_attention_heads + 2 * cfg.num_kv_heads) * d
             + cfg.num_attention_heads * d * h + 3 * h * cfg.intermediate_size + 2 * h)
    return dtype_bytes * (cfg.num_layers * layer + 2 * cfg.vocab_size * h + h)


def shard_config(cfg: TinyConfig, tp: int) -> TinyConfig:
    """The per-GPU shape of ``cfg`` at TP ``tp`` (heads, MLP and vocabulary split)."""
    if tp <= 1:
        return cfg
    if cfg.num_attention_heads % tp:
        raise ValueError(f"{cfg.name}: {cfg.num_attention_heads} heads not divisible by TP {tp}")
    return TinyConfig(name=cfg.name, num_layers=cfg.num_layers, hidden_size=cfg.hidden_size,
                      num_attention_heads=cfg.num_attention_heads // tp,
                      num_kv_heads=max(1, math.ceil(cfg.num_kv_heads / tp)),
                      head_dim=cfg.head_dim, intermediate_size=cfg.intermediate_size // tp,
                      vocab_size=cfg.vocab_size // tp,
                      max_position_embeddings=cfg.max_position_embeddings,
                      rope_theta=cfg.rope_theta)


class TinyLlama:
    """Random-weight Llama on one device, executing one engine step at a time.

    Parameters
    ----------
    cfg : TinyConfig
    device : str
        ``cpu`` or ``cuda[:i]``.
    dtype : torch.dtype
        ``torch.float32`` on CPU, ``torch.bfloat16`` on CUDA.
    seed : int
        Weight initialisation seed.
    embed_rows : int, optional
        Rows of the embedding table (token ids are taken modulo it); the harness uses a small
        table for large vocabularies (a lookup's cost does not depend on the table size).
    """

    def __init__(self, cfg: TinyConfig, device: str = "cpu", dtype=None, seed: int = 0,
                 embed_rows: int | None = None):
        import torch

        from . import kernels
        self.torch, self.k = torch, kernels
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = dtype or (torch.float32 if self.device.type == "cpu" else torch.bfloat16)
        g = torch.Generator(device="cpu").manual_seed(seed)
        h, d = cfg.hidden_size, cfg.head_dim
        nq, nkv, inter = cfg.num_attention_heads, cfg.num_kv_heads, cfg.intermediate_size

        def w(k, n):
            t = torch.randn(k, n, generator=g) / k ** 0.5
            return t.to(device=self.device, dtype=self.dtype)

        def ones(n):
            return torch.ones(n, device=self.device, dtype=self.dtype)

        rows = min(cfg.vocab_size, embed_rows) if embed_rows else cfg.vocab_size
        self.embed = (torch.randn(rows, h, generator=g) * 0.02).to(
            device=self.device, dtype=self.dtype)
        self.layers = [{"w_in": ones(h), "w_qkv": w(h, (nq + 2 * nkv) * d), "w_o": w(nq * d, h),
                        "w_post": ones(h), "w_gu": w(h, 2 * inter), "w_down": w(inter, h)}
                       for _ in range(cfg.num_layers)]
        self.w_norm = ones(h)
        self.w_lm = w(h, cfg.vocab_size)
        self.cos, self.sin = kernels.rope_tables(cfg.max_position_embeddings, d, cfg.rope_theta,
                                                 self.device, self.dtype)

    def new_cache(self, capacity: int) -> list:
        """Per-layer (K, V) caches for one sequence of up to ``capacity`` tokens."""
        torch = self.torch
        c = self.cfg
        big = torch.empty(c.num_layers, 2, c.num_kv_heads, capacity, c.head_dim,
                          device=self.device, dtype=self.dtype)
        return [(big[i, 0], big[i, 1]) for i in range(c.num_layers)]

    def forward(self, tokens, positions, prefill_groups: list, decode_group: list,
                sample_rows, probe=None) -> list[int]:
        """Run one step; return the sampled token of each row in ``sample_rows``.

        Parameters
        ----------
        tokens, positions : LongTensor (T,)
            Token ids and their positions, flat over the step's sequences.
        prefill_groups : list of list of SeqSlice
            One attention call per group (one prefill chunk each).
        decode_group : list of SeqSlice
            All decode sequences (one attention call).
        sample_rows : LongTensor
            Rows whose next token is sampled.
        probe : calibration.timing.Probe, optional
            Times every operator call in place (the harness); None in the engine.
        """
        from .timing import _call
        run = probe.time if probe is not None else _call
        k, c = self.k, self.cfg
        nq, nkv, d = c.num_attention_heads, c.num_kv_heads, c.head_dim
        x = self.embed[tokens % self.embed.shape[0]]
        T = x.shape[0]
        cos = self.cos[positions].unsqueeze(1)
        sin = self.sin[positions].unsqueeze(1)
        for i, L in enumerate(self.layers):
            if probe is not None:
                probe.layer = i
            h = run("rmsnorm", k.rmsnorm, x, L["w_in"])
            qkv = run("qkv_proj", k.gemm, h, L["w_qkv"]).view(T, nq + 2 * nkv, d)
            q, kk = run("rope", k.rope, qkv[:, :nq], qkv[:, nq:nq + nkv], cos, sin)
            v = qkv[:, nq + nkv:]
            out = self.torch.empty(T, nq * d, device=self.device, dtype=self.dtype)
            for grp in prefill_groups:
                run("attention_prefill", k.attention, q, kk, v, grp, out, i)
            if decode_group:
                run("attention_decode", k.attention, q, kk, v, decode_group, out, i)
            x = run("add", k.add, x, run("o_proj", k.gemm, out, L["w_o"]))
            h = run("rmsnorm", k.rmsnorm, x, L["w_post"])
            a = run("act", k.silu_mul, run("mlp_gate_up", k.gemm, h, L["w_gu"]))
            x = run("add", k.add, x, run("mlp_down", k.gemm, a, L["w_down"]))
        if probe is not None:
            probe.layer = -1
        toks = run("lm_head", k.lm_head, x[sample_rows], self.w_norm, self.w_lm)
        return toks.tolist()
