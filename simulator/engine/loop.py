"""SimPy wiring: the arrival process, one process per replica, and the clock.

SimPy owns only time and processes (DESIGN.md section 2). The scheduler, KV manager,
router and performance model are plain objects (the replica,
:class:`~simulator.cluster.replica.Replica`, lives beside the routers; its set-up is
:mod:`simulator.cluster.setup`); the engine drives a scheduler through its interface
(:class:`~simulator.scheduling.interface.Scheduler`) and keeps no scheduler state. Every step,
and every fast-forwarded decode run (the scheduler's
:class:`~simulator.scheduling.emission.Jump`), is priced by the scheduler's perf-side pricer
(:class:`~simulator.perf.step_cost.StepPricer`); its rows are built in
:mod:`simulator.engine.step_rows`. An idle replica sleeps
on an event that the next arrival routed to it triggers (no polling). A fast-forwarded decode run sleeps on
``timeout | wake``: an arrival cuts the run at the end of the step in progress, so results
equal those of stepping one iteration at a time.
"""
from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np
import simpy

from simulator.base.budget import check_run_budget, estimate_scenario_run
from simulator.base.gc_freeze import gc_paused
from simulator.base.request import RequestSpec
from simulator.cluster.replica import Replica, ReplicaSetup, Router, build_offload_store
from simulator.cluster.setup import fallback_scenario
from simulator.engine.autoscaling import start_fleet
from simulator.engine.event_slots import reserve, trigger_at
from simulator.engine.idle import idle_wait
from simulator.engine.lockstep import dp_lockstep_process
from simulator.engine.output import SimOutput
from simulator.engine.sessions import install_session_turns, split_session_turns
from simulator.engine.step_rows import (
    DecodeRunCostRows,
    DecodeRunRows,
    record_step_cost,
    record_step_row,
    record_step_tiers,
    tier_bytes_since_last_row,
)
from simulator.metrics.records import RunRecorder
from simulator.perf.pipeline import PipelinePerfModel
from simulator.scenario.config import Scenario
from simulator.scheduling.degrade import DegradeController, RoundRobinTarget, observe_replicas
from simulator.scheduling.state import REJECTED, ReqState

#: steps of a fast-forwarded decode run priced when it starts (:func:`_run_jump`); each later
#: segment is twice the one before. Measured on the planned and run steps of every decode run
#: of the Llama-3.1-8B/H100 Azure hour and of ten minutes of the ServeGen day: 16 prices 71% and
#: 63% of the planned steps for 0.25 and 0.96 extra wake-ups per run (8: 66% / 60%, 0.62 /
#: 1.52; 32: 81% / 67%, 0.06 / 0.53)
FIRST_SEGMENT_STEPS = 16

#: a replica reports progress once every this many scheduler iterations (a cheap counter;
#: the reporter itself rate-limits what it prints)
PROGRESS_EVERY_ITERATIONS = 512


def _delay_to(now: float, t: float) -> float:
    """A delay ``d`` with ``now + d == t`` exactly in floating point (``t - now`` may miss
    ``t`` by an ulp when ``now < t / 2``), so a fast-forwarded run ends at the very time the
    steps it replaces would."""
    d = t - now
    while now + d < t:
        d = math.nextafter(d, math.inf)
    while now + d > t:
        d = math.nextafter(d, -math.inf)
    return d


def async_admission_lag(perf) -> bool:
    """Whether the replica's engine schedules a step ahead (vLLM V1 async scheduling): the
    batch of step ``j`` is fixed when step ``j - 1`` is launched, so a request that arrives
    while a step runs is first scheduled in the step after the next one.

    vLLM's ``EngineCore.step_with_batch_queue`` (async scheduling, a batch queue of two)
    schedules step ``j + 1`` right after launching step ``j``, before step ``j``'s output
    is back, and takes new requests from its input queue only between loop iterations; an idle
    engine core blocks on that queue and schedules a request at once. Engine profiles with
    ``async_scheduling: true`` (``vllm-v1``) get this lag; a synchronous engine schedules the
    next step from every request that arrived before the current one ended."""
    engine = getattr(perf, "engine", None)
    return bool(getattr(engine, "async_scheduling", False))


