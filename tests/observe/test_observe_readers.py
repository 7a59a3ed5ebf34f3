"""Recorded-run readers: exact round trips from known values, prefix ids from token ids, and
one-line errors naming file and line for malformed records.

Expected values are computed here by hand from the numbers written (``record_factories``):
TTFT = first - queued, TPOT = (last - first) / (output - 1), E2E = last - queued, arrivals
relative to the earliest ``queued_ts`` / ``start_times`` / ``arrival_s``.
"""
from __future__ import annotations

import json
import math
import warnings

import pytest
from record_factories import (
    STATS_ROWS,
    TOKEN_IDS,
    base_meta,
    bench_result,
    workload_rows,
    write_jsonl,
    write_vllm_run,
)

from simulator.cli.main import main
from simulator.observe import RecordError, prefix_hash_ids, read_recorded
from simulator.observe.readers import read_bench_json, read_generic_csv, read_request_stats


# ------------------------------------------------------------------ vLLM request stats
def test_request_stats_round_trip(tmp_path):
    run = read_recorded(write_vllm_run(tmp_path))
    o = run.outcomes
    # sorted by queued_ts: bench-1 (100.0), bench-0 (100.5), bench-2 (103.0)
    assert o["record_request_id"].tolist() == ["bench-1", "bench-0", "bench-2"]
    assert o["request_id"].tolist() == [0, 1, 2]
    assert o["arrival_s"].tolist() == [0.0, 0.5, 3.0]
    assert o["num_prompt_tokens"].tolist() == [33, 40, 20]
    assert o["num_output_tokens"].tolist() == [3, 11, 1]
    # TTFT = first - queued
    assert o["ttft_s"].tolist() == [100.25 - 100.0, 101.5 - 100.5, 104.0 - 103.0]
    # E2E = last - queued
    assert o["e2e_latency_s"].tolist() == [100.75 - 100.0, 106.5 - 100.5, 104.0 - 103.0]
    # TPOT = (last - first) / (output - 1); undefined for one output token
    tpot = o["tpot_s"].tolist()
    assert tpot[:2] == [(100.75 - 100.25) / 2, (106.5 - 101.5) / 10] == [0.25, 0.5]
    assert math.isnan(tpot[2])
    assert o["queue_delay_s"].tolist() == [0.0, 0.25, 0.5]
    # the specs replay exactly those arrivals and lengths
    assert [(s.request_id, s.arrival_time_s, s.num_prompt_tokens, s.num_output_tokens)
            for s in run.specs] == [(0, 0.0, 33, 3), (1, 0.5, 40, 11), (2, 3.0, 20, 1)]
    assert run.format == "vllm_request_stats"
    assert run.name == "H100/Llama"


def test_request_stats_settings_and_sources(tmp_path):
    meta = base_meta()
    meta["kv_cache"] = {"num_gpu_blocks": 1234, "block_size": 32, "enable_prefix_caching": False}
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    run = read_recorded(write_vllm_run(tmp_path, meta=meta))
    s = run.settings
    assert s["max_num_seqs"].value == 8
    assert s["max_num_seqs"].source == "meta.json engine_kwargs.max_num_seqs"
    assert s["num_gpu_blocks"].value == 1234
    assert s["num_gpu_blocks"].source == "meta.json kv_cache.num_gpu_blocks"
    assert s["block_size"].value == 32
    assert s["enable_prefix_caching"].value is False
    assert s["device_name"].value == "NVIDIA H100 80GB HBM3"
    assert s["vllm_version"].value == "0.19.0"
    assert "max_model_len" not in s  # null in the record = not recorded


def test_request_stats_resolved_config_wins_over_engine_kwargs(tmp_path):
    meta = base_meta(max_num_seqs=8)
    meta["resolved_config"] = {"scheduler_config": {"max_num_seqs": 12}}
    run = read_recorded(write_vllm_run(tmp_path, meta=meta))
    assert run.settings["max_num_seqs"].value == 12
    assert run.settings["max_num_seqs"].source == \
        "meta.json resolved_config.scheduler_config.max_num_seqs"


