"""Turn a :class:`~simulator.workload.config.WorkloadConfig` into request specs.

:func:`load_workload`'s steps, in order (one helper each):

1. read the trace (path resolved with ``resolve_path(trace, "traces", base_dir)``; for
   ServeGen data, generate its requests from the windows overlapping ``[start_s,
   end_s)``, :mod:`simulator.workload.servegen`) or generate the synthetic workload or
   sessions (:mod:`simulator.workload.session_synth`);
   with ``tile_to_s``, repeat it to fill that many seconds (:mod:`simulator.workload.diurnal`);
2. keep arrivals in ``[start_s, end_s)`` on the trace's clock (a session whole when its
   first turn is in the window, none of it otherwise), sort by arrival time (stable:
   ties keep file order) and keep the first ``max_requests`` (a session's turns are in
   arrival order, so a cut keeps its first turns);
3. re-base and rescale times: ``t' = (t - start_s) / rate_scale`` seconds (every arrival,
   session turns too; think times are not scaled), then with ``rate_profile`` move each
   to ``F^-1(t')`` (the diurnal time change, :mod:`simulator.workload.diurnal`), and
   refuse a workload whose last arrival is where the float64 clock no longer resolves a step (2**26 s,
   :func:`simulator.workload.clock.check_clock`);
4. assign ``slices`` / ``tenants`` / ``priorities`` by share (exact proportions, random
   order; see :func:`assign_by_share`), one label per session (every turn gets it) or
   request alone;
5. sample ``cancel_after_s`` from ``patience`` for requests without one (each turn its own);
6. give ``max_tokens`` to requests without one, clipping their output length to it (as an
   engine stops generating at ``max_tokens``; a :class:`WorkloadWarning` says how many
   outputs were clipped. A trace row whose own ``max_tokens`` is below its output length
   is an error instead: a recorded output cannot exceed what was requested; so is a
   clipped session turn, whose answer the next turns repeat);
7. attach declared ``shared_prefixes``: the first matching entry sets
   ``prefix_hash_ids = (stable_int_hash(name),)`` and ``prefix_block_tokens = num_tokens``
   (a session turn already has its ids: an error);
8. set ``n`` / ``use_beam_search`` from ``parallel_sampling`` (its slices only, if given;
   an error on a session turn).

Randomness comes only from the named streams of :mod:`simulator.base.rng` (``arrivals``,
``prompt_tokens``, ``output_tokens``, ``slices``, ``tenants``, ``priorities``,
``patience``: independent children of ``numpy.random.SeedSequence(seed)``), so the same
config and seed give an identical list. Labels and patience depend on the
number of kept requests, not on ``rate_scale``: a rate sweep keeps each request's labels.
"""
from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simulator.base.budget import check_workload_budget
from simulator.base.request import RequestSpec
from simulator.base.resources import resolve_path
from simulator.workload.clock import check_clock
from simulator.workload.columns import TraceColumns
from simulator.workload.config import WorkloadConfig
from simulator.workload.diurnal import load_rate_curve, tile_columns
from simulator.workload.errors import TraceFormatMismatch, WorkloadError, WorkloadWarning
from simulator.workload.readers import read_columns
from simulator.workload.session_synth import KEY as SESSIONS_KEY
from simulator.workload.session_synth import generate_sessions
from simulator.workload.sessions import session_starts, session_units
from simulator.workload.synthetic import (
    STREAM_ARRIVALS,
    STREAM_PATIENCE,
    STREAM_PRIORITIES,
    STREAM_SLICES,
    STREAM_TENANTS,
    generate_synthetic,
    rng_stream,
    sample_patience,
)


