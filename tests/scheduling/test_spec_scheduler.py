"""SpeculativeScheduler: lookahead scheduling, draft cost, acceptance, emission, KV rollback,
ITL and the ``summary["speculative"]`` counters (exact values on small hand-built cases)."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.kv import KVCacheManager
from simulator.metrics.records import RunRecorder
from simulator.metrics.speculative import speculative_summary
from simulator.perf import build_perf_model
from simulator.perf.draft_cost import NGRAM_COST_PER_SEQ_S
from simulator.perf.step_shape import StepShape
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import Scenario
from simulator.scheduling.speculative import SpeculativeScheduler, draft_cost_model, spec_rng
from simulator.scheduling.state import COMPLETED, RUNNING, ReqState

T = 0.01  # stub step time, seconds


class ConstPerf:
    """Every step (and every plain decode step) takes ``t`` seconds."""

    kind = "stub"

    def __init__(self, t: float = T):
        self.t = t

    def step_time(self, shape) -> float:
        return self.t

    def decode_step_times(self, num_seqs, ctx_totals):
        return np.full(np.atleast_1d(ctx_totals).shape, self.t)

    def provenance(self) -> dict:
        return {"all": "stub"}


# the scenarios below use 4-token KV blocks (hand-countable block arithmetic), a size vLLM does
# not accept: the set-up's BlockSizeWarning says so, which is not what these tests are about
pytestmark = pytest.mark.filterwarnings("ignore::simulator.cluster.setup.BlockSizeWarning")


def make_scenario(spec: dict | None = None, **top) -> Scenario:
    raw = {
        "name": "t", "model": "llama-3.1-8b",
        "workload": {"synthetic": {
            "arrival": {"process": "poisson", "rate_rps": 2.0}, "num_requests": 20,
            "prompt_tokens": {"dist": "fixed", "value": 32},
            "output_tokens": {"dist": "fixed", "value": 16}}},
        "kv_cache": {"num_gpu_blocks": 64, "block_size": 4},
        "perf": {"source": "roofline", "engine": "vllm-v0"},  # fixed, analytic step times
        "speculative": spec if spec is not None else {
            "method": "draft_model", "draft_model": "llama-3.2-1b",
            "num_speculative_tokens": 3, "draft_cost_ratio": 0.25,
            "acceptance": {"model": "iid", "acceptance_rate": 0.7}},
    }
    for k, v in top.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return Scenario.model_validate(raw)


def make_sched(sc: Scenario, perf=None):
    setup = build_setup(sc)
    if perf is not None:
        setup.perf = perf
    kv = KVCacheManager(setup.num_gpu_blocks, setup.block_size)
    rec = RunRecorder(check_transitions=True)
    s = SpeculativeScheduler(sc.scheduler, setup.limits, kv, rec, 0, scenario=sc, setup=setup)
    return s, setup


def req(i: int, prompt: int = 32, output: int = 16, slice_: str = "default") -> ReqState:
    return ReqState(RequestSpec(i, 0.0, prompt, output, slice=slice_))


def priced(s: SpeculativeScheduler, now: float):
    """The next step of ``s``, priced by its step pricer on its target model (``out.cost``)."""
    out = s.schedule(now)
    assert out is not None
    s.step_pricer(s.target_perf).price(out)
    return out


def step(s: SpeculativeScheduler, now: float, forced=None):
    """One schedule + update with an optional forced accepted-drafts vector."""
    out = priced(s, now)
    if forced is not None:
        s.sample_accepted = lambda rows: np.asarray(forced[: len(rows)], dtype=np.int64)
    dt = T + out.cost.draft_s  # the stub clock: every step takes T, plus the drafting
    s.update(out, now, now + dt)
    s.kv.pool.check_invariants()
    return out, now + dt


def test_decode_schedules_lookahead_and_draft_cost():
    s, _ = make_sched(make_scenario(), ConstPerf())
    r = req(0)
    s.add_request(r, 0.0)
    out, t = step(s, 0.0)  # whole prompt
    assert out.ntoks == [32]
    # prefill only: no drafting, only the draft's prefill (c x target prefill step)
    assert out.cost.draft_s == pytest.approx(0.25 * T)
    assert (out.cost.draft_decode_s, out.cost.draft_prefill_s) == (0.0, out.cost.draft_s)
    assert r.num_emitted == 1 and r.num_computed_tokens == r.num_tokens - 1
    out, _ = step(s, t, forced=[0])
    assert out.ntoks == [1 + 3]
    assert out.shape.decode_q_per_seq == 4 and out.shape.num_decode == 1
    assert out.shape.num_sampled == 4
    assert not out.jumpable
    assert out.cost.draft_s == pytest.approx(3 * 0.25 * T)  # k draft passes of c x T
    assert out.cost.total_s == T + out.cost.draft_s  # the target's step, then the drafting


@pytest.mark.parametrize("a", [0, 1, 2, 3])
def test_update_emits_accepted_plus_bonus_and_rolls_back(a):
    s, setup = make_sched(make_scenario(), ConstPerf())
    r = req(0)
    s.add_request(r, 0.0)
    _, t = step(s, 0.0)
    before = r.num_emitted
    out = priced(s, t)
    bs = setup.block_size
    # the lookahead slots are held during the step: 32 computed + 4 scheduled -> 9 blocks
    assert len(r.blocks) == math.ceil((32 + 4) / bs)
    s.sample_accepted = lambda rows: np.array([a])
    s.update(out, t, t + T)
    assert r.num_emitted == before + a + 1
    assert r.num_computed_tokens == r.num_tokens - 1
    assert len(r.blocks) == math.ceil(r.num_computed_tokens / bs)  # rejected slots released
    s.kv.pool.check_invariants()
    assert s.kv.num_free_blocks == setup.num_gpu_blocks - len(r.blocks)
    c = s.slices["default"]
    assert (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, c.num_emitted_tokens) == (
        1, 3, a, a + 1)
    assert c.accepted_hist.tolist() == [int(n == a) for n in range(4)]
    assert (r.spec_drafts, r.spec_accepted) == (1, a)


def test_emission_capped_at_remaining_output():
    s, setup = make_sched(make_scenario(), ConstPerf())
    r = req(0, output=3)
    s.add_request(r, 0.0)
    _, t = step(s, 0.0)
    step(s, t, forced=[3])  # would emit 4, only 2 remain
    assert r.status == COMPLETED
    assert r.num_emitted == r.num_output_tokens == 3
    assert r.blocks == [] and s.kv.num_free_blocks == setup.num_gpu_blocks
    assert not s.running
    c = s.slices["default"]
    assert c.num_accepted_tokens == 3 and c.num_emitted_tokens == 2


def test_emission_capped_at_max_model_len():
    sc = make_scenario(scheduler={"max_model_len": 36})
    s, setup = make_sched(sc, ConstPerf())
    r = req(0, prompt=32, output=16)
    s.add_request(r, 0.0)
    _, t = step(s, 0.0)  # 33 tokens
    step(s, t, forced=[3])  # 4 would make 37 > 36
    assert r.num_tokens == 36 and r.status == "rejected"
    assert r.reject_reason == "max_model_len_reached"
    assert s.kv.num_free_blocks == setup.num_gpu_blocks


def test_itl_one_gap_per_request_per_step():
    s, _ = make_sched(make_scenario(), ConstPerf())
    r = req(0, output=16)
    s.add_request(r, 0.0)
    t = 0.0
    while r.status == RUNNING or r.status == "waiting":
        _, t = step(s, t, forced=[2])
    assert r.num_emitted == 16
    vals, w = s.rec.itl_samples()
    # first token from the prefill, then 15 tokens in ceil(15 / 3) = 5 steps of 3
    assert int(w.sum()) == 5 == r.spec_drafts
    assert np.allclose(vals, T + 3 * 0.25 * T)


def test_mixed_step_drafts_only_for_decodes():
    sc = make_scenario({"method": "draft_model", "draft_model": "llama-3.2-1b",
                        "num_speculative_tokens": 2, "draft_cost_ratio": 0.5,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.5}})
    s, setup = make_sched(sc)  # the real roofline target model
    a, b = req(0, prompt=40), req(1, prompt=24)
    s.add_request(a, 0.0)
    _, t = step(s, 0.0)
    s.add_request(b, t)
    out = priced(s, t)
    assert out.ntoks == [3, 24]
    perf = setup.perf
    d_dec = 2 * 0.5 * float(perf.decode_step_times(1, np.array([a.num_tokens]))[0])
    d_pre = 0.5 * perf.step_time(StepShape(prefill_q=[24], prefill_start=[0], num_sampled=1))
    assert out.cost.draft_decode_s == pytest.approx(d_dec)
    assert out.cost.draft_prefill_s == pytest.approx(d_pre)
    assert out.cost.total_s == pytest.approx(perf.step_time(out.shape) + d_dec + d_pre)


def test_an_unpriced_step_is_refused():
    s, _ = make_sched(make_scenario(), ConstPerf())
    s.add_request(req(0), 0.0)
    out = s.schedule(0.0)
    with pytest.raises(ValueError, match="not priced"):
        s.update(out, 0.0, T)


def test_plain_decode_when_budget_has_no_room_for_lookahead():
    from simulator.cluster.setup import SchedulerBudgetWarning
    sc = make_scenario(scheduler={"max_num_batched_tokens": 64})
    # a 64-token budget under the default 256 sequences: vLLM would refuse it, servesim says so
    with pytest.warns(SchedulerBudgetWarning, match="below scheduler.max_num_seqs 256"):
        s, _ = make_sched(sc, ConstPerf())
    a, b = req(0, prompt=32), req(1, prompt=32)
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    _, t = step(s, 0.0)  # both prompts: 64 tokens
    s.cfg.max_num_batched_tokens = 5  # room for one lookahead decode (4) + one plain (1)
    out, _ = step(s, t, forced=[1])
    assert out.ntoks == [4, 1]
    assert (a.num_emitted, b.num_emitted) == (3, 2)
    assert a.num_computed_tokens == a.num_tokens - 1
    assert b.num_computed_tokens == b.num_tokens - 1
    assert s.slices["default"].num_plain_decodes == 1
    assert s.slices["default"].num_drafts == 1


def test_acceptance_model_per_slice():
    sc = make_scenario({"method": "ngram", "num_speculative_tokens": 2,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.0},
                        "acceptance_by_slice": {"code": {"model": "iid",
                                                         "acceptance_rate": 1.0}}})
    s, _ = make_sched(sc, ConstPerf())
    a, b = req(0, slice_="code"), req(1, slice_="chat")
    s.add_request(a, 0.0)
    s.add_request(b, 0.0)
    _, t = step(s, 0.0)
    step(s, t)
    assert (a.num_emitted, b.num_emitted) == (1 + 3, 1 + 1)
    assert s.slices["code"].num_accepted_tokens == 2
    assert s.slices["chat"].num_accepted_tokens == 0


def _spawned(seed: int, *path: int) -> np.random.Generator:
    """The generator NumPy's own ``SeedSequence.spawn`` gives at ``path`` (child indices)."""
    ss = np.random.SeedSequence(seed)
    for i in path:
        ss = ss.spawn(i + 1)[i]
    return np.random.default_rng(ss)


