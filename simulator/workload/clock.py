"""Trace clocks: absolute timestamps re-based to the first arrival, the Unix-epoch unit they
were written in, and the check that the simulated clock can still resolve a step.

The simulator's clock is a float64 number of seconds. At time ``T`` the smallest step it can
add is the float64 spacing ``numpy.spacing(T)`` (one unit in the last place): at ``T = 1.7e9``
(a Unix time in seconds) that is 2.4e-7 s, at ``1.7e12`` (milliseconds read as seconds)
2.4e-4 s and at ``1.7e18`` (nanoseconds) 256 s, so every step time (1e-4 .. 1 s) rounds away
and every latency comes out as exactly 0. Hence:

1. **Re-basing** (:func:`finish_arrivals`). A trace whose first arrival is at or after
   :data:`REBASE_FROM_S` seconds (2**26 s, ~2.1 years: no replay clock starts that late, so
   the times are timestamps, not offsets) is re-based to its first arrival: times become
   seconds after it. The subtraction is exact: each raw value is kept as a float64 ``hi``
   plus the exact remainder ``lo`` of what the file wrote (:func:`exact_residuals`; integer
   nanoseconds above 2**53 and decimal seconds such as ``1700000000.123456`` included), so
   the re-based times equal those of the same trace written relative to its first row.
2. **Unit.** Such a first arrival that reads as a date between 1990 and 2100 in seconds,
   milliseconds, microseconds or nanoseconds since the Unix epoch is taken in that unit
   (a generic trace declares seconds, but ``1.7e18`` seconds is no duration: it is epoch
   nanoseconds); otherwise the declared unit is kept. Either way a
   :class:`~simulator.workload.errors.WorkloadWarning` says what was assumed and where the
   clock now starts (:attr:`TraceColumns.time_origin`).
3. **Resolution** (:func:`check_clock`). A run whose latest arrival (after re-basing and
   ``workload.rate_scale``) is at or beyond :data:`MAX_CLOCK_S` is refused, naming the
   trace line or the key that put it there.

Why :data:`CLOCK_RESOLUTION_S` = 1e-8 s. Each clock addition rounds by at most half the
spacing ``u`` there, so a latency made of ``m`` steps of at least ``dt_min`` carries a
relative error of at most ``m * u / 2 / (m * dt_min) = u / (2 * dt_min)``, whatever ``m``.
With the shortest step a GPU profile gives (~1e-4 s: one small decode) and ``u <= 1e-8 s``
that is <= 5e-5, below the 4 significant digits that summaries and reports print; at
``u = 1e-9`` the clock would stop at 2**23 s (97 days), refusing real traces such as
BurstGPT (121 days) for an error no output shows. float64 spacing is ``2**(e - 52)`` on
``[2**e, 2**(e + 1))``: ``2**-27 = 7.5e-9`` s below 2**26 s and ``1.5e-8`` s from there, so
the bound is :data:`MAX_CLOCK_S` = 2**26 s = 67,108,864 s (~2.1 years). The simulation
continues past the last arrival only by the time it takes to drain, which is small next to
it.
"""
from __future__ import annotations

import datetime as _dt
import math
import warnings
from decimal import Decimal, InvalidOperation

import numpy as np

from simulator.workload.errors import WorkloadError, WorkloadWarning

__all__ = ["CLOCK_RESOLUTION_S", "EPOCH_UNITS", "MAX_CLOCK_S", "REBASE_FROM_S", "check_clock",
           "epoch_unit", "exact_residuals", "finish_arrivals"]

#: Largest float64 spacing (s) allowed on the simulated clock at the latest arrival.
CLOCK_RESOLUTION_S = 1e-8
#: The first time (s) whose float64 spacing exceeds :data:`CLOCK_RESOLUTION_S`: 2**26 s.
MAX_CLOCK_S = float(2 ** 26)
#: A trace whose first arrival is at or after this (in its declared unit, as seconds) holds
#: timestamps, not offsets: it is re-based to its first arrival.
REBASE_FROM_S = MAX_CLOCK_S

#: 1990-01-01 and 2100-01-01 00:00 UTC in Unix seconds: the dates an epoch timestamp may
#: stand for (outside, a number is not guessed to be one).
EPOCH_FIRST_S = 631_152_000
EPOCH_LAST_S = 4_102_444_800
#: Unit name, its divisor to seconds and its word, finest last.
EPOCH_UNITS = (("s", 1, "seconds"), ("ms", 10 ** 3, "milliseconds"),
               ("us", 10 ** 6, "microseconds"), ("ns", 10 ** 9, "nanoseconds"))


