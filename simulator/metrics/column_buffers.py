"""Column-sized buffers reused by a long run's whole-column reads while its summary is made.

A summary of a run whose step table spooled to disk
(:class:`~simulator.metrics.step_table.ColumnSpool`) reads whole columns of it, many of them
more than once, each into a fresh array: 720 MB for a float64 column of the ServeGen day's 90
million steps. The C allocator maps any block over 32 MiB (glibc's largest ``mmap`` threshold)
fresh from the kernel and unmaps it when freed, so every read's pages are faulted in and
zeroed again. Measured on that day (``benchmarks/bench_speed.py --only servegen_day``'s run,
12 replicas, this project's 2-core machine), three summaries and writes after one simulation,
alternating: 21.0 to 22.9 GB of fresh huge pages faulted in, 63 to 66 s of CPU (21 to 22 s in
the kernel) over 35.4 to 36.8 s; the same reads into reused buffers: 7.0 to 7.8 GB, 57 to 59 s
of CPU (16 to 18 s in the kernel) over 31.0 to 32.6 s, the outputs byte-identical.

While a :func:`reusing_buffers` scope is open, a read of at least :data:`MIN_POOLED_BYTES`
takes its array from a pool (:func:`empty`): the smallest buffer that holds it and that no
array read before still uses (an array made from a buffer, and every view of it, holds a
reference to it: the buffer is free when the pool's reference is the only one left), else a
new buffer the pool keeps, dropping the free buffers too small for it. So the pool holds the
buffers of the reads' arrays alive at once, plus at most one free buffer of each size larger
than the last new one; it gives them back to the allocator when the outermost scope closes
(arrays still alive keep theirs). Outside a scope, for smaller reads (the allocator reuses
those itself), and on an interpreter whose reference counts differ from CPython 3.10-3.13's
(checked at import: :data:`REUSE`), :func:`empty` is ``numpy.empty``.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import numpy as np

#: Reads of at least this many bytes take pooled buffers: glibc's largest dynamic ``mmap``
#: threshold (``DEFAULT_MMAP_THRESHOLD_MAX``, 32 MiB on 64-bit systems; ``mallopt(3)``),
#: above which every block is mapped fresh and unmapped when freed
MIN_POOLED_BYTES = 32 * 1024 * 1024

#: References to a free buffer seen by ``sys.getrefcount(bufs[i])``: the pool's list and
#: the call's argument (CPython 3.10 to 3.13; :func:`_counts_as_expected` checks it)
_FREE_REFS = 2


def _counts_as_expected() -> bool:
    """Whether this interpreter counts a pooled buffer's references as :meth:`_Pool.take`
    expects: :data:`_FREE_REFS` when free, one more while a view of it is alive (reference
    counts are not a stable interface between Python versions; PyPy has none)."""
    getrefcount = getattr(sys, "getrefcount", None)
    if getrefcount is None:
        return False
    bufs = [np.empty(16, dtype=np.uint8)]
    free = getrefcount(bufs[0])
    view = bufs[0][:8].view(np.int64)
    used = getrefcount(bufs[0])
    del view
    return free == _FREE_REFS and used == _FREE_REFS + 1 and getrefcount(bufs[0]) == free


#: Whether reads reuse buffers at all (this interpreter's reference counts as expected)
REUSE = _counts_as_expected()


class _Pool:
    """The buffers (uint8 arrays) of the open scopes, and how many scopes are open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.scopes = 0
        self.buffers: list[np.ndarray] = []

    def take(self, n: int, dtype: np.dtype) -> np.ndarray:
        """An uninitialised array of ``n`` ``dtype`` values: the smallest free buffer that
        holds them, else a new buffer the pool keeps."""
        nbytes = n * dtype.itemsize
        with self.lock:
            if not self.scopes:  # the last scope closed since the caller looked
                return np.empty(n, dtype=dtype)
            best = -1
            bufs = self.buffers
            for i in range(len(bufs)):
                if (bufs[i].nbytes >= nbytes and sys.getrefcount(bufs[i]) == _FREE_REFS
                        and (best < 0 or bufs[i].nbytes < bufs[best].nbytes)):
                    best = i
            if best < 0:  # a new buffer; the free ones too small for it go
                self.buffers = bufs = [bufs[i] for i in range(len(bufs))
                                       if bufs[i].nbytes >= nbytes
                                       or sys.getrefcount(bufs[i]) != _FREE_REFS]
                bufs.append(np.empty(nbytes, dtype=np.uint8))
                best = len(bufs) - 1
            return bufs[best][:nbytes].view(dtype)


_POOL = _Pool()


def empty(n: int, dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised array of ``n`` values of ``dtype`` (a read's result): from the pool
    while a :func:`reusing_buffers` scope is open and the array has at least
    :data:`MIN_POOLED_BYTES`, else ``numpy.empty``.

    Raises
    ------
    ValueError
        If ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"an array of {n} values")
    dt = np.dtype(dtype)
    if not REUSE or not _POOL.scopes or n * dt.itemsize < MIN_POOLED_BYTES:
        return np.empty(n, dtype=dt)
    return _POOL.take(n, dt)


@contextlib.contextmanager
def reusing_buffers() -> Iterator[None]:
    """A scope in which large reads (:func:`empty`) reuse the buffers of arrays no longer
    alive; scopes nest (and may be open in several threads): the buffers go when the last
    one closes."""
    with _POOL.lock:
        _POOL.scopes += 1
    try:
        yield
    finally:
        with _POOL.lock:
            _POOL.scopes -= 1
            if not _POOL.scopes:
                _POOL.buffers = []


def pooled_bytes() -> int:
    """Bytes the pool holds now (its buffers, used or free)."""
    with _POOL.lock:
        return sum(b.nbytes for b in _POOL.buffers)
