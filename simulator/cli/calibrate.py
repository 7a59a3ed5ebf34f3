"""``servesim calibrate`` and ``servesim validate``.

``calibrate`` measures latency tables of a model on this machine's CPU or CUDA device and
writes a profile folder (tables, ``provenance.yaml``, ``spec.yaml``) that ``hardware.gpu`` can
point at: format v1 (flat, CPU default) or v2 (``tables/servesim-harness-<version>/``, CUDA
default); needs ``torch`` (``pip install -e ".[calibrate]"``). ``calibrate compare OURS THEIRS``
compares two table sets (no torch needed).

``validate --recorded RUN`` replays a real engine's recorded requests (a vLLM run folder or
``requests.jsonl``, an inference-perf folder, a ``vllm bench serve`` or GuideLLM JSON, or a
generic per-request CSV) in the
simulator and reports its error against what the engine measured
(:mod:`simulator.observe`; no torch needed). This is the fidelity evidence.

``validate --self-check`` (also plain ``validate`` and ``validate --device cpu``, kept for
existing docs and scripts) is an internal consistency check of the calibration harness, the
tables and the scheduler: the simulator against a tiny random-weight model served by servesim's
own scheduler on this device (torch harness, imported lazily). It is not fidelity evidence.
"""
from __future__ import annotations

import sys
from pathlib import Path

from simulator.cli.args import output_path, seed_number, whole_number


def _need_torch(cmd: str):
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"servesim {cmd} needs torch: pip install -e '.[calibrate]'") from None


def _device_defaults(device: str) -> dict:
    if device.startswith("cuda"):
        return {"max_num_seqs": 256, "max_num_batched_tokens": 8192, "max_context": 8192}
    return {"max_num_seqs": 16, "max_num_batched_tokens": 256, "max_context": 1024}


def cmd_calibrate(args) -> int:
    _need_torch("calibrate")
    from calibration.dispatch import calibrate
    d = _device_defaults(args.device)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    output = args.output or f"hardware_profiles/{args.device.split(':')[0]}-local"
    v2 = {"attention_backend": args.attention_backend, "fp8": args.fp8,
          "flush_l2": args.flush_l2, "cuda_graphs": args.cuda_graphs, "warmup": args.warmup,
          "repeats": args.repeats, "collectives": args.collectives,
          "file_format": args.table_file_format}
    out = calibrate(args.model, output, device=args.device, quick=args.quick,
                    tensor_parallel_size=args.tensor_parallel_size, threads=args.threads,
                    max_num_seqs=args.max_num_seqs or d["max_num_seqs"],
                    max_num_batched_tokens=args.max_num_batched_tokens
                    or d["max_num_batched_tokens"],
                    max_context=args.max_context or d["max_context"],
                    time_budget_s=args.time_budget, log=log, table_format=args.table_format,
                    **v2)
    if out.parent.name == "tables":  # a v2 table set
        print(f"table set: {out}/ (compare it: servesim calibrate compare {out} "
              f"<another set or profile>)")
    else:
        print(f"profile: {out}/ (use it: servesim run scenarios/default.yaml --set "
              f"hardware.gpu={out} --set model={args.model} --set perf.source=table)")
    return 0


def cmd_compare(args) -> int:
    """Compare two latency table sets (no torch needed)."""
    from calibration.compare import compare_table_sets, report_markdown, write_compare_report
    from simulator.base.outdir import check_outputs_spare_inputs, input_files
    if args.output:  # no report over a table of either set
        check_outputs_spare_inputs(
            args.output, ["compare.md", "compare_summary.csv", "compare_pairs.csv"],
            input_files(values={"trace": [args.ours, args.theirs]}, folders=[Path.cwd()]))
    res = compare_table_sets(args.ours, args.theirs, max_grid_factor=args.max_grid_factor)
    if args.output:
        paths = write_compare_report(res, args.output)
        print(report_markdown(res), end="")
        print(f"outputs: {paths['markdown']}, {paths['summary']}, {paths['pairs']}")
    else:
        print(report_markdown(res), end="")
    return 0


