"""``servesim run SCENARIO --day-window-s K``: a day simulated by one window per hour, a
stated approximation (:mod:`simulator.runs.day`)."""
from __future__ import annotations

import json
import math

from simulator.base.outdir import clear_outputs
from simulator.base.progress import progress
from simulator.cli.args import table_console
from simulator.report.day import DAY_FIGURE, day_totals_rows, windowed_note, write_day_report
from simulator.runs.day import run_day_windows

__all__ = ["add_day_arguments", "cmd_run_day"]


def _seconds(text: str) -> float:
    import argparse

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return v


def add_day_arguments(r) -> None:
    """Add ``--day-window-s`` and ``--lead-in-s`` to ``servesim run``."""
    r.add_argument("--day-window-s", type=_seconds, metavar="S",
                   help="simulate the day as one S-second window per hour (centred, on "
                        "the hour's fleet), each after a lead-in; the report states the "
                        "approximation (a day on a laptop)")
    r.add_argument("--lead-in-s", type=_seconds, default=None, metavar="S",
                   help="with --day-window-s: seconds simulated before each window and "
                        "not counted (default 300)")


def cmd_run_day(args, scenario, base, specs, out) -> int:
    """Run the windowed day into ``out``: ``summary.json``, ``report.md`` / ``.html`` and
    ``day.png``; prints the day's totals and the approximation."""
    lead_in_s = 300.0 if args.lead_in_s is None else args.lead_in_s
    with progress("day windows", enabled=not args.quiet, force=args.progress) as cb:
        summary = run_day_windows(scenario, base, specs, window_s=args.day_window_s,
                                  lead_in_s=lead_in_s, progress=cb)
    clear_outputs(out, ["summary.json", "report.md", "report.html", DAY_FIGURE])
    write_day_report(out, summary, title=f"servesim run (day by windows): {scenario.name}",
                     figures=not args.no_figures)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    if not args.quiet:
        c = table_console()
        for k, v in day_totals_rows(summary):
            c.print(f"{k}: {v}", markup=False)
        c.print(windowed_note(summary["by_hour"]["windowed"]), markup=False)
        c.print(f"outputs: {out}/ (summary.json, report.md, report.html)", markup=False)
    return 0

