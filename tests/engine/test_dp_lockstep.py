"""DP ranks in lockstep (vLLM DP x EP): every group step lasts as long as the slowest rank's."""
from __future__ import annotations

import pytest
from helpers import make_scenario, run_sim, spec


def _run(lockstep: bool):
    sc = make_scenario({"cluster": {"num_replicas": 2, "router": "round_robin",
                                    "dp_lockstep": lockstep},
                        "perf": {"source": "constant", "constant": {"per_token_s": 1e-4}}})
    # A (rank 0): 1000-token prompt; B (rank 1): 10-token prompt; 3 output tokens each
    return run_sim(sc, [spec(0, 0.0, 1000, 3), spec(1, 0.0, 10, 3)]).requests()


def test_independent_ranks_step_on_their_own():
    req = _run(False).set_index("request_id")
    assert req.loc[1, "first_token_time_s"] == pytest.approx(1e-3)       # 10 x 0.1 ms
    assert req.loc[1, "finish_time_s"] == pytest.approx(1e-3 + 2e-4)
    assert req.loc[0, "finish_time_s"] == pytest.approx(0.1 + 2e-4)


def test_lockstep_ranks_wait_for_the_slowest():
    req = _run(True).set_index("request_id")
    # group step 1 = max(100 ms prefill, 1 ms prefill): B's first token waits for A's prefill
    assert req.loc[1, "first_token_time_s"] == pytest.approx(0.1)
    assert req.loc[0, "first_token_time_s"] == pytest.approx(0.1)
    # then two decode steps of max(0.1 ms, 0.1 ms)
    assert req.loc[1, "finish_time_s"] == pytest.approx(0.1 + 2e-4)
    assert req.loc[0, "finish_time_s"] == pytest.approx(0.1 + 2e-4)
    assert (req["status"] == "completed").all()
