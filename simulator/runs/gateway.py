"""The gateway over several pools (``pools:``): request classes to pools, P/D handoff, merge.

A scenario with ``pools`` runs each pool as its own cluster (its replicas, router state and
round-robin counter, scheduler, KV cache and step-time model) and merges what they did into
one set of outputs, every request of the workload accounted for exactly once.

- **Request classes.** A request goes to the first ``mixed`` or ``prefill`` pool whose
  ``match`` names its tenant or slice, else to the pool without ``match``.
- **Independence.** Pools share no state, so each is simulated on its own: exact for mixed
  pools. For a prefill -> decode pair the decode side depends on the prefill side (the KV
  arrives after the first token) but not the reverse: the prefill pool runs first, then the
  decode pool on the handed-over requests. What this leaves out: a decode pool that is
  short of blocks does not hold KV back in the prefill pool's memory (the prefill frees the
  request's blocks after the first token, as vLLM's P/D connectors do once the KV is pulled).
- **P/D handoff** (DistServe, Splitwise, vLLM disaggregated prefill): the prefill pool serves
  the request with ``max_tokens = 1`` and emits the first token (TTFT is measured there); the
  KV of the prompt crosses ``kv_transfer`` (:func:`simulator.topology.transfer.kv_transfer_time_s`);
  the decode pool then admits the request with its prompt's KV counted as computed and its
  first token emitted (it allocates the blocks of prompt + first token, so it admits only
  when it has them) and generates the remaining ``output - 1`` tokens as decode steps.
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from simulator.base.gc_freeze import gc_frozen
from simulator.base.outdir import make_output_folder
from simulator.base.request import RequestSpec
from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.cluster.setup import build_setup
from simulator.metrics.fleet import replica_seconds
from simulator.metrics.latency import latency_stats
from simulator.metrics.summary import cost_fields, json_safe, summarize
from simulator.metrics.tables_io import check_table_format
from simulator.runs.energy import gateway_energy
from simulator.runs.scenario import (
    RunResult,
    add_phase_cost,
    resolve_outdir,
    run_scenario,
    scenario_dict,
    write_run_folder,
)
from simulator.scenario.config import POOL_SECTIONS, PoolConfig, Scenario, validate_scenario
from simulator.topology.transfer import Link, kv_transfer_time_s
from simulator.workload import WorkloadWarning, load_workload

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

@dataclass
class PoolRun:
    """One pool's simulation: its scenario, its result and the workload ids it served."""

    pool: PoolConfig
    scenario: Scenario
    result: RunResult
    request_ids: np.ndarray  # workload request id of the pool run's request i


@dataclass
class GatewayResult:
    """What a multi-pool run produced (the merged view plus every pool's own run)."""

    scenario: Scenario
    summary: dict
    requests: pd.DataFrame
    steps: pd.DataFrame
    pools: dict[str, PoolRun] = field(default_factory=dict)
    outdir: Path | None = None


def pool_scenario(scenario: Scenario, pool: PoolConfig) -> Scenario:
    """The single-pool scenario of ``pool``: the scenario's sections, those the pool states
    replaced whole, no ``pools``; named ``<scenario>-<pool>``."""
    raw = json.loads(scenario.model_dump_json(exclude={"pools"}))
    for key in POOL_SECTIONS:
        val = getattr(pool, key)
        if val is not None:
            raw[key] = val if isinstance(val, str) else json.loads(val.model_dump_json())
    raw["name"] = f"{scenario.name}-{pool.name}"
    return validate_scenario(raw, source=f"pools[{pool.name}]")


