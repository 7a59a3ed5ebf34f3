"""Benchmark: a capacity plan over >= 50 configurations on the Azure conversation trace.

Runs ``scenarios/plan_azure_conv.yaml`` (54 candidates + the baseline: GPU type x tensor
parallelism x max_num_seqs x max_num_batched_tokens, Llama-3.1-8B, target 30 requests/s) from
a cold cache and prints the wall-clock time, the load average around it, the CPU seconds
of the workers (comparable under load), the number of simulations, how many probes stopped
early and candidates were skipped as dominated, and the recommendation. The target (issue 12
part 2) is <= 30 s on an otherwise idle 2-core machine.

Usage::

    python benchmarks/bench_plan.py PATH/AzureLLMInferenceTrace_conv.csv [--jobs N]
        [--plan scenarios/plan_azure_conv.yaml] [--output DIR] [--budget-s 30]
        [--no-early-stop] [--no-prune]

``--no-early-stop`` / ``--no-prune`` switch ``search.early_stop`` /
``search.prune_dominated`` off (the plan before issue 12 part 2: every probe to its end,
every candidate confirmed).

Exit status 0 when the plan finished within the budget, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from simulator.experiments.executor import default_jobs
    from simulator.planner.plan import run_plan
    from simulator.planner.report import _headline
    from simulator.planner.spec import load_plan_spec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="AzureLLMInferenceTrace_conv.csv")
    ap.add_argument("--plan", default=str(REPO / "scenarios" / "plan_azure_conv.yaml"))
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--output", help="report folder (default: a temporary folder)")
    ap.add_argument("--budget-s", type=float, default=30.0)
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--no-early-stop", action="store_true")
    ap.add_argument("--no-prune", action="store_true")
    args = ap.parse_args(argv)
    if not Path(args.trace).is_file():
        print(f"bench_plan: trace not found: {args.trace}", file=sys.stderr)
        return 2
    spec, folder = load_plan_spec(args.plan)
    upd = {k: False for k, off in (("early_stop", args.no_early_stop),
                                   ("prune_dominated", args.no_prune)) if off}
    if upd:
        spec = spec.model_copy(update={"search": spec.search.model_copy(update=upd)})
    load0 = os.getloadavg()
    out = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix="bench_plan_"))
    t0, c0 = time.perf_counter(), time.process_time()
    res = run_plan(spec, folder, trace=args.trace, jobs=args.jobs, use_cache=False,
                   outdir=out, figures=not args.no_figures)
    wall = time.perf_counter() - t0
    main_cpu = time.process_time() - c0
    load1 = os.getloadavg()
    st = res.stats
    rows = list(res.candidates) + [res.baseline]
    runs = [p for r in rows for p in r["probes"] + r["confirmations"]
            + ([r["dominance_probe"]] if r.get("dominance_probe") else [])]
    n_stop = sum(1 for p in runs if p.get("stopped_early"))
    n_skip = sum(1 for r in res.candidates if r["failed_gates"] == ["dominated"])
    print(f"plan: {spec.name}  trace: {args.trace}")
    print(f"cpu cores: {os.cpu_count()}  jobs: {args.jobs}")
    print(f"configurations: {st['num_candidates']} candidates + baseline, "
          f"{st['num_simulations']} simulations "
          f"({st['num_simulations'] / max(1, st['num_configurations_evaluated']):.1f} per "
          f"configuration), probe size {res.workload['probe_requests']} requests")
    print(f"early stop: {n_stop} of {len(runs)} runs stopped early; pruning: {n_skip} "
          f"candidate(s) skipped as dominated "
          f"(early_stop={spec.search.early_stop}, prune_dominated={spec.search.prune_dominated})")
    print(f"load average (1 min) before / after: {load0[0]:.2f} / {load1[0]:.2f}; worker CPU "
          f"{st.get('worker_cpu_s', 0.0):.1f} s, this process {main_cpu:.1f} CPU-s")
    print(_headline(res))
    print(f"report: {out / 'plan.html'}")
    ok = wall <= args.budget_s and st["num_candidates"] >= 50
    print(f"time: {wall:.1f} s (budget {args.budget_s:.0f} s for >= 50 configurations): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
