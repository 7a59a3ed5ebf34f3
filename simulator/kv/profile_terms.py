"""The terms of vLLM's memory profile, per GPU: those servesim estimates instead of measuring
(the weights one GPU holds, :func:`weights_bytes` and :func:`stage_vocab_adjust_bytes`; the
peak the profiling pass adds, ``torch_peak_increase``, :func:`activation_bytes`: the forward
pass, the sampler pass, the fused-MoE workspaces and cuBLAS's), and those an engine version
fixes and the model does not (:class:`EngineMemoryProfile`: non-torch memory measured on real
runs, whether CUDA graphs are counted). How vLLM sizes its KV cache from them, and how close
the estimates come to its logged figures, is told in :mod:`simulator.kv.planner`, which adds
them up.
"""
from __future__ import annotations

from dataclasses import dataclass

from simulator.catalog.models import ModelSpec, _dtype_bytes, _pad_vocab

#: bytes in a GiB (vLLM's ``GiB_bytes``)
GiB = 1 << 30


@dataclass(frozen=True)
class EngineMemoryProfile:
    """Memory-accounting properties of one engine version that the model does not determine.

    Attributes
    ----------
    engine, version : str
        Engine and version the figures were measured on.
    non_torch_bytes_by_tp : tuple of (int, int)
        Measured ``non_torch_increase`` in bytes per GPU, by tensor-parallel size.
    non_torch_source : str
        Where those measurements come from.
    count_cudagraph_memory : bool
        Whether the engine subtracts its CUDA-graph estimate from the KV memory.
    cudagraph_source : str
        Where that behaviour is defined.
    """

    engine: str
    version: str
    non_torch_bytes_by_tp: tuple[tuple[int, int], ...]
    non_torch_source: str
    count_cudagraph_memory: bool = False
    cudagraph_source: str = ""

    def non_torch_bytes(self, tensor_parallel_size: int) -> int:
        """``non_torch_increase`` per GPU at ``tensor_parallel_size``: the measured figure, or,
        for a TP size that was not measured, the figure of the largest measured TP size below
        it (the all-reduce buffers grow with the group; TP=8 takes the TP=4 figure)."""
        tp = int(tensor_parallel_size)
        known = sorted(self.non_torch_bytes_by_tp)
        below = [b for t, b in known if t <= tp]
        return below[-1] if below else known[0][1]


#: vLLM 0.19.0 (V1 engine). non_torch_increase measured on H100-80GB (vLLM 0.19.0 startup logs,
#: llm-d-incubation/llm-d-planner accuracy/accuracy_report.md, "Sensitivity: Tensor
#: Parallelism"): Llama-3.1-8B-Instruct TP=1 0.25 GiB (also the median of that report's TP=1
#: runs, 0.24-0.46 GiB over 15 models), TP=2 2.07 GiB, TP=4 2.13 GiB (NCCL and custom
#: all-reduce buffers; Qwen2.5-7B-Instruct: 0.24 / 2.06 / 2.13 GiB).
VLLM_0_19 = EngineMemoryProfile(
    engine="vllm", version="0.19",
    non_torch_bytes_by_tp=((1, int(0.25 * GiB)), (2, int(2.07 * GiB)), (4, int(2.13 * GiB))),
    non_torch_source=("vLLM 0.19.0 startup logs on H100-80GB, Llama-3.1-8B-Instruct ('non-torch "
                      "forward increase memory' 0.25 / 2.07 / 2.13 GiB at TP 1 / 2 / 4), "
                      "llm-d-incubation/llm-d-planner accuracy/accuracy_report.md"),
    count_cudagraph_memory=False,
    cudagraph_source=("vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default 0; "
                      "vllm/v1/worker/gpu_worker.py determine_available_memory"),
)