def assign_pools(scenario: Scenario, specs: list[RequestSpec]) -> dict[str, list[RequestSpec]]:
    """Split the workload by request class into the entry pools (``mixed`` and ``prefill``).

    Raises
    ------
    ValueError
        When a request matches no pool and no entry pool lacks ``match``.
    """
    entry = [p for p in scenario.pools if p.role != "decode"]
    open_pools = [p.name for p in entry if p.match is None]
    if len(open_pools) > 1:
        raise ValueError(f"pools: {', '.join(open_pools)} have no match: every request no "
                         f"match takes goes to the first ({open_pools[0]}), so "
                         f"{', '.join(open_pools[1:])} would never get one; give them a match "
                         "(tenants or slices)")
    default = open_pools[0] if open_pools else None
    rules = [(p.name, set(p.match.tenants), set(p.match.slices)) for p in entry if p.match]
    out: dict[str, list[RequestSpec]] = {p.name: [] for p in entry}
    for s in specs:
        name = next((n for n, ten, sl in rules if s.tenant in ten or s.slice in sl), default)
        if name is None:
            raise ValueError(f"pools: request {s.request_id} (tenant {s.tenant!r}, slice "
                             f"{s.slice!r}) matches no pool's match and no pool lacks match; "
                             f"entry pools: {', '.join(out)}")
        out[name].append(s)
    tenants, slices = {s.tenant for s in specs}, {s.slice for s in specs}
    for n, ten, sl in rules:
        unseen = sorted(map(str, (ten - tenants) | (sl - slices)))
        if unseen and not out[n]:  # a typo, or a window without that class: say so
            warnings.warn(WorkloadWarning(
                f"pools: pool {n} matches {', '.join(unseen)}, which no request of the "
                f"workload carries (tenants: {', '.join(sorted(map(str, tenants)))}; slices: "
                f"{', '.join(sorted(map(str, slices)))}): it serves no request"), stacklevel=2)
    return out


def _dense(specs: list[RequestSpec]) -> tuple[list[RequestSpec], np.ndarray]:
    """``specs`` sorted by arrival with ids 0..n-1, and the original id of each."""
    order = sorted(specs, key=lambda s: (s.arrival_time_s, s.request_id))
    ids = np.array([s.request_id for s in order], dtype=np.int64)
    return [dataclasses.replace(s, request_id=i) for i, s in enumerate(order)], ids


def _run_pool(scenario: Scenario, pool: PoolConfig, specs: list[RequestSpec],
              base_dir: Path | None, setup=None) -> PoolRun:
    """Simulate one pool's share of the requests (``setup``: the pool's replica setup when
    already built, see :func:`check_decode_capacity`); an error names the pool's key path
    (``pools.<index> (<name>): ...``), since the single-pool scenario's key paths are the
    pool's."""
    idx = next(i for i, p in enumerate(scenario.pools) if p.name == pool.name)
    try:
        sub = pool_scenario(scenario, pool)
        dense, ids = _dense(specs)
        res = run_scenario(sub, base_dir, specs=dense, write=False, figures=False,
                           setup=setup)
    except ValueError as e:
        raise ValueError(f"pools.{idx} ({pool.name}): {e}") from None
    return PoolRun(pool, sub, res, ids)


def check_decode_capacity(scenario: Scenario, dpool: PoolConfig, part: list[RequestSpec],
                          base_dir: Path | None):
    """Refuse a disaggregated run whose decode pool cannot hold even the shortest handed-over
    prompt (every request would be prefilled, transferred, then rejected); return the decode
    pool's replica setup (built for the check, reused by its run), ``None`` without requests.

    A replica's KV capacity is ``num_usable_blocks x block_size`` tokens; a request needs
    its prompt plus its first token there. Requests larger than the capacity while others fit
    are simulated and reported rejected (``kv_capacity``) by the decode pool, as vLLM would.

    Raises
    ------
    ValueError
        Naming the pool, its capacity in tokens and the shortest prompt.
    """
    if not part:
        return None
    idx = next(i for i, p in enumerate(scenario.pools) if p.name == dpool.name)
    try:
        setup = build_setup(pool_scenario(scenario, dpool), base_dir)
    except ValueError as e:
        raise ValueError(f"pools.{idx} ({dpool.name}): {e}") from None
    cap_tokens = setup.num_usable_blocks * setup.block_size
    need = min(s.num_prompt_tokens + 1 for s in part)
    if cap_tokens < need:
        raise ValueError(
            f"pools.{idx} ({dpool.name}): the decode pool's KV cache holds {cap_tokens:,} "
            f"tokens per replica ({setup.num_usable_blocks:,} blocks x {setup.block_size}), "
            f"fewer than the shortest prompt handed to it ({need:,} tokens with its first "
            "token): every request would be rejected after its prefill; give it more blocks "
            "(kv_cache.num_gpu_blocks, gpu_memory_utilization) or a larger GPU")
    return setup


