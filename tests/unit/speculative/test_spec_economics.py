"""Acceptance economics: baseline comparison, rate sweep, crossover, report and CLI."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simulator.cli import main
from simulator.config import Scenario, load_scenario
from simulator.speculative.economics import (
    compare_with_baseline,
    crossovers,
    find_crossover,
    net_effect,
    render_economics_markdown,
    sweep_rates,
    write_economics_report,
)

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
    md = write_economics_report(tmp_path, df, results, scenario, source="synthetic")
    text = md.read_text()
    assert md.name == "acceptance_economics.md"
    for part in ("# Acceptance economics", "## Speedup vs load", "## Crossover load",
                 "## Tokens per step: closed form vs simulated", "## Where the step time goes",
                 "## Reading the numbers", "![speedup vs load](acceptance_economics.png)",
                 "| code |", "| chat |"):
        assert part in text
    assert (tmp_path / "acceptance_economics.png").stat().st_size > 1000
    csv = pd.read_csv(tmp_path / "acceptance_economics.csv")
    assert len(csv) == len(df)
    payload = json.loads((tmp_path / "spec_sweep.json").read_text())
    assert set(payload["runs"]) == {"0.5", "2"}
    assert payload["runs"]["2"]["speculative"]["speculative"]["num_drafts"] > 0
    # no figure: no image link
    assert "![" not in render_economics_markdown(df, results, scenario, figure=None)


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


def test_shipped_scenario_runs_on_the_default_trace(tmp_path):
    path = Path(__file__).resolve().parents[3] / "scenarios" / "spec_mixed_slices.yaml"
    sc, base = load_scenario(path, ["workload.max_requests=60"])
    assert sc.speculative.method == "draft_model"
    assert sc.speculative.acceptance_model("code").expected_tokens_per_step(3) > \
        sc.speculative.acceptance_model("chat").expected_tokens_per_step(3)
    out = compare_with_baseline(sc, base)
    assert out["speculative"]["speculative"]["by_slice"].keys() == {"code", "chat"}
    assert out["net"]["overall"]["tpot_p50_s"]["ratio"] > 1.0


def test_run_report_section(sweep):
    from simulator.speculative.economics import speculative_report_section
    _, results = sweep
    text = speculative_report_section(results[0.5]["speculative"]["speculative"])
    assert text.startswith("## Speculative decoding")
    assert "| all |" in text and "| code |" in text and "| chat |" in text
    assert speculative_report_section({}) == "" and speculative_report_section(None) == ""
