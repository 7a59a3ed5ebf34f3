"""``servesim compare``: run variants of one scenario on the same requests, side by side.

Every combination (cartesian product) of the ``--vary KEY=V1,V2,...`` lists is one
*variant*: the base scenario with ``KEY=Vi`` overrides applied. The workload is loaded once
per distinct (workload, seed) and the very same request list is replayed in every variant
(varying a ``workload.*`` key or ``seed`` gives each distinct workload its own list, and the
report says so). Each variant writes its own run folder ``OUTDIR/<variant>/`` (as
``servesim run`` would), and the comparison writes:

``OUTDIR/compare.md``
    The side-by-side table, the definitions of its columns and the figures.
``OUTDIR/compare.csv``, ``OUTDIR/compare.json``
    One row / object per variant with every metric (JSON also has the run's settings).
``OUTDIR/compare_*.png``
    Overlaid TTFT and E2E CDFs, KV used vs reserved over time, batch size over time.

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
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .config import (
    Override,
    ScenarioError,
    cli_overrides,
    load_scenario,
    parse_yaml_value,
    split_assignment,
)
from .metrics.summary import finite_float as _f
from .metrics.summary import json_safe as _json_safe
from .request import RequestSpec

#: The comparison ``servesim compare`` runs when no ``--vary`` is given.
DEFAULT_VARY = ("scheduler.policy=static,continuous", "kv_cache.allocation=contiguous,paged")

REPORT_FILE = "compare.md"
CSV_FILE = "compare.csv"
JSON_FILE = "compare.json"
FIGURE_FILES = {
    "ttft_cdf": "compare_ttft_cdf.png",
    "e2e_cdf": "compare_e2e_cdf.png",
    "kv_memory": "compare_kv_memory.png",
    "batch_size": "compare_batch_size.png",
}

#: (column, label, format) of the side-by-side table (printed and in compare.md); the
#: table has one row per entry and one column per variant.
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("num_completed", "completed requests", "{:,.0f}"),
    ("ttft_p50_ms", "TTFT p50 (ms)", "{:,.1f}"),
    ("ttft_p99_ms", "TTFT p99 (ms)", "{:,.1f}"),
    ("tpot_p50_ms", "TPOT p50 (ms)", "{:,.2f}"),
    ("tpot_p99_ms", "TPOT p99 (ms)", "{:,.2f}"),
    ("request_throughput_rps", "throughput (req/s)", "{:,.2f}"),
    ("output_token_throughput_tps", "output tokens/s", "{:,.0f}"),
    ("goodput_rps", "goodput (req/s)", "{:,.2f}"),
    ("max_concurrency", "max concurrency (batch)", "{:,.0f}"),
    ("mean_batch_size", "mean batch size", "{:,.1f}"),
    ("kv_fragmentation_pct", "KV fragmentation (%)", "{:,.1f}"),
    ("kv_reserved_gb_mean", "KV reserved (GB, mean)", "{:,.2f}"),
    ("kv_wasted_gb_mean", "KV wasted (GB, mean)", "{:,.2f}"),
    ("padding_waste_pct", "padding waste (%)", "{:,.1f}"),
    ("num_preemptions", "preemptions", "{:,.0f}"),
    ("cost_per_1m_tokens_usd", "cost per 1M tokens ($)", "{:,.4f}"),
)

_ROWS_NOTE = (
    "Rows: TTFT and TPOT percentiles over the requests that reached them; throughput counts "
    "completed requests (and their output tokens) per second of the measured duration; "
    "goodput counts those that met every SLO; *max concurrency* is the largest batch of any "
    "step (static: slots, padding included); *KV fragmentation* is wasted / reserved KV over "
    "busy time (reserved = blocks held x block size, used = tokens of requests in flight); "
    "*KV wasted* is the busy-time mean of reserved - used per GPU; *padding waste* is padding "
    "slot-steps / slot-steps (static batching's bubbles); *cost per 1M tokens* charges all GPU "
    "time to input + output tokens.")
_SAFE = re.compile(r"[^A-Za-z0-9_.=+-]+")
_MAX_CDF_POINTS = 2000
_STYLES = ("-", "--", "-.", ":")
_MAX_TIME_BINS = 400


# --------------------------------------------------------------------------------------------
# variants
# --------------------------------------------------------------------------------------------
def parse_vary(item: str) -> tuple[str, list]:
    """Parse ``key.path=v1,v2,...`` into the key and its values (each parsed as YAML).

    Raises
    ------
    ScenarioError
        Without ``=``, with an empty key or an empty value.
    """
    key, raw = split_assignment(item, "--vary", "key.path=value1,value2,...")
    parts = [p.strip() for p in raw.split(",")]
    if not parts or any(p == "" for p in parts):
        raise ScenarioError(f"--vary {item!r}: empty value in the list")
    return key, [parse_yaml_value(p) for p in parts]


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


def variant_names(combos: list[list[tuple[str, Any]]]) -> list[str]:
    """Folder-safe, unique names of the variants.

    A variant is named by its values joined with ``-`` (``static-contiguous``) when those
    names are unique and every value is a word; otherwise by ``key=value`` pairs (last key
    component) joined with ``_``; a numeric suffix breaks any remaining tie.
    """
    def words(c):
        return "-".join(_fmt_value(v) for _k, v in c)

    def pairs(c):
        return "_".join(f"{k.split('.')[-1]}={_fmt_value(v)}" for k, v in c)

    if not combos or combos == [[]]:
        return ["base"]
    names = [words(c) for c in combos]
    plain = all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_.+]*", _fmt_value(v)) for c in combos
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


def _override(key: str, value: Any) -> str:
    return f"{key}={_spell(value)}"


def _spell(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def _stat_ms(summary: dict, key: str, stat: str) -> float | None:
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
    def col(name):
        if name in steps.columns:
            return pd.to_numeric(steps[name], errors="coerce").fillna(0).to_numpy(dtype=float)
        return np.zeros(len(steps))

    dt = col("step_time_s")
    reserved = col("kv_blocks_used") * block_size * kv_bytes_per_token
    used = col("kv_tokens_used") * kv_bytes_per_token
    total = dt.sum()
    w = dt / total if total > 0 else (np.full(len(dt), 1.0 / len(dt)) if len(dt) else dt)
    r_mean = float(np.dot(reserved, w)) if len(dt) else None
    u_mean = float(np.dot(used, w)) if len(dt) else None
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


def variant_row(name: str, assignments: list[tuple[str, Any]], res) -> dict:
    """One row of the comparison from a :class:`~simulator.run.RunResult`."""
    s = res.summary
    setup = res.setup
    bpt = setup.model.kv_bytes_per_token(setup.kv_cache_dtype, setup.tensor_parallel_size)
    own = kv_step_metrics(res.steps, setup.block_size, bpt)
    kv = {k: (s[k] if s.get(k) is not None else own[k]) for k in own}
    frag = _f(kv["mean_kv_fragmentation"])
    pad = _f(kv["padding_waste"])
    row: dict[str, Any] = {"variant": name}
    for k, v in assignments:
        row[k] = v
    scheds = [getattr(rep, "sched", None) for rep in getattr(res.sim, "replicas", [])]
    prefill_pad = sum(int(getattr(sc, "num_prefill_padding_tokens", 0) or 0) for sc in scheds)
    row.update({
        "num_requests": s.get("num_requests"),
        "num_completed": s.get("num_completed"),
        "num_rejected": s.get("num_rejected"),
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
        "kv_reserved_gb_mean": None if _f(kv["kv_reserved_bytes_mean"]) is None
        else kv["kv_reserved_bytes_mean"] / 1e9,
        "kv_used_gb_mean": None if _f(kv["kv_used_bytes_mean"]) is None
        else kv["kv_used_bytes_mean"] / 1e9,
        "kv_wasted_gb_mean": None if _f(kv["kv_wasted_bytes_mean"]) is None
        else kv["kv_wasted_bytes_mean"] / 1e9,
        "padding_waste_pct": None if pad is None else 100.0 * pad,
        "prefill_padding_tokens": prefill_pad,
        "num_preemptions": s.get("num_preemptions"),
        "cost_per_1m_tokens_usd": _f(s.get("cost_per_1m_tokens_usd")),
        "cost_per_1m_output_tokens_usd": _f(s.get("cost_per_1m_output_tokens_usd")),
        "duration_s": _f(s.get("duration_s")),
        "num_steps": s.get("num_steps"),
        "num_gpu_blocks": setup.num_gpu_blocks,
        "kv_bytes_per_token_per_gpu": bpt,
        "sim_wall_s": _f(s.get("sim_wall_s")),
    })
    return row


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------
@dataclass
class Variant:
    """One variant of a comparison and its run."""

    name: str
    assignments: list[tuple[str, Any]]
    result: Any  # simulator.run.RunResult
    workload_key: str = ""


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


def run_compare(scenario_path: str | Path, vary: list[str] | None = None, *,
                overrides: list[str] | None = None, trace: str | None = None,
                outdir: str | Path | None = None, write: bool = True, figures: bool = True,
                run_figures: bool | None = None,
                progress: Callable[[str, int, int], None] | None = None,
                sim_progress: Callable[[str, int, int], Any] | None = None) -> CompareResult:
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
        ``progress(variant_name, index, total)`` before each variant runs.
    sim_progress : callable, optional
        ``sim_progress(variant_name, index, total)`` returns a context manager yielding the
        ``progress(done, total)`` callback of that variant's simulation (e.g.
        :func:`simulator.progress.progress`), or None.

    Returns
    -------
    CompareResult

    Raises
    ------
    ScenarioError
        On a bad ``--vary``/``--set`` item or a variant that is not a valid scenario (every
        variant is validated before any runs).
    """
    from .run import run_scenario
    from .workload import load_workload

    varies = [parse_vary(v) for v in (vary if vary else DEFAULT_VARY)]
    combos = expand_variants(varies)
    names = variant_names(combos)
    base_over = list(overrides or []) + trace_overrides(trace)
    loaded = []
    spelled = {k: f"--vary {k}={','.join(_spell(x) for x in vals)}" for k, vals in varies}
    for name, combo in zip(names, combos):
        over = base_over + [Override(_override(k, v), spelled[k]) for k, v in combo]
        try:
            sc, base = load_scenario(scenario_path, over)
        except ScenarioError as e:
            raise ScenarioError(f"variant {name}: {e}") from None
        loaded.append((name, combo, sc, base))
    base_name = loaded[0][2].name
    out = Path(outdir) if outdir is not None else Path("reports") / f"compare-{base_name}"

    workloads: dict[str, list[RequestSpec]] = {}
    variants: list[Variant] = []
    for i, (name, combo, sc, base) in enumerate(loaded):
        wkey = json.dumps([sc.workload.model_dump(mode="json"), sc.seed, str(base)],
                          sort_keys=True)
        if wkey not in workloads:
            workloads[wkey] = load_workload(sc.workload, sc.seed, base)
        specs = workloads[wkey]
        if progress is not None:
            progress(name, i, len(loaded))
        ctx = (sim_progress(name, i, len(loaded)) if sim_progress is not None
               else contextlib.nullcontext())
        with ctx as cb:
            res = run_scenario(sc, base, specs=specs, write=write, outdir=out / name,
                               figures=figures if run_figures is None else run_figures,
                               progress=cb)
        variants.append(Variant(name, combo, res, wkey))
    table = pd.DataFrame([variant_row(v.name, v.assignments, v.result) for v in variants])
    cr = CompareResult(base_name, varies, variants, table, same_requests=len(workloads) == 1,
                       num_workloads=len(workloads))
    if write:
        cr.outdir = out
        cr.files = write_compare(cr, out, figures=figures)
    return cr


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
def _figure():
    from matplotlib.figure import Figure
    fig = Figure(figsize=(7.5, 4.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig, path: Path) -> Path:
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    return path


def _cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(values[np.isfinite(values)])
    if v.size == 0:
        return v, v
    y = np.arange(1, v.size + 1) / v.size
    if v.size > _MAX_CDF_POINTS:
        idx = np.unique(np.linspace(0, v.size - 1, _MAX_CDF_POINTS).astype(np.int64))
        v, y = v[idx], y[idx]
    return v, y


def _binned(t: np.ndarray, dt: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step-time-weighted mean of ``v`` in up to ``_MAX_TIME_BINS`` time bins (raw if few)."""
    if t.size <= 2 * _MAX_TIME_BINS:
        return t, v
    edges = np.linspace(t.min(), t.max(), _MAX_TIME_BINS + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, _MAX_TIME_BINS - 1)
    w = np.where(dt > 0, dt, 1e-12)
    num = np.bincount(idx, weights=v * w, minlength=_MAX_TIME_BINS)
    den = np.bincount(idx, weights=w, minlength=_MAX_TIME_BINS)
    keep = den > 0
    mid = 0.5 * (edges[:-1] + edges[1:])
    return mid[keep], num[keep] / den[keep]


def _latency(req: pd.DataFrame, which: str) -> np.ndarray:
    arr = req["arrival_time_s"].to_numpy(dtype=float)
    if which == "ttft":
        return req["first_token_time_s"].to_numpy(dtype=float) - arr
    done = (req["status"] == "completed").to_numpy()
    return np.where(done, req["finish_time_s"].to_numpy(dtype=float) - arr, np.nan)


def write_compare_figures(cr: CompareResult, outdir: Path) -> dict[str, Path]:
    """Write the overlaid comparison figures; returns ``{figure name: path}``."""
    files: dict[str, Path] = {}
    for which, label in (("ttft", "TTFT"), ("e2e", "E2E latency")):
        fig, ax = _figure()
        for i, v in enumerate(cr.variants):
            x, y = _cdf(_latency(v.result.requests, which))
            if x.size:
                # line styles keep coinciding variants visible
                ax.step(x, y, where="post", label=v.name, ls=_STYLES[i % len(_STYLES)],
                        lw=1.6 if i % len(_STYLES) == 0 else 1.2)
        ax.set_xscale("log")
        ax.set_xlabel(f"{label} (s, log scale)")
        ax.set_ylabel("fraction of requests")
        ax.set_title(f"{label} CDF by variant")
        ax.legend(fontsize=8)
        files[f"{which}_cdf"] = _save(fig, outdir / FIGURE_FILES[f"{which}_cdf"])

    fig, ax = _figure()
    colors = [f"C{i % 10}" for i in range(len(cr.variants))]
    for v, c in zip(cr.variants, colors):
        st = v.result.steps
        if not len(st):
            continue
        setup = v.result.setup
        bpt = setup.model.kv_bytes_per_token(setup.kv_cache_dtype, setup.tensor_parallel_size)
        t = st["start_time_s"].to_numpy(dtype=float)
        dt = st["step_time_s"].to_numpy(dtype=float)
        res_gb = st["kv_blocks_used"].to_numpy(dtype=float) * setup.block_size * bpt / 1e9
        used_gb = st["kv_tokens_used"].to_numpy(dtype=float) * bpt / 1e9
        x, y = _binned(t, dt, res_gb)
        ax.plot(x, y, color=c, lw=1.2, label=f"{v.name} reserved")
        x, y = _binned(t, dt, used_gb)
        ax.plot(x, y, color=c, lw=1.0, ls="--", label=f"{v.name} used")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KV cache per GPU (GB)")
    ax.set_title("KV reserved (solid) vs used (dashed)")
    ax.legend(fontsize=7, ncol=2)
    files["kv_memory"] = _save(fig, outdir / FIGURE_FILES["kv_memory"])

    fig, ax = _figure()
    for i, (v, c) in enumerate(zip(cr.variants, colors)):
        st = v.result.steps
        if not len(st):
            continue
        x, y = _binned(st["start_time_s"].to_numpy(dtype=float),
                       st["step_time_s"].to_numpy(dtype=float),
                       st["batch_size"].to_numpy(dtype=float))
        ax.plot(x, y, color=c, lw=1.0, ls=_STYLES[i % len(_STYLES)], label=v.name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("batch size (sequences per step)")
    ax.set_title("Batch size over time")
    ax.legend(fontsize=8)
    files["batch_size"] = _save(fig, outdir / FIGURE_FILES["batch_size"])
    return files


# --------------------------------------------------------------------------------------------
# tables and report
# --------------------------------------------------------------------------------------------
def _cell(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    try:
        return fmt.format(v)
    except (TypeError, ValueError):
        return str(v)


def table_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells of the side-by-side table: one row per metric of
    :data:`TABLE_COLUMNS`, one column per variant."""
    recs = table.to_dict(orient="records")
    headers = ["metric"] + [str(r["variant"]) for r in recs]
    rows = []
    for c, h, f in TABLE_COLUMNS:
        rows.append([h] + [_cell(None if pd.isna(r.get(c)) else r.get(c), f) for r in recs])
    return headers, rows


def markdown_table(table: pd.DataFrame) -> str:
    """The side-by-side table in GitHub Markdown (metrics as rows, variants as columns)."""
    headers, rows = table_rows(table)
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def print_compare_table(table: pd.DataFrame, console=None, *, title: str = "servesim compare"):
    """Print the side-by-side table with rich; returns the :class:`rich.table.Table`."""
    from rich.console import Console
    from rich.table import Table

    headers, rows = table_rows(table)
    t = Table(title=title, header_style="bold")
    for i, h in enumerate(headers):
        # variant names break after their '-' separators so narrow terminals keep them whole
        t.add_column(h if i == 0 else h.replace("-", "-\n"),
                     justify="left" if i == 0 else "right", no_wrap=i != 0)
    for r in rows:
        t.add_row(*r)
    (console or Console()).print(t)
    return t




def render_compare_markdown(cr: CompareResult, figures: dict[str, Path] | None = None) -> str:
    """The text of ``compare.md``."""
    first = cr.variants[0].result if cr.variants else None
    sc = first.scenario if first is not None else None
    lines = [f"# servesim compare: {cr.scenario_name}", ""]
    if sc is not None:
        w = sc.workload
        src = w.trace if w.trace else "synthetic"
        n_req = len(first.requests)
        lines += [
            (f"Model `{sc.model}` on `{sc.hardware.gpu}` "
            f"({sc.cluster.num_replicas} replica(s) x TP {sc.cluster.tensor_parallel_size}); "
            f"workload `{src}`: {n_req:,} requests; seed {sc.seed}."), ""]
    lines.append("Varied: " + "; ".join(
        f"`{k}` in {{{', '.join(_fmt_value(v) for v in vals)}}}" for k, vals in cr.varies) + ".")
    lines.append("")
    if cr.same_requests:
        lines.append("Every variant replayed the same request list (same ids, arrival times "
                     "and lengths).")
    else:
        lines.append(f"The varied keys change the workload: {cr.num_workloads} distinct "
                     "request lists were replayed (rows are not on identical requests).")
    lines += ["", markdown_table(cr.table), "", _ROWS_NOTE, ""]
    if any(_fmt_value(v) == "static" for var in cr.variants for _k, v in var.assignments):
        lines += [("Static batching reserves each slot's full length (`max_model_len`, or "
                  "prompt + declared `max_tokens`) at batch formation whatever "
                  "`kv_cache.allocation` says, so its paged and contiguous rows coincide; "
                  "prompts are padded to the batch's longest (prefill padding tokens are in "
                  "`compare.csv`)."), ""]
    if figures:
        lines += ["## Figures", ""]
        for key, title in (("ttft_cdf", "TTFT CDF"), ("e2e_cdf", "E2E latency CDF"),
                           ("kv_memory", "KV used vs reserved"),
                           ("batch_size", "Batch size over time")):
            if key in figures:
                lines.append(f"![{title}]({Path(figures[key]).name})")
                lines.append("")
    lines += ["## Runs", ""]
    for v in cr.variants:
        a = ", ".join(f"`{k}={_fmt_value(x)}`" for k, x in v.assignments) or "(base)"
        lines.append(f"- [{v.name}]({v.name}/report.md): {a}")
    lines.append("")
    return "\n".join(lines)


def write_compare(cr: CompareResult, outdir: str | Path, *, figures: bool = True) -> dict:
    """Write ``compare.md``, ``compare.csv``, ``compare.json`` (and figures) to ``outdir``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    figs = write_compare_figures(cr, out) if figures else {}
    cr.table.to_csv(out / CSV_FILE, index=False, float_format="%.6g")
    doc = {
        "scenario": cr.scenario_name,
        "varied": {k: vals for k, vals in cr.varies},
        "same_requests": cr.same_requests,
        "variants": [
            {"name": v.name, "settings": {k: x for k, x in v.assignments},
             "run_dir": v.name, "metrics": row}
            for v, row in zip(cr.variants, cr.table.to_dict(orient="records"))],
    }
    (out / JSON_FILE).write_text(json.dumps(_json_safe(doc), indent=2) + "\n")
    (out / REPORT_FILE).write_text(render_compare_markdown(cr, figs), encoding="utf-8")
    files = {"markdown": out / REPORT_FILE, "csv": out / CSV_FILE, "json": out / JSON_FILE}
    files.update(figs)
    return files


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def cmd_compare(args) -> int:
    """``servesim compare``: run the variants, print the table, write the report."""
    from rich.console import Console

    from .progress import progress

    console = Console(stderr=False)

    def prog(name, i, n):
        if not args.quiet:
            print(f"servesim: compare: [{i + 1}/{n}] running {name} ...", file=sys.stderr,
                  flush=True)

    def sim_prog(name, i, n):
        return progress(f"[{i + 1}/{n}] {name}: simulating requests", enabled=not args.quiet,
                        force=args.progress)

    overrides = list(args.set or [])
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    cr = run_compare(args.scenario, args.vary, overrides=overrides, trace=args.trace,
                     outdir=args.output, figures=not args.no_figures, progress=prog,
                     sim_progress=sim_prog)
    if not args.quiet:
        print_compare_table(cr.table, console, title=f"servesim compare: {cr.scenario_name}")
        console.print(f"outputs: {cr.outdir}/ ({REPORT_FILE}, {CSV_FILE}, {JSON_FILE}, "
                      "one folder per variant)")
    return 0


def register(subparsers) -> None:
    """Add the ``compare`` subcommand to ``servesim``'s subparsers."""
    p = subparsers.add_parser(
        "compare", help="run variants of a scenario on the same requests, side by side",
        description="Run every combination of the --vary lists on the same requests and "
                    "write OUTDIR/compare.md (+ .csv, .json, figures) and one run folder per "
                    "variant. Without --vary: " + " and ".join(DEFAULT_VARY) + ".")
    p.add_argument("scenario", help="scenario YAML (path, or a name under scenarios/)")
    p.add_argument("--vary", action="append", metavar="KEY.PATH=V1,V2,...",
                   help="a scenario field and the values to try (repeatable; the variants "
                        "are the cartesian product)")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field in every variant (repeatable)")
    p.add_argument("--trace", help="replay this trace file instead of the scenario's workload")
    p.add_argument("--seed", type=int, help="override the scenario seed")
    p.add_argument("-o", "--output", help="output folder (default reports/compare-<name>)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--progress", action="store_true",
                   help="always show progress (plain lines every 10%% when not a terminal)")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_compare)
