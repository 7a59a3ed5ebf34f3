"""The engine prices every step through its scheduler's perf-side pricer and records the price
as the step's ``step_time_s``; stepped rows, lockstep rows and the idle rule are each one
function that the replica process and lockstep DP ranks share."""
from __future__ import annotations

import pytest
from helpers import make_scenario, make_scheduler, run_sim, spec

from simulator.cluster.setup import build_setup
from simulator.engine.idle import HEAD_REJECTED, idle_wait
from simulator.engine.loop import simulate
from simulator.kv import KVCacheManager
from simulator.metrics.records import RunRecorder
from simulator.perf.step_cost import StepPricer
from simulator.perf.step_shape import StepShape
from simulator.scenario.config import SchedulerConfig
from simulator.scheduling.limits import SchedulerLimits
from simulator.scheduling.state import ReqState
from simulator.scheduling.static import StaticScheduler


def _recording_pricer(monkeypatch) -> list[tuple[int, float]]:
    """Every priced step's (decode runs' steps too) total, in pricing order."""
    priced: list[tuple[int, float]] = []
    price, run = StepPricer.price, StepPricer.decode_run_times

    def spy_price(self, out, **kw):
        cost = price(self, out, **kw)
        priced.append((id(self), cost.total_s))
        return cost

    def spy_run(self, num_seqs, ctx):
        times = run(self, num_seqs, ctx)
        priced.extend((id(self), t) for t in times)
        return times

    monkeypatch.setattr(StepPricer, "price", spy_price)
    monkeypatch.setattr(StepPricer, "decode_run_times", spy_run)
    return priced


def _specs():
    # staggered arrivals: stepped prefills, mixed steps and fast-forwarded decode runs
    return [spec(i, 0.05 * i, 64 + 32 * (i % 3), 40 + 7 * i) for i in range(6)]


@pytest.mark.parametrize("fast_forward", [False, True])
def test_every_row_records_the_pricer_total(monkeypatch, fast_forward):
    priced = _recording_pricer(monkeypatch)
    sc = make_scenario()
    out = simulate(sc, build_setup(sc), _specs(), check_transitions=True,
                   fast_forward=fast_forward)
    steps = out.steps()
    totals = [t for _, t in priced]
    # one replica: steps in index order are the priced steps in pricing order, and a decode
    # run cut by an arrival prices steps it never takes (those rows do not exist)
    assert len(steps) <= len(totals)
    if not fast_forward:
        assert steps.step_time_s.tolist() == totals  # every step priced once, bit for bit
    else:
        assert set(steps.step_time_s.tolist()) <= set(totals)
    assert (out.requests().status == "completed").all()


def test_lockstep_ranks_record_the_slowest_rank_total(monkeypatch):
    priced = _recording_pricer(monkeypatch)
    sc = make_scenario({"cluster": {"num_replicas": 2, "router": "round_robin",
                                    "dp_lockstep": True},
                        "perf": {"source": "constant", "constant": {"per_token_s": 1e-4}}})
    # rank 0: a 1000-token prompt, rank 1: a 10-token one; 3 output tokens each
    out = run_sim(sc, [spec(0, 0.0, 1000, 3), spec(1, 0.0, 10, 3)])
    steps = out.steps()
    assert sorted(steps.replica_id.unique().tolist()) == [0, 1]
    by_rank = [steps[steps.replica_id == i].step_time_s.tolist() for i in (0, 1)]
    assert by_rank[0] == by_rank[1] == pytest.approx([0.1, 1e-4, 1e-4])  # the group's steps
    # each group step lasts the larger of its two ranks' priced totals (100 ms vs 1 ms first)
    pricer_ids = list(dict.fromkeys(p for p, _ in priced))
    assert len(pricer_ids) == 2  # one pricer per rank
    per_rank = [[t for p, t in priced if p == pid] for pid in pricer_ids]
    assert [max(a, b) for a, b in zip(*per_rank)] == by_rank[0]


def test_idle_wait_rejects_a_head_that_can_never_start():
    s = make_scheduler(num_blocks=4, block_size=4)  # 16 tokens of KV
    r = ReqState(spec(0, 0.0, 100, 5))
    s.rec.admit(r)
    s.queue.push(r)  # past add_request's check: as if the pool had shrunk since
    assert s.schedule(1.0) is None
    assert idle_wait(s, s.rec, 1.0) is HEAD_REJECTED
    assert (r.status, r.reject_reason) == ("rejected", "kv_capacity")
    assert s.num_waiting == 0


def test_idle_wait_waits_for_the_schedulers_time():
    rec = RunRecorder(check_transitions=True)
    cfg = SchedulerConfig(policy="static", max_batch_size=3, batch_timeout_s=0.5)
    s = StaticScheduler(cfg, SchedulerLimits(max_model_len=64),
                        KVCacheManager(64, 16, max_model_len=64), rec, 0)
    r = ReqState(spec(0, 0.25, 8, 2))
    rec.admit(r)
    assert s.add_request(r, 0.25)
    assert s.schedule(0.3) is None  # one of three slots, before the timeout
    assert idle_wait(s, rec, 0.3) == pytest.approx(0.75)  # its arrival + the batch timeout
    assert r.status == "waiting"


def test_lockstep_prices_a_ranks_step_by_its_step_time():
    """Lockstep DP ranks never fast-forward and price every step by ``step_time`` (their
    outputs unchanged; the decode memo differs from it in the last bit for some shapes):
    after the prefill, group step ``j`` is the slower rank's decode of its three requests
    over their prompts plus ``j`` tokens each."""
    sc = make_scenario({"cluster": {"num_replicas": 2, "router": "round_robin",
                                    "dp_lockstep": True}})
    setup = build_setup(sc)
    prompts = ((1000, 1100, 1200), (10, 20, 30))  # rank 0's and rank 1's (round robin)
    n_out = 30
    specs = [spec(2 * i + rank, 0.0, p, n_out) for rank, ps in enumerate(prompts)
             for i, p in enumerate(ps)]
    out = simulate(sc, setup, sorted(specs, key=lambda s: s.request_id),
                   check_transitions=True)
    rows = out.steps()
    rank0 = rows[rows.replica_id == 0].step_time_s.tolist()
    assert len(rank0) == n_out  # one prefill, then n_out - 1 decodes
    want = [max(setup.perf.step_time(StepShape([], [], 3, sum(ps) + 3 * j, 1, 3))
                for ps in prompts) for j in range(1, n_out)]
    assert rank0[1:] == want  # bit for bit
    assert rows[rows.replica_id == 1].step_time_s.tolist() == rank0
