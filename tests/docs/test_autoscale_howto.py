"""The autoscaling how-to (docs/howto/autoscale.md) does what it says, on the first 3,000
requests of the Azure conversation hour: the shipped scenario runs and reports its fleet, and a
compare over targets shows the replicas held and the GPU-hours they cost."""
from __future__ import annotations

import json

from helpers import shared_path

from simulator.cli.main import main

SMALL = ["--set", "workload.max_requests=3000"]


def test_run_and_compare_over_targets(tmp_path):
    trace = str(shared_path("traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"))
    assert main(["run", "autoscale_azure_conv_8b", "--trace", trace, "-o",
                 str(tmp_path / "run"), "-q", "--no-figures", *SMALL]) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    a = s["autoscale"]
    assert s["num_requests"] == s["num_completed"] == 3000
    assert a["gpu_hours"] == s["gpu_hours"]
    assert a["cold_start"]["basis"] == "parts"
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Autoscaling" in report and "CUDA graphs" in report
    assert main(["compare", "autoscale_azure_conv_8b", "--trace", trace, "--vary",
                 "cluster.autoscale.target=8,32", "-o", str(tmp_path / "cmp"), "-q",
                 "--no-figures", *SMALL]) == 0
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "replicas held, mean (autoscaled)" in md and "GPU-hours" in md
    assert "(autoscaled 1..8)" in md
