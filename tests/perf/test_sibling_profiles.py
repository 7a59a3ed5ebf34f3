"""Sibling GPU profiles (A100 SXM4 40GB, A100 PCIe 80/40GB, H100 PCIe): datasheet specs from
facts.yaml, and the same-die sibling's measured kernel time above its roofline held in seconds
over their own roofline (excess transfer: ``t = R_gpu + t_sib - R_sib`` at a grid node, at least
``R_gpu t_sib / R_sib`` where ``t_sib < R_sib``). Expected times are computed here from one
table row and the two specs' figures (typed in from facts.yaml), not by the code under test."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from record_factories import base_meta, synthetic_stats_rows, write_vllm_run

from simulator.catalog.hardware import get_gpu, load_gpu_spec
from simulator.catalog.models import get_model
from simulator.cli.main import main
from simulator.kv import plan_memory
from simulator.perf import build_operator_backend
from simulator.perf.roofline import RooflinePerfModel
from simulator.perf.tables.sets import TableSet, select_table_set, table_sets

MIB = 2**20


def _row(gpu: str, version: str, family: str, **keys) -> float:
    d = pd.read_parquet(get_gpu(gpu).profile_dir / "tables" / f"vllm-{version}"
                        / f"{family}.parquet")
    for k, v in keys.items():
        d = d[d[k] == v]
    assert len(d) == 1, keys
    return float(d["median_s"].iloc[0])


# ------------------------------------------------------------------------------ specs
@pytest.mark.parametrize(("device", "name", "bf16", "bw", "hbm", "kind", "sibling"), [
    # facts.yaml a100-sxm4-40gb: 312 dense, 1,555 GB/s; memory 40339 MiB as CUDA reports it
    ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb", 312e12, 1.555e12, 42298834944, "nvlink",
     "a100-sxm-80gb"),
    # facts.yaml a100-pcie-80gb: 312, 1,935 GB/s; 81049 MiB (mixbench on this board)
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb", 312e12, 1.935e12, 81049 * MIB, "pcie",
     "a100-sxm-80gb"),
    # facts.yaml variant a100-pcie-40gb: 1,555 GB/s; memory 40339 MiB as CUDA reports it
    # (driver 12.2), the same figure as the SXM4 40GB's: both 40GB parts on one rule
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb", 312e12, 1.555e12, 42298834944, "pcie",
     "a100-sxm-80gb"),
    # facts.yaml h100-pcie-80gb: 756 dense, 2,000 GB/s, NVLink bridge pairs (600 GB/s bidir.)
    ("NVIDIA H100 PCIe", "h100-pcie", 756e12, 2.0e12, 81008 * 2**20, "nvlink", "h100-sxm")])
def test_sibling_specs(device, name, bf16, bw, hbm, kind, sibling):
    g = get_gpu(device)
    assert g.name == name and g.bf16_flops_per_s == bf16
    assert g.hbm_bandwidth_bytes_per_s == bw and g.hbm_bytes == hbm
    assert g.link_kind == kind and g.p2p is True and g.efficiency_tables_from == sibling
    assert g.interconnect_bandwidth_bytes_per_s == (300e9 if kind == "nvlink" else 32e9)
    assert g.source and g.price_source


def test_prices_only_where_sourced():
    # facts.yaml prices the A100 40GB only as AWS p4d (SXM4): $14.75 / 8 GPUs per hour
    assert get_gpu("a100-sxm-40gb").usd_per_gpu_hour == pytest.approx(14.75 / 8, abs=1e-3)
    for name in ("a100-pcie-80gb", "a100-pcie-40gb", "h100-pcie"):
        g = get_gpu(name)
        assert g.usd_per_gpu_hour == 0.0
        assert g.price_source.startswith("none:") and "cost.usd_per_gpu_hour" in g.price_source


# ------------------------------------------------------------------------------ transfer
def test_transferred_gemm_memory_bound_row_holds_the_excess_seconds():
    # m=64, n=k=4096 bf16: FLOPs 2*64*4096*4096 = 2.147e9; bytes (64*4096 + 4096^2) * 2 +
    # 64*4096*2 = 34,603,008. On A100 SXM4 80GB: 6.88 us compute < 16.97 us memory; on the
    # PCIe 80GB 6.88 us < 17.88 us: memory-bound on both, so the time above the bound is kept:
    # t_pcie = t_sxm + bytes / 1.935e12 - bytes / 2.039e12
    flops, byts = 2.0 * 64 * 4096 * 4096, (64 * 4096 + 4096 * 4096) * 2 + 64 * 4096 * 2
    assert byts == 34_603_008
    assert flops / 312e12 < byts / 1.935e12 and flops / 312e12 < byts / 2.039e12
    t_sxm = _row("a100-sxm-80gb", "0.14.0", "gemm", dtype="bf16", m=64, n=4096, k=4096)
    assert t_sxm > byts / 2.039e12   # slower than its bound: no guard
    ts = select_table_set(get_gpu("a100-pcie-80gb"), version="0.14.0")
    assert ts.efficiency_from == "a100-sxm-80gb" and ts.transfer == "excess"
    want = t_sxm + byts / 1.935e12 - byts / 2.039e12
    assert ts.gemm(64, 4096, 4096, "bf16") == pytest.approx(want, rel=1e-9)
    # the former rule (efficiency held) scales by the bandwidth ratio
    held = TableSet(ts.folder, ts.gpu, measured_gpu=ts.measured_gpu, transfer="efficiency")
    assert held.gemm(64, 4096, 4096, "bf16") == pytest.approx(t_sxm * 2.039 / 1.935, rel=1e-9)
    # the sibling itself answers its own row
    own = select_table_set(get_gpu("a100-sxm-80gb"), version="0.14.0")
    assert own.gemm(64, 4096, 4096, "bf16") == pytest.approx(t_sxm, rel=1e-9)


def test_transferred_gemm_compute_bound_row_holds_the_excess_seconds():
    # m=n=k=4096 bf16: FLOPs 1.374e11; bytes 3 * 4096^2 * 2 = 100,663,296. H100 SXM: 138.9 us
    # compute > 30.0 us memory; H100 PCIe: 181.8 us > 50.3 us: compute-bound on both, so
    # t_pcie = t_sxm + FLOPs / 756e12 - FLOPs / 989.4e12
    flops, byts = 2.0 * 4096**3, 3 * 4096 * 4096 * 2
    assert flops / 989.4e12 > byts / 3.35e12 and flops / 756e12 > byts / 2.0e12
    t_sxm = _row("h100-sxm", "0.19.0", "gemm", dtype="bf16", m=4096, n=4096, k=4096)
    assert t_sxm > flops / 989.4e12
    ts = select_table_set(get_gpu("h100-pcie"), version="0.19.0")
    assert ts.gemm(4096, 4096, 4096, "bf16") == pytest.approx(
        t_sxm + flops / 756e12 - flops / 989.4e12, rel=1e-9)


def test_transferred_decode_attention_row():
    # batch 16, 1024 tokens attended, 32 query / 8 KV heads of 128, bf16 KV: FLOPs
    # 4*128*32*1024*16 = 268,435,456 (0.86 us at 312 TFLOP/s); bytes 16 * (1024*2*8*128*2 +
    # 2*32*128*2) = 67,371,008 (33.0 us at 2.039 TB/s, 43.3 us at 1.555): memory-bound on
    # both, so the A100 SXM4 40GB takes t_80gb + bytes / 1.555e12 - bytes / 2.039e12
    keys = dict(q_heads=32, kv_heads=8, head_dim=128)
    byts = 16 * (1024 * 2 * 8 * 128 * 2 + 2 * 32 * 128 * 2)
    assert byts == 67_371_008 and 4.0 * 128 * 32 * 1024 * 16 / 312e12 < byts / 2.039e12
    t_80 = _row("a100-sxm-80gb", "0.14.0", "attention_decode", dtype="bf16", kv_dtype="bf16",
                window=0, batch=16, ctx_mean=1024, **keys)
    assert t_80 > byts / 2.039e12
    ts = select_table_set(get_gpu("a100-sxm-40gb"), version="0.14.0")
    got = ts.attention_decode(16, 1024.0, kv_dtype="bf16", **keys)
    assert got == pytest.approx(t_80 + byts / 1.555e12 - byts / 2.039e12, rel=1e-9)


def test_beyond_the_grid_holds_the_edge_efficiency_on_the_board():
    # m = 2 x the largest measured m: the edge node's time on the PCIe board (the excess
    # rule) held at its achieved efficiency against the board's bound (2 m n k / 312e12 or
    # bytes / 1.935e12, whichever is longer)
    g_sxm, g_pcie = get_gpu("a100-sxm-80gb"), get_gpu("a100-pcie-80gb")
    d = pd.read_parquet(g_sxm.profile_dir / "tables" / "vllm-0.14.0" / "gemm.parquet")
    m_max = int(d["m"].max())
    t_edge = _row("a100-sxm-80gb", "0.14.0", "gemm", dtype="bf16", m=m_max, n=4096, k=4096)

    def bound(m, bw):
        return max(2.0 * m * 4096 * 4096 / 312e12,
                   ((m * 4096 + 4096 * 4096) * 2 + m * 4096 * 2) / bw)

    t_edge_pcie = bound(m_max, 1.935e12) + t_edge - bound(m_max, 2.039e12)
    m = 2 * m_max
    ts = select_table_set(g_pcie, version="0.14.0")
    assert ts.gemm(m, 4096, 4096, "bf16") == pytest.approx(
        bound(m, 1.935e12) * t_edge_pcie / bound(m_max, 1.935e12), rel=1e-9)


#: an H100 SXM vLLM 0.19.0 GEMM row measured faster than its roofline bound (L2-resident
#: operands): m=32768, n=32, k=512 bf16, bytes (32768*512 + 512*32) * 2 + 32768*32*2 =
#: 35,684,352 (10.65 us at 3.35 TB/s; FLOPs 1.07e9, 1.09 us at 989.4 TFLOP/s)
_FAST = {"m": 32768, "n": 32, "k": 512}
_FAST_BYTES = (32768 * 512 + 512 * 32) * 2 + 32768 * 32 * 2


def test_measured_above_the_bound_slower_board_keeps_the_excess():
    # H100 PCIe: 17.84 us memory bound > 1.42 us compute; the (negative) excess is kept, which
    # is above the efficiency transfer R_pcie t / R_sxm because R_pcie > R_sxm
    assert _FAST_BYTES == 35_684_352 and 2.0 * 32768 * 32 * 512 / 756e12 < _FAST_BYTES / 2.0e12
    t = _row("h100-sxm", "0.19.0", "gemm", dtype="bf16", **_FAST)
    r_sxm, r_pcie = _FAST_BYTES / 3.35e12, _FAST_BYTES / 2.0e12
    assert t < r_sxm   # e > 1
    want = r_pcie + t - r_sxm
    assert want > r_pcie * t / r_sxm
    ts = select_table_set(get_gpu("h100-pcie"), version="0.19.0")
    assert ts.gemm(32768, 32, 512, "bf16") == pytest.approx(want, rel=1e-9)


def test_measured_above_the_bound_faster_board_is_guarded():
    # H200 SXM answered from H100 SXM (the benchmark's pair): R_h200 = 7.43 us < R_h100, so
    # R_h200 + t - R_h100 falls below the efficiency transfer R_h200 t / R_h100: the guard
    # gives the latter (> 0)
    t = _row("h100-sxm", "0.19.0", "gemm", dtype="bf16", **_FAST)
    r_h100, r_h200 = _FAST_BYTES / 3.35e12, _FAST_BYTES / 4.8e12
    assert t < r_h100 and r_h200 + t - r_h100 < r_h200 * t / r_h100
    moved = dataclasses.replace(get_gpu("h200-sxm"), efficiency_tables_from="h100-sxm",
                                profile_dir=None)
    ts = select_table_set(moved, version="0.19.0")
    assert ts.efficiency_from == "h100-sxm"
    got = ts.gemm(32768, 32, 512, "bf16")
    assert got > 0 and got == pytest.approx(r_h200 * t / r_h100, rel=1e-9)


def test_unknown_transfer_rule_is_a_clear_error():
    ts = select_table_set(get_gpu("h100-pcie"), version="0.19.0")
    with pytest.raises(ValueError, match="transfer='copy': expected one of excess, efficiency"):
        TableSet(ts.folder, ts.gpu, measured_gpu=ts.measured_gpu, transfer="copy")


def test_communication_tables_not_transferred():
    sib, new = get_gpu("a100-sxm-80gb"), get_gpu("a100-pcie-80gb")
    assert any(s.engine == "nccl" for s in table_sets(sib))
    assert not any(s.engine == "nccl" for s in table_sets(new))
    ts = select_table_set(new)
    assert select_table_set(sib).has("all_reduce", num_gpus=2)
    assert not ts.has("all_reduce", num_gpus=2) and not ts.has("nccl", collective="all_reduce")
    assert "all_reduce" not in ts.families() and "gemm" in ts.families()
    model = get_model("llama-3.1-8b")
    ops = build_operator_backend(model, new, 2)
    link = RooflinePerfModel(model, new, 2)   # the spec's link model (PCIe Gen4, 32 GB/s)
    for tokens in (1, 64, 4096):
        assert ops.all_reduce_time(tokens, graph=True) == link.all_reduce_time(tokens, True)
    prov = ops.provenance()["all_reduce"]
    assert prov.startswith("link model of a100-pcie-80gb's spec (pcie, 32 GB/s, 10 us")
    assert "a100-sxm-80gb's communication tables not transferred" in prov


def test_provenance_labels_name_both_gpus():
    ops = build_operator_backend(get_model("llama-3.1-8b"), get_gpu("h100-pcie"), 1,
                                 engine_version="0.19.0")
    prov = ops.provenance()
    assert prov["gemm"] == ("measured excess time of h100-sxm (NVIDIA H100 80GB HBM3, vLLM "
                            "0.19.0; aiconfigurator 095f58a gemm_perf.parquet) over h100-pcie's "
                            "datasheet roofline")
    for op in ("attention_prefill", "attention_decode", "lm_head"):
        assert prov[op].startswith("measured excess time of h100-sxm (NVIDIA H100 80GB HBM3")
        assert "over h100-pcie's datasheet roofline" in prov[op]


def test_bad_efficiency_source_is_a_clear_error(tmp_path):
    base = ("name: x\nbf16_flops_per_s: 1.0e14\nhbm_bytes: 1.0e10\n"
            "hbm_bandwidth_bytes_per_s: 1.0e12\n")
    p = tmp_path / "a.yaml"
    p.write_text(base + "efficiency_tables_from: [a100-sxm-80gb]\n")
    with pytest.raises(ValueError, match="efficiency_tables_from=.* must name another GPU"):
        load_gpu_spec(p)
    p.write_text(base + "efficiency_tables_from: no-such-gpu\n")
    with pytest.raises(ValueError, match="'x': efficiency_tables_from: unknown GPU 'no-such"):
        table_sets(load_gpu_spec(p))
    p.write_text(base + "efficiency_tables_from: a100-pcie-80gb\n")   # itself transferred
    with pytest.raises(ValueError, match="itself transfers tables from 'a100-sxm-80gb'"):
        table_sets(load_gpu_spec(p))


# ------------------------------------------------------------------------------ end to end
def test_profiles_lists_the_siblings_and_their_tables(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.count("│") > 3}
    for name, sib in (("a100-sxm-40gb", "a100-sxm-80gb"), ("a100-pcie-80gb", "a100-sxm-80gb"),
                      ("a100-pcie-40gb", "a100-sxm-80gb"), ("h100-pcie", "h100-sxm")):
        assert f"measured excess time of {sib}" in lines[name], lines[name]
    assert "│ none" in lines["a100-pcie-80gb"] and "1.84" in lines["a100-sxm-40gb"]


def test_scenario_on_a100_pcie_runs_with_its_memory(tmp_path):
    out = tmp_path / "o"
    assert main(["run", "default", "-q", "--no-figures", "-o", str(out),
                 "--set", "hardware.gpu=a100-pcie-80gb", "--set", "workload.max_requests=20",
                 "--set", "cost.usd_per_gpu_hour=null"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["provenance"]["gemm"].startswith("measured excess time of a100-sxm-80gb")
    assert s["usd_per_gpu_hour"] == 0.0 and s["num_completed"] == 20
    # KV blocks: the 80 GiB SXM4 plan (GA100: 108 SMs, sm80) less 0.9 x (80 GiB - 81049 MiB)
    # of budget, in blocks of 16 tokens x 131,072 B (Llama-3.1-8B bf16)
    model = get_model("llama-3.1-8b")
    sxm = plan_memory(model, 80 * 2**30, gpu_memory_utilization=0.9, block_size=16,
                      max_num_batched_tokens=8192, max_num_seqs=256, num_sms=108,
                      compute_capability=(8, 0))
    want = int((sxm.kv_bytes - 0.9 * (80 * 2**30 - 81049 * MIB)) // (16 * 131072))
    assert s["num_gpu_blocks"] == want < sxm.num_gpu_blocks


def test_validate_recorded_on_a100_pcie_replays(tmp_path):
    meta = {**base_meta(), "vllm_version": "0.22.0",
            "hardware": {"device_name": "NVIDIA A100 80GB PCIe"}}
    folder = write_vllm_run(tmp_path / "rec", synthetic_stats_rows(4), meta)
    out = tmp_path / "o"
    assert main(["validate", "--recorded", str(folder), "-o", str(out), "-q"]) == 0
    v = json.loads(next(out.rglob("validation.json")).read_text())
    assert any("a100-pcie-80gb has no kernel measurement of its own" in a
               and "measured excess time of a100-sxm-80gb" in a for a in v["approximations"])
    assert v["provenance"]["attention_decode"].endswith("over a100-pcie-80gb's datasheet "
                                                        "roofline")
