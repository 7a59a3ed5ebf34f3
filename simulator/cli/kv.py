"""``servesim kv``: KV-cache size calculator.

For a model, a batch of ``B`` sequences of ``S`` tokens, a KV dtype and a TP degree::

    bytes per token (whole model) = 2 x layers x kv_heads x head_dim x bytes per element
    bytes per token (per GPU)     = 2 x layers x ceil(kv_heads / TP) x head_dim x bytes
    KV of the batch               = B x S x bytes per token

(DESIGN.md glossary; e.g. Llama-3-70B in bf16: 2 x 80 x 8 x 128 x 2 = 327,680 B per token).
The fit check uses the memory planner's terms (:func:`simulator.kv.planner.memory_terms`, vLLM
0.19's accounting): per GPU, ``HBM x gpu_memory_utilization - weights - activation peak -
non-torch reserve`` is the room for KV, counted in whole blocks of ``block_size`` tokens; the
batch fits when its ``B x ceil(S / block_size)`` blocks do. When the weights alone do not fit,
the same terms are shown with a negative room.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from simulator.base.schema import MAX_TOKENS_REPRESENTABLE
from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.cli.args import table_console, whole_number
from simulator.kv.planner import memory_terms

GIB = float(1 << 30)


@dataclass(frozen=True)
class KVEstimate:
    """Result of :func:`kv_estimate` (bytes; ``*_per_gpu`` are per GPU of the TP group).

    Attributes
    ----------
    kv_bytes_per_token_model, kv_bytes_per_token_per_gpu : int
        KV bytes of one token (all layers), whole model and per GPU.
    kv_bytes_total_model, kv_bytes_total_per_gpu : int
        KV bytes of ``batch`` sequences of ``context`` tokens.
    weight_bytes_per_gpu : float
        Weights one GPU holds in ``weight_dtype`` (vLLM sharding, with the rotary cache).
    usable_bytes_per_gpu : float
        ``hbm_bytes x gpu_memory_utilization``.
    activation_bytes_per_gpu, reserve_bytes_per_gpu : float
        The planner's activation peak and non-torch reserve.
    kv_room_bytes_per_gpu : float
        Room left for KV (negative when the weights and reserves alone do not fit).
    num_gpu_blocks : int
        Whole KV blocks in that room (0 when there is none).
    blocks_needed : int
        ``batch x ceil(context / block_size)``.
    fits : bool
        ``blocks_needed <= num_gpu_blocks``.
    headroom_bytes_per_gpu : float
        ``kv_room - kv_bytes_total_per_gpu`` (negative: short by that much).
    max_batch_at_context : int
        Sequences of ``context`` tokens that fit.
    max_context_at_batch : int
        Longest context (tokens, whole blocks) each of ``batch`` sequences can have.
    """

    model: str
    gpu: str
    kv_cache_dtype: str
    weight_dtype: str
    tensor_parallel_size: int
    batch: int
    context: int
    block_size: int
    gpu_memory_utilization: float
    kv_bytes_per_token_model: int
    kv_bytes_per_token_per_gpu: int
    kv_bytes_total_model: int
    kv_bytes_total_per_gpu: int
    weight_bytes_per_gpu: float
    hbm_bytes: float
    usable_bytes_per_gpu: float
    activation_bytes_per_gpu: float
    reserve_bytes_per_gpu: float
    kv_room_bytes_per_gpu: float
    num_gpu_blocks: int
    blocks_needed: int
    fits: bool
    headroom_bytes_per_gpu: float
    max_batch_at_context: int
    max_context_at_batch: int


def kv_estimate(model: str, batch: int, context: int, *, kv_cache_dtype: str = "bf16",
                tensor_parallel_size: int = 1, gpu: str = "h100-sxm",
                gpu_memory_utilization: float = 0.9, weight_dtype: str = "bf16",
                block_size: int = 16, max_num_batched_tokens: int = 8192) -> KVEstimate:
    """KV bytes of ``batch`` sequences of ``context`` tokens and whether they fit.

    Parameters
    ----------
    model : str
        Catalog id, Hugging Face id or path to a ``config.json``.
    batch, context : int
        Sequences and tokens per sequence (>= 1).
    kv_cache_dtype, weight_dtype : str
        ``bf16``, ``fp16``, ``fp8``, ...
    tensor_parallel_size : int
        GPUs sharing the model (>= 1).
    gpu : str
        GPU profile name or spec path.
    gpu_memory_utilization : float
        Fraction of HBM the engine may use, in (0, 1].
    block_size : int
        Tokens per KV block.
    max_num_batched_tokens : int
        Sizes the planner's activation reserve.

    Returns
    -------
    KVEstimate

    Raises
    ------
    ValueError
        On an unknown model, GPU or dtype, or a size below 1 or above
        :data:`simulator.base.schema.MAX_TOKENS_REPRESENTABLE` (2**31 - 1).
    """
    for name, v in (("batch", batch), ("context", context),
                    ("tensor_parallel_size", tensor_parallel_size), ("block_size", block_size),
                    ("max_num_batched_tokens", max_num_batched_tokens)):
        if int(v) < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
        if int(v) > MAX_TOKENS_REPRESENTABLE:  # the token counts every input is held to
            raise ValueError(f"{name} must be <= {MAX_TOKENS_REPRESENTABLE:,}, got {v}")
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    kvd = "bf16" if kv_cache_dtype in ("auto", "fp16") else kv_cache_dtype
    m = get_model(model)
    g = get_gpu(gpu)
    tp = int(tensor_parallel_size)
    bpt_model = m.kv_bytes_per_token(kvd, 1)
    bpt_gpu = m.kv_bytes_per_token(kvd, tp)
    total_model = batch * context * bpt_model
    total_gpu = batch * context * bpt_gpu
    # the planner's terms without its checks: a negative room when the weights do not fit
    plan = memory_terms(m, g.hbm_bytes, tensor_parallel_size=tp,
                        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                        weight_dtype=weight_dtype, kv_cache_dtype=kvd,
                        max_num_batched_tokens=max_num_batched_tokens,
                        max_num_seqs=max(batch, 1), num_sms=getattr(g, "num_sms", None),
                        compute_capability=getattr(g, "compute_capability", None))
    room, blocks = plan.kv_bytes, plan.num_gpu_blocks
    weights, act, reserve = plan.weight_bytes, plan.activation_bytes, plan.reserve_bytes
    usable = plan.budget_bytes
    per_seq = -(-context // block_size)
    need = batch * per_seq
    return KVEstimate(
        model=m.name, gpu=g.name, kv_cache_dtype=kvd, weight_dtype=weight_dtype,
        tensor_parallel_size=tp, batch=int(batch), context=int(context),
        block_size=int(block_size), gpu_memory_utilization=float(gpu_memory_utilization),
        kv_bytes_per_token_model=int(bpt_model), kv_bytes_per_token_per_gpu=int(bpt_gpu),
        kv_bytes_total_model=int(total_model), kv_bytes_total_per_gpu=int(total_gpu),
        weight_bytes_per_gpu=float(weights), hbm_bytes=float(g.hbm_bytes),
        usable_bytes_per_gpu=float(usable), activation_bytes_per_gpu=float(act),
        reserve_bytes_per_gpu=float(reserve), kv_room_bytes_per_gpu=float(room),
        num_gpu_blocks=int(blocks), blocks_needed=int(need), fits=bool(need <= blocks),
        headroom_bytes_per_gpu=float(room - total_gpu),
        max_batch_at_context=int(blocks // per_seq),
        max_context_at_batch=int(blocks // batch) * int(block_size))


def _size(x: float) -> str:
    return f"{x:,.3f}" if abs(x) >= 0.01 or x == 0 else f"{x:.3g}"


def byte_rows(e: KVEstimate) -> list[tuple[str, float]]:
    """(label, bytes) rows of an estimate, as printed."""
    bt = f"{e.batch:,} x {e.context:,} tok"
    return [
        ("KV per token, whole model", e.kv_bytes_per_token_model),
        ("KV per token, per GPU", e.kv_bytes_per_token_per_gpu),
        (f"KV {bt}, whole model", e.kv_bytes_total_model),
        (f"KV {bt}, per GPU", e.kv_bytes_total_per_gpu),
        (f"weights per GPU ({e.weight_dtype})", e.weight_bytes_per_gpu),
        (f"usable HBM per GPU (x{e.gpu_memory_utilization:g})", e.usable_bytes_per_gpu),
        ("activations + reserve per GPU", e.activation_bytes_per_gpu + e.reserve_bytes_per_gpu),
        ("room for KV per GPU", e.kv_room_bytes_per_gpu),
        ("headroom per GPU" if e.headroom_bytes_per_gpu >= 0 else "shortfall per GPU",
         abs(e.headroom_bytes_per_gpu)),
    ]


def verdict_lines(e: KVEstimate) -> list[str]:
    """The fit verdict and capacity lines, as printed."""
    tp = f" per GPU x TP {e.tensor_parallel_size}" if e.tensor_parallel_size > 1 else ""
    fit = "fits" if e.fits else "does NOT fit"
    why = ("; the weights and reserves alone exceed the usable memory"
           if e.kv_room_bytes_per_gpu <= 0 else "")
    return [
        (f"{e.model}, KV {e.kv_cache_dtype}, on {e.gpu}{tp}: {e.batch:,} x {e.context:,} tokens "
        f"{fit} next to the weights (needs {e.blocks_needed:,} blocks of {e.block_size} "
        f"tokens, room for {e.num_gpu_blocks:,}{why})."),
        (f"At most {e.max_batch_at_context:,} sequences of {e.context:,} tokens, or "
        f"{e.max_context_at_batch:,} tokens each for {e.batch:,} sequences."),
    ]


def cmd_kv(args) -> int:
    """``servesim kv``: print the estimate (rich table, or JSON with ``--json``)."""
    e = kv_estimate(args.model, args.batch, args.context, kv_cache_dtype=args.kv_cache_dtype,
                    tensor_parallel_size=args.tensor_parallel_size, gpu=args.gpu,
                    gpu_memory_utilization=args.gpu_memory_utilization,
                    weight_dtype=args.weight_dtype, block_size=args.block_size,
                    max_num_batched_tokens=args.max_num_batched_tokens)
    if args.json:
        print(json.dumps(asdict(e), indent=2))
        return 0
    from rich.table import Table
    t = Table(title=f"KV cache: {e.model} on {e.gpu}")
    t.add_column("quantity", no_wrap=True)
    for h in ("bytes", "GB", "GiB"):
        t.add_column(h, justify="right", no_wrap=True)
    for label, b in byte_rows(e):
        t.add_row(label, f"{b:,.0f}", _size(b / 1e9), _size(b / GIB))
    c = table_console()
    c.print(t)
    for line in verdict_lines(e):
        c.print(line)
    from simulator.catalog.models import get_model
    mpe = get_model(args.model).max_position_embeddings
    if e.context > mpe:
        c.print(f"warning: a context of {e.context:,} tokens exceeds {e.model}'s "
                f"max_position_embeddings ({mpe:,}); the model cannot serve it.")
    return 0


def register(subparsers) -> None:
    """Add the ``kv`` subcommand to ``servesim``'s subparsers."""
    p = subparsers.add_parser("kv", help="KV-cache size calculator (bytes per token, fit on a GPU)",
                              description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="catalog id, HF id or config.json path")
    p.add_argument("--batch", type=whole_number, required=True, help="sequences (B)")
    p.add_argument("--context", type=whole_number, required=True, help="tokens per sequence (S)")
    p.add_argument("--kv-cache-dtype", default="bf16", help="bf16 (default), fp16, fp8")
    p.add_argument("--weight-dtype", default="bf16", help="bf16 (default), fp16, fp8")
    p.add_argument("--tensor-parallel-size", "--tp", type=whole_number, default=1)
    p.add_argument("--gpu", default="h100-sxm", help="GPU profile (default h100-sxm)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--block-size", type=whole_number, default=16)
    p.add_argument("--max-num-batched-tokens", type=whole_number, default=8192,
                   help="sizes the activation reserve (default 8192)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_kv)
