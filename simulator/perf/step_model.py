"""The step-time model: kernels of a step (per operator) + what the engine adds.

A step's time (DESIGN.md section 3) is

    gpu_s  = L x [GEMMs(T') + elementwise(T') + 2 all-reduces(T')]       (T' = padded tokens)
             + L x [prefill attention(chunks) + decode attention(batch, context)]
             + LM head(rows) + sampler(rows)
    step_s = max(gpu_s, cpu_s) + sync_s          (async scheduling, vLLM V1)
           = gpu_s + cpu_s + sync_s              (synchronous engines)

where ``L`` is the layer count, ``T`` the step's tokens, ``T'`` = ``T`` rounded up to the next
CUDA-graph capture size when the step replays a captured graph (the GEMMs, norms and
collectives run at the padded size; attention runs on the real sequences), ``rows`` the
positions sampled, and ``cpu_s``/``sync_s`` the engine profile's linear costs
(:mod:`simulator.perf.engine_profile`). Operator times come from an *operator backend*: the
measured latency tables of the GPU where they exist, else its fitted efficiencies, else the
datasheet roofline (:func:`simulator.perf.build_perf_model` picks; :meth:`provenance` says which
operator came from where).
"""
from __future__ import annotations

import numpy as np

from simulator.perf.engine_profile import EngineProfile
from simulator.perf.step_shape import StepShape
from simulator.perf.step_times import (
    DECODE_MEMO_MAX,
    DecodeStepTimes,
    EngineTerms,
    StepKernels,
)

__all__ = ["DECODE_MEMO_MAX", "GPU_OPS", "ConstantPerfModel", "StepTimeModel", "engine_terms"]


def _plain(shape: StepShape) -> StepShape:
    """``shape`` with Python ints for its counts where a caller passed numpy integers (the
    compiled step kernels take Python ints; the simulator's schedulers build them so:
    unchanged). The decode context total is kept as given (the kernels price any number)."""
    if (type(shape.num_decode) is int and type(shape.decode_q_per_seq) is int
            and type(shape.num_sampled) is int and type(shape.prefill_q) is list
            and type(shape.prefill_start) is list):
        return shape
    return StepShape(prefill_q=list(shape.prefill_q), prefill_start=list(shape.prefill_start),
                     num_decode=int(shape.num_decode),
                     decode_ctx_total=shape.decode_ctx_total,
                     decode_q_per_seq=int(shape.decode_q_per_seq),
                     num_sampled=int(shape.num_sampled))


def engine_terms(profile) -> EngineTerms | None:
    """The compiled form of ``profile.step_seconds`` (its linear CPU and sync costs), or None
    when its CPU term comes from a measured table (``cpu_from_profile``) or it is not an
    :class:`~simulator.perf.engine_profile.EngineProfile`."""
    if not isinstance(profile, EngineProfile) or profile.cpu_from_profile:
        return None
    c, s = profile.cpu, profile.sync
    return EngineTerms((c.step_s.value, c.per_seq_s.value, c.per_token_s.value),
                       (s.step_s.value, s.per_seq_s.value, s.per_token_s.value),
                       profile.async_scheduling)

#: op-time keys a step reports, in display order
GPU_OPS = ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down", "elementwise", "all_reduce",
           "attention_prefill", "attention_decode", "lm_head", "sampler")
#: the op-time keys :meth:`StepTimeModel.gpu_op_times` adds after the token terms
_STEP_TERMS = frozenset({"attention_prefill", "attention_decode", "mla", "lm_head", "sampler"})


