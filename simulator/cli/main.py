"""``servesim`` command line: every subcommand in one table, :data:`SUBCOMMANDS`.

Each row names the subcommand(s), the module that defines them and its function that adds
them to the parser (``register(subparsers)``). The parser imports every row's module when it
is built: a module that cannot be imported (a broken install, a missing dependency) stops
the CLI with one readable line naming the subcommand and the cause (exit 2), instead of the
subcommand quietly missing from ``--help``. Bad input exits 2 with one readable line on
stderr (no traceback; set ``SERVESIM_DEBUG=1`` to see one).

The small subcommands live here: ``run`` (one scenario), ``trace`` (trace statistics),
``profiles`` (the GPU and model catalogs) and ``spec`` (the closed-form speculative decoding
calculator of :mod:`simulator.speculative.calculator`).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import re
import sys
import warnings
from pathlib import Path
from typing import NamedTuple, NoReturn

import numpy as np

from simulator import __version__
from simulator.base.compiled_core import status as core_status
from simulator.base.gc_freeze import freeze_for_exit
from simulator.base.input_limits import short_repr
from simulator.base.outdir import (
    check_outputs_spare_inputs,
    describe_os_error,
    discard_empty_created,
    hold_output_folders,
    input_files,
    make_output_folder,
)
from simulator.base.progress import progress
from simulator.base.progress import show_warning_line as _show_warning
from simulator.catalog.hardware import gpu_catalog
from simulator.catalog.models import CATALOG
from simulator.cli.args import (
    OneLineParser,
    output_path,
    scenario_file,
    seed_number,
    table_console,
    whole_number,
)
from simulator.cli.day import add_day_arguments, cmd_run_day
from simulator.cli.process import exit_process, start_process
from simulator.cli.stops import (
    Terminated,
    exit_cleanly_on_stop_signals,
    stop_exception,
    stop_notes,
)
from simulator.cluster.setup import check_replica
from simulator.metrics.tables_io import TABLE_FORMATS
from simulator.perf.tables.sets import table_sets
from simulator.report.figures import plot_speculative_speedup
from simulator.report.run import print_summary_table
from simulator.runs.gateway import check_defaults, run_gateway
from simulator.runs.scenario import (
    check_policy_slices,
    resolve_outdir,
    run_output_names,
    run_scenario,
    scenario_inputs,
    shipped_data_folders,
)
from simulator.scenario.config import load_scenario
from simulator.scenario.overrides import cli_overrides
from simulator.scenario.yaml_files import read_scenario_yaml
from simulator.speculative.calculator import (
    DEFAULT_SWEEP_KS,
    DEFAULT_SWEEP_RATES,
    break_even_acceptance_rate,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
    sweep_table,
)
from simulator.workload import (
    ServeGenLengthsMissing,
    TraceFormatMismatch,
    describe_columns,
    load_workload,
    read_columns,
    session_starts,
    write_parquet_trace,
)

#: ``servesim --help``'s description (plain text for users, not this module's docstring)
DESCRIPTION = ("Capacity-planning simulator for LLM inference serving: replay a workload "
               "through a model of a serving cluster and report latency, SLO attainment, "
               "goodput and cost. 'servesim COMMAND --help' describes a command.")

EXIT_BAD_INPUT = 2
#: stdout's reader closed it (``| head``): no message, status 1 (as rich's console and the
#: Python documentation's SIGPIPE recipe do)
EXIT_BROKEN_PIPE = 1


class CLIError(ValueError):
    """A user error the CLI reports in one line (exit 2)."""


class Subcommand(NamedTuple):
    """One row of :data:`SUBCOMMANDS`."""

    names: tuple[str, ...]
    module: str
    register: str


#: Every subcommand of ``servesim``, in ``--help`` order: (names, module, function adding
#: them to the subparsers).
SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(("run",), "simulator.cli.main", "register_run"),
    Subcommand(("compare",), "simulator.cli.experiments", "register_compare"),
    Subcommand(("sweep", "plan"), "simulator.cli.plan", "register"),
    Subcommand(("trace",), "simulator.cli.main", "register_trace"),
    Subcommand(("kv",), "simulator.cli.kv", "register"),
    Subcommand(("spec",), "simulator.cli.main", "register_spec"),
    Subcommand(("spec-sweep",), "simulator.cli.experiments", "register_spec_sweep"),
    Subcommand(("profiles",), "simulator.cli.main", "register_profiles"),
    Subcommand(("calibrate", "validate"), "simulator.cli.calibrate", "register"),
)


# --------------------------------------------------------------------------------------------
# run, trace, profiles
# --------------------------------------------------------------------------------------------
def cmd_run(args) -> int:
    """``servesim run``: simulate one scenario, print the headline table, write the report."""
    overrides = cli_overrides(args.set, args.trace, args.seed)
    # the file first: the output folder made below cannot change what the name means
    source_file = read_scenario_yaml(args.scenario).get("__file__")
    scenario, base = load_scenario(source_file, overrides, source=args.scenario)
    if scenario.pools:
        check_defaults(scenario)  # names before reading the trace
    else:  # model, GPU, engine profile, split and memory before reading the trace
        check_replica(scenario, base, args.scenario, overrides)
    # one pool: the requests stay columns until the run reaches them (issue 12 part 3)
    specs = load_workload(scenario.workload, scenario.seed, base, lazy=not scenario.pools)
    check_policy_slices(scenario, specs)
    out = make_output_folder(resolve_outdir(scenario, args.output))  # before simulating
    check_outputs_spare_inputs(out, run_output_names(), scenario_inputs(
        scenario, base, [source_file]))
    if args.day_window_s is None and args.lead_in_s is not None:
        raise CLIError("--lead-in-s is the lead-in of each window of --day-window-s: give "
                       "--day-window-s S too, or leave --lead-in-s out")
    if args.day_window_s is not None:  # a day by windows (issue 31 part 4)
        return cmd_run_day(args, scenario, base, specs, out)
    if scenario.pools:  # several pools behind one gateway (issue 11)
        res = run_gateway(scenario, base, specs=specs, outdir=args.output,
                          figures=not args.no_figures, table_format=args.table_format)
    else:
        with progress("simulating requests", enabled=not args.quiet,
                      force=args.progress) as cb:
            res = run_scenario(scenario, base, specs=specs, outdir=args.output,
                               figures=not args.no_figures, progress=cb,
                               table_format=args.table_format)
    if not args.quiet:
        console = table_console()  # rich loads after the simulation (start-up)
        print_summary_table(res.summary, console, title=f"servesim run: {scenario.name}",
                            scenario=scenario)
        ext = args.table_format
        console.print(f"outputs: {res.outdir}/ (summary.json, requests.{ext}, steps.{ext}, "
                      "report.md, report.html)")
    return 0


def register_run(sub) -> None:
    """Add ``servesim run``."""
    r = sub.add_parser("run", help="simulate one scenario and write its report")
    r.add_argument("scenario", type=scenario_file,
                   help="scenario YAML (path, or a name under scenarios/)")
    r.add_argument("--trace", help="replay this trace file instead of the scenario's workload")
    r.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field (repeatable)")
    r.add_argument("--seed", type=whole_number, help="override the scenario seed")
    r.add_argument("-o", "--output", type=output_path,
                   help="output folder (default: scenario output_dir)")
    r.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    r.add_argument("--table-format", choices=TABLE_FORMATS, default="parquet",
                   help="file format of requests and steps tables (default: parquet; csv "
                        "keeps full float precision too)")
    r.add_argument("--progress", action="store_true",
                   help="always show progress (a bar on a terminal; plain lines at the start "
                        "and every 10%% otherwise)")
    r.add_argument("-q", "--quiet", action="store_true")
    add_day_arguments(r)
    r.set_defaults(func=cmd_run)


def cmd_trace(args) -> int:
    """``servesim trace``: statistics of a trace (JSON on stdout); ``--to-parquet OUT`` also
    writes a Parquet copy of the rows kept (``--start-s`` / ``--end-s``), which
    ``format: parquet`` replays."""
    if not math.isfinite(args.start_s):
        raise CLIError(f"--start-s {args.start_s} must be a finite number of seconds >= 0")
    if args.end_s is not None and math.isnan(args.end_s):
        raise CLIError(f"--end-s {args.end_s} must be a number of seconds > --start-s "
                       f"{args.start_s:g}")
    if args.end_s is not None and not args.end_s > args.start_s:
        raise CLIError(f"--end-s {args.end_s:g} must be > --start-s {args.start_s:g}")
    if args.start_s < 0:
        raise CLIError(f"--start-s {args.start_s:g} must be >= 0")
    if args.to_parquet:  # never over the trace it reads (a ServeGen folder: any of its files)
        out = Path(args.to_parquet)
        check_outputs_spare_inputs(out.parent, [out.name], input_files(
            values={"trace": args.path}, folders=[Path.cwd()],
            data_folders=shipped_data_folders()), flag="--to-parquet")
    try:
        cols = read_columns(args.path, args.format, seed=args.seed, start_s=args.start_s,
                            end_s=args.end_s)
    except TraceFormatMismatch as e:
        raise CLIError(f"{e}; check --format (leave it out to detect the format)") from None
    except ServeGenLengthsMissing:
        raise CLIError(f"{args.path}: this ServeGen data has arrivals only (no "
                       "chunk-N-dataset.json): it has no lengths for servesim trace to "
                       "describe; replay it in a scenario that gives them "
                       "(workload.servegen.prompt_tokens and output_tokens)") from None
    start = session_starts(cols)  # a session is kept whole when its first turn is kept
    keep = start >= args.start_s
    if args.end_s is not None:
        keep &= start < args.end_s
    if not keep.any() and (args.start_s or args.end_s is not None):
        # as `servesim run` refuses a workload window with no request
        end = f"{args.end_s:g}" if args.end_s is not None else "end"
        raise CLIError(f"{args.path}: no requests in the window [{args.start_s:g}, {end}) s "
                       f"({len(cols)} in the trace); widen --start-s / --end-s")
    if not keep.all():
        cols = cols.take(np.flatnonzero(keep))
    stats = describe_columns(cols)  # from the columns: no object per row (10M-row traces)
    stats["format"] = cols.format
    if cols.time_origin:  # the file's timestamps were re-based: where its clock's 0 is
        stats["time_origin"] = cols.time_origin
    if args.to_parquet:
        if args.start_s:
            # re-based to t - start_s, as a workload window re-bases (traces/README.md)
            cols = dataclasses.replace(cols, arrival_s=cols.arrival_s - args.start_s)
        meta = {"servesim.seed": str(args.seed)} if cols.format == "servegen" else {}
        if args.start_s or args.end_s is not None:
            end = args.end_s if args.end_s is not None else "end"
            meta["servesim.window_s"] = f"[{args.start_s:g}, {end})"
        out = write_parquet_trace(cols, args.to_parquet, metadata=meta)
        stats["parquet"] = str(out)
    print(json.dumps(stats, indent=2))
    return 0


def register_trace(sub) -> None:
    """Add ``servesim trace``."""
    t = sub.add_parser("trace", help="statistics of a trace file (and a Parquet copy)")
    t.add_argument("path", help="trace file, or a ServeGen folder / chunk-N-trace.csv")
    t.add_argument("--format", default="auto",
                   choices=("auto", "azure", "vidur", "mooncake", "generic_csv",
                            "generic_jsonl", "parquet", "servegen"))
    t.add_argument("--to-parquet", metavar="OUT", type=output_path,
                   help="also write the rows as Parquet (replay it with workload.trace: OUT, "
                        "format: parquet or auto)")
    t.add_argument("--seed", type=seed_number, default=0,
                   help="seed of the requests generated from ServeGen data (default 0)")
    t.add_argument("--start-s", type=float, default=0.0,
                   help="keep arrivals from this time on the trace's clock (s)")
    t.add_argument("--end-s", type=float, default=None,
                   help="keep arrivals before this time on the trace's clock (s)")
    t.set_defaults(func=cmd_trace)


def cmd_profiles(args) -> int:
    """``servesim profiles``: the GPU profiles and the model catalog."""
    from rich.table import Table

    c = table_console()
    t = Table(title="GPUs (hardware_profiles/)")
    for col in ("name", "bf16 TFLOP/s", "fp8 TFLOP/s", "HBM GB", "HBM TB/s", "$/GPU-h", "tables"):
        t.add_column(col)
    for g in gpu_catalog().values():
        d = g.profile_dir or Path(".")
        tables = sorted(p.name for p in [*d.glob("*.csv"), *d.glob("fitted*.yaml")])
        ts = table_sets(g)
        sets = [s.name for s in ts if s.folder != d and not s.efficiency_from]
        if sets:
            tables.append("tables/: " + " ".join(sets))
        moved = [s.name for s in ts if s.efficiency_from]
        if moved:   # excess time transferred from a same-die sibling (compute kernels only)
            tables.append(f"measured excess time of {g.efficiency_tables_from} "
                          f"({' '.join(moved)}; compute kernels) over its own roofline")
        t.add_row(g.name, f"{g.bf16_flops_per_s / 1e12:.3g}",
                  f"{g.fp8_flops_per_s / 1e12:.3g}" if g.fp8_flops_per_s else "-",
                  f"{g.hbm_bytes / 1e9:.0f}", f"{g.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
                  f"{g.usd_per_gpu_hour:.2f}" if g.usd_per_gpu_hour else "none",
                  ", ".join(tables) or "(datasheet only)")
    c.print(t)
    t = Table(title="Models")
    for col in ("id", "Hugging Face id", "params (B)", "layers", "kv heads", "KV B/token (bf16)"):
        t.add_column(col)
    for m in CATALOG.values():
        t.add_row(m.name, m.hf_id or "", f"{m.num_params() / 1e9:.2f}", str(m.num_layers),
                  str(m.num_kv_heads), f"{m.kv_bytes_per_token('bf16'):,}")
    c.print(t)
    return 0


def register_profiles(sub) -> None:
    """Add ``servesim profiles``."""
    pr = sub.add_parser("profiles", help="list the GPU profiles and models in the catalog")
    pr.set_defaults(func=cmd_profiles)


# --------------------------------------------------------------------------------------------
# spec: the closed-form calculator
# --------------------------------------------------------------------------------------------
#: Largest k the calculator's "best k" searches.
_K_SEARCH_MAX = 16
#: Largest k the calculator takes (a draft of thousands of tokens per step is no setting;
#: the bound keeps ``a ** (k + 1)`` a float)
_K_MAX = 10_000
_SPEC_NOTE = ("Batch-1 estimate (Leviathan et al. 2023, arXiv:2211.17192, Eq. 1 and Thm 3.8); "
              "run a scenario to see the effect under batching.")


def register_spec(sub) -> argparse.ArgumentParser:
    """Add ``servesim spec`` (the parser's ``func`` is :func:`cmd_spec`)."""
    p = sub.add_parser(
        "spec",
        help="speculative decoding calculator (tokens/step, speedup, break-even)",
        description="Closed-form speculative decoding estimates: expected tokens per step, "
                    "walltime speedup and the break-even acceptance rate. " + _SPEC_NOTE)
    p.add_argument("--acceptance-rate", "-a", type=float, metavar="A",
                   help="probability a draft token is accepted, in [0, 1]")
    p.add_argument("--num-speculative-tokens", "-k", type=whole_number, metavar="K",
                   help="draft tokens proposed per step (>= 1)")
    p.add_argument("--draft-cost", "-c", type=float, metavar="C", required=True,
                   help="draft step time / target step time (>= 0; ~0 for n-gram drafts)")
    p.add_argument("--sweep", action="store_true",
                   help=f"print speedups for a in {DEFAULT_SWEEP_RATES[0]:.2f}.."
                        f"{DEFAULT_SWEEP_RATES[-1]:.2f} and k in {DEFAULT_SWEEP_KS[0]}.."
                        f"{DEFAULT_SWEEP_KS[-1]}")
    p.add_argument("-o", "--output", metavar="PNG", type=output_path,
                   help="with --sweep: write a plot of speedup vs acceptance rate here")
    p.set_defaults(func=cmd_spec)
    return p


def _check_spec_args(args: argparse.Namespace) -> None:
    a, k, c = args.acceptance_rate, args.num_speculative_tokens, args.draft_cost
    if a is not None and not (0.0 <= a <= 1.0):
        raise ValueError(f"--acceptance-rate must lie in [0, 1], got {a}")
    if k is not None and not 1 <= k <= _K_MAX:
        raise ValueError(f"--num-speculative-tokens must be in [1, {_K_MAX:,}], got "
                         f"{short_repr(k)}")
    if not (math.isfinite(c) and c >= 0.0):
        raise ValueError(f"--draft-cost must be a finite number >= 0, got {c}")
    if not args.sweep and (a is None or k is None):
        raise ValueError("--acceptance-rate and --num-speculative-tokens are required "
                         "unless --sweep is given")
    if (a is None) != (k is None):
        raise ValueError("give --acceptance-rate and --num-speculative-tokens together")
    if args.output and not args.sweep:
        raise ValueError("-o/--output writes the sweep plot; it needs --sweep")


def _spec_point_table(a: float, k: int, c: float):
    from rich.table import Table

    best = optimal_k(a, c, _K_SEARCH_MAX)
    be = break_even_acceptance_rate(k, c)
    t = Table(title="Speculative decoding estimate", show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("acceptance rate a", f"{a:.4f}")
    t.add_row("draft tokens per step k", str(k))
    t.add_row("draft cost ratio c", f"{c:.4f}")
    t.add_row("expected tokens per step", f"{expected_tokens_per_step(a, k):.4f}")
    t.add_row("expected speedup", f"{expected_speedup(a, k, c):.4f}x")
    t.add_row(f"break-even acceptance rate (k={k})",
              "none (speculation never pays off)" if be is None else f"{be:.4f}")
    t.add_row(f"best k in 0..{_K_SEARCH_MAX}",
              f"{best} ({expected_speedup(a, best, c):.4f}x)" if best else "0 (do not speculate)")
    return t


def _spec_sweep_table(df, c: float):
    from rich.table import Table

    t = Table(title=f"Expected speedup, draft cost ratio c = {c:g}")
    t.add_column("a", justify="right")
    for kk in DEFAULT_SWEEP_KS:
        t.add_column(f"k={kk}", justify="right")
    wide = df.pivot(index="acceptance_rate", columns="num_speculative_tokens", values="speedup")
    for rate, row in wide.iterrows():
        cells = []
        for kk in DEFAULT_SWEEP_KS:
            s = float(row[kk])
            style = "green" if s > 1.0 else "red" if s < 1.0 else ""
            cells.append(f"[{style}]{s:.2f}[/{style}]" if style else f"{s:.2f}")
        t.add_row(f"{rate:.2f}", *cells)
    t.add_section()
    t.add_row("a*", *["-" if (be := break_even_acceptance_rate(kk, c)) is None else f"{be:.3f}"
                      for kk in DEFAULT_SWEEP_KS])
    return t


def cmd_spec(args: argparse.Namespace) -> int:
    """Run ``servesim spec`` for parsed arguments.

    Raises
    ------
    ValueError
        On an out-of-range or missing value (one-line message).
    """
    _check_spec_args(args)
    console = table_console()
    a, k, c = args.acceptance_rate, args.num_speculative_tokens, args.draft_cost
    if a is not None:
        console.print(_spec_point_table(a, k, c))
    if args.sweep:
        df = sweep_table(DEFAULT_SWEEP_RATES, DEFAULT_SWEEP_KS, c)
        console.print(_spec_sweep_table(df, c))
        console.print("a* = break-even acceptance rate (speedup = 1) for each k.")
        if args.output:
            console.print(f"wrote {plot_speculative_speedup(df, args.output)}")
    console.print(_SPEC_NOTE)
    return 0


# --------------------------------------------------------------------------------------------
# the parser and main
# --------------------------------------------------------------------------------------------
def _load(row: Subcommand):
    try:
        return getattr(importlib.import_module(row.module), row.register)
    except (ImportError, AttributeError) as e:
        cause = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CLIError(f"subcommand {'/'.join(row.names)} cannot load: {row.module}: "
                       f"{type(e).__name__}: {cause}") from e


class _VersionAction(argparse.Action):
    """``--version``: one unwrapped line (argparse's own version action wraps it at the
    terminal's width), e.g. ``servesim 0.1.0 (core: compiled (mypyc))``."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"servesim {__version__} ({core_status().describe()})")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``servesim`` parser with every subcommand of :data:`SUBCOMMANDS`.

    Parameters
    ----------
    command : str, optional
        A subcommand name: only its row's module is imported and registered (start-up: a
        ``servesim run`` does not import the planner, the experiments or the calibration
        harness). ``None``, or a name no row has, builds the whole parser (``--help``, and
        argparse's error listing the valid subcommands).

    Raises
    ------
    CLIError
        When a row's module cannot be imported, lacks its function, or adds other
        subcommands than the row names.
    """
    p = OneLineParser(prog="servesim", description=DESCRIPTION)
    p.add_argument("--version", action=_VersionAction, nargs=0,
                   help="print the version and the build of the core that runs (compiled or "
                        "pure Python, and why), then exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    rows = [r for r in SUBCOMMANDS if command in r.names] or SUBCOMMANDS
    for row in rows:
        before = set(sub.choices)
        _load(row)(sub)
        added = tuple(n for n in sub.choices if n not in before)
        if set(added) != set(row.names):
            raise CLIError(f"{row.module}.{row.register} added {', '.join(added) or 'nothing'}; "
                           f"the subcommand table expects {', '.join(row.names)}")
    return p


def _first_line(e: BaseException) -> str:
    """The message of ``e`` for stderr: its first line, a run of more than 60 digits (a
    number typed with hundreds of them) cut to its first 20 and its length."""
    line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return _LONG_NUMBER.sub(lambda m: f"{m.group()[:20]}...({len(m.group()):,} digits)", line)


_LONG_NUMBER = re.compile(r"\d{61,}")


def main(argv: list[str] | None = None) -> int:
    """Run ``servesim`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    Without ``argv`` this is the process's own command (the ``servesim`` script, ``python -m
    simulator.cli``), which exits when it returns: the garbage collector is then frozen
    (:func:`simulator.base.gc_freeze.freeze_for_exit`), so that the interpreter's shutdown
    skips its collections over every object still held (~0.2 s once pandas and the run's
    objects are loaded). With ``argv`` (tests, scripts) the collector is left as it is.
    """
    if argv is None:
        try:
            return _main(sys.argv[1:])
        finally:
            freeze_for_exit()
    return _main(list(argv))


def console() -> NoReturn:
    """The ``servesim`` script and ``python -m simulator.cli``: the process is set up
    (:func:`simulator.cli.process.start_process`: Arrow's allocator), :func:`main` runs on its
    arguments, then the process ends (:func:`simulator.cli.process.exit_process`: exit
    functions run, no teardown of the run's objects)."""
    start_process()
    exit_process(main())


def _main(argv: list[str]) -> int:
    try:
        parser = build_parser(argv[0] if argv else None)
    except CLIError as e:
        if os.environ.get("SERVESIM_DEBUG"):
            raise
        print(f"servesim: error: {_first_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    args = parser.parse_args(argv)
    restore = exit_cleanly_on_stop_signals()
    rc = 1  # until the command returns: an exception leaves no empty output folder behind
    hold_output_folders()  # one run per output folder until the command ends (outdir.py)
    try:
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _show_warning
                rc = int(args.func(args) or 0)
                return rc
        except Exception as e:
            stop = stop_exception(e)
            if stop is None:
                raise
            raise stop from e
    except (ValueError, FileNotFoundError, KeyError) as e:
        if os.environ.get("SERVESIM_DEBUG"):
            raise
        print(f"servesim: error: {_first_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader of stdout went away (``servesim trace F | head``): stop quietly; stdout
        # goes to /dev/null so that the flush at exit does not raise again
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_BROKEN_PIPE
    except OSError as e:  # no space left for the step spool or the outputs: where, and why
        if os.environ.get("SERVESIM_DEBUG"):
            raise
        print(f"servesim: error: {describe_os_error(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"servesim: interrupted{stop_notes(e)}", file=sys.stderr)
        return 130
    except Terminated as e:
        print(f"servesim: terminated{stop_notes(e)}", file=sys.stderr)
        return 143
    except Exception as e:
        if os.environ.get("SERVESIM_DEBUG"):
            raise
        print(f"servesim: internal error: {type(e).__name__}: {e} "
              "(set SERVESIM_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
    finally:
        discard_empty_created(remove=bool(rc))
        restore()


if __name__ == "__main__":  # pragma: no cover
    console()