def check_defaults(scenario: Scenario) -> None:
    """Check every pool's model and GPU names, and the top-level ``model`` and
    ``hardware.gpu`` (the pools' defaults: an unknown name is an error even when every pool
    states its own, so a typo cannot pass silently), before any request is read.

    Raises
    ------
    ValueError
        Naming the key (``model (the pools' default): ...``, ``pools.0 (chat): ...``).
    """
    def check(where: str, model: str, gpu: str) -> None:
        try:
            get_model(model)
            get_gpu(gpu)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None

    check("model / hardware.gpu (the pools' defaults)", scenario.model, scenario.hardware.gpu)
    for i, p in enumerate(scenario.pools or []):
        check(f"pools.{i} ({p.name})", p.model or scenario.model,
              (p.hardware or scenario.hardware).gpu)


def prefill_copy(spec: RequestSpec) -> RequestSpec:
    """What a prefill pool serves: the request with one output token (``max_tokens = 1``)."""
    return dataclasses.replace(spec, num_output_tokens=1, max_tokens=1)


def handoff_times_s(prefill: PoolRun, link: Link, layerwise: bool) -> pd.DataFrame:
    """KV transfer of every request the prefill pool gave its first token.

    Returns
    -------
    DataFrame
        ``request_id`` (workload id), ``first_token_time_s``, ``kv_transfer_s`` and
        ``decode_arrival_time_s`` (= first token + transfer), seconds.
    """
    import pandas as pd
    req = prefill.result.requests
    done = req[req["status"] == "completed"]
    model = get_model(prefill.scenario.model)
    per_tok = model.kv_bytes_per_token(prefill.result.setup.kv_cache_dtype, 1)
    prefill_s = (done["first_token_time_s"] - done["first_scheduled_time_s"]).to_numpy(float)
    prompts = done["num_prompt_tokens"].to_numpy(np.int64)
    xfer = np.array([kv_transfer_time_s(int(p), per_tok, link, num_layers=model.num_layers,
                                        prefill_s=float(c), layerwise=layerwise)
                     for p, c in zip(prompts, prefill_s)], dtype=float)
    t1 = done["first_token_time_s"].to_numpy(float)
    return pd.DataFrame({"request_id": prefill.request_ids[done["request_id"].to_numpy()],
                         "first_token_time_s": t1, "kv_transfer_s": xfer,
                         "decode_arrival_time_s": t1 + xfer})


def decode_copies(hand: pd.DataFrame, by_id: dict[int, RequestSpec]) -> list[RequestSpec]:
    """The decode pool's requests (only those with more than one output token): arriving when
    their KV has crossed the link, the prompt's KV transferred (allocated on admission, not
    computed) and the first token emitted at the prefill pool's first-token time, so the
    decode side generates the other ``output - 1`` tokens and measures the first gap from
    the real first token."""
    out = []
    cols = (hand["request_id"].to_numpy(), hand["decode_arrival_time_s"].to_numpy(),
            hand["first_token_time_s"].to_numpy())
    for rid, t, t1 in zip(*cols):
        s = by_id[int(rid)]
        if s.num_output_tokens <= 1:
            continue
        out.append(dataclasses.replace(
            s, arrival_time_s=float(t), num_kv_transferred_tokens=s.num_prompt_tokens,
            handoff_token_time_s=float(t1), cancel_after_s=None, prefix_hash_ids=None))
    return out


def _pool_rows(run: PoolRun) -> pd.DataFrame:
    df = run.result.requests.copy()
    # an empty pool's frame has an untyped (float/object) id column: index as integers
    df["request_id"] = run.request_ids[df["request_id"].to_numpy().astype(np.int64)]
    df["pool"] = run.pool.name
    return df


