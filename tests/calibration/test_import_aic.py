"""aiconfigurator importer (calibration/import_aic.py): units, names, reuse, outliers, output.

A tiny fake aiconfigurator ``systems/`` folder is written by the test (latencies in ms, message
sizes in elements, decode context as ``isl + step``), so every expected value below is the
source value converted by hand. The last tests read the real reference copy in
``../shared/reference/aiconfigurator`` and skip when it is absent.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import REPO_ROOT, SHARED_DIR

from calibration.import_aic import (
    OUTLIER_FACTOR,
    default_kernels,
    drop_outliers,
    import_aic,
)
from simulator.catalog.hardware import load_gpu_spec
from simulator.cli.main import main as cli_main
from simulator.perf.tables.sets import TableSet, table_sets

COMMIT = "0123456789abcdef0123456789abcdef01234567"
AIC = SHARED_DIR / "reference" / "aiconfigurator"

# GEMM line n = k = 1024: ms per m; m = 4 is a 3x spike, m = 8 measured twice (0.014, 0.016)
GEMM_MS = {1: 0.010625, 2: 0.01125, 4: 0.0375, 8: None, 16: 0.020}
# a second line with a monotone 1.4x tile step between m = 2 and m = 4: nothing dropped
STEP_MS = {1: 0.020, 2: 0.020, 4: 0.028, 8: 0.028, 16: 0.030}


def _pq(df: pd.DataFrame, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(path, index=False)


def _reuse(path, table, version):
    path.mkdir(parents=True, exist_ok=True)
    (path / "reuse.yaml").write_text(yaml.safe_dump({"schema_version": 1, "reuse": [
        {"table": table, "from_version": version, "reason": "test donor",
         "approved_by": "test"}]}))


def make_source(root):
    """A fake aiconfigurator systems/ folder for GPU ``toy_gpu``, vLLM 1.0 and 1.1."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(f"Copied from aiconfigurator at commit {COMMIT} (test).\n")
    (root / "toy_gpu.yaml").write_text(yaml.safe_dump(
        {"gpu": {"sm_version": 90}, "misc": {"nccl_version": "2.0"}}))
    data = root / "data" / "toy_gpu"
    dev = {"framework": "VLLM", "version": "1.0", "device": "Toy GPU 80GB"}
    rows = []
    for m, ms in GEMM_MS.items():
        for lat in ([0.014, 0.016] if ms is None else [ms]):
            rows.append({**dev, "kernel_source": "vllm_default", "gemm_dtype": "bfloat16",
                         "m": m, "n": 1024, "k": 1024, "latency": lat})
    for m, ms in STEP_MS.items():
        rows.append({**dev, "kernel_source": "vllm_default", "gemm_dtype": "bfloat16", "m": m,
                     "n": 2048, "k": 1024, "latency": ms})
    rows.append({**dev, "kernel_source": "vllm_default", "gemm_dtype": "fp8_block", "m": 1,
                 "n": 1024, "k": 1024, "latency": 0.5})
    _pq(pd.DataFrame(rows), data / "gemm" / "vllm" / "1.0" / "gemm_perf.parquet")
    _reuse(data / "gemm" / "vllm" / "1.1", "gemm_perf", "1.0")

    att = {**dev, "num_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "beam_width": 1,
           "attn_dtype": "bfloat16"}
    ctx = [{**att, "kernel_source": k, "batch_size": 1, "isl": isl, "kv_cache_dtype": kv,
            "step": 0, "latency": lat}
           for k, isl, kv, lat in [("vllm_flash_attn_fa3", 16, "bfloat16", 0.004),
                                   ("vllm_flash_attn_fa3", 64, "bfloat16", 0.006),
                                   ("vllm_flash_attn_fa4", 64, "bfloat16", 0.009),
                                   ("vllm_flash_attn_fa3", 16, "fp8", 0.005),
                                   ("vllm_flash_attn_fa3", 64, "fp8", 0.007)]]
    _pq(pd.DataFrame(ctx), data / "attention" / "vllm" / "1.0" / "context_attention_perf.parquet")
    gen = [{**att, "kernel_source": "vllm_flash_attn_fa3", "batch_size": 2, "isl": 1, "step": s,
            "kv_cache_dtype": "bfloat16", "latency": lat} for s, lat in ((15, 0.003), (63, 0.005))]
    _pq(pd.DataFrame(gen),
        data / "attention" / "vllm" / "1.0" / "generation_attention_perf.parquet")

    ar = [{**dev, "op_name": "all_reduce", "kernel_source": f"vLLM_custom_{b}",
           "allreduce_dtype": "bfloat16", "num_gpus": 2, "message_size": n, "latency": lat,
           "backend": f"vllm_{b}"}
          for b, n, lat in (("graph", 1024, 0.004), ("graph", 4096, 0.005),
                            ("eager", 1024, 0.02), ("eager", 4096, 0.021))]
    _pq(pd.DataFrame(ar), data / "comm" / "vllm" / "1.0" / "custom_allreduce_perf.parquet")
    nccl = [{"framework": "TRTLLM", "version": "2.0", "device": "Toy GPU 80GB",
             "op_name": "all_gather", "kernel_source": "NCCL", "nccl_dtype": dt, "num_gpus": 2,
             "message_size": n, "latency": lat}
            for dt, n, lat in (("half", 1024, 0.005), ("half", 65536, 0.012),
                               ("int8", 1024, 0.005))]
    _pq(pd.DataFrame(nccl), data / "comm" / "nccl" / "2.0" / "nccl_perf.parquet")

    moe = {**dev, "op_name": "moe", "kernel_source": "vllm_fused_moe", "moe_dtype": "bfloat16",
           "hidden_size": 1024, "topk": 2, "num_experts": 8, "moe_tp_size": 1, "moe_ep_size": 1,
           "distribution": "balanced"}
    _pq(pd.DataFrame([{**moe, "num_tokens": t, "inter_size": 2048, "latency": lat}
                      for t, lat in ((1, 0.02), (8, 0.03))]),
        data / "moe" / "vllm" / "1.0" / "moe_perf.parquet")
    _pq(pd.DataFrame([{**moe, "version": "1.1", "num_tokens": t, "inter_size": 4096,
                       "latency": lat} for t, lat in ((1, 0.04), (8, 0.05))]),
        data / "moe" / "vllm" / "1.1" / "moe_perf.parquet")
    _reuse(data / "moe" / "vllm" / "1.1", "moe_perf", "1.0")
    return root


