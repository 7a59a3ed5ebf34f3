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


def _idle_or_reject(reps, rec, now: float):
    """No rank could schedule: reject a head request that can never fit an empty rank, else
    return the earliest time a rank can start by itself (None: wait for an arrival)."""
    waits = []
    for rep in reps:
        sch = rep.sched
        if not sch.has_work():
            continue
        wait = sch.idle_until(now) if hasattr(sch, "idle_until") else None
        if wait is None and not sch.running and sch.num_waiting:
            head = sch.queue.peek()
            sch.remove_waiting(head)
            rec.reject(head, now, "kv_capacity")
            return "rejected"
        if wait is not None:
            waits.append(wait)
    return min(waits) if waits else None


def dp_lockstep_process(env, reps, rec, tick=None, progress_every: int = 1000):
    """SimPy process driving the replicas ``reps`` (DP ranks of one EP group) in lockstep.

    Parameters
    ----------
    env : simpy.Environment
    reps : list of simulator.engine.loop.Replica
    rec : RunRecorder
    tick : callable, optional
        Called every ``progress_every`` group steps.
    """
    n_iter = 0
    while True:
        n_iter += 1
        if tick is not None and n_iter % progress_every == 0:
            tick()
        now = env.now
        outs = [rep.sched.schedule(now) if rep.sched.has_work() else None for rep in reps]
        if all(o is None for o in outs):
            wait = _idle_or_reject(reps, rec, now)
            if wait == "rejected":
                continue
            ev = env.event()
            for rep in reps:
                rep.wake = ev
            yield (env.timeout(wait - now) | ev) if wait is not None else ev
            for rep in reps:
                rep.wake = None
            continue
        dt = max(rep.perf.step_time(o.shape) + getattr(o, "extra_time_s", 0.0)
                 for rep, o in zip(reps, outs) if o is not None)
        yield env.timeout(dt)
        end = now + dt
        for rep, out in zip(reps, outs):
            if out is None:
                continue
            kv = rep.kv
            rec.add_step((rep.idx, rep.step_index, now, dt, end, out.batch_size,
                          out.num_prefill_tokens, out.num_decode_tokens, out.num_prefill_seqs,
                          out.num_decode_seqs, out.num_waiting, kv.num_used_blocks,
                          kv.num_gpu_blocks, len(out.preempted), out.kv_tokens,
                          out.num_padding_seqs))
            rep.step_index += 1
            rep.sched.update(out, now, end)
