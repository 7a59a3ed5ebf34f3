"""Import NVIDIA AIConfigurator's measured vLLM kernel tables into servesim table sets.

Usage::

    servesim calibrate import-aic ../shared/reference/aiconfigurator -o hardware_profiles/
    servesim calibrate import-aic SRC -o DIR --gpu h100_sxm --versions 0.19.0 0.24.0

``SRC`` is a copy of AIConfigurator's ``systems/`` folder (``<gpu>.yaml`` files and
``data/<gpu>/<family>/<framework>/<version>/*.parquet``; github.com/ai-dynamo/aiconfigurator,
``aic-core/src/aiconfigurator_core/systems/``, Apache-2.0). For every GPU and vLLM version it
writes ``DIR/<profile>/tables/vllm-<version>/`` (``provenance.yaml`` and one zstd Parquet file
per family: ``gemm``, ``attention_prefill``, ``attention_decode``, ``all_reduce``, ``moe``) and
the GPU's NCCL table once, as ``DIR/<profile>/tables/nccl-<version>/nccl.parquet``, which every
vLLM set points at. Needs numpy, pandas, pyarrow and scipy only (no torch).

What the import changes (each table's ``provenance.yaml`` record lists it under ``changes``):

- units: latencies are milliseconds -> ``median_s`` seconds (/ 1e3); communication message
  sizes are elements of ``allreduce_dtype`` / ``nccl_dtype`` -> ``bytes`` (x 2 for bf16 and
  fp16 ``half``);
- names: ``gemm_dtype``/``attn_dtype``/``moe_dtype`` ``bfloat16 -> bf16``, ``fp8 -> fp8``;
  ``kv_cache_dtype`` likewise; context attention ``batch_size -> batch, isl -> q, start = 0``;
  generation attention ``batch_size -> batch, ctx_mean = isl + step`` (``isl`` is 1 and
  ``step`` the tokens already generated, so the kernel attends ``isl + step`` tokens);
  ``num_heads -> q_heads``, ``num_key_value_heads -> kv_heads``, ``window_size -> window`` (0
  when absent); custom all-reduce ``backend vllm_graph -> graph, vllm_eager -> eager``; MoE
  ``hidden_size, inter_size, moe_tp_size, moe_ep_size -> hidden, inter, moe_tp, moe_ep``;
  ``kernel_source -> kernel``; NCCL ``op_name -> op``, ``half -> fp16``;
- rows: only the dtypes servesim models (bf16 and fp8; fp16 for NCCL) are kept, other dtypes
  (``fp8_block``, ``nvfp4``, ``int4_wo``, ``w4a16_mxfp4``, NCCL ``int8``) are dropped and counted;
  repeated measurements of one coordinate are replaced by their median;
- columns: only the format's columns (plus ``kernel``) are written;
- outliers (:func:`drop_outliers`): along each table's size axis (GEMM ``m``; prefill ``q``;
  decode ``ctx_mean``; communication ``bytes``; MoE ``num_tokens``), with every other column
  fixed, time should not fall as the problem grows. Per line, ``log(time)`` is fitted by
  isotonic (monotone non-decreasing) regression and the point furthest from the fit is
  dropped while it is more than :data:`OUTLIER_FACTOR` (1.5x) off, keeping at least three
  points. 1.5x sits above the source's own repeat noise: over the 81,886 coordinates of these
  five families plus NCCL that it measured more than once, two measurements of one shape
  differ by at most 1.14x at the 99th and 1.37x at the 99.9th percentile (0.05% differ by more
  than 1.5x). Measurement noise and tile-quantization steps (which are monotone) stay; isolated
  spikes such as the single GEMM shapes the reference README reports up to 2.7x off go. The
  count per table is in ``outliers_dropped``.

Kernels: AIConfigurator's collector runs vLLM's own kernel selection, so each row's
``kernel_source`` is what vLLM dispatched for that shape (e.g. on L40S, FlashAttention 2 for a
bf16 KV cache, FlashInfer for an fp8 one, the decode wrapper for one-token prefill chunks).
Where two kernels were timed at the same coordinate (FA3 and FA4 on Hopper with vLLM 0.24),
the default is the one vLLM picks: FlashAttention 3 on sm90, FA4 on sm100, FA2 otherwise
(``vllm/v1/attention/backends/fa_utils.py`` ``get_flash_attn_version``; vLLM's CUDA backend
priority puts FLASH_ATTN first except on sm100, ``vllm/platforms/cuda.py``). The set's
``provenance.yaml`` names them in ``default_kernel``; other kernels stay selectable.

Versions and reuse: a GPU's vLLM versions are those that have a folder for any of the five
families. For one family and version: native rows are used when present; a ``reuse.yaml``
entry names a donor version: without native rows the table points at the donor set
(``reuse_of``, no data copied); with native rows (``self-overlap``), the donor fills the
coordinates the native table lacks (``fill_from``, merged when read, as aiconfigurator's
first-wins source order does). With neither, the nearest earlier version that has the table
is pointed at (aiconfigurator's shared-layer rule for earlier siblings). The NCCL table is the
one the GPU's system YAML names (``misc.nccl_version``).

The output is deterministic: rows sorted, Parquet written without library metadata, YAML with
a fixed key order, no timestamps.

Code: the source layout and reuse plans in :mod:`calibration.aic_source`, the conversion of
one table in :mod:`calibration.aic_convert`; this module cleans the rows (medians, outliers,
default kernels) and writes the sets.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from simulator.base.outdir import make_output_folder
from simulator.cli.args import output_path

from .aic_convert import COLUMNS, convert, dedupe
from .aic_source import (
    GPU_PROFILES,
    LICENSE,
    SOURCE_PREFIX,
    SOURCE_PROJECT,
    SOURCE_URL,
    SOURCES,
    ImportErrorAIC,
    Plan,
    data_root,
    device_any,
    gpu_versions,
    plan_family,
    read_source_table,
    source_commit,
    system_yaml,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["OUTLIER_FACTOR", "SIZE_AXIS", "ImportErrorAIC", "add_arguments", "convert",
           "dedupe", "default_kernels", "drop_outliers", "dump_yaml", "import_aic", "main",
           "run", "write_parquet"]

#: a point this many times off the monotone fit of its line is dropped (module docstring)
OUTLIER_FACTOR = 1.5
#: the size axis along which time must not fall (outlier rule)
SIZE_AXIS = {"gemm": "m", "attention_prefill": "q", "attention_decode": "ctx_mean",
             "all_reduce": "bytes", "nccl": "bytes", "moe": "num_tokens"}
#: FlashAttention version vLLM defaults to per SM generation (vLLM fa_utils.py)
_FA_BY_SM = {90: "fa3", 100: "fa4"}


def _isotonic_keep(t: np.ndarray, factor: float) -> np.ndarray:
    from scipy.optimize import isotonic_regression
    lt = np.log(t)
    keep = np.ones(len(t), dtype=bool)
    lim = np.log(factor)
    while keep.sum() > 3:
        idx = np.flatnonzero(keep)
        fit = isotonic_regression(lt[idx]).x
        r = np.abs(lt[idx] - fit)
        j = int(np.argmax(r))
        if r[j] <= lim:
            break
        keep[idx[j]] = False
    return keep


def drop_outliers(family: str, df: pd.DataFrame, factor: float = OUTLIER_FACTOR,
                  alternates: frozenset = frozenset()) -> tuple[pd.DataFrame, int]:
    """Drop points more than ``factor`` times off the monotone fit of their line.

    A line is every row with the same values of all columns but the family's size axis
    (:data:`SIZE_AXIS`) and ``median_s``; the rows of kernels vLLM dispatches by shape are one
    line across kernels (``kernel`` ignored), an ``alternates`` kernel is a line of its own.
    See the module docstring for the rule. Returns the kept rows and the number dropped.
    """
    axis = SIZE_AXIS[family]
    d = df.copy()
    line_cols = [c for c in COLUMNS[family] if c not in (axis, "median_s", "kernel")]
    if "kernel" in d.columns:
        d["_line_kernel"] = np.where(d["kernel"].isin(alternates), d["kernel"], "*")
        line_cols.append("_line_kernel")
    d = d.sort_values(line_cols + [axis], kind="mergesort").reset_index(drop=True)
    keep = np.ones(len(d), dtype=bool)
    for idx in d.groupby(line_cols, sort=False).indices.values():
        if len(idx) < 4:
            continue
        t = d["median_s"].to_numpy(float)[idx]
        keep[idx] = _isotonic_keep(t, factor)
    d = d[keep].drop(columns=[c for c in ("_line_kernel",) if c in d.columns])
    return d.reset_index(drop=True), int((~keep).sum())


def default_kernels(family: str, df: pd.DataFrame, sm_version: int | None) -> tuple[list, list]:
    """(default kernels, alternate kernels) of an attention or MoE table (module docstring)."""
    if "kernel" not in df.columns:
        return [], []
    ks = sorted(set(df["kernel"]))
    if len(ks) <= 1:
        return ks, []
    coord = [c for c in COLUMNS[family] if c not in ("kernel", "median_s")]
    pref = _FA_BY_SM.get(int(sm_version or 0), "fa2")
    counts = df["kernel"].value_counts().to_dict()

    def rank(k):
        return (0 if k.endswith(pref) else 1, -counts.get(k, 0), k)

    losers = set()
    multi = df.groupby(coord, sort=False)["kernel"].agg(lambda s: tuple(sorted(set(s))))
    for combo in sorted(set(multi[multi.map(len) > 1])):
        best = min(combo, key=rank)
        losers.update(k for k in combo if k != best)
    return [k for k in ks if k not in losers], sorted(losers)


# ------------------------------------------------------------------------------ writing
def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` as zstd Parquet without pandas/library metadata (deterministic bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pa.Table.from_pandas(df, preserve_index=False)
    t = t.replace_schema_metadata(None)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, path, compression="zstd", compression_level=19, use_dictionary=True,
                   write_statistics=False)


def dump_yaml(doc: dict, path: Path, header: str) -> None:
    """Write ``doc`` as YAML after the comment ``header``, keys in insertion order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100,
                          allow_unicode=True)
    path.write_text(header + text)


