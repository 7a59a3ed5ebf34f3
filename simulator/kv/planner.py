"""Memory planner: how many KV blocks fit on each GPU of a replica.

Per GPU of a TP group (vLLM's profiling run, estimated instead of measured)::

    budget   = hbm_bytes x gpu_memory_utilization
    kv_bytes = budget - weights / TP - activation reserve - fixed runtime reserve
               - (draft model weights / TP, when speculating)
    num_gpu_blocks = floor(kv_bytes / (block_size x kv_bytes_per_token_per_gpu))

The activation reserve is the peak transient memory of one forward pass over
``max_num_batched_tokens`` tokens (hidden states, QKV, the MLP's gate/up output in the
activation dtype) plus the logits of ``max_num_seqs`` rows in fp32; the fixed reserve
(CUDA context, NCCL buffers, CUDA graphs) is an assumption of 1.5 GB. Both are estimates: set
``kv_cache.num_gpu_blocks`` to match the block count a real engine reported.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..models import ModelSpec

FIXED_RUNTIME_RESERVE_BYTES = 1.5e9


@dataclass(frozen=True)
class MemoryPlan:
    """Result of :func:`plan_memory` (bytes are per GPU)."""

    budget_bytes: float
    weight_bytes: float
    activation_bytes: float
    reserve_bytes: float
    draft_bytes: float
    kv_bytes: float
    kv_bytes_per_token: int
    block_size: int
    num_gpu_blocks: int

    @property
    def kv_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


def activation_bytes(model: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int,
                     tensor_parallel_size: int) -> float:
    """Peak transient activation bytes per GPU for one forward pass (estimate)."""
    tp = tensor_parallel_size
    h, d = model.hidden_size, model.head_dim
    per_token = (4 * h + (model.num_attention_heads + 2 * model.num_kv_heads) * d / tp
                 + 3 * model.intermediate_size / tp) * 2
    logits = max_num_seqs * model.vocab_size / tp * 4
    return max_num_batched_tokens * per_token + logits


def plan_memory(model: ModelSpec, hbm_bytes: float, *, tensor_parallel_size: int = 1,
                gpu_memory_utilization: float = 0.9, block_size: int = 16,
                weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16",
                max_num_batched_tokens: int = 8192, max_num_seqs: int = 256,
                draft_model: ModelSpec | None = None) -> MemoryPlan:
    """Plan one GPU's memory and derive ``num_gpu_blocks``.

    Raises
    ------
    ValueError
        If the weights and reserves leave no room for even one KV block (the message gives
        the figures).
    """
    tp = tensor_parallel_size
    budget = hbm_bytes * gpu_memory_utilization
    weights = model.weight_bytes(weight_dtype) / tp
    act = activation_bytes(model, max_num_batched_tokens, max_num_seqs, tp)
    draft = draft_model.weight_bytes(weight_dtype) / tp if draft_model else 0.0
    per_token = model.kv_bytes_per_token(kv_cache_dtype, tp)
    if draft_model:
        per_token += draft_model.kv_bytes_per_token(kv_cache_dtype, tp)
    kv = budget - weights - act - FIXED_RUNTIME_RESERVE_BYTES - draft
    blocks = int(kv // (block_size * per_token)) if kv > 0 else 0
    if blocks < 1:
        raise ValueError(
            f"model {model.name} does not fit: {budget / 1e9:.1f} GB usable per GPU "
            f"(gpu_memory_utilization {gpu_memory_utilization}) < weights {weights / 1e9:.1f} GB "
            f"+ activations {act / 1e9:.1f} GB + reserve {FIXED_RUNTIME_RESERVE_BYTES / 1e9:.1f} GB"
            + (f" + draft {draft / 1e9:.1f} GB" if draft else "")
            + f" with TP={tp}; raise tensor_parallel_size or use a larger GPU")
    return MemoryPlan(budget, weights, act, FIXED_RUNTIME_RESERVE_BYTES, draft, max(kv, 0.0),
                      per_token, block_size, blocks)
