"""``servesim sweep`` and ``servesim plan`` (registered by :func:`register`)."""
from __future__ import annotations

import math
import sys

from simulator.base.progress import progress
from simulator.cli.args import output_path, scenario_file, table_console, whole_number
from simulator.experiments.executor import default_jobs
from simulator.planner.day import DayPlanSpec, load_day_plan, run_day_plan
from simulator.planner.day_report import FLEET_HEADER, fleet_rows
from simulator.planner.plan import run_plan
from simulator.planner.report import _headline, _tag, _usd, _usd4, capacity_text
from simulator.planner.spec import (
    PlanError,
    apply_spec_overrides,
    load_plan_spec,
    load_sweep_spec,
    spec_overrides,
)
from simulator.planner.sweep import run_sweep
from simulator.planner.topology import TopologyPlanSpec, cmd_topology_plan
from simulator.report.sweep import print_sweep_table
from simulator.scenario.config import ScenarioError
from simulator.scenario.overrides import Override
from simulator.scenario.yaml_files import read_yaml_mapping

__all__ = ["cmd_day_plan", "cmd_plan", "cmd_sweep", "register"]


def _common(p) -> None:
    p.add_argument("--trace", help="replay this trace file instead of the base workload's")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a field of the base scenario (repeatable)")
    p.add_argument("-j", "--jobs", type=whole_number, default=None,
                   help="parallel workers (default: all cores; 1 runs in process)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool (default) or a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (default: start a local "
                   "instance); one that does not answer within $SERVESIM_RAY_CONNECT_TIMEOUT_S "
                   "(default 10 s) is an error")
    p.add_argument("-o", "--output", type=output_path,
                   help="output folder (default: the file's output_dir)")
    p.add_argument("--no-cache", action="store_true",
                   help="ignore cached results (new results are still cached)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or tables")


def _jobs(args) -> int:
    return args.jobs if args.jobs is not None else default_jobs()


def cmd_sweep(args) -> int:
    """Run a sweep file; prints a short table and where the results went."""
    spec, folder = load_sweep_spec(args.sweep, args.sweep_set)
    with progress("sweep points", enabled=not args.quiet, force=args.progress) as cb:
        res = run_sweep(spec, folder, scenario_overrides=args.set, trace=args.trace,
                        jobs=_jobs(args), backend=args.backend, address=args.address,
                        use_cache=not args.no_cache, outdir=args.output, progress=cb,
                        figures=not args.no_figures, source=args.sweep)
    n_err = int((res.table["status"] == "error").sum())
    if not args.quiet:
        c = table_console()
        print_sweep_table(res.table, c, title=f"servesim sweep: {spec.name} "
                                              f"({res.num_points} points)")
        failed = f" ({n_err} of them failed)" if n_err else ""
        c.print(f"{res.num_simulated} simulated{failed}, {res.num_cached} from cache, "
                f"{res.wall_s:.1f} s; table: {res.files.get('parquet')} and "
                f"{res.files.get('csv')}; report: {res.files.get('md')}, "
                f"{res.files.get('html')}", markup=False)  # paths: no rich markup
    if n_err:  # also with -q: quiet drops the tables and progress, not the warnings
        print(f"servesim: warning: {n_err} point(s) failed (see the 'error' column)",
              file=sys.stderr)
    return 0


