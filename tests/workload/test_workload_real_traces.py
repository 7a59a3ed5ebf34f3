"""The public traces in ../shared (skipped when absent); expected values from their README."""
from __future__ import annotations

import numpy as np

from simulator.workload import WorkloadConfig, describe_workload, load_workload, read_trace

AZURE = "traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
VIDUR = "reference/vidur/data/processed_traces/splitwise_conv.csv"
MOONCAKE = "traces/mooncake_fast25/synthetic_trace.jsonl"


def test_azure_conv(shared_file):
    path = shared_file(AZURE)
    reqs = load_workload(WorkloadConfig(trace=str(path)), seed=0)
    d = describe_workload(reqs)
    assert d["count"] == 19_366
    assert abs(d["duration_s"] - 3501.7) < 0.05
    assert reqs[0].arrival_time_s == 0.0
    assert d["prompt_tokens"]["p50"] == 1020 and d["output_tokens"]["p50"] == 129
    # inverse CDF: the ceil(0.9 x 19,366) = 17,430th smallest prompt (the 17,429th is 2,734;
    # linear interpolation gave 2,734.5)
    assert d["prompt_tokens"]["p90"] == 2735 and d["output_tokens"]["p90"] == 424
    assert d["prompt_tokens"]["max"] == 14050 and d["output_tokens"]["max"] == 1000
    assert abs(d["interarrival_cv"] - 1.094) < 0.001
    assert d["peak_requests_in_1s"] == 16
    # README: 2023-11-16 18:15:46.6805900 -> 19:14:08.4025270 = 3501.7219370 s
    assert round(reqs[-1].arrival_time_s * 1e7) == 35_017_219_370


def test_azure_window_and_scale(shared_file):
    path = shared_file(AZURE)
    full = read_trace(path)
    reqs = load_workload(WorkloadConfig(trace=str(path), start_s=600, end_s=1200,
                                        rate_scale=2.0), seed=0)
    t = np.array([r.arrival_time_s for r in full])
    inside = (t >= 600) & (t < 1200)
    assert len(reqs) == int(inside.sum())
    assert np.allclose([r.arrival_time_s for r in reqs], (t[inside] - 600) / 2)


def test_vidur_splitwise_matches_azure(shared_file):
    azure = read_trace(shared_file(AZURE))
    vidur = read_trace(shared_file(VIDUR))
    assert len(vidur) == len(azure) == 19_366
    assert [r.num_prompt_tokens for r in vidur] == [r.num_prompt_tokens for r in azure]
    assert [r.num_output_tokens for r in vidur] == [r.num_output_tokens for r in azure]
    diff = np.abs(np.array([r.arrival_time_s for r in vidur])
                  - np.array([r.arrival_time_s for r in azure]))
    assert diff.max() < 1e-6  # Vidur rounds to microseconds


def test_mooncake_synthetic(shared_file):
    reqs = read_trace(shared_file(MOONCAKE))
    assert len(reqs) == 3_993
    assert all(r.prefix_hash_ids is not None and r.prefix_block_tokens == 512 for r in reqs)
    assert all(len(r.prefix_hash_ids) == -(-r.num_prompt_tokens // 512) for r in reqs)
    d = describe_workload(reqs)
    assert abs(d["duration_s"] - 1022.025) < 1e-6
    assert d["prompt_tokens"]["p50"] == 11587 and d["output_tokens"]["p50"] == 69
    # README: 64% of prompt blocks are hits with an unbounded prefix cache
    seen: set[int] = set()
    hits = total = 0
    for r in reqs:
        for h in r.prefix_hash_ids:
            hits += h in seen
            seen.add(h)
            total += 1
    assert abs(hits / total - 0.64) < 0.01
