"""``benchmarks/bench_fidelity.py`` end to end on a small synthetic groundtruth folder written
here: a per-request run with a peer simulator's answer and published summary beside it, a run
naming no GPU, an inference-perf experiment, a published-summaries file and an engine profile
with a fit report. The peer's errors are derived by hand from the values written; no test
asserts a measured servesim error."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from helpers import REPO_ROOT, load_file_module
from md_tables import tables
from record_factories import base_meta, synthetic_stats_rows, write_ip_run, write_vllm_run

N = 24
#: Published summary statistics of the tiny record (only their presence is checked).
PUBLISHED = {"duration_s": 1.0, "ttft_mean_ms": 10.0, "ttft_median_ms": 10.0,
             "ttft_p99_ms": 20.0, "tpot_mean_ms": 2.0, "tpot_median_ms": 2.0,
             "tpot_p99_ms": 3.0, "itl_mean_ms": 2.0}


@pytest.fixture(scope="module")
def bench():
    return load_file_module(REPO_ROOT / "benchmarks" / "bench_fidelity.py", "bench_fidelity")


def _peer_files(run, rows):
    """LLMServingSim-style ``outputs/sim.csv``: every request's TTFT 0.12 s (recorded: 0.1 s)
    and E2E its recorded E2E + 0.02 s (ns), ids = the workload line (bench-N -> N); and
    ``validation/summary.txt``."""
    lines = [("instance id,request id,model,input,output,arrival,end_time,latency,"
              "queuing_delay,TTFT,TPOT,ITL")]
    for r in rows:
        e2e = r["last_token_ts"] - r["queued_ts"]
        lines.append(f"0,{r['request_id'].split('-')[1]},m,{r['input_toks']},"
                     f"{r['output_toks']},0,0,{round((e2e + 0.02) * 1e9)},0,120000000,0,\"[]\"")
    (run / "outputs").mkdir()
    (run / "outputs" / "sim.csv").write_text("\n".join(lines) + "\n")
    (run / "validation").mkdir()
    (run / "validation" / "summary.txt").write_text(
        "Metric  vLLM  Sim  Diff%\nTTFT Mean   100.0   120.0   +20.0%\n"
        "Latency Mean   1110.0   1130.0   +1.8%\n")


@pytest.fixture(scope="module")
def page(tmp_path_factory, bench):
    tmp = tmp_path_factory.mktemp("fid")
    root = tmp / "gt"
    rows = synthetic_stats_rows(N)
    meta = base_meta(max_num_seqs=16, max_num_batched_tokens=512)
    meta["hardware"] = {"device_name": "NVIDIA H100 80GB HBM3"}
    run = write_vllm_run(root / "llmservingsim", rows, meta)           # H100/Llama
    _peer_files(run, rows)
    write_vllm_run(root / "llmservingsim", name="X/NoGPU")               # an error row
    write_ip_run(root / "inference-perf-h100")                           # H100/tiny-tp1-general
    rec = {"id": "tiny-h100", "url": "https://example.invalid/tiny", "gpu": "h100-sxm",
           "model": "servesim-tiny-llama", "tensor_parallel_size": 1, "vllm_version": "0.11.0",
           "num_prompts": 4, "input_tokens_client": 32, "output_tokens": 8,
           "published": PUBLISHED}
    summaries = tmp / "summaries.yaml"
    summaries.write_text(yaml.safe_dump({"records": [rec, {**rec, "id": "no-such-model",
                                                           "model": "no-such-model-xyz"}]}))
    profile = tmp / "profile.yaml"
    profile.write_text(yaml.safe_dump({"name": "p", "fit_report": {
        "tool": "benchmarks/fit_engine_constants.py", "constants": {"sync.step_s": 0.001},
        "runs": ["H100/Llama"],
        "per_run": {"H100/Llama": {"fitted": True, "in": {"ttft": 1.5, "tpot": -2.5, "e2e": 0.5},
                                   "loro": {"ttft": 3.0, "tpot": -4.0, "e2e": 1.0}}},
        "median_abs_pct": {"loro_tpot": 4.0}}}))
    out = tmp / "out"
    out.mkdir()
    (out / "cdf_Old-run.png").write_bytes(b"stale")       # a figure of an earlier run
    (out / "notes.txt").write_text("kept")                 # not the benchmark's own
    rc = bench.main(["--root", str(root), "-o", str(out), "--summaries", str(summaries),
                     "--profile", str(profile)])
    csv = pd.read_csv(out / "fidelity.csv", keep_default_na=False)
    return rc, out, (out / "fidelity.md").read_text(), csv


def test_outputs_are_the_page_its_csv_and_figures(page):
    rc, out, _, _ = page
    assert rc == 0                                  # one run of three failed: not all
    assert sorted(p.name for p in out.iterdir()) == [
        "cdf_H100-Llama.png", "fidelity.csv", "fidelity.md", "notes.txt", "public_summaries.png",
        "signed_errors.png"]
    for p in out.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_run_and_summary_is_on_the_page(page):
    _, _, md, csv = page
    runs = next(t for t in tables(md) if t[0][:2] == ["Run", "Record"])
    assert [r[0] for r in runs[1:]] == ["H100/Llama", "H100/tiny-tp1-general",
                                        "X/NoGPU"]
    flags = {r[0]: r[-1] for r in runs[1:]}
    assert flags["H100/Llama"] == "" and flags["H100/tiny-tp1-general"] == "not fitted"
    assert runs[2][4] == "0.15.1"                   # the campaign's version, not stated
    assert "names no GPU" in md.split("## Runs not replayed")[1]
    ip = csv[(csv.run == "H100/tiny-tp1-general") & (csv.section == "stage")]
    assert sorted(set(ip.stage)) == ["0", "1"]
    assert set(ip.metric) == {"ttft", "tpot", "tpot_per_token", "itl", "e2e"}
    summ = csv[csv.section == "public_summary"]
    assert sorted(set(summ.run)) == ["tiny-h100"] and len(summ) == len(PUBLISHED)
    assert {r.metric: float(r.recorded) for r in summ.itertuples()} == PUBLISHED
    err = csv[csv.section == "error"]
    assert set(err.run) == {"X/NoGPU", "no-such-model"}


def test_peer_errors_derived_by_hand(page):
    """Peer TTFT 0.12 s against 0.1 s: +20%; E2E +0.02 s on a mean of 0.1 + 0.02 x (39 +
    11.5) = 1.11 s: +2/1.11 %; TPOT (E2E + 0.02 - 0.12) / (n - 1) = the recorded 0.02 s: 0%."""
    _, _, md, csv = page
    peer = csv[(csv.section == "peer") & (csv.stat == "mean")].set_index("metric")
    # (the CSV keeps 6 significant digits)
    assert float(peer.loc["ttft", "pct_error"]) == pytest.approx(20.0, rel=1e-5)
    assert float(peer.loc["e2e", "pct_error"]) == pytest.approx(2 / 1.11, rel=1e-5)
    assert float(peer.loc["tpot", "pct_error"]) == pytest.approx(0.0, abs=1e-5)
    assert float(peer.loc["ttft", "recorded"]) == pytest.approx(0.1)
    ks = csv[csv.section == "peer_ks"].set_index("metric")
    assert float(ks.loc["ttft", "value"]) == 1.0    # 0.12 everywhere vs 0.1 everywhere
    pub = csv[csv.section == "peer_published"].set_index("metric")
    assert float(pub.loc["ttft", "pct_error"]) == 20.0 and pub.loc["e2e", "unit"] == "ms"
    ours = csv[csv.section == "ks"]
    assert len(ours) == 3 and all(0 <= float(v) <= 1 for v in ours.value)
    row = next(r for r in next(t for t in tables(md) if "KS servesim" in t[0])[1:]
               if r[1] == "TTFT")
    assert row[3] == "1.000" and row[4].endswith(" / +20.0% / +20.0%")


def test_fit_report_and_header(page):
    _, _, md, csv = page
    loo = next(t for t in tables(md) if t[0][:2] == ["Run", "Fit"])
    row = next(r for r in loo if r[0] == "H100/Llama")
    assert row[1:4] == ["fitted on", "+1.5 / -2.5 / +0.5", "+3.0 / -4.0 / +1.0"]
    fit = csv[csv.section == "fit"]
    assert sorted(fit.stat) == ["in"] * 3 + ["loro"] * 3
    assert "Generated by `python benchmarks/bench_fidelity.py --root " in md
    assert json.dumps("fidelity.csv")[1:-1] in md


def test_bad_root_and_unmatched_runs_exit_2(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--root", str(tmp_path / "nowhere"), "-o", str(tmp_path / "o")])
    assert e.value.code == 2
    assert "--root" in capsys.readouterr().err
    write_ip_run(tmp_path / "gt")
    with pytest.raises(SystemExit) as e:
        bench.main(["--root", str(tmp_path / "gt"), "--runs", "nothing*",
                    "-o", str(tmp_path / "o")])
    assert e.value.code == 2
    assert "no run under" in capsys.readouterr().err
