"""Import LLMServingSim's per-layer vLLM profiles into servesim table sets (format v2).

Usage::

    servesim calibrate import-lss SRC -o hardware_profiles/ [--gpu G] [--model M]

``SRC`` is one profile folder of LLMServingSim's profiler (``profiler/perf/<HARDWARE>/<model
id>/<variant>/``, holding ``meta.yaml`` and ``tp<N>/`` folders; github.com/casys-kaist/
LLMServingSim, MIT license) or any folder above several of them (every ``meta.yaml`` below
it is read, in path order). The profiles of one GPU and vLLM version become one table set,
``DIR/<gpu profile>/tables/vllm-<version>-lss/`` (``provenance.yaml`` plus zstd Parquet files),
its rows keyed by operator shape at the TP shard, so the profiles of several models (and TP
degrees) share it. The GPU profile is the one whose name or alias is the profile's device
string (``meta.yaml`` ``gpu``, e.g. ``NVIDIA GeForce RTX 4090`` -> ``rtx-4090``); ``--gpu``
names it instead and keeps only the profiles of that GPU. Needs numpy, pandas, pyarrow, scipy
(no torch).

What the profiler measured (its source, ``profiler/core/``): a one-layer dummy-weight model
(``hf_overrides``: ``num_hidden_layers 1``; TP degree N emulated on one GPU by dividing
``intermediate_size``, ``num_attention_heads``, ``num_key_value_heads`` and ``vocab_size`` by
N) in vLLM with ``enforce_eager``, fed synthetic ``SchedulerOutput`` batches (the scheduler
bypassed); each module's CUDA time from vLLM's ``layerwise_profile`` divided by its
invocations, averaged over ``measurement_iterations`` (3) timed forwards after one warm-up.
Times are microseconds of kernel time per module call (no launch gaps, no CPU time).

The conversion (each table's ``changes`` says it again):

- ``gemm`` from ``tp<N>/dense.csv``: ``qkv_proj, o_proj, gate_up_proj, down_proj`` at
  ``tokens`` (one request of that many new tokens) -> rows ``(dtype, m = tokens, n, k)``,
  ``(k, n)`` the model's projection at the TP-N shard
  (:meth:`simulator.catalog.models.ModelSpec.dense_gemm_shapes`); and from ``per_sequence.csv`` the
  ``lm_head`` (vLLM's ``LogitsProcessor``: the LM-head GEMM over the sampled rows and its
  small epilogue, used as it is) -> ``(m = sequences, n = vocab / N, k = hidden)``.
- ``elementwise`` (the harness family) from ``dense.csv``: per token count, ``2 x layernorm
  + rotary_emb + act_fn (+ 2 x qk_norm)``. ``layernorm`` is the per-call mean of the
  decoder layer's two RMSNorm calls (input and post-attention; vLLM's summary merges calls of
  one module path, and fuses the residual add into the post-attention call, so there is no
  separate add), ``qk_norm`` the mean of the per-head q and k RMSNorm calls (Qwen3), so a
  layer runs each twice; ``act_fn`` is SiLU-and-mul (dense MLP; in MoE models it runs inside
  the fused-MoE kernel and the row has ``intermediate = 0``). The parts ride along as
  ``rmsnorm_s, rope_s, act_s, qk_norm_s``. ``embedding`` and ``final_layernorm`` run once per
  step, not per layer: not imported (listed in ``skipped``).
- ``attention_decode`` from the pure-decode rows of ``attention.csv`` (``prefill_chunk ==
  0``): ``batch = n_decode``, ``ctx_mean = kv_decode + 1``: the profiler builds each decode
  request as one new token after ``kv_decode`` cached ones (``Shot.attention``:
  ``(1, kv_decode)``, ``num_computed_tokens = kv_decode``), so the kernel attends
  ``kv_decode + 1`` tokens, the new one included, which is what ``ctx_mean`` means.
- ``attention_prefill`` from the pure-prefill rows (``n_decode == 0``): ``batch 1, q =
  prefill_chunk, start = kv_prefill`` (``kv_prefill`` tokens cached before the chunk).
  Attention rows are the whole ``Attention`` module: the KV-cache write of the new tokens and
  the attention kernel. ``kernel``: the profile does not record the backend; with none
  configured vLLM 0.19 picks FLASH_ATTN first on CUDA GPUs other than sm100 for a bf16 KV
  cache (``vllm/platforms/cuda.py`` ``_get_backend_priorities``), named ``vllm_flash_attn``
  as the aiconfigurator import names it.
- mixed rows (a prefill chunk and decodes in one call) are not stored; how well the sum of
  the two pure rows at the same coordinates predicts them is written to the set's
  ``mixed_attention_check`` (:func:`mixed_attention_check`).
- ``moe`` from ``tp1/moe.csv`` (``tokens, activated_experts``; the profiler forces the routing
  so that exactly ``activated_experts`` experts receive tokens, cyclically, i.e. evenly): the
  rows with ``activated_experts = min(num_experts, tokens x topk)`` are uniform routing over
  all experts, the ``balanced`` distribution of the ``moe`` family (``num_tokens = tokens``,
  ``moe_tp = moe_ep = 1``). The time is the whole sparse-MoE block: the router gate GEMM
  (``hidden x num_experts``) and the fused-MoE kernel, with the forged routing replacing the
  top-k selection. Rows touching fewer experts have no place in the family (no
  activated-experts axis) and are skipped, counted.
- ``sampler`` (not a query family; its own small file ``sampler.parquet``, columns
  ``vocab, rows, median_s``): vLLM's ``Sampler`` per step by number of sequences (greedy,
  one token each), from the lowest TP folder (the profiler measures it at TP 1 and copies it
  into the others). The record carries the line ``a + b x rows`` fitted to it and its
  leave-one-out error (:func:`fit_sampler_line`).
- units ``time_us`` -> ``median_s`` (/ 1e6). No outlier filtering (the profiler's grids are
  dense along tokens; the importer reports how many points the aiconfigurator import's 1.5x
  isotonic rule would flag, ``outliers_flagged``, without dropping them).

Checks (one-line errors naming the file): the files and columns of the output-bundle contract;
``meta.yaml``'s ``architecture`` against the model's ``model_type``; its ``hf_overrides``
against the model's shard shapes at one of its ``tp_degrees`` (the profiler records the
overrides of the last TP it ran); GEMM layers the model does not have.

The output is deterministic: rows sorted, Parquet without library metadata, YAML in a fixed
order, no timestamps of the import.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from simulator.cli.args import output_path

SOURCE_PROJECT = "LLMServingSim"
SOURCE_URL = "https://github.com/casys-kaist/LLMServingSim"
#: where the profiler writes its bundles inside the source repository
SOURCE_PREFIX = "profiler/perf"
LICENSE = "MIT"
#: folder suffix of the sets this importer writes (``vllm-<version>-lss``)
SET_SUFFIX = "lss"
META_FILE = "meta.yaml"
#: LLMServingSim dense layer -> servesim GEMM op (``ModelSpec.dense_gemm_shapes`` keys)
GEMM_LAYERS = {"qkv_proj": "qkv_proj", "o_proj": "o_proj", "gate_up_proj": "mlp_gate_up",
               "down_proj": "mlp_down"}
#: dense layers summed into one ``elementwise`` row, with their calls per layer
ELEMENTWISE_LAYERS = {"layernorm": 2, "rotary_emb": 1, "act_fn": 1, "qk_norm": 2}
#: output part column of each elementwise layer
_PART_COLUMN = {"layernorm": "rmsnorm_s", "rotary_emb": "rope_s", "act_fn": "act_s",
                "qk_norm": "qk_norm_s"}
#: dense layers that run once per step (not per layer): not imported
PER_STEP_LAYERS = ("embedding", "final_layernorm")
#: vLLM's attention backend for a bf16 KV cache on CUDA GPUs other than sm100 (module doc)
ATTENTION_KERNEL = "vllm_flash_attn"
MOE_KERNEL = "vllm_fused_moe"
#: the profiler's sharded config fields (LLMServingSim profiler/core/config.py SHARD_FIELDS)
SHARD_FIELDS = ("intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size")
_REQUIRED = {"dense.csv": ["layer", "tokens", "time_us"],
             "per_sequence.csv": ["layer", "sequences", "time_us"],
             "attention.csv": ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"],
             "moe.csv": ["tokens", "activated_experts", "time_us"]}
_VARIANT = re.compile(r"^(bf16|fp16|fp8)(?:-kv(bf16|fp16|fp8))?$")

COLUMNS = {
    "gemm": ["dtype", "m", "n", "k", "median_s", "model", "tp", "op"],
    "attention_prefill": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                          "kernel", "batch", "q", "start", "median_s", "model", "tp"],
    "attention_decode": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                         "kernel", "batch", "ctx_mean", "median_s", "model", "tp"],
    "elementwise": ["dtype", "hidden", "intermediate", "q_heads", "kv_heads", "head_dim",
                    "tokens", "median_s", "rmsnorm_s", "rope_s", "act_s", "qk_norm_s", "model",
                    "tp"],
    "moe": ["dtype", "distribution", "kernel", "num_tokens", "hidden", "inter", "topk",
            "num_experts", "moe_tp", "moe_ep", "median_s", "model"],
    "sampler": ["vocab", "rows", "median_s", "model"],
}
#: key + grid columns (the identity of a row) per family
IDENTITY = {
    "gemm": ["dtype", "m", "n", "k"],
    "attention_prefill": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                          "kernel", "batch", "q", "start"],
    "attention_decode": ["dtype", "kv_dtype", "q_heads", "kv_heads", "head_dim", "window",
                         "kernel", "batch", "ctx_mean"],
    "elementwise": ["dtype", "hidden", "intermediate", "q_heads", "kv_heads", "head_dim",
                    "tokens"],
    "moe": ["dtype", "distribution", "kernel", "num_tokens", "hidden", "inter", "topk",
            "num_experts", "moe_tp", "moe_ep"],
    "sampler": ["vocab", "rows"],
}
_STRING = {"dtype", "kv_dtype", "kernel", "distribution", "model", "op"}
#: size axis per family for the (report-only) outlier flag
_SIZE_AXIS = {"gemm": "m", "attention_prefill": "q", "attention_decode": "ctx_mean",
              "elementwise": "tokens", "moe": "num_tokens"}


class ImportErrorLSS(ValueError):
    """A malformed LLMServingSim profile (one line naming the file)."""


# ------------------------------------------------------------------------------ reading
def _read_csv(path: Path) -> pd.DataFrame:
    name = path.name
    if not path.is_file():
        raise ImportErrorLSS(f"{path}: missing (an LLMServingSim profile's tp<N>/ folder holds "
                             "dense.csv, per_sequence.csv and attention.csv)")
    try:
        df = pd.read_csv(path)
    except Exception as e:  # noqa: BLE001 - any reader failure is a bad source file
        raise ImportErrorLSS(f"{path}: cannot read: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}") from None
    need = _REQUIRED[name]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ImportErrorLSS(f"{path}: lacks column(s) {', '.join(missing)}")
    for c in need:
        if c == "layer":
            df[c] = df[c].astype(str)
            continue
        v = pd.to_numeric(df[c], errors="coerce")
        if v.isna().any():
            bad = int(v.isna().idxmax())
            raise ImportErrorLSS(f"{path}: column {c} row {bad + 2} is not a number "
                                 f"({df[c].iloc[bad]!r})")
        df[c] = v
    t = df["time_us"].to_numpy(float)
    if not (np.isfinite(t) & (t > 0)).all():
        raise ImportErrorLSS(f"{path}: time_us must be positive and finite in every row")
    for c in need:
        if c not in ("layer", "time_us"):
            v = df[c].to_numpy(float)
            if not ((v >= 0) & (v == np.round(v))).all():
                raise ImportErrorLSS(f"{path}: column {c} must hold integers >= 0")
            df[c] = df[c].astype("int64")
    return df


def _read_meta(path: Path) -> dict:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ImportErrorLSS(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise ImportErrorLSS(f"{path}: expected a mapping")
    for k in ("vllm_version", "gpu", "hardware", "model", "variant", "tp_degrees"):
        if doc.get(k) in (None, ""):
            raise ImportErrorLSS(f"{path}: missing {k!r}")
    return doc


@dataclass
class Profile:
    """One LLMServingSim profile folder, read and checked.

    Attributes
    ----------
    folder : Path
        The folder holding ``meta.yaml``.
    meta : dict
        ``meta.yaml``.
    model : simulator.catalog.models.ModelSpec
        The profiled model (``meta.yaml`` ``model``, or the ``model`` override).
    weight_dtype, kv_dtype, act_dtype : str
        From ``variant`` (``bf16``, ``bf16-kvfp8``, ``fp8-kvfp8``); activations and attention
        compute run in ``fp16`` for fp16 weights, else ``bf16``.
    tps : list of int
        TP degrees with a ``tp<N>/`` folder, ascending.
    overrides_tp : int
        The TP degree whose shard shapes ``hf_overrides`` records.
    rel : str
        ``<hardware>/<model>/<variant>`` (the folder under ``profiler/perf/`` upstream).
    """

    folder: Path
    meta: dict
    model: object
    weight_dtype: str
    kv_dtype: str
    act_dtype: str
    tps: list
    overrides_tp: int
    rel: str
    notes: list = field(default_factory=list)

    @property
    def device(self) -> str:
        return str(self.meta["gpu"])

    @property
    def vllm_version(self) -> str:
        return str(self.meta["vllm_version"])

    def source_file(self, tp: int, name: str) -> str:
        """Path of a file of this profile inside the source repository."""
        return f"{SOURCE_PREFIX}/{self.rel}/tp{tp}/{name}"

    @property
    def mode(self) -> str:
        eff = self.meta.get("engine_effective") or {}
        return "eager (enforce_eager)" if eff.get("enforce_eager") else \
            f"enforce_eager={eff.get('enforce_eager')!r} (CUDA graphs may have been on)"


def _dtypes(variant: str, path: Path) -> tuple[str, str, str]:
    m = _VARIANT.match(str(variant))
    if not m:
        raise ImportErrorLSS(f"{path}: variant {variant!r} not understood (expected bf16, "
                             "bf16-kvfp8, fp8, fp8-kvfp8, fp16)")
    w = m.group(1)
    act = "fp16" if w == "fp16" else "bf16"
    return w, m.group(2) or act, act


def shard_overrides(model, tp: int) -> dict:
    """The ``hf_overrides`` LLMServingSim's profiler applies to ``model`` for TP ``tp``: its
    ``SHARD_FIELDS`` divided by ``tp`` (``intermediate_size`` is the config's dense one,
    :attr:`~simulator.catalog.models.ModelSpec.dense_mlp_intermediate_size`)."""
    return {"intermediate_size": model.dense_mlp_intermediate_size // tp,
            "num_attention_heads": model.num_attention_heads // tp,
            "num_key_value_heads": model.num_kv_heads // tp,
            "vocab_size": model.vocab_size // tp}


def read_profile(folder: str | Path, model: str | None = None) -> Profile:
    """Read and check one profile folder (``meta.yaml`` + ``tp<N>/``).

    Parameters
    ----------
    folder : path
        The folder holding ``meta.yaml``.
    model : str, optional
        Catalog id or ``config.json`` path overriding ``meta.yaml``'s ``model``.

    Raises
    ------
    ValueError
        (``ImportErrorLSS``) one line naming the file: bad ``meta.yaml``, unknown model,
        ``architecture`` not the model's type, ``hf_overrides`` that match no TP degree's
        shard of the model, no ``tp<N>/`` folder.
    """
    from simulator.catalog.models import get_model
    folder = Path(folder)
    mp = folder / META_FILE
    if not mp.is_file():
        raise ImportErrorLSS(f"{mp}: missing (not an LLMServingSim profile folder)")
    meta = _read_meta(mp)
    try:
        spec = get_model(model or str(meta["model"]))
    except ValueError as e:
        raise ImportErrorLSS(f"{mp}: model: {str(e).splitlines()[0]}") from None
    arch = meta.get("architecture")
    if arch and spec.model_type and str(arch) != str(spec.model_type):
        raise ImportErrorLSS(f"{mp}: architecture {arch!r} is not {spec.name}'s model type "
                             f"{spec.model_type!r}")
    w, kv, act = _dtypes(meta["variant"], mp)
    try:
        degrees = sorted(int(t) for t in meta["tp_degrees"])
    except (TypeError, ValueError):
        raise ImportErrorLSS(f"{mp}: tp_degrees must be a list of integers") from None
    tps = sorted(int(p.name[2:]) for p in folder.iterdir()
                 if p.is_dir() and re.fullmatch(r"tp\d+", p.name))
    notes = []
    if not tps:
        raise ImportErrorLSS(f"{folder}: no tp<N>/ folder")
    extra = sorted(set(tps) - set(degrees))
    if extra:
        raise ImportErrorLSS(f"{mp}: tp_degrees {degrees} lacks the folder(s) "
                             + ", ".join(f"tp{t}" for t in extra))
    missing = sorted(set(degrees) - set(tps))
    if missing:
        notes.append(f"tp_degrees {missing} listed in meta.yaml have no folder: not imported")
    ov = ((meta.get("engine_effective") or {}).get("hf_overrides") or {})
    got = {k: ov[k] for k in SHARD_FIELDS if k in ov}
    match = None
    for t in sorted(degrees, reverse=True):   # the profiler records its last (largest) TP
        if spec.num_attention_heads % t:
            continue
        exp = shard_overrides(spec, t)
        if all(int(got[k]) == exp[k] for k in got):
            match = t
            break
    if got and match is None:
        exp = {t: shard_overrides(spec, t) for t in degrees
               if spec.num_attention_heads % t == 0}
        k = next(iter(got))
        raise ImportErrorLSS(
            f"{mp}: engine_effective.hf_overrides {got} match no TP shard of {spec.name} at "
            f"tp_degrees {degrees} (e.g. {k}: " + ", ".join(f"TP {t} -> {e[k]}"
                                                            for t, e in exp.items()) + ")")
    if not got:
        notes.append("meta.yaml records no hf_overrides: shard shapes not checked")
        match = degrees[-1]
    nl = ov.get("num_hidden_layers")
    if nl not in (None, 1):
        notes.append(f"hf_overrides.num_hidden_layers = {nl} (times are per module call "
                     "either way)")
    for t in tps:
        if spec.num_attention_heads % t or spec.num_kv_heads % t:
            raise ImportErrorLSS(f"{folder / f'tp{t}'}: TP {t} does not divide {spec.name}'s "
                                 f"{spec.num_attention_heads} / {spec.num_kv_heads} heads")
    rel = f"{meta['hardware']}/{meta['model']}/{meta['variant']}"
    return Profile(folder, meta, spec, w, kv, act, tps, int(match), rel, notes)


def find_profiles(src: str | Path) -> list[Path]:
    """Profile folders at or below ``src`` (those holding ``meta.yaml``), in path order.

    Raises
    ------
    ValueError
        (``ImportErrorLSS``) ``src`` is not a folder or holds no profile.
    """
    src = Path(src)
    if not src.is_dir():
        raise ImportErrorLSS(f"{src}: no such folder")
    if (src / META_FILE).is_file():
        return [src]
    found = sorted(p.parent for p in src.rglob(META_FILE)
                   if any(q.is_dir() and re.fullmatch(r"tp\d+", q.name)
                          for q in p.parent.iterdir()))
    if not found:
        raise ImportErrorLSS(f"{src}: no LLMServingSim profile below it (a folder with "
                             "meta.yaml and tp<N>/)")
    return found


# ------------------------------------------------------------------------------ conversion
def _median_dupes(df: pd.DataFrame, keys: list[str], path: Path, notes: list) -> pd.DataFrame:
    n0 = len(df)
    g = df.groupby(keys, sort=True)["time_us"].median().reset_index()
    if len(g) < n0:
        notes.append(f"{path.name}: {n0 - len(g)} repeated measurements of one point merged "
                     "(median)")
    return g


def convert_dense(prof: Profile, tp: int, df: pd.DataFrame, path: Path
                  ) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
    """GEMM and elementwise rows of one ``dense.csv`` (module docstring).

    Returns
    -------
    (gemm rows, elementwise rows, notes, skipped layers)

    Raises
    ------
    ValueError
        (``ImportErrorLSS``) a projection the model does not have at this TP.
    """
    notes: list[str] = []
    m = prof.model
    df = _median_dupes(df, ["layer", "tokens"], path, notes)
    shapes = m.dense_gemm_shapes(tp)
    layers = sorted(set(df["layer"]))
    gemm = []
    for layer in layers:
        if layer not in GEMM_LAYERS:
            continue
        op = GEMM_LAYERS[layer]
        if op not in shapes:
            raise ImportErrorLSS(f"{path}: layer {layer} measured, but {m.name} has no {op} "
                                 f"GEMM at TP {tp} (its GEMMs: {', '.join(shapes)})")
        k, n = shapes[op]
        d = df[df["layer"] == layer]
        gemm.append(pd.DataFrame({"dtype": prof.weight_dtype, "m": d["tokens"], "n": n, "k": k,
                                  "median_s": d["time_us"] / 1e6, "model": m.hf_id or m.name,
                                  "tp": tp, "op": layer}))
    for op in shapes:
        lss = {v: k for k, v in GEMM_LAYERS.items()}.get(op)
        if lss is None or lss not in layers:
            notes.append(f"{path.name}: {m.name}'s {op} GEMM not measured (no "
                         f"{lss or op} rows)")
    gemm_df = pd.concat(gemm, ignore_index=True) if gemm else pd.DataFrame(
        columns=COLUMNS["gemm"])
    # elementwise: the parts this model runs
    need = ["layernorm", "rotary_emb"]
    if m.num_dense_layers and "act_fn" in layers:
        need.append("act_fn")
    elif m.num_dense_layers:
        notes.append(f"{path.name}: no act_fn rows: elementwise rows leave the MLP "
                     "activation out")
    if getattr(m, "qk_norm", False):
        need.append("qk_norm")
    ew = pd.DataFrame()
    absent = [x for x in need if x not in layers]
    if absent:
        notes.append(f"{path.name}: elementwise not imported: no {', '.join(absent)} rows")
    else:
        piv = df[df["layer"].isin(need)].pivot(index="tokens", columns="layer",
                                               values="time_us")
        full = piv.dropna()
        if len(full) < len(piv):
            notes.append(f"{path.name}: {len(piv) - len(full)} token counts lack one of "
                         f"{', '.join(need)}: no elementwise row there")
        qh, kvh, hd = m.attention_heads(tp)
        inter = m.dense_mlp_intermediate_size // tp if "act_fn" in need else 0
        ew = pd.DataFrame({"dtype": prof.act_dtype, "hidden": m.hidden_size,
                           "intermediate": inter, "q_heads": qh, "kv_heads": kvh,
                           "head_dim": hd, "tokens": full.index.to_numpy()})
        total = np.zeros(len(full))
        for c in _PART_COLUMN.values():
            ew[c] = np.nan
        for layer in need:
            part = ELEMENTWISE_LAYERS[layer] * full[layer].to_numpy(float) / 1e6
            ew[_PART_COLUMN[layer]] = part
            total += part
        ew["median_s"] = total
        ew["model"] = m.hf_id or m.name
        ew["tp"] = tp
    skipped = [x for x in layers if x not in GEMM_LAYERS and x not in need]
    return gemm_df, ew, notes, skipped


def convert_per_sequence(prof: Profile, tp: int, df: pd.DataFrame, path: Path
                         ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """LM-head GEMM rows and sampler rows of one ``per_sequence.csv``."""
    notes: list[str] = []
    m = prof.model
    df = _median_dupes(df, ["layer", "sequences"], path, notes)
    lm = df[df["layer"] == "lm_head"]
    if lm.empty:
        notes.append(f"{path.name}: no lm_head rows")
    gemm = pd.DataFrame({"dtype": prof.weight_dtype, "m": lm["sequences"],
                         "n": m.vocab_size // tp, "k": m.hidden_size,
                         "median_s": lm["time_us"] / 1e6, "model": m.hf_id or m.name,
                         "tp": tp, "op": "lm_head"})
    sm = df[df["layer"] == "sampler"]
    samp = pd.DataFrame({"vocab": m.vocab_size, "rows": sm["sequences"],
                         "median_s": sm["time_us"] / 1e6, "model": m.hf_id or m.name})
    other = sorted(set(df["layer"]) - {"lm_head", "sampler"})
    if other:
        notes.append(f"{path.name}: layers {', '.join(other)} not imported")
    return gemm.reset_index(drop=True), samp.reset_index(drop=True), notes


def _attn_keys(prof: Profile, tp: int) -> dict:
    m = prof.model
    qh, kvh, hd = m.attention_heads(tp)
    win = 0
    wins = m.layer_attention_windows()
    if wins and wins[0]:
        win = int(wins[0])
    return {"dtype": prof.act_dtype, "kv_dtype": prof.kv_dtype, "q_heads": qh,
            "kv_heads": kvh, "head_dim": hd, "window": win, "kernel": ATTENTION_KERNEL}


def convert_attention(prof: Profile, tp: int, df: pd.DataFrame, path: Path
                      ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str]]:
    """Pure-prefill and pure-decode rows of one ``attention.csv`` (module docstring).

    Returns
    -------
    (prefill rows, decode rows, mixed source rows (microseconds, as read), notes)
    """
    notes: list[str] = []
    cols = ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode"]
    df = _median_dupes(df, cols, path, notes)
    empty = (df["prefill_chunk"] == 0) & (df["n_decode"] == 0)
    if empty.any():
        notes.append(f"{path.name}: {int(empty.sum())} rows with neither a prefill chunk nor "
                     "decodes dropped")
    keys = _attn_keys(prof, tp)
    name = prof.model.hf_id or prof.model.name
    dec = df[(df["prefill_chunk"] == 0) & (df["n_decode"] > 0)]
    decode = pd.DataFrame({**keys, "batch": dec["n_decode"], "ctx_mean": dec["kv_decode"] + 1,
                           "median_s": dec["time_us"] / 1e6, "model": name, "tp": tp})
    pre = df[(df["n_decode"] == 0) & (df["prefill_chunk"] > 0)]
    prefill = pd.DataFrame({**keys, "batch": 1, "q": pre["prefill_chunk"],
                            "start": pre["kv_prefill"], "median_s": pre["time_us"] / 1e6,
                            "model": name, "tp": tp})
    mixed = df[(df["prefill_chunk"] > 0) & (df["n_decode"] > 0)]
    return prefill.reset_index(drop=True), decode.reset_index(drop=True), \
        mixed.reset_index(drop=True), notes


def mixed_attention_check(df: pd.DataFrame) -> dict:
    """How well ``prefill + decode`` predicts the mixed rows of one ``attention.csv``.

    For every mixed row (a chunk of ``prefill_chunk`` tokens after ``kv_prefill`` cached ones
    plus ``n_decode`` decodes at ``kv_decode``) whose pure-prefill row ``(prefill_chunk,
    kv_prefill, 0, 0)`` and pure-decode row ``(0, 0, n_decode, kv_decode)`` were measured,
    ``ratio = measured / (prefill + decode)``.

    Returns
    -------
    dict
        ``rows`` (mixed rows), ``paired``, ``ratio_median``, ``ratio_p10``, ``ratio_p90``,
        ``abs_err_median``, ``abs_err_p90`` (|ratio - 1|), rounded to 4 decimals.
    """
    pre = df[(df["n_decode"] == 0) & (df["prefill_chunk"] > 0)].set_index(
        ["prefill_chunk", "kv_prefill"])["time_us"]
    dec = df[(df["prefill_chunk"] == 0) & (df["n_decode"] > 0)].set_index(
        ["n_decode", "kv_decode"])["time_us"]
    mix = df[(df["prefill_chunk"] > 0) & (df["n_decode"] > 0)]
    if mix.empty:
        return {"rows": 0, "paired": 0}
    tp = pre.reindex(pd.MultiIndex.from_frame(mix[["prefill_chunk", "kv_prefill"]])).to_numpy()
    td = dec.reindex(pd.MultiIndex.from_frame(mix[["n_decode", "kv_decode"]])).to_numpy()
    ok = np.isfinite(tp) & np.isfinite(td)
    r = mix["time_us"].to_numpy(float)[ok] / (tp[ok] + td[ok])
    out = {"rows": len(mix), "paired": int(ok.sum())}
    if ok.any():
        e = np.abs(r - 1.0)
        out.update({"ratio_median": round(float(np.median(r)), 4),
                    "ratio_p10": round(float(np.percentile(r, 10)), 4),
                    "ratio_p90": round(float(np.percentile(r, 90)), 4),
                    "abs_err_median": round(float(np.median(e)), 4),
                    "abs_err_p90": round(float(np.percentile(e, 90)), 4)})
    return out


def convert_moe(prof: Profile, df: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, list[str]]:
    """``balanced`` MoE rows of ``tp1/moe.csv`` (module docstring)."""
    notes: list[str] = []
    m = prof.model
    if not m.is_moe:
        raise ImportErrorLSS(f"{path}: MoE rows, but {m.name} has no experts")
    df = _median_dupes(df, ["tokens", "activated_experts"], path, notes)
    e, k = int(m.num_experts), int(m.experts_per_token)
    full = np.minimum(e, df["tokens"].to_numpy() * k)
    bal = df[df["activated_experts"].to_numpy() == full]
    dropped = len(df) - len(bal)
    if dropped:
        notes.append(f"{path.name}: {dropped} rows with fewer activated experts than uniform "
                     f"routing touches (min({e}, tokens x {k})) skipped: the moe family has no "
                     "activated-experts axis")
    out = pd.DataFrame({"dtype": prof.weight_dtype, "distribution": "balanced",
                        "kernel": MOE_KERNEL, "num_tokens": bal["tokens"],
                        "hidden": m.hidden_size, "inter": m.intermediate_size, "topk": k,
                        "num_experts": e, "moe_tp": 1, "moe_ep": 1,
                        "median_s": bal["time_us"] / 1e6, "model": m.hf_id or m.name})
    return out.reset_index(drop=True), notes


def fit_sampler_line(rows, t_s) -> dict:
    """Least-squares line ``t = a + b x rows`` through sampler times, with leave-one-out error.

    The fit minimises relative error (weights ``1 / t``), so small and large batches count
    alike. Each point is held out in turn, the line refitted on the rest and the point
    predicted; also reported: the leave-one-out error of linear interpolation in ``rows``
    between the remaining neighbours (interior points only), i.e. of using the table itself.

    Returns
    -------
    dict
        ``a_s``, ``b_s_per_row``, ``points``, ``rows_range``, ``loo_line_median``,
        ``loo_line_p90``, ``loo_line_max``, ``loo_interp_median``, ``loo_interp_p90``
        (relative errors |pred / measured - 1|).
    """
    x = np.asarray(rows, float)
    y = np.asarray(t_s, float)
    o = np.argsort(x, kind="mergesort")
    x, y = x[o], y[o]
    a = np.column_stack([np.ones_like(x), x]) / y[:, None]
    coef = np.linalg.lstsq(a, np.ones_like(y), rcond=None)[0]
    out = {"a_s": float(f"{coef[0]:.6g}"), "b_s_per_row": float(f"{coef[1]:.6g}"),
           "points": len(x), "rows_range": [int(x.min()), int(x.max())]}
    if len(x) >= 3:
        loo, interp = [], []
        for i in range(len(x)):
            keep = np.arange(len(x)) != i
            c = np.linalg.lstsq(a[keep], np.ones(keep.sum()), rcond=None)[0]
            loo.append(abs((c[0] + c[1] * x[i]) / y[i] - 1.0))
            if 0 < i < len(x) - 1:
                interp.append(abs(np.interp(x[i], x[keep], y[keep]) / y[i] - 1.0))
        loo = np.asarray(loo)
        out.update({"loo_line_median": round(float(np.median(loo)), 4),
                    "loo_line_p90": round(float(np.percentile(loo, 90)), 4),
                    "loo_line_max": round(float(loo.max()), 4)})
        if interp:
            out.update({"loo_interp_median": round(float(np.median(interp)), 4),
                        "loo_interp_p90": round(float(np.percentile(interp, 90)), 4)})
    return out


def _flag_outliers(family: str, df: pd.DataFrame) -> int:
    """Points the aiconfigurator import's outlier rule would drop (reported, not dropped)."""
    from .import_aic import OUTLIER_FACTOR, _isotonic_keep
    axis = _SIZE_AXIS.get(family)
    if axis is None or df.empty:
        return 0
    line = [c for c in IDENTITY[family] if c != axis]
    n = 0
    for _, g in df.sort_values(line + [axis], kind="mergesort").groupby(line, sort=False):
        if len(g) >= 4:
            n += int((~_isotonic_keep(g["median_s"].to_numpy(float), OUTLIER_FACTOR)).sum())
    return n