# ------------------------------------------------------------------------------ import
_HEADER = ("# servesim table set (format v2), derived from NVIDIA AIConfigurator's measured\n"
           "# kernel tables (Apache-2.0) by calibration/import_aic.py; each table's record names\n"
           "# the source file, commit and the changes made. Regenerate, do not edit.\n")


@dataclass(frozen=True)
class _Gpu:
    """One GPU of the source, as the import reads it."""

    root: Path          # the source's data/ folder
    src_root: Path      # the systems/ folder holding it
    commit: str         # source commit recorded in every table record
    name: str           # aiconfigurator's folder (h100_sxm)
    profile: str        # servesim's GPU profile (h100-sxm)
    system: dict        # <name>.yaml
    versions: list      # every vLLM version the source holds for it, ascending

    @property
    def sm(self) -> int | None:
        return (self.system.get("gpu") or {}).get("sm_version")

    @property
    def nccl_version(self) -> str:
        return str((self.system.get("misc") or {}).get("nccl_version") or "")


def _import_table(family: str, path: Path, src_root: Path, commit: str, sm: int | None,
                  rel: str) -> tuple[pd.DataFrame, dict, list, list]:
    raw = read_source_table(path)
    df, changes, _ = convert(family, raw, path)
    df, dups = dedupe(family, df)
    if dups:
        changes.append(f"{dups} repeated measurements of an existing coordinate merged "
                       "(median per coordinate)")
    defaults, alternates = (default_kernels(family, df, sm)
                            if family in ("attention_prefill", "attention_decode", "moe")
                            else ([], []))
    df, nout = drop_outliers(family, df, alternates=frozenset(alternates))
    changes.append(f"outliers: {nout} points more than {OUTLIER_FACTOR:g}x off the isotonic "
                   f"(non-decreasing in {SIZE_AXIS[family]}) fit of log time along "
                   f"{SIZE_AXIS[family]} dropped (calibration/import_aic.py drop_outliers)")
    if alternates:
        changes.append(f"kernels timed at the same coordinates as vLLM's default kept as "
                       f"alternates (kernel=...): {', '.join(alternates)}")
    keys = [c for c in COLUMNS[family] if c != "median_s"]
    df = df.sort_values(keys, kind="mergesort").reset_index(drop=True)
    versions_in = sorted(set(map(str, raw["version"]))) if "version" in raw.columns else []
    devices = sorted(set(map(str, raw["device"]))) if "device" in raw.columns else []
    rec = {
        "source_project": SOURCE_PROJECT, "source_url": SOURCE_URL, "commit": commit,
        "file": f"{SOURCE_PREFIX}/{rel}", "engine_version": path.parent.name,
        "engine_version_in_file": versions_in, "device": devices[0] if len(devices) == 1
        else devices, "license": LICENSE, "changes": changes,
        "rows_source": len(raw), "rows": len(df), "outliers_dropped": int(nout),
    }
    if "kernel" in df.columns:
        rec["kernels"] = sorted(set(df["kernel"]))
    return df, rec, defaults, alternates



