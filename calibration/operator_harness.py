"""``servesim calibrate`` in format v2: operator tables as a serving engine runs them (torch).

:func:`calibrate_operators` measures one model's operators at its TP shard on this device
(:mod:`calibration.ops`: GEMMs incl. the LM head, paged decode and prefill attention with the
best installed kernel, elementwise chain, LM head; :mod:`calibration.collectives`: NCCL
collectives across the visible GPUs) and writes a v2 table set
``OUT/tables/servesim-harness-<harness version>/`` (:mod:`calibration.tableset`) with its
``provenance.yaml``, plus ``OUT/spec.yaml`` (peaks measured here) when ``OUT`` has no
datasheet spec of its own. Calibrating another model into the same ``OUT`` adds its shapes
to the same set.

The default on CUDA; on CPU the same code runs with ``time.perf_counter`` timing and the
SDPA kernel (``--format v2``), which is what the tests exercise.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import HARNESS_VERSION
from .device import device_info, measure_bandwidth, write_spec
from .grids import kv_token_budget, operator_grid
from .tableset import (
    HARNESS_ENGINE,
    TABLES_DIR,
    check_table_set,
    now_iso,
    table_set_name,
    write_table_set,
)
from .tiny_model import resolve_model, shard_config

#: repetitions per grid point: (warmup, repeats) by (device type, quick)
REPEATS = {("cuda", False): (5, 30), ("cuda", True): (3, 10),
           ("cpu", False): (2, 10), ("cpu", True): (1, 5)}

METHOD = ("operators timed one at a time at the model's TP-shard shapes (calibration/ops.py): "
          "GEMMs as torch.nn.functional.linear (fp8: torch._scaled_mm), batched paged-KV "
          "attention through the named kernel over shuffled block tables "
          "(calibration/paged.py), elementwise chain and LM head of calibration/kernels.py, "
          "NCCL collectives via torch.distributed (calibration/collectives.py); per point "
          "warm-up calls then timed calls between CUDA events (CPU: perf_counter), L2 "
          "flushed and the stream kept ahead of the host before each call, decode attention "
          "and elementwise chains replayed from CUDA graphs where enabled; median of the "
          "samples")


#: one line per table: what its rows are (the provenance record's ``method``)
FAMILY_METHODS = {
    "gemm": "torch.nn.functional.linear(x, W[n, k]) (fp8: torch._scaled_mm, per-tensor scales, "
            "bf16 out), timed alone per (m, n, k)",
    "attention_decode": "one batched decode call per (batch, ctx_mean) over a paged KV cache "
                        "(shuffled block table), kernel in column kernel; CUDA graph replay "
                        "where column cuda_graph is true",
    "attention_prefill": "one batched causal prefill call per (batch, q, start) over a paged KV "
                         "cache (start cached tokens visible), kernel in column kernel",
    "elementwise": "calibration/kernels.py chain: 2 rmsnorm + rope + silu_mul + 2 add (parts "
                   "alone in *_s columns)",
    "lm_head": "rmsnorm + torch.nn.functional.linear(x, W[vocab, hidden]) + argmax",
    "all_reduce": "torch.distributed.all_reduce (NCCL), backend nccl = eager, graph = CUDA "
                  "graph replay; bytes = whole tensor",
    "nccl": "torch.distributed collectives (NCCL), eager; bytes = whole tensor (nccl-tests "
            "convention)",
}


def repo_commit() -> str | None:
    """``git rev-parse HEAD`` of this checkout (``-dirty`` when it has local changes), or None."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=False)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10, check=False)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _free_bytes(torch, dev) -> int:
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return int(4e9)


