"""Operator backend from measured latency tables (table-first, DESIGN.md section 3).

For each operator of a step the backend asks the GPU profile's measured table set
(:mod:`simulator.perf.tables.sets`, one set per engine version: imported public measurements or
our harness's output) and falls back, per operator, to the fitted or datasheet roofline when
no table covers it; :meth:`MeasuredOps.provenance` names the source of every operator.

Shapes asked (per GPU of a TP group, one layer):

- GEMMs ``m = tokens`` x ``(k, n)`` of the model's projections (QKV, O, gate/up, down) and the
  LM head ``(hidden, vocab / TP)`` at ``m = sampled rows``;
- prefill attention per chunk: ``batch 1, q`` new tokens after ``start`` cached ones;
- decode attention: the batched paged kernel at ``(batch, mean context per sequence)``;
- TP all-reduce of ``tokens x hidden x 2`` bytes: vLLM's custom all-reduce (``graph`` backend
  when the step replays a CUDA graph, ``eager`` otherwise) when the link allows it (NVLink, or
  PCIe with peer-to-peer) and the message fits its buffer (8 MiB, vLLM ``CustomAllreduce``
  ``max_size``), else the NCCL all-reduce table, else the link model of the spec;
- MoE expert layers: the fused-MoE table by tokens and shape.
"""
from __future__ import annotations

import numpy as np

from simulator.perf.roofline import ACT_BYTES, RooflinePerfModel
from simulator.perf.step_times import DecodeAttention

#: vLLM custom all-reduce buffer size (bytes): larger messages go to NCCL
#: (vllm/distributed/device_communicators/custom_all_reduce.py, ``max_size=8192 * 1024``)
CUSTOM_ALLREDUCE_MAX_BYTES = 8192 * 1024

_DT = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}


#: Routing whose fused-MoE times stand in for balanced routing when a set measured no balanced
#: rows (aiconfigurator's vLLM 0.14.0 sets of A100, L40S and RTX PRO 6000 measure only power
#: laws 1.01 and 1.2). On the five sets that measure both at the same shapes (H100 0.14 / 0.19,
#: H200 0.14, RTX PRO 6000 0.19, L40S 0.22; 6,143-7,986 shapes each) power_law_1.01 / balanced
#: has a median of 0.983-1.005 (p10 0.76-0.86, p90 1.13-1.40; about 0.9 at 64 tokens, 1.07-1.14
#: at 8,192), and power_law_1.2 / balanced 0.996-1.014: the milder power law is the nearer
#: stand-in, and far nearer than the dense-MLP fit the model fell back to before (-25% on a
#: published Qwen3-235B-A22B TP8 A100 run, benchmarks/bench_public_summaries.py).
MOE_DISTRIBUTION_FALLBACK = "power_law_1.01"
MOE_FALLBACK_NOTE = (" (power_law_1.01 routing: the set measures no balanced routing; elsewhere "
                     "power_law_1.01 / balanced has a median of 0.98-1.01, p10-p90 0.76-1.40)")


def custom_allreduce_possible(gpu) -> bool:
    """vLLM's custom all-reduce needs NVLink or PCIe peer-to-peer between the GPUs."""
    # plain attributes (a GPUSpec always has them): a spec object without them fails loudly
    # instead of reading as "no NVLink, no P2P" (getattr defaults hid a missing SM count).
    # The kind, not a search of the free text: "PCIe Gen4 x16 (no NVLink, no P2P)" names NVLink
    return gpu.link_kind == "nvlink" or bool(gpu.p2p)


