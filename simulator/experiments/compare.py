"""``servesim compare``: variants of one scenario run on the same requests, side by side.

Every combination (cartesian product) of the ``--vary KEY=V1,V2,...`` lists is one
*variant*: the base scenario with ``KEY=Vi`` overrides applied. The variants are a family
run by :func:`simulator.experiments.runner.run_family`: the workload is loaded once per
distinct (workload, seed) and the very same request list is replayed in every variant
(varying a ``workload.*`` key or ``seed`` gives each distinct workload its own list, and the
report says so); ``jobs > 1`` runs the variants in a local process pool, ``backend="ray"``
on Ray. Each variant writes its own run folder ``OUTDIR/<variant>/`` (as ``servesim run``
would); the comparison (:mod:`simulator.report.compare`) writes ``compare.md``,
``compare.html``, ``compare.csv``, ``compare.json`` and the overlaid figures.

KV metrics (from the step rows; each step weighted by its duration, i.e. busy time, as the
run summary's KV usage is): *reserved* = ``kv_blocks_used x block_size`` tokens held in the
pool, *used* = ``kv_tokens_used`` tokens of requests in flight, *wasted* = reserved - used,
*fragmentation* = wasted / reserved. Bytes are per GPU (``kv_bytes_per_token`` at the
replica's TP degree). *Padding waste* = sum of ``num_padding_seqs`` / sum of ``batch_size``
over steps (slot-steps of a static batch doing no useful work); *max concurrency* = the
largest ``batch_size`` of any step. Where the run summary already has these keys
(``mean_kv_fragmentation``, ``kv_*_bytes_mean``, ``padding_waste``, ``max_concurrency``)
they are used as they are.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.base.input_limits import InputLimitError, clip_text
from simulator.base.outdir import (
    check_outputs_spare_inputs,
    clear_outputs,
    make_output_folder,
    named_output_folder,
)
from simulator.cluster.setup import plan_replica_memory
from simulator.experiments.grid import MAX_GRID_POINTS, grid_size
from simulator.experiments.runner import Workloads, run_family
from simulator.metrics.summary import finite_float as _f
from simulator.perf.provenance import summary_sources_label
from simulator.report.compare import (
    CSV_FILE,
    FIGURE_FILES,
    HTML_FILE,
    JSON_FILE,
    REPORT_FILE,
    write_compare_report,
)
from simulator.report.format import yaml_value
from simulator.runs.scenario import run_output_names, run_scenario, scenario_inputs
from simulator.scenario.config import Scenario, ScenarioError, load_scenario
from simulator.scenario.overrides import (
    Override,
    blame_message,
    cli_overrides,
    message_key,
    parse_yaml_value,
    split_assignment,
)
from simulator.scenario.yaml_files import read_scenario_yaml

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used (start-up)

__all__ = ["DEFAULT_MAX_VARIANTS", "DEFAULT_VARY", "CompareResult", "Variant",
           "check_variant_count", "expand_variants", "kv_step_metrics", "parse_vary",
           "run_compare", "trace_overrides", "variant_names", "variant_row"]

#: The comparison ``servesim compare`` runs when no ``--vary`` is given.
DEFAULT_VARY = ("scheduler.policy=static,continuous", "kv_cache.allocation=contiguous,paged")
#: The most variants a comparison runs unless ``--max-variants`` says otherwise (a report
#: overlays every variant: past a few dozen it is unreadable; a sweep file suits large grids);
#: ``--max-variants`` may go up to :data:`~simulator.experiments.grid.MAX_GRID_POINTS`.
DEFAULT_MAX_VARIANTS = 100

_SAFE = re.compile(r"[^A-Za-z0-9_.=+-]+")


# --------------------------------------------------------------------------------------------
# variants
# --------------------------------------------------------------------------------------------
def parse_vary(item: str) -> tuple[str, list]:
    """Parse ``key.path=v1,v2,...`` into the key and its values (each parsed as YAML).

    Raises
    ------
    ScenarioError
        Without ``=``, with an empty key or an empty value, or a value twice in the list.
    """
    key, raw = split_assignment(item, "--vary", "key.path=value1,value2,...")
    parts = [p.strip() for p in raw.split(",")]
    if not parts or any(p == "" for p in parts):
        raise ScenarioError(f"--vary {clip_text(repr(item))}: empty value in the list")
    try:
        values = [parse_yaml_value(p) for p in parts]
    except InputLimitError as e:  # a 5,000-digit number, a value nested too deep
        raise ScenarioError(f"--vary {clip_text(item)}: "
                            f"{e.key + ': ' if e.key else ''}{e.problem}") from None
    seen: set[str] = set()
    for v in values:  # the same value twice would run the same variant twice
        text = yaml_value(v)
        if text in seen:
            raise ScenarioError(f"--vary {clip_text(repr(item))}: {clip_text(text)} is in the "
                                "list twice")
        seen.add(text)
    return key, values


def variant_names(combos: list[list[tuple[str, Any]]]) -> list[str]:
    """Folder-safe, unique names of the variants.

    A variant is named by its values joined with ``-`` (``static-contiguous``) when those
    names are unique and every value is a word; otherwise by ``key=value`` pairs (last key
    component) joined with ``_``; a numeric suffix breaks any remaining tie.
    """
    def words(c):
        return "-".join(yaml_value(v) for _k, v in c)

    def pairs(c):
        return "_".join(f"{k.split('.')[-1]}={yaml_value(v)}" for k, v in c)

    if not combos or combos == [[]]:
        return ["base"]
    names = [words(c) for c in combos]
    plain = all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_.+]*", yaml_value(v)) for c in combos
                for _k, v in c)
    if not plain or len(set(names)) != len(names):
        names = [pairs(c) for c in combos]
    names = [_SAFE.sub("_", n).strip("._") or "variant" for n in names]
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            seen[n] += 1
            n = f"{n}-{seen[n]}"
        else:
            seen[n] = 0
        out.append(n)
    return out


def check_variant_count(varies: list[tuple[str, list]], max_variants: int,
                        flag: str = "--max-variants") -> int:
    """The number of variants of ``varies`` (the product of the list lengths, counted, not
    expanded), refused above ``max_variants``.

    Raises
    ------
    ScenarioError
        One line with the count and its factors, before any variant is built or run; also
        when ``max_variants`` is not in ``[1, MAX_GRID_POINTS]``.
    """
    if isinstance(max_variants, bool) or not 1 <= max_variants <= MAX_GRID_POINTS:
        raise ScenarioError(f"{flag} {max_variants}: must be an integer in "
                            f"[1, {MAX_GRID_POINTS:,}]")
    n = grid_size(dict(varies))
    if n > max_variants:
        factors = " x ".join(f"{k} {len(v)}" for k, v in varies)
        raise ScenarioError(
            f"--vary: {n:,} variants ({factors}) > {flag} {max_variants:,}; narrow the "
            f"--vary lists, raise {flag} (up to {MAX_GRID_POINTS:,}), or run a sweep file "
            "(servesim sweep) for a large grid")
    return n


def expand_variants(varies: list[tuple[str, list]]) -> list[list[tuple[str, Any]]]:
    """Cartesian product of the vary lists, in the order given (last key varies fastest).

    Raises
    ------
    ScenarioError
        If a key is varied twice.
    """
    keys = [k for k, _v in varies]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ScenarioError(f"--vary: key(s) given more than once: {', '.join(dup)}")
    if not varies:
        return [[]]
    return [list(zip(keys, vals)) for vals in itertools.product(*(v for _k, v in varies))]


def trace_overrides(trace: str | None) -> list[str]:
    """The overrides that replace a scenario's workload by the trace file ``trace``."""
    return cli_overrides(trace=trace)


