"""Memory planner: how many KV blocks fit on each GPU of a replica, the way vLLM 0.19 sizes them.

vLLM's accounting (vllm/v1/worker/gpu_worker.py ``determine_available_memory``,
vllm/utils/mem_utils.py ``memory_profiling``, vllm/v1/core/kv_cache_utils.py), per GPU::

    requested       = total device memory x gpu_memory_utilization
    non_kv          = weights + torch_peak_increase + non_torch_increase (+ CUDA graphs, off)
    available_kv    = requested - non_kv            (or kv_cache_memory_bytes when given)
    num_gpu_blocks  = available_kv // (block_size x KV bytes per token per GPU)
                      (or num_gpu_blocks_override when given)

and the terms servesim estimates instead of measuring (the functions named below are
:mod:`simulator.kv.profile_terms`'s):

- **weights** (``DeviceMemoryProfiler`` around ``load_model``): the parameters one GPU holds
  under vLLM's sharding (:meth:`simulator.catalog.models.ModelSpec.num_params_per_gpu`: vocabulary
  padded to a multiple of 64 and split by TP, untied LM head, replicated norms/routers/MLA
  down-projections) x weight bytes, plus the rotary cos/sin cache created while loading
  (:meth:`~simulator.catalog.models.ModelSpec.rope_cache_bytes`) and seven fp32 scale scalars per
  attention layer. Llama-3.1-8B: 16,060,522,496 + 33,554,432 + 114,688 B = 14.9889 GiB, the
  "Model loading took 14.9889 GiB" vLLM logs.
- **torch_peak_increase** (peak ``allocated_bytes`` of ``profile_run`` over the bytes held
  before it). ``profile_run`` runs
  ``_dummy_run(max_num_batched_tokens)`` (``min(max_num_batched_tokens, max_num_seqs)``
  dummy requests, no attention metadata, so attention kernels are skipped) and then
  ``_dummy_sampler_run`` on the last token of each request. The sampler peak
  (:func:`sampler_peak_bytes`) holds the LM-head logits in the model dtype, their fp32 copy,
  the Triton top-k/top-p scratch buffer (``min(next_pow2(min(SMs, rows)), SMs)`` rows of fp32
  logits, vllm/v1/sample/ops/topk_topp_triton.py), the fp32 probabilities and the exponential
  noise tensor of ``random_sample``, plus the dummy hidden states. The forward peak
  (:func:`forward_peak_bytes`) is three hidden-state tensors alive across a layer (attention
  output and residual held by the caller, the new residual) plus the largest transient: the
  MLP's gate/up output and activation, the MoE router logits and output, or the attention
  projections. MoE models add the fused-MoE workspaces (:func:`moe_workspace_bytes`,
  ``TritonExperts.workspace_shapes``), which vLLM's ``WorkspaceManager`` keeps allocated from
  the first MoE layer on, so they sit under the sampler peak too. cuBLAS allocates its workspace
  through the caching allocator on the first GEMM, inside the profiled window
  (PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp: 32 MiB on sm90, else 4096 KiB x 2 +
  16 KiB x 8, plus a cuBLASLt workspace of ``CUBLASLT_WORKSPACE_SIZE`` = 1 MiB). So
  ``torch_peak_increase = MoE workspaces + max(forward, sampler) + cuBLAS``. Against vLLM
  0.19.0's logged figures on H100 (benchmarks/bench_kv_planner.py) this is within 0.2% for
  sampler-bound dense models, 5-6% low for forward-bound ones, and within 1% for the three
  MoE models there.
- **non_torch_increase** (device memory used outside PyTorch's allocator, from the engine's
  start to the end of profiling: loaded kernels, cuBLAS handles, NCCL and custom all-reduce
  buffers when TP > 1): not derivable from the model; an engine-profile constant measured on
  real vLLM 0.19 runs (:data:`VLLM_0_19`).
- **CUDA graphs**: vLLM 0.19 estimates their memory during profiling but subtracts it only
  with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`` (default 0, vllm/envs.py); graphs are
  captured after the KV cache is allocated, out of the ``1 - gpu_memory_utilization``
  headroom. The profile's ``count_cudagraph_memory`` stays False.

The KV bytes per token per GPU come from :meth:`~simulator.catalog.models.ModelSpec.kv_bytes_per_token`
(GQA K and V heads, or the MLA latent), plus a draft model's when one runs next to the target
(vLLM puts the draft's layers in the same KV cache; its weights load with the target's).

Sliding-window layers: when every layer slides (Mistral-7B, PhiMoE), vLLM keeps one KV cache
group of ``SlidingWindowSpec`` layers with the same page size, so ``num_gpu_blocks`` is the
full-attention figure; a request then holds at most ``cdiv(window - 1 +
max_num_batched_tokens, block_size) + 1`` blocks (out-of-window blocks are freed), which
servesim's KV manager does not do (it keeps every block of a request: conservative). When only
some layers slide, vLLM's hybrid allocator splits the layers into groups of equal size
(``_get_kv_cache_groups_uniform_page_size``), gives each group its own block table drawn from
one shared pool of ``available // (page_size x group_size)`` blocks, and a request holds blocks
in every group; servesim's single-table manager cannot express that, so the planner refuses
such models unless ``disable_hybrid_kv_cache_manager`` is set (vLLM
``--disable-hybrid-kv-cache-manager``: every sliding layer is then cached as a full-attention
layer, which the planner models exactly).

Checks (each a one-line ``ValueError``): weights and reserves that leave no memory; one block
larger than the KV memory (the message names ``kv_cache.block_size``); a KV cache that cannot
hold one ``max_model_len`` request (vLLM ``_check_enough_kv_cache_memory``); a
``num_gpu_blocks`` or ``kv_cache_memory_bytes`` override whose KV tensors would not fit in the
device's memory next to the weights (vLLM trusts the override and fails with CUDA out of memory
while allocating the KV cache).

The one-request check uses the memory (profiled, or ``kv_cache_memory_bytes``), as vLLM does,
not a ``num_gpu_blocks`` override (a small override only gets a note).

Validation (``benchmarks/bench_kv_planner.py``): the recorded vLLM 0.19.0 run of Llama-3.1-8B on
an RTX 4090 (util 0.9, 2,048 batched tokens, 256 sequences) profiled 2,588 blocks; the planner
gives 2,769 (+7.0%). Its weights (14.9889 GiB) and activation peak (0.518 GiB) follow vLLM's
code and reproduce vLLM's own logged figures elsewhere; the recorded blocks leave 0.604 GiB for
non-torch memory on that machine against the 0.25 GiB vLLM 0.19 logs on H100, and that term is
the whole gap. Set ``kv_cache.num_gpu_blocks`` (or ``kv_cache_memory_bytes``) to the figure a
real engine reported to replay its runs.

size: functions 95 lines: plan_memory's docstring documents its 17 vLLM arguments (57 lines).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from simulator.catalog.models import ModelSpec, _dtype_bytes
from simulator.kv.profile_terms import (
    VLLM_0_19,
    EngineMemoryProfile,
    GiB,
    activation_dtype,
    cublas_workspace_bytes,
    forward_peak_bytes,
    moe_workspace_bytes,
    sampler_peak_bytes,
    stage_vocab_adjust_bytes,
    weights_bytes,
)


class MaxModelLenError(ValueError):
    """The KV cache the memory plan leaves cannot hold one ``max_model_len`` request (vLLM's
    start-up check, ``kv_cache_utils.py``); ``max_tokens`` is the longest request it holds.

    Parameters
    ----------
    max_tokens : int
        The longest request (tokens) the planned blocks hold.
    message : str
        The one-line error.
    """

    def __init__(self, max_tokens: int, message: str):
        super().__init__(message)
        self.max_tokens = int(max_tokens)


@dataclass(frozen=True)
class MemoryPlan:
    """Result of :func:`plan_memory` (bytes are per GPU).

    Attributes
    ----------
    budget_bytes : float
        ``requested`` = device memory x ``gpu_memory_utilization``.
    weight_bytes : float
        Weights one GPU holds, including the rotary cache and attention scale scalars.
    activation_bytes : float
        ``torch_peak_increase`` of the profiling pass.
    reserve_bytes : float
        ``non_torch_bytes + cudagraph_bytes``.
    draft_bytes : float
        Draft-model weights per GPU (speculative ``draft_model``).
    kv_bytes : float
        Memory for the KV cache (``available_kv``; the override's bytes when one is given).
    kv_bytes_per_token : int
        KV bytes of one token, all layers (target + draft), per GPU.
    block_size : int
        Tokens per block.
    num_gpu_blocks : int
        Blocks the engine gets (the override when one is given).
    non_torch_bytes, cudagraph_bytes : float
        The reserve's two parts.
    forward_peak_bytes, sampler_peak_bytes, cublas_workspace_bytes, moe_workspace_bytes : float
        Parts of ``activation_bytes`` (``moe + max(forward, sampler) + cublas``).
    rope_cache_bytes : float
        Part of ``weight_bytes``.
    planned_num_gpu_blocks : int
        Blocks the memory plan alone gives (before ``num_gpu_blocks`` overrides it; the
        override's own count when ``kv_cache_memory_bytes`` sets the memory).
    kv_source : str
        ``profile``, ``kv_cache_memory_bytes`` or ``num_gpu_blocks``.
    max_model_len : int or None
        The length the one-request check used.
    notes : tuple of str
        Things the plan assumed (non-measured TP size, sliding-window capping, ...).
    intermediate_bytes : float
        Part of ``activation_bytes``: the buffer a pipeline stage after the first keeps for
        the hidden states and residual it receives (0 without PP).
    pipeline_stage : int or None
        Under PP, the stage this plan is for (the one with the fewest blocks when it is the
        replica's plan); None without PP.
    stages : tuple of StagePlan
        Under PP, every stage's plan (:func:`simulator.kv.stages.plan_pipeline_memory`);
        empty without PP.
    """

    budget_bytes: float
    weight_bytes: float
    activation_bytes: float
    reserve_bytes: float
    draft_bytes: float
    kv_bytes: float
    kv_bytes_per_token: int
    block_size: int
    num_gpu_blocks: int
    non_torch_bytes: float = 0.0
    cudagraph_bytes: float = 0.0
    forward_peak_bytes: float = 0.0
    sampler_peak_bytes: float = 0.0
    cublas_workspace_bytes: float = 0.0
    moe_workspace_bytes: float = 0.0
    rope_cache_bytes: float = 0.0
    planned_num_gpu_blocks: int = 0
    kv_source: str = "profile"
    max_model_len: int | None = None
    notes: tuple[str, ...] = field(default=())
    intermediate_bytes: float = 0.0
    pipeline_stage: int | None = None
    stages: tuple = field(default=())

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds (``num_gpu_blocks x block_size``)."""
        return self.num_gpu_blocks * self.block_size

    @property
    def non_kv_bytes(self) -> float:
        """vLLM's "Total non KV cache memory" (+ draft weights)."""
        return self.weight_bytes + self.activation_bytes + self.reserve_bytes + self.draft_bytes

    @property
    def block_bytes(self) -> int:
        """Bytes of one KV block on one GPU."""
        return self.block_size * self.kv_bytes_per_token


# ---------------------------------------------------------------------------- one request
def max_tokens_per_request(model: ModelSpec, num_blocks: int, block_size: int,
                           max_num_batched_tokens: int, max_model_len: int) -> int:
    """Longest request (tokens, at most ``max_model_len``) whose KV fits in ``num_blocks``
    blocks, by vLLM's per-request need (``FullAttentionSpec.max_memory_usage_bytes``:
    ``cdiv(len, block_size)`` blocks; with every layer sliding, ``SlidingWindowSpec``:
    ``cdiv(min(window - 1 + max_num_batched_tokens, len), block_size) + 1`` blocks)."""
    bs = int(block_size)

    def need(n: int) -> int:
        if model.sliding_window and len(model.sliding_window_layers) == model.num_layers:
            return -(-min(model.sliding_window - 1 + int(max_num_batched_tokens), n) // bs) + 1
        return -(-n // bs)

    if need(int(max_model_len)) <= num_blocks:
        return int(max_model_len)
    lo, hi = 0, int(max_model_len)
    while lo < hi:  # largest n with need(n) <= num_blocks (vLLM estimate_max_model_len)
        mid = (lo + hi + 1) // 2
        if need(mid) <= num_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


# ---------------------------------------------------------------------------- the plan
def memory_terms(model: ModelSpec, hbm_bytes: float, *, tensor_parallel_size: int = 1,
                 expert_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 block_size: int = 16, weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16",
                 max_num_batched_tokens: int = 8192, max_num_seqs: int = 256,
                 draft_model: ModelSpec | None = None, num_sms: int | None = None,
                 compute_capability: tuple[int, int] | None = None,
                 engine: EngineMemoryProfile = VLLM_0_19, is_first_stage: bool = True,
                 is_last_stage: bool = True) -> MemoryPlan:
    """Every term of the plan, with no check: ``kv_bytes`` may be negative and
    ``num_gpu_blocks`` zero (``servesim kv`` shows such plans). Arguments as :func:`plan_memory`.

    Raises
    ------
    ValueError
        For an unknown dtype or a TP/EP size the model cannot be sharded over.
    """
    tp, ep = int(tensor_parallel_size), int(expert_parallel_size)
    budget = float(hbm_bytes) * float(gpu_memory_utilization)
    first, last = bool(is_first_stage), bool(is_last_stage)
    weights, rope = weights_bytes(model, weight_dtype, tp, ep)
    weights += stage_vocab_adjust_bytes(model, weight_dtype, tp, is_first_stage=first,
                                        is_last_stage=last)
    fwd = forward_peak_bytes(model, max_num_batched_tokens, tp, ep, weight_dtype)
    # the sampler pass runs on the last pipeline stage only (vLLM profile_run)
    smp = (sampler_peak_bytes(model, max_num_batched_tokens, max_num_seqs, weight_dtype, num_sms)
           if last else 0)
    cublas = cublas_workspace_bytes(compute_capability)
    moe = moe_workspace_bytes(model, max_num_batched_tokens, tp, ep, weight_dtype)
    # a stage after the first keeps a buffer for the hidden states and residual it receives
    # (vLLM make_empty_intermediate_tensors, max_num_batched_tokens rows, model dtype)
    inter = (0 if first else
             2 * _dtype_bytes(activation_dtype(weight_dtype)) * int(max_num_batched_tokens)
             * model.hidden_size)
    act = float(moe + max(fwd, smp) + cublas + inter)
    non_torch = float(engine.non_torch_bytes(tp))
    cudagraph = 0.0  # vLLM 0.19 does not subtract its estimate (module docstring)
    notes = []
    measured = dict(engine.non_torch_bytes_by_tp)
    if tp not in measured:
        used = max((t for t in measured if t <= tp), default=min(measured))
        notes.append(f"non-torch memory at TP={tp} not measured for {engine.engine} "
                     f"{engine.version}; the TP={used} figure is used")
    draft = 0.0
    per_token = model.kv_bytes_per_token(kv_cache_dtype, tp)
    if draft_model is not None:
        draft = float(weights_bytes(draft_model, weight_dtype, tp)[0])
        per_token += draft_model.kv_bytes_per_token(kv_cache_dtype, tp)
    kv = budget - weights - act - non_torch - cudagraph - draft
    blocks = int(kv // (int(block_size) * per_token)) if kv > 0 else 0
    return MemoryPlan(budget, float(weights), act, non_torch + cudagraph, draft, kv, int(per_token),
                      int(block_size), blocks, non_torch_bytes=non_torch, cudagraph_bytes=cudagraph,
                      forward_peak_bytes=float(fwd), sampler_peak_bytes=float(smp),
                      cublas_workspace_bytes=float(cublas), moe_workspace_bytes=float(moe),
                      rope_cache_bytes=float(rope), planned_num_gpu_blocks=blocks,
                      notes=tuple(notes), intermediate_bytes=float(inter))


def swap_space_blocks(swap_space_gib: float, block_bytes: float) -> int:
    """KV blocks the CPU swap space holds for ``preemption_mode: swap``, per GPU.

    vLLM's ``swap_space`` is in GiB (``CacheConfig``: "Size of the CPU swap space per GPU (in
    GiB)"; ``swap_space_bytes = swap_space x GiB_bytes``, ``GiB_bytes = 1 << 30``) and its
    V0 cache engine holds ``int(swap_space_bytes // block_bytes)`` CPU blocks::

        blocks = floor(swap_space_gib x 2**30 / block_bytes)

    Llama-3.2-1B (bf16 KV: 2 x 16 layers x 8 KV heads x 64 x 2 B = 32,768 B per token),
    16-token blocks of 524,288 B, 4 GiB: 4 x 2**30 / 2**19 = 8,192 blocks (4e9 bytes would
    give 7,629).

    Parameters
    ----------
    swap_space_gib : float
        ``kv_cache.swap_space_gb`` (GiB, >= 0).
    block_bytes : float
        Bytes of one KV block on one GPU (> 0).

    Returns
    -------
    int
        Whole blocks (0 when the space holds none).

    Raises
    ------
    ValueError
        If ``swap_space_gib`` is negative or not finite, or ``block_bytes`` is not positive.
    """
    gib, bb = float(swap_space_gib), float(block_bytes)
    if not (gib >= 0 and gib != float("inf")):
        raise ValueError(f"kv_cache.swap_space_gb must be a finite number of GiB >= 0, got {gib}")
    if not bb > 0:
        raise ValueError(f"block bytes must be > 0, got {bb}")
    return int(gib * GiB // bb)


def _gb(x: float) -> str:
    return f"{x / 1e9:,.2f} GB"


def plan_memory(model: ModelSpec, hbm_bytes: float, *, tensor_parallel_size: int = 1,
                gpu_memory_utilization: float = 0.9, block_size: int = 16,
                weight_dtype: str = "bf16", kv_cache_dtype: str = "bf16",
                max_num_batched_tokens: int = 8192, max_num_seqs: int = 256,
                draft_model: ModelSpec | None = None, expert_parallel_size: int = 1,
                max_model_len: int | None = None, kv_cache_memory_bytes: int | None = None,
                num_gpu_blocks_override: int | None = None, num_sms: int | None = None,
                compute_capability: tuple[int, int] | None = None,
                disable_hybrid_kv_cache_manager: bool = False,
                engine: EngineMemoryProfile = VLLM_0_19, is_first_stage: bool = True,
                is_last_stage: bool = True) -> MemoryPlan:
    """Plan one GPU's memory and derive ``num_gpu_blocks`` the way vLLM 0.19 does.

    Parameters
    ----------
    model : ModelSpec
    hbm_bytes : float
        Device memory vLLM sees (``torch.cuda.mem_get_info`` total, bytes).
    tensor_parallel_size, expert_parallel_size : int
        Parallelism of the replica (EP > 1: experts split over GPUs, vLLM
        ``--enable-expert-parallel``).
    gpu_memory_utilization : float
        Fraction of device memory the engine may use.
    block_size : int
        Tokens per KV block.
    weight_dtype, kv_cache_dtype : str
        Weight and KV-cache dtypes (``bf16``, ``fp8``, ...).
    max_num_batched_tokens, max_num_seqs : int
        Scheduler budgets; they size the profiling forward pass and sampler pass.
    draft_model : ModelSpec, optional
        A draft model served next to the target (its weights and KV per token are added).
    max_model_len : int, optional
        Longest request; when given, the KV cache must hold one such request.
    kv_cache_memory_bytes : int, optional
        vLLM ``--kv-cache-memory-bytes``: KV memory per GPU, profiling skipped.
    num_gpu_blocks_override : int, optional
        vLLM ``--num-gpu-blocks-override`` (servesim ``kv_cache.num_gpu_blocks``).
    num_sms, compute_capability : optional
        GPU facts that size the sampler scratch buffer and cuBLAS workspace (unknown: the
        rules of :func:`sampler_peak_bytes` and :func:`cublas_workspace_bytes`).
    disable_hybrid_kv_cache_manager : bool
        vLLM ``--disable-hybrid-kv-cache-manager``: cache sliding-window layers as full
        attention layers (required for models that mix sliding and full layers).
    engine : EngineMemoryProfile
        Engine-version constants (:data:`VLLM_0_19`).
    is_first_stage, is_last_stage : bool
        Under pipeline parallelism, whether ``model`` (one stage's layers,
        :func:`simulator.topology.pipeline.stage_model`) is the first / last stage: the
        first holds the embedding, the last the final norm, LM head and the sampler pass, a
        later stage the received-activation buffer (:func:`stage_vocab_adjust_bytes`;
        :func:`simulator.kv.stages.plan_pipeline_memory` plans every stage). Both True
        without PP.

    Returns
    -------
    MemoryPlan

    Raises
    ------
    ValueError
        One line each: the weights and reserves exceed the requested memory; one block is
        larger than the KV memory (names ``kv_cache.block_size``); the KV cache cannot hold
        one ``max_model_len`` request; an override whose KV tensors and the weights exceed the
        device memory; a model mixing sliding-window and full-attention layers without
        ``disable_hybrid_kv_cache_manager``; an unknown dtype or unshardable TP/EP size.
    """
    tp = int(tensor_parallel_size)
    _check_hybrid(model, disable_hybrid_kv_cache_manager)
    p = memory_terms(model, hbm_bytes, tensor_parallel_size=tp,
                     expert_parallel_size=expert_parallel_size,
                     gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                     weight_dtype=weight_dtype, kv_cache_dtype=kv_cache_dtype,
                     max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                     draft_model=draft_model, num_sms=num_sms,
                     compute_capability=compute_capability, engine=engine,
                     is_first_stage=is_first_stage, is_last_stage=is_last_stage)
    notes = list(p.notes)
    room = float(hbm_bytes) - p.weight_bytes - p.draft_bytes
    kv, source = _kv_memory(p, model, hbm_bytes, gpu_memory_utilization, tp, room,
                            kv_cache_memory_bytes, notes)
    planned = int(kv // p.block_bytes)
    if planned < 1:
        raise ValueError(_one_block_message(p, kv, source, block_size))
    if max_model_len is not None:  # vLLM checks the memory, not the override (kv_cache_utils.py)
        _check_max_model_len(model, planned, block_size, max_num_batched_tokens, max_model_len,
                             tp)
    blocks = planned
    if num_gpu_blocks_override is not None:
        blocks, source = int(num_gpu_blocks_override), "num_gpu_blocks"
        notes += _blocks_override_notes(blocks, planned, p.block_bytes, room, hbm_bytes,
                                        block_size, max_model_len)
    notes += _sliding_window_notes(model)
    return replace(p, kv_bytes=kv, num_gpu_blocks=blocks, planned_num_gpu_blocks=planned,
                   kv_source=source, notes=tuple(notes),
                   max_model_len=None if max_model_len is None else int(max_model_len))


# ---------------------------------------------------------------------------- plan_memory's checks
def _check_hybrid(model: ModelSpec, disable_hybrid_kv_cache_manager: bool) -> None:
    """Refuse a model mixing sliding-window and full-attention layers unless the hybrid KV
    cache manager is disabled (module docstring)."""
    n_sl = len(model.sliding_window_layers)
    if 0 < n_sl < model.num_layers and not disable_hybrid_kv_cache_manager:
        raise ValueError(
            f"model {model.name} mixes {n_sl} sliding-window (window {model.sliding_window}) and "
            f"{model.num_layers - n_sl} full-attention layers: vLLM's hybrid KV cache manager gives "
            "each layer group its own block table from one shared pool, which servesim's KV "
            "manager does not model; serve it with --disable-hybrid-kv-cache-manager "
            "(plan_memory(disable_hybrid_kv_cache_manager=True)) to cache every layer as full attention")


def _kv_memory(p: MemoryPlan, model: ModelSpec, hbm_bytes: float,
               gpu_memory_utilization: float, tp: int, room: float,
               kv_cache_memory_bytes: int | None, notes: list[str]) -> tuple[float, str]:
    """The KV cache's bytes per GPU and where they come from: ``kv_cache_memory_bytes`` when
    given (a note is appended; it must fit in ``room``, the device's bytes next to the
    weights), else the profile's ``kv_bytes`` (which must be positive). Raises a one-line
    ``ValueError`` otherwise."""
    if kv_cache_memory_bytes is None:
        if p.kv_bytes <= 0:
            raise ValueError(
                f"model {model.name} does not fit: weights {_gb(p.weight_bytes)} + activations "
                f"{_gb(p.activation_bytes)} + non-torch {_gb(p.reserve_bytes)}"
                + (f" + draft {_gb(p.draft_bytes)}" if p.draft_bytes else "")
                + f" = {_gb(p.non_kv_bytes)} per GPU exceed the {_gb(p.budget_bytes)} requested "
                f"({_gb(hbm_bytes)} x gpu_memory_utilization {gpu_memory_utilization}) with TP={tp}; "
                "raise tensor_parallel_size, gpu_memory_utilization, or use a larger GPU")
        return p.kv_bytes, "profile"
    kv = float(kv_cache_memory_bytes)
    notes.append("kv_cache_memory_bytes given: vLLM skips memory profiling and ignores "
                 "gpu_memory_utilization")
    if kv > room:
        raise ValueError(
            f"kv_cache.kv_cache_memory_bytes={int(kv):,} ({_gb(kv)} per GPU) does not fit: the GPU "
            f"has {_gb(hbm_bytes)} in all, {_gb(room)} next to the weights (the memory plan "
            f"leaves {_gb(max(p.kv_bytes, 0))} = {p.planned_num_gpu_blocks:,} blocks); vLLM would "
            "run out of memory allocating the KV cache: lower it")
    return kv, "kv_cache_memory_bytes"


def _one_block_message(p: MemoryPlan, kv: float, source: str, block_size: int) -> str:
    """The error of a KV memory ``kv`` (bytes per GPU) smaller than one block."""
    k = int(kv // p.kv_bytes_per_token)
    return (f"kv_cache.block_size={block_size}: one KV block needs {_gb(p.block_bytes)} "
            f"({block_size:,} tokens x {p.kv_bytes_per_token:,} B per token per GPU) but only "
            f"{_gb(kv)} per GPU is left for the KV cache"
            + ("" if source != "profile" else
               f" ({_gb(p.budget_bytes)} requested - weights {_gb(p.weight_bytes)} - activations "
               f"{_gb(p.activation_bytes)} - non-torch {_gb(p.reserve_bytes)}"
               + (f" - draft {_gb(p.draft_bytes)}" if p.draft_bytes else "") + ")")
            + f"; lower kv_cache.block_size (at most {k:,} tokens fit in one block)")


def _check_max_model_len(model: ModelSpec, planned: int, block_size: int,
                         max_num_batched_tokens: int, max_model_len: int, tp: int) -> None:
    """Raise :class:`MaxModelLenError` when ``planned`` blocks cannot hold one
    ``max_model_len`` request (vLLM ``_check_enough_kv_cache_memory``)."""
    m = max_tokens_per_request(model, planned, block_size, max_num_batched_tokens, max_model_len)
    if m < int(max_model_len):
        raise MaxModelLenError(
            m, f"the model's max seq len ({int(max_model_len):,}) is larger than the maximum "
            f"number of tokens that can be stored in KV cache ({m:,}: {planned:,} blocks of "
            f"{block_size} for {model.name} with TP={tp}); raise gpu_memory_utilization, "
            f"lower max_model_len (at most {m:,}) or use more GPUs")


def _blocks_override_notes(blocks: int, planned: int, block_bytes: int, room: float,
                           hbm_bytes: float, block_size: int,
                           max_model_len: int | None) -> list[str]:
    """The notes of a ``num_gpu_blocks`` override of ``blocks`` (trusted like vLLM's
    ``num_gpu_blocks_override``); a one-line ``ValueError`` when its KV tensors do not fit in
    ``room``, the device's bytes next to the weights."""
    notes = []
    need = blocks * float(block_bytes)
    if need > room:
        raise ValueError(
            f"kv_cache.num_gpu_blocks={blocks:,} needs {_gb(need)} of KV cache per GPU "
            f"({blocks:,} blocks x {block_bytes:,} B) but the GPU has {_gb(hbm_bytes)} in all, "
            f"{_gb(room)} next to the weights; the memory plan gives {planned:,} blocks, the "
            f"device could hold at most {int(room // block_bytes):,}: vLLM would run out of "
            "memory allocating the KV cache")
    if blocks > planned:
        notes.append(f"num_gpu_blocks {blocks:,} exceeds the {planned:,} blocks the memory plan "
                     "gives (trusted like vLLM's num_gpu_blocks_override; it fits the device)")
    if max_model_len is not None and blocks < -(-int(max_model_len) // int(block_size)):
        notes.append(f"num_gpu_blocks {blocks:,} holds {blocks * int(block_size):,} tokens: "
                     f"fewer than one max_model_len ({int(max_model_len):,}) request")
    return notes


def _sliding_window_notes(model: ModelSpec) -> list[str]:
    """What the plan assumes of a model with sliding-window layers (none without)."""
    n_sl = len(model.sliding_window_layers)
    if n_sl == model.num_layers:
        return [(f"every layer slides (window {model.sliding_window}): vLLM frees blocks "
                 "outside the window, servesim's KV manager keeps them (conservative)")]
    if n_sl:
        return ["hybrid KV cache manager disabled: sliding-window layers cached as full attention"]
    return []

__all__ = [
    "MaxModelLenError",
    "MemoryPlan",
    "max_tokens_per_request",
    "memory_terms",
    "plan_memory",
    "swap_space_blocks",
]
