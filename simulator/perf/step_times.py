"""Step times in the compiled core: a step's kernels (:class:`StepKernels`), the pure-decode
memo (:class:`DecodeStepTimes`), decode attention from a measured table
(:class:`DecodeAttention`) and the engine's linear terms (:class:`EngineTerms`).

:class:`StepKernels` sums one step's kernel seconds in the order of
:meth:`simulator.perf.step_model.StepTimeModel.gpu_op_times` (token terms at the padded token
count as one remembered sum, prefill attention per chunk and attention layer group, decode
attention, MLA's extra GEMMs, LM head, sampler): the same values to the bit, without the dict.
The operator backend's own functions answer what is not computed here (through callables:
token terms, one chunk's prefill attention, the LM head; decode attention with draft tokens
to verify or without a measured table).

A pure-decode step (every sequence of the batch decodes one token) costs, on a
:class:`~simulator.perf.step_model.StepTimeModel` (DESIGN.md section 3)::

    gpu_s  = fixed(num_seqs) + sum over attention layer groups of layers x attn(num_seqs, ctx)
    step_s = max(gpu_s, cpu_s) + sync_s        (async scheduling; else gpu_s + cpu_s + sync_s)

where ``fixed`` holds the terms that depend on the batch alone (GEMMs and collectives at the
padded token count, LM head, sampler), ``attn`` is one layer's decode attention at
``ctx_mean = ctx / num_seqs`` tokens per sequence (a sliding-window group attends to at most
``num_seqs x window`` tokens in all), and ``cpu_s``/``sync_s`` are the engine profile's linear
costs (:class:`~simulator.perf.engine_profile.LinearCost`). A step's time is a function of
``(num_seqs, ctx)`` alone, so :class:`DecodeStepTimes` remembers it per pair: a decode run cut
by an arrival and planned again asks for the same steps. Where a measured table answers
(:class:`DecodeAttention`), a run's steps inside its grid are computed instead
(:meth:`DecodeStepTimes.times`): the batch axis's part of the query once per run
(:meth:`DecodeAttention.batch_part`), then each step's context part
(:meth:`DecodeAttention.total_inside`), which costs about what a memo lookup does and never
misses (73% of the priced steps of the ServeGen day's first ten minutes missed the memo).

Where the operator backend answers decode attention from a measured table
(:class:`DecodeAttention`), every step is computed here, one point at a time, with the
C library's ``exp`` and the grid's own point query
(:class:`~simulator.perf.tables.grid_point.GridPoint`): the same operations in the same order
as the backend's scalar path (a mixed step's decode attention), so a value is the same whether
the step was stepped, fast-forwarded or mixed in with a prefill chunk. A point beyond the
table's grid (``DecodeAttention.beyond``), a backend without such a table (roofline,
fitted) and an engine whose CPU term comes from a measured table
(``DecodeStepTimes.many``) are answered by the Python model.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from simulator.base.compiled_core import register_pickling
from simulator.perf.tables.grid_point import GridPoint

__all__ = ["DECODE_MEMO_MAX", "PREFILL_MEMO_MAX", "DecodeAttention", "DecodeStepTimes", "EngineTerms",
           "StepKernels"]

#: pairs (num_seqs, ctx_total) of decode step times remembered before the memo starts afresh
#: (about 100 bytes each: 20 MB at most)
DECODE_MEMO_MAX = 200_000
#: pairs (chunk tokens, cached tokens) of prefill attention remembered before that memo starts
#: afresh (about 200 bytes each: 13 MB at most; a million-request run meets a million pairs)
PREFILL_MEMO_MAX = 65_536

#: token counts (x graph or not) whose token-only seconds :class:`StepKernels` remembers before
#: that memo starts afresh (as the performance model's own memo of them: 65,536 entries)
TOKEN_MEMO_MAX = 65_536


class EngineTerms:
    """The engine profile's step seconds, ``max(gpu_s, cpu_s) + sync_s`` (async scheduling)
    or ``gpu_s + cpu_s + sync_s``, with ``cpu_s`` and ``sync_s`` linear in the step's
    sequences and tokens (:meth:`simulator.perf.engine_profile.EngineProfile.step_seconds`,
    the same operations in the same order).

    Parameters
    ----------
    cpu, sync : tuple of float
        ``(step_s, per_seq_s, per_token_s)`` of each linear cost (seconds).
    async_scheduling : bool
        Whether the engine overlaps its CPU work with the GPU's (vLLM V1).
    """

    __slots__ = ("async_scheduling", "cpu_seq", "cpu_step", "cpu_tok", "sync_seq", "sync_step",
                 "sync_tok")

    def __init__(self, cpu: tuple[float, float, float], sync: tuple[float, float, float],
                 async_scheduling: bool) -> None:
        self.cpu_step: float = float(cpu[0])
        self.cpu_seq: float = float(cpu[1])
        self.cpu_tok: float = float(cpu[2])
        self.sync_step: float = float(sync[0])
        self.sync_seq: float = float(sync[1])
        self.sync_tok: float = float(sync[2])
        self.async_scheduling: bool = bool(async_scheduling)

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments (:func:`simulator.base.compiled_core.register_pickling`)."""
        return ((self.cpu_step, self.cpu_seq, self.cpu_tok),
                (self.sync_step, self.sync_seq, self.sync_tok), self.async_scheduling), {}

    def seconds(self, gpu_s: float, num_seqs: int, num_tokens: int) -> float:
        """Wall-clock seconds of a step whose kernels take ``gpu_s`` seconds."""
        cpu = self.cpu_seconds(num_seqs, num_tokens)
        return self.combine(gpu_s, cpu, self.sync_seconds(num_seqs, num_tokens))

    def cpu_seconds(self, num_seqs: int, num_tokens: int) -> float:
        """The step's CPU seconds (the same for every step of one batch)."""
        return self.cpu_step + self.cpu_seq * num_seqs + self.cpu_tok * num_tokens

    def sync_seconds(self, num_seqs: int, num_tokens: int) -> float:
        """The step's synchronisation seconds (the same for every step of one batch)."""
        return self.sync_step + self.sync_seq * num_seqs + self.sync_tok * num_tokens

    def combine(self, gpu_s: float, cpu: float, sync: float) -> float:
        """:meth:`seconds` from its three parts."""
        if self.async_scheduling:
            return (cpu if cpu > gpu_s else gpu_s) + sync  # noqa: FURB136 - compiled compare
        return gpu_s + cpu + sync


