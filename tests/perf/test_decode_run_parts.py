"""A fast-forwarded decode run's steps split (``StepPricer.decode_run_parts``) on the model that
priced them: the parts add up to the run's step times and equal those of the same steps
stepped; on a pipeline-parallel replica, reading a split leaves the bubble's tallies alone."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import REPO_ROOT

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import build_perf_model
from simulator.perf.pipeline import PipelinePerfModel
from simulator.perf.step_cost import StepPricer
from simulator.perf.step_shape import StepShape


class Step:
    """What a scheduler reports of one step (the fields the pricer reads)."""

    def __init__(self, shape):
        self.shape, self.swap_transfers, self.draft, self.cost = shape, None, None, None


def _model(tp: int):
    return build_perf_model(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), tp,
                            source="roofline", engine="vllm-v1")


CTX = [4096 + 8 * j for j in range(12)]  # 8 sequences, one token each per step


@pytest.mark.parametrize("tp", [1, 2])
def test_run_parts_add_up_to_the_run_and_equal_stepping(tp):
    pricer = StepPricer(_model(tp))
    first = StepShape([], [], 8, CTX[0], 1, 8)
    times = pricer.decode_run_times(8, CTX)
    compute, comm, overhead = pricer.decode_run_parts(first, CTX, times)
    np.testing.assert_allclose(np.add(np.add(compute, comm), overhead), times, rtol=1e-12)
    assert all(c > 0 for c in compute) and all(o > 0 for o in overhead)
    assert all(m > 0 for m in comm) if tp > 1 else all(m == 0 for m in comm)
    # attention grows with the context: so does each step's compute
    assert (np.diff(compute) > 0).all()
    # the same steps stepped one at a time: the same split to the bit (memo or not)
    again = pricer.decode_run_parts(first, CTX, times)
    for j, ctx in enumerate(CTX):
        cost = pricer.price(Step(StepShape([], [], 8, ctx, 1, 8)))
        assert cost.total_s == times[j]
        assert cost.parts() == (compute[j], comm[j], overhead[j])
        assert (again[0][j], again[1][j], again[2][j]) == (compute[j], comm[j], overhead[j])


def test_pipeline_run_splits_on_the_stage_model_and_tallies_nothing():
    inner = _model(1)
    pp = PipelinePerfModel(inner, 2, 32, 4096, link_bandwidth_bytes_per_s=50e9)
    pricer = StepPricer(pp)
    first = StepShape([], [], 8, CTX[0], 1, 8)
    times = pricer.decode_run_times(8, CTX)
    busy, cycle = pp.busy_stage_s, pp.cycle_s
    compute, comm, overhead = pricer.decode_run_parts(first, CTX, times)
    assert (pp.busy_stage_s, pp.cycle_s) == (busy, cycle)
    # a PP replica's decode runs are priced on its stage model (no pipeline): so is the split
    assert times == inner.decode_step_times_list(8, CTX)
    np.testing.assert_allclose(np.add(np.add(compute, comm), overhead), times, rtol=1e-12)
    assert times[0] != pytest.approx(float(pp.decode_step_times(8, np.array(CTX[:1]))[0]),
                                     rel=1e-6)  # (the pipeline would price it otherwise)
    # a stepped PP step: priced and split on the pipeline, and the split is no step run
    cost = pricer.price(Step(StepShape([300], [0], 8, CTX[0], 1, 9)))
    busy, cycle = pp.busy_stage_s, pp.cycle_s  # the price's own cycle is tallied
    assert sum(cost.parts()) == pytest.approx(cost.step_s, rel=1e-12)
    assert (pp.busy_stage_s, pp.cycle_s) == (busy, cycle)


def test_pipeline_one_token_decode_splits_to_its_price():
    """A stepped one-token decode step of a PP replica is priced by the pipeline's
    ``decode_step_times``, which can differ from its ``step_time`` of the same shape (the
    70B PP2 scenario's measured tables, 5 sequences): the split adds up to the price."""
    from simulator.cluster.setup import build_setup
    from simulator.scenario.config import load_scenario

    sc, base = load_scenario(str(REPO_ROOT / "scenarios/pp2_llama3_70b_h100.yaml"))
    pp = build_setup(sc, base).perf
    assert isinstance(pp, PipelinePerfModel)
    shape = StepShape([], [], 5, 6683, 1, 5)
    cost = StepPricer(pp).price(Step(shape))
    busy, cycle = pp.busy_stage_s, pp.cycle_s
    assert cost.step_s != pytest.approx(pp.step_time(shape, tally=False), rel=1e-6)  # the gap
    assert sum(cost.parts()) == pytest.approx(cost.step_s, rel=1e-12)
    assert all(p > 0 for p in cost.parts())  # TP 4: all-reduces
    assert (pp.busy_stage_s, pp.cycle_s) == (busy, cycle)