def _replica_process(env: simpy.Environment, rep: Replica, rec: RunRecorder, tick=None,
                     fast_forward: bool = True):
    sch = rep.sched
    pricer = sch.step_pricer(rep.perf)
    lag = async_admission_lag(rep.perf)
    if isinstance(rep.perf, PipelinePerfModel):
        # a pipeline-parallel replica steps every iteration: its decode step is priced as a
        # PP cycle and counted in the bubble's tallies (PipelinePerfModel.decode_step_times),
        # which a planned run, whose steps an arrival may cut, cannot do (a fast-forwarded run
        # priced on the stage model alone differed from stepping: review of session 16)
        fast_forward = False
    record = record_step_row
    if rec.step_cost:  # the step table records each step's breakdown (perf.record_step_cost)
        record = record_step_cost
        rep.run_rows = DecodeRunCostRows(rec, pricer)
    if rec.offload:  # ... and each step's KV offload bytes (a run with tiers)
        record = record_step_tiers
    n_iter = 0
    landings = getattr(sch, "new_landings", None)  # KV loads from offload tiers
    while True:
        if tick is not None:
            n_iter += 1
            if n_iter % PROGRESS_EVERY_ITERATIONS == 0:
                tick()
        now = env.now
        out = sch.schedule(now) if sch.has_work() else None
        if landings:  # a load's landing wakes the replica (it cuts a decode run there)
            _landing_timers(env, rep, landings, now)
        flushed = bool(rep.pending)
        if flushed:  # arrived while the last step ran: visible from the next schedule on
            rep.flush_pending(now)
            if out is None and sch.has_work():  # nothing else runs next: schedule them now
                out = sch.schedule(now)
                flushed = False
        if out is None:
            rep.defer = False
            if not sch.has_work():
                if rep.on_idle is not None:  # a drained replica's last request is done
                    rep.on_idle(rep, now)
                rep.wake = env.event()
                yield rep.wake
                rep.wake = None
                continue
            yield from _idle(env, rep, rec, now)
            continue
        rep.defer = lag
        # a run planned now would not see the requests just queued (they join the next step)
        jump = sch.plan_jump(out) if fast_forward and not flushed else None
        if jump is None:
            dt = pricer.price(out).total_s
            yield env.timeout(dt)
            record(rec, rep, out, now, dt)
            sch.update(out, now, now + dt)
            continue
        yield from _run_jump(env, rep, rec, jump, now, pricer)


def _landing_timers(env: simpy.Environment, rep: Replica, landings: list, now: float) -> None:
    """A timer per KV load started since the last schedule: at its landing it wakes the
    replica (:meth:`Replica.notify`), cutting a fast-forwarded decode run at the end of the
    step in progress, where stepping would next schedule and admit the landed request."""
    for t in landings:
        env.timeout(_delay_to(now, t)).callbacks.append(_notify(rep))
    landings.clear()


def _notify(rep: Replica):
    """The callback of a landing timer."""
    def cb(_ev) -> None:
        rep.notify()
    return cb


def _idle(env: simpy.Environment, rep: Replica, rec: RunRecorder, now: float):
    """Nothing to schedule now: sleep until the scheduler's retry time or an arrival, or
    reject the head request when it can never start."""
    wait = idle_wait(rep.sched, rec, now)
    if isinstance(wait, str):  # HEAD_REJECTED
        return
    rep.wake = env.event()
    if wait is not None:
        yield env.timeout(wait - now) | rep.wake
    else:
        yield rep.wake
    rep.wake = None


def _run_jump(env: simpy.Environment, rep: Replica, rec: RunRecorder, jump, now: float,
              pricer):
    """Price a fast-forwarded decode run, sleep through it (an arrival cuts it at the end of
    the step in progress) and commit the steps that ran.

    A run longer than :data:`FIRST_SEGMENT_STEPS` steps is priced a segment at a time
    (:class:`_PricedRun`): about half of a run's planned steps never run (an arrival cuts it
    first: 664,000 steps planned, 351,000 run in the Llama-3.1-8B/H100 Azure hour; 1.49M and
    0.81M in ten minutes of the ServeGen day), and their pricing is most of a run's cost. The
    run's end keeps its place among events at the same time (:mod:`simulator.engine.event_slots`),
    so the outputs are those of pricing every step at the start."""
    k = jump.k_steps
    # sleep on the wake-up event alone: the run's end triggers it too (a callback on its
    # time-out), so no ``timeout | wake`` condition is built per run; an arrival that cuts
    # the run triggers it earlier and the time-out then finds it triggered
    wake = rep.wake = env.event()
    slot = reserve(env) if k > FIRST_SEGMENT_STEPS else None
    run = _PricedRun(env, rep, jump, pricer, wake, now, -1 if slot is None else slot)
    if slot is None:  # the whole run now
        run.price(k)
        env.timeout(_delay_to(now, run.end_s)).callbacks.append(_wake_at_end(wake))
    else:
        jump.cover = run.cover
        run.price(FIRST_SEGMENT_STEPS)
        run.schedule()
    rep.jump = jump
    yield wake
    rep.wake = None
    t = env.now
    run.cover(t)
    el = jump.step_end_times_s
    if t < el[-1]:  # cut (el reaches past t, or it is the whole run)
        done = bisect_right(el, t)  # steps ended by t
        kk = done if (done and el[done - 1] == t) else done + 1  # the step in progress
        kk = max(1, min(kk, k))
        if el[kk - 1] > t:
            yield env.timeout(_delay_to(t, el[kk - 1]))
        k = kk
    rep.jump = None
    jump.cover = None
    _commit_run(rep, rec, jump, k)