def import_aic(src: str | Path, out_dir: str | Path, gpus=None, versions=None,
               commit: str | None = None, log=None) -> list[Path]:
    """Convert aiconfigurator's vLLM tables under ``src`` into servesim table sets.

    Parameters
    ----------
    src : path
        aiconfigurator ``systems/`` folder (holding ``data/`` and ``<gpu>.yaml``), or its
        ``data/`` folder.
    out_dir : path
        Folder of GPU profiles (``hardware_profiles/``); sets go to
        ``<out_dir>/<profile>/tables/``.
    gpus : list of str, optional
        aiconfigurator GPU folders (``h100_sxm``) or servesim profile names (``h100-sxm``);
        default: every GPU under ``data/``.
    versions : list of str, optional
        vLLM versions to write (default: all the source holds for that GPU).
    commit : str, optional
        Source commit to record (default: parsed from ``README.md`` next to ``data/``).
    log : callable, optional
        Receives one progress line per set.

    Returns
    -------
    list of Path
        The table-set folders written.

    Raises
    ------
    ValueError
        (``ImportErrorAIC``) one line naming the file or folder at fault: no ``data/``, an
        unknown GPU or version, an unreadable table, a missing column.
    """
    log = log or (lambda s: None)
    root = data_root(Path(src))
    src_root = root.parent
    commit = commit or source_commit(src_root)
    out_dir = Path(out_dir)
    todo = _gpus_to_import(root, gpus)
    # -o before any note or table: a file in the way, /proc, /dev/null (one line, exit 2)
    make_output_folder(out_dir, ImportErrorAIC)
    written = []
    for name in todo:
        g = _Gpu(root, src_root, commit, name, GPU_PROFILES.get(name, name.replace("_", "-")),
                 system_yaml(src_root, name), gpu_versions(root, name))
        written += _import_gpu(g, out_dir, versions, bool(gpus), log)
    if not written:
        raise ImportErrorAIC(f"{root}: no vLLM kernel table for GPU(s) {', '.join(todo)}"
                             + (f" at version(s) {', '.join(map(str, versions))}"
                                if versions else "")
                             + " (expected <gpu>/{gemm,attention,comm,moe}/vllm/<version>/"
                             "*_perf.parquet)")
    return written


