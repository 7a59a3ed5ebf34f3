"""Fit an engine profile's free constants to recorded runs (``servesim calibrate fit-engine``).

The kernels of a step come from measured tables; what the engine adds (per-step CPU work that
async scheduling cannot hide, the sync/launch gap between steps) is not in any kernel table.
Those constants are fitted here, *across several recorded runs*, by least squares on the
per-request latencies, and every fitted value carries the runs it came from.

Objective. Each run ``r`` is replayed through the simulator with the candidate constants
``theta``; for each latency ``m`` in TTFT, TPOT, E2E, the simulated and the real per-request
values are each *sorted*, and the ``i``-th smallest are compared::

    e_rmi(theta) = (sort(m_sim)_i - sort(m_real)_i) / mean(m_real)

    J(theta) = mean over runs of ( mean over m and i of e_rmi^2 )

Least squares on the per-request latencies, matched by rank rather than by request id (the
squared 2-Wasserstein distance between the two empirical distributions): in a busy queue a
tiny change of step time reorders which request waits behind which, so matching by id makes
``J`` jump between neighbouring ``theta`` while the latency distribution, what a capacity plan
reads, moves smoothly. Normalising by the run's mean makes runs of different speeds weigh
alike; equal weight per run. ``J`` is minimised by
Nelder-Mead (``scipy.optimize.minimize``; the simulator is a discrete-event model, so ``J`` is
piecewise constant at fine scales and has no useful gradient) over ``theta >= 0``, from a
coarse grid's best point.

Leave-one-run-out: for each run, the constants are refitted on the other runs and the held-out
run's mean TTFT / TPOT / E2E errors are reported: the figure to trust for a run the fit has not
seen. A single run cannot be fitted (``fit-engine`` needs at least two).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simulator.cluster.setup import build_setup, unpriced_quiet
from simulator.engine.loop import simulate
from simulator.observe.compare import paired_frame
from simulator.observe.readers import read_recorded, specs_with_block_size
from simulator.observe.settings import build_replay_scenario
from simulator.perf.engine_profile import EngineProfile, get_engine_profile

#: constants fit-engine may fit (dotted names of :meth:`EngineProfile.constants`)
FITTABLE = ("cpu.step_s", "cpu.per_seq_s", "cpu.per_token_s", "sync.step_s", "sync.per_seq_s",
            "sync.per_token_s")
#: default: the per-step time no kernel table holds, and its per-sequence part
DEFAULT_PARAMS = ("sync.step_s", "sync.per_seq_s")
#: scale of each parameter for the optimiser (seconds): the coarse grid spans
#: ``[0, GRID_MAX] x scale`` (0-6 ms per step, 0-60 us per sequence, 0-6 us per token)
_SCALE = {"step_s": 1e-3, "per_seq_s": 1e-5, "per_token_s": 1e-6}
GRID_MAX = 6.0


@dataclass
class FitCase:
    """One recorded run prepared for fitting (scenario built and requests read once)."""

    name: str
    scenario: Any
    base_dir: Path | None
    specs: list
    outcomes: Any
    setup: Any = None
    approximations: list = field(default_factory=list)


def with_constants(profile: EngineProfile, values: dict[str, float], source: str,
                   fitted_on: tuple[str, ...] = (), fit_report: dict | None = None
                   ) -> EngineProfile:
    """A copy of ``profile`` with the named constants set to ``values`` (source ``source``)."""
    doc = profile.model_dump()
    for name, v in values.items():
        if name not in FITTABLE:
            raise ValueError(f"cannot fit {name!r}; fittable: {', '.join(FITTABLE)}")
        sec, key = name.split(".")
        doc[sec][key] = {"value": float(max(v, 0.0)), "source": source}
    if fitted_on:
        doc["fitted_on"] = list(fitted_on)
    if fit_report is not None:
        doc["fit_report"] = fit_report
    return EngineProfile.model_validate(doc)


def prepare_cases(paths: list[str | Path], *, engine: str = "vllm-v1",
                  gpu: str | None = None, model: str | None = None,
                  sets: list[str] | None = None) -> list[FitCase]:
    """Read each recorded run and build its replay (settings from the record, then flags).

    Raises
    ------
    RecordError, ScenarioError, ValueError
        As :func:`simulator.observe.validate.validate_recorded` (one line); a record with
        per-stage summaries only (inference-perf).
    """
    cases = []
    for p in paths:
        run = read_recorded(p)
        if run.aggregate_only:
            raise ValueError(f"{p}: fit-engine fits per-request latencies; this record has "
                             "per-stage summaries only (compare it with validate --recorded)")
        rs = build_replay_scenario(run, gpu=gpu, model=model,
                                   sets=[f"perf.engine={engine}", *(sets or [])])
        sc = rs.scenario
        specs = specs_with_block_size(run, sc.kv_cache.block_size)
        with unpriced_quiet():  # a replay's cost is not what the fit compares
            setup = build_setup(sc, rs.base_dir)
        cases.append(FitCase(run.name, sc, rs.base_dir, specs, run.outcomes, setup,
                             list(run.approximations) + list(rs.approximations)))
    return cases


def simulate_case(case: FitCase, profile: EngineProfile):
    """Replay ``case`` with ``profile`` as the engine; returns the simulated requests frame."""
    perf = case.setup.perf
    old = perf.engine
    perf.engine = profile
    try:
        out = simulate(case.scenario, case.setup, case.specs)
    finally:
        perf.engine = old
    return out.requests()


def case_errors(case: FitCase, sim) -> dict[str, Any]:
    """Normalised per-request errors and the signed mean % errors of one replay."""
    pair = paired_frame(case.outcomes, sim)
    out: dict[str, Any] = {"num_compared": len(pair)}
    res = []
    for m in ("ttft_s", "tpot_s", "e2e_s"):
        real = pair[f"real_{m}"].to_numpy(dtype=float)
        simv = pair[f"sim_{m}"].to_numpy(dtype=float)
        ok = np.isfinite(real) & np.isfinite(simv)
        mean_real = float(np.mean(real[ok])) if ok.any() else float("nan")
        r = (np.sort(simv[ok]) - np.sort(real[ok])) / mean_real
        # a request the simulator did not complete counts as a full miss
        miss = int((np.isfinite(real) & ~np.isfinite(simv)).sum())
        res.append(np.concatenate([r, np.ones(miss)]))
        out[f"{m.removesuffix('_s')}_mean_pct_error"] = (
            100.0 * (float(np.mean(simv[ok])) - mean_real) / mean_real if ok.any() else None)
    out["residuals"] = np.concatenate(res)
    return out


def objective(cases: list[FitCase], base: EngineProfile, names: tuple[str, ...],
              theta: np.ndarray) -> float:
    """``J(theta)`` of the module docstring."""
    prof = with_constants(base, dict(zip(names, theta)), "candidate")
    js = []
    for c in cases:
        e = case_errors(c, simulate_case(c, prof))["residuals"]
        js.append(float(np.mean(e ** 2)))
    return float(np.mean(js))


def _fit(cases, base, names, grid_points: int, log) -> np.ndarray:
    from scipy.optimize import minimize
    scale = np.array([_SCALE[n.split(".")[1]] for n in names])
    axes = [np.linspace(0.0, GRID_MAX, grid_points) for _ in names]
    best, best_j = None, np.inf
    for pt in itertools.product(*axes):
        th = np.array(pt) * scale
        j = objective(cases, base, names, th)
        if j < best_j:
            best, best_j = th, j
    log(f"  grid best J={best_j:.5f} at " + ", ".join(
        f"{n}={v:.4g}" for n, v in zip(names, best)))

    def f(u):
        return objective(cases, base, names, np.maximum(u, 0.0) * scale)

    r = minimize(f, best / scale, method="Nelder-Mead",
                 options={"xatol": 0.02, "fatol": 1e-6, "maxfev": 60,
                          "initial_simplex": None})
    th = np.maximum(r.x, 0.0) * scale
    log(f"  Nelder-Mead J={r.fun:.5f} at " + ", ".join(
        f"{n}={v:.4g}" for n, v in zip(names, th)))
    return th if r.fun <= best_j else best


@dataclass
class FitResult:
    """What :func:`fit_engine` found."""

    names: tuple[str, ...]
    values: dict[str, float]
    runs: list[str]
    in_sample: dict[str, dict]
    leave_one_run_out: dict[str, dict]
    profile: EngineProfile


def fit_engine(cases: list[FitCase], base: EngineProfile | str = "vllm-v1",
               names: tuple[str, ...] = DEFAULT_PARAMS, *, grid_points: int = 13,
               loro: bool = True, log=print) -> FitResult:
    """Fit ``names`` of ``base`` to ``cases`` (module docstring); leave-one-run-out refits.

    Raises
    ------
    ValueError
        Fewer than two runs, or a constant that cannot be fitted.
    """
    if len(cases) < 2:
        raise ValueError("fit-engine needs at least two recorded runs (a constant fitted to one "
                         "run cannot be checked on another)")
    for n in names:
        if n not in FITTABLE:
            raise ValueError(f"cannot fit {n!r}; fittable: {', '.join(FITTABLE)}")
    base = base if isinstance(base, EngineProfile) else get_engine_profile(base)
    runs = [c.name for c in cases]
    log(f"fitting {', '.join(names)} of {base.name} on {len(cases)} runs: {', '.join(runs)}")
    th = _fit(cases, base, names, grid_points, log)
    values = dict(zip(names, (float(v) for v in th)))
    fitted = with_constants(base, values, "candidate")
    in_sample = {}
    for c in cases:
        e = case_errors(c, simulate_case(c, fitted))
        in_sample[c.name] = {k: v for k, v in e.items() if k != "residuals"}
    held: dict[str, dict] = {}
    if loro:
        for i, c in enumerate(cases):
            rest = cases[:i] + cases[i + 1:]
            if len(rest) < 1:
                continue
            log(f"leave out {c.name}:")
            th_i = _fit(rest, base, names, grid_points, log)
            prof_i = with_constants(base, dict(zip(names, th_i)), "candidate")
            e = case_errors(c, simulate_case(c, prof_i))
            held[c.name] = {**{k: v for k, v in e.items() if k != "residuals"},
                            "constants": dict(zip(names, (float(v) for v in th_i)))}
    values = {k: float(f"{v:.4g}") for k, v in values.items()}
    report = {"objective": "least squares on rank-matched per-request TTFT, TPOT and E2E, each "
                           "normalised by the run's real mean; equal weight per run; coarse grid "
                           "then Nelder-Mead (simulator/observe/fit_engine.py)",
              "runs": runs, "in_sample": in_sample, "leave_one_run_out": held}

    def errs(d):
        return "/".join(f"{d[f'{m}_mean_pct_error']:+.1f}" for m in ("ttft", "tpot", "e2e")
                        if d.get(f"{m}_mean_pct_error") is not None)
    loro_txt = "; ".join(f"{r}: {errs(held[r])}" for r in runs if r in held)
    src = (f"fitted by servesim calibrate fit-engine on {len(runs)} recorded runs "
           f"({', '.join(runs)}); leave-one-run-out mean TTFT/TPOT/E2E % error: "
           f"{loro_txt or 'not computed'}")
    prof = with_constants(base, values, src, fitted_on=tuple(runs), fit_report=report)
    return FitResult(tuple(names), values, runs, in_sample, held, prof)


def write_profile(profile: EngineProfile, path: str | Path, name: str | None = None) -> Path:
    """Write ``profile`` as an engine-profile YAML a scenario can name (``perf.engine: PATH``)."""
    doc = profile.model_dump(exclude={"path"})
    if name:
        doc["name"] = name
    p = Path(path)
    if p.suffix not in (".yaml", ".yml"):
        p = p / f"{doc['name']}.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, (np.floating, np.integer)):
            return x.item()
        return x

    p.write_text(yaml.safe_dump(clean(doc), sort_keys=False, width=100))
    return p
