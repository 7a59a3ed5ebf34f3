"""Fidelity check: the simulator against a real engine on this device (``servesim validate``).

1. Calibrate: measure the tables of the tiny Llama model on this device (the ``calibrate``
   harness, quick grid) unless ``--profile DIR`` names a calibrated folder. The timed passes
   bracket the real runs (half before, half after; the tables pool both), so that tables and
   runs see the same machine: on a shared CPU the speed drifts by 10-20% over minutes.
2. Workload: the first ``num_requests`` requests of ``traces/default_conv_1k.csv`` with prompt
   lengths divided by ``prompt_scale`` and output lengths by ``output_scale`` (so that a CPU
   can serve them), and arrival times stretched so that the simulated replica is busy about
   ``load`` of the time (bisection on the time scale, using the simulator itself).
3. Real runs: :class:`calibration.engine.RealEngine` serves the workload in real time, twice
   (identical inputs), after an untimed warm-up run.
4. Simulation: ``simulator.runs.scenario.run_scenario`` on the same requests, same scheduler limits,
   ``perf.source: table`` and ``hardware.gpu`` = the profile folder; the tiny model reaches the
   simulator as a ``config.json`` written to the output folder.
5. Comparison: per step, the simulator's step time for each *real* step's shape versus its
   measured wall time (isolates the step-time model); per request, TTFT, TPOT and E2E
   percentiles of the simulation versus the real run; the same statistics between the two real
   runs show the device's own run-to-run spread.

Percentiles (p50 / p90 / p99, and the medians of error distributions) follow the run
summary's one definition, the inverse of the empirical CDF
(:func:`simulator.metrics.summary.weighted_percentiles`), so a "TTFT p90" here means what it
means in every other servesim report.

Outputs (``-o OUTDIR``): ``validation.json``, ``report.md``, ``report.html`` (self-contained,
:mod:`simulator.report.render`), ``real_steps_run{1,2}.csv``,
``real_requests_run{1,2}.csv``, ``sim_requests.csv``, figures ``step_pred_vs_meas.png``,
``latency_cdfs.png``, ``request_scatter.png``.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.base.request import RequestSpec
from simulator.metrics.summary import weighted_percentiles
from simulator.report.figures import figure, save_png
from simulator.report.render import render, write_report

DEFAULT_TRACE = "default_conv_1k.csv"


@dataclass
class ValidateOptions:
    """Knobs of :func:`validate` (defaults: the README numbers)."""

    device: str = "cpu"
    out_dir: str | Path | None = None
    profile: str | Path | None = None
    num_requests: int = 80
    prompt_scale: float = 6.0
    output_scale: float = 4.0
    max_context: int = 1024
    load: float = 0.7
    threads: int = 1
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 256
    runs: int = 2
    quick_calibration: bool = True
    trace: str | None = None
    seed: int = 0


# ------------------------------------------------------------------------------ workload
def scaled_workload(opts: ValidateOptions) -> list[RequestSpec]:
    """First ``num_requests`` trace requests with lengths scaled down (arrivals unscaled)."""
    from simulator.base.resources import resolve_path
    from simulator.workload import read_trace
    path = resolve_path(opts.trace or DEFAULT_TRACE, "traces")
    reqs = read_trace(path)[: opts.num_requests]
    if not reqs:
        raise ValueError(f"trace {path} has no requests")
    t0 = reqs[0].arrival_time_s
    out = []
    for i, r in enumerate(reqs):
        p = int(np.clip(round(r.num_prompt_tokens / opts.prompt_scale), 4, opts.max_context - 2))
        o = int(np.clip(round(r.num_output_tokens / opts.output_scale), 2, opts.max_context - p))
        out.append(RequestSpec(i, r.arrival_time_s - t0, p, o))
    return out


def with_time_scale(specs: list[RequestSpec], f: float) -> list[RequestSpec]:
    return [RequestSpec(s.request_id, s.arrival_time_s * f, s.num_prompt_tokens,
                        s.num_output_tokens) for s in specs]


def build_scenario(opts: ValidateOptions, model_path: Path, profile: Path):
    """The simulated twin of the real engine (same limits, table perf model)."""
    from simulator.base.resources import resolve_path
    from simulator.scenario.config import validate_scenario
    raw = {
        "name": "validate",
        "model": str(model_path),
        "hardware": {"gpu": str(profile)},
        "cluster": {"num_replicas": 1, "tensor_parallel_size": 1},
        "scheduler": {"policy": "continuous", "queue_policy": "fcfs",
                      "max_num_seqs": opts.max_num_seqs,
                      "max_num_batched_tokens": opts.max_num_batched_tokens,
                      "enable_chunked_prefill": True, "max_model_len": 4096},
        "kv_cache": {"block_size": 16, "num_gpu_blocks": 200_000,
                     "enable_prefix_caching": False},
        "perf": {"source": "table", "weight_dtype": "bf16"},
        "cost": {"usd_per_gpu_hour": 0.0},  # a self-check compares latencies, not cost
        "workload": {"trace": str(resolve_path(opts.trace or DEFAULT_TRACE, "traces")),
                     "format": "vidur"},
        "seed": opts.seed,
    }
    return validate_scenario(raw, source="validate")


def simulate(scenario, specs):
    from simulator.runs.scenario import run_scenario
    return run_scenario(scenario, None, specs=specs, write=False, figures=False)


def busy_fraction(res) -> float:
    st = res.steps
    if st.empty:
        return 0.0
    span = float(st["end_time_s"].max() - res.requests["arrival_time_s"].min())
    return float(st["step_time_s"].sum()) / max(span, 1e-9)


def fit_time_scale(scenario, specs, load: float, log) -> float:
    """Time scale ``f`` of the arrivals whose simulated busy fraction is about ``load``."""
    lo, hi = 1e-3, 10.0
    b_hi = busy_fraction(simulate(scenario, with_time_scale(specs, hi)))
    while b_hi > load and hi < 1e4:
        hi *= 4
        b_hi = busy_fraction(simulate(scenario, with_time_scale(specs, hi)))
    for _ in range(12):
        mid = (lo * hi) ** 0.5
        b = busy_fraction(simulate(scenario, with_time_scale(specs, mid)))
        if b > load:
            lo = mid
        else:
            hi = mid
    f = (lo * hi) ** 0.5
    log(f"  arrivals x {f:.4g} -> simulated busy fraction "
        f"{busy_fraction(simulate(scenario, with_time_scale(specs, f))):.2f}")
    return f


# ------------------------------------------------------------------------------ metrics
def request_metrics(req: pd.DataFrame) -> pd.DataFrame:
    """TTFT, TPOT, E2E (s) per completed request, indexed by ``request_id``."""
    r = req[req["status"] == "completed"].set_index("request_id")
    ttft = r["first_token_time_s"] - r["arrival_time_s"]
    e2e = r["finish_time_s"] - r["arrival_time_s"]
    n = r["num_output_tokens"].astype(float)
    tpot = (r["finish_time_s"] - r["first_token_time_s"]) / (n - 1).where(n > 1)
    return pd.DataFrame({"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e})


def percentile(values, q: float) -> float:
    """The ``q``-th percentile of ``values`` by the run summary's definition (inverse
    empirical CDF: an observed value; NaN without values)."""
    return float(weighted_percentiles(np.asarray(values, dtype=float), None, q)[0])


def pct_err(pred: float, meas: float) -> float:
    return float((pred - meas) / meas * 100.0) if meas else float("nan")


def compare_requests(pred: pd.DataFrame, meas: pd.DataFrame) -> dict:
    """Percentile errors (signed %, predicted vs measured) and per-request abs % errors."""
    out = {}
    common = pred.index.intersection(meas.index)
    for m in ("ttft", "tpot", "e2e"):
        a = pred.loc[common, f"{m}_s"].dropna()
        b = meas.loc[common, f"{m}_s"].dropna()
        idx = a.index.intersection(b.index)
        for p in (50, 90, 99):
            out[f"{m}_p{p}_pct_error"] = pct_err(percentile(a, p), percentile(b, p))
        per = np.abs(a[idx] / b[idx] - 1.0) * 100.0
        out[f"{m}_request_median_abs_pct_error"] = percentile(per, 50)
        out[f"{m}_request_p90_abs_pct_error"] = percentile(per, 90)
    return out


def step_errors(perf, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, measured) seconds for every real step, predicted from its shape."""
    from .engine import steps_to_shapes
    shapes = steps_to_shapes(steps)
    pred = np.array([perf.step_time(s) for s in shapes])
    return pred, steps["step_time_s"].to_numpy(dtype=float)


