"""The autoscaled pool in the simulation: the evaluation process, replicas added after their
cold start and replicas drained (``cluster.autoscale``; the decision rule is
:class:`simulator.cluster.autoscale.AutoscaleController`).

Replicas keep their index for the whole run (new ones are appended); the router sees the
*serving* replicas only (cold start over, not draining). Every replica's life is a
:class:`simulator.metrics.fleet.ReplicaSpan`: GPU-hours and cost integrate over them.
"""
from __future__ import annotations

import math
from bisect import insort
from collections.abc import Callable

import simpy

from simulator.cluster.autoscale import AutoscaleController, cold_start, request_met_slo
from simulator.cluster.replica import Replica
from simulator.metrics.fleet import ReplicaSpan
from simulator.scenario.config import Scenario


class Fleet:
    """An autoscaled pool's replicas over time.

    Parameters
    ----------
    env : simpy.Environment
    scenario : Scenario
        With ``cluster.autoscale``.
    setup : ReplicaSetup
    rec : RunRecorder
    replicas : list of Replica
        Every replica of the run, indexed by id (the initial ones; the fleet appends).
    serving : list of Replica
        The router's replicas (the fleet adds and removes; sorted by id).
    start : callable
        ``start(rep)`` starts a new replica's SimPy process.
    router : Router
        The pool's router: a drained replica's queued requests go where it sends them.
    shared_store : OffloadStore or None
        The pool's shared KV offload store (LMCache ``shared``), given to new replicas.
    """

    def __init__(self, env: simpy.Environment, scenario: Scenario, setup, rec,
                 replicas: list, serving: list, start: Callable, router, shared_store=None):
        self.env, self.scenario, self.setup, self.rec = env, scenario, setup, rec
        self.cfg = scenario.cluster.autoscale
        assert self.cfg is not None
        self.replicas, self.serving, self.start = replicas, serving, start
        self.router, self.shared_store = router, shared_store
        self.controller = AutoscaleController(self.cfg, scenario.slo.attainment_target)
        self.cold = cold_start(self.cfg.cold_start,
                               setup.model.weight_bytes(setup.weight_dtype))
        inf = math.inf
        #: replica id -> [provisioned_s, serving_s, drain_s, released_s]
        self.spans: dict[int, list[float]] = {rep.idx: [-inf, -inf, inf, inf]
                                              for rep in replicas}
        self.starting: list[Replica] = []  # cold start in progress
        self.events: list[dict] = []
        self._finished = [0, 0]  # requests finished since the last sample: met SLOs, all

    # ------------------------------------------------------------------ observation
    def committed(self) -> int:
        """Replicas serving or starting (what a decision counts as held)."""
        return len(self.serving) + len(self.starting)

    def on_finish(self, r) -> None:
        """A request finished (completed, rejected or cancelled)."""
        self._finished[1] += 1
        if request_met_slo(r, self.scenario.slo):
            self._finished[0] += 1

    def sample(self, now: float) -> tuple[float, float]:
        """The policy's observation now, as ``(numerator, denominator)``."""
        policy = self.cfg.policy
        if policy == "running_requests":
            return float(sum(rep.num_outstanding() for rep in self.serving)), 1.0
        if policy == "kv_cache_utilization":
            return float(sum(rep.kv_blocks_used() / rep.kv.num_gpu_blocks
                             for rep in self.serving)), 1.0
        if policy == "queue_delay":
            ages = [now - r.arrival_time_s for rep in self.serving
                    for r in (*rep.sched.waiting_requests(), *rep.pending)
                    if r.first_scheduled_time_s != r.first_scheduled_time_s]  # never started
            return (sum(ages) / len(ages) if ages else 0.0), 1.0
        met, done = self._finished
        self._finished = [0, 0]
        return float(met), float(done)

    # ------------------------------------------------------------------ the process
    def process(self, first_s: float, done: simpy.Event):
        """Evaluate every ``interval_s`` from ``first_s`` until ``done`` (every request of
        the run finished)."""
        env, ctl, dt = self.env, self.controller, self.cfg.interval_s
        k = 1
        while True:
            t = first_s + k * dt
            if t > env.now:
                yield env.timeout(t - env.now) | done
            if done.triggered:
                return
            k += 1
            now = env.now
            ctl.add_sample(now, *self.sample(now))
            n = self.committed()
            want = ctl.decide(now, n)
            for _ in range(want - n):
                self.provision(now)
            if want < n:
                self.drain(now, n - want)

    def _event(self, now: float, action: str, rep: Replica) -> None:
        self.events.append({"time_s": now, "action": action, "replica_id": rep.idx,
                            "serving": len(self.serving), "starting": len(self.starting),
                            "metric": self.controller.metric()})

    # ------------------------------------------------------------------ scaling
    def provision(self, now: float) -> None:
        """Take a new replica's GPUs now; it serves after the cold start."""
        rep = Replica(len(self.replicas), self.setup, self.scenario, self.rec,
                      self.shared_store)
        rep.env = self.env
        rep.enqueue = self.replicas[0].enqueue
        self.replicas.append(rep)
        self.starting.append(rep)
        self.spans[rep.idx] = [now, math.inf, math.inf, math.inf]
        self.start(rep)
        self._event(now, "scale_up", rep)
        self.env.timeout(self.cold.total_s).callbacks.append(self._ready(rep))

    def _ready(self, rep: Replica):
        def cb(_ev) -> None:
            if rep not in self.starting:  # drained during its cold start
                return
            now = self.env.now
            self.starting.remove(rep)
            self.spans[rep.idx][1] = now
            insort(self.serving, rep, key=lambda x: x.idx)
            self._event(now, "serving", rep)
        return cb

    def drain(self, now: float, k: int) -> None:
        """Remove ``k`` replicas: starting ones first (their cold start is abandoned; the
        newest first), then serving ones with the fewest outstanding requests (ties: the
        newest). Every replica leaving is chosen before any request migrates, so a request
        moves at most once."""
        leaving = []
        for _ in range(k):
            if self.starting:
                rep = self.starting.pop()
                span = self.spans[rep.idx]
                span[2] = span[3] = now  # never served: serving_s stays inf
                self._event(now, "cancel_start", rep)
                continue
            rep = min(reversed(self.serving), key=lambda x: x.num_outstanding())
            self.serving.remove(rep)
            self.spans[rep.idx][2] = now
            self._event(now, "scale_down", rep)
            leaving.append(rep)
        for rep in leaving:
            if self.cfg.drain == "migrate":
                self._migrate(rep, now)
            if not rep.sched.has_work() and not rep.pending:
                self._release(rep, now)
            else:
                rep.on_idle = self._release

    def _release(self, rep: Replica, now: float) -> None:
        """A drained replica's last request is done: its GPUs go back."""
        rep.on_idle = None
        self.spans[rep.idx][3] = now
        self._event(now, "released", rep)

    def _migrate(self, rep: Replica, now: float) -> None:
        """Hand ``rep``'s queued requests that hold nothing there (no blocks, no swapped or
        loading KV) back to the router, oldest first; the rest finish on ``rep``."""
        queued = [r for r in rep.sched.waiting_requests()
                  if not r.kv_handle.block_ids and r.swapped_blocks == 0
                  and r.kv_ready_s != r.kv_ready_s]
        for r in queued:
            rep.sched.remove_waiting(r)
        deferred, rep.pending = rep.pending, []  # routed here, not queued yet
        for r in sorted(queued + deferred, key=lambda r: (r.arrival_time_s, r.request_id)):
            to = self.serving[self.router.route(r.spec, self.serving)]
            r.replica_id = to.idx
            if r.status == "new":  # a deferred arrival: queued as it would have been here
                if to.defer:
                    to.pending.append(r)
                else:
                    to.enqueue(r, to, now)
            else:  # already waiting (its time-outs look its replica up when they fire)
                to.sched.requeue_migrated(r)
            to.notify()
        if queued or deferred:
            rep.notify()

    # ------------------------------------------------------------------ outputs
    def replica_spans(self) -> list[ReplicaSpan]:
        """Every replica's life, by id."""
        return [ReplicaSpan(i, *self.spans[i]) for i in sorted(self.spans)]

    def outputs(self) -> dict:
        """The run's scaling record: the cold start and its parts, and every event
        (``scale_up``, ``serving``, ``cancel_start``, ``scale_down``, ``released``) with the
        time, the replica, the replicas serving and starting after it and the metric then."""
        return {"cold_start": self.cold.as_dict(), "events": list(self.events)}


def start_fleet(env: simpy.Environment, scenario: Scenario, setup, rec, replicas: list,
                serving: list, router, num_requests: int, first_arrival_s: float,
                start: Callable) -> Fleet:
    """Put an autoscaled pool's controller on the clock: evaluations every ``interval_s``
    from the first arrival until all ``num_requests`` requests have finished (a finish hook
    on ``rec`` counts them and feeds the ``slo_attainment`` metric)."""
    off = scenario.kv_cache.offload_tiers
    shared = replicas[0].kv.offload if off is not None and off.shared else None
    fleet = Fleet(env, scenario, setup, rec, replicas, serving, start, router, shared)
    done = env.event()
    finish = rec.finish

    def finish_and_count(r, now, status, reason):
        finish(r, now, status, reason)
        fleet.on_finish(r)
        if rec.num_finished >= num_requests and not done.triggered:
            done.succeed()

    rec.finish = finish_and_count
    env.process(fleet.process(first_arrival_s, done))
    return fleet
