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