def test_spec_rng_stream():
    # "speculative" is stream 8 of simulator.base.rng.STREAMS; replica 2 is its child 2
    assert spec_rng(7, 2).random() == _spawned(7, 8, 2).random()
    sc = make_scenario(seed=5)
    s, _ = make_sched(sc, ConstPerf())
    assert s.rng.random() == _spawned(5, 8, 0).random()


def test_requires_speculative_block():
    sc = make_scenario()
    setup = build_setup(sc)
    plain = sc.model_copy(update={"speculative": None})
    kv = KVCacheManager(16, 4)
    with pytest.raises(ValueError, match="speculative"):
        SpeculativeScheduler(plain.scheduler, setup.limits, kv, RunRecorder(), 0, scenario=plain,
                             setup=setup)


# ---------------------------------------------------------------------- draft cost model
def test_draft_model_cost_is_k_draft_decode_steps_without_cpu_overhead():
    sc = make_scenario({"method": "draft_model", "draft_model": "llama-3.2-1b",
                        "num_speculative_tokens": 4,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.6}})
    setup = build_setup(sc)
    cost = draft_cost_model(sc, setup)
    draft = build_perf_model(setup.extra["draft_model"], setup.gpu, 1, "bf16", "bf16",
                             source=sc.perf.source, engine=sc.perf.engine,
                             max_num_seqs=sc.scheduler.max_num_seqs,
                             max_num_batched_tokens=sc.scheduler.max_num_batched_tokens)
    n, ctx = 8, 8 * 500
    # the draft's kernels only: its engine CPU/sync time is the target step's, not added
    want = sum(float(draft.gpu_decode_step_times(n, np.array([ctx + j * n]))[0])
               for j in range(4))
    assert want < sum(float(draft.decode_step_times(n, np.array([ctx + j * n]))[0])
                      for j in range(4))
    assert cost.decode_cost(n, ctx) == pytest.approx(want)
    assert cost.decode_cost(0, 0) == 0.0
    # the draft's prefill of a prompt chunk
    shape = StepShape(prefill_q=[100], prefill_start=[0], num_sampled=1)
    assert cost.prefill_cost([100], [0], 1) == pytest.approx(draft.gpu_step_time(shape))
    # c at batch 1 is well below 1 for a 1B draft of an 8B target
    c = cost.decode_cost(1, 500) / 4 / float(setup.perf.decode_step_times(1, np.array([500]))[0])
    assert 0.05 < c < 0.4


