"""A step's cost is priced on the perf side (``StepPricer``) and returned by part: the step on
the GPUs and the engine, swap transfers over the host link, drafting; hand-derived totals on
the constant model, bit-equal totals on the step-time model."""
from __future__ import annotations

import numpy as np
import pytest

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import ConstantPerfModel, build_perf_model
from simulator.perf.draft_cost import DraftCostModel, DraftWork
from simulator.perf.step_cost import StepCost, StepPricer
from simulator.perf.step_shape import StepShape


class Step:
    """What a scheduler reports of one step (the fields the pricer reads)."""

    def __init__(self, shape, swap_transfers=None, draft=None):
        self.shape, self.swap_transfers, self.draft, self.cost = shape, swap_transfers, draft, None


def _decode(n: int, ctx: int, q: int = 1) -> StepShape:
    return StepShape([], [], n, ctx, q, n * q)


def _roofline(tp: int = 1, engine: str = "vllm-v1"):
    return build_perf_model(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), tp,
                            source="roofline", engine=engine)


def test_constant_model_step_swap_and_total_by_hand():
    # 10 ms + 0.1 ms per token + 1 ms per sequence; a 100-token prefill plus 3 decodes:
    # 10 + 0.1 x 103 + 1 x 4 = 24.3 ms
    perf = ConstantPerfModel(step_s=0.01, per_token_s=1e-4, per_seq_s=1e-3)
    shape = StepShape([100], [0], 3, 300, 1, 4)
    block = 2_097_152  # one Llama-3.1-8B KV block of 16 tokens, bytes
    out = Step(shape, swap_transfers=[2 * block, 3 * block])
    cost = StepPricer(perf, host_link_bandwidth_bytes_per_s=64e9).price(out)
    assert cost.step_s == pytest.approx(0.0243)
    # five blocks over a 64 GB/s link: 5 x 32.768 us
    assert cost.swap_s == pytest.approx(5 * 32.768e-6)
    assert cost.draft_s == 0.0
    assert cost.total_s == pytest.approx(0.0243 + 5 * 32.768e-6)
    assert out.cost is cost  # left with the step for its scheduler's update
    # the constant model has no operators: all of the step is compute
    assert (cost.compute_s, cost.communication_s, cost.overhead_s) == (cost.step_s, 0.0, 0.0)


def test_total_keeps_the_order_of_additions_of_the_step_times_before_it():
    # steps used to last step + extra, extra = 0.0, += each swap's bytes / bandwidth, +=
    # (draft decode + draft prefill): the pricer's total must be those very bits
    perf = ConstantPerfModel(step_s=0.0191, per_token_s=3.3e-7)  # where the order shows
    target = ConstantPerfModel(step_s=0.007, per_token_s=1.1e-7, per_seq_s=3e-6)
    draft = DraftCostModel("draft_model", 3, target, draft_cost_ratio=0.37)
    shape = StepShape([77], [5], 2, 901, 4, 9)
    transfers = [3 * 2_097_152.0, 7 * 2_097_152.0, 2_097_152.0]
    bw = 25.6e9
    cost = StepPricer(perf, host_link_bandwidth_bytes_per_s=bw, draft=draft).price(
        Step(shape, transfers, DraftWork(2, 901, 1)))
    extra = 0.0
    for b in transfers:
        extra += b / bw
    d_dec = draft.decode_cost(2, 901)
    d_pre = draft.prefill_cost([77], [5], 1)
    extra += d_dec + d_pre
    assert cost.total_s == perf.step_time(shape) + extra  # bit for bit
    assert (cost.draft_decode_s, cost.draft_prefill_s) == (d_dec, d_pre)
    # hand: k = 3 draft passes of 0.37 x the target's plain decode of 2 sequences
    assert d_dec == pytest.approx(3 * 0.37 * (0.007 + 2 * 1.1e-7 + 2 * 3e-6))
    # the draft's prefill of the 77-token chunk: 0.37 x the target's step of that chunk
    assert d_pre == pytest.approx(0.37 * (0.007 + 77 * 1.1e-7 + 3e-6))


