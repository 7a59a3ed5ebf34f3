"""The step table's rows, built here only: one row per stepped iteration (:func:`record_step`,
the replica process and lockstep DP ranks alike) and the rows of committed fast-forwarded
decode runs (:class:`DecodeRunRows`), gathered per replica and handed to the recorder many
runs at a time. A replica whose rows carry neither the breakdown nor offload columns gathers
its stepped rows there too (:func:`record_step_row`, runs of one step), so all its rows reach
the recorder in step order.

A row's ``step_time_s`` is the step's ``total_s``
(:class:`~simulator.perf.step_cost.StepCost`). Its breakdown (``compute_s``,
``communication_s``, ``overhead_s``, ``swap_s``, ``draft_s``;
:data:`~simulator.metrics.records.STEP_COST_COLUMNS`) follows the other columns only when the
run records it (``perf.record_step_cost``: the recorder's ``step_cost``): the engine then
records through :func:`record_step_cost` and :class:`DecodeRunCostRows`, chosen once per
replica, so a run without it does no work for it.

A decode run of ``k`` steps (:class:`~simulator.scheduling.emission.Jump`) makes ``k`` step
rows whose columns are constant over the run but for the step index, the clock, the blocks
in use and the KV tokens. Building 16 numpy columns per run (~11 steps on the Azure conv
hour) and packing tens of thousands of such small chunks cost more than the run itself, so a
replica keeps one short record per run here and builds the columns of many runs at once
(``numpy.repeat`` over the runs), with the same integer and float values row for row. The
recorder sorts its step table by ``(replica_id, step_index)``, so the rows reach it in
larger chunks but the table is the same.
"""
from __future__ import annotations

from struct import Struct

import numpy as np

from simulator.kv.run_blocks import RunBlocks


def _row(rep, out, start_s: float, step_s: float) -> tuple:
    """One stepped iteration's columns of :data:`~simulator.metrics.records.STEP_COLUMNS`, in
    their order (a stepped row as a tuple; :meth:`DecodeRunRows.add_step_row` packs the same
    values as a run of one step, ``tests/engine/test_step_rows.py`` compares the two)."""
    kv = rep.kv
    return (rep.idx, rep.step_index, start_s, step_s, start_s + step_s, out.batch_size,
            out.num_prefill_tokens, out.num_decode_tokens, out.num_prefill_seqs,
            out.num_decode_seqs, out.num_waiting, kv.num_used_blocks, kv.num_gpu_blocks,
            len(out.preempted), out.kv_tokens, out.num_padding_seqs)


def record_step(rec, rep, out, start_s: float, step_s: float) -> None:
    """Record one stepped iteration of replica ``rep`` and advance its step index.

    Parameters
    ----------
    rec : RunRecorder
    rep : Replica
        ``idx``, ``step_index`` and ``kv`` (blocks in use after the scheduling of ``out``).
    out : StepOutput
        The iteration.
    start_s, step_s : float
        Its start and duration (seconds; it ends at ``start_s + step_s``).
    """
    rec.add_step(_row(rep, out, start_s, step_s))
    rep.step_index += 1


def record_step_row(rec, rep, out, start_s: float, step_s: float) -> None:
    """:func:`record_step` through the replica's :class:`DecodeRunRows` (made here at its
    first row), the engine's way when a run records neither the breakdown nor offload
    columns: a replica's stepped rows and its decode runs' reach the recorder together, in
    step order, so the spooled step table is read back in long pieces
    (:meth:`~simulator.metrics.step_table.ColumnSpool.sort_by`). The same row."""
    rows = rep.run_rows
    if rows is None:
        rows = rep.run_rows = DecodeRunRows(rec)
    rows.add_step_row(rep, out, start_s, step_s)
    rep.step_index += 1


def record_step_cost(rec, rep, out, start_s: float, step_s: float, cost=None) -> None:
    """:func:`record_step` with the breakdown of the step's time after the row's columns.

    Parameters
    ----------
    rec, rep, out, start_s, step_s
        As :func:`record_step`.
    cost : StepCost, optional
        The breakdown to record (default: ``out.cost``, the step's own price; a lockstep
        group's rows record its slowest rank's, whose ``total_s`` is ``step_s``).
    """
    rec.add_step(_row(rep, out, start_s, step_s) + _cost_columns(out, cost))
    rep.step_index += 1