def cmd_validate(args) -> int:
    """Dispatch ``servesim validate``: ``--recorded`` replays a real record; otherwise the
    CPU/GPU self-check runs."""
    if args.recorded is not None:
        return cmd_validate_recorded(args)
    for flag, val in (("--scenario", args.scenario), ("--gpu", args.gpu),
                      ("--model", args.model), ("--set", args.set),
                      ("--engine-version", args.engine_version)):
        if val:
            raise ValueError(f"validate {flag} needs --recorded RUN (the self-check takes "
                             "--device, --profile, --num-requests, ...)")
    return cmd_self_check(args)


def cmd_validate_recorded(args) -> int:
    """``servesim validate --recorded RUN``: replay a recorded run and write the report."""
    if args.self_check:
        raise ValueError("validate: --recorded and --self-check are different checks; give one")
    if args.device is not None or args.profile is not None:
        raise ValueError("validate --recorded replays a record on the simulator only: --device "
                         "and --profile belong to --self-check")
    from simulator.observe.validate import validate_recorded
    rv = validate_recorded(args.recorded, scenario=args.scenario, gpu=args.gpu,
                           model=args.model, sets=args.set, out_dir=args.output,
                           figures=not args.no_figures, engine_version=args.engine_version)
    if not args.quiet:
        print_recorded_summary(rv.validation)
        print(f"outputs: {rv.outdir}/ ({', '.join(f.name for f in rv.files)})")
    c = rv.validation["counts"]
    if rv.run.aggregate_only:
        if not any(s["counts"]["simulated"]["success"] for s in rv.validation["stages"]):
            raise ValueError(f"validate --recorded: no request succeeded in the replay of any "
                             f"stage: nothing to compare; the report in {rv.outdir} shows the "
                             "replay's settings")
    elif not c["num_compared"]:
        # nothing to compare is a failed validation, not a result (the report says why)
        raise ValueError(
            f"validate --recorded: no request completed in both the record and the replay "
            f"({c['num_sim_completed']} of {c['num_requests_record']} completed in the "
            f"simulation): nothing to compare; the report in {rv.outdir} shows the replay's "
            "settings and its rejections")
    return 0


def print_recorded_summary(v: dict) -> None:
    """Print the headline errors of a ``validate --recorded`` run (one line per metric)."""
    def fmt(x):
        return "   n/a" if x is None else f"{x:+6.1f}"

    c = v["counts"]
    head = (f"{c['num_requests_replayed']} requests rebuilt from the workload the record "
            "describes, compared per stage" if v["run"].get("aggregate_only") else
            f"{c['num_compared']} of {c['num_requests_record']} requests compared")
    print(f"validate --recorded {v['run']['name']}: {head} ({c['num_sim_completed']} completed "
          f"in the simulation); perf model {v['perf_model']}, engine {v['engine']['name']}")
    if not v["run"].get("aggregate_only"):
        print("  signed % error (sim - real) / real:   mean    p50    p90    p99")
        for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")):
            if not v["metrics"][m]["real"]["count"]:
                continue
            print(f"  {label:37s}" + " ".join(fmt(v[f"{m}_{s}_pct_error"])
                                           for s in ("mean", "p50", "p90", "p99")))
        print(f"  {'makespan':37s}{fmt(v['makespan_pct_error'])}")
    print_stage_table(v)
    for a in v.get("approximations", []):
        print(f"  approximation: {a}")


def print_stage_table(v: dict) -> None:
    """Print the per-stage errors of a ``validate --recorded`` run (signed %, mean / p50 / p90
    / p99 per metric; success and failure counts; throughput)."""
    def fmt(x):
        return "   n/a" if x is None else f"{x:+6.1f}"

    stages = v.get("stages") or []
    if not stages:
        return
    api = v.get("api_server") or {}
    print(f"  per stage ({v['run'].get('metric_definitions', 'glossary')} definitions; API "
          f"server terms {'added' if api.get('applied') else 'not added'}): signed % error "
          "mean / p50 / p90 / p99")
    for s in stages:
        c, t = s["counts"], s["throughput"]
        print(f"  {s['name']}: {s['num_requests']} sent; success {c['recorded']['success']} "
              f"recorded / {c['simulated']['success']} simulated, failure "
              f"{c['recorded']['failure']} / {c['simulated']['failure']}; requests/s "
              f"{fmt(t['pct_error'].get('requests_per_s'))}%")
        for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")):
            e = s["pct_error"].get(m)
            if e is None or s["recorded"][m].get("mean") is None:
                continue
            print(f"    {label:35s}" + " ".join(fmt(e.get(k))
                                              for k in ("mean", "p50", "p90", "p99")))


