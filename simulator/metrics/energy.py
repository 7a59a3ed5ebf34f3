"""GPU energy and power of a run: each step's busy power times its time, plus idle power over
the time each replica is held but not stepping (DESIGN.md section 3d).

``joules = sum over steps of P_busy(step) x (step time inside the window) x GPUs per replica
+ idle_w x GPUs per replica x (held time inside the window - busy time inside it)`` summed
over replicas, with ``P_busy`` from :mod:`simulator.perf.power` and the held time from each
replica's :class:`~simulator.metrics.fleet.ReplicaSpan` (provisioned to released) clipped to
the window. Power over time is the energy of each ``resolution_s`` bin of the window over the
bin's length (``peak_power_w`` is the largest, so it is a mean over ``resolution_s``, not an
instantaneous peak). The step table is read in row chunks of arrays
(:func:`~simulator.metrics.columns.column_chunks`), never whole.

Glossary (DESIGN.md section 4): ``joules_per_output_token`` = GPU energy over the window /
output tokens of the requests finishing in it.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.metrics.columns import column_chunks, finite_or
from simulator.metrics.fleet import ReplicaSpan, replica_seconds
from simulator.perf.power import PowerModel, StepWork, step_power_w, step_utilisation, step_work

__all__ = ["EnergyParams", "EnergyProfile", "energy_profile", "energy_summary",
           "unavailable_energy"]

#: seconds per power bin (``peak_power_w`` is the largest mean power over one bin)
DEFAULT_RESOLUTION_S = 1.0
#: rows of the step table read at a time
CHUNK_ROWS = 1 << 18
#: most bin additions :func:`_spread` gathers at once for the steps crossing a bin edge (16
#: bytes each: fine bins under long steps add a whole bin each)
SPREAD_ADDS = 1 << 20
#: most power bins of a profile (8 MiB an array); a longer window gets longer bins (the
#: summary's ``peak_power_resolution_s`` and a note say so): 1 s bins cover 12 days
MAX_BINS = 1 << 20
_COLS = ("replica_id", "start_time_s", "end_time_s", "num_prefill_tokens", "num_decode_tokens",
         "num_prefill_seqs", "num_decode_seqs", "kv_tokens_used")


@dataclass(frozen=True)
class EnergyParams:
    """What prices a step's power: the GPU's power model, the model's work per step, the
    GPU's peaks, GPUs per replica and the power limit.

    Attributes
    ----------
    power : PowerModel
    work : StepWork
        Per-GPU work of one TP group's step (all layers).
    peak_flops_per_s, hbm_bytes_per_s : float
        The GPU's datasheet peaks (uncapped: a cap's slowdown shows in the step times).
    tensor_parallel_size, pipeline_parallel_size : int
        A replica holds ``tp x pp`` GPUs; each stage holds ``1 / pp`` of the layers.
    limit_w : float or None
        Power limit (``hardware.power_cap_w``; default the model's ``limit_w``).
    idle_w : float or None
        Idle power per GPU (``hardware.idle_power_w``, else the model's); None: not counted.
    idle_stated : bool
        ``idle_w`` came from the scenario.
    """

    power: PowerModel
    work: StepWork
    peak_flops_per_s: float
    hbm_bytes_per_s: float
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    limit_w: float | None = None
    idle_w: float | None = None
    idle_stated: bool = False

    @property
    def gpus_per_replica(self) -> int:
        return int(self.tensor_parallel_size) * int(self.pipeline_parallel_size)


@dataclass
class EnergyProfile:
    """Energy of some replicas over a window, and its per-bin profile (additive over pools).

    ``busy_j`` / ``idle_j``: joules; ``bins_j``: joules per bin of ``resolution_s`` from
    ``t0`` (the last bin may be shorter); ``busy_s`` / ``held_s``: replica-seconds stepping /
    held inside the window; ``idle_counted``: whether ``idle_j`` covers the idle time."""

    t0: float
    t1: float
    resolution_s: float
    busy_j: float = 0.0
    idle_j: float = 0.0
    busy_s: float = 0.0
    held_s: float = 0.0
    gpus: int = 0
    idle_counted: bool = True
    bins_j: np.ndarray = field(default_factory=lambda: np.zeros(0))
    notes: list[str] = field(default_factory=list)

    def __add__(self, other: EnergyProfile) -> EnergyProfile:
        if (self.t0, self.t1, self.resolution_s) != (other.t0, other.t1, other.resolution_s):
            raise ValueError("energy profiles of different windows cannot be added")
        return EnergyProfile(self.t0, self.t1, self.resolution_s, self.busy_j + other.busy_j,
                             self.idle_j + other.idle_j, self.busy_s + other.busy_s,
                             self.held_s + other.held_s, self.gpus + other.gpus,
                             self.idle_counted and other.idle_counted,
                             self.bins_j + other.bins_j,
                             list(dict.fromkeys(self.notes + other.notes)))


def _bin_edges(t0: float, t1: float, resolution_s: float) -> np.ndarray:
    n = max(1, math.ceil((t1 - t0) / resolution_s - 1e-9))
    edges = t0 + resolution_s * np.arange(n + 1, dtype=float)
    edges[-1] = t1
    return edges


def _bin_places(edges: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple:
    """Where the intervals ``[s, e]`` fall among the bins of ``edges`` (:func:`_spread`'s
    input, shared by the spreads of the same intervals): each one's first and last bin, the
    mask of those inside one bin, their first bins, and the positions of the others."""
    nb = len(edges) - 1
    a = np.searchsorted(edges, s, side="right") - 1
    b = np.searchsorted(edges, e, side="right") - 1
    np.clip(a, 0, nb - 1, out=a)
    np.clip(b, 0, nb - 1, out=b)
    one = a == b
    return a, b, one, a[one], np.flatnonzero(~one)


def _spread(bins: np.ndarray, edges: np.ndarray, s: np.ndarray, e: np.ndarray,
            rate: np.ndarray, places: tuple | None = None) -> None:
    """Add ``rate x |[s, e] ∩ bin|`` to each bin (``s <= e`` inside ``[edges[0], edges[-1]]``);
    ``places``: :func:`_bin_places` of the same intervals, when computed already.

    The intervals inside one bin are added first, in order; then each interval that crosses
    a bin edge adds its part in its first bin, its part in its last, then each whole bin
    between, interval after interval: ``numpy.add.at`` over that sequence (it adds element
    by element, in sequence order; consecutive groups of at most about :data:`SPREAD_ADDS`
    additions), the additions a loop over the crossing intervals made one at a time (2.7
    million in the ServeGen day, 1 s bins: 4.3 s of its summary), so every bin's sum is the
    same to the bit."""
    if not len(s):
        return
    a, b, one, a_one, cross = _bin_places(edges, s, e) if places is None else places
    np.add.at(bins, a_one, rate[one] * (e[one] - s[one]))
    if not cross.size:  # steps crossing a bin edge (few: steps are ms long)
        return
    # consecutive groups of crossing intervals, each adding at most about SPREAD_ADDS values
    # at once (fine bins under long steps: a whole bin each), in order: the same additions
    ends = np.cumsum(b[cross] - a[cross] + 1)
    i = 0
    while i < cross.size:
        j = int(np.searchsorted(ends, (ends[i - 1] if i else 0) + SPREAD_ADDS, side="right"))
        j = max(j, i + 1)
        _add_crossing(bins, edges, s, e, rate, a, b, cross[i:j])
        i = j


def _add_crossing(bins: np.ndarray, edges: np.ndarray, s: np.ndarray, e: np.ndarray,
                  rate: np.ndarray, a: np.ndarray, b: np.ndarray, cross: np.ndarray) -> None:
    """:func:`_spread`'s additions of the intervals ``cross`` (each crossing a bin edge), in
    order: one ``numpy.add.at`` over them."""
    ai, bi, r = a[cross], b[cross], rate[cross]
    mid = bi - ai - 1  # whole bins between an interval's first and last
    per = mid + 2      # additions of each interval
    first = np.cumsum(per) - per
    idx = np.empty(int(per.sum()), dtype=np.int64)
    val = np.empty(idx.size)
    idx[first], val[first] = ai, r * (edges[ai + 1] - s[cross])
    idx[first + 1], val[first + 1] = bi, r * (e[cross] - edges[bi])
    if mid.any():
        m = np.flatnonzero(mid)
        n = mid[m]
        j = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        k = np.repeat(ai[m] + 1, n) + j  # the whole bins, in order
        pos = np.repeat(first[m] + 2, n) + j
        idx[pos], val[pos] = k, np.repeat(r[m], n) * (edges[k + 1] - edges[k])
    np.add.at(bins, idx, val)


def _chunks(steps, rows: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Row chunks of a step table of ``rows`` rows (default :data:`CHUNK_ROWS`), each
    ``{column: array}`` of the columns of :data:`_COLS` it has: a :class:`StepTable` read a
    slice at a time (:meth:`~simulator.metrics.step_table.StepTable.column_slices`; no
    DataFrame is built for a chunk), a DataFrame's slices as arrays."""
    if steps is None or len(steps) == 0:
        return
    rows = CHUNK_ROWS if rows is None else rows
    names = [c for c in _COLS if c in steps.columns]
    if hasattr(steps, "column_slices"):
        yield from column_chunks(steps, names, rows)
        return
    for a in range(0, len(steps), rows):
        part = steps.iloc[a:a + rows]
        yield {c: part[c].to_numpy() for c in names}


def _col(chunk: dict[str, np.ndarray], name: str) -> np.ndarray:
    """Column ``name`` of a chunk as a fresh float64 array (NaN as 0, infinities as the
    largest finite floats); zeros when the table lacks it."""
    if name in chunk:
        return finite_or(np.array(chunk[name], dtype=float))
    if name == "kv_tokens_used":
        raise ValueError("the step table lacks kv_tokens_used: energy needs the KV tokens "
                         "each step reads")
    return np.zeros(len(chunk["replica_id"]))


def _missing_ids(rid: np.ndarray, known: set) -> set:
    """The replica ids of ``rid`` not in ``known``: none when every integer from the least
    id to the largest is known (a table sorted by replica: a chunk holds one or two ids;
    ``numpy.unique`` sorted each chunk's million ids, 1.1 s of the ServeGen day's summary),
    else those of ``numpy.unique``."""
    if rid.dtype.kind in "iu":  # integer ids (a float column may hold NaN or fractions)
        lo, hi = int(rid.min()), int(rid.max())
        if hi - lo < len(known) and all(i in known for i in range(lo, hi + 1)):
            return set()
    return set(np.unique(rid).tolist()) - known


def _add_busy(prof: EnergyProfile, bins_j: np.ndarray, edges: np.ndarray, steps,
              params: EnergyParams, ids: tuple[float, float], known: set) -> np.ndarray:
    """Add the busy energy of the steps (of replicas ``lo <= id < hi``) inside the window to
    ``prof`` and ``bins_j``; return the busy replica-seconds per bin. The step table is read
    in row chunks."""
    lo, hi = ids
    t0, t1 = prof.t0, prof.t1
    g = params.gpus_per_replica
    pp = max(1, int(params.pipeline_parallel_size))
    busy_bins = np.zeros(len(edges) - 1)
    for ch in _chunks(steps):
        rid = ch["replica_id"]
        keep = (rid >= lo) & (rid < hi)
        start = np.asarray(ch["start_time_s"], dtype=float)
        end = np.asarray(ch["end_time_s"], dtype=float)
        s, e = np.maximum(start, t0), np.minimum(end, t1)
        keep &= e > s
        if not keep.any():
            continue
        rid, s, e = rid[keep], s[keep], e[keep]
        missing = _missing_ids(rid, known)
        if missing:
            raise ValueError(f"replica(s) {sorted(missing)[:5]} stepped but have no replica "
                             "span: their held time (and idle energy) is unknown")
        c = {k: _col(ch, k)[keep] for k in _COLS[3:]}
        flops, byts = step_work(params.work, c["num_prefill_tokens"], c["num_decode_tokens"],
                                c["num_prefill_seqs"], c["num_decode_seqs"], c["kv_tokens_used"])
        uc, um = step_utilisation(flops / pp, byts / pp, (end - start)[keep],
                                  params.peak_flops_per_s, params.hbm_bytes_per_s)
        p_rep = step_power_w(params.power, uc, um, params.limit_w) * g  # W per replica
        dur = e - s
        # a pairwise sum, not np.dot: BLAS splits a long dot product over threads, so its
        # last bits would depend on the machine's core count (byte-identical outputs)
        prof.busy_j += float(np.sum(p_rep * dur))
        prof.busy_s += float(dur.sum())
        places = _bin_places(edges, s, e)  # the same steps' bins for both spreads
        _spread(bins_j, edges, s, e, p_rep, places)
        _spread(busy_bins, edges, s, e, np.ones_like(s), places)
    return busy_bins


def energy_profile(steps, spans: Sequence[ReplicaSpan], window: tuple[float, float],
                   params: EnergyParams, *, replica_ids: tuple[int, int] | None = None,
                   resolution_s: float = DEFAULT_RESOLUTION_S) -> EnergyProfile:
    """Energy of a run's replicas over ``window`` (see the module docstring).

    Parameters
    ----------
    steps : pandas.DataFrame or StepTable
        The run's step table (``replica_id``, ``start_time_s``, ``end_time_s``, token and
        sequence counts, ``kv_tokens_used``).
    spans : sequence of ReplicaSpan
        Every replica's life; a replica with steps must have one.
    window : (float, float)
        Seconds ``(t0, t1)``, ``t1 >= t0``.
    params : EnergyParams
    replica_ids : (int, int), optional
        Only the replicas with ``lo <= replica_id < hi`` (steps and spans), e.g. a degrade
        fallback set priced with its own GPU.
    resolution_s : float
        Bin length of the power profile (s, > 0).

    Raises
    ------
    ValueError
        A window that ends before it starts, a non-positive resolution, a step of a replica
        with no span, or a step table without ``kv_tokens_used``.
    """
    t0, t1 = float(window[0]), float(window[1])
    if not t1 >= t0:
        raise ValueError(f"energy window ends ({t1}) before it starts ({t0})")
    if not resolution_s > 0:
        raise ValueError(f"energy resolution_s must be > 0, got {resolution_s}")
    if (t1 - t0) / resolution_s > MAX_BINS:
        coarse = (t1 - t0) / MAX_BINS
        note = (f"peak power is over {coarse:.3g} s bins, not {resolution_s:g} s: the window "
                f"({t1 - t0:.3g} s) is too long for more than {MAX_BINS:,} bins")
        resolution_s = coarse
    else:
        note = None
    lo, hi = replica_ids if replica_ids is not None else (-math.inf, math.inf)
    spans = [s for s in spans if lo <= s.replica_id < hi]
    known = {s.replica_id for s in spans}
    edges = _bin_edges(t0, t1, resolution_s)
    bins_j = np.zeros(len(edges) - 1)
    g = params.gpus_per_replica
    pp = max(1, int(params.pipeline_parallel_size))
    prof = EnergyProfile(t0, t1, float(resolution_s), gpus=g * len(spans))
    if note:
        prof.notes.append(note)
    busy_bins = _add_busy(prof, bins_j, edges, steps, params, (lo, hi), known)
    prof.held_s = replica_seconds(spans, t0, t1)
    held_bins = np.zeros(len(edges) - 1)
    for sp in spans:
        a, b = max(sp.provisioned_s, t0), min(sp.released_s, t1)
        if b > a:
            _spread(held_bins, edges, np.array([a]), np.array([b]), np.ones(1))
    over = max(0.0, prof.busy_s - prof.held_s)
    if pp > 1:
        prof.notes.append(f"pipeline parallel ({pp} stages): every stage is taken as busy for "
                          "each whole step, each with 1/pp of the step's work")
    if over > 1e-6 * max(prof.held_s, 1.0):
        prof.notes.append(f"steps overlap in time ({over:.3g} replica-s more busy than held): "
                          "idle time is clipped at 0")
    idle_s_bins = np.maximum(held_bins - busy_bins, 0.0)
    if params.idle_w is None:
        prof.idle_counted = False
        prof.idle_j = 0.0
    else:
        rate = float(params.idle_w) * g
        prof.idle_j = float(idle_s_bins.sum() * rate)
        bins_j += idle_s_bins * rate
    prof.bins_j = bins_j
    return prof


def unavailable_energy(reason: str) -> dict[str, Any]:
    """The summary's ``energy`` block when energy is not modelled (and why)."""
    return {"available": False, "reason": reason}


def _power_models(params_by_pool: Mapping[str, EnergyParams]) -> dict[str, Any]:
    """The summary's ``power_model``: one run's constants, fit and sources (one per pool with
    pools)."""
    models = {k: {"gpu": v.power.gpu, "static_w": v.power.static_w,
                  "compute_w": v.power.compute_w, "memory_w": v.power.memory_w,
                  "limit_w": v.limit_w if v.limit_w is not None else v.power.limit_w,
                  "idle_w": v.idle_w, "idle_stated": v.idle_stated,
                  "fit": dict(v.power.fit), "sources": list(v.power.sources)}
              for k, v in params_by_pool.items()}
    return models[""] if list(models) == [""] else models


def energy_summary(profiles: Mapping[str, EnergyProfile], *, num_output_tokens: float,
                   params_by_pool: Mapping[str, EnergyParams] | None = None,
                   usd_per_kwh: float | None = None, power_cap_w: float | None = None
                   ) -> dict[str, Any]:
    """The run summary's ``energy`` block from one profile per pool (one, ``""``, without
    pools).

    Returns
    -------
    dict
        ``available`` (True), ``energy_j``, ``energy_kwh``, ``busy_energy_j``,
        ``idle_energy_j`` (None when idle power is not known for a GPU), ``idle_counted``,
        ``joules_per_output_token``, ``mean_power_w`` (energy / window), ``peak_power_w`` (the
        largest mean power over one ``peak_power_resolution_s`` bin), ``busy_share`` (busy
        replica-seconds / held replica-seconds), ``duration_s``, ``kwh_per_day`` (only for a
        window of at least a day: energy per 86,400 s; else None and ``kwh_per_day_note``
        says why), ``usd_per_kwh`` and ``energy_cost_usd`` (None without a price),
        ``power_cap_w``, ``power_model`` (the constants, their fit record and sources; one
        per pool with pools), ``by_pool`` (per pool: energy, mean and peak power, J per output token is
        not split: pools share requests), ``notes``.
    """
    items = list(profiles.items())
    total = items[0][1]
    for _, p in items[1:]:
        total = total + p
    dur = total.t1 - total.t0
    energy = total.busy_j + total.idle_j

    def power(p: EnergyProfile) -> tuple[float | None, float | None]:
        if dur <= 0 or not len(p.bins_j):
            return None, None
        widths = np.diff(_bin_edges(p.t0, p.t1, p.resolution_s))
        with np.errstate(divide="ignore", invalid="ignore"):
            pw = np.where(widths > 0, p.bins_j / widths, 0.0)
        return (p.busy_j + p.idle_j) / dur, float(pw.max())

    mean_w, peak_w = power(total)
    notes = list(total.notes)
    if not total.idle_counted:
        notes.append("idle power of a GPU is not known (no sourced figure; state "
                     "hardware.idle_power_w): idle energy is not counted, energy is busy only")
    day = 86400.0
    out: dict[str, Any] = {
        "available": True,
        "energy_j": energy,
        "energy_kwh": energy / 3.6e6,
        "busy_energy_j": total.busy_j,
        "idle_energy_j": total.idle_j if total.idle_counted else None,
        "idle_counted": total.idle_counted,
        "joules_per_output_token": (energy / num_output_tokens if num_output_tokens else None),
        "mean_power_w": mean_w,
        "peak_power_w": peak_w,
        "peak_power_resolution_s": total.resolution_s,
        "busy_share": (total.busy_s / total.held_s if total.held_s > 0 else None),
        "duration_s": dur,
        "kwh_per_day": (energy / 3.6e6 * day / dur if dur >= day else None),
        "kwh_per_day_note": (None if dur >= day else
                             f"the window is {dur / 3600:.3g} h, shorter than a day: kWh per "
                             "day is not extrapolated from it"),
        "usd_per_kwh": usd_per_kwh,
        "energy_cost_usd": (energy / 3.6e6 * usd_per_kwh if usd_per_kwh is not None else None),
        "power_cap_w": power_cap_w,
        "notes": notes,
    }
    if params_by_pool:
        out["power_model"] = _power_models(params_by_pool)
    if len(items) > 1:
        out["by_pool"] = {}
        for name, p in items:
            m, pk = power(p)
            out["by_pool"][name] = {"energy_j": p.busy_j + p.idle_j,
                                    "energy_kwh": (p.busy_j + p.idle_j) / 3.6e6,
                                    "mean_power_w": m, "peak_power_w": pk, "gpus": p.gpus,
                                    "idle_counted": p.idle_counted}
    return out
