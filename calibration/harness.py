"""Calibration harness: time a model's operators on this device and write a profile folder.

``servesim calibrate --device cpu --model servesim-tiny-llama --quick -o hardware_profiles/NAME``
runs :class:`Harness` (format v1, through :func:`calibration.dispatch.calibrate`). For the
model's shapes at its TP shard it measures, on ``cpu`` or
``cuda``:

- the QKV, O, gate/up and down GEMMs over a grid of token counts that straddles tile
  boundaries (63/64/65, 127/128/129, ...);
- attention prefill over (query tokens x cached context) and decode over (batch x mean
  context), with uniform and skewed context lengths, through
  ``torch.nn.functional.scaled_dot_product_attention`` (per-sequence KV caches, as the engine);
- the layer's elementwise ops (2 RMSNorms, rotary, SwiGLU, 2 residual adds) and the LM head
  (final norm, GEMM, argmax) over token / row counts;
- NCCL all-reduce over message sizes when more than one CUDA device is present;
- the engine's per-step CPU overhead (the ``cpu_overhead`` operator): the real engine
  (:mod:`calibration.engine`) serves synthetic workloads and each step's wall time minus the
  operator times measured in that same step is fitted as ``a + b * num_seqs + c * num_tokens``
  (only when the whole model fits the engine on this device).

Operators are timed inside forward passes of the model over synthetic steps (see
:mod:`calibration.timing` for why): each grid point runs ``warmup`` untimed passes and
``repeats`` timed ones; every layer contributes one sample per pass. Tables keep median,
quartiles, IQR/median, a noisy flag (IQR/median > 0.2) and the raw samples. Large models are
timed with a truncated stack (``context_layers``) and a small embedding table; the per-layer
operators are the model's own shapes.

The folder also gets ``provenance.yaml`` (device, driver/CUDA and torch versions, CPU model,
date, dtype, threads, harness version, grid) and, when it has none, a ``spec.yaml`` whose peak
FLOP/s and bandwidth are estimated from the measurements (labelled ``measured``), so the folder
is a usable GPU profile (``hardware.gpu: <folder>``). CPU runs use float32 (bf16 matmul on CPU
is slow and unrepresentative) and say so; CUDA runs use bfloat16.

The grid, the tables built from the samples and the folder's files are in
:mod:`calibration.flat_format`; this module measures.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.perf.tables.flat_profile import PROVENANCE_FILE, TABLE_FILES

from .device import device_info, measure_bandwidth, write_spec
from .flat_format import (
    ELEMENTWISE_NAMES,
    GEMM_NAMES,
    Grid,
    Sink,
    build_tables,
    check_loads,
    default_grid,
    merge_table,
    skewed_contexts,
    write_provenance,
)
from .timing import Probe, time_isolated, tune_allocator
from .tiny_model import TinyConfig, TinyLlama, resolve_model, shard_config, weight_bytes

#: largest model (bytes of float32 weights) the harness runs whole, and the engine at all
ENGINE_MAX_WEIGHT_BYTES = 1.5e9
#: largest LM head timed inside the forward passes (bigger ones are timed apart)
LM_IN_CONTEXT_MAX_BYTES = 2.56e8


# ------------------------------------------------------------------------------ measurement
class _Points:
    """The synthetic steps of a grid, prepared once, and the samples measured on them."""

    def __init__(self, model: TinyLlama, grid: Grid, sample: bool = True):
        import torch

        from .kernels import SeqSlice
        self.model, self.grid = model, grid
        dev = model.device
        self.L = len(model.layers)
        self.points: list[tuple] = []
        for q in grid.prefill_q:
            for s in grid.prefill_start:
                self.points.append(("prefill", q, s, None))
        for b in grid.decode_batch:
            for c in grid.decode_ctx:
                if b * c > grid.max_decode_tokens:
                    continue  # more KV than a device would hold
                for sk in grid.skews:
                    if sk == "skewed" and b == 1:
                        continue
                    self.points.append(("decode", b, c, sk))
        # one cache per batch slot, as long as the longest context that slot ever holds
        caps: dict[int, int] = {0: max(grid.prefill_start) + max(grid.prefill_q) + 1}
        for kind, a, b, sk in self.points:
            if kind == "decode":
                ctxs = [b] * a if sk == "uniform" else skewed_contexts(a, b)
                for j, c in enumerate(ctxs):
                    caps[j] = max(caps.get(j, 0), c + 1)
        pool = [model.new_cache(caps[j]) for j in range(max(caps) + 1)]
        for c in pool:
            for kc, vc in c:
                kc.zero_()
                vc.zero_()
        gen = torch.Generator(device="cpu").manual_seed(0)
        self.prepared = []
        for kind, a, b, sk in self.points:
            if kind == "prefill":
                q, s = a, b
                seqs_pre = [[SeqSlice(0, q, s, pool[0])]]
                seqs_dec: list = []
                T = q
                pos = torch.arange(s, s + q)
                rows = torch.tensor([q - 1])
            else:
                bsz, mean = a, b
                ctxs = [mean] * bsz if sk == "uniform" else skewed_contexts(bsz, mean)
                seqs_pre = []
                seqs_dec = [SeqSlice(j, 1, c - 1, pool[j]) for j, c in enumerate(ctxs)]
                T = bsz
                pos = torch.tensor([c - 1 for c in ctxs])
                rows = torch.arange(bsz)
            tokens = torch.randint(0, model.embed.shape[0], (T,), generator=gen).to(dev)
            if not sample:  # the LM head is timed apart (large vocabularies)
                rows = rows[:0]
            self.prepared.append((tokens, pos.to(dev), seqs_pre, seqs_dec, rows.to(dev)))
        self.per_point: list[dict] = [{} for _ in self.points]
        self.order_rng = np.random.default_rng(0)
        self.passes_done = 0

    def pass_order(self) -> list[tuple[int, bool]]:
        """One pass as (point, record) pairs, ordered the way an engine meets its steps.

        In a serving engine most decode steps follow a decode step of the same batch, and a
        prefill step usually follows decode steps. So each decode point runs twice in a row
        (the second run is recorded) and each prefill point follows a decode point; decode
        points and prefill points are drawn in a fresh random order every pass. (Repeating
        one step many times keeps its data and code unrealistically hot; a fully shuffled
        order puts a large prefill before most small steps, which is unrealistically cold.)
        """
        kinds = np.array([p[0] for p in self.points])
        dec = self.order_rng.permutation(np.flatnonzero(kinds == "decode")).tolist()
        pre = self.order_rng.permutation(np.flatnonzero(kinds == "prefill")).tolist()
        order: list[tuple[int, bool]] = []
        while dec or pre:
            if dec:
                i = dec.pop()
                order += [(i, False), (i, True)]
            elif pre:
                j = int(self.order_rng.integers(len(self.points)))
                order.append((j, False))
            if pre:
                order.append((pre.pop(), True))
        return order

    def run(self, probe: Probe, passes: int, record: bool, log, deadline: float | None) -> None:
        """``passes`` passes over all points (see :meth:`pass_order`).

        A prefill point with no cached context gets a freshly allocated KV cache of a random
        capacity each time, as a request's first chunk does in the engine (its first writes
        touch new memory, about 5% slower than writing into a warm cache).
        """
        from .kernels import SeqSlice
        t_start = time.perf_counter()
        for p in range(passes):
            if record and deadline is not None and self.passes_done > 0 \
                    and time.perf_counter() > deadline:
                log(f"  time budget reached after {self.passes_done} timed passes")
                break
            for i, keep in self.pass_order():
                args = self.prepared[i]
                kind, q, start, _ = self.points[i]
                if kind == "prefill" and start == 0:
                    # a first chunk writes into a cache the engine has just allocated
                    cap = q + int(self.order_rng.integers(1, 400))
                    args = (args[0], args[1], [[SeqSlice(0, q, 0, self.model.new_cache(cap))]],
                            args[3], args[4])
                self.model.forward(*args, probe)
                got = probe.collect()
                if not (record and keep):
                    continue
                per = self.per_point[i]
                for (layer, name), sec in got.items():
                    per.setdefault(name, [[] for _ in range(self.L + 1)])[layer].append(sec)
            if record:
                self.passes_done += 1
            log(f"  {'timed' if record else 'warm-up'} pass over {len(self.points)} steps "
                f"({time.perf_counter() - t_start:.0f} s)")

    def to_sink(self) -> Sink:
        sink = Sink()
        L = self.L
        for (kind, a, b, sk), per, prep in zip(self.points, self.per_point, self.prepared):
            if not per:
                continue
            T = int(prep[0].shape[0])
            nrep = len(per["qkv_proj"][0])
            flat = {n: [v for lay in vals for v in lay] for n, vals in per.items()}
            for op in GEMM_NAMES:
                sink.add("gemm", (op, T), flat[op])
            # one elementwise sample per (layer, pass): sum of that layer's elementwise calls
            samples = [sum(per[n][j][r] for n in ("rmsnorm", "rope", "act", "add"))
                       for j in range(L) for r in range(nrep)]
            sink.add("elementwise", (T,), samples)
            for n in ELEMENTWISE_NAMES:
                sink.add("elementwise_part", (n, T), flat[n])
            if int(prep[4].shape[0]) > 0:
                sink.add("lm_head", (int(prep[4].shape[0]),), flat["lm_head"])
            if kind == "prefill":
                sink.add("attention_prefill", (a, b), flat["attention_prefill"])
            else:
                sink.add("attention_decode", (a, b, sk), flat["attention_decode"])
        return sink



# ------------------------------------------------------------------------------ extras
def measure_all_reduce(sizes: list[int], log) -> pd.DataFrame | None:
    """Eager NCCL all-reduce (bf16) over ``sizes`` bytes for 2, 4, 8 GPUs (when present), in
    the v1 ``all_reduce.csv`` columns; None with fewer than two GPUs.

    Measured by :func:`calibration.collectives.measure_collectives` (one process per GPU,
    5 warm-up and 20 timed calls per size, CUDA events on rank 0).
    """
    from .collectives import measure_collectives
    res = measure_collectives(sizes, warmup=5, repeats=20, graph=False, ops=("all_reduce",),
                              log=log)
    df = res.get("all_reduce")
    if df is None or df.empty:
        return None
    return df.drop(columns=["backend", "impl"]).reset_index(drop=True)


def probe_overhead_s(device: str, n: int = 20000) -> float:
    """Seconds a :class:`Probe` adds per timed call outside the call itself (CPU only)."""
    if not device.startswith("cpu"):
        return 0.0
    p = Probe(device)
    p.layer = 0

    def noop():
        return None

    t = time.perf_counter()
    for _ in range(n):
        noop()
    base = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(n):
        p.time("x", noop)
    inner = p.collect().get((0, "x"), 0.0)
    return max(0.0, (time.perf_counter() - t - base - inner) / n)


def measure_cpu_overhead(model: TinyLlama, max_num_seqs: int, max_num_batched_tokens: int,
                         quick: bool, log) -> pd.DataFrame:
    """The engine's per-step time outside its operators (one row per engine step).

    The real engine serves synthetic workloads at fixed concurrencies (``B`` requests released
    at t = 0, prompts 16-160 tokens, 12-24 output tokens each, for ``B`` = 1, 2, 4, ...,
    ``max_num_seqs``) with a :class:`Probe` on; a step's residual is its wall time minus the
    operator times measured *in that step* (minus the probe's own per-call cost), so it holds
    what the tables do not: scheduling, input preparation, embedding lookup, the layer loop,
    sampling's device-to-host copy, and the scheduler update. One untimed warm-up workload
    first.
    """
    from simulator.base.request import RequestSpec
    from simulator.scenario.config import SchedulerConfig
    from simulator.scheduling.limits import SchedulerLimits

    from .engine import RealEngine
    dev = str(model.device)
    cfg = SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                          enable_chunked_prefill=True)
    limits = SchedulerLimits(max_model_len=model.cfg.max_position_embeddings)
    eng = RealEngine(model, cfg, limits, num_gpu_blocks=200_000, seed=1)
    rng = np.random.default_rng(1)
    sizes = sorted({b for b in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256)
                    if b <= max_num_seqs} | {max_num_seqs})
    out_len = 12 if quick else 24

    def workload(b: int) -> list:
        return [RequestSpec(i, 0.0, int(rng.integers(16, 161)), out_len) for i in range(b)]

    po = probe_overhead_s(dev)
    eng.run(workload(min(4, max_num_seqs)), realtime=False, probe=Probe(dev))  # warm-up
    parts = []
    for _ in range(1 if quick else 2):
        for b in sizes:
            r = eng.run(workload(b), realtime=False, probe=Probe(dev))
            st = r.steps
            ops = np.array([sum(d.values()) for d in r.meta["op_times"]])
            calls = np.array([len(d) for d in r.meta["op_times"]], dtype=float)
            parts.append(pd.DataFrame({"num_seqs": st["num_seqs"], "num_tokens": st["num_tokens"],
                                       "step_s": st["step_time_s"], "kernels_s": ops,
                                       "probe_s": calls * po}))
    df = pd.concat(parts, ignore_index=True)
    df["residual_s"] = df["step_s"] - df["kernels_s"] - df["probe_s"]
    log(f"  cpu overhead: {len(df)} engine steps, median residual "
        f"{df['residual_s'].median() * 1e6:.0f} us (probe cost {po * 1e9:.0f} ns/call)")
    return df


def aggregate_overhead(df: pd.DataFrame) -> pd.DataFrame:
    """Per-step residuals -> one row per (num_seqs, num_tokens): medians and counts."""
    return df.groupby(["num_seqs", "num_tokens"], as_index=False).agg(
        residual_s=("residual_s", "median"), step_s=("step_s", "median"),
        kernels_s=("kernels_s", "median"), num_samples=("residual_s", "size"))


# ------------------------------------------------------------------------------ main entry
class Harness:
    """A calibration in progress: measure in passes, write the profile when asked.

    :func:`calibration.dispatch.calibrate` runs it start to finish; ``validate`` brackets its real runs with timed
    passes (half before, half after) so that the tables and the runs see the same machine.

    Parameters are those of :func:`calibration.dispatch.calibrate`.
    """

    def __init__(self, model: str, out_dir: str | Path, device: str = "cpu", quick: bool = False,
                 tensor_parallel_size: int = 1, threads: int | None = 1,
                 max_num_seqs: int = 16, max_num_batched_tokens: int = 256,
                 max_context: int = 2048, time_budget_s: float | None = None,
                 log: Callable[[str], None] = print):
        import torch
        self.t_begin = time.perf_counter()
        dev = torch.device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available")
        if dev.type not in ("cpu", "cuda"):
            raise ValueError(f"--device must be cpu or cuda, got {device!r}")
        if dev.type == "cpu" and threads:
            torch.set_num_threads(int(threads))
        tune_allocator()
        self.torch, self.dev, self.log, self.quick = torch, dev, log, quick
        self.nthreads = torch.get_num_threads()
        self.tdtype = torch.float32 if dev.type == "cpu" else torch.bfloat16
        self.dtype = "float32" if dev.type == "cpu" else "bf16"
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.cfg = resolve_model(model)
        self.tp = int(tensor_parallel_size)
        self.shard = shard_config(self.cfg, self.tp)
        self.limits = (int(max_num_seqs), int(max_num_batched_tokens), int(max_context))
        self.whole = weight_bytes(self.shard, 4 if dev.type == "cpu" else 2) \
            <= ENGINE_MAX_WEIGHT_BYTES
        self.ctx_layers = self.shard.num_layers if self.whole else \
            min(1 if quick else 2, self.shard.num_layers)
        lm_bytes = self.shard.vocab_size * self.shard.hidden_size * (4 if dev.type == "cpu" else 2)
        self.lm_in_context = self.whole or lm_bytes <= LM_IN_CONTEXT_MAX_BYTES
        ctx_cfg = TinyConfig(**{**self.shard.to_dict(), "num_layers": self.ctx_layers,
                                "max_position_embeddings": max(
                                    self.shard.max_position_embeddings, 2 * max_context + 2)})
        self.grid = default_grid(self.shard, quick, max_num_seqs, max_num_batched_tokens,
                                 max_context, dev.type)
        self.info = device_info(str(dev), self.nthreads)
        g = self.grid
        log(f"calibrating {self.cfg.name} (TP {self.tp}) on {self.info['device_name']} "
            f"[{self.dtype}], {self.ctx_layers}/{self.shard.num_layers} layers in context, "
            f"{len(g.prefill_q) * len(g.prefill_start)} prefill + "
            f"{len(g.decode_batch) * len(g.decode_ctx) * len(g.skews)} decode steps")
        self.model = TinyLlama(ctx_cfg, str(dev), self.tdtype, seed=0,
                               embed_rows=None if self.whole else 4096)
        self.probe = Probe(str(dev))
        self.points = _Points(self.model, self.grid, sample=self.lm_in_context)
        self._lm_samples: dict[int, list] = {}
        self.deadline = self.t_begin + time_budget_s if time_budget_s else None
        self._warm = False
        self._overhead: list[pd.DataFrame] = []
        self._engine_model = None

    def measure(self, passes: int | None = None) -> None:
        """Run ``passes`` timed passes (default: the grid's repeats); warms up on first use."""
        if not self._warm:
            self.points.run(self.probe, self.grid.warmup, False, self.log, None)
            self._warm = True
        self.points.run(self.probe, self.grid.repeats if passes is None else passes, True,
                        self.log, self.deadline)
        if not self.lm_in_context:
            self._measure_lm_head_apart()

    def _measure_lm_head_apart(self) -> None:
        """LM head (final norm, GEMM, argmax) timed in a loop, for large vocabularies."""
        from .kernels import lm_head
        torch = self.torch
        m = self.model
        for rows in sorted(set(self.grid.decode_batch) | {1}):
            x = torch.randn(rows, self.shard.hidden_size, device=self.dev, dtype=self.tdtype)
            ts = time_isolated(lambda x=x: lm_head(x, m.w_norm, m.w_lm), str(self.dev),
                               warmup=1, repeats=2 if self.quick else 5)
            self._lm_samples.setdefault(rows, []).extend(ts)

    @property
    def can_measure_overhead(self) -> bool:
        return self.whole and self.tp == 1

    def measure_overhead(self) -> None:
        """Engine runs for the ``cpu_overhead`` table (small models at TP 1 only)."""
        if not self.can_measure_overhead:
            self.log("  cpu overhead not measured (model too large to run whole on this "
                     "device, or TP > 1)")
            return
        if self._engine_model is None:
            self._engine_model = self.model if self.ctx_layers == self.shard.num_layers \
                else TinyLlama(self.shard, str(self.dev), self.tdtype)
        mns, mbt, _ = self.limits
        self._overhead.append(measure_cpu_overhead(self._engine_model, mns, mbt, self.quick,
                                                   self.log))

    def write(self) -> Path:
        """Write tables, ``spec.yaml`` and ``provenance.yaml`` from all samples so far."""
        out, info = self.out, self.info
        sink = self.points.to_sink()
        for rows, ts in self._lm_samples.items():
            sink.add("lm_head", (rows,), ts)
        tables = build_tables(sink, self.shard, self.dtype, self.cfg.name)
        for name, df in tables.items():
            merge_table(out, name, df)
        g = tables["gemm"]
        peak = float((2.0 * g["m"] * g["k"] * g["n"] / g["median_s"]).max())
        bw = measure_bandwidth(str(self.dev), self.tdtype,
                               64 * 2**20 if self.quick else 256 * 2**20)
        ar = None
        if self.dev.type == "cuda":
            ar = measure_all_reduce([2**p for p in range(11, 27, 3 if self.quick else 1)],
                                    self.log)
            if ar is not None and len(ar):
                merge_table(out, "all_reduce", ar)
        spec_path = write_spec(out, info, peak, bw, self.dtype, self.nthreads, ar)
        cpu_fit = None
        if self._overhead:
            from simulator.perf.tables.flat_profile import fit_cpu_overhead
            ov = aggregate_overhead(pd.concat(self._overhead, ignore_index=True))
            ov.insert(0, "num_layers", self.shard.num_layers)
            ov.insert(1, "hidden", self.shard.hidden_size)
            ov.insert(2, "model", self.cfg.name)
            merge_table(out, "cpu_overhead", ov)
            a, b, c = fit_cpu_overhead(ov)
            cpu_fit = {"a_s": a, "b_s_per_seq": b, "c_s_per_token": c, "rows": len(ov)}
            self.log(f"  cpu overhead fit: {a * 1e6:.0f} us + {b * 1e6:.1f} us/seq + "
                     f"{c * 1e6:.2f} us/token")
        write_provenance(out, info, self.cfg, self.tp, self.shard, self.grid, self.dtype,
                         self.ctx_layers, peak, bw, cpu=cpu_fit,
                         timed_passes=self.points.passes_done,
                         elapsed_s=time.perf_counter() - self.t_begin)
        check_loads(out, self.cfg, self.tp)  # the folder must load as a table model
        self.log(f"wrote {out}/ ({', '.join(sorted(TABLE_FILES[k] for k in tables))}"
                 f"{', cpu_overhead.csv' if cpu_fit else ''}, {PROVENANCE_FILE}, "
                 f"{spec_path.name}) after {time.perf_counter() - self.t_begin:.0f} s")
        return out