def test_request_stats_without_meta(tmp_path):
    p = write_jsonl(tmp_path / "requests.jsonl", STATS_ROWS)
    run = read_recorded(p)
    assert run.settings == {}
    assert run.outcomes["ttft_s"].tolist() == [0.25, 1.0, 1.0]
    assert any("No meta.json" in n for n in run.notes)


def test_timeseries_is_aligned_to_the_first_arrival(tmp_path):
    # the first request (bench-1) has arrival_time 4999.75 (wall clock); the run started at
    # epoch 4999.5 = 01:23:19.5, so the record's t = 1.0 is 0.75 s after the first arrival
    meta = base_meta()
    meta["started_at"] = "1970-01-01T01:23:19.5Z"
    ts = "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n1.0,0,0,2,1,50.0\n"
    run = read_recorded(write_vllm_run(tmp_path, meta=meta, timeseries=ts))
    t = run.timeseries
    assert t["time_s"].tolist() == [1.0 - 0.25]
    assert t["num_running"].tolist() == [2.0] and t["num_waiting"].tolist() == [1.0]
    assert t["kv_cache_usage"].tolist() == [0.5]


def test_timeseries_kv_zero_throughout_is_not_recorded(tmp_path):
    ts = "t,running,waiting,kv_cache_pct\n1.0,2,1,0.0\n2.0,3,0,0.0\n"
    run = read_recorded(write_vllm_run(tmp_path, timeseries=ts))
    assert run.timeseries["kv_cache_usage"].isna().all()
    assert any("kv_cache_pct is 0 throughout" in n for n in run.notes)


# ------------------------------------------------------------------ prefix ids
def test_prefix_ids_two_prompts_sharing_40_tokens_share_two_blocks():
    a = list(range(1, 61))                          # 60 tokens -> 3 full blocks of 16
    b = a[:40] + [1000 + i for i in range(30)]      # 70 tokens -> 4 full blocks
    ha, hb = prefix_hash_ids(a, 16), prefix_hash_ids(b, 16)
    assert len(ha) == 3 and len(hb) == 4            # partial blocks get no id
    assert ha[:2] == hb[:2] and ha[2] != hb[2]      # tokens 32..47 differ from token 40 on
    assert len(set(ha) & set(hb)) == 2
    assert prefix_hash_ids(a, 16) == ha             # deterministic
    assert prefix_hash_ids(a[:15], 16) == ()


def test_token_ids_from_the_workload_file(tmp_path):
    run = read_recorded(write_vllm_run(tmp_path, workload=workload_rows()))
    assert run.token_ids_source == "w.jsonl input_tok_ids"
    by_rec = dict(zip(run.outcomes["record_request_id"], run.specs))
    s0, s1, s2 = by_rec["bench-0"], by_rec["bench-1"], by_rec["bench-2"]
    assert s0.prefix_block_tokens == 16
    # bench-0: 40 tokens -> 2 full blocks; bench-1 repeats its first 32 tokens -> 2 blocks,
    # the same ids; bench-2: 20 tokens of other ids -> 1 block, not shared
    assert s0.prefix_hash_ids == prefix_hash_ids(TOKEN_IDS[0], 16)
    assert s1.prefix_hash_ids == s0.prefix_hash_ids[:2]
    assert len(s2.prefix_hash_ids) == 1 and s2.prefix_hash_ids[0] not in s0.prefix_hash_ids
    assert any("SHA-256 equals" in n for n in run.notes)


def test_workload_with_wrong_hash_is_not_used(tmp_path):
    from simulator.observe.record import RecordWarning
    with pytest.warns(RecordWarning, match="differs from meta.json dataset_hash"):
        run = read_recorded(write_vllm_run(tmp_path, workload=workload_rows(),
                                           good_hash=False))
    assert run.token_ids_source is None
    assert all(s.prefix_hash_ids is None for s in run.specs)
    assert any("differs from meta.json dataset_hash" in n for n in run.notes)


