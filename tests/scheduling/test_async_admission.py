"""vLLM V1 async scheduling's admission lag (the engine defers an arrival during a step to the
step after the next) and client total time-outs that abort streaming requests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from simulator.perf import ConstantPerfModel
from simulator.perf.engine_profile import get_engine_profile
from tests.helpers import make_scenario, poisson_specs, run_sim, spec


def _run(engine, specs):
    sc = make_scenario({"perf": {"engine": engine}, "kv_cache": {"enable_prefix_caching": False}})
    out = run_sim(sc, specs)
    steps = out.steps().sort_values("step_index")
    return out.requests().set_index("request_id"), steps


def _sync_twin(tmp_path) -> str:
    """vllm-v1 with async scheduling off: the same step prices (its CPU term is 0, so
    ``max(gpu, cpu) + sync == gpu + cpu + sync``), no admission lag."""
    doc = yaml.safe_load(Path(get_engine_profile("vllm-v1").path).read_text())
    doc["name"] = "vllm-v1-sync-twin"
    doc["async_scheduling"] = False
    p = tmp_path / "twin.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _expected_start(a, starts, ends, lag: bool):
    """When a request arriving at ``a`` (strictly inside a step) is first scheduled under
    light load: the end of that step (synchronous), or of the step after it (async) when the
    engine went straight on, else the end of that step."""
    k = int(np.flatnonzero((starts < a) & (ends > a))[0])
    if not lag:
        return ends[k]
    nxt = np.flatnonzero(starts == ends[k])
    return ends[nxt[0]] if len(nxt) else ends[k]


@pytest.mark.parametrize("lag", [True, False])
def test_an_arrival_during_a_step_is_scheduled_as_the_engine_does(tmp_path, lag):
    specs = poisson_specs(60, 30.0, 200, 40, seed=3)
    req, steps = _run("vllm-v1" if lag else _sync_twin(tmp_path), specs)
    starts = steps.start_time_s.to_numpy()
    ends = steps.end_time_s.to_numpy()
    busy = idle = 0
    for s in specs:
        a = s.arrival_time_s
        got = req.loc[s.request_id, "first_scheduled_time_s"]
        if ((starts < a) & (ends > a)).any():
            assert got == pytest.approx(_expected_start(a, starts, ends, lag), abs=1e-12)
            busy += 1
        elif not ((starts < a) & (ends >= a)).any():
            assert got == pytest.approx(a, abs=1e-12)   # an idle engine schedules at once
            idle += 1
    assert busy > 10 and idle >= 1


def test_async_lag_adds_about_one_step_to_ttft(tmp_path):
    # the same step prices with and without the lag: mean TTFT grows by about one step
    specs = poisson_specs(80, 10.0, 100, 60, seed=5)
    r1, st1 = _run("vllm-v1", specs)
    r0, _ = _run(_sync_twin(tmp_path), specs)
    step = float(st1.step_time_s.median())
    d = float((r1.first_token_time_s - r1.arrival_time_s).mean()
              - (r0.first_token_time_s - r0.arrival_time_s).mean())
    assert (r1.status == "completed").all() and len(r1) == 80
    assert 0.6 * step < d < 1.6 * step


def test_total_timeout_aborts_a_streaming_request():
    perf = ConstantPerfModel(step_s=0.01)
    sc = make_scenario({"perf": {"source": "constant", "constant": {"step_s": 0.01}}})
    # one request: 10 prompt tokens, 100 output tokens, 10 ms a step: it would finish at
    # 1.00 s; its client gives up after 0.155 s. Without cancel_when_streaming it completes
    # (the patience only covers the first token); with it, it leaves at the end of the step in
    # progress (0.16 s) with 15 tokens emitted (steps ending at 0.01 ... 0.15)
    keep = run_sim(sc, [spec(0, 0.0, 10, 100, cancel_after_s=0.155)], perf=perf).requests()
    assert keep.status.iloc[0] == "completed" and keep.num_emitted_tokens.iloc[0] == 100
    out = run_sim(sc, [spec(0, 0.0, 10, 100, cancel_after_s=0.155,
                            cancel_when_streaming=True)], perf=perf)
    r = out.requests().iloc[0]
    assert r.status == "cancelled"
    assert r.num_emitted_tokens == 15
    assert r.exit_time_s == pytest.approx(0.16)
    assert pd.isna(r.finish_time_s)


def test_streaming_cancellations_fast_forward_like_stepping():
    # requests whose clients give up mid-stream, at times that fall inside decode runs: a
    # fast-forwarded replay and one stepped an iteration at a time give the same records
    from simulator.cluster.setup import build_setup
    from simulator.engine.loop import simulate
    sc = make_scenario({"perf": {"engine": "vllm-v1"}})
    rng = np.random.default_rng(7)
    specs = [spec(i, float(t), 120, 200, cancel_after_s=float(c), cancel_when_streaming=True)
             for i, (t, c) in enumerate(zip(np.cumsum(rng.exponential(0.05, 40)),
                                            rng.uniform(0.2, 3.0, 40)))]
    outs = [simulate(sc, build_setup(sc), specs, check_transitions=True, fast_forward=ff)
            for ff in (True, False)]
    a, b = (o.requests().sort_values("request_id").reset_index(drop=True) for o in outs)
    assert (a.status == "cancelled").sum() > 5 and (a.status == "completed").sum() > 5
    pd.testing.assert_frame_equal(a, b)
