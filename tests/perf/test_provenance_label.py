"""The one-line latency-sources label (simulator.perf.provenance) that compare, sweep and the
capacity planner print: counts per kind, the measured table sets, the engine."""
from __future__ import annotations

from simulator.perf.provenance import (
    classify_label,
    kind_counts,
    operator_records,
    sources_label,
    summary_sources_label,
)

PROV = {
    "all_reduce": "none (TP=1)",
    "attention_decode": "measured (NVIDIA H100 80GB HBM3, vLLM 0.24.0; aiconfigurator 095f58a "
                        "generation_attention_perf.parquet)",
    "gemm": "measured (NVIDIA H100 80GB HBM3, vLLM 0.24.0; aiconfigurator 095f58a "
            "gemm_perf.parquet)",
    "moe": "measured (NVIDIA A100-SXM4-80GB, vLLM 0.22.0 reusing vllm-0.14.0; aic x.parquet)",
    "elementwise": "fitted (Vidur h100 mlp.csv @7d47513)",
    "lm_head": "datasheet roofline",
    "engine": "vllm-v1 (constants fitted on 3 recorded run(s))",
    "sampler": "vLLM V1 Sampler",
}


def test_classification_and_counts():
    assert [classify_label(x) for x in ("Measured (a, b)", "fitted x", "link model y",
                                        "constant: 5 ms", "none (TP=1)", "whatever")] == [
        "measured", "fitted", "link_model", "constant", "none", "datasheet"]
    ops, sets = operator_records(PROV)
    assert set(ops) == {"all_reduce", "attention_decode", "gemm", "moe", "elementwise",
                        "lm_head"}  # engine keys left out
    # a reused set says whose tables it holds
    assert sets == ["NVIDIA A100-SXM4-80GB: vLLM 0.22.0 reusing vllm-0.14.0",
                    "NVIDIA H100 80GB HBM3: vLLM 0.24.0"]
    assert kind_counts(ops) == {"measured": 3, "fitted": 1, "datasheet": 1}  # none not counted


def test_summary_label_by_hand():
    assert summary_sources_label(PROV) == (
        "measured 3/5 (NVIDIA A100-SXM4-80GB: vLLM 0.22.0 reusing vllm-0.14.0; "
        "NVIDIA H100 80GB HBM3: vLLM 0.24.0), "
        "fitted 1/5, datasheet 1/5; engine vllm-v1 (constants fitted on 3 recorded run(s))")
    assert summary_sources_label(None) == "unknown"
    assert sources_label({}, [], "vllm-v0", []) == (
        "no operators; engine vllm-v0, constants fitted on no recorded run")