def _cost_columns(out, cost) -> tuple:
    """The breakdown columns (:data:`~simulator.metrics.records.STEP_COST_COLUMNS`) of a step:
    ``cost``'s, or the step's own price."""
    c = out.cost if cost is None else cost
    compute, comm, overhead = c.parts()
    return (compute, comm, overhead, c.swap_s, c.draft_s)


def tier_bytes_since_last_row(rep) -> tuple[float, float]:
    """Bytes replica ``rep`` loaded from and stored to its KV offload tiers since its last
    step row (:data:`~simulator.metrics.records.STEP_OFFLOAD_COLUMNS`): loads are counted when
    scheduled, so a step's row carries the loads its scheduling started; stores when a step's
    results are applied, so they show in the next row (vLLM starts those copies with the next
    step). The marks live on the replica."""
    kv = rep.kv
    load, store = kv.tier_load_bytes, kv.tier_store_bytes
    last = rep.tier_bytes_mark
    rep.tier_bytes_mark = (load, store)
    return load - last[0], store - last[1]


def record_step_tiers(rec, rep, out, start_s: float, step_s: float, cost=None) -> None:
    """:func:`record_step` (with the breakdown when the run records it) and the KV offload
    columns after them (a run with offload tiers)."""
    row = _row(rep, out, start_s, step_s)
    if rec.step_cost:
        row += _cost_columns(out, cost)
    rec.add_step(row + tier_bytes_since_last_row(rep))
    rep.step_index += 1


def _head(values, k: int):
    """The first ``k`` of ``values`` (a list, an array or a
    :class:`~simulator.kv.run_blocks.RunBlocks`): ``values`` itself when it holds exactly ``k``
    (a run's priced steps are often exactly the ones run: no slice copied)."""
    if isinstance(values, RunBlocks):
        return values.head(k)
    return values if len(values) == k else values[:k]


#: ``struct.Struct`` packers of ``k`` native doubles or int64s, by ``(k, code)``
_PACKERS: dict[tuple[int, str], Struct] = {}


def _packer(k: int, code: str) -> Struct:
    """The packer of ``k`` values of struct type ``code`` (``d``: float64, ``q``: int64, native
    byte order: what ``numpy.frombuffer`` reads as float64 / int64): one C conversion a value,
    ~10 ns, where ``array.array.extend`` parsed each (~50 ns)."""
    p = _PACKERS.get((k, code))
    if p is None:
        if len(_PACKERS) >= 4096:  # bounded (run lengths vary; most are short)
            _PACKERS.clear()
        p = _PACKERS[(k, code)] = Struct(f"{k}{code}")
    return p


#: Integer constants recorded per run (:meth:`DecodeRunRows.add`; a stepped row is a run of
#: one step, :meth:`DecodeRunRows.add_step_row`): the step count, then the integer columns of
#: :data:`~simulator.metrics.records.STEP_COLUMNS` constant over a run, in table order, then
#: the KV tokens of the run's first step and their growth per step
RUN_CONSTS = 14

#: A run's record: its :data:`RUN_CONSTS` integer constants and its first step's start
#: (seconds), packed as native int64s and a float64 at the run's commit
_RUN_RECORD = Struct(f"{RUN_CONSTS}qd")
#: ... and how ``numpy.frombuffer`` reads the packed records at the flush
_RUN_DTYPE = np.dtype([("consts", np.int64, (RUN_CONSTS,)), ("start_s", np.float64)])

#: One float64 / int64 (a stepped row's time, end and blocks in use)
_ONE_DOUBLE = Struct("d")
_ONE_INT = Struct("q")

#: Rows gathered before they go to the recorder (bounded memory: ~16 runs' worth of
#: columns per thousand rows; the recorder packs them into chunks of 65,536 rows until the run
#: spools, then appends each to the spool as it comes).
FLUSH_ROWS = 8192

#: Rows gathered at most, stepped rows included (:meth:`DecodeRunRows.add_step_row`): the
#: rows flush at this bound (a replica that mostly steps: ~2.4 MB of gathered rows at most),
#: and with the decode runs' inter-token gaps at :data:`FLUSH_ROWS` of the runs' own rows, as
#: if the stepped rows were not there (the gaps reach the recorder at the same moments among
#: the stepped steps' gaps, so the gap samples keep their order)
MAX_GATHERED_ROWS = 2 * FLUSH_ROWS


