"""Operator-level measurements, as a serving engine runs the operators (torch).

For one model's TP-shard shapes, :class:`OperatorBench` times each operator family on its
own over the grid of :mod:`calibration.grids`, with :class:`calibration.timing.OpTimer`
(CUDA events; L2 flushed before each call; decode attention and elementwise chains under
CUDA graphs when enabled), and returns rows of the v2 latency tables
(:mod:`calibration.tableset`; seconds per call, one layer, one GPU):

``gemm``
    ``torch.nn.functional.linear(x, W)`` with ``W`` of shape ``(n, k)`` as vLLM's unquantised
    linear layers call it, for the QKV, O, gate/up and down projections and the LM head, bf16
    on CUDA (float32 on CPU); with ``fp8=True`` also ``torch._scaled_mm`` on float8_e4m3fn
    operands with per-tensor scales and a bf16 output (vLLM's per-tensor FP8 path; the
    activation quantisation before it is a separate op, not timed here).
``attention_decode``
    One batched decode call (one new token per sequence, every sequence ``ctx_mean`` tokens
    long) over a paged KV cache with a shuffled block table, per kernel
    (:mod:`calibration.paged`).
``attention_prefill``
    One batched prefill call: ``batch`` sequences of ``q`` new tokens after ``start`` cached
    ones (causal within the chunk, the cached prefix fully visible).
``elementwise``
    The layer's elementwise calls of :mod:`calibration.kernels` (2 RMSNorms, rotary, SwiGLU,
    2 residual adds) timed as one chain, plus each part alone (``rmsnorm_s`` ... ``add_s``:
    one call each). vLLM fuses these into custom kernels, so on a GPU these eager torch ops
    are an upper bound.
``lm_head``
    Final RMSNorm, LM-head GEMM and greedy argmax over ``rows`` sampled rows.

A grid point that raises (an out-of-memory or a shape a kernel rejects) is skipped and
counted; the counts go to the provenance.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .grids import OperatorGrid
from .paged import KERNEL_BLOCK_SIZE, build_paged_layout, make_attention, new_kv_pool
from .timing import OpTimer, summarize
from .tiny_model import TinyConfig

#: float8 GEMM dimensions must be multiples of 16 (cuBLASLt FP8 requirement, enforced by
#: torch._scaled_mm for the inner dimension and the output width)
FP8_ALIGN = 16


@dataclass
class BenchLog:
    """What happened while measuring: skipped points, notes, stop reasons."""

    skipped: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    truncated: list = field(default_factory=list)

    def skip(self, family: str, why: str) -> None:
        d = self.skipped.setdefault(family, {})
        d[why] = d.get(why, 0) + 1


def gemm_shapes(shard: TinyConfig) -> dict[tuple[int, int], list[str]]:
    """``(n, k) -> op names`` of one layer's GEMMs and the LM head at the TP shard.

    ``qkv_proj``: k = hidden, n = (q_heads + 2 kv_heads) x head_dim; ``o_proj``: k = q_heads x
    head_dim, n = hidden; ``mlp_gate_up``: k = hidden, n = 2 x intermediate; ``mlp_down``:
    k = intermediate, n = hidden; ``lm_head``: k = hidden, n = vocab (per shard). Ops with
    the same shape are measured once.
    """
    h, d = shard.hidden_size, shard.head_dim
    ops = {"qkv_proj": ((shard.num_attention_heads + 2 * shard.num_kv_heads) * d, h),
           "o_proj": (h, shard.num_attention_heads * d),
           "mlp_gate_up": (2 * shard.intermediate_size, h),
           "mlp_down": (h, shard.intermediate_size),
           "lm_head": (shard.vocab_size, h)}
    out: dict[tuple[int, int], list[str]] = {}
    for name, nk in ops.items():
        out.setdefault(nk, []).append(name)
    return out


class OperatorBench:
    """Times one model shard's operators on one device (see module docstring).

    Parameters
    ----------
    shard : TinyConfig
        Shapes at the TP shard (:func:`calibration.tiny_model.shard_config`).
    model_name : str
        Recorded in the free ``model`` column.
    device : str
    torch_dtype : torch.dtype
        Compute dtype (bf16 on CUDA, float32 on CPU).
    dtype : str
        Its table label (``bf16``, ``float32``).
    grid : OperatorGrid
    timer : OpTimer
    kernels : list of str
        Attention kernels to time (already checked, :func:`calibration.paged.select_kernels`).
    fp8 : bool
        Also time FP8 GEMMs.
    deadline : float, optional
        ``time.perf_counter()`` value after which no further points are started.
    log : callable
    """

    def __init__(self, shard: TinyConfig, model_name: str, device: str, torch_dtype,
                 dtype: str, grid: OperatorGrid, timer: OpTimer, kernels: list[str],
                 fp8: bool = False, deadline: float | None = None, log=print):
        import torch
        self.torch = torch
        self.shard, self.model_name = shard, model_name
        self.dev = torch.device(device)
        self.tdtype, self.dtype = torch_dtype, dtype
        self.grid, self.timer, self.kernels = grid, timer, list(kernels)
        self.fp8, self.deadline, self.log = bool(fp8), deadline, log
        self.record = BenchLog()
        self.gen = torch.Generator(device=self.dev).manual_seed(0)

    # ---------------------------------------------------------------- helpers
    def _randn(self, *shape, scale: float = 1.0, dtype=None):
        t = self.torch.randn(shape, generator=self.gen, device=self.dev,
                             dtype=dtype or self.tdtype)
        return t * scale if scale != 1.0 else t

    def _late(self, family: str) -> bool:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            if family not in self.record.truncated:
                self.record.truncated.append(family)
                self.log(f"  time budget reached: {family} stops here")
            return True
        return False

    def _time(self, family: str, fn, graph: bool = False):
        """Timing of ``fn`` or None (the point failed; counted)."""
        try:
            return self.timer.time(fn, graph=graph)
        except Exception as e:  # noqa: BLE001 - one bad point must not end the run
            self.record.skip(family, f"{type(e).__name__}: {str(e).splitlines()[0][:100]}")
            if self.dev.type == "cuda":
                self.torch.cuda.synchronize(self.dev)
                self.torch.cuda.empty_cache()
            return None

    def _row(self, base: dict, timing) -> dict:
        st = summarize(timing.samples_s).as_dict()
        row = {**base, **st}
        if timing.note:
            row["note"] = timing.note
        return row

    # ---------------------------------------------------------------- GEMM
    def measure_gemm(self) -> list[dict]:
        """Rows of the ``gemm`` table (bf16/float32, and fp8 when asked and possible)."""
        torch, F = self.torch, self.torch.nn.functional
        rows = []
        fp8_ok = self.fp8 and fp8_supported(self.dev)
        if self.fp8 and not fp8_ok:
            self.record.notes.append("fp8 GEMMs not measured: torch._scaled_mm needs a CUDA "
                                     "GPU of compute capability >= 8.9")
        for (n, k), names in gemm_shapes(self.shard).items():
            ms = self.grid.lm_head_m if names == ["lm_head"] else self.grid.gemm_m
            w = self._randn(n, k, scale=k ** -0.5)
            x = self._randn(max(ms), k)
            base = {"model": self.model_name, "op": "+".join(names), "n": n, "k": k}
            for m in ms:
                if self._late("gemm"):
                    return rows
                xm = x[:m]
                t = self._time("gemm", lambda xm=xm, w=w: F.linear(xm, w))
                if t is not None:
                    rows.append(self._row({**base, "dtype": self.dtype, "m": m,
                                           "impl": "torch.nn.functional.linear"}, t))
            if fp8_ok and n % FP8_ALIGN == 0 and k % FP8_ALIGN == 0:
                f8 = torch.float8_e4m3fn
                wt = w.to(f8).t()      # (n, k) row-major, so its .t() is (k, n) column-major
                xq = x.to(f8)
                one = torch.ones((), device=self.dev, dtype=torch.float32)
                for m in ms:
                    if self._late("gemm"):
                        return rows
                    xm = xq[:m]
                    t = self._time("gemm", lambda xm=xm, wt=wt, one=one: torch._scaled_mm(
                        xm, wt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                    if t is not None:
                        rows.append(self._row({**base, "dtype": "fp8", "m": m,
                                               "impl": "torch._scaled_mm (per-tensor scales)"},
                                              t))
            del w, x
        return rows

    # ---------------------------------------------------------------- attention
    def _pool(self, kernel: str, max_tokens: int):
        bs = KERNEL_BLOCK_SIZE[kernel]
        return bs, new_kv_pool(-(-max_tokens // bs) + 1, bs, self.shard.num_kv_heads,
                               self.shard.head_dim, self.dev, self.tdtype, seed=1)

    def _attn_base(self, kernel: str, bs: int) -> dict:
        s = self.shard
        return {"model": self.model_name, "dtype": self.dtype, "kv_dtype": self.dtype,
                "q_heads": s.num_attention_heads, "kv_heads": s.num_kv_heads,
                "head_dim": s.head_dim, "window": 0, "kernel": kernel, "block_size": bs}

    def _workspace(self, kernel: str):
        if kernel != "flashinfer":
            return None
        from .paged import FLASHINFER_WORKSPACE_BYTES
        return self.torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=self.torch.uint8,
                                device=self.dev)

    def measure_decode(self) -> list[dict]:
        """Rows of ``attention_decode``: every (batch, ctx_mean) point, every kernel."""
        pts = self.grid.decode_points()
        rows: list[dict] = []
        if not pts:
            return rows
        qh, d = self.shard.num_attention_heads, self.shard.head_dim
        for kernel in self.kernels:
            bs = KERNEL_BLOCK_SIZE[kernel]
            need = max(b * (-(-c // bs) * bs) for b, c in pts)
            bs, (k, v) = self._pool(kernel, need)
            ws = self._workspace(kernel)
            base = self._attn_base(kernel, bs)
            for j, (b, c) in enumerate(pts):
                if self._late("attention_decode"):
                    break
                lay = build_paged_layout([c] * b, bs, num_blocks=k.shape[0], seed=j)
                q = self._randn(b, qh, d)
                try:
                    run = make_attention(kernel, k, v, lay, [1] * b, qh, workspace=ws)
                except Exception as e:  # noqa: BLE001
                    self.record.skip("attention_decode", f"{kernel}: {type(e).__name__}")
                    continue
                t = self._time("attention_decode", lambda run=run, q=q: run(q), graph=True)
                if t is not None:
                    rows.append(self._row({**base, "batch": b, "ctx_mean": c,
                                           "cuda_graph": t.cuda_graph}, t))
            del k, v, ws
            self._free()
        return rows

    def measure_prefill(self) -> list[dict]:
        """Rows of ``attention_prefill``: every (batch, q, start) point, every kernel."""
        pts = self.grid.prefill_points()
        rows: list[dict] = []
        if not pts:
            return rows
        qh, d = self.shard.num_attention_heads, self.shard.head_dim
        for kernel in self.kernels:
            bs = KERNEL_BLOCK_SIZE[kernel]
            need = max(b * (-(-(s + q) // bs) * bs) for b, q, s in pts)
            bs, (k, v) = self._pool(kernel, need)
            ws = self._workspace(kernel)
            base = self._attn_base(kernel, bs)
            for j, (b, q, s) in enumerate(pts):
                if self._late("attention_prefill"):
                    break
                lay = build_paged_layout([s + q] * b, bs, num_blocks=k.shape[0], seed=j)
                qt = self._randn(b * q, qh, d)
                try:
                    run = make_attention(kernel, k, v, lay, [q] * b, qh, workspace=ws)
                except Exception as e:  # noqa: BLE001
                    self.record.skip("attention_prefill", f"{kernel}: {type(e).__name__}")
                    continue
                t = self._time("attention_prefill", lambda run=run, qt=qt: run(qt))
                if t is not None:
                    rows.append(self._row({**base, "batch": b, "q": q, "start": s,
                                           "cuda_graph": t.cuda_graph}, t))
            del k, v, ws
            self._free()
        return rows

    def _free(self) -> None:
        if self.dev.type == "cuda":
            self.torch.cuda.empty_cache()

    # ---------------------------------------------------------------- elementwise, LM head
    def measure_elementwise(self) -> list[dict]:
        """Rows of ``elementwise`` (layer total and parts) over the token grid."""
        from . import kernels as K
        s = self.shard
        h, d, nq, nkv, inter = (s.hidden_size, s.head_dim, s.num_attention_heads,
                                s.num_kv_heads, s.intermediate_size)
        T = max(self.grid.gemm_m)
        x, y = self._randn(T, h), self._randn(T, h)
        q, kk = self._randn(T, nq, d), self._randn(T, nkv, d)
        gu = self._randn(T, 2 * inter)
        w = self.torch.ones(h, device=self.dev, dtype=self.tdtype)
        cos_t, sin_t = K.rope_tables(T, d, s.rope_theta, self.dev, self.tdtype)
        cos, sin = cos_t.unsqueeze(1), sin_t.unsqueeze(1)
        base = {"model": self.model_name, "dtype": self.dtype, "hidden": h,
                "intermediate": inter, "q_heads": nq, "kv_heads": nkv, "head_dim": d}
        rows = []
        for t in self.grid.gemm_m:
            if self._late("elementwise"):
                break
            parts, chain = _elementwise_calls(K, w, x[:t], y[:t], q[:t], kk[:t], gu[:t],
                                              cos[:t], sin[:t])
            tot = self._time("elementwise", chain, graph=True)
            if tot is None:
                continue
            extra = {}
            for col, fn in parts.items():
                pt = self._time("elementwise", fn, graph=True)
                extra[col] = summarize(pt.samples_s).median_s if pt is not None else float("nan")
            rows.append({**self._row({**base, "tokens": t}, tot), **extra})
        return rows

    def measure_lm_head(self) -> list[dict]:
        """Rows of ``lm_head`` (final norm, GEMM, argmax) over the sampled-rows grid."""
        from .kernels import rmsnorm
        F = self.torch.nn.functional
        h, vocab = self.shard.hidden_size, self.shard.vocab_size
        w_lm = self._randn(vocab, h, scale=h ** -0.5)
        w_norm = self.torch.ones(h, device=self.dev, dtype=self.tdtype)
        x = self._randn(max(self.grid.lm_head_m), h)
        rows = []
        for r in self.grid.lm_head_m:
            if self._late("lm_head"):
                break
            xr = x[:r]
            t = self._time("lm_head", lambda xr=xr: self.torch.argmax(
                F.linear(rmsnorm(xr, w_norm), w_lm), dim=-1), graph=True)
            if t is not None:
                rows.append(self._row({"model": self.model_name, "dtype": self.dtype,
                                       "hidden": h, "vocab": vocab, "rows": r}, t))
        return rows


def _elementwise_calls(K, w, x, y, q, k, gu, cos, sin):
    """The parts (column -> call) and the whole layer chain of elementwise calls on these
    tensors: 2 RMSNorms, rotary, 2 residual adds, SwiGLU (calibration/kernels.py)."""
    parts = {"rmsnorm_s": lambda: K.rmsnorm(x, w), "rope_s": lambda: K.rope(q, k, cos, sin),
             "act_s": lambda: K.silu_mul(gu), "add_s": lambda: K.add(x, y)}

    def chain():
        K.rmsnorm(x, w)
        K.rope(q, k, cos, sin)
        r = K.add(x, y)
        K.rmsnorm(r, w)
        K.silu_mul(gu)
        return K.add(r, y)

    return parts, chain


def fp8_supported(device) -> bool:
    """Whether ``torch._scaled_mm`` FP8 GEMMs can be timed on ``device``: a CUDA GPU of
    compute capability >= 8.9 (Ada, Hopper and later have FP8 tensor cores; NVIDIA
    Hopper/Ada architecture whitepapers)."""
    import torch
    dev = torch.device(device)
    if dev.type != "cuda" or not hasattr(torch, "float8_e4m3fn"):
        return False
    return tuple(torch.cuda.get_device_capability(dev)) >= (8, 9)


def measure_operators(bench: OperatorBench, families=("gemm", "attention_decode",
                                                      "attention_prefill", "elementwise",
                                                      "lm_head")) -> dict:
    """Run ``bench`` for each family; ``{family: rows}`` (families with no rows left out)."""
    fn = {"gemm": bench.measure_gemm, "attention_decode": bench.measure_decode,
          "attention_prefill": bench.measure_prefill, "elementwise": bench.measure_elementwise,
          "lm_head": bench.measure_lm_head}
    out = {}
    for fam in families:
        t0 = time.perf_counter()
        rows = fn[fam]()
        bench.log(f"  {fam}: {len(rows)} points ({time.perf_counter() - t0:.0f} s)")
        if rows:
            out[fam] = rows
    return out