def test_missing_workload_file_is_a_console_warning(tmp_path):
    """A run folder moved away from its workloads/ (as when one copies a record elsewhere)
    replays without prefix sharing: before, only a note in validation.json said so (the TTFT
    error of the RTX 4090 run doubled unseen); now a RecordWarning too."""
    import shutil

    from simulator.observe.record import RecordWarning
    run_dir = write_vllm_run(tmp_path / "a", workload=workload_rows())
    moved = tmp_path / "b" / "run"
    shutil.copytree(run_dir, moved)
    with pytest.warns(RecordWarning, match="not found next to the run or in its parent "
                                           "folders: no prompt token ids"):
        run = read_recorded(moved)
    assert run.token_ids_source is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordWarning)
        assert read_recorded(run_dir).token_ids_source == "w.jsonl input_tok_ids"


def test_workload_sibling_with_the_recorded_hash_is_used(tmp_path):
    run_dir = write_vllm_run(tmp_path, workload=workload_rows())
    wl = tmp_path / "workloads" / "w.jsonl"
    good = wl.read_text()
    (tmp_path / "workloads" / "other.jsonl").write_text(good)
    wl.write_text(good[: len(good) // 2])  # truncated, as one shared workload file is
    run = read_recorded(run_dir)
    assert run.token_ids_source == "other.jsonl input_tok_ids"
    assert any("other.jsonl in the same folder has the recorded hash" in n for n in run.notes)


def test_workload_with_other_lengths_is_not_used(tmp_path):
    rows = workload_rows()
    rows[0] = dict(rows[0], input_toks=41, input_tok_ids=list(range(41)))
    from simulator.observe.record import RecordWarning
    with pytest.warns(RecordWarning, match="does not match workload line 1"):
        run = read_recorded(write_vllm_run(tmp_path, workload=rows))
    assert run.token_ids_source is None
    assert any("does not match workload line 1" in n for n in run.notes)


def test_prefix_ids_share_kv_blocks_in_the_simulation(tmp_path):
    """Two requests sharing 40 prompt tokens (block 16): the second reuses exactly 2 cached
    blocks = 32 tokens (the third block differs)."""
    from simulator.base.request import RequestSpec
    from simulator.runs.scenario import run_scenario
    from simulator.scenario.config import validate_scenario
    a = list(range(1, 61))
    b = a[:40] + [1000 + i for i in range(30)]
    specs = [RequestSpec(0, 0.0, 60, 4, prefix_hash_ids=prefix_hash_ids(a, 16),
                         prefix_block_tokens=16),
             RequestSpec(1, 100.0, 70, 4, prefix_hash_ids=prefix_hash_ids(b, 16),
                         prefix_block_tokens=16)]
    sc = validate_scenario({"model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
                            "perf": {"source": "roofline"},
                            "kv_cache": {"enable_prefix_caching": True, "num_gpu_blocks": 100},
                            "workload": {"trace": "unused.csv"}})
    res = run_scenario(sc, None, specs=specs, write=False, figures=False)
    assert res.requests["num_cached_prompt_tokens"].tolist() == [0, 32]


# ------------------------------------------------------------------ vllm bench serve
def test_bench_json_round_trip(tmp_path):
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(bench_result()))
    run = read_recorded(p)
    o = run.outcomes
    assert run.format == "vllm_bench_json" and run.num_failed == 1
    # sorted by start_times: file entries 1 (1000.0), 0 (1000.5), 2 (1002.25); 3 failed
    assert o["record_request_id"].tolist() == ["1", "0", "2"]
    assert o["arrival_s"].tolist() == [0.0, 0.5, 2.25]
    assert o["num_prompt_tokens"].tolist() == [200, 100, 50]
    assert o["num_output_tokens"].tolist() == [5, 10, 1]
    assert o["ttft_s"].tolist() == [0.5, 0.25, 0.125]
    assert o["e2e_latency_s"].tolist() == [1.5, 1.375, 0.125]
    tpot = o["tpot_s"].tolist()
    assert tpot[:2] == [(1.5 - 0.5) / 4, (1.375 - 0.25) / 9] == [0.25, 0.125]
    assert math.isnan(tpot[2])
    assert o["itl_s"].tolist() == [(0.25,) * 4, (0.125,) * 9, ()]
    assert run.settings["model"].value == "meta-llama/Llama-3.1-8B"
    assert run.settings["model"].source == "bench.json model_id"
    assert [(s.arrival_time_s, s.num_prompt_tokens, s.num_output_tokens) for s in run.specs] \
        == [(0.0, 200, 5), (0.5, 100, 10), (2.25, 50, 1)]
    assert run.approximations == []


def test_bench_json_without_latencies_sums_the_gaps(tmp_path):
    d = bench_result()
    del d["latencies"]
    p = tmp_path / "b.json"
    p.write_text(json.dumps(d))
    o = read_bench_json(p).outcomes
    assert o["e2e_latency_s"].tolist() == [0.5 + 4 * 0.25, 0.25 + 9 * 0.125, 0.125]


def test_bench_json_without_start_times_draws_arrivals(tmp_path):
    d = bench_result(request_rate="inf")
    del d["start_times"]
    p = tmp_path / "b.json"
    p.write_text(json.dumps(d))
    run = read_bench_json(p)
    assert run.outcomes["arrival_s"].tolist() == [0.0, 0.0, 0.0]  # infinite rate: all at once
    assert any("no start_times" in a for a in run.approximations)
    d = bench_result(request_rate=4.0)
    del d["start_times"]
    p.write_text(json.dumps(d))
    run = read_bench_json(p)
    # vllm bench serve rescales the cumulative gaps so the last of the 4 sends is at 4 / rate
    arr = run.outcomes["arrival_s"].to_numpy()
    assert (arr >= 0).all() and len(arr) == 3


def test_bench_json_without_start_times_or_rate_says_all_at_once(tmp_path):
    """An infinite or unrecorded rate sends everything at 0: the approximation says so, not
    'gamma gaps, rescaled to num_prompts / rate' (which has no meaning at rate inf)."""
    p = tmp_path / "b.json"
    for rate, shown in (("inf", "request_rate='inf'"), (None, "request_rate=None (not recorded")):
        d = bench_result(request_rate=rate)
        del d["start_times"]
        if rate is None:
            del d["request_rate"]
        p.write_text(json.dumps(d))
        run = read_bench_json(p)
        assert run.outcomes["arrival_s"].tolist() == [0.0, 0.0, 0.0]
        (a,) = [a for a in run.approximations if "no start_times" in a]
        assert shown in a and "every request arrives at 0" in a and "gamma" not in a
    d = bench_result(request_rate=4.0)
    del d["start_times"]
    p.write_text(json.dumps(d))
    (a,) = [a for a in read_bench_json(p).approximations if "no start_times" in a]
    assert "request_rate=4.0" in a and "gamma gaps" in a

def test_bench_json_metadata_settings(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps(bench_result(max_num_seqs="64", tensor_parallel_size="2")))
    run = read_bench_json(p)
    assert run.settings["max_num_seqs"].value == 64
    assert run.settings["tensor_parallel_size"].value == 2
    assert "--metadata" in run.settings["max_num_seqs"].source


# ------------------------------------------------------------------ generic CSV
def test_generic_csv_round_trip(tmp_path):
    p = tmp_path / "sglang_run.csv"
    p.write_text("request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,tpot_s,itl_s\n"
                 "a,10.5,100,5,0.25,1.25,,\"[0.25, 0.25, 0.25, 0.25]\"\n"
                 "b,10.0,64,3,0.5,1.5,0.75,\n")
    run = read_generic_csv(p)
    o = run.outcomes
    assert o["record_request_id"].tolist() == ["b", "a"]
    assert o["arrival_s"].tolist() == [0.0, 0.5]
    assert o["ttft_s"].tolist() == [0.5, 0.25]
    assert o["e2e_latency_s"].tolist() == [1.5, 1.25]
    # tpot_s given for b (used as recorded); computed for a: (1.25 - 0.25) / (5 - 1)
    assert o["tpot_s"].tolist() == [0.75, 0.25]
    assert o["first_token_s"].tolist() == [0.5, 0.75]
    assert o["itl_s"].tolist()[1] == (0.25,) * 4
    assert run.settings == {}


def test_generic_csv_absolute_token_times(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,first_token_s,last_token_s\n"
                 "2.0,10,3,2.5,3.5\n")
    o = read_generic_csv(p).outcomes
    assert o["ttft_s"].tolist() == [0.5] and o["e2e_latency_s"].tolist() == [1.5]
    assert o["tpot_s"].tolist() == [0.5]


def test_generic_csv_negative_origin_is_shifted(tmp_path):
    # traces/README.md: "seconds on one clock (any origin)"; a clock at -100 s is fine and
    # is shifted like any other: arrivals -100.0 and -99.5 become 0.0 and 0.5; durations
    # stay as recorded; absolute token times shift with the arrivals
    p = tmp_path / "r.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
                 "-99.5,10,3,0.25,1.25\n-100.0,10,3,0.5,1.5\n")
    o = read_generic_csv(p).outcomes
    assert o["arrival_s"].tolist() == [0.0, 0.5]
    assert o["ttft_s"].tolist() == [0.5, 0.25]
    assert o["first_token_s"].tolist() == [0.5, 0.75]
    q = tmp_path / "abs.csv"
    q.write_text("arrival_s,prompt_tokens,output_tokens,first_token_s,last_token_s\n"
                 "-2.0,10,3,-1.5,-0.5\n")
    o = read_generic_csv(q).outcomes
    assert o["ttft_s"].tolist() == [0.5] and o["e2e_latency_s"].tolist() == [1.5]


