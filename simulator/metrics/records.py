"""Append-only run records: request outcomes, per-step rows, ITL samples, transitions.

Per-step rows arrive as plain tuples (single steps) and as numpy chunks (fast-forwarded
decode runs). Every :data:`STEP_CHUNK_ROWS` rows the pending rows are packed into one
columnar chunk (one int64 or float64 array per column, 128 bytes a step instead of ~1 KB
of Python tuples); past a few chunks they are appended to a disk spool instead
(:mod:`simulator.metrics.step_table`), so a million-request run holds one chunk of steps
in memory, and the summary reads the table back a column at a time. ITL samples are packed
the same way (in memory: one float and one int a sample). Finished requests are packed
into columnar chunks of the request table :data:`REQUEST_CHUNK_ROWS` at a time and their
objects dropped, so request memory follows the requests in flight, not all requests.
"""
from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from simulator.metrics.latency import latency_stats
from simulator.metrics.step_order import key_order
from simulator.metrics.step_table import SPOOL_AFTER_CHUNKS, ColumnSpool, StepTable
from simulator.scheduling.state import FINAL, LEGAL_TRANSITIONS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

STEP_COLUMNS = ["replica_id", "step_index", "start_time_s", "step_time_s", "end_time_s",
                "batch_size", "num_prefill_tokens", "num_decode_tokens", "num_prefill_seqs",
                "num_decode_seqs", "num_waiting", "kv_blocks_used", "num_gpu_blocks",
                "num_preempted", "kv_tokens_used", "num_padding_seqs"]

#: Float columns of the step table (the others are int64).
STEP_FLOAT_COLUMNS = frozenset({"start_time_s", "step_time_s", "end_time_s"})

#: The breakdown of ``step_time_s`` (seconds; :class:`~simulator.perf.step_cost.StepCost`),
#: columns after :data:`STEP_COLUMNS` when a run records it (``perf.record_step_cost``):
#: ``step_time_s == (compute_s + communication_s + overhead_s) + swap_s + draft_s`` up to
#: rounding.
STEP_COST_COLUMNS = ["compute_s", "communication_s", "overhead_s", "swap_s", "draft_s"]

#: Rows (steps, or ITL samples) buffered before they are packed into one columnar chunk.
#: 65,536 rows of 16 columns is 8 MiB packed; the buffer of tuples it replaces is ~64 MiB.
STEP_CHUNK_ROWS = 65_536

#: columns after those when a run has KV offload tiers: bytes loaded from and stored to the
#: tiers since the replica's previous row (:func:`simulator.engine.step_rows.tier_bytes_since_last_row`)
STEP_OFFLOAD_COLUMNS = ["kv_load_bytes", "kv_store_bytes"]

REQUEST_COLUMNS = ["request_id", "replica_id", "tenant", "slice", "priority", "arrival_time_s",
                   "num_prompt_tokens", "num_output_tokens", "num_emitted_tokens",
                   "num_cached_prompt_tokens", "status", "reject_reason",
                   "first_scheduled_time_s", "first_token_time_s", "finish_time_s",
                   "exit_time_s", "num_preemptions", "n"]
#: request-table columns a run adds when it has multi-turn sessions (-1: not a session turn)
SESSION_COLUMNS = ["session_id", "turn_index"]
#: request-table columns a run adds when it has KV offload tiers: tokens loaded from the tiers
#: over the request's life (its loads after a preemption too: the column sums to the summary's
#: hit tokens), and the seconds the request waited for its loads
OFFLOAD_COLUMNS = ["tier_hit_tokens", "kv_load_wait_s"]


#: Finished requests held as objects before those that exited are packed into one chunk of
#: the request table (a request object costs ~1.2 KB; its packed row ~150 bytes).
REQUEST_CHUNK_ROWS = 65_536


class IllegalTransition(RuntimeError):
    """A request moved between statuses in a way DESIGN.md invariant 2 forbids."""


