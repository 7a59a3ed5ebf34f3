"""Number formatting shared by every report (Markdown, HTML and the terminal tables).

Every report formats its numbers in Python before a template lays them out, through these
helpers. They differ only in what a report shows for a missing value (``na``: ``-`` in
tables, ``n/a`` in prose) and in the precision each report chose for each quantity:

- :func:`fmt`: one value through a ``str.format`` spec (``None``, NaN and infinities show
  ``na``; booleans ``yes`` / ``no``; strings as they are);
- :func:`ms`: seconds shown in milliseconds; :func:`pct`: a fraction in percent;
  :func:`usd`: US dollars; :func:`ratio`: a gain as ``1.23x``;
- :func:`adaptive`: a number with a precision that follows its magnitude (the run report's
  headline style: ``1,234``, ``12.3``, ``1.23``, ``0.0123``);
- :func:`yaml_value`: a scenario value as YAML spells it (``true``, ``null``, ``8``).
"""
from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["NA", "adaptive", "adaptive_ms", "adaptive_pct", "adaptive_usd", "fmt", "ms",
           "pct", "ratio", "usd", "yaml_value"]

#: What a missing value shows in prose.
NA = "n/a"


def _missing(x: Any) -> bool:
    if x is None:
        return True
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and not math.isfinite(x)


def fmt(x: Any, spec: str = "{:.3g}", na: str = "-") -> str:
    """``spec.format(x)`` for a number; ``na`` for None, NaN or an infinity.

    Parameters
    ----------
    x : number, bool, str or None
        The value (any unit; the caller scales it).
    spec : str
        A ``str.format`` pattern with one field, e.g. ``"{:.2f}"`` or ``"${:,.4f}"``.
    na : str
        Shown for a missing value.

    Returns
    -------
    str
        Booleans give ``yes`` / ``no`` and other non-numbers their ``str``.
    """
    if _missing(x):
        return na
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, numbers.Real):
        return spec.format(x)
    return str(x)


def ms(x_s: Any, spec: str = "{:.0f} ms", na: str = "-") -> str:
    """Seconds ``x_s`` shown in milliseconds through ``spec``."""
    return na if _missing(x_s) else fmt(1e3 * float(x_s), spec, na)


def pct(x: Any, spec: str = "{:.1f}%", na: str = "-") -> str:
    """A fraction ``x`` shown in percent through ``spec`` (``0.25`` -> ``25.0%``)."""
    return na if _missing(x) else fmt(100.0 * float(x), spec, na)


def usd(x: Any, decimals: int = 2, na: str = "-") -> str:
    """US dollars with thousands separators and ``decimals`` decimals (``$1,234.50``)."""
    return fmt(x, f"${{:,.{int(decimals)}f}}", na)


def ratio(x: Any, spec: str = "{:.2f}x", na: str = NA) -> str:
    """A ratio or gain shown as ``1.23x``."""
    return fmt(x, spec, na)


def adaptive(x: Any, unit: str = "", na: str = NA) -> str:
    """A number whose precision follows its magnitude, then ``unit``.

    Integers get thousands separators (``12,345``); floats >= 100 no decimals
    (``1,235``), >= 10 one (``12.3``), >= 1 two (``1.23``), below 1 three significant
    digits (``0.0123``); zero is ``0``; booleans ``yes`` / ``no``.
    """
    if _missing(x):
        return na
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, numbers.Integral):
        return f"{x:,}{unit}"
    x = float(x)
    ax = abs(x)
    if ax >= 100:
        s = f"{x:,.0f}"
    elif ax >= 10:
        s = f"{x:.1f}"
    elif ax >= 1:
        s = f"{x:.2f}"
    elif ax == 0:
        s = "0"
    else:
        s = f"{x:.3g}"
    return s + unit


def adaptive_ms(x_s: Any, na: str = NA) -> str:
    """Seconds shown in milliseconds with :func:`adaptive` precision."""
    return na if _missing(x_s) else adaptive(float(x_s) * 1e3, na=na)


def adaptive_pct(x: Any, na: str = NA) -> str:
    """A fraction in percent with one decimal (``n/a`` when missing)."""
    return pct(x, "{:.1f}%", na)


def adaptive_usd(x: Any, na: str = NA) -> str:
    """US dollars: two decimals from $1 up, four below (``$12.30``, ``$0.0123``)."""
    if _missing(x):
        return na
    x = float(x)
    return f"${x:,.2f}" if abs(x) >= 1 else f"${x:.4f}"


def yaml_value(v: Any) -> str:
    """A scenario value as YAML spells it: ``true`` / ``false``, ``null``, else ``str(v)``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)