def _finish(family: str, parts: list[pd.DataFrame], notes: list) -> pd.DataFrame:
    parts = [p for p in parts if p is not None and len(p)]
    if not parts:
        return pd.DataFrame(columns=COLUMNS[family])
    df = pd.concat(parts, ignore_index=True)
    cols = COLUMNS[family]
    for c in cols:
        if c not in df.columns:
            df[c] = np.nan
    ident = IDENTITY[family]
    dup = df.duplicated(ident, keep=False)
    if dup.any():
        agg = {c: ("median" if c not in _STRING else (lambda s: ",".join(sorted(set(s)))))
               for c in cols if c not in ident}
        if "tp" in agg:
            agg["tp"] = "min"
        n0 = len(df)
        df = df.groupby(ident, sort=False, as_index=False).agg(agg)
        notes.append(f"{n0 - len(df)} rows measured at the same shape by several profiles "
                     "merged (median time; model/op names joined)")
    df = df[cols].copy()
    for c in cols:
        if c in _STRING:
            df[c] = df[c].fillna("").astype(str)
        elif c.endswith("_s"):
            df[c] = df[c].astype(float)
        else:
            df[c] = df[c].astype("int64")
    return df.sort_values(ident, kind="mergesort").reset_index(drop=True)


# ------------------------------------------------------------------------------ import
_HEADER = ("# servesim table set (format v2), derived from LLMServingSim's per-layer vLLM\n"
           "# profiles (MIT) by calibration/import_lss.py; each table's record names the source\n"
           "# files, commit and the changes made. Regenerate, do not edit.\n")

