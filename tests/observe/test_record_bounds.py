"""Records that would exhaust memory or the simulated clock are refused in one line before
any replay: an inference-perf config sending more than a rebuilt stage may hold, prompts
beyond the rebuild's bound, a stage file contradicting its config, and arrivals spread past
the clock's resolution (``servesim run`` refuses the same spread in a trace)."""
from __future__ import annotations

import json

import pytest
from record_factories import IP_CONFIG, bench_result, ip_stage, write_ip_run

from simulator.cli.main import main
from simulator.observe.readers import read_recorded
from simulator.observe.readers_ip import MAX_PROMPT_TOKENS, MAX_STAGE_REQUESTS
from simulator.observe.record import RecordError
from simulator.workload.clock import MAX_CLOCK_S


def _one_line_refusal(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("servesim: error: "), (rc, err)
    return err[0]


@pytest.mark.parametrize("old,new", [
    ("  - rate: 2.0\n    duration: 5\n", "  - rate: 2.0e+9\n    duration: 5\n"),
    ("  - rate: 2.0\n    duration: 5\n", "  - rate: 2.0\n    duration: 1.0e+11\n"),
])
def test_a_stage_beyond_the_rebuild_bound_is_refused(tmp_path, capsys, old, new):
    run = write_ip_run(tmp_path, config=IP_CONFIG.replace(old, new, 1))
    line = _one_line_refusal(capsys, ["validate", "--recorded", str(run), "--engine-version",
                                      "0.15.1", "-o", str(tmp_path / "out")])
    assert "load.stages[0]" in line and f"{MAX_STAGE_REQUESTS:,}" in line
    assert "config.yaml" in line


def test_prompts_beyond_the_rebuild_bound_are_refused(tmp_path):
    groups = MAX_PROMPT_TOKENS // (3 * 52) + 1   # x 3 prompts x (32 + 20) tokens: one group over
    run = write_ip_run(tmp_path, config=IP_CONFIG.replace("num_groups: 2",
                                                          f"num_groups: {groups}"))
    with pytest.raises(RecordError, match=r"data\.shared_prefix asks for .* more than the"):
        read_recorded(run)


def test_a_stage_file_contradicting_its_config_is_refused(tmp_path):
    # the config asks stage 0 for 2 req/s; its stage file says the client was asked for 500
    run = write_ip_run(tmp_path, stages=[ip_stage(10, 10, rate=500.0), ip_stage(20, 20, rate=4.0)])
    with pytest.raises(RecordError, match=r"stage_0_lifecycle_metrics\.json: load_summary\."
                                          r"requested_rate 500 is not the 2 req/s"):
        read_recorded(run)


def test_arrivals_beyond_the_clock_are_refused(tmp_path, capsys):
    # a generic CSV whose second request arrives 1e300 s after the first: every latency
    # would read 0; refused naming the file and line
    csv = tmp_path / "r.csv"
    csv.write_text("request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
                   "r1,0,812,97,0.180,2.950\nr2,1e300,64,12,0.050,0.330\n")
    line = _one_line_refusal(capsys, ["validate", "--recorded", str(csv), "--gpu", "h100-sxm",
                                      "--model", "llama-3.1-8b", "-o", str(tmp_path / "o")])
    assert "r.csv:3" in line and "clock" in line
    # a vllm bench serve file without start_times whose rate spreads the draws past it
    doc = bench_result(request_rate=1e-300)
    doc.pop("start_times", None)
    p = tmp_path / "b.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match="clock"):
        read_recorded(p)
    # just inside the bound: read
    ok = tmp_path / "ok.csv"
    ok.write_text("request_id,arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
                  f"r1,0,812,97,0.180,2.950\nr2,{MAX_CLOCK_S / 2:.1f},64,12,0.050,0.330\n")
    assert len(read_recorded(ok).specs) == 2
