"""Acceptance economics: where speculative decoding pays, by workload slice and by load.

Speculation trades target compute for fewer sequential steps. At low load a decode step is
memory-bound: verifying ``k + 1`` tokens per sequence costs about one plain decode step,
so every accepted draft is nearly free latency (Leviathan et al. 2023, Thm 3.8, with the
draft's cost ``c``). As the load grows, batches grow, the verification pass turns
compute-bound and costs up to ``k + 1`` plain steps, and the drafting cost grows with the
batch too: beyond a *crossover* load, speculation stops paying, first for the slice that
accepts least.

This module runs a scenario with and without its ``speculative`` block on the same
requests and reports the net effect:

- :func:`compare_with_baseline`: one load; TPOT, TTFT p99, E2E, throughput and cost per 1M
  tokens, overall and per slice, plus the ``speculative`` counter block;
- :func:`sweep_rates`: the same over an arrival-rate sweep (``workload.rate_scale``) as a
  tidy table; :func:`find_crossover` locates where a speedup falls below 1;
- :func:`write_economics_report`: ``acceptance_economics.md`` (tables and the numbers
  explained) and ``acceptance_economics.png``;
- :func:`register`: the ``servesim spec-sweep`` subcommand.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..metrics.speculative import configured_alpha
from ..metrics.summary import finite_float

__all__ = [
    "DEFAULT_RATES",
    "compare_with_baseline",
    "crossovers",
    "explain_sweep",
    "find_crossover",
    "net_effect",
    "plot_economics",
    "register",
    "render_economics_markdown",
    "run_spec_sweep",
    "speculative_report_section",
    "sweep_rates",
    "write_economics_report",
]

#: Default arrival-rate multipliers of ``servesim spec-sweep``.
DEFAULT_RATES: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Speedup metrics of the sweep table: (column, label).
SPEEDUP_METRICS: tuple[tuple[str, str], ...] = (
    ("tpot_speedup", "TPOT p50 speedup"),
    ("throughput_gain", "output throughput gain"),
    ("e2e_speedup", "E2E p50 speedup"),
)
ALL = "all"
#: A gain counts as a loss below ``1 - CROSSOVER_TOLERANCE`` (1%).
CROSSOVER_TOLERANCE = 0.01
#: Why the two "acceptance" figures of a report differ (one sentence, used in both reports).
ALPHA_VS_DRAFT_RATE = (
    "Two different acceptance figures: the configured per-token acceptance α is the i.i.d. "
    "model's probability that a draft token is accepted given that the drafts before it "
    "were; the draft acceptance rate (accepted / proposed, vLLM's metric) is lower because "
    "after the first rejection the step's remaining drafts are discarded yet still count as "
    "proposed (for i.i.d. acceptance it is (α - α^(k+1)) / ((1 - α) k), e.g. 0.292 for "
    "α = 0.5, k = 3).")


# --------------------------------------------------------------------------------------------
# scenarios and single comparisons
# --------------------------------------------------------------------------------------------
def _baseline_scenario(scenario):
    return scenario.model_copy(update={"speculative": None,
                                       "name": f"{scenario.name}_no_spec"})


def _at_rate(scenario, rate: float):
    wl = scenario.workload.model_copy(update={"rate_scale": scenario.workload.rate_scale * rate})
    return scenario.model_copy(update={"workload": wl})


def _ratio(num, den) -> float | None:
    if num is None or den is None:
        return None
    num, den = float(num), float(den)
    if den == 0.0 or not math.isfinite(num) or not math.isfinite(den):
        return None
    return num / den


def _stat(s: dict, key: str, q: str):
    return (s.get(key) or {}).get(q)


def net_effect(spec: dict, base: dict) -> dict[str, Any]:
    """Net effect of speculation: the two runs' figures side by side.

    Parameters
    ----------
    spec, base : dict
        Summaries (:func:`simulator.metrics.summary.summarize`) of the run with and without
        speculation on the same requests.

    Returns
    -------
    dict
        ``overall`` and ``by_slice`` entries, each ``{metric: {"spec", "base", "ratio"}}``
        where ``ratio`` is the *gain* (``base / spec`` for latencies and costs, ``spec /
        base`` for throughputs; > 1 means speculation helps). Metrics: ``tpot_p50_s``,
        ``tpot_mean_s``, ``ttft_p99_s``, ``e2e_p50_s``, ``itl_p50_s`` (overall only),
        ``output_token_throughput_tps``, ``request_throughput_rps`` (overall only),
        ``cost_per_1m_tokens_usd`` and ``cost_per_1m_output_tokens_usd`` (overall only).
    """
    def lat(s, key, q):
        return _stat(s, key, q)

    def entry(sv, bv, higher_is_better: bool):
        return {"spec": sv, "base": bv,
                "ratio": _ratio(sv, bv) if higher_is_better else _ratio(bv, sv)}

    def group(s, b, overall: bool):
        out = {
            "tpot_p50_s": entry(lat(s, "tpot_s", "p50"), lat(b, "tpot_s", "p50"), False),
            "tpot_mean_s": entry(lat(s, "tpot_s", "mean"), lat(b, "tpot_s", "mean"), False),
            "ttft_p99_s": entry(lat(s, "ttft_s", "p99"), lat(b, "ttft_s", "p99"), False),
            "e2e_p50_s": entry(lat(s, "e2e_latency_s", "p50"), lat(b, "e2e_latency_s", "p50"),
                               False),
            "output_token_throughput_tps": entry(s.get("output_token_throughput_tps"),
                                                 b.get("output_token_throughput_tps"), True),
        }
        if overall:
            out["itl_p50_s"] = entry(lat(s, "itl_s", "p50"), lat(b, "itl_s", "p50"), False)
            out["request_throughput_rps"] = entry(s.get("request_throughput_rps"),
                                                  b.get("request_throughput_rps"), True)
            for key in ("cost_per_1m_tokens_usd", "cost_per_1m_output_tokens_usd"):
                out[key] = entry(s.get(key), b.get(key), False)
        return out

    by_slice = {}
    for name in sorted(set(spec.get("by_slice", {})) & set(base.get("by_slice", {}))):
        by_slice[name] = group(spec["by_slice"][name], base["by_slice"][name], False)
    return {"overall": group(spec, base, True), "by_slice": by_slice}


def _run_one(scenario, base_dir, specs=None) -> dict:
    """Simulate one scenario without writing; its summary with the speculative block."""
    from ..metrics.speculative import speculative_summary
    from ..run import run_scenario

    res = run_scenario(scenario, base_dir, specs=specs, write=False, figures=False)
    summary = dict(res.summary)
    if scenario.speculative is not None and not summary.get("speculative"):
        summary["speculative"] = speculative_summary(res.sim)
    if specs:
        last = max(s.arrival_time_s for s in specs)
        first = min(s.arrival_time_s for s in specs)
        summary["arrival_rate_rps"] = (len(specs) / (last - first)) if last > first else None
    return summary


def compare_with_baseline(scenario, base_dir: Path | None = None, specs=None) -> dict[str, Any]:
    """Run ``scenario`` with and without speculation on the same requests.

    Parameters
    ----------
    scenario : Scenario
        With a ``speculative`` block.
    base_dir : pathlib.Path, optional
        Folder relative paths of the scenario resolve against.
    specs : list of RequestSpec, optional
        The requests (default: the scenario's workload).

    Returns
    -------
    dict
        ``speculative`` and ``baseline`` (run summaries; the first carries
        ``summary["speculative"]``) and ``net`` (:func:`net_effect`).

    Raises
    ------
    ValueError
        If the scenario has no ``speculative`` block.
    """
    if scenario.speculative is None:
        raise ValueError("the scenario has no speculative: block to compare against")
    if specs is None:
        from ..workload import load_workload
        specs = load_workload(scenario.workload, scenario.seed, base_dir)
    spec = _run_one(scenario, base_dir, specs)
    base = _run_one(_baseline_scenario(scenario), base_dir, specs)
    return {"speculative": spec, "baseline": base, "net": net_effect(spec, base)}


# --------------------------------------------------------------------------------------------
# rate sweep
# --------------------------------------------------------------------------------------------
def _sweep_task(args) -> tuple[float, bool, dict]:
    scenario, base_dir, rate, with_spec = args
    from ..workload import load_workload
    sc = _at_rate(scenario, rate)
    if not with_spec:
        sc = _baseline_scenario(sc)
    specs = load_workload(sc.workload, sc.seed, base_dir)
    return rate, with_spec, _run_one(sc, base_dir, specs)


def _rows_for_rate(rate: float, spec: dict, base: dict, k: int) -> list[dict[str, Any]]:
    rows = []
    sp = spec.get("speculative") or {}
    groups = [(ALL, spec, base, sp)] + [
        (name, spec["by_slice"][name], base["by_slice"][name], sp.get("by_slice", {}).get(name, {}))
        for name in sorted(set(spec.get("by_slice", {})) & set(base.get("by_slice", {})))]
    for name, s, b, sps in groups:
        row = {
            "rate_scale": rate, "slice": name,
            "arrival_rate_rps": base.get("arrival_rate_rps"),
            "num_requests": s.get("num_requests"),
            "mean_batch_size_base": base.get("mean_batch_size"),
            "mean_batch_size_spec": spec.get("mean_batch_size"),
            "mean_num_waiting_base": base.get("mean_num_waiting"),
            "mean_num_waiting_spec": spec.get("mean_num_waiting"),
            "tpot_p50_base_s": _stat(b, "tpot_s", "p50"),
            "tpot_p50_spec_s": _stat(s, "tpot_s", "p50"),
            "e2e_p50_base_s": _stat(b, "e2e_latency_s", "p50"),
            "e2e_p50_spec_s": _stat(s, "e2e_latency_s", "p50"),
            "ttft_p99_base_s": _stat(b, "ttft_s", "p99"),
            "ttft_p99_spec_s": _stat(s, "ttft_s", "p99"),
            "throughput_base_tps": b.get("output_token_throughput_tps"),
            "throughput_spec_tps": s.get("output_token_throughput_tps"),
            "cost_per_1m_tokens_base_usd": base.get("cost_per_1m_tokens_usd"),
            "cost_per_1m_tokens_spec_usd": spec.get("cost_per_1m_tokens_usd"),
            "mean_acceptance_length": sps.get("mean_acceptance_length"),
            "expected_tokens_per_step": sps.get("expected_tokens_per_step"),
            "draft_acceptance_rate": sps.get("acceptance_rate"),
            "configured_acceptance_alpha": sps.get("configured_acceptance_alpha"),
            "draft_time_share": sps.get("draft_time_share"),
            "draft_cost_ratio_batch1": sp.get("draft_cost_ratio_batch1"),
            "num_speculative_tokens": k,
        }
        row["tpot_speedup"] = _ratio(row["tpot_p50_base_s"], row["tpot_p50_spec_s"])
        row["e2e_speedup"] = _ratio(row["e2e_p50_base_s"], row["e2e_p50_spec_s"])
        row["ttft_p99_gain"] = _ratio(row["ttft_p99_base_s"], row["ttft_p99_spec_s"])
        row["throughput_gain"] = _ratio(row["throughput_spec_tps"], row["throughput_base_tps"])
        row["cost_ratio"] = _ratio(row["cost_per_1m_tokens_spec_usd"],
                                   row["cost_per_1m_tokens_base_usd"])
        rows.append(row)
    if rows and sp:
        expected = [r["expected_tokens_per_step"] for r in rows[1:]
                    if r["expected_tokens_per_step"] is not None]
        if expected and rows[0]["expected_tokens_per_step"] is None:
            # overall closed form: drafts-weighted mean of the slices' expectations
            w = [sp["by_slice"][r["slice"]]["num_drafts"] for r in rows[1:]]
            if sum(w):
                rows[0]["expected_tokens_per_step"] = float(np.dot(w, expected) / sum(w))
    return rows


def sweep_rates(scenario, base_dir: Path | None = None,
                rates: Sequence[float] = DEFAULT_RATES, *, jobs: int = 1,
                progress=None) -> tuple[pd.DataFrame, dict]:
    """Run the scenario with and without speculation at each arrival-rate multiplier.

    Parameters
    ----------
    scenario : Scenario
        With a ``speculative`` block.
    base_dir : pathlib.Path, optional
        Folder relative paths of the scenario resolve against.
    rates : sequence of float
        Multipliers of the scenario's ``workload.rate_scale`` (each > 0).
    jobs : int, default 1
        Worker processes (runs are independent and deterministic, so results do not depend
        on it).
    progress : callable, optional
        ``progress(done, total)`` after each run.

    Returns
    -------
    (pandas.DataFrame, dict)
        The tidy table (one row per rate and slice, slice ``"all"`` for the whole run; see
        :func:`_rows_for_rate` for columns: latencies in seconds, throughputs in tokens/s,
        costs in USD per 1M tokens, and the gains ``tpot_speedup``, ``e2e_speedup``,
        ``ttft_p99_gain``, ``throughput_gain`` (> 1: speculation helps) and ``cost_ratio``
        (< 1: cheaper)), and ``{rate: {"speculative": summary, "baseline": summary}}``.

    Raises
    ------
    ValueError
        If the scenario has no ``speculative`` block or a rate is not positive.
    """
    if scenario.speculative is None:
        raise ValueError("the scenario has no speculative: block to sweep")
    rates = [float(r) for r in rates]
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError(f"rates must be positive numbers, got {rates}")
    tasks = [(scenario, base_dir, r, w) for r in rates for w in (True, False)]
    results: dict[float, dict] = {r: {} for r in rates}
    done = 0
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            for rate, w, summ in ex.map(_sweep_task, tasks):
                results[rate]["speculative" if w else "baseline"] = summ
                done += 1
                if progress:
                    progress(done, len(tasks))
    else:
        for t in tasks:
            rate, w, summ = _sweep_task(t)
            results[rate]["speculative" if w else "baseline"] = summ
            done += 1
            if progress:
                progress(done, len(tasks))
    rows = []
    k = scenario.speculative.num_speculative_tokens
    for r in rates:
        rows += _rows_for_rate(r, results[r]["speculative"], results[r]["baseline"], k)
    df = pd.DataFrame(rows).sort_values(["slice", "rate_scale"], kind="stable")
    return df.reset_index(drop=True), results


def find_crossover(rates: Iterable[float], gains: Iterable[float | None],
                   tolerance: float = CROSSOVER_TOLERANCE) -> dict[str, Any]:
    """Where a gain first falls below ``1 - tolerance`` as the load grows.

    The crossover is interpolated linearly in ``log(rate)`` between the last rate with a
    gain >= ``1 - tolerance`` and the first with a gain below it. The tolerance keeps
    run-to-run noise (a throughput ratio of 0.999 below saturation) from reading as a loss.

    Parameters
    ----------
    rates : iterable of float
        Rate multipliers (any order; sorted here).
    gains : iterable of float or None
        Gain at each rate (> 1: speculation helps); None values are skipped.
    tolerance : float, default :data:`CROSSOVER_TOLERANCE`
        Fraction below 1 a gain must fall to count as a loss (>= 0).

    Returns
    -------
    dict
        ``status``: ``"crossover"`` (``rate`` holds the interpolated multiplier),
        ``"never_pays"`` (below the level already at the lowest rate), ``"always_pays"``
        (never below it in the swept range) or ``"no_data"``; ``rate``: float or None;
        ``level``: ``1 - tolerance``.
    """
    level = 1.0 - float(tolerance)
    pts = sorted((float(r), float(g)) for r, g in zip(rates, gains)
                 if g is not None and math.isfinite(float(g)))
    if not pts:
        return {"status": "no_data", "rate": None, "level": level}
    if pts[0][1] < level:
        return {"status": "never_pays", "rate": None, "level": level}
    for (r0, g0), (r1, g1) in itertools.pairwise(pts):
        if g1 < level <= g0:
            f = (g0 - level) / (g0 - g1)
            return {"status": "crossover", "level": level,
                    "rate": float(math.exp(math.log(r0) + f * (math.log(r1) - math.log(r0))))}
    return {"status": "always_pays", "rate": None, "level": level}


def crossovers(df: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`find_crossover` for every slice and speedup metric of a sweep table.

    Parameters
    ----------
    df : pandas.DataFrame
        From :func:`sweep_rates`.

    Returns
    -------
    dict
        ``{slice: {metric: find_crossover(...) plus "arrival_rate_rps"}}``.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, g in df.groupby("slice", sort=False):
        out[name] = {}
        rps_per_rate = _rps_per_rate(g)
        for col, _ in SPEEDUP_METRICS:
            c = find_crossover(g["rate_scale"], g[col])
            c["arrival_rate_rps"] = (c["rate"] * rps_per_rate
                                     if c["rate"] is not None and rps_per_rate else None)
            out[name][col] = c
    return out


def _rps_per_rate(g: pd.DataFrame) -> float | None:
    v = g["arrival_rate_rps"].astype(float) / g["rate_scale"].astype(float)
    v = v[np.isfinite(v)]
    return float(v.median()) if len(v) else None


# --------------------------------------------------------------------------------------------
# figure
# --------------------------------------------------------------------------------------------
def plot_economics(df: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """PNG: TPOT p50 speedup, output throughput gain and E2E p50 speedup vs arrival rate.

    One line per slice (and ``all``); a dashed line at 1 (no gain).

    Parameters
    ----------
    df : pandas.DataFrame
        From :func:`sweep_rates`.
    path : str or pathlib.Path
        Output file (parent folders are created).
    title : str, optional
        Figure title.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(13.0, 4.0))
    FigureCanvasAgg(fig)
    names = [ALL] + sorted(n for n in df["slice"].unique() if n != ALL)
    for i, (col, label) in enumerate(SPEEDUP_METRICS):
        ax = fig.add_subplot(1, 3, i + 1)
        for name in names:
            g = df[df["slice"] == name].sort_values("rate_scale")
            y = g[col].astype(float)
            ax.plot(g["rate_scale"], y, marker="o", markersize=4, label=name,
                    linewidth=2.2 if name == ALL else 1.4,
                    color="black" if name == ALL else None)
        ax.axhline(1.0, color="0.4", linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        rates = sorted(df["rate_scale"].unique())
        ax.set_xticks(rates)
        ax.set_xticklabels([f"{r:g}" for r in rates])
        ax.minorticks_off()
        ax.set_xlabel("arrival rate multiplier (workload.rate_scale)")
        ax.set_ylabel(f"{label} (x)")
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
        if i == 0:
            ax.legend(fontsize=8, title="slice", title_fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=100, metadata={"Software": None})
    return out


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
def _f(x, fmt: str = "{:.2f}", na: str = "n/a") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return na
    return fmt.format(float(x))


def _ms(x) -> str:
    return _f(None if x is None else float(x) * 1e3, "{:.2f}")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _crossover_text(c: dict) -> str:
    if c["status"] == "crossover":
        rps = c.get("arrival_rate_rps")
        return f"x{c['rate']:.2f}" + (f" (~{rps:.1f} req/s)" if rps else "")
    return {"never_pays": "below 1 at every rate", "always_pays": "not reached (pays throughout)",
            "no_data": "n/a"}[c["status"]]


def _verify_rows(summary: dict) -> list[list[str]]:
    rows = []
    for b in (summary.get("speculative") or {}).get("verification_cost_by_batch", []):
        rows.append([f"{b['batch_min']}-{b['batch_max']}", str(b["num_steps"]),
                     _ms(b["mean_plain_decode_time_s"]), _ms(b["mean_verify_time_s"]),
                     _f(b["verify_over_plain_decode"], "{:.2f}x"), _ms(b["mean_draft_time_s"]),
                     _f(b["draft_share"] and 100 * b["draft_share"], "{:.0f}%")])
    return rows


def _weighted_verify_ratio(summary: dict) -> tuple[float, float] | None:
    """(verification, drafting) time over plain decode time, over pure-decode drafting steps."""
    bins = (summary.get("speculative") or {}).get("verification_cost_by_batch", [])
    v = sum(b["mean_verify_time_s"] * b["num_steps"] for b in bins)
    p = sum(b["mean_plain_decode_time_s"] * b["num_steps"] for b in bins)
    d = sum(b["mean_draft_time_s"] * b["num_steps"] for b in bins)
    if not p:
        return None
    return v / p, d / p


#: Relative margin beyond which a measured gain counts as above the batch-1 bound, and within
#: which the per-step estimate "tracks" a measured speedup.
BOUND_TOLERANCE = 0.02
#: Busy-time mean of waiting requests from which a run counts as queueing.
QUEUE_MIN = 1.0
#: Gain metrics named in the best/worst sentence: (column, label).
_EXPLAINED_METRICS: tuple[tuple[str, str], ...] = (
    ("tpot_speedup", "TPOT p50 speedup"),
    ("e2e_speedup", "E2E p50 speedup"),
    ("ttft_p99_gain", "TTFT p99 gain"),
    ("throughput_gain", "output throughput gain"),
)


def _series(df: pd.DataFrame, name: str, col: str) -> pd.Series:
    """``col`` of slice ``name`` indexed by rate (finite values only, sorted by rate)."""
    if col not in df.columns:
        return pd.Series(dtype=float)
    g = df[df["slice"] == name]
    sr = pd.Series(pd.to_numeric(g[col], errors="coerce").to_numpy(dtype=float),
                   index=g["rate_scale"].astype(float).to_numpy()).sort_index()
    return sr[np.isfinite(sr)]


def _val(df: pd.DataFrame, name: str, rate: float, col: str) -> float | None:
    sr = _series(df, name, col)
    return finite_float(sr.get(rate)) if rate in sr.index else None


def _x(v, fmt: str = "{:.2f}x") -> str:
    return _f(v, fmt)


def _rate_list(rs: Sequence[float]) -> str:
    rs = [f"x{r:g}" for r in rs]
    return rs[0] if len(rs) == 1 else ", ".join(rs[:-1]) + " and " + rs[-1]


def _change(g: float | None, tol: float, better: str = "improves",
            worse: str = "worsens") -> str:
    """``"improves 1.65x"`` / ``"worsens (0.92x)"`` / ``"is unchanged (1.00x)"``."""
    if g is None:
        return "is not measured"
    if g > 1.0 + tol:
        return f"{better} {g:.2f}x"
    if g < 1.0 - tol:
        return f"{worse} ({g:.2f}x)"
    return f"is unchanged ({g:.2f}x)"


def _batch1_cost_ratio(df: pd.DataFrame) -> float | None:
    """``c`` at batch 1 of the lowest rate (what the tokens-per-step table uses)."""
    sr = _series(df, ALL, "draft_cost_ratio_batch1")
    return float(sr.iloc[0]) if len(sr) else None


def _batch1_bound(df: pd.DataFrame, name: str, k: int) -> tuple[float | None, float | None]:
    """(E[tokens/step], E / (1 + k c)) of a slice; Nones where unknown."""
    e = _series(df, name, "expected_tokens_per_step")
    c = _batch1_cost_ratio(df)
    ev = float(e.iloc[0]) if len(e) else None
    return ev, (ev / (1.0 + k * c) if (ev is not None and c is not None) else None)


def explain_sweep(df: pd.DataFrame, k: int, *,
                  verify: dict[float, tuple[float, float] | None] | None = None,
                  draft_prefill_share: dict[float, float] | None = None,
                  step_counts: dict[float, tuple[int, int]] | None = None,
                  tolerance: float = CROSSOVER_TOLERANCE) -> list[str]:
    """The "Reading the numbers" bullets, every claim derived from the sweep's own numbers.

    Parameters
    ----------
    df : pandas.DataFrame
        From :func:`sweep_rates` (or a table with the same columns; missing columns and
        None values drop the sentences that need them).
    k : int
        Draft tokens per step.
    verify : dict, optional
        ``{rate: (verify / plain, draft / plain)}`` of pure-decode drafting steps
        (:func:`_weighted_verify_ratio`); without it the per-step cost clauses are left out.
    draft_prefill_share : dict, optional
        ``{rate: draft prefill time / busy time}`` of the speculative run.
    step_counts : dict, optional
        ``{rate: (pure-decode drafting steps, all steps)}`` of the speculative run.
    tolerance : float
        A gain within ``1 +- tolerance`` reads as unchanged.

    Returns
    -------
    list of str
        Markdown bullets (``"- ..."``).
    """
    verify = verify or {}
    draft_prefill_share = draft_prefill_share or {}
    tol = float(tolerance)
    rates = sorted(float(r) for r in df["rate_scale"].unique())
    if not rates:
        return ["- No data: the sweep table is empty."]
    slices = sorted(n for n in df["slice"].unique() if n != ALL)
    lo, hi = rates[0], rates[-1]

    def v(col, rate, name=ALL):
        return _val(df, name, rate, col)

    def vr(rate):
        x = verify.get(rate)
        return (None, None) if not x else (finite_float(x[0]), finite_float(x[1]))

    def queueing(rate):
        wb, ws = v("mean_num_waiting_base", rate), v("mean_num_waiting_spec", rate)
        return wb, ws

    out: list[str] = []

    # ---- 1. where each gain is best and worst
    parts = []
    for col, label in _EXPLAINED_METRICS:
        sr = _series(df, ALL, col)
        if sr.empty:
            continue
        if len(sr) == 1:
            parts.append(f"{label} {_x(sr.iloc[0])} at x{sr.index[0]:g}")
            continue
        parts.append(f"{label} best at x{sr.idxmax():g} ({_x(sr.max())}), worst at "
                     f"x{sr.idxmin():g} ({_x(sr.min())})")
    if parts:
        out.append("- Over the swept rates (whole run): " + "; ".join(parts) + ".")

    # ---- 2. lowest load: per-step economics
    bb, bs = v("mean_batch_size_base", lo), v("mean_batch_size_spec", lo)
    vl, dl = vr(lo)
    s = (f"- At the lowest load (x{lo:g}) the mean batch is {_f(bb, '{:.1f}')} without "
         f"speculation and {_f(bs, '{:.1f}')} with it")
    if vl is not None:
        s += (f"; verifying {k + 1} tokens per sequence costs {vl:.2f}x a plain decode step"
              + (" (the step is memory-bound, so the extra tokens are nearly free)"
                 if vl < 1.1 else " (already more than a plain step: compute starts to bind)")
              + (f" and drafting adds {dl:.2f}x" if dl is not None else ""))
    s += "."
    order = sorted(slices, key=lambda n: -(v("tpot_speedup", lo, n) or 0.0))
    with_tokens = [n for n in order if v("mean_acceptance_length", lo, n) is not None]
    if with_tokens:
        s += (" Each speculating sequence emits "
              + " and ".join(f"{v('mean_acceptance_length', lo, n):.2f} tokens per step for "
                             f"`{n}`" for n in with_tokens) + ";")
    tl = v("tpot_speedup", lo)
    s += f" TPOT p50 {_change(tl, tol)} overall"
    if order:
        s += " (" + ", ".join(f"{_x(v('tpot_speedup', lo, n))} for `{n}`" for n in order) + ")"
    s += "."
    out.append(s)

    # ---- 3. highest load: verification turns expensive; per-step estimate vs measured
    if hi != lo:
        bb, bs = v("mean_batch_size_base", hi), v("mean_batch_size_spec", hi)
        vh, dh = vr(hi)
        s = (f"- At the highest load (x{hi:g}) the mean batch is {_f(bb, '{:.0f}')} without "
             f"speculation and {_f(bs, '{:.0f}')} with it")
        if vh is not None:
            s += (f"; verifying costs {vh:.2f}x a plain step"
                  + (f" (the pass over {k + 1} tokens per sequence has become compute-bound)"
                     if vh > 1.1 else " (still close to one plain step)")
                  + (f" and drafting {dh:.2f}x" if dh is not None else ""))
        s += f". TPOT p50 {_change(v('tpot_speedup', hi), tol)} overall"
        if slices:
            s += " (" + ", ".join(f"{_x(v('tpot_speedup', hi, n))} for `{n}`"
                                  for n in slices) + ")"
        s += "."
        if vh is not None and dh is not None and (vh + dh) > 0:
            est = {n: (v("mean_acceptance_length", hi, n) or 0.0) / (vh + dh)
                   for n in slices if v("mean_acceptance_length", hi, n)}
            meas = {n: v("tpot_speedup", hi, n) for n in est}
            pairs = [(n, est[n], meas[n]) for n in est if meas[n] is not None]
            if pairs:
                s += (" The per-step estimate E[tokens/step] / (verify/plain + draft/plain) "
                      "is " + ", ".join(f"{e:.2f}x for `{n}`" for n, e, _ in pairs) + "; ")
                rel = [m / e - 1.0 for _, e, m in pairs]
                if all(abs(r) <= 0.1 for r in rel):
                    s += "the measured speedups track it (within 10%)."
                elif all(r < 0 for r in rel):
                    n_pure, n_all = (step_counts or {}).get(hi, (None, None))
                    s += ("the measured speedups fall below it. The estimate covers "
                          "pure-decode steps only"
                          + (f" ({n_pure:,} of the {n_all:,} steps of the speculative run at x{hi:g})"
                             if n_pure is not None and n_all else "")
                          + "; the steps that also carry prompt chunks (which the draft "
                          "prefills too) are outside it.")
                elif all(r > 0 for r in rel):
                    s += ("the measured speedups exceed it: the estimate compares steps of "
                          "equal batch, while the speculative run's batch is "
                          + ("smaller, so its steps are cheaper." if (bs is not None and bb
                                                                      is not None and bs < bb)
                             else "not smaller; the excess is outside the per-step model."))
                else:
                    s += "the measured speedups fall on both sides of it."
        out.append(s)

    # ---- 4. the batch-1 bound vs the measured gains
    c1 = _batch1_cost_ratio(df)
    names = slices or [ALL]
    items, above = [], []
    for n in names:
        e, bound = _batch1_bound(df, n, k)
        sr = _series(df, n, "tpot_speedup")
        if bound is None or sr.empty:
            continue
        r_best, g_best = float(sr.idxmax()), float(sr.max())
        txt = f"`{n}` up to {g_best:.2f}x (x{r_best:g}) against a bound of {bound:.2f}x"
        if g_best > bound * (1 + BOUND_TOLERANCE):
            above.append((n, r_best))
            if e is not None and g_best > e * 1.005:
                txt += f", above even its {e:.2f} tokens per step"
        items.append(txt)
    if items:
        s = ("- The closed form E[tokens/step] / (1 + k c)"
             + (f" (c = {c1:.3f})" if c1 is not None else "")
             + " is a batch-1 bound (Leviathan et al. 2023): it prices verification at one "
             "plain step and compares runs of the same batch. Measured TPOT p50 speedup: "
             + "; ".join(items) + ".")
        if above:
            # the reason, checked on the data at each rate where a slice beats its bound
            rs = sorted({r for _, r in above})
            smaller = [r for r in rs if (v("mean_batch_size_spec", r) is not None
                                         and v("mean_batch_size_base", r) is not None
                                         and v("mean_batch_size_spec", r)
                                         < 0.9 * v("mean_batch_size_base", r))]
            if smaller:
                s += (" " + ("It is" if len(above) == 1 else "They are") + " above the bound "
                      "because the two runs do not keep the same batch: at "
                      + ", ".join(f"x{r:g} speculation holds "
                                  f"{v('mean_batch_size_spec', r):.1f} sequences per step "
                                  f"against {v('mean_batch_size_base', r):.1f} without it"
                                  for r in smaller)
                      + ". Requests finish in fewer steps, so fewer are in flight at once, "
                      "and the baseline's larger batch makes each of its steps slower: the "
                      "measured gain multiplies tokens per step by cheaper steps.")
            others = [r for r in rs if r not in smaller]
            if others:
                s += (" At " + _rate_list(others) + " the speculative batch is not "
                      "smaller, so the excess there is not a batch-size effect (TPOT p50 is a "
                      "percentile over requests, and the two runs' request mixes per step "
                      "differ).")
        else:
            vmax = [(r, vr(r)[0]) for r in rates if vr(r)[0] is not None]
            s += (" No slice exceeds its bound: the gap is the verification and drafting "
                  "cost under batching"
                  + (f" (verify/plain up to {max(x for _, x in vmax):.2f}x)" if vmax else "")
                  + ".")
        out.append(s)

    # ---- 5. queueing compounds into E2E
    qr = [(r, *queueing(r)) for r in rates]
    qr = [(r, wb, ws) for r, wb, ws in qr if wb is not None and ws is not None
          and max(wb, ws) >= QUEUE_MIN]
    if qr:
        r, wb, ws = max(qr, key=lambda t: max(t[1], t[2]))
        e2e, tp = v("e2e_speedup", r), v("tpot_speedup", r)
        if ws < 0.9 * wb:
            s = (f"- Queueing: at x{r:g} requests wait (mean queue {wb:.0f} without "
                 f"speculation, {ws:.0f} with it): speculation drains the queue faster")
            if e2e is not None and tp is not None and e2e > tp * (1 + tol):
                s += (f", so E2E p50 gains more than TPOT p50 there ({e2e:.2f}x against "
                      f"{tp:.2f}x): less waiting adds to the faster decoding.")
            else:
                s += f" (E2E p50 {_change(e2e, tol)}, TPOT p50 {_x(tp)})."
        elif ws > 1.1 * wb:
            s = (f"- Queueing: at x{r:g} the speculative run queues more ({ws:.0f} waiting "
                 f"against {wb:.0f} without speculation): it saturates first; E2E p50 "
                 f"{_change(e2e, tol)} and TPOT p50 {_change(tp, tol)} there.")
        else:
            s = (f"- Queueing: at x{r:g} both runs queue about equally ({wb:.0f} and {ws:.0f} "
                 "waiting).")
        out.append(s)
    else:
        out.append("- Queueing: neither run builds a queue at any swept rate (mean waiting "
                   f"< {QUEUE_MIN:g}), so the E2E gains come from decoding alone.")

    # ---- 6. slices share every step
    if len(slices) >= 2:
        by_e = sorted(slices, key=lambda n: _batch1_bound(df, n, k)[0] or 0.0)
        low = by_e[0]
        e_low = _batch1_bound(df, low, k)[0]
        cross = crossovers(df)
        s = ("- All slices share every step, and a step costs the same whoever is in the "
             f"batch: the slice that accepts least (`{low}`"
             + (f", E[tokens/step] = {e_low:.3f}" if e_low is not None else "")
             + ") pays the same drafting and verification price for fewer tokens.")
        crossed = sorted((cross[n]["tpot_speedup"]["rate"], n) for n in slices
                          if cross.get(n, {}).get("tpot_speedup", {}).get("status")
                          == "crossover")
        never = [n for n in slices
                 if cross.get(n, {}).get("tpot_speedup", {}).get("status") == "never_pays"]
        if crossed:
            s += (" TPOT crossover: " + ", ".join(f"`{n}` at x{r:.2f}" for r, n in crossed)
                  + (f"; `{crossed[0][1]}` crosses first." if len(crossed) > 1 else "."))
        if never:
            s += " " + ", ".join(f"`{n}`" for n in never) + " never pays in the swept range."
        if not crossed and not never:
            g_hi = {n: v("tpot_speedup", hi, n) for n in slices}
            g_hi = {n: g for n, g in g_hi.items() if g is not None}
            if g_hi:
                closest = min(g_hi, key=g_hi.get)
                s += (f" No slice's TPOT speedup falls below 1 in the swept range; "
                      f"`{closest}` comes closest (x{hi:g}: {g_hi[closest]:.2f}x).")
        s += (" A per-slice crossover is where that slice alone would stop paying, not a "
              "routing decision (every request in the batch speculates with the same k).")
        out.append(s)

    # ---- 7. throughput and cost
    tg = _series(df, ALL, "throughput_gain")
    if not tg.empty:
        flat = [float(r) for r, g in tg.items() if abs(g - 1.0) <= tol]
        dev = tg[(tg - 1.0).abs() > tol]
        if dev.empty:
            s = (f"- Output throughput: the gain stays within {tol:.0%} of 1 at every rate, "
                 "so both runs serve the offered load; speculation changes latency, not the "
                 "tokens served.")
        else:
            r = float((dev - 1.0).abs().idxmax())
            g = float(tg[r])
            wb, ws = queueing(r)
            mal = v("mean_acceptance_length", r)
            vv, dd = vr(r)
            over = wb is not None and ws is not None and max(wb, ws) >= QUEUE_MIN
            s = "- Output throughput: " + (
                f"at {_rate_list(flat)} the gain stays within {tol:.0%} of 1 (the offered "
                "load is served either way); " if flat else "")
            if g > 1.0:
                s += (f"at x{r:g} speculation serves more output tokens per second than the "
                      f"baseline ({g:.2f}x)")
            else:
                s += (f"at x{r:g} speculation serves fewer output tokens per second than the "
                      f"baseline ({g:.2f}x)")
            if over:
                s += (f", with both runs past saturation (mean queue {wb:.0f} without, "
                      f"{ws:.0f} with speculation)")
            if vv is not None and dd is not None and mal is not None and (vv + dd) > 0:
                per = mal / (vv + dd)
                s += (f": a speculative step costs {vv:.2f}x + {dd:.2f}x a plain decode step "
                      f"and emits {mal:.2f} tokens per sequence, {per:.2f}x the tokens per "
                      "unit of decode time")
            if g > 1.0:
                s += (", so the speculative replica saturates at a higher rate"
                      + (" and its queue grows more slowly." if over and ws < wb else "."))
            else:
                s += (", so the speculative replica saturates at a lower rate"
                      + (" and its queue grows faster." if over and ws > wb else "."))
        cr = v("cost_ratio", hi)
        if cr is not None:
            s += (f" Cost per 1M tokens follows GPU-hours per token: at x{hi:g} speculation "
                  f"costs {cr:.3f}x the baseline's"
                  + (" (cheaper)." if cr < 1 - tol else " (dearer)." if cr > 1 + tol
                     else " (the same within 1%)."))
        out.append(s)

    # ---- 8. TTFT
    tt = _series(df, ALL, "ttft_p99_gain")
    if not tt.empty:
        g_lo = finite_float(tt.get(lo))
        s = f"- TTFT p99 {_change(g_lo, tol)} with speculation at the lowest load (x{lo:g})"
        if g_lo is not None and g_lo < 1 - tol:
            share = draft_prefill_share.get(lo)
            s += (": a step that carries a prompt chunk also drafts and verifies for the "
                  "running decodes, so it is longer"
                  + (f", and the draft prefills every prompt too ({share:.1%} of busy time)"
                     if share else ""))
        s += "."
        if len(tt) > 1:
            rw, gw = float(tt.idxmin()), float(tt.min())
            rb, gb = float(tt.idxmax()), float(tt.max())
            if gw < 1 - tol and rw != lo:
                wb, ws = queueing(rw)
                s += f" It is worst at x{rw:g} ({gw:.2f}x)"
                if wb is not None and ws is not None and ws >= QUEUE_MIN and ws > 1.1 * wb:
                    s += (f", where the speculative run queues more ({ws:.0f} waiting against "
                          f"{wb:.0f})")
                s += "."
            if gb > 1 + tol and rb != lo:
                wb, ws = queueing(rb)
                s += f" It is best at x{rb:g} ({gb:.2f}x)"
                if wb is not None and ws is not None and wb >= QUEUE_MIN and wb > 1.1 * ws:
                    s += (f", where the baseline queues more ({wb:.0f} waiting against "
                          f"{ws:.0f} with speculation): less time in the queue outweighs "
                          "the longer prefill steps")
                s += "."
        tp = _series(df, ALL, "tpot_speedup")
        trade = [r for r in tt.index if tt[r] < 1 - tol and tp.get(r, 0) > 1 + tol]
        both = [r for r in tt.index if tt[r] > 1 + tol and tp.get(r, 0) > 1 + tol]
        if trade:
            s += (f" At {_rate_list(trade)} speculation buys inter-token latency with "
                  "first-token latency")
            s += (f"; at {_rate_list(both)} it improves both." if both else ".")
        elif both:
            s += f" At {_rate_list(both)} it improves both TTFT p99 and TPOT p50."
        out.append(s)

    # ---- 9. closed form vs simulated tokens per step
    devs = []
    for n in names:
        e = _series(df, n, "expected_tokens_per_step")
        m = _series(df, n, "mean_acceptance_length")
        common = e.index.intersection(m.index)
        if len(common):
            devs.append((n, float(((m[common] - e[common]).abs() / e[common]).max())))
    if devs:
        worst_n, worst_d = max(devs, key=lambda t: t[1])
        if worst_d <= 0.02:
            out.append(f"- The simulated tokens per step match the closed form within "
                       f"{max(worst_d, 0.001):.1%} at every rate and slice (the engine "
                       "draws accepted lengths from the configured model).")
        else:
            out.append(f"- The simulated tokens per step differ from the closed form by up to "
                       f"{worst_d:.1%} (`{worst_n}`): output-length caps truncate the last "
                       "step of a request, and short runs add sampling noise.")
    return out


def render_economics_markdown(df: pd.DataFrame, results: dict, scenario, *,
                              figure: str | None = "acceptance_economics.png",
                              source: str = "") -> str:
    """The "acceptance economics" report section (Markdown).

    Parameters
    ----------
    df : pandas.DataFrame
        From :func:`sweep_rates`.
    results : dict
        ``{rate: {"speculative": summary, "baseline": summary}}`` from :func:`sweep_rates`.
    scenario : Scenario
        The swept scenario (with its ``speculative`` block).
    figure : str or None
        File name of the PNG to embed.
    source : str
        The workload source shown in the header (e.g. the trace path).

    Returns
    -------
    str
        Markdown text.
    """
    sp = scenario.speculative
    k = sp.num_speculative_tokens
    rates = sorted(results)
    names = [ALL] + sorted(n for n in df["slice"].unique() if n != ALL)
    slices = names[1:]
    lo, hi = rates[0], rates[-1]
    cross = crossovers(df)
    L: list[str] = ["# Acceptance economics", ""]
    draft = sp.draft_model if sp.method == "draft_model" else sp.method
    acc = "; ".join(f"{n}: {sp.acceptance_model(n)!r}" for n in slices) or repr(
        sp.acceptance_model(None))
    L += [f"Scenario `{scenario.name}`: target `{scenario.model}` on "
          f"{scenario.cluster.num_replicas} x TP{scenario.cluster.tensor_parallel_size} "
          f"`{scenario.hardware.gpu}`, speculative method `{sp.method}` (draft `{draft}`), "
          f"k = {k} draft tokens per step"
          + (f", draft cost ratio override c = {sp.draft_cost_ratio}"
             if sp.draft_cost_ratio is not None else "")
          + f". Acceptance models: {acc}. Workload: {source or 'the scenario workload'}, "
          f"arrival rate swept by `workload.rate_scale` in "
          f"{', '.join(f'{r:g}' for r in rates)}. Each rate is simulated twice on identical "
          "requests: with speculation, and without it (baseline; it gets the KV memory the "
          "draft would take).", ""]
    if figure:
        L += [f"![speedup vs load]({figure})", ""]

    # ---- headline table
    L += ["## Speedup vs load", "",
          ("Gains are baseline / speculative for latencies (TPOT p50, E2E p50, TTFT p99) and "
          "speculative / baseline for output throughput; > 1 means speculation helps. Batch and "
          "waiting are busy-time means of running and queued requests (a growing queue means "
          "the replica is overloaded at that rate). Cost is per 1M tokens (input + output)."),
          ""]
    hdr = ["rate x", "req/s", "batch base / spec", "waiting base / spec",
           "TPOT p50 base / spec (ms)",
           "TPOT speedup"] + [f"TPOT speedup {n}" for n in slices] + [
        "E2E p50 speedup", "TTFT p99 gain", "throughput gain", "$ per 1M tok base / spec"]
    rows = []
    for r in rates:
        g = df[df["rate_scale"] == r].set_index("slice")
        a = g.loc[ALL]
        rows.append([f"{r:g}", _f(a["arrival_rate_rps"], "{:.1f}"),
                     (f"{_f(a['mean_batch_size_base'], '{:.1f}')} / "
                     f"{_f(a['mean_batch_size_spec'], '{:.1f}')}"),
                     (f"{_f(a['mean_num_waiting_base'], '{:.1f}')} / "
                     f"{_f(a['mean_num_waiting_spec'], '{:.1f}')}"),
                     f"{_ms(a['tpot_p50_base_s'])} / {_ms(a['tpot_p50_spec_s'])}",
                     _f(a["tpot_speedup"], "{:.2f}x")]
                    + [_f(g.loc[n, "tpot_speedup"], "{:.2f}x") if n in g.index else "n/a"
                       for n in slices]
                    + [_f(a["e2e_speedup"], "{:.2f}x"), _f(a["ttft_p99_gain"], "{:.2f}x"),
                       _f(a["throughput_gain"], "{:.2f}x"),
                       (f"{_f(a['cost_per_1m_tokens_base_usd'], '${:.4f}')} / "
                       f"{_f(a['cost_per_1m_tokens_spec_usd'], '${:.4f}')}")])
    L += _table(hdr, rows) + [""]

    # ---- crossover
    L += ["## Crossover load", "",
          (f"The arrival-rate multiplier beyond which the gain drops below "
          f"{1 - CROSSOVER_TOLERANCE:g} (a 1% tolerance keeps run-to-run noise from reading as "
          "a loss; interpolated in log rate between the swept points)."), ""]
    rows = [[n] + [_crossover_text(cross[n][col]) for col, _ in SPEEDUP_METRICS] for n in names
            if n in cross]
    L += _table(["slice"] + [lab for _, lab in SPEEDUP_METRICS], rows) + [""]

    # ---- acceptance: closed form vs simulated
    L += ["## Tokens per step: closed form vs simulated", "",
          ("Closed form: the acceptance model's E[tokens per step] = 1 + E[accepted drafts] "
          "(for i.i.d. acceptance with configured per-token acceptance α: "
          "(1 - α^(k+1)) / (1 - α), Leviathan et al. 2023, Eq. 1). "
          "Simulated: vLLM's mean acceptance length, 1 + accepted / drafts, from the engine's "
          "counters (pooled over all rates). The batch-1 speedup bound is "
          "E[tokens] / (1 + k c) (Thm 3.8) with the draft cost ratio c measured on the "
          "performance model at batch 1."), ""]
    c1 = _batch1_cost_ratio(df)
    if c1 is None:
        c1 = (results[lo]["speculative"].get("speculative") or {}).get(
            "draft_cost_ratio_batch1")
    rows = []
    for n in slices:
        drafts = acc_t = 0
        hist = None
        exp = exp_rate = None
        for r in rates:
            b = (results[r]["speculative"].get("speculative") or {}).get("by_slice", {}).get(n)
            if not b:
                continue
            drafts += b["num_drafts"]
            acc_t += b["num_accepted_tokens"]
            h = np.asarray(b["accepted_length_hist"])
            hist = h if hist is None else hist + h
            exp, exp_rate = b["expected_tokens_per_step"], b["expected_acceptance_rate"]
        if not drafts:
            continue
        ks = np.arange(len(hist))
        mean = float((ks * hist).sum() / hist.sum())
        se = math.sqrt(float(((ks - mean) ** 2 * hist).sum() / hist.sum()) / hist.sum())
        bound = exp / (1 + k * c1) if (exp is not None and c1 is not None) else None
        alpha = configured_alpha(sp.acceptance_model(n))
        rows.append([n, f"{drafts:,}", _f(alpha, "{:.3f}", na="n/a (not i.i.d.)"),
                     _f(exp, "{:.3f}"), f"{1 + acc_t / drafts:.3f} ± {se:.3f}",
                     _f(exp_rate, "{:.3f}"), f"{acc_t / (drafts * sp.num_verified_tokens):.3f}",
                     _f(bound, "{:.2f}x")])
    L += _table(["slice", "drafts", "configured per-token acceptance α",
                 "E[tokens/step] closed form", "simulated (± 1 s.e.)",
                 "draft acceptance rate (accepted / proposed, vLLM): closed form", "simulated",
                 "batch-1 bound"], rows) + [""]
    L += [ALPHA_VS_DRAFT_RATE, ""]
    if c1 is not None:
        L += [(f"Draft cost ratio at batch 1: c = {c1:.3f} (one draft pass / one plain target "
              "decode step)."), ""]

    # ---- where the time goes, per rate
    L += ["## Where the step time goes", "",
          ("Per rate, from the speculative run: drafting share of busy step time (drafting + "
          "draft prefill), and the verification pass (step time minus drafting) and drafting "
          "relative to the target's plain decode step of the same batch and context, averaged "
          "over pure-decode drafting steps. The per-step estimate of the TPOT gain is "
          "E[tokens/step] / (verify/plain + draft/plain): what speculation earns per unit of "
          "plain decode time at that batch size."), ""]
    rows = []
    for r in rates:
        s = results[r]["speculative"]
        spb = s.get("speculative") or {}
        vr = _weighted_verify_ratio(s)
        v, d = vr if vr else (None, None)
        ests = []
        for n in slices:
            e = (spb.get("by_slice", {}).get(n) or {}).get("mean_acceptance_length")
            ests.append(_f(e / (v + d), "{:.2f}x") if (e and v is not None and d is not None)
                        else "n/a")
        busy = spb.get("busy_time_s")
        rows.append([f"{r:g}", _f(spb.get("mean_spec_batch_size"), "{:.1f}"),
                     _f(spb.get("draft_time_share") and 100 * spb["draft_time_share"],
                        "{:.0f}%"),
                     _f(busy and 100 * spb["draft_prefill_time_s"] / busy, "{:.1f}%"),
                     _f(v, "{:.2f}x"), _f(d, "{:.2f}x")] + ests)
    L += _table(["rate x", "mean speculating batch", "draft share", "of which draft prefill",
                 "verify / plain", "draft / plain"] + [f"est. gain {n}" for n in slices],
                rows) + [""]
    top = results[hi]["speculative"]
    vrows = _verify_rows(top)
    if vrows:
        L += [f"Verification cost growth with batch size (speculative run at rate x{hi:g}):",
              ""]
        L += _table(["batch", "steps", "plain decode (ms)", "verify k+1 (ms)", "verify / plain",
                     "drafting (ms)", "draft share"], vrows) + [""]

    # ---- explanation
    verify = {r: _weighted_verify_ratio(results[r]["speculative"]) for r in rates}
    prefill_share, counts = {}, {}
    for r in rates:
        spb = results[r]["speculative"].get("speculative") or {}
        busy = spb.get("busy_time_s")
        if busy:
            prefill_share[r] = float(spb.get("draft_prefill_time_s") or 0.0) / busy
        bins = spb.get("verification_cost_by_batch") or []
        if spb.get("num_steps"):
            counts[r] = (int(sum(b["num_steps"] for b in bins)), int(spb["num_steps"]))
    L += ["## Reading the numbers", ""]
    L += explain_sweep(df, k, verify=verify, draft_prefill_share=prefill_share,
                       step_counts=counts)
    L += ["", ("Assumptions: see `simulator/speculative/scheduler.py` (draft cost per method, "
          "draft prefill, KV rollback) and README.md, section \"Speculative decoding and "
          "acceptance economics\"."), ""]
    return "\n".join(L)


def speculative_report_section(spec: dict | None) -> str:
    """A run report's "Speculative decoding" section from ``summary["speculative"]``.

    Parameters
    ----------
    spec : dict or None
        The block :func:`simulator.speculative.metrics.speculative_summary` returns.

    Returns
    -------
    str
        Markdown (empty when ``spec`` is empty or None).
    """
    if not spec:
        return ""
    draft = spec.get("draft_model") or spec.get("method")
    L = ["## Speculative decoding", "",
         (f"Method `{spec.get('method')}` (draft `{draft}`), k = "
         f"{spec.get('num_speculative_tokens')} ({spec.get('num_verified_tokens')} draft "
         f"tokens verified per step). Drafting took "
         f"{_f(spec.get('draft_time_share') and 100 * spec['draft_time_share'], '{:.1f}%')} of "
         f"busy time (draft prefill included); draft cost ratio at batch 1 c = "
         f"{_f(spec.get('draft_cost_ratio_batch1'), '{:.3f}')}."), ""]
    rows = []
    blocks = [("all", spec)] + sorted((spec.get("by_slice") or {}).items())
    for name, b in blocks:
        share = b.get("drafting_share_of_spec_steps" if b is spec else "draft_time_share")
        alpha = (None if b is spec else b.get("configured_acceptance_alpha"))
        alpha_txt = ("per slice" if b is spec else
                     _f(alpha, "{:.3f}", na="n/a (not i.i.d.)") if "configured_acceptance_alpha"
                     in b else "n/a")
        rows.append([name, f"{b.get('num_drafts', 0):,}", alpha_txt,
                     _f(b.get("acceptance_rate"), "{:.3f}"),
                     _f(b.get("mean_acceptance_length"), "{:.3f}"),
                     _f(b.get("expected_tokens_per_step"), "{:.3f}"),
                     _f(b.get("accepted_tokens_per_draft"), "{:.3f}"),
                     _f(share and 100 * share, "{:.1f}%")])
    L += _table(["slice", "drafts", "configured per-token acceptance α",
                 "draft acceptance rate (accepted / proposed, vLLM)", "mean acceptance length",
                 "closed form", "accepted / draft", "drafting share of its steps"], rows)
    L += ["", ("Mean acceptance length = 1 + accepted / drafts (bonus token included); closed "
          "form = E[tokens per step] of the slice's acceptance model. " + ALPHA_VS_DRAFT_RATE),
          ""]
    return "\n".join(L)


def write_economics_report(outdir: str | Path, df: pd.DataFrame, results: dict, scenario, *,
                           source: str = "", figures: bool = True) -> Path:
    """Write ``acceptance_economics.md`` (+ ``.png``, ``.csv`` and ``spec_sweep.json``).

    Parameters
    ----------
    outdir : str or pathlib.Path
        Output folder (created).
    df, results
        From :func:`sweep_rates`.
    scenario : Scenario
        The swept scenario.
    source : str
        Workload source shown in the report.
    figures : bool
        Write the PNG.

    Returns
    -------
    pathlib.Path
        The Markdown file.
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    fig = None
    if figures:
        plot_economics(df, out / "acceptance_economics.png",
                       title=f"{scenario.name}: speculation gain vs load "
                             f"(k={scenario.speculative.num_speculative_tokens})")
        fig = "acceptance_economics.png"
    df.to_csv(out / "acceptance_economics.csv", index=False, float_format="%.6g")
    payload = {"scenario": json.loads(scenario.model_dump_json()),
               "crossovers": crossovers(df),
               "runs": {f"{r:g}": v for r, v in sorted(results.items())}}
    (out / "spec_sweep.json").write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    md = out / "acceptance_economics.md"
    md.write_text(render_economics_markdown(df, results, scenario, figure=fig, source=source))
    return md


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def _parse_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--rates: expected comma-separated numbers, got {text!r}") from None
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError(f"--rates: every rate must be a positive number, got {text!r}")
    return sorted(set(rates))


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``servesim spec-sweep`` to an argparse ``subparsers`` object.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The new parser (``func`` = :func:`run_spec_sweep`).
    """
    p = subparsers.add_parser(
        "spec-sweep",
        help="speculative decoding vs none over an arrival-rate sweep (acceptance economics)",
        description="Run a scenario with and without its speculative: block at several "
                    "arrival rates (workload.rate_scale multipliers) and write "
                    "acceptance_economics.md/.png: speedup vs load per slice and the "
                    "crossover load beyond which speculation stops paying.")
    p.add_argument("scenario", help="scenario YAML with a speculative: block")
    p.add_argument("--rates", default=",".join(f"{r:g}" for r in DEFAULT_RATES),
                   help="comma-separated rate multipliers (default: %(default)s)")
    p.add_argument("--trace", help="replay this trace file instead of the scenario's workload")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE",
                   help="override a scenario field (repeatable)")
    p.add_argument("--seed", type=int, help="override the scenario seed")
    p.add_argument("-o", "--output", help="output folder (default: reports/{name}_spec_sweep)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=run_spec_sweep)
    return p


def run_spec_sweep(args: argparse.Namespace) -> int:
    """Run ``servesim spec-sweep`` for parsed arguments.

    Parameters
    ----------
    args : argparse.Namespace
        See :func:`register`.

    Returns
    -------
    int
        Exit code 0.

    Raises
    ------
    ValueError
        Bad rates, a scenario without ``speculative:`` or any scenario error.
    """
    from rich.console import Console
    from rich.table import Table

    from ..config import cli_overrides, load_scenario

    rates = _parse_rates(args.rates)
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    scenario, base = load_scenario(args.scenario, cli_overrides(args.set, args.trace, args.seed))
    if scenario.speculative is None:
        raise ValueError(f"{args.scenario}: no speculative: block (nothing to sweep)")
    console = Console(stderr=False, quiet=args.quiet)

    def progress(done, total):
        if not args.quiet:
            console.print(f"  run {done}/{total} done", highlight=False)

    df, results = sweep_rates(scenario, base, rates, jobs=args.jobs, progress=progress)
    outdir = Path(args.output) if args.output else Path(f"reports/{scenario.name}_spec_sweep")
    source = scenario.workload.trace or "synthetic workload"
    md = write_economics_report(outdir, df, results, scenario, source=str(source),
                                figures=not args.no_figures)
    if not args.quiet:
        names = [ALL] + sorted(n for n in df["slice"].unique() if n != ALL)
        t = Table(title=f"{scenario.name}: TPOT p50 speedup with speculation, by slice")
        t.add_column("rate x", justify="right")
        t.add_column("req/s", justify="right")
        for n in names:
            t.add_column(n, justify="right")
        for r in rates:
            g = df[df["rate_scale"] == r].set_index("slice")
            t.add_row(f"{r:g}", _f(g.loc[ALL, "arrival_rate_rps"], "{:.1f}"),
                      *[_f(g.loc[n, "tpot_speedup"], "{:.2f}x") if n in g.index else "n/a"
                        for n in names])
        console.print(t)
        cross = crossovers(df)
        for n in names:
            console.print(f"crossover (TPOT) {n}: {_crossover_text(cross[n]['tpot_speedup'])}",
                          highlight=False)
        console.print(f"wrote {md}")
    return 0
