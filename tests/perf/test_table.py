"""Measured-table performance model (simulator/perf/tables/flat_profile.py); needs no torch.

Tables here are synthetic with known answers: generated from the datasheet roofline of the
same spec divided by a known efficiency, so the expected time at any size is
``roofline(size) / efficiency`` by construction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from simulator.catalog.hardware import load_gpu_spec
from simulator.catalog.models import ModelSpec
from simulator.perf import build_perf_model
from simulator.perf.roofline import RooflinePerfModel
from simulator.perf.step_shape import StepShape
from simulator.perf.tables.flat_profile import (
    EfficiencyCurve,
    EfficiencyGrid,
    TablePerfModel,
    fit_cpu_overhead,
    load_table_perf_model,
    shard_shapes,
)

MODEL = ModelSpec("toy", None, num_layers=4, hidden_size=256, num_attention_heads=4,
                  num_kv_heads=2, head_dim=64, intermediate_size=768, vocab_size=4096,
                  max_position_embeddings=4096)
OTHER = ModelSpec("other", None, num_layers=2, hidden_size=512, num_attention_heads=8,
                  num_kv_heads=8, head_dim=64, intermediate_size=1024, vocab_size=4096,
                  max_position_embeddings=4096)
M_GRID = [1, 2, 4, 8, 16, 32, 63, 64, 65, 128, 256]
Q_GRID = [1, 8, 64, 128, 256]
S_GRID = [0, 64, 256, 1024]
B_GRID = [1, 2, 4, 8, 16]
C_GRID = [16, 128, 512, 1024]
BYTES_GRID = [2048, 65536, 1 << 20, 1 << 24]
SPEC = {"name": "toy-gpu", "bf16_flops_per_s": 1.0e14, "hbm_bytes": 4.0e10,
        "hbm_bandwidth_bytes_per_s": 1.0e12, "interconnect_bandwidth_bytes_per_s": 1.0e11}


def _meas(t: float) -> dict:
    return {"dtype": "bf16", "median_s": t, "p25_s": t, "p75_s": t, "iqr_rel": 0.0,
            "noisy": False, "num_samples": 3, "samples_s": f"{t:.6g} {t:.6g} {t:.6g}"}


def write_profile(folder, model=MODEL, tp=1, eff=0.5, skip=(), prov=None, cpu=None,
                  dtype="bf16"):
    """A profile folder whose tables are ``roofline / eff`` at the grid points."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    (folder / "provenance.yaml").write_text(yaml.safe_dump(
        prov or {"device_name": "Toy GPU", "date": "2026-01-02T03:04:05", "dtype": dtype}))
    gpu = load_gpu_spec(folder)
    r = RooflinePerfModel(model, gpu, tp)
    sh = shard_shapes(model, tp)
    e = (lambda *a: eff) if not callable(eff) else eff
    akey = {"q_heads": sh["q_heads"], "kv_heads": sh["kv_heads"], "head_dim": sh["head_dim"]}
    tables = {
        "gemm": [{"op": op, "k": k, "n": n, "m": m, **_meas(r.gemm_time(op, m) / e("gemm", m))}
                 for op, (k, n) in sh["gemms"].items() for m in M_GRID],
        "attention_prefill": [{**akey, "q": q, "start": s,
                               **_meas(r.attn_prefill_time(q, s) / e("prefill", q))}
                              for q in Q_GRID for s in S_GRID],
        "attention_decode": [{**akey, "batch": b, "ctx_mean": c, "ctx_total": b * c,
                              "ctx_max": c, "dist": "uniform",
                              **_meas(float(r.attn_decode_time(b, b * c)) / e("decode", b))}
                             for b in B_GRID for c in C_GRID],
        "elementwise": [{"hidden": sh["hidden"], "intermediate": sh["intermediate"], **akey,
                         "tokens": m, **_meas(r.elementwise_time(m) / e("ew", m))}
                        for m in M_GRID],
        "lm_head": [{"hidden": sh["hidden"], "vocab": sh["vocab"], "rows": m,
                     **_meas(r.lm_head_time(m) / e("lm", m))} for m in M_GRID[:6]],
        "all_reduce": [{"num_gpus": 2, "bytes": b, **_meas(
            RooflinePerfModel(model, gpu, 2).all_reduce_time(b / (model.hidden_size * 2))
            / e("ar", b))} for b in BYTES_GRID],
    }
    for name, rows in tables.items():
        if name in skip:
            continue
        df = pd.DataFrame(rows)
        df["dtype"] = dtype
        df.to_csv(folder / f"{name}.csv", index=False)
    if cpu is not None:
        pd.DataFrame(cpu).to_csv(folder / "cpu_overhead.csv", index=False)
    return gpu


