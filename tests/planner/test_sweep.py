from __future__ import annotations

import pandas as pd
import pytest
import yaml
from planner_testlib import comparable, sweep_spec, tiny_scenario

from simulator.cli.main import main
from simulator.experiments.executor import run_tasks
from simulator.planner.sweep import run_sweep


def test_sweep_table_cache_and_files(tmp_path):
    out = tmp_path / "sw"
    res = run_sweep(sweep_spec(), tmp_path, outdir=out)
    t = res.table
    assert res.num_points == 4 and res.num_simulated == 4 and res.num_cached == 0
    assert list(t["status"]) == ["ok"] * 4
    # every input field (dotted) and every summary metric (flattened with _)
    for col in ("hardware.gpu", "scheduler.enable_chunked_prefill", "kv_cache.block_size",
                "slo.ttft_s", "workload.synthetic.num_requests", "ttft_s_p99", "tpot_s_mean",
                "slo_attainment", "by_slice_code_ttft_s_p99", "cost_per_1m_output_tokens_usd",
                "busy_fraction", "label", "point_id"):
        assert col in t.columns, col
    assert list(t["hardware.gpu"]) == ["h100-sxm", "h100-sxm", "a100-sxm-80gb",
                                       "a100-sxm-80gb"]
    pq = pd.read_parquet(out / "sweep.parquet")
    csv = pd.read_csv(out / "sweep.csv")
    assert pq.shape == t.shape == csv.shape
    assert pq["ttft_s_p99"].tolist() == pytest.approx(t["ttft_s_p99"].tolist())

    again = run_sweep(sweep_spec(), tmp_path, outdir=out)
    assert again.num_simulated == 0 and again.num_cached == 4
    assert again.table["cached"].all()
    pd.testing.assert_frame_equal(comparable(again.table), comparable(t))

    # a changed point misses, the others hit
    third = run_sweep(sweep_spec(grid={"hardware.gpu": ["h100-sxm", "h200-sxm"],
                                       "scheduler.enable_chunked_prefill": [True, False]}),
                      tmp_path, outdir=out)
    assert third.num_simulated == 2 and third.num_cached == 2
    # --no-cache re-simulates everything
    fresh = run_sweep(sweep_spec(), tmp_path, outdir=out, use_cache=False, write=False)
    assert fresh.num_simulated == 4


def test_cache_key_follows_the_workload(tmp_path):
    out = tmp_path / "sw"
    run_sweep(sweep_spec(grid={"hardware.gpu": ["h100-sxm"]}), tmp_path, outdir=out)
    base = tiny_scenario(num_requests=80)
    base["workload"]["rate_scale"] = 2.0
    res = run_sweep(sweep_spec(base=base, grid={"hardware.gpu": ["h100-sxm"]}), tmp_path,
                    outdir=out)
    assert res.num_simulated == 1


def test_failed_point_is_reported_not_raised(tmp_path):
    res = run_sweep(sweep_spec(grid={"model": ["llama-3.1-8b", "llama-3.1-405b"]}), tmp_path,
                    outdir=tmp_path / "o")
    assert list(res.table["status"]) == ["ok", "error"]
    assert res.table["error"].iloc[1]
    assert pd.isna(res.table["ttft_s_p99"].iloc[1])


def test_process_pool_equals_in_process(tmp_path):
    a = run_sweep(sweep_spec(), tmp_path, outdir=tmp_path / "a", jobs=1, write=False)
    b = run_sweep(sweep_spec(), tmp_path, outdir=tmp_path / "b", jobs=2, write=False)
    pd.testing.assert_frame_equal(comparable(a.table), comparable(b.table))


def _square(task, shared):
    return task * task + shared["k"]


def test_run_tasks_orders_results_and_reports_progress():
    seen = []
    out = run_tasks(_square, [3, 1, 2], shared={"k": 1}, jobs=2,
                    progress=lambda d, t: seen.append((d, t)))
    assert out == [10, 2, 5] and seen[-1] == (3, 3)
    with pytest.raises(ValueError, match="unknown backend"):
        run_tasks(_square, [1], backend="dask")
    with pytest.raises(ValueError, match="--jobs"):
        run_tasks(_square, [1], jobs=0)
    assert run_tasks(_square, []) == []


def test_cli_sweep(tmp_path, capsys):
    spec = {"name": "cli", "base": tiny_scenario(num_requests=60),
            "grid": {"scheduler.max_num_seqs": [8, 32]}}
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert main(["sweep", str(p), "-j", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 simulated" in text and (out / "sweep.csv").is_file()
    assert main(["sweep", str(p), "-j", "1", "-o", str(out)]) == 0
    assert "0 simulated, 2 from cache" in capsys.readouterr().out


def test_relative_gpu_spec_path_resolves_against_the_sweep_file(tmp_path):
    import shutil

    from simulator.base.resources import data_dir
    (tmp_path / "gpus").mkdir()
    shutil.copy(data_dir("hardware_profiles") / "h100-sxm" / "spec.yaml",
                tmp_path / "gpus" / "my_gpu.yaml")
    res = run_sweep(sweep_spec(grid={"hardware.gpu": ["gpus/my_gpu.yaml"]}), tmp_path,
                    outdir=tmp_path / "o", write=False)
    assert list(res.table["status"]) == ["ok"], res.table["error"].tolist()
    assert res.table["hardware.gpu"].iloc[0] == str((tmp_path / "gpus" / "my_gpu.yaml")
                                                    .resolve())


def test_shipped_default_prices_each_gpu_of_a_sweep_at_its_own_profile_rate(tmp_path):
    """The quick-start scenario no longer pins the H100's $2.99/h: swept over GPUs (as
    scenarios/sweep_default.yaml does), the H200 point costs its profile's rate (before: every
    point $2.99, so the H200's cost per token was understated by a third)."""
    from helpers import REPO_ROOT

    from simulator.planner.spec import SweepSpec
    spec = SweepSpec.model_validate({"name": "price", "base": "default",
                                     "set": {"workload.max_requests": 20},
                                     "grid": {"hardware.gpu": ["h100-sxm", "h200-sxm"]}})
    res = run_sweep(spec, REPO_ROOT / "scenarios", outdir=tmp_path / "o", write=False,
                    use_cache=False)
    want = {g: yaml.safe_load((REPO_ROOT / "hardware_profiles" / g / "spec.yaml").read_text())
            ["usd_per_gpu_hour"] for g in ("h100-sxm", "h200-sxm")}
    assert want == {"h100-sxm": 2.99, "h200-sxm": 4.54}
    got = dict(zip(res.table["hardware.gpu"], res.table["usd_per_gpu_hour"], strict=True))
    assert got == want
