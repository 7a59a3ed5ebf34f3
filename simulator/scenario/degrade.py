"""Schema of the degrade policies (``scheduler.admission.degrade``) and their fallback target.

A bounded scheduler should "shed or degrade before memory is exhausted" (seed 001). Each
policy is a named action with thresholds on what a gateway can observe of the cluster: the
KV-cache occupancy, the head-of-line queue delay and the number of waiting requests. The
controller that evaluates them lives in :mod:`simulator.scheduling.degrade`; this module only
validates the YAML (it sits below :mod:`simulator.scenario.config`, which embeds it).

Example::

    scheduler:
      admission:
        degrade:
          - name: cap_long_answers
            action: cap_max_tokens
            max_tokens: 256
            slices: [chat]
            when: {kv_occupancy: 0.85, num_waiting: 64}
            release_fraction: 0.8
            min_hold_s: 5.0
          - name: shed_batch_tier
            action: shed
            min_priority: 2
            when: {queue_delay_s: 4.0}
        fallback: {model: llama-3.2-1b, num_replicas: 1}
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simulator.base.schema import MAX_TOKENS_REPRESENTABLE, StrictModel

#: the degrade actions, in the order they take precedence on one request
DEGRADE_ACTIONS = ("shed", "fallback", "cap_max_tokens", "disable_speculation")


class DegradeThresholds(StrictModel):
    """Trigger thresholds; a policy fires when *any* stated signal reaches its threshold.

    Attributes
    ----------
    kv_occupancy : float, optional
        KV blocks held / KV blocks in the pool, summed over the primary replicas (0..1].
    queue_delay_s : float, optional
        Head-of-line wait: seconds the request at the head of a replica's waiting queue has
        waited since its arrival, the largest over the primary replicas.
    num_waiting : int, optional
        Requests waiting (queued, not running), summed over the primary replicas.
    """

    kv_occupancy: float | None = Field(default=None, gt=0, le=1)
    queue_delay_s: float | None = Field(default=None, gt=0)
    num_waiting: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one(self):
        if self.kv_occupancy is None and self.queue_delay_s is None and self.num_waiting is None:
            raise ValueError("state at least one threshold: kv_occupancy, queue_delay_s or "
                             "num_waiting")
        return self


class DegradePolicyConfig(StrictModel):
    """One named degrade policy.

    Attributes
    ----------
    name : str
        Shown in the report; unique within the scenario.
    action : {"shed", "fallback", "cap_max_tokens", "disable_speculation"}
        ``shed``: reject the class's arriving requests (reason ``degrade_shed``);
        ``fallback``: route them to ``scheduler.admission.fallback``;
        ``cap_max_tokens``: lower their declared ``max_tokens`` to ``max_tokens`` (the answer
        is cut there); ``disable_speculation``: replicas decode without draft tokens (vLLM's
        ``speculative_disable_by_batch_size`` idea, on any signal); applies to every class.
    when : DegradeThresholds
        Fire when any stated signal reaches its threshold.
    release_fraction : float
        Hysteresis: an active policy is released only when every stated signal is below
        ``release_fraction x threshold`` (default 0.8: a policy choice of this project, not a
        measured figure) ...
    min_hold_s : float
        ... and it has been active for at least this many seconds.
    max_tokens : int, optional
        The cap (``cap_max_tokens`` only, required there).
    slices, tenants : list of str, optional
        The class the action applies to (every request when both are left out).
    min_priority : int, optional
        Only requests with ``priority >= min_priority`` (lower value = more important, vLLM's
        convention): degrade the less important classes first.
    """

    name: str = Field(min_length=1)
    action: Literal["shed", "fallback", "cap_max_tokens", "disable_speculation"]
    when: DegradeThresholds
    release_fraction: float = Field(default=0.8, gt=0, le=1)
    min_hold_s: float = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_REPRESENTABLE)
    slices: list[str] | None = None
    tenants: list[str] | None = None
    min_priority: int | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.action == "cap_max_tokens" and self.max_tokens is None:
            raise ValueError(f"policy {self.name!r}: action cap_max_tokens needs max_tokens")
        if self.action != "cap_max_tokens" and self.max_tokens is not None:
            raise ValueError(f"policy {self.name!r}: max_tokens applies to action "
                             f"cap_max_tokens only, not {self.action}")
        if self.action == "disable_speculation" and (
                self.slices or self.tenants or self.min_priority is not None):
            raise ValueError(f"policy {self.name!r}: disable_speculation applies to whole "
                             "replicas; remove slices, tenants and min_priority")
        return self


class FallbackConfig(StrictModel):
    """The fallback replica set a ``fallback`` policy routes to: replicas of a (cheaper)
    model on the scenario's GPU type and tensor parallelism, behind their own round-robin
    router. Their GPUs are part of the deployment (counted in the cost) whether or not a
    policy fires.

    Attributes
    ----------
    model : str, optional
        Catalog name or ``config.json`` path (default: the scenario's model).
    num_replicas : int
        Replicas in the fallback set.
    """

    model: str | None = None
    num_replicas: int = Field(default=1, ge=1)


def check_policies(policies: list[DegradePolicyConfig], fallback: FallbackConfig | None) -> None:
    """Cross-checks of a policy list: unique names, a fallback target when one routes there.

    Raises
    ------
    ValueError
        On a repeated name or a ``fallback`` policy without ``scheduler.admission.fallback``.
    """
    seen: set[str] = set()
    for p in policies:
        if p.name in seen:
            raise ValueError(f"degrade policy name {p.name!r} is used twice; names must be "
                             "unique")
        seen.add(p.name)
        if p.action == "fallback" and fallback is None:
            raise ValueError(f"degrade policy {p.name!r} routes to the fallback but "
                             "scheduler.admission.fallback is not set (e.g. {model: "
                             "llama-3.2-1b, num_replicas: 1})")


def check_no_fallback_with_pools(scenario) -> None:
    """A degrade ``fallback`` replica set cannot be combined with ``pools``: the gateway
    simulates each pool on its own clock, so routing between them cannot be decided at
    arrival (policies that shed, cap or stop speculating work per pool).

    Raises
    ------
    ValueError
        Naming where the fallback is set.
    """
    where = ["scheduler.admission.fallback"] if scenario.scheduler.admission.fallback else []
    where += [f"pools.{i}.scheduler.admission.fallback" for i, p in enumerate(scenario.pools)
              if p.scheduler is not None and p.scheduler.admission.fallback is not None]
    if where:
        raise ValueError(f"{where[0]}: a degrade fallback set is not supported with pools "
                         "(each pool is simulated on its own clock); use shed, cap_max_tokens "
                         "or disable_speculation policies per pool, or drop pools")
