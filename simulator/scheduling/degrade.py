"""Degrade controller: named policies that shed, cap, fall back or stop speculating under load.

The controller is a plain object (no SimPy, DESIGN.md section 2) that the gateway consults at
every arrival. It sees only what a real gateway sees (:class:`DegradeSignals`: KV occupancy,
head-of-line queue delay, waiting count) and the request's declared fields (class and
``max_tokens``, never its true output length: invariant 8).

Firing and release (no flapping)
--------------------------------
A policy *fires* at the first evaluation where any of its stated signals reaches its threshold
(``>=``). It stays active, whatever the signals do, for at least ``min_hold_s`` seconds, and
is *released* at the first evaluation after that at which every stated signal is below
``release_fraction x threshold`` (hysteresis band). Evaluations happen at arrivals (the only
moments a gateway decides anything about a request) and once at the end of the run, which
closes any episode still open. An episode's length is therefore measured between decision
points; with no arrival, nothing is decided and the state is kept.

What each action does to an arriving request of its class while active (precedence: shed,
fallback, cap, as :data:`simulator.scenario.degrade.DEGRADE_ACTIONS` lists them):

``shed``
    rejected at arrival with reason ``degrade_shed`` (it appears in the run's rejections);
``fallback``
    routed to the fallback target (:class:`FallbackTarget`: a replica set today);
``cap_max_tokens``
    its declared ``max_tokens`` becomes ``min(declared, cap)``; the simulated answer stops at
    the cap, and the tokens it would have generated beyond it are counted as not generated
    (the simulator knows the true length; the controller's decision never reads it);
``disable_speculation``
    replica-wide: while active, the replicas' speculative schedulers decode without draft
    tokens (the draft model keeps prefilling, so speculation resumes on release).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Protocol

from simulator.base.request import RequestSpec

_SIGNALS = ("kv_occupancy", "queue_delay_s", "num_waiting")


@dataclass(frozen=True)
class DegradeSignals:
    """What the gateway observes when a request arrives.

    Attributes
    ----------
    kv_occupancy : float
        KV blocks held / blocks in the pool over the primary replicas (0..1).
    queue_delay_s : float
        Largest head-of-line wait over the primary replicas, seconds (0 with empty queues).
    num_waiting : int
        Waiting requests summed over the primary replicas.
    """

    kv_occupancy: float = 0.0
    queue_delay_s: float = 0.0
    num_waiting: int = 0


class FallbackTarget(Protocol):
    """Where a ``fallback`` policy sends a request (a replica set; a pool once pools exist)."""

    def route(self, spec: RequestSpec) -> int:
        """Index of the replica (in the engine's replica list) that takes ``spec``."""


@dataclass
class Episode:
    """One activation of a policy: ``[start_s, end_s)`` and the signal that fired it."""

    start_s: float
    end_s: float | None = None
    trigger: str = ""
    trigger_value: float = 0.0


@dataclass
class PolicyState:
    """Run-time state and counters of one policy."""

    config: object
    active_since_s: float | None = None
    episodes: list[Episode] = field(default_factory=list)
    num_requests: int = 0          # arriving requests the action was applied to
    num_output_tokens_not_generated: int = 0   # cap_max_tokens: true length beyond the cap
    num_requests_shortened: int = 0    # cap_max_tokens: capped requests whose answer was longer
    request_ids: list[int] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.active_since_s is not None


@dataclass
class Decision:
    """What the controller does with one arriving request.

    Attributes
    ----------
    spec : RequestSpec
        The request to admit (with a lowered ``max_tokens`` / output length when capped).
    shed : str
        Name of the shedding policy ('' when not shed).
    fallback : str
        Name of the policy routing it to the fallback ('' when not).
    capped_by : str
        Name of the capping policy ('' when not capped).
    """

    spec: RequestSpec
    shed: str = ""
    fallback: str = ""
    capped_by: str = ""


def _matches(cfg, spec: RequestSpec) -> bool:
    if cfg.slices and spec.slice not in cfg.slices:
        return False
    if cfg.tenants and spec.tenant not in cfg.tenants:
        return False
    return cfg.min_priority is None or spec.priority >= cfg.min_priority


def _fired_by(cfg, sig: DegradeSignals) -> tuple[str, float] | None:
    """The first stated signal at or above its threshold (None when none is)."""
    for name in _SIGNALS:
        thr = getattr(cfg.when, name)
        if thr is not None and getattr(sig, name) >= thr:
            return name, float(getattr(sig, name))
    return None


def _below_release(cfg, sig: DegradeSignals) -> bool:
    """Every stated signal below ``release_fraction x threshold``."""
    f = cfg.release_fraction
    return all(getattr(sig, n) < f * getattr(cfg.when, n) for n in _SIGNALS
               if getattr(cfg.when, n) is not None)


class DegradeController:
    """Evaluates the degrade policies and applies them to arriving requests.

    Parameters
    ----------
    policies : list of DegradePolicyConfig
        From ``scheduler.admission.degrade`` (validated by :mod:`simulator.scenario.degrade`).
    """

    def __init__(self, policies):
        self.states = [PolicyState(p) for p in policies]

    def __bool__(self) -> bool:
        return bool(self.states)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, now: float, sig: DegradeSignals) -> None:
        """Fire or release each policy for the signals observed at ``now`` (seconds)."""
        for st in self.states:
            cfg = st.config
            if st.active:
                if now - st.active_since_s >= cfg.min_hold_s and _below_release(cfg, sig):
                    st.episodes[-1].end_s = now
                    st.active_since_s = None
            else:
                hit = _fired_by(cfg, sig)
                if hit is not None:
                    st.active_since_s = now
                    st.episodes.append(Episode(now, None, hit[0], hit[1]))

    def close(self, now: float) -> None:
        """End every open episode at ``now`` (the end of the run)."""
        for st in self.states:
            if st.active:
                st.episodes[-1].end_s = max(now, st.active_since_s)
                st.active_since_s = None

    @property
    def speculation_disabled(self) -> bool:
        """Whether an active ``disable_speculation`` policy stops draft tokens now."""
        return any(st.active and st.config.action == "disable_speculation"
                   for st in self.states)

    # ------------------------------------------------------------------ decisions
    def decide(self, spec: RequestSpec) -> Decision:
        """Apply the active policies to one arriving request (reads declared fields only for
        the decision; the true length only to count the tokens a cap does not generate)."""
        d = Decision(spec)
        active = [st for st in self.states if st.active and _matches(st.config, spec)]
        for st in active:
            if st.config.action == "shed":
                d.shed = st.config.name
                self._count(st, spec)
                return d
        for st in active:
            if st.config.action == "fallback" and not d.fallback:
                d.fallback = st.config.name
                self._count(st, spec)
        caps = [st for st in active if st.config.action == "cap_max_tokens"]
        if caps:
            st = min(caps, key=lambda s: s.config.max_tokens)
            cap = st.config.max_tokens
            declared = spec.max_tokens
            if declared is None or declared > cap:
                out = min(spec.num_output_tokens, cap)
                st.num_output_tokens_not_generated += spec.num_output_tokens - out
                st.num_requests_shortened += out < spec.num_output_tokens
                d.spec = dataclasses.replace(spec, max_tokens=cap, num_output_tokens=out)
                d.capped_by = st.config.name
                self._count(st, spec)
        return d

    @staticmethod
    def _count(st: PolicyState, spec: RequestSpec) -> None:
        st.num_requests += 1
        st.request_ids.append(spec.request_id)

    # ------------------------------------------------------------------ report
    def summary(self) -> list[dict]:
        """Per policy: name, action, thresholds, episodes and counters (plain data).

        Keys: ``name``, ``action``, ``when`` (the thresholds), ``release_fraction``,
        ``min_hold_s``, ``num_episodes``, ``active_s`` (summed episode length, seconds),
        ``first_fired_s`` (None if never), ``episodes`` (``start_s``, ``end_s``,
        ``duration_s``, ``trigger``, ``trigger_value``), ``num_requests`` (requests the
        action was applied to), ``num_output_tokens_not_generated``,
        ``num_requests_shortened`` (capped requests whose answer was longer than the cap: the
        others were capped without losing a token) and ``request_ids``.
        """
        out = []
        for st in self.states:
            cfg = st.config
            eps = [{"start_s": e.start_s, "end_s": e.end_s,
                    "duration_s": (e.end_s - e.start_s) if e.end_s is not None else math.nan,
                    "trigger": e.trigger, "trigger_value": e.trigger_value}
                   for e in st.episodes]
            out.append({
                "name": cfg.name, "action": cfg.action,
                "when": {k: v for k, v in cfg.when.model_dump().items() if v is not None},
                "release_fraction": cfg.release_fraction, "min_hold_s": cfg.min_hold_s,
                "max_tokens": cfg.max_tokens,
                "num_episodes": len(eps),
                "active_s": float(sum(e["duration_s"] for e in eps
                                      if not math.isnan(e["duration_s"]))),
                "first_fired_s": eps[0]["start_s"] if eps else None,
                "episodes": eps,
                "num_requests": st.num_requests,
                "num_output_tokens_not_generated": st.num_output_tokens_not_generated,
                "num_requests_shortened": st.num_requests_shortened,
                "request_ids": list(st.request_ids),
            })
        return out