def stable_int_hash(name: str) -> int:
    """A process-independent 63-bit non-negative integer id for ``name``.

    BLAKE2b (8-byte digest) of the UTF-8 name, shifted right one bit. Unlike ``hash()`` it does
    not change between Python processes (no hash randomisation).

    Returns
    -------
    int
        In ``[0, 2**63)``.
    """
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def assign_by_share(shares: dict, n: int, rng: np.random.Generator) -> list:
    """Labels for ``n`` requests in exact proportions, in random order.

    Each label gets ``floor(share * n)`` requests; the remaining ones go to the labels with the
    largest fractional parts (ties: the smaller label first). The labels are then shuffled
    with ``rng``. Labels are taken in sorted order, so the result does not depend on the
    order of the ``shares`` mapping.

    Parameters
    ----------
    shares : dict
        Label -> share (non-negative, summing to 1).
    n : int
        Number of requests.
    rng : numpy.random.Generator

    Returns
    -------
    list
        ``n`` labels.
    """
    keys = sorted(shares)
    exact = np.asarray([shares[k] for k in keys], dtype=np.float64) * n
    counts = np.floor(exact + 1e-9).astype(np.int64)
    rest = n - int(counts.sum())
    if rest > 0:
        frac = exact - counts
        # Largest fractional part first; stable sort keeps the sorted-label order on ties.
        order = np.argsort(-frac, kind="stable")
        counts[order[:rest]] += 1
    elif rest < 0:  # pragma: no cover - shares are validated to sum to 1
        raise WorkloadError("shares sum above 1")
    idx = np.repeat(np.arange(len(keys)), counts)
    idx = rng.permutation(idx)
    return [keys[i] for i in idx.tolist()]


def _trace_lengths_loader(base_dir: Path | None):
    cache: dict[str, TraceColumns] = {}

    def load(path: str, column: str) -> np.ndarray:
        if path not in cache:
            with warnings.catch_warnings():  # only lengths are used: no note on its clock
                warnings.simplefilter("ignore", WorkloadWarning)
                cache[path] = read_columns(_resolve(path, base_dir))
        cols = cache[path]
        return cols.prompt if column == "prompt" else cols.output

    return load


def _resolve(path: str, base_dir: Path | None) -> Path:
    try:
        return resolve_path(path, "traces", base_dir)
    except FileNotFoundError as e:
        raise WorkloadError(str(e)) from e


def load_workload(cfg: WorkloadConfig, seed: int,
                  base_dir: Path | None = None, *, lazy: bool = False
                  ) -> list[RequestSpec] | RequestStream:
    """Build the request list of a workload: read or generate it, window, sort and cap it,
    re-base its clock, label it, and apply the config's patience, ``max_tokens``, shared
    prefixes and parallel sampling (the module docstring lists the steps). The same config
    and seed give an identical list.

    Parameters
    ----------
    cfg : WorkloadConfig
    seed : int
        Non-negative run seed.
    base_dir : pathlib.Path or None
        Folder that relative trace paths are resolved against first (e.g. the scenario's).
    lazy : bool
        Return a :class:`RequestStream` (the same requests, built as the run reaches them)
        instead of a list: a large workload then costs its columns, not its objects.

    Returns
    -------
    list of RequestSpec, or RequestStream
        Sorted by ``arrival_time_s`` (seconds from the window start), ``request_id`` 0..N-1.

    Raises
    ------
    simulator.base.budget.ResourceError
        If a synthetic workload's request count alone exceeds the memory budget (checked
        before any request is generated).
    WorkloadError
        If the trace is not found or malformed (message ``file:line: ...``), no request falls
        in the window, the last arrival is beyond what the clock resolves (naming the trace
        line, ``workload.rate_scale`` or the synthetic rate), a share table names a field the
        trace already has, a declared shared prefix meets a request that already has prefix
        ids, or the seed is negative.
    """
    cols, source = _read_source(cfg, seed, base_dir)
    if cfg.tile_to_s is not None:  # 1b. repeat the trace to fill tile_to_s
        cols = tile_columns(cols, cfg.tile_to_s, cfg.tile_period_s, source)
    cols = _window(cols, cfg, source)
    # 3. re-base and rescale; the clock must still resolve a step at the last arrival
    cols.arrival_s = (cols.arrival_s - cfg.start_s) / cfg.rate_scale
    if cfg.rate_profile is not None:  # 3b. the diurnal time change tau = F^-1(t)
        curve = load_rate_curve(cfg.rate_profile, lambda p: _resolve(p, base_dir))
        cols.arrival_s = curve.warp(cols.arrival_s)
    syn = cfg.synthetic or cfg.synthetic_sessions
    key = "workload.synthetic" if cfg.synthetic is not None else SESSIONS_KEY
    check_clock(cols.arrival_s, cols.lines, source=source, rate_scale=cfg.rate_scale,
                start_s=cfg.start_s, synthetic_key=None if syn is None else
                f"{key}.arrival.rate_rps={syn.arrival.rate_rps:g}")
    if cols.session_id is not None and cfg.session_arrival == "closed":
        _warn_missing_think_times(cols, source)
    _assign_shares(cols, cfg, seed, source)
    if cfg.patience is not None:
        _draw_patience(cols, cfg, seed)
    if cfg.max_tokens is not None:
        _apply_max_tokens(cols, cfg.max_tokens, source)
    if cfg.shared_prefixes:
        _attach_prefixes(cols, cfg, source)
    stream = RequestStream(cols, _parallel_sampling(cols, cfg, source))
    return stream if lazy else list(stream)