def _gpus_to_import(root: Path, gpus) -> list[str]:
    """The source's GPU folders named by ``gpus`` (folder or profile names; None: all)."""
    available = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not available:
        raise ImportErrorAIC(f"{root}: no GPU folder inside (expected aiconfigurator's "
                             "data/<gpu>/<op>/vllm/<version>/ tables, e.g. data/h100_sxm/)")
    rev = {GPU_PROFILES.get(a, a.replace("_", "-")): a for a in available}
    if not gpus:
        return available
    todo = []
    for g in gpus:
        g2 = rev.get(g, g)
        if g2 not in available:
            raise ImportErrorAIC(f"{root}: no GPU {g!r}; available: {', '.join(available)}")
        todo.append(g2)
    return todo


def _import_gpu(g: _Gpu, out_dir: Path, versions, strict: bool, log) -> list[Path]:
    """Write one GPU's NCCL set and its vLLM sets (of ``versions``; None: all); a version
    the GPU lacks is an error when ``strict`` (GPUs named), else skipped."""
    want = g.versions
    if versions:
        asked = [str(v) for v in versions]
        want = [v for v in g.versions if v in asked]
        missing = sorted(set(asked) - set(g.versions))
        if missing and strict:
            raise ImportErrorAIC(f"{g.root / g.name}: no vLLM version(s) "
                                 f"{', '.join(missing)}; available: {', '.join(g.versions)}")
    tables_dir = out_dir / g.profile / "tables"
    if not (out_dir / g.profile / "spec.yaml").is_file():
        log(f"note: {out_dir / g.profile / 'spec.yaml'} is missing; write one (datasheet "
            "figures with sources) before using these tables")
    written = []
    nccl_dir = _import_nccl(g, tables_dir, log)
    if nccl_dir is not None:
        written.append(nccl_dir)
    for v in want:
        d = _import_version(g, v, tables_dir, nccl_dir.name if nccl_dir else None, log)
        if d is not None:
            written.append(d)
    return written


