"""DESIGN.md invariants with speculative decoding on.

Over several small scenarios (draft model / EAGLE / n-gram / tree drafts, chunked prefill,
a KV pool small enough to preempt, recompute and swap preemption, prefix caching, two
replicas, a ``max_model_len`` that cuts outputs) every run must satisfy:

- conservation (1): arrived = completed + rejected + cancelled + waiting + running;
- lifecycle (2): legal transitions (the recorder checks them) and causal timestamps;
- KV (4): the block pool is consistent after every step, and every block is back in the
  pool at the end (speculative rollback leaks nothing);
- budgets (5): per step, scheduled tokens (lookahead included) <= max_num_batched_tokens and
  sequences <= max_num_seqs;
- tokens (6): a completed request emitted exactly its output length, however many tokens
  its last speculative step accepted;
- determinism (9): same seed -> identical records; another seed -> different acceptance.

Each scenario also proves it exercised the speculative paths (drafts accepted and rejected,
rollbacks that released blocks, emissions capped at the output length, preemptions where
expected).
"""
from __future__ import annotations

import pandas as pd
import pytest

from simulator.kv.manager import KVCacheManager
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import Scenario
from simulator.scheduling.speculative import SpeculativeScheduler

BASE = {
    "model": "llama-3.1-8b",
    "workload": {"synthetic": {
        "arrival": {"process": "poisson", "rate_rps": 40.0}, "num_requests": 120,
        "prompt_tokens": {"dist": "lognormal", "median": 200, "sigma": 0.8, "max": 1500},
        "output_tokens": {"dist": "lognormal", "median": 60, "sigma": 0.8, "max": 400}},
        "slices": {"code": 0.4, "chat": 0.6}},
    "scheduler": {"max_num_seqs": 32, "max_num_batched_tokens": 512},
    "seed": 3,
}

SCENARIOS = {
    "draft_model_chunked": {
        "speculative": {"method": "draft_model", "draft_model": "llama-3.2-1b",
                        "num_speculative_tokens": 4,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.5},
                        "acceptance_by_slice": {"code": {"model": "iid",
                                                         "acceptance_rate": 0.85}}},
    },
    "eagle_small_kv_recompute": {
        "kv_cache": {"num_gpu_blocks": 90, "block_size": 16},
        "speculative": {"method": "eagle", "num_speculative_tokens": 3,
                        "acceptance": {"model": "positional", "rates": [0.8, 0.7, 0.6]}},
    },
    "ngram_swap_prefix_two_replicas": {
        "cluster": {"num_replicas": 2, "router": "least_outstanding"},
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 384,
                      "preemption_mode": "swap"},
        "kv_cache": {"num_gpu_blocks": 70, "block_size": 16, "enable_prefix_caching": True},
        "workload": {"shared_prefixes": [{"name": "sys", "num_tokens": 64}]},
        "speculative": {"method": "ngram", "num_speculative_tokens": 5,
                        "acceptance": {"model": "empirical",
                                       "probabilities": [0.5, 0.1, 0.1, 0.1, 0.1, 0.1]}},
    },
    "tree_max_model_len": {
        "scheduler": {"max_model_len": 450, "enable_chunked_prefill": False,
                      "max_num_batched_tokens": 2048},
        "speculative": {"method": "medusa", "num_speculative_tokens": 3,
                        "tree": {"width": 2, "depth": 3},
                        "acceptance": {"model": "tree", "acceptance_rate": 0.5}},
    },
}


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def make(name: str, **extra) -> Scenario:
    return Scenario.model_validate(_merge(_merge(BASE, SCENARIOS[name]), {"name": name, **extra}))


