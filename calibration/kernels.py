"""The operator functions of a Llama layer, shared by the real engine and the harness (torch).

The harness times *these* functions and the engine executes *these* functions, so a measured
table describes exactly the code the engine runs (including its per-call Python overhead). One
layer of :class:`calibration.tiny_model.TinyLlama` is::

    h = rmsnorm(x, w_in)                 elementwise
    qkv = gemm(h, w_qkv)                 GEMM qkv_proj   (k = hidden, n = (q + 2 kv) * head_dim)
    q, k = rope(q, k, cos, sin)          elementwise
    attention(q, k, v, chunk, out)       attention_prefill, once per prefill chunk
    attention(q, k, v, decodes, out)     attention_decode, once for all decode sequences
    x = add(x, gemm(out, w_o))           GEMM o_proj + elementwise
    h = rmsnorm(x, w_post)               elementwise
    x = add(x, gemm(silu_mul(gemm(h, w_gate_up)), w_down))   GEMMs mlp_gate_up, mlp_down

Attention uses ``torch.nn.functional.scaled_dot_product_attention`` per sequence over its own
KV cache (``[kv_heads, capacity, head_dim]`` per layer for K and for V): the new tokens' K/V
are written at positions ``start .. start + n``, then the ``n`` queries attend to positions
``0 .. start + n`` (causal within the chunk). Grouped-query attention uses ``enable_gqa``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

RMS_EPS = 1e-5


def gemm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` with ``x`` of shape (m, k) and ``w`` of shape (k, n)."""
    return torch.matmul(x, w)


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMSNorm (Zhang & Sennrich 2019) over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rotary position embedding (Su et al. 2021), Llama's rotate-half layout.

    ``q``: (T, q_heads, d), ``k``: (T, kv_heads, d), ``cos``/``sin``: (T, 1, d).
    """
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """SwiGLU activation ``silu(gate) * up`` of the fused (T, 2 I) gate/up projection."""
    i = gate_up.shape[-1] // 2
    return F.silu(gate_up[:, :i]) * gate_up[:, i:]


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Residual add."""
    return x + y


def lm_head(x: torch.Tensor, w_norm: torch.Tensor, w_lm: torch.Tensor) -> torch.Tensor:
    """Final RMSNorm, LM-head GEMM (h x vocab) and greedy sampling (argmax) of ``x`` rows."""
    return torch.argmax(gemm(rmsnorm(x, w_norm), w_lm), dim=-1)


def rope_tables(max_len: int, head_dim: int, theta: float, device, dtype):
    """cos and sin tables, shape (max_len, head_dim), for :func:`rope`."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32)
                          / head_dim))
    t = torch.arange(max_len, device=device, dtype=torch.float32)
    f = torch.outer(t, inv)
    emb = torch.cat((f, f), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@dataclass
class SeqSlice:
    """One sequence's part of a step: rows ``offset .. offset + n`` of the flat batch.

    Attributes
    ----------
    offset : int
        First row of this sequence in the step's token-major tensors.
    n : int
        New tokens (1 for a decode).
    start : int
        Tokens already in this sequence's KV cache (position of the first new token).
    caches : list of (Tensor, Tensor)
        Per layer, the sequence's K and V caches, each (kv_heads, capacity, head_dim).
    """

    offset: int
    n: int
    start: int
    caches: list


def causal_chunk_mask(n: int, start: int, device) -> torch.Tensor:
    """Boolean mask (n, start + n): query ``i`` sees keys ``0 .. start + i``."""
    qpos = torch.arange(start, start + n, device=device).unsqueeze(1)
    kpos = torch.arange(start + n, device=device).unsqueeze(0)
    return kpos <= qpos


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seqs: list[SeqSlice],
              out: torch.Tensor, layer: int) -> None:
    """Write new K/V into each sequence's cache and attend; results go to ``out`` rows.

    ``q``: (T, q_heads, d); ``k``, ``v``: (T, kv_heads, d); ``out``: (T, q_heads * d);
    ``layer`` selects each sequence's cache.
    """
    gqa = q.shape[1] != k.shape[1]
    for s in seqs:
        a, b, end = s.offset, s.offset + s.n, s.start + s.n
        kc, vc = s.caches[layer]
        kc[:, s.start:end].copy_(k[a:b].transpose(0, 1))
        vc[:, s.start:end].copy_(v[a:b].transpose(0, 1))
        qi = q[a:b].transpose(0, 1).unsqueeze(0)
        ki = kc[:, :end].unsqueeze(0)
        vi = vc[:, :end].unsqueeze(0)
        if s.n == 1:
            o = F.scaled_dot_product_attention(qi, ki, vi, enable_gqa=gqa)
        elif s.start == 0:
            o = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True, enable_gqa=gqa)
        else:
            mask = causal_chunk_mask(s.n, s.start, q.device)
            o = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, enable_gqa=gqa)
        out[a:b] = o[0].transpose(0, 1).reshape(s.n, -1)