def _by_replica(chunk: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A packed step chunk with each replica's rows together (a stable sort by
    ``replica_id``), as it goes to the spool. The table read back is the same (it is sorted
    by ``(replica_id, step_index)`` as a whole), but its reads gather a replica's rows from a
    few places per chunk instead of one stepped row in every ``num_replicas`` (the stepped
    rows of every replica are packed in the order they ran): a cache miss per row on a
    52-replica run."""
    rid = chunk["replica_id"]
    if rid.size < 2 or not np.any(rid[1:] < rid[:-1]):
        return chunk
    if rid.min() >= 0 and rid.max() < 2**16:  # the same order, by radix sort
        rid = rid.astype(np.uint16)
    order = np.argsort(rid, kind="stable")
    return {c: v[order] for c, v in chunk.items()}


class RunRecorder:
    """Collects everything a run reports.

    Parameters
    ----------
    check_transitions : bool
        Verify every status change against the legal transitions and keep a log
        (``self.transitions``: (time_s, request_id, from, to)). Costs a little time.
    spool_dir : path, optional
        Parent folder of the step spool (None: the system temporary folder).
    step_cost : bool
        Record the breakdown of each step's time: the step table's columns are
        :data:`STEP_COLUMNS` then :data:`STEP_COST_COLUMNS` (rows carry those too).

    Attributes
    ----------
    step_columns : list of str
        The step table's columns, in order (a row tuple or chunk gives every one of them).
    step_float_columns : frozenset of str
        Those of them stored as float64 (the others int64).
    """

    def __init__(self, check_transitions: bool = False, spool_dir=None, step_cost: bool = False,
                 sessions: bool = False, offload: bool = False):
        self.check = check_transitions
        #: the request table's columns: :data:`REQUEST_COLUMNS`, then
        #: :data:`SESSION_COLUMNS` (``sessions``) and :data:`OFFLOAD_COLUMNS` (``offload``)
        self.request_columns = (REQUEST_COLUMNS + (SESSION_COLUMNS if sessions else [])
                                + (OFFLOAD_COLUMNS if offload else []))
        self._sessions = bool(sessions)
        self.step_cost = bool(step_cost)
        self.offload = bool(offload)
        self.step_columns = STEP_COLUMNS + STEP_COST_COLUMNS if step_cost else STEP_COLUMNS
        self.step_float_columns = (STEP_FLOAT_COLUMNS | frozenset(STEP_COST_COLUMNS)
                                   if step_cost else STEP_FLOAT_COLUMNS)
        if offload:
            self.step_columns = self.step_columns + STEP_OFFLOAD_COLUMNS
            self.step_float_columns = self.step_float_columns | frozenset(STEP_OFFLOAD_COLUMNS)
        self.transitions: list[tuple] = []
        #: requests admitted and not yet packed into the request table (all of them in a
        #: run that finished fewer than :data:`REQUEST_CHUNK_ROWS`)
        self.all_requests: list = []
        #: exit time (s) of each finished request not yet packed
        self.exit_time: dict[int, float] = {}
        self._itl_vals: list[float] = []
        self._itl_w: list[int] = []
        #: samples of decode runs (:meth:`add_itl_array`), flat, after the single ones
        self._itl_run_vals: list[float] = []
        self._itl_run_w: list[int] = []
        self._itl_packed: list[tuple[np.ndarray, np.ndarray]] = []
        #: decode runs' samples handed over packed (:meth:`add_itl_packed`), after the lists
        self._itl_run_arrays: list[tuple[np.ndarray, np.ndarray]] = []
        self._itl_run_arrays_n = 0
        #: the step rows of the decode run being committed (the engine sets it around the
        #: commit): :meth:`add_itl_run` gives them the run's gaps (None: no run committing)
        self.itl_rows = None
        self._steps: list[tuple] = []
        self._step_chunks: list[dict] = []
        self._pending_rows = 0
        #: decode runs recorded through :meth:`add_step_chunk` (fast-forwards), a count
        self.num_step_chunks = 0
        self._packed: list[dict[str, np.ndarray]] = []
        #: parent folder of the step spool (None: the system temporary folder)
        self.spool_dir = spool_dir
        self._spool: ColumnSpool | None = None
        self._itl_spool: ColumnSpool | None = None
        self._table: StepTable | None = None
        self.prefix_hit_tokens = 0
        self.num_finished = 0
        #: requests admitted (:meth:`admit`); with ``n > 1``: requests, sequences, beam
        self.num_admitted = 0
        self.num_parallel_requests = 0
        self.num_parallel_sequences = 0
        self.num_beam_search_requests = 0
        self._request_chunks: list = []
        self._num_unpacked_finished = 0
        self._next_pack = REQUEST_CHUNK_ROWS
        self._requests_done = None
        #: per string column of the request table: name -> code (:class:`_Labels`)
        self._labels: dict[str, dict[str, int]] = {}

    def __getstate__(self) -> dict:
        # pickled with a result: a stop condition installed on ``finish``
        # (:func:`simulator.engine.loop.simulate`'s ``stop_when``) is a closure over the run's
        # environment; the class's own ``finish`` serves afterwards
        state = dict(self.__dict__)
        state.pop("finish", None)
        return state

    # ------------------------------------------------------------------ lifecycle
    def transition(self, r, to: str, now: float) -> None:
        frm = r.status
        if self.check:
            if (frm, to) not in LEGAL_TRANSITIONS:
                raise IllegalTransition(f"request {r.request_id}: {frm} -> {to} at t={now}")
            self.transitions.append((now, r.request_id, frm, to))
        r.status = to

    def reject(self, r, now: float, reason: str) -> None:
        self.finish(r, now, "rejected", reason)

    def finish(self, r, now: float, status: str, reason: str) -> None:
        self.transition(r, status, now)
        r.reject_reason = reason if status == "rejected" else ""
        r.finish_time_s = now if status == "completed" else math.nan
        self.exit_time[r.request_id] = now
        self.num_finished += 1
        self._num_unpacked_finished += 1
        if self._num_unpacked_finished >= self._next_pack:
            self._pack_requests(now)
            # the next attempt after another chunk's worth of finishes (requests exiting at
            # ``now`` stay, so a burst of simultaneous exits cannot re-scan at every finish)
            self._next_pack = self._num_unpacked_finished + REQUEST_CHUNK_ROWS

    # ------------------------------------------------------------------ ITL
    def add_itl(self, value: float, weight: int) -> None:
        """One inter-token gap (seconds) seen ``weight`` times."""
        self._itl_vals.append(value)
        self._itl_w.append(weight)
        if len(self._itl_vals) >= STEP_CHUNK_ROWS:
            self._pack_itl()

    def add_itls(self, values: list[float], weights: list[int]) -> None:
        """Several single gaps (seconds) with their multiplicities, as :meth:`add_itl` one
        after the other (one call from a step that emitted for many requests; the buffer
        is packed at the same sample as by single calls)."""
        if len(self._itl_vals) + len(values) < STEP_CHUNK_ROWS:
            self._itl_vals.extend(values)
            self._itl_w.extend(weights)
            return
        for v, w in zip(values, weights):
            self.add_itl(v, w)

    def add_itl_run(self, n: int, weight: int) -> bool:
        """The first ``n`` gaps between the consecutive steps of the decode run being
        committed, each seen ``weight`` times: left to the run's step rows
        (:attr:`itl_rows`, :meth:`~simulator.engine.step_rows.DecodeRunRows.add_itl_gaps`),
        which compute them from the steps' end times when they are packed, so a run's
        per-step gaps are never Python floats. Returns False when no run is being committed
        (the caller then gives the gaps themselves, :meth:`add_itl_array`)."""
        rows = self.itl_rows
        if rows is None:
            return False
        if n > 0:
            rows.add_itl_gaps(n, weight)
        return True

    def add_itl_packed(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Decode runs' gaps (seconds, float64) and their weights (int64), packed by their
        step rows (:meth:`add_itl_run`); they follow the single samples in the next chunk."""
        if len(values):
            self._itl_run_arrays.append((values, weights))
            self._itl_run_arrays_n += len(values)
            if self._itl_run_arrays_n + len(self._itl_run_vals) >= STEP_CHUNK_ROWS:
                self._pack_itl()

    def add_itl_array(self, values, weight: int) -> None:
        """Several gaps (seconds; a sequence of floats), each seen ``weight`` times (a
        decode run's steps, each a gap of every sequence of the batch)."""
        n = len(values)
        if n:
            self._itl_run_vals.extend(values)
            self._itl_run_w.extend([weight] * n)
            if len(self._itl_run_vals) + self._itl_run_arrays_n >= STEP_CHUNK_ROWS:
                self._pack_itl()

    def _pack_itl(self) -> None:
        """Pack the buffered ITL samples into one (values, weights) pair of arrays: the
        single samples (:meth:`add_itl`) first, then the decode runs' (:meth:`add_itl_array`,
        then :meth:`add_itl_packed`), each in the order they came."""
        # numpy.fromiter reads the lists' values as they are (numpy.array of one joined list
        # first discovers every value's type: twice the time)
        n = len(self._itl_vals) + len(self._itl_run_vals)
        vals = np.fromiter(chain(self._itl_vals, self._itl_run_vals), dtype=float, count=n)
        ws = np.fromiter(chain(self._itl_w, self._itl_run_w), dtype=np.int64, count=n)
        if self._itl_run_arrays:
            vals = np.concatenate([vals, *(v for v, _ in self._itl_run_arrays)])
            ws = np.concatenate([ws, *(w for _, w in self._itl_run_arrays)])
            self._itl_run_arrays, self._itl_run_arrays_n = [], 0
        self._itl_packed.append((vals, ws))
        self._itl_vals, self._itl_w, self._itl_run_vals, self._itl_run_w = [], [], [], []
        if self._itl_spool is None and len(self._itl_packed) > SPOOL_AFTER_CHUNKS:
            self._itl_spool = ColumnSpool(["value", "weight"], frozenset({"value"}),
                                          self.spool_dir)
        if self._itl_spool is not None:  # a long run: to disk, like the steps
            for v, w in self._itl_packed:
                self._itl_spool.append({"value": v, "weight": w})
            self._itl_packed = []

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """All inter-token gaps (seconds, float64) with integer multiplicities (int64).

        Order: packed chunks in the order they were packed, then each chunk's single
        samples before its array samples (deterministic for a given run). A run whose
        samples spooled to disk reads them back on every call (fresh arrays; the spool stays
        until the recorder goes, so :meth:`itl_stats` and later callers can read it again);
        otherwise the arrays are packed once and the same pair is returned.
        """
        self._pack_itl()
        if self._itl_spool is not None:
            return self._itl_spool.read("value"), self._itl_spool.read("weight")
        vals = [v for v, _ in self._itl_packed]
        ws = [w for _, w in self._itl_packed]
        if len(self._itl_packed) > 1:
            self._itl_packed = [(np.concatenate(vals), np.concatenate(ws))]
        return self._itl_packed[0]

    def itl_stats(self) -> dict:
        """:func:`~simulator.metrics.latency.latency_stats` of the ITL samples, the same
        numbers bit for bit as ``latency_stats(*itl_samples())``. A spooled run reads the
        weights back as float64 (exact: integers below 2**53) a slice at a time, so no int64
        copy of them exists: 16 bytes a sample at the peak instead of 24."""
        self._pack_itl()
        if self._itl_spool is None:
            return latency_stats(*self.itl_samples())
        values = self._itl_spool.read("value")
        return latency_stats(values, self._itl_spool.read_float("weight"))

    # ------------------------------------------------------------------ steps
    def add_step(self, row: tuple) -> None:
        """One engine step: a tuple in :attr:`step_columns` order."""
        self._steps.append(row)
        if len(self._steps) + self._pending_rows >= STEP_CHUNK_ROWS:
            self._pack_steps()

    def add_step_chunk(self, chunk: dict) -> None:
        """Several steps at once: ``{column: array}`` for every column of :attr:`step_columns`.

        Once the run spools, a chunk goes to the spool as it is (a decode-run chunk holds one
        replica's rows, together: :class:`~simulator.engine.step_rows.DecodeRunRows`): packing
        it with others first copied every value twice more (the concatenation and the sort by
        replica): the recorder's packing took 0.56 s of ServeGen hours 10 to 12 on 12 replicas
        (5.6 million steps, 11.4 s simulated), about 0.3 s this way. The table is the same: it
        is sorted by ``(replica_id, step_index)`` as a whole."""
        self.num_step_chunks += 1
        if self._spool is not None:
            self._spool.append(chunk)
            return
        self._step_chunks.append(chunk)
        self._pending_rows += len(chunk["step_index"])
        if len(self._steps) + self._pending_rows >= STEP_CHUNK_ROWS:
            self._pack_steps()

    @property
    def num_steps(self) -> int:
        """Steps recorded so far."""
        spooled = self._spool.num_rows if self._spool is not None else 0
        return (spooled + sum(len(p["step_index"]) for p in self._packed) + len(self._steps)
                + self._pending_rows)

    def _pack_steps(self) -> None:
        """Pack the buffered tuples and chunks into one columnar chunk (int64 / float64);
        past :data:`~simulator.metrics.step_table.SPOOL_AFTER_CHUNKS` chunks the packed
        chunks go to the disk spool instead of staying in memory."""
        if not self._steps and not self._step_chunks:
            return
        columns, floats = self.step_columns, self.step_float_columns
        cols: dict[str, list] = {c: [] for c in columns}
        if self._steps:
            for c, v in zip(columns, zip(*self._steps)):
                cols[c].append(np.asarray(v))
        for ch in self._step_chunks:
            for c in columns:
                cols[c].append(np.asarray(ch[c]))
        self._packed.append({c: np.concatenate(v).astype(
            np.float64 if c in floats else np.int64, copy=False)
            for c, v in cols.items()})
        self._steps, self._step_chunks, self._pending_rows = [], [], 0
        if self._spool is None and len(self._packed) > SPOOL_AFTER_CHUNKS:
            self._spool = ColumnSpool(columns, floats, self.spool_dir,
                                      keys=("replica_id", "step_index"))
        if self._spool is not None:
            self._spool_packed()

    def _spool_packed(self) -> None:
        """Append the packed chunks to the spool, each with its replicas' rows together
        (:func:`_by_replica`), and drop them from memory."""
        for p in self._packed:
            self._spool.append(_by_replica(p))
        self._packed = []

    def step_table(self) -> StepTable:
        """All steps as a :class:`~simulator.metrics.step_table.StepTable` sorted by
        (replica_id, step_index): in memory for a small run, on disk (spool) for a large
        one. Columns are :attr:`step_columns`: float64 for :attr:`step_float_columns`, int64
        for the others (an empty run gives empty float columns). Idempotent."""
        if self._table is not None:
            return self._table
        self._pack_steps()
        columns, floats = self.step_columns, self.step_float_columns
        if self._spool is not None:
            self._spool_packed()
            self._spool.sort_by("replica_id", "step_index")
            self._table = StepTable(columns, floats, spool=self._spool)
            return self._table
        if len(self._packed) > 1:  # concatenate column by column, freeing chunks as we go
            merged = {}
            for c in columns:
                merged[c] = np.concatenate([p.pop(c) for p in self._packed])
            self._packed = [merged]
        data = self._packed[0] if self._packed else {}
        if data:
            order = key_order(data["replica_id"], data["step_index"])
            if np.any(order[1:] < order[:-1]):  # not sorted yet: sort in place of the chunk
                for c in columns:
                    data[c] = data[c][order]
        self._table = StepTable(columns, floats, data=data)
        return self._table

    def steps_frame(self) -> pd.DataFrame:
        """All steps as one DataFrame (:meth:`step_table` in memory; treat as read-only: it
        shares its column arrays with the recorder)."""
        return self.step_table().to_pandas()

    # ------------------------------------------------------------------ requests
    def admit(self, r) -> None:
        """A request entered the run (once per request, before any status change)."""
        self.all_requests.append(r)
        self.num_admitted += 1
        if r.num_seqs > 1:
            self.num_parallel_requests += 1
            self.num_parallel_sequences += int(r.num_seqs)
            self.num_beam_search_requests += bool(r.spec.use_beam_search)

    def _row(self, r, exit_time_s: float) -> tuple:
        s = r.spec
        return (r.request_id, r.replica_id, s.tenant, s.slice, s.priority,
                r.arrival_time_s, r.num_prompt_tokens, r.num_output_tokens,
                r.num_emitted, r.num_cached_prompt_tokens,
                r.status if r.status in FINAL or r.status in ("waiting", "running")
                else "waiting",
                r.reject_reason, r.first_scheduled_time_s, r.first_token_time_s,
                r.finish_time_s, exit_time_s, r.num_preemptions, r.num_seqs) + (
                    self._extra(r) if self._sessions or self.offload else ())

    def _extra(self, r) -> tuple:
        """The optional columns of ``r``'s row (:attr:`request_columns` past the standard)."""
        out: tuple = ()
        if self._sessions:
            sid = r.spec.session_id
            out = (-1 if sid is None else sid, r.spec.turn_index if sid is not None else -1)
        if self.offload:
            out += (r.num_tier_hit_tokens, r.kv_load_wait_s)
        return out

    def _columns(self, rows: list[tuple]) -> dict[str, np.ndarray]:
        """Rows of :meth:`_row` as one typed array per column (:func:`_typed_column`)."""
        return {c: _typed_column(c, list(v), self._labels)
                for c, v in zip(self.request_columns, zip(*rows))}

    def _pack_requests(self, now: float) -> None:
        """Pack the requests that exited before ``now`` into one columnar chunk and drop
        them (and their ``exit_time`` entries): a request object is freed once it left the
        run. Requests that exited at ``now`` itself wait for the next pack, since their
        scheduler may still be finishing the step that ended them."""
        done, keep = [], []
        for r in self.all_requests:
            t = self.exit_time.get(r.request_id) if r.status in FINAL else None
            (done if t is not None and t < now else keep).append(r)
        if not done:
            return
        self._request_chunks.append(self._columns(
            [self._row(r, self.exit_time.pop(r.request_id)) for r in done]))
        self.all_requests = keep
        self._num_unpacked_finished = sum(1 for r in keep if r.status in FINAL)

    def requests_frame(self) -> pd.DataFrame:
        """One row per request that entered the run (:data:`REQUEST_COLUMNS`), by request_id.

        Requests packed during the run (:data:`REQUEST_CHUNK_ROWS` at a time) and those
        still held are concatenated column by column (typed arrays: no per-row Python
        objects; a chunk's columns are freed as they are merged); every admitted request
        has exactly one row. Column dtypes are those ``pandas.DataFrame.from_records`` gives
        the rows (int64, float64, ``str`` for the labels). Once any were packed the packed
        rows are handed over: the call returns the same frame from then on (call it after
        the run ends; treat the frame as shared).

        Raises
        ------
        RuntimeError
            If the rows do not match the admitted requests one to one (DESIGN.md invariant 1).
        """
        import pandas as pd

        if self._requests_done is not None:
            return self._requests_done
        rows = [self._row(r, self.exit_time.get(r.request_id, math.nan))
                for r in self.all_requests]
        packed = bool(self._request_chunks)
        parts = self._request_chunks + ([self._columns(rows)] if rows else [])
        del rows
        self._request_chunks = []  # memory: the chunks live on only in the table
        n = sum(len(p["request_id"]) for p in parts)
        if n != self.num_admitted and self.num_admitted:
            raise RuntimeError(f"request accounting: {n} rows for "
                               f"{self.num_admitted} admitted requests")  # invariant 1
        if not n:
            return pd.DataFrame.from_records([], columns=self.request_columns)
        cols = {c: _merge([p.pop(c) for p in parts]) for c in self.request_columns}
        del parts
        rid = cols["request_id"]
        if rid.dtype.kind in "iu" and np.all(rid[1:] >= rid[:-1]):
            order = None  # already by request_id (a stable sort would not move a row)
        else:
            order = np.argsort(rid, kind="stable")
        for c in self.request_columns:
            if order is not None:
                cols[c] = cols[c][order]
            if isinstance(cols[c], _Labels):
                cols[c] = cols[c].decode()
        df = pd.DataFrame(cols, copy=False)
        del cols
        if packed:  # the rows left the recorder: later calls return this very table
            self._requests_done = df
            self.all_requests, self.exit_time = [], {}
        return df


