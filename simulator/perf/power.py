"""GPU power while serving: idle, and busy as a function of a step's compute and memory use.

A step on one GPU draws

    P = min(limit_w, static_w + compute_w x u_compute + memory_w x u_memory)

where ``u_compute`` is the step's FLOPs over (step time x the GPU's peak dense FLOP/s) and
``u_memory`` its HBM bytes over (step time x peak HBM bytes/s), each in [0, 1]; ``limit_w`` is
the board power limit (``nvidia-smi -pl``: the datasheet TDP by default, or a cap). A replica
held but not stepping draws ``idle_w`` per GPU. The constants of each GPU live in
``hardware_profiles/<gpu>/power.yaml`` with their sources; the busy constants are a least-
squares fit to measured average serving power (:func:`fit_power_constants`, run by
``calibration/fit_power.py``), never a datasheet figure (the TDP is only the bound
``limit_w``). A GPU whose profile has no sourced figure has no model: :func:`load_power_model`
says so (the run summary's ``energy`` block then says ``available: false`` and why).

A step's work (:func:`step_work`) is the usual per-step operation count of a transformer
(Kaplan et al. 2020, "Scaling laws", section 2.1: ``2 N`` FLOPs per token; attention
``4 d`` FLOPs per query-key pair and head, as :mod:`simulator.perf.roofline` counts it): the
linear layers ``2 x parameters per GPU x tokens`` (MoE: active parameters / TP), attention
``4 x head_dim x query heads per GPU x layers x query-key pairs`` (decode: each sequence's
context, the step table's ``kv_tokens_used`` less the step's prefill tokens; prefill: each
chunk's causal pairs from position 0), and the bytes: the GPU's weights once plus the KV
cache the step reads (``kv_tokens_used`` x KV bytes per token per GPU). It is a whole-step
count from the step table's columns (sliding windows and MLA's latent projections are not
modelled apart); the roofline's per-operator times are not reused because the table records
a step's composition, not its operators.

Power caps (:func:`cap_slowdown`, :func:`capped_gpu`): a GPU held below its default limit runs
its compute-bound kernels at a lower clock while HBM-bound kernels keep their speed. Splitwise
(Patel et al., ISCA 2024) measured an H100 capped 700 W -> 350 W: the token (decode, memory-
bound) phase shows no latency change and the prompt (compute-bound) phase takes 1.3x as long
(the released ``data/perf_model.csv`` of Mutinifni/splitwise-sim at 8f99e7d: every
``h100-80gb-pcap`` prompt time is 1.30x the ``h100-80gb`` one, every token time 1.00x). A cap
between the two measured limits is interpolated linearly in watts; a cap below the lowest
measured limit is refused (no measurement).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from simulator.base.input_limits import InputLimitError
from simulator.base.resources import data_dir, safe_load_yaml
from simulator.catalog.hardware import GPUSpec

__all__ = ["NoPowerModelError", "PowerModel", "StepWork", "apply_power_cap", "cap_slowdown", "capped_gpu", "fit_power_constants",
           "load_power_model", "step_power_w", "step_utilisation", "step_work"]

POWER_FILE = "power.yaml"
_KEYS = {"idle_w", "static_w", "compute_w", "memory_w", "limit_w", "cap_points", "fit",
         "fit_points", "source", "notes", "idle_source"}


class NoPowerModelError(ValueError):
    """A GPU has no sourced power figures (a ``ValueError``: bad or missing input)."""


@dataclass(frozen=True)
class PowerModel:
    """Power constants of one GPU (watts).

    Attributes
    ----------
    gpu : str
        GPU profile name.
    idle_w : float or None
        Power of a GPU held by a replica that is not stepping (CUDA context up, no kernel);
        None: no sourced figure (idle energy is then not counted, and the summary says so).
    static_w, compute_w, memory_w : float
        Busy power at zero utilisation, and the watts added by full compute and full HBM
        bandwidth use (fitted; see the module docstring).
    limit_w : float
        Default board power limit (the TDP; ``nvidia-smi -q -d POWER`` "Default Power Limit").
    cap_points : tuple of (float, float)
        Measured ``(power limit W, compute-bound time factor)`` pairs, ascending in watts, the
        default limit's ``(limit_w, 1.0)`` last.
    sources : tuple of str
    fit : dict
        The fit's record (points used, held-out model, mean and largest error).
    """

    gpu: str
    idle_w: float | None
    static_w: float
    compute_w: float
    memory_w: float
    limit_w: float
    cap_points: tuple[tuple[float, float], ...] = ()
    sources: tuple[str, ...] = ()
    fit: Mapping = field(default_factory=dict, compare=False)


def _shown(p: Path) -> str:
    """``p`` as messages name it: a file of the shipped GPU profiles from that folder
    (``hardware_profiles/a100-sxm-80gb/power.yaml``, ``/`` on every system), so a reason
    recorded in a run's summary is the same whichever folder servesim runs from; any other file
    as given."""
    try:
        return (Path("hardware_profiles") / p.resolve().relative_to(
            data_dir("hardware_profiles").resolve())).as_posix()
    except (ValueError, OSError):  # outside the shipped profiles (or no such folder)
        return str(p)


def _num(raw: dict, key: str, p: str, *, required: bool = True) -> float | None:
    v = raw.get(key)
    if v is None:
        if required:
            raise NoPowerModelError(f"{p}: {key} is not given")
        return None
    if isinstance(v, bool):
        raise ValueError(f"{p}: {key}={v!r} is not a number")  # noqa: TRY004 - user input
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{p}: {key}={v!r} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{p}: {key}={v!r} must be a finite number >= 0")
    return x


def load_power_model(gpu: GPUSpec) -> PowerModel:
    """The power model of ``gpu`` from ``power.yaml`` beside its ``spec.yaml``.

    Raises
    ------
    NoPowerModelError
        When the profile has no ``power.yaml``, or it lacks a busy constant (the message
        names the GPU, the file and the missing key).
    ValueError
        When the file is not YAML, has an unknown key or a value that is not a finite number
        >= 0 (the message names the file and the key).
    """
    folder = gpu.profile_dir
    path = (folder / POWER_FILE) if folder is not None else Path(POWER_FILE)
    if folder is None or not path.is_file():
        raise NoPowerModelError(
            f"no sourced power figures for GPU {gpu.name!r} (no {POWER_FILE} beside its "
            "spec.yaml): energy is not modelled for it")
    p = _shown(path)
    try:
        raw = safe_load_yaml(path.read_text(encoding="utf-8")) or {}
    except (InputLimitError, yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise ValueError(f"{p}: cannot read the power model ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: a power model must be a mapping")  # noqa: TRY004 - user input
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(f"{p}: unknown power model key(s) {', '.join(unknown)}; allowed: "
                         + ", ".join(sorted(_KEYS)))
    try:
        vals = {k: _num(raw, k, p) for k in ("static_w", "compute_w", "memory_w", "limit_w")}
    except NoPowerModelError as e:
        raise NoPowerModelError(f"no sourced busy-power figures for GPU {gpu.name!r}: {e}"
                                ) from None
    pts = []
    for i, pt in enumerate(raw.get("cap_points") or ()):
        if not (isinstance(pt, (list, tuple)) and len(pt) == 2):
            raise ValueError(f"{p}: cap_points[{i}] must be [watts, time factor]")
        pts.append((float(pt[0]), float(pt[1])))
    pts = sorted(pts)
    if not pts or pts[-1][0] < vals["limit_w"]:
        pts.append((vals["limit_w"], 1.0))
    src = raw.get("source") or ()
    return PowerModel(gpu=gpu.name, idle_w=_num(raw, "idle_w", p, required=False),
                      cap_points=tuple(pts), sources=tuple([src] if isinstance(src, str) else src),
                      fit=dict(raw.get("fit") or {}), **vals)


# ------------------------------------------------------------------------------ step work
@dataclass(frozen=True)
class StepWork:
    """Per-GPU work of a model's step: ``flops = flops_per_token x tokens + attn_flops_per_pair
    x pairs`` and ``bytes = weight_bytes + kv_bytes_per_token x kv_tokens``."""

    flops_per_token: float
    attn_flops_per_pair: float
    weight_bytes: float
    kv_bytes_per_token: float

    @classmethod
    def of(cls, model, tensor_parallel_size: int = 1, weight_dtype: str = "bf16",
           kv_cache_dtype: str = "bf16") -> StepWork:
        """The constants of ``model`` (a :class:`~simulator.catalog.model_spec.ModelSpec`) on
        one GPU of a TP group of ``tensor_parallel_size``."""
        tp = int(tensor_parallel_size)
        params = (model.num_active_params() / tp if model.is_moe
                  else model.num_params_per_gpu(tp))
        q_heads, _kv, head_dim = model.attention_heads(tp)
        return cls(flops_per_token=2.0 * params,
                   attn_flops_per_pair=4.0 * head_dim * q_heads * model.num_layers,
                   weight_bytes=float(model.weight_bytes_per_gpu(weight_dtype, tp)),
                   kv_bytes_per_token=float(model.kv_bytes_per_token(kv_cache_dtype, tp)))


def step_work(work: StepWork, prefill_tokens, decode_tokens, prefill_seqs, decode_seqs,
              kv_tokens) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and HBM bytes of steps on one GPU (arrays, one entry a step).

    Parameters
    ----------
    work : StepWork
    prefill_tokens, decode_tokens, prefill_seqs, decode_seqs, kv_tokens : array_like
        The step table's ``num_prefill_tokens``, ``num_decode_tokens``, ``num_prefill_seqs``,
        ``num_decode_seqs``, ``kv_tokens_used`` (tokens held in the replica's KV cache).

    Returns
    -------
    flops, bytes : numpy.ndarray of float
    """
    pf = np.asarray(prefill_tokens, dtype=float)
    dt = np.asarray(decode_tokens, dtype=float)
    nps = np.maximum(np.asarray(prefill_seqs, dtype=float), 1.0)
    nd = np.asarray(decode_seqs, dtype=float)
    kv = np.asarray(kv_tokens, dtype=float)
    q = pf / nps
    pairs = nps * q * (q + 1.0) / 2.0 + np.maximum(kv - pf, nd)
    flops = work.flops_per_token * (pf + dt) + work.attn_flops_per_pair * pairs
    byts = work.weight_bytes + work.kv_bytes_per_token * kv
    return flops, byts