def epoch_unit(value: float) -> tuple[str, int, str] | None:
    """The unit in which ``value`` reads as a Unix time between 1990 and 2100.

    Parameters
    ----------
    value : float
        A raw timestamp in the file's own unit.

    Returns
    -------
    tuple of (str, int, str) or None
        ``(unit, divisor to seconds, word)`` from :data:`EPOCH_UNITS`, or ``None`` when
        ``value`` is no such date in any unit (the ranges do not overlap: each spans a factor
        of 6.5, the units a factor of 1000).
    """
    for unit, div, word in EPOCH_UNITS:
        if EPOCH_FIRST_S * div <= value < EPOCH_LAST_S * div:
            return unit, div, word
    return None


def _decimal(v) -> Decimal | None:
    try:
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(str(v).strip())
    except (InvalidOperation, ValueError):
        return None


def exact_residuals(vals: list, hi: np.ndarray) -> np.ndarray:
    """What float64 rounding took from each raw value: ``v - hi`` (seconds or file units).

    Parameters
    ----------
    vals : list
        Raw values as the file gave them: text (CSV), ``int`` (JSON, Parquet; any size) or
        ``float`` (JSON, Parquet: the shortest decimal that reads back as the float, i.e.
        what a writer printed, is taken as the value).
    hi : numpy.ndarray of float64
        ``vals`` converted to float64 (finite).

    Returns
    -------
    numpy.ndarray of float64
        ``v - hi`` per value, itself rounded to float64 (its own error is ~1e-16 of a
        residual that is at most half a spacing of ``hi``); 0 where ``v`` is not a number.
    """
    n = len(vals)
    lo = np.zeros(n)
    if n == 0:
        return lo
    kinds = {type(v) for v in vals}
    if kinds <= {int} and float(np.abs(hi).max()) < 2.0 ** 63:
        try:  # integers (JSON, Parquet): exact in int64
            return (np.asarray(vals, dtype=np.int64) - hi.astype(np.int64)).astype(np.float64)
        except OverflowError:
            pass
    if kinds <= {str}:
        s = np.char.strip(np.asarray(vals, dtype=str))
        parts = np.char.partition(s, ".")
        ip, fp = parts[:, 0], parts[:, 2]
        plain = np.char.isdigit(ip) & (np.char.isdigit(fp) | (np.char.str_len(fp) == 0))
        if plain.all() and float(np.abs(hi).max()) < 2.0 ** 53:
            # digits[.digits]: the integer part is exact in float64, the fraction to 1e-17
            frac = np.char.add("0.", np.where(np.char.str_len(fp) > 0, fp, "0")).astype(float)
            return (ip.astype(np.float64) - hi) + frac
    for i, (v, h) in enumerate(zip(vals, hi.tolist())):
        d = _decimal(v)
        if d is not None and math.isfinite(h):
            lo[i] = float(d - Decimal(h))
    return lo


def finish_arrivals(hi: np.ndarray, lo: np.ndarray | None, divisor: int, lines: np.ndarray,
                    shown: str, key: str, *, guess_unit: bool = True,
                    absolute: str | None = None) -> tuple[np.ndarray, str | None]:
    """Arrival times in seconds from raw values, re-based to the first when they are
    timestamps (module docstring).

    Parameters
    ----------
    hi, lo : numpy.ndarray of float64
        Raw values (file units) and their residuals (:func:`exact_residuals`; ``None``:
        zero).
    divisor : int
        File units per second as declared (1 for seconds, 1000 for milliseconds).
    lines : numpy.ndarray of int64
        Source line (or Parquet row) of each value.
    shown, key : str
        The file as named in messages, and the column.
    guess_unit : bool
        Take the epoch unit from the magnitude (numbers); ``False`` when the unit is typed
        (a Parquet duration).
    absolute : str, optional
        The values are typed timestamps (a Parquet timestamp or date column, in the
        declared unit): always re-based, no unit guessed, no warning; this names the type.

    Returns
    -------
    arrival_s : numpy.ndarray of float64
        Seconds; ``hi / divisor`` unchanged when not re-based.
    time_origin : str or None
        What the clock's 0 is (the raw first arrival, its line and, for an epoch, the UTC
        date) when re-based.

    Warns
    -----
    WorkloadWarning
        When numbers were re-based: which unit was assumed and where the clock starts.
    """
    if hi.size == 0:
        return hi / divisor, None
    lo = np.zeros_like(hi) if lo is None else lo
    i0 = int(np.lexsort((lo, hi))[0])
    if absolute is None and hi[i0] / divisor < REBASE_FROM_S:
        return (hi / divisor if divisor != 1 else hi), None
    found = epoch_unit(float(hi[i0])) if guess_unit and absolute is None else None
    unit, div, word = found if found else next(
        (u for u in EPOCH_UNITS if u[1] == divisor), ("file units", divisor, "file units"))
    rel = (hi - hi[i0]) + (lo - lo[i0])
    arrival = rel / div
    raw = _raw_text(hi[i0], lo[i0])
    when = _utc(hi[i0] / div) if (found or absolute) else None
    origin = (f"{key} {raw} {unit}" + (f" ({when} UTC)" if when else "")
              + f" at {shown}:{int(lines[i0])}")
    if absolute is None:
        if found:
            what = (f"look like Unix epoch {word}" + (" (the format's unit)" if div == divisor
                                                      else f", not the declared "
                                                           f"{_word(divisor)}"))
        else:
            what = (f"start at {raw} {_word(divisor)}, not a date between 1990 and 2100 in "
                    "any unit")
        warnings.warn(WorkloadWarning(
            f"{shown}:{int(lines[i0])}: {key} values {what}: read as {word} and re-based to "
            f"the first arrival ({raw}" + (f" = {when} UTC" if when else "")
            + "); times are seconds after it, and workload.start_s / end_s count from it"),
            stacklevel=3)
    return arrival, origin


