"""Paged KV cache and batched attention kernels, as a serving engine calls them (torch).

A vLLM-style KV cache is a pool of fixed-size **blocks** (``block_size`` tokens each) per
layer, K and V each of shape ``[num_blocks, block_size, num_kv_heads, head_dim]`` (vLLM's
flash-attention layout, "NHD"); a sequence owns a list of block ids, its row of the **block
table** ``[batch, max_blocks_per_seq]`` (int32, unused entries 0). Token ``t`` of sequence
``i`` lives in block ``block_table[i, t // block_size]`` at offset ``t % block_size``
(Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention", SOSP 2023). vLLM v1 keeps block 0 as its null block (its ``BlockPool``
reserves it), so real blocks are 1..num_blocks-1 and padding entries point at block 0.

:func:`build_paged_layout` builds such a layout for given sequence lengths, with the blocks
drawn in a shuffled order (a pool after many allocations and frees is not contiguous).
:func:`make_attention` returns one batched attention call over it for a kernel:

==================  ==========================================================================
``kernel``          call
==================  ==========================================================================
``vllm_flash_attn`` ``vllm.vllm_flash_attn.flash_attn_varlen_func`` (vLLM's fork; what vLLM's
                    FLASH_ATTN backend calls for prefill and decode alike: ``cu_seqlens_q``,
                    ``seqused_k``, ``block_table``), block size 16
``flashinfer``      ``flashinfer.BatchDecodeWithPagedKVCacheWrapper`` (decode) /
                    ``BatchPrefillWithPagedKVCacheWrapper`` (prefill), "NHD", page size 16;
                    ``plan`` runs once per step outside the timed call (vLLM plans once per
                    step for all layers)
``flash_attn``      ``flash_attn.flash_attn_with_kvcache`` (decode: ``cache_seqlens``,
                    ``block_table``) / ``flash_attn_varlen_func`` (prefill, ``block_table``);
                    upstream flash-attn needs a page size that is a multiple of 256
``sdpa``            fallback: gather each sequence's blocks into a padded batch
                    ``[batch, kv_heads, max_len, head_dim]`` (one ``index_select``) and one
                    ``torch.nn.functional.scaled_dot_product_attention`` call with a boolean
                    mask (valid keys, causal within the chunk), or, when all sequences have
                    the same lengths, no mask (decode) / ``causal_lower_right`` (chunks);
                    never a per-sequence loop
==================  ==========================================================================

Queries are token-major ``[total_q, q_heads, head_dim]`` (sequence ``i``'s rows are
``cu_q[i]:cu_q[i+1]``), causal within each sequence's chunk and aligned to its end: query
``j`` of sequence ``i`` (position ``start_i + j``) sees keys ``0 .. start_i + j``. Softmax
scale ``1 / sqrt(head_dim)`` everywhere.

Every non-SDPA kernel is checked numerically against the SDPA fallback on a small case
before it is timed (:func:`check_kernel`); a kernel that is missing, raises, or disagrees is
not used, and the reason is kept for the provenance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: vLLM's default KV block size (``--block-size`` default 16, vllm/config/cache.py)
VLLM_BLOCK_SIZE = 16
#: upstream flash-attn's paged KV needs ``page_block_size % 256 == 0``
#: (flash_attn/flash_attn_interface.py, flash_attn_with_kvcache docstring)
FLASH_ATTN_BLOCK_SIZE = 256
#: order in which ``auto`` picks a kernel (vLLM's own first)
KERNEL_ORDER = ("vllm_flash_attn", "flashinfer", "flash_attn", "sdpa")
KERNEL_BLOCK_SIZE = {"vllm_flash_attn": VLLM_BLOCK_SIZE, "flashinfer": VLLM_BLOCK_SIZE,
                     "flash_attn": FLASH_ATTN_BLOCK_SIZE, "sdpa": VLLM_BLOCK_SIZE}
#: FlashInfer workspace (its documentation's example allocates 128 MiB)
FLASHINFER_WORKSPACE_BYTES = 128 * 2**20


# ------------------------------------------------------------------------------ layout
@dataclass
class PagedLayout:
    """Block table and lengths of a batch of sequences in a paged KV pool.

    Attributes
    ----------
    block_size : int
        Tokens per block.
    seq_lens : ndarray of int
        KV length of each sequence (tokens in the cache, the new ones included).
    block_table : ndarray of int32, shape (batch, max_blocks)
        Block ids per sequence; entries past a sequence's last block are 0 (the null block).
    num_blocks : int
        Blocks in the pool (ids ``0 .. num_blocks - 1``; block 0 is never allocated).
    """

    block_size: int
    seq_lens: np.ndarray
    block_table: np.ndarray
    num_blocks: int

    @property
    def batch(self) -> int:
        return len(self.seq_lens)

    def blocks_of(self, i: int) -> np.ndarray:
        """Block ids of sequence ``i`` in order (``ceil(seq_len / block_size)`` of them)."""
        n = -(-int(self.seq_lens[i]) // self.block_size)
        return self.block_table[i, :n]

    def slots_of(self, i: int) -> np.ndarray:
        """Flat slot ids (``block * block_size + offset``) of sequence ``i``'s tokens, in
        token order: token ``t`` is slot ``slots_of(i)[t]`` of the flattened pool."""
        L = int(self.seq_lens[i])
        t = np.arange(L)
        return self.block_table[i, t // self.block_size].astype(np.int64) * self.block_size \
            + t % self.block_size

    def flashinfer_metadata(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """FlashInfer's CSR page table: ``indptr`` [batch + 1], ``indices`` (the used block
        ids, sequence by sequence) and ``last_page_len`` [batch] (1..block_size)."""
        counts = -(-self.seq_lens.astype(np.int64) // self.block_size)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        indices = np.concatenate([self.blocks_of(i) for i in range(self.batch)]
                                 ).astype(np.int32) if self.batch else np.zeros(0, np.int32)
        last = (self.seq_lens - (counts - 1) * self.block_size).astype(np.int32)
        return indptr, indices, last


def build_paged_layout(seq_lens, block_size: int = VLLM_BLOCK_SIZE,
                       num_blocks: int | None = None, shuffle: bool = True,
                       seed: int = 0) -> PagedLayout:
    """Allocate blocks for sequences of the given KV lengths, vLLM-style.

    Parameters
    ----------
    seq_lens : sequence of int
        KV length of each sequence (tokens, >= 1).
    block_size : int
        Tokens per block (vLLM default 16).
    num_blocks : int, optional
        Pool size including the null block 0; default: exactly the blocks needed + 1.
    shuffle : bool
        Draw block ids in a random order (a fragmented pool) instead of 1, 2, 3, ...
    seed : int
        Seed of the shuffle.

    Returns
    -------
    PagedLayout

    Raises
    ------
    ValueError
        A length < 1, ``block_size < 1``, or a pool too small for the sequences.
    """
    lens = np.asarray(list(seq_lens), dtype=np.int64)
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if lens.size == 0 or (lens < 1).any():
        raise ValueError(f"sequence lengths must be >= 1, got {lens.tolist()}")
    counts = -(-lens // block_size)
    need = int(counts.sum())
    pool = need + 1 if num_blocks is None else int(num_blocks)
    if pool - 1 < need:
        raise ValueError(f"pool of {pool} blocks (block 0 reserved) cannot hold {need} blocks")
    ids = np.arange(1, pool, dtype=np.int64)
    if shuffle:
        ids = np.random.default_rng(seed).permutation(ids)
    table = np.zeros((lens.size, int(counts.max())), dtype=np.int32)
    pos = 0
    for i, c in enumerate(counts):
        table[i, :c] = ids[pos:pos + c]
        pos += int(c)
    return PagedLayout(int(block_size), lens, table, pool)


def new_kv_pool(num_blocks: int, block_size: int, kv_heads: int, head_dim: int, device,
                dtype, seed: int = 0):
    """K and V pools ``[num_blocks, block_size, kv_heads, head_dim]`` of N(0, 1) values.

    Random data: an attention kernel's speed does not depend on the values, and random
    scores keep the softmax well conditioned for the numerical checks. Drawn on the device
    itself (a device generator seeded with ``seed``), so multi-GiB pools fill in moments.
    """
    import torch
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(int(seed))
    shape = (int(num_blocks), int(block_size), int(kv_heads), int(head_dim))
    k = torch.randn(shape, generator=g, device=dev, dtype=dtype)
    v = torch.randn(shape, generator=g, device=dev, dtype=dtype)
    return k, v


# ------------------------------------------------------------------------------ SDPA fallback
def sdpa_paged_attention(q, k_cache, v_cache, block_table, seq_lens, q_lens):
    """Batched attention over a paged cache with one SDPA call (reference and fallback).

    Parameters
    ----------
    q : Tensor (total_q, q_heads, head_dim)
        Queries, sequence-major (``q_lens[i]`` rows per sequence).
    k_cache, v_cache : Tensor (num_blocks, block_size, kv_heads, head_dim)
    block_table : LongTensor or IntTensor (batch, max_blocks)
    seq_lens : sequence of int
        KV length per sequence (the chunk's new tokens included).
    q_lens : sequence of int
        New tokens per sequence (``<= seq_lens``).

    Returns
    -------
    Tensor (total_q, q_heads, head_dim)
    """
    return _SdpaPlan(k_cache, v_cache, block_table, seq_lens, q_lens, q.shape[1])(q)


class _SdpaPlan:
    """Index tensors and mask of :func:`sdpa_paged_attention`, built once per step."""

    def __init__(self, k_cache, v_cache, block_table, seq_lens, q_lens, q_heads: int):
        import torch
        dev = k_cache.device
        self.k_cache, self.v_cache = k_cache, v_cache
        _, bs, kvh, d = k_cache.shape
        lens = [int(x) for x in seq_lens]
        qls = [int(x) for x in q_lens]
        B = len(lens)
        bt = torch.as_tensor(np.asarray(block_table), device=dev).long()
        max_blocks = -(-max(lens) // bs)
        self.bt = bt[:, :max_blocks].contiguous()
        self.L = max_blocks * bs
        self.qmax = max(qls)
        self.B, self.kvh, self.d, self.qh = B, kvh, d, int(q_heads)
        self.gqa = self.qh != kvh
        # query rows of the padded [B, qmax] layout that hold real queries
        rows = torch.zeros(B, self.qmax, dtype=torch.bool)
        for i, n in enumerate(qls):
            rows[i, :n] = True
        self.q_rows = rows.reshape(-1).to(dev)
        self.uniform = all(n == self.qmax for n in qls)
        # key j visible to query r of sequence i: j < len_i and j <= start_i + r
        kpos = torch.arange(self.L).view(1, 1, -1)
        start = torch.tensor([lv - n for lv, n in zip(lens, qls)]).view(B, 1, 1)
        r = torch.arange(self.qmax).view(1, -1, 1)
        mask = (kpos < torch.tensor(lens).view(B, 1, 1)) & (kpos <= start + r)
        mask[:, :, 0] |= ~rows  # padded query rows see key 0 (no all-masked row: no NaN)
        self.mask = mask.unsqueeze(1).to(dev)  # [B, 1, qmax, L]
        # every sequence alike (the harness's grid points): keys cut to the exact length and
        # a structured mask instead of a boolean one, so SDPA may pick a fused kernel:
        # decode (q = 1) sees every key; a chunk sees all keys up to its own position,
        # i.e. the causal mask aligned to the lower right (torch.nn.attention.bias)
        self.same_len = lens[0] if self.uniform and len(set(lens)) == 1 else None
        self.bias = None
        if self.same_len is not None and 1 < self.qmax:
            from torch.nn.attention.bias import causal_lower_right
            self.bias = causal_lower_right(self.qmax, self.same_len)

    def __call__(self, q):
        import torch.nn.functional as F
        B, L, kvh, d = self.B, self.L, self.kvh, self.d
        idx = self.bt.reshape(-1)
        k = self.k_cache.index_select(0, idx).view(B, L, kvh, d).transpose(1, 2)
        v = self.v_cache.index_select(0, idx).view(B, L, kvh, d).transpose(1, 2)
        if self.uniform:
            qp = q.view(B, self.qmax, self.qh, d)
        else:
            qp = q.new_zeros(B * self.qmax, self.qh, d)
            qp[self.q_rows] = q
            qp = qp.view(B, self.qmax, self.qh, d)
        if self.same_len is not None:
            k, v = k[:, :, :self.same_len], v[:, :, :self.same_len]
            o = F.scaled_dot_product_attention(qp.transpose(1, 2), k, v, attn_mask=self.bias,
                                               enable_gqa=self.gqa)
        else:
            o = F.scaled_dot_product_attention(qp.transpose(1, 2), k, v, attn_mask=self.mask,
                                               enable_gqa=self.gqa)
        o = o.transpose(1, 2).reshape(B * self.qmax, self.qh, d)
        return o if self.uniform else o[self.q_rows]


# ------------------------------------------------------------------------------ kernels
def kernel_versions() -> dict:
    """Installed versions of the optional attention libraries (None when absent)."""
    import importlib
    out = {}
    for mod, key in (("flash_attn", "flash_attn_version"), ("flashinfer", "flashinfer_version"),
                     ("vllm", "vllm_version")):
        try:
            m = importlib.import_module(mod)
            out[key] = str(getattr(m, "__version__", "unknown"))
        except Exception:  # noqa: BLE001 - absent or broken install: not available
            out[key] = None
    return out


def vllm_fa_version() -> int | None:
    """The flash-attention version vLLM itself would use on this GPU (2 or 3), from its
    ``get_flash_attn_version`` (its module moved between releases: all known places are
    tried); None when it cannot be asked (the fork's default is then used)."""
    import importlib
    for mod in ("vllm.v1.attention.backends.fa_utils", "vllm.attention.utils.fa_utils",
                "vllm.vllm_flash_attn.fa_utils"):
        try:
            v = importlib.import_module(mod).get_flash_attn_version()
            return int(v) if v is not None else None
        except Exception:  # noqa: BLE001, S112 - not in this release: try the next place
            continue
    return None


def _import_kernel(kernel: str):
    """The library entry points of ``kernel`` (ImportError when absent)."""
    if kernel == "vllm_flash_attn":
        from vllm.vllm_flash_attn import flash_attn_varlen_func
        return {"varlen": flash_attn_varlen_func, "fa_version": vllm_fa_version()}
    if kernel == "flashinfer":
        import flashinfer
        return {"decode": flashinfer.BatchDecodeWithPagedKVCacheWrapper,
                "prefill": flashinfer.BatchPrefillWithPagedKVCacheWrapper}
    if kernel == "flash_attn":
        from flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache
        return {"kvcache": flash_attn_with_kvcache, "varlen": flash_attn_varlen_func}
    if kernel == "sdpa":
        return {}
    raise ValueError(f"unknown attention kernel {kernel!r} (one of {', '.join(KERNEL_ORDER)})")


def make_attention(kernel: str, k_cache, v_cache, layout: PagedLayout, q_lens, q_heads: int,
                   workspace=None):
    """One batched attention call over ``layout`` with ``kernel`` (see module docstring).

    Everything a serving engine prepares once per step (index tensors, FlashInfer's plan,
    the SDPA mask) is prepared here; the returned callable does what runs once per layer.

    Parameters
    ----------
    kernel : str
        One of :data:`KERNEL_ORDER`.
    k_cache, v_cache : Tensor (num_blocks, block_size, kv_heads, head_dim)
        The pools ``layout`` indexes (block size = ``layout.block_size``).
    layout : PagedLayout
    q_lens : sequence of int
        New tokens per sequence (1 for decode).
    q_heads : int
    workspace : Tensor, optional
        FlashInfer workspace (uint8); allocated when None.

    Returns
    -------
    callable
        ``run(q) -> out``, both ``(total_q, q_heads, head_dim)``.

    Raises
    ------
    ImportError
        The kernel's library is not installed.
    ValueError
        Unknown kernel, or a block size the kernel does not accept.
    """
    import torch
    fns = _import_kernel(kernel)
    dev = k_cache.device
    q_lens = [int(x) for x in q_lens]
    lens = [int(x) for x in layout.seq_lens]
    bs, d = int(k_cache.shape[1]), int(k_cache.shape[3])
    if bs != layout.block_size:
        raise ValueError(f"pool block size {bs} != layout block size {layout.block_size}")
    scale = 1.0 / math.sqrt(d)
    decode = all(n == 1 for n in q_lens)
    if kernel == "sdpa":
        return _SdpaPlan(k_cache, v_cache, layout.block_table, lens, q_lens, q_heads)
    i32 = torch.int32
    bt = torch.as_tensor(layout.block_table, dtype=i32, device=dev).contiguous()
    seqused = torch.tensor(lens, dtype=i32, device=dev)
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(q_lens)]), dtype=i32, device=dev)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=i32, device=dev)
    max_q, max_k = max(q_lens), max(lens)
    if kernel == "vllm_flash_attn":
        f = fns["varlen"]
        extra = {"fa_version": fns["fa_version"]} if fns.get("fa_version") else {}

        def run(q):
            return f(q=q, k=k_cache, v=v_cache, cu_seqlens_q=cu_q, max_seqlen_q=max_q,
                     seqused_k=seqused, max_seqlen_k=max_k, softmax_scale=scale, causal=True,
                     block_table=bt, **extra)
        return run
    if kernel == "flash_attn":
        return _flash_attn_call(fns, k_cache, v_cache, bt, seqused, cu_q, cu_k, max_q, max_k,
                                decode, q_heads)
    return _flashinfer_call(fns, k_cache, v_cache, layout, cu_q, decode, q_heads, workspace)