#: PyTorch's default cuBLAS workspace (aten/src/ATen/cuda/CublasHandlePool.cpp): 32 MiB on
#: compute capability 9.0, else ``:4096:2:16:8`` = 4096 KiB x 2 + 16 KiB x 8.
CUBLAS_WORKSPACE_BYTES_SM90 = 4096 * 8 * 1024
CUBLAS_WORKSPACE_BYTES_DEFAULT = 4096 * 1024 * 2 + 16 * 1024 * 8
#: cuBLASLt workspace default ``CUBLASLT_WORKSPACE_SIZE`` = 1024 KiB (same file, #73328)
CUBLASLT_WORKSPACE_BYTES = 1024 * 1024
#: Seven fp32 scalars per attention layer (``_k_scale``, ``_v_scale``, ``_q_scale``,
#: ``_prob_scale``, ``q_range``, ``k_range``, ``v_range``; vLLM attention.py
#: ``set_default_quant_scales``), each taking one 512-byte block of PyTorch's caching allocator
#: (``kMinBlockSize``, c10/cuda/CUDACachingAllocator.cpp): 7 x 512 B, allocated while loading.
ATTENTION_SCALE_BYTES_PER_LAYER = 7 * 512
#: vLLM's sampler uses the Triton top-k/top-p kernel from this many rows up, PyTorch sort below
#: (vllm/v1/sample/ops/topk_topp_sampler.py ``apply_top_k_top_p``)
TRITON_TOPK_MIN_ROWS = 8


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def activation_dtype(weight_dtype: str) -> str:
    """Activations run in the model dtype: fp32 for fp32 weights, bf16 otherwise (fp8 weights
    are dequantised into bf16 GEMMs)."""
    return "fp32" if _dtype_bytes(weight_dtype) == 4 else "bf16"


def weights_bytes(model: ModelSpec, weight_dtype: str = "bf16", tensor_parallel_size: int = 1,
                  expert_parallel_size: int = 1) -> tuple[int, int]:
    """vLLM's per-GPU "Model loading took" figure and its rotary-cache part, in bytes.

    Parameters one GPU holds x weight bytes + the rotary cos/sin cache + 7 x 512 B of attention
    scale scalars per layer (:data:`ATTENTION_SCALE_BYTES_PER_LAYER`). Llama-3.1-8B:
    16,060,522,496 + 33,554,432 + 32 x 3,584 = 16,094,191,616 B = 14.9889 GiB, vLLM's log figure.

    Returns
    -------
    (int, int)
        ``(weights incl. rotary cache, rotary cache)``.

    Raises
    ------
    ValueError
        For an unknown dtype or a TP/EP size the model cannot be sharded over.
    """
    rope = model.rope_cache_bytes(activation_dtype(weight_dtype))
    w = model.weight_bytes_per_gpu(weight_dtype, tensor_parallel_size, expert_parallel_size)
    return w + rope + model.num_layers * ATTENTION_SCALE_BYTES_PER_LAYER, rope


def stage_vocab_adjust_bytes(model: ModelSpec, weight_dtype: str = "bf16",
                             tensor_parallel_size: int = 1, *, is_first_stage: bool = True,
                             is_last_stage: bool = True) -> int:
    """Bytes to add to :func:`weights_bytes` of a pipeline stage's layers (a
    :func:`simulator.topology.pipeline.stage_model`, which counts the whole model's embedding,
    LM head and final norm) for what that stage really holds (0 for a single stage).

    vLLM (``LlamaModel`` / ``LlamaForCausalLM`` and the models built alike): the first stage
    holds the embedding, the last the final norm and the LM head (with tied embeddings the
    last stage creates the embedding too and ties the LM head to it: one matrix on each of
    the two stages); a middle stage none of them. One vocabulary matrix per GPU is
    ``pad64(V) / TP x hidden`` elements (vLLM pads the vocabulary to a multiple of 64).

    Raises
    ------
    ValueError
        For an unknown dtype.
    """
    first, last = bool(is_first_stage), bool(is_last_stage)
    if first and last:
        return 0
    wb = _dtype_bytes(weight_dtype)
    tp, h = int(tensor_parallel_size), model.hidden_size
    rows = _pad_vocab(model.vocab_size) // tp
    counted = 1 if model.tie_word_embeddings else 2
    held = int(first) + int(last)
    adjust = (held - counted) * rows * h
    if not last:
        adjust -= h * (2 if model.norm_bias else 1) + (rows if model.lm_head_bias else 0)
    return adjust * wb


