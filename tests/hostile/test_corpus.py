"""Hostile-input corpus: every case either exits 2 with one readable line naming the cause, or
completes with every request accounted for.

Tables (each row one case):

- ``SET_ERRORS``: ``servesim run BASE --set key=value`` overrides that must be refused; the
  needle names the key path and the cause.
- ``FILE_ERRORS``: scenario files (text or bytes) that must be refused.
- ``TRACE_ERRORS``: trace files of every format (Azure, Vidur, Mooncake, generic CSV, generic
  JSONL) that must be refused with ``file:line`` and the cause.
- ``CLI_ERRORS``: command lines and environment variables that must be refused.
- ``API_ERRORS``: the Python API (``validate_scenario``, ``load_workload``, ``read_trace``,
  ``BlockPool``, ``stream``) raising a ``ValueError`` whose message names the cause.
- ``COMPLETES``: edge inputs that are valid and must run to the end with
  ``completed + rejected + cancelled + unfinished == number of input requests`` (the input
  count is stated in the case, from the workload it describes), each request once in
  ``requests.parquet``, and nothing on stderr that looks like a traceback or a leaked warning.

A refusal is checked for: exit code 2, exactly one line on stderr starting with
``servesim: error:``, no ``Traceback`` and no ``internal error``, and the case's needle(s).
"""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from simulator.cli.main import main

BASE = """name: hostile
model: llama-3.1-8b
hardware: {gpu: h100-sxm}
perf: {source: roofline}
workload:
  synthetic:
    arrival: {process: poisson, rate_rps: 20}
    num_requests: 20
    prompt_tokens: {dist: uniform, low: 16, high: 200}
    output_tokens: {dist: uniform, low: 1, high: 40}
slo: {ttft_s: 1.0}
"""
N_BASE = 20  # requests of BASE's workload (num_requests: 20)

SYN = "workload.synthetic"


