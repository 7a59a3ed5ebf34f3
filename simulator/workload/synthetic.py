"""Synthetic arrivals, length distributions and patience sampling.

All randomness comes from ``numpy.random.Generator`` objects passed in by the caller
(:func:`simulator.workload.load_workload` derives one stream per purpose from the run seed),
so a given seed gives byte-identical workloads. No global RNG is touched.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from simulator.base.rng import stream
from simulator.base.schema import MAX_TOKENS_REPRESENTABLE
from simulator.workload.columns import TraceColumns
from simulator.workload.config import SyntheticConfig
from simulator.workload.dists import ArrivalConfig, LengthDist, PatienceConfig, ThinkTimeDist
from simulator.workload.errors import WorkloadError

#: Named streams of :mod:`simulator.base.rng` used by the workload, one per purpose.
STREAM_ARRIVALS = "arrivals"
STREAM_PROMPT = "prompt_tokens"
STREAM_OUTPUT = "output_tokens"
STREAM_SLICES = "slices"
STREAM_TENANTS = "tenants"
STREAM_PRIORITIES = "priorities"
STREAM_PATIENCE = "patience"

# Upper limit of any length sample (simulator.base.schema.MAX_TOKENS_REPRESENTABLE = 2**31 - 1).
_LENGTH_CAP = MAX_TOKENS_REPRESENTABLE


def rng_stream(seed: int, name: str, *sub: int) -> np.random.Generator:
    """The generator of the named stream ``name`` (and sub-stream ``sub``) for run ``seed``
    (:func:`simulator.base.rng.stream`).

    Raises
    ------
    WorkloadError
        If ``seed`` is negative or not an integer.
    """
    try:
        return stream(seed, name, *sub)
    except ValueError as e:
        raise WorkloadError(str(e)) from None


def arrival_gaps(cfg: ArrivalConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` inter-arrival gaps in seconds.

    Poisson: exponential with mean ``1 / rate_rps``. Gamma: shape ``1 / cv**2``, scale
    ``cv**2 / rate_rps`` (mean ``1 / rate_rps``, coefficient of variation ``cv``).

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
    """
    if cfg.process == "poisson":
        return rng.exponential(scale=1.0 / cfg.rate_rps, size=n)
    cv2 = cfg.cv * cfg.cv
    return rng.gamma(shape=1.0 / cv2, scale=cv2 / cfg.rate_rps, size=n)