_METHOD = ("LLMServingSim profiler: one-layer dummy-weight model in vLLM (enforce_eager), "
           "synthetic SchedulerOutput batches (scheduler bypassed), TP emulated on one GPU by "
           "shard shapes (hf_overrides); per module: CUDA time from vLLM layerwise_profile / "
           "invocations, mean of measurement_iterations timed forwards after one warm-up")

_CHANGES = {
    "gemm": ["time_us -> median_s seconds (/ 1e6)",
             ("dense.csv qkv_proj, o_proj, gate_up_proj, down_proj at tokens -> (m = tokens, "
              "n, k) with (k, n) the model's projection at the TP shard "
              "(ModelSpec.dense_gemm_shapes); op = the source layer name"),
             ("per_sequence.csv lm_head (vLLM LogitsProcessor: the LM-head GEMM over the "
              "sampled rows plus its small epilogue, used as it is) -> (m = sequences, "
              "n = vocab / TP, k = hidden), op = lm_head")],
    "elementwise": ["time_us -> median_s seconds (/ 1e6)",
                    ("median_s = 2 x layernorm + rotary_emb + act_fn (+ 2 x qk_norm) at the "
                     "same tokens: layernorm is the per-call mean of the decoder layer's two "
                     "RMSNorm calls (input, post-attention with the residual add fused), "
                     "qk_norm the mean of the q and k head norms; parts in rmsnorm_s (2 x "
                     "layernorm), rope_s, act_s, qk_norm_s (2 x qk_norm)"),
                    ("keys at the TP shard: intermediate = I / TP (0 for MoE models, whose "
                     "activation runs inside the fused-MoE kernel), q_heads = H / TP, "
                     "kv_heads = K / TP; qk_norm is measured at TP 1 and copied to other TP "
                     "folders by the profiler (tp_stable), so TP > 1 rows keep the TP-1 "
                     "head count's qk_norm time"),
                    "embedding and final_layernorm (once per step, not per layer) not imported"],
    "attention_decode": ["time_us -> median_s seconds (/ 1e6)",
                         ("rows with prefill_chunk = 0: batch = n_decode, ctx_mean = kv_decode "
                          "+ 1 (each decode request is one new token after kv_decode cached "
                          "ones; the kernel attends kv_decode + 1 tokens, the new one "
                          "included)"),
                         ("the whole vLLM Attention module: KV-cache write of the new tokens "
                          "plus the attention kernel"),
                         ("kernel = vllm_flash_attn: not recorded by the profile; vLLM 0.19's "
                          "default backend for a bf16 KV cache on CUDA GPUs other than sm100 "
                          "(vllm/platforms/cuda.py _get_backend_priorities)"),
                         ("mixed rows (prefill chunk + decodes in one call) not stored; see "
                          "mixed_attention_check")],
    "attention_prefill": ["time_us -> median_s seconds (/ 1e6)",
                          ("rows with n_decode = 0: batch = 1, q = prefill_chunk, start = "
                           "kv_prefill (tokens cached before the chunk)"),
                          ("the whole vLLM Attention module: KV-cache write of the new tokens "
                           "plus the attention kernel"),
                          ("kernel = vllm_flash_attn: not recorded by the profile; vLLM 0.19's "
                           "default backend for a bf16 KV cache on CUDA GPUs other than sm100 "
                           "(vllm/platforms/cuda.py _get_backend_priorities)"),
                          ("mixed rows (prefill chunk + decodes in one call) not stored; see "
                           "mixed_attention_check")],
    "moe": ["time_us -> median_s seconds (/ 1e6)",
            ("tp1/moe.csv rows with activated_experts = min(num_experts, tokens x topk) "
             "(forced cyclic routing over that many experts = uniform routing over all) -> "
             "distribution balanced, num_tokens = tokens, inter = the expert's intermediate "
             "size, moe_tp = moe_ep = 1"),
            ("time of the whole sparse-MoE block: router gate GEMM (hidden x num_experts) and "
             "the fused-MoE kernel with the forged routing in place of the top-k selection; a "
             "caller that adds the router GEMM separately counts it twice")],
    "sampler": ["time_us -> median_s seconds (/ 1e6)",
                ("per_sequence.csv sampler (vLLM V1 Sampler, greedy, one token per sequence) "
                 "-> rows = sequences, vocab = the model's full vocabulary (the profiler "
                 "measures it at TP 1 and copies it to other TP folders); from the lowest TP "
                 "folder"),
                "not a query family of simulator.perf.tables.sets: read it with read_sampler()"],
}