def step_utilisation(flops, byts, step_time_s, peak_flops_per_s: float,
                     hbm_bytes_per_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Compute and HBM-bandwidth utilisation of steps, each clipped to [0, 1] (a step of zero
    time has zero utilisation)."""
    t = np.asarray(step_time_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        uc = np.where(t > 0, np.asarray(flops, dtype=float) / (t * peak_flops_per_s), 0.0)
        um = np.where(t > 0, np.asarray(byts, dtype=float) / (t * hbm_bytes_per_s), 0.0)
    return np.clip(uc, 0.0, 1.0), np.clip(um, 0.0, 1.0)


def step_power_w(pm: PowerModel, u_compute, u_memory, limit_w: float | None = None
                 ) -> np.ndarray:
    """Busy power of one GPU (W) at the given utilisations, at most ``limit_w`` (default the
    model's ``limit_w``)."""
    lim = pm.limit_w if limit_w is None else float(limit_w)
    p = pm.static_w + pm.compute_w * np.asarray(u_compute, dtype=float) \
        + pm.memory_w * np.asarray(u_memory, dtype=float)
    return np.minimum(p, lim)


# ------------------------------------------------------------------------------ caps
def cap_slowdown(pm: PowerModel, cap_w: float) -> float:
    """Factor by which a power cap stretches compute-bound time (1 at or above the default
    limit), interpolated linearly in watts between the model's measured ``cap_points``.

    Raises
    ------
    ValueError
        When ``cap_w`` is below the lowest measured limit (no measurement to go by) or not
        positive.
    """
    cap_w = float(cap_w)
    pts = pm.cap_points or ((pm.limit_w, 1.0),)
    if not cap_w > 0:
        raise ValueError(f"hardware.power_cap_w must be > 0 W, got {cap_w:g}")
    if cap_w >= pts[-1][0]:
        return 1.0
    if cap_w < pts[0][0]:
        raise ValueError(
            f"hardware.power_cap_w={cap_w:g} W is below the lowest measured power limit of "
            f"{pm.gpu} ({pts[0][0]:g} W): no measurement of its slowdown there")
    xs, ys = zip(*pts)
    return float(np.interp(cap_w, xs, ys))


def capped_gpu(gpu: GPUSpec, pm: PowerModel, cap_w: float) -> GPUSpec:
    """``gpu`` with its peak FLOP/s divided by :func:`cap_slowdown` (HBM, links unchanged):
    the roofline's compute-bound operators take that much longer, memory-bound ones do not.
    The same object when the cap does not bind."""
    s = cap_slowdown(pm, cap_w)
    if s == 1.0:
        return gpu
    return replace(gpu, bf16_flops_per_s=gpu.bf16_flops_per_s / s,
                   fp8_flops_per_s=(gpu.fp8_flops_per_s / s if gpu.fp8_flops_per_s else
                                    gpu.fp8_flops_per_s))


# ------------------------------------------------------------------------------ fitting
def fit_power_constants(points: Sequence[Mapping], limit_w: float
                        ) -> tuple[tuple[float, float, float], dict]:
    """Least-squares ``(static_w, compute_w, memory_w)`` from measured (utilisation, power).

    Parameters
    ----------
    points : sequence of mapping
        Each with ``u_compute``, ``u_memory`` and ``power_w`` (per GPU, measured mean).
    limit_w : float
        The power limit the measurements ran under: the model is ``min(limit_w, linear)``.

    Returns
    -------
    (static_w, compute_w, memory_w), stats
        ``stats``: ``num_points``, ``mape`` (mean absolute percentage error), ``max_abs_pct``.

    Raises
    ------
    ValueError
        With fewer than 4 points (three constants need more points than unknowns).
    """
    from scipy.optimize import least_squares

    if len(points) < 4:
        raise ValueError(f"a power fit needs at least 4 measured points, got {len(points)}")
    uc = np.array([p["u_compute"] for p in points], dtype=float)
    um = np.array([p["u_memory"] for p in points], dtype=float)
    pw = np.array([p["power_w"] for p in points], dtype=float)

    def resid(x):
        return np.minimum(limit_w, x[0] + x[1] * uc + x[2] * um) - pw

    r = least_squares(resid, x0=np.array([pw.min(), limit_w, limit_w / 4]),
                      bounds=([0.0, 0.0, 0.0], [limit_w, 20 * limit_w, 20 * limit_w]))
    err = np.abs(resid(r.x)) / pw * 100.0
    return (float(r.x[0]), float(r.x[1]), float(r.x[2])), {
        "num_points": len(points), "mape": float(err.mean()), "max_abs_pct": float(err.max())}


#: ``perf.source`` values whose step times follow the GPU spec's peak FLOP/s (a cap can derate)
CAPPABLE_SOURCES = ("roofline", "fitted")


def apply_power_cap(gpu: GPUSpec, cap_w: float | None, perf_source: str) -> GPUSpec:
    """The GPU a scenario's ``hardware.power_cap_w`` leaves (:func:`capped_gpu`); ``gpu``
    itself without a cap.

    Raises
    ------
    ValueError
        Naming ``hardware.power_cap_w``: the GPU has no sourced power model, the cap is below
        its lowest measured limit or above its default limit, or ``perf_source`` prices operators from measured tables
        (timed at the default limit: a cap cannot be applied to them).
    """
    if cap_w is None:
        return gpu
    try:
        pm = load_power_model(gpu)
    except NoPowerModelError as e:
        raise ValueError(f"hardware.power_cap_w: {e}") from None
    if cap_w > pm.limit_w:
        raise ValueError(f"hardware.power_cap_w={cap_w:g} W is above the default power limit "
                         f"of {gpu.name} ({pm.limit_w:g} W, its TDP): no figure above it")
    if perf_source not in CAPPABLE_SOURCES:
        raise ValueError(
            f"hardware.power_cap_w: a cap slows the compute-bound operators of the datasheet "
            f"roofline (perf.source: {' or '.join(CAPPABLE_SOURCES)}); perf.source "
            f"{perf_source!r} uses measured tables timed at the default power limit "
            "(set perf.source: roofline to model a cap)")
    try:
        return capped_gpu(gpu, pm, cap_w)
    except ValueError as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith("hardware.") else f"hardware.power_cap_w: {msg}"
                         ) from None
