"""The step table records the breakdown of each step's time when asked
(``perf.record_step_cost``): five float columns after the others whose sum is the row's
``step_time_s``, for stepped iterations, fast-forwarded decode runs and lockstep DP ranks
alike; without the key the table, the summary and the report are those of before."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    deep_update,
    load_specs,
    make_scenario,
    spec,
    summary_without_wall,
    synthetic_workload,
)

from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.metrics.records import STEP_COLUMNS, STEP_COST_COLUMNS
from simulator.perf.step_cost import step_parts
from simulator.perf.step_shape import StepShape
from simulator.runs.scenario import run_scenario

ON = {"perf": {"record_step_cost": True}}

#: one Llama-3.1-8B KV block of 16 tokens: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes x 16
BLOCK_BYTES = 32 * 8 * 128 * 2 * 2 * 16


def _sim(sc, specs=None, *, fast_forward: bool = True):
    setup = build_setup(sc)
    specs = load_specs(sc) if specs is None else specs
    return simulate(sc, setup, specs, check_transitions=True, fast_forward=fast_forward), setup


def _assert_parts_add_up(df):
    parts = (df.compute_s + df.communication_s + df.overhead_s) + df.swap_s + df.draft_s
    np.testing.assert_allclose(parts.to_numpy(), df.step_time_s.to_numpy(), rtol=1e-9, atol=0)
    for c in ("compute_s", "communication_s", "swap_s", "draft_s"):
        assert (df[c] >= 0).all(), c


def test_columns_follow_the_others_and_add_up_to_the_step_time():
    sc = make_scenario(ON, workload=synthetic_workload(120, 20))
    sim, _ = _sim(sc)
    df = sim.steps()
    assert list(df.columns) == STEP_COLUMNS + STEP_COST_COLUMNS
    assert all(df[c].dtype == np.float64 for c in STEP_COST_COLUMNS)
    # both kinds of rows are there: stepped iterations (prefills) and decode runs
    assert sim.recorder.num_step_chunks > 0 and (df.num_prefill_tokens > 0).any()
    _assert_parts_add_up(df)
    assert (df.compute_s > 0).all() and (df.overhead_s > 0).all()  # vllm-v0's per-step time
    assert (df.communication_s == 0).all() and (df.swap_s == 0).all()  # TP 1, no swapping
    assert (df.draft_s == 0).all()


def test_without_the_key_the_table_and_summary_are_those_of_before():
    wl = synthetic_workload(120, 20)
    off = run_scenario(make_scenario(workload=wl), write=False, figures=False)
    on = run_scenario(make_scenario(ON, workload=wl), write=False, figures=False)
    assert list(off.steps.columns) == STEP_COLUMNS  # no breakdown asked: no columns
    assert list(on.steps.columns) == STEP_COLUMNS + STEP_COST_COLUMNS
    assert on.steps[STEP_COLUMNS].equals(off.steps)
    assert summary_without_wall(on.summary) == summary_without_wall(off.summary)
    assert on.requests.equals(off.requests)


def test_fast_forward_gives_the_breakdown_of_stepping():
    sc = make_scenario(deep_update({"cluster": {"tensor_parallel_size": 2}}, ON),
                       workload=synthetic_workload(120, 20))
    ff, _ = _sim(sc, fast_forward=True)
    step, _ = _sim(sc, fast_forward=False)
    assert ff.recorder.num_step_chunks > 0 and step.recorder.num_step_chunks == 0
    a, b = ff.steps(), step.steps()
    assert a.equals(b)  # every column, the breakdown's included, to the bit
    _assert_parts_add_up(a)


def test_breakdown_stays_on_its_rows_across_flushes_and_the_spool(monkeypatch):
    """Review finding: a run's breakdown was gathered before the rows of the runs before it
    were flushed, so every flush took the next run's values and the columns slid apart (a
    spooled multi-replica run then crashed on chunks of unequal columns). Small flushes and
    chunks, two replicas, spooled: every column equals stepping's, to the bit."""
    from simulator.engine import step_rows
    from simulator.metrics import records

    monkeypatch.setattr(step_rows, "FLUSH_ROWS", 16)
    monkeypatch.setattr(records, "STEP_CHUNK_ROWS", 64)
    monkeypatch.setattr(records, "SPOOL_AFTER_CHUNKS", 1)
    sc = make_scenario(deep_update({"cluster": {"num_replicas": 2}}, ON),
                       workload=synthetic_workload(120, 20))
    ff, _ = _sim(sc, fast_forward=True)
    step, _ = _sim(sc, fast_forward=False)
    assert ff.recorder.num_step_chunks > 0 and ff.step_table().is_spooled  # non-vacuity
    a, b = ff.steps(), step.steps()
    assert a.equals(b)
    _assert_parts_add_up(a)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_communication_only_with_tensor_parallelism(tp):
    sc = make_scenario(deep_update({"cluster": {"tensor_parallel_size": tp}}, ON),
                       workload=synthetic_workload(60, 20))
    df = _sim(sc)[0].steps()
    _assert_parts_add_up(df)
    if tp == 1:
        assert (df.communication_s == 0).all()
    else:  # every step all-reduces its activations twice per layer
        assert (df.communication_s > 0).all()


