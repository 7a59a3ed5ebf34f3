"""Days of traffic from shorter traces: tiling a trace to a length, and rate-shaping any
workload by a diurnal profile (a curve of relative rate over the time of day).

Tiling (``workload.tile_to_s``)
-------------------------------
A trace of ``N`` rows whose arrivals span ``[t_first, t_last]`` repeats with period
``P = (t_last - t_first) x N / (N - 1)`` (its span plus one mean gap, so the tiled trace keeps
the trace's mean rate ``N / P``; ``workload.tile_period_s`` states ``P`` instead). Copy
``k = 0, 1, ...`` holds every row at ``t + k x P``; rows at ``t - t_first >= tile_to_s``
are dropped (a session by its first turn). Copy 0 is the trace itself; every copy keeps
each row's content (lengths, labels, source line) and gets its own request ids (they are
the row order, and copies do not interleave), its own session ids (``sid + k x (max sid +
1)``) and its own prefix block ids (copy ``k > 0``: ``splitmix64(id XOR splitmix64(k)) >>
1``), so a copy shares KV prefixes within itself as the trace does, never with another
copy (a real prompt is not repeated verbatim an hour later). Deterministic: no randomness.

Rate shaping (``workload.rate_profile``)
----------------------------------------
A profile is a periodic function ``f(tau) >= 0`` of the time of day ``tau`` (period
``period_s``, default 86,400 s) through the given ``(time_of_day_s, relative_rate)``
points: linear between points (wrapping from the last point to the first one period later),
or a step (each point's rate holds until the next point; before the first point, the last
point's). With ``F(tau) = integral_0^tau f(u) du``, an arrival at ``t`` (seconds after the
window start, after ``rate_scale``) moves to

    ``tau = F^-1(t)``  (the smallest ``tau`` with ``F(tau) = t``)

This is a time change: the arrival order and each request's content are kept, and a process
of base rate ``r`` (requests/s) becomes one whose instantaneous rate at ``tau`` is
``r x f(tau)`` (its cumulative count ``r x F(tau)``). A Poisson process of rate ``r`` becomes
exactly the inhomogeneous Poisson process of intensity ``r x f``; a bursty trace keeps its
burstiness on the warped clock. A profile of mean 1 keeps the mean rate and the length of a
whole number of periods; ``f = 2`` everywhere halves every time (``rate_scale: 2``). Times in
a zero-rate stretch are skipped (no arrival lands there). ``F`` over one period is
``A = integral_0^P f``; ``F(tau + P) = F(tau) + A``, so ``F^-1(t) = k P + F^-1(t - k A)`` with
``k = floor(t / A)``; within a linear segment starting at ``g`` with rate ``a`` and slope
``b``, ``F^-1 = g + 2 d / (a + sqrt(a^2 + 2 b d))`` for ``d = t - F(g)`` (the stable root of
``a x + b x^2 / 2 = d``).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from simulator.base.budget import check_workload_budget
from simulator.base.schema import StrictModel
from simulator.workload.columns import TraceColumns
from simulator.workload.errors import WorkloadError
from simulator.workload.sessions import session_starts

__all__ = ["DAY_S", "RateCurve", "RateProfileConfig", "load_rate_curve", "tile_columns"]

#: The default period of a rate profile: one day (s).
DAY_S = 86_400.0
_KEY = "workload.rate_profile"


class RateProfileConfig(StrictModel):
    """A diurnal rate profile (``workload.rate_profile``; the module docstring gives the
    formula).

    Attributes
    ----------
    points : list of [float, float], optional
        ``[time_of_day_s, relative_rate]`` pairs: times strictly increasing in
        ``[0, period_s)``, rates finite, >= 0 and not all 0.
    csv : str, optional
        Instead of ``points``: a CSV file with a header and the columns ``time_of_day_s``
        and ``relative_rate`` (resolved as a trace path is).
    interpolation : ``"linear"`` or ``"step"``
        Between points: a straight line (periodic), or each point's rate until the next.
    period_s : float
        The period (s), 86,400 by default (a day).
    """

    points: list[list[float]] | None = Field(default=None, min_length=1)
    csv: str | None = None
    interpolation: Literal["linear", "step"] = "linear"
    period_s: float = Field(default=DAY_S, gt=0)

    @model_validator(mode="after")
    def _validate(self) -> RateProfileConfig:
        if (self.points is None) == (self.csv is None):
            raise ValueError("give exactly one of points and csv")
        if self.csv is not None and not self.csv.strip():
            raise ValueError("csv: empty path")
        if self.points is not None:
            for i, p in enumerate(self.points):
                if len(p) != 2:
                    raise ValueError(f"points.{i}: give [time_of_day_s, relative_rate], got "
                                     f"{len(p)} values")
            check_curve(np.array([p[0] for p in self.points], dtype=np.float64),
                        np.array([p[1] for p in self.points], dtype=np.float64),
                        self.period_s, "points")
        return self


def check_curve(times_s: np.ndarray, rates: np.ndarray, period_s: float, where: str) -> None:
    """Refuse a profile that cannot shape arrivals.

    Raises
    ------
    ValueError
        Naming ``where`` (``points``, or ``file:line``), the point and the valid range: a
        time outside ``[0, period_s)`` or not after the one before, a negative or non-finite
        rate, or every rate 0.
    """
    for i, (t, r) in enumerate(zip(times_s.tolist(), rates.tolist())):
        at = f"{where}.{i}" if where == "points" else f"{where}{i + 2}"
        if not (math.isfinite(t) and 0 <= t < period_s):
            raise ValueError(f"{at}: time_of_day_s={t!r} outside [0, period_s={period_s:g})")
        if i and not t > times_s[i - 1]:
            raise ValueError(f"{at}: time_of_day_s={t!r} is not after the point before it "
                             f"({float(times_s[i - 1])!r}): give times strictly increasing")
        if not (math.isfinite(r) and r >= 0):
            raise ValueError(f"{at}: relative_rate={r!r} must be finite and >= 0")
    if not np.any(rates > 0):
        raise ValueError(f"{where}: every relative_rate is 0 (no arrival could be placed); "
                         "give at least one rate > 0")


class RateCurve:
    """A periodic relative-rate curve and its cumulative integral (module docstring).

    Parameters
    ----------
    times_s, rates : array_like of float
        The profile's points (checked by :func:`check_curve`).
    period_s : float
    interpolation : ``"linear"`` or ``"step"``
    """

    def __init__(self, times_s, rates, period_s: float = DAY_S,
                 interpolation: str = "linear"):
        t = np.asarray(times_s, dtype=np.float64)
        r = np.asarray(rates, dtype=np.float64)
        check_curve(t, r, float(period_s), "points")
        self.period_s = float(period_s)
        self.interpolation = interpolation
        self.times_s, self.rates = t, r
        # the segment grid of one period: 0, the points inside (0, P), P
        grid = np.unique(np.concatenate([[0.0], t, [self.period_s]]))
        if interpolation == "linear":
            xs = np.concatenate([[t[-1] - self.period_s], t, [t[0] + self.period_s]])
            ys = np.concatenate([[r[-1]], r, [r[0]]])
            vals = np.interp(grid, xs, ys)
            area = 0.5 * (vals[1:] + vals[:-1]) * np.diff(grid)
        elif interpolation == "step":
            vals = self._step(grid, t, r)
            area = vals[:-1] * np.diff(grid)
        else:
            raise ValueError(f"interpolation must be 'linear' or 'step', got {interpolation!r}")
        self._grid, self._vals = grid, vals
        self._cum = np.concatenate([[0.0], np.cumsum(area)])
        #: integral of the curve over one period (s x relative rate)
        self.area = float(self._cum[-1])

    @staticmethod
    def _step(x: np.ndarray, t: np.ndarray, r: np.ndarray) -> np.ndarray:
        i = np.searchsorted(t, x, side="right") - 1
        return np.where(i >= 0, r[np.maximum(i, 0)], r[-1])

    def rate_at(self, tau_s) -> np.ndarray:
        """The relative rate ``f(tau)`` at times ``tau_s`` (s, any real, periodic)."""
        x = np.mod(np.asarray(tau_s, dtype=np.float64), self.period_s)
        if self.interpolation == "step":
            return self._step(x, self.times_s, self.rates)
        return np.interp(x, self._grid, self._vals)

    def mean(self) -> float:
        """The curve's time average over a period."""
        return self.area / self.period_s

    def cumulative(self, tau_s) -> np.ndarray:
        """``F(tau) = integral_0^tau f`` at ``tau_s >= 0`` (s)."""
        tau = np.asarray(tau_s, dtype=np.float64)
        k = np.floor(tau / self.period_s)
        x = tau - k * self.period_s
        j = np.clip(np.searchsorted(self._grid, x, side="right") - 1, 0, len(self._grid) - 2)
        d = x - self._grid[j]
        a = self._vals[j]
        if self.interpolation == "linear":
            b = (self._vals[j + 1] - a) / np.diff(self._grid)[j]
            part = a * d + 0.5 * b * d * d
        else:
            part = a * d
        return k * self.area + self._cum[j] + part

    def warp(self, t_s) -> np.ndarray:
        """``F^-1(t)`` for base-clock times ``t_s >= 0`` (s): the shaped arrival times.

        Non-decreasing in ``t`` (order kept); ``warp(cumulative(tau)) == tau`` outside
        zero-rate stretches, up to float rounding.
        """
        t = np.asarray(t_s, dtype=np.float64)
        k = np.floor(t / self.area)
        x = t - k * self.area
        j = np.clip(np.searchsorted(self._cum, x, side="right") - 1, 0, len(self._grid) - 2)
        d = np.maximum(x - self._cum[j], 0.0)
        a = self._vals[j]
        width = np.diff(self._grid)[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.interpolation == "linear":
                b = (self._vals[j + 1] - a) / width
                root = np.sqrt(np.maximum(a * a + 2.0 * b * d, 0.0))
                step = np.where(d > 0, 2.0 * d / (a + root), 0.0)
            else:
                step = np.where(d > 0, d / a, 0.0)
        step = np.minimum(np.nan_to_num(step, nan=0.0, posinf=0.0), width)
        return k * self.period_s + self._grid[j] + step


def _read_csv(path: Path, shown: str) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    try:  # blank lines kept (then dropped) so that an error names the file's own line
        df = pd.read_csv(path, skip_blank_lines=False)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise WorkloadError(f"{shown}: cannot read the rate profile CSV: {e}") from None
    line_no = np.arange(len(df)) + 2
    blank = df.isna().all(axis=1).to_numpy()
    df, line_no = df.loc[~blank].reset_index(drop=True), line_no[~blank]
    need = ("time_of_day_s", "relative_rate")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise WorkloadError(f"{shown}: {_KEY}.csv needs the columns {', '.join(need)}; "
                            f"missing {', '.join(missing)} (has {', '.join(map(str, df.columns))})")
    if not len(df):
        raise WorkloadError(f"{shown}: {_KEY}.csv has no rows")
    out = []
    for c in need:
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(np.isnan(v))
        if bad.size:
            raw = df[c].iloc[bad[0]]
            what = "is missing" if pd.isna(raw) else f"{str(raw)!r} is not a number"
            raise WorkloadError(f"{shown}:{int(line_no[bad[0]])}: {c} {what}")
        out.append(v)
    return out[0], out[1]


def load_rate_curve(cfg: RateProfileConfig, resolve) -> RateCurve:
    """The :class:`RateCurve` of a profile config, reading its CSV if it names one.

    Parameters
    ----------
    cfg : RateProfileConfig
    resolve : callable
        ``path -> pathlib.Path`` (the loader's trace-path resolver; raises WorkloadError).

    Raises
    ------
    WorkloadError
        On a CSV that cannot be read, lacks a column, or holds a bad point (``file:line``).
    """
    if cfg.csv is None:
        pts = np.asarray(cfg.points, dtype=np.float64)
        return RateCurve(pts[:, 0], pts[:, 1], cfg.period_s, cfg.interpolation)
    try:
        path = resolve(cfg.csv)
    except WorkloadError as e:
        raise WorkloadError(f"{_KEY}.csv: {e}") from None
    t, r = _read_csv(path, str(cfg.csv))
    try:
        check_curve(t, r, cfg.period_s, f"{cfg.csv}:")
    except ValueError as e:
        raise WorkloadError(f"{_KEY}: {e}") from None
    return RateCurve(t, r, cfg.period_s, cfg.interpolation)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on uint64 arrays (wrapping arithmetic)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _copy_prefix_ids(ids: list, copy: int) -> list:
    """Copy ``copy``'s prefix block ids: 63-bit mixes of each id with the copy number."""
    lengths = [0 if v is None else len(v) for v in ids]
    flat = np.fromiter((i for v in ids if v is not None for i in v), dtype=np.uint64,
                       count=sum(lengths))
    with np.errstate(over="ignore"):
        key = _splitmix64(np.array([copy], dtype=np.uint64))[0]
        mixed = (_splitmix64(flat ^ key) >> np.uint64(1)).astype(np.int64).tolist()
    out, pos = [], 0
    for v, n in zip(ids, lengths):
        out.append(None if v is None else tuple(mixed[pos:pos + n]))
        pos += n
    return out


def tile_columns(cols: TraceColumns, tile_to_s: float, period_s: float | None,
                 source: str) -> TraceColumns:
    """Repeat a trace to fill ``tile_to_s`` seconds (module docstring).

    Parameters
    ----------
    cols : TraceColumns
        The trace as read (file order).
    tile_to_s : float
        Length to fill (s), from the first arrival.
    period_s : float or None
        The repeat period; ``None``: the trace's span plus one mean gap.
    source : str
        The trace's name in messages.

    Returns
    -------
    TraceColumns
        ``copies x N`` rows minus those past ``tile_to_s``, copy by copy.

    Raises
    ------
    WorkloadError
        When the period is not defined (one row, or every arrival at one instant, without
        ``tile_period_s``) or shorter than the trace's span (copies would interleave).
    """
    t = np.asarray(cols.arrival_s, dtype=np.float64)
    n = len(cols)
    t0, span = float(t.min()), float(t.max() - t.min())
    if period_s is None:
        if n < 2 or span <= 0:
            raise WorkloadError(f"{source}: workload.tile_to_s: the trace's {n} arrivals span "
                                f"{span:g} s, so it has no period; give workload.tile_period_s")
        period_s = span * n / (n - 1)
    elif period_s <= span:
        raise WorkloadError(f"{source}: workload.tile_period_s={period_s:g} must be > the "
                            f"trace's span {span:g} s (copies would interleave)")
    copies = max(1, math.ceil(tile_to_s / period_s))
    check_workload_budget(float(n) * copies, f"{source} tiled to {tile_to_s:g} s",
                          "workload.tile_to_s")
    parts = []
    start = session_starts(cols) - t0
    max_sid = int(cols.session_id.max()) if cols.session_id is not None else -1
    for k in range(copies):
        keep = np.flatnonzero(start + k * period_s < tile_to_s)
        if keep.size == 0:
            break
        part = cols.take(keep)
        part.arrival_s = part.arrival_s + k * period_s
        if k and part.session_id is not None:
            part.session_id = np.where(part.session_id >= 0,
                                       part.session_id + k * (max_sid + 1), -1)
        if k and part.prefix_hash_ids is not None:
            part.prefix_hash_ids = _copy_prefix_ids(part.prefix_hash_ids, k)
        parts.append(part)
    return TraceColumns.concat(parts)