class _PricedRun:
    """The steps of a fast-forwarded decode run priced so far (``jump.step_times_s``,
    ``jump.step_end_times_s``), and its wake-up at their end.

    The clock sums step by step from the run's start (as stepping accumulates it; not
    ``start + cumsum``). Unless the run is cut, the wake-up at the end of a segment prices the
    next one, twice as long (:data:`FIRST_SEGMENT_STEPS`, 32, 64, ... steps), and the run's end
    is scheduled in the event order kept for it when it started (``slot``,
    :func:`~simulator.engine.event_slots.reserve`). Whatever reads the steps' times before the
    run ends asks for them first (:meth:`cover`: the engine at a cut or a stop, the KV blocks a
    router or autoscaler sees, :meth:`~simulator.scheduling.emission.Jump.kv_blocks_at`): a
    step's price does not depend on when it was asked for (the memo and the table grid answer
    element by element), so the outputs are those of pricing the whole run at once."""

    __slots__ = ("end_s", "env", "jump", "pricer", "rep", "size", "slot", "wake")

    def __init__(self, env: simpy.Environment, rep: Replica, jump, pricer, wake: simpy.Event,
                 now: float, slot: int) -> None:
        self.env = env
        self.rep = rep
        self.jump = jump
        self.pricer = pricer
        self.wake = wake
        self.slot: int = slot  # -1: priced whole at the start (no wake-up of its own)
        self.size: int = FIRST_SEGMENT_STEPS
        self.end_s: float = now
        jump.start_s, jump.step_times_s, jump.step_end_times_s = now, [], []

    def price(self, n: int) -> None:
        """Price the next ``n`` steps (at most to the run's last)."""
        jump = self.jump
        ends: list = jump.step_end_times_s
        i = len(ends)
        j = min(i + n, jump.k_steps)
        if j <= i:
            return
        times = self.pricer.decode_run_times(jump.step.num_decode_seqs, jump.ctx_totals[i:j])
        # plain floats: a segment is 16 or more steps, where numpy's per-call cost dominates
        e = self.end_s
        for dt in times:
            e += dt
            ends.append(e)
        jump.step_times_s.extend(times)
        self.end_s = e

    def cover(self, t: float) -> None:
        """Price segments until one ends after clock ``t`` or the run is priced whole."""
        k = self.jump.k_steps
        ends: list = self.jump.step_end_times_s
        while len(ends) < k and self.end_s <= t:
            self._next_segment()

    def _next_segment(self) -> None:
        """Price the next segment, twice as long as the one before."""
        self.size *= 2
        self.price(self.size)

    def schedule(self) -> None:
        """Wake at the end of the steps priced, in the event order kept for the run's end
        (a segment's wake-up too: when the steps after it take no time, the run ends at that
        very instant, and must end where it would had it been priced whole): the run's end
        when every step is priced, else the next segment's pricing. One wake-up at a time
        holds the slot (each is scheduled by the one before)."""
        if len(self.jump.step_end_times_s) >= self.jump.k_steps:
            trigger_at(self.env, self.slot, self.end_s, _wake_at_end(self.wake))
        else:
            trigger_at(self.env, self.slot, self.end_s, self.segment_end)

    def segment_end(self, _ev: simpy.Event) -> None:
        """The callback at a segment's end: price the next unless the run was cut (its
        process prices what it reads itself, :meth:`cover`)."""
        if self.wake.triggered or self.rep.jump is not self.jump:
            return
        self._next_segment()
        self.schedule()


