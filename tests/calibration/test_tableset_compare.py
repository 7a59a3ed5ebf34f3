"""Grids, v2 table sets and the compare report (no torch needed).

Expected values are written out by hand from the definitions in the module docstrings
(grid rules, file layout, pairing rule), never read back from the code under test.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import REPO_ROOT

from calibration.compare import compare_table_sets, report_markdown, write_compare_report
from calibration.grids import (
    batch_grid,
    context_grid,
    kv_token_budget,
    message_grid,
    operator_grid,
    start_grid,
    token_grid,
)
from calibration.tableset import (
    check_table_set,
    normalize_dtype,
    read_table_set,
    resolve_table_set,
    write_table_set,
)
from simulator.cli.main import main


# ---------------------------------------------------------------------- grids
def test_token_grid_straddles_tile_boundaries_and_is_capped():
    g = token_grid(8192)
    assert set(range(1, 17)) <= set(g)
    for p in (32, 64, 128, 256, 512, 1024, 2048, 4096):
        assert {p - 1, p, p + 1} <= set(g), p
    for mid in (24, 48, 96, 192, 384, 768, 1536, 3072, 6144):
        assert {mid - 1, mid, mid + 1} <= set(g), mid
    assert max(g) == 8192 and 8191 in g and 8193 not in g
    assert g == sorted(set(g))
    small = token_grid(100)
    assert max(small) == 100 and {63, 64, 65} <= set(small)
    assert all(v <= 100 for v in small)
    q = token_grid(300, quick=True)
    assert {1, 2, 4, 8, 16, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300} <= set(q)
    assert 5 not in q and max(q) == 300
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        token_grid(0)


def test_batch_context_start_message_grids():
    assert batch_grid(3) == [1, 2, 3]
    b = batch_grid(256)
    assert set(range(1, 17)) <= set(b) and {17, 24, 32, 33, 48, 64, 65, 128, 129, 256} <= set(b)
    assert max(b) == 256 and 257 not in b
    assert batch_grid(20, quick=True) == [1, 2, 3, 4, 6, 8, 12, 16, 20]
    c = context_grid(1000)
    assert c[0] == 16 and max(c) == 1000 and {64, 65, 96, 128, 129, 512, 513, 768} <= set(c)
    assert context_grid(100, quick=True) == [16, 24, 32, 48, 64, 96, 100]
    assert start_grid(300) == [0, 16, 32, 64, 128, 256]
    assert start_grid(5000, quick=True) == [0, 16, 64, 256, 1024, 4096]
    assert message_grid(5000, quick=True) == [1024, 2048, 4096, 8192]
    assert message_grid(3000) == [1024, 1536, 2048, 3072, 4096]


def test_kv_budget_and_grid_points_respect_the_limits():
    # 8 KV heads x 128 dims x 2 (K and V) x 2 bytes = 4096 bytes per token and layer
    assert kv_token_budget(1e9, 2 * 8 * 128 * 2) == int(0.4 * 1e9 / 4096)
    assert kv_token_budget(1e15, 4096) == 1 << 22
    with pytest.raises(ValueError):
        kv_token_budget(1e9, 0)
    g = operator_grid(512, 32, 2048, max_kv_tokens=10_000, hidden_bytes_per_token=8192)
    assert max(g.gemm_m) == 512 and max(g.lm_head_m) == 32 and max(g.decode_batch) == 32
    dec = g.decode_points()
    assert dec and all(b * c <= 10_000 for b, c in dec)
    assert (32, 2048) not in dec and (1, 2048) in dec
    pre = g.prefill_points()
    assert pre and all(b * q <= 512 and s + q <= 2048 and b * (s + q) <= 10_000
                       for b, q, s in pre)
    assert (1, 512, 0) in pre and (8, 64, 0) in pre and (2, 512, 0) not in pre
    assert max(g.message_bytes) >= 512 * 8192


# ---------------------------------------------------------------------- table sets
def _stats(t):
    return {"median_s": t, "p25_s": t * 0.95, "p75_s": t * 1.05, "iqr_rel": 0.1,
            "noisy": False, "num_samples": 5, "samples_s": f"{t:.4g}"}


def _prov(device="Test GPU", **kw):
    return {"kind": "measured", "engine": "servesim-harness", "engine_version": "9.9",
            "device_name": device, **kw}


def _rec():
    return {"source_project": "servesim", "commit": "abc", "file": "x.py", "method": "m"}


def _attn(kernel, batch, ctx, t):
    return {"dtype": "bf16", "kv_dtype": "bf16", "q_heads": 8, "kv_heads": 2, "head_dim": 64,
            "window": 0, "kernel": kernel, "batch": batch, "ctx_mean": ctx, **_stats(t)}


def _gemm(m, t, n=128, k=128, dtype="bf16"):
    return {"dtype": dtype, "m": m, "n": n, "k": k, "op": "x", **_stats(t)}


def test_write_read_merge_and_check(tmp_path):
    d = tmp_path / "prof" / "tables" / "servesim-harness-9.9"
    rows = write_table_set(d, {"gemm": [_gemm(1, 1e-5), _gemm(2, 2e-5)]},
                           _prov(models={"a": 1}), {"gemm": _rec()}, "csv")
    assert rows == {"gemm": 2} and (d / "gemm.csv").is_file()
    # the same point again replaces its row; a new point is added; parquet replaces csv
    rows = write_table_set(d, {"gemm": [_gemm(2, 3e-5), _gemm(4, 4e-5)],
                               "attention_decode": [_attn("sdpa", 1, 16, 1e-5)]},
                           _prov(models={"b": 2}, default_kernel={"attention_decode": "sdpa"}),
                           {"gemm": _rec(), "attention_decode": _rec()}, "parquet")
    assert rows == {"gemm": 3, "attention_decode": 1}
    assert (d / "gemm.parquet").is_file() and not (d / "gemm.csv").exists()
    s = read_table_set(tmp_path / "prof")  # a profile with one set resolves to it
    assert s.folder == d and not s.flat
    g = s.tables["gemm"].set_index("m")["median_s"]
    assert g.to_dict() == {1: 1e-5, 2: 3e-5, 4: 4e-5}
    prov = yaml.safe_load((d / "provenance.yaml").read_text())
    assert prov["models"] == {"a": 1, "b": 2}
    assert prov["tables"]["gemm"]["rows"] == 3 and prov["tables"]["attention_decode"]["rows"] == 1
    assert prov["default_kernel"] == {"attention_decode": "sdpa"}
    assert check_table_set(d) == {"gemm": 3, "attention_decode": 1}
    with pytest.raises(ValueError, match="measured on 'Test GPU'"):
        write_table_set(d, {"gemm": [_gemm(1, 1e-5)]}, _prov("Other GPU"), {"gemm": _rec()})


def test_check_rejects_bad_tables(tmp_path):
    d = tmp_path / "s"
    write_table_set(d, {"gemm": [_gemm(1, 1e-5)]}, _prov(), {"gemm": _rec()}, "csv")
    df = pd.read_csv(d / "gemm.csv")
    pd.concat([df, df]).to_csv(d / "gemm.csv", index=False)
    with pytest.raises(ValueError, match="repeat a key"):
        check_table_set(d)
    df.assign(median_s=-1.0).to_csv(d / "gemm.csv", index=False)
    with pytest.raises(ValueError, match="positive"):
        check_table_set(d)
    df.drop(columns=["k"]).to_csv(d / "gemm.csv", index=False)
    with pytest.raises(ValueError, match=r"gemm.csv: latency table lacks column\(s\) k"):
        read_table_set(d)
    (d / "gemm.csv").unlink()
    (d / "gemm.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="gemm.parquet: cannot read"):
        read_table_set(d)


def test_flat_v1_profile_reads_as_one_set():
    s = read_table_set(REPO_ROOT / "hardware_profiles" / "cpu-amd-epyc-1t")
    assert s.flat
    pre, dec = s.tables["attention_prefill"], s.tables["attention_decode"]
    assert (pre["batch"] == 1).all() and (pre["window"] == 0).all()
    assert (pre["kv_dtype"] == pre["dtype"]).all() and (pre["kernel"] == "").all()
    raw = pd.read_csv(REPO_ROOT / "hardware_profiles" / "cpu-amd-epyc-1t" /
                      "attention_decode.csv")
    assert len(dec) == int((raw["dist"] == "uniform").sum()) < len(raw)
    assert set(s.tables["gemm"].columns) >= {"dtype", "m", "n", "k", "median_s"}
    assert normalize_dtype("bfloat16") == "bf16" and normalize_dtype("half") == "fp16"


def test_profile_with_several_sets_must_name_one(tmp_path):
    for v in ("1", "2"):
        write_table_set(tmp_path / "p" / "tables" / f"e-{v}", {"gemm": [_gemm(1, 1e-5)]},
                        _prov(), {"gemm": _rec()})
    with pytest.raises(ValueError, match="several table sets"):
        resolve_table_set(tmp_path / "p")
    with pytest.raises(ValueError, match="no such folder"):
        resolve_table_set(tmp_path / "missing")


# ---------------------------------------------------------------------- compare
def _fake_sets(tmp_path):
    """OURS and THEIRS with known ratios: GEMM 2.0 everywhere it pairs; decode: OURS'
    default kernel (flashinfer) is 3x THEIRS, its other kernel (sdpa) 10x."""
    def t_ours(m):
        return 1e-5 * (1.0 + m / 16.0)
    ours_g = [_gemm(m, t_ours(m)) for m in (1, 2, 4, 8, 16, 64)]
    # THEIRS: the same points 1..8 at half the time; 17 instead of 16 (nearest, at half of
    # OURS(16)); nothing within a factor 2 of 64 (its points stop at 17, then 1024)
    theirs_g = [_gemm(m, t_ours(m) / 2) for m in (1, 2, 4, 8)]
    theirs_g += [_gemm(17, t_ours(16) / 2), _gemm(1024, 1.0)]
    theirs_g += [_gemm(1, 1.0, dtype="fp8")]  # another dtype never pairs
    theirs_g += [_gemm(64, 1.0, n=256)]       # nor another GEMM width (shape, not size)
    base = {(b, c): 1e-5 * b * c / 64 for b in (1, 4) for c in (64, 256)}
    ours_d = [_attn("flashinfer", b, c, 3 * t) for (b, c), t in base.items()]
    ours_d += [_attn("sdpa", b, c, 10 * t) for (b, c), t in base.items()]
    theirs_d = [_attn("vllm_flash_attn", b, c, t) for (b, c), t in base.items()]
    ours = tmp_path / "ours" / "tables" / "servesim-harness-9.9"
    theirs = tmp_path / "theirs" / "tables" / "vllm-0.19.0"
    write_table_set(ours, {"gemm": ours_g, "attention_decode": ours_d},
                    _prov(default_kernel={"attention_decode": "flashinfer"}),
                    {"gemm": _rec(), "attention_decode": _rec()})
    write_table_set(theirs, {"gemm": theirs_g, "attention_decode": theirs_d,
                             "lm_head": [{"dtype": "bf16", "hidden": 64, "vocab": 256,
                                          "rows": 1, **_stats(1e-5)}]},
                    {**_prov(), "engine": "vllm", "engine_version": "0.19.0"},
                    {"gemm": _rec(), "attention_decode": _rec(), "lm_head": _rec()}, "csv")
    return ours, theirs


def test_compare_reports_known_ratios(tmp_path):
    ours, theirs = _fake_sets(tmp_path)
    res = compare_table_sets(ours, tmp_path / "theirs")
    s = res.summary.set_index("family")
    g = s.loc["gemm"]
    assert (g.rows_ours, g.matched, g.exact, g.nearest, g.unmatched) == (6, 5, 4, 1, 1)
    assert g.ratio_median == pytest.approx(2.0) and g.ratio_p10 == pytest.approx(2.0)
    assert g.ratio_p90 == pytest.approx(2.0) and g.exact_ratio_median == pytest.approx(2.0)
    d = s.loc["attention_decode"]
    assert (d.kernel_ours, d.kernel_theirs) == ("flashinfer", "vllm_flash_attn")
    assert (d.rows_ours, d.matched, d.exact) == (4, 4, 4)
    assert d.ratio_median == pytest.approx(3.0) and d.ratio_p90 == pytest.approx(3.0)
    pairs = res.pairs[res.pairs["family"] == "gemm"]
    near = pairs[pairs["match"] == "nearest"].iloc[0]
    assert (near["m"], near["theirs_m"]) == (16, 17)
    assert near["log2_distance"] == pytest.approx(np.log2(18 / 17))
    assert pairs[pairs["m"] == 64]["match"].tolist() == ["none"]
    assert any("lm_head" in n for n in res.notes)
    md = report_markdown(res)
    assert "| gemm | - | 6 | 5 (4 + 1) | 1 | 2.000 | 2.000 | 2.000 | 2.000 |" in md
    assert "| attention_decode | flashinfer / vllm_flash_attn | 4 | 4 (4 + 0) | 0 | 3.000 |" in md
    paths = write_compare_report(res, tmp_path / "out")
    assert pd.read_csv(paths["summary"]).set_index("family").loc["gemm", "matched"] == 5
    assert len(pd.read_csv(paths["pairs"])) == 6 + 4
    # 16 -> 17 is a factor 18/17 = 1.059 in (1 + m): a limit of 1.01 leaves it unpaired
    tight = compare_table_sets(ours, theirs, max_grid_factor=1.01).summary.set_index("family")
    assert tight.loc["gemm", "matched"] == 4
    with pytest.raises(ValueError, match="max_grid_factor"):
        compare_table_sets(ours, theirs, max_grid_factor=1.0)


def test_compare_without_common_family(tmp_path):
    write_table_set(tmp_path / "a", {"gemm": [_gemm(1, 1e-5)]}, _prov(), {"gemm": _rec()})
    write_table_set(tmp_path / "b", {"lm_head": [{"dtype": "bf16", "hidden": 64, "vocab": 256,
                                                  "rows": 1, **_stats(1e-5)}]},
                    _prov(), {"lm_head": _rec()})
    with pytest.raises(ValueError, match="no operator family in common"):
        compare_table_sets(tmp_path / "a", tmp_path / "b")


def test_cli_compare(tmp_path, capsys):
    ours, theirs = _fake_sets(tmp_path)
    assert main(["calibrate", "compare", str(ours), str(theirs), "-o", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "| gemm |" in out and (tmp_path / "r" / "compare.md").is_file()
    assert main(["calibrate", "compare", str(ours), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such folder" in err[0]


def test_cli_compare_needs_no_torch(tmp_path, monkeypatch, capsys):
    import sys
    ours, theirs = _fake_sets(tmp_path)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert main(["calibrate", "compare", str(ours), str(theirs)]) == 0
    assert "| attention_decode | flashinfer / vllm_flash_attn |" in capsys.readouterr().out


def test_report_shows_hostile_names_as_text(tmp_path):
    """Device and kernel names come from the table sets' files: the Markdown shows them as
    written and nothing in them becomes markup or breaks the table (issue 26)."""
    from injection import PAYLOADS, markdown_problems, shown
    label = PAYLOADS["img_onerror"] + " " + PAYLOADS["pipes"] + " " + PAYLOADS["md_js_link"]
    sets = []
    for name in ("ours", "theirs"):
        d = tmp_path / name / "tables" / "servesim-harness-9.9"
        write_table_set(d, {"attention_decode": [_attn(label, 1, 64, 1e-5)]},
                        _prov(device=label, default_kernel={"attention_decode": label}),
                        {"attention_decode": _rec()})
        sets.append(d)
    md = report_markdown(compare_table_sets(*sets))
    assert markdown_problems(md) == []
    assert shown(f"{label} / {label}", markdown=md)  # the kernels' cell
    assert "&lt;img src=x onerror=" in md and r"a\|b \|\| c" in md
