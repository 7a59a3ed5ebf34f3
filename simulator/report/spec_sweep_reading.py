"""The "Reading the numbers" bullets of the acceptance-economics report: every claim derived
from the sweep's own numbers.

Each ``_bullet_*`` function reads the sweep table (and the per-rate figures of the
speculative runs) and returns the *facts* of one bullet: which case holds and the numbers,
formatted; the wording is in ``templates/spec_sweep_reading.md.j2`` (one macro per bullet).
A bullet whose data are missing is left out (its function returns None).

The thresholds below decide how a number is *read* (when a step counts as memory-bound,
when a queue counts as built, ...). They are reading conventions of this report, not model
constants, and each sentence that uses one says so in its own words.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.summary import finite_float
from simulator.report.escape import Md
from simulator.report.render import render
from simulator.speculative.economics import ALL, CROSSOVER_TOLERANCE, crossovers

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["BOUND_TOLERANCE", "QUEUE_MIN", "reading_the_numbers"]

#: Relative margin beyond which a measured gain counts as above the batch-1 bound.
BOUND_TOLERANCE = 0.02
#: Busy-time mean of waiting requests from which a run counts as queueing.
QUEUE_MIN = 1.0
#: verify / plain below which a verification step reads as memory-bound ("nearly free").
_MEMORY_BOUND_VERIFY = 1.1
#: Relative gap within which the per-step estimate "tracks" the measured speedups.
_ESTIMATE_TRACKS = 0.10
#: A speculative batch below this fraction of the baseline's reads as smaller.
_SMALLER_BATCH = 0.9
#: Queues differing by less than these factors read as "about equal".
_QUEUE_LESS, _QUEUE_MORE = 0.9, 1.1
#: A gain above tokens-per-step x this reads as above even the tokens per step.
_ABOVE_TOKENS = 1.005
#: Largest relative gap of simulated vs closed-form tokens per step that reads as a match.
_TOKENS_MATCH = 0.02
#: Gain metrics named in the best/worst bullet: (column, label).
_EXPLAINED_METRICS: tuple[tuple[str, str], ...] = (
    ("tpot_speedup", "TPOT p50 speedup"),
    ("e2e_speedup", "E2E p50 speedup"),
    ("ttft_p99_gain", "TTFT p99 gain"),
    ("throughput_gain", "output throughput gain"),
)


def _x(v) -> str:
    return "n/a" if finite_float(v) is None else f"{float(v):.2f}x"


def _rates(rs: Sequence[float]) -> str:
    """``x1``, ``x1 and x2``, ``x1, x2 and x4``."""
    rs = [f"x{r:g}" for r in rs]
    return rs[0] if len(rs) == 1 else ", ".join(rs[:-1]) + " and " + rs[-1]


def _trend(g: float | None, tol: float) -> dict[str, str]:
    """Whether a gain improves, worsens or is unchanged within ``tol`` (and the gain)."""
    if g is None:
        return {"kind": "none", "g": ""}
    kind = "better" if g > 1.0 + tol else "worse" if g < 1.0 - tol else "same"
    return {"kind": kind, "g": f"{g:.2f}x"}


class _Sweep:
    """Lookups in a sweep table plus the per-rate figures of the speculative runs."""

    def __init__(self, df: pd.DataFrame, k: int, verify, prefill_share, step_counts, tol,
                 cross):
        self.df, self.k, self.tol = df, k, float(tol)
        self.verify = verify or {}
        self.prefill_share = prefill_share or {}
        self.step_counts = step_counts or {}
        self.cross = cross if cross is not None else crossovers(df)
        self.rates = sorted(float(r) for r in df["rate_scale"].unique())
        self.slices = sorted(n for n in df["slice"].unique() if n != ALL)
        self.lo, self.hi = (self.rates[0], self.rates[-1]) if self.rates else (None, None)

    def series(self, name: str, col: str) -> pd.Series:
        """``col`` of slice ``name`` indexed by rate (finite values, sorted by rate)."""
        import pandas as pd

        if col not in self.df.columns:
            return pd.Series(dtype=float)
        g = self.df[self.df["slice"] == name]
        sr = pd.Series(pd.to_numeric(g[col], errors="coerce").to_numpy(dtype=float),
                       index=g["rate_scale"].astype(float).to_numpy()).sort_index()
        return sr[np.isfinite(sr)]

    def v(self, col: str, rate: float, name: str = ALL) -> float | None:
        sr = self.series(name, col)
        return finite_float(sr.get(rate)) if rate in sr.index else None

    def vr(self, rate: float) -> tuple[float | None, float | None]:
        x = self.verify.get(rate)
        return (None, None) if not x else (finite_float(x[0]), finite_float(x[1]))

    def queue(self, rate: float) -> tuple[float | None, float | None]:
        return self.v("mean_num_waiting_base", rate), self.v("mean_num_waiting_spec", rate)

    def cost_ratio_batch1(self) -> float | None:
        """``c`` at batch 1 of the lowest rate (what the tokens-per-step table uses)."""
        sr = self.series(ALL, "draft_cost_ratio_batch1")
        return float(sr.iloc[0]) if len(sr) else None

    def bound(self, name: str) -> tuple[float | None, float | None]:
        """(E[tokens/step], E / (1 + k c)) of a slice; Nones where unknown."""
        e = self.series(name, "expected_tokens_per_step")
        c = self.cost_ratio_batch1()
        ev = float(e.iloc[0]) if len(e) else None
        return ev, (ev / (1.0 + self.k * c) if (ev is not None and c is not None) else None)


def _bullet_gains(t: _Sweep) -> dict | None:
    parts = []
    for col, label in _EXPLAINED_METRICS:
        sr = t.series(ALL, col)
        if sr.empty:
            continue
        if len(sr) == 1:
            parts.append({"label": label, "single": True, "value": _x(sr.iloc[0]),
                          "rate": f"{sr.index[0]:g}"})
        else:
            parts.append({"label": label, "single": False, "best_rate": f"{sr.idxmax():g}",
                          "best": _x(sr.max()), "worst_rate": f"{sr.idxmin():g}",
                          "worst": _x(sr.min())})
    return {"parts": parts} if parts else None


def _bullet_low_load(t: _Sweep) -> dict:
    lo = t.lo
    vl, dl = t.vr(lo)
    order = sorted(t.slices, key=lambda n: -(t.v("tpot_speedup", lo, n) or 0.0))
    with_tokens = [n for n in order if t.v("mean_acceptance_length", lo, n) is not None]
    return {
        "rate": f"{lo:g}", "k1": t.k + 1,
        "bb": finite_or_na(t.v("mean_batch_size_base", lo), "{:.1f}"),
        "bs": finite_or_na(t.v("mean_batch_size_spec", lo), "{:.1f}"),
        "verify": None if vl is None else f"{vl:.2f}", "memory_bound": vl is not None and
        vl < _MEMORY_BOUND_VERIFY, "draft": None if dl is None else f"{dl:.2f}",
        "tokens": [(f"{t.v('mean_acceptance_length', lo, n):.2f}", n) for n in with_tokens],
        "tpot": _trend(t.v("tpot_speedup", lo), t.tol),
        "by_slice": [(_x(t.v("tpot_speedup", lo, n)), n) for n in order],
    }


def finite_or_na(x, spec: str) -> str:
    """``spec.format(x)``, or ``n/a`` for a missing value."""
    return "n/a" if finite_float(x) is None else spec.format(float(x))


def _estimate(t: _Sweep, vh: float, dh: float, bb, bs) -> dict | None:
    """The per-step estimate E[tokens/step] / (verify + draft) at the highest load."""
    hi = t.hi
    est = {n: (t.v("mean_acceptance_length", hi, n) or 0.0) / (vh + dh)
           for n in t.slices if t.v("mean_acceptance_length", hi, n)}
    pairs = [(n, e, t.v("tpot_speedup", hi, n)) for n, e in est.items()
             if t.v("tpot_speedup", hi, n) is not None]
    if not pairs:
        return None
    rel = [m / e - 1.0 for _, e, m in pairs]
    if all(abs(r) <= _ESTIMATE_TRACKS for r in rel):
        case = "tracks"
    elif all(r < 0 for r in rel):
        case = "below"
    elif all(r > 0 for r in rel):
        case = "above"
    else:
        case = "both"
    n_pure, n_all = t.step_counts.get(hi, (None, None))
    return {"items": [(f"{e:.2f}x", n) for n, e, _ in pairs], "case": case,
            "counts": (f"{n_pure:,}", f"{n_all:,}") if n_pure is not None and n_all else None,
            "smaller": bs is not None and bb is not None and bs < bb}


def _bullet_high_load(t: _Sweep) -> dict | None:
    if t.hi == t.lo:
        return None
    hi = t.hi
    bb, bs = t.v("mean_batch_size_base", hi), t.v("mean_batch_size_spec", hi)
    vh, dh = t.vr(hi)
    est = _estimate(t, vh, dh, bb, bs) if (vh is not None and dh is not None
                                          and (vh + dh) > 0) else None
    return {"rate": f"{hi:g}", "k1": t.k + 1, "bb": finite_or_na(bb, "{:.0f}"),
            "bs": finite_or_na(bs, "{:.0f}"), "verify": None if vh is None else f"{vh:.2f}",
            "compute_bound": vh is not None and vh > _MEMORY_BOUND_VERIFY,
            "draft": None if dh is None else f"{dh:.2f}",
            "tpot": _trend(t.v("tpot_speedup", hi), t.tol),
            "by_slice": [(_x(t.v("tpot_speedup", hi, n)), n) for n in t.slices],
            "estimate": est}


def _bullet_bound(t: _Sweep) -> dict | None:
    items, above = [], []
    for n in t.slices or [ALL]:
        e, bound = t.bound(n)
        sr = t.series(n, "tpot_speedup")
        if bound is None or sr.empty:
            continue
        r_best, g_best = float(sr.idxmax()), float(sr.max())
        item = {"name": n, "best": f"{g_best:.2f}x", "rate": f"{r_best:g}",
                "bound": f"{bound:.2f}x", "tokens": None}
        if g_best > bound * (1 + BOUND_TOLERANCE):
            above.append((n, r_best))
            if e is not None and g_best > e * _ABOVE_TOKENS:
                item["tokens"] = f"{e:.2f}"
        items.append(item)
    if not items:
        return None
    c1 = t.cost_ratio_batch1()
    f: dict[str, Any] = {"c": None if c1 is None else f"{c1:.3f}", "items": items,
                         "above": bool(above), "several": len(above) != 1}
    rs = sorted({r for _, r in above})

    def smaller(r):
        s, b = t.v("mean_batch_size_spec", r), t.v("mean_batch_size_base", r)
        return s is not None and b is not None and s < _SMALLER_BATCH * b
    f["smaller"] = [(f"{r:g}", f"{t.v('mean_batch_size_spec', r):.1f}",
                     f"{t.v('mean_batch_size_base', r):.1f}") for r in rs if smaller(r)]
    others = [r for r in rs if not smaller(r)]
    f["others"] = _rates(others) if others else None
    vmax = [x for x in (t.vr(r)[0] for r in t.rates) if x is not None]
    f["verify_max"] = f"{max(vmax):.2f}" if vmax else None
    return f


def _bullet_queue(t: _Sweep) -> dict:
    qr = [(r, *t.queue(r)) for r in t.rates]
    qr = [(r, wb, ws) for r, wb, ws in qr if wb is not None and ws is not None
          and max(wb, ws) >= QUEUE_MIN]
    if not qr:
        return {"case": "none", "min": f"{QUEUE_MIN:g}"}
    r, wb, ws = max(qr, key=lambda q: max(q[1], q[2]))
    e2e, tp = t.v("e2e_speedup", r), t.v("tpot_speedup", r)
    f = {"rate": f"{r:g}", "wb": f"{wb:.0f}", "ws": f"{ws:.0f}",
         "e2e": _trend(e2e, t.tol), "tpot": _trend(tp, t.tol), "tpot_x": _x(tp)}
    if ws < _QUEUE_LESS * wb:
        f["case"] = "drains"
        f["compounds"] = e2e is not None and tp is not None and e2e > tp * (1 + t.tol)
        f["e2e_x"], f["tp_x"] = (f"{e2e:.2f}x", f"{tp:.2f}x") if f["compounds"] else ("", "")
    elif ws > _QUEUE_MORE * wb:
        f["case"] = "more"
    else:
        f["case"] = "equal"
    return f


def _bullet_slices(t: _Sweep) -> dict | None:
    if len(t.slices) < 2:
        return None
    low = min(t.slices, key=lambda n: t.bound(n)[0] or 0.0)
    e_low = t.bound(low)[0]
    cross = t.cross

    def status(n):
        return cross.get(n, {}).get("tpot_speedup", {}).get("status")
    crossed = sorted((cross[n]["tpot_speedup"]["rate"], n) for n in t.slices
                     if status(n) == "crossover")
    never = [n for n in t.slices if status(n) == "never_pays"]
    f: dict[str, Any] = {"low": low, "e_low": None if e_low is None else f"{e_low:.3f}",
                         "crossed": [(n, f"{r:.2f}") for r, n in crossed],
                         "first": crossed[0][1] if len(crossed) > 1 else None,
                         "never": never, "closest": None}
    if not crossed and not never:
        g_hi = {n: t.v("tpot_speedup", t.hi, n) for n in t.slices}
        g_hi = {n: g for n, g in g_hi.items() if g is not None}
        if g_hi:
            closest = min(g_hi, key=g_hi.get)
            f["closest"] = (closest, f"{t.hi:g}", f"{g_hi[closest]:.2f}x")
    return f


def _bullet_throughput(t: _Sweep) -> dict | None:
    tg = t.series(ALL, "throughput_gain")
    if tg.empty:
        return None
    tol, hi = t.tol, t.hi
    flat = [float(r) for r, g in tg.items() if abs(g - 1.0) <= tol]
    dev = tg[(tg - 1.0).abs() > tol]
    f: dict[str, Any] = {"tol": f"{tol:.0%}", "flat_all": dev.empty,
                         "flat": _rates(flat) if flat else None}
    if not dev.empty:
        r = float((dev - 1.0).abs().idxmax())
        g = float(tg[r])
        wb, ws = t.queue(r)
        mal = t.v("mean_acceptance_length", r)
        vv, dd = t.vr(r)
        over = wb is not None and ws is not None and max(wb, ws) >= QUEUE_MIN
        f.update(rate=f"{r:g}", g=f"{g:.2f}x", more=g > 1.0, over=over,
                 wb=f"{wb:.0f}" if over else "", ws=f"{ws:.0f}" if over else "",
                 grows=over and ((ws < wb) if g > 1.0 else (ws > wb)), per_step=None)
        if vv is not None and dd is not None and mal is not None and (vv + dd) > 0:
            f["per_step"] = (f"{vv:.2f}x", f"{dd:.2f}x", f"{mal:.2f}", f"{mal / (vv + dd):.2f}x")
    cr = t.v("cost_ratio", hi)
    f["cost"] = None if cr is None else {
        "rate": f"{hi:g}", "ratio": f"{cr:.3f}",
        "kind": "cheaper" if cr < 1 - tol else "dearer" if cr > 1 + tol else "same"}
    return f


def _bullet_ttft(t: _Sweep) -> dict | None:
    tt = t.series(ALL, "ttft_p99_gain")
    if tt.empty:
        return None
    tol, lo = t.tol, t.lo
    g_lo = finite_float(tt.get(lo))
    share = t.prefill_share.get(lo)
    f: dict[str, Any] = {"rate": f"{lo:g}", "trend": _trend(g_lo, tol),
                         "longer": g_lo is not None and g_lo < 1 - tol,
                         "share": f"{share:.1%}" if share else None, "worst": None,
                         "best": None}
    if len(tt) > 1:
        rw, gw = float(tt.idxmin()), float(tt.min())
        rb, gb = float(tt.idxmax()), float(tt.max())
        if gw < 1 - tol and rw != lo:
            wb, ws = t.queue(rw)
            more = wb is not None and ws is not None and ws >= QUEUE_MIN and ws > _QUEUE_MORE * wb
            f["worst"] = {"rate": f"{rw:g}", "g": f"{gw:.2f}x", "queue": (
                f"{ws:.0f}", f"{wb:.0f}") if more else None}
        if gb > 1 + tol and rb != lo:
            wb, ws = t.queue(rb)
            more = wb is not None and ws is not None and wb >= QUEUE_MIN and wb > _QUEUE_MORE * ws
            f["best"] = {"rate": f"{rb:g}", "g": f"{gb:.2f}x", "queue": (
                f"{wb:.0f}", f"{ws:.0f}") if more else None}
    tp = t.series(ALL, "tpot_speedup")
    trade = [r for r in tt.index if tt[r] < 1 - tol and tp.get(r, 0) > 1 + tol]
    both = [r for r in tt.index if tt[r] > 1 + tol and tp.get(r, 0) > 1 + tol]
    f["trade"] = _rates(trade) if trade else None
    f["both"] = _rates(both) if both else None
    return f


def _bullet_tokens(t: _Sweep) -> dict | None:
    devs = []
    for n in t.slices or [ALL]:
        e = t.series(n, "expected_tokens_per_step")
        m = t.series(n, "mean_acceptance_length")
        common = e.index.intersection(m.index)
        if len(common):
            devs.append((n, float(((m[common] - e[common]).abs() / e[common]).max())))
    if not devs:
        return None
    worst_n, worst_d = max(devs, key=lambda d: d[1])
    if worst_d <= _TOKENS_MATCH:
        return {"match": True, "d": f"{max(worst_d, 0.001):.1%}"}
    return {"match": False, "d": f"{worst_d:.1%}", "name": worst_n}


def reading_the_numbers(df: pd.DataFrame, k: int, *,
                        verify: Mapping[float, tuple[float, float] | None] | None = None,
                        draft_prefill_share: Mapping[float, float] | None = None,
                        step_counts: Mapping[float, tuple[int, int]] | None = None,
                        tolerance: float = CROSSOVER_TOLERANCE,
                        cross: Mapping[str, Any] | None = None) -> list[str]:
    """The "Reading the numbers" bullets, every claim derived from the sweep's own numbers.

    Parameters
    ----------
    df : pandas.DataFrame
        The sweep table (:func:`simulator.experiments.spec_sweep.sweep_rates`; missing
        columns and None values drop the sentences that need them).
    k : int
        Draft tokens per step.
    verify : mapping, optional
        ``{rate: (verify / plain, draft / plain)}`` of pure-decode drafting steps
        (:func:`simulator.speculative.economics.verify_over_plain`); without it the per-step
        cost clauses are left out.
    draft_prefill_share : mapping, optional
        ``{rate: draft prefill time / busy time}`` of the speculative run.
    step_counts : mapping, optional
        ``{rate: (pure-decode drafting steps, all steps)}`` of the speculative run.
    tolerance : float
        A gain within ``1 +- tolerance`` reads as unchanged.
    cross : mapping, optional
        :func:`simulator.speculative.economics.crossovers` of ``df`` (for the per-slice
        crossover sentence; computed here when not given).

    Returns
    -------
    list of Md
        Markdown bullets (``"- ..."``; values in them escaped).
    """
    t = _Sweep(df, k, verify, draft_prefill_share, step_counts, tolerance, cross)
    if not t.rates:
        return [Md("- No data: the sweep table is empty.")]
    bullets = [("gains", _bullet_gains(t)), ("low_load", _bullet_low_load(t)),
               ("high_load", _bullet_high_load(t)), ("bound", _bullet_bound(t)),
               ("queue", _bullet_queue(t)), ("slices", _bullet_slices(t)),
               ("throughput", _bullet_throughput(t)), ("ttft", _bullet_ttft(t)),
               ("tokens", _bullet_tokens(t))]
    text = render("spec_sweep_reading.md.j2", bullets=[b for b in bullets if b[1] is not None])
    return [Md(line) for line in text.splitlines() if line.strip()]
