"""Pools behind one gateway: per-pool routing state, request classes, P/D handoff timing
(hand-derived with a constant step time)."""
from __future__ import annotations

import pandas as pd
import pytest
from helpers import make_scenario, spec, synthetic_workload

from simulator.report.autoscale import autoscale_section
from simulator.runs.gateway import run_gateway
from simulator.scenario.config import ScenarioError, validate_scenario

CONST = {"source": "constant", "constant": {"step_s": 0.01}}


def _pools_scenario(pools: list[dict]):
    return make_scenario({"perf": CONST, "pools": pools})


def test_round_robin_counters_are_per_pool():
    # tenants alternate a, b, a, b, ...; pool A (2 replicas) serves a, pool B (3) serves b.
    # One shared counter would send a's requests to replicas 0, 2, 4 ... of 5; per-pool
    # counters send a's k-th request to A's replica k % 2 and b's k-th to B's replica k % 3
    sc = _pools_scenario([
        {"name": "A", "cluster": {"num_replicas": 2}, "match": {"tenants": ["a"]}},
        {"name": "B", "cluster": {"num_replicas": 3}, "match": {"tenants": ["b"]}}])
    specs = [spec(i, 0.1 * i, 50, 3, tenant="ab"[i % 2]) for i in range(12)]
    res = run_gateway(sc, specs=specs, write=False)
    req = res.requests
    assert len(req) == 12 and (req["status"] == "completed").all()
    a = req[req["tenant"] == "a"]
    b = req[req["tenant"] == "b"]
    assert set(a["pool"]) == {"A"} and set(b["pool"]) == {"B"}
    assert a["replica_id"].tolist() == [k % 2 for k in range(6)]
    assert b["replica_id"].tolist() == [k % 3 for k in range(6)]
    assert res.summary["pools"]["A"]["requests_per_replica"] == {0: 3, 1: 3}
    assert res.summary["pools"]["B"]["requests_per_replica"] == {0: 2, 1: 2, 2: 2}
    assert res.summary["num_gpus"] == 5


def test_unmatched_request_class_is_an_error():
    sc = _pools_scenario([{"name": "A", "match": {"tenants": ["a"]}}])
    with pytest.raises(ValueError, match="tenant 'z'.*matches no pool"):
        run_gateway(sc, specs=[spec(0, 0.0, 10, 2, tenant="z")], write=False)


def test_disaggregated_handoff_times_by_hand():
    # one request, prompt 1000, output 5, constant 10 ms steps, Llama-3.1-8B (131072 KV
    # bytes per token), link 50 GB/s + 10 us:
    #   prefill: one step -> first token at 0.010 s (TTFT)
    #   transfer: 10e-6 + 1000 x 131072 / 50e9 = 2.63144 ms -> decode arrival 0.01263144
    #   decode: 4 steps of 10 ms (tokens 2..5) -> finish 0.05263144
    sc = _pools_scenario([
        {"name": "P", "role": "prefill", "decode_pool": "D",
         "kv_transfer": {"kind": "infiniband", "bandwidth_bytes_per_s": 50e9,
                         "latency_s": 10e-6}},
        {"name": "D", "role": "decode"}])
    res = run_gateway(sc, specs=[spec(0, 0.0, 1000, 5)], write=False)
    row = res.requests.iloc[0]
    xfer = 10e-6 + 1000 * 131072 / 50e9
    assert row["status"] == "completed" and row["num_emitted_tokens"] == 5
    assert row["first_token_time_s"] == pytest.approx(0.01)
    assert row["kv_transfer_s"] == pytest.approx(xfer)
    assert row["finish_time_s"] == pytest.approx(0.01 + xfer + 0.04)
    assert res.summary["tpot_s"]["mean"] == pytest.approx((xfer + 0.04) / 4)
    assert res.summary["disaggregation"]["kv_transfer_s"]["mean"] == pytest.approx(xfer)
    # the decode pool allocated the prompt's blocks but computed one token per step
    dec = res.pools["D"].result.steps
    assert dec["num_prefill_tokens"].sum() + dec["num_decode_tokens"].sum() == 4


def test_one_token_request_finishes_at_the_prefill_pool():
    sc = _pools_scenario([
        {"name": "P", "role": "prefill", "decode_pool": "D",
         "kv_transfer": {"bandwidth_bytes_per_s": 50e9}},
        {"name": "D", "role": "decode"}])
    res = run_gateway(sc, specs=[spec(0, 0.0, 100, 1), spec(1, 0.5, 100, 3)], write=False)
    assert res.requests["status"].tolist() == ["completed", "completed"]
    assert res.requests["num_emitted_tokens"].tolist() == [1, 3]
    assert len(res.pools["D"].result.requests) == 1