def test_generic_csv_negative_duration_still_refused(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
                 "-1.0,10,3,-0.25,1.25\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: ttft_s '-0\.25' must be >= 0"):
        read_generic_csv(p)


def test_generic_csv_duplicate_request_id_names_both_lines(tmp_path):
    # header is line 1; 'a' is on lines 2 and 4
    p = tmp_path / "r.csv"
    p.write_text("request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
                 "a,0.0,10,3,0.25,1.25\nb,0.5,10,3,0.25,1.25\na,1.0,10,3,0.25,1.25\n")
    with pytest.raises(RecordError) as ei:
        read_generic_csv(p)
    assert str(ei.value) == (f"{p}:4: request_id 'a' repeats the one on line 2; each request "
                             "needs its own id")


# ------------------------------------------------------------------ malformed records
def _stats_file(tmp_path, rows):
    return write_jsonl(tmp_path / "requests.jsonl", rows)


def test_bad_json_line_names_file_and_line(tmp_path):
    p = _stats_file(tmp_path, STATS_ROWS)
    lines = p.read_text().splitlines()
    lines[1] = lines[1][:-5]
    p.write_text("\n".join(lines) + "\n")
    # the cut line ends early: the column is the one just past its last character
    with pytest.raises(RecordError, match=rf"requests\.jsonl:2:{len(lines[1]) + 1}: invalid JSON"):
        read_request_stats(p)


