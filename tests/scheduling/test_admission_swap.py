"""Swap preemption, per-tenant share and priority preemption (issue 3, part 3 and 6)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import ConstantStepPerf

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.scenario.config import validate_scenario

STEP_S = 0.01




def _scenario(**sched):
    kv = sched.pop("kv", {})
    return validate_scenario({
        "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "scheduler": {"max_num_seqs": 8, "max_num_batched_tokens": 512, **sched},
        "kv_cache": {"block_size": 16, **kv},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}},
    })


def _run(sc, specs, **kw):
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(STEP_S)
    return simulate(sc, setup, specs, check_transitions=True, **kw), setup


def _specs(n, prompt, output, gap=0.0, **kw):
    return [RequestSpec(i, i * gap, prompt, output, **kw) for i in range(n)]


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preemption_modes_account_prefill_work(mode):
    # 6 requests of 64 prompt + 64 output tokens; 20 blocks of 16 tokens = 320 tokens of KV:
    # together they need 6 x 8 = 48 blocks at the end, so the pool runs dry and preempts.
    sc = _scenario(preemption_mode=mode, kv={"num_gpu_blocks": 20, "swap_space_gb": 4})
    specs = _specs(6, 64, 64)
    sim, setup = _run(sc, specs)
    req = sim.requests()
    steps = sim.steps()
    assert (req.status == "completed").all()
    assert req.num_preemptions.sum() > 0  # non-vacuity: the pool did run dry
    prefill = int(steps.num_prefill_tokens.sum())
    prompts = int(req.num_prompt_tokens.sum())
    swaps = sum(r.sched.num_swap_outs for r in sim.replicas)
    if mode == "recompute":
        assert swaps == 0
        assert prefill > prompts  # preempted requests recompute prompt + emitted tokens
    else:
        assert swaps == req.num_preemptions.sum()
        assert prefill == prompts  # swapped requests keep their progress
        # each swap-out and swap-in adds blocks x block bytes / host-link bandwidth
        extra = steps.step_time_s.to_numpy() - STEP_S
        assert (extra > -1e-12).all()
        block_bytes = 131072 * 16
        bw = setup.gpu.host_link_bandwidth_bytes_per_s
        unit = block_bytes / bw
        moved = extra[extra > 1e-12] / unit
        assert np.allclose(moved, np.round(moved), atol=1e-6)  # whole blocks moved
        assert moved.sum() > 0


def test_swap_space_limit_falls_back_to_recompute():
    # swap space for only 1 block: every victim holds more, so all preemptions recompute
    block_gib = 131072 * 16 / 2**30   # swap_space_gb is GiB, as vLLM's --swap-space
    sc = _scenario(preemption_mode="swap", kv={"num_gpu_blocks": 20, "swap_space_gb": block_gib})
    sim, _ = _run(sc, _specs(6, 64, 64))
    req = sim.requests()
    assert req.num_preemptions.sum() > 0
    assert sum(r.sched.num_swap_outs for r in sim.replicas) == 0


def _running_counts(transitions, tenant_of):
    """Max simultaneous running requests per tenant, replayed from the transition log."""
    cur: dict[str, int] = {}
    peak: dict[str, int] = {}
    for _t, rid, frm, to in transitions:
        t = tenant_of[rid]
        if to == "running":
            cur[t] = cur.get(t, 0) + 1
            peak[t] = max(peak.get(t, 0), cur[t])
        elif frm == "running":
            cur[t] -= 1
    return peak


def test_tenant_max_share_caps_running_sequences():
    # tenant A floods 12 requests first, B sends 4; max_num_seqs 4, share 0.5 -> A <= 2
    specs = ([RequestSpec(i, 0.0, 20, 30, tenant="A") for i in range(12)]
             + [RequestSpec(12 + i, 0.0, 20, 30, tenant="B") for i in range(4)])
    sc = _scenario(max_num_seqs=4, admission={"tenant_max_share": 0.5})
    sim, _ = _run(sc, specs)
    tenant_of = {s.request_id: s.tenant for s in specs}
    peak = _running_counts(sim.recorder.transitions, tenant_of)
    assert peak["A"] == 2 and peak["B"] == 2
    # without the cap, A (first in FCFS order) takes all 4 slots
    sim2, _ = _run(_scenario(max_num_seqs=4), specs)
    peak2 = _running_counts(sim2.recorder.transitions, tenant_of)
    assert peak2["A"] == 4
    assert (sim.requests().status == "completed").all()


def test_priority_request_preempts_less_important_running():
    # 4 low-priority (priority 5) requests fill max_num_seqs=4; mid-step an urgent
    # request (priority 0) arrives at t=0.055: it must start at the next step boundary (t=0.06),
    # preempting the least important, latest-arriving running request (id 3).
    specs = [RequestSpec(i, 0.0, 10, 200, priority=5) for i in range(4)]
    specs.append(RequestSpec(4, 0.055, 10, 5, priority=0))
    sc = _scenario(max_num_seqs=4, queue_policy="priority")
    sim, _ = _run(sc, specs)
    req = sim.requests().set_index("request_id")
    assert req.loc[4, "first_scheduled_time_s"] == pytest.approx(0.06)
    assert req.loc[3, "num_preemptions"] == 1
    assert req.loc[[0, 1, 2], "num_preemptions"].sum() == 0
    # FCFS: the urgent request waits for a slot (the first finish, after 200 tokens)
    sim2, _ = _run(_scenario(max_num_seqs=4), specs)
    req2 = sim2.requests().set_index("request_id")
    assert req2.loc[4, "first_scheduled_time_s"] > 1.0
    assert req2.num_preemptions.sum() == 0
