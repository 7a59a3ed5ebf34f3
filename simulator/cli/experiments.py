"""``servesim compare`` and ``servesim spec-sweep`` (registered by the table in
:mod:`simulator.cli.main`)."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from simulator.base.input_limits import clip_text
from simulator.base.progress import progress
from simulator.cli.args import output_path, scenario_file, table_console, whole_number
from simulator.cluster.setup import check_replica
from simulator.experiments.compare import DEFAULT_MAX_VARIANTS, DEFAULT_VARY, run_compare
from simulator.experiments.executor import BACKENDS
from simulator.experiments.grid import MAX_GRID_POINTS
from simulator.experiments.spec_sweep import run_spec_sweep
from simulator.report.compare import (
    CSV_FILE,
    HTML_FILE,
    JSON_FILE,
    REPORT_FILE,
    print_compare_table,
)
from simulator.report.spec_sweep import print_spec_sweep_table
from simulator.scenario.config import load_scenario
from simulator.scenario.overrides import cli_overrides
from simulator.scenario.yaml_files import read_scenario_yaml
from simulator.speculative.economics import DEFAULT_RATES

__all__ = ["cmd_compare", "cmd_spec_sweep", "register_compare", "register_spec_sweep"]


def _jobs(args) -> int:
    """``-j``/``--jobs`` (1 when not given).

    Raises
    ------
    ValueError
        Below 1 (as sweep and plan refuse it), before any scenario loads.
    """
    jobs = 1 if args.jobs is None else args.jobs
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    return jobs


def _parallel_args(p: argparse.ArgumentParser, default_jobs_help: str) -> None:
    p.add_argument("-j", "--jobs", type=whole_number, default=None, help=default_jobs_help)
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="local process pool (default) or a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (default: start a local "
                   "instance); one that does not answer within $SERVESIM_RAY_CONNECT_TIMEOUT_S "
                   "(default 10 s) is an error")


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------
def cmd_compare(args) -> int:
    """``servesim compare``: run the variants, print the table, write the report."""
    def prog(name, i, n):
        if not args.quiet:
            print(f"servesim: compare: [{i + 1}/{n}] running {name} ...", file=sys.stderr,
                  flush=True)

    def sim_prog(name, i, n):
        return progress(f"[{i + 1}/{n}] {name}: simulating requests", enabled=not args.quiet,
                        force=args.progress)

    jobs = _jobs(args)
    overrides = cli_overrides(args.set, seed=args.seed)  # each names its flag in errors
    cr = run_compare(args.scenario, args.vary, overrides=overrides, trace=args.trace,
                     outdir=args.output, figures=not args.no_figures, progress=prog,
                     sim_progress=sim_prog, jobs=jobs, backend=args.backend,
                     address=args.address, max_variants=args.max_variants)
    if not args.quiet:
        console = table_console(stderr=False)
        print_compare_table(cr.table, console, title=f"servesim compare: {cr.scenario_name}")
        console.print(f"outputs: {cr.outdir}/ ({REPORT_FILE}, {HTML_FILE}, {CSV_FILE}, "
                      f"{JSON_FILE}, one folder per variant)")
    return 0


def register_compare(subparsers) -> argparse.ArgumentParser:
    """Add the ``compare`` subcommand to ``servesim``'s subparsers."""
    p = subparsers.add_parser(
        "compare", help="run variants of a scenario on the same requests, side by side",
        description="Run every combination of the --vary lists on the same requests and "
                    "write OUTDIR/compare.md and compare.html (+ .csv, .json, figures) and "
                    "one run folder per variant. Without --vary: "
                    + " and ".join(DEFAULT_VARY) + ".")
    p.add_argument("scenario", type=scenario_file,
                   help="scenario YAML (path, or a name under scenarios/)")
    p.add_argument("--vary", action="append", metavar="KEY.PATH=V1,V2,...",
                   help="a scenario field and the values to try (repeatable; the variants "
                        "are the cartesian product)")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field in every variant (repeatable)")
    p.add_argument("--trace", help="replay this trace file instead of the scenario's workload")
    p.add_argument("--seed", type=whole_number, help="override the scenario seed")
    p.add_argument("-o", "--output", type=output_path,
                   help="output folder (default reports/compare-<name>)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--max-variants", type=whole_number, default=DEFAULT_MAX_VARIANTS,
                   metavar="N", help=f"refuse more variants than N before running any "
                   f"(default {DEFAULT_MAX_VARIANTS}, at most {MAX_GRID_POINTS:,}; a sweep "
                   "file suits larger grids)")
    _parallel_args(p, "parallel workers (default 1: in process, with per-variant progress)")
    p.add_argument("--progress", action="store_true",
                   help="always show progress (plain lines every 10%% when not a terminal)")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_compare)
    return p


