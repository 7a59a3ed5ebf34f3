"""Where a run's busy time goes: compute-bound operators, memory-bound operators, overheads.

:func:`step_bottleneck` classifies every step on its own shape and weights it by its duration,
not one averaged step: a run mixes a few long prefill-heavy steps (compute-bound) with many
short pure-decode steps (memory-bound), and the average of the two shapes is neither. Steps are
binned by prefill tokens and decode sequences (powers of two, as
:func:`simulator.metrics.cost.phase_gpu_seconds` bins its mixed steps); each bin is evaluated
once, on its mean shape, and weighted by the bin's total step time, so a 300k-step run costs a
few dozen evaluations.

The run summary's ``bounds`` section (:func:`simulator.metrics.bounds.run_bounds`) and the
capacity plan's "Bottleneck" section (:mod:`simulator.planner.bottleneck`) both read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.metrics.columns import column_chunks, finite_column, finite_or
from simulator.metrics.cost import log2_bucket
from simulator.perf.step_shape import StepShape

__all__ = ["BOTTLENECK_KEYS", "OVERHEAD_TERMS", "step_bins", "step_bottleneck"]

#: Shares :meth:`RooflinePerfModel.bottleneck_shares` returns (they sum to 1).
BOTTLENECK_KEYS = ("compute_bound", "memory_bound", "overhead")

#: The ``op_times`` entries that make up the ``overhead`` share (what a model may have).
OVERHEAD_TERMS = ("all_reduce", "ep_comm", "engine_overhead", "cpu_overhead")


def step_bins(steps) -> tuple[float, _Bins] | None:
    """The step table's part of :func:`step_bottleneck`: its busy time (seconds, the sum of
    ``step_time_s``) and the steps' bins, or None without steps or step time. Reads the
    table only (no performance model): a long run's summary computes it on a second thread
    (:class:`~simulator.metrics.lanes.Lane`) while other parts of the summary are computed."""
    if steps is None or len(steps) == 0:
        return None
    busy = float(finite_column(steps, "step_time_s").sum())
    if not busy > 0:
        return None
    return busy, _Bins.of(steps)


def step_bottleneck(steps, perf, binned: tuple[float, _Bins] | None = None,
                    ) -> dict[str, Any] | None:
    """Compute-bound / memory-bound / overhead shares of a run's busy time, step by step.

    Each step is classified on a representative :class:`~simulator.perf.step_shape.StepShape`
    of its own composition: its prefill tokens split evenly over ``num_prefill_seqs`` chunks
    starting at position 0, and its decode sequences attending ``kv_tokens_used`` minus the
    step's prefill tokens (at least one token each). The step's time is split by
    ``perf.bottleneck_shares(shape)`` and the splits are summed, weighted by ``step_time_s``.
    To stay fast on long runs, steps are binned by (prefill tokens, decode sequences) in
    powers of two and each bin is evaluated once on its mean shape, weighted by its total
    step time.

    Parameters
    ----------
    steps : pandas.DataFrame
        The run's step table (``step_time_s``, ``num_prefill_tokens``, ``num_prefill_seqs``,
        ``num_decode_seqs``; ``num_decode_tokens`` and ``kv_tokens_used`` when present).
    perf : object
        A performance model with ``bottleneck_shares(StepShape) -> dict``.
    binned : (float, _Bins), optional
        :func:`step_bins` of ``steps``, when computed already.

    Returns
    -------
    dict or None
        ``compute_bound``, ``memory_bound``, ``overhead``: shares of busy time (sum 1);
        ``prefill_steps`` and ``decode_steps``: for the steps with prefill work and the
        pure-decode steps, ``time_share`` (of busy time), ``step_share`` (of steps), the
        three shares within that group's time, ``mean_prefill_tokens`` and
        ``mean_decode_seqs``; ``overhead_terms``: the parts of ``overhead`` the model has
        (``all_reduce``, ``ep_comm``, ``engine_overhead``, ``cpu_overhead``: shares of busy
        time, only those with time; none at TP=1 for the all-reduce); ``busy_time_s``,
        ``num_steps``, ``num_bins``, ``method``. None without steps, without step time or
        when the model cannot classify a shape (``perf.source: constant`` has no operators:
        no ``bottleneck_shares``).
    """
    if steps is None or len(steps) == 0 or not hasattr(perf, "bottleneck_shares"):
        return None
    if binned is None:
        binned = step_bins(steps)
    if binned is None:
        return None
    busy, bins = binned
    acc = {"all": np.zeros(3), "prefill": np.zeros(3), "decode": np.zeros(3)}
    terms: dict[str, float] = {}
    for b in range(bins.num_bins):
        w = float(bins.time[b])
        if w <= 0:
            continue
        shape = bins.shape(b)
        if shape.num_tokens <= 0:
            continue
        try:
            sh = perf.bottleneck_shares(shape)
            parts = _overhead_parts(perf, shape)
        except Exception:  # noqa: BLE001 - a perf model without the method's inputs
            return None
        v = np.array([float(sh.get(k, 0.0)) for k in BOTTLENECK_KEYS]) * w
        acc["all"] += v
        acc["prefill" if bins.prefill[b] else "decode"] += v
        for k, f in parts.items():
            terms[k] = terms.get(k, 0.0) + f * w
    tot = float(acc["all"].sum())
    if not tot > 0:
        return None
    out: dict[str, Any] = {k: float(acc["all"][i]) / tot for i, k in enumerate(BOTTLENECK_KEYS)}
    out.update({"prefill_steps": bins.group_shares(True, acc["prefill"], busy),
                "decode_steps": bins.group_shares(False, acc["decode"], busy),
                "overhead_terms": {k: terms[k] / tot for k in OVERHEAD_TERMS
                                   if terms.get(k, 0.0) > 0},
                "busy_time_s": busy, "num_steps": len(steps), "num_bins": bins.num_bins,
                "method": "time-weighted per step (binned)"})
    return out


#: Columns the bins read (those a table has), and their value where a cell is missing (NaN:
#: not counted in its sum, as :func:`_col` reads them).
_BIN_DEFAULTS = {"num_prefill_tokens": 0.0, "num_decode_seqs": 0.0, "num_prefill_seqs": 0.0,
                 "step_time_s": 0.0, "num_decode_tokens": np.nan, "kv_tokens_used": np.nan}
_BIN_COLUMNS = tuple(_BIN_DEFAULTS)

#: The largest bin key: ``64 x 1024 + 1024`` (:func:`log2_bucket` of a float64 is at most its
#: largest binary exponent, 1024).
MAX_KEY = 64 * 1024 + 1024

#: Rows of the step table the bins read at a time.
CHUNK_ROWS = 1 << 20


def _column_chunks(steps, names: list[str]):
    """Consecutive row chunks of the columns ``names`` of ``steps`` (every other bin column
    filled with its :data:`_BIN_DEFAULTS` value), each a dict of fresh float64 arrays with
    NaN read as that value: what :func:`_col` reads, :data:`CHUNK_ROWS` rows at a time (a
    spooled :class:`~simulator.metrics.step_table.StepTable` read a slice at a time)."""
    n = len(steps)
    if hasattr(steps, "column_slices"):
        for chunk in column_chunks(steps, names, CHUNK_ROWS):
            out = {c: finite_or(np.array(v, dtype=np.float64), _BIN_DEFAULTS[c])
                   for c, v in chunk.items()}
            yield _fill(out, len(out[names[0]]))
        return
    for a in range(0, n, CHUNK_ROWS):
        part = steps.iloc[a:a + CHUNK_ROWS]
        yield _fill({c: finite_column(part, c, _BIN_DEFAULTS[c]) for c in names}, len(part))


def _fill(chunk: dict, rows: int) -> dict:
    for c, v in _BIN_DEFAULTS.items():
        if c not in chunk:
            chunk[c] = np.full(rows, v, dtype=float)
    return chunk


@dataclass
class _Bins:
    """Per-bin sums of a step table's columns (bins: :func:`log2_bucket` of prefill tokens x
    decode sequences, in ascending key order), read one column at a time so a long table
    costs a few step-length arrays at once, not one per column. The columns are
    integer-valued (token and sequence counts), so every sum and mean is exact whatever the
    summation order; only ``time`` (seconds) is not."""

    count: np.ndarray       # steps per bin
    time: np.ndarray        # step time per bin (s)
    prefill: np.ndarray     # bool: the bin's steps have prefill work
    pf: np.ndarray          # prefill tokens
    nps: np.ndarray         # prefill sequences (chunks)
    nd: np.ndarray          # decode sequences
    dec_tok: np.ndarray     # decode tokens of the steps with a count and decode sequences
    dec_seq: np.ndarray     # decode sequences of those steps
    ctx_sum: np.ndarray | None  # decode context (KV tokens less prefill, >= one a sequence)
    ctx_num: np.ndarray | None  # steps with a finite context

    @property
    def num_bins(self) -> int:
        return len(self.count)

    @classmethod
    def of(cls, steps) -> _Bins:
        """The bins of a non-empty step table (DataFrame or StepTable).

        A bin's key is ``64 x bucket(prefill tokens) + bucket(decode sequences)``, a small
        non-negative integer (:data:`MAX_KEY` at most), so the per-bin sums accumulate into
        arrays indexed by the key itself, with no sort of the keys, and the table is read
        :data:`CHUNK_ROWS` rows of the columns it needs at a time: a few megabytes at once
        instead of several step-length arrays (a million-request run has 20M steps: 160 MB
        an array). Each sum adds its bin's values in table order (``numpy.add.at``
        accumulates element by element, continuing across chunks), the additions a sort by
        key made before, so every sum is the same to the bit."""
        names = [c for c in _BIN_COLUMNS if c in steps.columns]
        has_tok = "num_decode_tokens" in names
        has_ctx = "kv_tokens_used" in names
        acc = {k: np.zeros(MAX_KEY + 1) for k in ("count", "time", "pf", "nps", "nd",
                                                  "dec_tok", "dec_seq", "ctx_sum", "ctx_num")}
        for c in _column_chunks(steps, names):
            pf, nd = c["num_prefill_tokens"], c["num_decode_seqs"]
            key = log2_bucket(pf)
            key *= 64
            key += log2_bucket(nd)
            acc["count"] += np.bincount(key, minlength=MAX_KEY + 1)
            np.add.at(acc["time"], key, c["step_time_s"])
            np.add.at(acc["pf"], key, pf)
            np.add.at(acc["nps"], key, c["num_prefill_seqs"])
            np.add.at(acc["nd"], key, nd)
            if has_tok:
                tok = c["num_decode_tokens"]
                ok = (nd > 0) & np.isfinite(tok)
            else:  # one token a sequence
                tok, ok = nd, nd > 0
            np.add.at(acc["dec_tok"], key, np.where(ok, tok, 0.0))
            np.add.at(acc["dec_seq"], key, np.where(ok, nd, 0.0))
            if has_ctx:
                ctx = c["kv_tokens_used"]
                ctx -= pf
                np.maximum(ctx, nd, out=ctx)
                fin = np.isfinite(ctx)
                np.add.at(acc["ctx_sum"], key, np.where(fin, ctx, 0.0))
                np.add.at(acc["ctx_num"], key, fin.astype(float))
        keys = np.flatnonzero(acc["count"])
        got = {k: v[keys] for k, v in acc.items()}
        return cls(count=got["count"], time=got["time"], prefill=keys >= 64, pf=got["pf"],
                   nps=got["nps"], nd=got["nd"], dec_tok=got["dec_tok"],
                   dec_seq=got["dec_seq"], ctx_sum=got["ctx_sum"] if has_ctx else None,
                   ctx_num=got["ctx_num"] if has_ctx else None)

    def shape(self, b: int) -> StepShape:
        """The mean shape of bin ``b``: its mean prefill tokens split evenly over its mean
        number of chunks (each from position 0), its mean decode sequences with the mean
        tokens per sequence (speculative steps verify several) and the mean context (KV
        tokens used less the step's prefill; one token each without)."""
        c = self.count[b]
        q = float(self.pf[b] / c)
        n_dec = round(float(self.nd[b] / c))
        if q > 0:
            n_chunks = max(1, round(float(self.nps[b] / c)))
            qi = max(1, round(q / n_chunks))
            pq, ps = [qi] * n_chunks, [0] * n_chunks
        else:
            pq, ps = [], []
        q_per = 1
        if n_dec > 0 and self.dec_seq[b] > 0:
            q_per = max(1, round(float(self.dec_tok[b] / self.dec_seq[b])))
        ctx_total = n_dec
        if self.ctx_sum is not None and n_dec > 0 and self.ctx_num[b] > 0:
            ctx_total = round(float(self.ctx_sum[b] / self.ctx_num[b]))
        return StepShape(prefill_q=pq, prefill_start=ps, num_decode=n_dec,
                         decode_ctx_total=max(ctx_total, n_dec), decode_q_per_seq=q_per,
                         num_sampled=n_dec * q_per + len(pq))

    def group_shares(self, prefill: bool, a: np.ndarray, busy: float) -> dict[str, Any]:
        """One group of steps (those with prefill work, or the pure-decode ones): its share of
        busy time and of steps, its mean composition and the shares within its time of the
        bottleneck sums ``a``."""
        g = self.prefill == prefill
        n = float(self.count[g].sum())
        s = float(a.sum())
        out = {"time_share": float(self.time[g].sum()) / busy,
               "step_share": n / float(self.count.sum()),
               "mean_prefill_tokens": float(self.pf[g].sum() / n) if n else None,
               "mean_decode_seqs": float(self.nd[g].sum() / n) if n else None}
        out.update({k: (float(a[i]) / s if s > 0 else None)
                    for i, k in enumerate(BOTTLENECK_KEYS)})
        return out


def _overhead_parts(perf, shape: StepShape) -> dict[str, float]:
    """Shares of ``shape``'s step time in each :data:`OVERHEAD_TERMS` entry the model has
    (from ``perf.op_times``; empty without it)."""
    if not hasattr(perf, "op_times"):
        return {}
    times = perf.op_times(shape)
    tot = float(sum(times.values()))
    if not tot > 0:
        return {}
    return {k: float(times[k]) / tot for k in OVERHEAD_TERMS if times.get(k, 0.0) > 0}
