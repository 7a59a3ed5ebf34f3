"""The layout of an aiconfigurator ``systems/`` folder (for :mod:`calibration.import_aic`).

Its GPUs, vLLM versions, system YAML, ``reuse.yaml`` declarations and which file answers a
family at a version; :mod:`calibration.import_aic`'s docstring describes the reuse rules.
Every error is an :class:`ImportErrorAIC` of one line naming the file at fault. Needs pandas,
pyarrow and PyYAML (no torch).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

SOURCE_PROJECT = "aiconfigurator"
SOURCE_URL = "https://github.com/ai-dynamo/aiconfigurator"
SOURCE_PREFIX = "aic-core/src/aiconfigurator_core/systems"
LICENSE = "Apache-2.0"

#: aiconfigurator system folder -> servesim profile name
GPU_PROFILES = {"h100_sxm": "h100-sxm", "a100_sxm": "a100-sxm-80gb", "h200_sxm": "h200-sxm",
                "l40s": "l40s", "rtx_pro_6000_server": "rtx-pro-6000-server"}
#: servesim family -> (aiconfigurator op-family folder, framework folder, table name)
SOURCES = {
    "gemm": ("gemm", "vllm", "gemm_perf"),
    "attention_prefill": ("attention", "vllm", "context_attention_perf"),
    "attention_decode": ("attention", "vllm", "generation_attention_perf"),
    "all_reduce": ("comm", "vllm", "custom_allreduce_perf"),
    "moe": ("moe", "vllm", "moe_perf"),
}


class ImportErrorAIC(ValueError):
    """A malformed source folder or table (one line naming the file)."""


def read_source_table(path: Path) -> pd.DataFrame:
    """One aiconfigurator Parquet table, as read (any reader failure: one line)."""
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - any reader failure is a bad source file
        raise ImportErrorAIC(f"{path}: cannot read: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}") from None


def source_commit(src: Path) -> str:
    """The 40-hex commit named in ``README.md`` of ``src`` or its parent (else ``unknown``)."""
    for p in (src / "README.md", src.parent / "README.md"):
        if p.is_file():
            m = re.search(r"commit\s+([0-9a-f]{40})", p.read_text())
            if m:
                return m.group(1)
    return "unknown"


def data_root(src: Path) -> Path:
    """The ``data/`` folder of a ``systems/`` folder (or ``src`` itself when it is one)."""
    src = Path(src)
    if (src / "data").is_dir():
        return src / "data"
    if src.name == "data" and src.is_dir():
        return src
    raise ImportErrorAIC(f"{src}: not an aiconfigurator systems folder (no data/ inside)")


def system_yaml(src_root: Path, gpu: str) -> dict:
    """``<gpu>.yaml`` of the ``systems/`` folder (empty when absent)."""
    p = src_root / f"{gpu}.yaml"
    if not p.is_file():
        return {}
    try:
        return yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ImportErrorAIC(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None


def _reuse_entries(d: Path) -> list[dict]:
    """The entries of a version folder's ``reuse.yaml`` (empty when absent)."""
    p = d / "reuse.yaml"
    if not p.is_file():
        return []
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ImportErrorAIC(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    ent = doc.get("reuse") if isinstance(doc, dict) else None
    if not isinstance(ent, list):
        raise ImportErrorAIC(f"{p}: expected a top-level 'reuse' list")
    out = []
    for e in ent:
        if not isinstance(e, dict) or "table" not in e or "from_version" not in e:
            raise ImportErrorAIC(f"{p}: each reuse entry needs 'table' and 'from_version'")
        out.append({k: str(e.get(k, "")) for k in ("table", "from_version", "reason",
                                                   "approved_by")})
    return out


def gpu_versions(root: Path, gpu: str) -> list[str]:
    """Every vLLM version with a folder for any family of ``gpu``, ascending."""
    vs = set()
    for opdir, fw, _ in SOURCES.values():
        d = root / gpu / opdir / fw
        if d.is_dir():
            vs.update(p.name for p in d.iterdir() if p.is_dir())
    return sorted(vs, key=version_key)


def version_key(v: str) -> tuple:
    """Sort key of a version string (its numbers)."""
    return tuple(int(x) for x in re.findall(r"\d+", v))


class Plan:
    """How one family of one version is sourced: native rows, reuse, fill, earlier sibling."""

    def __init__(self, mode: str, native: Path | None = None, donors=(), reason: str = ""):
        self.mode, self.native, self.donors, self.reason = mode, native, list(donors), reason


def plan_family(root: Path, gpu: str, family: str, version: str,
                versions: list[str]) -> Plan | None:
    """How ``family`` of vLLM ``version`` is sourced (:class:`Plan`; None: not at all)."""
    opdir, fw, table = SOURCES[family]

    def native(v):
        p = root / gpu / opdir / fw / v / f"{table}.parquet"
        return p if p.is_file() else None

    def resolve(v, seen=()):
        """Version whose native file answers version ``v`` (following reuse declarations)."""
        if v in seen:
            return None
        if native(v):
            return v
        for e in _reuse_entries(root / gpu / opdir / fw / v):
            if e["table"] == table:
                r = resolve(e["from_version"], (*seen, v))
                if r:
                    return r
        return None

    here = native(version)
    decl = [e for e in _reuse_entries(root / gpu / opdir / fw / version) if e["table"] == table]
    donors = []
    for e in decl:
        r = resolve(e["from_version"], (version,))
        if r and r != version and r not in [d for d, _ in donors]:
            donors.append((r, e))
    if here and donors:
        return Plan("fill", here, donors, "")
    if here:
        return Plan("native", here)
    if donors:
        return Plan("reuse", None, donors[:1], "")
    earlier = [v for v in versions if version_key(v) < version_key(version)]
    for v in reversed(earlier):
        r = resolve(v)
        if r:
            return Plan("earlier", None, [(r, {})],
                        f"no {table} for vLLM {version} in the source and no reuse.yaml entry; "
                        f"aiconfigurator's shared-layer rule reads the nearest earlier "
                        f"version that has one ({v})")
    return None


def device_any(root: Path, gpu: str) -> str:
    """The ``device`` column's one value in the first of ``gpu``'s tables that has one
    (else ``gpu``)."""
    for p in sorted((root / gpu).rglob("*.parquet")):
        try:
            import pyarrow.parquet as pq
            t = pq.read_table(p, columns=["device"])
            vals = sorted(set(t.column("device").to_pylist()))
            if len(vals) == 1 and vals[0]:
                return str(vals[0])
        except Exception:  # noqa: BLE001, S112 - a file without the column: try the next
            continue
    return gpu