# --------------------------------------------------------------------------------------------
# spec-sweep
# --------------------------------------------------------------------------------------------
#: the most rates one ``servesim spec-sweep`` runs (two simulations each)
MAX_SPEC_SWEEP_RATES = 100


def _parse_rates(text: str) -> list[float]:
    shown = clip_text(repr(text), 60)
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--rates: expected comma-separated numbers, got {shown}") from None
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError(f"--rates: every rate must be a positive number, got {shown}")
    rates = sorted(set(rates))
    if len(rates) > MAX_SPEC_SWEEP_RATES:
        raise ValueError(f"--rates: {len(rates):,} rates (two runs each) > "
                         f"{MAX_SPEC_SWEEP_RATES}, the most one spec-sweep runs")
    return rates


def cmd_spec_sweep(args: argparse.Namespace) -> int:
    """Run ``servesim spec-sweep`` for parsed arguments.

    Raises
    ------
    ValueError
        Bad rates, a scenario without ``speculative:`` or any scenario error.
    """
    rates = _parse_rates(args.rates)
    jobs = _jobs(args)
    overrides = cli_overrides(args.set, args.trace, args.seed)
    scenario, base = load_scenario(args.scenario, overrides)
    if scenario.speculative is None:
        raise ValueError(f"{args.scenario}: no speculative: block (nothing to sweep)")
    check_replica(scenario, base, args.scenario, overrides)  # names before any run
    console = table_console(stderr=False, quiet=args.quiet)

    def prog(done, total):
        if not args.quiet:
            console.print(f"  run {done}/{total} done", highlight=False)

    source = scenario.workload.trace or "synthetic workload"
    df, _results, files = run_spec_sweep(
        scenario, base, rates, outdir=Path(args.output) if args.output else None,
        source=str(source), figures=not args.no_figures, jobs=jobs, backend=args.backend,
        address=args.address, progress=prog,
        scenario_file=read_scenario_yaml(args.scenario).get("__file__"))
    if not args.quiet:
        print_spec_sweep_table(df, rates, console, title=f"{scenario.name}: TPOT p50 speedup "
                                                         "with speculation, by slice")
        console.print(f"wrote {files['md']} and {files['html'].name}")
    return 0


def register_spec_sweep(subparsers) -> argparse.ArgumentParser:
    """Add ``servesim spec-sweep`` to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "spec-sweep",
        help="speculative decoding vs none over an arrival-rate sweep (acceptance economics)",
        description="Run a scenario with and without its speculative: block at several "
                    "arrival rates (workload.rate_scale multipliers) and write "
                    "acceptance_economics.md/.html/.png: speedup vs load per slice and the "
                    "crossover load beyond which speculation stops paying.")
    p.add_argument("scenario", type=scenario_file,
                   help="scenario YAML with a speculative: block (path, or a name under "
                        "scenarios/)")
    p.add_argument("--rates", default=",".join(f"{r:g}" for r in DEFAULT_RATES),
                   help="comma-separated rate multipliers (default: %(default)s)")
    p.add_argument("--trace", help="replay this trace file instead of the scenario's workload")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field (repeatable)")
    p.add_argument("--seed", type=whole_number, help="override the scenario seed")
    p.add_argument("-o", "--output", type=output_path,
                   help="output folder (default: reports/{name}_spec_sweep)")
    _parallel_args(p, "worker processes (default 1)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_spec_sweep)
    return p

