"""The figures, targets and results page of ``bench_speed.py`` (issue 29): what each figure is
held to per build of the core, and the Markdown of ``docs/results/speed.md``.

Not a benchmark: ``bench_speed.py`` measures and this module formats, so the table and the page
can be checked from given figures without running servesim (``tests/docs/test_speed_page.py``).
Nothing here reads a clock or starts a process.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: the two builds of the per-event core: mypyc-compiled, and pure Python
#: (``SERVESIM_PURE_PYTHON=1`` in the child's environment)
BUILDS: tuple[str, ...] = ("compiled", "pure")

#: Vidur's wall time (s) on the side-by-side configuration (CodeLlama-34B, TP 2, A100,
#: 3 replicas, round robin, the Azure conv hour), measured on this project's 2-core
#: development machine when issue 29 was filed. A recorded measurement: bench_speed.py
#: does not rerun Vidur (the page gives the command to).
VIDUR_SIDE_BY_SIDE_S = 57.6
#: the microsoft/vidur commit whose CLI the page's Vidur command follows (2024-11-19, #45;
#: vidur/config/config.py, vidur/config/flat_dataclass.py,
#: vidur/request_generator/trace_replay_request_generator.py)
VIDUR_COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"
#: issue 29's speed-up over Vidur on the side-by-side configuration, per build
VIDUR_SPEEDUP_TARGETS = {"compiled": 20.0, "pure": 12.0}
#: the hour the Azure conv trace samples, in s (its 19,366 rows span 3,501.7 s); issue 29's
#: real-time factors are this over the wall time
AZURE_HOUR_S = 3600.0
#: issue 29's real-time factor on the Azure hour (Llama-3.1-8B, one H100), per build
REAL_TIME_TARGETS = {"compiled": 1500.0, "pure": 800.0}
#: issue 29's Azure hour target per build, in s (the hour over the real-time factor)
HOUR_TARGETS_S = {b: AZURE_HOUR_S / x for b, x in REAL_TIME_TARGETS.items()}
#: replicas of the 1M-request run as issue 29 gives them ("1M requests (52 replicas)";
#: ``bench_speed.tiled_trace`` derives them from the Azure hour's 19,366 requests)
SCALE_1M_REPLICAS = 52
#: seconds the figures may add to the Azure hour (``llama8b_h100_hour_figures``): issue 29
#: asks for figures "cut to what they must cost" and sets no number; this project holds them
#: to 0.6 s over the hour's own target, per build (compiled 2.4 + 0.6 = 3 s; pure 4.5 + 0.6 =
#: 5.1 s: the hour with figures cannot be held under the hour's own pure target)
FIGURES_ALLOWANCE_S = 0.6
#: one ServeGen day, in s (``reason/deepseek-r1``: 1,383,669 requests)
SERVEGEN_DAY_S = 86_400.0
#: replicas of the 8B/H100 scenario that carry the ServeGen day (bench_speed.py says why)
SERVEGEN_REPLICAS = 12


def _both(target: float) -> dict[str, float]:
    return dict.fromkeys(BUILDS, target)


@dataclass(frozen=True)
class Figure:
    """One figure of the benchmark and its upper bound per build.

    Attributes
    ----------
    name : str
        The figure's name (``--only`` / ``--skip`` take prefixes of it).
    unit : str
        ``s``, ``GiB`` or ``MiB``.
    targets : dict of str to float
        Upper bound per build, in ``unit``.
    factor : tuple of (float, str) or None
        ``(numerator, label)``: the page prints ``numerator / value`` as ``Nx label``
        (the speed-up over Vidur, the real-time factor).
    opt_in : bool
        Run only when ``--only`` names it (too long for a default run).
    """

    name: str
    unit: str
    targets: dict[str, float]
    factor: tuple[float, str] | None = None
    opt_in: bool = False


#: every figure, in the page's order
FIGURES: tuple[Figure, ...] = (
    Figure("side_by_side_34b", "s",
           {b: VIDUR_SIDE_BY_SIDE_S / x for b, x in VIDUR_SPEEDUP_TARGETS.items()},
           (VIDUR_SIDE_BY_SIDE_S, "faster than Vidur")),
    Figure("llama8b_h100_hour", "s", HOUR_TARGETS_S, (AZURE_HOUR_S, "real time")),
    Figure("llama8b_h100_hour_figures", "s",
           {b: t + FIGURES_ALLOWANCE_S for b, t in HOUR_TARGETS_S.items()}),
    Figure("startup_first_event", "s", _both(0.5)),
    Figure("plan_azure_conv", "s", _both(30.0)),
    Figure("scale_1m", "s", _both(120.0)),
    Figure("scale_1m_peak_rss", "GiB", _both(1.5)),
    Figure("idle_replicas_10k_rss", "MiB", _both(100.0)),
    Figure("servegen_day", "s", _both(180.0), opt_in=True),
)
BY_NAME = {f.name: f for f in FIGURES}


@dataclass(frozen=True)
class Result:
    """One measured value.

    Attributes
    ----------
    value : float
        In the figure's unit.
    note : str
        Said after the value (e.g. a shorter window than the figure's).
    judged : bool
        False when the run was not the figure's own (a shorter window): no verdict.
    """

    value: float
    note: str = ""
    judged: bool = True


def select(only: Sequence[str], skip: Sequence[str]) -> list[str]:
    """Names of the figures to run: those with a prefix in ``only`` (when given; an opt-in
    figure only so), else every figure that is not opt-in; less those with a prefix in
    ``skip``."""
    out = []
    for f in FIGURES:
        wanted = any(f.name.startswith(o) for o in only) if only else not f.opt_in
        if wanted and not any(f.name.startswith(s) for s in skip):
            out.append(f.name)
    return out


_CORE = re.compile(r"\(core: (compiled \(mypyc\)|pure Python \(.*\))\)\s*$")


def parse_core(version_text: str) -> str:
    """The build ``servesim --version`` reports: ``compiled (mypyc)`` or
    ``pure Python (<reason>)`` (argparse may wrap the line; whitespace is joined).

    Raises
    ------
    ValueError
        If the text holds no ``(core: ...)`` part.
    """
    m = _CORE.search(" ".join(version_text.split()))
    if m is None:
        raise ValueError(f"no '(core: ...)' in servesim --version output {version_text!r}")
    return m.group(1)


def _num(v: float, unit: str) -> str:
    return f"{v:.1f} {unit}" if unit == "MiB" else f"{v:.2f} {unit}"


def _factor(x: float) -> str:
    return f"{x:,.0f}x" if x >= 100 else f"{x:.1f}x"


def cell(fig: Figure, build: str, res: Result | None) -> list[str]:
    """The three cells of one build's column group: measured value, target, met."""
    target = f"<= {fig.targets[build]:g} {fig.unit}"
    if res is None:
        return ["not run", target, ""]
    text = _num(res.value, fig.unit)
    if fig.factor is not None and res.value > 0:
        num, label = fig.factor
        text += f" ({_factor(num / res.value)} {label})"
    if res.note:
        text += f" ({res.note})"
    met = ("yes" if res.value <= fig.targets[build] else "no") if res.judged else "n/a"
    return [text, target, met]


def table(results: Mapping[str, Mapping[str, Result]], builds: Sequence[str]) -> str:
    """The Markdown table: one row per measured figure, a column group (measured, target,
    met) per build. ``results[build][figure]``."""
    head = ["figure"] + [h for b in builds for h in (f"{b}: measured", "target", "met")]
    rows = ["| " + " | ".join(head) + " |",
            "|---|" + "---:|---:|:---:|" * len(builds)]
    for fig in FIGURES:
        if not any(fig.name in results.get(b, {}) for b in builds):
            continue
        cells = [f"`{fig.name}`"]
        for b in builds:
            cells += cell(fig, b, results.get(b, {}).get(fig.name))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def targets_text(builds: Sequence[str]) -> list[str]:
    """The page's note on where the derived targets come from."""
    sp = " / ".join(f"{VIDUR_SPEEDUP_TARGETS[b]:g}x ({b})" for b in builds)
    rt = " / ".join(f"{REAL_TIME_TARGETS[b]:,.0f}x ({b})" for b in builds)
    pure_hour = HOUR_TARGETS_S["pure"]
    return [
        (f"- `side_by_side_34b`: at least {sp} faster than Vidur on the same configuration. "
         f"Vidur's time, {VIDUR_SIDE_BY_SIDE_S:g} s, is the measurement of Vidur on this "
         "project's 2-core development machine recorded when issue 29 was filed, not rerun "
         "by the script (the commands to rerun both are below)."),
        (f"- `llama8b_h100_hour`: at least {rt} real time on the {AZURE_HOUR_S:,.0f} s Azure "
         "conv hour."),
        (f"- `llama8b_h100_hour_figures`: the same hour with its figures, at most "
         f"{FIGURES_ALLOWANCE_S:g} s over that build's hour target (this project's bound: the "
         "issue asks for figures cut to what they must cost and sets no number)."),
        ("- The other targets are the issue's single numbers (it names no build for them); "
         "the table shows both builds against them. This project reads them as the default "
         "(compiled) build's: the issue's own per-build lines put the pure build at about "
         f"half that speed ({REAL_TIME_TARGETS['pure']:,.0f}x real time on the hour, "
         f"{pure_hour:.1f} s), and `scale_1m` is {SCALE_1M_REPLICAS} such hours "
         f"({SCALE_1M_REPLICAS} replicas), {SCALE_1M_REPLICAS * pure_hour:.0f} s at that "
         "speed: a pure build that meets its own hour target is not expected to meet 120 s "
         "there."),
    ]


def side_by_side_yaml(trace_name: str = "AzureLLMInferenceTrace_conv.csv") -> str:
    """The side-by-side scenario (CodeLlama-34B's ``config.json`` in ``codellama-34b/`` beside
    it, looked up next to the scenario; the trace by file name, replaced by ``--trace``)."""
    return f"""\
name: side_by_side_34b
model: codellama-34b/config.json
hardware: {{gpu: a100-sxm-80gb}}
cluster: {{num_replicas: 3, tensor_parallel_size: 2, router: round_robin}}
workload: {{trace: {trace_name}, format: azure}}
seed: 0
"""


#: ``servesim run`` of the side-by-side figure, after the scenario's path (then ``-o OUT``)
SIDE_BY_SIDE_FLAGS = ("-q", "--no-figures")
#: ``servesim run`` of the ServeGen day, after ``--trace SERVEGEN`` (then ``-o OUT``)
SERVEGEN_SETS = ("--set", "workload.format=servegen",
                 "--set", f"cluster.num_replicas={SERVEGEN_REPLICAS}")


def vidur_command(trace_csv: str) -> str:
    """Vidur's command line for the side-by-side configuration (its CLI at
    :data:`VIDUR_COMMIT`; why each limit is what it is: :func:`vidur_section`), replaying
    ``trace_csv``."""
    rf = "--random_forrest_execution_time_predictor_config_prediction_max"
    args = [
        ("--replica_config_model_name", "codellama/CodeLlama-34b-Instruct-hf"),
        ("--replica_config_device", "a100"),
        ("--replica_config_tensor_parallel_size", "2"),
        ("--replica_config_num_pipeline_stages", "1"),
        ("--cluster_config_num_replicas", "3"),
        ("--global_scheduler_config_type", "round_robin"),
        ("--replica_scheduler_config_type", "vllm"),
        ("--vllm_scheduler_config_batch_size_cap", "256"),
        ("--vllm_scheduler_config_max_tokens_in_batch", "16384"),
        ("--request_generator_config_type", "trace_replay"),
        ("--trace_request_generator_config_trace_file", trace_csv),
        ("--trace_request_generator_config_max_tokens", "16384"),
        (f"{rf}_batch_size", "256"),
        (f"{rf}_tokens_per_request", "16384"),
        (f"{rf}_prefill_chunk_size", "16384"),
        ("--no-metrics_config_store_plots", None),
        ("--no-metrics_config_enable_chrome_trace", None),
    ]
    lines = ["python -m vidur.main"] + [f"  {k}" + ("" if v is None else f" {shlex.quote(v)}")
                                        for k, v in args]
    return " \\\n".join(lines)


def vidur_section() -> list[str]:
    """The page's section on rerunning the side-by-side figure against Vidur."""
    return [
        "## Side by side with Vidur",
        "",
        ("The `side_by_side_34b` figure runs this scenario (`python benchmarks/bench_speed.py "
         "--write-scenarios DIR` writes it, CodeLlama-34B's `config.json` beside it in "
         "`codellama-34b/`, and `azure_conv_vidur.csv`):"),
        "",
        "```yaml",
        side_by_side_yaml().rstrip("\n"),
        "```",
        "",
        "```bash",
        "cd DIR",
        "servesim run side_by_side_34b.yaml --trace PATH/AzureLLMInferenceTrace_conv.csv "
        + " ".join(SIDE_BY_SIDE_FLAGS) + " -o out_34b",
        "```",
        "",
        ("Vidur replays a CSV of `arrived_at` (seconds from the first request), "
         "`num_prefill_tokens` and `num_decode_tokens`. The Azure trace converts to it row "
         "for row (Vidur's own `data/processed_traces/splitwise_conv.csv` holds the same "
         "19,366 rows):"),
        "",
        "```python",
        "import pandas as pd",
        'df = pd.read_csv("AzureLLMInferenceTrace_conv.csv")',
        't = pd.to_datetime(df["TIMESTAMP"])',
        'pd.DataFrame({"arrived_at": (t - t.iloc[0]).dt.total_seconds(),',
        '              "num_prefill_tokens": df["ContextTokens"],',
        '              "num_decode_tokens": df["GeneratedTokens"]}).to_csv(',
        '    "azure_conv_vidur.csv", index=False)',
        "```",
        "",
        (f"Then, in a clone of github.com/microsoft/vidur at commit `{VIDUR_COMMIT}` "
         "(Python 3.10, `pip install -r requirements.txt`), the same configuration: "
         "CodeLlama-34B-Instruct, A100 (Vidur's `a100` profiles; its default "
         "`a100_pairwise_nvlink` node, TP 2 within an NVLink pair), 3 replicas, TP 2, the "
         "`vllm` replica scheduler, the round-robin global scheduler, trace replay:"),
        "",
        "```bash",
        vidur_command("DIR/azure_conv_vidur.csv"),
        "```",
        "",
        ("Vidur's `vllm` scheduler prefills a prompt whole and admits a batch only while "
         "its padded tokens (`len(batch) x longest`) fit `max_tokens_in_batch`, so that must "
         "hold the longest prompt (14,050 tokens); the trace replay cuts each request to "
         "`max_tokens` in total (the longest is 14,089) and the execution-time predictor "
         "answers up to its `prediction_max_*` limits: all 16,384. The batch cap is servesim's "
         "`max_num_seqs` (256); plots and the Chrome trace are off, as servesim runs with "
         "`--no-figures`. Vidur trains its execution-time models on a first run and caches "
         "them (`cache/`); time a later run, as servesim's figures come from warm runs too."),
        "",
    ]


def servegen_section(window_s: float | None) -> list[str]:
    """The page's note on the ServeGen day (``window_s``: the window the run measured, None
    when the figure was not run)."""
    lines = [
        "## The ServeGen day",
        "",
        ("`servegen_day` replays one day of Alibaba ServeGen's `reason/deepseek-r1` clients "
         f"(1,383,669 requests, generated with seed 0) on {SERVEGEN_REPLICAS} replicas of "
         "the Llama-3.1-8B / H100 scenario, enough to carry its heaviest hours (the long "
         "reasoning outputs of hours 6 to 12) within the scenario's 90% SLO attainment target "
         "(`benchmarks/bench_speed.py`'s docstring gives the runs). It runs only when asked "
         "for (`--only servegen_day`): a whole day is close to its 180 s target on 2 cores, "
         "about three minutes a run (`docs/results/day.md` lists the runs)."),
        "",
        "```bash",
        "servesim run scenarios/azure_conv_llama3_8b_h100.yaml "
        "--trace PATH/servegen/reason/deepseek-r1 " + " ".join(SERVEGEN_SETS)
        + " -q --no-figures -o out_servegen_day",
        "```",
        "",
    ]
    if window_s is not None and window_s < SERVEGEN_DAY_S:
        lines += [(f"This run measured the first {window_s:,.0f} s of the day only "
                  f"(`--servegen-end-s {window_s:g}`): no verdict against the day's target."),
                  ""]
    return lines


@dataclass
class PageInfo:
    """What the page says about the run besides its figures.

    Attributes
    ----------
    commit, date, cpu : str
        Commit label of the checkout measured, ISO date, CPU model.
    cpus : int
        Logical CPUs.
    load_before, load_after : float
        One-minute load average before and after.
    repeat, repeat_big : int
        Runs per small figure and per plan / 1M / ServeGen figure (the best kept).
    cores : dict of str to str
        Per build measured, the core its child's ``servesim --version`` reported.
    not_measured_builds : dict of str to str
        Builds left out, and why.
    servegen_window_s : float or None
        The window the ServeGen figure ran on (None when it did not run).
    """

    commit: str
    date: str
    cpu: str
    cpus: int
    load_before: float
    load_after: float
    repeat: int
    repeat_big: int
    cores: dict[str, str]
    not_measured_builds: dict[str, str] = field(default_factory=dict)
    servegen_window_s: float | None = None


def page(results: Mapping[str, Mapping[str, Result]], info: PageInfo) -> str:
    """The results page of the docs site (never edited by hand): the table with the builds,
    machine and commit it came from, and the commands to rerun the comparison with Vidur."""
    builds = [b for b in BUILDS if b in info.cores]
    lines = [
        "# Speed: servesim against its targets",
        "",
        (f"Generated by `python benchmarks/bench_speed.py --page ...` at commit "
         f"`{info.commit}` on {info.date}. Each figure runs `servesim` as a fresh child "
         "process and measures the whole process (wall seconds; peak resident memory of the "
         f"child), once per build of the per-event core; best of {info.repeat} runs (the "
         f"plan, 1M-request and ServeGen figures: best of {info.repeat_big}). What each "
         "figure runs: `benchmarks/bench_speed.py`'s docstring."),
        "",
        (f"Machine: {info.cpu}, {info.cpus} CPUs; load average {info.load_before:.1f} "
         f"before and {info.load_after:.1f} after (a shared machine: a loaded run is slower, "
         "so these are upper bounds of what this commit needs)."),
        "",
        "Builds (what each column's child reported with `servesim --version`):",
        "",
    ]
    lines += [f"- `{b}`: `core: {info.cores[b]}`" if b in info.cores
              else f"- `{b}`: not measured: {info.not_measured_builds[b]}"
              for b in BUILDS if b in info.cores or b in info.not_measured_builds]
    lines += ["", table(results, builds), "", "Targets (issue 29):", "", *targets_text(builds),
              ""]
    ran = {name for b in builds for name in results.get(b, {})}
    left_out = [f"`{f.name}`" + (" (opt-in)" if f.opt_in else "")
                for f in FIGURES if f.name not in ran]
    if left_out:
        lines += [f"Not measured in this run: {', '.join(left_out)}.", ""]
    lines += vidur_section()
    lines += servegen_section(info.servegen_window_s)
    return "\n".join(lines)
