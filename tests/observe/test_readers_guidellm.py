"""The GuideLLM report reader (``simulator.observe.readers_guidellm``) from reports the tests
write with explicit timestamps (every expected latency derived by hand), and the client-side
API-server term on GuideLLM and ``vllm bench serve`` records."""
from __future__ import annotations

import json

import numpy as np
import pytest
from record_factories import guidellm_report, guidellm_request

from simulator.cli.main import main
from simulator.observe import read_recorded
from simulator.observe.validate import validate_recorded

CONST = ["perf.source=constant", "perf.constant.step_s=0.01"]


def _report(flat: bool = False) -> dict:
    """Two benchmarks: a synchronous one (two requests, one errored) and a 4 req/s one."""
    r0 = guidellm_request(1000.0, 1000.1, 1000.5, 1000.52, 100, 5, flat=flat)
    r1 = guidellm_request(1000.6, 1000.65, 1000.85, 1000.9, 50, 3, flat=flat)
    r2 = guidellm_request(1002.0, 1002.25, 1003.25, 1003.3, 80, 11, flat=flat)
    return guidellm_report([({"type_": "synchronous"}, [r1, r0], 1),
                            ({"type_": "constant", "rate": 4.0}, [r2], 0)],
                           model="servesim-tiny-llama")


def _write(tmp_path, rep: dict, name: str = "benchmarks.json"):
    p = tmp_path / name
    p.write_text(json.dumps(rep))
    return p


@pytest.mark.parametrize("flat", [False, True], ids=["guidellm>=0.4", "guidellm-0.3"])
def test_round_trip(tmp_path, flat):
    """Arrival = request_start - the first (0, 0.6, 2.0 s); TTFT 0.1, 0.05, 0.25 s; TPOT
    (last - first) / (n - 1) = 0.4 / 4, 0.2 / 2, 1.0 / 10 = 0.1 s; E2E = last - start = 0.5,
    0.25, 1.25 s; each benchmark a stage."""
    run = read_recorded(_write(tmp_path, _report(flat)))
    o = run.outcomes
    assert run.format == "guidellm_json" and run.client_side and not run.aggregate_only
    assert o["arrival_s"].tolist() == pytest.approx([0.0, 0.6, 2.0])
    assert o["ttft_s"].tolist() == pytest.approx([0.1, 0.05, 0.25])
    assert o["tpot_s"].tolist() == pytest.approx([0.1, 0.1, 0.1])
    assert o["e2e_latency_s"].tolist() == pytest.approx([0.5, 0.25, 1.25])
    assert o["num_prompt_tokens"].tolist() == [100, 50, 80]
    assert o["num_output_tokens"].tolist() == [5, 3, 11]
    assert o["stage"].tolist() == [0, 0, 1]
    assert [s.name for s in run.stages] == ["benchmark 0 (synchronous)",
                                            "benchmark 1 (constant 4 req/s)"]
    assert [s.num_requests for s in run.stages] == [2, 1]
    assert run.stages[1].start_s == pytest.approx(2.0)
    assert run.num_failed == 1
    assert any("1 errored" in a for a in run.approximations)
    assert run.settings["model"].value == "servesim-tiny-llama"
    assert [s.arrival_time_s for s in run.specs] == pytest.approx([0.0, 0.6, 2.0])


