"""Acceptance economics: baseline comparison, rate sweep, crossover, report and CLI."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from md_tables import rows_starting

from simulator.cli.main import main
from simulator.experiments.spec_sweep import compare_with_baseline, sweep_rates
from simulator.report.spec_sweep import render_spec_sweep_markdown, write_spec_sweep_report
from simulator.scenario.config import Scenario, load_scenario
from simulator.speculative.economics import crossovers, find_crossover, net_effect

RAW = {
    "name": "tiny_spec",
    "model": "llama-3.1-8b",
    "workload": {"synthetic": {
        "arrival": {"process": "poisson", "rate_rps": 4.0}, "num_requests": 40,
        "prompt_tokens": {"dist": "fixed", "value": 128},
        "output_tokens": {"dist": "fixed", "value": 48}},
        "slices": {"code": 0.5, "chat": 0.5}},
    "speculative": {"method": "draft_model", "draft_model": "llama-3.2-1b",
                    "num_speculative_tokens": 3,
                    "acceptance": {"model": "iid", "acceptance_rate": 0.5},
                    "acceptance_by_slice": {"code": {"model": "iid", "acceptance_rate": 0.85}}},
    "seed": 1,
}


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return Scenario.model_validate(RAW)


@pytest.fixture(scope="module")
def sweep(scenario):
    return sweep_rates(scenario, None, [0.5, 2.0])


# ---------------------------------------------------------------------- crossover
def test_find_crossover_interpolates_in_log_rate():
    c = find_crossover([1, 2, 4, 8], [1.5, 1.2, 1.1, 0.9])
    assert c["status"] == "crossover"
    # level 0.99 between (4, 1.1) and (8, 0.9): fraction 0.55 of the log step
    assert c["rate"] == pytest.approx(math.exp(math.log(4) + 0.55 * math.log(2)))
    assert find_crossover([8, 1, 4, 2], [0.9, 1.5, 1.1, 1.2]) == c  # order does not matter


def test_find_crossover_edge_cases():
    assert find_crossover([1, 2], [0.8, 0.7])["status"] == "never_pays"
    assert find_crossover([1, 2], [1.3, 1.1])["status"] == "always_pays"
    assert find_crossover([1, 2], [None, float("nan")])["status"] == "no_data"
    # within the tolerance is not a loss; an exact tolerance of 0 makes it one
    assert find_crossover([1, 2], [1.2, 0.995])["status"] == "always_pays"
    c = find_crossover([1, 2], [1.2, 0.995], tolerance=0.0)
    assert c["status"] == "crossover" and 1 < c["rate"] < 2 and c["level"] == 1.0


# ---------------------------------------------------------------------- net effect
def _summary(tpot, ttft99, tput, cost, slices=None):
    return {"tpot_s": {"p50": tpot, "mean": tpot}, "ttft_s": {"p99": ttft99},
            "e2e_latency_s": {"p50": 10 * tpot}, "itl_s": {"p50": tpot},
            "output_token_throughput_tps": tput, "request_throughput_rps": tput / 100,
            "cost_per_1m_tokens_usd": cost,
            "cost_per_1m_output_tokens_usd": None if cost is None else 2 * cost,
            "by_slice": slices or {}}


def test_net_effect_gains_are_oriented_so_that_above_one_helps():
    s = _summary(0.005, 0.2, 1100.0, 0.09, {"x": _summary(0.004, 0.2, 500.0, None)})
    b = _summary(0.010, 0.1, 1000.0, 0.10, {"x": _summary(0.010, 0.1, 500.0, None)})
    net = net_effect(s, b)
    o = net["overall"]
    assert o["tpot_p50_s"] == {"spec": 0.005, "base": 0.010, "ratio": 2.0}
    assert o["ttft_p99_s"]["ratio"] == pytest.approx(0.5)
    assert o["output_token_throughput_tps"]["ratio"] == pytest.approx(1.1)
    assert o["cost_per_1m_tokens_usd"]["ratio"] == pytest.approx(0.10 / 0.09)
    assert net["by_slice"]["x"]["tpot_p50_s"]["ratio"] == pytest.approx(2.5)
    assert "cost_per_1m_tokens_usd" not in net["by_slice"]["x"]


def test_compare_with_baseline_runs_both_on_the_same_requests(scenario):
    out = compare_with_baseline(scenario)
    spec, base = out["speculative"], out["baseline"]
    assert spec["speculative"]["num_drafts"] > 0
    assert "speculative" not in base
    assert spec["num_requests"] == base["num_requests"] == 40
    assert spec["num_output_tokens"] == base["num_output_tokens"] == 40 * 48
    net = out["net"]["overall"]
    # light load: memory-bound decode steps, so speculation shortens TPOT
    assert net["tpot_p50_s"]["ratio"] > 1.1
    assert set(out["net"]["by_slice"]) == {"code", "chat"}
    code = out["net"]["by_slice"]["code"]["tpot_p50_s"]["ratio"]
    chat = out["net"]["by_slice"]["chat"]["tpot_p50_s"]["ratio"]
    assert code > chat


def test_compare_requires_a_speculative_block(scenario):
    with pytest.raises(ValueError, match="speculative"):
        compare_with_baseline(scenario.model_copy(update={"speculative": None}))


# ---------------------------------------------------------------------- sweep and report
def test_sweep_table(sweep):
    df, results = sweep
    assert set(results) == {0.5, 2.0}
    assert set(df["slice"]) == {"all", "code", "chat"} and len(df) == 6
    assert df["rate_scale"].tolist() == [0.5, 2.0] * 3
    allr = df[df["slice"] == "all"].set_index("rate_scale")
    # the rate multiplier scales the offered load
    assert allr.loc[2.0, "arrival_rate_rps"] == pytest.approx(
        4 * allr.loc[0.5, "arrival_rate_rps"])
    row = df.iloc[0]
    assert row["tpot_speedup"] == pytest.approx(row["tpot_p50_base_s"] / row["tpot_p50_spec_s"])
    assert row["throughput_gain"] == pytest.approx(row["throughput_spec_tps"]
                                                   / row["throughput_base_tps"])
    code = df[df["slice"] == "code"]
    assert code["expected_tokens_per_step"].tolist() == pytest.approx(
        [(1 - 0.85 ** 4) / 0.15] * 2)
    cross = crossovers(df)
    assert set(cross) == {"all", "code", "chat"}
    assert set(cross["all"]) == {"tpot_speedup", "throughput_gain", "e2e_speedup"}


def test_sweep_rejects_bad_input(scenario):
    with pytest.raises(ValueError, match="positive"):
        sweep_rates(scenario, None, [0.0])
    with pytest.raises(ValueError, match="speculative"):
        sweep_rates(scenario.model_copy(update={"speculative": None}), None, [1.0])


def test_report_files_and_content(sweep, scenario, tmp_path):
    df, results = sweep
    files = write_spec_sweep_report(tmp_path, df, results, scenario, source="synthetic")
    md = files["md"]
    text = md.read_text()
    assert files["html"].name == "acceptance_economics.html"
    assert md.name == "acceptance_economics.md"
    for part in ("# Acceptance economics", "## Speedup vs load", "## Crossover load",
                 "## Tokens per step: closed form vs simulated", "## Where the step time goes",
                 "## Reading the numbers", "![speedup vs load](acceptance_economics.png)"):
        assert part in text
    assert rows_starting(text, "code") and rows_starting(text, "chat")
    assert (tmp_path / "acceptance_economics.png").stat().st_size > 1000
    csv = pd.read_csv(tmp_path / "acceptance_economics.csv")
    assert len(csv) == len(df)
    payload = json.loads((tmp_path / "spec_sweep.json").read_text())
    assert set(payload["runs"]) == {"0.5", "2"}
    assert payload["runs"]["2"]["speculative"]["speculative"]["num_drafts"] > 0
    # no figure: no image link
    assert "![" not in render_spec_sweep_markdown(df, results, scenario, figure=None)


# ---------------------------------------------------------------------- CLI
def _write(tmp_path: Path, raw: dict) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_cli_spec_sweep(tmp_path, capsys):
    p = _write(tmp_path, RAW)
    out = tmp_path / "out"
    rc = main(["spec-sweep", str(p), "--rates", "1", "-o", str(out), "--no-figures",
               "--set", "workload.synthetic.num_requests=20"])
    assert rc == 0
    assert (out / "acceptance_economics.md").exists()
    assert not (out / "acceptance_economics.png").exists()
    text = capsys.readouterr().out
    assert "TPOT p50 speedup" in text and "crossover (TPOT) code" in text


def test_cli_spec_sweep_bad_input(tmp_path, capsys):
    p = _write(tmp_path, RAW)
    assert main(["spec-sweep", str(p), "--rates", "1,x", "-q"]) == 2
    assert "--rates" in capsys.readouterr().err
    assert main(["spec-sweep", str(p), "--rates", "0", "-q"]) == 2
    plain = _write(tmp_path, {k: v for k, v in RAW.items() if k != "speculative"})
    assert main(["spec-sweep", str(plain), "-q"]) == 2
    assert "speculative" in capsys.readouterr().err


def test_cli_spec_sweep_checks_output_folder_first(tmp_path, capsys, monkeypatch):
    """-o below a plain file: one line, exit 2, before any rate runs (before, every rate was
    simulated and only the report's mkdir failed)."""
    from simulator.experiments import spec_sweep

    def _no_run(*a, **k):
        raise AssertionError("a rate ran before -o was checked")
    monkeypatch.setattr(spec_sweep, "sweep_rates", _no_run)
    p = _write(tmp_path, RAW)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "sub"
    assert main(["spec-sweep", str(p), "--rates", "1", "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"servesim: error: output folder {out}: cannot create it (Not a directory)\n")


def test_shipped_scenario_runs_on_the_default_trace(tmp_path):
    path = Path(__file__).resolve().parents[2] / "scenarios" / "spec_mixed_slices.yaml"
    sc, base = load_scenario(path, ["workload.max_requests=60"])
    assert sc.speculative.method == "draft_model"
    assert sc.speculative.acceptance_model("code").expected_tokens_per_step(3) > \
        sc.speculative.acceptance_model("chat").expected_tokens_per_step(3)
    from simulator.workload import WorkloadWarning
    # the shipped trace has no slice column: the scenario assigns code / chat at random
    with pytest.warns(WorkloadWarning, match="slice assigned at random"):
        out = compare_with_baseline(sc, base)
    assert out["speculative"]["speculative"]["by_slice"].keys() == {"code", "chat"}
    assert out["net"]["overall"]["tpot_p50_s"]["ratio"] > 1.0


def test_run_report_section(sweep):
    from simulator.report.render import render
    from simulator.report.run import speculative_section
    _, results = sweep
    section = speculative_section(results[0.5]["speculative"]["speculative"])
    text = render("run_speculative.md.j2", speculative=section)
    assert text.startswith("## Speculative decoding")
    assert all(rows_starting(text, n) for n in ("all", "code", "chat"))
    assert "configured per-token acceptance α" in text
    assert "draft acceptance rate (accepted / proposed, vLLM)" in text
    assert "discarded" in text  # the sentence saying why the two differ
    code_row = rows_starting(text, "code")[0]
    assert code_row[2] == "0.850"  # the configured alpha of the code slice
    assert speculative_section({}) is None and speculative_section(None) is None


# ---------------------------------------------------------------------- generated prose
def _table_rows(rate, *, tput_gain, wait_base, wait_spec, batch_base, batch_spec, tpot,
                ttft, e2e, code_tpot, chat_tpot):
    """One rate of a synthetic sweep table: rows for ``all``, ``code`` and ``chat``."""
    common = {"rate_scale": rate, "arrival_rate_rps": 5.0 * rate,
              "mean_batch_size_base": batch_base, "mean_batch_size_spec": batch_spec,
              "mean_num_waiting_base": wait_base, "mean_num_waiting_spec": wait_spec,
              "draft_cost_ratio_batch1": 0.1, "num_speculative_tokens": 3,
              "cost_ratio": 1.0 / tput_gain}
    rows = []
    for name, gain, e in (("all", tpot, 2.2), ("code", code_tpot, 2.95), ("chat", chat_tpot,
                                                                         1.875)):
        rows.append({**common, "slice": name, "tpot_speedup": gain,
                     "e2e_speedup": e2e if name == "all" else gain,
                     "ttft_p99_gain": ttft if name == "all" else None,
                     "throughput_gain": tput_gain if name == "all" else 1.0,
                     "expected_tokens_per_step": e, "mean_acceptance_length": e})
    return rows


def _prose(rows, **kw):
    from simulator.report.spec_sweep_reading import reading_the_numbers
    df = pd.DataFrame(rows)
    return "\n".join(reading_the_numbers(df, 3, **kw))


def test_prose_says_speculation_serves_more_when_throughput_gains():
    rows = (_table_rows(1.0, tput_gain=1.0, wait_base=0.0, wait_spec=0.0, batch_base=40,
                        batch_spec=20, tpot=2.1, ttft=0.9, e2e=2.0, code_tpot=3.0,
                        chat_tpot=1.9)
            + _table_rows(4.0, tput_gain=1.2, wait_base=200.0, wait_spec=80.0,
                          batch_base=230, batch_spec=200, tpot=1.2, ttft=2.5, e2e=1.9,
                          code_tpot=1.7, chat_tpot=1.05))
    text = _prose(rows, verify={1.0: (1.02, 0.2), 4.0: (1.3, 0.15)})
    assert "at x4 speculation serves more output tokens per second than the baseline (1.20x)" \
        in text
    assert "serves fewer" not in text
    assert "queue grows more slowly" in text and "grows faster" not in text
    assert "at x1 the gain stays within 1% of 1" in text
    # best / worst rates named from the data
    assert "TPOT p50 speedup best at x1 (2.10x), worst at x4 (1.20x)" in text
    assert "TTFT p99 gain best at x4 (2.50x), worst at x1 (0.90x)" in text
    assert "where the baseline queues more (200 waiting against 80" in text
    # chat 1.9x and code 3.0x beat their batch-1 bounds (1.875 / 1.3, 2.95 / 1.3):
    # explained by the smaller speculative batch at x1, which the data show
    assert "`code` up to 3.00x (x1) against a bound of 2.27x, above even its 2.95 tokens" \
        in text
    assert "do not keep the same batch: at x1 speculation holds 20.0 sequences per step " \
           "against 40.0" in text
    assert "E2E p50 gains more than TPOT p50 there (1.90x against 1.20x)" in text
    assert "cheaper" in text


def test_prose_says_speculation_serves_fewer_when_throughput_loses():
    rows = (_table_rows(1.0, tput_gain=1.0, wait_base=0.0, wait_spec=0.0, batch_base=20,
                        batch_spec=20, tpot=1.3, ttft=1.05, e2e=1.3, code_tpot=1.6,
                        chat_tpot=1.1)
            + _table_rows(4.0, tput_gain=0.8, wait_base=50.0, wait_spec=150.0,
                          batch_base=200, batch_spec=210, tpot=0.85, ttft=0.6, e2e=0.7,
                          code_tpot=1.02, chat_tpot=0.8))
    text = _prose(rows, verify={1.0: (1.1, 0.3), 4.0: (2.2, 0.4)})
    assert "at x4 speculation serves fewer output tokens per second than the baseline (0.80x)" \
        in text
    assert "serves more" not in text
    assert "saturates at a lower rate and its queue grows faster" in text
    assert "the speculative run queues more (150 waiting against 50" in text
    assert "TTFT p99 gain best at x1 (1.05x), worst at x4 (0.60x)" in text
    # no gain above the bound: no batch-size excuse, the gap is the batching cost
    assert "No slice exceeds its bound" in text and "same batch: at" not in text
    # a slice whose TPOT speedup drops below 1 is named with its crossover
    assert "TPOT crossover: `chat` at x" in text
    assert "(dearer)" in text


def test_prose_without_queue_or_throughput_change():
    rows = (_table_rows(0.5, tput_gain=1.0, wait_base=0.0, wait_spec=0.0, batch_base=4,
                        batch_spec=3, tpot=1.6, ttft=0.95, e2e=1.6, code_tpot=2.4,
                        chat_tpot=1.5)
            + _table_rows(1.0, tput_gain=1.004, wait_base=0.2, wait_spec=0.1, batch_base=8,
                          batch_spec=6, tpot=1.7, ttft=0.93, e2e=1.7, code_tpot=2.5,
                          chat_tpot=1.6))
    text = _prose(rows)
    assert "neither run builds a queue" in text
    assert "the gain stays within 1% of 1 at every rate" in text
    assert "serves more" not in text and "serves fewer" not in text
    # no verification figures given: no per-step cost claims
    assert "verifying" not in text


def test_report_prose_matches_the_sweep_table(sweep, scenario):
    df, results = sweep
    text = render_spec_sweep_markdown(df, results, scenario, figure=None)
    assert "README_SECTION" not in text and "docs/howto/speculative.md" in text
    a = df[df["slice"] == "all"].set_index("rate_scale")
    g = float(a.loc[2.0, "throughput_gain"])
    if g > 1.01:
        assert "serves more output tokens" in text
    elif g < 0.99:
        assert "serves fewer output tokens" in text
    else:
        assert "within 1% of 1 at every rate" in text
    best = float(a["tpot_speedup"].astype(float).idxmax())
    assert f"TPOT p50 speedup best at x{best:g}" in text
    assert "configured per-token acceptance α" in text
    assert "draft acceptance rate (accepted / proposed, vLLM)" in text