class DecodeAttention:
    """One replica's decode attention summed over its layers, from a measured table's grid.

    Parameters
    ----------
    point : GridPoint
        The log-time grid of the resolved decode-attention key (seconds of one layer).
    ctx_axis, batch_axis : int
        Positions of the ``ctx_mean`` and ``batch`` axes in the grid.
    groups : list of tuple of int
        ``(window, layers)`` per attention layer group (window 0: full attention).
    beyond : callable
        ``beyond(num_seqs, ctx_mean) -> seconds`` of one layer at a point outside the grid
        (the table set's scalar query, which transfers the edge's time by the roofline).
    """

    __slots__ = ("batch_axis", "beyond", "ctx_axis", "ctx_first", "groups", "point", "two")

    def __init__(self, point: GridPoint, ctx_axis: int, batch_axis: int,
                 groups: list[tuple[int, int]], beyond: Callable[[int, float], float]) -> None:
        self.point: GridPoint = point
        self.ctx_axis: int = ctx_axis
        self.batch_axis: int = batch_axis
        self.groups: list[tuple[int, int]] = [(int(w), int(n)) for w, n in groups]
        self.beyond: Callable[[int, float], float] = beyond
        #: a two-axis grid (the decode-attention tables): queried without lists
        #: (:meth:`GridPoint.at2`, the same bits as :meth:`GridPoint.at`)
        self.two: bool = point.naxes == 2 and {ctx_axis, batch_axis} == {0, 1}
        self.ctx_first: bool = ctx_axis == 0

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.point, self.ctx_axis, self.batch_axis, self.groups, self.beyond), {}

    def layer_seconds(self, num_seqs: int, ctx_total: int) -> float:
        """Seconds of one layer's decode attention of ``num_seqs`` sequences attending
        ``ctx_total`` tokens in all (``num_seqs >= 1``)."""
        mean = float(ctx_total) / num_seqs
        point = self.point
        if self.two:
            b = float(num_seqs)
            x0 = mean if self.ctx_first else b
            x1 = b if self.ctx_first else mean
            if point.inside2(x0, x1):
                return math.exp(point.at2(x0, x1))
            return self.beyond(num_seqs, mean)
        xs = [0.0, 0.0]
        xs[self.ctx_axis] = mean
        xs[self.batch_axis] = float(num_seqs)
        if point.inside(xs):
            return math.exp(point.at(xs))
        return self.beyond(num_seqs, mean)

    def total(self, num_seqs: int, ctx_total: int) -> float:
        """Seconds of the step's decode attention summed over the layers."""
        out = 0.0
        for w, layers in self.groups:
            c = ctx_total if w == 0 else min(ctx_total, num_seqs * w)
            out = out + layers * self.layer_seconds(num_seqs, c)
        return out

    def batch_part(self, num_seqs: int) -> tuple[bool, int, bool, float]:
        """The batch axis's part of every query of ``num_seqs`` sequences
        (:meth:`GridPoint.axis2`), for :meth:`total_inside`: whether the batch lies within
        the axis's node range (False also for a grid that is not two-axis), its offset,
        whether inside a cell, and its weight."""
        if not self.two:
            return False, 0, False, 0.0
        point = self.point
        a = self.batch_axis
        b = float(num_seqs)
        if b < point.lo[a] or b > point.hi[a]:
            return False, 0, False, 0.0
        off, inside, w, _ = point.axis2(a, b)
        return True, off, inside, w

    def total_inside(self, num_seqs: int, ctx_total: int, b_off: int, b_in: bool,
                     b_w: float, cells: list[int] | None = None) -> float:
        """:meth:`total` given the batch axis's part (:meth:`batch_part`, whose batch lies
        within the grid): the same operations in the same order (so the same bits), or -1.0
        when a layer group's ``ctx_mean`` lies outside the grid (ask :meth:`total`).

        ``cells``: per layer group, the context axis's cell of a step of the same batch with
        at most this context (-1: none), updated to this step's: consecutive steps of a
        decode run search the axis's nodes from there (:func:`~simulator.perf.tables.
        grid_point._cell`'s ``below``: the same cells)."""
        point = self.point
        ca = self.ctx_axis
        lo = point.lo[ca]
        hi = point.hi[ca]
        out = 0.0
        g = 0
        for w, layers in self.groups:
            c = ctx_total if w == 0 else min(ctx_total, num_seqs * w)
            mean = float(c) / num_seqs
            if mean < lo or mean > hi:
                return -1.0
            if cells is None:
                off, inside, wt, _ = point.axis2(ca, mean)
            else:
                off, inside, wt, cell = point.axis2(ca, mean, cells[g])
                cells[g] = cell
                g += 1
            if self.ctx_first:
                v = point.corners2(off + b_off, inside, wt, b_in, b_w)
            else:
                v = point.corners2(b_off + off, b_in, b_w, inside, wt)
            out = out + layers * math.exp(v)
        return out


