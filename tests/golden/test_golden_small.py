"""Golden test: a small deterministic scenario's summary against a reviewed expected file.

Scenario: 200 synthetic requests (Poisson 12 req/s, lognormal prompts median 300 and outputs
median 100 tokens), Llama-3.1-8B on one H100 SXM with the roofline model, a 500-block KV
cache (some preemption), SLOs TTFT 0.25 s and TPOT 20 ms.

The expected file ``expected/small_summary.json`` is the summary minus the wall-clock
figures. Refresh it only on purpose::

    SERVESIM_UPDATE_GOLDEN=1 python -m pytest tests/golden

Reviewed by hand when regenerated for the named random streams of ``simulator.base.rng``
(figures from the file; roofline operators + the vLLM V0 engine profile, see
``helpers.make_scenario``): duration_s 22.627079 s, so gpu_hours = 22.627079 / 3600 =
0.0062853 and cost_usd = 0.0062853 x 2.99 = 0.0187930; 200 completed with 27,301 output
tokens: output_token_throughput_tps = 27,301 / 22.627079 = 1,206.56 and
cost_per_1m_output_tokens_usd = 0.0187930 / 27,301 x 1e6 = 0.68836; the ITL count is 27,301 -
200 = 27,101 (one gap fewer than tokens per request); slo_attainment 0.195 gives goodput
0.195 x 200 / 22.627079 = 1.72360 req/s; num_steps 2,469 and 53 preemptions in a 500-block
pool.

Phase cost (added when the price sheet was introduced, reviewed by hand): the replica is busy
for the whole window (busy 22.627079 GPU-s = duration_s, no idle time); prefill holds 2.810577
GPU-s (12.42%: 134 mixed steps, 13% of the time, split by operator times), so prefill cost =
0.0187930 x 0.124213 = 0.0023343 USD over 82,460 input tokens = 0.028309 USD per 1M, and
decode cost 0.0164587 USD over 27,301 output tokens = 0.60286 USD per 1M; 82,460 x 0.028309 /
1e6 + 27,301 x 0.60286 / 1e6 = 0.0187930 = cost_usd.

What bounds the run (the ``bounds`` section, added with the verdict, reviewed by hand): 53
preemptions, so KV capacity binds (the cache is at least 95% full for 46.4% of busy time);
queueing is 575.18 s of the completed requests' 838.13 s of E2E (68.6%).

Energy (the ``energy`` block, added with the power model, the rest of the file unchanged):
8,889.67 J over the 22.627 s window, all busy (the replica steps throughout; the H100 profile
has no sourced idle power, so idle is not counted and the block says so): 8,889.67 / 27,301
output tokens = 0.32562 J per output token, 8,889.67 / 22.627079 = 392.88 W mean, between the
fit's 98.6 W static power and the 700 W limit; the per-step formula is checked against the
step table in tests/runs/test_energy_run.py.

``test_golden_file_numbers_hand_checked`` recomputes several of the file's numbers from the
run's request and step records with plain numpy (definitions of DESIGN.md's glossary), so
the file is checked, not just snapshotted.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import make_scenario, summary_without_wall, synthetic_workload

from simulator.runs.scenario import run_scenario

EXPECTED = Path(__file__).parent / "expected" / "small_summary.json"
UPDATE = os.environ.get("SERVESIM_UPDATE_GOLDEN") == "1"


def _scenario():
    return make_scenario({"name": "golden_small", "seed": 42,
                          "kv_cache": {"num_gpu_blocks": 500},
                          "scheduler": {"max_num_seqs": 64},
                          "slo": {"ttft_s": 0.25, "tpot_s": 0.02},
                          "cost": {"usd_per_gpu_hour": 2.99}},
                         workload=synthetic_workload(200, 12, output_median=100))


@pytest.fixture(scope="module")
def run():
    return run_scenario(_scenario(), write=False)


def _compare(got, want, path="summary"):
    if isinstance(want, dict):
        assert isinstance(got, dict), path
        assert sorted(got) == sorted(want), (path, sorted(set(got) ^ set(want)))
        for k in want:
            _compare(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float)), path
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (path, got, want)
    else:
        assert got == want, (path, got, want)


def test_golden_summary(run):
    got = json.loads(json.dumps(summary_without_wall(run.summary)))
    if UPDATE:
        EXPECTED.parent.mkdir(parents=True, exist_ok=True)
        EXPECTED.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    want = json.loads(EXPECTED.read_text())
    _compare(got, want)


def test_golden_file_numbers_hand_checked(run):
    """Several numbers of the expected file, recomputed from the records.

    For the reviewed file: 200 requests, all completed; num_output_tokens is the sum of
    emitted tokens; output_token_throughput_tps = that sum / duration_s, where duration_s =
    max(last finish, last step end) - first arrival; cost_usd = duration_s / 3600 x 2.99;
    TTFT p50 = the 100th smallest TTFT (inverse CDF); mean TPOT over requests with >= 2
    tokens; SLO attainment = share of requests with TTFT <= 0.25 s and TPOT <= 20 ms.
    """
    want = json.loads(EXPECTED.read_text())
    req, steps = run.requests, run.steps
    done = req[req.status == "completed"]
    assert want["num_requests"] == len(req) == 200
    assert want["num_completed"] == len(done)
    assert want["num_output_tokens"] == int(done.num_emitted_tokens.sum())
    assert want["num_input_tokens"] == int(done.num_prompt_tokens.sum())
    assert want["num_preemptions"] == int(req.num_preemptions.sum()) > 0
    start = req.arrival_time_s.min()
    end = max(req.finish_time_s.max(), steps.end_time_s.max())
    assert want["duration_s"] == pytest.approx(end - start, rel=1e-12)
    assert want["output_token_throughput_tps"] == pytest.approx(
        done.num_emitted_tokens.sum() / (end - start), rel=1e-12)
    assert want["request_throughput_rps"] == pytest.approx(len(done) / (end - start), rel=1e-12)
    assert want["cost_usd"] == pytest.approx((end - start) / 3600 * 2.99, rel=1e-12)
    ttft = np.sort((req.first_token_time_s - req.arrival_time_s).to_numpy())
    assert want["ttft_s"]["p50"] == pytest.approx(ttft[99], rel=1e-12)  # ceil(0.5 * 200)
    assert want["ttft_s"]["max"] == pytest.approx(ttft[-1], rel=1e-12)
    assert want["ttft_s"]["mean"] == pytest.approx(ttft.mean(), rel=1e-12)
    multi = done[done.num_emitted_tokens >= 2]
    tpot = (multi.finish_time_s - multi.first_token_time_s) / (multi.num_emitted_tokens - 1)
    assert want["tpot_s"]["mean"] == pytest.approx(tpot.mean(), rel=1e-12)
    assert want["tpot_s"]["count"] == len(multi)
    e2e = (done.finish_time_s - done.arrival_time_s).to_numpy()
    assert want["e2e_latency_s"]["mean"] == pytest.approx(e2e.mean(), rel=1e-12)
    ttft_all = req.first_token_time_s - req.arrival_time_s
    tpot_all = ((req.finish_time_s - req.first_token_time_s)
                / (req.num_emitted_tokens - 1)).where(req.num_emitted_tokens >= 2, 0.0)
    met = (req.status == "completed") & (ttft_all <= 0.25) & (tpot_all <= 0.02)
    assert want["slo_attainment"] == pytest.approx(met.mean(), rel=1e-12)
    assert 0 < want["slo_attainment"] < 1  # the SLOs bind for some requests
    assert want["num_steps"] == len(steps)
    assert want["num_gpu_blocks"] == 500 and want["kv_cache_tokens"] == 500 * 16
    assert want["perf_model"] == "roofline"
    # phase-attributed cost: the steps with only prefill (only decode) work are wholly that
    # phase's, so the prefill GPU-seconds lie between the pure-prefill steps' time and that
    # plus the mixed steps' time; the two phase costs add up to cost_usd and the price sheet
    # recovers it from the token counts
    pc = want["phase_cost"]
    pf, dc, t = steps.num_prefill_tokens, steps.num_decode_tokens, steps.step_time_s
    pure_p = float(t[(pf > 0) & (dc == 0)].sum())
    mixed = float(t[(pf > 0) & (dc > 0)].sum())
    assert pure_p - 1e-9 <= pc["prefill_gpu_s"] <= pure_p + mixed + 1e-9
    assert pc["prefill_gpu_s"] + pc["decode_gpu_s"] == pytest.approx(float(t.sum()))
    assert pc["prefill_cost_usd"] + pc["decode_cost_usd"] == pytest.approx(want["cost_usd"])
    assert (want["price_per_1m_input_tokens_usd"] * want["num_input_tokens"]
            + want["price_per_1m_output_tokens_usd"] * want["num_output_tokens"]) / 1e6 == \
        pytest.approx(want["cost_usd"], rel=1e-12)
    assert pc["phase_split_method"] == "operator"
    assert want["workload_synthesised"] == {}
    # what bounds the run (added with the verdict, reviewed by hand): 53 preemptions, so KV
    # capacity binds; its share is the busy time with the cache at least 95% full (46.4%);
    # queueing is the summed queue delay over the summed E2E of the completed requests
    # (575.18 s of 838.13 s = 68.6%)
    b = want["bounds"]
    assert b["bound"] == "kv_capacity" and b["kv_capacity"]["num_preemptions"] == 53
    full = steps.kv_blocks_used / steps.num_gpu_blocks >= 0.95
    assert b["bound_share"] == pytest.approx(float(t[full].sum() / t.sum()), rel=1e-12)
    queue = (done.first_scheduled_time_s - done.arrival_time_s).sum()
    assert b["shares"]["queueing"] == pytest.approx(queue / e2e.sum(), rel=1e-12)
    assert b["request_time"]["request_time_s"] == pytest.approx(e2e.sum(), rel=1e-12)
