"""The device a profile is measured on, for both harness formats (``calibration.harness``,
v1, and ``calibration.operator_harness``, v2): its description for ``provenance.yaml``
(:func:`device_info`), its copy bandwidth (:func:`measure_bandwidth`) and the profile folder's
``spec.yaml`` of measured peaks (:func:`write_spec`).

torch is imported inside the functions that use it (``pip install -e ".[calibrate]"``).
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from . import HARNESS_VERSION
from .timing import time_isolated


def device_info(device: str, threads: int) -> dict:
    """Device name, CPU model, versions (what ``provenance.yaml`` records)."""
    import torch
    info = {"device": device, "device_type": torch.device(device).type,
            "torch_version": torch.__version__, "python_version": platform.python_version(),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "num_threads": threads,
            "platform": platform.platform()}
    if info["device_type"] == "cuda":
        p = torch.cuda.get_device_properties(torch.device(device))
        info.update({"device_name": torch.cuda.get_device_name(torch.device(device)),
                     "cuda_version": torch.version.cuda,
                     "cudnn_version": torch.backends.cudnn.version(),
                     "driver": _nvidia_driver(),
                     "device_memory_bytes": int(p.total_memory),
                     "num_sms": int(p.multi_processor_count),
                     "device_count": torch.cuda.device_count()})
    else:
        info.update({"device_name": f"{info['cpu_model']} ({threads} thread"
                                    f"{'s' if threads != 1 else ''})",
                     "cuda_version": None, "driver": None,
                     "device_memory_bytes": _ram_bytes()})
    return info


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else what :mod:`platform` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _ram_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return int(16e9)


def _nvidia_driver() -> str | None:
    try:
        import subprocess
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
    except (OSError, IndexError, Exception):  # noqa: BLE001 - optional information
        return None


def measure_bandwidth(device: str, dtype, nbytes: int = 256 * 2**20) -> float:
    """Device memory bandwidth (bytes/s) from a large tensor copy (reads + writes)."""
    import torch
    n = nbytes // torch.tensor([], dtype=dtype).element_size()
    a = torch.ones(n, dtype=dtype, device=device)
    b = torch.empty_like(a)
    ts = time_isolated(lambda: b.copy_(a), device, warmup=2, repeats=7)
    return 2.0 * n * a.element_size() / float(np.median(ts))


def plain(obj):
    """Plain YAML-safe data (str subclasses such as torch's version string, numpy scalars)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    return str(obj)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name).strip("-").lower()


def write_spec(out: Path, info: dict, peak: float, bw: float, dtype: str, threads: int,
               ar: pd.DataFrame | None) -> Path:
    """Write ``spec.yaml`` unless the folder has one that is not ours (a datasheet profile)."""
    p = out / "spec.yaml"
    if p.is_file():
        old = yaml.safe_load(p.read_text()) or {}
        if old.get("kind") != "measured":
            return p
    date = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    label = f"measured (servesim calibrate v{HARNESS_VERSION}, {info['device_name']}, {date[:10]})"
    link = 0.0
    if ar is not None and len(ar):
        big = ar[ar["bytes"] == ar["bytes"].max()]
        link = float((2 * (big["num_gpus"] - 1) / big["num_gpus"] * big["bytes"]
                      / big["median_s"]).max())
    doc = {
        "name": _slug(out.name),
        "kind": "measured",
        "device_type": info["device_type"],
        "device_name": info["device_name"],
        "bf16_flops_per_s": float(f"{peak:.4g}"),
        "fp8_flops_per_s": None,
        "hbm_bytes": float(info.get("device_memory_bytes") or 0) or 1e9,
        "hbm_bandwidth_bytes_per_s": float(f"{bw:.4g}"),
        "interconnect": "NVLink/PCIe (measured all-reduce)" if link else "none",
        "interconnect_bandwidth_bytes_per_s": float(f"{link:.4g}"),
        "host_link": "host memory" if info["device_type"] == "cpu" else "PCIe",
        "host_link_bandwidth_bytes_per_s": float(f"{bw:.4g}") if info["device_type"] == "cpu"
        else 32.0e9,
        "usd_per_gpu_hour": 0.0,
        "price_source": "none (a calibrated local device)",
        "source": [(f"{label}: bf16_flops_per_s = best {dtype} GEMM rate in gemm.csv; "
                   "hbm_bandwidth_bytes_per_s = large tensor copy (read + write bytes / time); "
                   "hbm_bytes = device (CPU: system) memory")],
        "provenance": {"bf16_flops_per_s": label, "hbm_bandwidth_bytes_per_s": label,
                       "hbm_bytes": "measured (device properties)",
                       "note": (f"CPU profile: the 'bf16' figure is the {dtype} rate "
                                f"({threads} threads)") if info["device_type"] == "cpu" else ""},
    }
    header = (f"# Device profile written by servesim calibrate (harness v{HARNESS_VERSION}).\n"
              f"# Figures are measured on this device ({info['device_name']}), not datasheet.\n")
    p.write_text(header + yaml.safe_dump(plain(doc), sort_keys=False, width=100))
    return p
