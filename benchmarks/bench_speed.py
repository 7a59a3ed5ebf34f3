"""Speed and scale of servesim, every figure of issue 12 parts 2 and 3 against its target.

Usage::

    python benchmarks/bench_speed.py [--azure PATH/AzureLLMInferenceTrace_conv.csv]
        [--repeat N] [--only NAME ...] [--skip NAME ...] [--json OUT.json]
        [--page docs/results/speed.md]

Each figure runs ``servesim`` (``python -m simulator.cli``) as a fresh child process, the way
a user runs it, and measures that whole process: wall seconds (``time.perf_counter`` around
the child) and peak resident memory (``ru_maxrss`` of the child, from ``os.wait4``). The
best of ``--repeat`` runs is reported (the 1M-request and plan figures run once unless
``--repeat-big`` says otherwise): on a shared machine the best run is the one least disturbed
by other load. Figures:

``side_by_side_34b``
    CodeLlama-34B, TP 2 on A100-80GB, 3 replicas, round robin, the whole Azure conv hour
    (19,366 requests), outputs without figures. Target 2.5 s (the issue measured Vidur at
    53.6 s on the same machine: 20x).
``llama8b_h100_hour`` / ``llama8b_h100_hour_figures``
    ``scenarios/azure_conv_llama3_8b_h100.yaml`` on the same trace, without / with figures.
    Targets 2 s / 3 s.
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

``--page`` writes the docs site's results page (Markdown): the table, the machine (CPU model,
cores, load average before and after), the commit and the date. A page from a run with
``--only`` / ``--skip`` says which figures it leaves out.

Not part of the test suite (minutes of wall time; never a timed test).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from calibration.device import cpu_model

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gitinfo, however this is loaded
from gitinfo import commit_label

ROOT = Path(__file__).resolve().parents[1]
AZURE = ROOT.parent / "shared/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
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

#: (name, target, unit): every figure the benchmark prints, in order.
TARGETS: tuple[tuple[str, float, str], ...] = (
    ("side_by_side_34b", 2.5, "s"),
    ("llama8b_h100_hour", 2.0, "s"),
    ("llama8b_h100_hour_figures", 3.0, "s"),
    ("startup_first_event", 0.5, "s"),
    ("plan_azure_conv", 30.0, "s"),
    ("scale_1m", 120.0, "s"),
    ("scale_1m_peak_rss", 1.5, "GiB"),
    ("idle_replicas_10k_rss", 100.0, "MiB"),
)

_FIRST_EVENT_CHILD = r"""
import os, sys, time
import simpy
def _step(self):
    sys.stderr.write(f"FIRST_EVENT {time.time()!r}\n"); sys.stderr.flush(); os._exit(0)
simpy.Environment.step = _step
from simulator.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    return env


def run_child(argv: list[str]) -> tuple[float, int, str]:
    """Run ``python argv...`` in ROOT; return (wall s, peak RSS bytes, stderr).

    Raises
    ------
    RuntimeError
        If the child exits non-zero (with the tail of its stderr).
    """
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}... exited {p.returncode}: {err[-1500:]}")
    return wall, ru.ru_maxrss * 1024, err  # ru_maxrss is in KiB on Linux


def best_of(n: int, argv: list[str]) -> tuple[float, int]:
    """Best wall and the smallest peak RSS over ``n`` runs of ``argv``."""
    runs = [run_child(argv)[:2] for _ in range(max(1, n))]
    return min(w for w, _ in runs), min(r for _, r in runs)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def scenario_34b(tmp: Path) -> Path:
    """The side-by-side scenario of issue 12 (CodeLlama-34B config written to ``tmp``)."""
    cfg = tmp / "codellama-34b"
    cfg.mkdir(exist_ok=True)
    (cfg / "config.json").write_text(json.dumps(CODELLAMA_34B_CONFIG))
    return _write(tmp / "side_by_side_34b.yaml", f"""\
name: side_by_side_34b
model: {cfg}
hardware: {{gpu: a100-sxm-80gb}}
cluster: {{num_replicas: 3, tensor_parallel_size: 2, router: round_robin}}
workload: {{trace: {AZURE}, format: azure}}
seed: 0
""")


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