def _load(folder, model=MODEL, tp=1, **kw):
    return load_table_perf_model(model, load_gpu_spec(folder), tp, "bf16", "bf16", **kw)


# ---------------------------------------------------------------------- efficiency held
def test_efficiency_half_everywhere_including_beyond_the_grid(tmp_path):
    write_profile(tmp_path)
    m = _load(tmp_path)
    assert isinstance(m, TablePerfModel) and m.kind == "table"
    R = RooflinePerfModel(MODEL, m.gpu, 1)
    for op in R.gemms:
        for t in [1, 3, 64, 100, 256, 257, 1000, 8192, 100000]:  # inside, between, beyond
            assert m.gemm_time(op, t) / R.gemm_time(op, t) == pytest.approx(2.0, rel=1e-9)
    for q, s in [(1, 0), (5, 30), (128, 64), (300, 0), (2000, 5000), (1, 100000)]:
        assert m.attn_prefill_time(q, s) / R.attn_prefill_time(q, s) == pytest.approx(2.0)
    for b, ctx in [(1, 16), (3, 900), (16, 16 * 1024), (64, 64 * 4000), (1, 1)]:
        assert m.attn_decode_time(b, ctx) / float(R.attn_decode_time(b, ctx)) == \
            pytest.approx(2.0)
    for t in [1, 7, 256, 5000]:
        assert m.elementwise_time(t) / R.elementwise_time(t) == pytest.approx(2.0)
        assert m.lm_head_time(t) / R.lm_head_time(t) == pytest.approx(2.0)
    m2 = _load(tmp_path, tp=1)
    assert m2.all_reduce_time(100) == 0.0  # TP = 1


def test_all_reduce_table_at_tp2(tmp_path):
    write_profile(tmp_path, tp=2)
    m = _load(tmp_path, tp=2)
    R = RooflinePerfModel(MODEL, m.gpu, 2)
    for t in [1, 10, 1000, 10 ** 6]:
        assert m.all_reduce_time(t) / R.all_reduce_time(t) == pytest.approx(2.0)
    assert m.provenance()["all_reduce"].startswith("measured (Toy GPU, 2026-01-02)")


def test_vectorised_decode_matches_scalar(tmp_path):
    write_profile(tmp_path, eff=lambda kind, x: 0.3 + 0.1 * np.log2(1 + x) / 10)
    m = _load(tmp_path)
    ctx = np.array([5, 100, 2000, 16000, 10 ** 6])
    for b in [1, 3, 8, 40]:
        vec = m.attn_decode_time(b, ctx * b)
        assert vec.shape == ctx.shape
        for i, c in enumerate(ctx):
            assert vec[i] == pytest.approx(m.attn_decode_time(b, int(c * b)), rel=1e-12)
        steps = m.decode_step_times(b, ctx * b)
        for i, c in enumerate(ctx):
            shape = StepShape(num_decode=b, decode_ctx_total=int(c * b), num_sampled=b)
            assert steps[i] == pytest.approx(m.step_time(shape), rel=1e-12)


