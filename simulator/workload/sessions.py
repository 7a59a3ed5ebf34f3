"""Multi-turn sessions in a workload: the contract the engine relies on, the session columns
of a generic trace, and the post-processing rules that keep sessions whole.

The contract (every workload source that makes session turns keeps it):

- the turns of a session share one ``session_id`` (an int >= 0) and have consecutive
  ``turn_index`` 0..K-1; they appear in the request list sorted by ``arrival_time_s`` like
  any request, turn ``k+1``'s (provisional) arrival strictly after turn ``k``'s. In closed
  loop (``workload.session_arrival: closed``) the engine replaces a later turn's arrival
  with the finish of the turn before it plus its ``think_time_s``;
- every turn's ``prefix_hash_ids`` cover its prompt followed by its output:
  ``ceil((prompt + output) / prefix_block_tokens)`` ids. Turn ``k >= 1`` repeats turn
  ``k-1``'s history: its first ``floor(shared / prefix_block_tokens)`` ids are turn
  ``k-1``'s first ids, ``shared = min(prompt[k-1] + output[k-1], prompt[k])`` tokens; every
  later id is fresh (no other block of the workload has it). A shared system prompt
  (synthetic sessions) is every session's first ``floor(system / prefix_block_tokens)``
  ids.

Ids built here are negative integers (-1, -2, ...: the system prompt's blocks first, then
a counter over the sessions in ``session_id`` order and their turns), so they never meet
the non-negative ids of ``workload.shared_prefixes``
(:func:`simulator.workload.loader.stable_int_hash`); ids a trace gives its other rows are
skipped.

A generic trace (CSV, JSONL, Parquet) carries sessions in the columns ``session_id``,
``turn_index`` (or ``turn``) and optional ``think_time_s`` (s), mapped with ``columns``
like any field. Rows may come in any order; a session's turns are ordered by their
index, and a session with a missing or repeated turn index, or a turn that does not arrive
after the one before it, is an error naming the file and line.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

import numpy as np

from simulator.workload.columns import TraceColumns
from simulator.workload.errors import WorkloadError
from simulator.workload.values import (
    _Errors,
    _float_column,
    _is_missing,
    _json_numbers,
    _shown_value,
)

__all__ = ["SESSION_BLOCK_TOKENS", "finish_sessions", "read_session_batch",
           "session_prefix_ids", "session_starts", "session_units"]

#: Default tokens per prefix id of a session turn (vLLM's default KV block size).
SESSION_BLOCK_TOKENS = 16

_INT64_MAX = 2 ** 63 - 1
_INT_TEXT = re.compile(r"[+-]?\d+")


def session_prefix_ids(session_id, prompt, output, block_tokens: int, *,
                       system_tokens: int = 0, taken=frozenset()
                       ) -> list[tuple[int, ...]]:
    """The prefix id chains of session turns (the module docstring's contract).

    Parameters
    ----------
    session_id, prompt, output : sequences of int
        One entry per turn, grouped by session with each session's turns in turn order
        (turn 0 first); prompt and output lengths in tokens.
    block_tokens : int
        Tokens per id (``prefix_block_tokens``, >= 1).
    system_tokens : int
        A system prompt every session starts with (tokens); its full blocks get the same
        ids in every session.
    taken : set of int
        Ids already used by other requests, never handed out.

    Returns
    -------
    list of tuple of int
        ``ceil((prompt + output) / block_tokens)`` ids per turn, in the input order.
    """
    bt = int(block_tokens)
    num_system = system_tokens // bt
    system = tuple(range(-1, -1 - num_system, -1))
    next_id = -1 - num_system
    out: list[tuple[int, ...]] = []
    prev_sid, prev, prev_tokens = None, (), 0
    for sid, p, o in zip(session_id, prompt, output):
        total = -(-(p + o) // bt)
        if sid != prev_sid:
            keep = system[: min(system_tokens, p) // bt]
        else:
            keep = prev[: min(prev_tokens, p) // bt]
        need = total - len(keep)
        if not taken:
            fresh = tuple(range(next_id, next_id - need, -1))
            next_id -= need
        else:
            fresh_list = []
            while len(fresh_list) < need:
                if next_id not in taken:
                    fresh_list.append(next_id)
                next_id -= 1
            fresh = tuple(fresh_list)
        ids = keep + fresh
        out.append(ids)
        prev_sid, prev, prev_tokens = sid, ids, p + o
    return out


# --------------------------------------------------------------------------- trace columns

def _exact_int(v) -> int | None:
    """``v`` as an exact integer: an int, an integral float or decimal (below 2**53 for a
    float), or decimal text (``"7"``, ``"7.0"``); ``None`` otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and v == int(v) and abs(v) <= 2 ** 53 else None
    if isinstance(v, Decimal):
        return int(v) if v.is_finite() and v == v.to_integral_value() else None
    if isinstance(v, str):
        t = v.strip()
        if _INT_TEXT.fullmatch(t):
            return int(t)
        try:
            f = float(t)
        except ValueError:
            return None
        return _exact_int(f)
    return None


def _id_column(vals: list, lines: np.ndarray, name: str, errors: _Errors,
               max_value: int) -> np.ndarray:
    """Integers ``0..max_value`` exactly (no float64 rounding of a 64-bit id); -1 where the
    cell is empty or null; the first bad row is added to ``errors``."""
    out = np.full(len(vals), -1, dtype=np.int64)
    for i, v in enumerate(vals):
        if _is_missing(v):
            continue
        x = _exact_int(v)
        if x is None:
            errors.add(int(lines[i]), f"{name} {_shown_value(v)} is not an integer")
            break
        if not 0 <= x <= max_value:
            errors.add(int(lines[i]), f"{name} {_shown_value(v)} must be between 0 and "
                                      f"{max_value:,}")
            break
        out[i] = x
    return out


def _source_names(names: dict[str, str], have) -> tuple[str, str, str]:
    """The file's columns for ``session_id``, ``turn_index`` (``turn`` when the file has a
    session column, no ``turn_index`` and none is mapped: a ``turn`` column of a file
    without sessions is not read) and ``think_time_s``."""
    sid = names.get("session_id", "session_id")
    turn = names.get("turn_index")
    if turn is None:
        alias = have(sid) and not have("turn_index") and have("turn")
        turn = "turn" if alias else "turn_index"
    return sid, turn, names.get("think_time_s", "think_time_s")


def read_session_batch(cols: TraceColumns, get, have, names: dict[str, str],
                       errors: _Errors, json_numbers: bool = False) -> None:
    """Read one batch's session columns into ``cols`` (left ``None`` when the batch has
    none). A row with a ``turn_index`` or ``think_time_s`` needs a ``session_id``, and a row
    with a ``session_id`` needs a ``turn_index``; the first bad row goes to ``errors``.

    Parameters
    ----------
    cols : TraceColumns
        The batch being read (its ``lines`` name the rows).
    get, have : callable
        ``get(column) -> raw values``, ``have(column) -> bool`` of the batch.
    names : dict of str to str
        The ``columns`` mapping (our field -> the file's column).
    errors : _Errors
        Where row errors are collected.
    json_numbers : bool
        Numbers must be numbers (JSON, Parquet), not text.
    """
    sid_src, turn_src, think_src = _source_names(names, have)
    present = [c for c in (sid_src, turn_src, think_src) if have(c)]
    if not present:
        return
    lines, n = cols.lines, len(cols)
    if json_numbers:
        for c in present:
            _json_numbers(get(c), lines, c, errors)
    before = len(errors.found)
    sid = (_id_column(get(sid_src), lines, sid_src, errors, _INT64_MAX) if have(sid_src)
           else np.full(n, -1, dtype=np.int64))
    turn = (_id_column(get(turn_src), lines, turn_src, errors, 2 ** 31 - 1)
            if have(turn_src) else np.full(n, -1, dtype=np.int64))
    think = (_float_column(get(think_src), lines, think_src, errors, positive=False,
                           optional=True) if have(think_src) else np.full(n, np.nan))
    if len(errors.found) > before:  # a bad value: its columns are placeholders now (zeros),
        return                      # so the checks across them would blame other rows
    alone = sid < 0
    checks = ((alone & (turn >= 0),
               f"{turn_src} is given but {sid_src} is not (the session the turn belongs to)"),
              (alone & ~np.isnan(think),
               f"{think_src} is given but {sid_src} is not (it applies to session turns)"),
              (~alone & (turn < 0), f"{turn_src} is missing for a turn of a session"))
    for bad, msg in checks:
        if bad.any():
            errors.add(int(lines[int(np.argmax(bad))]), msg)
    cols.session_id, cols.turn_index, cols.think_time_s = sid, turn, think


def _first_problem(cols: TraceColumns, order: np.ndarray) -> tuple[int, str] | None:
    """The earliest-line violation of the contract among session rows ``order`` (sorted by
    session, then turn): a repeated or missing turn index, a turn not after the one
    before it, ``n > 1``; ``None`` when the sessions are whole."""
    s, k = cols.session_id[order], cols.turn_index[order]
    ln, t = cols.lines[order], cols.arrival_s[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = s[1:] != s[:-1]
    found: list[tuple[int, str]] = []

    def add(mask: np.ndarray, what) -> None:
        if mask.any():
            i = int(np.argmax(mask))
            found.append((int(ln[i]), what(i)))

    same = ~new
    kp = np.r_[-1, k[:-1]]
    add(new & (k != 0), lambda i: f"session {s[i]} starts at turn {k[i]}: turn 0 is missing "
                                  "(turns are numbered 0, 1, 2, ...)")
    add(same & (k == kp), lambda i: f"session {s[i]} has turn {k[i]} twice (lines "
                                    f"{ln[i - 1]} and {ln[i]})")
    add(same & (k > kp + 1), lambda i: f"session {s[i]}: turn {k[i]} follows turn {kp[i]} "
                                       f"(line {ln[i - 1]}): turn {kp[i] + 1} is missing")
    add(same & (k == kp + 1) & (t <= np.r_[-np.inf, t[:-1]]),
        lambda i: f"session {s[i]}: turn {k[i]} arrives at {t[i]:g} s, not after turn "
                  f"{kp[i]} (line {ln[i - 1]}) at {t[i - 1]:g} s")
    if cols.n is not None:
        add(cols.n[order] > 1, lambda i: f"n {cols.n[order][i]} on turn {k[i]} of session "
                                         f"{s[i]}: a session turn has one answer, which "
                                         "the next turn repeats (n must be 1)")
    return min(found) if found else None


def _given_ids(cols: TraceColumns, rows: np.ndarray) -> bool:
    """Whether the trace gives prefix ids for its session rows itself (Parquet
    ``prefix_hash_ids``, e.g. a copy written by ``servesim trace --to-parquet``): then every
    session row must, each covering its prompt and output."""
    ids = cols.prefix_hash_ids
    if ids is None or all(ids[i] is None for i in rows.tolist()):
        return False
    bts = cols.prefix_block_tokens
    for i in rows.tolist():
        where = f"{cols.path}:{int(cols.lines[i])}"
        sid, k = int(cols.session_id[i]), int(cols.turn_index[i])
        if ids[i] is None:
            raise WorkloadError(f"{where}: turn {k} of session {sid} has no prefix_hash_ids "
                                "while other session turns have them (give them for every "
                                "session turn, or for none: servesim then builds them)")
        bt = bts[i] if isinstance(bts, list) else bts
        need = -(-int(cols.prompt[i] + cols.output[i]) // bt)
        if len(ids[i]) != need:
            raise WorkloadError(
                f"{where}: turn {k} of session {sid} has {len(ids[i])} prefix_hash_ids but "
                f"its prompt and output ({int(cols.prompt[i])} + {int(cols.output[i])} "
                f"tokens) need ceil(... / {bt}) = {need}: a session turn's ids cover its "
                "prompt and its output")
    return True


def finish_sessions(cols: TraceColumns, block_tokens: int = SESSION_BLOCK_TOKENS
                    ) -> TraceColumns:
    """Check a whole trace's sessions and give their turns prefix id chains (the module
    docstring's contract). A trace without session rows is returned unchanged (its session
    columns dropped).

    Parameters
    ----------
    cols : TraceColumns
        A read trace (arrival times in seconds).
    block_tokens : int
        Tokens per prefix id of a session turn (``workload.session_block_tokens``).

    Returns
    -------
    TraceColumns
        ``cols``, its session rows' ``prefix_hash_ids`` built (or checked, where the trace
        gives them) and their ``prefix_block_tokens`` set.

    Raises
    ------
    WorkloadError
        Naming ``file:line``: a session whose turn indexes have a gap or a repeat, or do not
        start at 0; a turn that does not arrive after the one before it; ``n > 1`` on a
        session turn; given prefix ids missing on some session turns or of the wrong length.
    """
    if cols.session_id is None:
        return cols
    rows = np.flatnonzero(cols.session_id >= 0)
    if rows.size == 0:
        cols.session_id = cols.turn_index = cols.think_time_s = None
        return cols
    order = rows[np.lexsort((cols.turn_index[rows], cols.session_id[rows]))]
    problem = _first_problem(cols, order)
    if problem is not None:
        raise WorkloadError(f"{cols.path}:{problem[0]}: {problem[1]}")
    if _given_ids(cols, rows):
        return cols
    n = len(cols)
    ids = list(cols.prefix_hash_ids) if cols.prefix_hash_ids is not None else [None] * n
    taken = {h for i in np.flatnonzero(cols.session_id < 0).tolist() if ids[i]
             for h in ids[i]}
    chains = session_prefix_ids(cols.session_id[order].tolist(), cols.prompt[order].tolist(),
                                cols.output[order].tolist(), block_tokens, taken=taken)
    for i, chain in zip(order.tolist(), chains):
        ids[i] = chain
    bts = cols.prefix_block_tokens
    if taken or isinstance(bts, list):  # other rows keep their own block tokens
        bts = list(bts) if isinstance(bts, list) else [bts] * n
        for i in order.tolist():
            bts[i] = int(block_tokens)
    else:
        bts = int(block_tokens)
    cols.prefix_hash_ids, cols.prefix_block_tokens = ids, bts
    return cols


# --------------------------------------------------------------------------- post-processing

def session_starts(cols: TraceColumns) -> np.ndarray:
    """Each row's session start: the arrival time of its session's first turn present (turn
    0 in a whole session); a request alone its own arrival (s, float64)."""
    t = np.asarray(cols.arrival_s, dtype=np.float64)
    if cols.session_id is None:
        return t
    m = cols.session_id >= 0
    if not m.any():
        return t
    uniq, inv = np.unique(cols.session_id[m], return_inverse=True)
    first = np.full(uniq.size, np.inf)
    np.minimum.at(first, inv, t[m])
    out = t.copy()
    out[m] = first[inv]
    return out


def session_units(cols: TraceColumns) -> tuple[int, np.ndarray]:
    """The units that share one label (a session, or a request alone), numbered in the
    order of their first row: ``(number of units, unit of each row)``. Without sessions
    every row is its own unit, numbered in row order."""
    n = len(cols)
    if cols.session_id is None:
        return n, np.arange(n, dtype=np.int64)
    first_row = np.arange(n, dtype=np.int64)
    m = cols.session_id >= 0
    if m.any():
        rows = np.flatnonzero(m)
        _, first, inv = np.unique(cols.session_id[rows], return_index=True,
                                  return_inverse=True)
        first_row[rows] = rows[first][inv]
    keys, unit = np.unique(first_row, return_inverse=True)
    return int(keys.size), unit.astype(np.int64)
