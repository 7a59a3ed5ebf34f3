"""fit-engine recovers engine constants that the test itself put into synthetic records.

Two "recorded" runs are produced by the simulator with an engine profile whose per-step sync
time is known (2.5 ms); the fit starts from 0 and must find it again from the per-request
latencies alone, and the leave-one-run-out refits too. This checks the objective and the
optimiser, not the engine model (the data come from the same model).
"""
from __future__ import annotations

import pandas as pd
import pytest
import yaml
from helpers import synthetic_workload

from simulator.cli.main import main
from simulator.observe.fit_engine import fit_engine, prepare_cases, with_constants, write_profile
from simulator.perf.engine_profile import get_engine_profile, load_engine_profile
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario

TRUE_SYNC_S = 2.5e-3


def _record(tmp_path, name, rate, profile_path, n=60):
    sc = validate_scenario({
        "name": name, "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
        "perf": {"source": "roofline", "engine": str(profile_path)},
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 512},
        "kv_cache": {"num_gpu_blocks": 4000}, "seed": 3,
        "workload": synthetic_workload(n, rate, prompt_median=200, output_median=40,
                                       output_max=200)})
    res = run_scenario(sc, write=False)
    r = res.requests
    df = pd.DataFrame({"request_id": [f"q{i}" for i in r.request_id],
                       "arrival_s": r.arrival_time_s, "prompt_tokens": r.num_prompt_tokens,
                       "output_tokens": r.num_emitted_tokens,
                       "ttft_s": r.first_token_time_s - r.arrival_time_s,
                       "e2e_s": r.finish_time_s - r.arrival_time_s})
    path = tmp_path / f"{name}.csv"
    df.to_csv(path, index=False, float_format="%.12g")
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fit")
    truth = with_constants(get_engine_profile("vllm-v1"), {"sync.step_s": TRUE_SYNC_S}, "truth")
    prof = write_profile(truth, tmp / "truth.yaml")
    return [_record(tmp, "light", 4.0, prof), _record(tmp, "heavy", 8.0, prof)]


def _sets():
    return ["scheduler.max_num_seqs=16", "scheduler.max_num_batched_tokens=512",
            "kv_cache.num_gpu_blocks=4000", "perf.source=roofline"]


def test_fit_recovers_the_constant(records):
    cases = prepare_cases(records, gpu="h100-sxm", model="llama-3.1-8b", sets=_sets())
    res = fit_engine(cases, "vllm-v1", ("sync.step_s",), grid_points=13, log=lambda s: None)
    assert res.values["sync.step_s"] == pytest.approx(TRUE_SYNC_S, rel=0.05)
    for r in res.runs:
        assert abs(res.in_sample[r]["ttft_mean_pct_error"]) < 2.0
        # fitted on the other run only: still the same truth
        held = res.leave_one_run_out[r]
        assert held["constants"]["sync.step_s"] == pytest.approx(TRUE_SYNC_S, rel=0.1)
    assert res.profile.fitted_on == tuple(res.runs)
    assert "leave-one-run-out" in res.profile.sync.step_s.source


def test_fit_needs_two_runs(records):
    cases = prepare_cases(records[:1], gpu="h100-sxm", model="llama-3.1-8b", sets=_sets())
    with pytest.raises(ValueError, match="at least two"):
        fit_engine(cases, "vllm-v1", ("sync.step_s",))
    with pytest.raises(ValueError, match="cannot fit"):
        fit_engine(cases * 2, "vllm-v1", ("sampler.bytes_per_logit",))


def test_cli_writes_a_profile_a_scenario_can_name(records, tmp_path, capsys):
    out = tmp_path / "fitted.yaml"
    args = ["calibrate", "fit-engine", *map(str, records), "-o", str(out), "-q",
            "--params", "sync.step_s", "--grid-points", "13", "--no-loo",
            "--gpu", "h100-sxm", "--model", "llama-3.1-8b"]
    for s in _sets():
        args += ["--set", s]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "fitted on 2 runs" in printed
    prof = load_engine_profile(out)
    assert prof.sync.step_s.value == pytest.approx(TRUE_SYNC_S, rel=0.1)
    doc = yaml.safe_load(out.read_text())
    assert doc["fitted_on"] == ["light", "heavy"] and "fit_report" in doc
    # a scenario names it by path
    sc = validate_scenario({"workload": synthetic_workload(3), "perf": {"engine": str(out)}})
    assert sc.perf.engine == str(out)