def calibrate_operators(model: str, out_dir: str | Path, device: str = "cuda",
                        quick: bool = False, tensor_parallel_size: int = 1,
                        threads: int | None = 1, max_num_seqs: int = 256,
                        max_num_batched_tokens: int = 8192, max_context: int = 8192,
                        time_budget_s: float | None = None, attention_backend: str = "auto",
                        fp8: bool = False, flush_l2: bool = True, cuda_graphs: bool = True,
                        warmup: int | None = None, repeats: int | None = None,
                        collectives: bool = True, file_format: str = "parquet",
                        log: Callable[[str], None] = print) -> Path:
    """Measure ``model``'s operator tables on ``device`` and write a v2 table set.

    Parameters
    ----------
    model : str
        ``servesim-tiny-llama`` (alias ``tiny``), a catalog id or a ``config.json`` path
        (dense models; MoE experts are not measured).
    out_dir : path
        Profile folder; the set goes to ``out_dir/tables/servesim-harness-<version>/``.
    device : str
        ``cuda``/``cuda:N`` (bf16) or ``cpu`` (float32, SDPA, perf_counter).
    quick : bool
        Coarser grids and fewer repeats.
    tensor_parallel_size : int
        Shapes are this TP degree's shard; collectives run for every world size that fits.
    threads : int or None
        torch CPU threads (CPU runs).
    max_num_seqs, max_num_batched_tokens, max_context : int
        Ranges of the grids (sequences, tokens per step, tokens per sequence).
    time_budget_s : float, optional
        Start no new grid point after this many seconds (later families are cut; recorded).
    attention_backend : str
        ``auto`` (the first of vllm_flash_attn, flashinfer, flash_attn, sdpa that passes its
        check), ``all``, or one kernel name.
    fp8 : bool
        Also time FP8 GEMMs (CUDA, compute capability >= 8.9).
    flush_l2, cuda_graphs : bool
        See :class:`calibration.timing.TimerSettings`.
    warmup, repeats : int, optional
        Calls per point (defaults in :data:`REPEATS`).
    collectives : bool
        Measure NCCL collectives when 2+ GPUs are visible.
    file_format : str
        ``parquet`` (zstd) or ``csv``.

    Returns
    -------
    Path
        The table-set folder.

    Raises
    ------
    ValueError
        No CUDA device for ``--device cuda``, an unknown device, model or kernel, bad limits,
        or an output folder measured on another device.
    """
    import torch

    from .ops import OperatorBench
    t_begin = time.perf_counter()
    limits = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
              "max_context": max_context}
    s = _setup(torch, model, device, quick, tensor_parallel_size, threads, limits,
               attention_backend, flush_l2, cuda_graphs, warmup, repeats, log)
    deadline = t_begin + float(time_budget_s) if time_budget_s else None
    bench = OperatorBench(s.shard, s.cfg.name, str(s.dev), s.tdtype, s.dtype, s.grid, s.timer,
                          s.kernels, fp8=fp8, deadline=deadline, log=log)
    tables, notes = _measure(bench, s, collectives, log)
    out = Path(out_dir)
    set_dir = out / TABLES_DIR / table_set_name(HARNESS_ENGINE, HARNESS_VERSION)
    records, prov = _provenance(s, bench, tables, notes, t_begin)
    if not tables:
        raise ValueError("no operator could be measured (every grid point failed)")
    rows = write_table_set(set_dir, tables, prov, records, file_format)
    _write_profile_spec(torch, s, tables, out, quick)
    check_table_set(set_dir)
    _check_query(set_dir, out, log)
    log(f"wrote {set_dir}/ ({', '.join(f'{k} {v}' for k, v in sorted(rows.items()))} rows) "
        f"after {time.perf_counter() - t_begin:.0f} s")
    return set_dir


@dataclass
class _Setup:
    """What one calibration measures with: the device, dtypes, model and its TP shard, the
    grid, the timer and the attention kernels that passed their check."""

    dev: object               # torch.device
    tdtype: object            # torch dtype of the operands
    dtype: str                # its table name (bf16, float32)
    cfg: object               # TinyConfig of the whole model
    tp: int
    shard: object             # TinyConfig of one TP shard
    info: dict                # device_info + kernel versions
    grid: object              # grids.OperatorGrid
    settings: object          # timing.TimerSettings
    timer: object             # timing.OpTimer
    kernels: list             # attention kernels to time, the default first
    skipped: dict             # kernels not used, and why
    limits: dict              # max_num_seqs, max_num_batched_tokens, max_context

    @property
    def cuda(self) -> bool:
        return self.dev.type == "cuda"