def test_eagle_cost_is_one_target_layer_plus_lm_head():
    sc = make_scenario({"method": "eagle", "num_speculative_tokens": 3,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.7}})
    setup = build_setup(sc)
    cost = draft_cost_model(sc, setup)
    head = build_perf_model(dataclasses.replace(setup.model, num_layers=1), setup.gpu, 1,
                            "bf16", "bf16", source=sc.perf.source, engine=sc.perf.engine,
                            max_num_seqs=sc.scheduler.max_num_seqs,
                            max_num_batched_tokens=sc.scheduler.max_num_batched_tokens)
    want = sum(float(head.gpu_decode_step_times(4, np.array([400 + 4 * j]))[0])
               for j in range(3))
    assert cost.decode_cost(4, 400) == pytest.approx(want)
    target_step = float(setup.perf.decode_step_times(4, np.array([400]))[0])
    assert cost.decode_cost(4, 400) / 3 < 0.15 * target_step


def test_ngram_cost_is_fixed_and_has_no_prefill():
    sc = make_scenario({"method": "ngram", "num_speculative_tokens": 5,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.4}})
    cost = draft_cost_model(sc, build_setup(sc))
    assert cost.decode_cost(10, 9999) == pytest.approx(10 * NGRAM_COST_PER_SEQ_S)
    assert cost.prefill_cost([500], [0], 1) == 0.0