def test_missing_field_names_file_and_line(tmp_path):
    rows = [dict(r) for r in STATS_ROWS]
    del rows[2]["first_token_ts"]
    with pytest.raises(RecordError, match=r"requests\.jsonl:3: first_token_ts is missing"):
        read_request_stats(_stats_file(tmp_path, rows))


def test_scheduled_before_queued_names_file_and_line(tmp_path):
    # the vLLM reader's rule the generic CSV now shares: no negative queue delay
    rows = [dict(r) for r in STATS_ROWS]
    rows[2]["scheduled_ts"] = 102.5  # before queued_ts 103.0
    with pytest.raises(RecordError, match=r"requests\.jsonl:3: scheduled_ts 102\.5 is before "
                                          r"queued_ts 103\.0"):
        read_request_stats(_stats_file(tmp_path, rows))


def test_request_stats_duplicate_request_id_names_both_lines(tmp_path):
    # outcomes are matched to simulated requests by id, one to one: a repeat is refused
    rows = [dict(r) for r in STATS_ROWS]
    rows[2]["request_id"] = "bench-0"
    p = _stats_file(tmp_path, rows)
    with pytest.raises(RecordError) as ei:
        read_request_stats(p)
    assert str(ei.value) == (f"{p}:3: request_id 'bench-0' repeats the one on line 1; each "
                             "request needs its own id")