def _read_source(cfg: WorkloadConfig, seed: int,
                 base_dir: Path | None) -> tuple[TraceColumns, str]:
    """Step 1: the trace's columns (or the synthetic workload's) and the name messages use."""
    if cfg.trace is not None:
        path = _resolve(cfg.trace, base_dir)
        try:
            cols = read_columns(path, cfg.format, cfg.columns, cfg.time_unit, seed=seed,
                                start_s=cfg.start_s, end_s=cfg.end_s, servegen=cfg.servegen,
                                session_block_tokens=cfg.session_block_tokens)
        except TraceFormatMismatch as e:
            raise WorkloadError(f"{e}; check workload.format (leave it out, or auto, to "
                                "detect the format)") from None
        return cols, str(cfg.trace)
    rng_stream(seed, STREAM_ARRIVALS)  # validates the seed
    if cfg.synthetic_sessions is not None:
        return generate_sessions(cfg.synthetic_sessions, seed, cfg.session_block_tokens,
                                 _trace_lengths_loader(base_dir)), "synthetic sessions"
    syn = cfg.synthetic
    expected = [float(syn.num_requests)] if syn.num_requests is not None else []
    if syn.duration_s is not None:  # mean count of a renewal process: rate x duration
        expected.append(syn.arrival.rate_rps * syn.duration_s)
    check_workload_budget(min(expected), "synthetic workload",
                          "workload.synthetic.num_requests (or duration_s / rate_rps)")
    return generate_synthetic(cfg.synthetic, seed, _trace_lengths_loader(base_dir)), \
        "synthetic workload"


def _window(cols: TraceColumns, cfg: WorkloadConfig, source: str) -> TraceColumns:
    """Step 2: the rows arriving in ``[start_s, end_s)`` (the turns of a session starting
    there), sorted by arrival (stable), the first ``max_requests`` of them."""
    t = cols.arrival_s
    start = session_starts(cols) if cols.session_id is not None else t
    keep = start >= cfg.start_s
    if cfg.end_s is not None:
        keep &= start < cfg.end_s
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(t[idx], kind="stable")]
    if cfg.max_requests is not None:
        idx = idx[: cfg.max_requests]
    if idx.size == 0:
        window = f"[{cfg.start_s}, {cfg.end_s if cfg.end_s is not None else 'end'})"
        raise WorkloadError(f"{source}: no requests in the window {window} s "
                            f"({len(cols)} in the trace)")
    if idx.size != len(cols) or np.any(idx[1:] <= idx[:-1]):
        cols = cols.take(idx)  # the identity (a sorted trace, every row kept) needs no copy
    return cols


