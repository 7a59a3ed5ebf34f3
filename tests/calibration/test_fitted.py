"""Fitted H100/A100 efficiencies (simulator/perf/fitted.py, calibration/fit_vidur.py); no torch.

The shipped ``fitted.yaml`` files must load, drive the perf model, and reproduce the errors they
record against Vidur's public measurements (checked when ``../shared/reference/vidur`` exists).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from helpers import shared_path

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf import build_operator_backend, build_perf_model
from simulator.perf.fitted import FittedPerfModel, gemm_form, load_fitted_profile, smooth_max
from simulator.perf.roofline import RooflinePerfModel
from simulator.perf.step_shape import StepShape

VIDUR_REL = "reference/vidur/data/profiling"


@pytest.fixture
def vidur():
    """The Vidur reference folder (skipped when the shared folder is absent; fails when
    ``$SERVESIM_SHARED`` is set but lacks it)."""
    return shared_path(VIDUR_REL, kind="dir").parents[1]


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-sxm-80gb"])
def test_fitted_profile_loads_and_is_used_by_auto(gpu):
    g = get_gpu(gpu)
    doc = load_fitted_profile(g)
    assert doc is not None and doc["gpu"] == gpu
    assert "Vidur" in doc["source"] and "7d47513" in doc["source"] and "MIT" in doc["source"]
    for op in ("qkv", "o", "up", "down", "any"):
        p = doc["operators"]["gemm"][op]
        assert 0 < p["e_max"] <= 1 and 0 < p["e_mem"] <= 1 and p["t0_c"] > 0
    m = build_operator_backend(get_model("llama-3.1-8b"), g, 1, source="fitted")
    assert isinstance(m, FittedPerfModel) and m.kind == "fitted"
    prov = m.provenance()
    assert prov["gemm"].startswith("fitted (") and prov["elementwise"].startswith("fitted (")
    assert prov["all_reduce"] == "none (TP=1)"
    m2 = build_operator_backend(get_model("llama-3.1-70b"), g, 4, source="fitted")
    assert m2.provenance()["all_reduce"].startswith("fitted (")
    attn = "fitted (" if gpu.startswith("a100") else "datasheet"
    assert m2.provenance()["attention_decode"].startswith(attn)
    assert m2.provenance()["attention_prefill"].startswith(attn)
    # the datasheet roofline stays available, unchanged
    assert type(build_operator_backend(get_model("llama-3.1-8b"), g, 1, source="roofline")) \
        is RooflinePerfModel
    # the step model wraps the backend with the engine profile
    step = build_perf_model(get_model("llama-3.1-8b"), g, 1, source="fitted")
    assert isinstance(step.ops, FittedPerfModel) and step.kind == "fitted"


def test_fitted_model_is_sane_for_models_not_in_the_data():
    g = get_gpu("h100-sxm")
    for name, tp in [("qwen2.5-7b", 1), ("llama-3.1-405b", 8), ("llama-3.2-1b", 1),
                     ("mistral-7b", 2)]:
        m = build_perf_model(get_model(name), g, tp, source="fitted")
        for op in m.ops.gemms:
            ts = [m.ops.gemm_time(op, t) for t in (1, 8, 64, 512, 4096, 32768)]
            assert all(t > 0 and math.isfinite(t) for t in ts)
            assert ts[-1] > ts[0]
        decode = m.decode_step_times(8, np.array([8 * 100, 8 * 2000]))
        assert np.all(np.diff(decode) > 0)
        s = StepShape(prefill_q=[512], prefill_start=[0], num_decode=7, decode_ctx_total=7000,
                      num_sampled=8)
        assert m.step_time(s) > m.step_time(StepShape(num_decode=7, decode_ctx_total=7000,
                                                      num_sampled=7))


def test_fitted_gemm_close_to_datasheet_shape():
    """Within a factor of 2 of the datasheet roofline at every size (a gross-error guard)."""
    g = get_gpu("h100-sxm")
    spec = get_model("llama-3-70b")
    f = build_operator_backend(spec, g, 4, source="fitted")
    r = RooflinePerfModel(spec, g, 4)
    for op in r.gemms:
        for t in (1, 16, 256, 4096):
            assert 0.5 < f.gemm_time(op, t) / r.gemm_time(op, t) < 2.0


def test_smooth_max_bounds():
    a, b = np.array([1.0, 2.0, 0.0]), np.array([1.0, 0.5, 3.0])
    s = smooth_max(a, b, 4.0)
    assert np.all(s >= np.maximum(a, b)) and np.all(s <= a + b + 1e-12)
    assert smooth_max(1e-9, 1e-9, 50.0) == pytest.approx(1e-9 * 2 ** (1 / 50))


@pytest.mark.parametrize("sku", ["a100", "h100"])
def test_recorded_in_sample_errors_reproduce(sku, vidur):
    """Shipped parameters give back the in-sample errors fitted.yaml records (per GEMM op)."""
    from calibration.fit_vidur import GPUS, abs_pct, load_compute
    g = get_gpu(GPUS[sku]["profile"])
    doc = load_fitted_profile(g)
    gemm, _, _ = load_compute(vidur, sku)
    rec = {r["operator"]: r for r in doc["cross_validation"]["table"]}
    for op in ("qkv", "o", "up", "down"):
        d = gemm[gemm.op == op]
        pred = gemm_form(doc["operators"]["gemm"][op], d["m"], d["k"], d["n"],
                         g.bf16_flops_per_s, g.hbm_bandwidth_bytes_per_s, doc["num_sms"])
        med = float(np.median(abs_pct(pred, d["t"])))
        assert med == pytest.approx(rec[f"gemm.{op}"]["in_sample_median_abs_pct"], abs=0.01)
        # the recorded cross-validation error is the honest one, and it is reported
        assert rec[f"gemm.{op}"]["cv_median_abs_pct"] < 10.0


@pytest.mark.slow
def test_recorded_cross_validation_reproduces(tmp_path, vidur):
    from calibration.fit_vidur import fit_gpu
    doc = fit_gpu(vidur, "h100", tmp_path / "none", log=lambda s: None)
    shipped = yaml.safe_load((get_gpu("h100-sxm").profile_dir / "fitted.yaml").read_text())
    a = {r["operator"]: r["cv_median_abs_pct"] for r in doc["cross_validation"]["table"]}
    b = {r["operator"]: r["cv_median_abs_pct"] for r in shipped["cross_validation"]["table"]}
    assert a.keys() == b.keys()
    for k, v in a.items():
        assert v == pytest.approx(b[k], abs=0.3), k


def test_fit_vidur_without_data_exits_2(tmp_path, capsys):
    from calibration.fit_vidur import main
    assert main(["--vidur-dir", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow / invalid-value warnings
@pytest.mark.parametrize(("a", "b", "p"), [
    (2.5e-6, 7.0e-6, 2.7),     # the fitted forms' domain: Python floats, the same bits
    (0.0, 3.0e-5, 11.5),
    (0.0, 0.0, 0.82),
    (1.0, 1.0, 1e-4),          # 2 ** 10,000 overflows: inf, as numpy gives
    (-1.0, 2.0, 1.5),          # outside the domain: NaN, as numpy gives (not a complex)
    (float("nan"), 1.0, 2.0),
])
def test_smooth_max_of_two_floats_is_numpys(a, b, p):
    """Two Python floats take the scalar path; its answer is numpy's, bit for bit, in the
    forms' domain and outside it."""
    want = smooth_max(np.asarray(a), np.asarray(b), p)
    got = smooth_max(a, b, p)
    assert type(got) is not complex
    assert np.float64(got).tobytes() == np.float64(want).tobytes()
