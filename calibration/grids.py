"""Measurement grids of the operator-level harness (no torch): which sizes get timed.

A serving engine runs each operator at whatever size the scheduler hands it, so a table must
be dense where the kernel's time *changes shape*: GEMM and attention kernels work in tiles
(cuBLAS/CUTLASS tiles of 16-256 rows along ``m``; flash-attention tiles of 64-128 queries;
KV blocks of 16 tokens), and their time steps up one tile after each multiple of the tile
size. A grid of round numbers only sits on one side of every step, so the points here come
in triples ``p - 1, p, p + 1`` around powers of two (and, in the full grid, around the
midpoints ``3p/2``), which puts a measured point on both sides of every power-of-two tile
boundary up to the range's end. Below 16 every size is measured (decode GEMMs at 1-16 rows
are launch- and weight-bandwidth bound and cheap to time). aiconfigurator's GEMM grid uses the
same idea (``m = 16j, 16j + 1`` up to 256, then ``256j, 256j + 1``; see
``shared/reference/aiconfigurator/data/*/gemm``).

Every grid is capped at its limit (``max_num_batched_tokens`` for token counts,
``max_num_seqs`` for decode batches, ``max_model_len``-like ``max_context`` for context) and
always contains the limit itself, so the table covers exactly the range the engine can reach.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


def _octaves(lo: int, hi: int) -> list[int]:
    """Powers of two ``p`` with ``lo <= p <= hi``."""
    out, p = [], 1
    while p <= hi:
        if p >= lo:
            out.append(p)
        p *= 2
    return out


def _capped(values, hi: int, lo: int = 1) -> list[int]:
    """Sorted unique ints of ``values`` within ``[lo, hi]``, plus ``hi`` itself."""
    return sorted({int(v) for v in values if lo <= int(v) <= hi} | {int(hi)})


def token_grid(max_tokens: int, quick: bool = False) -> list[int]:
    """Token counts (GEMM ``m``) from 1 to ``max_tokens`` that straddle tile boundaries.

    Full grid: every count 1..16; ``p - 1, p, p + 1`` for each power of two ``p >= 32``; and
    ``3p/2 - 1, 3p/2, 3p/2 + 1`` for each power of two ``p >= 16`` (24, 48, 96, ...). Quick
    grid: 1, 2, 3, 4, 6, 8, 12, 16, the power-of-two triples and the bare midpoints.

    Parameters
    ----------
    max_tokens : int
        Largest token count (tokens); ``max_num_batched_tokens`` of the engine.
    quick : bool
        The smaller grid.

    Returns
    -------
    list of int
        Sorted, unique, capped at and including ``max_tokens``.

    Raises
    ------
    ValueError
        ``max_tokens < 1``.
    """
    hi = int(max_tokens)
    if hi < 1:
        raise ValueError(f"max_num_batched_tokens must be >= 1, got {max_tokens}")
    pts: set[int] = set(range(1, 17)) if not quick else {1, 2, 3, 4, 6, 8, 12, 16}
    for p in _octaves(32, 2 * hi):
        pts |= {p - 1, p, p + 1}
    for p in _octaves(16, hi):
        mid = 3 * p // 2
        pts |= {mid} if quick else {mid - 1, mid, mid + 1}
    return _capped(pts, hi)


def batch_grid(max_num_seqs: int, quick: bool = False) -> list[int]:
    """Decode batch sizes from 1 to ``max_num_seqs``.

    Full grid: every batch 1..16, then powers of two and their midpoints (24, 32, 48, ...)
    and ``p + 1`` after each power of two from 16 (a CUDA-graph capture size of vLLM is a
    multiple of 8, so a batch one above is padded to the next size). Quick grid: 1, 2, 3, 4,
    6, 8, 12, 16 and the powers of two and midpoints above.

    Raises
    ------
    ValueError
        ``max_num_seqs < 1``.
    """
    hi = int(max_num_seqs)
    if hi < 1:
        raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
    pts: set[int] = set(range(1, 17)) if not quick else {1, 2, 3, 4, 6, 8, 12, 16}
    for p in _octaves(16, hi):
        pts |= {p, 3 * p // 2}
        if not quick:
            pts.add(p + 1)
    return _capped(pts, hi)


def context_grid(max_context: int, quick: bool = False, lo: int = 16) -> list[int]:
    """Context lengths (tokens attended per sequence) from ``lo`` to ``max_context``.

    Powers of two and midpoints; the full grid adds ``p + 1`` after each power of two from
    64 (the first token of a new KV block: paged kernels step at block boundaries).

    Raises
    ------
    ValueError
        ``max_context < 1``.
    """
    hi = int(max_context)
    if hi < 1:
        raise ValueError(f"max context must be >= 1, got {max_context}")
    lo = min(int(lo), hi)
    pts: set[int] = set()
    for p in _octaves(1, hi):
        pts |= {p, 3 * p // 2}
        if not quick and p >= 64:
            pts.add(p + 1)
    return _capped(pts, hi, lo)


def start_grid(max_context: int, quick: bool = False) -> list[int]:
    """Cached-prefix lengths (``start``) for prefill: 0, then powers of two from 16 (quick:
    powers of four from 16) up to ``max_context`` (prefill attention is close to linear in
    the prefix, so an octave grid interpolates well)."""
    hi = int(max_context)
    pts = {0} | {p for p in _octaves(16, hi) if not quick or p.bit_length() % 2 == 1}
    return sorted(v for v in pts if v <= hi)


def message_grid(max_bytes: int, quick: bool = False, lo: int = 1024) -> list[int]:
    """All-reduce message sizes (bytes): powers of two from ``lo`` (1 KiB) to the first power
    of two >= ``max_bytes``; the full grid adds the midpoints ``3p/2``."""
    hi = max(int(lo), int(max_bytes))
    top = 1
    while top < hi:
        top *= 2
    pts: set[int] = set()
    for p in _octaves(int(lo), top):
        pts.add(p)
        if not quick and p < top:
            pts.add(3 * p // 2)
    return sorted(pts)


@dataclass
class OperatorGrid:
    """Sizes the operator-level harness times (all in tokens, sequences or bytes).

    Attributes
    ----------
    gemm_m : list of int
        Token counts of the layer GEMMs (rows of the activation).
    lm_head_m : list of int
        Rows of the LM-head GEMM (sampled rows: at most ``max_num_seqs``).
    decode_batch, decode_ctx : list of int
        Decode attention: sequences per step x tokens attended per sequence.
    prefill_batch, prefill_q, prefill_start : list of int
        Prefill attention: sequences x new tokens per sequence x cached tokens before them.
    message_bytes : list of int
        All-reduce / collective message sizes.
    max_num_batched_tokens, max_num_seqs, max_context : int
        The limits the grid was built for.
    max_kv_tokens : int
        Points whose KV cache (``batch x context`` tokens, one layer) exceeds this are
        skipped (see :func:`kv_token_budget`).
    """

    gemm_m: list[int]
    lm_head_m: list[int]
    decode_batch: list[int]
    decode_ctx: list[int]
    prefill_batch: list[int]
    prefill_q: list[int]
    prefill_start: list[int]
    message_bytes: list[int]
    max_num_batched_tokens: int
    max_num_seqs: int
    max_context: int
    max_kv_tokens: int
    quick: bool = False
    notes: list[str] = field(default_factory=list)

    def decode_points(self) -> list[tuple[int, int]]:
        """``(batch, ctx_mean)`` pairs within the KV budget, batch-major."""
        return [(b, c) for b in self.decode_batch for c in self.decode_ctx
                if b * c <= self.max_kv_tokens]

    def prefill_points(self) -> list[tuple[int, int, int]]:
        """``(batch, q, start)`` triples: ``batch * q <= max_num_batched_tokens`` (one step),
        ``start + q <= max_context`` and ``batch * (start + q) <= max_kv_tokens``."""
        out = []
        for b in self.prefill_batch:
            for q in self.prefill_q:
                if b * q > self.max_num_batched_tokens:
                    continue
                for s in self.prefill_start:
                    if s + q <= self.max_context and b * (s + q) <= self.max_kv_tokens:
                        out.append((b, q, s))
        return out

    def as_dict(self) -> dict:
        return asdict(self)


def kv_token_budget(free_bytes: float, kv_bytes_per_token: float, fraction: float = 0.4,
                    hard_cap: int = 1 << 22) -> int:
    """Largest KV cache (tokens, one layer) a grid point may allocate.

    ``fraction`` of the device's free memory (default 0.4: the cache pool plus the gathered
    copy of the SDPA fallback, which doubles it, and the L2-flush buffer stay below free
    memory) divided by the bytes of one token's K and V for one layer
    (``2 x kv_heads x head_dim x bytes per element``, DESIGN.md glossary), at most
    ``hard_cap`` (4 Mi tokens: 256 sequences x 16k context, past every serving limit we model).

    Raises
    ------
    ValueError
        ``kv_bytes_per_token <= 0``.
    """
    if kv_bytes_per_token <= 0:
        raise ValueError(f"kv bytes per token must be > 0, got {kv_bytes_per_token}")
    return int(max(16, min(hard_cap, fraction * float(free_bytes) / kv_bytes_per_token)))


def operator_grid(max_num_batched_tokens: int, max_num_seqs: int, max_context: int,
                  max_kv_tokens: int, hidden_bytes_per_token: int, quick: bool = False
                  ) -> OperatorGrid:
    """The harness grid for one model shard and set of engine limits.

    Parameters
    ----------
    max_num_batched_tokens : int
        Tokens per engine step (GEMM rows, prefill tokens per step).
    max_num_seqs : int
        Sequences per step (decode batch, LM-head rows).
    max_context : int
        Longest context per sequence (tokens).
    max_kv_tokens : int
        KV budget per point (tokens, one layer), from :func:`kv_token_budget`.
    hidden_bytes_per_token : int
        Bytes of one token's hidden state (``hidden x bytes per element``): the TP
        all-reduce message of a step is ``tokens x`` this, so the message grid reaches
        ``max_num_batched_tokens x hidden_bytes_per_token``.
    quick : bool
        Coarser grids.

    Returns
    -------
    OperatorGrid
    """
    tok, seqs, ctx = int(max_num_batched_tokens), int(max_num_seqs), int(max_context)
    q_all = token_grid(tok, quick)
    # prefill queries: octaves and midpoints, plus the triples around flash-attention's
    # query tiles (64 and 128 rows; FlashAttention-2 paper, Dao 2023, section 3.3) and 256
    q = {p for p in _octaves(1, tok)} | {3 * p // 2 for p in _octaves(2, tok)}
    if not quick:
        q |= {v for p in (64, 128, 256) for v in (p - 1, p + 1)}
    q = _capped(q, tok)
    # prefill batches: chunked prefill mixes few prompts per step; 32 covers vLLM's
    # max_num_partial_prefills-style limits with room (the time is near-linear in batch)
    pb = sorted(v for v in ([1, 2, 4, 8] + ([] if quick else [3, 16, 32]))
                if v <= min(seqs, tok))
    return OperatorGrid(
        gemm_m=q_all,
        lm_head_m=token_grid(min(seqs, tok), quick),
        decode_batch=batch_grid(seqs, quick),
        decode_ctx=context_grid(ctx, quick),
        prefill_batch=pb,
        prefill_q=q,
        prefill_start=start_grid(ctx, quick),
        message_bytes=message_grid(tok * int(hidden_bytes_per_token), quick),
        max_num_batched_tokens=tok, max_num_seqs=seqs, max_context=ctx,
        max_kv_tokens=int(max_kv_tokens), quick=bool(quick))