class MeasuredOps(RooflinePerfModel):
    """Per-operator times from a measured :class:`~simulator.perf.tables.sets.TableSet`.

    Parameters
    ----------
    model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype
        As for :class:`RooflinePerfModel` (``gpu``: the profile the tables belong to).
    tables : TableSet
    fallback : RooflinePerfModel
        Backend for operators the tables do not cover (fitted or datasheet roofline).
    """

    kind = "table"

    def __init__(self, model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype, tables,
                 fallback):
        super().__init__(model, gpu, tensor_parallel_size, weight_dtype, kv_cache_dtype,
                         params=fallback.params)
        self.tables = tables
        self.fallback = fallback
        self.wdt = _DT.get(weight_dtype, weight_dtype)
        self.kvdt = _DT.get(kv_cache_dtype, kv_cache_dtype)
        tp = self.tp
        qh, kvh, hd = model.attention_heads(tp)
        self._akey = dict(q_heads=qh, kv_heads=kvh, head_dim=hd, kv_dtype=self.kvdt)
        self._moe = bool(model.is_moe)
        ts = tables
        self._has_gemm = ts.has("gemm", dtype=self.wdt)
        # MLA attends over a latent (not a GQA head layout): its kernels are not in the GQA
        # attention tables, so it stays on the roofline (labelled)
        self._has_prefill = not self.mla and ts.has("attention_prefill", **self._akey)
        self._has_decode = not self.mla and ts.has("attention_decode", **self._akey)
        # a link the scenario states is not the node the tables were measured on
        stated = gpu.link_stated
        self._has_ar = tp > 1 and not stated and ts.has("all_reduce", num_gpus=tp)
        self._has_nccl = (tp > 1 and not stated
                          and ts.has("nccl", collective="all_reduce", num_gpus=tp))
        self._custom_ar = custom_allreduce_possible(gpu)
        # routing of the fused-MoE measurements: balanced where the set has it, else the least
        # skewed measured power law (MOE_DISTRIBUTION_FALLBACK; labelled in the provenance)
        self._moe_dist = next((d for d in ("balanced", MOE_DISTRIBUTION_FALLBACK)
                               if self._moe and ts.has("moe", dtype=self.wdt, distribution=d)),
                              None)
        self._has_moe = self._moe_dist is not None
        # elementwise tables are per model shape: use one only for this very shape (a nearest
        # other model's norms and activations are not this model's)
        h = model.hidden_size
        self._ew_key = dict(hidden=h, intermediate=model.dense_mlp_intermediate_size // tp,
                            q_heads=qh, kv_heads=kvh, head_dim=hd)
        self._has_ew = (not self._moe and ts.has("elementwise")
                        and not ts.nearest_note("elementwise", **self._ew_key))
        self._prefill_cache: dict = {}
        self._decode_attn: DecodeAttention | None = None
        if self._has_decode:
            tg = ts.attention_decode_grid(**self._akey)
            if sorted(tg.names) == ["batch", "ctx_mean"]:
                self._decode_attn = DecodeAttention(
                    tg.point, tg.names.index("ctx_mean"), tg.names.index("batch"),
                    [(0 if w is None else int(w), int(n)) for w, n in self.attn_groups],
                    self._decode_beyond)
        self._prov = self._build_provenance()

    # ---------------------------------------------------------------- provenance
    def _build_provenance(self) -> dict[str, str]:
        ts, fb = self.tables, self.fallback.provenance()
        prov = dict(fb)
        if self._has_gemm:
            prov["gemm"] = ts.label("gemm")
            prov["lm_head"] = ts.label("gemm") + " (GEMM hidden x vocab/TP)"
        if self._moe:
            prov["moe"] = ts.label("moe") if self._has_moe else fb.get("gemm", "datasheet")
            if self._moe_dist not in (None, "balanced"):
                prov["moe"] += MOE_FALLBACK_NOTE
        if self._has_prefill:
            prov["attention_prefill"] = ts.label("attention_prefill")
        if self._has_decode:
            prov["attention_decode"] = ts.label("attention_decode")
        if self._has_ew:
            prov["elementwise"] = ts.label("elementwise")
        if self.tp <= 1:
            prov["all_reduce"] = "none (TP=1)"
        elif self._has_ar and self._custom_ar:
            prov["all_reduce"] = ts.label("all_reduce") + (
                "; NCCL table above 8 MiB" if self._has_nccl else "")
        elif self._has_nccl:
            prov["all_reduce"] = ts.label("nccl") + " (NCCL: no P2P/NVLink for custom all-reduce)"
        elif self.host_staged_note() is not None:   # the link model of a host-staged path
            where = ("the scenario's stated link" if self.gpu.link_stated
                     else f"{self.gpu.name}'s spec")
            prov["all_reduce"] = f"{self.host_staged_note()} ({where})"
        elif self.gpu.link_stated:
            g = self.gpu
            prov["all_reduce"] = (f"link model of the scenario's stated link "
                                  f"({g.interconnect_bandwidth_bytes_per_s / 1e9:g} GB/s, "
                                  f"{g.interconnect_latency_s * 1e6:g} us per hop)")
        elif ts.efficiency_from:   # a sibling's link is not this GPU's
            g = self.gpu
            prov["all_reduce"] = (f"link model of {g.name}'s spec ({g.link_kind}, "
                                  f"{g.interconnect_bandwidth_bytes_per_s / 1e9:g} GB/s, "
                                  f"{g.interconnect_latency_s * 1e6:g} us per hop; "
                                  f"{ts.efficiency_from}'s communication tables not transferred)")
        prov.pop("cpu_overhead", None)
        return prov

    def provenance(self) -> dict[str, str]:
        return dict(self._prov)

    # ---------------------------------------------------------------- operators
    def gemm_kn_time(self, m_rows: int, k: int, n: int) -> float:
        if not self._has_gemm or m_rows <= 0:
            return self.fallback.gemm_kn_time(m_rows, k, n)
        return float(self.tables.gemm(int(m_rows), n, k, self.wdt))

    def _moe_time(self, op: str, num_tokens: int) -> float:
        return self.fallback._moe_time(op, num_tokens)

    def moe_layer_time(self, num_tokens: int) -> float:
        """One MoE layer: the measured fused-MoE kernel (routed experts, both projections)
        plus shared experts and router from the GEMM table."""
        if not self.moe or num_tokens <= 0:
            return 0.0
        if not self._has_moe:
            return super().moe_layer_time(num_tokens)
        m, sh = self.model, self.moe
        if self.ep > 1:  # the EP group's tokens over this rank's experts (table semantics)
            # the busiest rank under skew works like a balanced group of skew x the tokens
            tg = max(1, round(self.group_tokens(num_tokens) * self.ep_skew))
            t = float(self.tables.moe(tg, hidden=m.hidden_size,
                                      inter=m.intermediate_size, topk=sh["topk"],
                                      num_experts=m.num_experts, moe_tp=1, moe_ep=self.ep,
                                      dtype=self.wdt, distribution=self._moe_dist))
        else:
            t = float(self.tables.moe(int(num_tokens), hidden=m.hidden_size,
                                      inter=sh["expert_intermediate_per_rank"] * self.tp,
                                      topk=sh["topk"], num_experts=m.num_experts,
                                      moe_tp=self.tp, moe_ep=1, dtype=self.wdt,
                                      distribution=self._moe_dist))
        for k, n in self.shared_gemms.values():
            t += self.gemm_kn_time(num_tokens, k, n)
        k, n = self.router_gemm
        return t + self.gemm_kn_time(num_tokens, k, n)

    def lm_head_time(self, num_rows: int) -> float:
        if num_rows <= 0:
            return 0.0
        if not self._has_gemm:
            return self.fallback.lm_head_time(num_rows)
        h, v = self.model.hidden_size, self.model.vocab_size // self.tp
        return float(self.tables.gemm(int(num_rows), v, h, self.wdt))

    def attn_prefill_time(self, q: int, start: int) -> float:
        if not self._has_prefill:
            return self.fallback.attn_prefill_time(q, start)
        key = (q, start)
        t = self._prefill_cache.get(key)
        if t is None:
            t = float(self.tables.attention_prefill(q, start, batch=1, **self._akey))
            if len(self._prefill_cache) < 200_000:
                self._prefill_cache[key] = t
        return t

    def _decode_beyond(self, num_seqs: int, ctx_mean: float) -> float:
        """One layer's decode attention at a point outside the table's grid (the table set's
        scalar query: the edge's time carried by the roofline)."""
        return float(self.tables.attention_decode(num_seqs, ctx_mean, **self._akey))

    def decode_attention(self) -> DecodeAttention | None:
        """Decode attention of one-token steps from the measured table, point by point in the
        compiled core (None when the tables have no decode attention for this model)."""
        return self._decode_attn

    def attn_decode_time(self, num_seqs: int, ctx_total, q_per_seq: int = 1):
        if not self._has_decode or num_seqs <= 0:
            return self.fallback.attn_decode_time(num_seqs, ctx_total, q_per_seq)
        arr = isinstance(ctx_total, np.ndarray)
        if arr:
            mean = np.asarray(ctx_total, dtype=float) / num_seqs
        else:  # one step: the same division in Python floats (no numpy scalar round trip)
            mean = float(ctx_total) / num_seqs
        t = self.tables.attention_decode(int(num_seqs), mean, **self._akey)
        if q_per_seq != 1:  # verification of k drafts: scale by the roofline ratio
            r1 = RooflinePerfModel.attn_decode_time(self, num_seqs, ctx_total, 1)
            rq = RooflinePerfModel.attn_decode_time(self, num_seqs, ctx_total, q_per_seq)
            t = np.asarray(t) * (np.asarray(rq) / np.asarray(r1))
        return t if (arr and ctx_total.ndim) else float(t)  # = np.ndim(ctx_total)

    def elementwise_time(self, num_tokens: int, graph: bool = False) -> float:
        if not self._has_ew or num_tokens <= 0:
            return self.fallback.elementwise_time(num_tokens, graph)
        return float(self.tables.elementwise(int(num_tokens), **self._ew_key))

    def ep_comm_time(self, num_tokens: int) -> float:
        """All-gather + reduce-scatter of the EP group's activations: the NCCL table when the
        link is the spec node's, else the link model."""
        if self.ep <= 1 or num_tokens <= 0:
            return 0.0
        stated = self.gpu.link_stated
        if not stated and self.tables.has("nccl", collective="all_gather"):
            byts = self.group_tokens(num_tokens) * self.model.hidden_size * ACT_BYTES
            return float(self.tables.collective("all_gather", byts, self.ep)
                         + self.tables.collective("reduce_scatter", byts, self.ep))
        return super().ep_comm_time(num_tokens)

    def all_reduce_time(self, num_tokens: int, graph: bool = False) -> float:
        if self.tp <= 1 or num_tokens <= 0:
            return 0.0
        nbytes = num_tokens * self.model.hidden_size * ACT_BYTES
        if self._has_ar and self._custom_ar and nbytes <= CUSTOM_ALLREDUCE_MAX_BYTES:
            return float(self.tables.all_reduce(nbytes, self.tp,
                                                backend="graph" if graph else "eager"))
        if self._has_nccl:
            return float(self.tables.collective("all_reduce", nbytes, self.tp))
        if self._has_ar and self._custom_ar:
            return float(self.tables.all_reduce(nbytes, self.tp, backend="eager"))
        return self.fallback.all_reduce_time(num_tokens, graph=graph)


