"""Pipeline-parallel replica step times: micro-batches in flight through layer stages.

With ``pipeline_parallel_size = p`` a replica's layers are split into ``p`` stages
(:func:`simulator.topology.pipeline.stage_layer_counts`, vLLM's split) and up to ``p``
micro-batches are in flight (vLLM's batch queue of depth ``p``). A scheduler iteration over
``S`` sequences becomes ``m = min(p, S)`` micro-batches of about ``S / m`` sequences each; in
steady state every sequence advances one token per *cycle*

    cycle = max(m x t_stage_max, sum_i t_stage_i + (p - 1) x a)

the larger of what the busiest stage must do for the ``m`` micro-batches and the round trip
of one micro-batch through every stage plus the ``p - 1`` activation hops
(``a = latency + tokens x hidden x 2 bytes / bandwidth`` over the GPU link). Stage ``i`` of a
micro-batch takes ``t_mb x layers_i / L``, ``t_mb`` being the kernel time of the micro-batch
on the whole model from the wrapped step-time model (the LM head is spread over the stages
with the layers: at most ~1% of a large model's time). The engine's CPU/sync time of the
iteration is added once. The idle share of the stages, ``1 - m x sum_i t_stage_i / (p x
cycle)``, is the pipeline bubble (reported as ``pipeline_bubble_fraction``).
"""
from __future__ import annotations

import numpy as np

from simulator.perf.roofline import ACT_BYTES
from simulator.perf.step_shape import StepShape
from simulator.topology.pipeline import activation_bytes, stage_layer_counts


def split_shape(shape: StepShape, m: int) -> list[StepShape]:
    """``shape`` dealt into ``m`` micro-batches: decode sequences evenly (context in
    proportion), prefill chunks each to the micro-batch with the fewest tokens so far."""
    d, q = shape.num_decode, shape.decode_q_per_seq
    sampled_prefill = shape.num_sampled - d * q
    out = []
    for i in range(m):
        di = d // m + (1 if i < d % m else 0)
        ctx = shape.decode_ctx_total * di // d if d else 0
        out.append(StepShape([], [], di, ctx, q, di * q))
    for j, (pq, ps) in enumerate(zip(shape.prefill_q, shape.prefill_start)):
        k = min(range(m), key=lambda i: (out[i].num_tokens, i))
        out[k].prefill_q.append(pq)
        out[k].prefill_start.append(ps)
        if j < sampled_prefill:
            out[k].num_sampled += 1
    return out