def cmd_self_check(args) -> int:
    """The self-check: the simulator against servesim's own tiny engine on this device."""
    if args.self_check is False and args.device is None and not args.quiet:
        print("note: this is the self-check (an internal consistency check of harness, tables "
              "and scheduler), not fidelity evidence; servesim validate --recorded RUN "
              "compares with a real engine's recorded run", file=sys.stderr)
    args.device = args.device or "cpu"
    args.output = args.output or "reports/validate"
    _need_torch("validate --self-check")
    from calibration.validate import ValidateOptions, validate
    d = _device_defaults(args.device)
    opts = ValidateOptions(device=args.device, out_dir=args.output, profile=args.profile,
                           num_requests=args.num_requests, load=args.load, threads=args.threads,
                           max_num_seqs=args.max_num_seqs or d["max_num_seqs"],
                           max_num_batched_tokens=args.max_num_batched_tokens
                           or d["max_num_batched_tokens"], runs=args.runs,
                           quick_calibration=not args.full_calibration, trace=args.trace,
                           seed=args.seed)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    res = validate(opts, log=log)
    sp = res.get("real_run_spread", {})

    def fmt(v):
        return "n/a" if v is None else f"{v:.1f}"

    print(f"validation on {res['device']} ({res['num_real_steps']} real steps, "
          f"{res['workload']['num_requests']} requests)")
    print(f"  per-step abs % error, median / p90: {fmt(res['step_time_median_abs_pct_error'])} "
          f"/ {fmt(res['step_time_p90_abs_pct_error'])}   (real run 2 vs 1, same steps: "
          f"{fmt(sp.get('step_run2_vs_run1_median_abs_pct'))} / "
          f"{fmt(sp.get('step_run2_vs_run1_p90_abs_pct'))})")
    for m in ("ttft", "tpot", "e2e"):
        print(f"  {m.upper():4s} p50 / p99 % error: {fmt(res[f'{m}_p50_pct_error'])} / "
              f"{fmt(res[f'{m}_p99_pct_error'])}   (real run 2 vs 1: "
              f"{fmt(sp.get(f'run2_vs_run1_{m}_p50_pct_error'))} / "
              f"{fmt(sp.get(f'run2_vs_run1_{m}_p99_pct_error'))})")
    print(f"outputs: {opts.out_dir or 'reports/validate'}/ (validation.json, report.md)")
    return 0


def cmd_import_aic(args) -> int:
    """``servesim calibrate import-aic SRC -o DIR``: convert aiconfigurator's measured vLLM
    kernel tables into table sets (no torch needed; see calibration/import_aic.py)."""
    from calibration.import_aic import run
    run(args)
    return 0