@pytest.mark.parametrize("pools, msg", [
    ([{"name": "A"}, {"name": "A"}], "duplicate pool name"),
    ([{"name": "P", "role": "prefill", "kv_transfer": {"bandwidth_bytes_per_s": 1e9}}],
     "pools.0.decode_pool: prefill pool 'P' must name a decode pool"),
    ([{"name": "P", "role": "prefill", "decode_pool": "D"}, {"name": "D", "role": "decode"}],
     "pools.0.kv_transfer"),
    ([{"name": "D", "role": "decode"}, {"name": "M"}], "not named by any prefill"),
])
def test_bad_pools_are_one_line_errors(pools, msg):
    with pytest.raises(ScenarioError, match=msg):
        validate_scenario({"pools": pools, "workload": synthetic_workload()})


def test_decode_pool_admits_only_with_the_blocks():
    # two 1000-token prompts prefilled together (one 10 ms step), both handed over at
    # t = 0.01 + xfer. Each needs ceil(1001 / 16) = 63 blocks on the decode side; with 100
    # blocks the second waits until the first finishes (4 steps = 40 ms), then runs its 4
    sc = _pools_scenario([
        {"name": "P", "role": "prefill", "decode_pool": "D",
         "kv_transfer": {"bandwidth_bytes_per_s": 50e9}},
        {"name": "D", "role": "decode", "kv_cache": {"num_gpu_blocks": 100, "block_size": 16}}])
    res = run_gateway(sc, specs=[spec(0, 0.0, 1000, 5), spec(1, 0.0, 1000, 5)], write=False)
    xfer = 1000 * 131072 / 50e9
    req = res.requests.set_index("request_id")
    assert req.loc[0, "decode_queue_s"] == pytest.approx(0.0)
    assert req.loc[1, "decode_queue_s"] == pytest.approx(0.04)
    assert req.loc[1, "finish_time_s"] == pytest.approx(0.01 + xfer + 0.08)
    assert (req["status"] == "completed").all()


def test_set_indexes_a_pool():
    from simulator.scenario.overrides import apply_overrides
    raw = {"pools": [{"name": "A"}, {"name": "B", "cluster": {"num_replicas": 1}}]}
    out = apply_overrides(raw, ["pools.1.cluster.num_replicas=3", "pools.0.model=llama-3.1-70b"])
    assert out["pools"][1]["cluster"]["num_replicas"] == 3
    assert out["pools"][0]["model"] == "llama-3.1-70b"
    with pytest.raises(ScenarioError, match="'5' is not an index of a list of 2"):
        apply_overrides(raw, ["pools.5.model=x"])