def _cli_err(capsys, path) -> str:
    rc = main(["validate", "--recorded", str(path), "-o", str(path.parent / "o"), "-q",
               "--gpu", "h100-sxm"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("servesim: error: ") and "\n" not in err
    return err


def test_missing_timestamp_names_the_key(tmp_path, capsys):
    rep = _report()
    del rep["benchmarks"][0]["requests"]["successful"][1]["info"]["timings"][
        "first_token_iteration"]
    err = _cli_err(capsys, _write(tmp_path, rep))
    assert err.endswith("benchmarks.json: benchmarks[0].requests.successful[1]."
                        "info.timings.first_token_iteration is missing")


def test_bad_token_count_names_the_key(tmp_path, capsys):
    rep = _report(flat=True)
    rep["benchmarks"][1]["requests"]["successful"][0]["output_tokens"] = 0
    err = _cli_err(capsys, _write(tmp_path, rep))
    assert err.endswith("benchmarks[1].requests.successful[0].output_tokens must be an integer "
                        ">= 1, got 0")


def test_timestamps_out_of_order(tmp_path, capsys):
    rep = _report(flat=True)
    rep["benchmarks"][1]["requests"]["successful"][0]["first_token_time"] = 999.0
    err = _cli_err(capsys, _write(tmp_path, rep))
    assert "benchmarks[1].requests.successful[0]: timestamps out of order" in err


def test_sampled_requests_are_refused(tmp_path, capsys):
    rep = _report()
    rep["benchmarks"][1]["metrics"]["request_totals"]["successful"] = 40
    err = _cli_err(capsys, _write(tmp_path, rep))
    assert "benchmarks[1].requests.successful lists 1 of the 40 requests made (a sample)" in err


def test_no_requests_key(tmp_path, capsys):
    rep = _report()
    del rep["benchmarks"][0]["requests"]
    err = _cli_err(capsys, _write(tmp_path, rep))
    assert "benchmarks[0].requests is missing" in err


def _api_profile(tmp_path, per_request_s):
    p = tmp_path / f"api-{per_request_s}.yaml"
    p.write_text(f"name: t\nengine: vllm\napi_server:\n  per_request_s: {{value: {per_request_s},"
                 " source: test value}\n")
    return str(p)


def test_guidellm_replay_compares_per_benchmark_with_the_api_term(tmp_path):
    path = _write(tmp_path, _report())
    base = validate_recorded(path, gpu="h100-sxm", write=False,
                             sets=[*CONST, f"perf.engine={_api_profile(tmp_path, 0.0)}"])
    api = validate_recorded(path, gpu="h100-sxm", write=False,
                            sets=[*CONST, f"perf.engine={_api_profile(tmp_path, 0.02)}"])
    assert [s["num_requests"] for s in api.validation["stages"]] == [2, 1]
    assert api.validation["stages"][1]["name"] == "benchmark 1 (constant 4 req/s)"
    assert api.validation["api_server"]["applied"] is True
    d = (api.validation["metrics"]["ttft"]["sim"]["mean"]
         - base.validation["metrics"]["ttft"]["sim"]["mean"])
    assert d == pytest.approx(0.02, abs=1e-12)
    # per stage, recorded statistics come from the record's own requests
    assert api.validation["stages"][1]["recorded"]["ttft"]["mean"] == pytest.approx(0.25)


def test_bench_json_gets_the_api_term(tmp_path):
    """A vllm bench serve file is client-side too: its replay adds the API-server term."""
    data = {"model_id": "servesim-tiny-llama", "input_lens": [30, 40, 50],
            "output_lens": [4, 4, 4], "ttfts": [0.05, 0.06, 0.07],
            "latencies": [0.2, 0.3, 0.4], "start_times": [10.0, 10.5, 11.0],
            "errors": ["", "", ""], "itls": [[0.05] * 3] * 3}
    path = _write(tmp_path, data, "bench.json")
    base = validate_recorded(path, gpu="h100-sxm", write=False,
                             sets=[*CONST, f"perf.engine={_api_profile(tmp_path, 0.0)}"])
    api = validate_recorded(path, gpu="h100-sxm", write=False,
                            sets=[*CONST, f"perf.engine={_api_profile(tmp_path, 0.03)}"])
    assert api.run.client_side and api.validation["api_server"]["applied"]
    for m in ("ttft", "e2e"):
        d = np.array([api.validation["metrics"][m]["sim"][s] - base.validation["metrics"][m]
                      ["sim"][s] for s in ("mean", "p50", "p90", "p99")])
        assert d == pytest.approx(0.03, abs=1e-12)
    assert len(api.validation["stages"]) == 1 and api.validation["stages"][0]["name"] == \
        "whole run"