class DecodeStepTimes:
    """Seconds of pure-decode steps ``(num_seqs, ctx_total)``, remembered (module docstring).

    Parameters
    ----------
    fixed : callable
        ``fixed(num_seqs) -> seconds`` of the step's batch-only kernels (remembered here:
        :meth:`fixed_seconds`).
    many : callable
        ``many(num_seqs, ctx_totals) -> list of seconds``: the Python model's step times
        (used for every step when ``attention`` or ``engine`` is None).
    attention : DecodeAttention or None
    engine : EngineTerms or None
    memo_max : int
        Pairs remembered before the memo starts afresh (the values are the same either way).
    """

    __slots__ = ("_fixed", "_memo", "_size", "attention", "engine", "fixed", "many",
                 "memo_max")

    def __init__(self, fixed: Callable[[int], float],
                 many: Callable[[int, list[int]], list[float]],
                 attention: DecodeAttention | None, engine: EngineTerms | None,
                 memo_max: int = DECODE_MEMO_MAX) -> None:
        self.fixed: Callable[[int], float] = fixed
        self.many: Callable[[int, list[int]], list[float]] = many
        self.attention: DecodeAttention | None = attention
        self.engine: EngineTerms | None = engine
        self.memo_max: int = memo_max
        self._memo: dict[int, dict[int, float]] = {}
        self._fixed: dict[int, float] = {}
        self._size: int = 0

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.fixed, self.many, self.attention, self.engine), {"memo_max": self.memo_max}

    def reset(self, engine: EngineTerms | None) -> None:
        """Price with another engine's terms from now on (forgets every remembered step)."""
        self.engine = engine
        self._memo.clear()
        self._fixed.clear()
        self._size = 0

    @property
    def remembered(self) -> int:
        """Pairs remembered now."""
        return self._size

    def fixed_seconds(self, num_seqs: int) -> float:
        """Seconds of a pure-decode step's batch-only kernels (``fixed``, remembered per
        ``num_seqs``; forgotten with the engine, whose graph mode and sampler they include)."""
        f = self._fixed.get(num_seqs)
        if f is None:
            f = self._fixed[num_seqs] = self.fixed(num_seqs)
        return f

    def _compute(self, num_seqs: int, ctx_total: int) -> float:
        attention = self.attention
        engine = self.engine
        if attention is None or engine is None:
            return self.many(num_seqs, [ctx_total])[0]
        return engine.seconds(self.fixed_seconds(num_seqs) + attention.total(num_seqs, ctx_total),
                              num_seqs, num_seqs)

    def _row(self, num_seqs: int) -> dict[int, float]:
        row = self._memo.get(num_seqs)
        if row is None:
            row = self._memo[num_seqs] = {}
        return row

    def _store(self, row: dict[int, float], num_seqs: int, ctx_total: int,
               t: float) -> dict[int, float]:
        """Remember one step in ``row`` (``num_seqs``'s); when :attr:`memo_max` pairs are
        remembered already, start afresh first. Returns the row to go on with."""
        if self._size >= self.memo_max:
            self._memo.clear()
            self._size = 0
            row = self._memo[num_seqs] = {}
        row[ctx_total] = t
        self._size += 1
        return row

    def one(self, num_seqs: int, ctx_total: int) -> float:
        """Seconds of one pure-decode step."""
        row = self._row(num_seqs)
        t = row.get(ctx_total)
        if t is None:
            t = self._compute(num_seqs, ctx_total)
            self._store(row, num_seqs, ctx_total, t)
        return t

    def _run_terms(self, num_seqs: int) -> tuple[bool, int, bool, float, float, float, float]:
        """What every step of a pure-decode batch of ``num_seqs`` shares, for
        :meth:`_run_step`: whether its batch lies within the attention grid (False without a
        table or engine terms: ask :meth:`one`), the batch axis's part of the query
        (:meth:`DecodeAttention.batch_part`), the batch-only kernels' seconds and the
        engine's CPU and sync seconds."""
        attention = self.attention
        engine = self.engine
        if attention is None or engine is None:
            return False, 0, False, 0.0, 0.0, 0.0, 0.0
        inside, b_off, b_in, b_w = attention.batch_part(num_seqs)
        if not inside:
            return False, 0, False, 0.0, 0.0, 0.0, 0.0
        return (True, b_off, b_in, b_w, self.fixed_seconds(num_seqs),
                engine.cpu_seconds(num_seqs, num_seqs), engine.sync_seconds(num_seqs, num_seqs))

    def _run_step(self, num_seqs: int, c: int, b_off: int, b_in: bool, b_w: float, f: float,
                  cpu: float, sync: float, cells: list[int] | None = None) -> float:
        """One step of a batch inside the grid (:meth:`_run_terms`): computed, not remembered
        (as cheap as the memo, and never missed); a step whose context lies beyond the grid
        goes through :meth:`one` (remembered). The same value as :meth:`one` either way.
        ``cells``: as :meth:`DecodeAttention.total_inside` (steps asked in growing context)."""
        attention = self.attention
        engine = self.engine
        assert attention is not None and engine is not None
        a = attention.total_inside(num_seqs, c, b_off, b_in, b_w, cells)
        if a < 0.0:
            return self.one(num_seqs, c)
        return engine.combine(f + a, cpu, sync)

    def times_arith(self, num_seqs: int, first: int, step: int, n: int) -> list[float]:
        """:meth:`times` of the ``n`` contexts ``first + i * step`` (a decode run's: every
        step adds one token per sequence), without listing them: the same values."""
        inside, b_off, b_in, b_w, f, cpu, sync = self._run_terms(num_seqs)
        if not inside:
            return self.times(num_seqs, list(range(first, first + n * step, step)))
        out: list[float] = []
        c = first
        # the contexts grow (step > 0: a token per sequence), so each layer group's cell on
        # the context axis is searched from the last step's
        attention = self.attention
        assert attention is not None  # inside: a table and engine terms
        cells = [-1] * len(attention.groups) if step > 0 else None
        for _ in range(n):
            out.append(self._run_step(num_seqs, c, b_off, b_in, b_w, f, cpu, sync, cells))
            c += step
        return out

    def times(self, num_seqs: int, ctx_totals: list[int]) -> list[float]:
        """Seconds of consecutive pure-decode steps of ``num_seqs`` sequences, one per entry
        of ``ctx_totals`` (the batch's context at each step, tokens)."""
        out: list[float] = []
        inside, b_off, b_in, b_w, f, cpu, sync = self._run_terms(num_seqs)
        if inside:
            for c in ctx_totals:
                out.append(self._run_step(num_seqs, c, b_off, b_in, b_w, f, cpu, sync))
            return out
        row = self._row(num_seqs)
        if self.attention is not None and self.engine is not None:
            for c in ctx_totals:
                t = row.get(c)
                if t is None:
                    t = self._compute(num_seqs, c)
                    row = self._store(row, num_seqs, c, t)
                out.append(t)
            return out
        got = [row.get(c) for c in ctx_totals]
        miss = [c for c, t in zip(ctx_totals, got) if t is None]
        if not miss:
            return [t for t in got if t is not None]
        new = self.many(num_seqs, miss)
        for c, t in zip(miss, new):
            row = self._store(row, num_seqs, c, t)
        fill = iter(new)
        for t in got:
            out.append(next(fill) if t is None else t)
        return out


