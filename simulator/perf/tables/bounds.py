"""Roofline bounds of the measured kernel tables' operator families (:mod:`simulator.perf.tables.sets`):
FLOPs at the datasheet peak vs bytes at the datasheet HBM bandwidth (or link bandwidth and
latency for collectives), whichever is longer. A table's achieved efficiency is this bound
over the measured time.
"""
from __future__ import annotations

import numpy as np

from simulator.catalog.hardware import GPUSpec

#: bytes per element of the dtypes the tables hold (IEEE/OCP formats: bf16/fp16 16 bit,
#: fp8 e4m3 8 bit, float32 32 bit)
_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1,
                "float32": 4, "fp32": 4}
#: bytes of one activation element (vLLM runs activations, outputs and the attention compute
#: in bf16 even with FP8 weights or an FP8 KV cache)
_ACT_BYTES = 2

#: query dtype -> table dtypes that may answer it, preferred first. fp16 and bf16 run at the
#: same tensor-core rate and move the same bytes (datasheets list one figure for both).
_DTYPE_FAMILY = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp8": ("fp8",)}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``bf16``/``fp16`` 2, ``fp8``/``int8`` 1, ``float32`` 4).

    Raises
    ------
    ValueError
        For a dtype outside that list.
    """
    try:
        return _DTYPE_BYTES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(_DTYPE_BYTES))}") \
            from None


def _peak(gpu: GPUSpec, dtype: str) -> float:
    return gpu.flops_per_s("fp8" if str(dtype).lower() in ("fp8", "int8") else "bf16")


def _maximum(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(b, a)


def _minimum(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(b, a)


# ============================================================================== roofline bounds
def gemm_roofline_s(m, n, k, gpu: GPUSpec, dtype: str = "bf16"):
    """Roofline lower bound of one GEMM ``[m, k] x [k, n]`` (seconds; scalar or array ``m``).

    ``FLOPs = 2 m n k`` at the datasheet peak of ``dtype`` (FP8 tensor rate for ``fp8``);
    ``bytes = (m k + k n) x bytes(dtype) + m n x 2`` (inputs and weights in ``dtype``, output
    in bf16, as vLLM's FP8 linear layers emit) at the datasheet HBM bandwidth; the bound is
    the larger of the two (Williams, Waterman & Patterson, "Roofline", CACM 2009).
    """
    wb = dtype_bytes(dtype)
    flops = 2.0 * m * n * k
    byts = (m * k + k * n) * wb + m * n * _ACT_BYTES
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def _causal_pairs(q, start, window):
    """Query-key pairs of a causal chunk: queries at positions ``start+1 .. start+q``, each
    attending ``min(position, window)`` keys (``window`` 0 = full attention)."""
    full = q * start + q * (q + 1) / 2.0
    if not window:
        return full
    w = float(window)
    # positions p <= w attend p keys, positions p > w attend w keys
    lo = _minimum(start, w)
    hi = _minimum(start + q, w)
    below = (hi * (hi + 1) - lo * (lo + 1)) / 2.0
    return below + (start + q - hi) * w


def attention_prefill_roofline_s(q, start, gpu: GPUSpec, *, batch=1, q_heads, kv_heads,
                                 head_dim, kv_dtype="bf16", dtype="bf16", window=0):
    """Roofline lower bound of causal prefill attention (seconds).

    ``batch`` sequences each run a chunk of ``q`` new tokens after ``start`` cached tokens.
    ``FLOPs = 4 x head_dim x q_heads x pairs`` per sequence (QK^T and PV, 2 FLOPs per
    multiply-add each), ``pairs`` the causal query-key pairs (each query at position ``p``
    attends ``min(p, window)`` keys); ``bytes`` = the K and V of the attended span
    (``min(start + q, q + window - 1)`` tokens x ``2 x kv_heads x head_dim x bytes(kv_dtype)``)
    plus Q read and O written in bf16. Compute runs at the ``dtype`` peak.
    """
    pairs = _causal_pairs(q, start, window)
    span = start + q if not window else _minimum(start + q, q + float(window) - 1)
    flops = 4.0 * head_dim * q_heads * pairs * batch
    byts = batch * (span * 2.0 * kv_heads * head_dim * dtype_bytes(kv_dtype)
                    + 2.0 * q * q_heads * head_dim * _ACT_BYTES)
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def attention_decode_roofline_s(batch, ctx_mean, gpu: GPUSpec, *, q_heads, kv_heads, head_dim,
                                kv_dtype="bf16", dtype="bf16", window=0):
    """Roofline lower bound of one decode attention step (seconds; scalar or array ``ctx_mean``).

    ``batch`` sequences, one new query token each, attending ``ctx = min(ctx_mean, window)``
    tokens (the new one included). ``FLOPs = 4 x head_dim x q_heads x ctx x batch``;
    ``bytes = batch x ctx x 2 x kv_heads x head_dim x bytes(kv_dtype)`` (the KV cache read, the
    term that dominates) plus Q and O in bf16.
    """
    ctx = ctx_mean if not window else _minimum(ctx_mean, float(window))
    flops = 4.0 * head_dim * q_heads * ctx * batch
    byts = batch * (ctx * 2.0 * kv_heads * head_dim * dtype_bytes(kv_dtype)
                    + 2.0 * q_heads * head_dim * _ACT_BYTES)
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def _link(gpu: GPUSpec) -> tuple[float, float]:
    bw = gpu.interconnect_bandwidth_bytes_per_s or gpu.host_link_bandwidth_bytes_per_s
    return float(bw), float(gpu.interconnect_latency_s or 0.0)


#: (steps, bandwidth factor) of the ring algorithms per collective on p GPUs, for a message of
#: b bytes as nccl-tests sizes it: all-reduce 2(p-1) steps moving 2(p-1)/p b per GPU;
#: all-gather, reduce-scatter and all-to-all p-1 steps moving (p-1)/p b (Thakur, Rabenseifner
#: & Gropp 2005; nccl-tests doc/PERFORMANCE.md bus-bandwidth factors)
_COLLECTIVES = {"all_reduce": (2.0, 2.0), "all_gather": (1.0, 1.0),
                "reduce_scatter": (1.0, 1.0), "alltoall": (1.0, 1.0)}


def collective_roofline_s(op: str, nbytes, num_gpus: int, gpu: GPUSpec):
    """Latency-bandwidth (Hockney) lower bound of a ring collective (seconds).

    ``t = s (p - 1) x latency + f (p - 1) / p x nbytes / bandwidth`` with ``(s, f)`` = (2, 2)
    for ``all_reduce`` and (1, 1) for ``all_gather``, ``reduce_scatter``, ``alltoall``;
    bandwidth per direction and latency from the spec (``interconnect_bandwidth_bytes_per_s``,
    else the host link; ``interconnect_latency_s``, 0 when not stated). 0 for one GPU.

    Raises
    ------
    ValueError
        For an unknown ``op``.
    """
    if op not in _COLLECTIVES:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(_COLLECTIVES)}")
    p = float(num_gpus)
    if p <= 1:
        return 0.0 * nbytes
    s, f = _COLLECTIVES[op]
    bw, lat = _link(gpu)
    return s * (p - 1) * lat + f * (p - 1) / p * nbytes / bw


def all_reduce_roofline_s(nbytes, num_gpus: int, gpu: GPUSpec):
    """Lower bound of one all-reduce of ``nbytes`` over ``num_gpus`` (seconds; see
    :func:`collective_roofline_s`)."""
    return collective_roofline_s("all_reduce", nbytes, num_gpus, gpu)


def moe_roofline_s(num_tokens, gpu: GPUSpec, *, hidden, inter, topk, num_experts, moe_tp=1,
                   moe_ep=1, dtype="bf16"):
    """Roofline lower bound of one fused MoE layer on one GPU (seconds).

    Each token goes to ``topk`` of ``num_experts`` experts (SwiGLU: gate+up ``hidden x 2
    inter``, down ``inter x hidden``); a GPU holds ``num_experts / moe_ep`` experts, each split
    ``moe_tp`` ways (``inter / moe_tp`` columns). With uniform routing a GPU computes
    ``num_tokens x topk / moe_ep`` token-expert pairs, ``6 x hidden x inter / moe_tp`` FLOPs
    each, and reads the weights of the experts it touches, ``E_loc x (1 - (1 - topk /
    num_experts)^num_tokens)`` of its ``E_loc`` (expected distinct experts hit),
    ``3 x hidden x inter / moe_tp x bytes(dtype)`` each, plus the token activations in bf16.
    """
    il = inter / moe_tp
    e_loc = num_experts / moe_ep
    pairs = num_tokens * topk / moe_ep
    touched = e_loc * (1.0 - (1.0 - min(topk / num_experts, 1.0)) ** num_tokens)
    flops = 6.0 * hidden * il * pairs
    byts = (touched * 3.0 * hidden * il * dtype_bytes(dtype)
            + pairs * (2.0 * hidden + 2.0 * il) * _ACT_BYTES)
    return _maximum(flops / _peak(gpu, dtype), byts / gpu.hbm_bandwidth_bytes_per_s)


def elementwise_roofline_s(tokens, gpu: GPUSpec, *, hidden, intermediate, dtype="bf16"):
    """Memory-bound bound of one layer's norms, rotary, activation and residual adds (seconds):
    ``tokens x bytes(dtype) x (8 hidden + 3 intermediate)`` bytes (the count of
    :meth:`simulator.perf.roofline.RooflinePerfModel.elementwise_time`) at the HBM bandwidth."""
    return tokens * dtype_bytes(dtype) * (8.0 * hidden + 3.0 * intermediate) \
        / gpu.hbm_bandwidth_bytes_per_s


def lm_head_roofline_s(rows, gpu: GPUSpec, *, hidden, vocab, dtype="bf16"):
    """Roofline bound of the LM head, a ``[rows, hidden] x [hidden, vocab]`` GEMM (seconds)."""
    return gemm_roofline_s(rows, vocab, hidden, gpu, dtype)
