"""Format v1, the flat profile folder, without torch: grid, tables, provenance.

The grid of synthetic steps the harness (:mod:`calibration.harness`) times, the tables built
from its pooled samples, their merge into the folder's CSV files, ``provenance.yaml``, and the
check that the folder loads as a table model (:mod:`simulator.perf.tables.flat_profile` reads
it).
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from simulator.perf.tables.flat_profile import (
    GRID_COLUMNS,
    KEY_COLUMNS,
    PROVENANCE_FILE,
    TABLE_FILES,
    TablePerfModel,
    read_profile_tables,
)

from . import HARNESS_VERSION
from .device import plain
from .timing import summarize
from .tiny_model import TinyConfig, weight_bytes

ELEMENTWISE_NAMES = {"rmsnorm": "rmsnorm_s", "rope": "rope_s", "act": "act_s", "add": "add_s"}
GEMM_NAMES = ("qkv_proj", "o_proj", "mlp_gate_up", "mlp_down")


@dataclass
class Grid:
    """Synthetic steps the harness runs (sizes in tokens)."""

    prefill_q: list[int]
    prefill_start: list[int]
    decode_batch: list[int]
    decode_ctx: list[int]
    skews: list[str] = field(default_factory=lambda: ["uniform", "skewed"])
    warmup: int = 1
    repeats: int = 5
    max_decode_tokens: int = 1 << 19

    def as_dict(self) -> dict:
        return asdict(self)


def _cap(values, hi) -> list[int]:
    return sorted({int(v) for v in values if 1 <= v <= hi} | {int(hi)})


def default_grid(cfg: TinyConfig, quick: bool, max_num_seqs: int, max_num_batched_tokens: int,
                 max_context: int, device_type: str = "cpu") -> Grid:
    """The grid for a model: token counts straddle tile boundaries; ranges cover the limits.

    ``--quick`` keeps fewer points and repeats; on CPU, large models also get a FLOP budget per
    step so that the whole run stays within about two minutes on 2 cores.
    """
    tok = max(1, int(max_num_batched_tokens))
    ctx = max(16, int(max_context))
    # token counts: typical (non-aligned) sizes every 8-32 tokens plus the tile-boundary
    # triples 63/64/65, 127/128/129, ...; the CPU flash-attention kernel is ~10% faster at
    # multiples of 16 queries, so a grid of aligned sizes only would bias the interpolation
    q_full = [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 63, 64, 65, 72, 80, 88, 96,
              104, 112, 120, 127, 128, 129, 136, 152, 168, 184, 200, 216, 232, 248, 255, 256,
              257, 280, 312, 344, 376, 408, 440, 472, 511, 512, 513, 600, 700, 800, 900, 1023,
              1024, 1025, 1300, 1536, 1800, 2047, 2048, 2049, 3072, 4095, 4096, 4097, 6144, 8192]
    q_quick = [1, 2, 4, 8, 16, 24, 40, 56, 63, 64, 65, 88, 104, 120, 127, 128, 129, 152, 184,
               216, 248, 255, 256, 257, 312, 376, 440, 511, 512, 513, 700, 1023, 1024, 1025,
               1536, 2048, 3072, 4096, 8192]
    s_full = [0, 16, 32, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1536, 2048, 3072,
              4096, 8192, 16384]
    s_quick = [0, 64, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192, 16384]
    b_full = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 24, 32, 48, 64, 96, 128,
              192, 256]
    b_quick = [1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 24, 32, 64, 128, 256]
    c_full = [8, 16, 32, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1536, 2048, 4096,
              8192, 16384, 32768]
    c_quick = [16, 64, 128, 256, 384, 512, 768, 1024, 2048, 4096, 8192, 32768]
    g = Grid(prefill_q=_cap(q_quick if quick else q_full, tok),
             prefill_start=sorted({v for v in (s_quick if quick else s_full) if v < ctx}),
             decode_batch=_cap(b_quick if quick else b_full, max_num_seqs),
             decode_ctx=_cap(c_quick if quick else c_full, ctx),
             repeats=5 if quick else 10)
    if device_type == "cpu":
        # keep big models affordable on a CPU: cap the tokens of one synthetic step by a FLOP
        # budget per layer (GEMM FLOPs per token per layer = 2 x the layer's parameters)
        layer_params = (weight_bytes(cfg, 1) - 2 * cfg.vocab_size * cfg.hidden_size) \
            / max(1, cfg.num_layers)
        budget = 2e10 if quick else 1e11
        max_tok = max(8, int(budget / (2.0 * layer_params)))
        if max_tok < tok:
            g.prefill_q = [q for q in g.prefill_q if q <= max_tok] or [1]
            g.decode_batch = [b for b in g.decode_batch if b <= max_tok] or [1]
            if quick:  # a large model on a CPU: a sparse grid, two timed passes
                g.prefill_q = sorted({q for q in g.prefill_q if q in (1, 4, 16, 64, 256)}
                                     | {max(g.prefill_q)})
                g.prefill_start = [s for s in g.prefill_start if s in (0, 256, 1024)]
                g.decode_batch = sorted({b for b in g.decode_batch if b in (1, 2, 4, 8, 16)}
                                        | {max(g.decode_batch)})
                g.decode_ctx = [c for c in g.decode_ctx if c in (64, 256, 1024)] or \
                    g.decode_ctx[:1]
                g.repeats = 2
    return g


def skewed_contexts(batch: int, mean: int) -> list[int]:
    """``batch`` context lengths with the given mean, spread linearly from 0.1x to 1.9x."""
    if batch == 1:
        return [mean]
    w = np.linspace(0.1, 1.9, batch)
    c = np.maximum(1, np.round(w / w.mean() * mean)).astype(int)
    c[-1] = max(1, c[-1] + (mean * batch - int(c.sum())))
    return c.tolist()



class Sink:
    """Pools samples by (table, key tuple)."""

    def __init__(self):
        self.samples: dict = {}

    def add(self, table: str, key: tuple, values) -> None:
        self.samples.setdefault((table, key), []).extend(values)



def _stats_cols(samples) -> dict:
    return summarize(samples).as_dict()


def build_tables(sink: Sink, shard: TinyConfig, dtype: str, model_name: str) -> dict:
    """Turn pooled samples into one DataFrame per table."""
    sh = {"hidden": shard.hidden_size, "intermediate": shard.intermediate_size,
          "q_heads": shard.num_attention_heads, "kv_heads": shard.num_kv_heads,
          "head_dim": shard.head_dim}
    d, h = shard.head_dim, shard.hidden_size
    kn = {"qkv_proj": (h, (shard.num_attention_heads + 2 * shard.num_kv_heads) * d),
          "o_proj": (shard.num_attention_heads * d, h),
          "mlp_gate_up": (h, 2 * shard.intermediate_size),
          "mlp_down": (shard.intermediate_size, h)}
    rows: dict[str, list] = {k: [] for k in TABLE_FILES}
    parts = {}
    for (table, key), vals in sink.samples.items():
        if table == "elementwise_part":
            parts[key] = summarize(vals).median_s
    for (table, key), vals in sorted(sink.samples.items(), key=lambda kv: str(kv[0])):
        st = _stats_cols(vals)
        base = {"model": model_name, "dtype": dtype}
        if table == "gemm":
            op, m = key
            k, n = kn[op]
            rows["gemm"].append({**base, "op": op, "k": k, "n": n, "m": m, **st})
        elif table == "elementwise":
            (t,) = key
            extra = {col: parts.get((nm, t), float("nan")) for nm, col in ELEMENTWISE_NAMES.items()}
            rows["elementwise"].append({**base, **sh, "tokens": t, **st, **extra})
        elif table == "lm_head":
            (r,) = key
            rows["lm_head"].append({**base, "hidden": h, "vocab": shard.vocab_size, "rows": r,
                                    **st})
        elif table == "attention_prefill":
            q, s = key
            rows["attention_prefill"].append({**base, "q_heads": sh["q_heads"],
                                              "kv_heads": sh["kv_heads"], "head_dim": d,
                                              "q": q, "start": s, **st})
        elif table == "attention_decode":
            b, c, sk = key
            ctxs = [c] * b if sk == "uniform" else skewed_contexts(b, c)
            rows["attention_decode"].append({**base, "q_heads": sh["q_heads"],
                                             "kv_heads": sh["kv_heads"], "head_dim": d,
                                             "batch": b, "ctx_mean": c, "ctx_total": int(sum(ctxs)),
                                             "ctx_max": int(max(ctxs)), "dist": sk, **st})
    return {k: pd.DataFrame(v) for k, v in rows.items() if v}


def merge_table(out_dir: Path, table: str, new: pd.DataFrame) -> pd.DataFrame:
    """Replace rows of ``new``'s shapes in the folder's table and write it back."""
    path = out_dir / TABLE_FILES[table]
    keys = KEY_COLUMNS[table] + GRID_COLUMNS[table] + (["dtype"] if "dtype" in new.columns else [])
    if table == "attention_decode":
        keys = keys + ["dist"]
    if table == "gemm":
        keys = keys + ["op"]
    if path.is_file():
        old = pd.read_csv(path)
        if set(keys) <= set(old.columns):
            idx_new = pd.MultiIndex.from_frame(new[keys].astype(str))
            idx_old = pd.MultiIndex.from_frame(old[keys].astype(str))
            old = old[~idx_old.isin(idx_new)]
            new = pd.concat([old, new], ignore_index=True)
    new = new.sort_values([c for c in keys if c in new.columns], kind="stable")
    new.to_csv(path, index=False, float_format="%.6g")
    return new


def check_loads(out: Path, cfg: TinyConfig, tp: int) -> TablePerfModel:
    from simulator.catalog.hardware import load_gpu_spec
    from simulator.perf.tables.flat_profile import load_table_perf_model
    gpu = load_gpu_spec(out)
    read_profile_tables(out)
    return load_table_perf_model(cfg.model_spec(), gpu, tp, "bf16", "bf16", required=True)



def write_provenance(out: Path, info: dict, cfg: TinyConfig, tp: int, shard: TinyConfig,
                     grid: Grid, dtype: str, ctx_layers: int, peak: float, bw: float,
                     cpu: dict | None, timed_passes: int | None = None,
                     elapsed_s: float | None = None) -> dict:
    """Write (merge) ``provenance.yaml``: device, versions, date, dtype, harness, grids."""
    p = out / PROVENANCE_FILE
    old = {}
    if p.is_file():
        old = yaml.safe_load(p.read_text()) or {}
    date = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    models = dict(old.get("models") or {})
    models[f"{cfg.name} tp{tp}"] = {
        "model": cfg.to_dict(), "tensor_parallel_size": tp, "shard": shard.to_dict(),
        "context_layers": ctx_layers, "grid": grid.as_dict(), "timed_passes": timed_passes,
        "date": date,
        "cpu_overhead_fit": cpu, "elapsed_s": round(elapsed_s, 1) if elapsed_s else None}
    doc = {
        "kind": "measured",
        "harness_version": HARNESS_VERSION,
        "date": date,
        **{k: info.get(k) for k in ("device", "device_type", "device_name", "cpu_model",
                                     "cpu_count", "num_threads", "torch_version",
                                     "cuda_version", "cudnn_version", "driver",
                                     "python_version", "platform", "num_sms")
           if k in info},
        "dtype": dtype,
        "dtype_policy": "any" if info["device_type"] == "cpu" else "match",
        "method": ("operators timed inside forward passes of the model over synthetic steps, "
                   "in an engine-like order (calibration/harness.py); median of the samples, "
                   "one per layer and timed pass"),
        "timer": "CUDA events" if info["device_type"] == "cuda" else "time.perf_counter",
        "noisy_rule": "iqr_rel = (p75 - p25) / median > 0.2",
        "estimates": {"peak_flops_per_s": float(f"{peak:.4g}"),
                      "bandwidth_bytes_per_s": float(f"{bw:.4g}")},
        "models": models,
    }
    p.write_text("# Provenance of the measured tables in this folder (servesim calibrate).\n"
                 + yaml.safe_dump(plain(doc), sort_keys=False, width=100))
    return doc