def _wake_at_end(wake: simpy.Event):
    """The callback of a decode run's end: trigger ``wake`` unless an arrival did."""
    def cb(_ev) -> None:
        if not wake.triggered:
            wake.succeed()
    return cb


def _commit_run(rep: Replica, rec: RunRecorder, jump, k: int) -> None:
    """Record and apply the first ``k`` steps of a fast-forwarded decode run (the rows go
    through the replica's :class:`~simulator.engine.step_rows.DecodeRunRows`, made at
    its first run: an idle replica holds none; :func:`simulate` flushes them at the end; a
    run that records the steps' breakdown gives each replica its
    :class:`~simulator.engine.step_rows.DecodeRunCostRows` at its start)."""
    rows = rep.run_rows
    if rows is None:
        rows = rep.run_rows = DecodeRunRows(rec)
    if rec.offload:
        rows.add_tier_bytes(*tier_bytes_since_last_row(rep))
    rows.add(rep.idx, rep.step_index, k, jump.start_s, jump.step_times_s,
             jump.step_end_times_s, jump.step, jump.kv_blocks_used, rep.kv.num_gpu_blocks,
             jump.ctx_totals)
    rep.step_index += k
    rec.itl_rows = rows  # the run's gaps go with its rows (RunRecorder.add_itl_run)
    try:
        rep.sched.commit_jump(jump, k)
    finally:
        rec.itl_rows = None


def simulate(scenario: Scenario, setup: ReplicaSetup, specs: Sequence[RequestSpec], *,
             check_transitions: bool = False,
             progress: Callable[[int, int], None] | None = None,
             until_s: float | None = None, fast_forward: bool = True,
             stop_when: Callable[[ReqState, float], bool] | None = None) -> SimOutput:
    """Run the discrete-event simulation of ``specs`` on the scenario's cluster.

    Parameters
    ----------
    scenario : Scenario
    setup : ReplicaSetup
        From :func:`build_setup`.
    specs : sequence of RequestSpec
        Sorted by arrival time.
    check_transitions : bool
        Verify lifecycle transitions as they happen (tests).
    progress : callable, optional
        ``progress(num_finished, num_total)`` (requests completed, rejected or cancelled so
        far, of all requests) every :data:`PROGRESS_EVERY_ITERATIONS` scheduler iterations
        of a replica and at the end.
    until_s : float, optional
        Stop the clock at this time (requests still in flight are reported as such).
    fast_forward : bool
        Let schedulers jump over runs of identical decode steps (default); False steps every
        iteration (the outputs are byte-identical either way: the equivalence tests).
    stop_when : callable, optional
        ``stop_when(request, now_s) -> bool``, called after every request finishes
        (completed, rejected or cancelled); True ends the run at that instant, as
        ``until_s`` does (requests in flight are reported as such; requests not yet arrived
        never enter). The capacity planner stops a probe whose verdict is already known.

    Raises
    ------
    simulator.base.budget.ResourceError
        When the run's memory estimate exceeds the budget (:mod:`simulator.base.budget`); a
        :class:`simulator.base.budget.MemoryBudgetWarning` when it may.
    """
    check_run_budget(estimate_scenario_run(scenario, setup, specs, until_s),
                     what=f"scenario '{scenario.name}'")
    with gc_paused():  # no collections during the run (it makes almost no cyclic garbage)
        return _simulate(scenario, setup, specs, check_transitions, progress, until_s,
                         fast_forward, stop_when)


def _cancel_callback(env: simpy.Environment, r: ReqState, replicas: list):
    """The callback of ``r``'s cancellation time-out (``cancel_after_s``), at the replica that
    holds ``r`` when it fires (``replicas[r.replica_id]``: a drained replica's queued requests
    may have moved)."""
    def cb(_ev):
        rep = replicas[r.replica_id]
        was_waiting = r.status == "waiting"
        asked = r.cancel_requested
        rep.sched.cancel(r, env.now)
        if (was_waiting and r.status != "waiting") or r.cancel_requested != asked:
            rep.notify()  # the queue or the batch changed: cut a decode run at this step
    return cb


