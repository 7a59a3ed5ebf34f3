"""LLMServingSim importer (calibration/import_lss.py): units, shapes, sums, checks, output.

A tiny fake profile folder (LLMServingSim's output bundle: ``meta.yaml``, ``tp<N>/dense.csv``,
``per_sequence.csv``, ``attention.csv``, ``moe.csv``; times in microseconds) is written by the
test, so every expected value below is the source value converted by hand: microseconds / 1e6,
the TP-shard GEMM shapes of Llama-3.1-8B worked out from its config (hidden 4096, 32 query
and 8 KV heads of 128, intermediate 14336, vocab 128256), decode context = ``kv_decode + 1``.
The last tests read the real copy in ``../shared/reference/groundtruth/llmservingsim`` and skip
when it is absent.
"""
from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import REPO_ROOT, shared_path

from calibration.import_lss import (
    find_profiles,
    fit_sampler_line,
    import_lss,
    mixed_attention_check,
    read_sampler,
)
from calibration.tableset import check_table_set
from simulator.catalog.hardware import get_gpu
from simulator.cli.main import main as cli_main
from simulator.perf.tables.sets import TableSet, select_table_set

COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
LLAMA = "meta-llama/Llama-3.1-8B"
SET = "vllm-0.19.0-lss"

# dense.csv microseconds per call at tokens 1, 2, 4 (TP 1); TP 2 halves the GEMMs
TOKENS = (1, 2, 4)
DENSE_US = {"qkv_proj": (20.0, 20.5, 21.0), "o_proj": (12.0, 12.25, 12.5),
            "gate_up_proj": (80.0, 81.0, 82.0), "down_proj": (40.0, 40.5, 41.0),
            "act_fn": (2.5, 2.75, 3.0), "layernorm": (3.0, 3.25, 3.5),
            "rotary_emb": (2.0, 2.125, 2.25), "embedding": (4.0, 4.0, 4.0),
            "final_layernorm": (3.0, 3.0, 3.0)}
LM_US = {1: 1000.0, 2: 1002.0, 4: 1006.0}
SAMPLER_US = {1: 10.5, 2: 11.0, 4: 12.0, 8: 14.0}      # exactly 10 + 0.5 x rows
# attention.csv: (prefill_chunk, kv_prefill, n_decode, kv_decode) -> us
ATTN_US = {(0, 0, 1, 16): 9.0, (0, 0, 1, 32): 9.5, (0, 0, 2, 16): 10.0, (0, 0, 2, 32): 11.0,
           (16, 0, 0, 0): 8.0, (16, 16, 0, 0): 8.5, (32, 0, 0, 0): 9.0, (32, 16, 0, 0): 10.0,
           (16, 0, 1, 16): 25.5, (32, 16, 2, 32): 21.0}


def _csv(path, rows, cols):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=cols).to_csv(path, index=False)


def _meta(tp_degrees=(1, 2), overrides=None, model=LLAMA, arch="llama"):
    ov = {"num_hidden_layers": 1, "intermediate_size": 7168, "num_attention_heads": 16,
          "num_key_value_heads": 4, "vocab_size": 64128} if overrides is None else overrides
    return {"profiler_version": "1.0.0", "vllm_version": "0.19.0", "cuda_version": "12.8",
            "gpu": "NVIDIA GeForce RTX 4090", "hardware": "RTX4090",
            "profiled_at": "2026-08-17T19:43:32+00:00", "architecture": arch, "model": model,
            "variant": "bf16", "tp_degrees": list(tp_degrees),
            "engine_effective": {"load_format": "dummy", "enforce_eager": True,
                                 "tensor_parallel_size": 1, "hf_overrides": ov},
            "measurement_iterations": 3}