def test_draft_cost_ratio_overrides_method():
    sc = make_scenario({"method": "eagle", "num_speculative_tokens": 2, "draft_cost_ratio": 0.0,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.7}})
    cost = draft_cost_model(sc, build_setup(sc))
    assert cost.decode_cost(3, 300) == 0.0 and cost.prefill_cost([10], [0], 1) == 0.0


# ---------------------------------------------------------------------- summary counters
def _small_run(**kw):
    sc = make_scenario({"method": "draft_model", "draft_model": "llama-3.2-1b",
                        "num_speculative_tokens": 3,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.5},
                        "acceptance_by_slice": {"code": {"model": "iid",
                                                         "acceptance_rate": 0.9}}},
                       workload={"slices": {"code": 0.5, "chat": 0.5}},
                       kv_cache={"num_gpu_blocks": None, "block_size": 16}, **kw)
    return sc, run_scenario(sc, write=False)


def test_speculative_summary_counters_and_definitions():
    _, res = _small_run()
    sp = res.summary["speculative"]
    assert sp == speculative_summary(res.sim)
    json.dumps(sp)  # JSON-safe
    assert sp["method"] == "draft_model" and sp["num_speculative_tokens"] == 3
    assert sp["num_draft_tokens"] == 3 * sp["num_drafts"]
    assert sp["acceptance_rate"] == pytest.approx(sp["num_accepted_tokens"]
                                                  / sp["num_draft_tokens"])
    assert sp["mean_acceptance_length"] == pytest.approx(
        1 + sp["num_accepted_tokens"] / sp["num_drafts"])
    assert sum(sp["accepted_length_hist"]) == sp["num_drafts"]
    assert set(sp["by_slice"]) == {"code", "chat"}
    for key in ("num_drafts", "num_accepted_tokens", "num_emitted_tokens"):
        assert sum(b[key] for b in sp["by_slice"].values()) == sp[key]
    code, chat = sp["by_slice"]["code"], sp["by_slice"]["chat"]
    assert code["expected_tokens_per_step"] == pytest.approx((1 - 0.9 ** 4) / 0.1)
    assert chat["expected_tokens_per_step"] == pytest.approx((1 - 0.5 ** 4) / 0.5)
    assert code["mean_acceptance_length"] > chat["mean_acceptance_length"]
    # time accounting: drafting is part of the busy time, the steps are the run's steps
    assert sp["num_steps"] == len(res.steps)
    assert sp["busy_time_s"] == pytest.approx(res.steps["step_time_s"].sum())
    assert 0 < sp["draft_time_share"] < 1
    assert 0 < sp["drafting_share_of_spec_steps"] < 1
    assert sp["draft_cost_ratio_batch1"] > 0
    # every completed request emitted its output: first token + speculative emissions
    emitted_by_spec = int((res.requests["num_emitted_tokens"] - 1).clip(lower=0).sum())
    assert sp["num_emitted_tokens"] + sp["num_plain_decodes"] == emitted_by_spec
    bins = sp["verification_cost_by_batch"]
    assert bins and sum(b["num_steps"] for b in bins) <= sp["num_spec_steps"]
    for b in bins:
        assert b["verify_over_plain_decode"] >= 0.99  # verifying k+1 tokens is never cheaper


