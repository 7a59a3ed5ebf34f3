"""Scenario schema, error messages, ``--set`` overrides and the CLI's exit codes."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import synthetic_workload

from simulator.cli.main import main
from simulator.scenario.config import ScenarioError, load_scenario, validate_scenario
from simulator.scenario.overrides import apply_overrides, parse_override

WL = synthetic_workload(5, 10)


def _err(raw):
    with pytest.raises(ScenarioError) as e:
        validate_scenario(raw)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_defaults():
    sc = validate_scenario({"workload": WL})
    assert sc.model == "llama-3.1-8b" and sc.hardware.gpu == "h100-sxm"
    assert sc.scheduler.max_num_seqs == 256 and sc.scheduler.max_num_batched_tokens == 8192
    assert sc.kv_cache.block_size == 16 and sc.kv_cache.gpu_memory_utilization == 0.9
    assert sc.num_gpus == 1 and sc.seed == 0


def test_unknown_key_names_path_and_allowed_keys():
    msg = _err({"workload": WL, "kv_cache": {"blok_size": 16}})
    assert "kv_cache.blok_size" in msg
    assert ("allowed keys: allocation, block_size, enable_prefix_caching, "
            "gpu_memory_utilization, kv_cache_dtype, kv_cache_memory_bytes, num_gpu_blocks") in msg
    top = _err({"workload": WL, "shceduler": {}})
    assert "'shceduler'" in top and "scheduler" in top.split("allowed keys:")[1]
    nested = _err({"workload": WL, "scheduler": {"admission": {"max_wait": 3}}})
    assert "scheduler.admission.max_wait" in nested and "max_waiting" in nested


@pytest.mark.parametrize("raw,path,value", [
    ({"scheduler": {"max_num_seqs": 0}}, "scheduler.max_num_seqs", "0"),
    ({"cluster": {"router": "best"}}, "cluster.router", "'best'"),
    ({"kv_cache": {"gpu_memory_utilization": 1.5}}, "kv_cache.gpu_memory_utilization", "1.5"),
    ({"scheduler": {"enable_chunked_prefill": "maybe"}}, "scheduler.enable_chunked_prefill",
     "'maybe'"),
])
def test_bad_value_names_path_and_value(raw, path, value):
    msg = _err({"workload": WL, **raw})
    assert f"{path}: value {value}" in msg


def test_missing_workload_and_cross_field_check():
    assert "missing required key 'workload'" in _err({})
    msg = _err({"workload": WL, "hardware": {"num_gpus_per_replica": 2}})
    assert "tensor_parallel_size" in msg


def test_parse_override_yaml_typed_values():
    assert parse_override("a.b=2") == (["a", "b"], 2)
    assert parse_override("x=0.5") == (["x"], 0.5)
    assert parse_override("x=true") == (["x"], True)
    assert parse_override("x=null") == (["x"], None)
    assert parse_override("x=[1, 2]") == (["x"], [1, 2])
    assert parse_override("x={p: 1}") == (["x"], {"p": 1})
    assert parse_override("x=abc") == (["x"], "abc")
    assert parse_override("x=") == (["x"], "")
    assert parse_override("x=a=b") == (["x"], "a=b")
    for bad in ("novalue", "=3", "a..b=1", ".a=1"):
        with pytest.raises(ScenarioError):
            parse_override(bad)


def test_apply_overrides_nested_and_creating_sections():
    raw = {"scheduler": {"max_num_seqs": 8, "admission": {"max_waiting": 3}}, "seed": 1}
    out = apply_overrides(raw, ["scheduler.max_num_seqs=16", "scheduler.admission.max_waiting=5",
                                "kv_cache.num_gpu_blocks=100", "slo.ttft_s=0.25", "seed=7"])
    assert out == {"scheduler": {"max_num_seqs": 16, "admission": {"max_waiting": 5}},
                   "kv_cache": {"num_gpu_blocks": 100}, "slo": {"ttft_s": 0.25}, "seed": 7}
    assert raw["scheduler"]["max_num_seqs"] == 8  # the input is not modified
    with pytest.raises(ScenarioError, match="not a section"):
        apply_overrides(raw, ["seed.x=1"])


def test_load_scenario_with_overrides(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "workload": WL,
                                 "scheduler": {"max_num_seqs": 8}}))
    sc, base = load_scenario(p, ["scheduler.max_num_seqs=32", "cluster.num_replicas=2",
                                 "kv_cache.enable_prefix_caching=true"])
    assert base == tmp_path
    assert sc.scheduler.max_num_seqs == 32 and sc.cluster.num_replicas == 2
    assert sc.kv_cache.enable_prefix_caching is True
    with pytest.raises(ScenarioError) as e:
        load_scenario(p, ["scheduler.max_num_seqs=-1"])
    assert "scheduler.max_num_seqs: value -1" in str(e.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(bad)


# ---------------------------------------------------------------------------- CLI
def _cli(capsys, *argv):
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line_error(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("servesim: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_cli_bad_key(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "workload": WL, "schedulr": {}}))
    rc, _, err = _cli(capsys, "run", str(p), "-q")
    assert rc == 2
    assert "unknown key 'schedulr'" in _one_line_error(err)


def test_cli_bad_override_value(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "workload": WL}))
    rc, _, err = _cli(capsys, "run", str(p), "--set", "scheduler.max_num_seqs=0", "-q")
    assert rc == 2 and "scheduler.max_num_seqs: value 0" in _one_line_error(err)


def test_cli_missing_file(tmp_path, capsys):
    rc, _, err = _cli(capsys, "run", str(tmp_path / "nope.yaml"), "-q")
    assert rc == 2 and "nope.yaml" in _one_line_error(err)


def test_cli_bad_trace_row(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                                    "0.1,100,10\n0.2,abc,10\n")
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "workload": {"trace": "t.csv",
                                                          "format": "vidur"}}))
    rc, _, err = _cli(capsys, "run", str(p), "-q")
    line = _one_line_error(err)
    assert rc == 2 and "t.csv:3" in line and "'abc'" in line


def test_cli_runs_a_tiny_scenario(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "tiny", "workload": synthetic_workload(20, 10),
                                 "perf": {"source": "roofline"}}))
    out = tmp_path / "out"
    rc, _, err = _cli(capsys, "run", str(p), "-o", str(out), "-q", "--no-figures",
                      "--set", "seed=3")
    assert rc == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_requests"] == 20 and summary["num_completed"] == 20
    # Parquet by default: 20 rows, the arrival times exactly the in-memory doubles
    req = pd.read_parquet(out / "requests.parquet")
    assert len(req) == 20 and not (out / "requests.csv").exists()
    assert (out / "steps.parquet").is_file() and (out / "report.md").is_file()
    assert yaml.safe_load((out / "scenario.yaml").read_text())["seed"] == 3
    # CSV on request, into the same folder: the Parquet tables are replaced, not kept
    rc, _, err = _cli(capsys, "run", str(p), "-o", str(out), "-q", "--no-figures",
                      "--set", "seed=3", "--table-format", "csv")
    assert rc == 0, err
    assert (out / "requests.csv").read_text().count("\n") == 21  # header + 20 rows
    assert (out / "steps.csv").is_file() and not (out / "steps.parquet").exists()
    # full precision: the CSV text reads back to the very same doubles as the Parquet file
    back = pd.read_csv(out / "requests.csv")
    np.testing.assert_array_equal(back["arrival_time_s"].to_numpy(),
                                  req["arrival_time_s"].to_numpy())


def test_cli_rejects_a_bad_table_format(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "tiny", "workload": synthetic_workload(5, 10)}))
    with pytest.raises(SystemExit) as e:
        _cli(capsys, "run", str(p), "--table-format", "xlsx")
    assert e.value.code == 2
    assert "parquet" in capsys.readouterr().err