@pytest.fixture
def imported(tmp_path):
    src = make_source(tmp_path / "src")
    out = tmp_path / "out"
    written = import_aic(src, out)
    prof = out / "toy-gpu"
    (prof / "spec.yaml").write_text(yaml.safe_dump({
        "name": "toy-gpu", "bf16_flops_per_s": 1e14, "fp8_flops_per_s": 2e14, "hbm_bytes": 8e10,
        "hbm_bandwidth_bytes_per_s": 1e12, "interconnect_bandwidth_bytes_per_s": 1e11}))
    return src, out, prof, written


def _prov(prof, name):
    return yaml.safe_load((prof / "tables" / name / "provenance.yaml").read_text())


def test_sets_written(imported):
    _, _, prof, written = imported
    assert sorted(p.name for p in written) == ["nccl-2.0", "vllm-1.0", "vllm-1.1"]
    names = [s.name for s in table_sets(load_gpu_spec(prof))]
    assert names == ["vllm-1.1", "vllm-1.0", "nccl-2.0"]


def test_gemm_units_dtypes_duplicates_outliers(imported):
    _, _, prof, _ = imported
    g = pd.read_parquet(prof / "tables" / "vllm-1.0" / "gemm.parquet")
    assert list(g.columns) == ["dtype", "m", "n", "k", "median_s", "kernel"]
    assert set(g["dtype"]) == {"bf16"}                       # fp8_block dropped
    line = g[g.n == 1024].set_index("m")["median_s"]
    # ms -> s; the 3x spike at m = 4 dropped; m = 8 is the median of 0.014 and 0.016 ms
    assert line.to_dict() == pytest.approx({1: 0.010625e-3, 2: 0.01125e-3, 8: 0.015e-3,
                                            16: 0.020e-3}, rel=1e-12)
    step = g[g.n == 2048].set_index("m")["median_s"]
    assert step.to_dict() == pytest.approx({m: v / 1e3 for m, v in STEP_MS.items()}, rel=1e-12)
    rec = _prov(prof, "vllm-1.0")["tables"]["gemm"]
    assert rec["commit"] == COMMIT and rec["outliers_dropped"] == 1
    assert rec["file"] == ("aic-core/src/aiconfigurator_core/systems/data/toy_gpu/gemm/vllm/1.0/"
                           "gemm_perf.parquet")
    assert rec["rows_source"] == 12 and rec["rows"] == 9
    assert rec["device"] == "Toy GPU 80GB" and rec["license"] == "Apache-2.0"
    assert any("fp8_block" in c for c in rec["changes"])
    assert any("1 repeated measurements" in c for c in rec["changes"])