def load_measured_backend(model, gpu, tensor_parallel_size=1, weight_dtype="bf16",
                          kv_cache_dtype="bf16", required=False, engine_version=None,
                          engine_family="vllm"):
    """A measured-table backend for ``gpu`` when its profile has tables, else None.

    Looks for (1) the profile's table sets (``hardware_profiles/<gpu>/tables/<engine>-<ver>/``:
    :class:`MeasuredOps`), (2) a flat harness profile (``gemm.csv`` at the profile root:
    :class:`~simulator.perf.tables.flat_profile.TablePerfModel`).

    Raises
    ------
    ValueError
        ``required`` and nothing measured covers the model's GEMMs and attention; or an
        ``engine_version`` that the profile does not ship (the message lists the versions).
    """
    from simulator.perf.fitted import build_fitted_or_roofline
    tp = int(tensor_parallel_size)
    try:
        from simulator.perf.tables.sets import select_table_set
    except ImportError:  # pragma: no cover - the tables module ships with the package
        select_table_set = None
    ts = None
    if select_table_set is not None:
        from simulator.perf.tables.sets import table_sets
        sets = table_sets(gpu)  # once: each set reads its provenance.yaml when made
        if any(s.engine == engine_family for s in sets):
            ts = select_table_set(gpu, engine=engine_family, version=engine_version, sets=sets)
    if ts is not None:
        fb = build_fitted_or_roofline(model, gpu, tp, weight_dtype, kv_cache_dtype)
        floor = ts.graph_kernel_floor_s(weight_dtype)
        if floor is not None:   # the set's own graph-replay floor prices the fallback's kernels
            fb.graph_kernel_floor_s = floor
        m = MeasuredOps(model, gpu, tp, weight_dtype, kv_cache_dtype, ts, fb)
        if required and not (m._has_gemm and (m._has_decode or m._has_prefill)):
            raise ValueError(f"GPU profile {gpu.name!r} table set {ts.name} has no GEMM/"
                             f"attention table for {model.name} in {weight_dtype}")
        return m
    if engine_version is not None and required:
        raise ValueError(f"GPU profile {gpu.name!r} has no measured tables for engine version "
                         f"{engine_version!r}")
    from simulator.perf.tables.flat_profile import load_table_perf_model
    return load_table_perf_model(model, gpu, tp, weight_dtype, kv_cache_dtype,
                                 required=required)
