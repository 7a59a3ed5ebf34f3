"""Inputs a fresh-clone review found accepted with nonsense results or a traceback (session
10): each is now one line, exit 2, naming what to fix."""
from __future__ import annotations

import json
import shutil

import pytest
from record_factories import base_meta, synthetic_stats_rows, write_vllm_run

from simulator.catalog.hardware import get_gpu, load_gpu_spec
from simulator.catalog.model_config import load_hf_config
from simulator.cli.kv import kv_estimate
from simulator.cli.main import main
from simulator.workload.config import ArrivalConfig


def _err(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_gpu_spec_with_a_non_finite_number_is_refused(tmp_path, value):
    src = get_gpu("h100-sxm").profile_dir / "spec.yaml"
    text = src.read_text().replace("hbm_bandwidth_bytes_per_s: 3.35e12",
                                   f"hbm_bandwidth_bytes_per_s: {value}")
    assert text != src.read_text()
    p = tmp_path / "g.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=r"g.yaml: hbm_bandwidth_bytes_per_s=.* must be a "
                                         r"finite number"):
        load_gpu_spec(p)


def test_a_gpu_spec_bool_is_not_a_number(tmp_path):
    src = get_gpu("h100-sxm").profile_dir / "spec.yaml"
    p = tmp_path / "g.yaml"
    p.write_text(src.read_text().replace("bf16_flops_per_s: 989.4e12", "bf16_flops_per_s: true"))
    with pytest.raises(ValueError, match=r"bf16_flops_per_s=True is not a number"):
        load_gpu_spec(p)


def test_the_shipped_specs_still_load_with_yaml_11_exponents():
    # 3.35e12 (no dot before the exponent sign) is text to YAML 1.1: still read as a number
    assert get_gpu("h100-sxm").hbm_bandwidth_bytes_per_s == 3.35e12


def test_validate_refuses_a_workload_override(tmp_path, capsys):
    folder = write_vllm_run(tmp_path / "rec", synthetic_stats_rows(4), base_meta())
    rc = main(["validate", "--recorded", str(folder), "--gpu", "h100-sxm",
               "--set", "workload.rate_scale=2", "-o", str(tmp_path / "o"), "-q"])
    assert rc == 2
    (line,) = _err(capsys)
    assert line.startswith("servesim: error: ") and "--set workload.rate_scale=2" in line
    assert "workload.* cannot be overridden" in line


@pytest.mark.parametrize("cv", [1e-300, 1e200])
def test_a_gamma_cv_whose_square_is_not_a_float_is_refused(cv):
    with pytest.raises(ValueError, match=r"cv=.* is out of the range a gamma process"):
        ArrivalConfig(process="gamma", rate_rps=5.0, cv=cv)
    # a small but drawable cv stays accepted (near-deterministic arrivals)
    assert ArrivalConfig(process="gamma", rate_rps=5.0, cv=1e-6).cv == 1e-6


@pytest.mark.parametrize(("kw", "msg"), [
    ({"max_num_batched_tokens": -100_000_000}, "max_num_batched_tokens must be >= 1"),
    ({"max_num_batched_tokens": 0}, "max_num_batched_tokens must be >= 1"),
    ({"context": 99_999_999_999_999}, "context must be <= 2,147,483,647"),
])
def test_kv_estimate_refuses_sizes_out_of_range(kw, msg):
    args = {"model": "llama-3.1-8b", "batch": 1, "context": 10, **kw}
    with pytest.raises(ValueError, match=msg):
        kv_estimate(**args)


def test_compare_refuses_zero_jobs_before_running(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["compare", "default", "--vary", "scheduler.max_num_seqs=8,16", "-j", "0",
                 "-o", str(out)]) == 2
    assert _err(capsys) == ["servesim: error: --jobs must be >= 1, got 0"]
    assert not out.exists()


@pytest.mark.parametrize("field", ["hidden_size", "num_attention_heads", "vocab_size",
                                   "num_key_value_heads", "max_position_embeddings"])
def test_a_model_config_with_a_text_number_is_refused(tmp_path, field):
    cfg = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
           "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2,
           "vocab_size": 1000, "max_position_embeddings": 2048}
    assert load_hf_config(_write(tmp_path, cfg)).hidden_size == 512
    cfg[field] = str(cfg[field])
    with pytest.raises(ValueError, match=rf"bad value in Hugging Face config: {field}="
                                         rf"'\d+' is not an integer"):
        load_hf_config(_write(tmp_path, cfg))


def _write(tmp_path, cfg: dict):
    p = tmp_path / "m" / "config.json"
    shutil.rmtree(p.parent, ignore_errors=True)
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(cfg))
    return p


def test_a_bad_sweep_point_names_the_sweep_file(tmp_path, capsys):
    from helpers import REPO_ROOT
    p = tmp_path / "sw.yaml"
    p.write_text(f"base: {REPO_ROOT / 'scenarios' / 'default.yaml'}\n"
                 "grid: {scheduler.max_num_seqs: [0, 8]}\n")
    assert main(["sweep", str(p), "-q", "-o", str(tmp_path / "o")]) == 2
    (line,) = _err(capsys)
    assert line.startswith(f"servesim: error: {p}: sweep point 0 (seqs=0): "
                           "scheduler.max_num_seqs: ")


@pytest.mark.parametrize(("sets", "msg"), [
    (["--set", "workload.parallel_sampling.n=2"],
     "workload.parallel_sampling.n=2: parallel sampling is modelled for continuous batching "
     "without speculative decoding"),
    (["--set", "workload.parallel_sampling.n=2", "--set", "scheduler.policy=static"],
     "workload.parallel_sampling.n=2: parallel sampling is modelled for continuous batching"),
])
def test_a_config_level_n_the_scheduler_cannot_run_is_refused_up_front(tmp_path, capsys, sets,
                                                                       msg):
    # before: exit 0 and every request rejected (parallel_sampling_unsupported)
    scen = "spec_mixed_slices" if "static" not in " ".join(sets) else "default"
    assert main(["run", scen, "-q", "--no-figures", "-o", str(tmp_path / "o"), *sets]) == 2
    (line,) = _err(capsys)
    assert msg in line


def test_n_above_max_num_seqs_is_refused_up_front(tmp_path, capsys):
    assert main(["run", "default", "-q", "--no-figures", "-o", str(tmp_path / "o"),
                 "--set", "workload.parallel_sampling.n=300"]) == 2
    (line,) = _err(capsys)
    assert "workload.parallel_sampling.n=300 exceeds scheduler.max_num_seqs 256" in line