def test_one_token_decode_priced_as_a_decode_run_step():
    """A stepped one-token decode step costs what the same step of a fast-forwarded run
    costs, to the bit; lockstep's ``decode_memo=False`` prices it by ``step_time``."""
    perf = _roofline()
    pricer = StepPricer(perf)
    for n, ctx in [(1, 700), (7, 7 * 1234), (64, 64 * 3001)]:
        out = Step(_decode(n, ctx))
        assert pricer.price(out).total_s == pricer.decode_run_times(n, [ctx])[0]
        assert pricer.price(out).total_s == float(perf.decode_step_times(n, np.array([ctx]))[0])
        assert pricer.price(out, decode_memo=False).total_s == perf.step_time(out.shape)
    # a run: the model's decode step times, as Python floats, from a list or an array
    ctx = [64 * 3001 + 64 * j for j in range(5)]
    want = [float(t) for t in perf.decode_step_times(64, np.array(ctx))]
    assert pricer.decode_run_times(64, ctx) == want
    assert pricer.decode_run_times(64, np.array(ctx)) == want


def test_breakdown_of_a_step_time_model_step():
    shape = StepShape([512], [0], 16, 16 * 2048, 1, 17)
    one = StepPricer(_roofline(tp=1)).price(Step(shape))
    two = StepPricer(_roofline(tp=2)).price(Step(shape))
    for c in (one, two):
        assert c.compute_s > 0 and c.overhead_s > 0
        assert c.compute_s + c.communication_s + c.overhead_s == pytest.approx(c.step_s,
                                                                              rel=1e-12)
    assert one.communication_s == 0.0  # TP = 1: no all-reduce
    assert two.communication_s > 0.0   # TP = 2: two all-reduces per layer
    # the engine's part is what it adds to the kernels
    perf = _roofline(tp=2)
    assert two.overhead_s == pytest.approx(perf.step_time(shape) - perf.gpu_step_time(shape),
                                           rel=1e-12)
    # no engine profile: nothing on top of the kernels
    bare = StepPricer(_roofline(engine="none")).price(Step(shape))
    assert bare.overhead_s == 0.0


def test_the_record_is_reused_and_as_dict_keeps_a_copy():
    perf = ConstantPerfModel(step_s=0.01, per_token_s=1e-4)
    pricer = StepPricer(perf)
    first = pricer.price(Step(StepShape([10], [0], 0, 0, 1, 1)))
    kept = first.as_dict()
    second = pricer.price(Step(StepShape([20], [0], 0, 0, 1, 1)))
    assert second is first is pricer.cost  # no allocation per step
    assert kept["total_s"] == pytest.approx(0.011) and second.total_s == pytest.approx(0.012)
    assert set(kept) == {"compute_s", "communication_s", "overhead_s", "swap_s", "draft_s",
                         "step_s", "total_s"}
    assert StepCost().as_dict()["compute_s"] == 0.0  # never priced: nothing to split


def test_a_swap_without_a_host_link_is_refused():
    pricer = StepPricer(ConstantPerfModel(step_s=0.01))
    with pytest.raises(ValueError, match="host link bandwidth"):
        pricer.price(Step(_decode(1, 10), swap_transfers=[2_097_152.0]))


def test_draft_work_is_priced_only_on_a_drafting_replica():
    target = ConstantPerfModel(step_s=0.01)
    draft = DraftCostModel("ngram", 4, target)
    work = DraftWork(num_seqs=3, ctx_total=300, num_prefill_sampled=0)
    shape = _decode(3, 300, q=5)
    with_draft = StepPricer(target, draft=draft).price(Step(shape, draft=work))
    assert with_draft.draft_s == pytest.approx(3 * 1e-5)  # n-gram: 10 us per sequence
    assert with_draft.total_s == 0.01 + (0.0 + with_draft.draft_s)
    assert StepPricer(target).price(Step(shape, draft=work)).draft_s == 0.0