class DecodeRunRows:
    """The step rows of one replica's committed decode runs, until :meth:`flush`.

    Parameters
    ----------
    recorder : RunRecorder
        Receives the rows (``add_step_chunk``, one chunk per flush).
    """

    __slots__ = ("_decode_runs", "_ends", "_itl_n", "_itl_parts", "_itl_runs", "_itl_w",
                 "_kv_used", "_records", "_rows", "_run_rows", "_runs", "_tiers", "_times",
                 "recorder")

    def __init__(self, recorder) -> None:
        self.recorder = recorder
        #: per run, the KV offload bytes since the replica's last row (None: no tiers); a
        #: run's first row carries them, its other rows 0
        self._tiers: list[tuple[float, float]] | None = [] if recorder.offload else None
        # per run, its record (_RUN_RECORD), and per step, every run's steps in order: C
        # doubles and int64s packed at the run's commit, while its float and int objects are
        # fresh in the cache (kept in lists until the flush, thousands of runs later, reading
        # them back was a cache miss a value and freeing them another: 14% of the ServeGen
        # day's loop for the steps' values; the runs' are packed the same way); the flush reads
        # the buffers
        self._records = bytearray()
        self._runs = 0
        self._decode_runs = 0  # of the runs, those of :meth:`add` (not stepped rows)
        self._times = bytearray()
        self._ends = bytearray()
        self._kv_used = bytearray()
        self._rows = 0
        self._run_rows = 0  # of the rows, those of decode runs (:meth:`add`)
        # the runs' inter-token gaps, per layer (:meth:`add_itl_gaps`): the run (its place
        # among the runs gathered), how many of its gaps, and their weight
        self._itl_runs: list[int] = []
        self._itl_n: list[int] = []
        self._itl_w: list[int] = []
        #: the gaps computed at flushes of the rows alone, for the next flush with them
        self._itl_parts: list[tuple[np.ndarray, np.ndarray]] = []

    def add_tier_bytes(self, loaded: float, stored: float) -> None:
        """The KV offload bytes of the run :meth:`add` records next (runs with tiers)."""
        self._before_run()
        if self._tiers is not None:
            self._tiers.append((loaded, stored))

    def add(self, replica_id: int, step_index: int, k: int, start_s: float, times,
            ends, out, kv_blocks_used, num_gpu_blocks: int, ctx_totals=None) -> None:
        """The first ``k`` steps of a decode run whose first step is ``out`` (a
        :class:`~simulator.scheduling.continuous.StepOutput`), starting at ``start_s`` with
        index ``step_index``; ``times``, ``ends`` and ``kv_blocks_used`` are sequences (lists
        or arrays) of at least ``k`` values (step durations and end times in seconds, pool
        blocks in use); ``ctx_totals``, the batch's context at each step, is read by
        :class:`DecodeRunCostRows` only."""
        self._before_run()
        B = len(out.reqs)
        npad = out.num_padding_seqs
        # a decode run prefills nothing and preempts nobody (either vetoes a fast-forward)
        self._records += _RUN_RECORD.pack(k, replica_id, step_index, B, 0, out.num_decode_tokens,
                                          0, out.num_decode_seqs, out.num_waiting,
                                          num_gpu_blocks, 0, npad, out.kv_tokens, B - npad,
                                          start_s)
        self._runs += 1
        self._decode_runs += 1
        # each value converted to C now (hot); one numpy view per flush
        doubles = _packer(k, "d")
        self._times += doubles.pack(*_head(times, k))
        self._ends += doubles.pack(*_head(ends, k))
        self._kv_used += _packer(k, "q").pack(*_head(kv_blocks_used, k))
        self._rows += k
        self._run_rows += k

    def add_step_row(self, rep, out, start_s: float, step_s: float) -> None:
        """One stepped iteration of replica ``rep`` (its ``idx``, ``step_index`` and ``kv``
        after the scheduling of ``out``), started at ``start_s`` and lasting ``step_s``
        seconds: :func:`record_step`'s row, gathered as a run of one step.

        Raises
        ------
        ValueError
            When the rows carry the KV offload columns (:func:`record_step_tiers` records
            those rows).
        """
        if self._tiers is not None:
            raise ValueError("a stepped row with KV offload columns goes through "
                             "record_step_tiers")
        if self._rows >= MAX_GATHERED_ROWS:
            self.flush(itl=False)
        kv = rep.kv
        self._records += _RUN_RECORD.pack(
            1, rep.idx, rep.step_index, out.batch_size, out.num_prefill_tokens,
            out.num_decode_tokens, out.num_prefill_seqs, out.num_decode_seqs, out.num_waiting,
            kv.num_gpu_blocks, len(out.preempted), out.num_padding_seqs, out.kv_tokens, 0,
            start_s)
        self._runs += 1
        self._times += _ONE_DOUBLE.pack(step_s)
        self._ends += _ONE_DOUBLE.pack(start_s + step_s)
        self._kv_used += _ONE_INT.pack(kv.num_used_blocks)
        self._rows += 1

    def _before_run(self) -> None:
        """Flush the rows gathered so far when they are enough, before anything of the next
        run is gathered (its tier bytes, breakdown or rows; its gaps come after :meth:`add`,
        so the flush is never between a run's rows and its gaps): with the runs' gaps at
        :data:`FLUSH_ROWS` runs' rows, the rows alone at :data:`MAX_GATHERED_ROWS` rows."""
        if self._run_rows >= FLUSH_ROWS:
            self.flush()
        elif self._rows >= MAX_GATHERED_ROWS:
            self.flush(itl=False)

    def add_itl_gaps(self, n: int, weight: int) -> None:
        """The first ``n`` inter-token gaps of the run :meth:`add` recorded last (between its
        consecutive steps' ends), each seen ``weight`` times (the sequences that emitted in
        both steps): given to the recorder at the flush, computed from the run's step ends
        (the same subtractions as :func:`~simulator.scheduling.emission.advance` made one
        float at a time). A run cut while some of its requests were cancelled has two layers
        (those requests' gaps, then the others')."""
        self._itl_runs.append(self._runs - 1)
        self._itl_n.append(n)
        self._itl_w.append(weight)

    def flush(self, itl: bool = True) -> None:
        """Hand every gathered row to the recorder (nothing when none is gathered) and, with
        ``itl``, the runs' inter-token gaps gathered since the last such flush, in one array:
        at the moments the runs' rows alone would have flushed, so the recorder's ITL samples
        (whose chunks put the single gaps before the runs') keep their order whatever the
        stepped rows gathered meanwhile."""
        if self._rows:
            self._flush_rows()
        if itl:
            self._run_rows = 0
            parts = self._itl_parts
            if parts:
                self._itl_parts = []
                if len(parts) > 1:
                    parts = [(np.concatenate([v for v, _ in parts]),
                              np.concatenate([w for _, w in parts]))]
                self.recorder.add_itl_packed(*parts[0])

    def _flush_rows(self) -> None:
        """Hand the gathered rows to the recorder as one chunk; keep their runs' gaps."""
        runs = np.frombuffer(self._records, dtype=_RUN_DTYPE)
        c = runs["consts"]
        ks = c[:, 0]
        first = np.cumsum(ks) - ks                 # row of each run's first step
        j = np.arange(self._rows, dtype=np.int64) - np.repeat(first, ks)  # step within run
        zero = np.zeros(self._rows, dtype=np.int64)
        # a constant that is 0 for every run gathered (the prefill and preemption counts
        # unless stepped rows came with prefills) is the one zero column, not repeated
        col = [np.repeat(v, ks) if v.any() else zero for v in c[:, 1:].T]
        rid, s0, bsz, npt, ndt, nps, nds, nw, ngpu, npre, npad, kv0, kvstep = col
        # views of the packed buffers (each flush starts new ones)
        ends = np.frombuffer(self._ends, dtype=np.float64)
        starts = np.empty_like(ends)
        starts[1:] = ends[:-1]
        starts[first] = runs["start_s"]            # a run starts at its own clock
        rec = self.recorder
        chunk = self._more_columns({
            "replica_id": rid, "step_index": s0 + j, "start_time_s": starts,
            "step_time_s": np.frombuffer(self._times, dtype=np.float64),
            "end_time_s": ends,
            "batch_size": bsz, "num_prefill_tokens": npt, "num_decode_tokens": ndt,
            "num_prefill_seqs": nps, "num_decode_seqs": nds, "num_waiting": nw,
            "kv_blocks_used": np.frombuffer(self._kv_used, dtype=np.int64),
            "num_gpu_blocks": ngpu, "num_preempted": npre,
            "kv_tokens_used": kv0 + j * kvstep, "num_padding_seqs": npad})
        tiers = self._tiers
        if tiers is not None:  # the offload columns: a run's bytes on its first row
            for name, i in (("kv_load_bytes", 0), ("kv_store_bytes", 1)):
                v = np.zeros(self._rows, dtype=np.float64)
                v[first] = [t[i] for t in tiers]
                chunk[name] = v
            self._tiers = []
        rec.add_step_chunk(chunk)
        # the recorder counts decode runs recorded this way (the chunk held that many of them,
        # and the stepped rows of runs of one step, which are not decode runs)
        rec.num_step_chunks += self._decode_runs - 1
        if self._itl_n:
            self._flush_itl(ends, first)
        self._records, self._runs, self._decode_runs = bytearray(), 0, 0
        self._times, self._ends, self._kv_used = bytearray(), bytearray(), bytearray()
        self._rows = 0

    def _flush_itl(self, ends: np.ndarray, first: np.ndarray) -> None:
        """Compute the gathered runs' inter-token gaps for the next :meth:`flush` with them:
        gap ``i`` (1-based) of a run is ``ends[first + i] - ends[first + i - 1]`` (float64
        subtractions, as in ``advance``), layer by layer in the order they were given."""
        n = np.fromiter(self._itl_n, dtype=np.int64, count=len(self._itl_n))
        total = int(n.sum())
        if total:
            runs = np.fromiter(self._itl_runs, dtype=np.int64, count=len(self._itl_runs))
            w = np.fromiter(self._itl_w, dtype=np.int64, count=len(self._itl_w))
            pos = (np.repeat(first[runs] + 1, n)
                   + np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n))
            self._itl_parts.append((ends[pos] - ends[pos - 1], np.repeat(w, n)))
        self._itl_runs, self._itl_n, self._itl_w = [], [], []

    def _more_columns(self, chunk: dict) -> dict:
        """The chunk to record (a subclass adds its columns)."""
        return chunk