def _import_nccl(g: _Gpu, tables_dir: Path, log) -> Path | None:
    """Write the GPU's NCCL set (the version its system YAML names); None when it has none."""
    nccl_ver = g.nccl_version
    p = g.root / g.name / "comm" / "nccl" / nccl_ver / "nccl_perf.parquet"
    if not (nccl_ver and p.is_file()):
        return None
    nccl_set = f"nccl-{nccl_ver}"
    df, rec, _, _ = _import_table("nccl", p, g.src_root, g.commit, g.sm,
                                  str(p.relative_to(g.src_root)))
    rec["engine_version"] = nccl_ver
    rec["changes"].append(f"the NCCL version named by {g.name}.yaml misc.nccl_version; "
                          "other NCCL versions in the source not imported")
    d = tables_dir / nccl_set
    write_parquet(df, d / "nccl.parquet")
    dump_yaml({"kind": "measured", "engine": "nccl", "engine_version": nccl_ver,
               "device_name": _device(rec, g.name), "gpu_profile": g.profile,
               "tables": {"nccl": rec}}, d / "provenance.yaml", _HEADER)
    log(f"{g.profile}/tables/{nccl_set}: nccl {rec['rows']} rows")
    return d


def _import_version(g: _Gpu, v: str, tables_dir: Path, nccl_set: str | None,
                    log) -> Path | None:
    """Write the set ``vllm-<v>`` of one GPU; None when no family has a source for it."""
    prov_tables, defaults, summary = {}, {}, []
    device_name = None
    d = tables_dir / f"vllm-{v}"
    for fam, (_, _, table) in SOURCES.items():
        plan = plan_family(g.root, g.name, fam, v, g.versions)
        if plan is None:
            continue
        if plan.mode in ("native", "fill"):
            rec, dk = _native_family(g, fam, table, plan, d)
            if device_name is None:
                device_name = rec["device"]
            summary.append(f"{fam} {rec['rows']}" + (" +fill" if plan.mode == "fill" else ""))
        else:
            rec, dk = _reused_family(g, fam, table, plan)
            summary.append(f"{fam} -> vllm-{plan.donors[0][0]}")
        if dk and fam != "gemm":
            defaults[fam] = dk[0] if len(dk) == 1 else dk
        prov_tables[fam] = rec
    if nccl_set:
        prov_tables["nccl"] = {"reuse_of": nccl_set,
                               "reuse_reason": f"the GPU's NCCL table ({g.name}.yaml "
                                               f"misc.nccl_version {g.nccl_version})"}
    if not prov_tables:
        return None
    doc = {"kind": "measured", "engine": "vllm", "engine_version": v,
           "device_name": device_name or device_any(g.root, g.name),
           "gpu_profile": g.profile, "sm_version": g.sm}
    if defaults:
        doc["default_kernel"] = defaults
    doc["tables"] = prov_tables
    dump_yaml(doc, d / "provenance.yaml", _HEADER)
    log(f"{g.profile}/tables/vllm-{v}: " + ", ".join(summary))
    return d


