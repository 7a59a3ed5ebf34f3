"""GPU specifications (from ``hardware_profiles/<gpu>/spec.yaml``).

A profile folder holds ``spec.yaml`` (datasheet figures with sources) and, optionally,
measured latency tables (``tables/<engine>-<version>/``: imported public measurements or the
calibration harness's output, read by :mod:`simulator.perf.tables.sets`; a flat harness folder keeps
its CSVs next to ``spec.yaml``) or fitted efficiencies (``fitted.yaml``, from
``calibration/fit_vidur.py``). A user can name a GPU the catalog lacks
by pointing ``hardware.gpu`` at their own spec YAML (or a folder holding ``spec.yaml``).

Units: FLOP/s, bytes, bytes/s, seconds, USD per GPU-hour.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from simulator.base.input_limits import InputLimitError, short_repr
from simulator.base.resources import (
    data_dir,
    not_a_file_reason,
    not_text_reason,
    path_problem,
    safe_load_yaml,
)

_REQUIRED = ("name", "bf16_flops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s")

#: the largest value each numeric key of a GPU spec may take: sane bounds, far above any GPU
#: (an H100 SXM: 989e12 BF16 FLOP/s, 85e9 bytes of HBM at 3.35e12 B/s, NVLink 450e9 B/s),
#: that keep every count derived from them (KV blocks, bytes, step times) within int64 and
#: float range; the smallest is 0 (> 0 for the required keys)
SPEC_MAX: dict[str, float] = {
    "bf16_flops_per_s": 1e18, "fp8_flops_per_s": 1e18,   # 1 EFLOP/s
    "hbm_bytes": float(2**50),                           # 1 PiB
    "hbm_bandwidth_bytes_per_s": 1e15, "interconnect_bandwidth_bytes_per_s": 1e15,
    "host_link_bandwidth_bytes_per_s": 1e15,             # 1 PB/s
    "usd_per_gpu_hour": 1e6,
    "interconnect_latency_s": 60.0,
}
#: the most GPUs an interconnect may join, and SMs a GPU may have
SPEC_MAX_COUNT = 1_000_000
#: values of ``interconnect_kind``: NVLink, PCIe between GPUs, or no GPU-to-GPU link
LINK_KINDS = ("nvlink", "pcie", "none")


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
        GPU-to-GPU bandwidth per direction (NVLink, or the PCIe path between two GPUs), used
        for TP all-reduce, EP all-to-all, PP activations and P/D KV transfer.
    interconnect_kind : str
        GPU-to-GPU link: ``nvlink``, ``pcie`` or ``none`` (no second GPU reachable); empty
        when a spec does not say (then :attr:`link_kind` infers it, see there).
    interconnect_latency_s : float
        One-way latency of one GPU-to-GPU transfer over that link (seconds; 0 = not stated).
    p2p : bool or None
        Whether CUDA peer-to-peer access works between two such GPUs (over NVLink, or over
        PCIe without a bounce through host memory). None: the spec does not say.
    interconnect_max_gpus : int
        How many GPUs the interconnect joins (2 for an NVLink bridge); 0: not limited by the
        spec. A tensor-parallel group larger than this crosses another link (the host's PCIe),
        which a scenario states with ``hardware.interconnect``.
    host_link_bandwidth_bytes_per_s : float
        Host link (PCIe) bandwidth per direction, used for KV swapping.
    usd_per_gpu_hour : float
        Default price (a scenario's ``cost.usd_per_gpu_hour`` overrides it); 0 when the spec
        has no sourced price (``price_source`` then says so).
    efficiency_tables_from : str
        Profile name of a same-die sibling whose measured compute-kernel tables this GPU uses:
        the sibling's time above its roofline held in seconds over this GPU's *own* datasheet
        roofline (:func:`simulator.perf.tables.sets.table_sets`); empty: none.
    num_sms : int or None
        Streaming multiprocessors (the KV planner sizes vLLM's top-k/top-p scratch buffer by
        it, :func:`simulator.kv.profile_terms.sampler_peak_bytes`); None: not stated.
    compute_capability : tuple of int or None
        CUDA compute capability ``(major, minor)`` (cuBLAS workspace size,
        :func:`simulator.kv.profile_terms.cublas_workspace_bytes`); None: not stated.
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
    interconnect_kind: str = ""
    interconnect_latency_s: float = 0.0
    p2p: bool | None = None
    interconnect_max_gpus: int = 0
    efficiency_tables_from: str = ""
    num_sms: int | None = None
    compute_capability: tuple[int, int] | None = None
    #: the link fields were stated by a scenario (``hardware.interconnect``), not the spec
    link_stated: bool = field(default=False, compare=False)
    #: ``interconnect_bandwidth_bytes_per_s`` itself was stated by the scenario (an achieved
    #: figure), not kept from the spec (a datasheet one)
    link_bandwidth_stated: bool = field(default=False, compare=False)
    profile_dir: Path | None = field(default=None, compare=False)

    @property
    def link_kind(self) -> str:
        """GPU-to-GPU link kind: ``interconnect_kind`` when stated, else inferred.

        Inference (for specs written before the key existed): ``nvlink`` when the free-text
        ``interconnect`` names NVLink, ``pcie`` when it names PCIe, ``none`` when the
        interconnect bandwidth is 0, else ``nvlink`` (the catalog's GPUs with a non-zero
        bandwidth and no kind are the NVLink SXM parts).
        """
        if self.interconnect_kind:
            return self.interconnect_kind
        text = self.interconnect.lower()
        if "nvlink" in text:
            return "nvlink"
        if "pcie" in text:
            return "pcie"
        return "none" if self.interconnect_bandwidth_bytes_per_s <= 0 else "nvlink"

    def flops_per_s(self, dtype: str) -> float:
        """Peak dense FLOP/s for ``dtype`` (``fp8`` falls back to BF16 without FP8 units)."""
        if dtype == "fp8" and self.fp8_flops_per_s:
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s


def _link_fields(raw: dict, vals: dict, p: Path) -> tuple[str | None, bool | None, int | None]:
    """A spec's ``interconnect_kind``, ``p2p`` and ``interconnect_max_gpus``, checked (the
    errors of :func:`load_gpu_spec`)."""
    kind = raw.get("interconnect_kind")
    if kind is not None and kind not in LINK_KINDS:
        raise ValueError(f"{p}: interconnect_kind={kind!r} must be one of "
                         + ", ".join(LINK_KINDS))
    p2p = raw.get("p2p")
    if p2p is not None and not isinstance(p2p, bool):
        raise ValueError(f"{p}: p2p={p2p!r} must be true or false")
    if kind == "none" and vals.get("interconnect_bandwidth_bytes_per_s", 0.0) > 0:
        raise ValueError(f"{p}: interconnect_kind none contradicts "
                         "interconnect_bandwidth_bytes_per_s > 0")
    reach = raw.get("interconnect_max_gpus")
    if reach is not None and (isinstance(reach, bool) or not isinstance(reach, int) or reach < 2):
        raise ValueError(f"{p}: interconnect_max_gpus={short_repr(reach)} must be an integer "
                         ">= 2")
    if reach is not None and reach > SPEC_MAX_COUNT:
        raise ValueError(f"{p}: interconnect_max_gpus={short_repr(reach)} is out of range: "
                         f"allowed [2, {SPEC_MAX_COUNT:,}]")
    return kind, p2p, reach


def _device_fields(raw: dict, p: Path) -> dict:
    """A spec's ``num_sms`` (an integer >= 1) and ``compute_capability`` (``"9.0"`` or
    ``[9, 0]``), checked; absent keys are left out (the errors of :func:`load_gpu_spec`)."""
    out: dict = {}
    sms = raw.get("num_sms")
    if sms is not None:
        if isinstance(sms, bool) or not isinstance(sms, int) or sms < 1:
            raise ValueError(f"{p}: num_sms={short_repr(sms)} must be an integer >= 1")
        if sms > SPEC_MAX_COUNT:
            raise ValueError(f"{p}: num_sms={short_repr(sms)} is out of range: allowed "
                             f"[1, {SPEC_MAX_COUNT:,}]")
        out["num_sms"] = sms
    cc = raw.get("compute_capability")
    if cc is not None:
        parts = str(cc).split(".") if isinstance(cc, (str, float)) else cc
        try:
            major, minor = (int(x) for x in parts)
        except (TypeError, ValueError):
            raise ValueError(f"{p}: compute_capability={cc!r} must be 'major.minor' "
                             "(e.g. '9.0')") from None
        if major < 1 or minor < 0:
            raise ValueError(f"{p}: compute_capability={cc!r} must be 'major.minor' "
                             "(e.g. '9.0')")
        out["compute_capability"] = (major, minor)
    return out


def _numeric_fields(raw: dict, p: Path) -> dict[str, float]:
    """The numeric keys of a spec (:data:`SPEC_MAX`) present, as finite floats within their
    range (the errors of :func:`load_gpu_spec`)."""
    vals = {}
    for k, top in SPEC_MAX.items():
        if raw.get(k) is None:
            continue
        v = raw[k]
        if isinstance(v, bool):
            raise ValueError(f"{p}: {k}={v!r} is not a number")  # noqa: TRY004 - user input
        try:  # text too: YAML 1.1 reads 3.35e12 (no dot before the exponent sign) as a string
            vals[k] = float(v)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{p}: {k}={short_repr(v)} is not a number") from None
        if not math.isfinite(vals[k]):
            raise ValueError(f"{p}: {k}={short_repr(v)} must be a finite number")
        if vals[k] < 0 or (k in _REQUIRED and vals[k] == 0):
            raise ValueError(f"{p}: {k}={short_repr(v)} must be positive")
        if vals[k] > top:
            low = "(0" if k in _REQUIRED else "[0"
            raise ValueError(f"{p}: {k}={short_repr(v)} is out of range: allowed "
                             f"{low}, {top:g}]")
    return vals


def load_gpu_spec(path: str | Path) -> GPUSpec:
    """Read a GPU spec YAML (or a folder holding ``spec.yaml``).

    Keys are the :class:`GPUSpec` attributes (plus ``source``, ``notes``, ``provenance`` and the
    measured-profile keys ``device_name``, ``device_type``, ``kind``); the GPU-to-GPU link is
    ``interconnect_kind`` (``nvlink``, ``pcie``, ``none``), ``interconnect_bandwidth_bytes_per_s``
    (per direction), ``interconnect_latency_s`` and ``p2p`` (true/false); the host link is
    ``host_link`` / ``host_link_bandwidth_bytes_per_s``; ``interconnect_max_gpus`` is how many
    GPUs the interconnect joins (an NVLink bridge: 2); ``efficiency_tables_from`` names the
    catalog profile whose compute-kernel tables are transferred (a profile name, not a path).

    Raises
    ------
    ValueError
        If the file is missing, not YAML, has an unknown key, lacks a required key, has a
        non-numeric, non-finite or negative value, an ``interconnect_kind`` outside ``nvlink, pcie, none``
        (or ``none`` with a non-zero bandwidth), a ``p2p`` that is not a boolean, an
        ``interconnect_max_gpus`` that is not an integer >= 2, or an
        ``efficiency_tables_from`` that is not a non-empty string naming another profile, a
        ``num_sms`` that is not an integer >= 1, or a ``compute_capability`` that is not
        ``major.minor``.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "spec.yaml"
    if not p.is_file():
        raise ValueError(f"GPU spec {str(path)!r}: {not_a_file_reason(p, 'GPU spec file')}")
    try:
        raw = safe_load_yaml(p.read_text(encoding="utf-8")) or {}
    except InputLimitError as e:  # an alias bomb, nesting, an integer of too many digits
        raise ValueError(e.at(str(p))) from None
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: {not_text_reason(e)}; a GPU spec is YAML text") from None
    except OSError as e:
        raise ValueError(f"{p}: cannot read the GPU spec ({e.strerror or e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: a GPU spec must be a mapping")  # noqa: TRY004 - user input
    known = {"name", "aliases", "bf16_flops_per_s", "fp8_flops_per_s", "hbm_bytes",
             "hbm_bandwidth_bytes_per_s", "interconnect", "interconnect_bandwidth_bytes_per_s",
             "interconnect_kind", "interconnect_latency_s", "p2p", "interconnect_max_gpus",
             "host_link", "host_link_bandwidth_bytes_per_s", "usd_per_gpu_hour", "price_source",
             "source", "notes", "device_name", "device_type", "kind", "provenance",
             "efficiency_tables_from", "num_sms", "compute_capability"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{p}: unknown GPU spec key(s) {', '.join(unknown)}; allowed: "
                         + ", ".join(sorted(known)))
    missing = [k for k in _REQUIRED if raw.get(k) in (None, "")]
    if missing:
        raise ValueError(f"{p}: GPU spec lacks required key(s) {', '.join(missing)}")
    vals = _numeric_fields(raw, p)
    kind, p2p, reach = _link_fields(raw, vals, p)
    sib = raw.get("efficiency_tables_from")
    if sib is not None and (not isinstance(sib, str) or not sib.strip()
                            or sib.strip() == str(raw["name"])):
        raise ValueError(f"{p}: efficiency_tables_from={sib!r} must name another GPU profile")
    src = raw.get("source") or ()
    return GPUSpec(efficiency_tables_from=str(sib or "").strip(), **_device_fields(raw, p),
                   name=str(raw["name"]), aliases=tuple(str(a) for a in raw.get("aliases") or ()),
                   interconnect_kind=str(kind or ""), p2p=p2p,
                   interconnect_max_gpus=int(reach or 0),
                   source=tuple([src] if isinstance(src, str) else src),
                   price_source=str(raw.get("price_source", "")),
                   interconnect=str(raw.get("interconnect", "")),
                   host_link=str(raw.get("host_link", "")), profile_dir=p.parent, **vals)


