"""The ``cluster.autoscale`` section: a pool whose replica count follows its load.

The decision rule is the Kubernetes HorizontalPodAutoscaler's (``kube-controller-manager``'s
``--horizontal-pod-autoscaler-sync-period``, default 15 s; the algorithm and its
``behavior.scaleUp/scaleDown.stabilizationWindowSeconds``, defaults 0 s and 300 s, and the
tolerance 0.1 are documented at
https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/):

* every ``interval_s`` the controller samples the pool's metric; the metric it acts on is the
  mean of the samples within the last ``window_s``;
* the recommendation is ``ceil(metric_total / target)`` for the additive metrics
  (``running_requests``: requests running or waiting over the serving replicas;
  ``kv_cache_utilization``: KV blocks held as a fraction of one replica's blocks) and
  ``ceil(n x metric / target)`` for ``queue_delay`` (HPA's ``ceil(currentReplicas x
  currentMetricValue / desiredMetricValue)``), clamped to ``[min_replicas, max_replicas]``;
  ``slo_attainment`` moves one ``scale_step`` at a time (down while the window's attainment
  meets the target, up while it misses): it has no proportional reading;
* nothing changes while the metric is within ``tolerance`` of the target (ratio within
  ``1 +- tolerance``);
* scale-up goes to the *smallest* recommendation of the last ``scale_up_cooldown_s``, scale
  down to the *largest* of the last ``scale_down_cooldown_s`` (HPA's stabilisation windows:
  a load must last that long before the fleet follows it);
* at most ``max_scale_up_step`` replicas are added per evaluation (HPA's default scale-up
  policy allows the larger of 100% and 4 pods per 15 s; ``None``: no limit).

A replica added serves after its cold start (:class:`ColdStartConfig`); a replica removed
drains: it takes no new request, and either finishes what it holds (``drain: finish``) or
hands its queued, not-started requests back to the router (``drain: migrate``; requests
already running finish where they are: vLLM has no live migration of a running sequence).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simulator.base.schema import StrictModel

#: Autoscaling metrics (``cluster.autoscale.policy``).
AUTOSCALE_POLICIES = ("running_requests", "kv_cache_utilization", "queue_delay",
                      "slo_attainment")


class ColdStartConfig(StrictModel):
    """What a new replica takes before it serves: its weights read from storage, the engine's
    start-up and CUDA-graph capture (seconds; each part sourced in
    :mod:`simulator.cluster.autoscale`, each overridable), or ``cold_start_s`` whole.

    ``cold_start_s = weight_bytes / storage_read_bandwidth_bytes_per_s + engine_startup_s +
    cuda_graph_capture_s`` where ``weight_bytes`` are the replica's weights (every GPU's shard:
    the node's storage is shared by its GPUs)."""

    #: sequential read bandwidth of the storage the weights come from (bytes/s); default:
    #: :data:`simulator.cluster.autoscale.DEFAULT_STORAGE_READ_BANDWIDTH_BYTES_PER_S`
    storage_read_bandwidth_bytes_per_s: float | None = Field(default=None, gt=0)
    #: process start, engine and KV-cache initialisation, besides weights and graphs (s)
    engine_startup_s: float | None = Field(default=None, ge=0)
    #: CUDA-graph capture (and compilation) before the engine serves (s)
    cuda_graph_capture_s: float | None = Field(default=None, ge=0)
    #: the whole cold start, replacing the parts (s)
    cold_start_s: float | None = Field(default=None, ge=0)


class AutoscaleConfig(StrictModel):
    """``cluster.autoscale``: the pool's replica count follows a metric (HPA rule, see the
    module docstring). ``cluster.num_replicas`` is the count at the start of the run."""

    min_replicas: int = Field(default=1, ge=1)
    max_replicas: int = Field(ge=1)
    policy: Literal["running_requests", "kv_cache_utilization", "queue_delay",
                    "slo_attainment"] = "running_requests"
    #: the metric's target: requests per replica (``running_requests``), a fraction of the
    #: KV blocks (``kv_cache_utilization``), seconds of queueing (``queue_delay``), a fraction
    #: of requests meeting every SLO (``slo_attainment``; default: ``slo.attainment_target``)
    target: float | None = Field(default=None, gt=0)
    #: evaluation period (s): HPA's sync period; at least 0.1 s (metrics are scraped, and a
    #: day evaluated every 0.1 s is already 864,000 evaluations)
    interval_s: float = Field(default=15.0, ge=0.1)
    #: the metric is the mean of the samples within this window (s)
    window_s: float = Field(default=60.0, gt=0)
    #: a load must call for more replicas for this long before they are added (s)
    scale_up_cooldown_s: float = Field(default=0.0, ge=0)
    #: ... and for fewer for this long before replicas drain (s)
    scale_down_cooldown_s: float = Field(default=300.0, ge=0)
    #: no change while the metric is within this fraction of its target
    tolerance: float = Field(default=0.1, ge=0, lt=1)
    #: replicas added per evaluation at most (None: no limit)
    max_scale_up_step: int | None = Field(default=None, ge=1)
    #: replicas one ``slo_attainment`` decision adds or removes
    scale_step: int = Field(default=1, ge=1)
    #: a drained replica finishes its requests (``finish``) or hands its queued ones back to
    #: the router (``migrate``)
    drain: Literal["finish", "migrate"] = "finish"
    cold_start: ColdStartConfig = ColdStartConfig()

    @model_validator(mode="after")
    def _check(self):
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"cluster.autoscale: max_replicas ({self.max_replicas}) must be "
                             f">= min_replicas ({self.min_replicas})")
        t = self.target
        if t is not None and self.policy in ("kv_cache_utilization", "slo_attainment") \
                and t > 1:
            raise ValueError(f"cluster.autoscale.target: {self.policy} is a fraction in (0, "
                             f"1], got {t}")
        if t is None and self.policy != "slo_attainment":
            raise ValueError(f"cluster.autoscale.target is required for policy {self.policy} "
                             "(requests per replica for running_requests, a fraction for "
                             "kv_cache_utilization, seconds for queue_delay)")
        return self