def _assign_shares(cols: TraceColumns, cfg: WorkloadConfig, seed: int, source: str) -> None:
    """Step 4: slices, tenants and priorities by share; a warning when a trace's requests get
    labels the trace does not have."""
    n, unit = session_units(cols)
    for fld, shares, key in (("slice", cfg.slices, STREAM_SLICES),
                             ("tenant", cfg.tenants, STREAM_TENANTS),
                             ("priority", cfg.priorities, STREAM_PRIORITIES)):
        if shares is None:
            continue
        if getattr(cols, fld) is not None:
            raise WorkloadError(f"{source}: the trace has a {fld!r} column; remove the "
                                f"workload's share table for it")
        labels = assign_by_share(shares, n, rng_stream(seed, key))
        if n != len(cols):  # one label per session: each turn gets its session's
            labels = [labels[u] for u in unit.tolist()]
        if fld == "priority":
            cols.priority = np.asarray(labels, dtype=np.int64)
        else:
            setattr(cols, fld, [str(x) for x in labels])
    synth = synthesised_labels(cfg)
    if synth and cfg.trace is not None:
        warnings.warn(WorkloadWarning(
            f"{source}: {', '.join(synth)} assigned at random by the workload config "
            f"({', '.join(sorted(set(synth.values())))}), not read from the trace: "
            "results per tenant, slice or priority reflect the configured shares"),
            stacklevel=3)  # load_workload's caller


def _draw_patience(cols: TraceColumns, cfg: WorkloadConfig, seed: int) -> None:
    """Step 5: ``cancel_after_s`` drawn from ``patience`` where the trace gives none."""
    drawn = sample_patience(cfg.patience, len(cols), rng_stream(seed, STREAM_PATIENCE))
    if cols.cancel_after_s is None:
        cols.cancel_after_s = drawn
    else:
        cols.cancel_after_s = np.where(np.isnan(cols.cancel_after_s), drawn,
                                       cols.cancel_after_s)


def _apply_max_tokens(cols: TraceColumns, max_tokens: int, source: str) -> None:
    """Step 6: ``max_tokens`` for the requests without one, their outputs clipped to it (a
    warning says how many were)."""
    n = len(cols)
    if cols.max_tokens is None:
        cols.max_tokens = np.zeros(n, dtype=np.int64)
    missing = cols.max_tokens <= 0
    clipped = missing & (cols.output > max_tokens)
    if cols.session_id is not None and (clipped & (cols.session_id >= 0)).any():
        _refuse_clipped_turns(cols, clipped & (cols.session_id >= 0), max_tokens, source)
    if clipped.any():
        warnings.warn(WorkloadWarning(
            f"{source}: workload.max_tokens={max_tokens} clips the output of "
            f"{int(clipped.sum())} of {n} requests (longest {int(cols.output.max())} "
            f"tokens) to {max_tokens} tokens, as an engine stops at max_tokens"),
            stacklevel=3)  # load_workload's caller
    cols.max_tokens = np.where(missing, max_tokens, cols.max_tokens)
    cols.output = np.where(missing, np.minimum(cols.output, max_tokens), cols.output)


def _warn_missing_think_times(cols: TraceColumns, source: str) -> None:
    """Closed loop: a warning for later session turns without a think time (they are sent
    as soon as the turn before them finishes)."""
    later = (cols.session_id >= 0) & (cols.turn_index >= 1)
    missing = later & np.isnan(cols.think_time_s)
    if missing.any():
        warnings.warn(WorkloadWarning(
            f"{source}: {int(missing.sum())} of {int(later.sum())} later session turns have "
            "no think_time_s: in closed loop (workload.session_arrival: closed) each is sent "
            "as soon as the turn before it finishes (think time 0); set "
            "workload.session_arrival: open to replay the recorded arrival times"),
            stacklevel=3)  # load_workload's caller


