"""Writers of small recorded real-engine runs (the formats ``simulator.observe`` reads), from
explicit values, for the observe tests. Import with ``from record_factories import ...``."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

#: Three requests in vLLM ``RequestStateStats`` form (seconds on the engine clock); the tests
#: derive every expected latency from these numbers by hand.
STATS_ROWS = [
    {"request_id": "bench-0", "input_toks": 40, "output_toks": 11, "arrival_time": 5000.25,
     "queued_ts": 100.5, "scheduled_ts": 100.75, "first_token_ts": 101.5,
     "last_token_ts": 106.5},
    {"request_id": "bench-1", "input_toks": 33, "output_toks": 3, "arrival_time": 4999.75,
     "queued_ts": 100.0, "scheduled_ts": 100.0, "first_token_ts": 100.25,
     "last_token_ts": 100.75},
    {"request_id": "bench-2", "input_toks": 20, "output_toks": 1, "arrival_time": 5002.75,
     "queued_ts": 103.0, "scheduled_ts": 103.5, "first_token_ts": 104.0,
     "last_token_ts": 104.0},
]

#: Prompt token ids of the three requests (workload lines 1..3): bench-1 repeats the first 32
#: tokens of bench-0, then differs.
TOKEN_IDS = [list(range(1, 41)), list(range(1, 33)) + [7777], list(range(500, 520))]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def base_meta(**engine_kwargs) -> dict:
    ek = {"model": "meta-llama/Llama-3.1-8B", "tensor_parallel_size": 1,
          "data_parallel_size": 1, "enable_expert_parallel": False, "max_num_seqs": 8,
          "max_num_batched_tokens": 64, "max_model_len": None, "dtype": "bfloat16",
          "kv_cache_dtype": "auto", "seed": 7}
    ek.update(engine_kwargs)
    return {"schema_version": 1, "model": ek["model"], "vllm_version": "0.19.0",
            "engine_kwargs": ek, "num_requests": 3,
            "started_at": "2026-01-01T00:00:00Z"}


def write_vllm_run(root: Path, rows: list[dict] | None = None, meta: dict | None = None, *,
                   workload: list[dict] | None = None, good_hash: bool = True,
                   timeseries: str | None = None, name: str = "H100/Llama") -> Path:
    """An LLMServingSim-style run: ``root/bench/examples/<name>/vllm/{requests.jsonl,
    meta.json[, timeseries.csv]}`` and, with ``workload``, ``root/workloads/w.jsonl`` named by
    ``meta.json`` ``dataset_path`` (with its SHA-256 as ``dataset_hash`` when ``good_hash``).
    Returns the run folder (the parent of ``vllm/``)."""
    run = root / "bench" / "examples" / name
    vdir = run / "vllm"
    write_jsonl(vdir / "requests.jsonl", STATS_ROWS if rows is None else rows)
    meta = dict(base_meta() if meta is None else meta)
    if workload is not None:
        wl = write_jsonl(root / "workloads" / "w.jsonl", workload)
        meta["dataset_path"] = "workloads/w.jsonl"
        meta["dataset_hash"] = sha256(wl) if good_hash else "0" * 64
    (vdir / "meta.json").write_text(json.dumps(meta, indent=2))
    if timeseries is not None:
        (vdir / "timeseries.csv").write_text(timeseries)
    return run


def workload_rows(rows: list[dict] | None = None, ids: list[list[int]] | None = None) -> list:
    """Workload lines matching ``STATS_ROWS`` (line N+1 = bench-N)."""
    rows = STATS_ROWS if rows is None else rows
    ids = TOKEN_IDS if ids is None else ids
    by_index = sorted(rows, key=lambda r: int(r["request_id"].split("-")[1]))
    return [{"input_toks": r["input_toks"], "output_toks": r["output_toks"],
             "arrival_time_ns": 0, "input_tok_ids": t} for r, t in zip(by_index, ids)]


def synthetic_stats_rows(n: int, *, rate_rps: float = 4.0, prompt: int = 300,
                         output: int = 40, seed: int = 3) -> list[dict]:
    """``n`` plausible request records (Poisson arrivals, 20 ms per output token after a
    100 ms first token); values only need to be well-formed, not realistic."""
    rng = np.random.default_rng(seed)
    t = 50.0 + np.cumsum(rng.exponential(1.0 / rate_rps, n))
    out = []
    for i in range(n):
        q = float(t[i])
        first = q + 0.1
        out.append({"request_id": f"bench-{i}", "input_toks": prompt + 7 * i,
                    "output_toks": output + i, "arrival_time": 1.0e9 + q, "queued_ts": q,
                    "scheduled_ts": q + 0.01, "first_token_ts": first,
                    "last_token_ts": first + 0.02 * (output + i - 1)})
    return out


def bench_result(**over) -> dict:
    """A ``vllm bench serve --save-result --save-detailed`` result: three successful requests
    and a failed one. Binary-exact numbers (sums and differences are exact in floating point).
    """
    d = {
        "date": "20260101-000000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
        "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": 4, "request_rate": 4.0,
        "burstiness": 1.0, "max_concurrency": None, "duration": 5.0, "completed": 3,
        "input_lens": [100, 200, 50, 30],
        "output_lens": [10, 5, 1, 0],
        "ttfts": [0.25, 0.5, 0.125, 0.0],
        "itls": [[0.125] * 9, [0.25] * 4, [], []],
        "latencies": [1.375, 1.5, 0.125, 0.0],
        "start_times": [1000.5, 1000.0, 1002.25, 1001.0],
        "errors": ["", "", "", "server error"],
        "generated_texts": ["", "", "", ""],
    }
    d.update(over)
    return d