class DecodeRunCostRows(DecodeRunRows):
    """:class:`DecodeRunRows` with the breakdown of each step's time
    (:data:`~simulator.metrics.records.STEP_COST_COLUMNS`), split by the replica's pricer
    (:meth:`~simulator.perf.step_cost.StepPricer.decode_run_parts`: the model that priced
    the run). A decode run neither swaps nor drafts (both veto a fast-forward), so its
    ``swap_s`` and ``draft_s`` are 0.

    Parameters
    ----------
    recorder : RunRecorder
        Records the breakdown (``step_cost``).
    pricer : StepPricer
        The replica's pricer (the one whose ``decode_run_times`` priced the runs).
    """

    __slots__ = ("_comm", "_compute", "_overhead", "pricer")

    def __init__(self, recorder, pricer) -> None:
        super().__init__(recorder)
        self.pricer = pricer
        self._compute: list[float] = []
        self._comm: list[float] = []
        self._overhead: list[float] = []

    def add(self, replica_id: int, step_index: int, k: int, start_s: float, times,
            ends, out, kv_blocks_used, num_gpu_blocks: int, ctx_totals=None) -> None:
        if ctx_totals is None:
            raise ValueError("a decode run's step breakdown needs its ctx_totals")
        self._before_run()  # the rows gathered so far go with their own breakdown
        compute, comm, overhead = self.pricer.decode_run_parts(out.shape, ctx_totals[:k], times[:k])
        self._compute.extend(compute)
        self._comm.extend(comm)
        self._overhead.extend(overhead)
        super().add(replica_id, step_index, k, start_s, times, ends, out, kv_blocks_used,
                    num_gpu_blocks)

    def add_step_row(self, rep, out, start_s: float, step_s: float) -> None:
        """Refused: a stepped row with the breakdown goes through :func:`record_step_cost`.

        Raises
        ------
        ValueError
            Always.
        """
        raise ValueError("a stepped row with the step breakdown goes through record_step_cost")

    def _more_columns(self, chunk: dict) -> dict:
        zero = np.zeros(len(self._compute), dtype=np.float64)
        chunk.update(compute_s=np.array(self._compute, dtype=np.float64),
                     communication_s=np.array(self._comm, dtype=np.float64),
                     overhead_s=np.array(self._overhead, dtype=np.float64),
                     swap_s=zero, draft_s=zero)
        self._compute, self._comm, self._overhead = [], [], []
        return chunk
