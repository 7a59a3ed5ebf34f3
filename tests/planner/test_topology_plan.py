"""Topology plan: candidate order (xPyD by GPU count), the stop at the first passing size,
the winner is the cheapest passing row, the verdict names both families."""
from __future__ import annotations

from helpers import synthetic_workload

from simulator.planner.topology import _candidates, load_topology_plan, run_topology_plan

BASE = {"name": "b", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "perf": {"source": "constant", "constant": {"step_s": 0.002, "per_token_s": 1e-4}},
        "workload": synthetic_workload(n=120, rate_rps=40.0),
        "slo": {"ttft_s": 0.2, "tpot_s": 0.05, "attainment_target": 0.9}}


def _plan(tmp_path, **search):
    raw = {"name": "t", "base": BASE, "usd_per_gpu_hour": 2.0, "output_dir": str(tmp_path),
           "topology_search": search}
    return load_topology_plan(raw, "plan.yaml")


def test_candidates_in_gpu_order(tmp_path):
    spec = _plan(tmp_path, disaggregated={
        "tensor_parallel_size": [2], "max_prefill_replicas": 2, "max_decode_replicas": 2,
        "kv_transfer": {"bandwidth_bytes_per_s": 50e9}})
    labels = [c["label"] for c in _candidates(spec)]
    # (x + y, x) ascending: 1P1D, 1P2D, 2P1D, 2P2D; GPUs = (x + y) x TP
    assert labels == ["disaggregated 1P1D TP2", "disaggregated 1P2D TP2",
                      "disaggregated 2P1D TP2", "disaggregated 2P2D TP2"]
    assert [c["gpus"] for c in _candidates(spec)] == [4, 6, 6, 8]


def test_plan_picks_the_cheapest_passing(tmp_path):
    spec = _plan(tmp_path, aggregated={"tensor_parallel_size": [1], "max_replicas": 3},
                 disaggregated={"tensor_parallel_size": [1], "max_prefill_replicas": 2,
                                "max_decode_replicas": 2,
                                "kv_transfer": {"bandwidth_bytes_per_s": 50e9}})
    res = run_topology_plan(spec, tmp_path)
    rows = res["rows"]
    assert all(r["num_requests"] == 120 for r in rows)
    for fam in ("aggregated", "disaggregated"):
        fam_rows = [r for r in rows if r["family"] == fam]
        # tried cheapest first, stopped at the first pass
        assert [r["gpus"] for r in fam_rows] == sorted(r["gpus"] for r in fam_rows)
        assert all(not r["passed"] for r in fam_rows[:-1])
    # 40 requests/s of ~300-token prompts at 0.1 ms per token is > 1 s of work per second:
    # one replica (or one prefill replica) cannot keep up, so each family tries more than one
    assert not rows[0]["passed"] and len(rows) > 2
    passing = [r for r in rows if r["passed"]]
    assert passing
    assert res["winner"]["usd_per_hour"] == min(r["usd_per_hour"] for r in passing)
    assert res["winner"]["usd_per_hour"] == res["winner"]["gpus"] * 2.0
    assert res["explanation"].startswith(f"Cheapest under the SLOs: {res['winner']['label']}")
    assert (tmp_path / "plan.md").read_text().count("| ") > 0


def test_aggregated_layouts_multiply_tp_pp(tmp_path):
    spec = _plan(tmp_path, aggregated={"tensor_parallel_size": [1, 2],
                                       "pipeline_parallel_size": [1, 2], "max_replicas": 2})
    cands = _candidates(spec)
    # 2 TP x 2 PP layouts x 2 replica counts; GPUs = replicas x TP x PP
    assert [(c["label"], c["gpus"]) for c in cands] == [
        ("aggregated 1x TP1", 1), ("aggregated 2x TP1", 2),
        ("aggregated 1x TP1 PP2", 2), ("aggregated 2x TP1 PP2", 4),
        ("aggregated 1x TP2", 2), ("aggregated 2x TP2", 4),
        ("aggregated 1x TP2 PP2", 4), ("aggregated 2x TP2 PP2", 8)]