def test_request_stats_blank_or_null_request_id_defaults_to_line(tmp_path):
    rows = [dict(r) for r in STATS_ROWS]
    rows[0]["request_id"] = "  "
    rows[2]["request_id"] = None
    del rows[1]["request_id"]
    run = read_request_stats(_stats_file(tmp_path, rows))
    # sorted by queued_ts: line 2 (100.0), line 1 (100.5), line 3 (103.0)
    assert run.outcomes["record_request_id"].tolist() == ["line-2", "line-1", "line-3"]
    rows[0]["request_id"] = 0  # a numeric id is an id, not a blank
    run = read_request_stats(_stats_file(tmp_path, rows))
    assert run.outcomes["record_request_id"].tolist() == ["line-2", "0", "line-3"]


def test_bad_token_count_names_file_and_line(tmp_path):
    rows = [dict(r) for r in STATS_ROWS]
    rows[1]["input_toks"] = 0
    with pytest.raises(RecordError, match=r"requests\.jsonl:2: input_toks 0 must be >= 1"):
        read_request_stats(_stats_file(tmp_path, rows))


def test_timestamps_out_of_order_name_file_and_line(tmp_path):
    rows = [dict(r) for r in STATS_ROWS]
    rows[0]["first_token_ts"] = 100.6  # before scheduled_ts 100.75
    with pytest.raises(RecordError, match=r"requests\.jsonl:1: first_token_ts 100\.6 is before "
                                          r"scheduled_ts 100\.75"):
        read_request_stats(_stats_file(tmp_path, rows))


def test_bad_meta_value_names_file_and_line(tmp_path):
    meta = base_meta(max_num_seqs="many")
    run_dir = write_vllm_run(tmp_path, meta=meta)
    text = (run_dir / "vllm" / "meta.json").read_text()
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"max_num_seqs"' in t)
    with pytest.raises(RecordError, match=rf"meta\.json:{line}: engine_kwargs\.max_num_seqs "
                                          r"'many' is not an integer"):
        read_recorded(run_dir)


def test_invalid_meta_json_names_file_and_line(tmp_path):
    run_dir = write_vllm_run(tmp_path)
    (run_dir / "vllm" / "meta.json").write_text('{\n  "model": "x",\n  "vllm_version" 1\n}\n')
    with pytest.raises(RecordError, match=r"meta\.json:3: invalid JSON"):
        read_recorded(run_dir)


def test_bench_json_errors(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps(bench_result(ttfts=[0.25, 0.5])))
    with pytest.raises(RecordError, match=r"b\.json: ttfts has 2 entries but input_lens has 4"):
        read_bench_json(p)
    p.write_text(json.dumps(bench_result(ttfts=[0.25, "x", 0.125, 0.0])))
    with pytest.raises(RecordError, match=r"b\.json: ttfts\[1\] 'x' is not a finite number"):
        read_bench_json(p)
    p.write_text('{"input_lens": [1,\n 2,, 3]}')
    with pytest.raises(RecordError, match=r"b\.json:2: invalid JSON"):
        read_bench_json(p)
    d = bench_result()
    del d["ttfts"]
    p.write_text(json.dumps(d))
    with pytest.raises(RecordError, match=r"key 'ttfts' is missing"):
        read_bench_json(p)


def test_generic_csv_errors(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,10,3,0.5,1.0\n"
                 "1,10,3,abc,1.0\n")
    with pytest.raises(RecordError, match=r"r\.csv:3: ttft_s 'abc' is not a finite number"):
        read_generic_csv(p)
    p.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s\n0,10,3,0.5\n")
    with pytest.raises(RecordError, match=r"needs column\(s\) e2e_s or last_token_s"):
        read_generic_csv(p)
    p.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,10,3,0.5,0.25\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: last token 0\.25 s is before the first "
                                          r"token 0\.5 s"):
        read_generic_csv(p)


_CSV_HEAD = "request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"