def _notice(line: str) -> None:
    """One ``servesim: plan:`` line on stderr (the plan changed course)."""
    print(f"servesim: plan: {line}", file=sys.stderr, flush=True)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def cmd_plan(args) -> int:
    """Run a plan file; prints the recommendation and where the report went."""
    from rich.markup import escape  # names and labels are the user's: no rich markup
    from rich.table import Table

    raw, raw_path = read_yaml_mapping(args.plan, "plan", PlanError)
    plan_set = spec_overrides(args.plan_set, "--plan-set")
    if "topology_search" in raw:  # aggregated vs disaggregated (issue 11)
        unused = [f for f, v in (("--target-rate", args.target_rate),
                                 ("--max-requests", args.max_requests)) if v is not None]
        if unused:
            raise PlanError(f"{args.plan}: {', '.join(unused)}: not used by a topology plan "
                            "(it replays the base workload at rate_scale; use --plan-set "
                            "rate_scale=X or window_s=S)")
        try:
            raw = apply_spec_overrides(raw, plan_set, TopologyPlanSpec)
        except ScenarioError as e:  # a bad boolean spelling, named as load_plan_spec names it
            raise PlanError(f"{args.plan}: {e}") from None
        return cmd_topology_plan(args, raw, raw_path.parent, _jobs(args), plan_set)
    if "day" in raw:  # static peak / static mean / autoscaled over a day (issue 31)
        try:
            raw = apply_spec_overrides(raw, plan_set, DayPlanSpec)
        except ScenarioError as e:
            raise PlanError(f"{args.plan}: {e}") from None
        return cmd_day_plan(args, raw, raw_path.parent, _jobs(args), plan_set)
    if args.target_rate is not None:
        plan_set.append(Override(f"target_rate_rps={args.target_rate}",
                                 f"--target-rate {args.target_rate}"))
    if args.max_requests is not None:
        plan_set.append(Override(f"search.max_requests={args.max_requests}",
                                 f"--max-requests {args.max_requests}"))
    spec, folder = load_plan_spec(args.plan, plan_set)
    with progress("plan candidates", enabled=not args.quiet, force=args.progress) as cb:
        res = run_plan(spec, folder, scenario_overrides=args.set, trace=args.trace,
                       jobs=_jobs(args), backend=args.backend, address=args.address,
                       use_cache=not args.no_cache, outdir=args.output,
                       figures=not args.no_figures, progress=cb,
                       notify=None if args.quiet else _notice, source=args.plan)
    c = table_console()
    if args.quiet:
        print(_headline(res))
        return 0
    c.print(f"[bold]servesim plan: {escape(spec.name)}[/bold]  target "
            f"{res.workload['target_rate_rps']:.3f} requests/s, "
            f"{res.stats['num_candidates']} candidates")
    style = "green" if res.status in ("candidate", "baseline", "last_known_good") else "red"
    c.print(f"[{style}]{escape(_headline(res))}[/{style}]")
    c.print(res.recommendation["reason"], markup=False)
    b = res.recommendation.get("bottleneck") or {}
    if b.get("text"):
        c.print(f"bottleneck: {b['text']}", markup=False)
    rows = [res.recommendation["config"]] + res.recommendation["runners_up"]
    fb = (res.fallback or {}).get("config")
    if fb is not None and all(fb["label"] != r["label"] for r in rows):
        rows.append(fb)
    t = Table(title="recommendation, runners-up and fallback (prices: prefill / decode GPU "
                    "time per 1M input / output tokens)")
    for h in ("cap rps/replica", "GPUs", "$/h", "$/1M in", "$/1M out", "TTFT p99 (s)", "gates"):
        t.add_column(h, no_wrap=h != "gates")
    t.add_column("configuration", ratio=1)
    for r in rows:
        t.add_row(capacity_text(r, spec="{:.4g}"),
                  ("-" if r["replicas"] is None
                   else f"{_cell(r['replicas'])}x{r['tensor_parallel_size']}"),
                  _usd(r["usd_per_hour"]), _usd4(r.get("price_per_1m_input_tokens_usd")),
                  _usd4(r.get("price_per_1m_output_tokens_usd")),
                  _cell(r["ttft_p99_s_at_target"]),
                  escape("pass" if r["passed"] else ", ".join(r["failed_gates"])),
                  escape(_tag(r) + r["label"]
                         + (" (fallback)" if fb is not None and r["label"] == fb["label"]
                            else "")))
    c.print(t)
    st = res.stats
    c.print(f"{st['num_simulations']} simulations, {st['num_cache_hits']} cache hits, "
            f"{st['wall_s']:.1f} s")
    c.print(f"report: {res.files.get('md')}, {res.files.get('html')}, {res.files.get('json')}",
            markup=False)
    return 0


def register(subparsers) -> None:
    """Add the ``sweep`` and ``plan`` subcommands to ``servesim``'s parser."""
    s = subparsers.add_parser("sweep", help="run a base scenario over a grid of field values")
    s.add_argument("sweep", type=scenario_file,
                   help="sweep YAML (path, or a name under scenarios/)")
    _common(s)
    s.add_argument("--sweep-set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a field of the sweep file itself (repeatable)")
    s.add_argument("--no-figures", action="store_true", help="skip sweep.png")
    s.add_argument("--progress", action="store_true", help="always show progress (plain lines every 10%% when not a terminal)")
    s.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("plan", help="capacity plan: cheapest configuration meeting "
                                           "the SLOs at a target rate, with a report")
    p.add_argument("plan", type=scenario_file,
                   help="plan YAML (path, or a name under scenarios/)")
    _common(p)
    p.add_argument("--target-rate", type=float, help="target arrival rate (requests/s)")
    p.add_argument("--max-requests", type=whole_number, help="requests per capacity probe")
    p.add_argument("--plan-set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a field of the plan file itself, e.g. search.rel_tol=0.2")
    p.add_argument("--no-figures", action="store_true", help="skip the figures")
    p.add_argument("--progress", action="store_true", help="always show progress (plain lines every 10%% when not a terminal)")
    p.set_defaults(func=cmd_plan)


def cmd_day_plan(args, raw: dict, folder, jobs: int, plan_set=None) -> int:
    """``servesim plan FILE`` for a file with a ``day`` section (:mod:`simulator.planner.day`):
    size and simulate the fleets, print the verdict and where the report went."""
    unused = [f for f, v in (("--target-rate", args.target_rate),
                             ("--max-requests", args.max_requests)) if v is not None]
    if unused:
        raise PlanError(f"{args.plan}: {', '.join(unused)}: not used by a day plan (it "
                         "replays the base scenario's day)")
    spec = load_day_plan(raw, args.plan, plan_set)

    def notice(line: str) -> None:
        if not args.quiet:
            print(f"servesim: plan: {line}", file=sys.stderr, flush=True)

    res = run_day_plan(spec, folder, trace=args.trace, scenario_overrides=args.set,
                       outdir=args.output, jobs=jobs, backend=args.backend,
                       address=args.address, source=args.plan, figures=not args.no_figures,
                       notify=notice)
    print(res["verdict"])
    if not args.quiet:
        for row in fleet_rows(res):
            print("  " + "; ".join(f"{h}: {v}" for h, v in zip(FLEET_HEADER, row) if v))
        print(f"report: {res['files']['md']}, {res['files']['html']}, {res['files']['json']}")
    return 0
