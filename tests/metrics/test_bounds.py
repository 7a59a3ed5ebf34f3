"""What bounds a run (simulator.metrics.bounds): the verdict's rule on hand-built tables, and
whole runs whose queueing, tier-transfer and KV-capacity figures follow by hand from their
request and step tables."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import make_scenario, spec, specs_from_rows

from simulator.metrics.bounds import KV_FULL_USAGE, run_bounds
from simulator.runs.scenario import run_scenario

CONSTANT = {"perf": {"source": "constant", "constant": {"step_s": 0.1}}}


class _Perf:
    """A model with operators whose split is known: 20% compute-bound, 50% memory-bound, 30%
    overheads, of which all-reduce 0.2 and engine time 0.1 of a 1 s step."""

    kind = "fake"

    def bottleneck_shares(self, shape):
        return {"compute_bound": 0.2, "memory_bound": 0.5, "overhead": 0.3}

    def op_times(self, shape):
        return {"gemm": 0.7, "all_reduce": 0.2, "engine_overhead": 0.1}


def _requests(rows, loads=None):
    """(arrival, first scheduled, finish, status) rows -> a request table."""
    df = pd.DataFrame(rows, columns=["arrival_time_s", "first_scheduled_time_s",
                                     "finish_time_s", "status"])
    if loads is not None:
        df["kv_load_wait_s"] = loads
    return df


def _steps(n=4, used=10, blocks=100):
    return pd.DataFrame({"step_time_s": [0.5] * n, "num_prefill_tokens": [0] * n,
                         "num_prefill_seqs": [0] * n, "num_decode_seqs": [2] * n,
                         "kv_blocks_used": [used] * n, "num_gpu_blocks": [blocks] * n})


_QUIET = {"num_preemptions": 0, "reject_reasons": {}, "max_kv_cache_usage": 0.1,
          "mean_kv_cache_usage": 0.1, "perf_model": "fake"}


def test_request_time_and_busy_time_shares_by_hand():
    # E2E 4 + 6 = 10 s; queueing 1 + 0 = 1 s; loads 0.5 + 1.5 = 2 s; a rejected request
    # (no finish) is not request time
    req = _requests([[0, 1, 4, "completed"], [2, 2, 8, "completed"],
                     [3, np.nan, np.nan, "rejected"]], loads=[0.5, 1.5, 0.0])
    b = run_bounds(_QUIET, req, _steps(), _Perf())
    sh = b["shares"]
    assert sh["queueing"] == pytest.approx(0.1)
    assert sh["tier_transfers"] == pytest.approx(0.2)
    assert sh["execution"] == pytest.approx(0.7)
    # execution split by busy time: overhead 0.3 = all-reduce 0.2 + engine 0.1
    assert sh["compute"] == pytest.approx(0.2) and sh["memory"] == pytest.approx(0.5)
    assert sh["communication"] == pytest.approx(0.2)
    assert sh["engine_overhead"] == pytest.approx(0.1)
    assert b["request_time"] == {"num_requests": 2, "request_time_s": 10.0, "queueing_s": 1.0,
                                 "tier_transfers_s": 2.0}
    # execution (70%) is the largest request-time part: memory (50%) the largest of it
    assert b["bound"] == "memory" and b["bound_share"] == pytest.approx(0.5)
    assert b["text"].startswith("Bound by memory: 70% of request time executing, 50% of busy "
                                "time in memory-bound operators")
    assert "request time: queueing 10%, tier transfers 20%, execution 70%" in b["text"]
    assert "busy time: memory 50%, compute 20%, communication 20%, engine overhead 10%" \
        in b["text"]
    assert b["kv_capacity"]["binds"] is False
    assert b["kv_capacity"]["full_time_share"] == 0.0


def test_largest_request_time_part_decides():
    # queueing 6 of 10 s: bound by queueing whatever the busy-time split
    req = _requests([[0, 6, 10, "completed"]])
    b = run_bounds(_QUIET, req, _steps(), _Perf())
    assert b["bound"] == "queueing" and b["bound_share"] == pytest.approx(0.6)
    assert b["shares"]["tier_transfers"] is None  # no offload column: not measured
    assert b["verdict"] == "Bound by queueing: 60% of request time waiting to be scheduled"
    # loads of 7 of 10 s: tier transfers
    req = _requests([[0, 1, 10, "completed"]], loads=[7.0])
    b = run_bounds(_QUIET, req, _steps(), _Perf())
    assert b["bound"] == "tier_transfers" and b["bound_share"] == pytest.approx(0.7)
    # a tie (queueing 5 s = execution 5 s) goes to the earlier name: queueing
    b = run_bounds(_QUIET, _requests([[0, 5, 10, "completed"]]), _steps(), _Perf())
    assert b["bound"] == "queueing"


@pytest.mark.parametrize("summary,binds", [
    ({"num_preemptions": 1}, True),
    ({"reject_reasons": {"kv_capacity": 2}}, True),
    ({"max_kv_cache_usage": KV_FULL_USAGE}, True),
    ({"max_kv_cache_usage": 0.949}, False),
    ({"reject_reasons": {"queue_full": 5}}, False),
])
def test_kv_capacity_rule(summary, binds):
    s = {**_QUIET, **summary}
    # queueing 6 of 10 s would win without the KV rule; 1 of 4 steps is >= 95% full
    steps = _steps()
    steps.loc[0, "kv_blocks_used"] = 96
    b = run_bounds(s, _requests([[0, 6, 10, "completed"]]), steps, _Perf())
    assert b["kv_capacity"]["binds"] is binds
    assert b["kv_capacity"]["full_time_share"] == pytest.approx(0.25)
    assert b["bound"] == ("kv_capacity" if binds else "queueing")
    if binds:
        assert b["bound_share"] == pytest.approx(0.25)


def test_without_operators_or_requests():
    req = _requests([[0, 1, 10, "completed"]])
    b = run_bounds({**_QUIET, "perf_model": "constant"}, req, _steps(), object())
    assert b["bound"] == "execution" and b["bound_share"] == pytest.approx(0.9)
    assert b["step_bottleneck"] is None
    assert all(b["shares"][k] is None for k in ("compute", "memory", "communication",
                                                  "engine_overhead"))
    assert "perf.source: constant has no operators" in b["no_split_note"]
    assert "perf.source: constant has no operators" in b["text"]
    # nothing completed: the largest busy-time part (memory), or nothing at all
    none = _requests([[0, np.nan, np.nan, "rejected"]])
    assert run_bounds(_QUIET, none, _steps(), _Perf())["bound"] == "memory"
    b = run_bounds(_QUIET, none, _steps(), object())
    assert b["bound"] is None and b["bound_share"] is None
    assert b["text"].startswith("Nothing measured")


def _constant_run(rows, **over):
    sc = make_scenario({**CONSTANT, "scheduler": {"max_num_seqs": 1}, **over})
    return run_scenario(sc, specs=specs_from_rows(rows), write=False)


def test_queueing_share_of_an_m_d_1_like_queue_by_hand():
    """One sequence at a time, 4 steps of 0.1 s per request (prefill emits the first token,
    3 decode steps), arrivals every 0.1 s: request i starts at 0.4 i, so it queues 0.3 i and
    its E2E is 0.3 i + 0.4. Over 5 requests: queueing 3.0 s of 5.0 s = 60%."""
    res = _constant_run([(0.1 * i, 10, 4) for i in range(5)])
    req = res.requests
    np.testing.assert_allclose(req["first_scheduled_time_s"], [0.0, 0.4, 0.8, 1.2, 1.6])
    b = res.summary["bounds"]
    assert b["request_time"]["queueing_s"] == pytest.approx(3.0)
    assert b["request_time"]["request_time_s"] == pytest.approx(5.0)
    assert b["shares"]["queueing"] == pytest.approx(0.6)
    assert b["bound"] == "queueing" and b["bound_share"] == pytest.approx(0.6)
    assert b["shares"]["memory"] is None  # a constant model: no split
    # the same figure from the request table
    q = (req["first_scheduled_time_s"] - req["arrival_time_s"]).sum()
    e2e = (req["finish_time_s"] - req["arrival_time_s"]).sum()
    assert b["shares"]["queueing"] == pytest.approx(q / e2e)


def test_a_constant_run_without_a_queue_is_bound_by_execution():
    res = _constant_run([(1.0 * i, 10, 4) for i in range(3)])  # 0.4 s of work every 1 s
    b = res.summary["bounds"]
    assert b["shares"]["queueing"] == pytest.approx(0.0)
    assert b["bound"] == "execution" and b["bound_share"] == pytest.approx(1.0)
    assert "perf.source: constant" in b["text"]


def test_preemptions_make_kv_capacity_the_bound():
    """Four 64-token prompts growing by 200 tokens each in 20 blocks of 16 tokens: they
    cannot all stay, so some are preempted."""
    res = _constant_run([(0.0, 64, 200)] * 4, kv_cache={"num_gpu_blocks": 20},
                        scheduler={"max_num_seqs": 4})
    s = res.summary
    assert s["num_preemptions"] > 0
    b = s["bounds"]
    assert b["bound"] == "kv_capacity"
    assert b["kv_capacity"]["num_preemptions"] == s["num_preemptions"]
    st = res.steps
    full = st["kv_blocks_used"] / st["num_gpu_blocks"] >= KV_FULL_USAGE
    want = st.loc[full, "step_time_s"].sum() / st["step_time_s"].sum()
    assert 0 < want and b["bound_share"] == pytest.approx(want)


def test_tier_transfer_share_of_an_offload_run():
    """A 40-block prompt prefix is served, evicted from a 64-block GPU cache by other prompts,
    and asked for again: the CPU tier holds it, so the repeat waits for a load."""
    blocks, bt = 40, 16
    ids = tuple(range(blocks))
    specs = [spec(0, 0.0, blocks * bt + 8, 2, prefix_hash_ids=ids, prefix_block_tokens=bt)]
    specs += [spec(i, 0.5 * i, blocks * bt + 8, 2,
                   prefix_hash_ids=tuple(1000 * i + j for j in range(blocks)),
                   prefix_block_tokens=bt) for i in range(1, 4)]
    specs += [spec(4, 3.0, blocks * bt + 8, 2, prefix_hash_ids=ids, prefix_block_tokens=bt)]
    sc = make_scenario({**CONSTANT, "kv_cache": {
        "num_gpu_blocks": 64, "block_size": bt, "enable_prefix_caching": True,
        "offload": {"tiers": [{"medium": "cpu", "size_gib": 4}]}}})
    res = run_scenario(sc, specs=specs, write=False)
    req = res.requests
    assert req.loc[4, "tier_hit_tokens"] == blocks * bt  # the repeat hit the CPU tier
    wait = req["kv_load_wait_s"]
    assert wait[4] > 0 and (wait.drop(4) == 0).all()
    e2e = (req["finish_time_s"] - req["arrival_time_s"]).sum()
    b = res.summary["bounds"]
    assert b["shares"]["tier_transfers"] == pytest.approx(wait.sum() / e2e)
    assert b["request_time"]["tier_transfers_s"] == pytest.approx(wait.sum())
    assert sum(b["shares"][k] for k in ("queueing", "tier_transfers", "execution")) \
        == pytest.approx(1.0)
    assert res.summary["kv_offload"]["load_wait_s"] == pytest.approx(wait.sum())


def test_roofline_run_splits_execution_and_names_the_all_reduce():
    """TP 2 on the roofline: communication is the all-reduce share of busy time, and the
    four busy-time shares are the step classification's three, regrouped."""
    sc = make_scenario({"cluster": {"tensor_parallel_size": 2}})
    res = run_scenario(sc, write=False)
    b = res.summary["bounds"]
    sb = b["step_bottleneck"]
    sh = b["shares"]
    assert sh["compute"] == pytest.approx(sb["compute_bound"])
    assert sh["memory"] == pytest.approx(sb["memory_bound"])
    assert sb["overhead_terms"]["all_reduce"] > 0
    assert sh["communication"] == pytest.approx(sb["overhead_terms"]["all_reduce"])
    assert sh["communication"] + sh["engine_overhead"] == pytest.approx(sb["overhead"])
    # the rule, from the shares: no KV pressure, execution the larger part, then its largest
    assert not b["kv_capacity"]["binds"] and sh["execution"] > sh["queueing"]
    parts = ("memory", "compute", "communication", "engine_overhead")
    assert b["bound"] == max(parts, key=lambda k: sh[k])


def test_shares_near_0_or_100_percent_are_not_rounded_away():
    # queueing 9,960 of 10,000 s: ">99%" waiting, "<1%" executing (not 100% and 0%)
    b = run_bounds(_QUIET, _requests([[0, 9960, 10000, "completed"]]), _steps(), _Perf())
    assert b["verdict"] == "Bound by queueing: >99% of request time waiting to be scheduled"
    assert "request time: queueing >99%, execution <1%" in b["text"]