def test_generic_csv_scheduled_before_arrival_refused(tmp_path):
    # line 3: scheduled 4.0 < arrival 5.0 -> a queue delay of -1 s, which was published
    p = tmp_path / "r.csv"
    p.write_text(f"{_CSV_HEAD},scheduled_s\na,1.0,10,3,0.5,1.0,1.25\nb,5.0,10,3,0.5,1.0,4.0\n")
    with pytest.raises(RecordError) as ei:
        read_generic_csv(p)
    assert str(ei.value).startswith(f"{p}:3: scheduled 4.0 s is before the arrival 5.0 s")
    # the same from a queue delay is a negative duration, refused as such
    p.write_text(f"{_CSV_HEAD},queue_delay_s\na,1.0,10,3,0.5,1.0,-0.5\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: queue_delay_s '-0\.5' must be >= 0"):
        read_generic_csv(p)


def test_generic_csv_first_token_before_scheduled_refused(tmp_path):
    # arrival 1.0, first token 1.5 (ttft 0.5), scheduled 1.75: first token before scheduled
    p = tmp_path / "r.csv"
    p.write_text(f"{_CSV_HEAD},scheduled_s\na,1.0,10,3,0.5,1.0,1.75\n")
    with pytest.raises(RecordError) as ei:
        read_generic_csv(p)
    assert str(ei.value).startswith(f"{p}:2: first token 1.5 s is before the scheduled 1.75 s")
    # queue delay 0.75 s > ttft 0.5 s: the same, from durations
    p.write_text(f"{_CSV_HEAD},queue_delay_s\na,1.0,10,3,0.5,1.0,0.75\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: first token 1\.5 s is before the "
                                          r"scheduled 1\.75 s"):
        read_generic_csv(p)
    # in order (scheduled 1.25 in [1.0, 1.5]) and a row without scheduled_s: read; queue
    # delays 0.25 and NaN
    p.write_text(f"{_CSV_HEAD},scheduled_s\na,1.0,10,3,0.5,1.0,1.25\nb,2.0,10,3,0.5,1.0,\n")
    qd = read_generic_csv(p).outcomes["queue_delay_s"].tolist()
    assert qd[0] == 0.25 and math.isnan(qd[1])


def test_generic_csv_last_token_before_first_from_clock_times(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens,first_token_s,last_token_s\n"
                 "0,10,3,0.5,2.0\n1.0,10,3,2.0,1.5\n")
    with pytest.raises(RecordError) as ei:
        read_generic_csv(p)
    assert str(ei.value).startswith(f"{p}:3: last token 1.5 s is before the first token 2.0 s")


def test_generic_csv_duration_and_clock_time_must_agree(tmp_path):
    # ttft_s 0.5 but first_token_s - arrival_s = 10.75 - 10.0 = 0.75: refused (before, ttft_s
    # was used silently)
    p = tmp_path / "r.csv"
    p.write_text(f"{_CSV_HEAD},first_token_s\na,10.0,10,3,0.5,1.0,10.5\nb,10.0,10,3,0.5,1.0,"
                 "10.75\n")
    with pytest.raises(RecordError) as ei:
        read_generic_csv(p)
    assert str(ei.value).startswith(f"{p}:3: ttft_s 0.5 s disagrees with first_token_s 10.75 s"
                                    " - arrival_s 10.0 s = 0.75 s")
    # e2e_s and last_token_s: 1.0 vs 11.25 - 10.0 = 1.25
    p.write_text(f"{_CSV_HEAD},last_token_s\na,10.0,10,3,0.5,1.0,11.25\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: e2e_s 1\.0 s disagrees with "
                                          r"last_token_s 11\.25 s"):
        read_generic_csv(p)
    # queue_delay_s and scheduled_s: 0.125 vs 10.25 - 10.0 = 0.25
    p.write_text(f"{_CSV_HEAD},queue_delay_s,scheduled_s\na,10.0,10,3,0.5,1.0,0.125,10.25\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: queue_delay_s 0\.125 s disagrees with "
                                          r"scheduled_s 10\.25 s"):
        read_generic_csv(p)


