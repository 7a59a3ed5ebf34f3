"""Queueing-theory limits the engine must reproduce.

(a) M/D/1. With ``max_num_seqs = 1``, one-token outputs, prompts that fit one step and a
constant step time ``D`` (a stub performance model), every request is served in exactly one
step: a single FCFS server with deterministic service. A request that arrives while a step
runs waits for it to end (the next step starts at that boundary), which is exactly the
M/D/1 queue. So:

- per request, the waiting time (first scheduled - arrival) must equal Lindley's recursion
  ``W[n+1] = max(0, W[n] + D - (A[n+1] - A[n]))`` on the same arrival times (exact, 1e-9);
- over Poisson arrivals at load ``rho = lambda D``, the mean wait must match
  Pollaczek-Khinchine ``Wq = rho D / (2 (1 - rho))`` and the fraction of requests that do
  not wait must match ``1 - rho``. Tolerance: 4 standard errors from 20 batch means of
  1,000 consecutive requests each (batching absorbs the autocorrelation of successive
  waits); the test also asserts that this standard error is small (< 5% of Wq), so the
  comparison has power.

(b) Little's law on the records of a batching run with the roofline model: over a window in
the middle of the run, the time-average number of requests in the system (swept from the
arrival/finish events) equals throughput x mean E2E of the requests finishing in it within 1%
(and the same for the queue: waiting requests vs queueing delay).
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import ConstantStepPerf, load_specs, make_scenario, run_sim, synthetic_workload

D = 0.01  # seconds per step
N = 20_000


def _md1_run(rho):
    sc = make_scenario({"scheduler": {"max_num_seqs": 1}}, workload={"synthetic": {
        "arrival": {"process": "poisson", "rate_rps": rho / D}, "num_requests": N,
        "prompt_tokens": {"dist": "fixed", "value": 10},
        "output_tokens": {"dist": "fixed", "value": 1}}})
    specs = load_specs(sc)
    out = run_sim(sc, specs, perf=ConstantStepPerf(D), check_transitions=False)
    return out.requests(), out.steps()


def _lindley(arrivals, service):
    w = np.zeros(len(arrivals))
    gaps = np.diff(arrivals)
    for i in range(1, len(arrivals)):
        w[i] = max(0.0, w[i - 1] + service - gaps[i - 1])
    return w


def _batch_means(x, batches=20):
    m = x[: len(x) // batches * batches].reshape(batches, -1).mean(axis=1)
    return m.mean(), m.std(ddof=1) / np.sqrt(batches)


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_md1_waiting_time(rho):
    df, steps = _md1_run(rho)
    assert (df.status == "completed").all() and len(df) == N
    # one step of exactly D per request
    assert len(steps) == N and np.allclose(steps.step_time_s, D)
    served = (df.first_token_time_s - df.first_scheduled_time_s).to_numpy()
    np.testing.assert_allclose(served, D, rtol=1e-9)
    arrivals = df.arrival_time_s.to_numpy()
    wait = (df.first_scheduled_time_s - df.arrival_time_s).to_numpy()
    # the engine is the M/D/1 queue, request by request
    np.testing.assert_allclose(wait, _lindley(arrivals, D), rtol=0, atol=1e-9)
    # TTFT = wait + service; E2E = TTFT for one-token outputs
    np.testing.assert_allclose(df.first_token_time_s - df.arrival_time_s, wait + D, atol=1e-9)
    # Pollaczek-Khinchine
    lam_hat = (N - 1) / (arrivals[-1] - arrivals[0])
    assert lam_hat * D == pytest.approx(rho, rel=0.03)  # the arrivals are at the load asked
    wq = rho * D / (2 * (1 - rho))
    mean, se = _batch_means(wait)
    assert se < 0.05 * wq
    assert abs(mean - wq) < 4 * se, (mean, wq, se)
    p0, se0 = _batch_means((wait < 1e-12).astype(float))
    assert abs(p0 - (1 - rho)) < 4 * se0 + 1e-3, (p0, 1 - rho, se0)


def _time_average(starts, ends, t0, t1):
    """Time-average count of intervals [start, end) covering t, over [t0, t1], by sweeping
    the +1/-1 events (independent of the interval lengths' sum)."""
    ev = np.concatenate([np.clip(starts, t0, t1), np.clip(ends, t0, t1)])
    dn = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    keep = ~((starts >= t1) | (ends <= t0))
    keep = np.concatenate([keep, keep])
    ev, dn = ev[keep], dn[keep]
    order = np.lexsort((-dn, ev))  # at equal times count arrivals first
    ev, dn = ev[order], dn[order]
    n = np.cumsum(dn)
    area = np.sum(n[:-1] * np.diff(ev)) if len(ev) > 1 else 0.0
    return area / (t1 - t0)


def test_littles_law_on_records():
    sc = make_scenario({"kv_cache": {"num_gpu_blocks": 3000}},
                       workload=synthetic_workload(3000, 10, prompt_median=400,
                                                   output_median=120))
    out = run_sim(sc, check_transitions=False)
    df = out.requests()
    assert (df.status == "completed").all()
    a = df.arrival_time_s.to_numpy()
    f = df.finish_time_s.to_numpy()
    s = df.first_scheduled_time_s.to_numpy()
    span = f.max() - a.min()
    t0, t1 = a.min() + 0.1 * span, a.min() + 0.9 * span
    done = (f > t0) & (f <= t1)
    throughput = done.sum() / (t1 - t0)
    # system: arrival -> finish
    L = _time_average(a, f, t0, t1)
    W = (f - a)[done].mean()
    assert L > 5  # a busy system: batching with queueing, not a trivial case
    assert L == pytest.approx(throughput * W, rel=0.01)
    # queue: arrival -> first scheduled (no preemption here, so one wait per request)
    assert df.num_preemptions.sum() == 0
    started = (s > t0) & (s <= t1)
    Lq = _time_average(a, s, t0, t1)
    Wq = (s - a)[started].mean()
    assert Lq > 0.01  # requests do queue (for less than a step on average)
    assert Lq == pytest.approx(started.sum() / (t1 - t0) * Wq, rel=0.01)