def _timeout_callback(env: simpy.Environment, rec: RunRecorder, r: ReqState, replicas: list):
    """The callback of ``r``'s queue time-out (``max_queue_delay_s``): rejected if it was never
    scheduled (at the replica that holds it when it fires)."""
    def cb(_ev):
        rep = replicas[r.replica_id]
        never_scheduled = r.first_scheduled_time_s != r.first_scheduled_time_s  # NaN
        if r.status == "waiting" and never_scheduled and rep.sched.remove_waiting(r):
            rec.finish(r, env.now, REJECTED, "queue_timeout")
            rep.notify()
    return cb


def _run_to_end(env: simpy.Environment, rec: RunRecorder, replicas: list, until_s, stop_when):
    """Run the clock to the end (or ``until_s`` / the stop condition), credit the steps of decode
    runs cut by a stop, and record the decode runs' rows not recorded yet."""
    stopped = _install_stop(env, rec, stop_when) if stop_when is not None else None
    if until_s is not None or stopped is not None:
        env.run(until=until_s)
        end_s = env.now if (until_s is None or stopped) else until_s
        for rep in replicas:  # credit the steps of a decode run that ended before the stop
            jump = rep.jump
            if jump is not None:
                if jump.cover is not None:  # the steps priced so far reach past the stop
                    jump.cover(end_s)
                    jump.cover = None
                done = int(np.searchsorted(jump.step_end_times_s, end_s, side="left"))
                rep.jump = None
                if done:
                    _commit_run(rep, rec, jump, done)
    else:
        env.run()
    for rep in replicas:  # the decode runs' rows not recorded yet
        rep.enqueue = None   # the run's closure: a finished replica pickles without it
        if rep.run_rows is not None:
            rep.run_rows.flush()
            rep.run_rows = None


def _simulate(scenario: Scenario, setup: ReplicaSetup, specs, check_transitions: bool,
              progress, until_s: float | None, fast_forward: bool, stop_when) -> SimOutput:
    """:func:`simulate` once its budget is checked."""
    t0 = time.perf_counter()
    env = simpy.Environment()
    rec = RunRecorder(check_transitions=check_transitions,
                      step_cost=scenario.perf.record_step_cost,
                      sessions=any(s.session_id is not None for s in specs),
                      offload=scenario.kv_cache.offload_tiers is not None)
    n_primary = scenario.cluster.num_replicas
    replicas = make_replicas(scenario, setup, rec, env)
    serving = replicas[:n_primary]  # the router's replicas (an autoscaled pool's fleet moves)
    router = Router(scenario.cluster.router, scenario.seed,
                    scenario.cluster.prefix_affinity_load_guard)
    degrade = DegradeController(scenario.scheduler.admission.degrade)
    fallback = (RoundRobinTarget(n_primary, len(replicas) - n_primary)
                if len(replicas) > n_primary else None)
    admission = scenario.scheduler.admission
    n_total = len(specs)
    tick = None if progress is None else (lambda: progress(rec.num_finished, n_total))
    lockstep = scenario.cluster.dp_lockstep_active  # (refused with speculative: config)
    if lockstep:  # DP x EP (issue 11): the primaries only; a fallback set steps on its own
        env.process(dp_lockstep_process(env, serving, rec, tick))
    for rep in (replicas[n_primary:] if lockstep else replicas):
        env.process(_replica_process(env, rep, rec, tick, fast_forward))

    def enqueue(r, rep, now):
        """Queue ``r`` at its replica's scheduler (at its arrival, or when a deferred arrival
        becomes visible: its time-outs still count from the arrival)."""
        spec = r.spec
        if rep.sched.add_request(r, now):
            waited = now - spec.arrival_time_s
            if spec.cancel_after_s is not None:
                env.timeout(max(0.0, spec.cancel_after_s - waited)).callbacks.append(
                    _cancel_callback(env, r, replicas))
            if admission.max_queue_delay_s is not None:
                env.timeout(max(0.0, admission.max_queue_delay_s - waited)).callbacks.append(
                    _timeout_callback(env, rec, r, replicas))
            rep.notify()

    for rep in replicas:
        rep.enqueue = enqueue
    first, follow = split_session_turns(scenario, specs)  # closed-loop turns wait

    def arrive(spec):
        """Route and queue one arriving request (at ``env.now``)."""
        spec, i, shed = (_degrade_decision(degrade, serving, fallback, spec, env.now)
                         if degrade else (spec, -1, False))
        r = ReqState(spec)
        rec.admit(r)
        if shed:
            rec.reject(r, env.now, "degrade_shed")
            return
        rep = serving[router.route(spec, serving)] if i < 0 else replicas[i]
        r.replica_id = rep.idx
        if (admission.max_waiting is not None
                and rep.sched.num_waiting + len(rep.pending) >= admission.max_waiting):
            rec.reject(r, env.now, "queue_full")
            return
        if rep.defer:  # a step is in flight and the next one is already scheduled
            rep.pending.append(r)
            rep.notify()  # a fast-forwarded run ends with the step in progress
            return
        enqueue(r, rep, env.now)

    if follow:
        install_session_turns(env, rec, follow, arrive, _delay_to)
    fleet = None if scenario.cluster.autoscale is None or not specs else start_fleet(
        env, scenario, setup, rec, replicas, serving, router, n_total, specs[0].arrival_time_s,
        lambda rep: env.process(_replica_process(env, rep, rec, tick, fast_forward)))
    env.process(_arrivals(env, first, arrive))
    _run_to_end(env, rec, replicas, until_s, stop_when)
    if tick is not None:
        tick()
    degrade.close(env.now)
    return SimOutput(rec, replicas, env.now, time.perf_counter() - t0,
                     degrade=degrade.summary() if degrade else [],
                     num_primary_replicas=n_primary if fleet is None else len(replicas),
                     replica_spans=None if fleet is None else fleet.replica_spans(),
                     autoscale=None if fleet is None else fleet.outputs())


