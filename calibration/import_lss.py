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

Code: reading and checks in :mod:`calibration.lss_profile`, the conversion of each table
family in :mod:`calibration.lss_convert`; this module groups the profiles into sets and
writes them.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.cli.args import output_path

from .lss_convert import (
    ATTENTION_KERNEL,
    CHANGES,
    COLUMNS,
    MOE_KERNEL,
    PER_STEP_LAYERS,
    SIZE_AXIS,
    convert_attention,
    convert_dense,
    convert_moe,
    convert_per_sequence,
    finish_table,
    fit_sampler_line,
    flag_outliers,
    mixed_attention_check,
)
from .lss_profile import (
    LICENSE,
    META_FILE,
    SOURCE_PREFIX,
    SOURCE_PROJECT,
    SOURCE_URL,
    ImportErrorLSS,
    Profile,
    find_profiles,
    read_profile,
    read_profile_csv,
    source_commit,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = [
    "ImportErrorLSS",
    "Profile",
    "add_arguments",
    "find_profiles",
    "fit_sampler_line",
    "import_lss",
    "main",
    "mixed_attention_check",
    "read_profile",
    "read_sampler",
    "run",
]

#: folder suffix of the sets this importer writes (``vllm-<version>-lss``)
SET_SUFFIX = "lss"

_HEADER = ("# servesim table set (format v2), derived from LLMServingSim's per-layer vLLM\n"
           "# profiles (MIT) by calibration/import_lss.py; each table's record names the source\n"
           "# files, commit and the changes made. Regenerate, do not edit.\n")

_METHOD = ("LLMServingSim profiler: one-layer dummy-weight model in vLLM (enforce_eager), "
           "synthetic SchedulerOutput batches (scheduler bypassed), TP emulated on one GPU by "
           "shard shapes (hf_overrides); per module: CUDA time from vLLM layerwise_profile / "
           "invocations, mean of measurement_iterations timed forwards after one warm-up")


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
    commit = commit or source_commit(src)
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



@dataclass
class _SetParts:
    """What the profiles of one set give: per family the converted row frames, the source
    files and the notes; for the set, the skipped items, the mixed-attention checks and one
    record per profile."""

    parts: dict = field(default_factory=lambda: {f: [] for f in COLUMNS})
    files: dict = field(default_factory=lambda: {f: [] for f in COLUMNS})
    notes: dict = field(default_factory=lambda: {f: [] for f in COLUMNS})
    skipped: list = field(default_factory=list)
    mixed: list = field(default_factory=list)
    profiles: list = field(default_factory=list)


def _profile_record(p: Profile) -> dict:
    """A profile's entry in the set's ``profiles`` list."""
    return {
        "model": str(p.meta["model"]), "servesim_model": p.model.name,
        "hardware": str(p.meta["hardware"]), "variant": str(p.meta["variant"]),
        "tp_folders": p.tps, "hf_overrides_tp": p.overrides_tp,
        "profiled_at": str(p.meta.get("profiled_at", "")),
        "profiler_version": str(p.meta.get("profiler_version", "")),
        "cuda_version": str(p.meta.get("cuda_version", "")),
        "measurement_iterations": p.meta.get("measurement_iterations"),
        "meta_file": f"{SOURCE_PREFIX}/{p.rel}/{META_FILE}", "mode": p.mode,
        **({"notes": p.notes} if p.notes else {})}


def _collect_tp(p: Profile, tp: int, acc: _SetParts) -> None:
    """Read and convert the files of one ``tp<N>/`` folder of ``p`` into ``acc``."""
    parts, files, notes, skipped = acc.parts, acc.files, acc.notes, acc.skipped
    d = p.folder / f"tp{tp}"
    dense = read_profile_csv(d / "dense.csv")
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
    ps = read_profile_csv(d / "per_sequence.csv")
    lm, samp, n = convert_per_sequence(p, tp, ps, d / "per_sequence.csv")
    parts["gemm"].append(lm)
    files["gemm"].append(p.source_file(tp, "per_sequence.csv"))
    notes["gemm"] += [f"{p.rel}/tp{tp}/{x}" for x in n]
    if tp == p.tps[0] and len(samp):
        parts["sampler"].append(samp)
        files["sampler"].append(p.source_file(tp, "per_sequence.csv"))
    at = read_profile_csv(d / "attention.csv")
    pre, dec, _mix, n = convert_attention(p, tp, at, d / "attention.csv")
    parts["attention_prefill"].append(pre)
    parts["attention_decode"].append(dec)
    for f in ("attention_prefill", "attention_decode"):
        files[f].append(p.source_file(tp, "attention.csv"))
        notes[f] += [f"{p.rel}/tp{tp}/{x}" for x in n]
    chk = mixed_attention_check(at)
    acc.mixed.append({"profile": f"{p.rel}/tp{tp}", **chk})
    mp = d / "moe.csv"
    if mp.is_file():
        if tp != 1:
            skipped.append(f"{p.rel}/tp{tp}/moe.csv: MoE rows are read from tp1 only")
        else:
            mo, n = convert_moe(p, read_profile_csv(mp), mp)
            parts["moe"].append(mo)
            files["moe"].append(p.source_file(tp, "moe.csv"))
            notes["moe"] += [f"{p.rel}/tp{tp}/{x}" for x in n]
    for extra in ("skew.csv", "skew_fit.csv"):
        if (d / extra).is_file():
            skipped.append(f"{p.rel}/tp{tp}/{extra}: mixed-context decode batches "
                           "(the attention families key on a uniform ctx_mean)")


def _collect(profs: list[Profile]) -> _SetParts:
    """Read and convert every profile of one set."""
    acc = _SetParts()
    for p in profs:
        acc.profiles.append(_profile_record(p))
        for tp in p.tps:
            _collect_tp(p, tp, acc)
        if p.model.is_moe and 1 in p.tps and not (p.folder / "tp1" / "moe.csv").is_file():
            acc.skipped.append(f"{p.rel}: MoE model without tp1/moe.csv: no moe rows")
    return acc


def _table_record(fam: str, df: pd.DataFrame, acc: _SetParts, profs: list[Profile],
                  version: str, device, commit: str) -> dict:
    """The provenance record of one family's table (``df``, as written)."""
    fl = sorted(set(acc.files[fam]))
    rec = {"source_project": SOURCE_PROJECT, "source_url": SOURCE_URL, "commit": commit,
           "file": fl[0] if len(fl) == 1 else fl, "engine_version": version,
           "device": device, "license": LICENSE, "mode": _one(p.mode for p in profs),
           "cuda_version": _one(p.meta.get("cuda_version", "") for p in profs),
           "date": _one(p.meta.get("profiled_at", "") for p in profs),
           "method": _METHOD, "changes": CHANGES[fam] + acc.notes[fam],
           "models": sorted(set(",".join(df["model"]).split(","))), "rows": len(df)}
    if fam in SIZE_AXIS:
        rec["outliers_flagged"] = flag_outliers(fam, df)
        rec["changes"] = rec["changes"] + [
            (f"no outliers dropped; {rec['outliers_flagged']} points are more than 1.5x off "
            f"the isotonic fit of log time along {SIZE_AXIS[fam]} (the aiconfigurator "
            "import's rule, calibration/import_aic.py drop_outliers)")]
    if fam == "sampler":
        rec["fit"] = {m: fit_sampler_line(g["rows"], g["median_s"])
                      for m, g in df.groupby("model", sort=True)}
    return rec


def _write_set(out_dir: Path, prof_name: str, version: str, profs: list, commit: str,
               log) -> Path:
    """Convert the profiles of one GPU and vLLM version and write their table set."""
    from .import_aic import dump_yaml, write_parquet
    acc = _collect(profs)
    sset = f"vllm-{version}-{SET_SUFFIX}"
    d = out_dir / prof_name / "tables" / sset
    device = _one(p.device for p in profs)
    tables, summary = {}, []
    for fam in COLUMNS:
        df = finish_table(fam, acc.parts[fam], acc.notes[fam])
        path = d / f"{fam}.parquet"
        if df.empty:
            if path.exists():
                path.unlink()
            continue
        write_parquet(df, path)
        tables[fam] = _table_record(fam, df, acc, profs, version, device, commit)
        summary.append(f"{fam} {len(df)}")
    doc = {"kind": "measured", "engine": "vllm", "engine_version": version,
           "device_name": device, "gpu_profile": prof_name, "source": SOURCE_PROJECT,
           "mode": _one(p.mode for p in profs),
           "default_kernel": {"attention_prefill": ATTENTION_KERNEL,
                              "attention_decode": ATTENTION_KERNEL, "moe": MOE_KERNEL},
           "profiles": acc.profiles, "tables": tables, "mixed_attention_check": acc.mixed,
           "skipped": sorted(set(acc.skipped))}
    dump_yaml(doc, d / "provenance.yaml", _HEADER)
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
    import pandas as pd

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