def test_run_without_speculation_has_no_block():
    sc = make_scenario(kv_cache={"num_gpu_blocks": None, "block_size": 16})
    res = run_scenario(sc.model_copy(update={"speculative": None}), write=False)
    assert "speculative" not in res.summary
    assert speculative_summary(res.sim) == {}


def test_draft_weights_and_kv_shrink_the_target_kv_pool():
    sc = make_scenario(kv_cache={"num_gpu_blocks": None, "block_size": 16})
    spec_setup = build_setup(sc)
    base_setup = build_setup(sc.model_copy(update={"speculative": None}))
    draft = spec_setup.extra["draft_model"]
    assert draft.name == "llama-3.2-1b"
    mb, ms = base_setup.memory, spec_setup.memory
    # weights + the rotary cos/sin cache vLLM builds while loading (131,072 positions x 64 x 2 B)
    # + 7 fp32 attention scale scalars per layer, one 512-byte allocator block each
    assert ms.draft_bytes == draft.weight_bytes("bf16") + 131_072 * 64 * 2 + 16 * 7 * 512
    per_tok = (spec_setup.model.kv_bytes_per_token("bf16")
               + draft.kv_bytes_per_token("bf16"))
    assert ms.kv_bytes_per_token == per_tok
    want = int((mb.kv_bytes - ms.draft_bytes) // (16 * per_tok))
    assert spec_setup.num_gpu_blocks == want < base_setup.num_gpu_blocks