def test_attention_renames_and_default_kernel(imported):
    _, _, prof, _ = imported
    d = prof / "tables" / "vllm-1.0"
    pre = pd.read_parquet(d / "attention_prefill.parquet")
    assert set(pre["start"]) == {0} and set(pre["window"]) == {0}   # no window_size column
    assert set(pre["q"]) == {16, 64} and set(pre["batch"]) == {1}
    assert set(pre["kv_dtype"]) == {"bf16", "fp8"} and set(pre["dtype"]) == {"bf16"}
    dec = pd.read_parquet(d / "attention_decode.parquet")
    # ctx_mean = isl + step = 1 + 15, 1 + 63
    assert dec.set_index("ctx_mean")["median_s"].to_dict() == pytest.approx(
        {16: 0.003e-3, 64: 0.005e-3}, rel=1e-12)
    prov = _prov(prof, "vllm-1.0")
    # FA3 and FA4 timed at the same coordinate on sm90: vLLM's default is FA3
    assert prov["default_kernel"]["attention_prefill"] == "vllm_flash_attn_fa3"
    gpu = load_gpu_spec(prof)
    ts = TableSet(d, gpu)
    kw = {"q_heads": 8, "kv_heads": 2, "head_dim": 128, "kv_dtype": "bf16"}
    assert ts.attention_prefill(64, 0, **kw) == pytest.approx(0.006e-3, rel=1e-12)
    assert ts.attention_prefill(64, 0, kernel="vllm_flash_attn_fa4", **kw) == pytest.approx(
        0.009e-3, rel=1e-12)


def test_comm_units(imported):
    _, _, prof, _ = imported
    ar = pd.read_parquet(prof / "tables" / "vllm-1.0" / "all_reduce.parquet")
    got = {(r.backend, r.bytes): r.median_s for r in ar.itertuples()}
    # elements x 2 bytes (bf16); ms -> s; vllm_graph -> graph
    assert got == pytest.approx({("graph", 2048): 4e-6, ("graph", 8192): 5e-6,
                                 ("eager", 2048): 2e-5, ("eager", 8192): 2.1e-5}, rel=1e-12)
    n = pd.read_parquet(prof / "tables" / "nccl-2.0" / "nccl.parquet")
    assert set(n["dtype"]) == {"fp16"} and set(n["bytes"]) == {2048, 131072}   # int8 dropped
    for v in ("vllm-1.0", "vllm-1.1"):
        assert _prov(prof, v)["tables"]["nccl"]["reuse_of"] == "nccl-2.0"
    ts = TableSet(prof / "tables" / "vllm-1.1", load_gpu_spec(prof))
    assert ts.collective("all_gather", 131072, 2) == pytest.approx(0.012e-3, rel=1e-12)


def test_reuse_yaml_points_at_donor_without_copying(imported):
    _, _, prof, _ = imported
    d11 = prof / "tables" / "vllm-1.1"
    assert not (d11 / "gemm.parquet").exists()
    rec = _prov(prof, "vllm-1.1")["tables"]["gemm"]
    assert rec["reuse_of"] == "vllm-1.0" and "reuse.yaml" in rec["reuse_reason"]
    gpu = load_gpu_spec(prof)
    new, old = TableSet(d11, gpu), TableSet(prof / "tables" / "vllm-1.0", gpu)
    for m in (1, 3, 8, 100):
        assert new.gemm(m, 1024, 1024) == old.gemm(m, 1024, 1024)
    assert new.provenance("gemm")["commit"] == COMMIT


def test_absent_table_reads_nearest_earlier_version(imported):
    _, _, prof, _ = imported
    rec = _prov(prof, "vllm-1.1")["tables"]["attention_prefill"]
    assert rec["reuse_of"] == "vllm-1.0" and "nearest earlier version" in rec["reuse_reason"]
    assert _prov(prof, "vllm-1.1")["tables"]["all_reduce"]["reuse_of"] == "vllm-1.0"


