"""The step table's canonical order, ``(replica_id, step_index)``, computed from its two key
columns (:func:`key_order`), and that order as pieces of rows consecutive in both the spool's
files and the table (:func:`pieces_of`, :func:`key_pieces`), which a spool reads with one
slice copy each (:class:`~simulator.metrics.step_table.ColumnSpool`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["MIN_PIECE_ROWS", "key_order", "key_pieces", "pieces_of"]


def _dense_order(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray | None:
    """The permutation of :func:`key_order` placed by counting, or None when ``secondary``
    does not number each ``primary`` group's rows ``0 .. n-1`` exactly once."""
    n = primary.size
    if n == 0 or primary.dtype.kind not in "iu" or secondary.dtype.kind not in "iu":
        return None
    if primary.min() < 0 or primary.max() >= n or secondary.min() < 0:
        return None
    index_type = np.int32 if n < 2**31 else np.int64  # places (int32: half the memory)
    counts = np.bincount(primary).astype(index_type)
    if np.any(secondary >= counts[primary]):
        return None
    dest = (np.cumsum(counts, dtype=index_type) - counts)[primary]  # the group's first place
    dest += secondary.astype(index_type, copy=False)                # ... plus its step
    order = np.full(n, -1, dtype=index_type)
    order[dest] = np.arange(n, dtype=index_type)
    if np.any(order < 0):  # a (primary, secondary) pair twice: some place stayed empty
        return None
    return order


