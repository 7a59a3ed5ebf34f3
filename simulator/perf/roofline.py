"""Roofline execution-time model: a step's time from its batch shape.

A step (one engine iteration, one forward pass) costs, for each of the model's layers, the
sum of per-operator times, plus the LM head, TP all-reduces and a per-step CPU overhead
(DESIGN.md section 3). Every operator's time is the roofline bound

    t = max(FLOPs / (peak FLOP/s x compute efficiency), bytes / (HBM bytes/s x memory efficiency))
        + per-kernel overhead

(Williams, Waterman & Patterson, "Roofline", CACM 2009). FLOPs and bytes per operator:

- GEMM with ``m`` tokens, ``k`` inputs, ``n`` outputs: ``2 m k n`` FLOPs, ``k n`` weight
  elements + ``m (k + n)`` activation elements moved.
- Causal attention over a prefill chunk of ``q`` new tokens after ``s`` cached tokens:
  ``q s + q (q + 1) / 2`` query-key pairs, ``4 d`` FLOPs per pair and head (QK^T and PV);
  reads ``(s + q)`` tokens of K and V.
- Decode attention over a total context of ``S`` tokens: ``4 d S`` FLOPs per head; reads the
  ``S`` tokens of K and V (memory bound).
- Ring all-reduce of ``b`` bytes over ``p`` GPUs: ``2 (p - 1) / p x b / link bandwidth``
  (Patarasuk & Yuan 2009) + a fixed latency, twice per layer (after attention and after MLP;
  Megatron-LM, Shoeybi et al. 2019).

The default efficiencies and overheads are *assumptions* labelled ``datasheet`` provenance
(the peak figures come from datasheets; the efficiencies are round numbers, not measured).
The CPU overhead defaults are fitted to the engine CPU overheads Vidur measured for Llama-2-7B
TP1 on A100 (``shared/reference/vidur/legacy/a100/cpu_overheads.csv``: ~1.4 ms at batch 8,
~7.2 ms at batch 128 per iteration): 1.0 ms + 48 us per sequence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..hardware import GPUSpec
from ..models import ModelSpec, _dtype_bytes

ACT_BYTES = 2  # activations in bf16


@dataclass(frozen=True)
class RooflineParams:
    """Efficiency factors and overheads of the roofline model (fractions, seconds)."""

    gemm_compute_efficiency: float = 0.70
    attention_compute_efficiency: float = 0.55
    memory_efficiency: float = 0.80
    interconnect_efficiency: float = 0.70
    kernel_overhead_s: float = 2.0e-6
    all_reduce_latency_s: float = 8.0e-6
    cpu_overhead_base_s: float = 1.0e-3
    cpu_overhead_per_seq_s: float = 4.8e-5
    provenance: dict = field(default_factory=lambda: {
        "gemm": "datasheet", "attention_prefill": "datasheet", "attention_decode": "datasheet",
        "all_reduce": "datasheet", "elementwise": "datasheet", "lm_head": "datasheet",
        "cpu_overhead": "fitted (Vidur legacy a100 cpu_overheads.csv, Llama-2-7B TP1)"})


@dataclass
class StepShape:
    """What one engine iteration computes.

    Attributes
    ----------
    prefill_q : list of int
        New (query) tokens of each prefill chunk in the step.
    prefill_start : list of int
        Tokens already in the KV cache before each chunk (same length as ``prefill_q``).
    num_decode : int
        Decode sequences (one query token each, or ``1 + k`` when verifying ``k`` draft tokens).
    decode_ctx_total : int
        Sum over decode sequences of the context length attended (tokens).
    decode_q_per_seq : int
        Query tokens per decode sequence (1, or ``num_speculative_tokens + 1`` for verification).
    num_sampled : int
        Rows that go through the LM head and sampler.
    """

    prefill_q: list = field(default_factory=list)
    prefill_start: list = field(default_factory=list)
    num_decode: int = 0
    decode_ctx_total: int = 0
    decode_q_per_seq: int = 1
    num_sampled: int = 0

    @property
    def num_tokens(self) -> int:
        return int(sum(self.prefill_q)) + self.num_decode * self.decode_q_per_seq

    @property
    def num_seqs(self) -> int:
        return len(self.prefill_q) + self.num_decode


class RooflinePerfModel:
    """Step time of a model on one TP group of GPUs, from the roofline.

    Parameters
    ----------
    model : ModelSpec
    gpu : GPUSpec
    tensor_parallel_size : int
        GPUs one replica's weights are split across (Megatron-style TP).
    weight_dtype, kv_cache_dtype : str
        ``bf16`` or ``fp8``. FP8 weights halve weight bytes and use the FP8 FLOP rate.
    params : RooflineParams
    """

    kind = "roofline"

    def __init__(self, model: ModelSpec, gpu: GPUSpec, tensor_parallel_size: int = 1,
                 weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16",
                 params: RooflineParams | None = None):
        self.model, self.gpu, self.tp = model, gpu, int(tensor_parallel_size)
        self.params = params or RooflineParams()
        self.weight_dtype, self.kv_cache_dtype = weight_dtype, kv_cache_dtype
        self.wb = _dtype_bytes(weight_dtype)
        self.kvb = _dtype_bytes(kv_cache_dtype)
        m, tp = model, self.tp
        self.q_heads = m.num_attention_heads / tp
        self.kv_heads = max(1, math.ceil(m.num_kv_heads / tp))
        self.gemm_peak = gpu.flops_per_s(weight_dtype) * self.params.gemm_compute_efficiency
        self.attn_peak = gpu.bf16_flops_per_s * self.params.attention_compute_efficiency
        self.mem_bw = gpu.hbm_bandwidth_bytes_per_s * self.params.memory_efficiency
        d, h = m.head_dim, m.hidden_size
        # GEMM shapes (k, n) per GPU
        self.gemms = {
            "qkv_proj": (h, int((self.q_heads + 2 * self.kv_heads) * d)),
            "o_proj": (int(self.q_heads * d), h),
            "mlp_gate_up": (h, 2 * m.intermediate_size // tp),
            "mlp_down": (m.intermediate_size // tp, h),
        }
        self.kv_bytes_per_token_layer = 2 * self.kv_heads * d * self.kvb
        self._decode_cache: dict[int, tuple[float, float, float, float]] = {}

    # ------------------------------------------------------------------ operators (per layer)
    def gemm_time(self, op: str, num_tokens: int) -> float:
        """Seconds for GEMM ``op`` over ``num_tokens`` rows, one layer, one GPU."""
        k, n = self.gemms[op]
        if op.startswith("mlp") and self.model.num_experts:
            return self._moe_time(op, num_tokens)
        flops = 2.0 * num_tokens * k * n
        byts = k * n * self.wb + num_tokens * (k + n) * ACT_BYTES
        return max(flops / self.gemm_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def _moe_time(self, op: str, num_tokens: int) -> float:
        m = self.model
        k, n = self.gemms[op]
        e, topk = m.num_experts, m.experts_per_token
        touched = e * (1.0 - (1.0 - topk / e) ** num_tokens)
        flops = 2.0 * num_tokens * topk * k * n
        byts = touched * k * n * self.wb + num_tokens * topk * (k + n) * ACT_BYTES
        return max(flops / self.gemm_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def attn_prefill_time(self, q: int, start: int) -> float:
        """Seconds for causal attention of a ``q``-token chunk after ``start`` cached tokens."""
        pairs = q * start + q * (q + 1) / 2.0
        d = self.model.head_dim
        flops = 4.0 * d * self.q_heads * pairs
        byts = (start + q) * self.kv_bytes_per_token_layer + 2 * q * self.q_heads * d * ACT_BYTES
        return max(flops / self.attn_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def attn_decode_time(self, num_seqs: int, ctx_total, q_per_seq: int = 1):
        """Seconds for decode attention of ``num_seqs`` sequences over ``ctx_total`` tokens.

        ``ctx_total`` may be a numpy array (vectorised over steps).
        """
        d = self.model.head_dim
        flops = 4.0 * d * self.q_heads * q_per_seq * np.asarray(ctx_total, dtype=float)
        byts = (np.asarray(ctx_total, dtype=float) * self.kv_bytes_per_token_layer
                + 2 * num_seqs * q_per_seq * self.q_heads * d * ACT_BYTES)
        return np.maximum(flops / self.attn_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def elementwise_time(self, num_tokens: int) -> float:
        """Norms, rotary, activation and residual adds (memory bound), one layer."""
        h = self.model.hidden_size
        inter = self.model.intermediate_size // self.tp
        byts = num_tokens * ACT_BYTES * (8 * h + 3 * inter)
        return byts / self.mem_bw + 4 * self.params.kernel_overhead_s

    def all_reduce_time(self, num_tokens: int, graph: bool = False) -> float:
        """One ring all-reduce of the hidden states of ``num_tokens`` tokens (0 when TP=1)."""
        if self.tp <= 1:
            return 0.0
        byts = num_tokens * self.model.hidden_size * ACT_BYTES
        bw = self.gpu.interconnect_bandwidth_bytes_per_s * self.params.interconnect_efficiency
        if bw <= 0:
            bw = self.gpu.host_link_bandwidth_bytes_per_s * self.params.interconnect_efficiency
        return 2.0 * (self.tp - 1) / self.tp * byts / bw + self.params.all_reduce_latency_s

    def lm_head_time(self, num_rows: int) -> float:
        """LM head GEMM (+ sampling) for ``num_rows`` sampled positions."""
        if num_rows <= 0:
            return 0.0
        h, v = self.model.hidden_size, self.model.vocab_size // self.tp
        flops = 2.0 * num_rows * h * v
        byts = h * v * self.wb + num_rows * (h + v) * ACT_BYTES
        return max(flops / self.gemm_peak, byts / self.mem_bw) + 2 * self.params.kernel_overhead_s

    def cpu_overhead_time(self, num_seqs: int) -> float:
        """Per-iteration engine CPU time (scheduling, input preparation, sampling)."""
        return self.params.cpu_overhead_base_s + self.params.cpu_overhead_per_seq_s * num_seqs

    # ------------------------------------------------------------------ whole steps
    def _dense_layer_time(self, num_tokens: int) -> float:
        t = sum(self.gemm_time(op, num_tokens) for op in self.gemms)
        return t + self.elementwise_time(num_tokens) + 2 * self.all_reduce_time(num_tokens)

    def _token_terms(self, T: int) -> dict[str, float]:
        """Operator times that depend only on the step's token count (memoised per T)."""
        cache = self.__dict__.setdefault("_tok_cache", {})
        hit = cache.get(T)
        if hit is None:
            L = self.model.num_layers
            hit = {op: L * self.gemm_time(op, T) for op in self.gemms}
            hit["elementwise"] = L * self.elementwise_time(T)
            hit["all_reduce"] = 2 * L * self.all_reduce_time(T)
            if len(cache) < 65536:
                cache[T] = hit
        return hit

    def op_times(self, shape: StepShape) -> dict[str, float]:
        """Seconds per operator class for one step (summed over layers)."""
        L = self.model.num_layers
        T = shape.num_tokens
        out = dict(self._token_terms(T)) if T else {}
        pre = sum(self.attn_prefill_time(int(q), int(s))
                  for q, s in zip(shape.prefill_q, shape.prefill_start))
        out["attention_prefill"] = L * pre
        out["attention_decode"] = (L * float(self.attn_decode_time(
            shape.num_decode, shape.decode_ctx_total, shape.decode_q_per_seq))
            if shape.num_decode else 0.0)
        if not T:
            out["elementwise"] = out["all_reduce"] = 0.0
        out["lm_head"] = self.lm_head_time(shape.num_sampled)
        out["cpu_overhead"] = self.cpu_overhead_time(shape.num_seqs)
        return out

    def step_time(self, shape: StepShape) -> float:
        """Seconds for one engine iteration of ``shape``."""
        return float(sum(self.op_times(shape).values()))

    def decode_step_times(self, num_seqs: int, ctx_totals: np.ndarray) -> np.ndarray:
        """Vectorised step times of pure-decode steps (one token per sequence).

        Parameters
        ----------
        num_seqs : int
            Decode sequences in every step (the same batch).
        ctx_totals : ndarray of int, shape (K,)
            Total attended context of the batch at each of K consecutive steps.

        Returns
        -------
        ndarray, shape (K,)
            Seconds per step.
        """
        c = self._decode_cache.get(num_seqs)
        if c is None:
            L = self.model.num_layers
            fixed = (L * self._dense_layer_time(num_seqs) + self.lm_head_time(num_seqs)
                     + self.cpu_overhead_time(num_seqs))
            c = (fixed,)
            self._decode_cache[num_seqs] = c
        return c[0] + self.model.num_layers * self.attn_decode_time(num_seqs, ctx_totals)

    def provenance(self) -> dict[str, str]:
        """Operator class -> provenance label (``measured``, ``fitted`` or ``datasheet``)."""
        return dict(self.params.provenance)

    def bottleneck_shares(self, shape: StepShape) -> dict[str, float]:
        """Share of step time in compute-bound vs memory-bound operators and overheads."""
        L, T = self.model.num_layers, shape.num_tokens
        comp = mem = 0.0
        for op, (k, n) in self.gemms.items():
            flops = 2.0 * T * k * n
            byts = k * n * self.wb + T * (k + n) * ACT_BYTES
            t = L * self.gemm_time(op, T)
            if flops / self.gemm_peak >= byts / self.mem_bw:
                comp += t
            else:
                mem += t
        times = self.op_times(shape)
        comp += times["attention_prefill"]
        mem += times["attention_decode"] + times["elementwise"] + times["lm_head"]
        other = times["all_reduce"] + times["cpu_overhead"]
        tot = comp + mem + other
        return {"compute_bound": comp / tot, "memory_bound": mem / tot, "overhead": other / tot}