def _source_commit(src: Path) -> str:
    for d in [src, *src.resolve().parents]:
        p = d / "README.md"
        if p.is_file():
            text = p.read_text(errors="replace")
            if SOURCE_PROJECT in text:
                m = re.search(r"commit\s+([0-9a-f]{40})", text)
                if m:
                    return m.group(1)
    return "unknown"


def _gpu_profile(device: str, gpu: str | None, path: Path) -> str:
    from simulator.catalog.hardware import get_gpu
    if gpu:
        return gpu
    try:
        return get_gpu(device).name
    except ValueError:
        raise ImportErrorLSS(f"{path}: device {device!r} is no GPU profile's name or alias; "
                             "name the profile to write into with --gpu") from None


def _one(values):
    vals = sorted({str(v) for v in values})
    return vals[0] if len(vals) == 1 else vals


def import_lss(src: str | Path, out_dir: str | Path, gpu: str | None = None,
               model: str | None = None, commit: str | None = None, log=None) -> list[Path]:
    """Convert the LLMServingSim profiles at or below ``src`` into table sets.

    Parameters
    ----------
    src : path
        A profile folder (``meta.yaml`` + ``tp<N>/``) or a folder above several.
    out_dir : path
        Folder of GPU profiles (``hardware_profiles/``); sets go to
        ``<out_dir>/<gpu profile>/tables/vllm-<version>-lss/``.
    gpu : str, optional
        GPU profile to write into; with several GPUs under ``src``, only the profiles whose
        device string resolves to it (or whose ``hardware`` label equals it) are imported.
        Default: each profile's device string resolved by the GPU catalog's aliases.
    model : str, optional
        Catalog id or ``config.json`` overriding ``meta.yaml``'s model (one profile only).
    commit : str, optional
        Source commit to record (default: the 40-hex commit of the first ``README.md`` above
        ``src`` that names LLMServingSim, else ``unknown``).
    log : callable, optional
        Receives one line per set written.

    Returns
    -------
    list of Path
        The table-set folders written.

    Raises
    ------
    ValueError
        (``ImportErrorLSS``) one line naming the file at fault (see :func:`read_profile`,
        missing files or columns, a GEMM layer the model lacks).
    """
    from simulator.catalog.hardware import get_gpu
    log = log or (lambda s: None)
    src = Path(src)
    folders = find_profiles(src)
    if model and len(folders) > 1:
        raise ImportErrorLSS(f"{src}: --model needs a single profile folder, found "
                             f"{len(folders)}")
    commit = commit or _source_commit(src)
    profiles = [read_profile(f, model) for f in folders]
    groups: dict[tuple, list[Profile]] = {}
    for p in profiles:
        if gpu and len({q.device for q in profiles}) > 1:
            try:
                mine = get_gpu(p.device).name == gpu
            except ValueError:
                mine = False
            if not (mine or str(p.meta.get("hardware")) == gpu):
                continue
        prof_name = _gpu_profile(p.device, gpu, p.folder / META_FILE)
        groups.setdefault((prof_name, p.vllm_version), []).append(p)
    if not groups:
        raise ImportErrorLSS(f"{src}: no profile measured on GPU {gpu!r}")
    written = []
    for (prof_name, version), profs in sorted(groups.items()):
        written.append(_write_set(Path(out_dir), prof_name, version, profs, commit, log))
    return written