def merge_disaggregated(prefill: PoolRun, decode: PoolRun, hand: pd.DataFrame,
                        by_id: dict[int, RequestSpec]) -> pd.DataFrame:
    """One row per request of a prefill -> decode pair: TTFT from the prefill pool, the rest
    of the tokens, the finish and the final status from the decode pool; plus
    ``decode_pool``, ``decode_replica_id``, ``kv_transfer_s``, ``prefill_queue_s`` and
    ``decode_queue_s`` (seconds, NaN where not reached)."""
    df = _pool_rows(prefill).set_index("request_id")
    df["num_output_tokens"] = [by_id[int(i)].num_output_tokens for i in df.index]
    df["prefill_queue_s"] = df["first_scheduled_time_s"] - df["arrival_time_s"]
    df["kv_transfer_s"] = hand.set_index("request_id")["kv_transfer_s"].reindex(df.index)
    dec = _pool_rows(decode).set_index("request_id")
    df["decode_pool"] = decode.pool.name
    df["decode_replica_id"] = dec["replica_id"].reindex(df.index)
    arrival = dec["arrival_time_s"]
    df["decode_queue_s"] = (dec["first_scheduled_time_s"] - arrival).reindex(df.index)
    idx = dec.index
    df.loc[idx, "status"] = dec["status"]
    df.loc[idx, "reject_reason"] = dec["reject_reason"]
    df.loc[idx, "num_emitted_tokens"] = dec["num_emitted_tokens"]
    for col in ("finish_time_s", "exit_time_s"):
        df.loc[idx, col] = dec[col]
    df.loc[idx, "num_preemptions"] = df.loc[idx, "num_preemptions"] + dec["num_preemptions"]
    return df.reset_index()


def _itl(runs: list[PoolRun]) -> tuple[np.ndarray, np.ndarray]:
    """Every pool's inter-token gaps (a decode pool's include the first, from the prefill
    pool's first token)."""
    return (np.concatenate([r.result.itl_values_s for r in runs]),
            np.concatenate([r.result.itl_weights for r in runs]))


def run_gateway(scenario: Scenario, base_dir: Path | None = None, *,
                specs: list[RequestSpec] | None = None, write: bool = True,
                outdir: str | Path | None = None, figures: bool = True,
                table_format: str = "parquet") -> GatewayResult:
    """Simulate a multi-pool scenario (see the module docstring) and merge its outputs
    (``requests`` and ``steps`` in ``table_format``: ``parquet`` or ``csv``, full precision).

    Raises
    ------
    ValueError
        A request no pool serves (:func:`assign_pools`); a prefill and a decode pool with
        different models (their KV would not be interchangeable).
    """
    check_table_format(table_format)
    check_defaults(scenario)
    if specs is None:
        specs = load_workload(scenario.workload, scenario.seed, base_dir)
    by_id = {s.request_id: s for s in specs}
    pools = {p.name: p for p in scenario.pools}
    runs: dict[str, PoolRun] = {}
    rows = []
    for name, part in assign_pools(scenario, specs).items():
        pool = pools[name]
        if pool.role == "mixed":
            runs[name] = _run_pool(scenario, pool, part, base_dir)
            rows.append(_pool_rows(runs[name]))
            continue
        dpool = pools[pool.decode_pool]
        if (pool.model or scenario.model) != (dpool.model or scenario.model):
            raise ValueError(f"pools: prefill pool '{name}' and decode pool '{dpool.name}' "
                             "serve different models; KV can only move between pools of one "
                             "model")
        dsetup = check_decode_capacity(scenario, dpool, part, base_dir)
        pre = runs[name] = _run_pool(scenario, pool, [prefill_copy(s) for s in part],
                                     base_dir)
        kt = pool.kv_transfer
        hand = handoff_times_s(pre, Link(kt.bandwidth_bytes_per_s, kt.latency_s, kt.kind),
                               kt.layerwise)
        dec = _run_pool(scenario, dpool, decode_copies(hand, by_id), base_dir, dsetup)
        runs[dpool.name] = dec
        merged = merge_disaggregated(pre, dec, hand, by_id)
        rows.append(merged)
    with gc_frozen():  # the pools' objects: out of the collector's passes (base.gc_freeze)
        return _finish(scenario, runs, rows, len(specs), write, outdir, figures, table_format)


