"""Speed and scale of servesim per build of its core, every figure of issue 29 against its target.

Usage::

    python benchmarks/bench_speed.py [--checkout DIR] [--builds compiled pure]
        [--azure PATH/AzureLLMInferenceTrace_conv.csv] [--servegen PATH/reason/deepseek-r1]
        [--repeat N] [--repeat-big N] [--only NAME ...] [--skip NAME ...]
        [--json OUT.json] [--page docs/results/speed.md]
    python benchmarks/bench_speed.py --write-scenarios DIR   # the side-by-side files, then exit

Each figure runs ``servesim`` (``python -m simulator.cli``) of the checkout measured
(``--checkout``, default the one holding this script; the child's working directory and
``PYTHONPATH``) as a fresh child process, the way a user runs it, and measures that whole
process: wall seconds (``time.perf_counter`` around the child) and peak resident memory
(the child's own ``VmHWM``, which it reports at its end: ``_PEAK_CHILD``; ``ru_maxrss`` from
``os.wait4`` where it cannot). The best of ``--repeat`` runs is reported
(the plan, 1M-request and ServeGen figures: ``--repeat-big``, default 1): on a shared machine
the best run is the one least disturbed by other load.

Every figure is measured once per build of the per-event core (docs/development.md, "The
compiled core"), one build after the other for each figure: ``compiled`` (the child's
environment without ``SERVESIM_PURE_PYTHON``) and ``pure`` (``SERVESIM_PURE_PYTHON=1``).
``--builds`` picks them; by default both when the checkout has a current compiled core (its
child's ``servesim --version`` says ``core: compiled (mypyc)``), else the pure one only, with
the reason on stderr and on the page. The page records the core each build's child reported.

Figures (targets of issue 29; where two, compiled / pure):

``side_by_side_34b``
    CodeLlama-34B, TP 2 on A100-80GB, 3 replicas, round robin, the whole Azure conv hour
    (19,366 requests), outputs without figures. At least 20x / 12x faster than Vidur on the
    same configuration: Vidur took 57.6 s on this project's 2-core development machine when
    issue 29 was filed (``speed_page.VIDUR_SIDE_BY_SIDE_S``, a recorded measurement that this
    script does not rerun), so 2.88 s / 4.8 s; the page prints the speed-up. ``--write-scenarios
    DIR`` writes the scenario, the model's ``config.json`` and the Azure hour as Vidur's
    trace-replay CSV; the page gives the ``servesim`` and Vidur commands (Vidur's CLI as of
    commit ``speed_page.VIDUR_COMMIT``).
``llama8b_h100_hour`` / ``llama8b_h100_hour_figures``
    ``scenarios/azure_conv_llama3_8b_h100.yaml`` on the same trace, without / with figures.
    Without: at least 1,500x / 800x real time on the 3,600 s hour (2.4 s / 4.5 s); the page
    prints the real-time factor. With figures: 0.6 s more than that build's target (3 s / 5.1 s;
    ``speed_page.FIGURES_ALLOWANCE_S``: this project's bound, the issue sets none).
``startup_first_event``
    From spawning ``servesim run`` (10 requests, no figures) to its first simulated event
    (the child patches ``simpy.Environment.step`` to print the time and exit). Target 0.5 s.
``plan_azure_conv``
    ``servesim plan scenarios/plan_azure_conv.yaml`` (54 candidates) on 2 worker processes.
    Target 30 s.
``scale_1m``
    The Azure conv hour tiled ``K = ceil(1e6 / 19,366) = 52`` times (copy ``j`` shifted by
    ``j / K`` of the mean inter-arrival gap, lengths permuted per copy with seed ``j``): the
    Azure length distribution at ``K`` times the rate, on ``K`` replicas of the 8B/H100
    scenario, outputs without figures. Targets 120 s and 1.5 GiB peak RSS.
``idle_replicas_10k``
    ``cluster.num_replicas: 10000`` with 10 requests: peak RSS minus that of the same run on
    one replica. Target 100 MiB ("megabytes": memory in proportion to blocks in use).
``servegen_day`` (opt-in: ``--only servegen_day``)
    One day of Alibaba ServeGen's ``reason/deepseek-r1`` clients (shared data,
    ``traces/servegen/``; 73 clients, 1,383,669 requests generated with seed 0: 16 req/s
    mean, hourly means from 7.2 to 35.1 req/s; reasoning outputs, their mean 874 to 3,261
    tokens depending on the 6 h length table) on 12 replicas of
    ``scenarios/azure_conv_llama3_8b_h100.yaml`` (its least-outstanding router), run as a
    user would: ``--trace DIR --set workload.format=servegen --set cluster.num_replicas=12``.
    Why 12: the load that matters is output tokens, and it peaks not at the busiest hours by
    rate (hour 2: 117,294 requests; hour 22: 126,479) but in hours 6 to 12, whose length
    table has the longest outputs (mean 3,261 tokens; prompts 1,527): 243,640 requests, about
    43,000 output tok/s in hours 10 and 11. On 8 replicas, which carry hour 2 (97.8% SLO
    attainment, no preemption, at most 84% of the KV cache in use) and on which 6 already
    carry hour 22 (98.6%), hours 10 to 12 are KV-bound: 30,800 output tok/s (3,850 per
    replica), 233,922 preemptions, 6.2% attainment. At that per-replica rate 43,000 tok/s
    needs 11.2 replicas before any margin; 12 carry hours 6 to 12 with 94.8% attainment
    (the scenario's target: 90%), TTFT p99 6.1 s and 4,303 preemptions (1.8% of the
    requests: the longest sequences, up to 55,000 + 32,768 tokens). Target 180 s.
    Opt-in: the day takes close to that on 2 cores (169.5 s at ``55ca00f``, 171.4 s at
    ``5373224`` and 171.8 s at ``feae502``, 2026-12-07 19:00, 19:38 and 22:12 UTC; 158 to 165 s
    at commits ``352addb``, ``87e9405`` and ``8ac8bca`` earlier that day, the simulation 132 to
    144 s of a run; 185 and 190 s in slow spells of the shared machine, the same code's
    simulation 154 to 159 s; 186 to 188 s at ``7117b26`` / ``634c4c3``, 203 s at ``e03958b``,
    484 s at ``1ecbed0``; the history in ``docs/results/day.md``); ``--servegen-end-s S`` runs
    the first ``S`` s only: a check of the code path, reported without a verdict.

``--page`` writes the docs site's results page (Markdown, ``speed_page.page``): the table
(one row per figure, a column group per build: measured, target, met), the builds, the
machine (CPU model, cores, load average before and after), the commit, the date, and the
commands to rerun the side-by-side comparison with Vidur. A page from a run with ``--only`` /
``--skip`` says which figures it leaves out.

Not part of the test suite (minutes of wall time; never a timed test).
"""
from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from calibration.device import cpu_model
from simulator.base.compiled_core import PURE_ENV

