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


# ------------------------------------------------------------------------------ operator timer
@dataclass
class TimerSettings:
    """How :class:`OpTimer` times one operator call (recorded in ``provenance.yaml``).

    Attributes
    ----------
    warmup : int
        Untimed calls before timing (first calls pay cuBLAS heuristics, autotuning, lazy
        module loading and allocator growth).
    repeats : int
        Timed calls per grid point (the table keeps their median and quartiles).
    flush_l2 : bool
        Overwrite a buffer of twice the L2 size before every timed call (CUDA only). In a
        serving step each layer's weights and KV blocks are read once per step, and between
        two reads of the same layer the other layers stream far more than the L2 holds, so
        a kernel starts cold; a tight loop without the flush keeps small operands L2-resident
        and reads too fast (aiconfigurator's decode tables read 0.45-0.9x a serving step
        below ~134 MB of KV working set: shared/reference/aiconfigurator/README.md).
    cuda_graphs : bool
        Where the caller asks for it (decode attention, elementwise chains, the graph
        all-reduce), capture the call once per shape into a CUDA graph and time replays: what
        vLLM does for decode steps; kernels then start back to back, without Python launch gaps.
    max_time_per_point_s : float
        Fewer repeats (at least 3) for points whose single call is slower than
        ``max_time_per_point_s / repeats``.
    """

    warmup: int = 5
    repeats: int = 30
    flush_l2: bool = True
    cuda_graphs: bool = True
    max_time_per_point_s: float = 2.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Timing:
    """Samples of one grid point (seconds per call) and how they were taken."""

    samples_s: list
    cuda_graph: bool
    note: str = ""


class OpTimer:
    """Times operator callables on one device (see :class:`TimerSettings`).

    CUDA: for each timed call, optionally flush the L2, then enqueue a short device-side
    sleep (``torch.cuda._sleep``) long enough to cover the host's launch of the call, then
    a start event, the call (or a CUDA-graph replay of it), an end event; all repeats are
    enqueued before one synchronisation. The sleep keeps the device busy while the host
    launches the call, so the events bracket the kernels' device time and not the host's
    launch latency (the trick of ``triton.testing.do_bench``'s cache flush, made explicit).
    The sleep's clock rate is measured once with events; its length is twice the host time
    of one launch, measured during warm-up. CPU: ``time.perf_counter`` around each call
    (no flush, no graphs).

    Parameters
    ----------
    device : str
        ``cpu`` or ``cuda[:i]``.
    settings : TimerSettings
    """

    def __init__(self, device: str, settings: TimerSettings | None = None):
        import torch
        self.torch = torch
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.settings = settings or TimerSettings()
        self._flush_buf = None
        self._sleep_cycles_per_s = None
        if self.cuda:
            torch.cuda.set_device(self.device)
            if self.settings.flush_l2:
                l2 = int(getattr(torch.cuda.get_device_properties(self.device),
                                 "L2_cache_size", 0) or 0)
                # twice the L2 (at least 64 MiB when the property is missing)
                nbytes = max(2 * l2, 64 * 2**20)
                self._flush_buf = torch.empty(nbytes // 4, dtype=torch.int32,
                                              device=self.device)
            self._sleep_cycles_per_s = self._measure_sleep_rate()

    @property
    def flush_l2(self) -> bool:
        return self._flush_buf is not None

    def _measure_sleep_rate(self) -> float:
        torch = self.torch
        cycles = 1_000_000
        torch.cuda._sleep(cycles)  # warm
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        e.synchronize()
        return cycles / max(1e-9, s.elapsed_time(e) * 1e-3)

    def capture(self, fn):
        """A CUDA graph of ``fn()`` (warmed up on a side stream), or raise."""
        torch = self.torch
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize(self.device)
        return g

    def time(self, fn, graph: bool = False, repeats: int | None = None) -> Timing:
        """Seconds per call of ``fn()`` (see class docstring).

        Parameters
        ----------
        fn : callable
            The operator call (no arguments; prepared inputs are closed over).
        graph : bool
            Try a CUDA graph (used when the settings allow it and the device is CUDA); when
            capture fails, time eagerly and say so in :attr:`Timing.note`.
        repeats : int, optional
            Override the settings' repeats.
        """
        st = self.settings
        n = int(repeats or st.repeats)
        if not self.cuda:
            for _ in range(st.warmup):
                fn()
            t_one = time.perf_counter()
            fn()
            t_one = time.perf_counter() - t_one
            n = _fit_repeats(n, t_one, st.max_time_per_point_s)
            out = []
            for _ in range(n):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
            return Timing(out, False)
        torch = self.torch
        for _ in range(st.warmup):
            fn()
        torch.cuda.synchronize(self.device)
        run, used_graph, note, g = fn, False, "", None
        if graph and st.cuda_graphs:
            try:
                g = self.capture(fn)
                run, used_graph = g.replay, True
            except Exception as e:  # noqa: BLE001 - any capture failure: time eagerly
                torch.cuda.synchronize(self.device)
                note = f"CUDA graph capture failed ({type(e).__name__}: {str(e)[:120]})"
        # one call, host launch time and device time (to size the sleep and the repeats)
        s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        t_host = time.perf_counter()
        s0.record()
        run()
        t_host = time.perf_counter() - t_host
        e0.record()
        e0.synchronize()
        n = _fit_repeats(n, s0.elapsed_time(e0) * 1e-3, st.max_time_per_point_s)
        # at most 50 ms of sleep: a host hiccup during the one measured launch must not
        # stall every repeat (a launch that needs longer is not an operator we time)
        cycles = int(min(2.0 * t_host, 0.05) * self._sleep_cycles_per_s)
        events = []
        for _ in range(n):
            if self._flush_buf is not None:
                self._flush_buf.zero_()
            if cycles > 0:
                torch.cuda._sleep(cycles)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            run()
            e.record()
            events.append((s, e))
        torch.cuda.synchronize(self.device)
        out = [s.elapsed_time(e) * 1e-3 for s, e in events]
        del g
        return Timing(out, used_graph, note)


def _fit_repeats(repeats: int, one_call_s: float, max_time_s: float) -> int:
    """``repeats`` reduced (not below 3) so that the timed calls take about ``max_time_s``."""
    if one_call_s <= 0 or one_call_s * repeats <= max_time_s:
        return int(repeats)
    return int(max(3, min(repeats, int(max_time_s / one_call_s + 1e-9))))