def _refused(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("servesim: error: "), line
    assert "Traceback" not in line and "internal error" not in line, line
    return line


def _check_needles(line: str, needles) -> None:
    for n in ([needles] if isinstance(needles, str) else needles):
        assert n in line, (n, line)


@pytest.fixture
def base(tmp_path):
    p = tmp_path / "base.yaml"
    p.write_text(BASE)
    return str(p)


# ---------------------------------------------------------------------------- --set
SET_ERRORS = [
    # strict types: no coercion of booleans or strings into numbers (README: "values are not
    # coerced")
    (["workload.max_requests=true"], ("workload.max_requests: value True: Input should be a "
                                      "valid integer")),
    (["workload.rate_scale='2'"], ("workload.rate_scale: value '2': Input should be a valid "
                                  "number")),
    ([f"{SYN}.arrival.rate_rps='1'"], ("arrival.rate_rps: value '1': Input should be a valid "
                                      "number")),
    ([f"{SYN}.num_requests='20'"], "num_requests: value '20': Input should be a valid integer"),
    ([f"{SYN}.num_requests=20.5"], "num_requests: value 20.5: Input should be a valid integer"),
    (["scheduler.max_num_seqs=true"], "scheduler.max_num_seqs: value True"),
    (["scheduler.max_num_seqs='64'"], "scheduler.max_num_seqs: value '64'"),
    (["scheduler.enable_chunked_prefill=1"], "scheduler.enable_chunked_prefill: value 1"),
    (["scheduler.enable_chunked_prefill=yes_please"], "scheduler.enable_chunked_prefill"),
    (["kv_cache.enable_prefix_caching='true'"], "kv_cache.enable_prefix_caching: value 'true'"),
    (["kv_cache.block_size=16.0"], ("kv_cache.block_size: value 16.0: Input should be a valid "
                                   "integer")),
    (["cluster.num_replicas=false"], "cluster.num_replicas: value False"),
    (["seed=1.5"], "seed: value 1.5"),
    (["seed=true"], "seed: value True"),
    (["name=123"], "name: value 123: Input should be a valid string"),
    (["model=[1, 2]"], "model: value [1, 2]"),
    (["hardware.gpu=3"], "hardware.gpu: value 3"),
    ([f"{SYN}.prompt_tokens.low='16'"], "prompt_tokens.low: value '16'"),
    (["workload.tenants={a: '0.5', b: 0.5}"], "workload.tenants.a: value '0.5'"),
    (["workload.priorities={true: 1.0}"], "priority class True is not an integer"),
    (["workload.priorities={x: 1.0}"], "priority class 'x' is not an integer"),
    (["cost.usd_per_gpu_hour='2.5'"], "cost.usd_per_gpu_hour: value '2.5'"),
    # infinities and NaN where meaningless
    (["workload.rate_scale=.inf"], ("workload.rate_scale: value inf: Input should be a finite "
                                   "number")),
    ([f"{SYN}.arrival.rate_rps=.inf"], "arrival.rate_rps: value inf: Input should be a finite"),
    ([f"{SYN}.arrival.rate_rps=.nan"], "arrival.rate_rps: value nan"),
    ([f"{SYN}.duration_s=.inf"], "duration_s: value inf: Input should be a finite number"),
    (["cost.usd_per_gpu_hour=.inf"], "cost.usd_per_gpu_hour: value inf"),
    (["slo.ttft_s=.inf"], "slo.ttft_s: value inf"),
    (["slo.tpot_s=.inf"], "slo.tpot_s: value inf"),
    (["slo.e2e_s=.nan"], "slo.e2e_s: value nan"),
    (["slo.attainment_target=.nan"], "slo.attainment_target: value nan"),
    (["scheduler.admission.max_queue_delay_s=.inf"], "max_queue_delay_s: value inf"),
    (["scheduler.batch_timeout_s=.inf"], "scheduler.batch_timeout_s: value inf"),
    (["kv_cache.swap_space_gb=.inf"], "kv_cache.swap_space_gb: value inf"),
    (["kv_cache.gpu_memory_utilization=.nan"], "kv_cache.gpu_memory_utilization: value nan"),
    (["kv_cache.watermark=.inf"], "kv_cache.watermark: value inf"),
    ([f"{SYN}.prompt_tokens={{dist: lognormal, median: 100, sigma: .inf}}"],
     "prompt_tokens.sigma: value inf"),
    ([f"{SYN}.prompt_tokens={{dist: lognormal, median: .inf, sigma: 1}}"],
     "prompt_tokens.median: value inf"),
    (["workload.patience={dist: fixed, value: .inf}"], "patience.value: value inf"),
    (["workload.patience={dist: exponential, mean_s: .nan}"], "patience.mean_s: value nan"),
    (["workload.start_s=.inf"], "workload.start_s: value inf"),
    (["workload.end_s=.inf"], "workload.end_s: value inf"),
    ([f"{SYN}.arrival={{process: gamma, rate_rps: 1, cv: .inf}}"], "arrival.cv: value inf"),
    (["workload.slices={a: .inf}"], "workload.slices.a: value inf"),
    # bounds name the limit
    (["scheduler.max_num_seqs=0"], "greater than or equal to 1"),
    (["scheduler.max_num_batched_tokens=-5"], "scheduler.max_num_batched_tokens: value -5"),
    (["scheduler.max_num_batched_tokens=3000000000"], "less than or equal to 2147483647"),
    (["scheduler.max_model_len=1"], ("scheduler.max_model_len: value 1: Input should be greater "
                                    "than or equal to 2")),
    (["scheduler.max_model_len=4000000000"], "less than or equal to 2147483647"),
    (["scheduler.admission.max_waiting=0"], "scheduler.admission.max_waiting: value 0"),
    (["scheduler.admission.max_queue_delay_s=0"], "greater than 0"),
    (["scheduler.admission.tenant_max_share=1.5"], "less than or equal to 1"),
    (["scheduler.batch_timeout_s=-1"], "scheduler.batch_timeout_s: value -1"),
    (["scheduler.max_batch_size=0"], "scheduler.max_batch_size: value 0"),
    (["kv_cache.gpu_memory_utilization=0"], ("gpu_memory_utilization: value 0: Input should be "
                                            "greater than 0")),
    (["kv_cache.gpu_memory_utilization=1.01"], "less than or equal to 1"),
    (["kv_cache.watermark=1"], "kv_cache.watermark: value 1: Input should be less than 1"),
    (["kv_cache.num_gpu_blocks=0"], "kv_cache.num_gpu_blocks: value 0"),
    (["kv_cache.swap_space_gb=-1"], "kv_cache.swap_space_gb: value -1"),
    (["cluster.num_replicas=0"], "cluster.num_replicas: value 0"),
    (["cluster.tensor_parallel_size=0"], "cluster.tensor_parallel_size: value 0"),
    (["cluster.tensor_parallel_size=3"], "tensor_parallel_size=3 cannot shard"),
    (["hardware.num_gpus_per_replica=2"], "must equal cluster.tensor_parallel_size (1)"),
    (["slo.ttft_s=0"], "slo.ttft_s: value 0: Input should be greater than 0"),
    (["slo.attainment_target=0"], "slo.attainment_target: value 0"),
    (["cost.usd_per_gpu_hour=-1"], "cost.usd_per_gpu_hour: value -1"),
    (["seed=-1"], "seed: value -1"),
    (["workload.rate_scale=0"], "workload.rate_scale: value 0: Input should be greater than 0"),
    (["workload.max_requests=0"], "workload.max_requests: value 0"),
    (["workload.max_tokens=0"], "workload.max_tokens: value 0"),
    (["workload.max_tokens=3000000000"], "workload.max_tokens: value 3000000000"),
    (["workload.start_s=-1"], "workload.start_s: value -1"),
    (["workload.start_s=10", "workload.end_s=5"], "end_s=5.0 must be > start_s=10.0"),
    ([f"{SYN}.num_requests=0"], "num_requests: value 0"),
    ([f"{SYN}.duration_s=0"], "duration_s: value 0"),
    ([f"{SYN}.num_requests=null"], "give num_requests, duration_s, or both"),
    ([f"{SYN}.arrival.rate_rps=0"], "arrival.rate_rps: value 0"),
    ([f"{SYN}.arrival.cv=2"], "a poisson process has cv=1"),
    ([f"{SYN}.prompt_tokens={{dist: lognormal, median: 1.0e300, sigma: 1}}"],
     "prompt_tokens.median: value 1e+300: Input should be less than or equal to 2147483647"),
    ([f"{SYN}.prompt_tokens={{dist: fixed, value: 0}}"], "fixed value must be >= 1 token"),
    ([f"{SYN}.prompt_tokens={{dist: fixed, value: 3000000000}}"],
     "prompt_tokens.value: value 3000000000"),
    ([f"{SYN}.prompt_tokens={{dist: uniform, low: 5, high: 2}}"], ("uniform needs 1 <= low <= "
                                                                  "high")),
    ([f"{SYN}.prompt_tokens={{dist: lognormal, median: 100}}"], "requires 'sigma'"),
    ([f"{SYN}.prompt_tokens={{dist: fixed, value: 5, sigma: 1}}"], "field 'sigma' is not used"),
    ([f"{SYN}.prompt_tokens={{dist: empirical, values: []}}"], "empirical 'values' is empty"),
    ([f"{SYN}.prompt_tokens={{dist: empirical, values: [1, 2], weights: [1]}}"],
     "1 weights for 2 values"),
    ([f"{SYN}.prompt_tokens={{dist: empirical, values: [1, 2], weights: [0, 0]}}"],
     "weights must be >= 0 with a positive sum"),
    ([f"{SYN}.prompt_tokens={{dist: fixed, value: 5, min: 10, max: 8}}"], ("max=8 is below "
                                                                           "min=10")),
    ([f"{SYN}.prompt_tokens={{dist: gaussian, value: 5}}"], ("prompt_tokens.dist: value "
                                                            "'gaussian'")),
    (["workload.slices={a: 0.5, b: 0.4}"], "shares must sum to 1"),
    (["workload.slices={a: -0.5, b: 1.5}"], "share of 'a' must be >= 0"),
    (["workload.slices={}"], "empty share table"),
    (["workload.patience={dist: fixed, value: 0}"], "fixed value must be > 0 s"),
    (["workload.patience={dist: uniform, low: 3, high: 1}"], "uniform needs 0 <= low <= high"),
    (["workload.patience={dist: fixed, value: 1, fraction: 2}"], "patience.fraction: value 2"),
    (["workload.shared_prefixes=[{name: a, num_tokens: 4}, {name: a, num_tokens: 8}]"],
     "duplicate shared prefix name(s) ['a']"),
    (["workload.shared_prefixes=[{name: '', num_tokens: 4}]"], "shared_prefixes.0.name"),
    (["workload.format=azure"], "'format'/'time_unit' apply to a trace only"),
    (["workload.columns={arrival_time_s: t}"], "'columns' applies to a trace, not synthetic"),
    (["workload.trace=x.csv"], "give exactly one of 'trace' and 'synthetic'"),
    (["workload.synthetic=null"], "give exactly one of 'trace' and 'synthetic'"),
    # enumerations
    (["cluster.router=best"], "cluster.router: value 'best'"),
    (["scheduler.policy=fifo"], "scheduler.policy: value 'fifo'"),
    (["scheduler.queue_policy=lifo"], "scheduler.queue_policy: value 'lifo'"),
    (["scheduler.preemption_mode=drop"], "scheduler.preemption_mode: value 'drop'"),
    (["kv_cache.kv_cache_dtype=int4"], "kv_cache.kv_cache_dtype: value 'int4'"),
    (["kv_cache.allocation=buddy"], "kv_cache.allocation: value 'buddy'"),
    (["perf.source=magic"], "perf.source: value 'magic'"),
    (["perf.weight_dtype=int2"], "perf.weight_dtype: value 'int2'"),
    (["perf.source=constant"], "perf.source: constant needs perf.constant"),
    # unknown keys keep the key path and name the flag
    (["bogus.path=1"], ["--set bogus.path=1", "unknown key 'bogus'", "allowed keys: cluster"]),
    (["scheduler.bogus=1"], ["--set scheduler.bogus=1", "unknown key 'scheduler.bogus'",
                             "max_num_seqs"]),
    (["scheduler.admission.max_wait=3"], "unknown key 'scheduler.admission.max_wait'"),
    ([f"{SYN}.arrival.rate=3"], "unknown key 'workload.synthetic.arrival.rate'"),
    (["kv_cache.blok_size=16"], "unknown key 'kv_cache.blok_size'"),
    (["scheduler=3"], "scheduler: value 3"),
    (["scheduler.max_num_seqs.x=3"], ("scheduler.max_num_seqs: value {...}: Input should be a "
                                     "valid integer")),
    (["scheduler.max_num_seqs=4", "scheduler.max_num_seqs.x=3"], ("--set "
     "scheduler.max_num_seqs.x=3: 'max_num_seqs' is not a section")),
    # speculative decoding
    ([("speculative={method: ngram, num_speculative_tokens: 0, acceptance: {acceptance_rate: "
      "0.5}}")], "speculative.num_speculative_tokens: value 0"),
    ([("speculative={method: ngram, num_speculative_tokens: 2, acceptance: {acceptance_rate: "
      "1.5}}")], "speculative.acceptance.acceptance_rate: value 1.5"),
    ([("speculative={method: ngram, num_speculative_tokens: 2, acceptance: {acceptance_rate: "
      ".nan}}")], "acceptance_rate: value nan"),
    ([("speculative={method: ngram, num_speculative_tokens: 2, acceptance: {acceptance_rate: "
      "0.5}, draft_cost_ratio: .inf}")], "speculative.draft_cost_ratio: value inf"),
    # an empirical histogram over 0..2 accepted drafts says nothing about k = 4
    ([("speculative={method: ngram, num_speculative_tokens: 4, acceptance: {model: empirical, "
      "counts: [5, 3, 2]}}")], ("acceptance.counts has 3 entries (accepted drafts 0..2) but "
                              "num_speculative_tokens 4 needs 5 (0..4)")),
    ([("speculative={method: ngram, num_speculative_tokens: 3, acceptance: {model: empirical, "
      "probabilities: [0.5, 0.5]}}")], "acceptance.probabilities has 2 entries"),
    ([("speculative={method: ngram, num_speculative_tokens: 2, acceptance: {model: empirical, "
      "counts: [0, 0, 0]}}")], "counts must not all be zero"),
    (["speculative={method: ngram, num_speculative_tokens: 2, acceptance: {model: iid}}"],
     "needs acceptance_rate"),
    ([("speculative={method: draft_model, num_speculative_tokens: 2, acceptance: "
      "{acceptance_rate: 0.5}}")], "method 'draft_model' needs draft_model"),
    ([("speculative={method: ngram, num_speculative_tokens: true, acceptance: "
      "{acceptance_rate: 0.5}}")], "num_speculative_tokens"),
    (["scheduler.policy=static", ("speculative={method: ngram, num_speculative_tokens: 2, "
      "acceptance: {acceptance_rate: 0.5}}")], "static batching does not speculate"),
    # outputs
    (["output_dir=x_{nam}"], "only the placeholder {name}"),
    # resources: refused before anything is generated or allocated
    ([f"{SYN}.num_requests=1000000000000"], ["1,000,000,000,000 requests need an estimated",
                                            "memory budget", "workload.synthetic.num_requests"]),
    ([f"{SYN}.num_requests=null", f"{SYN}.duration_s=1.0e300"],
     ["requests need an estimated", "memory budget"]),
    (["cluster.num_replicas=100000000"], ["100,000,000 replicas", "memory budget",
                                          "fewer cluster.num_replicas"]),
    # lengths no engine can hold are an error, not a silent clip to 2**31 - 1
    ([f"{SYN}.prompt_tokens={{dist: lognormal, median: 100, sigma: 1000}}"],
     ["synthetic prompt_tokens:", "exceed 2,147,483,647 tokens", "prompt_tokens.max"]),
    ([f"{SYN}.output_tokens={{dist: lognormal, median: 2000000000, sigma: 3}}"],
     ["synthetic output_tokens:", "exceed 2,147,483,647 tokens"]),
]


@pytest.mark.parametrize("sets, needles", SET_ERRORS,
                         ids=[f"set{i:03d}" for i in range(len(SET_ERRORS))])
def test_set_refused(capsys, base, tmp_path, sets, needles):
    argv = ["run", base, "-q", "--no-figures", "-o", str(tmp_path / "o")]
    for s in sets:
        argv += ["--set", s]
    line = _refused(capsys, argv)
    _check_needles(line, needles)
    # the scenario file is named, or (errors found after validation: resources, lengths,
    # sharding) the scenario and the key the user set
    assert base in line or ("scenario 'hostile'" in line or any(
        s.partition("=")[0].split(".")[-1] in line for s in sets)), line


# ---------------------------------------------------------------------------- scenario files
FILE_ERRORS = [
    # 0xd1 0x8f is valid UTF-8 (one Cyrillic letter) and 0x00 too: the first bad byte is 0xff
    (b"\xd1\x8f\x00\xff\xfe binary", ["not a text file", "byte 0xff at offset 3",
                                      "is not UTF-8"]),
    (b"\x89PNG\r\n\x1a\n\x00\x00", ["not a text file", "byte 0x89 at offset 0"]),
    (b"name: x\n\x00\x01\x02", "not valid YAML (unacceptable character"),
    (b"name: [unclosed\n", "not valid YAML"),
    (b"- a\n- b\n", "a scenario file must be a YAML mapping"),
    (b"just a string\n", "a scenario file must be a YAML mapping"),
    (BASE.encode() + b"seed: 1\nseed: 2\n", "duplicate key 'seed'"),
    (b"", "missing required key 'workload'"),
    (b"name: x\n", "missing required key 'workload'"),
    (BASE.encode() + b"shceduler: {}\n", "unknown key 'shceduler'"),
    (BASE.replace("rate_rps: 20", "rate_rps: \"20\"").encode(), "arrival.rate_rps: value '20'"),
    (BASE.replace("num_requests: 20", "num_requests: 2.0e1").encode(),
     "num_requests: value 20.0: Input should be a valid integer"),
    (BASE.replace("rate_rps: 20", "rate_rps: .inf").encode(), "rate_rps: value inf"),
    (BASE.replace("num_requests: 20", "num_requests: yes").encode(), "num_requests: value True"),
    (BASE.encode() + b"kv_cache: {block_size: 16, block_size: 32}\n", ("duplicate key "
                                                                       "'block_size'")),
]


@pytest.mark.parametrize("content, needles", FILE_ERRORS,
                         ids=[f"file{i:02d}" for i in range(len(FILE_ERRORS))])
def test_scenario_file_refused(capsys, tmp_path, content, needles):
    p = tmp_path / "s.yaml"
    p.write_bytes(content)
    line = _refused(capsys, ["run", str(p), "-q", "--no-figures", "-o", str(tmp_path / "o")])
    _check_needles(line, needles)
    assert str(p) in line


# ---------------------------------------------------------------------------- traces
AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
VI = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
GC = "arrival_time_s,num_prompt_tokens,num_output_tokens\n"
MC_OK = '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
GJ_OK = '{"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2}\n'

TRACE_ERRORS = [
    # (file name, content, format, needles); ":N:" is the 1-based line of the bad row
    ("a.csv", AZ + "2024-01-01 00:00:00.0,10,abc\n", "azure",
     [":2:", "GeneratedTokens 'abc' is not an integer"]),
    ("a.csv", AZ + "2024-01-01 00:00:00,10,2\n2024-01-01 00:00:01,0,2\n", "azure",
     [":3:", "ContextTokens 0 must be >= 1"]),
    ("a.csv", AZ + "yesterday,10,2\n", "azure", [":2:", "TIMESTAMP 'yesterday' is not"]),
    ("a.csv", AZ + "2024-01-01 00:00:00,10\n", "azure", [":2:", "2 fields, but the header has 3"]),
    ("a.csv", AZ + "2024-01-01 00:00:00,1.5,2\n", "azure", [":2:", ("ContextTokens '1.5' is not"
                                                                  " an integer")]),
    ("a.csv", AZ + "2024-01-01 00:00:00,10,-2\n", "azure", [":2:", ("GeneratedTokens -2 must be "
                                                                  ">= 1")]),
    ("a.csv", AZ + "2024-01-01 00:00:00,10,\n", "azure", [":2:", "GeneratedTokens is missing"]),
    ("a.csv", AZ + "2024-01-01 00:00:00,3000000000,2\n", "azure",
     [":2:", "ContextTokens 3000000000 must be <= 2,147,483,647"]),
    ("a.csv", "TIMESTAMP,ContextTokens\n2024-01-01 00:00:00,10\n", "azure",
     "format 'azure' needs column(s) 'GeneratedTokens'"),
    ("v.csv", VI + "0,10,2\n-1,10,2\n", "vidur", [":3:", "arrived_at '-1' must be >= 0"]),
    ("v.csv", VI + "0,10,2\nnan,10,2\n", "vidur", [":3:", "arrived_at 'nan' is not a finite"]),
    ("v.csv", VI + "inf,10,2\n", "vidur", [":2:", "arrived_at 'inf' is not a finite number"]),
    ("v.csv", VI + "0,x,2\n", "vidur", [":2:", "num_prefill_tokens 'x' is not an integer"]),
    ("v.csv", VI + "0,10,2,extra\n", "vidur", [":2:", "4 fields, but the header has 3"]),
    ("v.csv", VI + "0,10,2\n\n\n0,10,0\n", "vidur", [":5:", "num_decode_tokens 0 must be >= 1"]),
    ("v.csv", "arrived_at,arrived_at,num_prefill_tokens,num_decode_tokens\n0,0,1,1\n", "vidur",
     "duplicate column(s) ['arrived_at']"),
    ("v.csv", VI + "0,10,2\n1,10,5\n", "generic_csv", "format 'generic_csv' needs a column for"),
    ("m.jsonl", MC_OK + '{"timestamp": "100", "input_length": 10, "output_length": 2}\n',
     "mooncake", [":2:", 'timestamp "100" is a string, not a number']),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": "10", "output_length": 2}\n',
     "mooncake", [":2:", 'input_length "10" is a string, not a number']),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": false}\n',
     "mooncake", [":2:", "output_length false is a boolean, not a number"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": [2]}\n',
     "mooncake", [":2:", "output_length [2] is a list, not a number"]),
    # len(hash_ids) == ceil(input_length / 512): 1100 tokens are ceil(2.15) = 3 blocks
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 1100, "output_length": 2, '
                        '"hash_ids": [0, 1]}\n', "mooncake",
     [":2:", "hash_ids has 2 entries but input_length 1100 needs ceil(1100 / 512) = 3"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 100, "output_length": 2, '
                        '"hash_ids": [0, 1]}\n', "mooncake",
     [":2:", "hash_ids has 2 entries but input_length 100 needs ceil(100 / 512) = 1"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": 2, '
                        '"hash_ids": "0,1"}\n', "mooncake", [":2:", "is not a list of integers"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": 2, '
                        '"hash_ids": [true]}\n', "mooncake", [":2:", "not a list of integers"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10}\n', "mooncake",
     [":2:", "output_length is missing"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": 2\n', "mooncake",
     [":2:", "invalid JSON"]),
    ("m.jsonl", MC_OK + "[1, 2]\n", "mooncake", [":2:", "expected a JSON object, got list"]),
    ("m.jsonl", MC_OK + '{"timestamp": -3, "input_length": 10, "output_length": 2}\n',
     "mooncake", [":2:", "timestamp -3 must be >= 0"]),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": 2, '
                        '"cancel_after_s": "5"}\n', "mooncake",
     [":2:", 'cancel_after_s "5" is a string, not a number']),
    ("m.jsonl", MC_OK + '{"timestamp": 1, "input_length": 10, "output_length": 5, '
                        '"max_tokens": 3}\n', "mooncake",
     [":2:", "max_tokens 3 is below the output length 5"]),
    ("m.jsonl", b"\xff\xfe\x00bad".decode("latin-1"), "mooncake", "not UTF-8 text"),
    ("g.csv", GC + "0,10,2\n0.5,10,2,7\n", "generic_csv", [":3:", "4 fields"]),
    ("g.csv", GC + "0,10,2\nsoon,10,2\n", "generic_csv", [":3:", "arrival_time_s 'soon' is not"]),
    ("g.csv", GC.strip() + ",priority\n0,10,2,high\n", "generic_csv",
     [":2:", "priority 'high' is not an integer"]),
    ("g.csv", GC.strip() + ",cancel_after_s\n0,10,2,0\n", "generic_csv",
     [":2:", "cancel_after_s '0' must be > 0"]),
    ("g.csv", GC.strip() + ",max_tokens\n0,10,5,0\n", "generic_csv",
     [":2:", "max_tokens 0 must be >= 1"]),
    ("g.jsonl", GJ_OK + '{"arrival_time_s": "1", "num_prompt_tokens": 10, '
                        '"num_output_tokens": 2}\n', "generic_jsonl",
     [":2:", 'arrival_time_s "1" is a string, not a number']),
    ("g.jsonl", GJ_OK + '{"arrival_time_s": 1, "num_prompt_tokens": 10.5, '
                        '"num_output_tokens": 2}\n', "generic_jsonl",
     [":2:", "num_prompt_tokens 10.5 is not an integer"]),
    ("g.jsonl", GJ_OK + '{"arrival_time_s": 1, "num_prompt_tokens": 10, '
                        '"num_output_tokens": 2, "priority": "1"}\n', "generic_jsonl",
     [":2:", 'priority "1" is a string, not a number']),
    ("g.jsonl", GJ_OK + '{"arrival_time_s": 1, "num_prompt_tokens": 10}\n', "generic_jsonl",
     [":2:", "num_output_tokens is missing"]),
    ("g.jsonl", '{"t": 0, "p": 1, "o": 1}\n', "generic_jsonl",
     "format 'generic_jsonl' needs a column for 'arrival_time_s', 'num_prompt_tokens'"),
    ("x.csv", "a,b,c\n1,2,3\n", "auto", "cannot detect the trace format from the header"),
    ("e.csv", "\n\n", "auto", "empty file"),
]


@pytest.mark.parametrize("name, content, fmt, needles", TRACE_ERRORS,
                         ids=[f"trace{i:02d}" for i in range(len(TRACE_ERRORS))])
def test_trace_refused(capsys, base, tmp_path, name, content, fmt, needles):
    p = tmp_path / name
    p.write_text(content, encoding="utf-8" if "\xff" not in content else "latin-1")
    argv = ["run", base, "-q", "--no-figures", "-o", str(tmp_path / "o"),
            "--set", f"workload.trace={p}", "--set", "workload.synthetic=null",
            "--set", f"workload.format={fmt}"]
    line = _refused(capsys, argv)
    _check_needles(line, needles)
    assert str(p) in line
    # the `trace` command reports the same cause
    line2 = _refused(capsys, ["trace", str(p), "--format", fmt])
    _check_needles(line2, needles)


# ---------------------------------------------------------------------------- command lines
def _cli_cases(tmp):
    tmp.mkdir(exist_ok=True)
    bin_trace = tmp / "bin.csv"
    bin_trace.write_bytes(b"\x00\xff\xfe\x01")
    return [
        (["run", "nosuchdir/default.yaml"], {}, ("scenario file 'nosuchdir/default.yaml' not "
                                                "found")),
        (["run", str(tmp)], {}, [str(tmp), "is a directory, not a scenario file"]),
        (["run", "/dev/null"], {}, ["/dev/null", "is a character device, not a scenario file"]),
        (["run", "default", "--trace", str(tmp)], {}, [str(tmp), ("is a directory, not a trace "
                                                                 "file")]),
        (["run", "default", "--trace", "/dev/null"], {}, ["/dev/null", ("is a character device, "
                                                                       "not a trace file")]),
        (["run", "default", "--trace", "nosuchdir/t.csv"], {}, ("trace file 'nosuchdir/t.csv' "
                                                               "not found")),
        (["run", "default", "--trace", str(bin_trace)], {}, [str(bin_trace), "cannot"]),
        (["run", "default", "--set", "nokey"], {}, "--set 'nokey': expected key.path=value"),
        (["run", "default", "--set", "=3"], {}, "--set '=3': empty key"),
        (["run", "default", "--set", "a..b=3"], {}, "--set 'a..b=3': empty key"),
        (["run", "default", "--seed", "-3"], {}, ["--seed -3", "seed: value -3"]),
        (["run", "default"], {"SERVESIM_HOME": str(tmp / "nope")},
         ["SERVESIM_HOME=", "does not exist"]),
        (["run", "default"], {"SERVESIM_HOME": str(tmp)},
         ["SERVESIM_HOME=", "holds none of hardware_profiles, scenarios, traces"]),
        (["run", "default"], {"SERVESIM_MEMORY_BUDGET_GB": "lots"},
         "SERVESIM_MEMORY_BUDGET_GB='lots': not a positive number of GB"),
        (["run", "default"], {"SERVESIM_MEMORY_BUDGET_GB": "-1"},
         "SERVESIM_MEMORY_BUDGET_GB='-1'"),
        (["run", "default"], {"SERVESIM_MEMORY_BUDGET_GB": "0.000001"},
         ["needs an estimated", "memory budget is 1e-06 GB ($SERVESIM_MEMORY_BUDGET_GB)"]),
        # 20 requests of 10 + 131,000 tokens (within Llama-3.1-8B's 131,072): >= 131,000 step
        # rows x 147 B (budget.BYTES_PER_STEP_ROW) = 19 MB, the largest part; with the 7 MB
        # fixed part 26.6 MB, above a 0.02 GB budget
        (["run", "default", "--set", ("workload={synthetic: {arrival: {process: poisson, "
          "rate_rps: 1}, num_requests: 20, prompt_tokens: {dist: fixed, value: 10}, "
          "output_tokens: {dist: fixed, value: 131000}}}")], {"SERVESIM_MEMORY_BUDGET_GB": "0.02"},
         [">= 131,000 step rows", "memory budget is 0.02 GB", "fewer or shorter requests"]),
        (["run", "default", "--progress", "--no-figures"],
         {"SERVESIM_PROGRESS_INTERVAL_S": "soon"}, "SERVESIM_PROGRESS_INTERVAL_S='soon'"),
        (["compare", "default", "--vary", "bogus.key=1,2"], {},
         ["--vary bogus.key=1,2", "unknown key 'bogus'"]),
        (["compare", "default", "--vary", "scheduler.max_num_seqs=1,x"], {},
         ["--vary scheduler.max_num_seqs=1,x", "scheduler.max_num_seqs: value 'x'"]),
        (["compare", "default", "--vary", "scheduler.max_num_seqs=1,,2"], {},
         "empty value in the list"),
        (["compare", "default", "--vary", "nokey"], {}, "--vary 'nokey': expected"),
        (["trace", str(tmp)], {}, "is a directory, not a trace file"),
        (["trace", "/dev/null"], {}, "is a character device, not a trace file"),
        (["sweep", str(tmp)], {}, "is a directory, not a sweep file"),
        (["plan", "/dev/null"], {}, "is a character device, not a plan file"),
        (["sweep", "sweep_default", "--set", "bogus.key=1", "-o", str(tmp / "sw")], {},
         ["sweep base scenario: --set bogus.key=1", "unknown key 'bogus'"]),
        (["sweep", "sweep_default", "--set", "scheduler.max_num_seqs=-1", "-o", str(tmp / "sw")],
         {}, ["--set scheduler.max_num_seqs=-1", "greater than or equal to 1"]),
        (["run", "pools_mixed_gpu", "--set", "model=nosuchmodel"], {},
         # session 6: every pool states its own model, so a top-level one is refused as unused
         ["pools_mixed_gpu: model: unused: every pool states its own model"]),
        (["run", "pools_mixed_gpu", "--set", "pools.0.model=nosuchmodel"], {},
         ["pools.0 (chat-h100)", "unknown model 'nosuchmodel'"]),
        (["run", "default", "--set", "cluster.enable_expert_parallel=true"], {},
         ["cluster.enable_expert_parallel", "dense model"]),
        (["run", "default", "--set", "kv_cache.enable_prefix_caching=false", "--set",
          "cluster.router=prefix_affinity"], {},
         ["cluster.router: prefix_affinity", "enable_prefix_caching is false"]),
        (["run", "pd_1p1d_llama3_8b", "--set", "pools.1.kv_cache.num_gpu_blocks=4"], {},
         ["pools.1 (decode)", "holds 48 tokens per replica (3 blocks x 16)",
          "fewer than the shortest prompt"]),
        (["run", "degrade_overload", "--set", "scheduler.admission.degrade.2.slices=[nosuch]"],
         {}, ["scheduler.admission.degrade.2 (shed_when_stuck).slices", "slice(s) nosuch",
              "its slices: default"]),
        (["run", "default", "--set", "workload.parallel_sampling={n: 2, slices: [nosuch]}"], {},
         ["workload.parallel_sampling.slices names slice(s) nosuch"]),
    ]


CLI_IDS = [f"cli{i:02d}" for i in range(35)]


@pytest.mark.parametrize("i", range(len(CLI_IDS)), ids=CLI_IDS)
def test_cli_refused(capsys, tmp_path, monkeypatch, i):
    argv, env, needles = _cli_cases(tmp_path / "d")[i]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if argv[0] in ("run", "compare"):
        argv = argv + ["-o", str(tmp_path / "o")] + ([] if "--progress" in argv else ["-q"])
    line = _refused(capsys, argv)
    _check_needles(line, needles)


def test_cli_case_count_matches(tmp_path):
    assert len(_cli_cases(tmp_path / "d")) == len(CLI_IDS)


# ---------------------------------------------------------------------------- Python API
def _api_cases():
    from simulator.base.rng import stream
    from simulator.kv import BlockPool, KVCacheManager
    from simulator.scenario.config import validate_scenario
    from simulator.workload import WorkloadConfig, load_workload, read_trace

    wl = {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1}, "num_requests": 3,
                        "prompt_tokens": {"dist": "fixed", "value": 5},
                        "output_tokens": {"dist": "fixed", "value": 5}}}
    return [
        (lambda: validate_scenario({"workload": wl, "seed": True}), "seed: value True"),
        (lambda: validate_scenario({"workload": {**wl, "rate_scale": float("inf")}}),
         "workload.rate_scale: value inf"),
        (lambda: validate_scenario({"workload": {**wl, "max_requests": True}}),
         "workload.max_requests: value True"),
        (lambda: validate_scenario({"workload": wl, "cost": {"usd_per_gpu_hour": math.inf}}),
         "cost.usd_per_gpu_hour: value inf"),
        (lambda: WorkloadConfig.model_validate({**wl, "rate_scale": "2"}),
         "Input should be a valid number"),
        (lambda: load_workload(WorkloadConfig.model_validate(wl), seed=-1), ("seed must be a "
                                                                           "non-negative")),
        (lambda: load_workload(WorkloadConfig.model_validate(wl), seed=1.5), ("seed must be a "
                                                                            "non-negative")),
        (lambda: load_workload(WorkloadConfig.model_validate({"trace": "/dev/null"}), seed=0),
         "is a character device"),
        (lambda: read_trace("/nonexistent/t.csv"), "trace file not found"),
        (lambda: read_trace("/tmp"), "is a directory, not a trace file"),
        (lambda: read_trace("/dev/null", format="mooncake"), "is a character device"),
        (lambda: BlockPool(0), "num_blocks must be >= 1"),
        (lambda: KVCacheManager(10, 0), "block_size must be >= 1"),
        (lambda: KVCacheManager(10, 4, allocation="buddy"), ("allocation must be 'paged' or "
                                                            "'contiguous'")),
        (lambda: stream(0, "nope"), "unknown random stream 'nope'"),
        (lambda: stream(-1, "router"), "seed must be a non-negative integer"),
    ]


