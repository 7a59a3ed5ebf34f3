"""Invariant 5 (DESIGN.md): per-step budgets.

From the per-step records: scheduled tokens (prefill + decode) <= ``max_num_batched_tokens``,
batch size <= ``max_num_seqs`` and equal to prefill + decode sequences, KV blocks used <=
the pool. From the scheduler itself (wrapped ``schedule``): the running set never exceeds
``max_num_seqs`` and the tokens handed out equal the recorded step's tokens.

Non-vacuity: the scenario with a small token budget has steps that use it exactly, the one
with a small sequence limit has steps with exactly ``max_num_seqs`` sequences, and both
contain fast-forwarded decode runs (their rows come from another code path).
"""
from __future__ import annotations

import pytest
from helpers import SUITE, make_scenario, run_sim, suite_case, synthetic_workload

from simulator.scheduling.continuous import ContinuousScheduler

# instruments the scheduler by patching its classes: the pure-Python build only
pytestmark = pytest.mark.pure_core


def _wrap(monkeypatch, seen):
    orig = ContinuousScheduler.schedule

    def schedule(self, now):
        out = orig(self, now)
        assert len(self.running) <= self.cfg.max_num_seqs
        if out is not None:
            assert sum(out.ntoks) == out.num_prefill_tokens + out.num_decode_tokens
            assert sum(out.ntoks) <= self.cfg.max_num_batched_tokens
            assert all(n >= 1 for n in out.ntoks)
            assert len(set(map(id, out.reqs))) == len(out.reqs)  # no request twice
            seen["scheduled"] += 1
        return out

    monkeypatch.setattr(ContinuousScheduler, "schedule", schedule)


def _check_steps(steps, sc):
    tokens = steps.num_prefill_tokens + steps.num_decode_tokens
    assert (tokens >= 1).all()
    assert (tokens <= sc.scheduler.max_num_batched_tokens).all()
    assert (steps.batch_size <= sc.scheduler.max_num_seqs).all()
    assert (steps.batch_size == steps.num_prefill_seqs + steps.num_decode_seqs).all()
    assert (steps.num_decode_tokens == steps.num_decode_seqs).all()  # one token per decode
    assert (steps.num_prefill_tokens >= steps.num_prefill_seqs).all()
    assert (steps.kv_blocks_used <= steps.num_gpu_blocks).all()
    assert (steps.kv_blocks_used >= 0).all() and (steps.num_waiting >= 0).all()
    return tokens


@pytest.mark.parametrize("name", list(SUITE))
def test_budgets_suite(name, monkeypatch):
    seen = {"scheduled": 0}
    _wrap(monkeypatch, seen)
    sc, specs, until = suite_case(name)
    out = run_sim(sc, specs, until_s=until)
    _check_steps(out.steps(), sc)
    assert seen["scheduled"] > 0


def test_token_budget_is_reached(monkeypatch):
    seen = {"scheduled": 0}
    _wrap(monkeypatch, seen)
    sc = make_scenario({"scheduler": {"max_num_batched_tokens": 300, "max_num_seqs": 64},
                        "kv_cache": {"num_gpu_blocks": 400}},
                       workload=synthetic_workload(200, 15))
    steps = run_sim(sc).steps()
    tokens = _check_steps(steps, sc)
    assert (tokens == 300).sum() > 50  # the budget binds, with chunked prefills
    assert ((tokens < 300) & (steps.num_prefill_tokens == 0)).sum() > 50  # pure decode too
    assert len(steps) > seen["scheduled"]  # some rows came from fast-forwarded decode runs


def test_sequence_limit_is_reached(monkeypatch):
    seen = {"scheduled": 0}
    _wrap(monkeypatch, seen)
    sc = make_scenario({"scheduler": {"max_num_seqs": 5}, "kv_cache": {"num_gpu_blocks": 400}},
                       workload=synthetic_workload(200, 15))
    steps = run_sim(sc).steps()
    _check_steps(steps, sc)
    full = steps.batch_size == 5
    assert full.sum() > 100
    assert (full & (steps.num_waiting > 0)).sum() > 100  # work waited because of the limit
    assert len(steps) > seen["scheduled"]


def test_tenant_share_limit(monkeypatch):
    """``admission.tenant_max_share`` 0.5 of 8 sequences: at most 4 running per tenant;
    the limit binds (tenant a, 70% of the traffic, sits at 4 with requests waiting) and the
    other tenants' requests pass a's queued ones."""
    seen = {"at_cap_with_queue": 0, "overtaken": 0}
    orig = ContinuousScheduler.schedule

    def schedule(self, now):
        before = [r.request_id for r in self.waiting_requests()]
        out = orig(self, now)
        per = {}
        for r in self.running:
            per[r.spec.tenant] = per.get(r.spec.tenant, 0) + 1
        assert max(per.values(), default=0) <= 4, per
        waiting_a = [r for r in self.waiting_requests() if r.spec.tenant == "a"]
        if per.get("a", 0) == 4 and waiting_a:
            seen["at_cap_with_queue"] += 1
            admitted = {r.request_id for r in self.running} & set(before)
            if any(rid > waiting_a[0].request_id for rid in admitted):
                seen["overtaken"] += 1
        return out

    monkeypatch.setattr(ContinuousScheduler, "schedule", schedule)
    sc, specs, _ = suite_case("tenant_share")
    steps = run_sim(sc, specs).steps()
    _check_steps(steps, sc)
    assert seen["at_cap_with_queue"] > 20 and seen["overtaken"] > 0, seen