def _word(divisor: int) -> str:
    return next((w for _, d, w in EPOCH_UNITS if d == divisor), "file units")


def _raw_text(h: float, lo: float) -> str:
    """The raw first value as the file wrote it: an integer exactly (above 2**53 too), a
    decimal to the nanosecond of a second; beyond 20 digits in scientific notation."""
    if abs(h) >= 1e20:
        return repr(float(h))
    if float(h).is_integer() and float(lo).is_integer():
        return str(int(h) + int(lo))
    return f"{round(Decimal(h) + Decimal(lo), 9):f}".rstrip("0").rstrip(".")


def _utc(seconds: float) -> str | None:
    try:
        t = _dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=float(seconds))
    except (OverflowError, ValueError):
        return None
    return t.strftime("%Y-%m-%d %H:%M:%S")


def check_clock(arrival_s: np.ndarray, lines: np.ndarray, *, source: str, rate_scale: float,
                start_s: float = 0.0, synthetic_key: str | None = None) -> None:
    """Refuse a workload whose latest arrival is beyond what the clock resolves.

    Parameters
    ----------
    arrival_s : numpy.ndarray of float64
        Final arrival times (after the window, re-basing and ``rate_scale``), seconds.
    lines : numpy.ndarray of int64
        Their source lines (0 for generated requests).
    source : str
        The trace as named in messages (``"synthetic workload"`` for a synthetic one).
    rate_scale : float
        ``workload.rate_scale`` that divided the times.
    start_s : float
        ``workload.start_s`` (s).
    synthetic_key, optional : str
        The key that set a synthetic workload's arrival times (e.g.
        ``workload.synthetic.arrival.rate_rps=1e-15``), named when ``rate_scale`` is 1.

    Raises
    ------
    WorkloadError
        If ``max(arrival_s) >= MAX_CLOCK_S`` (float64 spacing there > 1e-8 s). The message
        names ``workload.rate_scale`` when the unscaled times would fit, else the trace line
        of the latest arrival (or ``synthetic_key``).
    """
    if arrival_s.size == 0:
        return
    i = int(np.argmax(arrival_s))
    t = float(arrival_s[i])
    if t < MAX_CLOCK_S:
        return
    where = (f"the clock's float64 spacing at that time is {float(np.spacing(t)):.3g} s, "
             f"above the {CLOCK_RESOLUTION_S:g} s that resolves a step; it holds up to 2**26 "
             f"s ({MAX_CLOCK_S:,.0f} s, ~2.1 years)")
    if rate_scale != 1.0 and t * rate_scale < MAX_CLOCK_S:
        raise WorkloadError(f"workload.rate_scale={rate_scale:g} puts the last arrival of "
                            f"{source} at {t:.4g} s: {where}; use a larger rate_scale or a "
                            "shorter window (workload.end_s, max_requests)")
    if synthetic_key is not None:
        raise WorkloadError(f"{synthetic_key}: the last arrival of the synthetic workload is "
                            f"at {t:.4g} s: {where}; raise the rate or generate fewer "
                            "requests")
    line = int(lines[i])
    at = f"{source}:{line}" if line > 0 else source
    raise WorkloadError(f"{at}: this arrival is at {t:.4g} s on the run's clock (seconds after "
                        f"workload.start_s={start_s:g}): {where}; replay a shorter window "
                        "(workload.end_s, max_requests)")
