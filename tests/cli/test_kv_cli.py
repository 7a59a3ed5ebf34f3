"""``servesim kv``: KV bytes by formula, fit on a GPU, CLI output and errors."""
from __future__ import annotations

import json
import math

import pytest

from simulator.catalog.hardware import get_gpu
from simulator.cli.kv import kv_estimate
from simulator.cli.main import main


def test_llama3_70b_bytes_per_token():
    e = kv_estimate("llama-3-70b", 64, 4096)
    assert e.kv_bytes_per_token_model == 2 * 80 * 8 * 128 * 2 == 327_680
    assert e.kv_bytes_per_token_per_gpu == 327_680
    # 64 x 4096 x 327,680 B = 85,899,345,920 B = 80 GiB exactly (85.9 GB)
    assert e.kv_bytes_total_model == 64 * 4096 * 327_680 == 85_899_345_920
    assert e.kv_bytes_total_model / 2**30 == 80.0
    # 70B bf16 weights (141 GB) do not fit one 80 GB H100 at all
    assert not e.fits and e.num_gpu_blocks == 0 and e.kv_room_bytes_per_gpu < 0


def test_tp_and_fp8():
    e = kv_estimate("llama-3-70b", 64, 4096, kv_cache_dtype="fp8", tensor_parallel_size=4)
    assert e.kv_bytes_per_token_model == 2 * 80 * 8 * 128 * 1 == 163_840
    assert e.kv_bytes_per_token_per_gpu == 2 * 80 * 2 * 128 * 1 == 40_960
    assert e.kv_bytes_total_per_gpu == 64 * 4096 * 40_960
    # TP 16 > 8 KV heads: heads replicated, one per GPU
    e16 = kv_estimate("llama-3-70b", 1, 1, tensor_parallel_size=16)
    assert e16.kv_bytes_per_token_per_gpu == 2 * 80 * 1 * 128 * 2


def test_fit_by_formula():
    """Llama-3.1-8B, 32 x 8192 tokens on an H100 (vLLM 0.19 accounting, planner docstring).

    weights     = 8,030,261,248 params x 2 + rotary cache 131,072 x 128 x 2 + 32 x 7 x 512
    activations = max(forward, sampler) + cuBLAS (sm90 32 MiB + cuBLASLt 1 MiB), forward =
                  3 x 2 x 8192 x 4096 + 2 x 8192 x 3 x 14336 (gate/up + activation) with
                  8,192 batched tokens; sampler (32 rows) = 2 x 8192 x 4096 + 2 x 2 x 32 x 4096
                  + 2 x 32 x 128256 + 4 x (4 x 32 x 128256)
    reserve     = non-torch 0.25 GiB (vLLM 0.19 TP=1)
    """
    g = get_gpu("h100-sxm")
    b, s = 32, 8192
    e = kv_estimate("llama-3.1-8b", b, s, gpu_memory_utilization=0.9)
    weights = 8_030_261_248 * 2 + 131_072 * 128 * 2 + 32 * 7 * 512
    forward = 3 * 2 * 8192 * 4096 + 2 * 8192 * 3 * 14336
    sampler = 2 * 8192 * 4096 + 2 * 2 * 32 * 4096 + 2 * 32 * 128256 + 4 * (4 * 32 * 128256)
    act = max(forward, sampler) + 32 * 2**20 + 2**20
    reserve = 2**30 // 4
    room = g.hbm_bytes * 0.9 - weights - act - reserve
    blocks = int(room // (16 * 131_072))
    assert e.weight_bytes_per_gpu == weights
    assert e.activation_bytes_per_gpu == act and e.reserve_bytes_per_gpu == reserve
    assert e.kv_room_bytes_per_gpu == pytest.approx(room)
    assert e.num_gpu_blocks == blocks
    assert e.blocks_needed == b * math.ceil(s / 16)
    assert e.fits == (b * math.ceil(s / 16) <= blocks) is True
    assert e.headroom_bytes_per_gpu == pytest.approx(room - b * s * 131_072)
    assert e.max_batch_at_context == blocks // 512
    assert e.max_context_at_batch == (blocks // b) * 16
    # twice the batch no longer fits (64 x 8192 x 128 KiB = 68.7 GB)
    assert not kv_estimate("llama-3.1-8b", 64, 8192).fits


def test_cli_table_and_json(capsys):
    assert main(["kv", "--model", "llama-3-70b", "--batch", "64", "--context", "4096"]) == 0
    out = capsys.readouterr().out
    assert "327,680" in out and "85,899,345,920" in out and "80.000" in out
    assert "does NOT fit" in out
    assert main(["kv", "--model", "meta-llama/Llama-3.1-8B", "--batch", "8", "--context",
                 "1000", "--kv-cache-dtype", "fp8", "--gpu", "h200",
                 "--gpu-memory-utilization", "0.8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kv_bytes_per_token_model"] == 65_536
    assert doc["kv_bytes_total_model"] == 8 * 1000 * 65_536
    assert doc["gpu"] == "h200-sxm" and doc["fits"] is True


@pytest.mark.parametrize("argv, match", [
    (["--model", "nope", "--batch", "1", "--context", "1"], "unknown model"),
    (["--model", "llama-3-8b", "--batch", "0", "--context", "1"], "batch"),
    (["--model", "llama-3-8b", "--batch", "1", "--context", "1", "--gpu", "tpu"], "unknown GPU"),
    (["--model", "llama-3-8b", "--batch", "1", "--context", "1", "--kv-cache-dtype", "fp4"],
     "dtype"),
    (["--model", "llama-3-8b", "--batch", "1", "--context", "1",
      "--gpu-memory-utilization", "1.5"], "gpu_memory_utilization"),
])
def test_cli_errors_exit_2(argv, match, capsys):
    assert main(["kv", *argv]) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1