def cublas_workspace_bytes(compute_capability: tuple[int, int] | None = None) -> int:
    """cuBLAS + cuBLASLt workspaces PyTorch allocates on the first GEMM of a stream (bytes).

    ``compute_capability`` None (unknown GPU): the larger sm90 figure.
    """
    if compute_capability is None or tuple(compute_capability)[:2] == (9, 0):
        ws = CUBLAS_WORKSPACE_BYTES_SM90
    else:
        ws = CUBLAS_WORKSPACE_BYTES_DEFAULT
    return ws + min(CUBLASLT_WORKSPACE_BYTES, ws)


def sampler_peak_bytes(model: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int,
                       weight_dtype: str = "bf16", num_sms: int | None = None) -> int:
    """Peak bytes held during vLLM's ``_dummy_sampler_run`` (one GPU; every TP rank gathers
    the full vocabulary, ``LogitsProcessor`` all-gather).

    With ``R = min(max_num_seqs, max_num_batched_tokens)`` rows, vocabulary ``V`` and model
    dtype ``a`` bytes (vllm/v1/worker/gpu_model_runner.py ``_dummy_run`` / ``_dummy_sampler_run``,
    vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py, ops/topk_topp_triton.py)::

        hidden states  a x T x h + 2 x a x R x h   (dummy forward output, last-token rows,
                                                    their rand_like copy)
        logits         a x R x V                   (LM head; = the fp32 copy when a = 4)
        fp32 logits    4 x R x V
        top-k/top-p    4 x rows x V, rows = min(next_pow2(min(SMs, R)), SMs)   (R >= 8;
                       below 8 rows the PyTorch sort path: sorted values 4RV + int64 indices
                       8RV + mask RV)
        probabilities  4 x R x V
        noise q        4 x R x V                   (random_sample's exponential draw)

    ``num_sms`` None: ``rows = R`` (exact when R is a power of two no larger than the SM count).
    """
    a = _dtype_bytes(activation_dtype(weight_dtype))
    t, h, v = int(max_num_batched_tokens), model.hidden_size, model.vocab_size
    r = min(int(max_num_seqs), t)
    hidden = a * t * h + 2 * a * r * h
    logits = (a * r * v if a != 4 else 0) + 4 * r * v
    if r >= TRITON_TOPK_MIN_ROWS:
        rows = r if num_sms is None else min(_next_pow2(min(int(num_sms), r)), int(num_sms))
        topk = 4 * rows * v
    else:
        topk = (4 + 8 + 1) * r * v
    return hidden + logits + topk + 4 * r * v + 4 * r * v


