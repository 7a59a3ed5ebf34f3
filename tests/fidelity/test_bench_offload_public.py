"""``benchmarks/bench_offload_public.py`` end to end with ``--quick``: the page, its CSV and
figures are written, and the pipeline does what the reproduction needs (the reading request
misses the GPU and finds every full block but the last in the CPU tier, the copy takes the
tier's bandwidth, the hit prompts are the ones asked for). Expected values are derived by hand
from the workload's sizes; no test asserts a measured error against the published values."""
from __future__ import annotations

import csv
import math
import re

import pytest
from helpers import REPO_ROOT, load_file_module
from md_tables import tables

#: KV bytes of one 16-token block of Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V)
#: x 2 B per token
BLOCK_BYTES = 32 * 8 * 128 * 2 * 2 * 16


@pytest.fixture(scope="module")
def bench():
    return load_file_module(REPO_ROOT / "benchmarks" / "bench_offload_public.py",
                            "bench_offload_public")


@pytest.fixture(scope="module")
def quick(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("offload")
    ctx = bench.run(out, quick=True, progress=lambda m: None)
    return out, ctx


def test_block_bytes_and_fillers(bench):
    assert bench.kv_bytes_per_block() == BLOCK_BYTES == 2 * 2**20
    gpu = bench.gpu_kv_tokens()
    n = bench.num_fillers(gpu)
    assert n * bench.FILLER_TOKENS > gpu >= (n - 1) * bench.FILLER_TOKENS


def test_hit_prompts_first_and_spread(bench):
    assert bench.hit_prompts(10, 0.5, "first") == [0, 1, 2, 3, 4]
    assert bench.hit_prompts(10, 0.5, "spread") == [1, 3, 5, 7, 9]
    assert bench.hit_prompts(10, 0.3, "spread") == [3, 6, 9]
    assert bench.hit_prompts(10, 0.9, "spread") == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert bench.hit_prompts(7, 1.0, "spread") == bench.hit_prompts(7, 1.0, "first") \
        == list(range(7))
    assert bench.hit_prompts(7, 0.0, "spread") == bench.hit_prompts(7, 0.0, "first") == []
    with pytest.raises(ValueError, match="within"):
        bench.hit_prompts(10, 1.5, "first")
    with pytest.raises(ValueError, match="order"):
        bench.hit_prompts(10, 0.5, "last")


def test_read_back_loads_every_full_block_but_the_last_at_the_tier_bandwidth(bench):
    fillers = bench.num_fillers(bench.gpu_kv_tokens())
    r = bench.simulate_ttft(10_000, fillers, offload=True,
                            bandwidth_bytes_per_s=bench.MEASURED_H2D)
    blocks = (10_000 - 1) // 16                      # 624: the 625th is left to compute
    assert (r["gpu_hit_tokens"], r["tier_hit_tokens"]) == (0, blocks * 16)
    copy_s = blocks * BLOCK_BYTES / 48.2e9           # the link is idle: no queueing
    assert r["kv_load_wait_s"] == pytest.approx(copy_s, rel=1e-9)
    assert r["ttft_s"] > copy_s                      # then a step computes the last block
    assert r["first_ttft_s"] > r["ttft_s"]           # the first run computed all of it


def test_without_offload_the_prompt_is_computed_twice_alike(bench):
    fillers = bench.num_fillers(bench.gpu_kv_tokens())
    r = bench.simulate_ttft(10_000, fillers, offload=False)
    assert (r["gpu_hit_tokens"], r["tier_hit_tokens"], r["kv_load_wait_s"]) == (0, 0, 0.0)
    assert r["ttft_s"] == pytest.approx(r["first_ttft_s"], rel=1e-9)  # the same work alone


def test_too_few_fillers_is_caught(bench):
    """Without fillers the GPU still holds the prompt: the check refuses the run."""
    with pytest.raises(bench.PipelineError, match="GPU-hit"):
        bench.simulate_ttft(10_000, 0, offload=True)


def test_batch_hits_are_the_warmed_prompts_and_the_link_bounds_the_span(bench):
    fillers = bench.num_fillers(bench.gpu_kv_tokens())
    r = bench.simulate_batch(40, 0.5, "spread", fillers)
    assert r["num_hit_prompts"] == 20 and r["tier_hit_tokens"] == 20 * 31 * 16
    full = bench.simulate_batch(40, 1.0, "first", fillers,
                                bandwidth_bytes_per_s=bench.MEASURED_H2D)
    assert full["tier_hit_tokens"] == 40 * 31 * 16
    # copies share one host link: the batch lasts at least their serial time
    assert full["span_s"] >= 40 * 31 * BLOCK_BYTES / 48.2e9
    assert full["tokens_per_s"] == pytest.approx(40 * 512 / full["span_s"])


def test_quick_run_writes_page_csv_and_figures(quick):
    out, ctx = quick
    for name in ("offload.md", "offload/offload.csv", "offload/ttft.png",
                 "offload/throughput.png"):
        assert (out / name).is_file(), name
    assert ctx["figures"] == ["ttft.png", "throughput.png"]


def test_csv_has_every_number_and_its_error(bench, quick):
    out, _ = quick
    with (out / "offload" / "offload.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == bench.CSV_COLUMNS
    # figure 1: per prompt two compute budgets, and load + ratio per bandwidth variant;
    # figure 2: per hit rate two orders x two variants; plus the no-offload line
    assert len(rows) == len(bench.QUICK_PROMPTS) * 6 + len(bench.QUICK_RATES) * 4 + 1
    for r in rows:
        sim = float(r["simulated"])
        assert sim > 0 and math.isfinite(sim)
        if r["published"]:
            pub = float(r["published"])
            assert float(r["signed_error"]) == pytest.approx((sim - pub) / pub, rel=1e-4,
                                                             abs=1e-6)
    by = {(r["figure"], r["quantity"], r["x"]) for r in rows}
    assert ("1", "ttft_gpu_compute", "10000") in by and ("2", "prompt_tokens_per_s", "0.5") in by
    pubs = {float(r["published"]) for r in rows if r["quantity"] == "ttft_load_from_cpu"}
    assert pubs == {bench.PUBLISHED_TTFT_MS[n][1] for n in bench.QUICK_PROMPTS}
    base = [r for r in rows if r["x_unit"] == "without offloading"]
    assert len(base) == 1 and float(base[0]["published"]) == 43_800


def test_page_states_command_commit_and_tables(bench, quick):
    out, _ctx = quick
    text = (out / "offload.md").read_text()
    assert re.search(r"Generated by `python benchmarks/bench_offload_public\.py --quick` at "
                     r"commit `[^`]+` on \d{4}-\d{2}-\d{2}\.", text)
    assert bench.SOURCE_URL in text and "offload/offload.csv" in text
    t1, t2 = [t for t in tables(text) if t[0][0] in ("prompt tokens", "CPU hit rate")]
    assert [row[0] for row in t1[1:]] == ["10,000", "50,000"]
    assert [row[1] for row in t1[1:]] == ["267", "2,293"]          # published, digitized
    assert [row[0] for row in t2[1:]] == ["0%", "50%", "100%"]
    # a simulated cell carries its own error: recomputed from the printed numbers
    sim, err = re.fullmatch(r"([\d,.]+) \(([+-][\d.]+) %\)", t2[2][2]).groups()
    assert float(err) == pytest.approx(100 * (float(sim.replace(",", "")) - 74_000) / 74_000,
                                       abs=0.06)


def test_main_reports_a_failed_check_on_one_line(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "num_fillers", lambda gpu_tokens: 0)
    assert bench.main(["--quick", "--no-figures", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("bench_offload_public: error: ") and "GPU-hit" in err[-1]
    assert not (tmp_path / "offload.md").exists()
