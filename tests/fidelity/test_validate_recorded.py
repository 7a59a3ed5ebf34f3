"""``servesim validate --recorded``: the pipeline end to end on a small synthetic record, and on
each recorded real vLLM run under ``shared/reference/groundtruth`` (skipped when absent).

No assertion on error magnitudes: the step-time model is being rebuilt, and fidelity figures
are measured by ``benchmarks/bench_fidelity.py``. These tests check that the replay accounts
for every request, writes well-formed output with finite values, and names the source of
each setting.
"""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from helpers import REPO_ROOT, SHARED_DIR
from record_factories import base_meta, synthetic_stats_rows, write_vllm_run

from simulator.cli.main import main
from simulator.perf.engine_profile import get_engine_profile

REQUIRED = [f"{m}_{s}_pct_error" for m in ("ttft", "tpot", "e2e") for s in
            ("mean", "p50", "p90", "p99")] + ["makespan_pct_error"]
FILES = ("validation.json", "report.md", "report.html", "request_scatter.png",
         "latency_cdfs.png", "running_waiting.png", "requests_compared.csv", "scenario.yaml",
         "replay_requests.csv", "timeline.csv")


def _small_run(tmp_path, n=24, **meta_kw):
    meta = base_meta(max_num_seqs=16, max_num_batched_tokens=512, **meta_kw)
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    meta["started_at"] = "2026-01-01T00:00:00Z"
    ts = "t,running,waiting,kv_cache_pct\n" + "".join(
        f"{t}.0,{min(t, 5)},0,{10 + t}\n" for t in range(1, 8))
    return write_vllm_run(tmp_path / "rec", synthetic_stats_rows(n), meta, timeseries=ts)


def _load(out):
    return json.loads((out / "validation.json").read_text())