def _write_set(out_dir: Path, prof_name: str, version: str, profs: list, commit: str,
               log) -> Path:
    from .import_aic import _dump_yaml, write_parquet
    parts = {f: [] for f in COLUMNS}
    files = {f: [] for f in COLUMNS}
    notes = {f: [] for f in COLUMNS}
    skipped, mixed, prof_recs = [], [], []
    for p in profs:
        prof_recs.append({
            "model": str(p.meta["model"]), "servesim_model": p.model.name,
            "hardware": str(p.meta["hardware"]), "variant": str(p.meta["variant"]),
            "tp_folders": p.tps, "hf_overrides_tp": p.overrides_tp,
            "profiled_at": str(p.meta.get("profiled_at", "")),
            "profiler_version": str(p.meta.get("profiler_version", "")),
            "cuda_version": str(p.meta.get("cuda_version", "")),
            "measurement_iterations": p.meta.get("measurement_iterations"),
            "meta_file": f"{SOURCE_PREFIX}/{p.rel}/{META_FILE}", "mode": p.mode,
            **({"notes": p.notes} if p.notes else {})})
        for tp in p.tps:
            d = p.folder / f"tp{tp}"
            dense = _read_csv(d / "dense.csv")
            g, ew, n, sk = convert_dense(p, tp, dense, d / "dense.csv")
            parts["gemm"].append(g)
            parts["elementwise"].append(ew)
            files["gemm"].append(p.source_file(tp, "dense.csv"))
            if len(ew):
                files["elementwise"].append(p.source_file(tp, "dense.csv"))
            notes["gemm"] += [f"{p.rel}/tp{tp}/{x}" for x in n]
            for layer in sk:
                why = ("runs once per step, not per layer" if layer in PER_STEP_LAYERS
                       else "no servesim family")
                skipped.append(f"{p.rel}/tp{tp}/dense.csv {layer}: {why}")
            ps = _read_csv(d / "per_sequence.csv")
            lm, samp, n = convert_per_sequence(p, tp, ps, d / "per_sequence.csv")
            parts["gemm"].append(lm)
            files["gemm"].append(p.source_file(tp, "per_sequence.csv"))
            notes["gemm"] += [f"{p.rel}/tp{tp}/{x}" for x in n]
            if tp == p.tps[0] and len(samp):
                parts["sampler"].append(samp)
                files["sampler"].append(p.source_file(tp, "per_sequence.csv"))
            at = _read_csv(d / "attention.csv")
            pre, dec, _mix, n = convert_attention(p, tp, at, d / "attention.csv")
            parts["attention_prefill"].append(pre)
            parts["attention_decode"].append(dec)
            for f in ("attention_prefill", "attention_decode"):
                files[f].append(p.source_file(tp, "attention.csv"))
                notes[f] += [f"{p.rel}/tp{tp}/{x}" for x in n]
            chk = mixed_attention_check(at)
            mixed.append({"profile": f"{p.rel}/tp{tp}", **chk})
            mp = d / "moe.csv"
            if mp.is_file():
                if tp != 1:
                    skipped.append(f"{p.rel}/tp{tp}/moe.csv: MoE rows are read from tp1 only")
                else:
                    mo, n = convert_moe(p, _read_csv(mp), mp)
                    parts["moe"].append(mo)
                    files["moe"].append(p.source_file(tp, "moe.csv"))
                    notes["moe"] += [f"{p.rel}/tp{tp}/{x}" for x in n]
            for extra in ("skew.csv", "skew_fit.csv"):
                if (d / extra).is_file():
                    skipped.append(f"{p.rel}/tp{tp}/{extra}: mixed-context decode batches "
                                   "(the attention families key on a uniform ctx_mean)")
        if p.model.is_moe and 1 in p.tps and not (p.folder / "tp1" / "moe.csv").is_file():
            skipped.append(f"{p.rel}: MoE model without tp1/moe.csv: no moe rows")
    sset = f"vllm-{version}-{SET_SUFFIX}"
    d = out_dir / prof_name / "tables" / sset
    device = _one(p.device for p in profs)
    tables, summary = {}, []
    for fam in COLUMNS:
        df = _finish(fam, parts[fam], notes[fam])
        path = d / f"{fam}.parquet"
        if df.empty:
            if path.exists():
                path.unlink()
            continue
        write_parquet(df, path)
        fl = sorted(set(files[fam]))
        rec = {"source_project": SOURCE_PROJECT, "source_url": SOURCE_URL, "commit": commit,
               "file": fl[0] if len(fl) == 1 else fl, "engine_version": version,
               "device": device, "license": LICENSE, "mode": _one(p.mode for p in profs),
               "cuda_version": _one(p.meta.get("cuda_version", "") for p in profs),
               "date": _one(p.meta.get("profiled_at", "") for p in profs),
               "method": _METHOD, "changes": _CHANGES[fam] + notes[fam],
               "models": sorted(set(",".join(df["model"]).split(","))), "rows": len(df)}
        if fam in _SIZE_AXIS:
            rec["outliers_flagged"] = _flag_outliers(fam, df)
            rec["changes"] = rec["changes"] + [
                (f"no outliers dropped; {rec['outliers_flagged']} points are more than 1.5x off "
                f"the isotonic fit of log time along {_SIZE_AXIS[fam]} (the aiconfigurator "
                "import's rule, calibration/import_aic.py drop_outliers)")]
        if fam == "sampler":
            rec["fit"] = {m: fit_sampler_line(g["rows"], g["median_s"])
                          for m, g in df.groupby("model", sort=True)}
        tables[fam] = rec
        summary.append(f"{fam} {len(df)}")
    doc = {"kind": "measured", "engine": "vllm", "engine_version": version,
           "device_name": device, "gpu_profile": prof_name, "source": SOURCE_PROJECT,
           "mode": _one(p.mode for p in profs),
           "default_kernel": {"attention_prefill": ATTENTION_KERNEL,
                              "attention_decode": ATTENTION_KERNEL, "moe": MOE_KERNEL},
           "profiles": prof_recs, "tables": tables, "mixed_attention_check": mixed,
           "skipped": sorted(set(skipped))}
    _dump_yaml(doc, d / "provenance.yaml", _HEADER)
    log(f"{prof_name}/tables/{sset}: " + ", ".join(summary))
    return d