class RoundRobinTarget:
    """A :class:`FallbackTarget` over a contiguous range of replica indices.

    Parameters
    ----------
    first : int
        Index of the first fallback replica in the engine's replica list.
    count : int
        Replicas in the set (>= 1).

    Raises
    ------
    ValueError
        When ``count < 1``.
    """

    def __init__(self, first: int, count: int):
        if count < 1:
            raise ValueError(f"a fallback replica set needs >= 1 replica, got {count}")
        self.first, self.count = int(first), int(count)
        self._next = 0

    def route(self, spec: RequestSpec) -> int:
        i = self.first + self._next
        self._next = (self._next + 1) % self.count
        return i


def observe_replicas(replicas, now: float) -> DegradeSignals:
    """The gateway's view of ``replicas`` at ``now``: KV occupancy, head-of-line delay, waiting.

    Parameters
    ----------
    replicas : sequence
        Engine replicas (``kv_blocks_used()``, ``kv.num_gpu_blocks``, ``sched.num_waiting``
        and ``sched._peek_waiting()``).
    now : float
        Simulated time, seconds.
    """
    used = total = waiting = 0
    delay = 0.0
    for rep in replicas:
        used += rep.kv_blocks_used()
        total += rep.kv.num_gpu_blocks
        n = rep.sched.num_waiting
        pending = rep.pending  # deferred arrivals (async scheduling) wait too
        waiting += n + len(pending)
        head = rep.sched._peek_waiting() if n else (pending[0] if pending else None)
        if head is not None:
            delay = max(delay, now - head.arrival_time_s)
    return DegradeSignals(used / total if total else 0.0, delay, waiting)