sys.path.insert(0, str(Path(__file__).resolve().parent))  # siblings, however this is loaded
import speed_page as sp
from gitinfo import commit_label

ROOT = Path(__file__).resolve().parents[1]
#: the checkout whose servesim is measured (children run there; ``--checkout``)
CHECKOUT = ROOT
AZURE = ROOT.parent / "shared/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
SERVEGEN = ROOT.parent / "shared/traces/servegen/reason/deepseek-r1"
EIGHT_B = "scenarios/azure_conv_llama3_8b_h100.yaml"
GiB = 1024 ** 3
MiB = 1024 ** 2

#: CodeLlama-34B architecture, from the Hugging Face config.json of codellama/CodeLlama-34b-hf
#: (the model Vidur profiles: shared/reference/vidur/data/profiling/compute/a100/codellama).
CODELLAMA_34B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 22016, "num_hidden_layers": 48, "num_attention_heads": 64,
    "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 16384,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

_FIRST_EVENT_CHILD = r"""
import os, sys, time
import simpy
def _step(self):
    sys.stderr.write(f"FIRST_EVENT {time.time()!r}\n"); sys.stderr.flush(); os._exit(0)
simpy.Environment.step = _step
from simulator.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


#: ``python -m simulator.cli ...`` that also reports its own peak resident memory at the end:
#: the ``VmHWM`` of ``/proc/self/status`` (Linux), written to stderr by the last exit function
#: (the command's exit runs them: simulator.cli.process.exit_process). ``ru_maxrss`` from
#: ``os.wait4`` is not the child's own: Linux keeps the larger of the image's peak and the
#: peak of the process that forked it (``exec`` records the replaced image's), so after this
#: script grew (the 1M trace tiled in memory) every small child read as large as this script:
#: ``idle_replicas_10k_rss`` measured 0.0 MiB on the page's run and 38.8 MiB alone.
_PEAK_CHILD = r"""
import atexit, runpy, sys
def _peak():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    sys.stderr.write("\nPEAK_RSS_KIB " + line.split()[1] + "\n")
                    sys.stderr.flush()
    except OSError:
        pass