def _flash_attn_call(fns: dict, k_cache, v_cache, bt, seqused, cu_q, cu_k, max_q: int,
                     max_k: int, decode: bool, q_heads: int):
    """:func:`make_attention` for ``flash_attn``: ``flash_attn_with_kvcache`` for a decode
    batch, the paged varlen call otherwise (index tensors prepared by the caller)."""
    bs, d = int(k_cache.shape[1]), int(k_cache.shape[3])
    B = len(seqused)
    scale = 1.0 / math.sqrt(d)
    if bs % FLASH_ATTN_BLOCK_SIZE:
        raise ValueError(f"flash_attn paged KV needs a block size multiple of "
                         f"{FLASH_ATTN_BLOCK_SIZE}, got {bs}")
    if decode:
        f = fns["kvcache"]

        def run(q):
            return f(q.view(B, 1, q_heads, d), k_cache, v_cache, cache_seqlens=seqused,
                     block_table=bt, softmax_scale=scale, causal=True).view(B, q_heads, d)
        return run
    f = fns["varlen"]

    def run(q):
        return f(q, k_cache, v_cache, cu_q, cu_k, max_q, max_k, softmax_scale=scale,
                 causal=True, block_table=bt)
    return run


def _flashinfer_call(fns: dict, k_cache, v_cache, layout: PagedLayout, cu_q, decode: bool,
                     q_heads: int, workspace):
    """:func:`make_attention` for ``flashinfer``: the decode or prefill wrapper, planned once
    for the step."""
    import torch
    dev = k_cache.device
    bs, kvh, d = int(k_cache.shape[1]), int(k_cache.shape[2]), int(k_cache.shape[3])
    i32 = torch.int32
    ws = workspace if workspace is not None else torch.empty(
        FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
    indptr, indices, last = (torch.as_tensor(a, dtype=i32, device=dev)
                             for a in layout.flashinfer_metadata())
    kv = (k_cache, v_cache)
    if decode:
        w = fns["decode"](ws, "NHD")
        _plan(w, indptr, indices, last, q_heads, kvh, d, bs, k_cache.dtype, causal=None)
    else:
        w = fns["prefill"](ws, "NHD")
        _plan(w, cu_q, indptr, indices, last, q_heads, kvh, d, bs, k_cache.dtype, causal=True,
              prefill=True)
    runner = w.run if hasattr(w, "run") else w.forward
    return lambda q: runner(q, kv)


def _plan(w, *args, causal, prefill: bool = False):
    """FlashInfer ``plan`` (>= 0.2) or ``begin_forward`` (0.1.x), keyword dtypes."""
    dtype = args[-1]
    pos = args[:-1]
    kw = {"q_data_type": dtype, "kv_data_type": dtype}
    if prefill:
        kw["causal"] = causal
    if hasattr(w, "plan"):
        w.plan(*pos, **kw)
    else:  # FlashInfer 0.1.x
        kw_old = {"causal": causal} if prefill else {"data_type": dtype}
        w.begin_forward(*pos, **kw_old)


def check_kernel(kernel: str, device, dtype, q_heads: int, kv_heads: int, head_dim: int,
                 seed: int = 0) -> str | None:
    """Run ``kernel`` on a small decode and a small chunked-prefill case and compare it with
    the SDPA fallback; None when it agrees, else the reason it cannot be used.

    Agreement: max abs difference <= 2e-2 + 2e-2 x max abs reference (bf16 has 8 mantissa
    bits, relative step 2^-8 ~ 4e-3 per rounding, and the kernels accumulate in different
    orders; the bound is about 5 such steps), the same bound on both cases.
    """
    import torch
    try:
        _import_kernel(kernel)
    except ImportError as e:
        return f"not installed ({e})"
    except ValueError as e:
        return str(e)
    try:
        bs = KERNEL_BLOCK_SIZE[kernel]
        g = torch.Generator(device="cpu").manual_seed(seed)
        for q_lens, lens in (([1, 1, 1], [5, bs + 3, 2 * bs + 1]), ([7, 3], [7, bs + 9])):
            lay = build_paged_layout(lens, bs, seed=seed)
            k, v = new_kv_pool(lay.num_blocks, bs, kv_heads, head_dim, device, dtype, seed)
            q = torch.randn(sum(q_lens), q_heads, head_dim, generator=g).to(device=device,
                                                                           dtype=dtype)
            got = make_attention(kernel, k, v, lay, q_lens, q_heads)(q)
            ref = sdpa_paged_attention(q.float(), k.float(), v.float(), lay.block_table,
                                       lay.seq_lens, q_lens)
            err = float((got.float() - ref).abs().max())
            tol = 2e-2 + 2e-2 * float(ref.abs().max())
            if not math.isfinite(err) or err > tol:
                return f"disagrees with the SDPA reference (max abs error {err:.3g} > {tol:.3g})"
    except Exception as e:  # noqa: BLE001 - any failure means: do not time this kernel
        return f"failed its check ({type(e).__name__}: {str(e)[:160]})"
    return None


def select_kernels(request: str, device, dtype, q_heads: int, kv_heads: int, head_dim: int,
                   log=print) -> tuple[list[str], dict]:
    """Kernels to time for ``request`` (``auto``, ``all`` or a kernel name).

    ``auto``: the first of :data:`KERNEL_ORDER` that passes :func:`check_kernel` (SDPA always
    does); ``all``: every kernel that passes; a name: that kernel, or ValueError with the
    reason. CPU runs use SDPA only (the other kernels are CUDA libraries).

    Returns
    -------
    (kernels, skipped)
        Kernels in preference order; ``skipped``: kernel -> reason it is not used.
    """
    import torch
    cuda = torch.device(device).type == "cuda"
    req = str(request).lower()
    if req not in ("auto", "all") and req not in KERNEL_ORDER:
        raise ValueError(f"--attention-backend must be auto, all or one of "
                         f"{', '.join(KERNEL_ORDER)}; got {request!r}")
    wanted = list(KERNEL_ORDER) if req in ("auto", "all") else [req]
    chosen, skipped = [], {}
    for kname in wanted:
        if kname != "sdpa" and not cuda:
            skipped[kname] = "CUDA only"
            continue
        why = None if kname == "sdpa" else check_kernel(kname, device, dtype, q_heads,
                                                        kv_heads, head_dim)
        if why is None:
            chosen.append(kname)
            if req == "auto":
                break
        else:
            skipped[kname] = why
            log(f"  attention kernel {kname}: {why}")
    if not chosen:
        raise ValueError(f"attention kernel {request}: {skipped.get(req, 'not usable')}")
    return chosen, skipped