def make_profile(root, tps=(1, 2)):
    """A fake LLMServingSim bundle for Llama-3.1-8B on the RTX 4090 at ``tps``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(f"Copied from LLMServingSim at commit {COMMIT} (test).\n")
    prof = root / "profiler_perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" / "bf16"
    prof.mkdir(parents=True)
    (prof / "meta.yaml").write_text(yaml.safe_dump(_meta(tps)))
    for tp in tps:
        d = prof / f"tp{tp}"
        gemm_scale = 1.0 / tp
        rows = []
        for layer, us in DENSE_US.items():
            s = gemm_scale if layer.endswith("proj") or layer == "act_fn" else 1.0
            rows += [(layer, t, u * s) for t, u in zip(TOKENS, us)]
        _csv(d / "dense.csv", rows, ["layer", "tokens", "time_us"])
        rows = [("lm_head", n, u / tp) for n, u in LM_US.items()] + \
               [("sampler", n, u) for n, u in SAMPLER_US.items()]
        _csv(d / "per_sequence.csv", rows, ["layer", "sequences", "time_us"])
        _csv(d / "attention.csv", [(*k, v / tp) for k, v in ATTN_US.items()],
             ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"])
        _csv(d / "skew.csv", [("pure", 2, 1)], ["regime", "n", "nb"])
    return prof


@pytest.fixture
def imported(tmp_path):
    make_profile(tmp_path / "src")
    written = import_lss(tmp_path / "src" / "profiler_perf", tmp_path / "out")
    return tmp_path / "out", written


def _prov(out):
    return yaml.safe_load((out / "rtx-4090" / "tables" / SET / "provenance.yaml").read_text())


def _table(out, fam):
    return pd.read_parquet(out / "rtx-4090" / "tables" / SET / f"{fam}.parquet")


def test_set_location_and_provenance(imported):
    out, written = imported
    assert [p.relative_to(out).as_posix() for p in written] == [f"rtx-4090/tables/{SET}"]
    prov = _prov(out)
    assert (prov["kind"], prov["engine"], prov["engine_version"]) == ("measured", "vllm",
                                                                       "0.19.0")
    assert prov["device_name"] == "NVIDIA GeForce RTX 4090"
    rec = prov["tables"]["gemm"]
    assert rec["source_project"] == "LLMServingSim" and rec["commit"] == COMMIT
    assert rec["source_url"] == "https://github.com/casys-kaist/LLMServingSim"
    assert rec["license"] == "MIT" and rec["mode"] == "eager (enforce_eager)"
    assert rec["device"] == "NVIDIA GeForce RTX 4090"
    assert "profiler/perf/RTX4090/meta-llama/Llama-3.1-8B/bf16/tp1/dense.csv" in rec["file"]
    assert prov["profiles"][0]["hf_overrides_tp"] == 2
    assert any("embedding" in s for s in prov["skipped"])
    assert any("skew.csv" in s for s in prov["skipped"])
    assert check_table_set(out / "rtx-4090" / "tables" / SET) == {
        "gemm": 2 * (4 * 3 + 3), "attention_prefill": 8, "attention_decode": 8,
        "elementwise": 6}


def test_gemm_rows_units_and_shard_shapes(imported):
    out, _ = imported
    g = _table(out, "gemm")
    got = {(r.tp, r.op, r.m): (r.n, r.k, r.median_s) for r in g.itertuples()}
    # Llama-3.1-8B: qkv (H/tp + 2 K/tp) x 128 out of 4096; o 4096 out of H/tp x 128;
    # gate_up 2 x 14336/tp out of 4096; down 4096 out of 14336/tp; lm_head 128256/tp of 4096
    shapes = {1: {"qkv_proj": (6144, 4096), "o_proj": (4096, 4096),
                  "gate_up_proj": (28672, 4096), "down_proj": (4096, 14336),
                  "lm_head": (128256, 4096)},
              2: {"qkv_proj": (3072, 4096), "o_proj": (4096, 2048),
                  "gate_up_proj": (14336, 4096), "down_proj": (4096, 7168),
                  "lm_head": (64128, 4096)}}
    for tp in (1, 2):
        for op in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
            for t, us in zip(TOKENS, DENSE_US[op]):
                n, k, s = got[(tp, op, t)]
                assert (n, k) == shapes[tp][op]
                assert s == pytest.approx(us / tp / 1e6, rel=1e-12)
        for rows, us in LM_US.items():
            n, k, s = got[(tp, "lm_head", rows)]
            assert (n, k) == shapes[tp]["lm_head"]
            assert s == pytest.approx(us / tp / 1e6, rel=1e-12)
    assert set(g["dtype"]) == {"bf16"} and len(g) == 30


def test_elementwise_sum(imported):
    out, _ = imported
    e = _table(out, "elementwise")
    for tp, inter, qh, kvh in ((1, 14336, 32, 8), (2, 7168, 16, 4)):
        rows = e[e.tp == tp].set_index("tokens")
        assert set(rows["intermediate"]) == {inter} and set(rows["hidden"]) == {4096}
        assert set(rows["q_heads"]) == {qh} and set(rows["kv_heads"]) == {kvh}
        for i, t in enumerate(TOKENS):
            ln, rope = DENSE_US["layernorm"][i], DENSE_US["rotary_emb"][i]
            act = DENSE_US["act_fn"][i] / tp
            # 2 x layernorm + rotary_emb + act_fn (Llama: no qk_norm), us -> s
            assert rows.loc[t, "median_s"] == pytest.approx((2 * ln + rope + act) / 1e6,
                                                            rel=1e-12)
            assert rows.loc[t, "rmsnorm_s"] == pytest.approx(2 * ln / 1e6, rel=1e-12)
            assert np.isnan(rows.loc[t, "qk_norm_s"])


def test_attention_rows(imported):
    out, _ = imported
    dec = _table(out, "attention_decode")
    d1 = dec[dec.tp == 1]
    got = {(r.batch, r.ctx_mean): r.median_s for r in d1.itertuples()}
    # batch = n_decode, ctx_mean = kv_decode + 1 (the new token attends too)
    assert got == pytest.approx({(1, 17): 9.0e-6, (1, 33): 9.5e-6, (2, 17): 10.0e-6,
                                 (2, 33): 11.0e-6}, rel=1e-12)
    assert set(d1["q_heads"]) == {32} and set(d1["kv_heads"]) == {8}
    assert set(d1["head_dim"]) == {128} and set(d1["kernel"]) == {"vllm_flash_attn"}
    pre = _table(out, "attention_prefill")
    p2 = pre[pre.tp == 2]
    got = {(r.batch, r.q, r.start): r.median_s for r in p2.itertuples()}
    assert got == pytest.approx({(1, 16, 0): 4.0e-6, (1, 16, 16): 4.25e-6, (1, 32, 0): 4.5e-6,
                                 (1, 32, 16): 5.0e-6}, rel=1e-12)
    assert set(p2["q_heads"]) == {16} and set(p2["kv_heads"]) == {4}
    # mixed rows are not stored, their check is: 25.5 / (8 + 9) = 1.5, 21 / (10 + 11) = 1
    chk = _prov(out)["mixed_attention_check"][0]
    assert chk["rows"] == 2 and chk["paired"] == 2
    assert chk["ratio_median"] == pytest.approx(1.25)
    assert chk["abs_err_median"] == pytest.approx(0.25)


def test_mixed_check_counts_unpaired_rows():
    df = pd.DataFrame([(0, 0, 1, 16, 2.0), (16, 0, 0, 0, 3.0), (16, 0, 1, 16, 4.0),
                       (16, 0, 1, 64, 9.0)],
                      columns=["prefill_chunk", "kv_prefill", "n_decode", "kv_decode",
                               "time_us"])
    chk = mixed_attention_check(df)
    assert chk["rows"] == 2 and chk["paired"] == 1 and chk["ratio_median"] == 0.8


def test_sampler_rows_and_line(imported):
    out, _ = imported
    s = read_sampler(out / "rtx-4090" / "tables" / SET)
    assert dict(zip(s["rows"], s["median_s"])) == pytest.approx(
        {n: u / 1e6 for n, u in SAMPLER_US.items()}, rel=1e-12)
    assert set(s["vocab"]) == {128256}
    fit = _prov(out)["tables"]["sampler"]["fit"][LLAMA]
    # the data lie on 10 us + 0.5 us x rows exactly: the line and its leave-one-out are exact
    assert fit["a_s"] == pytest.approx(10e-6, rel=1e-6)
    assert fit["b_s_per_row"] == pytest.approx(0.5e-6, rel=1e-6)
    assert fit["loo_line_max"] == pytest.approx(0.0, abs=1e-9)
    assert fit["points"] == 4 and fit["rows_range"] == [1, 8]


def test_fit_sampler_line_leave_one_out_by_hand():
    # points (1, 1), (2, 2), (3, 4): holding out (3, 4) leaves the line t = rows, which
    # predicts 3 at rows 3: error |3 / 4 - 1| = 0.25; interpolation at rows 2 from (1, 1) and
    # (3, 4) gives 2.5: error 0.25
    f = fit_sampler_line([1, 2, 3], [1.0, 2.0, 4.0])
    assert f["loo_line_max"] >= 0.25 and f["loo_interp_median"] == pytest.approx(0.25)


def test_table_set_answers_the_measured_points(imported):
    out, _ = imported
    ts = TableSet(out / "rtx-4090" / "tables" / SET, get_gpu("rtx-4090"))
    assert ts.engine == "vllm" and ts.engine_version == "0.19.0" and not ts.is_primary
    assert ts.gemm(2, 6144, 4096) == pytest.approx(20.5e-6, rel=1e-9)
    assert ts.gemm(4, 128256, 4096) == pytest.approx(1006e-6, rel=1e-9)
    assert ts.attention_decode(2, 33, q_heads=32, kv_heads=8, head_dim=128) == pytest.approx(
        11e-6, rel=1e-9)
    assert ts.attention_prefill(32, 16, q_heads=16, kv_heads=4, head_dim=128) == \
        pytest.approx(5e-6, rel=1e-9)
    assert ts.elementwise(2, hidden=4096, intermediate=14336, q_heads=32, kv_heads=8,
                          head_dim=128) == pytest.approx((6.5 + 2.125 + 2.75) / 1e6, rel=1e-9)
    assert ts.label("gemm") == ("measured (NVIDIA GeForce RTX 4090, vLLM 0.19.0; LLMServingSim "
                                "fedcba9 dense.csv, per_sequence.csv)")


def _digest(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_import_is_deterministic(tmp_path):
    make_profile(tmp_path / "src")
    import_lss(tmp_path / "src", tmp_path / "a")
    import_lss(tmp_path / "src", tmp_path / "b")
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a == b and len(a) == 6


def test_gpu_option_and_profile_discovery(tmp_path):
    prof = make_profile(tmp_path / "src", tps=(1,))
    (prof / "meta.yaml").write_text(yaml.safe_dump(_meta((1,), overrides={
        "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256})))
    assert find_profiles(tmp_path / "src") == [prof]
    (w,) = import_lss(prof, tmp_path / "o", gpu="my-4090", commit="abc")
    assert w == tmp_path / "o" / "my-4090" / "tables" / SET
    assert _prov_at(w)["tables"]["gemm"]["commit"] == "abc"
    assert _prov_at(w)["profiles"][0]["hf_overrides_tp"] == 1


def _prov_at(d):
    return yaml.safe_load((d / "provenance.yaml").read_text())


def test_bad_input_one_line_errors(tmp_path, capsys):
    prof = make_profile(tmp_path / "src")
    (prof / "tp2" / "attention.csv").unlink()
    with pytest.raises(ValueError, match=r"tp2/attention.csv: missing"):
        import_lss(prof, tmp_path / "o")
    make_profile(tmp_path / "s2")
    p2 = tmp_path / "s2" / "profiler_perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" / "bf16"
    pd.read_csv(p2 / "tp1" / "dense.csv").drop(columns=["time_us"]).to_csv(
        p2 / "tp1" / "dense.csv", index=False)
    with pytest.raises(ValueError, match=r"tp1/dense.csv: lacks column\(s\) time_us"):
        import_lss(p2, tmp_path / "o")
    make_profile(tmp_path / "s3")
    p3 = tmp_path / "s3" / "profiler_perf" / "RTX4090" / "meta-llama" / "Llama-3.1-8B" / "bf16"
    bad = _meta(overrides={"intermediate_size": 7168, "num_attention_heads": 12,
                           "num_key_value_heads": 4, "vocab_size": 64128})
    (p3 / "meta.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(ValueError, match=r"meta.yaml: engine_effective.hf_overrides .* match "
                                         r"no TP shard of llama-3.1-8b"):
        import_lss(p3, tmp_path / "o")
    (p3 / "meta.yaml").write_text(yaml.safe_dump(_meta(arch="qwen3")))
    with pytest.raises(ValueError, match="architecture 'qwen3' is not llama-3.1-8b's model type"):
        import_lss(p3, tmp_path / "o")
    (p3 / "meta.yaml").write_text(yaml.safe_dump(_meta(model="nobody/unknown-7b")))
    rc = cli_main(["calibrate", "import-lss", str(p3), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "unknown model 'nobody/unknown-7b'" in err
    rc = cli_main(["calibrate", "import-lss", str(tmp_path / "nowhere"), "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "no such folder" in err


def test_gemm_layer_the_model_lacks_is_an_error(tmp_path):
    prof = tmp_path / "p"
    prof.mkdir()
    meta = _meta((1,), model="Qwen/Qwen3-30B-A3B-Instruct-2507", arch="qwen3_moe",
                 overrides={"intermediate_size": 6144, "num_attention_heads": 32,
                            "num_key_value_heads": 4, "vocab_size": 151936})
    (prof / "meta.yaml").write_text(yaml.safe_dump(meta))
    d = prof / "tp1"
    _csv(d / "dense.csv", [("qkv_proj", 1, 5.0), ("gate_up_proj", 1, 9.0)],
         ["layer", "tokens", "time_us"])
    _csv(d / "per_sequence.csv", [("lm_head", 1, 100.0)], ["layer", "sequences", "time_us"])
    _csv(d / "attention.csv", [(0, 0, 1, 16, 5.0)],
         ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"])
    with pytest.raises(ValueError, match="layer gate_up_proj measured, but "
                                         "qwen3-30b-a3b-instruct-2507 has no mlp_gate_up GEMM"):
        import_lss(prof, tmp_path / "o")


def test_moe_profile(tmp_path):
    prof = tmp_path / "p"
    prof.mkdir()
    meta = _meta((1,), model="Qwen/Qwen3-30B-A3B-Instruct-2507", arch="qwen3_moe",
                 overrides={"intermediate_size": 6144, "num_attention_heads": 32,
                            "num_key_value_heads": 4, "vocab_size": 151936})
    meta["gpu"] = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    (prof / "meta.yaml").write_text(yaml.safe_dump(meta))
    d = prof / "tp1"
    rows = []
    for layer, us in {"qkv_proj": 6.0, "o_proj": 4.0, "layernorm": 2.0, "rotary_emb": 1.5,
                      "qk_norm": 1.25}.items():
        rows += [(layer, 16, us)]
    _csv(d / "dense.csv", rows, ["layer", "tokens", "time_us"])
    _csv(d / "per_sequence.csv", [("lm_head", 1, 400.0), ("sampler", 1, 10.0)],
         ["layer", "sequences", "time_us"])
    _csv(d / "attention.csv", [(0, 0, 1, 16, 5.0)],
         ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"])
    # 128 experts, top-8: uniform routing touches min(128, 8 x tokens) experts
    _csv(d / "moe.csv", [(1, 8, 50.0), (2, 8, 55.0), (2, 16, 130.0), (32, 64, 400.0),
                         (32, 128, 800.0)], ["tokens", "activated_experts", "time_us"])
    (w,) = import_lss(prof, tmp_path / "o")
    assert w.parent.parent.name == "rtx-pro-6000-server"
    moe = pd.read_parquet(w / "moe.parquet")
    assert dict(zip(moe["num_tokens"], moe["median_s"])) == pytest.approx(
        {1: 50e-6, 2: 130e-6, 32: 800e-6}, rel=1e-12)
    assert set(moe["distribution"]) == {"balanced"}
    assert set(zip(moe["hidden"], moe["inter"], moe["topk"], moe["num_experts"], moe["moe_tp"],
                   moe["moe_ep"])) == {(2048, 768, 8, 128, 1, 1)}
    rec = _prov_at(w)["tables"]["moe"]
    assert any("2 rows with fewer activated experts" in c for c in rec["changes"])
    ew = pd.read_parquet(w / "elementwise.parquet").iloc[0]
    # 2 x layernorm + rotary_emb + 2 x qk_norm; no dense MLP: intermediate 0, no act part
    assert ew["median_s"] == pytest.approx((4.0 + 1.5 + 2.5) / 1e6, rel=1e-12)
    assert ew["intermediate"] == 0 and np.isnan(ew["act_s"])
    ts = TableSet(w, get_gpu("rtx-pro-6000-server"))
    assert ts.moe(2, hidden=2048, inter=768, topk=8, num_experts=128) == pytest.approx(
        130e-6, rel=1e-9)
    g = pd.read_parquet(w / "gemm.parquet")
    assert set(zip(g["op"], g["n"], g["k"])) == {("qkv_proj", 5120, 2048),
                                                 ("o_proj", 2048, 4096),
                                                 ("lm_head", 151936, 2048)}


# ---------------------------------------------------------------- the shipped RTX 4090 set
SHIPPED = REPO_ROOT / "hardware_profiles" / "rtx-4090" / "tables" / SET


def test_shipped_4090_set_is_selected_and_answers_llama_tp1():
    gpu = get_gpu("rtx-4090")
    ts = select_table_set(gpu, "vllm", "0.19.0")
    assert ts.folder == SHIPPED and ts.device_name == "NVIDIA GeForce RTX 4090"
    assert set(ts.families()) == {"gemm", "attention_prefill", "attention_decode",
                                  "elementwise"}
    for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
        t = ts.gemm(64, n, k)
        # measured, so above the roofline bound at the datasheet peak
        assert t >= 2 * 64 * n * k / gpu.bf16_flops_per_s
    kw = {"q_heads": 32, "kv_heads": 8, "head_dim": 128}
    assert ts.nearest_note("attention_decode", dtype="bf16", kv_dtype="bf16", **kw) == ""
    assert ts.attention_decode(64, 1025, **kw) > 0 and ts.attention_prefill(512, 0, **kw) > 0


@pytest.fixture
def lss_4090():
    return shared_path("reference/groundtruth/llmservingsim/profiler_perf/RTX4090/meta-llama/"
                       "Llama-3.1-8B/bf16", kind="dir")


def test_shipped_4090_set_is_what_the_importer_writes(lss_4090, tmp_path):
    import_lss(lss_4090, tmp_path)
    assert _digest(tmp_path / "rtx-4090" / "tables") == _digest(SHIPPED.parent)


def test_shipped_4090_values_are_the_source_values(lss_4090):
    ts = TableSet(SHIPPED, get_gpu("rtx-4090"))
    dense = pd.read_csv(lss_4090 / "tp1" / "dense.csv").set_index(["layer", "tokens"])
    assert ts.gemm(64, 6144, 4096) == pytest.approx(
        dense.loc[("qkv_proj", 64), "time_us"] / 1e6, rel=1e-9)
    att = pd.read_csv(lss_4090 / "tp1" / "attention.csv").set_index(
        ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode"])["time_us"]
    kw = {"q_heads": 32, "kv_heads": 8, "head_dim": 128}
    assert ts.attention_decode(64, 1024 + 1, **kw) == pytest.approx(
        att.loc[(0, 0, 64, 1024)] / 1e6, rel=1e-9)
    assert ts.attention_prefill(256, 2048, **kw) == pytest.approx(
        att.loc[(256, 2048, 0, 0)] / 1e6, rel=1e-9)


def test_gpu_option_keeps_one_gpu_of_several(tmp_path):
    make_profile(tmp_path / "src")
    other = tmp_path / "src" / "profiler_perf" / "RTXPRO6000" / "meta-llama" / "Llama-3.1-8B"
    shutil.copytree(tmp_path / "src" / "profiler_perf" / "RTX4090" / "meta-llama" /
                    "Llama-3.1-8B", other)
    meta = _meta()
    meta.update(gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", hardware="RTXPRO6000")
    (other / "bf16" / "meta.yaml").write_text(yaml.safe_dump(meta))
    both = import_lss(tmp_path / "src", tmp_path / "all")
    assert [p.parent.parent.name for p in both] == ["rtx-4090", "rtx-pro-6000-server"]
    (one,) = import_lss(tmp_path / "src", tmp_path / "one", gpu="rtx-pro-6000-server")
    assert one.parent.parent.name == "rtx-pro-6000-server"
    assert _prov_at(one)["profiles"][0]["hardware"] == "RTXPRO6000"
    with pytest.raises(ValueError, match="no profile measured on GPU 'h100-sxm'"):
        import_lss(tmp_path / "src", tmp_path / "none", gpu="h100-sxm")
