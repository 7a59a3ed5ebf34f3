"""``servesim validate --recorded`` on inference-perf folders: the rebuilt workload replayed
end to end and compared per stage, the per-stage definitions against records built from the
simulator's own output (zero error by construction of the *definitions*, computed here
independently the way inference-perf computes them), and the API-server term (added to
client-side records only, by exactly its value).

Fast: a tiny model on ``perf.source: constant`` (every step 10 ms, so each token's time is
known by hand). No assertion on an error measured against real data.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import SHARED_DIR
from record_factories import ip_summary, write_ip_run, write_vllm_run

from simulator.cli.main import main
from simulator.metrics.latency import latency_stats
from simulator.observe.stages import expanded_percentiles, stage_token_gaps
from simulator.observe.validate import validate_recorded

STEP_S = 0.01
CONST = ["perf.source=constant", f"perf.constant.step_s={STEP_S}", "perf.engine=none"]
IP_H100 = SHARED_DIR / "reference" / "groundtruth" / "inference-perf-h100"
IP_RUNS = sorted(p.name for p in IP_H100.glob("2026*")) if IP_H100.is_dir() else []


def _val(run, *sets, engine_version=None):
    return validate_recorded(run, sets=list(sets), write=False, engine_version=engine_version)


def test_pipeline_writes_per_stage_errors(tmp_path, capsys):
    run = write_ip_run(tmp_path)
    out = tmp_path / "out"
    args = ["validate", "--recorded", str(run), "-o", str(out), "--engine-version", "0.15.1"]
    for s in CONST:
        args += ["--set", s]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "30 requests rebuilt" in printed and "stage 1 (4 req/s constant, 5 s)" in printed
    v = json.loads((out / "validation.json").read_text())
    assert v["run"]["format"] == "inference_perf" and v["run"]["aggregate_only"]
    assert [s["num_requests"] for s in v["stages"]] == [10, 20]
    for s in v["stages"]:
        assert s["counts"]["simulated"]["success"] + s["counts"]["simulated"]["failure"] == \
            s["num_requests"]
    assert v["api_server"]["applied"] is True
    src = {r["key"]: r for r in v["settings"]}
    assert src["perf.engine_version"]["source"].startswith("command line --engine-version")
    assert src["kv_cache.enable_prefix_caching"]["value"] is True
    assert src["kv_cache.enable_prefix_caching"]["source"].startswith("vLLM 0.15 default")
    rows = pd.read_csv(out / "stage_errors.csv")
    # 2 stages x (5 latency metrics x 4 statistics + 2 counts + 2 throughputs)
    assert len(rows) == 2 * (5 * 4 + 4)
    assert set(rows["metric"]) == {"ttft", "tpot", "tpot_per_token", "itl", "e2e", "counts",
                                   "throughput"}
    md = (out / "report.md").read_text()
    assert "## Per stage" in md and "## Errors" not in md
    assert not (out / "request_scatter.png").exists()   # nothing per request to plot


def test_replay_is_deterministic_and_names_the_missing_version(tmp_path):
    run = write_ip_run(tmp_path)
    sets = [x for s in CONST for x in ("--set", s)]
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert main(["validate", "--recorded", str(run), "-o", str(out), "-q", *sets]) == 0
    for f in ("validation.json", "stage_errors.csv", "report.md"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    v = json.loads((a / "validation.json").read_text())
    src = {r["key"]: r["source"] for r in v["settings"]}
    assert "the inference-perf folder names no vLLM version; pass --engine-version" in \
        src["kv_cache.enable_prefix_caching"]


def _line_times(first: float, n: int) -> np.ndarray:
    """inference-perf's timestamps of a streamed request whose n tokens come 10 ms apart:
    each SSE data line and its blank line, then ``data: [DONE]`` and its blank line."""
    tok = first + STEP_S * np.arange(n)
    return np.concatenate((np.repeat(tok, 2), [tok[-1], tok[-1]]))


def _stage_doc(rows: pd.DataFrame, orig: dict) -> dict:
    """A stage file computed from per-request times as ``reportgen/base.py`` does."""
    lines = [_line_times(f, int(n)) for f, n in zip(rows["first"], rows["n"])]
    start, end = rows["arrival"].to_numpy(), np.array([x[-1] for x in lines])
    doc = json.loads(json.dumps(orig))
    lat = doc["successes"]["latency"]
    e2e = ip_summary(end - start)
    e2e["max"] = orig["successes"]["latency"]["request_latency"]["max"]  # same stage offsets
    lat["request_latency"] = e2e
    lat["time_to_first_token"] = ip_summary([x[0] for x in lines] - start)
    lat["time_per_output_token"] = ip_summary([(x[-1] - x[0]) / (len(x) - 1) for x in lines])
    lat["inter_token_latency"] = ip_summary(np.concatenate([np.diff(x) for x in lines]))
    span = end.max() - start.min()
    doc["successes"]["throughput"]["requests_per_sec"] = len(rows) / span
    return doc


def test_record_of_the_simulators_own_output_has_zero_error(tmp_path):
    run = write_ip_run(tmp_path)
    rv = _val(run, *CONST)
    sim = rv.client_requests.set_index("request_id").sort_index()
    n = sim["num_emitted_tokens"].to_numpy()
    first, fin = sim["first_token_time_s"].to_numpy(), sim["finish_time_s"].to_numpy()
    assert (n == 8).all() and (sim["status"] == "completed").all()
    assert np.allclose(fin, first + STEP_S * (n - 1), atol=1e-9)   # tokens 10 ms apart
    df = pd.DataFrame({"arrival": [s.arrival_time_s for s in rv.specs], "first": first, "n": n,
                       "stage": rv.run.outcomes["stage"].to_numpy()})
    for k in (0, 1):
        q = run / "results" / f"stage_{k}_lifecycle_metrics.json"
        q.write_text(json.dumps(_stage_doc(df[df["stage"] == k],
                                           json.loads(q.read_text()))))
    again = _val(run, *CONST)
    assert [s.arrival_time_s for s in again.specs] == [s.arrival_time_s for s in rv.specs]
    for st in again.validation["stages"]:
        for m, errs in st["pct_error"].items():
            for stat, e in errs.items():
                if m == "itl" and stat == "p50":
                    assert e is None and "itl.p50" in st["not_compared"]  # the zero gaps
                    continue
                assert e == pytest.approx(0.0, abs=1e-6), (st["name"], m, stat)
        assert st["counts"]["pct_error"]["success"] == 0.0
        assert st["throughput"]["pct_error"]["requests_per_s"] == pytest.approx(0.0, abs=1e-9)


def _api_profile(tmp_path, per_request_s=0.005, per_output_token_s=0.001):
    p = tmp_path / f"api-{per_request_s}-{per_output_token_s}.yaml"
    p.write_text(f"""name: test-api
