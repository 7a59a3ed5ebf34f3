"""Memory plan of a pipeline-parallel replica: every stage planned, the fewest blocks rule.

Under ``pipeline_parallel_size = p`` each stage is a TP group of GPUs holding its own layers
(vLLM's split, :func:`simulator.topology.pipeline.stage_layer_counts`: ``L // p`` layers each,
the remainder one each to the stages before the last). Each stage's workers profile their own
memory (:func:`simulator.kv.planner.plan_memory` on the stage's layers): the first stage also
holds the embedding, the last the final norm, the LM head and the sampler pass, a stage after
the first the buffer of the activations it receives. vLLM then gives every worker the
smallest block count of all of them (``vllm/v1/core/kv_cache_utils.py``
``get_kv_cache_configs``: "Change the num_blocks of each rank to the smallest among all
ranks"), and refuses a configuration in which any worker cannot hold one ``max_model_len``
request (the same file's per-worker ``check_enough_kv_cache_memory``).

So the replica's plan is the plan of the stage with the fewest blocks, with every stage's
plan attached (:attr:`MemoryPlan.stages`), and the KV per token a GPU stores is its own
stage's layers' share. A stage may sit on GPUs of a different memory size (``hbm_bytes`` per
stage).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.catalog.models import ModelSpec
from simulator.kv.planner import MaxModelLenError, MemoryPlan, plan_memory
from simulator.topology.pipeline import stage_layer_ranges, stage_model

__all__ = ["StagePlan", "plan_pipeline_memory", "stage_rows"]


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage's memory plan.

    Attributes
    ----------
    stage : int
        Stage index (0 = first).
    first_layer, num_layers : int
        The stage's layers ``[first_layer, first_layer + num_layers)``.
    hbm_bytes : float
        Device memory of the stage's GPUs (bytes).
    plan : MemoryPlan
        :func:`~simulator.kv.planner.plan_memory` of the stage's layers, before the
        fewest-blocks rule (``plan.num_gpu_blocks`` is the stage's own count).
    """

    stage: int
    first_layer: int
    num_layers: int
    hbm_bytes: float
    plan: MemoryPlan


def plan_pipeline_memory(model: ModelSpec, hbm_bytes: float | Sequence[float], *,
                         pipeline_parallel_size: int = 1, **kwargs) -> MemoryPlan:
    """Plan every pipeline stage's memory and keep the fewest blocks (vLLM's rule).

    Parameters
    ----------
    model : ModelSpec
        The whole model.
    hbm_bytes : float or sequence of float
        Device memory of each stage's GPUs (bytes); one number for every stage alike.
    pipeline_parallel_size : int
        Stages (1: exactly :func:`~simulator.kv.planner.plan_memory` of the whole model).
    **kwargs
        As :func:`~simulator.kv.planner.plan_memory` (TP, budgets, dtypes, overrides, ...).

    Returns
    -------
    MemoryPlan
        The plan of the stage with the fewest blocks (the first such stage on a tie), with
        ``pipeline_stage`` set to it and ``stages`` holding every :class:`StagePlan`; its
        ``num_gpu_blocks`` is the count every stage's workers get.

    Raises
    ------
    ValueError
        From any stage's plan, prefixed with the stage and its layers (a stage whose
        weights do not fit, a KV cache that cannot hold one ``max_model_len`` request:
        :class:`~simulator.kv.planner.MaxModelLenError` with that stage's longest request);
        a number of ``hbm_bytes`` that is not ``pipeline_parallel_size``; a model mixing
        sliding-window and full layers without ``disable_hybrid_kv_cache_manager``.
    """
    p = int(pipeline_parallel_size)
    if p <= 1:
        hbm = hbm_bytes if isinstance(hbm_bytes, (int, float)) else _one(hbm_bytes)
        return plan_memory(model, hbm, **kwargs)
    hbms = ([float(hbm_bytes)] * p if isinstance(hbm_bytes, (int, float))
            else [float(x) for x in hbm_bytes])
    if len(hbms) != p:
        raise ValueError(f"{len(hbms)} stage memory sizes for pipeline_parallel_size {p}")
    n_sl = len(model.sliding_window_layers)
    if 0 < n_sl < model.num_layers and not kwargs.get("disable_hybrid_kv_cache_manager"):
        plan_memory(model, hbms[0], **kwargs)  # the whole model's one-line refusal
    stages = []
    for i, (lo, hi) in enumerate(stage_layer_ranges(model.num_layers, p)):
        part = stage_model(model, p, i)
        try:
            plan = plan_memory(part, hbms[i], is_first_stage=i == 0,
                               is_last_stage=i == p - 1, **kwargs)
        except MaxModelLenError as e:
            raise MaxModelLenError(e.max_tokens, f"{_where(i, lo, hi, p)}: {e}") from None
        except ValueError as e:
            raise ValueError(f"{_where(i, lo, hi, p)}: {e}") from None
        stages.append(StagePlan(i, lo, hi - lo, hbms[i], plan))
    low = min(stages, key=lambda s: s.plan.num_gpu_blocks)
    counts = ", ".join(f"{s.plan.num_gpu_blocks:,}" for s in stages)
    note = (f"pipeline stages plan {counts} blocks; every stage gets the fewest, stage "
            f"{low.stage}'s (vLLM get_kv_cache_configs); non-torch memory per GPU is the TP "
            "figure (PP's own NCCL buffers not measured)")
    notes = (*low.plan.notes, note)
    return dataclasses.replace(low.plan, pipeline_stage=low.stage, stages=tuple(stages),
                               notes=notes)


def stage_rows(plan: MemoryPlan) -> list[dict]:
    """Per-stage figures of a pipeline plan for the run summary (empty without PP): stage,
    layers, bytes per GPU (device, weights, activations, KV) and blocks (its own count, and
    whether it is the stage that sets the replica's)."""
    return [{"stage": s.stage, "first_layer": s.first_layer, "num_layers": s.num_layers,
             "hbm_bytes": s.hbm_bytes, "weight_bytes": s.plan.weight_bytes,
             "activation_bytes": s.plan.activation_bytes, "kv_bytes": s.plan.kv_bytes,
             "kv_bytes_per_token": s.plan.kv_bytes_per_token,
             "num_gpu_blocks": s.plan.num_gpu_blocks,
             "sets_num_gpu_blocks": s.stage == plan.pipeline_stage}
            for s in plan.stages]


def _one(x: Sequence[float]) -> float:
    vals = [float(v) for v in x]
    if len(vals) != 1:
        raise ValueError(f"{len(vals)} stage memory sizes for pipeline_parallel_size 1")
    return vals[0]


def _where(i: int, lo: int, hi: int, p: int) -> str:
    return f"pipeline stage {i} of {p} (layers {lo}-{hi - 1})"