def test_validate_recorded_end_to_end(tmp_path, capsys):
    run = _small_run(tmp_path)
    out = tmp_path / "out"
    rc = main(["validate", "--recorded", str(run), "-o", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "signed % error" in printed and "TTFT" in printed
    for f in FILES:
        assert (out / f).stat().st_size > 0, f
    v = _load(out)
    for k in REQUIRED:
        assert isinstance(v[k], float) and math.isfinite(v[k]), k
    c = v["counts"]
    assert c["num_requests_record"] == c["num_requests_replayed"] == 24
    assert c["num_sim_completed"] + c["num_sim_rejected"] + c["num_sim_cancelled"] \
        + c["num_sim_unfinished"] == 24
    assert c["num_compared"] == c["num_sim_completed"]
    assert v["kind"] == "recorded" and v["run"]["format"] == "vllm_request_stats"
    src = {r["key"]: r for r in v["settings"]}
    assert src["hardware.gpu"]["value"] == "h100-sxm"
    assert "hardware.device_name" in src["hardware.gpu"]["source"]
    assert src["scheduler.max_num_seqs"] == {"key": "scheduler.max_num_seqs", "value": 16,
                                             "source": "meta.json engine_kwargs.max_num_seqs"}
    assert v["provenance"] and v["perf_model"]
    assert v["kv_cache"]["recorded_num_gpu_blocks"] is None
    assert v["kv_cache"]["planner_num_gpu_blocks"] == v["kv_cache"]["num_gpu_blocks"] > 0
    assert v["kv_cache"]["num_gpu_blocks_source"] == "servesim memory planner"
    # the shipped vllm-v1 profile names the recorded runs its fitted constant came from
    assert v["constants_fitted_on"] == list(get_engine_profile("vllm-v1").fitted_on)
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3      # figures embedded
    assert 'src="request_scatter.png"' not in html        # ... not linked
    md = (out / "report.md").read_text()
    assert "## Errors" in md and "## Settings and where they came from" in md
    pair = pd.read_csv(out / "requests_compared.csv")
    assert len(pair) == 24
    done = pair["sim_status"] == "completed"
    assert pair.loc[done, "sim_ttft_s"].notna().all()
    # the plotted samples cover the record's ticks
    tl = pd.read_csv(out / "timeline.csv")
    assert tl["real_num_running"].notna().sum() == 7


def test_nothing_compared_is_an_error_with_the_report_kept(tmp_path, capsys):
    """Every replayed request rejected (a KV cache of one block): before, exit 0 with "0 of 24
    requests compared" and a matplotlib warning; now the report is written and the command
    fails in one line."""
    run = _small_run(tmp_path)
    out = tmp_path / "out"
    rc = main(["validate", "--recorded", str(run), "-o", str(out), "-q",
               "--set", "kv_cache.num_gpu_blocks=2"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err == ("servesim: error: validate --recorded: no request completed in both the "
                   "record and the replay (0 of 24 completed in the simulation): nothing to "
                   f"compare; the report in {out} shows the replay's settings and its "
                   "rejections")
    v = _load(out)
    assert v["counts"]["num_compared"] == 0 and v["counts"]["num_sim_rejected"] == 24


def test_validate_recorded_is_deterministic(tmp_path):
    run = _small_run(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["validate", "--recorded", str(run), "-o", str(a), "-q", "--no-figures"]) == 0
    assert main(["validate", "--recorded", str(run), "-o", str(b), "-q", "--no-figures"]) == 0
    assert (a / "validation.json").read_text() == (b / "validation.json").read_text()
    assert (a / "report.md").read_text() == (b / "report.md").read_text()


def test_flags_override_the_record(tmp_path):
    run = _small_run(tmp_path)
    out = tmp_path / "o"
    rc = main(["validate", "--recorded", str(run / "vllm" / "requests.jsonl"), "-o", str(out),
               "-q", "--no-figures", "--gpu", "a100-sxm-80gb",
               "--set", "scheduler.max_num_seqs=4", "--set", "kv_cache.num_gpu_blocks=3000"])
    assert rc == 0
    v = _load(out)
    src = {r["key"]: r for r in v["settings"]}
    assert (src["hardware.gpu"]["value"], src["hardware.gpu"]["source"]) == \
        ("a100-sxm-80gb", "flag --gpu")
    assert (src["scheduler.max_num_seqs"]["value"], src["scheduler.max_num_seqs"]["source"]) \
        == (4, "flag --set scheduler.max_num_seqs=4")
    assert v["kv_cache"]["num_gpu_blocks"] == 3000
    assert v["kv_cache"]["num_gpu_blocks_source"] == "flag --set kv_cache.num_gpu_blocks=3000"


def test_dp_ep_record_states_the_approximation(tmp_path):
    run = _small_run(tmp_path, model="Qwen/Qwen3-30B-A3B", data_parallel_size=2,
                     enable_expert_parallel=True)
    out = tmp_path / "o"
    assert main(["validate", "--recorded", str(run), "-o", str(out), "-q", "--no-figures"]) == 0
    v = _load(out)
    assert v["scenario"]["cluster"]["num_replicas"] == 2
    assert any("Expert parallelism" in a for a in v["approximations"])
    assert "Expert parallelism" in (out / "report.md").read_text()


def test_bench_json_and_generic_csv_records(tmp_path):
    from record_factories import bench_result
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(bench_result()))
    out = tmp_path / "o1"
    assert main(["validate", "--recorded", str(p), "--gpu", "h100-sxm", "-o", str(out),
                 "-q"]) == 0
    v = _load(out)
    assert v["counts"]["num_requests_record"] == 4 and v["counts"]["num_failed_record"] == 1
    assert v["counts"]["num_requests_replayed"] == 3
    assert v["metrics"]["itl"]["real"]["count"] == 13      # 4 + 9 recorded gaps
    assert v["itl_mean_pct_error"] is not None
    c = tmp_path / "r.csv"
    c.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,100,5,0.5,1.0\n"
                 "0.5,200,8,0.5,2.0\n")
    assert main(["validate", "--recorded", str(c), "--gpu", "h100-sxm", "--model",
                 "llama-3.1-8b", "-o", str(tmp_path / "o2"), "-q", "--no-figures"]) == 0


def test_cli_argument_errors(tmp_path, capsys):
    run = _small_run(tmp_path)
    assert main(["validate", "--recorded", str(run), "--device", "cpu"]) == 2
    assert "--device and --profile belong to --self-check" in capsys.readouterr().err
    assert main(["validate", "--recorded", str(run), "--self-check"]) == 2
    assert main(["validate", "--self-check", "--gpu", "h100-sxm"]) == 2
    assert "needs --recorded RUN" in capsys.readouterr().err
    bare = write_vllm_run(tmp_path / "bare")
    assert main(["validate", "--recorded", str(bare), "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "the record names no GPU; pass --gpu" in err


# ---------------------------------------------------------------------------- recorded runs
GROUNDTRUTH = SHARED_DIR / "reference" / "groundtruth" / "llmservingsim" / "bench" / "examples"
RUNS = ["RTX4090/Llama-3.1-8B", "RTXPRO6000/Llama-3.1-8B", "RTXPRO6000/Qwen3-32B",
        "RTXPRO6000/Qwen3-30B-A3B-Instruct-2507"]
GPU_FIXTURES = REPO_ROOT / "tests" / "fidelity" / "data" / "gpus"


def _gpu_flag(run_dir) -> list[str]:
    """``--gpu`` only while the GPU catalog lacks the record's device (a test-folder spec)."""
    import yaml

    from simulator.observe import read_recorded
    from simulator.observe.settings import gpu_name_matches, match_gpu
    dev = read_recorded(run_dir).setting("device_name")
    if match_gpu(dev) is not None:
        return []
    for p in sorted(GPU_FIXTURES.glob("*.yaml")):
        raw = yaml.safe_load(p.read_text())
        if gpu_name_matches(dev, [raw["name"], *raw.get("aliases", [])]):
            return ["--gpu", str(p)]
    pytest.fail(f"no GPU for {dev!r}")


def _model_flag(run_dir, tmp_path) -> list[str]:
    """Qwen3-30B-A3B: while the model catalog lacks it, its HF config with the MoE expert
    width (``moe_intermediate_size``, what ``ModelSpec.intermediate_size`` means for MoE)."""
    from simulator.catalog.models import get_model
    meta = json.loads((run_dir / "vllm" / "meta.json").read_text())
    try:
        get_model(meta["model"])
        return []
    except ValueError:
        pass
    cfg_path = SHARED_DIR / "reference" / "groundtruth" / "llmservingsim" / "configs" / \
        "model" / f"{meta['model']}.json"
    cfg = json.loads(cfg_path.read_text())
    if "moe_intermediate_size" not in cfg:
        return []                                       # dense: the record's config is read
    cfg["intermediate_size"] = cfg["moe_intermediate_size"]
    p = tmp_path / "moe_config.json"
    p.write_text(json.dumps(cfg))
    return ["--model", str(p)]


@pytest.mark.parametrize("name", RUNS)
def test_recorded_vllm_runs_replay_every_request(name, tmp_path):
    run_dir = GROUNDTRUTH / name
    if not (run_dir / "vllm" / "requests.jsonl").is_file():
        pytest.skip(f"recorded run shared/.../{name} not available")
    out = tmp_path / "out"
    rc = main(["validate", "--recorded", str(run_dir), "-o", str(out), "-q",
               *_gpu_flag(run_dir), *_model_flag(run_dir, tmp_path)])
    assert rc == 0
    v = _load(out)
    c = v["counts"]
    assert c["num_requests_record"] == c["num_requests_replayed"] == 300
    assert c["num_sim_completed"] + c["num_sim_rejected"] + c["num_sim_cancelled"] \
        + c["num_sim_unfinished"] == 300
    pair = pd.read_csv(out / "requests_compared.csv")
    assert len(pair) == 300 and pair["record_request_id"].nunique() == 300
    done = pair["sim_status"] == "completed"
    assert pair.loc[done, "sim_ttft_s"].notna().all()   # a simulated TTFT for every completion
    for k in REQUIRED:
        assert v[k] is None or math.isfinite(v[k]), k
    src = {r["key"]: r["source"] for r in v["settings"]}
    assert src["scheduler.max_num_batched_tokens"].startswith("meta.json")
    assert v["run"]["token_ids_source"] is not None      # prefix ids from the workload file
    assert v["peer"] is not None and v["peer"]["name"] == "LLMServingSim"
    if name.startswith("RTX4090"):
        assert v["kv_cache"]["recorded_num_gpu_blocks"] == 2588 == v["kv_cache"]["num_gpu_blocks"]
        assert v["kv_cache"]["planner_num_gpu_blocks"] > 0
    if "A3B" in name:
        assert any("Expert parallelism" in a for a in v["approximations"])
        assert v["scenario"]["cluster"]["num_replicas"] == 2
    if "32B" in name:
        assert v["scenario"]["cluster"]["tensor_parallel_size"] == 2


def test_recorded_validation_needs_no_torch(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    run = _small_run(tmp_path)
    assert main(["validate", "--recorded", str(run), "-o", str(tmp_path / "o"), "-q",
                 "--no-figures"]) == 0


def test_planner_blocks_are_the_plans_own_count_when_the_record_gives_one(tmp_path):
    """The planner column is servesim's own estimate, not the recorded count echoed back: the
    same record without a block count gives the planner's figure, and with a recorded count of
    1,000 the replay uses 1,000 while the planner column keeps that figure (error vs recorded =
    planner / 1000 - 1)."""
    plain = _small_run(tmp_path / "a")
    main(["validate", "--recorded", str(plain), "-o", str(tmp_path / "oa"), "-q"])
    planned = _load(tmp_path / "oa")["kv_cache"]["planner_num_gpu_blocks"]
    run = _small_run(tmp_path / "b")
    meta_p = run / "vllm" / "meta.json"
    meta = json.loads(meta_p.read_text())
    meta["kv_cache"] = {"num_gpu_blocks": 1000, "block_size": 16}
    meta_p.write_text(json.dumps(meta))
    assert main(["validate", "--recorded", str(run), "-o", str(tmp_path / "ob"), "-q"]) == 0
    kv = _load(tmp_path / "ob")["kv_cache"]
    assert kv["num_gpu_blocks"] == kv["recorded_num_gpu_blocks"] == 1000
    assert kv["planner_num_gpu_blocks"] == planned > 1000     # an 80 GB H100 holds far more
    assert kv["planner_vs_recorded_pct"] == pytest.approx((planned / 1000 - 1) * 100)


def test_unreadable_vllm_version_is_one_line_not_a_guess(tmp_path, capsys):
    run = _small_run(tmp_path)
    meta_p = run / "vllm" / "meta.json"
    meta = json.loads(meta_p.read_text())
    meta["vllm_version"] = "banana"
    meta_p.write_text(json.dumps(meta))
    assert main(["validate", "--recorded", str(run), "-o", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "meta.json vllm_version" in err[0] and "'banana'" in err[0]
    # a flag names the version instead
    assert main(["validate", "--recorded", str(run), "-o", str(tmp_path / "o"), "-q",
                 "--set", "perf.engine_version=0.19.0"]) == 0