class _Labels:
    """A string column as int32 codes into a recorder-wide list of names (no per-row
    objects); :meth:`decode` gives the ``str`` column pandas builds from the strings."""

    __slots__ = ("codes", "names")

    def __init__(self, codes: np.ndarray, names: list[str]):
        self.codes = codes
        self.names = names

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, idx) -> _Labels:
        return _Labels(self.codes[idx], self.names)

    def decode(self):
        import pandas as pd

        objs = np.array(self.names, dtype=object)[self.codes]  # shared str objects
        return pd.array(objs, dtype=pd.StringDtype(na_value=np.nan))


def _typed_column(name: str, values: list, labels: dict) -> np.ndarray | _Labels:
    """One request-table column of a chunk: a :class:`_Labels` for all-``str`` values
    (codes into ``labels[name]``, a name -> code dict kept by the recorder), else the
    numpy array pandas infers from the values (int64, float64; object for anything else)."""
    if values and set(map(type, values)) == {str}:
        table = labels.setdefault(name, {})
        for v in dict.fromkeys(values):  # new names get codes in order of first appearance
            if v not in table:
                table[v] = len(table)
        codes = np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))
        return _Labels(codes, list(table))
    arr = np.asarray(values)
    if arr.dtype.kind not in "iufb":
        arr = np.array(values, dtype=object)
    return arr


def _merge(parts: list) -> np.ndarray | _Labels:
    """Concatenate one column's chunks (labels share their recorder-wide names)."""
    if all(isinstance(p, _Labels) for p in parts):
        names = max((p.names for p in parts), key=len)
        return _Labels(np.concatenate([p.codes for p in parts]), names)
    if any(isinstance(p, _Labels) for p in parts):
        parts = [np.array(p.names, dtype=object)[p.codes] if isinstance(p, _Labels) else p
                 for p in parts]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
