"""``servesim`` command line.

Subcommands: ``run``, ``compare``, ``sweep``, ``plan``, ``trace``, ``kv``, ``spec``,
``profiles``, ``calibrate``, ``validate``. Bad input exits 2 with one readable line on
stderr (no traceback; set ``SERVESIM_DEBUG=1`` to see one).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

EXIT_BAD_INPUT = 2


class CLIError(ValueError):
    """A user error the CLI reports in one line (exit 2)."""


def cmd_run(args) -> int:
    from rich.console import Console

    from .config import cli_overrides, load_scenario
    from .progress import progress
    from .report.markdown import print_summary_table
    from .run import run_scenario
    from .workload import load_workload
    scenario, base = load_scenario(args.scenario, cli_overrides(args.set, args.trace, args.seed))
    specs = load_workload(scenario.workload, scenario.seed, base)
    with progress("simulating requests", enabled=not args.quiet, force=args.progress) as cb:
        res = run_scenario(scenario, base, specs=specs, outdir=args.output,
                           figures=not args.no_figures, progress=cb)
    if not args.quiet:
        console = Console()
        print_summary_table(res.summary, console, title=f"servesim run: {scenario.name}",
                            scenario=scenario)
        console.print(f"outputs: {res.outdir}/ (summary.json, requests.csv, steps.csv, report.md)")
    return 0


def cmd_trace(args) -> int:
    """Statistics of a trace (JSON on stdout); ``--to-parquet OUT`` also writes a Parquet copy
    of the rows kept (``--start-s`` / ``--end-s``), which ``format: parquet`` replays."""
    import json

    import numpy as np

    from .workload import describe_workload, read_columns, write_parquet_trace
    if args.end_s is not None and not args.end_s > args.start_s:
        raise CLIError(f"--end-s {args.end_s:g} must be > --start-s {args.start_s:g}")
    if args.start_s < 0:
        raise CLIError(f"--start-s {args.start_s:g} must be >= 0")
    cols = read_columns(args.path, args.format, seed=args.seed, start_s=args.start_s,
                        end_s=args.end_s)
    keep = cols.arrival_s >= args.start_s
    if args.end_s is not None:
        keep &= cols.arrival_s < args.end_s
    cols = cols.take(np.flatnonzero(keep))
    order = np.argsort(cols.arrival_s, kind="stable")
    stats = describe_workload(cols.take(order).to_specs())
    stats["format"] = cols.format
    if args.to_parquet:
        meta = {"servesim.seed": str(args.seed)} if cols.format == "servegen" else {}
        if args.start_s or args.end_s is not None:
            meta["servesim.window_s"] = f"[{args.start_s:g}, {args.end_s if args.end_s is not None else 'end'})"
        out = write_parquet_trace(cols, args.to_parquet, metadata=meta)
        stats["parquet"] = str(out)
    print(json.dumps(stats, indent=2))
    return 0


def cmd_profiles(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .hardware import gpu_catalog
    from .models import CATALOG
    c = Console() if sys.stdout.isatty() else Console(width=200)
    t = Table(title="GPUs (hardware_profiles/)")
    for col in ("name", "bf16 TFLOP/s", "fp8 TFLOP/s", "HBM GB", "HBM TB/s", "$/GPU-h", "tables"):
        t.add_column(col)
    from .perf.tables import table_sets
    for g in gpu_catalog().values():
        d = g.profile_dir or Path(".")
        tables = sorted(p.name for p in [*d.glob("*.csv"), *d.glob("fitted*.yaml")])
        sets = [s.name for s in table_sets(g) if s.folder != d]
        if sets:
            tables.append("tables/: " + " ".join(sets))
        t.add_row(g.name, f"{g.bf16_flops_per_s / 1e12:.3g}",
                  f"{g.fp8_flops_per_s / 1e12:.3g}" if g.fp8_flops_per_s else "-",
                  f"{g.hbm_bytes / 1e9:.0f}", f"{g.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
                  f"{g.usd_per_gpu_hour:.2f}", ", ".join(tables) or "(datasheet only)")
    c.print(t)
    t = Table(title="Models")
    for col in ("id", "Hugging Face id", "params (B)", "layers", "kv heads", "KV B/token (bf16)"):
        t.add_column(col)
    for m in CATALOG.values():
        t.add_row(m.name, m.hf_id or "", f"{m.num_params() / 1e9:.2f}", str(m.num_layers),
                  str(m.num_kv_heads), f"{m.kv_bytes_per_token('bf16'):,}")
    c.print(t)
    return 0


def _register_optional(sub, module: str) -> None:
    import importlib
    try:
        mod = importlib.import_module(module, __package__)
    except ImportError:
        return
    mod.register(sub)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servesim", description=__doc__.splitlines()[0])
    from . import __version__
    p.add_argument("--version", action="version", version=f"servesim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    r = sub.add_parser("run", help="simulate one scenario and write its report")
    r.add_argument("scenario", help="scenario YAML (path, or a name under scenarios/)")
    r.add_argument("--trace", help="replay this trace file instead of the scenario's workload")
    r.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field (repeatable)")
    r.add_argument("--seed", type=int, help="override the scenario seed")
    r.add_argument("-o", "--output", help="output folder (default: scenario output_dir)")
    r.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    r.add_argument("--progress", action="store_true",
                   help="always show progress (a bar on a terminal; plain lines at the start "
                        "and every 10%% otherwise)")
    r.add_argument("-q", "--quiet", action="store_true")
    r.set_defaults(func=cmd_run)

    t = sub.add_parser("trace", help="statistics of a trace file (and a Parquet copy)")
    t.add_argument("path", help="trace file, or a ServeGen folder / chunk-N-trace.csv")
    t.add_argument("--format", default="auto",
                   choices=("auto", "azure", "vidur", "mooncake", "generic_csv",
                            "generic_jsonl", "parquet", "servegen"))
    t.add_argument("--to-parquet", metavar="OUT", help="also write the rows as Parquet "
                   "(replay it with workload.trace: OUT, format: parquet or auto)")
    t.add_argument("--seed", type=int, default=0,
                   help="seed of the requests generated from ServeGen data (default 0)")
    t.add_argument("--start-s", type=float, default=0.0,
                   help="keep arrivals from this time on the trace's clock (s)")
    t.add_argument("--end-s", type=float, default=None,
                   help="keep arrivals before this time on the trace's clock (s)")
    t.set_defaults(func=cmd_trace)

    pr = sub.add_parser("profiles", help="list the GPU profiles and models in the catalog")
    pr.set_defaults(func=cmd_profiles)

    for mod in (".speculative.cli", ".speculative.economics", ".kv.cli", ".compare",
                ".planner.cli", ".calibrate_cli"):
        _register_optional(sub, mod)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning as one ``servesim: warning:`` line on stderr (no source echo)."""
    text = str(message).strip().splitlines()[0] if str(message).strip() else category.__name__
    own = category.__module__.startswith("simulator")
    print(f"servesim: warning: {text if own else f'{category.__name__}: {text}'}",
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as e:
        if os.environ.get("SERVESIM_DEBUG"):
            raise
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"servesim: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("servesim: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if os.environ.get("SERVESIM_DEBUG"):
            raise
        print(f"servesim: internal error: {type(e).__name__}: {e} "
              "(set SERVESIM_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