def test_same_pools_scenario_same_outputs(tmp_path):
    sc = _pools_scenario([
        {"name": "P", "role": "prefill", "decode_pool": "D", "cluster": {"num_replicas": 2},
         "kv_transfer": {"bandwidth_bytes_per_s": 50e9, "layerwise": True}},
        {"name": "D", "role": "decode"}])
    specs = [spec(i, 0.01 * i, 100 + 7 * i, 2 + i % 5) for i in range(30)]
    a = run_gateway(sc, specs=specs, outdir=tmp_path / "a", figures=False)
    b = run_gateway(sc, specs=specs, outdir=tmp_path / "b", figures=False)
    for name in ("requests.parquet", "steps.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # CSV on request, into the same folder: the Parquet copies go, full precision kept
    run_gateway(sc, specs=specs, outdir=tmp_path / "a", figures=False, table_format="csv")
    assert not (tmp_path / "a" / "requests.parquet").exists()
    back = pd.read_csv(tmp_path / "a" / "requests.csv")
    assert back["arrival_time_s"].tolist() == a.requests["arrival_time_s"].tolist()
    assert len(a.requests) == 30 and set(a.requests["status"]) == {"completed"}
    assert b.summary["num_completed"] == 30


def test_an_autoscaled_decode_pool_scales_alone_and_its_gpus_are_paid_while_held():
    # P/D: the decode pool autoscales (1..3, 4 running requests per replica, no up cooldown,
    # cold start 5 s), the prefill pool stays at 1. 12 requests of 3,000 tokens arrive at 0 s:
    # the decode pool's first evaluation (10 s after its first arrival) sees 12 outstanding
    # and adds 2 replicas (ceil(12 / 4) = 3); the merged GPU-hours are each pool's replicas
    # held within the merged window
    sc = _pools_scenario([
        {"name": "P", "role": "prefill", "decode_pool": "D",
         "kv_transfer": {"kind": "infiniband", "bandwidth_bytes_per_s": 50e9}},
        {"name": "D", "role": "decode", "cluster": {"num_replicas": 1, "autoscale": {
            "max_replicas": 3, "target": 4, "interval_s": 10, "window_s": 10,
            "cold_start": {"cold_start_s": 5}}}}])
    res = run_gateway(sc, specs=[spec(i, 0.0, 100, 3000) for i in range(12)], write=False)
    pools = res.summary["pools"]
    assert "autoscale" not in pools["P"]
    a = pools["D"]["autoscale"]
    assert a["num_scale_ups"] == 2 and a["peak_replicas_held"] == 3
    d_spans = res.pools["D"].result.sim.replica_spans
    first_decode_arrival = res.pools["D"].result.requests["arrival_time_s"].min()
    assert [s.provisioned_s for s in d_spans[1:]] == [first_decode_arrival + 10] * 2
    t0, t1 = res.summary["window_start_s"], res.summary["window_end_s"]
    held_s = (t1 - t0) + sum(min(t1, s.released_s) - max(t0, s.provisioned_s) for s in d_spans)
    assert res.summary["gpu_hours"] == pytest.approx(held_s / 3600, rel=1e-12)
    # each pool's share over the same merged window: P's one GPU throughout, D's replicas
    assert pools["P"]["gpu_hours"] == pytest.approx((t1 - t0) / 3600, rel=1e-12)
    assert pools["P"]["gpu_hours"] + pools["D"]["gpu_hours"] == pytest.approx(
        res.summary["gpu_hours"], rel=1e-12)
    assert (res.requests["status"] == "completed").all()
    # the run report has the decode pool's autoscaling section (and only that one)
    assert [s["pool"] for s in autoscale_section(res.summary)] == ["D"]


def test_the_pools_gpu_hours_and_cost_add_up_to_the_deployment():
    # pool B's requests arrive late (its own run's window starts at 5 s): its GPUs are still
    # held, and paid, over the whole merged window, as the merged figures count them
    sc = _pools_scenario([
        {"name": "A", "cluster": {"num_replicas": 2}, "match": {"tenants": ["a"]},
         "cost": {"usd_per_gpu_hour": 2.0}},
        {"name": "B", "cluster": {"num_replicas": 1}, "match": {"tenants": ["b"]},
         "cost": {"usd_per_gpu_hour": 3.0}}])
    specs = ([spec(i, 0.1 * i, 50, 3, tenant="a") for i in range(6)]
             + [spec(6 + i, 5.0 + 0.1 * i, 50, 3, tenant="b") for i in range(3)])
    res = run_gateway(sc, specs=specs, write=False)
    sm, pools = res.summary, res.summary["pools"]
    hours = (sm["window_end_s"] - sm["window_start_s"]) / 3600
    assert pools["A"]["gpu_hours"] == pytest.approx(2 * hours, rel=1e-12)
    assert pools["B"]["gpu_hours"] == pytest.approx(1 * hours, rel=1e-12)
    assert pools["A"]["cost_usd"] == pytest.approx(2 * hours * 2.0, rel=1e-12)
    assert pools["B"]["cost_usd"] == pytest.approx(1 * hours * 3.0, rel=1e-12)
    assert pools["A"]["cost_usd"] + pools["B"]["cost_usd"] == pytest.approx(sm["cost_usd"],
                                                                            rel=1e-12)
    assert pools["A"]["gpu_hours"] + pools["B"]["gpu_hours"] == pytest.approx(sm["gpu_hours"],
                                                                              rel=1e-12)


def test_a_pools_phase_cost_splits_its_merged_window_cost():
    sc = make_scenario({"pools": [
        {"name": "A", "cluster": {"num_replicas": 1}, "match": {"tenants": ["a"]},
         "cost": {"usd_per_gpu_hour": 2.0}},
        {"name": "B", "cluster": {"num_replicas": 1}, "match": {"tenants": ["b"]},
         "cost": {"usd_per_gpu_hour": 3.0}}]})
    specs = ([spec(i, 0.5 * i, 200, 20, tenant="a") for i in range(6)]
             + [spec(6 + i, 5.0 + 0.5 * i, 200, 20, tenant="b") for i in range(3)])
    res = run_gateway(sc, specs=specs, write=False)
    for name in ("A", "B"):
        p = res.summary["pools"][name]
        pc = p["phase_cost"]
        assert pc["price_check_usd"] == pytest.approx(p["cost_usd"], rel=1e-9)