def _refuse_clipped_turns(cols: TraceColumns, clipped: np.ndarray, max_tokens: int,
                          source: str) -> None:
    """Step 6 for session turns: a clipped answer would no longer be the history the next
    turns repeat (nor what the turn's prefix ids cover): an error."""
    i = int(np.argmax(clipped))
    where = f"{source}:{int(cols.lines[i])}" if cols.lines[i] > 0 else source
    fix = (f"bound {SESSIONS_KEY}.answer_tokens.max instead" if cols.lines[i] <= 0
           else f"raise it to at least {int(cols.output[clipped].max())}, or remove it")
    raise WorkloadError(
        f"{where}: workload.max_tokens={max_tokens} would clip the answer of "
        f"{int(clipped.sum())} session turns (turn {int(cols.turn_index[i])} of session "
        f"{int(cols.session_id[i])}: {int(cols.output[i])} tokens), which later turns repeat "
        f"as their prompt; {fix}")


def _parallel_sampling(cols: TraceColumns, cfg: WorkloadConfig, source: str):
    """Step 8: the ``parallel_sampling`` config the requests get (None when it changes
    nothing); an error when the trace has its own ``n`` / beam-search values."""
    ps = cfg.parallel_sampling
    if ps is None or not (ps.n > 1 or ps.use_beam_search):
        return None
    if cols.n is not None and np.any(np.maximum(cols.n, 1) != 1):
        raise WorkloadError(f"{source}: workload.parallel_sampling would replace the trace's "
                            "own n / beam-search values; remove one of the two")
    if cols.session_id is not None:
        turns = cols.session_id >= 0
        if ps.slices is not None:
            turns &= np.isin(np.asarray(cols.slice or ["default"] * len(cols), dtype=object),
                             list(ps.slices))
        if turns.any():
            raise WorkloadError(
                f"{source}: workload.parallel_sampling (n={ps.n}) would apply to "
                f"{int(turns.sum())} session turns: a session turn has one answer, which the "
                "next turn repeats; limit parallel_sampling.slices to slices without sessions")
    return ps


