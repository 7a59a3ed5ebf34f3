"""The parsed form of every trace: :class:`TraceColumns` (numpy columns in file order, with
the source line of each row), shared by the readers (:mod:`simulator.workload.readers`), the
ServeGen generator (:mod:`simulator.workload.servegen`) and the synthetic arrival generators
(:mod:`simulator.workload.synthetic`)."""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simulator.base.request import RequestSpec, request_spec

__all__ = ["MOONCAKE_BLOCK_TOKENS", "TraceColumns"]

#: Tokens per prefix block of a Mooncake trace's ``hash_ids`` (Mooncake's trace format:
#: ids of 512-token prefix blocks), the default ``prefix_block_tokens``.
MOONCAKE_BLOCK_TOKENS = 512


def release_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim(0)``; a no-op
    elsewhere). A trace read in batches frees thousands of half-megabyte batch arrays once
    they are joined; glibc keeps such freed blocks resident in its heap (they are below its
    adaptive mmap threshold), so without this the joined columns would count twice in the
    process's resident memory."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None


@dataclass
class TraceColumns:
    """A parsed trace, column-wise, in file order.

    Attributes
    ----------
    path : str
        The file, as named in error messages.
    format : str
        The format it was read as.
    arrival_s : numpy.ndarray of float64
        Arrival times in seconds on the trace's own clock (>= 0).
    prompt, output : numpy.ndarray of int64
        Prompt and true output lengths in tokens (>= 1).
    lines : numpy.ndarray of int64
        1-based source line of each row (0 for generated rows).
    tenant, slice : list of str, or None
        Per-row names (``None`` when the trace has no such column; ``"default"`` for empty cells).
    priority : numpy.ndarray of int64, or None
    cancel_after_s : numpy.ndarray of float64, or None
        Patience in seconds; NaN where not given.
    max_tokens : numpy.ndarray of int64, or None
        Declared limit; 0 where not given.
    n : numpy.ndarray of int64, or None
        Sequences per request (parallel sampling); 0 where not given (= 1).
    prefix_hash_ids : list of (tuple of int or None), or None
    prefix_block_tokens : int or list of int
        Tokens per prefix id: one value for all rows, or one per row.
    time_origin : str or None
        What the clock's 0 is when the reader re-based the file's timestamps to its first
        arrival (the raw value, its unit, UTC date and line; :mod:`simulator.workload.clock`);
        ``None`` when the file's own clock is kept.
    arrival_lo : numpy.ndarray of float64, or None
        While a reader works only: the exact remainder of each raw timestamp beyond
        float64 (``None`` once read).
    session_id, turn_index : numpy.ndarray of int64, or None
        The session a row is a turn of and its 0-based turn index; -1 for a request alone
        (``None``: no session column; :mod:`simulator.workload.sessions`).
    think_time_s : numpy.ndarray of float64, or None
        Think time before a session turn (s); NaN where not given (0 in its request).
    """

    path: str
    format: str
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    lines: np.ndarray
    tenant: list[str] | None = None
    priority: np.ndarray | None = None
    slice: list[str] | None = None
    cancel_after_s: np.ndarray | None = None
    max_tokens: np.ndarray | None = None
    n: np.ndarray | None = None
    prefix_hash_ids: list[tuple[int, ...] | None] | None = None
    prefix_block_tokens: int | list[int] = MOONCAKE_BLOCK_TOKENS
    time_origin: str | None = None
    arrival_lo: np.ndarray | None = None
    session_id: np.ndarray | None = None
    turn_index: np.ndarray | None = None
    think_time_s: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    def take(self, idx: np.ndarray) -> TraceColumns:
        """Rows ``idx`` (an index array), in that order."""
        idx = np.asarray(idx, dtype=np.int64)

        def pick_list(v):
            return None if v is None else [v[i] for i in idx.tolist()]

        def pick_arr(v):
            return None if v is None else v[idx]

        return TraceColumns(
            path=self.path, format=self.format, arrival_s=self.arrival_s[idx],
            prompt=self.prompt[idx], output=self.output[idx], lines=self.lines[idx],
            tenant=pick_list(self.tenant), priority=pick_arr(self.priority),
            slice=pick_list(self.slice), cancel_after_s=pick_arr(self.cancel_after_s),
            max_tokens=pick_arr(self.max_tokens), n=pick_arr(self.n),
            prefix_hash_ids=pick_list(self.prefix_hash_ids),
            prefix_block_tokens=(pick_list(self.prefix_block_tokens)
                                 if isinstance(self.prefix_block_tokens, list)
                                 else self.prefix_block_tokens),
            time_origin=self.time_origin, arrival_lo=pick_arr(self.arrival_lo),
            session_id=pick_arr(self.session_id), turn_index=pick_arr(self.turn_index),
            think_time_s=pick_arr(self.think_time_s))

    @staticmethod
    def concat(parts: list[TraceColumns], *, consume: bool = False) -> TraceColumns:
        """The rows of ``parts`` (batches of one file) in order. An optional column that
        some batches lack (a JSONL field first seen in a later batch) is "not given" in
        them, as a one-shot read of the file gives it: ``"default"`` labels, priority 0,
        NaN patience, 0 for ``max_tokens`` and ``n``, no prefix ids. ``consume``: the
        parts' columns are released as each column is joined (the parts are unusable
        afterwards; a 10^7-row trace then never holds its columns twice)."""
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        sizes = [len(p) for p in parts]

        def take(name):
            v = [getattr(p, name) for p in parts]
            if consume:
                for p in parts:
                    object.__setattr__(p, name, None)
            return v

        def arr(name, fill=None):
            v = take(name)
            if all(x is None for x in v):
                return None
            out = np.concatenate([np.full(k, fill) if x is None else x
                                  for k, x in zip(sizes, v)])
            if consume:
                del v
                release_freed_memory()  # the batches' pages, before the next column
            return out

        def lst(name, fill=None):
            v = take(name)
            if all(x is None for x in v):
                return None
            return [e for k, x in zip(sizes, v) for e in (x if x is not None else [fill] * k)]

        bts = [p.prefix_block_tokens for p in parts]
        bt = bts[0]
        if any(isinstance(b, list) for b in bts) or any(b != bt for b in bts):
            bt = [e for k, b in zip(sizes, bts) for e in (b if isinstance(b, list) else [b] * k)]
        path, fmt = first.path, first.format
        out = TraceColumns(
            path=path, format=fmt, arrival_s=arr("arrival_s"),
            prompt=arr("prompt"), output=arr("output"), lines=arr("lines"),
            tenant=lst("tenant", "default"), priority=arr("priority", np.int64(0)),
            slice=lst("slice", "default"), cancel_after_s=arr("cancel_after_s", np.nan),
            max_tokens=arr("max_tokens", np.int64(0)), n=arr("n", np.int64(0)),
            prefix_hash_ids=lst("prefix_hash_ids"), prefix_block_tokens=bt,
            time_origin=first.time_origin, arrival_lo=arr("arrival_lo", 0.0),
            session_id=arr("session_id", np.int64(-1)),
            turn_index=arr("turn_index", np.int64(-1)),
            think_time_s=arr("think_time_s", np.nan))
        return out

    def to_specs(self, start: int = 0, stop: int | None = None) -> list[RequestSpec]:
        """One :class:`RequestSpec` per row ``start:stop`` (all rows by default),
        ``request_id`` = row index."""
        n = len(self)
        stop = n if stop is None else min(stop, n)
        k = max(0, stop - start)
        sl = slice(start, stop)
        arr = self.arrival_s[sl].tolist()
        pr = self.prompt[sl].tolist()
        out = self.output[sl].tolist()
        lines = [ln if ln > 0 else None for ln in self.lines[sl].tolist()]
        tenant = self.tenant[sl] if self.tenant else ["default"] * k
        slc = self.slice[sl] if self.slice else ["default"] * k
        prio = self.priority[sl].tolist() if self.priority is not None else [0] * k
        if self.cancel_after_s is not None:
            cancel = [None if math.isnan(c) else c for c in self.cancel_after_s[sl].tolist()]
        else:
            cancel = [None] * k
        if self.max_tokens is not None:
            mt = [m if m > 0 else None for m in self.max_tokens[sl].tolist()]
        else:
            mt = [None] * k
        pref = self.prefix_hash_ids[sl] if self.prefix_hash_ids else [None] * k
        seqs = [max(1, j) for j in self.n[sl].tolist()] if self.n is not None else [1] * k
        bt = self.prefix_block_tokens
        bt = bt[sl] if isinstance(bt, list) else [bt] * k
        if self.session_id is not None:
            sid = [s if s >= 0 else None for s in self.session_id[sl].tolist()]
            turn = [max(0, j) for j in self.turn_index[sl].tolist()]
            think = np.nan_to_num(self.think_time_s[sl], nan=0.0).tolist()
        else:
            sid, turn, think = [None] * k, [0] * k, [0.0] * k
        # positionally, every field in order (request_spec: half the time of the dataclass's
        # keyword __init__; use_beam_search, num_kv_transferred_tokens, handoff_token_time_s,
        # cancel_when_streaming take their defaults)
        return [
            request_spec(start + i, arr[i], pr[i], out[i], mt[i], tenant[i], prio[i], slc[i],
                         cancel[i], pref[i], bt[i], lines[i], seqs[i], False, 0, None, False,
                         sid[i], turn[i], think[i])
            for i in range(k)
        ]

    def iter_specs(self, batch_rows: int = 65_536) -> Iterator[RequestSpec]:
        """The rows as :class:`RequestSpec` objects, built ``batch_rows`` at a time (what
        :meth:`to_specs` returns, without holding every object at once)."""
        for a in range(0, len(self), batch_rows):
            yield from self.to_specs(a, a + batch_rows)