def _pool_summary(run: PoolRun) -> dict:
    """A pool's own figures: requests, replicas, requests per replica (its router's counts),
    latency statistics, batching and KV use, GPUs and cost, and the sections its run has
    (``speculative``, ``parallel_sampling``, pipeline figures, ``phase_cost``, ``degrade``,
    ``provenance``, ``perf_model`` and ``bounds``)."""
    sm = run.result.summary
    req = run.result.requests
    counts = req["replica_id"].value_counts().sort_index()
    keep = ("num_requests", "num_completed", "num_rejected", "num_cancelled", "num_unfinished",
            "ttft_s", "tpot_s", "e2e_latency_s", "queue_delay_s", "mean_batch_size",
            "mean_kv_cache_usage", "mean_num_waiting", "num_gpus", "usd_per_gpu_hour",
            "cost_usd", "gpu_hours", "num_gpu_blocks", "kv_cache_tokens",
            "prefix_cache_hit_rate")
    out = {k: sm.get(k) for k in keep}
    # the pool's own feature sections and its latency sources, where its run has them
    for k in ("speculative", "parallel_sampling", "pipeline_bubble_fraction",
              "pipeline_parallel_size", "pipeline_stages", "phase_cost", "provenance",
              "perf_model", "degrade", "bounds", "autoscale"):
        if sm.get(k) is not None:
            out[k] = sm[k]
    sc = run.scenario
    out.update(role=run.pool.role, model=sc.model, gpu=sc.hardware.gpu,
               num_replicas=sc.cluster.num_replicas,
               tensor_parallel_size=sc.cluster.tensor_parallel_size, router=sc.cluster.router,
               requests_per_replica={int(k): int(v) for k, v in counts.items()})
    return out


def _pool_gpu_seconds(r: PoolRun, t0: float, t1: float) -> float:
    """GPU-seconds pool ``r`` holds within the merged window ``[t0, t1]``: its replicas over
    time (autoscaled), else its GPUs throughout."""
    spans, sc = r.result.sim.replica_spans, r.scenario
    return (replica_seconds(spans, t0, t1) * sc.gpus_per_replica if spans is not None
            else sc.num_gpus * (t1 - t0))


def _merged_window_cost(summary: dict, runs: dict[str, PoolRun]) -> None:
    """Each pool's ``gpu_hours`` and ``cost_usd``, and its ``phase_cost`` split of them, over
    the merged window (in place, in ``summary["pools"]``): the deployment holds every pool's
    GPUs for the whole run, and the pools' figures then add up to the merged ones (a pool's
    own run's window starts at its first request and ends at its last, shorter than the
    deployment's)."""
    t0, t1 = summary["window_start_s"], summary["window_end_s"]
    for name, r in runs.items():
        pool = summary["pools"][name]
        g = _pool_gpu_seconds(r, t0, t1)
        pool["gpu_hours"] = g / 3600.0
        pool["cost_usd"] = g / 3600.0 * (r.result.setup.usd_per_gpu_hour or 0.0)
        if pool.get("phase_cost") is not None:  # its split of that cost (prefill / decode)
            own = {**r.result.summary, "window_start_s": t0, "window_end_s": t1,
                   "duration_s": t1 - t0, "gpu_hours": pool["gpu_hours"],
                   "cost_usd": pool["cost_usd"]}
            add_phase_cost(own, r.result.steps, r.result.setup.perf,
                           r.scenario.gpus_per_replica)
            pool["phase_cost"] = own["phase_cost"]