class Probe:
    """Wraps the speculative scheduler's methods to check per-step invariants."""

    def __init__(self, monkeypatch):
        self.steps = self.rollbacks = 0
        sched_orig = SpeculativeScheduler.schedule
        upd_orig = SpeculativeScheduler.update
        trim_orig = KVCacheManager.trim
        probe = self

        def schedule(s, now):
            out = sched_orig(s, now)
            if out is not None:
                assert sum(out.ntoks) <= s.cfg.max_num_batched_tokens
                assert len(out.reqs) <= s.cfg.max_num_seqs
                assert 0 <= out.draft.num_seqs <= len(out.reqs)
            return out

        def update(s, out, start, end):
            assert out.cost.draft_s >= 0.0 and out.cost.swap_s >= 0.0
            upd_orig(s, out, start, end)
            s.kv.pool.check_invariants()
            assert s.kv.num_free_blocks + sum(len(r.blocks) for r in s.running) >= 0
            probe.steps += 1

        def trim(kv, r, n):
            held = len(r.blocks)
            trim_orig(kv, r, n)
            probe.rollbacks += held - len(r.blocks)

        monkeypatch.setattr(SpeculativeScheduler, "schedule", schedule)
        monkeypatch.setattr(SpeculativeScheduler, "update", update)
        monkeypatch.setattr(KVCacheManager, "trim", trim)


@pytest.fixture(scope="module")
def plain_runs():
    """Each scenario run once without probes (for determinism comparisons)."""
    return {name: run_scenario(make(name), write=False) for name in SCENARIOS}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_invariants_hold_with_speculation(name, monkeypatch, plain_runs):
    probe = Probe(monkeypatch)
    sc = make(name)
    res = run_scenario(sc, write=False, check_transitions=True)
    req = res.requests
    n = len(req)
    # 1. conservation (the run drains: nothing left waiting or running)
    counts = req["status"].value_counts().to_dict()
    assert sum(counts.values()) == n == 120
    assert counts.get("waiting", 0) == counts.get("running", 0) == 0
    # 2. causality
    done = req[req["status"] == "completed"]
    assert (done["arrival_time_s"] <= done["first_scheduled_time_s"]).all()
    assert (done["first_scheduled_time_s"] <= done["first_token_time_s"]).all()
    assert (done["first_token_time_s"] <= done["finish_time_s"]).all()
    # 4. no leaked block, in any replica
    for rep in res.sim.replicas:
        assert isinstance(rep.sched, SpeculativeScheduler)
        rep.kv.pool.check_invariants()
        assert rep.kv.num_free_blocks == rep.kv.num_gpu_blocks
    # 6. tokens
    assert (done["num_emitted_tokens"] == done["num_output_tokens"]).all()
    assert (req["num_emitted_tokens"] <= req["num_output_tokens"]).all()
    assert len(done) > 0.6 * n
    # 9. determinism: identical to the unprobed run of the same scenario and seed
    pd.testing.assert_frame_equal(res.requests, plain_runs[name].requests)
    pd.testing.assert_frame_equal(res.steps, plain_runs[name].steps)
    assert res.summary["speculative"] == plain_runs[name].summary["speculative"]
    # non-vacuity
    sp = res.summary["speculative"]
    hist = sp["accepted_length_hist"]
    assert probe.steps == sp["num_steps"] > 0
    assert sp["num_drafts"] > 200
    assert hist[0] > 0 and hist[-1] > 0  # full rejections and full acceptances
    assert probe.rollbacks > 0  # rejected drafts' blocks went back to the pool
    capped = sp["num_accepted_tokens"] + sp["num_drafts"] - sp["num_emitted_tokens"]
    assert capped > 0  # some step accepted more than the request had left
    if name == "eagle_small_kv_recompute":
        assert res.summary["num_preemptions"] > 0
    if name == "ngram_swap_prefix_two_replicas":
        assert all(rep.sched.num_swap_outs > 0 for rep in res.sim.replicas)
        assert res.summary["prefix_cache_hit_tokens"] > 0
        assert set(req["replica_id"]) == {0, 1}
    if name == "tree_max_model_len":
        assert sp["num_verified_tokens"] == 6
        assert (req["reject_reason"] == "max_model_len_reached").any()
        cut = req[req["reject_reason"] == "max_model_len_reached"]
        assert (cut["num_prompt_tokens"] + cut["num_emitted_tokens"] == 450).all()


def test_another_seed_changes_acceptance_not_the_workload(plain_runs):
    name = "draft_model_chunked"
    a = plain_runs[name]
    # same workload (specs), another speculative stream: only acceptance differs
    b = run_scenario(make(name, seed=4), write=False,
                     specs=[r.spec for r in a.sim.recorder.all_requests])
    assert b.summary["speculative"]["accepted_length_hist"] != \
        a.summary["speculative"]["accepted_length_hist"]
    assert (b.requests["num_emitted_tokens"] == a.requests["num_emitted_tokens"]).all()