class StepTimeModel:
    """Step times of one replica (a TP group) from an operator backend and an engine profile.

    Parameters
    ----------
    ops : RooflinePerfModel
        Operator backend: per-layer times ``gemm_time(op, T)``, ``elementwise_time(T)``,
        ``all_reduce_time(T, graph=...)``, ``attn_prefill_time(q, start)``,
        ``attn_decode_time(n, ctx_total, q_per_seq)``, ``lm_head_time(rows)``, and
        ``provenance()`` (roofline, fitted or measured-table subclasses).
    engine : EngineProfile
    capture_sizes : tuple of int
        CUDA-graph capture sizes (tokens) resolved for the scheduler settings (empty: none).

    Notes
    -----
    ``step_time`` and ``decode_step_times`` are what the simulator calls; ``gpu_step_time`` /
    ``gpu_decode_step_times`` leave out the engine's CPU and sync terms (drafting costs).
    """

    def __init__(self, ops, engine: EngineProfile, capture_sizes: tuple[int, ...] = ()):
        self.ops = ops
        self.model, self.gpu, self.tp = ops.model, ops.gpu, ops.tp
        self.kind = getattr(ops, "kind", "roofline")
        self.capture_sizes = tuple(sorted(int(s) for s in capture_sizes))
        self._tok: dict = {}
        self._layers = int(self.model.num_layers)
        attention = ops.decode_attention()
        #: one step's kernel seconds, and with the engine's terms its wall-clock seconds
        #: (compiled core; the LM head is remembered there per row count; the graph mode and
        #: the sampler's cost are the engine's, set with it)
        self.kernels = StepKernels(
            list(self.capture_sizes), "none", self._token_sum, self._op_sum,
            ops.attn_prefill_time, ops.attention_decode_total, attention,
            ops.mla_extra_time if ops.mla else None, ops.lm_head_time, 0.0,
            [(0 if w is None else int(w), int(n)) for w, n in ops.attn_groups])
        #: pure-decode step seconds per (num_seqs, ctx_total), and their batch-only kernels
        #: per num_seqs, remembered (compiled core)
        self.decode_times = DecodeStepTimes(self._decode_fixed, self._decode_many, attention,
                                            None)
        self._terms: EngineTerms | None = None
        self.engine = engine

    @property
    def max_capture(self) -> int:
        """The largest CUDA-graph capture size (tokens; 0: none)."""
        return self.kernels.max_capture

    @property
    def graph_mode(self) -> str:
        """The engine's CUDA-graph mode (``none`` without capture sizes)."""
        return self.kernels.graph_mode

    @property
    def engine(self) -> EngineProfile:
        """The engine profile; setting another one (``fit-engine`` tries candidates on one
        model) takes its CPU and sync terms, CUDA-graph mode, sampler cost and CPU source, and
        forgets the remembered step times that include them (the capture sizes stay those
        given at construction: they follow the scheduler's settings)."""
        return self._engine

    @engine.setter
    def engine(self, profile: EngineProfile) -> None:
        if getattr(profile, "cpu_from_profile", False) and not self.ops.has_cpu_overhead_table:
            raise ValueError(
                f"engine profile '{profile.name}' takes its CPU time per step from the GPU "
                f"profile's measured cpu_overhead table (cpu_from_profile: true), and "
                f"{self.gpu.name} has none: use a profile with linear cpu terms (cpu.step_s, "
                "cpu.per_seq_s, cpu.per_token_s)")
        self._engine = profile
        k = self.kernels
        k.graph_mode = profile.cuda_graphs.mode if k.max_capture else "none"
        # sampler: memory-bound passes over the logits of the sampled rows (full vocabulary:
        # vLLM gathers the TP-sharded logits before sampling)
        bpl = profile.sampler.bytes_per_logit.value
        k.sampler_s_per_row = (bpl * self.model.vocab_size
                               / (self.gpu.hbm_bandwidth_bytes_per_s
                                  * self.ops.params.memory_efficiency)) if bpl else 0.0
        self._cpu_from_ops = bool(getattr(profile, "cpu_from_profile", False))
        self._terms = k.engine = engine_terms(profile)
        self.decode_times.reset(self._terms)

    # ---------------------------------------------------------------- graph padding
    def in_graph(self, num_tokens: int, pure_decode: bool) -> bool:
        """Whether a step of ``num_tokens`` tokens replays a captured CUDA graph."""
        return self.kernels.in_graph(int(num_tokens), bool(pure_decode))

    def padded_tokens(self, num_tokens: int, pure_decode: bool = True) -> int:
        """Tokens the graph-captured operators of the step run at (``num_tokens`` rounded up to
        the next capture size; unchanged for an eager step)."""
        if not self.in_graph(num_tokens, pure_decode):
            return int(num_tokens)
        return self.kernels.padded(int(num_tokens))

    # ---------------------------------------------------------------- per-token terms
    def _token_terms(self, T: int, graph: bool) -> dict[str, float]:
        """Operator times (summed over layers) that depend only on the token count."""
        key = (T, graph)
        hit = self._tok.get(key)
        if hit is None:
            hit = self.ops.token_terms(T, graph=graph)
            if len(self._tok) < 65536:
                self._tok[key] = hit
        return hit

    def sampler_time(self, num_rows: int) -> float:
        """Sampler seconds for ``num_rows`` sampled positions (engine profile bytes/logit)."""
        return self.kernels.sampler_s_per_row * num_rows

    # ---------------------------------------------------------------- one step
    def gpu_op_times(self, shape: StepShape) -> dict[str, float]:
        """Seconds per operator class of one step's kernels (summed over layers)."""
        shape = _plain(shape)
        T = shape.num_tokens
        pure = not shape.prefill_q
        graph = self.in_graph(T, pure)
        Tp = self.padded_tokens(T, pure) if graph else T
        ops = self.ops
        out = dict(self._token_terms(Tp, graph)) if Tp else {
            k: 0.0 for k in self._token_terms(1, False)}
        kern = self.kernels   # the same terms as gpu_step_time's, by the same code
        out["attention_prefill"] = kern.prefill_total(shape.prefill_q, shape.prefill_start)
        out["attention_decode"] = (kern.decode_attention(
            shape.num_decode, shape.decode_ctx_total, shape.decode_q_per_seq)
            if shape.num_decode else 0.0)
        if ops.mla:
            out["mla"] = ops.mla_extra_time(shape.prefill_q, shape.prefill_start,
                                            shape.num_decode * shape.decode_q_per_seq)
        out["lm_head"] = kern.lm_head_seconds(shape.num_sampled)
        out["sampler"] = self.sampler_time(shape.num_sampled)
        return out

    def _engine_seconds(self, gpu_s, num_seqs, num_tokens):
        e = self.engine
        if self._cpu_from_ops:
            cpu = self.ops.cpu_overhead_time(num_seqs, num_tokens)
            sync = e.sync(num_seqs, num_tokens)
            return (np.maximum(gpu_s, cpu) if e.async_scheduling else gpu_s + cpu) + sync
        return e.step_seconds(gpu_s, num_seqs, num_tokens)

    def op_times(self, shape: StepShape) -> dict[str, float]:
        """Seconds per operator class plus ``engine_overhead`` (what the engine adds)."""
        out = self.gpu_op_times(shape)
        gpu = float(sum(out.values()))
        total = float(self._engine_seconds(gpu, shape.num_seqs, shape.num_tokens))
        out["engine_overhead"] = total - gpu
        return out

    def gpu_step_time(self, shape: StepShape) -> float:
        """Seconds of one step's kernels (no engine CPU or sync time): the values of
        :meth:`gpu_op_times` summed in their order, the token terms' share as one remembered
        prefix sum (the same additions in the same order, without building the dict:
        :meth:`StepKernels.gpu_seconds <simulator.perf.step_times.StepKernels.gpu_seconds>`)."""
        return self.kernels.gpu_seconds(_plain(shape))

    def _op_sum(self, shape: StepShape) -> float:
        """The sum of :meth:`gpu_op_times` (the general path of :meth:`gpu_step_time`)."""
        return float(sum(self.gpu_op_times(shape).values()))

    def _token_sum(self, T: int, graph: bool):
        """``sum`` of the token terms of ``(T, graph)`` in their order, or None when a token
        term shares a name with a per-step term (:meth:`gpu_op_times` would overwrite it in
        place). Remembered by its one caller, :meth:`StepKernels.token_seconds
        <simulator.perf.step_times.StepKernels.token_seconds>`."""
        terms = self._token_terms(T, graph)
        return sum(terms.values()) if _STEP_TERMS.isdisjoint(terms) else None

    def step_time(self, shape: StepShape) -> float:
        """Wall-clock seconds of one engine iteration of ``shape``."""
        if self._terms is not None:
            return self.kernels.seconds(_plain(shape))
        gpu = self.gpu_step_time(shape)
        return float(self._engine_seconds(gpu, shape.num_seqs, shape.num_tokens))

    # ---------------------------------------------------------------- decode runs
    def _decode_fixed(self, num_seqs: int) -> float:
        """Seconds of a pure-decode step's batch-only kernels (remembered by
        :attr:`decode_times`: :meth:`DecodeStepTimes.fixed_seconds
        <simulator.perf.step_times.DecodeStepTimes.fixed_seconds>`)."""
        graph = self.in_graph(num_seqs, True)
        Tp = self.padded_tokens(num_seqs, True) if graph else num_seqs
        return (float(sum(self._token_terms(Tp, graph).values()))
                + self.ops.mla_extra_time((), (), num_seqs)
                + self.kernels.lm_head_seconds(num_seqs) + self.sampler_time(num_seqs))

    def gpu_decode_step_times(self, num_seqs: int, ctx_totals) -> np.ndarray:
        """Kernel seconds of consecutive pure-decode steps (one token per sequence).

        Parameters
        ----------
        num_seqs : int
            Decode sequences in every step.
        ctx_totals : ndarray of int, shape (K,)
            Total attended context of the batch at each step.
        """
        ctx = np.asarray(ctx_totals)
        return self.decode_times.fixed_seconds(int(num_seqs)) + np.asarray(
            self.ops.attention_decode_total(num_seqs, ctx), dtype=float)

    def _decode_step_times(self, num_seqs: int, ctx_totals) -> np.ndarray:
        gpu = self.gpu_decode_step_times(num_seqs, ctx_totals)
        return np.asarray(self._engine_seconds(gpu, num_seqs, num_seqs), dtype=float)

    def _decode_many(self, num_seqs: int, ctx_totals: list[int]) -> list[float]:
        """Seconds of pure-decode steps by the array path (:meth:`_decode_step_times`), for
        :class:`~simulator.perf.step_times.DecodeStepTimes` where no compiled decode
        attention applies."""
        return self._decode_step_times(num_seqs, np.array(ctx_totals)).tolist()

    def decode_step_times(self, num_seqs: int, ctx_totals) -> np.ndarray:
        """Wall-clock seconds of consecutive pure-decode steps, shape ``(K,)``.

        A step's time is a function of ``(num_seqs, ctx_total)`` alone, computed element by
        element (every operator is elementwise in the context; a table's interpolation gives
        the same bits whatever the batching, :meth:`simulator.perf.tables.grid._Grid.at_array`),
        so times are remembered per pair (:attr:`decode_times`): a decode run cut by an
        arrival and planned again asks for the same steps (most steps of a replay are asked
        for more than once). The memory is bounded: past
        :data:`~simulator.perf.step_times.DECODE_MEMO_MAX` pairs it starts afresh (results
        are the same either way). Context totals that are not integers are computed without
        the memory (the same values).
        """
        ctx = np.asarray(ctx_totals)
        if ctx.ndim != 1 or ctx.dtype.kind not in "iu":
            return self._decode_step_times(num_seqs, ctx)
        return np.array(self.decode_times.times(int(num_seqs), ctx.tolist()), dtype=float)

    def decode_step_times_list(self, num_seqs: int, ctx_totals: list[int]) -> list[float]:
        """:meth:`decode_step_times` of a list of integer context totals, as a list of Python
        floats (the same values: a decode run's pricing without the array round trips).
        Other sequences (an array, numpy integers, fractional totals) are answered by
        :meth:`decode_step_times`."""
        if type(ctx_totals) is not list or not all(type(c) is int for c in ctx_totals):
            return self.decode_step_times(num_seqs, np.asarray(ctx_totals)).tolist()
        return self.decode_times.times(int(num_seqs), ctx_totals)

    # ---------------------------------------------------------------- reporting
    def provenance(self) -> dict[str, str]:
        """Operator class -> where its times come from; plus the engine profile."""
        prov = {k: v for k, v in self.ops.provenance().items() if k != "cpu_overhead"}
        if self.tp <= 1:
            prov["all_reduce"] = "none (TP=1)"
        e = self.engine
        prov["engine"] = e.label()
        src = [f"{k}={c['value']:.6g} ({c['source']})" for k, c in e.constants().items()
               if c["value"] and not k.startswith("sampler")]
        if self._cpu_from_ops:
            src.insert(0, "cpu from the profile's measured cpu_overhead table")
        prov["engine_overhead"] = ("; ".join(src) if src else "none")
        prov["cuda_graphs"] = (f"{self.graph_mode}, tokens padded to capture sizes up to "
                               f"{self.max_capture}" if self.max_capture else "none")
        prov["sampler"] = (e.sampler.bytes_per_logit.source if self.kernels.sampler_s_per_row
                           else "none")
        return prov

    def bottleneck_shares(self, shape: StepShape) -> dict[str, float]:
        """Share of step time in compute-bound vs memory-bound operators and overheads."""
        times = self.op_times(shape)
        comp, mem = self.ops.split_gemm_bound(times, shape.num_tokens)
        comp += times["attention_prefill"]
        mem += (times["attention_decode"] + times["elementwise"] + times["lm_head"]
                + times["sampler"] + times.get("mla", 0.0))
        other = times["all_reduce"] + times.get("ep_comm", 0.0) + times["engine_overhead"]
        tot = comp + mem + other
        if tot <= 0:
            return {"compute_bound": 0.0, "memory_bound": 0.0, "overhead": 0.0}
        return {"compute_bound": comp / tot, "memory_bound": mem / tot, "overhead": other / tot}


