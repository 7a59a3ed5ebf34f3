"""Timing primitives of the harness (torch): probes inside a forward pass, isolated loops, stats.

Two ways to time an operator:

- :class:`Probe` times each operator *inside* a forward pass of the model (Vidur-style
  in-context profiling). On CPU, an operator run in a tight isolated loop keeps its weights and
  code hot in cache and under-reports what the same call costs inside the engine's forward pass
  (we measured 1.3-2.5x on the tiny model's GEMMs at small token counts); timing in context
  removes that bias. CPU: ``time.perf_counter`` around the call. CUDA: a pair of CUDA events
  around the call, read after the pass (``torch.cuda.synchronize``), so the sample is the
  device time of the kernels the call launched.
- :func:`time_isolated` times a callable in a loop (warm-up calls, then timed repeats; CUDA
  events on GPU), like ``triton.testing.do_bench`` and ``torch.utils.benchmark`` do; used for
  the device's peak estimates and for collectives.

:func:`summarize` keeps the median (the statistic the tables use), quartiles, IQR / median and
a ``noisy`` flag (``IQR / median > NOISY_IQR_REL``) next to the raw samples.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

NOISY_IQR_REL = 0.2


@dataclass
class Stats:
    """Summary of repeated timings (seconds)."""

    median_s: float
    p25_s: float
    p75_s: float
    iqr_rel: float
    noisy: bool
    num_samples: int
    samples_s: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


MAX_STORED_SAMPLES = 40


def summarize(samples) -> Stats:
    """Median, quartiles, IQR / median, noisy flag and the raw samples (``%.4g``, spaces).

    At most :data:`MAX_STORED_SAMPLES` raw samples are kept (an evenly spaced subset, in the
    order taken, when there were more); the statistics use all of them.
    """
    a = np.asarray(list(samples), dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return Stats(float("nan"), float("nan"), float("nan"), float("nan"), True, 0, "")
    med = float(np.median(a))
    p25, p75 = (float(v) for v in np.percentile(a, [25, 75]))
    rel = (p75 - p25) / med if med > 0 else float("inf")
    keep = a if a.size <= MAX_STORED_SAMPLES else \
        a[np.linspace(0, a.size - 1, MAX_STORED_SAMPLES).round().astype(int)]
    return Stats(med, p25, p75, rel, bool(rel > NOISY_IQR_REL), int(a.size),
                 " ".join(f"{v:.4g}" for v in keep))


def tune_allocator() -> bool:
    """Keep freed memory in the process (glibc ``mallopt``): fewer page faults, less noise.

    Sets ``M_MMAP_THRESHOLD`` to 1 GiB and ``M_TRIM_THRESHOLD`` to 4 GiB, so that tensors of a
    few MB (KV caches, activations) are served from the heap and reused instead of being
    mapped, zero-filled by the kernel and unmapped on every step (the same effect as running
    CPU inference with jemalloc/tcmalloc). Both ``calibrate`` and ``validate`` call it, so the
    harness and the engine run under the same allocator settings. Returns False where glibc
    is not available (the call is then a no-op).
    """
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim, m_mmap = -1, -3
        ok = libc.mallopt(m_mmap, 1 << 30) == 1
        ok = (libc.mallopt(m_trim, 1 << 32) == 1) and ok
        return bool(ok)
    except (OSError, AttributeError):
        return False


def _call(_name, fn, *args):
    return fn(*args)


class Probe:
    """Times named operator calls inside a forward pass (see module docstring).

    Use ``probe.time(name, fn, *args)`` instead of ``fn(*args)``; set ``probe.layer`` before
    each layer. After the pass, :meth:`collect` returns ``{(layer, name): seconds}`` (calls of
    the same name in one layer are summed) and clears the pass.
    """

    def __init__(self, device: str = "cpu"):
        import torch
        self.torch = torch
        self.cuda = torch.device(device).type == "cuda"
        self.layer = 0
        self._acc: dict = defaultdict(float)
        self._events: list = []

    def time(self, name: str, fn, *args):
        if self.cuda:
            ev = self.torch.cuda.Event
            s, e = ev(enable_timing=True), ev(enable_timing=True)
            s.record()
            out = fn(*args)
            e.record()
            self._events.append((self.layer, name, s, e))
            return out
        t = time.perf_counter()
        out = fn(*args)
        self._acc[(self.layer, name)] += time.perf_counter() - t
        return out

    def collect(self) -> dict:
        if self.cuda:
            self.torch.cuda.synchronize()
            for layer, name, s, e in self._events:
                self._acc[(layer, name)] += s.elapsed_time(e) * 1e-3
            self._events.clear()
        out = dict(self._acc)
        self._acc.clear()
        return out


def synchronize(device: str) -> None:
    """Wait for queued device work (no-op on CPU)."""
    import torch
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_isolated(fn, device: str = "cpu", warmup: int = 3, repeats: int = 10,
                  max_time_s: float | None = None) -> list[float]:
    """Seconds per call of ``fn()``: ``warmup`` untimed calls, then up to ``repeats`` timed ones.

    CUDA: events around each call (device time). CPU: ``perf_counter``. ``max_time_s`` stops
    early (after at least 3 samples) once the timed calls used that much wall time.
    """
    import torch
    cuda = torch.device(device).type == "cuda"
    for _ in range(warmup):
        fn()
    synchronize(device)
    out: list[float] = []
    t_start = time.perf_counter()
    for i in range(repeats):
        if cuda:
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e) * 1e-3)
        else:
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        if max_time_s is not None and i >= 2 and time.perf_counter() - t_start > max_time_s:
            break
    return out
