"""Pipeline parallelism: layers split into stages, micro-batches flowing through them.

With ``pipeline_parallel_size = p`` the model's ``L`` layers are cut into ``p`` consecutive
stages, one per GPU group; a micro-batch runs stage after stage, and the hidden states of its
tokens (``tokens x hidden x activation bytes``) cross the link between consecutive stages.
vLLM keeps up to ``p`` micro-batches (virtual engines) in flight so that every stage can work.

Schedule of ``m`` micro-batches through ``p`` stages of equal time ``t`` with an activation hop
of ``a`` seconds (fill, steady state, drain; GPipe, Huang et al. NeurIPS 2019):
``makespan = (m + p - 1) t + (p - 1) a``, every stage busy ``m t`` of it, so the bubble (idle
share of the stage-time) is ``1 - m t / makespan`` (= ``(p - 1) / (m + p - 1)`` when ``a = 0``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


def stage_layer_counts(num_layers: int, pipeline_parallel_size: int) -> list[int]:
    """Layers of each pipeline stage, first stage first.

    vLLM's split (``vllm.distributed.utils.get_pp_indices`` without
    ``VLLM_PP_LAYER_PARTITION``): ``L // p`` layers per stage, the ``L % p`` left over go one
    each to the stages just before the last one (the last stage also runs the LM head).

    Raises
    ------
    ValueError
        When ``p < 1`` or ``p > L`` (a stage without layers).
    """
    L, p = int(num_layers), int(pipeline_parallel_size)
    if p < 1 or p > L:
        raise ValueError(f"cluster.pipeline_parallel_size must be between 1 and the model's "
                         f"{L} layers, got {p}")
    counts = [L // p] * p
    for i in range(2, L % p + 2):
        counts[-i] += 1
    return counts


def activation_bytes(num_tokens: int, hidden_size: int, act_bytes: int = 2) -> float:
    """Bytes of hidden states one stage hands the next: ``tokens x hidden x bytes`` (bf16: 2)."""
    return float(num_tokens) * float(hidden_size) * float(act_bytes)


def stage_times_s(layer_s: float, num_layers: int, pipeline_parallel_size: int,
                  last_stage_extra_s: float = 0.0) -> list[float]:
    """Seconds of each stage for one micro-batch.

    Parameters
    ----------
    layer_s : float
        Seconds of one decoder layer for the micro-batch (from the step-time model: the
        per-layer terms of :class:`simulator.perf.step_model.StepTimeModel` divided by ``L``).
    num_layers, pipeline_parallel_size : int
    last_stage_extra_s : float
        What only the last stage runs (LM head and sampler), seconds.
    """
    counts = stage_layer_counts(num_layers, pipeline_parallel_size)
    out = [c * float(layer_s) for c in counts]
    out[-1] += float(last_stage_extra_s)
    return out


@dataclass(frozen=True)
class PipelineSchedule:
    """Timing of ``m`` micro-batches through a pipeline (seconds).

    Attributes
    ----------
    makespan_s : float
        From the first micro-batch entering stage 1 to the last leaving stage ``p``.
    microbatch_latency_s : float
        One micro-batch through every stage and hop (what its tokens wait for).
    busy_s : float
        Summed busy time of all stages.
    bubble_fraction : float
        ``1 - busy / (p x makespan)``: the share of stage-time spent idle.
    """

    makespan_s: float
    microbatch_latency_s: float
    busy_s: float
    bubble_fraction: float


def pipeline_schedule(stage_s: list[float], num_microbatches: int,
                      activation_s: float = 0.0) -> PipelineSchedule:
    """Fill-drain schedule of ``m`` micro-batches over stages of the given times.

    Micro-batch ``j`` starts stage ``i`` when stage ``i`` finished micro-batch ``j - 1`` and
    micro-batch ``j`` has arrived from stage ``i - 1`` (``activation_s`` later): the standard
    recurrence ``f[i][j] = max(f[i][j-1], f[i-1][j] + a) + t_i``. For equal stage times this
    is the GPipe formula of the module docstring.

    Raises
    ------
    ValueError
        Without stages or with ``num_microbatches < 1``.
    """
    p, m = len(stage_s), int(num_microbatches)
    if p < 1 or m < 1:
        raise ValueError("pipeline_schedule needs at least one stage and one micro-batch")
    a = float(activation_s)
    prev = [0.0] * m  # finish times of the previous stage, per micro-batch
    for i, t in enumerate(stage_s):
        cur, free = [], 0.0
        for j in range(m):
            ready = prev[j] + (a if i else 0.0)
            free = max(free, ready) + float(t)
            cur.append(free)
        prev = cur
    makespan = prev[-1]
    busy = m * float(sum(stage_s))
    latency = float(sum(stage_s)) + (p - 1) * a
    bubble = 1.0 - busy / (p * makespan) if makespan > 0 else 0.0
    return PipelineSchedule(makespan, latency, busy, bubble)


def kv_bytes_per_token_per_gpu(kv_bytes_per_token_tp: float, num_layers: int,
                               pipeline_parallel_size: int, stage: int = 0) -> float:
    """KV bytes one GPU stores per token under PP: its stage's share of the layers.

    ``kv_bytes_per_token_tp`` is the per-GPU figure of a TP group holding all ``L`` layers
    (:meth:`simulator.catalog.models.ModelSpec.kv_bytes_per_token` with the TP degree); a stage
    holds ``layers_of_stage / L`` of it, so a GPU's KV memory holds ``~p`` times the tokens.
    """
    counts = stage_layer_counts(num_layers, pipeline_parallel_size)
    return float(kv_bytes_per_token_tp) * counts[stage] / int(num_layers)


def stage_layer_ranges(num_layers: int, pipeline_parallel_size: int) -> list[tuple[int, int]]:
    """``[start, end)`` layer indices of each pipeline stage, first stage first
    (:func:`stage_layer_counts`' split: vLLM's ``get_pp_indices``).

    Raises
    ------
    ValueError
        As :func:`stage_layer_counts`.
    """
    out, start = [], 0
    for c in stage_layer_counts(num_layers, pipeline_parallel_size):
        out.append((start, start + c))
        start += c
    return out


def stage_model(model, pipeline_parallel_size: int, stage: int = 0):
    """The layers of ``model`` (a :class:`simulator.catalog.models.ModelSpec`) that pipeline stage
    ``stage`` holds, as a model of that many layers: its dense and sliding-window layer
    indices re-numbered from the stage's first layer. Embeddings and LM head stay in the
    returned spec; the memory planner counts them on the stages vLLM puts them on (the first
    stage holds the embedding, the last the final norm and LM head:
    :func:`simulator.kv.stages.plan_pipeline_memory`).

    Raises
    ------
    ValueError
        As :func:`stage_layer_counts`, or a ``stage`` outside ``[0, pipeline_parallel_size)``.
    """
    p = int(pipeline_parallel_size)
    if p <= 1 and stage == 0:
        return model
    ranges = stage_layer_ranges(model.num_layers, p)
    if not 0 <= int(stage) < p:
        raise ValueError(f"pipeline stage {stage} outside [0, {p})")
    lo, hi = ranges[int(stage)]
    sw = model.sliding_window_layer_indices
    part = dataclasses.replace(
        model, num_layers=hi - lo,
        dense_layer_indices=tuple(i - lo for i in model.dense_layer_indices if lo <= i < hi),
        sliding_window_layer_indices=(None if sw is None else
                                      tuple(i - lo for i in sw if lo <= i < hi)))
    if part.is_moe and part.num_moe_layers == 0:
        # only dense layers of an MoE model (DeepSeek's first layers): no experts on this stage
        part = dataclasses.replace(
            part, num_experts=0, experts_per_token=0,
            intermediate_size=model.dense_mlp_intermediate_size, dense_intermediate_size=None,
            dense_layer_indices=(), num_shared_experts=0, shared_expert_intermediate_size=0,
            shared_expert_gate=False, moe_router_bias=False)
    return part
