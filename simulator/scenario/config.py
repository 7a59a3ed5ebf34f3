"""Scenario schema (pydantic), validation and loading.

A scenario is one YAML file describing what to simulate: model, hardware, cluster,
scheduler, KV cache, workload, SLOs, cost, seed and output folder. Unknown keys and bad
values raise :class:`ScenarioError` with one line naming the key path, the value and what
is allowed (the CLI prints it and exits 2). The YAML is read by
:mod:`simulator.scenario.yaml_files`, ``--set`` overrides are applied by
:mod:`simulator.scenario.overrides`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from simulator.base.input_limits import short_repr
from simulator.base.schema import MAX_TOKENS_REPRESENTABLE, StrictModel
from simulator.scenario.autoscale import AutoscaleConfig
from simulator.scenario.degrade import (
    DegradePolicyConfig,
    FallbackConfig,
    check_no_fallback_with_pools,
    check_policies,
)
from simulator.scenario.errors import ScenarioError
from simulator.scenario.offload import OffloadConfig
from simulator.scenario.overrides import apply_overrides, blame_override, first_model
from simulator.scenario.pools import KVTransferConfig, PoolMatch, check_pools
from simulator.scenario.yaml_files import read_scenario_yaml
from simulator.speculative.config import SpeculativeConfig
from simulator.workload.config import WorkloadConfig

#: default load guard (requests): a routing-policy knob, not a measured figure; the
#: ``cluster.prefix_affinity_load_guard`` key sets it
DEFAULT_LOAD_GUARD = 32


#: every scenario section: unknown keys forbidden, no coercion (``max_num_seqs: true`` or
#: ``"64"`` are errors, not 1 / 64), finite floats (see :mod:`simulator.base.schema`)
_Strict = StrictModel


class InterconnectConfig(_Strict):
    """The GPU-to-GPU link of *this deployment* when it differs from the GPU spec's (a node
    without PCIe peer-to-peer, a slower switch, InfiniBand between nodes). Any key left out
    keeps the spec's value. ``bandwidth_bytes_per_s`` is the achieved per-direction bandwidth a
    collective sees (the link model uses it as is); ``latency_s`` is the per-hop latency of the
    ring (alpha-beta model: ``t = 2 (p - 1) latency + 2 (p - 1) / p x bytes / bandwidth``). With
    a stated link the all-reduce uses this model, not the spec node's measured tables. A PCIe
    link with ``p2p: false`` (NCCL through host memory, vLLM's custom all-reduce off) is priced
    at half its bandwidth (half the spec's host link when no bandwidth is stated), an
    assumption the all-reduce provenance names."""

    kind: Literal["nvlink", "pcie", "infiniband", "none"] | None = None
    bandwidth_bytes_per_s: float | None = Field(default=None, gt=0)
    latency_s: float | None = Field(default=None, ge=0)
    p2p: bool | None = None


class HardwareConfig(_Strict):
    """GPU type: a catalog name (``h100-sxm``, ``a100-sxm-80gb``, ``h200-sxm``, aliases such
    as ``h100``) or a path to a spec YAML. ``num_gpus_per_replica`` defaults to
    ``cluster.tensor_parallel_size``; ``interconnect`` states a deployment's own GPU-to-GPU link
    (default: the spec's)."""

    gpu: str = "h100-sxm"
    num_gpus_per_replica: int | None = Field(default=None, ge=1)
    interconnect: InterconnectConfig | None = None
    #: board power limit per GPU in W (``nvidia-smi -pl``); below the GPU's default limit its
    #: compute-bound operators slow by the measured factor (``hardware_profiles/<gpu>/
    #: power.yaml`` ``cap_points``; needs ``perf.source`` roofline or fitted) and busy power
    #: is bounded by it
    power_cap_w: float | None = Field(default=None, gt=0)
    #: idle power per GPU in W of a replica held but not stepping (default: the GPU's
    #: ``power.yaml`` ``idle_w``, where it has a sourced one)
    idle_power_w: float | None = Field(default=None, ge=0)


class ClusterConfig(_Strict):
    """Replicas behind a router; each replica is one TP group."""

    num_replicas: int = Field(default=1, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    #: vLLM ``--pipeline-parallel-size``: each replica's layers split into this many stages
    #: (one TP group each), up to this many micro-batches in flight
    pipeline_parallel_size: int = Field(default=1, ge=1)
    router: Literal["round_robin", "least_outstanding", "least_kv", "random",
                    "prefix_affinity"] = "round_robin"
    #: ``router: prefix_affinity``: route by cached prefix only among the replicas within this
    #: many outstanding requests of the least loaded one (a policy knob, not a measured figure)
    prefix_affinity_load_guard: int = Field(default=DEFAULT_LOAD_GUARD, ge=0)
    #: vLLM ``--enable-expert-parallel``: the MoE layers' experts are split over the
    #: ``num_replicas x tensor_parallel_size`` GPUs (the replicas are vLLM's data-parallel
    #: ranks, attention stays data parallel); tokens are exchanged by all-gather +
    #: reduce-scatter (vLLM's default ``allgather_reducescatter`` all2all backend)
    enable_expert_parallel: bool = False
    #: step the replicas (DP ranks) together, each step as long as the slowest rank's, as
    #: vLLM does when DP ranks share an EP group (idle ranks run dummy batches); default:
    #: on with expert parallelism over several replicas
    dp_lockstep: bool | None = None
    #: expert-parallel load imbalance: the busiest rank's expert rows over the mean (1 =
    #: uniform routing, the default); its expert GEMMs cost that much more
    expert_load_skew: float = Field(default=1.0, ge=1.0)
    #: the replica count follows the load (``num_replicas`` replicas at the start); see
    #: :mod:`simulator.scenario.autoscale`
    autoscale: AutoscaleConfig | None = None

    @model_validator(mode="after")
    def _check_autoscale(self):
        a = self.autoscale
        if a is not None and not a.min_replicas <= self.num_replicas <= a.max_replicas:
            raise ValueError(f"cluster.num_replicas ({self.num_replicas}) is the replica count "
                             f"at the start of an autoscaled run: it must lie within "
                             f"cluster.autoscale.min_replicas ({a.min_replicas}) and "
                             f"max_replicas ({a.max_replicas})")
        return self

    @property
    def max_num_replicas(self) -> int:
        """The most replicas the pool may hold (``autoscale.max_replicas`` when autoscaled)."""
        return self.num_replicas if self.autoscale is None else self.autoscale.max_replicas

    @property
    def dp_lockstep_active(self) -> bool:
        """Whether the replicas step in lockstep (see ``dp_lockstep``)."""
        if self.dp_lockstep is not None:
            return self.dp_lockstep and self.num_replicas > 1
        return self.enable_expert_parallel and self.num_replicas > 1

    @property
    def expert_parallel_size(self) -> int:
        """GPUs the experts are split over (1 without expert parallelism)."""
        return self.num_replicas * self.tensor_parallel_size if self.enable_expert_parallel \
            else 1


class AdmissionConfig(_Strict):
    """Bounded scheduler (seed 001: shed or degrade before memory is exhausted)."""

    max_waiting: int | None = Field(default=None, ge=1, description="max waiting-queue length")
    max_queue_delay_s: float | None = Field(default=None, gt=0)
    tenant_max_share: float | None = Field(default=None, gt=0, le=1,
                                           description="max share of running seqs per tenant")
    #: named degrade policies (see :mod:`simulator.scenario.degrade`)
    degrade: list[DegradePolicyConfig] = Field(default_factory=list)
    #: the replica set ``fallback`` policies route to
    fallback: FallbackConfig | None = None

    @model_validator(mode="after")
    def _check_degrade(self):
        check_policies(self.degrade, self.fallback)
        return self


class SchedulerConfig(_Strict):
    """Replica scheduler (vLLM names), the one scheduler config (plus the derived
    :class:`~simulator.scheduling.limits.SchedulerLimits`). ``policy``: continuous or static
    batching; ``queue_policy``: waiting order and preemption victim (fcfs or priority)."""

    policy: Literal["continuous", "static"] = "continuous"
    queue_policy: Literal["fcfs", "priority"] = "fcfs"
    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=8192, ge=1, le=MAX_TOKENS_REPRESENTABLE)
    enable_chunked_prefill: bool = True
    max_model_len: int | None = Field(default=None, ge=2, le=MAX_TOKENS_REPRESENTABLE)
    preemption_mode: Literal["recompute", "swap"] = "recompute"
    #: step composition: ``decode_first`` (vLLM V1 mixed steps) or ``prefill_first``
    #: (vLLM V0 without chunked prefill, Vidur's ``vllm`` scheduler: waiting prompts run in
    #: prefill-only steps before any decode); ``prefill_first`` needs
    #: ``enable_chunked_prefill: false``
    step_policy: Literal["decode_first", "prefill_first"] = "decode_first"
    max_batch_size: int = Field(default=32, ge=1, description="static batching: batch size")
    batch_timeout_s: float = Field(default=0.05, ge=0, description="static batching wait")
    admission: AdmissionConfig = AdmissionConfig()

    @model_validator(mode="after")
    def _check_step_policy(self):
        if self.step_policy == "prefill_first" and self.enable_chunked_prefill:
            raise ValueError("step_policy: prefill_first models vLLM V0 without chunked "
                             "prefill; set enable_chunked_prefill: false (or use "
                             "decode_first)")
        return self


class KVCacheConfig(_Strict):
    """KV cache (vLLM names; ``allocation`` is ours: paged vs contiguous reservation)."""

    block_size: int = Field(default=16, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    kv_cache_dtype: Literal["auto", "bf16", "fp16", "fp8"] = "auto"
    num_gpu_blocks: int | None = Field(default=None, ge=1)
    kv_cache_memory_bytes: int | None = Field(
        default=None, ge=1, description="KV-cache bytes per GPU; skips the memory profile "
        "(vLLM --kv-cache-memory-bytes)")
    enable_prefix_caching: bool = False
    allocation: Literal["paged", "contiguous"] = "paged"
    swap_space_gb: float = Field(
        default=4.0, ge=0, description="CPU swap space per GPU for preemption_mode: swap, in "
        "GiB (2**30 bytes) as vLLM's --swap-space, whose name this key follows")
    watermark: float = Field(default=0.0, ge=0, lt=1)
    offload: OffloadConfig | None = Field(
        default=None, description="KV offload tiers (CPU, disk) behind the prefix cache "
        "(simulator.scenario.offload)")

    @property
    def offload_tiers(self) -> OffloadConfig | None:
        """The offload section when it has tiers (None without one, or with a 0-size CPU
        tier: a baseline without offload)."""
        off = self.offload
        return off if off is not None and off.active else None


class ConstantPerfConfig(_Strict):
    """Synthetic step time (``perf.source: constant``): ``step_s + per_token_s x tokens +
    per_seq_s x sequences`` seconds per engine iteration, for what-if studies and for tests
    that need exact hand-derived times."""

    step_s: float = Field(default=0.0, ge=0)
    per_token_s: float = Field(default=0.0, ge=0)
    per_seq_s: float = Field(default=0.0, ge=0)


class PerfConfig(_Strict):
    """Execution-time model.

    ``source``: ``auto`` uses a measured latency table for every operator that has one (for
    ``engine_version``), the profile's fitted efficiencies or the datasheet roofline for the
    rest; ``table`` requires measured tables; ``fitted``, ``roofline`` force one source;
    ``constant`` uses ``perf.constant``. ``engine`` names the engine profile (per-step
    overhead, async scheduling, CUDA-graph padding, sampler: ``servesim profiles`` lists them)
    or a path to one; ``engine_version`` selects the measured tables of that engine version
    (default: the newest shipped for the GPU). ``record_step_cost`` adds the breakdown of each
    step's time to the step table."""

    source: Literal["auto", "roofline", "fitted", "table", "constant"] = "auto"
    weight_dtype: Literal["bf16", "fp16", "fp8"] = "bf16"
    engine: str = "vllm-v1"
    engine_version: str | None = None
    constant: ConstantPerfConfig | None = None
    record_step_cost: bool = Field(
        default=False, description="add five float columns, seconds, to the step table "
        "(steps.parquet / steps.csv): compute_s, communication_s, overhead_s, swap_s, draft_s; "
        "they add up to step_time_s")

    @model_validator(mode="after")
    def _check_constant(self):
        if self.source == "constant" and self.constant is None:
            raise ValueError("perf.source: constant needs perf.constant "
                             "(step_s, per_token_s, per_seq_s)")
        c = self.constant
        if self.source == "constant" and not (c.step_s or c.per_token_s or c.per_seq_s):
            # every step would take no time: every TTFT and TPOT exactly 0, said nowhere
            raise ValueError("perf.constant: step_s, per_token_s and per_seq_s are all 0, so "
                             "a step would take no time (every TTFT and TPOT 0); give at least "
                             "one of them > 0")
        return self


class SLOConfig(_Strict):
    """Per-request SLOs (seconds; None = not checked) and the attainment target."""

    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    e2e_s: float | None = Field(default=None, gt=0)
    attainment_target: float = Field(default=0.9, gt=0, le=1)


class CostConfig(_Strict):
    usd_per_gpu_hour: float | None = Field(default=None, ge=0)
    #: electricity price (USD per kWh): the summary's ``energy.energy_cost_usd`` (GPU energy
    #: only) beside the GPU-hour cost
    usd_per_kwh: float | None = Field(default=None, ge=0)


class PoolConfig(_Strict):
    """One pool of identical replicas behind the gateway (``pools:``). Sections left out are
    the scenario's own (``model``, ``hardware``, ``cluster``, ``scheduler``, ``kv_cache``,
    ``perf``, ``cost``). ``role``: ``mixed`` pools serve whole requests; a ``prefill`` pool
    computes the prompt and the first token and ships the KV over ``kv_transfer`` to the
    ``decode`` pool named by ``decode_pool``, which admits the request when it has the blocks
    and generates the rest."""

    name: str = Field(min_length=1)
    role: Literal["mixed", "prefill", "decode"] = "mixed"
    model: str | None = None
    hardware: HardwareConfig | None = None
    cluster: ClusterConfig | None = None
    scheduler: SchedulerConfig | None = None
    kv_cache: KVCacheConfig | None = None
    perf: PerfConfig | None = None
    cost: CostConfig | None = None
    match: PoolMatch | None = None
    decode_pool: str | None = None
    kv_transfer: KVTransferConfig | None = None


#: top-level sections a pool may state for itself (:class:`PoolConfig`), each replacing the
#: top-level one whole (:func:`simulator.runs.gateway.pool_scenario`)
POOL_SECTIONS = ("model", "hardware", "cluster", "scheduler", "kv_cache", "perf", "cost")
#: those a scenario refuses whole when every pool states its own, in the order it names them
#: (an unused top-level ``cluster`` is named key by key: ``Scenario._unused_cluster_keys``)
_POOL_SECTIONS_CHECKED_WHOLE = tuple(k for k in POOL_SECTIONS if k != "cluster")


class Scenario(_Strict):
    """A complete what-if: every field is listed in docs/reference/scenario.md (generated from this schema)."""

    name: str = "scenario"
    model: str = "llama-3.1-8b"
    hardware: HardwareConfig = HardwareConfig()
    cluster: ClusterConfig = ClusterConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    kv_cache: KVCacheConfig = KVCacheConfig()
    perf: PerfConfig = PerfConfig()
    workload: WorkloadConfig
    slo: SLOConfig = SLOConfig()
    cost: CostConfig = CostConfig()
    speculative: SpeculativeConfig | None = None
    #: several pools behind one gateway (None: the short form, one pool made of the sections
    #: above); see :class:`PoolConfig`
    pools: list[PoolConfig] | None = Field(default=None, min_length=1)
    seed: int = Field(default=0, ge=0)
    output_dir: str = "reports/{name}"

    @model_validator(mode="after")
    def _check(self):
        if self.cluster.pipeline_parallel_size > 1 and (
                self.speculative is not None or self.scheduler.policy == "static"):
            raise ValueError("cluster.pipeline_parallel_size > 1 is modelled for continuous "
                             "batching without speculative decoding; set it to 1 or use "
                             "scheduler.policy: continuous without speculative")
        ps = self.workload.parallel_sampling if self.workload is not None else None
        if ps is not None and ps.n > 1:  # a config-level n: refused up front, not per request
            if self.speculative is not None or self.scheduler.policy == "static":
                raise ValueError(
                    f"workload.parallel_sampling.n={ps.n}: parallel sampling is modelled for "
                    "continuous batching without speculative decoding (every request would be "
                    "rejected); set n: 1, or use scheduler.policy: continuous without "
                    "speculative")
            if ps.n > self.scheduler.max_num_seqs:
                raise ValueError(
                    f"workload.parallel_sampling.n={ps.n} exceeds scheduler.max_num_seqs "
                    f"{self.scheduler.max_num_seqs}: a request's {ps.n} sequences must run in "
                    "one batch (vLLM schedules them together), so every request would be "
                    "rejected; lower n or raise max_num_seqs")
        if self.speculative is not None and self.cluster.dp_lockstep_active:
            raise ValueError("cluster.dp_lockstep: data-parallel ranks stepping in lockstep "
                             "(expert parallelism across replicas) are modelled without "
                             "speculative decoding; remove speculative, or set "
                             "cluster.dp_lockstep: false to simulate independent replicas")
        if self.speculative is not None and self.scheduler.policy == "static":
            raise ValueError("speculative decoding needs scheduler.policy: continuous "
                             "(static batching does not speculate); remove speculative or "
                             "use continuous batching")
        if self.kv_cache.offload is not None:
            self._check_offload()
        if self.cluster.autoscale is not None:
            self._check_autoscale()
        for i, pool in enumerate(self.pools or ()):
            if pool.kv_cache is not None and pool.kv_cache.offload is not None:
                raise ValueError(f"pools.{i}.kv_cache.offload: KV offload tiers are modelled "
                                 "for one pool of independent replicas (a scenario without "
                                 "pools:); remove them from the pool")
        try:
            self.output_dir.format(name=self.name)
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"output_dir {self.output_dir!r}: only the placeholder {{name}} is "
                             f"allowed ({type(e).__name__}: {e})") from None
        if self.pools is not None:
            check_pools(self.pools)
            check_no_fallback_with_pools(self)
            unused = self._unused_cluster_keys()
            if unused:
                raise ValueError(
                    f"cluster: key(s) {', '.join(unused)} unused: every pool states its own "
                    "cluster (pools.N.cluster replaces the top-level one whole); move them "
                    "into the pools or remove them")
            for key in self._unused_top_level_sections():
                raise ValueError(
                    f"{key}: unused: every pool states its own {key} (pools.N.{key} replaces "
                    f"the top-level one whole); remove the top-level {key} or leave a pool "
                    "without its own")
        hw = self.hardware
        if hw.num_gpus_per_replica is not None and \
                hw.num_gpus_per_replica != self.cluster.tensor_parallel_size:
            raise ValueError(
                f"hardware.num_gpus_per_replica ({hw.num_gpus_per_replica}) must equal "
                f"cluster.tensor_parallel_size ({self.cluster.tensor_parallel_size})")
        return self

    def _check_offload(self) -> None:
        """KV offload tiers: what they need and where they are modelled."""
        kvc = self.kv_cache
        if not kvc.enable_prefix_caching:
            raise ValueError("kv_cache.offload needs kv_cache.enable_prefix_caching: true (the "
                             "tiers hold blocks by their prefix-cache hashes, as vLLM's "
                             "connector and LMCache do)")
        if self.scheduler.policy == "static":
            raise ValueError("kv_cache.offload is modelled for scheduler.policy: continuous")
        if self.cluster.dp_lockstep_active or self.pools is not None:
            raise ValueError("kv_cache.offload is modelled for one pool of independent replicas "
                             "(not with pools: or cluster.dp_lockstep)")
        if kvc.allocation != "paged":
            raise ValueError("kv_cache.offload needs kv_cache.allocation: paged")
        chunk = kvc.offload.chunk_tokens() if kvc.offload is not None else 0
        if chunk and chunk % kvc.block_size:
            raise ValueError(f"kv_cache.offload.chunk_size {chunk} must be a multiple of "
                             f"kv_cache.block_size {kvc.block_size}")

    def _is_resolved(self) -> bool:
        """Whether the input gave every field, as a resolved scenario does (``scenario.yaml``
        of a run, the dumps sweeps and plans hand their workers): such an input cannot tell
        a section a file set from a default written out, so :meth:`_unused_cluster_keys` and
        :meth:`_unused_top_level_sections` compare its values with the defaults instead."""
        return self.model_fields_set >= set(Scenario.model_fields)

    def _unused_cluster_keys(self) -> list[str]:
        """Top-level ``cluster`` keys given (in the file, by ``--set`` / ``--vary``; whatever
        the value, the default's included) while every pool states its own ``cluster`` (so
        none of them is read); empty otherwise. A resolved input (:meth:`_is_resolved`):
        the keys whose value is not the default."""
        if not self.pools or any(p.cluster is None for p in self.pools):
            return []
        if self._is_resolved():
            default = ClusterConfig()
            return sorted(k for k in ClusterConfig.model_fields
                          if getattr(self.cluster, k) != getattr(default, k))
        if "cluster" not in self.model_fields_set:
            return []
        return sorted(self.cluster.model_fields_set)

    def _unused_top_level_sections(self) -> list[str]:
        """The sections of :data:`POOL_SECTIONS` but ``cluster`` given at the top level
        (whatever the value: ``hardware.gpu: h100`` as much as the default ``h100-sxm``) while
        every pool states its own, so none reads them. A resolved input
        (:meth:`_is_resolved`): those whose value is not the default."""
        resolved = self._is_resolved()
        return [k for k in _POOL_SECTIONS_CHECKED_WHOLE
                if all(getattr(p, k) is not None for p in self.pools)
                and ((getattr(self, k) != Scenario.model_fields[k].default) if resolved
                     else k in self.model_fields_set)]

    @property
    def gpus_per_replica(self) -> int:
        return self.cluster.tensor_parallel_size * self.cluster.pipeline_parallel_size

    def _check_autoscale(self) -> None:
        """What ``cluster.autoscale`` is not modelled with (refused, named)."""
        if self.cluster.dp_lockstep_active:
            raise ValueError("cluster.autoscale: data-parallel ranks stepping in lockstep "
                             "(expert parallelism across replicas) form one engine of a fixed "
                             "size; remove autoscale, or set cluster.dp_lockstep: false")
        if self.scheduler.admission.fallback is not None:
            raise ValueError("cluster.autoscale with scheduler.admission.fallback: a degrade "
                             "fallback set beside an autoscaled pool is not modelled; remove "
                             "one of them (degrade policies without a fallback work)")

    @property
    def num_fallback_replicas(self) -> int:
        """Replicas of the degrade fallback set (0 without one)."""
        fb = self.scheduler.admission.fallback
        return 0 if fb is None else fb.num_replicas

    @property
    def num_gpus(self) -> int:
        """GPUs of the deployment (every pool's, with ``pools``; TP x PP per replica), plus the
        degrade fallback set's."""
        def gpus(c: ClusterConfig) -> int:
            return c.tensor_parallel_size * c.pipeline_parallel_size * c.num_replicas
        fb = self.num_fallback_replicas * self.cluster.tensor_parallel_size
        if self.pools:
            return fb + sum(gpus(p.cluster or self.cluster) for p in self.pools)
        return gpus(self.cluster) + fb


# ---------------------------------------------------------------------- errors, loading
def allowed_fields(model_cls, loc: tuple) -> list[str] | None:
    """Field names valid at the parent of ``loc`` in the pydantic model ``model_cls`` (None
    when ``loc`` leaves the model tree): what an "unknown key" message lists."""
    cls = model_cls
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        f = getattr(cls, "model_fields", {}).get(part)
        if f is None:
            return None
        ann = f.annotation
        sub = first_model(ann)
        if sub is None:
            return None
        cls = sub
    return sorted(getattr(cls, "model_fields", {}))


def format_validation_error(e: ValidationError, source: str = "scenario",
                            model_cls: type[BaseModel] | None = None) -> str:
    """One line per the first error: ``source: key.path: value X: what is allowed``.

    ``model_cls`` (default :class:`Scenario`) is the schema whose allowed keys an "unknown
    key" message lists. Validator and union tags (``function-...``, ``str``, ``dict``) are
    dropped from the key path.
    """
    err = e.errors()[0]
    loc = tuple(p for p in err["loc"]
                if not (isinstance(p, str) and (p.startswith("function-") or p in ("str", "dict"))))
    path = ".".join(str(p) for p in loc) or "(top level)"
    val = err.get("input")
    if err["type"] == "extra_forbidden":
        allowed = allowed_fields(model_cls or Scenario, loc)
        hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"{source}: unknown key '{path}'{hint}"
    if err["type"] == "missing":
        return f"{source}: missing required key '{path}'"
    msg = err["msg"]
    msg = msg.removeprefix("Value error, ")
    if err["type"] in ("bool_type", "bool_parsing"):
        msg = "Input should be a valid boolean (true or false)"
    if not loc:  # a whole-scenario check: its message names the keys itself
        return f"{source}: {msg}"
    vs = short_repr(val) if not isinstance(val, dict) else "{...}"
    return f"{source}: {path}: value {vs}: {msg}"


def validate_scenario(raw: dict, source: str = "scenario",
                      overrides: list[str] | None = None) -> Scenario:
    """Validate a raw dict.

    Parameters
    ----------
    raw : dict
    source : str
        Names the file in messages.
    overrides : list of str, optional
        The overrides applied to ``raw``: an error on the key path of one of them names it
        (``scenarios/x.yaml: --set bogus.path=1: unknown key 'bogus' ...``).

    Raises
    ------
    ScenarioError
        One line: file, the flag responsible (if any), key path, value and what is allowed.
    """
    data = {k: v for k, v in raw.items() if k != "__file__"}
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        who = blame_override(e, overrides)
        src = f"{source}: {who}" if who else source
        raise ScenarioError(format_validation_error(e, src)) from None


#: top-level keys of the files other commands take: (key, the file's kind, what to do)
_OTHER_FILES = (
    ("search_space", "capacity plan", "run it with 'servesim plan'"),
    ("candidates", "capacity plan", "run it with 'servesim plan'"),
    ("target_rate_rps", "capacity plan", "run it with 'servesim plan'"),
    ("topology_search", "topology plan", "run it with 'servesim plan'"),
    ("day", "day plan", "run it with 'servesim plan'"),
    ("grid", "sweep", "run it with 'servesim sweep'"),
    ("points", "sweep", "run it with 'servesim sweep'"),
    ("scores", "quality table", "a capacity plan names it in its 'quality:' key"),
)


def load_scenario(path: str | Path, overrides: list[str] | None = None, *,
                  source: str | None = None) -> tuple[Scenario, Path]:
    """Load, override and validate a scenario file.

    Parameters
    ----------
    path : str or Path
        The file, or a name under ``scenarios/``.
    overrides : list of str, optional
        ``key.path=value`` overrides (``--set``).
    source : str, optional
        Names the file in messages (default ``path``; the CLI passes the argument as the user
        typed it).

    Returns
    -------
    (Scenario, Path)
        The scenario and the folder relative paths in it are resolved against.
    """
    raw = read_scenario_yaml(path)
    base = Path(raw.get("__file__", path)).parent
    for key, what, how in _OTHER_FILES:
        if key in raw and "workload" not in raw:  # a sweep or plan file given as a scenario
            raise ScenarioError(f"{source or path}: a {what} file (it has '{key}'), not a "
                                f"scenario: {how}")
    raw = apply_overrides(raw, overrides)
    return validate_scenario(raw, source=source or str(path), overrides=overrides), base