def key_order(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """Row indices that sort by ``(primary, secondary)``, equal keys in row order:
    ``numpy.lexsort((secondary, primary))``.

    A step table's keys, ``(replica_id, step_index)``, number each replica's steps
    ``0 .. n-1``: then every row's place is its replica's first place plus its step index
    (a counting placement, O(n) instead of the sort's O(n log n): 0.3 s instead of 3.7 s for
    the 20 million steps of a million-request run on this project's machine); any other keys
    (a repeated or missing step index, negative keys) are sorted.

    Parameters
    ----------
    primary, secondary : ndarray of int, shape (n,)

    Returns
    -------
    ndarray of int32 (n < 2**31) or int64, shape (n,)
    """
    order = _dense_order(primary, secondary)
    if order is None:
        order = np.lexsort((secondary, primary))
    return order


#: Mean rows of a piece (rows consecutive in both the files and the table's order) from which
#: a sorted spool is read a piece at a time (one slice copy each) instead of gathered row by
#: row through its permutation: a replica's rows reach the spool together, in step order
#: (:class:`~simulator.engine.step_rows.DecodeRunRows`), thousands of rows a chunk, while a
#: Python loop step costs about what a gather of a thousand rows does.
MIN_PIECE_ROWS = 1024


def pieces_of(order: np.ndarray) -> tuple[list[int], list[int]] | None:
    """The permutation ``order`` (table row ``i`` is file row ``order[i]``) as pieces of
    consecutive rows.

    Parameters
    ----------
    order : ndarray of int, shape (n,)
        A permutation of ``0 .. n-1``.

    Returns
    -------
    (starts, sources) or None
        Table rows ``starts[p]:starts[p + 1]`` are file rows ``sources[p]`` onward (lists of
        int; ``starts`` ends with ``n``); None when the pieces average fewer than
        :data:`MIN_PIECE_ROWS` rows.
    """
    n = order.size
    ends = np.flatnonzero(np.diff(order) != 1)  # the last row of every piece but the last
    m = ends.size + 1
    if m * MIN_PIECE_ROWS > n:
        return None
    starts = np.empty(m + 1, dtype=np.int64)
    starts[0], starts[m] = 0, n
    starts[1:m] = ends + 1
    return starts.tolist(), order[starts[:m]].tolist()


def key_pieces(primary: np.ndarray, secondary: np.ndarray) -> tuple[list[int], list[int]] | None:
    """:func:`pieces_of` ``(key_order(primary, secondary))`` found from the runs of
    consecutive keys in row order, without the permutation: rows ``i`` and ``i + 1`` are in
    one piece when they have the same ``primary`` and ``secondary`` one more (a replica's
    steps, thousands at a time). The pieces, put in key order, give the table's order when
    each ``primary`` group's pieces number its rows ``0 .. n-1`` exactly once; None when they
    do not (another order: :func:`key_order` then) or when the pieces average fewer than
    :data:`MIN_PIECE_ROWS` rows.

    Parameters
    ----------
    primary, secondary : ndarray of int, shape (n,)

    Returns
    -------
    (starts, sources) or None
        As :func:`pieces_of`: table rows ``starts[p]:starts[p + 1]`` are rows ``sources[p]``
        onward (``starts`` ends with ``n``).
    """
    if primary.size == 0 or not _integer_keys(primary, secondary):
        return None
    src = _run_firsts(primary, secondary)
    return pieces_of_runs(src, primary[src], secondary[src], primary.size)


def _integer_keys(primary: np.ndarray, secondary: np.ndarray) -> bool:
    """Whether both key columns are integers (the only keys pieces are found for)."""
    return primary.dtype.kind in "iu" and secondary.dtype.kind in "iu"


def _run_firsts(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """The first row of every run of consecutive keys (``n >= 1`` rows; int64)."""
    cut = primary[1:] != primary[:-1]
    cut |= secondary[1:] != secondary[:-1] + 1
    src = np.flatnonzero(cut)  # the last row of every run but the last, in row order
    src += 1
    return np.concatenate((np.zeros(1, dtype=src.dtype), src)).astype(np.int64, copy=False)


def pieces_of_runs(src: np.ndarray, p: np.ndarray, s: np.ndarray,
                   n: int) -> tuple[list[int], list[int]] | None:
    """:func:`key_pieces`' pieces from its runs of consecutive keys.

    Parameters
    ----------
    src : ndarray of int, shape (m,)
        Each run's first row, increasing from 0.
    p, s : ndarray of int, shape (m,)
        Each run's first ``primary`` and ``secondary`` key.
    n : int
        Rows in all (the last run ends there).

    Returns
    -------
    (starts, sources) or None
        As :func:`key_pieces`.
    """
    m = src.size
    if m == 0 or m * MIN_PIECE_ROWS > n:
        return None
    length = np.diff(np.append(src, n))
    p = p.astype(np.int64)
    s = s.astype(np.int64)
    by_key = np.lexsort((s, p))
    p, s, src, length = p[by_key], s[by_key], src[by_key], length[by_key]
    first = np.ones(m, dtype=bool)
    first[1:] = p[1:] != p[:-1]
    # a group's first run starts at step 0, every other where the one before it ended
    expect = np.zeros(m, dtype=np.int64)
    expect[1:] = (s + length)[:-1]
    expect[first] = 0
    if np.any(s != expect):
        return None
    starts = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(length, out=starts[1:])
    # runs next to each other in the table and in the files are one piece
    joined = np.ones(m, dtype=bool)
    joined[1:] = src[1:] != src[:-1] + length[:-1]
    return starts[np.append(joined, True)].tolist(), src[joined].tolist()


#: Runs of consecutive keys :class:`KeyRuns` holds before it gives up when they average fewer
#: than :data:`MIN_PIECE_ROWS` rows (a spool of short runs is sorted from its keys instead)
KEY_RUNS_GIVE_UP = 4096


class KeyRuns:
    """:func:`key_pieces` of rows appended a chunk at a time, its runs of consecutive keys
    found as each chunk arrives (a run that goes on into the next chunk stays one run), so
    that the pieces at the end need neither key column read back: the spool of the ServeGen
    day's 90 million steps read both (720 MB) and scanned them in 3.3 s before its summary
    and writes could start; found chunk by chunk, the same pieces cost a few microseconds a
    chunk while the run is simulated (11,000 chunks)."""

    __slots__ = ("_next", "_num_runs", "_p", "_rows", "_s", "_src", "valid")

    def __init__(self) -> None:
        self._src: list[np.ndarray] = []
        self._p: list[np.ndarray] = []
        self._s: list[np.ndarray] = []
        self._rows = 0
        self._num_runs = 0
        #: the key a row continuing the last run would have (None: no row yet)
        self._next: tuple[int, int] | None = None
        #: False once a chunk's keys were not integers, or the runs so far were too many
        #: and short (:data:`KEY_RUNS_GIVE_UP`): :meth:`pieces` is then None
        self.valid = True

    def add(self, primary: np.ndarray, secondary: np.ndarray) -> None:
        """The key columns of the next chunk of rows (equal lengths)."""
        n = len(primary)
        if not n or not self.valid:
            return
        primary, secondary = np.asarray(primary), np.asarray(secondary)
        if not _integer_keys(primary, secondary):
            self.valid = False
            return
        src = _run_firsts(primary, secondary)
        if self._next == (int(primary[0]), int(secondary[0])):
            src = src[1:]  # the chunk's first run goes on from the last chunk's last
        self._src.append(src + self._rows)
        self._p.append(primary[src])
        self._s.append(secondary[src])
        self._rows += n
        self._num_runs += src.size
        self._next = (int(primary[-1]), int(secondary[-1]) + 1)
        if (self._num_runs > KEY_RUNS_GIVE_UP
                and self._num_runs * MIN_PIECE_ROWS > self._rows):
            # short runs so far: the spool sorts by reading its keys (the same order); the
            # runs are not held on (24 bytes each, a row each at worst)
            self.valid = False
            self._src, self._p, self._s = [], [], []

    def pieces(self) -> tuple[list[int], list[int]] | None:
        """:func:`key_pieces` of every row added (None as it would be, or when a chunk's
        keys were not integers)."""
        if not self.valid or not self._rows:
            return None
        cat = np.concatenate
        return pieces_of_runs(cat(self._src), cat(self._p), cat(self._s), self._rows)
