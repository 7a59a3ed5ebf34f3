"""Data-parallel ranks of an expert-parallel deployment stepping in lockstep.

In vLLM's DP + EP deployments (``--data-parallel-size N --enable-expert-parallel``) every MoE
layer exchanges tokens between all ranks, so the ranks run their forward passes together: a
rank with nothing to do runs a dummy batch, and each step of the group lasts as long as its
slowest rank's step. The replicas of such a cluster therefore share one clock here: at each
step every rank with work schedules its batch, the group's step takes the maximum of the
ranks' step times, and every rank's step (and token emissions) end together. Ranks step one
iteration at a time (no fast-forwarded decode runs: another rank's arrival can change any
step's length).
"""
from __future__ import annotations

from simulator.engine.idle import HEAD_REJECTED, idle_wait
from simulator.engine.step_rows import record_step, record_step_cost


def _idle_or_reject(reps, rec, now: float):
    """No rank could schedule: reject a head request that can never fit an empty rank
    (:data:`~simulator.engine.idle.HEAD_REJECTED`), else return the earliest time a rank can
    start by itself (None: wait for an arrival)."""
    waits = []
    for rep in reps:
        sch = rep.sched
        if not sch.has_work():
            continue
        wait = idle_wait(sch, rec, now)
        if wait is HEAD_REJECTED:
            return HEAD_REJECTED
        if wait is not None:
            waits.append(wait)
    return min(waits) if waits else None


def dp_lockstep_process(env, reps, rec, tick=None, progress_every: int = 1000):
    """SimPy process driving the replicas ``reps`` (DP ranks of one EP group) in lockstep.

    Each rank's scheduler is driven through the
    :class:`~simulator.scheduling.interface.Scheduler` interface and its steps are priced by
    its own pricer (:meth:`~simulator.scheduling.interface.Scheduler.step_pricer`), every
    step by ``step_time`` (``decode_memo=False``: ranks never fast-forward, and their
    one-token decode steps have always been priced so).

    Parameters
    ----------
    env : simpy.Environment
    reps : list of simulator.cluster.replica.Replica
    rec : RunRecorder
    tick : callable, optional
        Called every ``progress_every`` group steps.
    """
    pricers = [rep.sched.step_pricer(rep.perf) for rep in reps]
    n_iter = 0
    while True:
        n_iter += 1
        if tick is not None and n_iter % progress_every == 0:
            tick()
        now = env.now
        outs = [rep.sched.schedule(now) if rep.sched.has_work() else None for rep in reps]
        if all(o is None for o in outs):
            wait = _idle_or_reject(reps, rec, now)
            if wait is HEAD_REJECTED:
                continue
            ev = env.event()
            for rep in reps:
                rep.wake = ev
            yield (env.timeout(wait - now) | ev) if wait is not None else ev
            for rep in reps:
                rep.wake = None
            continue
        dt = max(pricer.price(o, decode_memo=False).total_s
                 for pricer, o in zip(pricers, outs) if o is not None)
        yield env.timeout(dt)
        end = now + dt
        # the step table's breakdown (perf.record_step_cost): the slowest rank's, whose
        # total every rank's row records
        slowest = next(o.cost for o in outs if o is not None and o.cost.total_s == dt) \
            if rec.step_cost else None
        for rep, out in zip(reps, outs):
            if out is None:
                continue
            if slowest is None:
                record_step(rec, rep, out, now, dt)
            else:
                record_step_cost(rec, rep, out, now, dt, slowest)
            rep.sched.update(out, now, end)