engine: vllm
api_server:
  per_request_s: {{value: {per_request_s}, source: test value}}
  per_output_token_s: {{value: {per_output_token_s}, source: test value}}
""")
    return p


def test_api_server_terms_shift_client_side_latencies_exactly(tmp_path):
    """With 5 ms per request and 1 ms per streamed token (n = 8 tokens): TTFT + 5 ms, E2E +
    5 + 7 ms, inference-perf's TPOT + 7 ms / 17 lines, TPOT per token + 1 ms; the engine's
    own schedule is unchanged."""
    run = write_ip_run(tmp_path)
    base = _val(run, "perf.source=constant", f"perf.constant.step_s={STEP_S}",
                f"perf.engine={_api_profile(tmp_path, 0.0, 0.0)}")
    api = _val(run, "perf.source=constant", f"perf.constant.step_s={STEP_S}",
               f"perf.engine={_api_profile(tmp_path)}")
    assert api.validation["api_server"]["per_request_s"] == 0.005
    pd.testing.assert_frame_equal(base.result.requests, api.result.requests)
    for b, a in zip(base.validation["stages"], api.validation["stages"]):
        sb, sa = b["simulated"], a["simulated"]
        assert sa["ttft"]["mean"] - sb["ttft"]["mean"] == pytest.approx(0.005, abs=1e-12)
        assert sa["e2e"]["mean"] - sb["e2e"]["mean"] == pytest.approx(0.012, abs=1e-12)
        assert sa["tpot"]["mean"] - sb["tpot"]["mean"] == pytest.approx(0.007 / 17, abs=1e-12)
        assert sa["tpot_per_token"]["p90"] - sb["tpot_per_token"]["p90"] == \
            pytest.approx(0.001, abs=1e-12)
        assert sa["itl"]["mean"] - sb["itl"]["mean"] == pytest.approx(0.007 / 17, abs=1e-12)


def test_api_server_terms_never_touch_engine_side_records(tmp_path):
    """The same profile on a vLLM RequestStateStats record (the engine's own timestamps):
    not applied, the simulated latencies are the engine's."""
    from record_factories import base_meta, synthetic_stats_rows
    meta = base_meta(model="servesim-tiny-llama", max_num_seqs=8, max_num_batched_tokens=256)
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    rec = write_vllm_run(tmp_path / "rec", synthetic_stats_rows(12), meta)
    sets = ["perf.source=constant", f"perf.constant.step_s={STEP_S}"]
    base = _val(rec, *sets, f"perf.engine={_api_profile(tmp_path, 0.0, 0.0)}")
    api = _val(rec, *sets, f"perf.engine={_api_profile(tmp_path)}")
    assert api.validation["api_server"]["applied"] is False
    assert api.validation["api_server"]["per_request_s"] == 0.0
    assert api.validation["metrics"]["ttft"]["sim"] == base.validation["metrics"]["ttft"]["sim"]
    assert api.validation["stages"][0]["simulated"] == base.validation["stages"][0]["simulated"]


def test_stage_token_gaps_are_the_recorders_samples(tmp_path):
    """Without preemption the gaps rebuilt from the step table are exactly the engine
    recorder's ITL samples (varying step times: 2 ms + 0.1 ms per token)."""
    run = write_ip_run(tmp_path)
    rv = _val(run, "perf.source=constant", "perf.constant.step_s=0.002",
              "perf.constant.per_token_s=0.0001", "perf.engine=none")
    res = rv.result
    req = res.requests.set_index("request_id").sort_index().reset_index()
    assert (req["num_preemptions"] == 0).all()
    ok = (req["status"] == "completed").to_numpy()
    vals, ws = stage_token_gaps(req, res.steps, np.zeros(len(req), dtype=np.int64), ok, 1)[0]
    assert ws.sum() == pytest.approx(float((req["num_emitted_tokens"] - 1).sum()))
    assert latency_stats(vals, ws) == pytest.approx(latency_stats(res.itl_values_s,
                                                                  res.itl_weights))
    # per stage the two stages' gaps add up to the whole run's
    two = stage_token_gaps(req, res.steps, rv.run.outcomes["stage"].to_numpy(), ok, 2)
    assert sum(w.sum() for _, w in two) == pytest.approx(ws.sum())


def test_expanded_percentiles_match_numpy_on_the_repeated_sample():
    rng = np.random.default_rng(5)
    v = rng.random(40)
    w = rng.integers(0, 6, 40)
    w[0] = 3
    rep = np.repeat(v, w)
    qs = [0, 1, 10, 50, 50.2, 90, 99, 100]
    assert expanded_percentiles(v, w, qs) == pytest.approx(list(np.percentile(rep, qs)))


def test_overload_stage_counts_client_timeouts(tmp_path):
    """A stage the engine cannot serve in time: requests unanswered 300-301 s after they were
    sent are failures (cancelled while queued, or finished too late); every request is
    accounted for."""
    run = write_ip_run(tmp_path)
    rv = _val(run, "perf.source=constant", "perf.constant.step_s=20.0", "perf.engine=none",
              "scheduler.max_num_seqs=1")
    for s in rv.validation["stages"]:
        c = s["counts"]["simulated"]
        assert c["success"] + c["failure"] == s["num_requests"]
        assert c["failure"] == c["cancelled"] + c["completed_after_timeout"] + c["rejected"] \
            + c["unfinished"]
    total = sum(s["counts"]["simulated"]["failure"] for s in rv.validation["stages"])
    # 8 tokens x 20 s = 160 s per request, one at a time: only the first ones make 300 s
    assert total >= 25


def test_inference_perf_folders_are_read():
    """Every recorded H100 folder is read: one stage per stage file, the stage's recorded
    request count rebuilt, outputs pinned to output_len, the GPU from the datasheet."""
    if not IP_RUNS:
        pytest.skip("shared/reference/groundtruth/inference-perf-h100 not available")
    from simulator.observe import read_recorded
    for name in IP_RUNS:
        r = read_recorded(IP_H100 / name)
        files = sorted((IP_H100 / name / "results").glob("stage_*_lifecycle_metrics.json"))
        assert len(r.stages) == len(files), name
        for st, f in zip(r.stages, files):
            assert st.num_requests == json.loads(f.read_text())["load_summary"]["count"]
        assert len(r.specs) == sum(s.num_requests for s in r.stages)
        assert len({s.num_output_tokens for s in r.specs}) == 1
        assert r.settings["device_name"].value == "H100 SXM"


@pytest.mark.slow
@pytest.mark.parametrize("name", IP_RUNS or ["(none)"])
def test_inference_perf_folders_replay(name, tmp_path):
    """Each recorded H100 folder replays end to end (5-15 s each) and accounts for every
    request in every stage; no assertion on the size of the errors."""
    if not IP_RUNS:
        pytest.skip("shared/reference/groundtruth/inference-perf-h100 not available")
    out = tmp_path / "o"
    assert main(["validate", "--recorded", str(IP_H100 / name), "-o", str(out), "-q",
                 "--no-figures", "--engine-version", "0.15.1"]) == 0
    v = json.loads((out / "validation.json").read_text())
    for s in v["stages"]:
        c = s["counts"]["simulated"]
        assert c["success"] + c["failure"] == s["num_requests"]
        assert s["pct_error"]["e2e"]["mean"] is None or np.isfinite(s["pct_error"]["e2e"]["mean"])