def read_sampler(folder: str | Path) -> pd.DataFrame:
    """The ``sampler`` rows of a set written by this importer (``vocab, rows, median_s,
    model``; seconds per step for ``rows`` sequences).

    Raises
    ------
    ValueError
        The set has no ``sampler.parquet``.
    """
    p = Path(folder) / "sampler.parquet"
    if not p.is_file():
        raise ValueError(f"{p}: missing (the set holds no sampler measurements)")
    return pd.read_parquet(p)


# ------------------------------------------------------------------------------ CLI
def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The import-lss arguments (shared by ``servesim calibrate import-lss``)."""
    ap.add_argument("src", help="LLMServingSim profile folder (meta.yaml + tp<N>/) or a folder "
                                "above several (e.g. profiler/perf/)")
    ap.add_argument("-o", "--output", required=True, type=output_path,
                    help="folder of GPU profiles to write into (hardware_profiles/)")
    ap.add_argument("--gpu", metavar="G",
                    help="GPU profile to write into (default: from meta.yaml's device string); "
                         "with several GPUs under SRC, import only that GPU's profiles")
    ap.add_argument("--model", metavar="M",
                    help="catalog id or config.json instead of meta.yaml's model (one profile)")
    ap.add_argument("--commit", help="source commit to record (default: from a README.md "
                                     "above SRC)")
    ap.add_argument("-q", "--quiet", action="store_true")


def run(args) -> list[Path]:
    """Run an import from parsed :func:`add_arguments` arguments; prints one line per set."""
    log = (lambda s: None) if getattr(args, "quiet", False) else print
    out = import_lss(args.src, args.output, gpu=args.gpu, model=args.model,
                     commit=args.commit, log=log)
    if not getattr(args, "quiet", False):
        print(f"wrote {len(out)} table set(s) under {args.output}")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m calibration.import_lss SRC -o DIR [--gpu G] [--model M]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    try:
        run(args)
    except ValueError as e:
        print(f"import-lss: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
