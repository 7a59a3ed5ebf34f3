"""The inference-perf reader (``simulator.observe.readers_ip``) and the workload it rebuilds
(``simulator.observe.ip_workload``), from folders the tests write with known values; every
expected figure is derived by hand in the test (inference-perf's generation rules are stated
in the modules' docstrings).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from record_factories import IP_CONFIG, ip_stage, write_ip_run

from simulator.cli.main import main
from simulator.observe import read_recorded
from simulator.observe.ip_workload import (
    aiohttp_deadlines,
    constant_arrivals,
    poisson_arrivals,
    prompt_lengths,
)
from simulator.observe.readers import detect_record_format
from simulator.observe.record import RecordError


# ---------------------------------------------------------------------------- generation
def test_constant_load_is_rescaled_exponential_gaps():
    """inference-perf's 'constant' load: int(rate x duration) sends, the last at exactly the
    duration, gaps not all equal (exponential draws, rescaled)."""
    t = constant_arrivals(2.5, 9.0, np.random.default_rng(1))
    assert t.size == 22                       # int(2.5 x 9)
    assert t[-1] == pytest.approx(9.0, abs=1e-12)
    gaps = np.diff(np.concatenate(([0.0], t)))
    assert gaps.sum() == pytest.approx(9.0, abs=1e-12)
    assert (gaps > 0).all() and gaps.std() > 0.1 * gaps.mean()


def test_poisson_load_count():
    t = poisson_arrivals(3.0, 20.0, np.random.default_rng(2))
    assert t.size == 60 and (np.diff(t) >= 0).all() and t[0] >= 0


def test_aiohttp_deadlines():
    """Default total time-out 300 s, rounded up to a whole second of the loop clock; a
    deadline of 5 s or less is not rounded."""
    d = aiohttp_deadlines(500, None, np.random.default_rng(3))
    assert ((d >= 300.0) & (d < 301.0)).all()
    assert (aiohttp_deadlines(4, 5.0, np.random.default_rng(3)) == 5.0).all()
    d = aiohttp_deadlines(50, 60.0, np.random.default_rng(3))
    assert ((d >= 60.0) & (d < 61.0)).all()


def test_prompt_lengths_from_recorded_percentiles():
    """Six prompts at percentiles 0, 25, 41.7, 58.3, 75, 100 of (0: 50, 50: 56, 90: 60,
    99: 61, 100: 62): 50, 53, 55.0, 56.83, 58.5, 62 -> rounded 50, 53, 55, 57, 58 (half to
    even), 62 = 335; the recorded mean 56 asks for 336: the value rounded down the most
    (58.5) goes up."""
    s = {"mean": 56.0, "min": 50.0, "median": 56.0, "p90": 60.0, "p99": 61.0, "max": 62.0}
    assert prompt_lengths(s, 6, 56.0).tolist() == [50, 53, 55, 57, 59, 62]
    # a mean the percentiles cannot reach is approached within [min, max]
    assert prompt_lengths(s, 6, 70.0).max() == 62


# ------------------------------------------------------------------------------- reader
@pytest.fixture()
def ip_run(tmp_path):
    return read_recorded(write_ip_run(tmp_path))


def test_folder_is_detected(tmp_path):
    run = write_ip_run(tmp_path)
    assert detect_record_format(run) == ("inference_perf", run)


def test_requests_per_stage_outputs_and_timeouts(ip_run):
    r = ip_run
    assert r.format == "inference_perf" and r.aggregate_only and r.client_side
    assert r.metric_definitions == "inference_perf"
    assert [s.num_requests for s in r.stages] == [10, 20]          # int(2 x 5), int(4 x 5)
    assert [s.num_success for s in r.stages] == [10, 20]
    assert len(r.specs) == 30 and [s.request_id for s in r.specs] == list(range(30))
    assert r.outcomes["stage"].tolist() == [0] * 10 + [1] * 20
    assert {s.slice for s in r.specs[:10]} == {"stage_0"}
    assert all(s.num_output_tokens == s.max_tokens == 8 for s in r.specs)   # ignore_eos
    assert all(300.0 <= s.cancel_after_s < 301.0 for s in r.specs)        # aiohttp default
    arr = np.array([s.arrival_time_s for s in r.specs])
    assert arr[0] == 0.0 and (np.diff(arr) > 0).all()


def test_stage_spacing(ip_run):
    """Within a stage the sends span (duration - first gap); the next stage's first send
    comes (stage 0's longest latency 0.2 s + half the 1 s poll + interval 1 s + the 1 s lead)
    + its own first gap after stage 0's last send: so the first gap g1 of stage 1 and its
    span add up to its 5 s duration."""
    s0, s1 = ip_run.stages
    arr = np.array([s.arrival_time_s for s in ip_run.specs])
    assert s0.end_s == arr[9] and s1.start_s == arr[10] and s1.end_s == arr[29]
    g1 = (s1.start_s - s0.end_s) - (0.2 + 0.5 + 1.0 + 1.0)
    assert 0 < g1 < 5.0
    assert (s1.end_s - s1.start_s) + g1 == pytest.approx(5.0, abs=1e-9)


def test_prompts_lengths_and_shared_prefix(ip_run):
    """Six prompts (2 groups x 3) with the lengths derived in
    test_prompt_lengths_from_recorded_percentiles; request i of each stage sends prompt
    i mod 6; a group shares floor(32 x (56 - 1) / (32 + 20)) = 33 tokens, i.e. two full
    16-token blocks; the groups share nothing."""
    specs = ip_run.specs
    s0 = specs[:10]
    assert sorted(s.num_prompt_tokens for s in s0[:6]) == [50, 53, 55, 57, 59, 62]
    for i in range(4):                                   # prompt i mod 6, in both stages
        assert s0[i + 6].prefix_hash_ids == s0[i].prefix_hash_ids
        assert specs[10 + i].prefix_hash_ids == s0[i].prefix_hash_ids
    assert ip_run.extra["shared_prefix_tokens"] == 33
    heads = [s.prefix_hash_ids[:2] for s in s0[:6]]
    assert sorted(heads.count(h) for h in set(heads)) == [3, 3]         # two groups of three
    thirds = [s.prefix_hash_ids[2] for s in s0[:6]]
    assert len(set(thirds)) == 6                          # block 3 is each prompt's own
    assert all(len(s.prefix_hash_ids) == s.num_prompt_tokens // 16 for s in s0[:6])


def test_settings_gpu_and_notes(ip_run):
    st = ip_run.settings
    assert st["model"].value == "servesim-tiny-llama"
    assert st["tensor_parallel_size"].value == 1
    assert st["tensor_parallel_size"].source == "exp-config.yaml tensor_parallelism"
    assert (st["max_model_len"].value, st["max_num_batched_tokens"].value,
            st["max_num_seqs"].value) == (512, 256, 8)
    assert st["device_name"].value == "H100 SXM"
    assert st["device_name"].source.startswith("../h100-sxm-datasheet.json name")
    assert "vllm_version" not in st
    notes = " ".join(ip_run.notes)
    assert "enable_multi_turn_chat" in notes and "num_unique_system_prompts=3" in notes
    assert any("ConstantLoadTimer" in a for a in ip_run.approximations)
    assert ip_run.stages[0].stats["ttft"]["p50"] == 0.02
    assert ip_run.stages[0].throughput["requests_per_s"] == pytest.approx(10 / 6.0)


def test_seed_changes_draws_not_counts(tmp_path):
    run = write_ip_run(tmp_path)
    a, b = read_recorded(run, seed=0), read_recorded(run, seed=1)
    assert len(a.specs) == len(b.specs) == 30
    assert [s.arrival_time_s for s in a.specs] != [s.arrival_time_s for s in b.specs]
    c = read_recorded(run, seed=0)
    assert [s.arrival_time_s for s in a.specs] == [s.arrival_time_s for s in c.specs]


def test_fewer_sends_than_configured_is_an_approximation(tmp_path):
    run = read_recorded(write_ip_run(tmp_path,
                                     stages=[ip_stage(7, 7), ip_stage(20, 20, rate=4.0)]))
    assert [s.num_requests for s in run.stages] == [7, 20]
    assert any("sent 7 of its 10" in a for a in run.approximations)


# ------------------------------------------------------------------------------- errors
def _err(capsys, run, *extra) -> str:
    rc = main(["validate", "--recorded", str(run), "-o", str(run.parent / "o"), "-q",
               "--no-figures", *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("servesim: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_missing_config_key_names_file_line_and_key(tmp_path, capsys):
    run = write_ip_run(tmp_path, config=IP_CONFIG.replace("    output_len: 8\n", ""))
    err = _err(capsys, run)
    assert err.endswith("results/config.yaml:8: key data.shared_prefix.output_len is missing")


def test_bad_config_value_names_key(tmp_path, capsys):
    run = write_ip_run(tmp_path, config=IP_CONFIG.replace("num_groups: 2", "num_groups: two"))
    err = _err(capsys, run)
    assert "results/config.yaml:9: key data.shared_prefix.num_groups must be an integer > 0" \
        in err


def test_unsupported_data_type(tmp_path, capsys):
    run = write_ip_run(tmp_path, config=IP_CONFIG.replace("type: shared_prefix", "type: random"))
    err = _err(capsys, run)
    assert "results/config.yaml:6: data.type 'random' is not supported" in err


def test_bad_stage_json_names_file_and_line(tmp_path, capsys):
    run = write_ip_run(tmp_path)
    (run / "results" / "stage_1_lifecycle_metrics.json").write_text('{\n"load_summary": {,\n}')
    err = _err(capsys, run)
    assert "results/stage_1_lifecycle_metrics.json:2: invalid JSON" in err


def test_stage_counts_must_add_up(tmp_path, capsys):
    st = ip_stage(10, 10)
    st["failures"]["count"] = 3
    run = write_ip_run(tmp_path, stages=[st, ip_stage(20, 20)])
    err = _err(capsys, run)
    assert "stage_0_lifecycle_metrics.json" in err
    assert "load_summary.count 10 is not successes.count 10 + failures.count 3" in err


def test_missing_latency_statistic_names_key(tmp_path, capsys):
    st = ip_stage(10, 10)
    del st["successes"]["latency"]["time_to_first_token"]["p90"]
    run = write_ip_run(tmp_path, stages=[st, ip_stage(20, 20)])
    err = _err(capsys, run)
    assert "key successes.latency.time_to_first_token.p90 is missing" in err


def test_missing_stage_file_in_the_middle(tmp_path, capsys):
    run = write_ip_run(tmp_path, stages=[ip_stage(10, 10), ip_stage(20, 20)])
    (run / "results" / "stage_1_lifecycle_metrics.json").rename(
        run / "results" / "stage_2_lifecycle_metrics.json")
    err = _err(capsys, run)
    assert "stage files [0, 2] are not numbered 0..1" in err


def test_bad_engine_version_flag(tmp_path, capsys):
    err = _err(capsys, write_ip_run(tmp_path), "--engine-version", "fifteen")
    assert err == ("servesim: error: --engine-version 'fifteen' is not a vLLM version (X.Y[.Z], "
                   "e.g. 0.15.1)")


def test_not_a_record_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="no requests.jsonl .* and no inference-perf results/"):
        read_recorded(tmp_path / "empty")


def test_profile_only_notes_do_not_need_profile(tmp_path):
    run = write_ip_run(tmp_path)
    (run / "profile.yaml").unlink()
    (run / "exp-config.yaml").unlink()
    r = read_recorded(run)
    # without exp-config.yaml the model comes from the tokenizer inference-perf loaded
    assert r.settings["model"].source == ("results/config.yaml "
                                          "tokenizer.pretrained_model_name_or_path")
    assert not any("enable_multi_turn_chat" in n for n in r.notes)
    assert json.loads(json.dumps(r.extra["shared_prefix"]))["num_groups"] == 2
