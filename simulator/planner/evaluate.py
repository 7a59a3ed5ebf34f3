"""Evaluating a plan's configurations: pricing, cache keys, the executor phases.

:func:`evaluate_configurations` prices every configuration, builds one task per distinct
configuration (its cache key covers the scenario, the request pool, the search and gate
settings, the target and the headroom), evaluates the ones the cache does not hold through
the executor, slowest first (:func:`longest_first`), and stores the new results (with the
warnings each evaluation raised, shown once per plan whether the result is new or cached). With
dominance pruning (:mod:`simulator.planner.prune`) the baseline and last known-good run in a
first phase; the candidates then carry the lowest passing cost among them as a bound.
"""
from __future__ import annotations

import json
from typing import Any

from simulator.base.progress import report_cached
from simulator.catalog.hardware import GPUSpec, get_gpu
from simulator.experiments.cache import ResultCache, cache_key, scenario_identity, specs_fingerprint
from simulator.experiments.executor import run_tasks
from simulator.experiments.grid import config_label
from simulator.experiments.input_files import inputs_fingerprint
from simulator.experiments.runner import factory_id
from simulator.experiments.warned import reemit
from simulator.planner.prune import dominance_bound
from simulator.planner.search import evaluate_candidate
from simulator.planner.spec import DEPLOYMENT_GATES, PlanError, PlanSpec

__all__ = ["evaluate_configurations", "longest_first"]


def _price(g: GPUSpec, prices: dict[str, float], scenario_price: float | None,
           base_gpu: str) -> tuple[float, str]:
    """A configuration's price per GPU-hour and where it comes from, for its GPU ``g`` (as
    loaded from its ``hardware.gpu``: a catalog name or a spec path, so a profile given by
    path is priced without being looked up by its name again)."""
    for k, v in prices.items():
        if get_gpu(k).name == g.name:
            return float(v), "plan prices"
    if scenario_price is not None and g.name == base_gpu:
        return float(scenario_price), "scenario cost.usd_per_gpu_hour"
    return float(g.usd_per_gpu_hour), f"{g.name} profile"


def _who(i: int, n_cand: int, ov: dict) -> str:
    """The configuration ``i`` in an error: a candidate point, the baseline or the last
    known-good (the rows after the ``n_cand`` candidates)."""
    return (f"plan candidate point {i} ({config_label(ov)})" if i < n_cand else
            "plan baseline" if i == n_cand else "plan last_known_good")


def _gpu_of(cfg: dict, i: int, n_cand: int, ov: dict) -> GPUSpec:
    """A configuration's GPU (its ``hardware.gpu``: a catalog name or a spec path).

    Raises
    ------
    PlanError
        An unknown GPU, naming the configuration (candidate point, baseline or last
        known-good) and the key.
    """
    try:
        return get_gpu(cfg["hardware"]["gpu"])
    except ValueError as e:
        raise PlanError(f"{_who(i, n_cand, ov)}: hardware.gpu: {e}") from None


def evaluate_configurations(plan: PlanSpec, all_ov, all_cfg, pool, target: float, base_raw: dict, base_sc,
              base_dict: dict, cache: ResultCache, use_cache: bool, setup_factory, *,
              backend: str, jobs: int, address, progress, n_cand: int,
              prune: bool) -> dict[str, Any]:
    """Price every configuration, evaluate the ones the cache does not hold (one task each,
    through the executor) and store the new results; returns ``row_task`` (each row's cache
    key), ``meta`` (GPU, price, TP per row), ``results`` (key -> result), ``new`` and
    ``bound`` (the dominance bound in USD per hour, :mod:`simulator.planner.prune`; None:
    no pruning). With ``prune`` the baseline and last known-good run first; the candidates
    then carry the bound (their cache keys too)."""
    base_gpu = get_gpu(base_sc.hardware.gpu).name
    scenario_price = base_raw.get("cost", {}).get("usd_per_gpu_hour") if isinstance(
        base_raw.get("cost"), dict) else None
    fid = factory_id(setup_factory)
    search_d = plan.search.model_dump()
    gates_d = plan.gates.model_dump()
    # deployment-level gates are checked on the plan rows: they do not change a candidate's
    # simulations, so they stay out of its cache key
    gates_key = {k: v for k, v in gates_d.items() if k not in DEPLOYMENT_GATES}
    pool_fp = specs_fingerprint(pool)
    tasks, task_keys, row_task, meta = [], [], [], []
    key_to_task: dict[str, int] = {}
    results_by_key: dict[str, dict] = {}
    for i, (ov, cfg) in enumerate(zip(all_ov, all_cfg)):
        gpu = _gpu_of(cfg, i, n_cand, ov)
        gname = gpu.name
        price, price_src = _price(gpu, plan.prices, scenario_price, base_gpu)
        if not price and price_src.endswith(" profile"):
            raise PlanError(
                f"{_who(i, n_cand, ov)}: hardware.gpu {gname} has no price (its profile "
                f"has none), so it would rank as free; set prices.{gname} in the plan (or "
                "cost.usd_per_gpu_hour in the base scenario for its own GPU)")
        cfg = json.loads(json.dumps(cfg))
        cfg["cost"] = {**cfg.get("cost", {}), "usd_per_gpu_hour": price}
        meta.append({"gpu": gname, "price": price, "price_source": price_src,
                     "tp": int(cfg["cluster"]["tensor_parallel_size"]),
                     "gpus_per_replica": int(cfg["cluster"]["tensor_parallel_size"])
                     * int(cfg["cluster"].get("pipeline_parallel_size") or 1)})
        key = cache_key("candidate", {
            "scenario": scenario_identity(cfg), "inputs": inputs_fingerprint(cfg),
            "pool": pool_fp, "search": search_d,
            "gates": gates_key, "slo": base_dict["slo"], "target": target,
            "headroom": plan.headroom, "max_extra": plan.max_extra_replicas, "setup": fid})
        row_task.append(key)
        if key in key_to_task or key in results_by_key:
            continue
        key_to_task[key] = len(tasks)
        task_keys.append(key)
        tasks.append({"index": i, "scenario": cfg, "search": search_d, "gates": gates_d,
                      "target_rate_rps": target, "headroom": plan.headroom,
                      "max_extra_replicas": plan.max_extra_replicas,
                      "cache_dir": str(cache.folder), "use_cache": use_cache,
                      "setup_factory": setup_factory, "factory_id": fid})
    run = {"cache": cache, "pool": pool, "backend": backend, "jobs": jobs,
           "address": address, "progress": progress, "all_cfg": all_cfg,
           "done": 0, "total": len(tasks), "shown": set()}  # shown: each warning once
    new, bound = [], None
    pilot = set(row_task[n_cand:])  # the baseline's and last known-good's evaluations
    phases = ([[j for j, k in enumerate(task_keys) if k in pilot],
               [j for j, k in enumerate(task_keys) if k not in pilot]] if prune
              else [list(range(len(tasks)))])
    for ph, idx in enumerate(phases):
        if ph == 1:
            bound = dominance_bound([results_by_key[row_task[i]] for i in
                                     range(n_cand, len(row_task))],
                                    [m["gpus_per_replica"] for m in meta[n_cand:]],
                                    [m["price"] for m in meta[n_cand:]])
            for j in idx if bound is not None else []:
                tasks[j]["prune_usd_per_hour"] = bound
                task_keys[j] = cache_key("candidate_pruned", {"key": task_keys[j],
                                                              "bound": bound})
                row_task[tasks[j]["index"]] = task_keys[j]
        new += _run_phase([tasks[j] for j in idx], [task_keys[j] for j in idx],
                          results_by_key, run)
    return {"row_task": row_task, "meta": meta, "results": results_by_key, "new": new,
            "bound": bound}