# ---------------------------------------------------------------------- interpolation
def test_efficiency_interpolates_linearly_in_log2_size():
    c = EfficiencyCurve([1, 3, 15], [0.2, 0.6, 0.4])  # u = log2(1+x) = 1, 2, 4
    assert c(1) == pytest.approx(0.2) and c(3) == pytest.approx(0.6)
    assert c(2 ** 1.5 - 1) == pytest.approx(0.4)      # halfway between u = 1 and 2
    assert c(2 ** 3 - 1) == pytest.approx(0.5)         # halfway between u = 2 and 4
    assert c(0) == pytest.approx(0.2) and c(1e9) == pytest.approx(0.4)  # held at the edges


def test_duplicate_grid_points_are_averaged():
    c = EfficiencyCurve([4, 4, 8], [0.2, 0.4, 0.5])
    assert c(4) == pytest.approx(0.3)


def test_grid_bilinear_and_nearest_fill():
    g = EfficiencyGrid([1, 1, 3, 3], [0, 3, 0, 3], [0.2, 0.4, 0.6, 0.8])  # u: 1..2 x 0..2
    assert g(1, 0) == pytest.approx(0.2)
    assert g(3, 3) == pytest.approx(0.8)
    assert g(2 ** 1.5 - 1, 1) == pytest.approx(0.5)  # centre: mean of the four
    assert g(100, 100) == pytest.approx(0.8)  # clipped to the corner
    gm = EfficiencyGrid([1, 1, 3], [0, 3, 0], [0.2, 0.4, 0.6])  # (3, 3) missing
    assert np.isfinite(gm(3, 3)) and gm(3, 3) in (pytest.approx(0.4), pytest.approx(0.6))


def test_efficiency_between_grid_points_is_between_neighbours(tmp_path):
    write_profile(tmp_path, eff=lambda kind, x: min(0.9, 0.1 + 0.1 * np.log2(1 + x)))
    m = _load(tmp_path)
    R = RooflinePerfModel(MODEL, m.gpu, 1)
    for op in m.gemms:
        lo, hi = R.gemm_time(op, 65) / m.gemm_time(op, 65), R.gemm_time(op, 128) / m.gemm_time(op, 128)
        for t in range(66, 128):
            e = R.gemm_time(op, t) / m.gemm_time(op, t)
            assert min(lo, hi) - 1e-12 <= e <= max(lo, hi) + 1e-12


# ---------------------------------------------------------------------- provenance, fallback
def test_provenance_measured_and_fallbacks(tmp_path):
    write_profile(tmp_path, skip=("lm_head", "attention_prefill"))
    m = _load(tmp_path)
    p = m.provenance()
    assert p["gemm"] == "measured (Toy GPU, 2026-01-02)"
    assert p["attention_decode"].startswith("measured") and p["elementwise"].startswith("measured")
    assert p["lm_head"] == "datasheet" and p["attention_prefill"] == "datasheet"
    assert p["all_reduce"] == "none (TP=1)"
    assert "measured" not in p["cpu_overhead"]
    # the fallback is the datasheet roofline for a GPU without fitted.yaml
    R = RooflinePerfModel(MODEL, m.gpu, 1)
    assert m.lm_head_time(7) == pytest.approx(R.lm_head_time(7))
    assert m.attn_prefill_time(100, 10) == pytest.approx(R.attn_prefill_time(100, 10))
    assert m.cpu_overhead_time(5) == pytest.approx(R.cpu_overhead_time(5))


def test_table_equal_to_roofline_gives_roofline_step_times(tmp_path):
    write_profile(tmp_path, eff=1.0)
    m = _load(tmp_path)
    R = RooflinePerfModel(MODEL, m.gpu, 1)
    shapes = [StepShape(prefill_q=[200], prefill_start=[0], num_sampled=1),
              StepShape(prefill_q=[37, 5], prefill_start=[100, 900], num_decode=9,
                        decode_ctx_total=4000, num_sampled=10),
              StepShape(num_decode=16, decode_ctx_total=16 * 700, num_sampled=16)]
    for s in shapes:
        assert m.step_time(s) == pytest.approx(R.step_time(s), rel=1e-9)
        assert m.op_times(s).keys() == R.op_times(s).keys()