#: the last catalog read, by the (path, mtime, size) of every spec file it read
_CATALOG: dict[tuple, dict[str, GPUSpec]] = {}


def gpu_catalog() -> dict[str, GPUSpec]:
    """All profiles under the shipped ``hardware_profiles/`` folder, by name.

    The specs are parsed again only when the set of spec files, or one's modification time
    or size, changed since the last call (a capacity plan looks GPUs up hundreds of times).
    """
    root = data_dir("hardware_profiles")
    specs = sorted(root.glob("*/spec.yaml"))
    stats = [s.stat() for s in specs]
    key = tuple((str(s), st.st_mtime_ns, st.st_size) for s, st in zip(specs, stats))
    hit = _CATALOG.get(key)
    if hit is None:
        hit = {}
        for spec in specs:
            g = load_gpu_spec(spec)
            hit[g.name] = g
        _CATALOG.clear()
        _CATALOG[key] = hit
    return dict(hit)


def _looks_like_path(key: str) -> bool:
    """True when a lookup key is meant as a file path (a separator or a file suffix)."""
    return "/" in key or "\\" in key or key.lower().endswith((".yaml", ".yml", ".json"))


def get_gpu(name_or_path: str) -> GPUSpec:
    """Look a GPU up by profile name or alias (case-insensitive), or load a spec path.

    Raises
    ------
    ValueError
        If it is neither; the message lists the known names. A key that looks like a path
        (a separator or a ``.yaml``/``.json`` suffix) that does not name a file is reported
        as a missing file, not as an unknown GPU.
    """
    key = str(name_or_path).strip()
    cat = gpu_catalog()
    for g in cat.values():
        if key.lower() in {g.name.lower(), *(a.lower() for a in g.aliases)}:
            return g
    p = Path(key).expanduser()
    if p.is_file() or (p / "spec.yaml").is_file():  # a spec YAML, or a profile folder
        return load_gpu_spec(p)
    if _looks_like_path(key) or p.exists() or path_problem(p):
        why = ("a folder with no spec.yaml in it (a GPU profile folder holds spec.yaml)"
               if p.is_dir() else not_a_file_reason(p, "GPU spec file").replace(
                   "GPU spec file not found", "not found"))
        raise ValueError(f"GPU spec file {key!r}: {why} (known GPU names: "
                         f"{', '.join(sorted(cat))})")
    raise ValueError(f"unknown GPU {key!r}; known: {', '.join(sorted(cat))} "
                     "(or give a path to a spec YAML)")
