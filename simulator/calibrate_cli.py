"""``servesim calibrate`` and ``servesim validate`` (the torch harness, imported lazily).

``calibrate`` measures latency tables of a model on this machine's CPU or CUDA device and
writes a profile folder (tables, ``provenance.yaml``, ``spec.yaml``) that ``hardware.gpu`` can
point at. ``validate`` replays a scaled trace on a real continuous-batching engine and in the
simulator fed by those tables, and reports the error. Both need ``torch`` (``pip install -e
".[calibrate]"``); the simulator package itself never imports it.
"""
from __future__ import annotations

import sys


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
    from calibration.harness import calibrate
    d = _device_defaults(args.device)
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    output = args.output or f"hardware_profiles/{args.device.split(':')[0]}-local"
    out = calibrate(args.model, output, device=args.device, quick=args.quick,
                    tensor_parallel_size=args.tensor_parallel_size, threads=args.threads,
                    max_num_seqs=args.max_num_seqs or d["max_num_seqs"],
                    max_num_batched_tokens=args.max_num_batched_tokens
                    or d["max_num_batched_tokens"],
                    max_context=args.max_context or d["max_context"],
                    time_budget_s=args.time_budget, log=log)
    print(f"profile: {out}/ (use it: servesim run scenarios/default.yaml --set hardware.gpu={out} "
          f"--set model={args.model} --set perf.source=table)")
    return 0


def cmd_validate(args) -> int:
    _need_torch("validate")
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


def register(sub) -> None:
    """Add the ``calibrate`` (with its ``import-aic`` subcommand) and ``validate`` subcommands
    to ``servesim``."""
    c = sub.add_parser("calibrate", help="measure latency tables on this CPU/GPU (needs torch); "
                                         "'calibrate import-aic' imports public tables",
                       description=cmd_calibrate.__doc__ or __doc__.splitlines()[0])
    c.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    c.add_argument("--model", default="servesim-tiny-llama",
                   help="servesim-tiny-llama (alias tiny), a catalog id, or a config.json path")
    c.add_argument("--quick", action="store_true",
                   help="smaller grid and fewer repeats (about a minute on 2 CPU cores)")
    c.add_argument("-o", "--output",
                   help="profile folder to write (default hardware_profiles/<cpu|cuda>-local)")
    c.add_argument("--tensor-parallel-size", type=int, default=1,
                   help="measure the shapes of this TP shard (default 1)")
    c.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1; use the same in validate)")
    c.add_argument("--max-num-seqs", type=int, help="largest decode batch in the grid")
    c.add_argument("--max-num-batched-tokens", type=int, help="largest step in the grid")
    c.add_argument("--max-context", type=int, help="longest context in the grid (tokens)")
    c.add_argument("--time-budget", type=float, help="stop measuring after this many seconds")
    c.add_argument("-q", "--quiet", action="store_true")
    c.set_defaults(func=cmd_calibrate)
    csub = c.add_subparsers(dest="calibrate_command", metavar="{import-aic}")
    csub.required = False
    ia = csub.add_parser("import-aic", help="convert aiconfigurator's measured vLLM kernel tables "
                                            "into hardware_profiles/<gpu>/tables/ (no torch)",
                         description=cmd_import_aic.__doc__)
    from calibration.import_aic import add_arguments
    add_arguments(ia)
    ia.set_defaults(func=cmd_import_aic)

    v = sub.add_parser("validate", help="compare the simulator with a real engine on this "
                                        "device (needs torch)")
    v.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    v.add_argument("-o", "--output", default="reports/validate",
                   help="output folder (validation.json, report.md, figures)")
    v.add_argument("--profile", help="use this calibrated profile folder instead of calibrating")
    v.add_argument("--num-requests", type=int, default=80)
    v.add_argument("--load", type=float, default=0.7,
                   help="target busy fraction of the replica (arrival rate scaling)")
    v.add_argument("--runs", type=int, default=2, help="real runs (>= 2 shows the spread)")
    v.add_argument("--threads", type=int, default=1)
    v.add_argument("--max-num-seqs", type=int)
    v.add_argument("--max-num-batched-tokens", type=int)
    v.add_argument("--full-calibration", action="store_true",
                   help="calibrate with the full grid instead of --quick")
    v.add_argument("--trace", help="trace to scale (default traces/default_conv_1k.csv)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("-q", "--quiet", action="store_true")
    v.set_defaults(func=cmd_validate)