atexit.register(_peak)
runpy.run_module("simulator.cli", run_name="__main__", alter_sys=True)
"""
_PEAK_LINE = re.compile(r"\nPEAK_RSS_KIB (\d+)\n")


def _env(build: str | None = None) -> dict[str, str]:
    """The child's environment: ``PYTHONPATH`` = the checkout measured; for ``build`` ``pure``
    ``SERVESIM_PURE_PYTHON=1``, for ``compiled`` without it, for None as inherited."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(CHECKOUT) + (os.pathsep + env["PYTHONPATH"]
                                         if env.get("PYTHONPATH") else "")
    if build == "pure":
        env[PURE_ENV] = "1"
    elif build == "compiled":
        env.pop(PURE_ENV, None)
    return env


def run_child(argv: list[str], build: str | None = None) -> tuple[float, int, str]:
    """Run ``python argv...`` in the checkout measured; return (wall s, peak RSS bytes,
    stderr).

    Raises
    ------
    RuntimeError
        If the child exits non-zero (with the tail of its stderr).
    """
    wrapped = argv[:2] == ["-m", "simulator.cli"]  # the same command, reporting its peak
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, *(["-c", _PEAK_CHILD, *argv[2:]] if wrapped
                                            else argv)],
                         cwd=CHECKOUT, env=_env(build), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    peak = _PEAK_LINE.search(err)
    err = _PEAK_LINE.sub("", err)
    shown = " ".join(argv[:4])
    if p.returncode != 0:
        raise RuntimeError(f"{shown}... exited {p.returncode}: {err[-1500:]}")
    if peak is not None:  # the child's own (see _PEAK_CHILD)
        return wall, int(peak.group(1)) * 1024, err
    if wrapped:  # no /proc (not Linux): ru_maxrss, which may hold this script's own peak
        print(f"bench_speed: {shown}...: no peak reported by the child; its "
              "ru_maxrss is used (at least this script's own peak)", file=sys.stderr)
    return wall, ru.ru_maxrss * 1024, err  # ru_maxrss is in KiB on Linux


def best_of(n: int, argv: list[str], build: str | None = None) -> tuple[float, int]:
    """Best wall and the smallest peak RSS over ``n`` runs of ``argv``."""
    runs = [run_child(argv, build)[:2] for _ in range(max(1, n))]
    return min(w for w, _ in runs), min(r for _, r in runs)


def core_of(build: str) -> str:
    """The core a child of the checkout with ``build``'s environment runs, as its
    ``servesim --version`` says (``compiled (mypyc)`` or ``pure Python (<reason>)``)."""
    r = subprocess.run([sys.executable, "-m", "simulator.cli", "--version"], cwd=CHECKOUT,
                       env=_env(build), capture_output=True, text=True, check=True)
    return sp.parse_core(r.stdout + r.stderr)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def scenario_34b(tmp: Path) -> Path:
    """The side-by-side scenario of issue 29 in ``tmp`` (CodeLlama-34B's ``config.json`` in
    ``tmp/codellama-34b/``); it names the trace by file name: run it with ``--trace``."""
    cfg = tmp / "codellama-34b"
    cfg.mkdir(exist_ok=True)
    (cfg / "config.json").write_text(json.dumps(CODELLAMA_34B_CONFIG))
    return _write(tmp / "side_by_side_34b.yaml", sp.side_by_side_yaml(AZURE.name))


def vidur_trace(path: Path) -> Path:
    """The Azure conv hour as Vidur's trace-replay CSV (``arrived_at`` in s from the first
    request, ``num_prefill_tokens``, ``num_decode_tokens``), row for row."""
    import pandas as pd

    df = pd.read_csv(AZURE)
    t = pd.to_datetime(df["TIMESTAMP"])
    pd.DataFrame({"arrived_at": (t - t.iloc[0]).dt.total_seconds(),
                  "num_prefill_tokens": df["ContextTokens"],
                  "num_decode_tokens": df["GeneratedTokens"]}).to_csv(path, index=False)
    return path


