"""The three schedulers share one interface (``simulator.scheduling.interface.Scheduler``), and a
scheduler reports what a step does (shape, swap transfers, draft work) without pricing it."""
from __future__ import annotations

import inspect

import pytest
from helpers import make_scheduler, spec

from simulator.cluster.replica import make_scheduler as make_replica_scheduler
from simulator.cluster.setup import build_setup
from simulator.kv import KVCacheManager
from simulator.metrics.records import RunRecorder
from simulator.perf import ConstantPerfModel
from simulator.perf.draft_cost import DraftWork
from simulator.scenario.config import validate_scenario
from simulator.scheduling.continuous import StepOutput
from simulator.scheduling.interface import Scheduler
from simulator.scheduling.state import ReqState

BASE = {"model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "perf": {"source": "roofline", "engine": "vllm-v0"},
        "kv_cache": {"num_gpu_blocks": 64, "block_size": 16},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}}}
SPECULATIVE = {"method": "ngram", "num_speculative_tokens": 2,
               "acceptance": {"model": "iid", "acceptance_rate": 0.5}}


def _scheduler(kind: str):
    raw = dict(BASE)
    if kind == "static":
        raw["scheduler"] = {"policy": "static", "max_batch_size": 4, "batch_timeout_s": 0.5}
    elif kind == "speculative":
        raw["speculative"] = SPECULATIVE
    sc = validate_scenario(raw)
    setup = build_setup(sc)
    kv = KVCacheManager(setup.num_usable_blocks, setup.block_size)
    return make_replica_scheduler(sc, setup, kv, RunRecorder(check_transitions=True), 0), setup


def _members() -> list[str]:
    return [n for n, v in vars(Scheduler).items()
            if not n.startswith("_") and (callable(v) or isinstance(v, property))]


@pytest.mark.parametrize("kind", ["continuous", "static", "speculative"])
def test_every_scheduler_implements_the_interface(kind):
    sched, _ = _scheduler(kind)
    assert type(sched).__name__.lower().startswith(kind)
    assert isinstance(sched, Scheduler)
    members = _members()
    assert {"schedule", "update", "idle_until", "plan_jump", "commit_jump", "cancel",
            "step_pricer", "has_work"} <= set(members)
    for name in members:  # the same parameters as the interface says
        want = getattr(Scheduler, name)
        got = getattr(type(sched), name)
        if isinstance(want, property):  # (a compiled class's attribute is a getset descriptor)
            assert inspect.isdatadescriptor(got), name
            continue
        assert list(inspect.signature(got).parameters) == \
            list(inspect.signature(want).parameters), name


def test_idle_until_is_none_for_iteration_level_batching_and_a_deadline_for_a_static_batch():
    sched, _ = _scheduler("continuous")
    assert sched.idle_until(3.0) is None
    static, _ = _scheduler("static")
    # (a static slot reserves the declared prompt + max_tokens)
    assert static.add_request(ReqState(spec(0, 0.2, 10, 10, max_tokens=10)), 0.2)
    assert static.schedule(0.3) is None  # one of four slots, before its timeout
    assert static.idle_until(0.3) == pytest.approx(0.2 + 0.5)  # arrival + batch timeout


def test_a_swap_is_reported_in_bytes_and_priced_by_the_step_pricer():
    # 3 blocks of 4 tokens per request; a 6-block pool holds two 12-token requests, and the
    # third step of both needs a fourth block each: the later one is swapped out
    block_bytes = 2_097_152.0
    s = make_scheduler(num_blocks=6, block_size=4, max_num_seqs=4, max_num_batched_tokens=64,
                       preemption_mode="swap", swap_space_blocks=100,
                       swap_block_bytes=block_bytes, host_link_bandwidth_bytes_per_s=64e9)
    for i in range(2):
        s.add_request(ReqState(spec(i, 0.0, 11, 8)), 0.0)
    t = 0.0
    swapped = None
    for _ in range(6):
        out = s.schedule(t)
        assert not hasattr(out, "extra_time_s")  # a scheduler reports, it does not price
        if out.swap_transfers:
            swapped = out
            break
        s.update(out, t, t + 1.0)
        t += 1.0
    assert swapped is not None  # non-vacuity: the pool ran dry
    assert swapped.swap_transfers == [3 * block_bytes]  # the victim's three blocks
    assert swapped.swap_bytes == 3 * block_bytes
    assert swapped.veto == "preemption"
    pricer = s.step_pricer(ConstantPerfModel(step_s=0.01))
    cost = pricer.price(swapped)
    assert cost.swap_s == pytest.approx(3 * 32.768e-6)  # 2 MiB over 64 GB/s, three times
    assert cost.total_s == pytest.approx(0.01 + 3 * 32.768e-6)


def test_the_speculative_scheduler_reports_its_draft_work():
    sched, setup = _scheduler("speculative")
    r = ReqState(spec(0, 0.0, 10, 10))
    sched.add_request(r, 0.0)
    out = sched.schedule(0.0)  # the prompt: no drafting, one prompt completes
    assert out.draft == DraftWork(0, 0, 1)
    cost = sched.step_pricer(setup.perf).price(out)
    assert cost.draft_s == 0.0  # n-gram: no draft prefill
    sched.update(out, 0.0, cost.total_s)
    out = sched.schedule(cost.total_s)  # one decode verifying 2 drafts, context 11 tokens
    assert out.draft == DraftWork(1, r.num_tokens, 0)
    cost = sched.step_pricer(setup.perf).price(out)
    assert cost.draft_s == pytest.approx(1e-5)  # one speculating sequence, 10 us
    assert cost.total_s == setup.perf.step_time(out.shape) + cost.draft_s


def test_a_plain_step_reports_no_swap_and_no_draft_work():
    out = StepOutput()
    assert (out.swap_transfers, out.draft, out.cost, out.swap_bytes) == (None, None, None, 0.0)