def _spell(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def _stat_ms(summary: Mapping[str, Any], key: str, stat: str) -> float | None:
    v = _f((summary.get(key) or {}).get(stat))
    return None if v is None else v * 1e3


def kv_step_metrics(steps: pd.DataFrame, block_size: int, kv_bytes_per_token: float) -> dict:
    """KV and batching metrics of a run from its step rows.

    Parameters
    ----------
    steps : pandas.DataFrame
        The engine's step table (``step_time_s``, ``batch_size``, ``kv_blocks_used``,
        ``kv_tokens_used``, ``num_padding_seqs``; missing columns count as zeros).
    block_size : int
        Tokens per KV block.
    kv_bytes_per_token : float
        KV bytes of one token on one GPU.

    Returns
    -------
    dict
        ``kv_reserved_bytes_mean``, ``kv_used_bytes_mean``, ``kv_wasted_bytes_mean``
        (bytes per GPU, busy-time means), ``mean_kv_fragmentation`` (wasted / reserved of
        the busy-time means, a fraction; None when nothing was reserved), ``max_concurrency``
        (largest ``batch_size``) and ``padding_waste`` (sum ``num_padding_seqs`` / sum
        ``batch_size``; None without steps).
    """
    import pandas as pd

    def col(name):
        if name in steps.columns:
            return pd.to_numeric(steps[name], errors="coerce").fillna(0).to_numpy(dtype=float)
        return np.zeros(len(steps))

    dt = col("step_time_s")
    reserved = col("kv_blocks_used") * block_size * kv_bytes_per_token
    used = col("kv_tokens_used") * kv_bytes_per_token
    total = dt.sum()
    w = dt / total if total > 0 else (np.full(len(dt), 1.0 / len(dt)) if len(dt) else dt)
    r_mean = float(np.sum(reserved * w)) if len(dt) else None
    u_mean = float(np.sum(used * w)) if len(dt) else None
    bs = col("batch_size")
    pad = col("num_padding_seqs")
    return {
        "kv_reserved_bytes_mean": r_mean,
        "kv_used_bytes_mean": u_mean,
        "kv_wasted_bytes_mean": None if r_mean is None else r_mean - u_mean,
        "mean_kv_fragmentation": (None if not r_mean else (r_mean - u_mean) / r_mean),
        "max_concurrency": int(bs.max()) if len(bs) else 0,
        "padding_waste": float(pad.sum() / bs.sum()) if bs.sum() > 0 else None,
    }


def _gb(x) -> float | None:
    return None if _f(x) is None else x / 1e9


def _pct(x) -> float | None:
    return None if _f(x) is None else 100.0 * x


def variant_row(v: Variant) -> dict:
    """One row of the comparison (the settings varied and every metric of the run)."""
    s = v.summary
    own = kv_step_metrics(v.steps, v.block_size, v.kv_bytes_per_token_per_gpu)
    kv = {k: (s[k] if s.get(k) is not None else own[k]) for k in own}
    frag = _f(kv["mean_kv_fragmentation"])
    pad = _f(kv["padding_waste"])
    row: dict[str, Any] = {"variant": v.name}
    for k, x in v.assignments:
        row[k] = x
    row.update({
        "num_requests": s.get("num_requests"),
        "num_completed": s.get("num_completed"),
        "num_rejected": s.get("num_rejected"),
        "num_cancelled": s.get("num_cancelled"),
        "num_unfinished": s.get("num_unfinished"),
        "ttft_p50_ms": _stat_ms(s, "ttft_s", "p50"),
        "ttft_p99_ms": _stat_ms(s, "ttft_s", "p99"),
        "tpot_p50_ms": _stat_ms(s, "tpot_s", "p50"),
        "tpot_p99_ms": _stat_ms(s, "tpot_s", "p99"),
        "e2e_p50_ms": _stat_ms(s, "e2e_latency_s", "p50"),
        "e2e_p99_ms": _stat_ms(s, "e2e_latency_s", "p99"),
        "request_throughput_rps": _f(s.get("request_throughput_rps")),
        "output_token_throughput_tps": _f(s.get("output_token_throughput_tps")),
        "goodput_rps": _f(s.get("goodput_rps")),
        "slo_attainment": _f(s.get("slo_attainment")),
        "max_concurrency": kv["max_concurrency"],
        "mean_batch_size": _f(s.get("mean_batch_size")),
        "kv_fragmentation_pct": None if frag is None else 100.0 * frag,
        "kv_reserved_gb_mean": _gb(kv["kv_reserved_bytes_mean"]),
        "kv_used_gb_mean": _gb(kv["kv_used_bytes_mean"]),
        "kv_wasted_gb_mean": _gb(kv["kv_wasted_bytes_mean"]),
        "padding_waste_pct": None if pad is None else 100.0 * pad,
        "prefill_padding_tokens": v.prefill_padding_tokens,
        "num_preemptions": s.get("num_preemptions"),
        # KV offload tiers (summary kv_offload; None without tiers, 0 for a variant without)
        "tier_hit_pct": _tier_hit_pct(s),
        "tier_load_wait_mean_ms": _stat_ms(s, "kv_offload", "load_wait_mean_s"),
        # what bounds the run (simulator.metrics.bounds): the verdict and its share in percent
        "bound": (s.get("bounds") or {}).get("bound"),
        "bound_share_pct": _pct((s.get("bounds") or {}).get("bound_share")),
        # an autoscaled variant's mean replicas held (None for a fixed fleet), and GPU-hours
        "mean_replicas_held": _f((s.get("autoscale") or {}).get("mean_replicas_held")),
        "gpu_hours": _f(s.get("gpu_hours")),
        "cost_per_1m_tokens_usd": _f(s.get("cost_per_1m_tokens_usd")),
        "cost_per_1m_output_tokens_usd": _f(s.get("cost_per_1m_output_tokens_usd")),
        # GPU energy (summary energy; None where the GPU has no power model)
        "joules_per_output_token": _f((s.get("energy") or {}).get("joules_per_output_token")),
        "energy_kwh": _f((s.get("energy") or {}).get("energy_kwh")),
        "duration_s": _f(s.get("duration_s")),
        "num_steps": s.get("num_steps"),
        "num_gpu_blocks": v.num_gpu_blocks,
        "kv_bytes_per_token_per_gpu": v.kv_bytes_per_token_per_gpu,
        "latency_sources": summary_sources_label(s.get("provenance")),
        "sim_wall_s": _f(s.get("sim_wall_s")),
    })
    return row


def _tier_hit_pct(s: dict) -> float | None:
    """Prompt tokens served from the offload tiers over all prompt tokens, percent (None
    without tiers)."""
    off = s.get("kv_offload")
    if not off:
        return None
    return 100.0 * sum(float(t.get("hit_rate") or 0.0) for t in off.get("tiers", []))


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------
@dataclass
class Variant:
    """One variant of a comparison and what its run produced (picklable: plain data).

    ``block_size`` (tokens), ``kv_bytes_per_token_per_gpu`` (bytes), ``num_gpu_blocks`` and
    ``prefill_padding_tokens`` (static batching's padded prompt tokens) come from the run's
    setup and schedulers; ``workload_key`` names its request list.
    """

    name: str
    assignments: list[tuple[str, Any]]
    scenario: Scenario
    summary: dict
    requests: pd.DataFrame
    steps: pd.DataFrame
    block_size: int
    kv_bytes_per_token_per_gpu: float
    num_gpu_blocks: int = 0
    prefill_padding_tokens: int = 0
    workload_key: str = ""
    outdir: Path | None = None


@dataclass
class CompareResult:
    """Everything :func:`run_compare` produced."""

    scenario_name: str
    varies: list[tuple[str, list]]
    variants: list[Variant]
    table: pd.DataFrame
    same_requests: bool
    num_workloads: int
    outdir: Path | None = None
    files: dict = field(default_factory=dict)


def _run_variant(task: Mapping[str, Any], shared: Mapping[str, Any]) -> Variant:
    """Simulate one variant (in a worker) and keep what the comparison needs."""
    hook = shared.get("progress")
    if hook is not None:
        hook(task["name"], task["index"], task["total"])
    sim_hook = shared.get("sim_progress")
    ctx = (sim_hook(task["name"], task["index"], task["total"]) if sim_hook is not None
           else contextlib.nullcontext())
    with ctx as cb:
        res = run_scenario(task["scenario"], task["base_dir"],
                           specs=shared["workloads"][task["workload"]], write=task["write"],
                           outdir=task["outdir"], figures=task["figures"], progress=cb)
    setup = res.setup
    scheds = [getattr(rep, "sched", None) for rep in getattr(res.sim, "replicas", [])]
    return Variant(
        task["name"], task["assignments"], res.scenario, res.summary, res.requests, res.steps,
        setup.block_size,
        setup.model.kv_bytes_per_token(setup.kv_cache_dtype, setup.tensor_parallel_size),
        setup.num_gpu_blocks,
        sum(int(getattr(sc, "num_prefill_padding_tokens", 0) or 0) for sc in scheds),
        task["workload"], res.outdir)


def _load_variants(scenario_path, varies, base_over) -> list[tuple[str, list, Scenario, Path]]:
    combos = expand_variants(varies)
    names = variant_names(combos)
    spelled = {k: f"--vary {k}={','.join(_spell(x) for x in vals)}" for k, vals in varies}
    loaded = []
    for name, combo in zip(names, combos):
        over = base_over + [Override(f"{k}={_spell(v)}", spelled[k]) for k, v in combo]
        try:
            sc, base = load_scenario(scenario_path, over)
        except ScenarioError as e:
            raise ScenarioError(f"variant {name}: {e}") from None
        if sc.pools:
            src = read_scenario_yaml(scenario_path).get("__file__", scenario_path)
            raise ScenarioError(
                f"{src}: scenario '{sc.name}' declares pools: (a topology scenario, "
                "run through the gateway): a comparison runs one replica set per variant; run "
                "it with servesim run (vary a pool with --set pools.N.KEY=VALUE), or size "
                "pools with a topology plan")
        try:  # names, parallel split and memory fit before any variant runs
            plan_replica_memory(sc, base, warn=False)
        except ScenarioError as e:
            raise ScenarioError(f"variant {name}: {e}") from None
        except ValueError as e:  # a model, GPU or TP split: the flag that set it, else the file
            why = blame_message(str(e), over) or (
                "; ".join(spelled[k] for k, _ in combo) if message_key(str(e)) is None else ""
            ) or str(scenario_path)
            raise ScenarioError(f"variant {name}: {why}: {e}") from None
        loaded.append((name, combo, sc, base))
    return loaded


def run_compare(scenario_path: str | Path, vary: list[str] | None = None, *,
                overrides: list[str] | None = None, trace: str | None = None,
                outdir: str | Path | None = None, write: bool = True, figures: bool = True,
                run_figures: bool | None = None,
                progress: Callable[[str, int, int], None] | None = None,
                sim_progress: Callable[[str, int, int], Any] | None = None,
                jobs: int = 1, backend: str = "local",
                address: str | None = None,
                max_variants: int = DEFAULT_MAX_VARIANTS) -> CompareResult:
    """Run every variant of a scenario on the same requests and write the comparison.

    Parameters
    ----------
    scenario_path : path
        Scenario YAML (a path, or a name under ``scenarios/``).
    vary : list of str, optional
        ``key.path=v1,v2,...`` items; default :data:`DEFAULT_VARY`.
    overrides : list of str, optional
        ``key.path=value`` applied to every variant (before the varied keys).
    trace : str, optional
        Replay this trace file instead of the scenario's workload.
    outdir : path, optional
        Output folder (default ``reports/compare-<scenario name>``).
    write : bool
        Write the run folders and the comparison files.
    figures : bool
        Write the comparison's PNG figures.
    run_figures : bool, optional
        Write each variant run's own figures (default: ``figures``).
    progress : callable, optional
        ``progress(variant_name, index, total)`` before each variant runs (in process only:
        ``jobs == 1`` and the local backend).
    sim_progress : callable, optional
        ``sim_progress(variant_name, index, total)`` returns a context manager yielding the
        ``progress(done, total)`` callback of that variant's simulation (e.g.
        :func:`simulator.base.progress.progress`), or None (in process only).
    jobs, backend, address
        Where the variants run (:func:`simulator.experiments.executor.run_tasks`).
    max_variants : int
        The most variants run (default :data:`DEFAULT_MAX_VARIANTS`; at most
        :data:`~simulator.experiments.grid.MAX_GRID_POINTS`), checked before any is built.

    Returns
    -------
    CompareResult

    Raises
    ------
    ScenarioError
        On a bad ``--vary``/``--set`` item, a variant that is not a valid scenario (every
        variant is validated before any runs) or more variants than ``max_variants``.
    """
    varies = [parse_vary(v) for v in (vary if vary else DEFAULT_VARY)]
    check_variant_count(varies, max_variants)
    loaded = _load_variants(scenario_path, varies, list(overrides or []) + trace_overrides(trace))
    base_name = loaded[0][2].name
    out = Path(outdir) if outdir is not None else named_output_folder(
        "reports/compare-{name}", base_name, "scenario name", ScenarioError)
    if write:  # before any workload loads or variant runs
        _prepare_folder(out, scenario_path, loaded)
    workloads = Workloads()
    tasks = _variant_tasks(loaded, workloads, out, write,
                           figures if run_figures is None else run_figures)
    shared: dict[str, Any] = {"workloads": workloads.lists}
    if jobs == 1 and backend == "local":  # hooks cannot travel to other processes
        shared.update(progress=progress, sim_progress=sim_progress)
    results, _ran = run_family(_run_variant, tasks, shared=shared, backend=backend, jobs=jobs,
                               address=address, what="variants",
                               stop_note=_stop_note(tasks, out, write))
    import pandas as pd  # start-up: loaded once there are results to tabulate

    variants = [results[t["key"]] for t in tasks]
    table = pd.DataFrame([variant_row(v) for v in variants])
    cr = CompareResult(base_name, varies, variants, table,
                       same_requests=len(workloads) == 1, num_workloads=len(workloads))
    if write:
        cr.outdir = out
        clear_outputs(out, COMPARE_FILES)  # an earlier comparison's (figures too)
        cr.files = write_compare_report(cr, out, figures=figures)
    return cr


def _variant_tasks(loaded, workloads: Workloads, out: Path, write: bool,
                   figures: bool) -> list[dict]:
    """One executor task per loaded variant (its workload registered once per distinct
    workload in ``workloads``)."""
    return [{"key": name, "name": name, "index": i, "total": len(loaded),
             "assignments": combo, "scenario": sc, "base_dir": base,
             "workload": workloads.add(sc.workload, sc.seed, base), "write": write,
             "outdir": out / name, "figures": figures}
            for i, (name, combo, sc, base) in enumerate(loaded)]


def _stop_note(tasks: list[dict], out: Path, write: bool):
    """The note of a stopped comparison: how many variants finished. A variant is kept once
    its run folder is complete (``summary.json`` is written last), whether or not its result
    had reached this process."""
    def note(done: int, total: int) -> str:
        n = sum((t["outdir"] / "summary.json").is_file() for t in tasks) if write else done
        return (f"{n} of {total} variants finished" + (f" (their run folders in {out} are "
                                                        "complete)" if write and n else ""))
    return note


#: The files of a comparison in its output folder (beside one run folder per variant)
COMPARE_FILES = (REPORT_FILE, HTML_FILE, CSV_FILE, JSON_FILE, *FIGURE_FILES.values())


def _prepare_folder(out: Path, scenario_path, loaded) -> None:
    """Create the output folder; refuse it when an output (the comparison's files, a
    variant's run folder) would overwrite an input of a variant; mark every variant's run
    folder left by an earlier comparison incomplete (its ``summary.json`` goes), so that a
    folder with one is a run of this comparison."""
    src = read_scenario_yaml(scenario_path).get("__file__")  # before the folder can shadow it
    make_output_folder(out, ScenarioError)
    inputs = scenario_inputs([sc for _n, _c, sc, _b in loaded], loaded[0][3], [src])
    runs = [f"{n}/{f}" for n, *_ in loaded for f in run_output_names()]
    check_outputs_spare_inputs(out, [*COMPARE_FILES, *runs], inputs, error=ScenarioError)
    for name, *_ in loaded:
        clear_outputs(out / name, ["summary.json"])