@pytest.mark.parametrize("i", range(16), ids=[f"api{i:02d}" for i in range(16)])
def test_api_refused(i):
    fn, needle = _api_cases()[i]
    with pytest.raises(ValueError) as e:
        fn()
    assert needle in str(e.value), str(e.value)


def test_api_case_count_matches():
    assert len(_api_cases()) == 16


# ---------------------------------------------------------------------------- completes
MOON = ('{"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]}\n'
        '{"timestamp": 0, "input_length": 700, "output_length": 3, "hash_ids": [0, 3]}\n'
        '{"timestamp": 0, "input_length": 40, "output_length": 9000, "hash_ids": [7]}\n'
        '{"timestamp": 5, "input_length": 300, "output_length": 1}\n')

COMPLETES = [
    # (id, --set overrides, trace file (name, content) or None, input request count)
    ("one request", [f"{SYN}.num_requests=1"], None, 1),
    ("all at t=0 (1e9 req/s)", [f"{SYN}.arrival.rate_rps=1000000000"], None, N_BASE),
    ("very slow arrivals", [f"{SYN}.arrival.rate_rps=0.000001"], None, N_BASE),
    ("bursty gamma cv 4", [f"{SYN}.arrival={{process: gamma, rate_rps: 50, cv: 4}}"], None,
     N_BASE),
    ("max_model_len 2: prompts too long", ["scheduler.max_model_len=2"], None, N_BASE),
    # declared max_tokens beyond max_model_len: rejected at arrival (max_tokens_too_large)
    ("max_tokens beyond max_model_len", ["scheduler.max_model_len=150",
                                         "workload.max_tokens=100"], None, N_BASE),
    ("one-token budget, chunked", ["scheduler.max_num_batched_tokens=1"], None, N_BASE),
    ("budget below prompts, no chunking", ["scheduler.max_num_batched_tokens=50",
                                           "scheduler.enable_chunked_prefill=false"], None,
     N_BASE),
    ("one sequence at a time", ["scheduler.max_num_seqs=1"], None, N_BASE),
    ("one KV block", ["kv_cache.num_gpu_blocks=1"], None, N_BASE),
    ("tiny KV, preemption", ["kv_cache.num_gpu_blocks=20", "kv_cache.block_size=4"], None,
     N_BASE),
    ("tiny KV, swap", ["kv_cache.num_gpu_blocks=20", "scheduler.preemption_mode=swap",
                       "kv_cache.swap_space_gb=0.001"], None, N_BASE),
    ("watermark 0.99", ["kv_cache.watermark=0.99"], None, N_BASE),
    ("contiguous + max_tokens", ["kv_cache.allocation=contiguous", "workload.max_tokens=50",
                                 "kv_cache.num_gpu_blocks=40"], None, N_BASE),
    ("static, zero timeout", ["scheduler.policy=static", "scheduler.batch_timeout_s=0"], None,
     N_BASE),
    ("static, huge finite timeout", ["scheduler.policy=static",
                                     "scheduler.batch_timeout_s=1.0e300"], None, N_BASE),
    ("huge finite queue delay", ["scheduler.admission.max_queue_delay_s=1.0e300"], None, N_BASE),
    ("queue cap 1", ["scheduler.admission.max_waiting=1", "scheduler.max_num_seqs=1"], None,
     N_BASE),
    ("tiny patience", ["workload.patience={dist: fixed, value: 1.0e-9}"], None, N_BASE),
    ("priorities + tenant share", ["scheduler.queue_policy=priority",
                                   "workload.priorities={0: 0.5, 1: 0.5}",
                                   "workload.tenants={a: 0.9, b: 0.1}",
                                   "scheduler.admission.tenant_max_share=0.1"], None, N_BASE),
    ("1000 replicas, random router", ["cluster.num_replicas=1000", "cluster.router=random"],
     None, N_BASE),
    ("200 replicas, least_kv", ["cluster.num_replicas=200", "cluster.router=least_kv"], None,
     N_BASE),
    ("speculative ngram", [("speculative={method: ngram, num_speculative_tokens: 3, acceptance: "
                           "{model: empirical, counts: [4, 3, 2, 1]}}")], None, N_BASE),
    ("zero price", ["cost.usd_per_gpu_hour=0"], None, N_BASE),
    ("window keeps 1 request", ["workload.max_requests=1"], None, 1),
    ("mooncake, prefix cache, a 9000-token output", ["kv_cache.enable_prefix_caching=true"],
     ("m.jsonl", MOON), 4),
    ("generic csv, equal times", [], ("g.csv", GC + "0,10,2\n0,10,2\n0,3000,4\n"), 3),
    ("azure, one row", [], ("a.csv", AZ + "2024-01-01 00:00:00.1234567,10,2\n"), 1),
    ("vidur, prompt beyond max_model_len", ["scheduler.max_model_len=100"],
     ("v.csv", VI + "0,10,2\n1,500,2\n2,99,5\n"), 3),
    ("generic jsonl, patience column", [],
     ("g.jsonl", '{"arrival_time_s": 0, "num_prompt_tokens": 10, "num_output_tokens": 2, '
                 '"cancel_after_s": 1e-9}\n' + GJ_OK), 2),
]


