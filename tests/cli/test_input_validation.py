"""Hostile inputs exit 2 with one readable line naming the problem (review findings)."""
from __future__ import annotations

import json

import pytest

from simulator.cli.main import main

TINY = """name: tiny
model: llama-3.1-8b
workload:
  synthetic:
    arrival: {process: poisson, rate_rps: 5}
    num_requests: 20
    prompt_tokens: {dist: fixed, value: 64}
    output_tokens: {dist: fixed, value: 8}
"""


def _err(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.fixture
def scen(tmp_path):
    def make(extra: str = "", name: str = "s.yaml"):
        p = tmp_path / name
        p.write_text(TINY + extra)
        return str(p)
    return make


def test_mistyped_path_is_not_replaced_by_a_shipped_file(capsys, tmp_path):
    err = _err(capsys, ["run", "nosuchdir/default.yaml", "-o", str(tmp_path / "o")])
    assert "not found" in err
    err = _err(capsys, ["run", "scenarios/default.yaml", "--trace",
                        "nosuchdir/default_conv_1k.csv", "-o", str(tmp_path / "o")])
    assert "not found" in err


def test_bare_scenario_name_is_found(tmp_path, capsys):
    assert main(["run", "default", "-q", "--no-figures", "-o", str(tmp_path / "o"),
                 "--set", "workload.max_requests=30"]) == 0


@pytest.mark.parametrize("sets, needle", [
    (["cluster.tensor_parallel_size=3"], "tensor_parallel_size=3 cannot shard"),
    (["seed=-1"], "seed"),
    (["output_dir=x_{nam}"], "only the placeholder {name}"),
    (["scheduler.max_num_seqs=true"], "scheduler.max_num_seqs"),
    (["scheduler.admission.max_waiting=0"], "max_waiting"),
    (["scheduler.policy=static",
      "speculative={method: ngram, num_speculative_tokens: 2, acceptance: {acceptance_rate: 0.6}}"],
     "static batching does not speculate"),
    ([("speculative={method: draft_model, draft_model: mistral-7b, num_speculative_tokens: 2, "
       "acceptance: {acceptance_rate: 0.6}}")],
     "vocabulary"),
    ([("speculative={method: eagle, draft_model: llama-3.2-1b, num_speculative_tokens: 2, "
       "acceptance: {acceptance_rate: 0.6}}")],
     "no separate draft model"),
    ([("speculative={method: ngram, num_speculative_tokens: 2, "
       "acceptance: {acceptance_rate: 0.6}, acceptance_by_slice: {cod: {acceptance_rate: 0.8}}}")],
     "slice(s) cod"),
])
def test_bad_settings_exit_2(capsys, scen, tmp_path, sets, needle):
    argv = ["run", scen(), "-q", "--no-figures", "-o", str(tmp_path / "o")]
    for s in sets:
        argv += ["--set", s]
    assert needle in _err(capsys, argv)


def test_duplicate_yaml_key_names_the_line(capsys, scen, tmp_path):
    p = scen("seed: 1\nseed: 2\n")
    err = _err(capsys, ["run", p, "-o", str(tmp_path / "o")])
    assert "duplicate key 'seed'" in err and ":10" in err


def test_output_path_that_is_a_file(capsys, scen, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    assert "not a folder" in _err(capsys, ["run", scen(), "-q", "-o", str(f)])


def test_broken_model_config_and_gpu_spec(capsys, scen, tmp_path):
    cfg = tmp_path / "m" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64,
                               "num_attention_heads": 0, "intermediate_size": 128,
                               "vocab_size": 100}))
    err = _err(capsys, ["run", scen(), "-q", "-o", str(tmp_path / "o"),
                        "--set", f"model={cfg.parent}"])
    assert "num_attention_heads" in err
    gpu = tmp_path / "g.yaml"
    gpu.write_text("name: g\nbf16_flops_per_s: 1e14\nhbm_bytes: 8e10\n"
                   "hbm_bandwidth_bytes_per_s: 1e12\nhbm_bandwith: 3\n")
    err = _err(capsys, ["run", scen(), "-q", "-o", str(tmp_path / "o"),
                        "--set", f"hardware.gpu={gpu}"])
    assert "unknown GPU spec key(s) hbm_bandwith" in err


def test_cancelled_requests_are_not_reported_as_rejections(tmp_path, scen):
    p = scen("  patience: {dist: fixed, value: 0.001}\n")
    assert main(["run", p, "-q", "--no-figures", "-o", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["num_cancelled"] > 0  # non-vacuity
    assert "cancelled" not in (s["reject_reasons"] or {})