def test_reuse_with_native_rows_fills_missing_coordinates(imported):
    _, _, prof, _ = imported
    rec = _prov(prof, "vllm-1.1")["tables"]["moe"]
    assert rec["fill_from"] == ["vllm-1.0"] and rec["rows"] == 2
    ts = TableSet(prof / "tables" / "vllm-1.1", load_gpu_spec(prof))
    kw = {"hidden": 1024, "topk": 2, "num_experts": 8}
    assert ts.moe(8, inter=4096, **kw) == pytest.approx(0.05e-3, rel=1e-12)    # native
    assert ts.moe(8, inter=2048, **kw) == pytest.approx(0.03e-3, rel=1e-12)    # from 1.0
    assert ts.nearest_note("moe", inter=2048, dtype="bf16", distribution="balanced",
                           **kw) == ""


def _digest(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_import_is_deterministic(tmp_path):
    src = make_source(tmp_path / "src")
    import_aic(src, tmp_path / "a")
    import_aic(src, tmp_path / "b")
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a == b and len(a) == 10


def test_version_and_gpu_selection(tmp_path):
    src = make_source(tmp_path / "src")
    out = import_aic(src, tmp_path / "o", gpus=["toy-gpu"], versions=["1.1"])
    assert [p.name for p in out] == ["nccl-2.0", "vllm-1.1"]
    with pytest.raises(ValueError, match="no vLLM version"):
        import_aic(src, tmp_path / "o", gpus=["toy_gpu"], versions=["9.9"])
    with pytest.raises(ValueError, match="no GPU 'b200'; available: toy_gpu"):
        import_aic(src, tmp_path / "o", gpus=["b200"])


def test_cli_bad_version_leaves_no_empty_output_folder(tmp_path, capsys):
    """`-o` is created (and checked) before the versions are: a version the source lacks is
    one line, exit 2, and the folder the command made, still empty, is gone."""
    from simulator.cli.main import main

    src = make_source(tmp_path / "src")
    out = tmp_path / "new" / "o"
    assert main(["calibrate", "import-aic", str(src), "-o", str(out), "--gpu", "toy_gpu",
                 "--versions", "9.9"]) == 2
    assert "no vLLM version(s) 9.9" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_outlier_rule_directly():
    t = [1.0, 1.05, 1.1, 3.0, 1.2, 1.25]          # one 2.5x spike: dropped
    df = pd.DataFrame({"dtype": "bf16", "m": range(1, 7), "n": 64, "k": 64, "median_s": t,
                       "kernel": "x"})
    kept, n = drop_outliers("gemm", df)
    assert n == 1 and 3.0 not in set(kept["median_s"])
    t2 = [1.0, 1.0, 1.4, 1.4, 1.45]                 # a monotone 1.4x step: kept
    kept, n = drop_outliers("gemm", df.iloc[:5].assign(median_s=t2))
    assert n == 0
    assert OUTLIER_FACTOR == 1.5


def test_default_kernels_rules():
    base = {"dtype": "bf16", "kv_dtype": "bf16", "q_heads": 8, "kv_heads": 1, "head_dim": 128,
            "window": 0, "batch": 1, "start": 0, "median_s": 1e-5}
    over = pd.DataFrame([{**base, "kernel": "x_fa3", "q": 16}, {**base, "kernel": "x_fa4",
                                                                  "q": 16}])
    assert default_kernels("attention_prefill", over, 90) == (["x_fa3"], ["x_fa4"])
    assert default_kernels("attention_prefill", over, 100) == (["x_fa4"], ["x_fa3"])
    split = pd.DataFrame([{**base, "kernel": "fi_decode", "q": 1},
                          {**base, "kernel": "fi_prefill", "q": 16}])   # dispatch by shape
    assert default_kernels("attention_prefill", split, 89) == (["fi_decode", "fi_prefill"], [])


def test_bad_source_one_line_errors(tmp_path, capsys):
    src = make_source(tmp_path / "src")
    p = src / "data" / "toy_gpu" / "gemm" / "vllm" / "1.0" / "gemm_perf.parquet"
    pd.read_parquet(p).drop(columns=["latency"]).to_parquet(p, index=False)
    with pytest.raises(ValueError) as ei:
        import_aic(src, tmp_path / "o")
    assert "gemm_perf.parquet: lacks column(s) latency" in str(ei.value)
    p.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="gemm_perf.parquet: cannot read"):
        import_aic(src, tmp_path / "o")
    rc = cli_main(["calibrate", "import-aic", str(tmp_path / "nowhere"), "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "not an aiconfigurator systems folder" in err


def test_cli_import(tmp_path, capsys):
    src = make_source(tmp_path / "src")
    rc = cli_main(["calibrate", "import-aic", str(src), "-o", str(tmp_path / "o"),
                   "--gpu", "toy_gpu"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "toy-gpu/tables/vllm-1.0: gemm 9" in out and "wrote 3 table set(s)" in out



@pytest.mark.parametrize("where", ["file", "under_file", "dev_null", "proc"])
def test_cli_unusable_output_folder_is_one_line_before_any_note(tmp_path, capsys, where):
    """-o a plain file, a path below one, /dev/null or /proc/x (cannot be created even as
    root): one stderr line naming the -o path, exit 2, no "spec.yaml is missing" note on
    stdout and nothing written. Before: the note, then "[Errno 2]"/"[Errno 20]" (rc 1)."""
    src = make_source(tmp_path / "src")
    (tmp_path / "afile").write_text("x")
    out = {"file": tmp_path / "afile", "under_file": tmp_path / "afile" / "sub",
           "dev_null": "/dev/null", "proc": "/proc/servesim-no-such-dir"}[where]
    if where == "proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this system")
    rc = cli_main(["calibrate", "import-aic", str(src), "-o", str(out), "--gpu", "toy_gpu"])
    cap = capsys.readouterr()
    assert rc == 2
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and f"output folder {out}: " in cap.err
    assert (tmp_path / "afile").read_text() == "x"


def test_cli_empty_data_folder_is_an_error(tmp_path, capsys):
    """data/ with no GPU folder used to say "wrote 0 table set(s)", rc 0."""
    (tmp_path / "src" / "data").mkdir(parents=True)
    rc = cli_main(["calibrate", "import-aic", str(tmp_path / "src"), "-o", str(tmp_path / "o")])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == "" and cap.err.count("\n") == 1
    assert f"{tmp_path / 'src' / 'data'}: no GPU folder inside" in cap.err
    assert "data/<gpu>/<op>/vllm/<version>/" in cap.err


def test_gpu_folder_without_vllm_tables_is_an_error(tmp_path):
    """A GPU folder holding no vLLM table (here only an unrelated file) writes no set: an
    error naming the GPU, not "wrote 0 table set(s)"."""
    gpu = tmp_path / "src" / "data" / "bare_gpu"
    gpu.mkdir(parents=True)
    (gpu / "notes.txt").write_text("nothing measured")
    with pytest.raises(ValueError, match=r"data: no vLLM kernel table for GPU\(s\) bare_gpu"):
        import_aic(tmp_path / "src", tmp_path / "o")


# ---------------------------------------------------------------- the real reference copy
@pytest.fixture
def aic_copy():
    if not (AIC / "data" / "a100_sxm").is_dir():
        pytest.skip("shared/reference/aiconfigurator not available")
    return AIC


def test_shipped_a100_tables_are_what_the_importer_writes(aic_copy, tmp_path):
    import_aic(aic_copy, tmp_path, gpus=["a100_sxm"])
    fresh = _digest(tmp_path / "a100-sxm-80gb" / "tables")
    shipped = _digest(REPO_ROOT / "hardware_profiles" / "a100-sxm-80gb" / "tables")
    assert fresh == shipped


def test_shipped_commit_matches_the_reference_readme(aic_copy):
    readme = (aic_copy / "README.md").read_text()
    prov = yaml.safe_load((REPO_ROOT / "hardware_profiles" / "h100-sxm" / "tables" /
                           "vllm-0.19.0" / "provenance.yaml").read_text())
    commit = prov["tables"]["gemm"]["commit"]
    assert commit in readme
    src = pd.read_parquet(aic_copy / "data" / "h100_sxm" / "comm" / "vllm" / "0.19.0" /
                          "custom_allreduce_perf.parquet")
    ours = pd.read_parquet(REPO_ROOT / "hardware_profiles" / "h100-sxm" / "tables" /
                           "vllm-0.19.0" / "all_reduce.parquet")
    row = src[(src.backend == "vllm_graph") & (src.num_gpus == 2)].iloc[0]
    mine = ours[(ours.backend == "graph") & (ours.num_gpus == 2)
                & (ours["bytes"] == row.message_size * 2)]
    assert mine["median_s"].iloc[0] == pytest.approx(row.latency / 1e3, rel=1e-12)
