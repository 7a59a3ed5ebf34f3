"""GPU specifications (from ``hardware_profiles/<gpu>/spec.yaml``).

A profile folder holds ``spec.yaml`` (datasheet figures with sources) and, optionally,
measured or fitted latency tables written by the calibration harness (``servesim calibrate``)
or the fitting script (``calibration/fit_vidur.py``). A user can name a GPU the catalog lacks
by pointing ``hardware.gpu`` at their own spec YAML (or a folder holding ``spec.yaml``).

Units: FLOP/s, bytes, bytes/s, USD per GPU-hour.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .resources import data_dir

_REQUIRED = ("name", "bf16_flops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s")


@dataclass(frozen=True)
class GPUSpec:
    """Datasheet figures of one GPU.

    Attributes
    ----------
    name : str
        Profile id (``h100-sxm``).
    bf16_flops_per_s : float
        Peak dense BF16 tensor FLOP/s.
    fp8_flops_per_s : float or None
        Peak dense FP8 FLOP/s (None: no FP8 tensor cores; FP8 runs at the BF16 rate).
    hbm_bytes : float
        Device memory in bytes.
    hbm_bandwidth_bytes_per_s : float
        Peak HBM bandwidth.
    interconnect_bandwidth_bytes_per_s : float
        GPU-to-GPU bandwidth per direction (NVLink), used for TP all-reduce.
    host_link_bandwidth_bytes_per_s : float
        Host link (PCIe) bandwidth per direction, used for KV swapping.
    usd_per_gpu_hour : float
        Default price (a scenario's ``cost.usd_per_gpu_hour`` overrides it).
    profile_dir : Path or None
        Folder the spec came from (latency tables live next to it).
    """

    name: str
    bf16_flops_per_s: float
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    fp8_flops_per_s: float | None = None
    interconnect_bandwidth_bytes_per_s: float = 0.0
    host_link_bandwidth_bytes_per_s: float = 32e9
    usd_per_gpu_hour: float = 0.0
    aliases: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    price_source: str = ""
    interconnect: str = ""
    host_link: str = ""
    profile_dir: Path | None = field(default=None, compare=False)

    def flops_per_s(self, dtype: str) -> float:
        """Peak dense FLOP/s for ``dtype`` (``fp8`` falls back to BF16 without FP8 units)."""
        if dtype == "fp8" and self.fp8_flops_per_s:
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s


def load_gpu_spec(path: str | Path) -> GPUSpec:
    """Read a GPU spec YAML (or a folder holding ``spec.yaml``).

    Raises
    ------
    ValueError
        If the file is missing, not YAML, lacks a required key or has a non-numeric value.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "spec.yaml"
    if not p.is_file():
        raise ValueError(f"GPU spec {str(path)!r} not found")
    try:
        raw = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: a GPU spec must be a mapping")  # noqa: TRY004 - user input
    known = {"name", "aliases", "bf16_flops_per_s", "fp8_flops_per_s", "hbm_bytes",
             "hbm_bandwidth_bytes_per_s", "interconnect", "interconnect_bandwidth_bytes_per_s",
             "host_link", "host_link_bandwidth_bytes_per_s", "usd_per_gpu_hour", "price_source",
             "source", "notes", "device_name", "device_type", "kind", "provenance"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{p}: unknown GPU spec key(s) {', '.join(unknown)}; allowed: "
                         + ", ".join(sorted(known)))
    missing = [k for k in _REQUIRED if raw.get(k) in (None, "")]
    if missing:
        raise ValueError(f"{p}: GPU spec lacks required key(s) {', '.join(missing)}")
    num_keys = ("bf16_flops_per_s", "fp8_flops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s",
                "interconnect_bandwidth_bytes_per_s", "host_link_bandwidth_bytes_per_s",
                "usd_per_gpu_hour")
    vals = {}
    for k in num_keys:
        if raw.get(k) is None:
            continue
        try:
            vals[k] = float(raw[k])
        except (TypeError, ValueError):
            raise ValueError(f"{p}: {k}={raw[k]!r} is not a number") from None
        if vals[k] < 0 or (k in _REQUIRED and vals[k] == 0):
            raise ValueError(f"{p}: {k}={raw[k]!r} must be positive")
    src = raw.get("source") or ()
    return GPUSpec(name=str(raw["name"]), aliases=tuple(raw.get("aliases") or ()),
                   source=tuple([src] if isinstance(src, str) else src),
                   price_source=str(raw.get("price_source", "")),
                   interconnect=str(raw.get("interconnect", "")),
                   host_link=str(raw.get("host_link", "")), profile_dir=p.parent, **vals)


def gpu_catalog() -> dict[str, GPUSpec]:
    """All profiles under the shipped ``hardware_profiles/`` folder, by name."""
    out = {}
    root = data_dir("hardware_profiles")
    for spec in sorted(root.glob("*/spec.yaml")):
        g = load_gpu_spec(spec)
        out[g.name] = g
    return out


def get_gpu(name_or_path: str) -> GPUSpec:
    """Look a GPU up by profile name or alias (case-insensitive), or load a spec path.

    Raises
    ------
    ValueError
        If it is neither; the message lists the known names.
    """
    key = str(name_or_path).strip()
    cat = gpu_catalog()
    for g in cat.values():
        if key.lower() in {g.name.lower(), *(a.lower() for a in g.aliases)}:
            return g
    p = Path(key).expanduser()
    if p.exists():
        return load_gpu_spec(p)
    raise ValueError(f"unknown GPU {key!r}; known: {', '.join(sorted(cat))} "
                     "(or give a path to a spec YAML)")
