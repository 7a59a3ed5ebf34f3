"""The GPU power model and power caps (simulator/perf/power.py)."""
from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from helpers import REPO_ROOT, make_scenario

from calibration.fit_power import fit
from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.cluster.setup import build_setup
from simulator.perf.power import (
    NoPowerModelError,
    StepWork,
    apply_power_cap,
    cap_slowdown,
    load_power_model,
    step_work,
)
from simulator.perf.roofline import RooflinePerfModel
from simulator.scenario.config import ScenarioError

H100 = get_gpu("h100-sxm")


def test_cap_slowdown_interpolates_the_measured_points():
    pm = load_power_model(H100)
    # Splitwise: 700 W -> 1.0, 350 W -> 1.3 (compute-bound time); linear in watts between
    assert cap_slowdown(pm, 700) == 1.0 and cap_slowdown(pm, 900) == 1.0
    assert cap_slowdown(pm, 350) == pytest.approx(1.3)
    assert cap_slowdown(pm, 525) == pytest.approx(1.15)
    with pytest.raises(ValueError, match="below the lowest measured power limit"):
        cap_slowdown(pm, 200)


def test_cap_stretches_compute_bound_time_and_leaves_memory_bound_time():
    pm = load_power_model(H100)
    model = get_model("llama-3.1-8b")
    capped = apply_power_cap(H100, 525.0, "roofline")
    base, cap = RooflinePerfModel(model, H100), RooflinePerfModel(model, capped)
    ovh = base.params.kernel_overhead_s
    # an 8192-row GEMM is compute bound: its time above the kernel overhead grows by 1.15
    k, n = base.gemms["mlp_down"]
    t0, t1 = base.gemm_kn_time(8192, k, n) - ovh, cap.gemm_kn_time(8192, k, n) - ovh
    assert t1 / t0 == pytest.approx(cap_slowdown(pm, 525.0), rel=1e-12)
    # a one-row GEMM and decode attention are HBM bound: unchanged
    assert cap.gemm_kn_time(1, k, n) == base.gemm_kn_time(1, k, n)
    assert cap.attn_decode_time(64, 64 * 2000) == base.attn_decode_time(64, 64 * 2000)
    assert capped.hbm_bandwidth_bytes_per_s == H100.hbm_bandwidth_bytes_per_s
    # no cap, or a cap at the default limit: the very same GPU (runs stay byte-identical)
    assert apply_power_cap(H100, None, "auto") is H100
    assert apply_power_cap(H100, 700.0, "roofline") is H100


def test_cap_errors_name_the_key():
    with pytest.raises(ValueError, match=r"hardware\.power_cap_w.*measured tables"):
        apply_power_cap(H100, 400.0, "auto")
    with pytest.raises(ValueError, match=r"hardware\.power_cap_w.*above the default"):
        apply_power_cap(H100, 800.0, "roofline")
    with pytest.raises(ValueError, match=r"hardware\.power_cap_w.*no sourced"):
        apply_power_cap(get_gpu("l40s"), 300.0, "roofline")
    with pytest.raises(ValueError, match=r"hardware\.power_cap_w.*below the lowest"):
        build_setup(make_scenario({"hardware": {"power_cap_w": 100}}))
    with pytest.raises(ScenarioError, match=r"hardware\.power_cap_w"):
        make_scenario({"hardware": {"power_cap_w": -5}})
    with pytest.raises(ScenarioError, match=r"cost\.usd_per_kwh"):
        make_scenario({"cost": {"usd_per_kwh": -0.1}})


def test_a_gpu_without_sourced_figures_has_no_model():
    with pytest.raises(NoPowerModelError, match="l40s"):
        load_power_model(get_gpu("l40s"))
    with pytest.raises(NoPowerModelError, match="a100-sxm-80gb.*static_w"):
        load_power_model(get_gpu("a100-sxm-80gb"))



def test_a_shipped_profile_is_named_from_its_folder_in_the_reason(tmp_path, monkeypatch):
    """The reason a run's summary records for a GPU without busy-power figures names a
    shipped profile's file from the profiles folder, whatever folder servesim runs from (the
    summary of the same run is the same in any checkout)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NoPowerModelError) as e:
        load_power_model(get_gpu("a100-sxm-80gb"))
    msg = str(e.value)
    assert "hardware_profiles/a100-sxm-80gb/power.yaml: static_w is not given" in msg
    assert str(REPO_ROOT) not in msg


def test_power_yaml_errors_name_the_file_and_key(tmp_path):
    gpu = replace(H100, profile_dir=tmp_path)
    (tmp_path / "power.yaml").write_text("static_w: 1\ncompute_w: 2\nmemory_w: 3\n"
                                         "limit_w: 4\nwatts: 5\n")
    # a profile of the user's own is named as given (where it is)
    with pytest.raises(ValueError, match=rf"{tmp_path}/power\.yaml: unknown power model key"
                                         r"\(s\) watts"):
        load_power_model(gpu)
    (tmp_path / "power.yaml").write_text("static_w: -1\ncompute_w: 2\nmemory_w: 3\n"
                                         "limit_w: 4\n")
    with pytest.raises(ValueError, match=r"power\.yaml: static_w=-1 must be"):
        load_power_model(gpu)


def test_step_work_by_hand():
    m = get_model("llama-3.1-8b")
    w = StepWork.of(m, 1)
    # 2 prefill chunks of 4 tokens from 0 (10 pairs each) + 3 decode seqs over 30 tokens
    flops, byts = step_work(w, [8], [3], [2], [3], [38])
    pairs = 2 * 4 * 5 / 2 + (38 - 8)
    assert flops[0] == pytest.approx(2 * m.num_params_per_gpu(1) * 11
                                     + 4 * m.head_dim * m.num_attention_heads * m.num_layers
                                     * pairs, rel=1e-12)
    assert byts[0] == m.weight_bytes_per_gpu("bf16", 1) + 38 * m.kv_bytes_per_token("bf16", 1)


def test_shipped_constants_are_the_fit_of_the_published_points():
    r = fit("h100-sxm")
    raw = yaml.safe_load((REPO_ROOT / "hardware_profiles/h100-sxm/power.yaml").read_text())
    for k, v in zip(("static_w", "compute_w", "memory_w"), r["constants"]):
        assert raw[k] == pytest.approx(v, abs=0.05), k
    assert raw["fit"]["prompt_tokens"] == r["prompt_tokens"]
    assert raw["fit"]["mape_pct"] == pytest.approx(r["stats"]["mape"], abs=0.05)
    assert raw["fit"]["num_points"] == r["stats"]["num_points"]
    held = [abs(p / m - 1) * 100 for _b, m, p in r["held_out"]]
    assert raw["fit"]["held_out_mape_pct"] == pytest.approx(sum(held) / len(held), abs=0.05)
