"""The CPU self-check (``servesim validate --device cpu``; needs torch) runs and reports.

This is an internal consistency check of harness, tables and scheduler, not evidence of
fidelity (that comes from recorded real-engine runs: ``servesim validate --recorded``). Its
error figures depend on how busy the machine is, so they are measured by
``benchmarks/bench_selfcheck.py`` and never bounded here: this test asserts only that the
pipeline runs end to end and writes well-formed, finite output.
"""
from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")

from simulator.cli.main import main

REQUIRED = ["step_time_median_abs_pct_error", "step_time_p90_abs_pct_error",
            "ttft_p50_pct_error", "ttft_p99_pct_error", "e2e_p50_pct_error",
            "e2e_p99_pct_error"]


@pytest.mark.slow  # two real engine runs and two calibration passes (~40 s on 2 cores)
def test_cpu_self_check_pipeline_runs(tmp_path, capsys):
    out = tmp_path / "val"
    rc = main(["validate", "--device", "cpu", "-o", str(out), "--num-requests", "12", "-q"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "per-step abs % error" in printed
    res = json.loads((out / "validation.json").read_text())
    for k in REQUIRED:
        assert isinstance(res[k], float) and math.isfinite(res[k]), k
    assert res["step_time_median_abs_pct_error"] >= 0.0
    spread = res["real_run_spread"]
    assert "run2_vs_run1_e2e_p50_pct_error" in spread
    assert "step_run2_vs_run1_median_abs_pct" in spread
    report = (out / "report.md").read_text()
    assert "real run 2 vs run 1" in report and "measured (" in report
    for fig in ("step_pred_vs_meas.png", "latency_cdfs.png", "request_scatter.png"):
        assert (out / fig).stat().st_size > 0
    # the profile validate measured is a usable GPU profile for `servesim run`
    assert (out / "profile" / "spec.yaml").is_file()
    assert res["perf_provenance"]["gemm"].startswith("measured (")
    assert res["perf_provenance"]["cpu_overhead"].startswith("measured (engine step residuals")