def test_swap_time_exactly_on_the_steps_that_swap():
    # constant steps of 10 ms: whatever a step takes beyond them is its swap transfers.
    # 6 requests of 64 + 64 tokens on 20 blocks of 16 tokens: the pool runs dry and swaps
    sc = make_scenario(deep_update({
        "perf": {"source": "constant", "constant": {"step_s": 0.01}},
        "scheduler": {"preemption_mode": "swap"},
        "kv_cache": {"num_gpu_blocks": 20, "swap_space_gb": 4}}, ON))
    sim, setup = _sim(sc, [spec(i, 0.0, 64, 64) for i in range(6)])
    df = sim.steps()
    assert sum(r.sched.num_swap_outs for r in sim.replicas) > 0  # non-vacuity
    _assert_parts_add_up(df)
    swapped = df.step_time_s.to_numpy() > 0.01 + 1e-12
    assert swapped.any() and not swapped.all()
    np.testing.assert_array_equal(df.swap_s.to_numpy() > 0, swapped)
    assert (df.swap_s[df.num_preempted > 0] > 0).all()  # a swap-out is a transfer
    # what moves is whole blocks over the host link
    unit = BLOCK_BYTES / setup.gpu.host_link_bandwidth_bytes_per_s
    moved = df.swap_s.to_numpy()[swapped] / unit
    np.testing.assert_allclose(moved, np.round(moved), atol=1e-6)
    # the constant model has no operators: the rest is compute
    np.testing.assert_allclose(df.compute_s, 0.01, rtol=1e-12)
    assert (df.overhead_s == 0).all() and (df.communication_s == 0).all()


def test_draft_time_on_speculative_steps():
    # constant 10 ms target steps; a draft model at 0.25 of the target's decode, 3 tokens:
    # every pure-decode step drafts 3 x 0.25 x 10 ms = 7.5 ms
    sc = make_scenario(deep_update({
        "perf": {"source": "constant", "constant": {"step_s": 0.01}},
        "speculative": {"method": "draft_model", "draft_model": "llama-3.2-1b",
                        "num_speculative_tokens": 3, "draft_cost_ratio": 0.25,
                        "acceptance": {"model": "iid", "acceptance_rate": 0.7}}}, ON),
        workload=synthetic_workload(40, 5))
    df = _sim(sc)[0].steps()
    _assert_parts_add_up(df)
    decode = (df.num_prefill_tokens == 0) & (df.num_decode_seqs > 0)
    assert decode.any()
    np.testing.assert_allclose(df.draft_s[decode], 3 * 0.25 * 0.01, rtol=1e-12)
    assert (df.draft_s > 0).all()  # prefill steps: the draft prefills the prompt too
    np.testing.assert_allclose(df.compute_s, 0.01, rtol=1e-12)


def test_lockstep_ranks_record_the_slowest_ranks_breakdown():
    sc = make_scenario(deep_update({"cluster": {"num_replicas": 2, "router": "round_robin",
                                                "dp_lockstep": True}}, ON))
    # rank 0: a 1000-token prompt; rank 1: a 10-token prompt; 3 output tokens each
    sim, setup = _sim(sc, [spec(0, 0.0, 1000, 3), spec(1, 0.0, 10, 3)])
    df = sim.steps()
    _assert_parts_add_up(df)
    first = df[df.step_index == 0].set_index("replica_id")
    assert first.loc[0, "num_prefill_tokens"] == 1000 and first.loc[1, "num_prefill_tokens"] == 10
    # both rows carry rank 0's step: the 1000-token prefill, not rank 1's 10-token one
    big = step_parts(setup.perf, StepShape([1000], [0], 0, 0, 1, 1))
    small = step_parts(setup.perf, StepShape([10], [0], 0, 0, 1, 1))
    assert big[0] > 2 * small[0]  # (the weights read bound the small one)
    for rid in (0, 1):
        got = tuple(first.loc[rid, ["compute_s", "communication_s", "overhead_s"]])
        assert got == pytest.approx(big, rel=1e-12)


def test_pipeline_replica_parts_and_unchanged_bubble():
    # a PP replica's steps split on the model that priced them (the pipeline's, scaled to
    # each step's price); reading the split must not count toward the pipeline bubble of the
    # summary
    wl = synthetic_workload(60, 20)
    pp = {"cluster": {"pipeline_parallel_size": 2, "tensor_parallel_size": 2}}
    off = run_scenario(make_scenario(pp, workload=wl), write=False, figures=False)
    on = run_scenario(make_scenario(deep_update(pp, ON), workload=wl), write=False,
                      figures=False)
    assert on.sim.recorder.num_step_chunks == 0  # a PP replica steps every iteration
    _assert_parts_add_up(on.steps)
    assert (on.steps.communication_s > 0).all()
    assert on.summary["pipeline_bubble_fraction"] == off.summary["pipeline_bubble_fraction"]
    assert summary_without_wall(on.summary) == summary_without_wall(off.summary)
