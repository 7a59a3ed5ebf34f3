"""Setting up a replica from a scenario: model and GPU, memory plan, performance model,
scheduler configuration, and the degrade fallback's own set-up.

What a replica is made of is :class:`~simulator.cluster.replica.ReplicaSetup`; this module
builds it, checks that it can serve (tensor parallelism, memory) and warns about what a
scenario leaves unpriced or out of reach. The SimPy loop that runs replicas is
:mod:`simulator.engine.loop`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path

from simulator.catalog.hardware import GPUSpec, get_gpu
from simulator.catalog.models import ModelSpec, get_model
from simulator.cluster.replica import ReplicaSetup
from simulator.kv.stages import plan_pipeline_memory
from simulator.kv.tiers import tier_capacity_blocks
from simulator.perf import build_perf_model, get_engine_profile
from simulator.perf.pipeline import PipelinePerfModel
from simulator.perf.power import apply_power_cap
from simulator.scenario.config import Scenario, ScenarioError
from simulator.scenario.overrides import blame_message
from simulator.scheduling.limits import SchedulerLimits


def resolve_kv_dtype(scenario: Scenario) -> str:
    d = scenario.kv_cache.kv_cache_dtype
    if d == "auto":  # vLLM: "auto" = the model's dtype; our weights are bf16 or fp8, KV bf16
        return "bf16"
    return "bf16" if d == "fp16" else d


def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """Megatron-style TP splits attention heads evenly; KV heads are split or replicated
    (vLLM's rule: heads % TP == 0, and KV heads % TP == 0 or TP % KV heads == 0).

    Raises
    ------
    ValueError
        When ``tp`` cannot shard ``model``.
    """
    h, kv = model.num_attention_heads, model.num_kv_heads
    if h % tp or (kv % tp and tp % kv):
        ok = [t for t in (1, 2, 4, 8, 16) if h % t == 0 and (kv % t == 0 or t % kv == 0)]
        raise ValueError(f"cluster.tensor_parallel_size={tp} cannot shard {model.name} "
                         f"({h} attention heads, {kv} KV heads); allowed: "
                         + ", ".join(map(str, ok)))


def with_stated_link(gpu: GPUSpec, link) -> GPUSpec:
    """``gpu`` with the deployment's stated GPU-to-GPU link (``hardware.interconnect``) in place
    of the spec's; marked ``link_stated`` so the all-reduce uses the link model, not tables
    measured on the spec's node."""
    if link is None or all(getattr(link, k) is None for k in ("kind", "bandwidth_bytes_per_s",
                                                               "latency_s", "p2p")):
        return gpu
    upd = {"link_stated": True}
    if link.kind is not None:
        upd["interconnect_kind"] = link.kind
        upd["interconnect"] = f"{link.kind} (stated by the scenario)"
    if link.bandwidth_bytes_per_s is not None:
        upd["interconnect_bandwidth_bytes_per_s"] = float(link.bandwidth_bytes_per_s)
        upd["link_bandwidth_stated"] = True
    if link.latency_s is not None:
        upd["interconnect_latency_s"] = float(link.latency_s)
    if link.p2p is not None:
        upd["p2p"] = bool(link.p2p)
    return dataclasses.replace(gpu, **upd)


class LinkReachWarning(UserWarning):
    """A tensor-parallel group larger than the GPUs the spec's interconnect joins (an NVLink
    bridge pairs two H100 PCIe cards), costed on that interconnect all the same."""


def warn_link_reach(gpu: GPUSpec, tp: int) -> None:
    """Warn (:class:`LinkReachWarning`) when ``tp`` GPUs exceed ``gpu.interconnect_max_gpus``
    and the scenario did not state the link (``hardware.interconnect``): the all-reduce is then
    costed at the spec's bridge bandwidth, which a group that large does not have."""
    reach = gpu.interconnect_max_gpus
    if reach and tp > reach and not gpu.link_stated:
        warnings.warn(LinkReachWarning(
            f"{gpu.name}: the spec's interconnect joins {reach} GPUs "
            f"({gpu.interconnect or gpu.link_kind}) but "
            f"cluster.tensor_parallel_size is {tp}; the all-reduce is costed at the spec's "
            f"{gpu.interconnect_bandwidth_bytes_per_s / 1e9:g} GB/s all the same. State the link "
            f"the group crosses, e.g. --set hardware.interconnect.kind=pcie --set "
            f"hardware.interconnect.bandwidth_bytes_per_s={gpu.host_link_bandwidth_bytes_per_s:g}"
            f" ({gpu.host_link or 'the host link'})"), stacklevel=2)


class SchedulerBudgetWarning(UserWarning):
    """A token budget per step below the sequences per step: vLLM refuses such a
    configuration (``SchedulerConfig``: "max_num_batched_tokens must be greater than or equal
    to max_num_seqs"); servesim simulates it all the same."""


def warn_scheduler_budget(scenario: Scenario) -> None:
    """Warn (:class:`SchedulerBudgetWarning`) when a continuous-batching scenario's
    ``max_num_batched_tokens`` is below its ``max_num_seqs``, which vLLM refuses at start-up
    (vllm/config SchedulerConfig verification)."""
    sc = scenario.scheduler
    if sc.policy == "continuous" and sc.max_num_batched_tokens < sc.max_num_seqs:
        warnings.warn(SchedulerBudgetWarning(
            f"scheduler.max_num_batched_tokens {sc.max_num_batched_tokens} is below "
            f"scheduler.max_num_seqs {sc.max_num_seqs}: vLLM refuses this at start-up "
            "(max_num_batched_tokens must be >= max_num_seqs); simulated all the same"),
            stacklevel=2)


#: block sizes vLLM's ``CacheConfig`` accepts (``BlockSize``, vllm/config/cache.py, v0.11+;
#: 256 added after 128 in earlier versions)
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


class BlockSizeWarning(UserWarning):
    """A paged KV cache's ``block_size`` that vLLM's ``CacheConfig`` refuses (not one of
    :data:`VLLM_BLOCK_SIZES`); servesim simulates it all the same."""


def warn_block_size(scenario: Scenario) -> None:
    """Warn (:class:`BlockSizeWarning`) when a paged KV cache's ``block_size`` is not one of
    :data:`VLLM_BLOCK_SIZES`."""
    kvc = scenario.kv_cache
    if kvc.allocation == "paged" and kvc.block_size not in VLLM_BLOCK_SIZES:
        warnings.warn(BlockSizeWarning(
            f"kv_cache.block_size {kvc.block_size} is not one vLLM accepts ("
            + ", ".join(map(str, VLLM_BLOCK_SIZES)) + "); simulated all the same"),
            stacklevel=2)


class UnpricedGPUWarning(UserWarning):
    """A GPU whose profile has no sourced price (``usd_per_gpu_hour: 0``) and a scenario that
    states none (``cost.usd_per_gpu_hour``): every cost figure of the run is $0."""


def warn_unpriced(gpu: GPUSpec, scenario: Scenario) -> None:
    """Warn (:class:`UnpricedGPUWarning`) when neither the scenario nor the GPU's profile gives
    a price: the run's cost, cost per token and phase prices are then $0, not a measurement."""
    if scenario.cost.usd_per_gpu_hour is None and not gpu.usd_per_gpu_hour:
        warnings.warn(UnpricedGPUWarning(
            f"{gpu.name}: its profile has no price, so every cost figure is $0; set "
            f"cost.usd_per_gpu_hour (e.g. --set cost.usd_per_gpu_hour=2.0)"), stacklevel=2)


@contextlib.contextmanager
def unpriced_quiet():
    """Leave :class:`UnpricedGPUWarning` unsaid inside the block: for a setup whose cost is
    not reported (a replay compared on latency, an engine fit) or was warned about already
    (a fallback set on the primaries' GPU)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnpricedGPUWarning)
        yield


def _user_path(value: str, base_dir: Path | None) -> str:
    """A model/GPU given as a relative path is looked up next to the scenario file first."""
    if base_dir is not None and ("/" in value or value.endswith((".yaml", ".yml", ".json"))):
        p = Path(value).expanduser()
        if not p.is_absolute() and (base_dir / p).exists():
            return str(base_dir / p)
    return value


def _model_and_gpu(scenario: Scenario, base_dir: Path | None):
    """The scenario's model and GPU (catalog names or paths, tried against ``base_dir``
    first), with the tensor-parallel split checked.

    Raises
    ------
    ValueError
        Unknown model or GPU (the message starts with the key, ``model: `` or
        ``hardware.gpu: ``, and lists the known names), or a
        ``cluster.tensor_parallel_size`` that cannot shard the model.
    """
    model = _keyed("model", get_model, _user_path(scenario.model, base_dir))
    gpu = _keyed("hardware.gpu", get_gpu, _user_path(scenario.hardware.gpu, base_dir))
    gpu = apply_power_cap(gpu, scenario.hardware.power_cap_w, scenario.perf.source)
    check_tensor_parallel(model, scenario.cluster.tensor_parallel_size)
    return model, gpu


def _keyed(key: str, lookup, value: str):
    """``lookup(value)``, its error prefixed with the scenario key that named the value."""
    try:
        return lookup(value)
    except ValueError as e:
        raise ValueError(f"{key}: {e}") from None


@dataclass(frozen=True)
class _Planned:
    """What :func:`plan_replica_memory` resolves (the cheap part of :func:`build_setup`)."""

    model: ModelSpec
    gpu: GPUSpec
    tp: int
    kv_dtype: str
    weight_dtype: str
    draft: ModelSpec | None
    ep: int
    pp: int
    max_model_len: int
    memory: object


def plan_replica_memory(scenario: Scenario, base_dir: Path | None = None, *,
                        warn: bool = True) -> _Planned:
    """Resolve the model, GPU and draft model, check the parallel split and plan the memory
    of one replica, without building the performance model: the part of :func:`build_setup`
    that can refuse a scenario (``servesim compare`` runs it for every variant before running
    any).

    Parameters
    ----------
    scenario : Scenario
    base_dir : Path, optional
        The scenario file's folder (relative model / GPU spec paths are tried there first).
    warn : bool
        Emit the link-reach, scheduler-budget and unpriced-GPU warnings (off for a check whose
        setup is built again later).

    Raises
    ------
    ValueError
        Unknown model, GPU or engine profile (the message starts with its key), a split the
        model cannot take, or a model that does not fit (message says why).
    """
    model, gpu = _model_and_gpu(scenario, base_dir)
    if scenario.perf.source != "constant":  # the profile now, named by its key (cached)
        _keyed("perf.engine", get_engine_profile, _user_path(scenario.perf.engine, base_dir))
    gpu = with_stated_link(gpu, scenario.hardware.interconnect)
    tp = scenario.cluster.tensor_parallel_size
    if warn:
        warn_link_reach(gpu, tp)
        warn_scheduler_budget(scenario)
        warn_block_size(scenario)
        warn_unpriced(gpu, scenario)
    kv_dtype = resolve_kv_dtype(scenario)
    wdt = "bf16" if scenario.perf.weight_dtype == "fp16" else scenario.perf.weight_dtype
    sc = scenario.scheduler
    max_model_len = sc.max_model_len or model.max_position_embeddings
    draft = None
    spec = scenario.speculative
    if spec is not None and spec.method == "draft_model" and spec.draft_model:
        draft = _keyed("speculative.draft_model", get_model, spec.draft_model)
        if draft.vocab_size != model.vocab_size:
            raise ValueError(
                f"speculative.draft_model {draft.name} has a {draft.vocab_size:,}-token vocabulary "
                f"but {model.name} has {model.vocab_size:,}: a draft model must share the "
                "target's tokenizer (e.g. llama-3.2-1b for Llama-3.x targets)")
    ep = scenario.cluster.expert_parallel_size
    if scenario.cluster.enable_expert_parallel and not model.is_moe:
        raise ValueError(f"cluster.enable_expert_parallel: {model.name} is a dense model (no "
                         "experts to split); remove it or pick an MoE model")
    kvc = scenario.kv_cache
    if scenario.cluster.router == "prefix_affinity" and not kvc.enable_prefix_caching:
        raise ValueError("cluster.router: prefix_affinity routes to the replica holding the "
                         "longest cached prefix, but kv_cache.enable_prefix_caching is false "
                         "(no replica caches anything); enable it or pick another router")
    pp = scenario.cluster.pipeline_parallel_size
    # every pipeline stage planned, the fewest blocks kept (vLLM's rule; kv/stages.py)
    mem = plan_pipeline_memory(model, gpu.hbm_bytes, pipeline_parallel_size=pp,
                               tensor_parallel_size=tp,
                               gpu_memory_utilization=kvc.gpu_memory_utilization,
                               block_size=kvc.block_size, weight_dtype=wdt,
                               kv_cache_dtype=kv_dtype,
                               max_num_batched_tokens=sc.max_num_batched_tokens,
                               max_num_seqs=sc.max_num_seqs, draft_model=draft,
                               max_model_len=max_model_len,
                               kv_cache_memory_bytes=kvc.kv_cache_memory_bytes,
                               num_gpu_blocks_override=kvc.num_gpu_blocks,
                               expert_parallel_size=ep,
                               num_sms=gpu.num_sms, compute_capability=gpu.compute_capability)
    return _Planned(model, gpu, tp, kv_dtype, wdt, draft, ep, pp, max_model_len, mem)


def check_replica(scenario: Scenario, base: Path | None, source: str, overrides) -> None:
    """Resolve what a one-pool scenario's replicas need before any request is read (model,
    GPU, engine profile, parallel split, memory plan: :func:`plan_replica_memory`), so that
    a bad value is one line naming the scenario file, the flag that set it (if one did) and
    the key: ``s.yaml: hardware.gpu: unknown GPU 'x'; ...``.

    Parameters
    ----------
    scenario : Scenario
    base : Path, optional
        The scenario file's folder.
    source : str
        Names the scenario file in the message.
    overrides : list of Override
        The command's ``--set`` / ``--trace`` / ``--seed`` overrides
        (:func:`simulator.scenario.overrides.cli_overrides`).

    Raises
    ------
    ScenarioError
        ``SOURCE: [FLAG: ]MESSAGE``.
    """
    try:
        plan_replica_memory(scenario, base, warn=False)
    except ScenarioError:
        raise
    except ValueError as e:
        who = blame_message(str(e), overrides)
        raise ScenarioError(f"{source}: {f'{who}: ' if who else ''}{e}") from None


def build_setup(scenario: Scenario, base_dir: Path | None = None) -> ReplicaSetup:
    """Resolve model, GPU, performance model, memory plan and the scheduler's derived limits
    (:class:`~simulator.scheduling.limits.SchedulerLimits`).

    Parameters
    ----------
    scenario : Scenario
    base_dir : Path, optional
        The scenario file's folder: relative paths to a model ``config.json`` or a GPU spec
        YAML are tried there before the working directory.

    Raises
    ------
    ValueError
        Unknown model or GPU, or a model that does not fit (message says why).
    """
    p = plan_replica_memory(scenario, base_dir)
    model, gpu, tp, kv_dtype, wdt = p.model, p.gpu, p.tp, p.kv_dtype, p.weight_dtype
    draft, ep, pp, max_model_len, mem = p.draft, p.ep, p.pp, p.max_model_len, p.memory
    sc, spec = scenario.scheduler, scenario.speculative
    num_blocks = mem.num_gpu_blocks
    perf = build_perf_model(model, gpu, tp, wdt, kv_dtype, source=scenario.perf.source,
                            engine=_user_path(scenario.perf.engine, base_dir),
                            engine_version=scenario.perf.engine_version,
                            constant=scenario.perf.constant, max_num_seqs=sc.max_num_seqs,
                            max_num_batched_tokens=sc.max_num_batched_tokens,
                            num_speculative_tokens=(spec.num_speculative_tokens
                                                    if spec is not None else 0),
                            expert_parallel_size=ep,
                            expert_load_skew=scenario.cluster.expert_load_skew)
    if pp > 1:  # issue 11: stages + micro-batches in flight (simulator.perf.pipeline)
        perf = PipelinePerfModel(perf, pp, model.num_layers, model.hidden_size,
                                 gpu.interconnect_bandwidth_bytes_per_s
                                 or gpu.host_link_bandwidth_bytes_per_s,
                                 gpu.interconnect_latency_s)
    rules = getattr(getattr(perf, "engine", None), "scheduler", None)
    price = scenario.cost.usd_per_gpu_hour
    if price is None:
        price = gpu.usd_per_gpu_hour
    block_bytes = float(model.kv_bytes_per_token(kv_dtype, tp) * scenario.kv_cache.block_size)
    off = scenario.kv_cache.offload_tiers
    if off is not None:  # every tier holds at least one block (checked here, named)
        try:
            tier_capacity_blocks(off, block_bytes * tp)
        except ValueError as e:
            raise ValueError(f"{scenario.name}: {e}") from None
    limits = SchedulerLimits.for_replica(
        sc, scenario.kv_cache, max_model_len=max_model_len, block_bytes=block_bytes,
        host_link_bandwidth_bytes_per_s=gpu.host_link_bandwidth_bytes_per_s,
        reserve_full_isl=bool(rules is not None and rules.reserve_full_isl))
    return ReplicaSetup(model, gpu, tp, perf, mem, num_blocks, scenario.kv_cache.block_size,
                        limits, kv_dtype, wdt, price, extra={
                            "draft_model": draft,
                            "fallback": build_fallback_setup(scenario, base_dir)})


def fallback_scenario(scenario: Scenario) -> Scenario | None:
    """The scenario of the degrade fallback replica set (None without one): the fallback
    model on the same GPU type and parallelism, no speculation, no degrade policies of its
    own."""
    fb = scenario.scheduler.admission.fallback
    if fb is None:
        return None
    sched = scenario.scheduler.model_copy(update={
        "admission": scenario.scheduler.admission.model_copy(update={"degrade": [],
                                                                     "fallback": None})})
    return scenario.model_copy(update={
        "model": fb.model or scenario.model, "speculative": None, "scheduler": sched,
        "cluster": scenario.cluster.model_copy(update={"num_replicas": fb.num_replicas,
                                                       "enable_expert_parallel": False})})


def build_fallback_setup(scenario: Scenario, base_dir: Path | None = None):
    """:func:`build_setup` of :func:`fallback_scenario` (None without a fallback set)."""
    fs = fallback_scenario(scenario)
    if fs is None:
        return None
    with unpriced_quiet():  # the primaries' setup already said it (same GPU)
        return build_setup(fs, base_dir)