def measure(args, tmp: Path) -> dict[str, float]:
    """Every selected figure, keyed by :data:`TARGETS` name."""
    want = {n for n, _, _ in TARGETS}
    if args.only:
        want = {n for n in want if any(n.startswith(o) for o in args.only)}
    want = {n for n in want if not any(n.startswith(s) for s in args.skip)}
    out: dict[str, float] = {}
    cli = ["-m", "simulator.cli"]
    o = str(tmp / "out")
    n, nbig = args.repeat, args.repeat_big
    if "side_by_side_34b" in want:
        out["side_by_side_34b"] = best_of(n, [*cli, "run", str(scenario_34b(tmp)), "-o", o,
                                              "-q", "--no-figures"])[0]
    eight = ["run", "scenarios/azure_conv_llama3_8b_h100.yaml", "--trace", str(AZURE), "-o", o,
             "-q"]
    if "llama8b_h100_hour" in want:
        out["llama8b_h100_hour"] = best_of(n, [*cli, *eight, "--no-figures"])[0]
    if "llama8b_h100_hour_figures" in want:
        out["llama8b_h100_hour_figures"] = best_of(n, [*cli, *eight])[0]
    if "startup_first_event" in want:
        small = str(scenario_small(tmp))
        best = math.inf
        for _ in range(max(3, n)):
            t0 = time.time()
            _, _, err = run_child(["-c", _FIRST_EVENT_CHILD, "run", small, "-o", o, "-q",
                                   "--no-figures"])
            line = next(ln for ln in err.splitlines() if ln.startswith("FIRST_EVENT"))
            best = min(best, float(line.split()[1]) - t0)
        out["startup_first_event"] = best
    if "plan_azure_conv" in want:
        out["plan_azure_conv"] = best_of(nbig, [*cli, "plan", "scenarios/plan_azure_conv.yaml",
                                                "--trace", str(AZURE), "-j", "2", "--no-cache",
                                                "-o", str(tmp / "plan"), "-q",
                                                "--no-figures"])[0]
    if "scale_1m" in want or "scale_1m_peak_rss" in want:
        trace, k = tiled_trace(tmp, args.scale_requests)
        wall, rss = best_of(nbig, [*cli, *eight[:2], "--trace", str(trace), "-o", o, "-q",
                                   "--no-figures", "--set", "workload.format=parquet",
                                   "--set", f"cluster.num_replicas={k}",
                                   "--set", "cluster.router=round_robin"])
        out["scale_1m"], out["scale_1m_peak_rss"] = wall, rss / GiB
    if "idle_replicas_10k_rss" in want:
        one = best_of(1, [*cli, "run", str(scenario_small(tmp, 1)), "-o", o, "-q",
                          "--no-figures"])[1]
        many = best_of(1, [*cli, "run", str(scenario_small(tmp, 10_000)), "-o", o, "-q",
                           "--no-figures"])[1]
        out["idle_replicas_10k_rss"] = (many - one) / MiB
    return out


def table(figures: dict[str, float]) -> str:
    """The Markdown table of every measured figure against its target."""
    rows = ["| figure | measured | target | met |", "|---|---:|---:|:---:|"]
    for name, target, unit in TARGETS:
        if name in figures:
            v = figures[name]
            rows.append(f"| `{name}` | {v:.2f} {unit} | <= {target:g} {unit} | "
                        f"{'yes' if v <= target else 'no'} |")
    return "\n".join(rows)


def page(figures: dict[str, float], args, load_before: float, load_after: float) -> str:
    """The results page of the docs site: the figures with the machine and commit they came
    from (never edited by hand)."""
    import datetime as dt
    left_out = [name for name, _t, _u in TARGETS if name not in figures]
    lines = [
        "# Speed: servesim against its targets",
        "",
        (f"Generated by `python benchmarks/bench_speed.py --page ...` at commit `{commit_label(ROOT)}` "
         f"on {dt.date.today().isoformat()}. Each figure runs `servesim` as a fresh child "
         "process and measures the whole process (wall seconds; peak resident memory of the "
         f"child); best of {args.repeat} runs (the plan and 1M-request figures: best of "
         f"{args.repeat_big}). What each figure runs: `benchmarks/bench_speed.py`'s docstring."),
        "",
        (f"Machine: {cpu_model()}, {os.cpu_count()} CPUs; load average {load_before:.1f} "
         f"before and {load_after:.1f} after (a shared machine: a loaded run is slower, so "
         "these are upper bounds of what this commit needs)."),
        "",
        table(figures),
        "",
    ]
    if left_out:
        lines += [f"Not measured in this run: {', '.join(f'`{n}`' for n in left_out)}.", ""]
    return "\n".join(lines)


def main() -> int:
    global AZURE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--azure", type=Path, default=None, help="AzureLLMInferenceTrace_conv.csv")
    ap.add_argument("--repeat", type=int, default=3, help="runs per small figure (best kept)")
    ap.add_argument("--repeat-big", type=int, default=1,
                    help="runs of the plan and 1M-request figures (best kept)")
    ap.add_argument("--scale-requests", type=int, default=1_000_000)
    ap.add_argument("--only", nargs="*", default=[], help="figure name prefixes to run")
    ap.add_argument("--skip", nargs="*", default=[], help="figure name prefixes to skip")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--page", type=Path,
                    help="also write the docs results page (e.g. docs/results/speed.md)")
    args = ap.parse_args()
    AZURE = (args.azure or AZURE).resolve()
    if not AZURE.is_file():
        print(f"bench_speed: Azure trace not found: {AZURE} (pass --azure PATH)",
              file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_speed_") as d:
        figures = measure(args, Path(d))
    print(f"servesim bench_speed on {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end; best of {args.repeat} "
          f"(plan and 1M: {args.repeat_big})")
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    if args.page:
        args.page.parent.mkdir(parents=True, exist_ok=True)
        args.page.write_text(page(figures, args, load_before, os.getloadavg()[0]),
                             encoding="utf-8")
        print(f"bench_speed: wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