def cmd_fit_engine(args) -> int:
    """``servesim calibrate fit-engine RUN... -o PROFILE``: fit an engine profile's free
    constants to recorded runs by least squares on per-request latencies, with the
    leave-one-run-out error (simulator/observe/fit_engine.py; no torch needed)."""
    from simulator.base.outdir import check_outputs_spare_inputs, input_files
    from simulator.observe.fit_engine import (
        DEFAULT_PARAMS,
        fit_engine,
        prepare_cases,
        write_profile,
    )
    from simulator.perf.engine_profile import get_engine_profile
    base = get_engine_profile(args.base)
    out = Path(args.output)  # where write_profile will write, checked before the fit
    if out.suffix not in (".yaml", ".yml"):
        out = out / f"{args.name or base.name}.yaml"
    check_outputs_spare_inputs(out.parent, [out.name], input_files(
        [base.path], values={"trace": list(args.runs)}, folders=[Path.cwd()]),
        flag="-o")
    names = tuple(x.strip() for x in (args.params or ",".join(DEFAULT_PARAMS)).split(",")
                  if x.strip())
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    cases = prepare_cases(args.runs, engine=args.base, gpu=args.gpu, model=args.model,
                          sets=args.set)
    res = fit_engine(cases, args.base, names, grid_points=args.grid_points,
                     loro=not args.no_loo, log=log)
    path = write_profile(res.profile, args.output, name=args.name)
    print(f"fitted on {len(res.runs)} runs: " + ", ".join(
        f"{k}={v:.6g}" for k, v in res.values.items()))
    print(f"{'run':45s} {'in-sample TTFT/TPOT/E2E mean %':>32s} {'left out':>28s}")
    for r in res.runs:
        a = res.in_sample[r]
        b = res.leave_one_run_out.get(r, {})

        def f3(d):
            vals = [d.get(f"{m}_mean_pct_error") for m in ("ttft", "tpot", "e2e")]
            return " / ".join("n/a" if v is None else f"{v:+.1f}" for v in vals)
        print(f"{r:45s} {f3(a):>32s} {f3(b) if b else '':>28s}")
    print(f"profile: {path} (name it with --set perf.engine={path})")
    return 0


def cmd_import_lss(args) -> int:
    """``servesim calibrate import-lss SRC -o DIR``: convert LLMServingSim's per-layer vLLM
    profiles into table sets ``<gpu>/tables/vllm-<version>-lss/`` (no torch; see
    calibration/import_lss.py)."""
    from calibration.import_lss import run
    run(args)
    return 0


#: One option: ``(flags, keyword arguments of argparse's add_argument)``.
Arg = tuple[tuple[str, ...], dict]

_QUIET: Arg = (("-q", "--quiet"), {"action": "store_true"})

#: Options of ``servesim calibrate`` (the measuring run).
CALIBRATE_ARGS: tuple[Arg, ...] = (
    (("--device",), {"default": "cpu", "help": "cpu, cuda or cuda:N (default cpu)"}),
    (("--model",), {"default": "servesim-tiny-llama",
                    "help": "servesim-tiny-llama (alias tiny), a catalog id, or a config.json "
                            "path"}),
    (("--quick",), {"action": "store_true",
                    "help": "smaller grid and fewer repeats (about a minute on 2 CPU cores)"}),
    (("-o", "--output"), {"type": output_path, "help": "profile folder to write (default "
                                  "hardware_profiles/<cpu|cuda>-local)"}),
    (("--tensor-parallel-size",), {"type": whole_number, "default": 1,
                                   "help": "measure the shapes of this TP shard (default 1)"}),
    (("--threads",), {"type": whole_number, "default": 1,
                      "help": "torch CPU threads (default 1; use the same in validate)"}),
    (("--max-num-seqs",), {"type": whole_number, "help": "largest decode batch in the grid"}),
    (("--max-num-batched-tokens",), {"type": whole_number, "help": "largest step in the grid"}),
    (("--max-context",), {"type": whole_number, "help": "longest context in the grid (tokens)"}),
    (("--time-budget",), {"type": float, "help": "stop measuring after this many seconds"}),
    (("--format",), {"dest": "table_format", "choices": ("v1", "v2"),
                     "help": "v1: flat in-context profile (CPU default; what validate reads); "
                             "v2: operator-level table set in "
                             "OUT/tables/servesim-harness-<version>/ (CUDA default)"}),
    (("--attention-backend",), {"default": None,
                                "help": "v2: auto (default: vllm_flash_attn, flashinfer, "
                                        "flash_attn, sdpa, first that works), all, or one of "
                                        "those"}),
    (("--fp8",), {"action": "store_true", "default": None,
                  "help": "v2: also time FP8 GEMMs (torch._scaled_mm; CUDA compute >= 8.9)"}),
    (("--no-flush-l2",), {"dest": "flush_l2", "action": "store_false", "default": None,
                          "help": "v2: keep the L2 warm between timed calls (default: flush)"}),
    (("--no-cuda-graphs",), {"dest": "cuda_graphs", "action": "store_false", "default": None,
                             "help": "v2: time decode attention and elementwise eagerly "
                                     "(default: graphs)"}),
    (("--no-collectives",), {"dest": "collectives", "action": "store_false", "default": None,
                             "help": "v2: skip NCCL collectives even with several GPUs"}),
    (("--warmup",), {"type": whole_number, "help": "v2: untimed calls per point"}),
    (("--repeats",), {"type": whole_number, "help": "v2: timed calls per point"}),
    (("--table-file-format",), {"choices": ("parquet", "csv"), "default": None,
                                "help": "v2: table files (default parquet, zstd)"}),
    _QUIET,
)

