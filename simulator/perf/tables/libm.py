"""Elementwise transcendental functions of arrays by the C library, not numpy's SIMD code.

numpy picks the code of ``exp``, ``log``, ``log2`` and ``exp2`` by the CPU it runs on: on this
project's development machine (AMD EPYC with AVX-512) ``np.exp`` gives other last bits than
with AVX-512 switched off (``NPY_DISABLE_CPU_FEATURES``) and than the C library's ``exp`` on
4.6% of values (``log2``: 88 in a million). Table values and step times computed with them
would make a run's bytes depend on the machine. These helpers apply the C library's scalar
function (``math``; glibc's are correctly rounded in nearly all cases and the same on every
x86-64 CPU) element by element and return float64 arrays of the input's shape. The tables they
serve hold hundreds of cells, and the per-step queries are single points
(:mod:`simulator.perf.tables.grid_point`), so the Python loop costs little.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["exp", "exp2", "log", "log2"]


def _apply(fn, x, safe=None) -> np.ndarray:
    """``fn`` element by element; ``safe`` (numpy's answer where ``fn`` raises: ``log`` of
    0 or a negative) for every element when ``fn`` would raise on any."""
    a = np.asarray(x, dtype=float)
    flat = a.ravel().tolist()
    try:
        out = np.fromiter(map(fn, flat), dtype=float, count=len(flat))
    except (ValueError, OverflowError):
        if safe is None:
            raise
        out = np.fromiter(map(safe, flat), dtype=float, count=len(flat))
    return out.reshape(a.shape)


def exp(x) -> np.ndarray:
    """``e**x`` elementwise (``math.exp``; ``inf`` past the largest float, as numpy)."""
    return _apply(math.exp, x, _safe_exp)


def exp2(x) -> np.ndarray:
    """``2**x`` elementwise (``math.pow(2.0, x)``; exact at integers)."""
    return _apply(_exp2, x)


def log(x) -> np.ndarray:
    """Natural logarithm elementwise (``math.log``; ``-inf`` at 0, NaN below 0, as numpy)."""
    return _apply(math.log, x, _safe_log)


def log2(x) -> np.ndarray:
    """Base-2 logarithm elementwise (``math.log2``; ``-inf`` at 0, NaN below 0, as numpy)."""
    return _apply(math.log2, x, _safe_log2)


def _exp2(v: float) -> float:
    return math.pow(2.0, v)


def _safe_exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _safe_log(v: float) -> float:
    if v > 0.0 or math.isnan(v):
        return math.log(v)
    return -math.inf if v == 0.0 else math.nan


def _safe_log2(v: float) -> float:
    if v > 0.0 or math.isnan(v):
        return math.log2(v)
    return -math.inf if v == 0.0 else math.nan