def scenario_small(tmp: Path, num_replicas: int = 1) -> Path:
    return _write(tmp / f"small_{num_replicas}.yaml", f"""\
name: small
model: llama-3.1-8b
hardware: {{gpu: h100-sxm}}
perf: {{source: roofline}}
cluster: {{num_replicas: {num_replicas}, router: round_robin}}
workload:
  synthetic:
    arrival: {{process: poisson, rate_rps: 5}}
    num_requests: 10
    prompt_tokens: {{dist: fixed, value: 100}}
    output_tokens: {{dist: fixed, value: 20}}
seed: 0
""")


def tiled_trace(tmp: Path, num_requests: int = 1_000_000) -> tuple[Path, int]:
    """The Azure conv hour tiled to at least ``num_requests`` rows (Parquet); returns (path, K)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = pd.read_csv(AZURE)
    t = pd.to_datetime(df["TIMESTAMP"]).astype("int64").to_numpy() / 1e9
    t = t - t.min()
    prompt = df["ContextTokens"].to_numpy(np.int64)
    output = df["GeneratedTokens"].to_numpy(np.int64)
    k = math.ceil(num_requests / len(df))
    gap_s = float(t.max()) / max(1, len(df) - 1)
    arr, p_all, o_all = [], [], []
    for j in range(k):
        perm = np.random.default_rng(j).permutation(len(df))
        arr.append(t + j * gap_s / k)
        p_all.append(prompt[perm])
        o_all.append(output[perm])
    arrival = np.concatenate(arr)
    order = np.argsort(arrival, kind="stable")
    table = pa.table({"arrival_time_s": arrival[order],
                      "num_prompt_tokens": np.concatenate(p_all)[order],
                      "num_output_tokens": np.concatenate(o_all)[order]})
    path = tmp / f"azure_conv_x{k}.parquet"
    pq.write_table(table, path)
    return path, k


@dataclass
class Run:
    """What the figures of one benchmark run share: options, scratch folder, the tiled trace
    (made once for every build)."""

    args: argparse.Namespace
    tmp: Path
    tiled: tuple[Path, int] | None = None
    cli: list[str] = field(default_factory=lambda: ["-m", "simulator.cli"])

    @property
    def out(self) -> str:
        return str(self.tmp / "out")

    def eight_b(self) -> list[str]:
        return ["run", EIGHT_B, "--trace", str(AZURE), "-o", self.out, "-q"]


Results = dict[str, sp.Result]


def _side_by_side(r: Run, build: str) -> Results:
    argv = [*r.cli, "run", str(scenario_34b(r.tmp)), "--trace", str(AZURE), "-o", r.out,
            *sp.SIDE_BY_SIDE_FLAGS]
    return {"side_by_side_34b": sp.Result(best_of(r.args.repeat, argv, build)[0])}


def _hour(r: Run, build: str) -> Results:
    wall = best_of(r.args.repeat, [*r.cli, *r.eight_b(), "--no-figures"], build)[0]
    return {"llama8b_h100_hour": sp.Result(wall)}


def _hour_figures(r: Run, build: str) -> Results:
    return {"llama8b_h100_hour_figures":
            sp.Result(best_of(r.args.repeat, [*r.cli, *r.eight_b()], build)[0])}


def _startup(r: Run, build: str) -> Results:
    small = str(scenario_small(r.tmp))
    best = math.inf
    for _ in range(max(3, r.args.repeat)):
        t0 = time.time()
        _, _, err = run_child(["-c", _FIRST_EVENT_CHILD, "run", small, "-o", r.out, "-q",
                               "--no-figures"], build)
        line = next(ln for ln in err.splitlines() if ln.startswith("FIRST_EVENT"))
        best = min(best, float(line.split()[1]) - t0)
    return {"startup_first_event": sp.Result(best)}


def _plan(r: Run, build: str) -> Results:
    wall = best_of(r.args.repeat_big, [*r.cli, "plan", "scenarios/plan_azure_conv.yaml",
                                       "--trace", str(AZURE), "-j", "2", "--no-cache",
                                       "-o", str(r.tmp / "plan"), "-q", "--no-figures"],
                   build)[0]
    return {"plan_azure_conv": sp.Result(wall)}


def _scale(r: Run, build: str) -> Results:
    if r.tiled is None:
        r.tiled = tiled_trace(r.tmp, r.args.scale_requests)
    trace, k = r.tiled
    wall, rss = best_of(r.args.repeat_big,
                        [*r.cli, "run", EIGHT_B, "--trace", str(trace), "-o", r.out, "-q",
                         "--no-figures", "--set", "workload.format=parquet",
                         "--set", f"cluster.num_replicas={k}",
                         "--set", "cluster.router=round_robin"], build)
    return {"scale_1m": sp.Result(wall), "scale_1m_peak_rss": sp.Result(rss / GiB)}


def _idle(r: Run, build: str) -> Results:
    one = best_of(1, [*r.cli, "run", str(scenario_small(r.tmp, 1)), "-o", r.out, "-q",
                      "--no-figures"], build)[1]
    many = best_of(1, [*r.cli, "run", str(scenario_small(r.tmp, 10_000)), "-o", r.out, "-q",
                       "--no-figures"], build)[1]
    return {"idle_replicas_10k_rss": sp.Result((many - one) / MiB)}


def _servegen(r: Run, build: str) -> Results:
    end_s = r.args.servegen_end_s
    argv = [*r.cli, "run", EIGHT_B, "--trace", str(SERVEGEN), *sp.SERVEGEN_SETS, "-o", r.out,
            "-q", "--no-figures"]
    whole = end_s >= sp.SERVEGEN_DAY_S
    if not whole:
        argv += ["--set", f"workload.end_s={end_s:g}"]
    wall = best_of(r.args.repeat_big, argv, build)[0]
    return {"servegen_day": sp.Result(wall, "" if whole else f"first {end_s:,.0f} s only",
                                      judged=whole)}


#: the runs, in page order, and the figures each one gives
MEASURES: tuple[tuple[tuple[str, ...], Callable[[Run, str], Results]], ...] = (
    (("side_by_side_34b",), _side_by_side),
    (("llama8b_h100_hour",), _hour),
    (("llama8b_h100_hour_figures",), _hour_figures),
    (("startup_first_event",), _startup),
    (("plan_azure_conv",), _plan),
    (("scale_1m", "scale_1m_peak_rss"), _scale),
    (("idle_replicas_10k_rss",), _idle),
    (("servegen_day",), _servegen),
)


def measure(args: argparse.Namespace, tmp: Path, builds: list[str]) -> dict[str, Results]:
    """Every selected figure per build (``out[build][figure]``); for each figure the builds
    run one after the other, so both see about the same load."""
    want = set(sp.select(args.only, args.skip))
    run = Run(args, tmp)
    out: dict[str, Results] = {b: {} for b in builds}
    for names, fn in MEASURES:
        if want.intersection(names):
            for b in builds:
                got = fn(run, b)
                out[b].update({k: v for k, v in got.items() if k in want})
    return out


class BuildUnavailable(Exception):
    """A build asked for with ``--builds`` that the checkout cannot run."""


def choose_builds(requested: list[str] | None) -> tuple[list[str], dict[str, str],
                                                         dict[str, str]]:
    """(builds to measure, the core each one's child reports, builds left out and why).

    Raises
    ------
    BuildUnavailable
        When ``compiled`` is asked for and the checkout's child runs the pure-Python core.
    """
    cores = {b: core_of(b) for b in sp.BUILDS}
    compiled_ok = cores["compiled"].startswith("compiled")
    why = f"the checkout's `servesim --version` says `core: {cores['compiled']}`"
    if requested:
        if "compiled" in requested and not compiled_ok:
            raise BuildUnavailable(f"--builds compiled: {why} ({CHECKOUT})")
        builds = [b for b in sp.BUILDS if b in requested]
        return builds, {b: cores[b] for b in builds}, {}
    if compiled_ok:
        return list(sp.BUILDS), cores, {}
    print(f"bench_speed: measuring the pure-Python build only: {why} ({CHECKOUT})",
          file=sys.stderr)
    return ["pure"], {"pure": cores["pure"]}, {"compiled": why}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", type=Path, default=ROOT,
                    help="the servesim checkout to measure (default: this script's)")
    ap.add_argument("--builds", nargs="+", choices=sp.BUILDS, default=None,
                    help="builds of the core to measure (default: both when the checkout has "
                         "a current compiled core, else pure)")
    ap.add_argument("--azure", type=Path, default=None, help="AzureLLMInferenceTrace_conv.csv")
    ap.add_argument("--servegen", type=Path, default=None,
                    help="ServeGen's reason/deepseek-r1 folder (servegen_day)")
    ap.add_argument("--servegen-end-s", type=float, default=sp.SERVEGEN_DAY_S,
                    help="servegen_day: run the first S seconds only (a check; no verdict)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per small figure (best kept)")
    ap.add_argument("--repeat-big", type=int, default=1,
                    help="runs of the plan, 1M-request and ServeGen figures (best kept)")
    ap.add_argument("--scale-requests", type=int, default=1_000_000)
    ap.add_argument("--only", nargs="*", default=[],
                    help="figure name prefixes to run (the only way to run servegen_day)")
    ap.add_argument("--skip", nargs="*", default=[], help="figure name prefixes to skip")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--page", type=Path,
                    help="also write the docs results page (e.g. docs/results/speed.md)")
    ap.add_argument("--write-scenarios", type=Path, metavar="DIR",
                    help="write the side-by-side scenario, its model config and the Azure "
                         "hour as Vidur's trace CSV into DIR, and exit")
    return ap


def main() -> int:
    global AZURE, SERVEGEN, CHECKOUT
    args = _parser().parse_args()
    AZURE = (args.azure or AZURE).resolve()
    SERVEGEN = (args.servegen or SERVEGEN).resolve()
    CHECKOUT = args.checkout.resolve()
    if args.write_scenarios:
        d = args.write_scenarios
        d.mkdir(parents=True, exist_ok=True)
        written = [scenario_34b(d), d / "codellama-34b" / "config.json"]
        if AZURE.is_file():
            written.append(vidur_trace(d / "azure_conv_vidur.csv"))
        else:
            print(f"bench_speed: Azure trace not found: {AZURE}: no azure_conv_vidur.csv",
                  file=sys.stderr)
        print("bench_speed: wrote " + ", ".join(str(p) for p in written))
        return 0
    selected = sp.select(args.only, args.skip)
    if not AZURE.is_file() and set(selected) - {"servegen_day"}:
        print(f"bench_speed: Azure trace not found: {AZURE} (pass --azure PATH)",
              file=sys.stderr)
        return 2
    if "servegen_day" in selected and not SERVEGEN.is_dir():
        print(f"bench_speed: ServeGen folder not found: {SERVEGEN} (pass --servegen PATH)",
              file=sys.stderr)
        return 2
    # the checkout's bytecode, written once: a user's install has it from its first run, while
    # a child started with PYTHONDONTWRITEBYTECODE=1 (as on the project's machines) would
    # otherwise compile every module on every run (~0.1 s of each figure)
    compileall.compile_dir(CHECKOUT / "simulator", quiet=1)
    try:
        builds, cores, left_out = choose_builds(args.builds)
    except BuildUnavailable as e:
        print(f"bench_speed: error: {e}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_speed_") as d:
        results = measure(args, Path(d), builds)
    load_after = os.getloadavg()[0]
    print(f"servesim bench_speed of {CHECKOUT} on {os.cpu_count()} CPUs, load average "
          f"{load_after:.1f} at the end; best of {args.repeat} (plan, 1M and ServeGen: "
          f"{args.repeat_big})")
    for b in builds:
        print(f"{b}: core: {cores[b]}")
    print(sp.table(results, builds))
    if args.json:
        args.json.write_text(json.dumps(
            {"cores": cores, "not_measured": left_out,
             "figures": {b: {k: v.value for k, v in r.items()} for b, r in results.items()},
             "notes": {b: {k: v.note for k, v in r.items() if v.note}
                       for b, r in results.items()}},
            indent=2, sort_keys=True) + "\n")
    if args.page:
        info = sp.PageInfo(commit=commit_label(CHECKOUT), date=dt.date.today().isoformat(),
                           cpu=cpu_model(), cpus=os.cpu_count() or 0,
                           load_before=load_before, load_after=load_after,
                           repeat=args.repeat, repeat_big=args.repeat_big, cores=cores,
                           not_measured_builds=left_out,
                           servegen_window_s=(args.servegen_end_s
                                              if "servegen_day" in selected else None))
        args.page.parent.mkdir(parents=True, exist_ok=True)
        args.page.write_text(sp.page(results, info), encoding="utf-8")
        print(f"bench_speed: wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
