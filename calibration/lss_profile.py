"""Read and check LLMServingSim's per-layer vLLM profiles (for :mod:`calibration.import_lss`).

``meta.yaml`` and the ``tp<N>/`` CSV files, checked against the servesim model they name;
:mod:`calibration.import_lss`'s docstring describes the source and the checks. Every error is
an :class:`ImportErrorLSS` of one line naming the file at fault. Needs numpy, pandas and PyYAML
(no torch).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

SOURCE_PROJECT = "LLMServingSim"
SOURCE_URL = "https://github.com/casys-kaist/LLMServingSim"
#: where the profiler writes its bundles inside the source repository
SOURCE_PREFIX = "profiler/perf"
LICENSE = "MIT"
META_FILE = "meta.yaml"
#: the profiler's sharded config fields (LLMServingSim profiler/core/config.py SHARD_FIELDS)
SHARD_FIELDS = ("intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size")
_REQUIRED = {"dense.csv": ["layer", "tokens", "time_us"],
             "per_sequence.csv": ["layer", "sequences", "time_us"],
             "attention.csv": ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"],
             "moe.csv": ["tokens", "activated_experts", "time_us"]}
_VARIANT = re.compile(r"^(bf16|fp16|fp8)(?:-kv(bf16|fp16|fp8))?$")


class ImportErrorLSS(ValueError):
    """A malformed LLMServingSim profile (one line naming the file)."""


def read_profile_csv(path: Path) -> pd.DataFrame:
    """One CSV file of a ``tp<N>/`` folder, its required columns checked: numbers where
    numbers are due, times positive and finite, counts integers >= 0."""
    import pandas as pd

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


def source_commit(src: Path) -> str:
    """The 40-hex commit named by the first ``README.md`` at or above ``src`` that mentions
    LLMServingSim (``unknown`` when none does)."""
    for d in [src, *src.resolve().parents]:
        p = d / "README.md"
        if p.is_file():
            text = p.read_text(errors="replace")
            if SOURCE_PROJECT in text:
                m = re.search(r"commit\s+([0-9a-f]{40})", text)
                if m:
                    return m.group(1)
    return "unknown"