@pytest.mark.parametrize("sets, trace, n_in", [c[1:] for c in COMPLETES],
                         ids=[c[0] for c in COMPLETES])
def test_completes_and_accounts_for_every_request(capsys, base, tmp_path, sets, trace, n_in):
    out = tmp_path / "o"
    argv = ["run", base, "-q", "--no-figures", "-o", str(out)]
    if trace is not None:
        p = tmp_path / trace[0]
        p.write_text(trace[1])
        argv += ["--trace", str(p)]
    for s in sets:
        argv += ["--set", s]
    df = completes(capsys, argv, out, n_in)
    assert set(df.status) <= {"completed", "rejected", "cancelled"}


def completes(capsys, argv, out, n_in) -> pd.DataFrame:
    """Run ``argv`` (a ``servesim run`` writing to ``out``): exit 0, nothing that looks like
    an error or a leaked warning on stderr, and each of the ``n_in`` requests once in
    ``requests.parquet`` (sorted by id), its summary adding up."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 0, err
    for bad in ("Traceback", "internal error", "RuntimeWarning", "error:"):
        assert bad not in err, err
    s = json.loads((out / "summary.json").read_text())
    assert s["num_requests"] == n_in
    assert (s["num_completed"] + s["num_rejected"] + s["num_cancelled"]
            + s["num_unfinished"]) == n_in
    df = pd.read_parquet(out / "requests.parquet").sort_values("request_id")
    assert len(df) == n_in and df.request_id.is_unique
    return df


def test_corpus_size():
    """The corpus holds at least 150 cases (the issue's bar)."""
    n = (len(SET_ERRORS) + len(FILE_ERRORS) + len(TRACE_ERRORS) + len(CLI_IDS) + 16
         + len(COMPLETES))
    assert n >= 150, n