def matched_step_spread(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """Steps with the same index and batch composition in two runs: |b/a - 1| in %."""
    n = min(len(a), len(b))
    same = (a["composition"].iloc[:n].to_numpy() == b["composition"].iloc[:n].to_numpy())
    if not same.any():
        return {"matched_steps": 0}
    e = np.abs(b["step_time_s"].iloc[:n][same].to_numpy()
               / a["step_time_s"].iloc[:n][same].to_numpy() - 1) * 100
    return {"matched_steps": int(same.sum()), "matched_fraction": float(same.mean()),
            "median_abs_pct": percentile(e, 50), "p90_abs_pct": percentile(e, 90)}


def composition_agreement(real: pd.DataFrame, sim: pd.DataFrame) -> float:
    """Fraction of step indices where the simulated and real batch have the same counts."""
    n = min(len(real), len(sim))
    if n == 0:
        return 0.0
    cols_r = real[["num_seqs", "num_prefill_tokens", "num_decode_seqs"]].iloc[:n].to_numpy()
    cols_s = sim[["batch_size", "num_prefill_tokens", "num_decode_seqs"]].iloc[:n].to_numpy()
    return float((cols_r == cols_s).all(axis=1).mean())


def speed_sentinel(device: str) -> float:
    """Seconds of a fixed small GEMM (median of 50): tracks the machine's speed over the run.

    On a shared machine the speed drifts (other tenants, clocks); ``validation.json`` records
    this figure at each phase so that a reader can tell model error from machine drift.
    """
    import torch

    from .timing import time_isolated
    g = torch.Generator(device="cpu").manual_seed(0)
    dt = torch.float32 if torch.device(device).type == "cpu" else torch.bfloat16
    a = torch.randn(64, 256, generator=g).to(device=device, dtype=dt)
    b = torch.randn(256, 768, generator=g).to(device=device, dtype=dt)
    return percentile(time_isolated(lambda: a @ b, device, warmup=5, repeats=50), 50)


# ------------------------------------------------------------------------------ main
def _setup_record(opts: ValidateOptions, device: str, profile: Path, perf, num_requests: int,
                  time_scale: float, sim_busy: float, threads: int | None,
                  sentinel: dict) -> dict:
    """What the check ran on: device, profile and its provenance, workload, scheduler, the
    speed sentinels and the machine drift (max / min sentinel - 1, percent)."""
    return {
        "device": device, "profile": str(profile), "perf_provenance": perf.provenance(),
        "cpu_overhead_fit_s": dict(zip(("a", "b_per_seq", "c_per_token"),
                                       perf.cpu_overhead_params or (None, None, None))),
        "workload": {"trace": opts.trace or DEFAULT_TRACE, "num_requests": num_requests,
                     "prompt_scale": opts.prompt_scale, "output_scale": opts.output_scale,
                     "arrival_time_scale": time_scale, "target_busy_fraction": opts.load,
                     "simulated_busy_fraction": sim_busy},
        "scheduler": {"max_num_seqs": opts.max_num_seqs,
                      "max_num_batched_tokens": opts.max_num_batched_tokens,
                      "enable_chunked_prefill": True},
        "threads": threads,
        "speed_sentinel_s": sentinel,
        "machine_drift_pct": float((max(sentinel.values()) / min(sentinel.values()) - 1) * 100),
    }


def _real_runs(eng, base, specs, opts: ValidateOptions, out: Path, sentinel: dict,
               log: Callable[[str], None]) -> list:
    """An untimed warm-up, then ``opts.runs`` real-time runs of ``specs`` (each written to
    ``real_{steps,requests}_run<i>.csv`` and followed by a speed sentinel)."""
    eng.run(with_time_scale(base[: max(4, len(base) // 4)], 0.0), realtime=False)
    runs = []
    for i in range(opts.runs):
        r = eng.run(specs, realtime=True)
        runs.append(r)
        r.steps.to_csv(out / f"real_steps_run{i + 1}.csv", index=False, float_format="%.9g")
        r.requests.to_csv(out / f"real_requests_run{i + 1}.csv", index=False,
                          float_format="%.9g")
        sentinel[f"after_run{i + 1}"] = speed_sentinel(opts.device)
        log(f"  run {i + 1}: {len(r.steps)} steps in {r.wall_s:.1f} s")
    return runs


def _first_tables(opts: ValidateOptions, torch, dev, out: Path, sentinel: dict,
                  log: Callable[[str], None]) -> tuple:
    """Step 1: the profile the check uses, ``opts.profile`` as given or one calibrated here
    (the first half of its timed passes; :func:`_second_tables` runs the rest after the real
    runs). Returns the profile folder and the harness (None for a given profile)."""
    from simulator.perf.tables.flat_profile import read_provenance

    from .harness import Harness
    if opts.profile:
        profile = Path(opts.profile)
        prov = read_provenance(profile)
        thr = prov.get("num_threads")
        if dev.type == "cpu" and thr and int(thr) != torch.get_num_threads():
            log(f"note: the profile was measured with {thr} threads; this run uses "
                f"{torch.get_num_threads()}")
        return profile, None
    profile = out / "profile"
    log("1/5 calibrating the tiny model on this device (first half of the passes)")
    harness = Harness("tiny", profile, device=opts.device, quick=opts.quick_calibration,
                      threads=opts.threads, max_num_seqs=opts.max_num_seqs,
                      max_num_batched_tokens=opts.max_num_batched_tokens,
                      max_context=opts.max_context, log=lambda s: log("  " + s))
    harness.measure(_first_half(harness))
    harness.measure_overhead()
    harness.write()
    sentinel["after_calibration_1"] = speed_sentinel(opts.device)
    return profile, harness


def _second_tables(harness, opts: ValidateOptions, profile: Path, sentinel: dict,
                   log: Callable[[str], None]):
    """The rest of the timed passes of a profile calibrated here; the table model reloaded
    from all of them."""
    from simulator.catalog.hardware import load_gpu_spec
    from simulator.perf.tables.flat_profile import load_table_perf_model

    from .tiny_model import TINY
    log("  calibration: second half of the passes")
    harness.measure(harness.grid.repeats - _first_half(harness))
    harness.measure_overhead()
    harness.write()
    sentinel["after_calibration_2"] = speed_sentinel(opts.device)
    return load_table_perf_model(TINY.model_spec(), load_gpu_spec(profile), 1, "bf16",
                                 "bf16", required=True)


def _first_half(harness) -> int:
    """Timed passes before the real runs: half of the grid's repeats, rounded up."""
    return (harness.grid.repeats + 1) // 2


def validate(opts: ValidateOptions, log: Callable[[str], None] = print) -> dict:
    """Run the whole check (see module docstring); returns the ``validation.json`` content."""
    import torch

    from simulator.catalog.hardware import load_gpu_spec
    from simulator.perf.tables.flat_profile import load_table_perf_model, read_provenance
    from simulator.scenario.config import SchedulerConfig
    from simulator.scheduling.limits import SchedulerLimits

    from .engine import RealEngine
    from .timing import tune_allocator
    from .tiny_model import TINY, TinyLlama
    t_begin = time.perf_counter()
    dev = torch.device(opts.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    out = Path(opts.out_dir or "reports/validate")
    out.mkdir(parents=True, exist_ok=True)
    if dev.type == "cpu":
        torch.set_num_threads(int(opts.threads))
    tune_allocator()
    model_path = TINY.write_config_json(out / "model")
    sentinel = {"start": speed_sentinel(opts.device)}
    # 1. tables (bracketing: half of the timed passes before the real runs, half after)
    profile, harness = _first_tables(opts, torch, dev, out, sentinel, log)
    gpu = load_gpu_spec(profile)
    perf = load_table_perf_model(TINY.model_spec(), gpu, 1, "bf16", "bf16", required=True)
    scenario = build_scenario(opts, model_path, profile)
    # 2. workload
    log("2/5 workload")
    base = scaled_workload(opts)
    f = fit_time_scale(scenario, base, opts.load, log)
    specs = with_time_scale(base, f)
    log(f"  {len(specs)} requests over {specs[-1].arrival_time_s:.1f} s, prompts "
        f"{np.mean([s.num_prompt_tokens for s in specs]):.0f} tokens on average, outputs "
        f"{np.mean([s.num_output_tokens for s in specs]):.0f}")
    # 3. real runs
    log(f"3/5 real engine ({opts.runs} runs + warm-up) on {opts.device}")
    model = TinyLlama(TINY, opts.device)
    cfg = SchedulerConfig(max_num_seqs=opts.max_num_seqs,
                          max_num_batched_tokens=opts.max_num_batched_tokens,
                          enable_chunked_prefill=True)
    eng = RealEngine(model, cfg, SchedulerLimits(max_model_len=4096), num_gpu_blocks=200_000,
                     seed=opts.seed)
    runs = _real_runs(eng, base, specs, opts, out, sentinel, log)
    if harness is not None:
        perf = _second_tables(harness, opts, profile, sentinel, log)
    # 4. simulation
    log("4/5 simulation")
    sim = simulate(scenario, specs)
    sim.requests.to_csv(out / "sim_requests.csv", index=False, float_format="%.9g")
    # 5. comparison
    log("5/5 comparison")
    res = _compare(perf, runs, sim)
    res.update(_setup_record(opts, read_provenance(profile).get("device_name", gpu.name),
                             profile, perf, len(specs), f, busy_fraction(sim),
                             torch.get_num_threads() if dev.type == "cpu" else None, sentinel))
    res["elapsed_s"] = time.perf_counter() - t_begin
    (out / "validation.json").write_text(json.dumps(_jsonable(res), indent=2) + "\n")
    figs = _figures(out, perf, runs, sim)
    write_report(out, "report", render_report(res, figs))
    log(f"wrote {out}/validation.json, report.md and report.html in {res['elapsed_s']:.0f} s")
    return res


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, (np.floating, float)):
        v = float(o)
        return None if not np.isfinite(v) else round(v, 6)
    if isinstance(o, np.integer):
        return int(o)
    return o


def _compare(perf, runs, sim) -> dict:
    a = runs[0]
    pred, meas = step_errors(perf, a.steps)
    err = (pred - meas) / meas * 100.0
    res = {
        "step_time_median_abs_pct_error": percentile(np.abs(err), 50),
        "step_time_p90_abs_pct_error": percentile(np.abs(err), 90),
        "step_time_median_signed_pct_error": percentile(err, 50),
        "step_time_total_pct_error": pct_err(float(pred.sum()), float(meas.sum())),
        "num_real_steps": len(meas),
        "num_sim_steps": len(sim.steps),
        "step_composition_agreement": composition_agreement(a.steps, sim.steps),
    }
    rm_a = request_metrics(a.requests)
    rm_s = request_metrics(sim.requests)
    res.update(compare_requests(rm_s, rm_a))
    res["real_percentiles_s"] = {f"{m}_p{p}": percentile(rm_a[f"{m}_s"].dropna(), p)
                                 for m in ("ttft", "tpot", "e2e") for p in (50, 99)}
    res["sim_percentiles_s"] = {f"{m}_p{p}": percentile(rm_s[f"{m}_s"].dropna(), p)
                                for m in ("ttft", "tpot", "e2e") for p in (50, 99)}
    if len(runs) > 1:
        b = runs[1]
        pb, mb = step_errors(perf, b.steps)
        eb = (pb - mb) / mb * 100.0
        spread = {"step_sim_vs_run2_median_abs_pct_error": percentile(np.abs(eb), 50),
                  "step_sim_vs_run2_p90_abs_pct_error": percentile(np.abs(eb), 90)}
        ms = matched_step_spread(a.steps, b.steps)
        spread.update({f"step_run2_vs_run1_{k}": v for k, v in ms.items()})
        rb = compare_requests(request_metrics(b.requests), rm_a)
        spread.update({f"run2_vs_run1_{k}": v for k, v in rb.items()})
        res["real_run_spread"] = spread
    return res


def _figures(out: Path, perf, runs, sim) -> list[str]:
    """Write the three figures of the report (matplotlib's object-oriented API, no pyplot)."""
    names = []
    pred, meas = step_errors(perf, runs[0].steps)
    fig = figure((5, 5), dpi=110)
    ax = fig.add_subplot()
    dec = runs[0].steps["num_prefill_tokens"].to_numpy() == 0
    ax.loglog(meas[dec] * 1e3, pred[dec] * 1e3, ".", ms=3, alpha=0.6, label="decode-only steps")
    ax.loglog(meas[~dec] * 1e3, pred[~dec] * 1e3, ".", ms=4, alpha=0.8,
              label="steps with prefill")
    lo, hi = min(meas.min(), pred.min()) * 1e3 * 0.8, max(meas.max(), pred.max()) * 1e3 * 1.2
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], "k:", lw=0.6)
    ax.plot([lo, hi], [lo / 1.1, hi / 1.1], "k:", lw=0.6)
    ax.set_xlabel("measured step time (ms)")
    ax.set_ylabel("simulator step time for that shape (ms)")
    ax.set_title("per-step: predicted vs measured (dotted: +-10%)")
    ax.legend(fontsize=8)
    save_png(fig, out / "step_pred_vs_meas.png", tight=True)
    names.append("step_pred_vs_meas.png")
    rms = [request_metrics(r.requests) for r in runs]
    rs = request_metrics(sim.requests)
    fig = figure((12, 3.6), dpi=110)
    for i, m in enumerate(("ttft", "tpot", "e2e")):
        ax = fig.add_subplot(1, 3, i + 1)
        for j, rm in enumerate(rms):
            v = np.sort(rm[f"{m}_s"].dropna().to_numpy()) * 1e3
            ax.plot(v, np.linspace(0, 1, len(v)), label=f"real run {j + 1}")
        v = np.sort(rs[f"{m}_s"].dropna().to_numpy()) * 1e3
        ax.plot(v, np.linspace(0, 1, len(v)), "k--", label="simulator")
        ax.set_xlabel(f"{m.upper()} (ms)")
        ax.set_ylabel("CDF")
        ax.legend(fontsize=7)
    save_png(fig, out / "latency_cdfs.png", tight=True)
    names.append("latency_cdfs.png")
    fig = figure((9, 4), dpi=110)
    for i, m in enumerate(("ttft", "e2e")):
        ax = fig.add_subplot(1, 2, i + 1)
        a = rms[0][f"{m}_s"]
        b = rs[f"{m}_s"].reindex(a.index)
        ax.loglog(a * 1e3, b * 1e3, ".", ms=4)
        lo, hi = np.nanmin([a.min(), b.min()]) * 1e3 * 0.8, np.nanmax([a.max(), b.max()]) * 1e3 * 1.2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.set_xlabel(f"measured {m.upper()} (ms)")
        ax.set_ylabel(f"simulated {m.upper()} (ms)")
    save_png(fig, out / "request_scatter.png", tight=True)
    names.append("request_scatter.png")
    return names


def _fmt(v, spec: str) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else spec.format(v)


def render_report(res: dict, figs: list[str]) -> str:
    """The Markdown text of the self-check report (template ``self_check_report.md.j2``).

    Parameters
    ----------
    res : dict
        The ``validation.json`` content of :func:`validate`.
    figs : list of str
        The figure files (in the output folder) the report shows.
    """
    sp = res.get("real_run_spread", {})

    def signed(v):
        return _fmt(v, "{:+.1f}")

    def plain(v):
        return _fmt(v, "{:.1f}")

    rp, spc = res["real_percentiles_s"], res["sim_percentiles_s"]
    request_rows = [[f"{m.upper()} p{p}", signed(res[f"{m}_p{p}_pct_error"]),
                     signed(sp.get(f"run2_vs_run1_{m}_p{p}_pct_error")),
                     f"{rp[f'{m}_p{p}'] * 1e3:.1f}", f"{spc[f'{m}_p{p}'] * 1e3:.1f}"]
                    for m in ("ttft", "tpot", "e2e") for p in (50, 99)]
    step_rows = [
        ["median abs % error", plain(res["step_time_median_abs_pct_error"]),
         plain(sp.get("step_sim_vs_run2_median_abs_pct_error")),
         plain(sp.get("step_run2_vs_run1_median_abs_pct"))],
        ["p90 abs % error", plain(res["step_time_p90_abs_pct_error"]),
         plain(sp.get("step_sim_vs_run2_p90_abs_pct_error")),
         plain(sp.get("step_run2_vs_run1_p90_abs_pct"))]]
    c = res.get("cpu_overhead_fit_s") or {}
    overhead = None if c.get("a") is None else (
        f"{c['a'] * 1e6:.0f} us + {c['b_per_seq'] * 1e6:.1f} us/sequence + "
        f"{c['c_per_token'] * 1e6:.2f} us/token")
    return render(
        "self_check_report.md.j2", res=res, w=res["workload"], sp=sp, step_rows=step_rows,
        request_rows=request_rows, signed=signed, plain=plain,
        drift=f"{res.get('machine_drift_pct', float('nan')):.1f}",
        agreement=f"{100 * res['step_composition_agreement']:.0f}",
        provenance=sorted(res["perf_provenance"].items()), overhead=overhead, figures=figs)
