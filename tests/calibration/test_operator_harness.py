"""Operator-level harness (format v2): paged layout, attention kernels, timer, CPU end to end,
and a CUDA end-to-end run (``gpu``: skipped without a CUDA device).

Correctness checks compare against references written here (per-sequence attention from the
definition; slot addresses from the block-table rule), never against the code under test.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

torch = pytest.importorskip("torch")
from helpers import micro_llama

from calibration import HARNESS_VERSION
from calibration.dispatch import calibrate
from calibration.grids import operator_grid
from calibration.ops import gemm_shapes
from calibration.paged import (
    build_paged_layout,
    check_kernel,
    make_attention,
    new_kv_pool,
    sdpa_paged_attention,
    select_kernels,
)
from calibration.tableset import check_table_set, read_table_set
from calibration.timing import OpTimer, TimerSettings, _fit_repeats
from simulator.cli.main import main

MICRO = micro_llama()
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def micro_config(tmp_path):
    p = tmp_path / "micro" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(MICRO.hf_config()))
    return str(p)


# ---------------------------------------------------------------------- paged layout
def test_block_table_by_hand():
    # lengths 5 and 3, blocks of 4, no shuffle: seq 0 gets blocks 1, 2; seq 1 gets block 3;
    # block 0 is the null block (padding)
    lay = build_paged_layout([5, 3], block_size=4, shuffle=False)
    assert lay.block_table.tolist() == [[1, 2], [3, 0]]
    assert lay.num_blocks == 4
    assert lay.slots_of(0).tolist() == [4, 5, 6, 7, 8]      # block 1 offsets 0-3, block 2 offset 0
    assert lay.slots_of(1).tolist() == [12, 13, 14]         # block 3 offsets 0-2
    indptr, indices, last = lay.flashinfer_metadata()
    assert indptr.tolist() == [0, 2, 3] and indices.tolist() == [1, 2, 3]
    assert last.tolist() == [1, 3]
    with pytest.raises(ValueError, match="cannot hold"):
        build_paged_layout([5, 3], block_size=4, num_blocks=3)
    with pytest.raises(ValueError, match=">= 1"):
        build_paged_layout([0], block_size=4)


def test_shuffled_block_tables_address_exactly_each_sequence():
    lens = [1, 16, 17, 40]
    bs = 16
    lay = build_paged_layout(lens, bs, num_blocks=50, seed=3)
    used = [b for i in range(4) for b in lay.blocks_of(i).tolist()]
    assert [len(lay.blocks_of(i)) for i in range(4)] == [1, 1, 2, 3]
    assert len(set(used)) == len(used) and 0 not in used and max(used) < 50
    # tag every token of every sequence in a flat pool through its slots, then read the
    # pool back through the block-table rule: block_table[i, t // bs] * bs + t % bs
    pool = np.full(50 * bs, -1)
    for i, L in enumerate(lens):
        pool[lay.slots_of(i)] = [1000 * i + t for t in range(L)]
    for i, L in enumerate(lens):
        got = [pool[lay.block_table[i, t // bs] * bs + t % bs] for t in range(L)]
        assert got == [1000 * i + t for t in range(L)]
    assert (pool >= 0).sum() == sum(lens)  # nothing else written


# ---------------------------------------------------------------------- attention
def _reference(q, k_pool, v_pool, lay, q_lens):
    """Per-sequence causal GQA attention from the definition (float64)."""
    bs = lay.block_size
    kvh, d = k_pool.shape[2], k_pool.shape[3]
    kf = k_pool.reshape(-1, kvh, d).double()
    vf = v_pool.reshape(-1, kvh, d).double()
    rep = q.shape[1] // kvh
    outs, row = [], 0
    for i, n in enumerate(q_lens):
        L = int(lay.seq_lens[i])
        slots = torch.as_tensor(lay.slots_of(i))
        K = kf[slots].repeat_interleave(rep, 1)      # (L, heads, d)
        V = vf[slots].repeat_interleave(rep, 1)
        qi = q[row:row + n].double()                 # (n, heads, d)
        s = torch.einsum("nhd,lhd->hnl", qi, K) / math.sqrt(d)
        start = L - n
        vis = torch.arange(L).view(1, -1) <= (start + torch.arange(n)).view(-1, 1)
        s = s.masked_fill(~vis, float("-inf"))
        outs.append(torch.einsum("hnl,lhd->nhd", s.softmax(-1), V))
        row += n
        assert bs == lay.block_size
    return torch.cat(outs)


def test_sdpa_decode_over_paged_cache_equals_per_sequence_reference():
    torch.manual_seed(0)
    lens = [1, 16, 17, 33, 5]       # one token, exactly one block, one past a block, ...
    lay = build_paged_layout(lens, 16, num_blocks=20, seed=1)
    k, v = new_kv_pool(lay.num_blocks, 16, 2, 8, "cpu", torch.float32, seed=2)
    q = torch.randn(len(lens), 4, 8)
    got = sdpa_paged_attention(q, k, v, lay.block_table, lay.seq_lens, [1] * len(lens))
    want = _reference(q, k, v, lay, [1] * len(lens))
    assert got.shape == (5, 4, 8)
    assert torch.allclose(got.double(), want, atol=1e-5)
    run = make_attention("sdpa", k, v, lay, [1] * len(lens), 4)
    assert torch.allclose(run(q).double(), want, atol=1e-5)
    # equal lengths (the harness's grid points) take the unmasked path: 20 = 16 + 4 tokens
    lay3 = build_paged_layout([20, 20, 20], 16, num_blocks=10, seed=8)
    q3 = torch.randn(3, 4, 8)
    got3 = make_attention("sdpa", k[:10], v[:10], lay3, [1, 1, 1], 4)(q3)
    assert torch.allclose(got3.double(), _reference(q3, k[:10], v[:10], lay3, [1, 1, 1]),
                          atol=1e-5)


def test_sdpa_chunked_prefill_with_cached_prefix_equals_reference():
    torch.manual_seed(1)
    q_lens, lens = [3, 7, 1], [3, 20, 9]     # start = 0, 13, 8 cached tokens
    lay = build_paged_layout(lens, 4, seed=4)
    k, v = new_kv_pool(lay.num_blocks, 4, 1, 16, "cpu", torch.float32, seed=5)
    q = torch.randn(sum(q_lens), 2, 16)
    got = make_attention("sdpa", k, v, lay, q_lens, 2)(q)
    assert torch.allclose(got.double(), _reference(q, k, v, lay, q_lens), atol=1e-5)
    # uniform chunks (the harness's grid points) take the unpadded path
    lay2 = build_paged_layout([12, 12], 4, seed=6)
    k2, v2 = new_kv_pool(lay2.num_blocks, 4, 1, 16, "cpu", torch.float32, seed=7)
    q2 = torch.randn(8, 2, 16)
    got2 = make_attention("sdpa", k2, v2, lay2, [4, 4], 2)(q2)
    assert torch.allclose(got2.double(), _reference(q2, k2, v2, lay2, [4, 4]), atol=1e-5)


def test_kernel_selection_on_cpu():
    kernels, skipped = select_kernels("auto", "cpu", torch.float32, 4, 2, 16, log=lambda s: None)
    assert kernels == ["sdpa"] and skipped["flash_attn"] == "CUDA only"
    with pytest.raises(ValueError, match="flashinfer"):
        select_kernels("flashinfer", "cpu", torch.float32, 4, 2, 16, log=lambda s: None)
    with pytest.raises(ValueError, match="--attention-backend"):
        select_kernels("xformers", "cpu", torch.float32, 4, 2, 16)


def test_gemm_shapes_by_hand():
    # qkv: (4 + 2*2) heads x 16 = 128 out, 64 in; o: 64 <- 64; gate_up: 256 <- 64;
    # down: 64 <- 128; LM head: 256 <- 64 (same shape as gate_up: measured once)
    assert gemm_shapes(MICRO) == {(128, 64): ["qkv_proj"], (64, 64): ["o_proj"],
                                  (256, 64): ["mlp_gate_up", "lm_head"],
                                  (64, 128): ["mlp_down"]}


# ---------------------------------------------------------------------- timer
def test_fit_repeats_and_cpu_timer():
    assert _fit_repeats(30, 0.01, 2.0) == 30          # 0.3 s <= 2 s
    assert _fit_repeats(30, 0.1, 2.0) == 20           # 2 s / 0.1 s
    assert _fit_repeats(30, 5.0, 2.0) == 3            # never below 3
    t = OpTimer("cpu", TimerSettings(warmup=1, repeats=4))
    x = torch.randn(32, 32)
    r = t.time(lambda: x @ x, graph=True)
    assert len(r.samples_s) == 4 and all(s > 0 for s in r.samples_s) and not r.cuda_graph
    assert not t.flush_l2


# ---------------------------------------------------------------------- end to end (CPU)
def test_calibrate_v2_on_cpu_writes_a_table_set(micro_config, tmp_path):
    out = tmp_path / "prof"
    set_dir = calibrate(micro_config, out, device="cpu", quick=True, max_num_seqs=3,
                        max_num_batched_tokens=16, max_context=64, log=lambda s: None,
                        table_format="v2", file_format="csv")
    assert set_dir == out / "tables" / f"servesim-harness-{HARNESS_VERSION}"
    assert (out / "spec.yaml").is_file()
    rows = check_table_set(set_dir)
    assert set(rows) == {"gemm", "attention_decode", "attention_prefill", "elementwise",
                         "lm_head"}
    data = read_table_set(out)
    grid = operator_grid(16, 3, 64, 1 << 22, 64 * 4, quick=True)
    g = data.tables["gemm"]
    assert set(zip(g["n"], g["k"])) == {(128, 64), (64, 64), (256, 64), (64, 128)}
    assert sorted(set(g["m"])) == grid.gemm_m and (g["dtype"] == "float32").all()
    assert set(g["op"]) == {"qkv_proj", "o_proj", "mlp_gate_up+lm_head", "mlp_down"}
    d = data.tables["attention_decode"]
    assert set(zip(d["batch"], d["ctx_mean"])) == set(grid.decode_points())
    assert (d["kernel"] == "sdpa").all() and (d["block_size"] == 16).all()
    assert ((d["q_heads"] == 4) & (d["kv_heads"] == 2) & (d["head_dim"] == 16)).all()
    p = data.tables["attention_prefill"]
    assert set(zip(p["batch"], p["q"], p["start"])) == set(grid.prefill_points())
    assert (data.tables["lm_head"]["vocab"] == 256).all()
    for df in data.tables.values():
        assert (df["median_s"] > 0).all() and (df["num_samples"] >= 3).all()
    prov = yaml.safe_load((set_dir / "provenance.yaml").read_text())
    assert prov["kind"] == "measured" and prov["engine"] == "servesim-harness"
    assert prov["engine_version"] == HARNESS_VERSION and prov["device_name"]
    assert prov["default_kernel"] == {"attention_decode": "sdpa", "attention_prefill": "sdpa"}
    assert prov["timer"]["clock"] == "time.perf_counter" and prov["dtype"] == "float32"
    for fam, n in rows.items():
        rec = prov["tables"][fam]
        assert rec["rows"] == n and rec["source_project"] == "servesim"
        for k in ("commit", "file", "engine_version", "device", "license", "changes",
                  "harness_version", "torch_version", "cuda_version", "driver", "date",
                  "method"):
            assert k in rec, (fam, k)
        assert rec["torch_version"] == torch.__version__
    assert "micro-llama tp1" in prov["models"]
    # calibrating the same shapes again replaces rows instead of adding them
    calibrate(micro_config, out, device="cpu", quick=True, max_num_seqs=3,
              max_num_batched_tokens=16, max_context=64, log=lambda s: None,
              table_format="v2", file_format="csv")
    assert check_table_set(set_dir) == rows


def test_cli_rejects_v2_options_with_v1(capsys):
    assert main(["calibrate", "--device", "cpu", "--format", "v1", "--no-flush-l2",
                 "-o", "/tmp/never-written"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "flush_l2" in err[0] and "--format v2" in err[0]


# ---------------------------------------------------------------------- CUDA
@pytest.mark.gpu
def test_installed_attention_kernels_agree_with_sdpa_on_cuda():
    kernels, _ = select_kernels("all", "cuda", torch.bfloat16, 8, 2, 128,
                                      log=lambda s: None)
    assert kernels[-1] == "sdpa"
    for k in kernels:
        assert check_kernel(k, "cuda", torch.bfloat16, 8, 2, 128) is None, k


@pytest.mark.gpu
def test_calibrate_v2_on_cuda_end_to_end(micro_config, tmp_path):
    out = tmp_path / "gpu"
    set_dir = calibrate(micro_config, out, device="cuda", quick=True, max_num_seqs=4,
                        max_num_batched_tokens=64, max_context=128, log=lambda s: None,
                        attention_backend="all", warmup=2, repeats=5, collectives=False)
    rows = check_table_set(set_dir)
    assert {"gemm", "attention_decode", "attention_prefill", "elementwise", "lm_head"} <= set(rows)
    data = read_table_set(set_dir)
    prov = data.provenance
    assert prov["dtype"] == "bf16" and prov["cuda_version"] and prov["timer"]["flush_l2"]
    assert prov["timer"]["clock"] == "CUDA events"
    assert (data.tables["gemm"]["dtype"] == "bf16").all()
    d = data.tables["attention_decode"]
    assert set(d["kernel"]) == set(prov["attention_kernels"]["measured"])
    assert d["cuda_graph"].astype(bool).any()
    assert (d["median_s"] > 0).all() and (d["median_s"] < 1.0).all()
    try:  # the simulator's v2 reader, once this checkout has it
        from simulator.catalog.hardware import load_gpu_spec
        from simulator.perf.tables.sets import TableSet
    except ImportError:
        return
    ts = TableSet(set_dir, load_gpu_spec(out))
    r = data.tables["gemm"].iloc[0]
    assert ts.gemm(int(r["m"]), int(r["n"]), int(r["k"]), "bf16") > 0
    assert pd.notna(r["median_s"])


def test_collective_sizes_and_single_device_skip():
    from calibration.collectives import elements_for, measure_collectives, world_sizes
    assert world_sizes(1) == [] and world_sizes(6) == [2, 4] and world_sizes(8) == [2, 4, 8]
    assert elements_for("all_reduce", 4096, 2) == 2048          # 4096 B of bf16
    assert elements_for("all_gather", 1000, 3) == 501           # 500 rounded up to 3 | n
    if torch.cuda.device_count() < 2:
        res = measure_collectives([1024], log=lambda s: None)
        assert "all_reduce" not in res and "needs 2+" in res["notes"][0]