def _native_family(g: _Gpu, fam: str, table: str, plan: Plan, d: Path) -> tuple[dict, list]:
    """Write one family's own rows into set folder ``d`` (``fill``: donors fill the gaps when
    read). Returns its table record and its default kernels."""
    rel = str(plan.native.relative_to(g.src_root))
    df, rec, dk, _ = _import_table(fam, plan.native, g.src_root, g.commit, g.sm, rel)
    write_parquet(df, d / f"{fam}.parquet")
    if plan.mode == "fill":
        rec["fill_from"] = [f"vllm-{dv}" for dv, _ in plan.donors]
        rec["fill_reason"] = "; ".join(
            f"reuse.yaml: {table} from {e.get('from_version')} "
            f"({e.get('reason', '')})" for _, e in plan.donors)
        rec["changes"].append(
            "coordinates absent here are read from "
            + ", ".join(rec["fill_from"])
            + " (its default kernels) when the set is loaded, not copied")
        for dv, _ in plan.donors:
            dk = sorted(set(dk) | set(_donor_defaults(g.root, g.name, fam, dv, g.sm)))
    return rec, dk


def _reused_family(g: _Gpu, fam: str, table: str, plan: Plan) -> tuple[dict, list]:
    """The record of a family read from a donor set, and the donor's default kernels."""
    dv, e = plan.donors[0]
    reason = plan.reason or (f"aiconfigurator reuse.yaml: {table} from_version "
                             f"{e.get('from_version')} ({e.get('reason', '')}; "
                             f"approved_by {e.get('approved_by', '')})")
    rec = {"reuse_of": f"vllm-{dv}", "reuse_reason": reason}
    return rec, _donor_defaults(g.root, g.name, fam, dv, g.sm)


def _device(rec: dict, gpu: str) -> str:
    d = rec.get("device")
    return d if isinstance(d, str) and d else gpu


def _donor_defaults(root: Path, gpu: str, fam: str, version: str, sm) -> list:
    if fam not in ("attention_prefill", "attention_decode", "moe"):
        return []
    opdir, fw, table = SOURCES[fam]
    p = root / gpu / opdir / fw / version / f"{table}.parquet"
    if not p.is_file():
        return []
    df, _, _ = convert(fam, read_source_table(p), p)
    return default_kernels(fam, df, sm)[0]


# ------------------------------------------------------------------------------ CLI
def main(argv: list[str] | None = None) -> int:
    """``python -m calibration.import_aic SRC -o DIR [--gpu G ...] [--versions V ...]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    try:
        run(args)
    except ValueError as e:
        print(f"import-aic: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The import-aic arguments (shared by ``servesim calibrate import-aic``)."""
    ap.add_argument("src", help="aiconfigurator systems folder (holding data/ and <gpu>.yaml)")
    ap.add_argument("-o", "--output", required=True, type=output_path,
                    help="folder of GPU profiles to write into (hardware_profiles/)")
    ap.add_argument("--gpu", action="append", metavar="G",
                    help="aiconfigurator GPU folder or servesim profile name (repeatable; "
                         "default: all)")
    ap.add_argument("--versions", nargs="+", metavar="V", help="vLLM versions (default: all)")
    ap.add_argument("--commit", help="source commit to record (default: from README.md)")
    ap.add_argument("-q", "--quiet", action="store_true")


def run(args) -> list[Path]:
    """Run an import from parsed :func:`add_arguments` arguments; prints one line per set."""
    log = (lambda s: None) if getattr(args, "quiet", False) else print
    out = import_aic(args.src, args.output, gpus=args.gpu, versions=args.versions,
                     commit=args.commit, log=log)
    if not getattr(args, "quiet", False):
        print(f"wrote {len(out)} table set(s) under {args.output}")
    return out


if __name__ == "__main__":
    sys.exit(main())
