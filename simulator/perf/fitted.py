"""Roofline efficiencies fitted to public GPU operator measurements (no torch).

``hardware_profiles/<gpu>/fitted.yaml`` holds parameters that ``calibration/fit_vidur.py``
fitted to the per-operator latencies Vidur published for A100-80GB and H100-80GB
(Agrawal et al., "Vidur: A Large-Scale Simulation Framework for LLM Inference", MLSys 2024;
github.com/microsoft/vidur commit 7d47513, MIT license; ``data/profiling/compute/<sku>/*/mlp.csv``,
``data/profiling/network/<node>/all_reduce.csv`` and, for A100 attention, the older
``data/profiling/a100/attention.csv``). Only the fitted parameters ship with servesim.

Every form is a function of the operator's *shape* (tokens, GEMM ``k`` x ``n``, bytes, TP
degree), not of the model it was measured on, so the fits apply to any dense model and TP
degree. Forms (times in seconds; ``smax_p(a, b) = (a^p + b^p)^(1/p)``, a smooth maximum):

GEMM (``m`` tokens, ``k`` inputs, ``n`` outputs, peak FLOP/s ``P``, HBM bytes/s ``W``)::

    F = 2 m k n                      B = wb k n + ab m (k + n)
    e_c = e_max * m / (m + m_half) * wave(m, n) ** gamma
    wave = tiles / (ceil(tiles / num_sms) * num_sms),  tiles = ceil(m/256) ceil(n/128)
    t = smax_p(t0_c + F / (P e_c),  t0_m + B / (W e_m))

Elementwise op (bytes moved ``B``)::  ``t = smax_p(t0, B / (W e))``

All-reduce over ``p`` GPUs of ``b`` bytes (link bytes/s ``N`` per direction)::

    t = smax_q(t0 * (p - 1) ** alpha,  2 (p - 1) / p * b / (N e))

Decode attention (``B`` sequences, ``S`` context tokens in total, ``kv`` KV bytes/token/layer)::

    t = t0 + t_seq B + smax_p(...)  ->  t0 + t_seq B + S kv / (W e)   (smooth, see code)

Prefill attention (chunk of ``q`` tokens after ``s`` cached, ``cbar = s + (q + 1)/2``)::

    t = t0 + F / (P e_max * cbar / (cbar + c_half) * q / (q + q_half))
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

from simulator.base.resources import not_text_reason, not_yaml_reason, safe_load_yaml
from simulator.catalog.hardware import GPUSpec
from simulator.catalog.models import ModelSpec
from simulator.perf.roofline import ACT_BYTES, RooflineParams, RooflinePerfModel

#: simulator GEMM op name -> fitted-parameter key
GEMM_KEYS = {"qkv_proj": "qkv", "o_proj": "o", "mlp_gate_up": "up", "mlp_down": "down"}
#: elementwise ops of one Llama layer and how often each runs per layer, as Vidur's profile
#: timed them (eager PyTorch: norm and residual add apart)
ELEMENTWISE_OPS = {"rmsnorm": 2, "rope": 1, "act": 1, "add": 2}
#: the same work as vLLM runs it inside a captured CUDA graph: two fused residual-add + RMSNorm
#: kernels (vLLM ``RMSNorm.forward(x, residual)``, ``fused_add_rms_norm`` or its torch.compile
#: fusion, in ``LlamaDecoderLayer``), one rotary kernel and one SiLU-and-mul kernel
#: (``SiluAndMul``): op -> (kernels per layer, fitted form whose bandwidth efficiency prices it)
GRAPH_ELEMENTWISE_KERNELS = {"add_rmsnorm": (2, "rmsnorm"), "rope": (1, "rope"),
                             "act": (1, "act")}
WAVE_TILE_M, WAVE_TILE_N = 256, 128
FITTED_FILE = "fitted.yaml"


def smooth_max(a, b, p):
    """``(a^p + b^p)^(1/p)`` computed without overflow (``a, b >= 0``, ``p > 0``).

    Two Python floats are answered in Python floats: the same operations as numpy's on
    scalars (its scalar power is the C library's ``pow``, as Python's), the same bits (checked
    on 300,000 random triples), at a seventh of the cost of numpy's per-call overhead.
    """
    if type(a) is float and type(b) is float and a >= 0.0 and b >= 0.0:
        m = max(a, b, 1e-300)
        try:
            return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)
        except OverflowError:  # a tiny p: numpy's answer (inf) below
            pass
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    m = np.maximum(np.maximum(a, b), 1e-300)
    return m * ((a / m) ** p + (b / m) ** p) ** (1.0 / p)


def wave_efficiency(m, n, num_sms: int):
    """Fraction of the last wave of output tiles that is busy (``ceil`` tile quantisation)."""
    tiles = np.ceil(np.asarray(m, dtype=float) / WAVE_TILE_M) * np.ceil(
        np.asarray(n, dtype=float) / WAVE_TILE_N)
    return tiles / (np.ceil(tiles / num_sms) * num_sms)


def gemm_form(prm: dict, m, k, n, peak_flops: float, bw: float, num_sms: int,
              weight_bytes: float = 2.0, act_bytes: float = ACT_BYTES):
    """Fitted GEMM time in seconds (vectorised over ``m``, ``k``, ``n``).

    Parameters
    ----------
    prm : dict
        ``t0_c, t0_m`` (s), ``e_max, e_mem`` (fractions), ``m_half`` (tokens), ``gamma``, ``p``.
    m, k, n : array_like
        Tokens, input and output features (per GPU).
    peak_flops, bw : float
        Datasheet peak FLOP/s and HBM bytes/s.
    num_sms : int
        Streaming multiprocessors (wave quantisation).
    """
    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    ec = prm["e_max"] * m / (m + prm["m_half"]) * wave_efficiency(m, n, num_sms) ** prm["gamma"]
    flops = 2.0 * m * k * n
    byts = weight_bytes * k * n + act_bytes * m * (k + n)
    return smooth_max(prm["t0_c"] + flops / (peak_flops * ec),
                      prm["t0_m"] + byts / (bw * prm["e_mem"]), prm["p"])


def elementwise_bytes(model: ModelSpec, tp: int, num_tokens, act_bytes: float = ACT_BYTES) -> dict:
    """Bytes moved by each elementwise op of one layer for ``num_tokens`` tokens (per GPU).

    RMSNorm reads and writes ``h``; rotary reads and writes the Q and K heads; the SwiGLU
    activation reads gate and up (``2 I / TP``) and writes ``I / TP``; a residual add reads two
    and writes one ``h`` vector.
    """
    # a scalar stays a Python float (the products are the same in either)
    t = (float(num_tokens) if isinstance(num_tokens, (int, float, np.integer, np.floating))
         else np.asarray(num_tokens, dtype=float))
    h, d = model.hidden_size, model.head_dim
    q_heads = model.num_attention_heads / tp
    kv_heads = max(1, math.ceil(model.num_kv_heads / tp))
    inter = model.intermediate_size / tp
    return {"rmsnorm": t * act_bytes * 2 * h,
            "rope": t * act_bytes * 2 * (q_heads + kv_heads) * d,
            "act": t * act_bytes * 3 * inter,
            "add": t * act_bytes * 3 * h,
            # fused residual add + RMSNorm: reads x and the residual, writes both
            "add_rmsnorm": t * act_bytes * 4 * h}


def elementwise_form(prm: dict, byts, bw: float):
    """Fitted time of one elementwise kernel moving ``byts`` bytes (``t0``, ``e``, ``p``)."""
    if type(byts) is float and bw * prm["e"] > 0:  # one kernel: Python floats (smooth_max)
        return smooth_max(float(prm["t0"]), byts / (bw * prm["e"]), prm["p"])
    return smooth_max(np.full_like(np.asarray(byts, dtype=float), prm["t0"]),
                      np.asarray(byts, dtype=float) / (bw * prm["e"]), prm["p"])


def all_reduce_form(prm: dict, byts, num_gpus, link_bw: float):
    """Fitted all-reduce time (``t0`` s, ``alpha``, ``e``, ``q``) of ``byts`` over ``num_gpus``."""
    p = np.asarray(num_gpus, dtype=float)
    byts = np.asarray(byts, dtype=float)
    lat = prm["t0"] * (p - 1.0) ** prm["alpha"]
    wire = 2.0 * (p - 1.0) / p * byts / (link_bw * prm["e"])
    return smooth_max(lat + 0 * wire, wire, prm["q"])


def attn_decode_form(prm: dict, num_seqs, ctx_total, kv_bytes_per_token: float, bw: float):
    """Fitted decode-attention time (``t0, t_seq`` s, ``e``, ``p``)."""
    b = np.asarray(num_seqs, dtype=float)
    s = np.asarray(ctx_total, dtype=float)
    fixed = prm["t0"] + prm["t_seq"] * b
    return smooth_max(fixed + 0 * s, s * kv_bytes_per_token / (bw * prm["e"]), prm["p"])


def attn_prefill_form(prm: dict, q, start, head_dim: int, q_heads: float, peak_flops: float):
    """Fitted prefill-attention time (``t0`` s, ``e_max``, ``c_half``, ``q_half``)."""
    q = np.maximum(np.asarray(q, dtype=float), 1.0)
    s = np.asarray(start, dtype=float)
    flops = 4.0 * head_dim * q_heads * (q * s + q * (q + 1) / 2.0)
    cbar = s + (q + 1) / 2.0
    eff = prm["e_max"] * cbar / (cbar + prm["c_half"]) * q / (q + prm["q_half"])
    return prm["t0"] + flops / (peak_flops * eff)


# ---------------------------------------------------------------------------- loading
def load_fitted_profile(gpu: GPUSpec) -> dict | None:
    """The parsed ``fitted.yaml`` of ``gpu``'s profile folder, or None when there is none.

    Raises
    ------
    ValueError
        If the file exists but is not a valid fitted-parameter document.
    """
    if gpu.profile_dir is None:
        return None
    p = Path(gpu.profile_dir) / FITTED_FILE
    if not p.is_file():
        return None
    try:
        doc = safe_load_yaml(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ValueError(not_yaml_reason(p, e)) from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: {not_text_reason(e)}; a fitted profile is YAML text") from None
    ops = doc.get("operators") if isinstance(doc, dict) else None
    if not ops or not hasattr(ops, "get"):
        raise ValueError(f"{p}: a fitted profile needs an 'operators' mapping")
    doc["_path"] = str(p)
    return doc


class FittedPerfModel(RooflinePerfModel):
    """Roofline model whose efficiencies are the fitted, size-dependent forms of ``fitted.yaml``.

    Operator classes the fit covers are labelled ``fitted (<source>)`` in :meth:`provenance`;
    the others keep the datasheet roofline of :class:`RooflinePerfModel`.

    Parameters
    ----------
    model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype, params
        As for :class:`RooflinePerfModel`.
    fitted : dict
        Parsed ``fitted.yaml`` (:func:`load_fitted_profile`).
    """

    kind = "fitted"

    def __init__(self, model: ModelSpec, gpu: GPUSpec, tensor_parallel_size: int = 1,
                 weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16",
                 params: RooflineParams | None = None, fitted: dict | None = None):
        super().__init__(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype, params)
        self.fitted = fitted or {}
        ops = self.fitted.get("operators", {})
        self._gemm = ops.get("gemm") or {}
        self._ew = ops.get("elementwise") or {}
        self._ar = ops.get("all_reduce") or None
        self._ad = ops.get("attention_decode") or None
        self._ap = ops.get("attention_prefill") or None
        self.num_sms = int(self.fitted.get("num_sms", 108))
        self._peak = gpu.flops_per_s(weight_dtype)
        self._bw = gpu.hbm_bandwidth_bytes_per_s
        src = self.fitted.get("source_short", "Vidur MLSys 2024 measurements")
        prov = dict(self.params.provenance)
        note = "" if weight_dtype in ("bf16", "fp16") else f"; bf16 fit applied to {weight_dtype}"
        if self._gemm:
            prov["gemm"] = f"fitted ({src}{note})"
            prov["lm_head"] = f"fitted (GEMM form from {src}; LM-head shape not in the data)"
        if self._ew:
            prov["elementwise"] = f"fitted ({src})"
        if self.tp <= 1:
            prov["all_reduce"] = "none (TP=1)"
        elif self.host_staged_note() is not None:  # the link model prices it (all_reduce_time)
            prov["all_reduce"] = self.host_staged_note()
        elif self._ar:
            prov["all_reduce"] = f"fitted ({self._ar.get('source', src)})"
        if self._ad:
            prov["attention_decode"] = f"fitted ({self._ad.get('source', src)})"
        if self._ap:
            prov["attention_prefill"] = f"fitted ({self._ap.get('source', src)})"
        self._prov = prov

    def _gemm_params(self, op: str) -> dict | None:
        return self._gemm.get(GEMM_KEYS.get(op, "any")) or self._gemm.get("any")

    def gemm_time(self, op: str, num_tokens: int) -> float:
        prm = self._gemm_params(op)
        if prm is None or (op.startswith("mlp") and self.model.num_experts):
            return super().gemm_time(op, num_tokens)
        k, n = self.gemms[op]
        return float(gemm_form(prm, num_tokens, k, n, self._peak, self._bw, self.num_sms,
                               weight_bytes=self.wb))

    def lm_head_time(self, num_rows: int) -> float:
        prm = self._gemm.get("any")
        if num_rows <= 0 or prm is None:
            return super().lm_head_time(num_rows)
        h, v = self.model.hidden_size, self.model.vocab_size // self.tp
        return float(gemm_form(prm, num_rows, h, v, self._peak, self._bw, self.num_sms,
                               weight_bytes=self.wb)) + self.params.kernel_overhead_s

    def elementwise_time(self, num_tokens: int, graph: bool = False) -> float:
        """Elementwise kernels of one layer (seconds).

        Eager (``graph`` False): the fitted forms of Vidur's eager profile, its six ops. Inside
        a replayed CUDA graph: vLLM's four kernels (:data:`GRAPH_ELEMENTWISE_KERNELS`), each
        ``max(floor, bytes / (W e))`` with the fitted bandwidth efficiency ``e`` and the
        graph-replay floor of a minimal kernel (:attr:`graph_kernel_floor_s`): no CPU launch
        gap, which Vidur's per-op eager timings include (its fitted floors ``t0`` are
        1.9-5.6 us per op against 2.4-2.6 us for the smallest GEMMs that aiconfigurator timed
        under CUDA graphs on the same GPUs).
        """
        if not self._ew:
            return super().elementwise_time(num_tokens, graph)
        byts = elementwise_bytes(self.model, self.tp, num_tokens)
        total = 0.0
        if graph:
            floor = self.graph_kernel_floor_s
            for op, (count, form) in GRAPH_ELEMENTWISE_KERNELS.items():
                prm = self._ew.get(form)
                e = prm["e"] if prm is not None else self.params.memory_efficiency
                total += count * max(floor, float(byts[op]) / (self._bw * e))
            return total
        for op, count in ELEMENTWISE_OPS.items():
            prm = self._ew.get(op)
            if prm is None:
                continue
            total += count * float(elementwise_form(prm, byts[op], self._bw))
        return total

    def all_reduce_time(self, num_tokens: int, graph: bool = False) -> float:
        if self.tp <= 1:
            return 0.0
        if self._ar is None or getattr(self.gpu, "link_stated", False) or self.host_staged():
            return super().all_reduce_time(num_tokens)
        byts = num_tokens * self.model.hidden_size * ACT_BYTES
        bw = self.gpu.interconnect_bandwidth_bytes_per_s or self.gpu.host_link_bandwidth_bytes_per_s
        return float(all_reduce_form(self._ar, byts, self.tp, bw))

    def attn_decode_time(self, num_seqs: int, ctx_total, q_per_seq: int = 1):
        if self._ad is None:
            return super().attn_decode_time(num_seqs, ctx_total, q_per_seq)
        t = attn_decode_form(self._ad, num_seqs, ctx_total, self.kv_bytes_per_token_layer, self._bw)
        if q_per_seq > 1:  # draft verification: add the roofline's extra cost of the extra queries
            t = t + (super().attn_decode_time(num_seqs, ctx_total, q_per_seq)
                     - super().attn_decode_time(num_seqs, ctx_total, 1))
        return t if np.ndim(ctx_total) else float(t)

    def attn_prefill_time(self, q: int, start: int) -> float:
        if self._ap is None:
            return super().attn_prefill_time(q, start)
        return float(attn_prefill_form(self._ap, q, start, self.model.head_dim, self.q_heads,
                                       self.gpu.bf16_flops_per_s))

    def provenance(self) -> dict[str, str]:
        return dict(self._prov)


def build_fitted_or_roofline(model: ModelSpec, gpu: GPUSpec, tensor_parallel_size: int = 1,
                             weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16"):
    """:class:`FittedPerfModel` when ``gpu`` has a ``fitted.yaml``, else the datasheet roofline."""
    fitted = load_fitted_profile(gpu)
    if fitted is None:
        return RooflinePerfModel(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype)
    return FittedPerfModel(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype,
                           fitted=fitted)