def _autoscaled_cost(summary: dict, runs: dict[str, PoolRun]) -> None:
    """With an autoscaled pool, the merged GPU-hours and cost are each pool's GPU-seconds held
    within the merged window (its replicas over time; a fixed pool's GPUs throughout) at its
    own price (in place; unchanged when no pool autoscales)."""
    if all(r.result.sim.replica_spans is None for r in runs.values()):
        return
    t0, t1 = summary["window_start_s"], summary["window_end_s"]
    gpu_s = usd = 0.0
    peak = 0
    for r in runs.values():
        spans, sc = r.result.sim.replica_spans, r.scenario
        g = _pool_gpu_seconds(r, t0, t1)
        gpu_s += g
        usd += g / 3600.0 * (r.result.setup.usd_per_gpu_hour or 0.0)
        peak += (r.result.summary.get("num_gpus") or 0) if spans is not None else sc.num_gpus
    summary.update(cost_fields(peak, gpu_s / 3600.0, usd, summary.get("num_input_tokens") or 0,
                               summary.get("num_output_tokens") or 0))


def _finish(scenario: Scenario, runs: dict[str, PoolRun], rows: list[pd.DataFrame],
            num_specs: int, write: bool, outdir, figures: bool,
            table_format: str = "parquet") -> GatewayResult:
    import pandas as pd
    requests = pd.concat(rows, ignore_index=True).sort_values(
        "request_id", kind="stable").reset_index(drop=True)
    if len(requests) != num_specs or requests["request_id"].duplicated().any():
        raise RuntimeError(f"gateway accounting: {len(requests)} request rows for "
                           f"{num_specs} workload requests")  # an internal invariant
    steps = pd.concat([r.result.steps.assign(pool=name) for name, r in runs.items()],
                      ignore_index=True)
    num_gpus = sum(r.scenario.num_gpus for r in runs.values())
    usd_h = sum(r.scenario.num_gpus * (r.result.setup.usd_per_gpu_hour or 0.0)
                for r in runs.values())
    itl_v, itl_w = _itl(list(runs.values()))
    summary = summarize(requests, steps, itl_v, itl_w, slo=scenario.slo.model_dump(),
                        usd_per_gpu_hour=usd_h / num_gpus if num_gpus else 0.0,
                        num_gpus=num_gpus,
                        sim_wall_s=sum(r.result.sim.sim_wall_s for r in runs.values()))
    _autoscaled_cost(summary, runs)
    summary["pools"] = {name: _pool_summary(r) for name, r in runs.items()}
    _merged_window_cost(summary, runs)
    summary["energy"] = json_safe(gateway_energy(scenario, runs, summary))
    degrade = [{**d, "name": f"{name}: {d['name']}"} for name, r in runs.items()
               for d in r.result.summary.get("degrade") or []]  # each pool's own policies
    if degrade:
        summary["degrade"] = degrade
    summary["prefix_cache_hit_tokens"] = int(sum(
        r.result.summary.get("prefix_cache_hit_tokens", 0) for r in runs.values()))
    if "kv_transfer_s" in requests:
        summary["disaggregation"] = {
            "kv_transfer_s": latency_stats(requests["kv_transfer_s"].dropna().to_numpy()),
            "prefill_queue_s": latency_stats(requests["prefill_queue_s"].dropna().to_numpy()),
            "decode_queue_s": latency_stats(requests["decode_queue_s"].dropna().to_numpy())}
    res = GatewayResult(scenario, summary, requests, steps, runs)
    if write:
        res.outdir = write_gateway_outputs(res, outdir, figures=figures,
                                           table_format=table_format)
    return res


def write_gateway_outputs(res: GatewayResult, outdir=None, *, figures: bool = True,
                          table_format: str = "parquet") -> Path:
    """Write ``summary.json`` (with ``pools`` and ``disaggregation``), ``requests`` (with
    ``pool`` and the P/D columns) and ``steps`` (with ``pool``) as ``table_format`` files
    (:func:`simulator.metrics.tables_io.write_run_tables`), ``scenario.yaml`` and the run
    report."""
    out = make_output_folder(resolve_outdir(res.scenario, outdir))
    sd = scenario_dict(res.scenario)
    write_run_folder(out, res.summary, res.requests, res.steps, sd, sd,
                     title=f"servesim run: {res.scenario.name}", figures=figures,
                     table_format=table_format)
    return out