def forward_peak_bytes(model: ModelSpec, max_num_batched_tokens: int,
                       tensor_parallel_size: int = 1, expert_parallel_size: int = 1,
                       weight_dtype: str = "bf16") -> int:
    """Peak transient bytes of vLLM's profiling forward pass over ``T = max_num_batched_tokens``
    tokens on one GPU (attention kernels are skipped: no metadata in the profile run).

    ``3 x a x T x h`` (attention output and residual held by the caller of a compiled piece,
    the new residual) plus the largest per-layer transient, in the model dtype ``a``:

    - dense MLP: gate/up output and activation, ``a x T x 3 x I / tp``;
    - MoE: output ``a x T x h`` + router logits ``a x T x E`` + top-k ids/weights
      ``8 x T x topk`` (+ the shared expert's output ``a x T x h``), or the shared-expert MLP
      ``a x T x 3 x I_shared / tp`` when larger (the experts' workspaces are persistent:
      :func:`moe_workspace_bytes`);
    - GQA attention projections: QKV output, rotated q and k, and the attention output buffer;
    - MLA: the fused down-projection output, q, and the attention output buffer.

    Raises
    ------
    ValueError
        If the model cannot be sharded over ``tensor_parallel_size``/``expert_parallel_size``.
    """
    a = _dtype_bytes(activation_dtype(weight_dtype))
    t, h, tp = int(max_num_batched_tokens), model.hidden_size, int(tensor_parallel_size)
    hq, hk, d = model.attention_heads(tp)
    transients = []
    if model.num_dense_layers:
        transients.append(a * t * 3 * (model.dense_mlp_intermediate_size // tp))
    if model.is_moe:
        m = model.moe_shape(tp, int(expert_parallel_size))
        k, e = m["topk"], m["num_experts"]
        routed = a * t * h + a * t * e + 8 * t * k
        shared = m["shared_intermediate_per_rank"]
        if shared:
            routed += a * t * h
            transients.append(a * t * 3 * shared + a * t * e)
        transients.append(routed)
    if model.attention_kind == "mla":
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        down = (model.q_lora_rank or 0) + model.kv_lora_rank + model.qk_rope_head_dim
        transients.append(a * t * (down + hq * qk + hq * model.v_head_dim))
    else:
        transients.append(a * t * d * ((hq + 2 * hk) + hq + hk + hq))
    return 3 * a * t * h + max(transients)


def moe_workspace_bytes(model: ModelSpec, max_num_batched_tokens: int,
                        tensor_parallel_size: int = 1, expert_parallel_size: int = 1,
                        weight_dtype: str = "bf16") -> int:
    """Bytes of the fused-MoE workspaces on one GPU (0 for dense models).

    vLLM 0.19 ``FusedMoEModularKernel._allocate_buffers`` takes one allocation from the
    persistent ``WorkspaceManager`` (vllm/v1/worker/workspace.py; each part rounded up to 256
    B) holding ``workspace13`` (shared with the output) and ``workspace2`` for ``M = T`` tokens,
    with ``TritonExperts.workspace_shapes`` (fused_moe.py): ``M x topk x max(N/2, K)`` and
    ``M x topk x max(N, K)`` elements of the model dtype, ``N = 2 x I_rank``, ``K = h``; the
    output ``M x K`` reuses ``workspace13``::

        a x (max(T x topk x max(I_rank, h), T x h) + T x topk x max(2 I_rank, h))

    Raises
    ------
    ValueError
        If the experts cannot be split over ``tensor_parallel_size``/``expert_parallel_size``.
    """
    if not model.is_moe:
        return 0
    a = _dtype_bytes(activation_dtype(weight_dtype))
    m = model.moe_shape(int(tensor_parallel_size), int(expert_parallel_size))
    t, k, ir, h = int(max_num_batched_tokens), m["topk"], m["expert_intermediate_per_rank"], m["hidden"]
    ws13 = a * max(t * k * max(ir, h), t * h)
    ws2 = a * t * k * max(2 * ir, h)
    return -(-ws13 // 256) * 256 + -(-ws2 // 256) * 256


def activation_bytes(model: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int,
                     tensor_parallel_size: int, *, expert_parallel_size: int = 1,
                     weight_dtype: str = "bf16", num_sms: int | None = None,
                     compute_capability: tuple[int, int] | None = None) -> float:
    """vLLM's ``torch_peak_increase`` per GPU (bytes): ``MoE workspaces + max(forward peak,
    sampler peak) + cuBLAS workspaces`` (:func:`moe_workspace_bytes`,
    :func:`forward_peak_bytes`, :func:`sampler_peak_bytes`, :func:`cublas_workspace_bytes`).

    Raises
    ------
    ValueError
        As :func:`forward_peak_bytes`.
    """
    fwd = forward_peak_bytes(model, max_num_batched_tokens, tensor_parallel_size,
                             expert_parallel_size, weight_dtype)
    smp = sampler_peak_bytes(model, max_num_batched_tokens, max_num_seqs, weight_dtype, num_sms)
    moe = moe_workspace_bytes(model, max_num_batched_tokens, tensor_parallel_size,
                              expert_parallel_size, weight_dtype)
    return float(moe + max(fwd, smp) + cublas_workspace_bytes(compute_capability))


__all__ = [
    "ATTENTION_SCALE_BYTES_PER_LAYER",
    "VLLM_0_19",
    "EngineMemoryProfile",
    "GiB",
    "activation_bytes",
    "activation_dtype",
    "cublas_workspace_bytes",
    "forward_peak_bytes",
    "moe_workspace_bytes",
    "sampler_peak_bytes",
    "stage_vocab_adjust_bytes",
    "weights_bytes",
]
