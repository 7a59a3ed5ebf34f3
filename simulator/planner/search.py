"""SLO-constrained capacity search and replica sizing for one configuration.

Capacity (DESIGN.md glossary): the highest arrival rate whose SLO attainment stays at or above
the target. Here it is searched on **one replica** by replaying the first ``max_requests``
requests of a trace window with their arrival times divided by a rate scale ``s`` (the
workload's ``rate_scale``): a probe at ``s`` is *feasible* when its SLO attainment reaches
the target and every enabled quality gate holds. Assuming feasibility falls as the rate
rises, the search

1. probes ``initial_rate_scale``; then multiplies by ``growth`` while feasible, or divides
   by it while not, until one feasible and one infeasible scale bracket the capacity (or a
   limit is reached);
2. bisects the bracket geometrically (``sqrt(low x high)``) until
   ``high / low - 1 <= rel_tol`` or ``max_probes`` probes were spent.

The capacity reported is the feasible end of the bracket (never an infeasible rate), in
requests per second: ``s x`` the arrival rate of the probe's requests.

Sizing for a target rate ``T`` assumes a load-balancing router spreads load evenly:
``replicas = ceil(T x (1 + headroom) / capacity)``; a full cluster simulation at ``T``
confirms it, adding one replica at a time (up to ``max_extra_replicas``) until it passes.

A finite probe measures a transient: above the true capacity queues grow during the probe,
so attainment falls as the rate rises; more requests per probe make the edge sharper.

Speed (issue 12 part 2): with ``search.early_stop`` a probe or confirmation ends once its
finished requests prove a gate failed (:mod:`simulator.planner.early_stop`); with
``prune_usd_per_hour`` in the task (``search.prune_dominated``) a candidate that cannot cost
at most that bound is skipped after at most one probe (:func:`dominance_check`,
:mod:`simulator.planner.prune`).

The gates a probe must pass, and the record each probe leaves, are in
:mod:`simulator.planner.gates`.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from simulator.cluster.setup import build_setup
from simulator.experiments.cache import ResultCache, cache_key, scenario_identity, specs_fingerprint
from simulator.experiments.input_files import inputs_fingerprint
from simulator.experiments.warned import merge, recording
from simulator.perf import enable_operator_backend_memo
from simulator.planner.early_stop import ProbeStop
from simulator.planner.gates import gate_failure, probe_record
from simulator.planner.provenance import perf_provenance, scenario_provenance
from simulator.planner.prune import gate_rate, max_replicas_within, skipped_result
from simulator.planner.simulate import compact_summary, rescale_specs, simulate_summary, specs_rate
from simulator.planner.spec import GateSettings, SearchSettings
from simulator.scenario.config import validate_scenario

__all__ = [
    "SimRunner",
    "evaluate_candidate",
    "find_capacity",
    "is_lower_bound",
    "replicas_for",
    "scenario_at",
    "search_capacity",
]


# ---------------------------------------------------------------------- the search algorithm
def find_capacity(probe: Callable[[float], Mapping[str, Any]], *, start: float = 1.0,
                  growth: float = 2.0, rel_tol: float = 0.1, max_probes: int = 12,
                  min_scale: float = 1.0 / 64, max_scale: float = 1024.0
                  ) -> tuple[float | None, list[dict], str]:
    """Bracket and bisect the largest feasible rate scale.

    Parameters
    ----------
    probe : callable
        ``probe(scale) -> record`` with a boolean ``"feasible"``.
    start, growth, rel_tol, max_probes, min_scale, max_scale
        See :class:`simulator.planner.spec.SearchSettings`.

    Returns
    -------
    (scale or None, records, note)
        The largest feasible scale found (``None``: none down to ``min_scale``), every
        probe's record in the order run, and a note: ``converged``, ``max_probes`` (the
        probes ran out between a passing and a failing scale), ``lower_bound`` (they ran out
        before any scale failed: the capacity is at least the one returned), ``at_max_scale``
        (every scale up to ``max_scale`` passed: a lower bound too) or ``infeasible``.
    """
    records: list[dict] = []

    def ev(s: float) -> bool:
        r = dict(probe(s))
        r["rate_scale"] = s
        records.append(r)
        return bool(r["feasible"])

    lo: float | None = None
    hi: float | None = None
    s = min(max(start, min_scale), max_scale)
    if ev(s):
        lo = s
    else:
        hi = s
    while lo is None:
        s = hi / growth
        if s < min_scale * (1 - 1e-12):
            return None, records, "infeasible"
        if len(records) >= max_probes:
            return None, records, "max_probes"
        if ev(s):
            lo = s
        else:
            hi = s
    while hi is None:
        s = lo * growth
        if s > max_scale * (1 + 1e-12):
            return lo, records, "at_max_scale"
        if len(records) >= max_probes:  # no probe failed: the capacity is at least lo
            return lo, records, "lower_bound"
        if ev(s):
            lo = s
        else:
            hi = s
    while hi / lo - 1.0 > rel_tol:
        if len(records) >= max_probes:
            return lo, records, "max_probes"
        s = math.sqrt(lo * hi)
        if ev(s):
            lo = s
        else:
            hi = s
    return lo, records, "converged"


def replicas_for(target_rps: float, capacity_rps: float, headroom: float) -> int:
    """Replicas so that each runs at most ``1 / (1 + headroom)`` of its capacity:
    ``ceil(target x (1 + headroom) / capacity)`` (at least 1).

    Raises
    ------
    ValueError
        When the capacity is not > 0, or the replica count is not a finite number (a target
        rate so large that ``target x (1 + headroom)`` overflows).
    """
    if not capacity_rps > 0:
        raise ValueError("capacity must be > 0 to size replicas")
    need = target_rps * (1.0 + headroom) / capacity_rps
    if not math.isfinite(need):
        raise ValueError(f"target {target_rps:.3g} requests/s x (1 + headroom {headroom:g}) / "
                         f"capacity {capacity_rps:.3g} requests/s is not a finite replica count")
    return max(1, math.ceil(need - 1e-9))


#: Fewest requests per replica a cluster confirmation should replay: below it the
#: confirmation's latencies, phase split and price describe a cluster that is mostly idle
#: (a request or two per replica), not the sized one under load; the plan warns.
CONFIRM_MIN_REQUESTS_PER_REPLICA = 20


class PlanConfirmationWarning(UserWarning):
    """A cluster confirmation too thin to stand for the target load (see
    :data:`CONFIRM_MIN_REQUESTS_PER_REPLICA`)."""


def _confirmation_limits(n: int, pool_size: int, target_rps: float) -> str | None:
    """Why a confirmation on ``n`` replicas cannot be run (None: it can):
    more replicas than the pool has requests leaves replicas that never see one."""
    if n > pool_size:
        shown = f"{n:,}" if n < 10**12 else f"{float(n):.3g}"
        return (f"the target {target_rps:.6g} requests/s needs {shown} replicas, more than the "
                f"{pool_size:,} requests of the pool: a confirmation cannot load every replica "
                "(use a longer trace or window_s, or a lower target)")
    return None


# ---------------------------------------------------------------------- simulations
def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


class SimRunner:
    """Runs simulations of one configuration: reuses its setup and the result cache.

    Parameters
    ----------
    cache : ResultCache, optional
        Read for hits; new results are kept in :attr:`new_cache` (the caller stores them).
    setup_factory : callable, optional
        ``setup_factory(Scenario) -> ReplicaSetup`` instead of ``build_setup``.
    factory_id : str, optional
        Identifies ``setup_factory`` in cache keys.
    """

    def __init__(self, cache=None, setup_factory: Callable | None = None,
                 factory_id: str | None = None):
        self.cache = cache
        self.setup_factory = setup_factory
        self.factory_id = factory_id
        self.new_cache: dict[str, dict] = {}
        #: the warnings of its simulations, run or served from the cache (merged, in order)
        self.warnings: list[dict] = []
        self.num_simulations = 0
        self.num_cache_hits = 0
        self._setup = None

    def setup(self, scenario: Mapping[str, Any]):
        """The replica setup (built once; it depends on neither workload nor replicas).

        Raises
        ------
        ValueError
            When the model does not fit or a name is unknown.
        """
        if self._setup is None:
            sc = validate_scenario(dict(scenario))
            f = self.setup_factory
            self._setup = f(sc) if f is not None else build_setup(sc)
        return self._setup

    def run(self, scenario: Mapping[str, Any], specs: list,
            stop: ProbeStop | None = None) -> dict:
        """``{"summary", "extra", "stopped"}`` of ``scenario`` on ``specs`` (cached when
        possible). With ``stop`` (its rules active) the run ends once a gate is proven
        failed; ``stopped`` is then ``{"stopped_at_s", "gate_failures"}``, else ``None``."""
        stop = stop if (stop is not None and stop.active) else None
        key = cache_key("sim", {"scenario": scenario_identity(scenario),
                                "inputs": inputs_fingerprint(scenario),
                                "specs": specs_fingerprint(specs), "setup": self.factory_id,
                                "early_stop": stop.identity() if stop else None})
        if key in self.new_cache:
            return self.new_cache[key]
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            self.num_cache_hits += 1
            self.warnings = merge(self.warnings, hit.get("warnings"))
            return hit
        setup = self.setup(scenario)
        with recording() as warned:  # kept with the entry: a cached simulation shows them again
            r = simulate_summary(scenario, specs, setup=setup, stop_when=stop)
        r["stopped"] = ({"stopped_at_s": stop.stopped_at_s, "gate_failures": stop.failures}
                        if stop is not None and stop.stopped_at_s is not None else None)
        if warned:
            r["warnings"] = warned
            self.warnings = merge(self.warnings, warned)
        self.num_simulations += 1
        self.new_cache[key] = r
        return r


def scenario_at(base: Mapping[str, Any], replicas: int, scale: float, n: int) -> dict:
    """``base`` with ``num_replicas``, the workload's ``rate_scale`` multiplied by ``scale``
    and ``max_requests = n`` (records what a probe replays)."""
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    d["cluster"] = {**base["cluster"], "num_replicas": int(replicas)}
    w = dict(base["workload"])
    w["rate_scale"] = float(w.get("rate_scale") or 1.0) * scale
    w["max_requests"] = int(n)
    d["workload"] = w
    return d


def _settings(search) -> dict:
    """Search settings as a complete dict (a partial mapping is validated and filled)."""
    if search is None:
        return SearchSettings().model_dump()
    if hasattr(search, "model_dump"):
        return search.model_dump()
    return SearchSettings.model_validate(dict(search)).model_dump()


def run_probe(scenario: Mapping[str, Any], probe_specs: list, scale: float, rate1: float, *,
              reps: int, gpus: int, st: Mapping[str, Any], gates: Mapping[str, Any],
              runner: SimRunner) -> dict[str, Any]:
    """One capacity probe: ``probe_specs`` (arrival rate ``rate1`` requests/s) rate-scaled by
    ``scale`` on ``reps`` replicas (``gpus`` GPUs); its :func:`probe_record` (early-stopped
    when ``st["early_stop"]``)."""
    sp = rescale_specs(probe_specs, scale)
    stop = ProbeStop(sp, scenario["slo"], gates) if st["early_stop"] else None
    r = runner.run(scenario_at(scenario, reps, scale, len(sp)), sp, stop)
    return probe_record(r["summary"], r["extra"], rate_rps=scale * rate1, gpus=gpus,
                        gates=gates, slo=scenario["slo"], stopped=r.get("stopped"))


def dominance_check(task: Mapping[str, Any], base: Mapping[str, Any], pool: list,
                    runner: SimRunner) -> tuple[dict | None, dict | None]:
    """Whether a candidate is dominated by ``task["prune_usd_per_hour"]``
    (:mod:`simulator.planner.prune`): ``(skipped fields or None, the gate probe's record
    or None)``."""
    bound = task.get("prune_usd_per_hour")
    if bound is None:
        return None, None
    st = task["search"]
    c = base["cluster"]
    g = int(c["tensor_parallel_size"]) * int(c.get("pipeline_parallel_size") or 1)
    price = float(base["cost"]["usd_per_gpu_hour"])
    if not g * price > 0:
        return None, None  # free replicas (price 0) never cost more than the bound
    n_max = max_replicas_within(float(bound), g, price)
    if n_max < 1:
        return skipped_result(float(bound), g, price, 0, None), None
    rate = gate_rate(float(task["target_rate_rps"]), float(task["headroom"]), n_max)
    probe_specs = list(pool[: st["max_requests"]])
    rate1 = specs_rate(probe_specs)
    rec = run_probe(base, probe_specs, rate / rate1, rate1, reps=1, gpus=g, st=st,
                    gates=task["gates"], runner=runner)
    rec["rate_scale"] = rate / rate1
    if rec["feasible"]:
        return None, rec
    return skipped_result(float(bound), g, price, n_max, rate), rec


def search_capacity(scenario: Mapping[str, Any], specs: list, *, search=None,
                    gates: Mapping[str, Any] | None = None, replicas: int | None = None,
                    runner: SimRunner | None = None,
                    setup_factory: Callable | None = None) -> dict[str, Any]:
    """Capacity of a configuration under its SLOs (the largest feasible arrival rate).

    Parameters
    ----------
    scenario : mapping
        A resolved scenario (its ``slo`` section defines the bounds and the target).
    specs : list of RequestSpec
        The request pool at the workload's own rate; probes replay its first
        ``search.max_requests`` requests, rate-scaled.
    search : SearchSettings or mapping, optional
        Search settings (defaults of :class:`~simulator.planner.spec.SearchSettings`).
    gates : mapping, optional
        Gate settings (defaults of :class:`~simulator.planner.spec.GateSettings`).
    replicas : int, optional
        Replicas simulated per probe (default: the scenario's ``num_replicas``); the plan
        searches one.
    runner : SimRunner, optional
        Shares a setup and cache with other calls.
    setup_factory : callable, optional
        Used when ``runner`` is not given.

    Returns
    -------
    dict
        ``capacity_rps`` (0.0 when infeasible at ``min_rate_scale``),
        ``capacity_rate_scale`` (or ``None``), ``probe_base_rate_rps`` (arrival rate of the
        probe's requests at scale 1), ``probes`` (records sorted by rate), ``search_note``.
    """
    st = _settings(search)
    gates = GateSettings.model_validate(dict(gates or {})).model_dump()
    runner = runner or SimRunner(setup_factory=setup_factory)
    scenario["slo"]
    reps = int(replicas if replicas is not None else scenario["cluster"]["num_replicas"])
    gpus = reps * int(scenario["cluster"]["tensor_parallel_size"]) * int(
        scenario["cluster"].get("pipeline_parallel_size") or 1)
    probe_specs = list(specs[: st["max_requests"]])
    rate1 = specs_rate(probe_specs)

    def probe(scale: float) -> dict:
        return run_probe(scenario, probe_specs, scale, rate1, reps=reps, gpus=gpus, st=st,
                         gates=gates, runner=runner)

    cap_scale, records, note = find_capacity(
        probe, start=st["initial_rate_scale"], growth=st["growth"], rel_tol=st["rel_tol"],
        max_probes=st["max_probes"], min_scale=st["min_rate_scale"],
        max_scale=st["max_rate_scale"])
    return {"capacity_rps": cap_scale * rate1 if cap_scale is not None else 0.0,
            "capacity_rate_scale": cap_scale, "probe_base_rate_rps": rate1,
            "probes": sorted(records, key=lambda r: r["rate_scale"]), "search_note": note,
            "last_failed_gates": sorted({g for r in records[-1:] for g in r["failed_gates"]}),
            "last_gate_failures": [f for r in records[-1:] for f in r.get("gate_failures", [])]}


#: capacity searches that ended before any probed rate failed (:func:`find_capacity`): the
#: capacity found is a lower bound, not bracketed
LOWER_BOUND_NOTES = ("lower_bound", "at_max_scale")


def is_lower_bound(r: Mapping[str, Any]) -> bool:
    """Whether a plan row's (or a capacity search's) capacity is only a lower bound: its
    ``search_note`` says no probed rate failed."""
    return r.get("search_note") in LOWER_BOUND_NOTES


# ---------------------------------------------------------------------- one candidate
def evaluate_candidate(task: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """Search one configuration's capacity, size its replicas and confirm (runs in a worker).

    ``task`` keys: ``index``, ``scenario`` (resolved dict, one replica), ``search``
    (:class:`SearchSettings` as a dict), ``gates``, ``target_rate_rps``, ``headroom``,
    ``max_extra_replicas``, ``cache_dir``, ``use_cache``, ``setup_factory``,
    ``factory_id``. ``shared["pool"]`` is the request pool (a list of RequestSpec at the
    workload's own rate).

    Returns a JSON-safe dict; never raises (errors become a failed ``error`` gate). New
    simulation results come back under ``new_cache`` for the driver to store; the warnings
    the evaluation raised (its setup's and its simulations', cached ones included) under
    ``warnings``, for the driver to show and cache with the result.
    """
    with recording() as warned:
        out = _evaluate_candidate(task, shared)
    out["warnings"] = merge(warned, out.pop("_sim_warnings", None))
    return out


def _evaluate_candidate(task: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`evaluate_candidate` without the warnings' bookkeeping."""

    t0 = time.perf_counter()
    if mp.parent_process() is not None:
        enable_operator_backend_memo()  # a pool worker: read each GPU's tables once
    pool = shared["pool"]
    st = task["search"]
    base = dict(task["scenario"])
    runner = SimRunner(ResultCache(task.get("cache_dir"), enabled=task.get("use_cache", True)),
                       task.get("setup_factory"), task.get("factory_id"))
    out: dict[str, Any] = {"index": task["index"], "probes": [], "confirmations": [],
                           "error": None, "_cpu0": time.process_time()}
    try:
        try:
            setup = runner.setup(base)
        except ValueError as e:
            out.update(status="failed", failed_gates=["fits"], error=_first_line(e),
                       gate_failures=[gate_failure("fits", None, None,
                                                   text=f"does not fit: {_first_line(e)}")],
                       capacity_rps=0.0, capacity_rate_scale=None, search_note="not built",
                       provenance=scenario_provenance(base))
            return _finish(out, runner, t0)
        out["provenance"] = perf_provenance(setup.perf)
        skipped, out["dominance_probe"] = dominance_check(task, base, pool, runner)
        if skipped is not None:
            out.update(skipped)
            return _finish(out, runner, t0)
        found = search_capacity(base, pool, search=st, gates=task["gates"], replicas=1,
                                runner=runner)
        last_fail = found.pop("last_failed_gates")
        last_details = found.pop("last_gate_failures")
        out.update(found)
        cap = found["capacity_rps"]
        if found["capacity_rate_scale"] is None:
            lo = float(st["min_rate_scale"]) * float(found["probe_base_rate_rps"])
            out.update(status="failed", failed_gates=["capacity"] + last_fail,
                       gate_failures=[gate_failure(
                           "capacity", None, None,
                           text=(f"no feasible rate down to {lo:.3g} requests/s per replica "
                                 f"(search: {found['search_note']})"))] + last_details)
            return _finish(out, runner, t0)

        target = float(task["target_rate_rps"])
        n = replicas_for(target, cap, float(task["headroom"]))
        why = _confirmation_limits(n, len(pool), target)
        if why is not None:  # (n may be too large for an int64 column: not stored)
            out.update(status="failed", failed_gates=["confirmation"],
                       gate_failures=[gate_failure("confirmation", None, None, text=why)])
            return _finish(out, runner, t0)
        out["replicas_initial"] = n
        _confirm(out, task, base, pool, n, runner)
    except Exception as e:  # noqa: BLE001 - report, do not crash the plan
        out.update(status="failed", failed_gates=["error"],
                   error=f"{type(e).__name__}: {_first_line(e)}",
                   gate_failures=[gate_failure("error", None, None,
                                               text=f"error: {type(e).__name__}: "
                                                    f"{_first_line(e)}")])
        out.setdefault("capacity_rps", 0.0)
    return _finish(out, runner, t0)


def _confirm(out: dict, task: Mapping[str, Any], base: dict, pool: list, n: int,
             runner: SimRunner) -> None:
    """Confirm ``n`` replicas (the sizing) by a cluster simulation at the target rate, adding
    one replica at a time (up to ``max_extra_replicas``) until every gate passes; records the
    confirmations, the replicas and the status in ``out``."""
    st, gates, slo = task["search"], task["gates"], base["slo"]
    target = float(task["target_rate_rps"])
    # GPUs per replica (TP x PP)
    tp = int(base["cluster"]["tensor_parallel_size"]) * int(
        base["cluster"].get("pipeline_parallel_size") or 1)
    confirm_n = st.get("confirm_max_requests")
    passed = False
    fails: list[str] = []
    for _ in range(int(task["max_extra_replicas"]) + 1):
        m = min(len(pool), confirm_n if confirm_n else st["max_requests"] * n)
        if m < CONFIRM_MIN_REQUESTS_PER_REPLICA * n:
            warnings.warn(PlanConfirmationWarning(
                f"the confirmation at {n:,} replica(s) replays {m:,} requests "
                f"({m / n:.1f} per replica, fewer than "
                f"{CONFIRM_MIN_REQUESTS_PER_REPLICA}): its latencies, phase split and "
                "price describe a mostly idle cluster (use a longer trace or window_s, or a "
                "lower target)"), stacklevel=1)
        specs_c = pool[:m]
        scale_c = target / specs_rate(specs_c)
        specs_c = rescale_specs(specs_c, scale_c)
        stop = ProbeStop(specs_c, slo, gates) if st.get("early_stop") else None
        r = runner.run(scenario_at(base, n, scale_c, m), specs_c, stop)
        rec = probe_record(r["summary"], r["extra"], rate_rps=target, gpus=tp * n,
                           gates=gates, slo=slo, stopped=r.get("stopped"))
        rec["replicas"] = n
        out["confirmations"].append(rec)
        out["confirm_extra"] = r["extra"]
        out["confirm_summary"] = compact_summary(r["summary"])
        fails = rec["failed_gates"]
        if not fails:
            passed = True
            break
        n += 1
    if not passed:
        n -= 1
    out["replicas"] = n
    out["status"] = "ok" if passed else "failed"
    out["failed_gates"] = [] if passed else [f"confirmation:{g}" for g in fails]
    out["gate_failures"] = [] if passed else [
        {**f, "gate": f"confirmation:{f['gate']}",
         "text": f"at {n} replica(s), the target-rate run: {f['text']}"}
        for f in out["confirmations"][-1].get("gate_failures", [])]


def _finish(out: dict, runner: SimRunner, t0: float) -> dict:
    out["new_cache"] = runner.new_cache
    out["_sim_warnings"] = runner.warnings
    out["num_simulations"] = runner.num_simulations
    out["num_cache_hits"] = runner.num_cache_hits
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - out.pop("_cpu0", 0.0)
    return out