def _run_phase(tasks: list[dict], keys: list[str], results_by_key: dict, run: dict) -> list:
    """Evaluate ``tasks`` (cache hits first, the rest through the executor, slowest
    first), store their results under ``keys``; returns the new results."""
    cache, todo, todo_keys = run["cache"], [], []
    for t, key in zip(tasks, keys):
        hit = cache.get(key)
        if hit is not None:
            results_by_key[key] = {**hit, "num_simulations": 0, "cached": True}
            reemit(hit.get("warnings"), run["shown"])  # what the evaluation that made it warned
        else:
            todo.append(t)
            todo_keys.append(key)
    run["done"] += len(tasks) - len(todo)
    run["cached"] = run.get("cached", 0) + len(tasks) - len(todo)
    done0, prog = run["done"], run["progress"]
    if len(tasks) > len(todo):  # cache hits count as done (a fully cached plan runs nothing)
        report_cached(prog, done0, run["total"], run["cached"])

    kept = [0]  # candidates of this phase whose results are stored (a stop's note counts them)

    def keep(j: int, r: dict) -> None:
        # stored as each candidate finishes: an interrupted plan resumes from the cache
        for k, v in (r.pop("new_cache", None) or {}).items():
            cache.put(k, v)
        r["cached"] = False
        if r.get("failed_gates") != ["error"]:
            cache.put(todo_keys[j], r)
        kept[0] += 1  # finished once stored, even if a stop comes before the executor counts it
        results_by_key[todo_keys[j]] = r
        reemit(r.get("warnings"), run["shown"])

    new = run_tasks(evaluate_candidate, todo, shared={"pool": run["pool"]},
                    backend=run["backend"], jobs=run["jobs"], address=run["address"],
                    progress=(None if prog is None else
                              lambda d, _n: report_cached(prog, done0 + d, run["total"],
                                                 run["cached"])),
                    order=longest_first([run["all_cfg"][t["index"]] for t in todo]),
                    on_result=keep,
                    stop_note=lambda _d, _n: (
                        f"{done0 + kept[0]} of {run['total']} plan candidates finished "
                        f"({run['cached']} of them from the cache); the finished ones are "
                        f"cached in {cache.folder}: a rerun uses them"))
    run["done"] += len(todo)
    return new


def longest_first(configs: list[dict]) -> list[int]:
    """Task order for a pool: the slowest replicas first (longest-processing-time first).

    A candidate's evaluation time grows with the replicas its confirmation simulates and the
    probes a slow replica needs; both scale with the inverse of the replica's HBM bandwidth
    (decode is memory-bound): ``1 / (hbm_bandwidth_bytes_per_s x tensor_parallel_size x
    pipeline_parallel_size)``. Ties keep the configurations' order.
    """
    def speed(cfg: dict) -> float:
        c = cfg["cluster"]
        return (get_gpu(cfg["hardware"]["gpu"]).hbm_bandwidth_bytes_per_s
                * int(c["tensor_parallel_size"]) * int(c.get("pipeline_parallel_size") or 1))

    return sorted(range(len(configs)), key=lambda i: (speed(configs[i]), i))
