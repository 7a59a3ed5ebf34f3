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


# ------------------------------------------------------------------------ inference-perf
#: inference-perf summary keys (``reportgen/base.py``) in file order.
IP_KEYS = ("mean", "min", "p0.1", "p1", "p5", "p10", "p25", "median", "p75", "p90", "p95",
           "p99", "p99.9", "max")

#: The prompt_len summary of :func:`write_ip_run` (tokens): the tests derive the six prompt
#: lengths from these points by hand.
IP_PROMPT_LEN = {"mean": 56.0, "min": 50.0, "median": 56.0, "p90": 60.0, "p99": 61.0,
                 "max": 62.0}


def ip_summary(values, weights=None) -> dict:
    """An inference-perf summary of a sample (``numpy.percentile``, linear), as
    ``reportgen/base.py`` writes it; ``weights`` repeat the values."""
    v = np.repeat(np.asarray(values, dtype=float),
                  1 if weights is None else np.asarray(weights, dtype=np.int64))
    q = {"min": 0, "p0.1": 0.1, "p1": 1, "p5": 5, "p10": 10, "p25": 25, "median": 50,
         "p75": 75, "p90": 90, "p95": 95, "p99": 99, "p99.9": 99.9, "max": 100}
    out = {"mean": float(np.mean(v))}
    out.update({k: float(np.percentile(v, p)) for k, p in q.items()})
    return out


def ip_stage(count: int, ok: int, *, ttft=0.02, tpot=0.004, itl=0.004, e2e=0.1,
             prompt_len: dict | None = None, fail_latency: float | None = None,
             rate: float = 2.0) -> dict:
    """A ``stage_<k>_lifecycle_metrics.json`` document with flat latency summaries (each
    statistic the given value; ``max`` = 2 x value)."""
    def flat(x):
        d = {k: x for k in IP_KEYS}
        d["max"] = 2 * x
        return d

    pl = dict(IP_PROMPT_LEN)
    pl.update(prompt_len or {})
    lat = {"request_latency": flat(e2e), "normalized_time_per_output_token": flat(e2e / 8),
           "time_per_output_token": flat(tpot), "time_to_first_token": flat(ttft),
           "inter_token_latency": flat(itl)}
    return {
        "load_summary": {"count": count, "schedule_delay": flat(0.0005),
                         "send_duration": 5.0, "requested_rate": rate,
                         "achieved_rate": count / 5.0},
        "successes": {"count": ok, "latency": lat if ok else {k: None for k in lat},
                      "throughput": {"input_tokens_per_sec": 1.0,
                                     "output_tokens_per_sec": 8.0 * ok / 6.0,
                                     "total_tokens_per_sec": 2.0,
                                     "requests_per_sec": ok / 6.0},
                      "prompt_len": pl if ok else None,
                      "output_len": flat(8.0) if ok else None},
        "failures": {"count": count - ok,
                     "request_latency": flat(fail_latency) if fail_latency else None,
                     "prompt_len": flat(0.0) if count - ok else None},
    }


IP_CONFIG = """\
api:
  type: completion
  streaming: true
  headers: null
data:
  type: shared_prefix
  path: null
  shared_prefix:
    num_groups: 2
    num_prompts_per_group: 3
    system_prompt_len: 32
    question_len: 20
    output_len: 8
load:
  type: constant
  interval: 1.0
  stages:
  - rate: 2.0
    duration: 5
  - rate: 4.0
    duration: 5
  sweep: null
  num_workers: 4
  worker_max_concurrency: 100
  worker_max_tcp_connections: 2500
  circuit_breakers: []
  request_timeout: null
server:
  type: vllm
  model_name: servesim-tiny-llama
  base_url: http://localhost:8000
  ignore_eos: true
tokenizer:
  pretrained_model_name_or_path: servesim-tiny-llama
"""

IP_EXP_CONFIG = """\
model: servesim-tiny-llama
tensor_parallelism: 1
max_model_len: 512
max_num_batched_tokens: 256
max_num_seqs: 8
app: inference-perf
"""


def write_ip_run(root: Path, *, config: str = IP_CONFIG, stages: list[dict] | None = None,
                 exp_config: str | None = IP_EXP_CONFIG, datasheet: bool = True,
                 name: str = "20260101-000000-tiny-tp1-general") -> Path:
    """An inference-perf experiment folder ``root/<name>`` (two stages: 2 req/s and 4 req/s
    for 5 s each; 2 groups x 3 prompts of 32 + 20 tokens, 8 output tokens) with
    ``profile.yaml`` and ``exp-config.yaml``; the campaign's GPU datasheet in ``root``."""
    run = root / name
    res = run / "results"
    res.mkdir(parents=True, exist_ok=True)
    (res / "config.yaml").write_text(config)
    stages = stages if stages is not None else [ip_stage(10, 10, rate=2.0),
                                                ip_stage(20, 20, rate=4.0)]
    for k, st in enumerate(stages):
        (res / f"stage_{k}_lifecycle_metrics.json").write_text(json.dumps(st, indent=2))
    (run / "profile.yaml").write_text(json.dumps({
        "data": {"shared_prefix": {"enable_multi_turn_chat": True, "num_unique_system_prompts": 3,
                                   "num_users_per_system_prompt": 3, "output_len": 8,
                                   "question_len": 20, "system_prompt_len": 32},
                 "type": "shared_prefix"},
        "load": {"stages": [{"duration": 5, "rate": 2}, {"duration": 5, "rate": 4}],
                 "type": "constant"}}))
    if exp_config is not None:
        (run / "exp-config.yaml").write_text(exp_config)
    if datasheet:
        (root / "h100-sxm-datasheet.json").write_text(json.dumps({"name": "H100 SXM"}))
    return run


# ------------------------------------------------------------------------------ GuideLLM
def guidellm_request(start: float, first: float, last: float, end: float, prompt: int,
                     output: int, *, flat: bool = False) -> dict:
    """One request of a GuideLLM report: ``GenerativeRequestStats`` (>= 0.4; timings under
    ``info.timings``) or, with ``flat``, 0.3's ``GenerativeTextResponseStats``."""
    if flat:
        return {"type_": "generative_text_response", "request_id": "r", "prompt": "x",
                "output": "y", "prompt_tokens": prompt, "output_tokens": output,
                "start_time": start, "end_time": end, "first_token_time": first,
                "last_token_time": last}
    return {"type_": "generative_request_stats", "request_id": "r",
            "info": {"timings": {"request_start": start, "first_token_iteration": first,
                                 "last_token_iteration": last, "request_end": end,
                                 "token_iterations": output}},
            "input_metrics": {"text_tokens": prompt, "total_tokens": prompt},
            "output_metrics": {"text_tokens": output, "total_tokens": output},
            "prompt_tokens": prompt, "output_tokens": output}


def guidellm_report(benchmarks: list[tuple[dict, list[dict], int]], model: str | None = None
                    ) -> dict:
    """A GuideLLM report: per benchmark ``(strategy, successful requests, errored count)``."""
    out = []
    for strategy, ok, errored in benchmarks:
        err = [guidellm_request(0.0, 0.0, 0.0, 0.0, 1, 1)] * errored
        out.append({"type_": "generative_benchmark", "config": {"strategy": strategy},
                    "metrics": {"request_totals": {"successful": len(ok), "errored": errored,
                                                   "incomplete": 0,
                                                   "total": len(ok) + errored}},
                    "requests": {"successful": ok, "errored": err, "incomplete": [],
                                 "total": None}})
    rep = {"metadata": {"version": 2}, "benchmarks": out}
    if model:
        rep["config"] = {"model": model}
    return rep