class StepKernels:
    """Kernel seconds of any step (module docstring) and, with the engine's terms, its
    wall-clock seconds.

    Parameters
    ----------
    capture_sizes : list of int
        CUDA-graph capture sizes (tokens), increasing; empty: no graphs.
    graph_mode : str
        ``full`` (pure-decode steps replay a graph), ``piecewise`` or ``full_and_piecewise``
        (every step up to the largest size), or ``none``.
    token_sum : callable
        ``token_sum(tokens, graph) -> seconds or None``: the token-only terms summed (None: a
        token term shares a name with a per-step term; :meth:`gpu_seconds` then answers by
        ``op_sum``).
    op_sum : callable
        ``op_sum(shape) -> seconds``: the sum of the model's ``gpu_op_times`` (the general
        path).
    prefill_time : callable
        ``prefill_time(q, start) -> seconds`` of one chunk's prefill attention, one layer
        (remembered here per pair).
    decode_total : callable
        ``decode_total(num_seqs, ctx_total, q_per_seq) -> seconds`` over the layers (the
        backend's, where ``attention`` does not apply).
    attention : DecodeAttention or None
    mla_extra : callable or None
        ``mla_extra(prefill_q, prefill_start, decode_tokens) -> seconds`` (MLA models only).
    lm_head : callable
        ``lm_head(rows) -> seconds`` (remembered here per row count).
    sampler_s_per_row : float
        Sampler seconds per sampled row.
    groups : list of tuple of int
        ``(window, layers)`` per attention layer group (window 0: full attention).
    """

    __slots__ = ("_lm", "_no_tok", "_prefill", "_tok", "attention", "capture_sizes",
                 "decode_total", "engine", "graph_mode", "groups", "lm_head", "max_capture",
                 "mla_extra", "op_sum", "prefill_time", "sampler_s_per_row", "token_sum")

    def __init__(self, capture_sizes: list[int], graph_mode: str,
                 token_sum: Callable[[int, bool], float | None],
                 op_sum: Callable[[object], float],
                 prefill_time: Callable[[int, int], float],
                 decode_total: Callable[[int, int, int], float],
                 attention: DecodeAttention | None,
                 mla_extra: Callable[[list, list, int], float] | None,
                 lm_head: Callable[[int], float], sampler_s_per_row: float,
                 groups: list[tuple[int, int]]) -> None:
        self.capture_sizes: list[int] = sorted(int(c) for c in capture_sizes)
        self.max_capture: int = self.capture_sizes[-1] if self.capture_sizes else 0
        self.graph_mode: str = graph_mode if self.max_capture else "none"
        self.token_sum: Callable[[int, bool], float | None] = token_sum
        self.op_sum: Callable[[object], float] = op_sum
        self.prefill_time: Callable[[int, int], float] = prefill_time
        self.decode_total: Callable[[int, int, int], float] = decode_total
        self.attention: DecodeAttention | None = attention
        self.mla_extra: Callable[[list, list, int], float] | None = mla_extra
        self.lm_head: Callable[[int], float] = lm_head
        self.sampler_s_per_row: float = float(sampler_s_per_row)
        self.groups: list[tuple[int, int]] = [(int(w), int(n)) for w, n in groups]
        self.engine: EngineTerms | None = None
        self._prefill: dict[tuple[int, int], float] = {}
        self._lm: dict[int, float] = {}
        #: ``token_sum``'s answers by ``2 x tokens + graph`` (a step priced without a Python
        #: call; the keys it answered None for apart)
        self._tok: dict[int, float] = {}
        self._no_tok: set[int] = set()

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments (:func:`simulator.base.compiled_core.register_pickling`)."""
        return (self.capture_sizes, self.graph_mode, self.token_sum, self.op_sum,
                self.prefill_time, self.decode_total, self.attention, self.mla_extra,
                self.lm_head, self.sampler_s_per_row, self.groups), {}

    def in_graph(self, num_tokens: int, pure_decode: bool) -> bool:
        """Whether a step of ``num_tokens`` tokens replays a captured CUDA graph."""
        if not self.max_capture or num_tokens <= 0 or num_tokens > self.max_capture:
            return False
        mode = self.graph_mode
        if mode == "full":
            return pure_decode
        return mode == "full_and_piecewise" or mode == "piecewise"

    def padded(self, num_tokens: int) -> int:
        """The smallest capture size >= ``num_tokens`` (``num_tokens`` <= the largest)."""
        for c in self.capture_sizes:
            if c >= num_tokens:
                return c
        return num_tokens

    def token_seconds(self, tokens: int, graph: bool) -> float | None:
        """``token_sum(tokens, graph)``, remembered (:data:`TOKEN_MEMO_MAX` entries at most:
        the memo starts afresh when full; the values are the same either way)."""
        key = 2 * tokens + (1 if graph else 0)
        t = self._tok.get(key)
        if t is not None:
            return t
        if key in self._no_tok:
            return None
        got = self.token_sum(tokens, graph)
        if len(self._tok) + len(self._no_tok) >= TOKEN_MEMO_MAX:
            self._tok.clear()
            self._no_tok.clear()
        if got is None:
            self._no_tok.add(key)
        else:
            self._tok[key] = got
        return got

    def lm_head_seconds(self, rows: int) -> float:
        """LM head seconds of ``rows`` sampled rows (a function of the count: remembered)."""
        lm = self._lm.get(rows)
        if lm is None:
            lm = self._lm[rows] = self.lm_head(rows)
        return lm

    def prefill_total(self, prefill_q: list, prefill_start: list) -> float:
        """Prefill attention of a step's chunks summed over the layers (a sliding-window
        layer attends to at most ``window`` keys)."""
        t = 0.0
        memo = self._prefill
        for w, layers in self.groups:
            sub = 0.0
            for j in range(len(prefill_q)):
                q = int(prefill_q[j])
                s = int(prefill_start[j])
                if w:
                    s = min(s, max(w - q, 0))
                key = (q, s)
                p = memo.get(key)
                if p is None:
                    p = self.prefill_time(q, s)
                    if len(memo) >= PREFILL_MEMO_MAX:
                        memo.clear()   # bounded (the values are the same either way)
                    memo[key] = p
                sub += p
            t += layers * sub
        return t

    def decode_attention(self, num_decode: int, ctx_total: object, q_per_seq: int) -> float:
        """Seconds of a step's decode attention summed over the layers: the measured table's
        point by point (:class:`DecodeAttention`) for one-token decodes over an integer
        context, else the backend's ``decode_total`` (the same value where both apply)."""
        attention = self.attention
        if attention is not None and q_per_seq == 1 and type(ctx_total) is int:
            return attention.total(num_decode, ctx_total)  # type: ignore[arg-type]
        return float(self.decode_total(num_decode, ctx_total, q_per_seq))  # type: ignore

    def gpu_seconds(self, shape: object) -> float:
        """Seconds of one step's kernels, ``shape`` a
        :class:`~simulator.perf.step_shape.StepShape`."""
        prefill_q: list = shape.prefill_q  # type: ignore[attr-defined]
        prefill_start: list = shape.prefill_start  # type: ignore[attr-defined]
        nd: int = shape.num_decode  # type: ignore[attr-defined]
        qd: int = shape.decode_q_per_seq  # type: ignore[attr-defined]
        num_tokens = _num_tokens(prefill_q, nd, qd)
        pure = not prefill_q
        graph = self.in_graph(num_tokens, pure)
        tp = self.padded(num_tokens) if graph else num_tokens
        tok = self.token_seconds(tp, graph) if tp else None
        if tok is None:
            return self.op_sum(shape)
        t = tok + self.prefill_total(prefill_q, prefill_start)
        if nd:
            t = t + self.decode_attention(nd, shape.decode_ctx_total, qd)  # type: ignore
        else:
            t = t + 0.0
        mla = self.mla_extra
        if mla is not None:
            t = t + mla(prefill_q, prefill_start, nd * qd)
        rows: int = shape.num_sampled  # type: ignore[attr-defined]
        return t + self.lm_head_seconds(rows) + self.sampler_s_per_row * rows

    def seconds(self, shape: object) -> float:
        """Wall-clock seconds of one step (``engine`` set: the kernels and the engine's
        terms)."""
        engine = self.engine
        gpu = self.gpu_seconds(shape)
        if engine is None:
            raise ValueError("StepKernels.seconds needs the engine's terms")
        prefill_q: list = shape.prefill_q  # type: ignore[attr-defined]
        nd: int = shape.num_decode  # type: ignore[attr-defined]
        num_seqs = len(prefill_q) + nd
        return engine.seconds(gpu, num_seqs, _num_tokens(
            prefill_q, nd, shape.decode_q_per_seq))  # type: ignore[attr-defined]


def _num_tokens(prefill_q: list, num_decode: int, q_per_seq: int) -> int:
    """:attr:`StepShape.num_tokens <simulator.perf.step_shape.StepShape.num_tokens>` of a
    shape's fields (the same sum, in compiled code: no call of the property)."""
    return int(sum(prefill_q)) + num_decode * q_per_seq


register_pickling(EngineTerms, DecodeAttention, DecodeStepTimes, StepKernels)