class RequestStream(Sequence):
    """The requests of a loaded workload, built on demand from its columns.

    A :class:`RequestSpec` costs ~250 bytes as an object and ~60 as a row of numpy columns,
    so a million-request workload is kept as columns and each spec is built when the run
    reaches it (:meth:`simulator.workload.columns.TraceColumns.iter_specs`, 65,536 at a
    time). Iteration, ``len`` and indexing give what the list from
    ``load_workload(..., lazy=False)`` holds, in the same order.

    Parameters
    ----------
    cols : TraceColumns
        The final columns (windowed, sorted, labelled).
    parallel : ParallelSamplingConfig or None
        ``workload.parallel_sampling`` to apply (its slices only, if given).
    """

    def __init__(self, cols: TraceColumns, parallel=None):
        self.cols = cols
        self._ps = parallel

    def _apply(self, s: RequestSpec) -> RequestSpec:
        ps = self._ps
        if ps is not None and (ps.slices is None or s.slice in ps.slices):
            return dataclasses.replace(s, n=ps.n, use_beam_search=ps.use_beam_search)
        return s

    def __len__(self) -> int:
        return len(self.cols)

    def __iter__(self):
        if self._ps is None:
            return self.cols.iter_specs()
        return (self._apply(s) for s in self.cols.iter_specs())

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(n))]
        j = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"request index {i} out of range for {n} requests")
        return self._apply(self.cols.to_specs(j, j + 1)[0])

    def session_turns(self) -> set[tuple[int, int]]:
        """``(session_id, turn_index)`` of every request that is a session turn, read from the
        columns: the same set as from the specs, without building one (1.4 million specs
        took 2.5 s of the ServeGen day, whose trace has no sessions).

        Returns
        -------
        set of (int, int)
            Empty when the workload has no sessions.
        """
        c = self.cols
        if c.session_id is None or c.turn_index is None:
            return set()
        has = c.session_id >= 0
        if not has.any():
            return set()
        turns = np.maximum(c.turn_index[has], 0)  # as :meth:`TraceColumns.to_specs` reads it
        return set(zip(c.session_id[has].tolist(), turns.tolist()))

    def slices(self) -> set[str]:
        """The slice names that occur."""
        return set(self.cols.slice) if self.cols.slice else ({"default"} if len(self) else set())

    def budget_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(prompt, output, max_tokens, has_patience)`` per request, as
        :func:`simulator.base.budget.estimate_scenario_run` reads them from specs (max_tokens 0
        where none is declared)."""
        c, n = self.cols, len(self)
        mt = (np.where(c.max_tokens > 0, c.max_tokens, 0).astype(np.float64)
              if c.max_tokens is not None else np.zeros(n))
        cancel = (~np.isnan(c.cancel_after_s) if c.cancel_after_s is not None
                  else np.zeros(n, dtype=bool))
        return c.prompt.astype(np.float64), c.output.astype(np.float64), mt, cancel


#: Request fields a workload config may assign at random, and the key that assigns them.
SYNTHESISABLE = (("tenant", "tenants"), ("priority", "priorities"),
                 ("cancel_after_s", "patience"), ("slice", "slices"))


def synthesised_labels(cfg: WorkloadConfig) -> dict[str, str]:
    """Request fields that the workload config assigns at random instead of reading them.

    ``tenants``, ``priorities`` and ``slices`` share tables label every request at random in
    the configured proportions (a trace that has the column is an error, so a share table
    always means synthesised labels); ``patience`` draws a cancellation deadline for every
    request without one in the trace.

    Parameters
    ----------
    cfg : WorkloadConfig

    Returns
    -------
    dict of str to str
        Field name (``tenant``, ``priority``, ``cancel_after_s``, ``slice``) -> the config key
        that synthesised it (``workload.tenants``, ...), in that order; empty when every
        field came from the trace (or was left at its default).
    """
    out: dict[str, str] = {}
    for fld, key in SYNTHESISABLE:
        if getattr(cfg, key) is not None:
            out[fld] = f"workload.{key}"
    return out


def _attach_prefixes(cols: TraceColumns, cfg: WorkloadConfig, source: str) -> None:
    """Step 7: the first matching ``shared_prefixes`` entry gives a request its prefix id."""
    n = len(cols)
    tenants = cols.tenant or ["default"] * n
    slices = cols.slice or ["default"] * n
    ids = list(cols.prefix_hash_ids) if cols.prefix_hash_ids is not None else [None] * n
    bt = cols.prefix_block_tokens
    block = list(bt) if isinstance(bt, list) else [bt] * n
    hashed = [(p, (stable_int_hash(p.name),)) for p in cfg.shared_prefixes]
    for i in range(n):
        for p, h in hashed:
            if (p.tenant is None or p.tenant == tenants[i]) and (
                    p.slice is None or p.slice == slices[i]):
                if ids[i] is not None:
                    where = (f"{source}:{int(cols.lines[i])}" if cols.lines[i] > 0
                             else source)
                    turn = (cols.session_id is not None and cols.session_id[i] >= 0)
                    what = (f"turn {int(cols.turn_index[i])} of session "
                            f"{int(cols.session_id[i])}, whose prefix ids its session's "
                            "history sets" if turn else "a request that already has prefix "
                            "hash ids")
                    raise WorkloadError(f"{where}: shared prefix {p.name!r} matches {what}")
                ids[i] = h
                block[i] = p.num_tokens
                break
    cols.prefix_hash_ids = ids
    cols.prefix_block_tokens = block


__all__ = ["SYNTHESISABLE", "assign_by_share", "load_workload", "stable_int_hash",
           "synthesised_labels"]