def test_cpu_overhead_table_is_fitted_robustly(tmp_path):
    rows = [{"num_layers": 4, "hidden": 256, "num_seqs": s, "num_tokens": t,
             "residual_s": 300e-6 + 20e-6 * s + 1e-6 * t} for s, t in
            [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (1, 200), (4, 250), (8, 100)]]
    rows.append({"num_layers": 4, "hidden": 256, "num_seqs": 3, "num_tokens": 3,
                 "residual_s": 50e-3})  # one step hit by a hiccup
    write_profile(tmp_path, cpu=rows)
    m = _load(tmp_path)
    a, b, c = m.cpu_overhead_params
    assert a == pytest.approx(300e-6, rel=0.05)
    assert b == pytest.approx(20e-6, rel=0.05) and c == pytest.approx(1e-6, rel=0.1)
    assert m.provenance()["cpu_overhead"].startswith("measured (engine step residuals, Toy GPU")
    s = StepShape(prefill_q=[100], prefill_start=[0], num_decode=3, decode_ctx_total=300,
                  num_sampled=4)
    assert m.op_times(s)["cpu_overhead"] == pytest.approx(a + b * 4 + c * 103)


def test_fit_cpu_overhead_degenerate_inputs():
    one = pd.DataFrame({"num_seqs": [2], "num_tokens": [2], "residual_s": [1e-3]})
    assert fit_cpu_overhead(one) == (1e-3, 0.0, 0.0)
    empty = pd.DataFrame({"num_seqs": [], "num_tokens": [], "residual_s": []})
    assert fit_cpu_overhead(empty) == (0.0, 0.0, 0.0)


# ---------------------------------------------------------------------- loading rules
def test_no_tables_or_other_model(tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    assert _load(tmp_path) is None
    with pytest.raises(ValueError, match="no latency tables"):
        _load(tmp_path, required=True)
    write_profile(tmp_path / "p")
    assert _load(tmp_path / "p", model=OTHER) is None
    with pytest.raises(ValueError, match="missing GEMM shapes"):
        _load(tmp_path / "p", model=OTHER, required=True)
    assert _load(tmp_path / "p", tp=2) is None  # other TP shard shapes


def test_dtype_must_match_unless_profile_says_any(tmp_path):
    write_profile(tmp_path / "gpu", dtype="bf16")
    g = load_gpu_spec(tmp_path / "gpu")
    assert load_table_perf_model(MODEL, g, 1, "fp8", "bf16") is None
    assert load_table_perf_model(MODEL, g, 1, "bf16", "bf16") is not None
    write_profile(tmp_path / "cpu", dtype="float32",
                  prov={"device_name": "CPU", "date": "2026-01-01", "dtype_policy": "any"})
    c = load_gpu_spec(tmp_path / "cpu")
    assert load_table_perf_model(MODEL, c, 1, "fp8", "bf16") is not None


def test_bad_table_is_a_one_line_error(tmp_path):
    write_profile(tmp_path)
    (tmp_path / "gemm.csv").write_text("k,n\n1,2\n")
    with pytest.raises(ValueError, match="lacks column"):
        _load(tmp_path)


def test_build_perf_model_sources(tmp_path):
    gpu = write_profile(tmp_path)
    assert build_perf_model(MODEL, gpu, source="auto").kind == "table"
    assert build_perf_model(MODEL, gpu, source="table").kind == "table"
    assert build_perf_model(MODEL, gpu, source="roofline").kind == "roofline"
    assert build_perf_model(OTHER, gpu, source="auto").kind == "roofline"
    with pytest.raises(ValueError):
        build_perf_model(OTHER, gpu, source="table")