#: Options of ``servesim calibrate compare``.
COMPARE_ARGS: tuple[Arg, ...] = (
    (("ours",), {"help": "table-set folder, profile folder with one set, or flat profile"}),
    (("theirs",), {"help": "the same, for the reference"}),
    (("-o", "--output"), {"type": output_path,
                          "help": "write compare.md, compare_summary.csv, compare_pairs.csv "
                                  "here (default: print only)"}),
    (("--max-grid-factor",), {"type": float, "default": 2.0,
                              "help": "pair a row with the nearest grid point only when every "
                                      "grid coordinate is within this factor (default 2)"}),
)

#: Options of ``servesim calibrate fit-engine``.
FIT_ENGINE_ARGS: tuple[Arg, ...] = (
    (("runs",), {"nargs": "+", "help": "recorded runs (as for validate --recorded); at least "
                                       "two"}),
    (("-o", "--output"), {"type": output_path, "required": True,
                          "help": "profile YAML to write (or a folder: <name>.yaml in it)"}),
    (("--base",), {"default": "vllm-v1",
                   "help": "engine profile to start from (default vllm-v1)"}),
    (("--params",), {"help": "constants to fit, comma separated (default "
                             "sync.step_s,sync.per_seq_s)"}),
    (("--name",), {"help": "name of the written profile (default: the base's)"}),
    (("--gpu",), {"help": "GPU for runs that do not record one"}),
    (("--model",), {"help": "model for runs that do not record one"}),
    (("--set",), {"action": "append", "default": [], "metavar": "KEY=VALUE",
                  "help": "scenario override applied to every run"}),
    (("--grid-points",), {"type": whole_number, "default": 13,
                          "help": "coarse grid points per constant before Nelder-Mead (default "
                                  "13: 0.5 ms / 5 us / 0.5 us steps)"}),
    (("--no-loo",), {"action": "store_true", "help": "skip the leave-one-run-out refits"}),
    _QUIET,
)

#: Options of ``servesim validate`` (``--recorded`` replay and ``--self-check``).
VALIDATE_ARGS: tuple[Arg, ...] = (
    (("--recorded",), {"metavar": "RUN", "help": "a recorded run: run folder, requests.jsonl, "
                                                 "inference-perf folder, bench or GuideLLM "
                                                 "JSON, or CSV"}),
    (("--scenario",), {"help": "--recorded: scenario file for settings the record lacks"}),
    (("--gpu",), {"help": "--recorded: GPU name or spec YAML (overrides the record)"}),
    (("--model",), {"help": "--recorded: model id or config.json (overrides the record)"}),
    (("--engine-version",), {"metavar": "X.Y.Z",
                             "help": "--recorded: the recording vLLM's version when the record "
                                     "does not state it (engine defaults, nearest kernel "
                                     "tables)"}),
    (("--set",), {"action": "append", "metavar": "KEY.PATH=VALUE",
                  "help": "--recorded: override a scenario field (repeatable; applied last)"}),
    (("--no-figures",), {"action": "store_true", "help": "--recorded: skip the PNG figures"}),
    (("--self-check",), {"action": "store_true", "default": False,
                         "help": "run the self-check (simulator vs servesim's own tiny engine "
                                 "on this device; needs torch)"}),
    (("--device",), {"default": None, "help": "self-check: cpu, cuda or cuda:N (default cpu)"}),
    (("-o", "--output"), {"type": output_path, "default": None,
                          "help": "output folder (default reports/validate-<run> with "
                                  "--recorded, reports/validate for the self-check)"}),
    (("--profile",), {"help": "self-check: use this calibrated profile folder instead of "
                              "calibrating"}),
    (("--num-requests",), {"type": whole_number, "default": 80}),
    (("--load",), {"type": float, "default": 0.7,
                   "help": "target busy fraction of the replica (arrival rate scaling)"}),
    (("--runs",), {"type": whole_number, "default": 2,
                   "help": "real runs (>= 2 shows the spread)"}),
    (("--threads",), {"type": whole_number, "default": 1}),
    (("--max-num-seqs",), {"type": whole_number}),
    (("--max-num-batched-tokens",), {"type": whole_number}),
    (("--full-calibration",), {"action": "store_true",
                               "help": "calibrate with the full grid instead of --quick"}),
    (("--trace",), {"help": "trace to scale (default traces/default_conv_1k.csv)"}),
    (("--seed",), {"type": seed_number, "default": 0}),
    _QUIET,
)