def _arrivals(env: simpy.Environment, specs, arrive):
    """The arrival process: ``arrive(spec)`` at each spec's arrival time, in order."""
    for spec in specs:
        dt = spec.arrival_time_s - env.now
        if dt > 0:
            yield env.timeout(dt)
        arrive(spec)


def _install_stop(env: simpy.Environment, rec: RunRecorder, stop_when) -> list:
    """Check ``stop_when`` after every finish; when it holds, end ``env.run`` at that instant
    (a :class:`simpy.core.StopSimulation` event). Returns a list that is non-empty once
    stopped."""
    stopped: list = []
    finish = rec.finish

    def finish_and_check(r, now, status, reason):
        finish(r, now, status, reason)
        if not stopped and stop_when(r, now):
            stopped.append(now)
            ev = env.event()
            ev.callbacks.append(simpy.core.StopSimulation.callback)
            ev.succeed()

    rec.finish = finish_and_check  # type: ignore[method-assign]
    return stopped


def make_replicas(scenario: Scenario, setup: ReplicaSetup, rec: RunRecorder,
                  env: simpy.Environment | None = None) -> list:
    """The scenario's replicas: ``cluster.num_replicas`` primaries (ids 0..N-1), then the
    degrade fallback set (``scheduler.admission.fallback``, from ``setup.extra["fallback"]``),
    on the clock ``env``; with an LMCache ``shared`` offload store, one store for them all."""
    n_primary = scenario.cluster.num_replicas
    off = scenario.kv_cache.offload_tiers
    # LMCache shared backend: one store for the pool
    shared = build_offload_store(off, setup) if off is not None and off.shared else None
    replicas = [Replica(i, setup, scenario, rec, shared) for i in range(n_primary)]
    fb_setup = setup.extra.get("fallback")
    if fb_setup is not None:
        fb_scenario = fallback_scenario(scenario)
        assert fb_scenario is not None  # a fallback setup comes with its scenario
        replicas += [Replica(n_primary + j, fb_setup, fb_scenario, rec)
                     for j in range(fb_scenario.cluster.num_replicas)]
    for rep in replicas:
        rep.env = env
    return replicas


def _degrade_decision(degrade: DegradeController, primaries: list, fallback,
                      spec: RequestSpec, now: float) -> tuple[RequestSpec, int, bool]:
    """Evaluate the degrade policies on the primaries' state at ``now``, switch speculation
    on or off accordingly and decide what happens to ``spec``: the spec to admit (capped or
    not), the fallback replica's index (-1: the router decides) and whether it is shed."""
    degrade.evaluate(now, observe_replicas(primaries, now))
    off = degrade.speculation_disabled
    for rep in primaries:
        if getattr(rep.sched, "speculation_paused", None) is not None:
            rep.sched.speculation_paused = off
    d = degrade.decide(spec)
    return d.spec, (fallback.route(d.spec) if d.fallback else -1), bool(d.shed)
