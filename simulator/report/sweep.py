"""The sweep report of ``servesim sweep``: ``sweep.md``, a self-contained ``sweep.html`` and
``sweep.png`` (p99 TTFT and output throughput per point), next to the full table
(``sweep.parquet`` / ``sweep.csv``, written by :func:`simulator.report.tables.write_table`).

:data:`SWEEP_COLUMNS` is the one definition of the sweep's summary columns: the report's
table and the terminal table of ``servesim sweep`` both use it. Its ``bound`` and ``share``
columns are each point's run verdict (:func:`simulator.metrics.bounds.run_bounds`, flattened
as ``bounds_bound`` and ``bounds_bound_share``). Input is the sweep table
(:class:`simulator.planner.sweep.SweepResult` ``.table``: one row per point with
``point_id``, ``label``, ``status``, ``error``, ``cached``, the dotted input fields and the
flattened summary metrics).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.bounds import BOUND_LABELS
from simulator.perf.provenance import sources_by_label
from simulator.report.figures import default_style, figure, plain_text, save_png
from simulator.report.format import fmt, ms, pct, usd, yaml_value
from simulator.report.render import render, write_report

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["FIGURE_FILE", "SWEEP_COLUMNS", "plot_sweep_points", "print_sweep_table",
           "render_sweep_markdown", "sweep_columns", "table_cells", "write_sweep_report"]

FIGURE_FILE = "sweep.png"
#: Points shown in the report's table and figure (the files have them all).
_MAX_POINTS = 60
#: Most characters of a point label in the figure.
_LABEL_CHARS = 40

#: (column, header, formatter) of the sweep's summary table.
SWEEP_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("point_id", "#", lambda v: fmt(v, "{}")),
    ("slo_attainment", "attainment", lambda v: fmt(v, "{:.3f}")),
    ("ttft_s_p99", "TTFT p99", lambda v: ms(v, "{:,.1f} ms")),
    ("tpot_s_p99", "TPOT p99", lambda v: ms(v, "{:,.2f} ms")),
    ("output_token_throughput_tps", "output tok/s", lambda v: fmt(v, "{:,.0f}")),
    ("cost_per_1m_output_tokens_usd", "USD/1M out", lambda v: usd(v, 4)),
    ("energy_joules_per_output_token", "J/out tok", lambda v: fmt(v, "{:.4f}")),
    ("energy_energy_kwh", "kWh", lambda v: fmt(v, "{:.4f}")),
    ("bounds_bound", "bound", lambda v: fmt(BOUND_LABELS.get(v, v), "{}")),
    ("bounds_bound_share", "share", lambda v: pct(v, "{:.0f}%")),
    ("label", "point", lambda v: fmt(v, "{}")),
)


#: Columns of :data:`SWEEP_COLUMNS` shown only when the table has them (a table of points
#: simulated or cached before the run verdict existed has no ``bounds_bound``).
_OPTIONAL_COLUMNS = frozenset({"bounds_bound", "bounds_bound_share",
                               "energy_joules_per_output_token", "energy_energy_kwh"})


def sweep_columns(table: pd.DataFrame) -> list[tuple[str, str, Callable[[Any], str]]]:
    """The entries of :data:`SWEEP_COLUMNS` this table shows (the verdict's columns only when
    it has them)."""
    return [c for c in SWEEP_COLUMNS if c[0] not in _OPTIONAL_COLUMNS or c[0] in table.columns]


def _value(row: Mapping[str, Any], col: str) -> Any:
    v = row.get(col)
    return None if (v is None or (isinstance(v, float) and np.isnan(v))) else v


def table_cells(table: pd.DataFrame, limit: int | None = None) -> list[list[str]]:
    """Formatted cells of :func:`sweep_columns`, one row per point (failed points show
    ``error`` in the attainment column)."""
    rows = []
    cols = sweep_columns(table)
    for rec in table.head(limit).to_dict(orient="records") if limit else \
            table.to_dict(orient="records"):
        cells = [f(_value(rec, c)) for c, _h, f in cols]
        if rec.get("status") != "ok":
            cells[1] = "error"
        rows.append(cells)
    return rows


def plot_sweep_points(table: pd.DataFrame, path: str | Path) -> Path | None:
    """PNG: p99 TTFT (ms) and output tokens/s of every successful point, side by side.

    Returns None when no point succeeded (nothing to draw).
    """
    import pandas as pd

    ok = table[table["status"] == "ok"].head(_MAX_POINTS)
    if ok.empty or "ttft_s_p99" not in ok.columns:
        return None
    labels = [f"#{p} {plain_text(str(lab)[:_LABEL_CHARS])}"
              for p, lab in zip(ok["point_id"], ok["label"])]
    y = np.arange(len(ok))
    with default_style():
        fig = figure((10.0, max(2.5, 0.28 * len(ok) + 1.2)), layout="constrained")
        for i, (col, scale, title) in enumerate((
                ("ttft_s_p99", 1e3, "p99 TTFT (ms)"),
                ("output_token_throughput_tps", 1.0, "output tokens/s"))):
            ax = fig.add_subplot(1, 2, i + 1)
            vals = pd.to_numeric(ok.get(col), errors="coerce").to_numpy(dtype=float) * scale
            ax.barh(y, np.nan_to_num(vals), color="tab:blue" if i == 0 else "tab:green")
            ax.set_yticks(y)
            ax.set_yticklabels(labels if i == 0 else [""] * len(y), fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(title)
            ax.grid(axis="x", alpha=0.3)
            if i == 0 and "slo.ttft_s" in ok.columns:
                slo = pd.to_numeric(ok["slo.ttft_s"], errors="coerce").dropna().unique()
                if len(slo) == 1:
                    ax.axvline(float(slo[0]) * 1e3, color="tab:red", ls="--", lw=1,
                               label=f"SLO {float(slo[0]) * 1e3:g} ms")
                    ax.legend(fontsize=7, loc="lower right")
        fig.suptitle("Sweep points")
        return save_png(fig, path, dpi=100)


def render_sweep_markdown(table: pd.DataFrame, *, name: str, num_simulated: int,
                          num_cached: int, varied: Sequence[tuple[str, Sequence]] = (),
                          figure: str | None = FIGURE_FILE) -> str:
    """The text of ``sweep.md``.

    Parameters
    ----------
    table : pandas.DataFrame
        The sweep table.
    name : str
        The sweep's name.
    num_simulated, num_cached : int
        Points simulated by this run and read from the cache.
    varied : sequence of (field path, values)
        The grid of the sweep file (shown as "Varied: ...").
    figure : str or None
        The figure's file name (None: no figure).
    """
    failed = table[table["status"] != "ok"] if len(table) else table
    errors = [[fmt(r.get("point_id"), "{}"), str(r.get("label")), str(r.get("error"))]
              for r in failed.to_dict(orient="records")]
    cols = sweep_columns(table)
    return render(
        "sweep.md.j2", name=name, num_points=len(table), num_simulated=num_simulated,
        num_cached=num_cached, num_failed=len(errors),
        varied=[(k, ", ".join(yaml_value(v) for v in vals)) for k, vals in varied],
        header=[h for _c, h, _f in cols],
        align=["right"] * (len(cols) - 1) + ["left"],
        rows=table_cells(table, _MAX_POINTS) + (
            [["..."] * (len(cols) - 1) + [f"{len(table) - _MAX_POINTS} more"]]
            if len(table) > _MAX_POINTS else []),
        errors=errors, figure=figure, bound="bounds_bound" in table.columns,
        sources=(sources_by_label(table["latency_sources"], table["point_id"])
                 if "latency_sources" in table else []))


def write_sweep_report(table: pd.DataFrame, outdir: str | Path, *, name: str,
                       num_simulated: int, num_cached: int,
                       varied: Sequence[tuple[str, Sequence]] = (),
                       figures: bool = True) -> dict[str, Path]:
    """Write ``sweep.md``, ``sweep.html`` (and ``sweep.png``) into ``outdir``.

    Returns
    -------
    dict
        ``{"md", "html"[, "figure"]}`` -> path.
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    fig = plot_sweep_points(table, out / FIGURE_FILE) if figures and len(table) else None
    if fig is not None:
        files["figure"] = fig
    text = render_sweep_markdown(table, name=name, num_simulated=num_simulated,
                                 num_cached=num_cached, varied=varied,
                                 figure=FIGURE_FILE if fig is not None else None)
    files.update(write_report(out, "sweep", text))
    return files


def print_sweep_table(table: pd.DataFrame, console, *, title: str, limit: int = 40) -> None:
    """Print the first ``limit`` points of :func:`sweep_columns` with rich."""
    from rich.table import Table
    from rich.text import Text  # cells as Text: a "[" in a label is no rich markup

    t = Table(title=Text(title))
    for c, h, _f in sweep_columns(table):
        t.add_column(h, no_wrap=c != "label", ratio=1 if c == "label" else None)
    for cells in table_cells(table, limit):
        row = [Text(c) for c in cells]
        if cells[1] == "error":
            row[1] = Text("error", style="red")
        t.add_row(*row)
    console.print(t)
    if len(table) > limit:
        console.print(f"... {len(table) - limit} more rows")