def generate_arrivals(cfg: ArrivalConfig, rng: np.random.Generator,
                      num_requests: int | None = None,
                      duration_s: float | None = None) -> np.ndarray:
    """Arrival times in seconds: cumulative sums of :func:`arrival_gaps` from t = 0.

    The first arrival is at the first gap. With ``num_requests`` exactly that many are drawn;
    with ``duration_s`` only arrivals ``< duration_s`` are kept (with both, whichever stops
    first).

    Raises
    ------
    WorkloadError
        If neither ``num_requests`` nor ``duration_s`` is given.
    """
    if num_requests is not None:
        times = np.cumsum(arrival_gaps(cfg, int(num_requests), rng))
        if duration_s is not None:
            times = times[times < duration_s]
        return times
    if duration_s is None:
        raise WorkloadError("synthetic arrivals need num_requests or duration_s")
    # Draw in chunks whose sizes depend only on the config (deterministic for a seed).
    chunk = math.ceil(cfg.rate_rps * duration_s * 1.25) + 64
    parts: list[np.ndarray] = []
    last = 0.0
    while last < duration_s:
        t = last + np.cumsum(arrival_gaps(cfg, chunk, rng))
        parts.append(t)
        last = float(t[-1])
    times = np.concatenate(parts)
    return times[times < duration_s]


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator, *,
                   default_column: str = "prompt",
                   trace_lengths: Callable[[str, str], np.ndarray] | None = None,
                   key: str | None = None) -> np.ndarray:
    """``n`` token lengths from ``dist``, rounded to integers and clipped to ``[min, max]``.

    Parameters
    ----------
    dist : LengthDist
    n : int
    rng : numpy.random.Generator
    default_column : ``"prompt"`` or ``"output"``
        Column of a ``from_trace`` distribution when ``dist.column`` is unset.
    trace_lengths : callable, optional
        ``(from_trace, column) -> int array`` loader for ``from_trace`` distributions.
    key : str, optional
        The config key messages name (default ``synthetic <default_column>_tokens``).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)

    Raises
    ------
    WorkloadError
        If a ``from_trace`` distribution has no loader or its trace has no rows, or if,
        without an explicit ``max``, a sample exceeds 2**31 - 1 tokens
        (:data:`simulator.base.schema.MAX_TOKENS_REPRESENTABLE`; e.g. a lognormal with a huge
        ``median`` or ``sigma``): such lengths are never meant, so they are not clipped
        silently.
    """
    if dist.dist == "fixed":
        x = np.full(n, float(dist.value))
    elif dist.dist == "lognormal":
        x = np.rint(rng.lognormal(mean=math.log(dist.median), sigma=dist.sigma, size=n))
    elif dist.dist == "uniform":
        x = rng.integers(dist.low, dist.high + 1, size=n).astype(np.float64)
    else:  # empirical
        if dist.values is not None:
            values = np.asarray(dist.values, dtype=np.float64)
            if dist.weights is None:
                x = rng.choice(values, size=n)
            else:
                w = np.asarray(dist.weights, dtype=np.float64)
                x = rng.choice(values, size=n, p=w / w.sum())
        else:
            if trace_lengths is None:
                raise WorkloadError("an empirical from_trace length needs a trace loader")
            pool = np.asarray(trace_lengths(dist.from_trace, dist.column or default_column))
            if pool.size == 0:
                raise WorkloadError(f"{dist.from_trace}: no rows to draw lengths from")
            x = rng.choice(pool.astype(np.float64), size=n)
    if dist.max is None and n:
        over = ~(x <= _LENGTH_CAP)
        if over.any():
            shown = {"fixed": f"value={dist.value}", "lognormal":
                     f"median={dist.median:g}, sigma={dist.sigma:g}",
                     "uniform": f"low={dist.low}, high={dist.high}"}.get(dist.dist, "")
            key = key or f"synthetic {default_column}_tokens"
            raise WorkloadError(
                f"{key}: {int(over.sum())} of {n} samples of "
                f"{dist.dist}({shown}) exceed {_LENGTH_CAP:,} tokens (the largest length an "
                f"engine can hold); set {key.split()[-1]}.max, or a smaller median/sigma")
    hi = float(dist.max) if dist.max is not None else float(_LENGTH_CAP)
    return np.clip(x, float(dist.min), hi).astype(np.int64)


def sample_seconds(cfg: PatienceConfig | ThinkTimeDist, n: int,
                   rng: np.random.Generator) -> np.ndarray:
    """``n`` durations in seconds from a patience or think-time distribution (``fixed``,
    ``lognormal``, ``uniform``, ``exponential``), clipped to ``[min, max]``.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
    """
    if cfg.dist == "fixed":
        x = np.full(n, float(cfg.value))
    elif cfg.dist == "lognormal":
        x = rng.lognormal(mean=math.log(cfg.median), sigma=cfg.sigma, size=n)
    elif cfg.dist == "uniform":
        x = rng.uniform(cfg.low, cfg.high, size=n)
    else:
        x = rng.exponential(scale=cfg.mean_s, size=n)
    return np.clip(x, cfg.min, cfg.max if cfg.max is not None else np.inf)


def sample_patience(cfg: PatienceConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` client patience values in seconds, clipped to ``[min, max]``; NaN for the requests
    (a random ``1 - fraction`` of them) that never cancel.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
    """
    x = sample_seconds(cfg, n, rng)
    if cfg.fraction < 1.0:
        keep = rng.random(n) < cfg.fraction
        x = np.where(keep, x, np.nan)
    return x


def generate_synthetic(cfg: SyntheticConfig, seed: int,
                       trace_lengths: Callable[[str, str], np.ndarray] | None = None,
                       ) -> TraceColumns:
    """A synthetic workload as columns (arrival order), from streams of ``seed``.

    Raises
    ------
    WorkloadError
        If the configuration generates no request (``duration_s`` shorter than the first gap).
    """
    arrivals = generate_arrivals(cfg.arrival, rng_stream(seed, STREAM_ARRIVALS),
                                 cfg.num_requests, cfg.duration_s)
    n = int(arrivals.size)
    prompt = sample_lengths(cfg.prompt_tokens, n, rng_stream(seed, STREAM_PROMPT),
                            default_column="prompt", trace_lengths=trace_lengths)
    output = sample_lengths(cfg.output_tokens, n, rng_stream(seed, STREAM_OUTPUT),
                            default_column="output", trace_lengths=trace_lengths)
    return TraceColumns(path="<synthetic>", format="synthetic", arrival_s=arrivals,
                        prompt=prompt, output=output, lines=np.zeros(n, dtype=np.int64))