class ConstantPerfModel:
    """Synthetic step time ``step_s + per_token_s x tokens + per_seq_s x sequences``.

    ``perf.source: constant``: for what-if studies and for tests that need exact,
    hand-derivable times (M/D/1 queues, Little's law). No engine profile applies. It has no
    operators, all-reduces or engine overheads, so it offers no ``bottleneck_shares``: a plan
    classifies nothing and advises nothing about them.

    Parameters
    ----------
    step_s, per_token_s, per_seq_s : float
        Seconds per step, per scheduled token and per scheduled sequence (>= 0, not all 0: a
        step must take time).

    Raises
    ------
    ValueError
        A negative term, or all three 0.
    """

    kind = "constant"

    def __init__(self, step_s: float = 0.0, per_token_s: float = 0.0, per_seq_s: float = 0.0):
        self.step_s, self.per_token_s, self.per_seq_s = float(step_s), float(per_token_s), \
            float(per_seq_s)
        if min(self.step_s, self.per_token_s, self.per_seq_s) < 0:
            raise ValueError("perf.constant terms must be >= 0")
        if not (self.step_s or self.per_token_s or self.per_seq_s):
            raise ValueError("perf.constant: step_s, per_token_s and per_seq_s are all 0, so "
                             "a step would take no time; give at least one of them > 0")

    def step_time(self, shape: StepShape) -> float:
        return self.step_s + self.per_token_s * shape.num_tokens + self.per_seq_s * shape.num_seqs

    gpu_step_time = step_time

    def op_times(self, shape: StepShape) -> dict[str, float]:
        return {"constant": self.step_time(shape)}

    def decode_step_times(self, num_seqs: int, ctx_totals) -> np.ndarray:
        n = len(np.atleast_1d(ctx_totals))
        return np.full(n, self.step_s + (self.per_token_s + self.per_seq_s) * num_seqs)

    gpu_decode_step_times = decode_step_times

    def provenance(self) -> dict[str, str]:
        return {"step_time": (f"constant: {self.step_s:g} s + {self.per_token_s:g} s/token + "
                              f"{self.per_seq_s:g} s/sequence (perf.constant)")}

