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

from dataclasses import dataclass, field

import numpy as np

from simulator.catalog.hardware import GPUSpec
from simulator.catalog.models import ModelSpec, _dtype_bytes
from simulator.perf.step_shape import StepShape

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
        #: seconds of the smallest kernel replayed from a CUDA graph (no CPU launch gap): the
        #: datasheet default per-kernel overhead unless a measured table set gives its own
        #: (:meth:`simulator.perf.tables.sets.TableSet.graph_kernel_floor_s`)
        self.graph_kernel_floor_s = self.params.kernel_overhead_s
        self.weight_dtype, self.kv_cache_dtype = weight_dtype, kv_cache_dtype
        self.wb = _dtype_bytes(weight_dtype)
        self.kvb = _dtype_bytes(kv_cache_dtype)
        m, tp = model, self.tp
        L = m.num_layers
        q_heads, kv_heads, head_dim = m.attention_heads(tp)
        self.q_heads = m.num_attention_heads / tp
        self.kv_heads = kv_heads
        self.gemm_peak = gpu.flops_per_s(weight_dtype) * self.params.gemm_compute_efficiency
        self.attn_peak = gpu.bf16_flops_per_s * self.params.attention_compute_efficiency
        self.mem_bw = gpu.hbm_bandwidth_bytes_per_s * self.params.memory_efficiency
        h = m.hidden_size
        # GEMM shapes (k, n) per GPU and how many layers run each (ModelSpec.dense_gemm_shapes)
        shapes = dict(m.dense_gemm_shapes(tp))
        #: MLA: ``kv_b_proj`` expands the latents of prefill chunks (context + new tokens)
        self.kv_b_proj = shapes.pop("kv_b_proj", None)
        self.gemms = shapes
        self.gemm_layers = {op: (m.num_dense_layers if op.startswith("mlp") else L)
                            for op in self.gemms}
        #: MoE layers: routed experts (per-expert shapes), shared experts, router
        self.moe = m.moe_shape(tp, 1) if m.is_moe else None
        self.expert_gemms = {}
        if self.moe:
            ei, si = self.moe["expert_intermediate_per_rank"], self.moe[
                "shared_intermediate_per_rank"]
            self.expert_gemms = {"mlp_gate_up": (h, 2 * ei), "mlp_down": (ei, h)}
            self.shared_gemms = ({"shared_gate_up": (h, 2 * si), "shared_down": (si, h)}
                                 if si else {})
            self.router_gemm = (h, m.num_experts)
        self.mla = m.attention_kind == "mla"
        if self.mla:
            hq, qk, vd = m.mla_prefill_heads(tp)
            #: attention FLOPs per (query, key) pair and head are ``2 (d_qk + d_v)``: an
            #: effective ``d`` of ``(d_qk + d_v) / 2`` in the ``4 d`` formula below
            self.attn_d_prefill = (qk + vd) / 2.0
            self.attn_d_decode = (head_dim + m.kv_lora_rank) / 2.0
            self.mla_bmms = m.mla_absorbed_bmm_shapes(tp)
        else:
            self.attn_d_prefill = self.attn_d_decode = float(head_dim)
            self.mla_bmms = {}
        self.ep = 1
        self.ep_skew = 1.0  # busiest EP rank's expert load over the mean (1 = uniform)
        self.kv_bytes_per_token_layer = m.kv_bytes_per_token(kv_cache_dtype, tp) / L
        #: (window or None, layers): sliding-window layers attend at most ``window`` tokens
        self.attn_groups = m.attention_layer_groups()
        self._decode_cache: dict[int, tuple[float, float, float, float]] = {}

    def with_expert_parallel(self, ep: int, skew: float = 1.0):
        """Split the MoE layers' experts over ``ep`` GPUs (vLLM ``--enable-expert-parallel``;
        returns ``self``). Each rank then holds ``E / ep`` whole experts and, per MoE layer,
        processes the expert rows of the whole EP group's tokens routed to them: with every
        data-parallel rank as loaded as this one (the balanced assumption), ``T_group = T x ep
        / TP`` tokens, ``T x topk x TP / TP`` local expert rows; the tokens travel by an
        all-gather and a reduce-scatter of ``T_group x hidden`` activations (vLLM's default
        ``allgather_reducescatter`` all2all backend). ``skew >= 1``: the busiest rank's expert
        rows over the mean (:mod:`simulator.topology.expert`); the step waits for it, so the
        expert GEMMs cost ``skew`` times the balanced rows (the gathered activations, the same
        for every rank, do not change)."""
        ep = int(ep)
        if not skew >= 1.0:
            raise ValueError(f"cluster.expert_load_skew must be >= 1 (1 = uniform), got {skew}")
        self.ep_skew = float(skew)
        fb = getattr(self, "fallback", None)
        if fb is not None and fb is not self:
            fb.ep_skew = float(skew)
        if ep <= 1 or not self.moe:
            return self
        m, h = self.model, self.model.hidden_size
        self.ep = ep
        self.moe = m.moe_shape(self.tp, ep)
        ei = self.moe["expert_intermediate_per_rank"]
        self.expert_gemms = {"mlp_gate_up": (h, 2 * ei), "mlp_down": (ei, h)}
        return self

    def group_tokens(self, num_tokens: int) -> int:
        """Tokens of the whole EP group in a step (balanced data-parallel ranks)."""
        return int(num_tokens) * self.ep // self.tp if self.ep > 1 else int(num_tokens)

    def ep_comm_time(self, num_tokens: int) -> float:
        """All-gather + reduce-scatter of the EP group's activations for one MoE layer
        (0 without expert parallelism); ring alpha-beta model of the link: each moves
        ``(p - 1) / p x bytes`` per GPU in ``p - 1`` hops."""
        if self.ep <= 1 or num_tokens <= 0:
            return 0.0
        byts = self.group_tokens(num_tokens) * self.model.hidden_size * ACT_BYTES
        return 2.0 * self._ring_time(byts, self.ep, steps=1)

    def host_staged(self) -> bool:
        """Whether the GPUs reach each other only through host memory: a PCIe link without
        peer-to-peer, or no GPU link (vLLM then turns its custom all-reduce off and NCCL
        stages every transfer through host memory)."""
        g = self.gpu
        kind = g.link_kind if hasattr(g, "link_kind") else "nvlink"
        p2p = bool(getattr(g, "p2p", None)) or kind == "nvlink"
        return not (kind in ("nvlink", "infiniband") or (kind == "pcie" and p2p))

    def _link(self) -> tuple[float, float]:
        """(bandwidth per direction, per-hop latency) of the GPU link (see all_reduce_time)."""
        g, prm = self.gpu, self.params
        stated = getattr(g, "link_stated", False)
        stated_bw = getattr(g, "link_bandwidth_stated", stated)
        if self.host_staged():
            # NCCL through host memory: each byte crosses the PCIe link twice (GPU -> host,
            # host -> GPU): half the link's rate; the scenario's stated PCIe rate is an
            # achieved figure (no efficiency), the spec's host link a datasheet one
            if stated and stated_bw and g.interconnect_bandwidth_bytes_per_s > 0:
                bw = g.interconnect_bandwidth_bytes_per_s / 2.0
            else:
                bw = g.host_link_bandwidth_bytes_per_s / 2.0 * prm.interconnect_efficiency
        elif stated and g.interconnect_bandwidth_bytes_per_s > 0:
            bw = g.interconnect_bandwidth_bytes_per_s
        else:
            bw = (g.interconnect_bandwidth_bytes_per_s or g.host_link_bandwidth_bytes_per_s) \
                * prm.interconnect_efficiency
        alpha = getattr(g, "interconnect_latency_s", 0.0) or prm.all_reduce_latency_s
        return bw, alpha

    def host_staged_note(self) -> str | None:
        """The all-reduce's provenance on a host-staged link (None on NVLink, InfiniBand or
        PCIe with peer-to-peer, or at TP=1): what the link model prices, and that the factor
        is not a measurement."""
        if self.tp <= 1 or not self.host_staged():
            return None
        bw, alpha = self._link()
        kind = self.gpu.link_kind if hasattr(self.gpu, "link_kind") else "pcie"
        path = "PCIe without P2P" if kind == "pcie" else f"no GPU peer-to-peer link ({kind})"
        return (f"link model, {path}: vLLM's custom all-reduce off, NCCL through host memory "
                f"at half the link rate ({bw / 1e9:g} GB/s per direction, {alpha * 1e6:g} us "
                "per hop); the factor 1/2 is an assumption, not a measurement of this node "
                "(an NCCL maintainer quotes 6-9 GB/s through host memory against 12 GB/s "
                "within a PCIe switch, NVIDIA/nccl#406; other platforms measure the host path "
                "as fast as P2P or faster, NVIDIA/nccl-tests#74, NVIDIA/nccl#1817)")

    def _ring_time(self, byts: float, p: int, steps: int) -> float:
        """``steps`` ring phases over ``p`` GPUs: ``steps (p-1) (alpha + bytes / (p B))``."""
        bw, alpha = self._link()
        return steps * (p - 1) * (alpha + byts / (p * bw))

    # ------------------------------------------------------------------ operators (per layer)
    def gemm_kn_time(self, m_rows: int, k: int, n: int) -> float:
        """Seconds of one ``m_rows x k`` by ``k x n`` GEMM (weights ``k x n``), one GPU."""
        flops = 2.0 * m_rows * k * n
        byts = k * n * self.wb + m_rows * (k + n) * ACT_BYTES
        return max(flops / self.gemm_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def gemm_time(self, op: str, num_tokens: int) -> float:
        """Seconds for GEMM ``op`` over ``num_tokens`` rows, one layer, one GPU (the routed
        experts' projection for ``mlp_*`` of a model without dense MLP layers)."""
        if op not in self.gemms and op in self.expert_gemms:
            return self._moe_time(op, num_tokens)
        k, n = self.gemms[op]
        return self.gemm_kn_time(num_tokens, k, n)

    def _moe_time(self, op: str, num_tokens: int) -> float:
        """Routed experts' projection ``op`` over ``num_tokens`` tokens: ``topk`` expert rows per
        token; weights of the experts touched (expected number for uniform routing,
        ``E (1 - (1 - topk / E) ** tokens)``) are read once."""
        m = self.model
        k, n = self.expert_gemms[op]
        e, topk = m.num_experts, m.experts_per_token
        tg = self.group_tokens(num_tokens)
        local = e / self.ep
        touched = local * (1.0 - (1.0 - topk / e) ** tg)
        rows = tg * topk / self.ep * self.ep_skew  # expert rows of the busiest rank
        flops = 2.0 * rows * k * n
        byts = touched * k * n * self.wb + rows * (k + n) * ACT_BYTES
        return max(flops / self.gemm_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def moe_layer_time(self, num_tokens: int) -> float:
        """One MoE layer: routed experts (both projections), shared experts and router GEMM."""
        if not self.moe or num_tokens <= 0:
            return 0.0
        t = self._moe_time("mlp_gate_up", num_tokens) + self._moe_time("mlp_down", num_tokens)
        for k, n in self.shared_gemms.values():
            t += self.gemm_kn_time(num_tokens, k, n)
        k, n = self.router_gemm
        return t + self.gemm_kn_time(num_tokens, k, n)

    def token_terms(self, T: int, graph: bool = False) -> dict[str, float]:
        """Operator times of a step that depend only on its token count, summed over layers:
        each GEMM x the layers that run it, ``moe`` (MoE layers), ``elementwise`` and
        ``all_reduce`` (two per layer)."""
        L = self.model.num_layers
        out = {op: self.gemm_layers[op] * self.gemm_time(op, T) for op in self.gemms}
        if self.moe:
            out["moe"] = self.moe["num_moe_layers"] * self.moe_layer_time(T)
            if self.ep > 1:
                out["ep_comm"] = self.moe["num_moe_layers"] * self.ep_comm_time(T)
        out["elementwise"] = L * self.elementwise_time(T, graph)
        out["all_reduce"] = 2 * L * self.all_reduce_time(T, graph=graph)
        return out

    def attention_prefill_total(self, prefill_q, prefill_start) -> float:
        """Prefill attention of a step's chunks summed over layers (sliding-window layers
        attend to at most ``window`` keys)."""
        t = 0.0
        for w, n in self.attn_groups:
            sub = 0.0
            for q, s in zip(prefill_q, prefill_start):
                q, s = int(q), int(s)
                if w is not None:
                    s = min(s, max(w - q, 0))
                sub += self.attn_prefill_time(q, s)
            t += n * sub
        return t

    def decode_attention(self):
        """Decode attention priced point by point in the compiled core
        (:class:`~simulator.perf.step_times.DecodeAttention`), or None: the datasheet
        roofline has none (a measured table's backend does)."""

    def attention_decode_total(self, num_seqs: int, ctx_total, q_per_seq: int = 1):
        """Decode attention summed over layers; ``ctx_total`` may be an array (steps). A
        sliding-window layer attends to at most ``num_seqs x window`` tokens in all."""
        out = 0.0
        if not isinstance(ctx_total, np.ndarray):  # one step (a mixed one): Python floats,
            for w, n in self.attn_groups:         # the same IEEE operations in the same order
                c = ctx_total if w is None else min(ctx_total, num_seqs * w)
                out = out + n * float(self.attn_decode_time(num_seqs, c, q_per_seq))
            return out
        for w, n in self.attn_groups:
            c = ctx_total if w is None else np.minimum(ctx_total, num_seqs * w)
            out = out + n * np.asarray(self.attn_decode_time(num_seqs, c, q_per_seq), dtype=float)
        return out if np.ndim(ctx_total) else float(out)

    def mla_extra_time(self, prefill_q, prefill_start, num_decode_tokens: int) -> float:
        """MLA only (0 otherwise): ``kv_b_proj`` over each prefill chunk's latents (context +
        new tokens) and the absorbed per-head GEMMs of the decode tokens, summed over layers."""
        if not self.mla:
            return 0.0
        L = self.model.num_layers
        t = 0.0
        k, n = self.kv_b_proj
        for q, s in zip(prefill_q, prefill_start):
            t += self.gemm_kn_time(int(q) + int(s), k, n)
        if num_decode_tokens:
            for hq, k2, n2 in self.mla_bmms.values():
                flops = 2.0 * num_decode_tokens * hq * k2 * n2
                byts = hq * k2 * n2 * self.wb + num_decode_tokens * hq * (k2 + n2) * ACT_BYTES
                t += max(flops / self.gemm_peak, byts / self.mem_bw) + self.params.kernel_overhead_s
        return L * t

    def attn_prefill_time(self, q: int, start: int) -> float:
        """Seconds for causal attention of a ``q``-token chunk after ``start`` cached tokens."""
        pairs = q * start + q * (q + 1) / 2.0
        d = self.attn_d_prefill
        flops = 4.0 * d * self.q_heads * pairs
        byts = (start + q) * self.kv_bytes_per_token_layer + 2 * q * self.q_heads * d * ACT_BYTES
        return max(flops / self.attn_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def attn_decode_time(self, num_seqs: int, ctx_total, q_per_seq: int = 1):
        """Seconds for decode attention of ``num_seqs`` sequences over ``ctx_total`` tokens.

        ``ctx_total`` may be a numpy array (vectorised over steps).
        """
        d = self.attn_d_decode
        flops = 4.0 * d * self.q_heads * q_per_seq * np.asarray(ctx_total, dtype=float)
        byts = (np.asarray(ctx_total, dtype=float) * self.kv_bytes_per_token_layer
                + 2 * num_seqs * q_per_seq * self.q_heads * d * ACT_BYTES)
        return np.maximum(flops / self.attn_peak, byts / self.mem_bw) + self.params.kernel_overhead_s

    def elementwise_time(self, num_tokens: int, graph: bool = False) -> float:
        """Norms, rotary, activation and residual adds (memory bound), one layer: four
        kernels (``graph`` does not change the datasheet form, whose per-kernel overhead is
        already a graph-replay-sized 2 us)."""
        h = self.model.hidden_size
        inter = self.model.dense_mlp_intermediate_size // self.tp
        if self.moe:  # activations of the routed experts' inner width, topk rows per token
            inter = self.moe["topk"] * self.moe["expert_intermediate_per_rank"]
        byts = num_tokens * ACT_BYTES * (8 * h + 3 * inter)
        return byts / self.mem_bw + 4 * self.params.kernel_overhead_s

    def all_reduce_time(self, num_tokens: int, graph: bool = False) -> float:
        """One ring all-reduce of the hidden states of ``num_tokens`` tokens (0 when TP=1).

        Alpha-beta model of a ring over ``p`` GPUs (Patarasuk & Yuan 2009; Thakur, Rabenseifner
        & Gropp 2005): ``t = 2 (p - 1) alpha + 2 (p - 1) / p x bytes / B``, with ``alpha`` the
        link's per-hop latency (``interconnect_latency_s`` of the spec or the scenario, else
        ``all_reduce_latency_s``) and ``B`` the link's bandwidth per direction:

        - NVLink, or PCIe with peer-to-peer: the GPU-to-GPU link (``x interconnect_efficiency``
          for a datasheet figure);
        - PCIe without peer-to-peer (or no GPU link): vLLM's custom all-reduce is off and NCCL
          stages every transfer through host memory, so each byte crosses the PCIe link twice:
          ``host_link / 2`` (x efficiency), or ``stated / 2`` for a PCIe bandwidth the
          scenario states (an achieved figure, no efficiency factor). The factor 1/2 is an
          assumption, not a measurement; the provenance says so
          (:meth:`host_staged_note`);
        - a link the scenario states (``hardware.interconnect``) with peer-to-peer: its
          bandwidth as given (an achieved figure, no efficiency factor).
        """
        if self.tp <= 1:
            return 0.0
        byts = num_tokens * self.model.hidden_size * ACT_BYTES
        return self._ring_time(byts, self.tp, steps=2)

    def lm_head_time(self, num_rows: int) -> float:
        """LM head GEMM (+ sampling) for ``num_rows`` sampled positions."""
        if num_rows <= 0:
            return 0.0
        h, v = self.model.hidden_size, self.model.vocab_size // self.tp
        flops = 2.0 * num_rows * h * v
        byts = h * v * self.wb + num_rows * (h + v) * ACT_BYTES
        return max(flops / self.gemm_peak, byts / self.mem_bw) + 2 * self.params.kernel_overhead_s

    #: whether the GPU profile measured the engine's CPU time per step (a ``cpu_overhead``
    #: table, which an engine profile with ``cpu_from_profile`` reads): not the datasheet's
    has_cpu_overhead_table = False

    def cpu_overhead_time(self, num_seqs: int) -> float:
        """Per-iteration engine CPU time (scheduling, input preparation, sampling)."""
        return self.params.cpu_overhead_base_s + self.params.cpu_overhead_per_seq_s * num_seqs

    # ------------------------------------------------------------------ whole steps
    def _token_terms(self, T: int) -> dict[str, float]:
        """:meth:`token_terms` memoised per token count (eager: no graph backend)."""
        cache = self.__dict__.setdefault("_tok_cache", {})
        hit = cache.get(T)
        if hit is None:
            hit = self.token_terms(T)
            if len(cache) < 65536:
                cache[T] = hit
        return hit

    def op_times(self, shape: StepShape) -> dict[str, float]:
        """Seconds per operator class for one step (summed over layers)."""
        T = shape.num_tokens
        out = dict(self._token_terms(T)) if T else {}
        out["attention_prefill"] = self.attention_prefill_total(shape.prefill_q,
                                                                shape.prefill_start)
        out["attention_decode"] = (self.attention_decode_total(
            shape.num_decode, shape.decode_ctx_total, shape.decode_q_per_seq)
            if shape.num_decode else 0.0)
        if self.mla:
            out["mla"] = self.mla_extra_time(shape.prefill_q, shape.prefill_start,
                                             shape.num_decode * shape.decode_q_per_seq)
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
            fixed = (float(sum(self._token_terms(num_seqs).values()))
                     + self.mla_extra_time((), (), num_seqs)
                     + self.lm_head_time(num_seqs) + self.cpu_overhead_time(num_seqs))
            c = (fixed,)
            self._decode_cache[num_seqs] = c
        return c[0] + self.attention_decode_total(num_seqs, ctx_totals)

    def provenance(self) -> dict[str, str]:
        """Operator class -> provenance label (``measured``, ``fitted`` or ``datasheet``); a
        host-staged all-reduce names its assumption (:meth:`host_staged_note`)."""
        prov = dict(self.params.provenance)
        note = self.host_staged_note()
        if note is not None:
            prov["all_reduce"] = note
        return prov

    def bottleneck_shares(self, shape: StepShape) -> dict[str, float]:
        """Share of step time in compute-bound vs memory-bound operators and overheads."""
        T = shape.num_tokens
        times = self.op_times(shape)
        comp, mem = self.split_gemm_bound(times, T)
        comp += times["attention_prefill"]
        mem += (times["attention_decode"] + times["elementwise"] + times["lm_head"]
                + times.get("mla", 0.0))
        other = times["all_reduce"] + times.get("ep_comm", 0.0) + times["cpu_overhead"]
        tot = comp + mem + other
        return {"compute_bound": comp / tot, "memory_bound": mem / tot, "overhead": other / tot}

    def split_gemm_bound(self, times: dict, T: int) -> tuple[float, float]:
        """(compute-bound, memory-bound) seconds of the GEMM and MoE entries of ``times``,
        by which roofline bound each operator hits at ``T`` tokens."""
        comp = mem = 0.0
        for op, (k, n) in self.gemms.items():
            flops = 2.0 * T * k * n
            byts = k * n * self.wb + T * (k + n) * ACT_BYTES
            if flops / self.gemm_peak >= byts / self.mem_bw:
                comp += times.get(op, 0.0)
            else:
                mem += times.get(op, 0.0)
        if self.moe:
            k, n = self.expert_gemms["mlp_gate_up"]
            topk, e = self.moe["topk"], self.model.num_experts
            touched = e * (1.0 - (1.0 - topk / e) ** max(T, 0))
            if 2.0 * T * topk * k * n / self.gemm_peak >= touched * k * n * self.wb / self.mem_bw:
                comp += times.get("moe", 0.0)
            else:
                mem += times.get("moe", 0.0)
        return comp, mem