def _open_device(torch, device: str, threads, limits: dict):
    """The torch device to measure on (``cuda`` -> the current CUDA device), after checking
    it and the limits; sets the CPU thread count."""
    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be cpu or cuda, got {device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    for name, v in limits.items():
        if int(v) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if dev.type == "cpu" and threads:
        torch.set_num_threads(int(threads))
    return dev


def _setup(torch, model: str, device: str, quick: bool, tensor_parallel_size: int, threads,
           limits: dict, attention_backend: str, flush_l2: bool, cuda_graphs: bool,
           warmup: int | None, repeats: int | None, log) -> _Setup:
    """Open the device, size the grid to its free memory, build the timer and check the
    attention kernels (arguments as :func:`calibrate_operators`)."""
    from .paged import kernel_versions, select_kernels
    from .timing import OpTimer, TimerSettings
    dev = _open_device(torch, device, threads, limits)
    cuda = dev.type == "cuda"
    tdtype, dtype, elt = (torch.bfloat16, "bf16", 2) if cuda else (torch.float32, "float32", 4)
    cfg = resolve_model(model)
    tp = int(tensor_parallel_size)
    shard = shard_config(cfg, tp)
    info = {**device_info(str(dev), torch.get_num_threads()), **kernel_versions()}
    kv_tok = 2 * shard.num_kv_heads * shard.head_dim * elt
    budget = kv_token_budget(_free_bytes(torch, dev), kv_tok)
    grid = operator_grid(limits["max_num_batched_tokens"], limits["max_num_seqs"],
                         limits["max_context"], budget, shard.hidden_size * elt, quick)
    w0, r0 = REPEATS[(dev.type, bool(quick))]
    settings = TimerSettings(warmup=int(warmup if warmup is not None else w0),
                             repeats=int(repeats if repeats is not None else r0),
                             flush_l2=bool(flush_l2 and cuda), cuda_graphs=bool(cuda_graphs and cuda))
    timer = OpTimer(str(dev), settings)
    log("checking attention kernels against the SDPA reference (FlashInfer may compile "
        "kernels on first use)" if cuda else "attention kernel: sdpa (CPU)")
    kernels, skipped = select_kernels(attention_backend, dev, tdtype, shard.num_attention_heads,
                                      shard.num_kv_heads, shard.head_dim, log)
    log(f"calibrating {cfg.name} (TP {tp}) on {info['device_name']} [{dtype}], format v2: "
        f"{len(grid.gemm_m)} GEMM sizes x 5 shapes, {len(grid.decode_points())} decode + "
        f"{len(grid.prefill_points())} prefill attention points ({', '.join(kernels)}), "
        f"L2 flush {'on' if timer.flush_l2 else 'off'}, CUDA graphs "
        f"{'on' if settings.cuda_graphs else 'off'}")
    return _Setup(dev, tdtype, dtype, cfg, tp, shard, info, grid, settings, timer, kernels,
                  skipped, limits)


def _measure(bench, s: _Setup, collectives: bool, log) -> tuple[dict, list]:
    """Every operator table of ``bench``, plus the collectives (CUDA, when asked), and the
    run's notes (each also logged)."""
    from .collectives import measure_collectives
    from .ops import measure_operators
    tables = {fam: pd.DataFrame(rows) for fam, rows in measure_operators(bench).items()}
    notes = list(bench.record.notes)
    coll_sizes = s.grid.message_bytes
    if s.cuda and collectives:
        res = measure_collectives(coll_sizes, warmup=s.settings.warmup,
                                  repeats=max(10, s.settings.repeats // 2),
                                  graph=s.settings.cuda_graphs, log=log)
        notes += res.get("notes", [])
        for fam in ("all_reduce", "nccl"):
            if fam in res:
                tables[fam] = res[fam]
    elif not s.cuda:
        notes.append("collectives not measured: CPU run")
    for n in notes:
        log(f"  note: {n}")
    return tables, notes


#: the file that measures each family (its record's ``file``)
_FAMILY_FILES = {"gemm": "calibration/ops.py", "attention_decode": "calibration/paged.py",
                 "attention_prefill": "calibration/paged.py",
                 "elementwise": "calibration/ops.py", "lm_head": "calibration/ops.py",
                 "all_reduce": "calibration/collectives.py",
                 "nccl": "calibration/collectives.py"}


def _provenance(s: _Setup, bench, tables: dict, notes: list,
                t_begin: float) -> tuple[dict, dict]:
    """The per-table records and the set's ``provenance.yaml`` document."""
    date = now_iso()
    info, dev, cfg, tp, shard = s.info, s.dev, s.cfg, s.tp, s.shard
    device_name = info["device_name"]
    common = {k: info.get(k) for k in ("torch_version", "cuda_version", "driver")}
    rec = {"source_project": "servesim", "source_url": None, "commit": repo_commit(),
           "engine_version": HARNESS_VERSION, "device": device_name, "license": "Apache-2.0",
           "changes": "none (measured by this harness)", "harness_version": HARNESS_VERSION,
           **common, "date": date}
    records = {fam: {**rec, "file": _FAMILY_FILES[fam], "method": FAMILY_METHODS[fam]}
               for fam in tables}
    default_kernel = {fam: s.kernels[0] for fam in ("attention_decode", "attention_prefill")
                      if fam in tables}
    prov = {
        "kind": "measured", "engine": HARNESS_ENGINE, "engine_version": HARNESS_VERSION,
        "device_name": device_name, "device": str(dev), "device_type": dev.type,
        "harness_version": HARNESS_VERSION,
        **{k: info.get(k) for k in ("torch_version", "cuda_version", "cudnn_version", "driver",
                                    "flash_attn_version", "flashinfer_version", "vllm_version",
                                    "python_version", "platform", "cpu_model", "num_threads",
                                    "num_sms", "device_memory_bytes", "device_count")
           if k in info},
        "date": date, "dtype": s.dtype, "method": METHOD,
        "timer": {**s.settings.as_dict(), "flush_l2": s.timer.flush_l2,
                  "clock": "CUDA events" if s.cuda else "time.perf_counter"},
        "noisy_rule": "iqr_rel = (p75 - p25) / median > 0.2",
        "default_kernel": default_kernel,
        "attention_kernels": {"measured": s.kernels, "not_used": s.skipped},
        "models": {f"{cfg.name} tp{tp}": {
            "model": cfg.to_dict(), "tensor_parallel_size": tp, "shard": shard.to_dict(),
            "limits": {k: int(v) for k, v in s.limits.items()},
            "grid": s.grid.as_dict(), "date": date,
            "skipped_points": bench.record.skipped, "truncated": bench.record.truncated,
            "notes": notes, "elapsed_s": round(time.perf_counter() - t_begin, 1)}},
    }
    return records, prov


def _write_profile_spec(torch, s: _Setup, tables: dict, out: Path, quick: bool) -> None:
    """The profile's ``spec.yaml``: peaks measured here, unless ``out`` has a datasheet spec
    of its own (:func:`calibration.device.write_spec`)."""
    g = tables.get("gemm")
    g = g[g["dtype"] == s.dtype] if g is not None else None
    peak = float((2.0 * g["m"] * g["n"] * g["k"] / g["median_s"]).max()) \
        if g is not None and len(g) else 0.0
    bw = measure_bandwidth(str(s.dev), s.tdtype, 64 * 2**20 if quick else 256 * 2**20)
    ar = tables.get("all_reduce")
    ar = ar[ar["backend"] == "nccl"] if ar is not None else None
    write_spec(out, s.info, peak, bw, s.dtype, torch.get_num_threads(), ar)


def _check_query(set_dir: Path, profile: Path, log) -> bool:
    """Load the set with the simulator's table-set reader when this checkout has one
    (``simulator.perf.tables.sets.TableSet``) and ask it for one measured GEMM; log (do not
    raise) when that fails: the tables are written and checked by then."""
    try:
        from simulator.perf.tables.sets import TableSet
    except ImportError:
        return False
    from simulator.catalog.hardware import load_gpu_spec

    from .tableset import read_table_set
    try:
        ts = TableSet(set_dir, load_gpu_spec(profile))
        r = read_table_set(set_dir).tables["gemm"].iloc[0]
        t = float(ts.gemm(int(r["m"]), int(r["n"]), int(r["k"]), str(r["dtype"])))
        if not t > 0:
            raise ValueError(f"answered {t} for a measured GEMM")
    except Exception as e:  # noqa: BLE001 - report, the measurement itself is kept
        log(f"  warning: simulator.perf.tables.sets could not use {set_dir}: "
            f"{type(e).__name__}: {e}")
        return False
    return True