VALIDATE_DESCRIPTION = (
    "servesim validate --recorded RUN [--scenario S] [--gpu G] [--model M] [--set k=v ...] "
    "-o DIR: replay a recorded run (vLLM run folder or requests.jsonl, inference-perf folder, "
    "vllm bench serve or GuideLLM JSON, generic CSV) and compare. servesim validate --self-check [--device cpu]: internal "
    "consistency check of harness, tables and scheduler (needs torch); plain "
    "`servesim validate` and `--device cpu` run it too.")


def _import_aic_arguments(parser) -> None:
    from calibration.import_aic import add_arguments  # pandas: imported only when registering
    add_arguments(parser)


def _import_lss_arguments(parser) -> None:
    from calibration.import_lss import add_arguments  # pandas: imported only when registering
    add_arguments(parser)


def _add_arguments(parser, args: tuple[Arg, ...]) -> None:
    for flags, kwargs in args:
        parser.add_argument(*flags, **kwargs)


#: ``servesim calibrate`` subcommands: ``(name, help, handler, options)``; options is a table
#: of :data:`Arg` or a function that adds them (the importers own their options).
CALIBRATE_SUBCOMMANDS: tuple[tuple[str, str, object, object], ...] = (
    ("compare", "compare two latency table sets (ratio ours/theirs per operator family)",
     cmd_compare, COMPARE_ARGS),
    ("import-aic", ("convert aiconfigurator's measured vLLM kernel tables into "
                    "hardware_profiles/<gpu>/tables/ (no torch)"),
     cmd_import_aic, _import_aic_arguments),
    ("import-lss", ("convert LLMServingSim's per-layer vLLM profiles into "
                    "hardware_profiles/<gpu>/tables/vllm-<version>-lss/ (no torch)"),
     cmd_import_lss, _import_lss_arguments),
    ("fit-engine", ("fit an engine profile's constants to recorded runs (least squares, "
                    "leave-one-run-out; no torch)"),
     cmd_fit_engine, FIT_ENGINE_ARGS),
)


def register(sub) -> None:
    """Add the ``calibrate`` (with the subcommands of :data:`CALIBRATE_SUBCOMMANDS`) and
    ``validate`` subcommands to ``servesim``; their options are the tables above."""
    c = sub.add_parser("calibrate", help="measure latency tables on this CPU/GPU (needs torch); "
                                         "'calibrate import-aic' imports public tables",
                       description=cmd_calibrate.__doc__ or __doc__.splitlines()[0])
    _add_arguments(c, CALIBRATE_ARGS)
    c.set_defaults(func=cmd_calibrate)
    csub = c.add_subparsers(dest="calibrate_command", metavar="{" + ",".join(
        name for name, *_ in CALIBRATE_SUBCOMMANDS) + "}")
    csub.required = False
    for name, help_, func, options in CALIBRATE_SUBCOMMANDS:
        sp = csub.add_parser(name, help=help_, description=func.__doc__)
        if callable(options):
            options(sp)
        else:
            _add_arguments(sp, options)
        sp.set_defaults(func=func)
    v = sub.add_parser(
        "validate", help="replay a real engine's recorded run (--recorded RUN) and report the "
                         "error; or --self-check against servesim's own tiny engine (torch)",
        description=VALIDATE_DESCRIPTION)
    _add_arguments(v, VALIDATE_ARGS)
    v.set_defaults(func=cmd_validate)
