"""Measured kernel tables, format v2 (simulator/perf/tables/sets.py); no torch, no shared data.

Synthetic tables with known answers: every table here is generated as ``roofline / e`` with a
chosen efficiency ``e`` at each grid point, the roofline written out below from its formula
(the datasheet numbers of the toy GPU), so the expected time of any query follows by hand:
at a grid point it is the table value (for another key: that key's bound over the measured
efficiency); between grid points log time is linear in ``log2(size)`` (log efficiency and log
bound both interpolated between the nodes); beyond the grid the edge efficiency is held
against the roofline.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from simulator.catalog.hardware import get_gpu, gpu_catalog, load_gpu_spec
from simulator.perf.tables.sets import (
    TableSet,
    attention_decode_roofline_s,
    attention_prefill_roofline_s,
    collective_roofline_s,
    gemm_roofline_s,
    moe_roofline_s,
    read_table_file,
    select_table_set,
    table_sets,
)

PEAK, PEAK_FP8, BW, LINK, LAT = 1.0e14, 2.0e14, 1.0e12, 1.0e11, 1.0e-6
SPEC = {"name": "toy-gpu", "bf16_flops_per_s": PEAK, "fp8_flops_per_s": PEAK_FP8,
        "hbm_bytes": 4.0e10, "hbm_bandwidth_bytes_per_s": BW,
        "interconnect_bandwidth_bytes_per_s": LINK, "interconnect_latency_s": LAT,
        "interconnect_kind": "nvlink", "p2p": True}


# ---------------------------------------------------------------- hand-written bounds
def gemm_r(m, n, k, wb=2, peak=PEAK):
    return max(2.0 * m * n * k / peak, ((m * k + k * n) * wb + m * n * 2) / BW)


def decode_r(batch, ctx, qh, kvh, d, kvb=2):
    flops = 4.0 * d * qh * ctx * batch
    byts = batch * (ctx * 2 * kvh * d * kvb + 2 * qh * d * 2)
    return max(flops / PEAK, byts / BW)


def prefill_r(q, start, qh, kvh, d, batch=1):
    pairs = q * start + q * (q + 1) / 2
    return max(4.0 * d * qh * pairs * batch / PEAK,
               batch * ((start + q) * 2 * kvh * d * 2 + 2 * q * qh * d * 2) / BW)


def ar_r(nbytes, p):
    return 2 * (p - 1) * LAT + 2 * (p - 1) / p * nbytes / LINK


# ---------------------------------------------------------------- fixtures
def write_set(root, name, tables: dict, prov: dict | None = None, fmt="csv"):
    d = root / "tables" / name
    d.mkdir(parents=True, exist_ok=True)
    engine, _, version = name.partition("-")
    doc = {"kind": "measured", "engine": engine, "engine_version": version,
           "device_name": "Toy GPU", "tables": {}}
    doc.update(prov or {})
    for op, rows in tables.items():
        df = pd.DataFrame(rows)
        if fmt == "parquet":
            df.to_parquet(d / f"{op}.parquet", index=False)
        else:
            df.to_csv(d / f"{op}.csv", index=False)
        doc["tables"].setdefault(op, {"source_project": "synthetic", "commit": "0" * 40,
                                      "file": f"{op}.csv", "engine_version": version,
                                      "device": "Toy GPU"})
    (d / "provenance.yaml").write_text(yaml.safe_dump(doc))
    return d


@pytest.fixture
def profile(tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    return tmp_path


def gemm_rows(eff, ms=(1, 4, 16, 64), nks=((1024, 1024), (2048, 1024)), dtype="bf16", wb=2,
              peak=PEAK):
    return [{"dtype": dtype, "m": m, "n": n, "k": k, "median_s": gemm_r(m, n, k, wb, peak)
             / eff(m, n, k)} for m in ms for n, k in nks]


E_GEMM = {1: 0.10, 4: 0.30, 16: 0.60, 64: 0.80}


def toy_set(profile, **extra):
    tables = {"gemm": gemm_rows(lambda m, n, k: E_GEMM[m])}
    tables.update(extra)
    write_set(profile, "vllm-1.0", tables)
    gpu = load_gpu_spec(profile)
    return TableSet(profile / "tables" / "vllm-1.0", gpu)


# ---------------------------------------------------------------- GEMM: interpolation
def test_gemm_at_grid_points_returns_the_table(profile):
    ts = toy_set(profile)
    for m, e in E_GEMM.items():
        assert ts.gemm(m, 1024, 1024, "bf16") == pytest.approx(gemm_r(m, 1024, 1024) / e,
                                                               rel=1e-12)


def t_gemm(m, n=1024, k=1024):
    """Table time at a GEMM grid node of ``toy_set``."""
    return gemm_r(m, n, k) / E_GEMM[m]


def test_gemm_between_grid_points_is_log_linear(profile):
    ts = toy_set(profile)
    # log e and the log bound are both linear in log2 m between nodes, so log time is: m = 8
    # is halfway (in log2 m) between the nodes 4 and 16, so t(8) is their geometric mean
    assert ts.gemm(8, 1024, 1024) == pytest.approx(math.sqrt(t_gemm(4) * t_gemm(16)), rel=1e-12)
    assert ts.gemm(2, 1024, 1024) == pytest.approx(math.sqrt(t_gemm(1) * t_gemm(4)), rel=1e-12)
    assert ts.gemm(32, 1024, 1024) == pytest.approx(math.sqrt(t_gemm(16) * t_gemm(64)),
                                                    rel=1e-12)
    # a quarter of the way from 4 to 16 in log2 m (m = 4 * 2^0.5)
    m = 4 * 2 ** 0.5
    assert ts.gemm(m, 1024, 1024) == pytest.approx(t_gemm(4) ** 0.75 * t_gemm(16) ** 0.25,
                                                   rel=1e-12)
    # n = 1024 * sqrt 2, halfway between the measured n = 1024 and 2048
    n = 1024 * 2 ** 0.5
    assert ts.gemm(16, n, 1024) == pytest.approx(math.sqrt(t_gemm(16) * t_gemm(16, 2048)),
                                                 rel=1e-12)


def test_gemm_beyond_the_grid_holds_the_edge_efficiency(profile):
    ts = toy_set(profile)
    assert ts.gemm(4096, 1024, 1024) == pytest.approx(gemm_r(4096, 1024, 1024) / 0.80,
                                                      rel=1e-12)
    assert ts.gemm(16, 8192, 4096) == pytest.approx(gemm_r(16, 8192, 4096) / 0.60, rel=1e-12)


def test_gemm_array_query_matches_scalar_queries(profile):
    ts = toy_set(profile)
    m = np.array([1, 3, 8, 50, 64, 500], dtype=float)
    arr = ts.gemm(m, 1024, 1024)
    assert arr.shape == m.shape
    np.testing.assert_allclose(arr, [ts.gemm(float(x), 1024, 1024) for x in m], rtol=1e-12)


def test_fp8_gemm_uses_the_fp8_roofline(profile):
    rows = gemm_rows(lambda m, n, k: E_GEMM[m]) + gemm_rows(
        lambda m, n, k: 0.5, dtype="fp8", wb=1, peak=PEAK_FP8)
    write_set(profile, "vllm-1.0", {"gemm": rows})
    ts = TableSet(profile / "tables" / "vllm-1.0", load_gpu_spec(profile))
    r = [gemm_r(m, 1024, 1024, wb=1, peak=PEAK_FP8) for m in (4, 8, 16)]
    assert ts.gemm(16, 1024, 1024, "fp8") == pytest.approx(r[2] / 0.5, rel=1e-12)
    assert ts.gemm(8, 1024, 1024, "fp8") == pytest.approx(math.sqrt(r[0] * r[2]) / 0.5,
                                                          rel=1e-12)


def test_unmeasured_cell_is_filled_from_its_neighbours(profile):
    # (m=16, n=2048) missing: filled from m=4 and m=64 along m (the only bracketing axis);
    # with one measured cell on each side every fill kind is the chord in u
    rows = [r for r in gemm_rows(lambda m, n, k: E_GEMM[m], ms=(4, 16, 64))
            if not (r["m"] == 16 and r["n"] == 2048)]
    write_set(profile, "vllm-1.0", {"gemm": rows})
    ts = TableSet(profile / "tables" / "vllm-1.0", load_gpu_spec(profile))
    # log2 16 = 4 is halfway between log2 4 = 2 and log2 64 = 6: the cell gets the geometric
    # mean of the neighbours' times, what a query at m = 16 would get without that row
    want = math.sqrt(t_gemm(4, 2048) * t_gemm(64, 2048))
    assert ts.gemm(16, 2048, 1024) == pytest.approx(want, rel=1e-12)


# ---------------------------------------------------------------- attention
def decode_rows(eff, qh=32, kvh=8, d=128, batches=(1, 4), ctxs=(256, 1024), kv="bf16",
                **extra):
    return [{"dtype": "bf16", "kv_dtype": kv, "q_heads": qh, "kv_heads": kvh, "head_dim": d,
             "window": 0, "batch": b, "ctx_mean": c,
             "median_s": decode_r(b, c, qh, kvh, d) / eff(b, c), **extra}
            for b in batches for c in ctxs]


E_DEC = {(1, 256): 0.2, (1, 1024): 0.4, (4, 256): 0.5, (4, 1024): 0.8}


def test_decode_bilinear_in_log_space(profile):
    ts = toy_set(profile, attention_decode=decode_rows(lambda b, c: E_DEC[(b, c)]))
    kw = {"q_heads": 32, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16"}
    assert ts.attention_decode(4, 1024, **kw) == pytest.approx(decode_r(4, 1024, 32, 8, 128)
                                                               / 0.8, rel=1e-12)
    # batch 2, ctx 512: the centre of the cell in (log2 batch, log2 ctx): geometric mean of
    # the four corner times
    t = {bc: decode_r(*bc, 32, 8, 128) / e for bc, e in E_DEC.items()}
    centre = (t[(1, 256)] * t[(1, 1024)] * t[(4, 256)] * t[(4, 1024)]) ** 0.25
    assert ts.attention_decode(2, 512, **kw) == pytest.approx(centre, rel=1e-12)
    arr = ts.attention_decode(2, np.array([512.0, 4096.0]), **kw)
    # ctx 4096 beyond the grid: the time at the edge (2, 1024), scaled by the bound, i.e. the
    # edge efficiency held against the roofline
    edge = math.sqrt(t[(1, 1024)] * t[(4, 1024)])
    far = edge * decode_r(2, 4096, 32, 8, 128) / decode_r(2, 1024, 32, 8, 128)
    np.testing.assert_allclose(arr, [centre, far], rtol=1e-12)
    # the bound is linear in batch, so that is R(2, 4096) / sqrt(e(1, 1024) e(4, 1024))
    assert far == pytest.approx(decode_r(2, 4096, 32, 8, 128) / math.sqrt(0.4 * 0.8), rel=1e-12)


def test_unmeasured_head_layout_uses_nearest_key_and_says_so(profile):
    ts = toy_set(profile, attention_decode=decode_rows(lambda b, c: 0.5))
    kw = {"head_dim": 128, "kv_dtype": "bf16"}
    # 16 query heads / 4 KV heads (TP2 of the measured 32/8): efficiency transferred
    assert ts.attention_decode(4, 1024, q_heads=16, kv_heads=4, **kw) == pytest.approx(
        decode_r(4, 1024, 16, 4, 128) / 0.5, rel=1e-12)
    note = ts.nearest_note("attention_decode", q_heads=16, kv_heads=4, kv_dtype="bf16",
                           head_dim=128)
    assert "kv_heads=4" in note and "q_heads=16" in note and "q_heads=32" in note
    assert ts.nearest_note("attention_decode", q_heads=32, kv_heads=8, head_dim=128,
                           kv_dtype="bf16") == ""


def test_prefill_start_extrapolates_with_held_efficiency(profile):
    rows = [{"dtype": "bf16", "kv_dtype": "bf16", "q_heads": 32, "kv_heads": 8, "head_dim": 128,
             "window": 0, "kernel": "k", "batch": 1, "q": q, "start": 0,
             "median_s": prefill_r(q, 0, 32, 8, 128) / e} for q, e in ((64, 0.2), (1024, 0.6))]
    ts = toy_set(profile, attention_prefill=rows)
    kw = {"q_heads": 32, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16"}
    assert ts.attention_prefill(1024, 0, **kw) == pytest.approx(
        prefill_r(1024, 0, 32, 8, 128) / 0.6, rel=1e-12)
    # start 2048 (only start = 0 measured): efficiency of the q = 1024 row, bound with start
    assert ts.attention_prefill(1024, 2048, **kw) == pytest.approx(
        prefill_r(1024, 2048, 32, 8, 128) / 0.6, rel=1e-12)
    # log2 256 = 8 is halfway between the nodes log2 64 = 6 and log2 1024 = 10
    t64, t1024 = prefill_r(64, 0, 32, 8, 128) / 0.2, prefill_r(1024, 0, 32, 8, 128) / 0.6
    assert ts.attention_prefill(256, 0, **kw) == pytest.approx(math.sqrt(t64 * t1024),
                                                               rel=1e-12)


def test_default_kernel_and_explicit_kernel(profile):
    rows = decode_rows(lambda b, c: 0.5, kernel="fa3") + decode_rows(lambda b, c: 0.25,
                                                                     kernel="fa4")
    write_set(profile, "vllm-1.0", {"attention_decode": rows},
              {"default_kernel": {"attention_decode": "fa3"}})
    ts = TableSet(profile / "tables" / "vllm-1.0", load_gpu_spec(profile))
    kw = {"q_heads": 32, "kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16"}
    r = decode_r(4, 1024, 32, 8, 128)
    assert ts.attention_decode(4, 1024, **kw) == pytest.approx(r / 0.5, rel=1e-12)
    assert ts.attention_decode(4, 1024, kernel="fa4", **kw) == pytest.approx(r / 0.25,
                                                                             rel=1e-12)
    assert ts.has("attention_decode", kernel="fa4") and not ts.has("attention_decode",
                                                                   kernel="fa9")


# ---------------------------------------------------------------- communication, MoE
def test_all_reduce_and_nccl_fp16_rows(profile):
    ar = [{"dtype": "bf16", "backend": "graph", "num_gpus": 2, "bytes": b,
           "median_s": ar_r(b, 2) / e} for b, e in ((1 << 10, 0.1), (1 << 20, 0.4))]
    nccl = [{"op": "all_gather", "dtype": "fp16", "num_gpus": 4, "bytes": b,
             "median_s": (3 * LAT + 0.75 * b / LINK) / 0.5} for b in (1 << 10, 1 << 20)]
    ts = toy_set(profile, all_reduce=ar, nccl=nccl)
    assert ts.all_reduce(1 << 20, 2) == pytest.approx(ar_r(1 << 20, 2) / 0.4, rel=1e-12)
    # 2^15 bytes: halfway in log2 between the nodes 2^10 and 2^20
    assert ts.all_reduce(1 << 15, 2) == pytest.approx(
        math.sqrt(ar_r(1 << 10, 2) / 0.1 * ar_r(1 << 20, 2) / 0.4), rel=1e-12)
    # beyond the grid: edge efficiency held against the bound
    assert ts.all_reduce(1 << 24, 2) == pytest.approx(ar_r(1 << 24, 2) / 0.4, rel=1e-12)
    assert ts.all_reduce(1 << 20, 1) == 0.0
    b = 1 << 20
    assert ts.collective("all_gather", b, 4, "bf16") == pytest.approx((3 * LAT + 0.75 * b / LINK)
                                                                      / 0.5, rel=1e-12)
    assert "fp16" in ts.nearest_note("nccl", collective="all_gather", dtype="bf16", num_gpus=4)
    assert not ts.has("all_reduce", backend="nccl")     # the NCCL table has no all_reduce rows
    assert ts.has("nccl", collective="all_gather") and not ts.has("nccl", collective="alltoall")


def test_moe_token_interpolation_and_nearest_shape(profile):
    def r(t, h=4096, i=14336, topk=2, e=8):
        touched = e * (1 - (1 - topk / e) ** t)
        pairs = t * topk
        return max(6 * h * i * pairs / PEAK,
                   (touched * 3 * h * i * 2 + pairs * (2 * h + 2 * i) * 2) / BW)

    rows = [{"dtype": "bf16", "distribution": "balanced", "kernel": "k", "num_tokens": t,
             "hidden": 4096, "inter": 14336, "topk": 2, "num_experts": 8, "moe_tp": 1,
             "moe_ep": 1, "median_s": r(t) / e} for t, e in ((1, 0.2), (16, 0.6))]
    ts = toy_set(profile, moe=rows)
    kw = {"hidden": 4096, "inter": 14336, "topk": 2, "num_experts": 8}
    assert ts.moe(16, **kw) == pytest.approx(r(16) / 0.6, rel=1e-12)
    assert ts.moe(4, **kw) == pytest.approx(math.sqrt(r(1) / 0.2 * r(16) / 0.6), rel=1e-12)
    # another intermediate size: nearest measured shape, its efficiency, the query's bound
    assert ts.moe(16, hidden=4096, inter=7168, topk=2, num_experts=8) == pytest.approx(
        r(16, i=7168) / 0.6, rel=1e-12)
    assert not ts.has("moe", distribution="power_law_1.2")


# ---------------------------------------------------------------- has / provenance / reuse
def test_has_is_false_for_missing_family_or_dtype(profile):
    ts = toy_set(profile)
    assert ts.has("gemm", dtype="bf16") and not ts.has("gemm", dtype="fp8")
    assert not ts.has("attention_decode") and not ts.has("moe") and not ts.has("nonsense")
    with pytest.raises(ValueError, match="no attention_decode table"):
        ts.attention_decode(1, 10, q_heads=1, kv_heads=1, head_dim=64, kv_dtype="bf16")
    with pytest.raises(ValueError, match="no gemm rows for dtype=fp8"):
        ts.gemm(1, 1024, 1024, "fp8")


def test_reuse_of_points_at_the_donor_set(profile):
    write_set(profile, "vllm-1.0", {"gemm": gemm_rows(lambda m, n, k: E_GEMM[m])})
    d = profile / "tables" / "vllm-1.1"
    d.mkdir(parents=True)
    (d / "provenance.yaml").write_text(yaml.safe_dump({
        "engine": "vllm", "engine_version": "1.1", "device_name": "Toy GPU",
        "tables": {"gemm": {"reuse_of": "vllm-1.0", "reuse_reason": "reuse.yaml"}}}))
    gpu = load_gpu_spec(profile)
    sets = table_sets(gpu)
    assert [s.name for s in sets] == ["vllm-1.1", "vllm-1.0"]   # newest first
    new = select_table_set(gpu)
    assert new.name == "vllm-1.1" and new.has("gemm")
    assert new.gemm(4, 1024, 1024) == pytest.approx(gemm_r(4, 1024, 1024) / 0.30, rel=1e-12)
    prov = new.provenance("gemm")
    assert prov["reuse_of"] == "vllm-1.0" and prov["source_project"] == "synthetic"
    assert "reusing vllm-1.0" in new.label("gemm") and "vLLM 1.1" in new.label("gemm")
    assert select_table_set(gpu, version="1.0").name == "vllm-1.0"
    assert select_table_set(gpu, version="vllm-1.0").name == "vllm-1.0"
    with pytest.raises(ValueError, match=r"no vllm 0\.9 tables; available: 1\.1, 1\.0"):
        select_table_set(gpu, version="0.9")
    assert select_table_set(gpu, engine="sglang") is None


def test_fill_from_adds_only_absent_coordinates(profile):
    write_set(profile, "vllm-2.0", {"gemm": gemm_rows(lambda m, n, k: 0.9) + gemm_rows(
        lambda m, n, k: 0.5, dtype="fp8", wb=1, peak=PEAK_FP8)})
    write_set(profile, "vllm-1.5", {"gemm": gemm_rows(lambda m, n, k: E_GEMM[m])})
    p = profile / "tables" / "vllm-1.5" / "provenance.yaml"
    doc = yaml.safe_load(p.read_text())
    doc["tables"]["gemm"]["fill_from"] = ["vllm-2.0"]
    p.write_text(yaml.safe_dump(doc))
    ts = TableSet(profile / "tables" / "vllm-1.5", load_gpu_spec(profile))
    # native bf16 rows win at their coordinates; fp8 comes from the donor
    assert ts.gemm(4, 1024, 1024) == pytest.approx(gemm_r(4, 1024, 1024) / 0.30, rel=1e-12)
    assert ts.gemm(4, 1024, 1024, "fp8") == pytest.approx(
        gemm_r(4, 1024, 1024, wb=1, peak=PEAK_FP8) / 0.5, rel=1e-12)
    assert "missing shapes from vllm-2.0" in ts.label("gemm")


def test_parquet_and_csv_read_the_same(profile, tmp_path_factory):
    rows = gemm_rows(lambda m, n, k: E_GEMM[m])
    write_set(profile, "vllm-1.0", {"gemm": rows}, fmt="parquet")
    ts = TableSet(profile / "tables" / "vllm-1.0", load_gpu_spec(profile))
    assert ts.gemm(8, 1024, 1024) == pytest.approx(math.sqrt(t_gemm(4) * t_gemm(16)), rel=1e-12)


# ---------------------------------------------------------------- bad input
def test_missing_columns_name_the_file(profile):
    rows = [{"dtype": "bf16", "m": 1, "n": 2, "median_s": 1e-6}]   # no k
    d = write_set(profile, "vllm-1.0", {"gemm": rows})
    with pytest.raises(ValueError) as ei:
        read_table_file(d / "gemm.csv", "gemm")
    msg = str(ei.value)
    assert "gemm.csv" in msg and "lacks column(s) k" in msg and "\n" not in msg
    ts = TableSet(d, load_gpu_spec(profile))
    with pytest.raises(ValueError, match="gemm.csv: latency table lacks"):
        ts.gemm(1, 2, 2)


def test_unreadable_file_names_the_file(profile):
    d = profile / "tables" / "vllm-1.0"
    d.mkdir(parents=True)
    (d / "gemm.parquet").write_bytes(b"not a parquet file at all")
    ts = TableSet(d, load_gpu_spec(profile))
    with pytest.raises(ValueError) as ei:
        ts.has("gemm")
    assert "gemm.parquet: cannot read latency table" in str(ei.value)
    assert "\n" not in str(ei.value)
    (d / "provenance.yaml").write_text("tables: [unclosed")
    with pytest.raises(ValueError, match="provenance.yaml: not valid YAML"):
        TableSet(d, load_gpu_spec(profile))


def test_missing_donor_set_is_reported(profile):
    d = profile / "tables" / "vllm-1.1"
    d.mkdir(parents=True)
    (d / "provenance.yaml").write_text(yaml.safe_dump(
        {"tables": {"gemm": {"reuse_of": "vllm-0.1"}}}))
    ts = TableSet(d, load_gpu_spec(profile))
    assert not ts.has("gemm")
    with pytest.raises(ValueError, match="has no gemm table"):
        ts.gemm(1, 2, 2)


# ---------------------------------------------------------------- roofline bounds by hand
def test_roofline_bounds_by_hand(profile):
    g = load_gpu_spec(profile)
    # memory-bound GEMM: m=8, n=k=1024 -> bytes (8*1024 + 1024*1024)*2 + 8*1024*2 = 2,129,920
    assert gemm_roofline_s(8, 1024, 1024, g) == pytest.approx(2_129_920 / BW)
    # compute-bound GEMM: m=n=k=4096 -> 2 * 4096^3 FLOPs
    assert gemm_roofline_s(4096, 4096, 4096, g) == pytest.approx(2 * 4096 ** 3 / PEAK)
    # decode: 1 x 1000 tokens, 8 KV heads x 128 x 2 (K,V) x 2 bytes + Q/O 32 x 128 x 2 x 2
    assert attention_decode_roofline_s(1, 1000, g, q_heads=32, kv_heads=8, head_dim=128) == \
        pytest.approx((1000 * 4096 + 16384) / BW)
    # window 256: only 256 tokens read
    assert attention_decode_roofline_s(1, 1000, g, q_heads=32, kv_heads=8, head_dim=128,
                                       window=256) == pytest.approx((256 * 4096 + 16384) / BW)
    # prefill, q = 4 after start 2 with window 3: positions 3,4,5,6 attend 3 keys each = 12
    # pairs; FLOPs 4 x 64 x 1 x 12 = 3072; bytes: span min(6, 4 + 2) = 6 tokens x 2 x 64 x 2
    # + Q/O 2 x 4 x 64 x 2 = 1536 + 1024
    t = attention_prefill_roofline_s(4, 2, g, q_heads=1, kv_heads=1, head_dim=64, window=3)
    assert t == pytest.approx(max(3072 / PEAK, 2560 / BW))
    # all-reduce, 4 GPUs: 6 latency steps + 2 * 3/4 * b / link
    assert collective_roofline_s("all_reduce", 1e6, 4, g) == pytest.approx(
        6 * LAT + 1.5e6 / LINK)
    assert collective_roofline_s("alltoall", 1e6, 4, g) == pytest.approx(3 * LAT + 0.75e6 / LINK)
    # MoE, 1 token, top-2 of 8 experts: 2 experts touched (8 x (1 - 6/8)), 2 pairs
    t = moe_roofline_s(1, g, hidden=1024, inter=2048, topk=2, num_experts=8)
    assert t == pytest.approx((2 * 3 * 1024 * 2048 * 2 + 2 * (2 * 1024 + 2 * 2048) * 2) / BW)


# ---------------------------------------------------------------- harness (flat) profile
def test_flat_cpu_profile_is_a_table_set():
    gpu = get_gpu("cpu-amd-epyc-1t")
    sets = table_sets(gpu)
    assert len(sets) == 1
    ts = sets[0]
    assert ts.engine == "harness" and ts.engine_version == "1.0"
    assert {"gemm", "attention_prefill", "attention_decode", "elementwise", "lm_head",
            "cpu_overhead"} <= set(ts.families())
    assert ts.label("gemm") == "measured (AMD EPYC (1 thread), servesim harness 1.0, 2026-11-29)"
    g = pd.read_csv(gpu.profile_dir / "gemm.csv")
    row = g[(g.k == 256) & (g.n == 512) & (g.m == 16)].iloc[0]   # qkv of the tiny model
    assert ts.gemm(16, 512, 256, "bf16") == pytest.approx(row.median_s, rel=1e-9)
    lm = pd.read_csv(gpu.profile_dir / "lm_head.csv").iloc[0]
    assert ts.lm_head(int(lm.rows), hidden=int(lm.hidden), vocab=int(lm.vocab)) == \
        pytest.approx(lm.median_s, rel=1e-9)
    d = pd.read_csv(gpu.profile_dir / "attention_decode.csv")
    d = d[d.dist == "uniform"].iloc[5]     # skewed mixes at the same ctx_mean are not used
    assert ts.attention_decode(int(d.batch), float(d.ctx_mean), q_heads=4, kv_heads=2,
                               head_dim=64, kv_dtype="bf16") == pytest.approx(d.median_s,
                                                                              rel=1e-9)
    a, b, c = ts.cpu_overhead_params(num_layers=4, hidden=256)
    assert a > 0 and b >= 0 and c >= 0


def test_cpu_overhead_line_recovers_an_exact_line(tmp_path):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    rows = [{"num_layers": 2, "hidden": 64, "num_seqs": s, "num_tokens": t,
             "residual_s": 1e-4 + 2e-6 * s + 3e-7 * t, "num_samples": 5}
            for s, t in ((1, 1), (2, 40), (4, 4), (8, 200), (3, 90))]
    pd.DataFrame(rows).to_csv(tmp_path / "cpu_overhead.csv", index=False)
    pd.DataFrame(gemm_rows(lambda m, n, k: 0.5)).to_csv(tmp_path / "gemm.csv", index=False)
    ts = table_sets(load_gpu_spec(tmp_path))[0]
    a, b, c = ts.cpu_overhead_params(num_layers=2, hidden=64)
    assert (a, b, c) == pytest.approx((1e-4, 2e-6, 3e-7), rel=1e-6)
    assert ts.cpu_overhead(10, 100, num_layers=2, hidden=64) == pytest.approx(
        1e-4 + 2e-5 + 3e-5, rel=1e-6)


# ---------------------------------------------------------------- shipped sets
LLAMA8B_TP1 = {"gemms": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
               "q_heads": 32, "kv_heads": 8, "head_dim": 128}
SHIPPED = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s", "rtx-pro-6000-server"]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_set_answers_llama_8b_tp1(name):
    gpu = get_gpu(name)
    sets = [s for s in table_sets(gpu) if s.engine == "vllm"]
    assert sets, name
    kw = {k: LLAMA8B_TP1[k] for k in ("q_heads", "kv_heads", "head_dim")}
    answered = 0
    for ts in sets:
        if ts.has("gemm", dtype="bf16"):
            for n, k in LLAMA8B_TP1["gemms"]:
                for m in (1, 37, 512, 8192):
                    t = ts.gemm(m, n, k, "bf16")
                    assert math.isfinite(t) and t > 0, (ts.name, n, k, m)
            answered += 1
        if ts.has("attention_decode", dtype="bf16", kv_dtype="bf16"):
            t = ts.attention_decode(16, 1000.0, kv_dtype="bf16", **kw)
            assert math.isfinite(t) and t > 0
        if ts.has("attention_prefill", dtype="bf16", kv_dtype="bf16"):
            t = ts.attention_prefill(512, 256, kv_dtype="bf16", **kw)
            assert math.isfinite(t) and t > 0
        if ts.has("all_reduce", backend="graph"):
            assert ts.all_reduce(4096 * 2 * 64, 2) > 0
    assert answered >= 1


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_provenance_names_source_commit_file_version_device(name):
    gpu = get_gpu(name)
    for ts in table_sets(gpu):
        assert ts.meta.get("kind") == "measured" and ts.device_name in gpu.aliases
        for op in ts.families():
            rec = ts.provenance(op)
            for key in ("source_project", "source_url", "commit", "file", "engine_version",
                        "device", "license", "changes", "rows"):
                assert rec.get(key) not in (None, "", []), (ts.name, op, key)
            assert len(rec["commit"]) == 40 and rec["license"] == "Apache-2.0"
            assert rec["file"].startswith("aic-core/src/aiconfigurator_core/systems/data/")
            assert ts.label(op).startswith(f"measured ({ts.device_name}, ")


def test_shipped_tables_are_compact():
    root = get_gpu("h100-sxm").profile_dir.parent
    total = sum(p.stat().st_size for p in root.glob("*/tables/*/*") if p.is_file())
    assert total < 20e6, total


def test_catalog_specs_state_their_link():
    for g in gpu_catalog().values():
        if g.name.startswith("cpu"):
            continue
        assert g.interconnect_kind in ("nvlink", "pcie") and g.p2p in (True, False), g.name
        assert g.interconnect_bandwidth_bytes_per_s > 0 and g.interconnect_latency_s > 0
    assert get_gpu("rtx-4090").p2p is False and get_gpu("l40s").link_kind == "pcie"
    assert get_gpu("NVIDIA GeForce RTX 4090").hbm_bytes == 25_250_627_584