def test_generic_csv_duration_and_clock_time_agreeing_are_read(tmp_path):
    # epoch clock: 1.7e9 + 0.1 is not exact in binary, so first_token_s - arrival_s differs
    # from ttft_s 0.1 by float rounding only (< 2 spacings of 1.7e9, 2.4e-7 s each): read;
    # an empty first_token_s is not compared
    p = tmp_path / "r.csv"
    p.write_text(f"{_CSV_HEAD},first_token_s,last_token_s\n"
                 "a,1700000000.0,10,3,0.1,1.0,1700000000.1,1700000001.0\n"
                 "b,1700000001.0,10,3,0.25,1.0,,1700000002.0\n")
    o = read_generic_csv(p).outcomes
    # the durations are used: arrival + ttft_s, re-based on the epoch clock (rounding of
    # 1.7e9 + 0.1 included, as without first_token_s)
    a0 = 1700000000.0
    assert o["ttft_s"].tolist() == [(a0 + 0.1) - a0, 0.25]
    # 1 microsecond apart on a 0.1 s TTFT is far beyond 1e-9 relative: refused
    p.write_text(f"{_CSV_HEAD},first_token_s\na,1700000000.0,10,3,0.1,1.0,1700000000.100001\n")
    with pytest.raises(RecordError, match=r"r\.csv:2: ttft_s 0\.1 s disagrees"):
        read_generic_csv(p)


def test_generic_csv_empty_request_id_defaults_to_line(tmp_path):
    # empty ids on lines 2 and 4 become line-2 and line-4 (as without the column); before,
    # both were '' and the record kept '' as an id
    p = tmp_path / "r.csv"
    p.write_text(f"{_CSV_HEAD}\n,0.0,10,3,0.25,1.25\nb,0.5,10,3,0.25,1.25\n  ,1.0,10,3,0.25,1.25\n")
    o = read_generic_csv(p).outcomes
    assert o["record_request_id"].tolist() == ["line-2", "b", "line-4"]
    # an explicit id equal to an empty one's default is a duplicate, naming both lines
    p.write_text(f"{_CSV_HEAD}\n,0.0,10,3,0.25,1.25\nline-2,0.5,10,3,0.25,1.25\n")
    with pytest.raises(RecordError) as ei:
        read_generic_csv(p)
    assert str(ei.value) == (f"{p}:3: request_id 'line-2' repeats the one on line 2; each "
                             "request needs its own id")


def test_unknown_record_type(tmp_path):
    p = tmp_path / "run.parquet"
    p.write_bytes(b"x")
    with pytest.raises(RecordError, match=r"unknown record type '\.parquet'"):
        read_recorded(p)
    with pytest.raises(RecordError, match=r"no requests\.jsonl"):
        read_recorded(tmp_path)


def test_cli_malformed_record_is_one_line_exit_2(tmp_path, capsys):
    rows = [dict(r) for r in STATS_ROWS]
    rows[1]["output_toks"] = "many"
    p = _stats_file(tmp_path, rows)
    rc = main(["validate", "--recorded", str(p), "--gpu", "h100-sxm", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    assert "requests.jsonl:2: output_toks 'many' is not an integer" in err
    assert "Traceback" not in err


def test_bench_json_bad_rate_without_start_times(tmp_path):
    d = bench_result(request_rate="fast")
    del d["start_times"]
    p = tmp_path / "b.json"
    p.write_text(json.dumps(d))
    with pytest.raises(RecordError, match=r"b\.json: no start_times, and request_rate 'fast'"):
        read_bench_json(p)


def test_workload_file_that_is_not_utf8_is_not_used(tmp_path):
    # a workload file with a byte that is not UTF-8 (its hash recorded, so the reader gets as
    # far as decoding it): the replay goes on without token ids, and the note says why
    from record_factories import sha256

    from simulator.observe.record import RecordWarning
    run_dir = write_vllm_run(tmp_path, workload=workload_rows())
    wl = tmp_path / "workloads" / "w.jsonl"
    wl.write_bytes(b"\xff" + wl.read_bytes())
    meta = run_dir / "vllm" / "meta.json"
    doc = json.loads(meta.read_text())
    doc["dataset_hash"] = sha256(wl)
    meta.write_text(json.dumps(doc))
    with pytest.warns(RecordWarning, match="not UTF-8 text"):
        run = read_recorded(run_dir)
    assert run.token_ids_source is None
    assert any("not UTF-8 text (byte 0xff at offset 0)" in n for n in run.notes)