class PipelinePerfModel:
    """Step times of a PP replica around a one-stage step-time model (formula: module
    docstring).

    Parameters
    ----------
    inner : StepTimeModel or ConstantPerfModel
        Step times of the whole model on one TP group.
    pipeline_parallel_size : int
    num_layers, hidden_size : int
    link_bandwidth_bytes_per_s, link_latency_s : float
        The stage-to-stage link (the GPU spec's or the scenario's stated interconnect).

    Raises
    ------
    ValueError
        When the model has fewer layers than stages.
    """

    def __init__(self, inner, pipeline_parallel_size: int, num_layers: int, hidden_size: int,
                 link_bandwidth_bytes_per_s: float, link_latency_s: float = 0.0):
        self.inner = inner
        self.pp = int(pipeline_parallel_size)
        self.counts = stage_layer_counts(num_layers, self.pp)
        self._max_share = max(self.counts) / int(num_layers)
        self.hidden = int(hidden_size)
        if not link_bandwidth_bytes_per_s > 0:
            raise ValueError("pipeline parallelism needs a GPU link with a bandwidth "
                             "(hardware.interconnect.bandwidth_bytes_per_s)")
        self.bw, self.alpha = float(link_bandwidth_bytes_per_s), float(link_latency_s)
        self.kind = getattr(inner, "kind", "roofline")
        self.busy_stage_s = 0.0   # summed over stages
        self.cycle_s = 0.0

    def __getattr__(self, name):  # everything else (engine, model, gpu, tp, ...) as inner's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def hop_time_s(self, num_tokens) -> np.ndarray | float:
        """One stage-to-stage activation transfer of ``num_tokens`` tokens, seconds."""
        return self.alpha + activation_bytes(1, self.hidden, ACT_BYTES) * num_tokens / self.bw

    def _cycle(self, t_mb, m: int, tokens_mb, tally: bool = True):
        """The cycle of ``m`` micro-batches of ``t_mb`` kernel seconds each; ``tally``: count
        it in the bubble's tallies (False for a read that runs no step)."""
        cycle = np.maximum(m * t_mb * self._max_share,
                           t_mb + (self.pp - 1) * self.hop_time_s(tokens_mb))
        if tally:
            busy = m * t_mb  # every stage does its share of each micro-batch: m x t_mb in all
            self.busy_stage_s += float(np.sum(busy))
            self.cycle_s += float(np.sum(cycle))
        return cycle

    def gpu_step_time(self, shape: StepShape, tally: bool = True) -> float:
        """Kernel seconds of one PP cycle of ``shape`` (``tally``: :meth:`_cycle`)."""
        m = max(1, min(self.pp, shape.num_seqs))
        mbs = split_shape(shape, m)
        big = max(mbs, key=lambda s: self.inner.gpu_step_time(s))
        return float(self._cycle(self.inner.gpu_step_time(big), m, big.num_tokens, tally))

    def step_time(self, shape: StepShape, tally: bool = True) -> float:
        """Seconds of one iteration of ``shape``: the PP cycle plus the engine's time
        (``tally``: :meth:`_cycle`)."""
        extra = self.inner.step_time(shape) - self.inner.gpu_step_time(shape)
        return self.gpu_step_time(shape, tally) + max(0.0, float(extra))

    def gpu_decode_step_times(self, num_seqs: int, ctx_totals) -> np.ndarray:
        ctx = np.asarray(ctx_totals)
        m = max(1, min(self.pp, int(num_seqs)))
        n_mb = -(-int(num_seqs) // m)
        t_mb = np.asarray(self.inner.gpu_decode_step_times(n_mb, ctx * n_mb // max(1, num_seqs)),
                          dtype=float)
        return np.asarray(self._cycle(t_mb, m, n_mb), dtype=float)

    def decode_step_times(self, num_seqs: int, ctx_totals) -> np.ndarray:
        extra = (np.asarray(self.inner.decode_step_times(num_seqs, ctx_totals), dtype=float)
                 - np.asarray(self.inner.gpu_decode_step_times(num_seqs, ctx_totals),
                              dtype=float))
        return self.gpu_decode_step_times(num_seqs, ctx_totals) + np.maximum(0.0, extra)

    def op_times(self, shape: StepShape) -> dict[str, float]:
        """The wrapped model's operator split, scaled to this replica's cycle time."""
        inner = self.inner.op_times(shape)
        tot = sum(inner.values())
        scale = self.step_time(shape) / tot if tot else 0.0
        return {k: v * scale for k, v in inner.items()}

    def bubble_fraction(self) -> float:
        """Idle share of the stages over every cycle costed so far (0 before any)."""
        return 1.0 - self.busy_stage_s / (self.pp * self.cycle_s) if self.cycle_s else 0.0

    def summary_extras(self) -> dict:
        return {"pipeline_parallel_size": self.pp, "pipeline_stage_layers": self.counts,
                "pipeline_bubble_fraction": self.bubble_fraction()}

    def provenance(self) -> dict[str, str]:
        prov = dict(self.inner.provenance())
        prov["pipeline"] = (f"PP{self.pp}, stages of {self.counts} layers (vLLM split), cycle "
                            f"= max(m x busiest stage, round trip + {self.pp - 1} hops); link "
                            f"{self.bw:.3g} B/s + {self.alpha:.3g} s")
        return prov
