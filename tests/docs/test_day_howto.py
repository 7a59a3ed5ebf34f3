"""The day how-to (docs/howto/day.md) does what it says: each ``servesim`` command of its
first code block runs as written, on the first hours of the shipped day (``--set
workload.end_s``: a window of the tiled trace's clock), with the Azure trace of the shared
folder (skipped without it)."""
from __future__ import annotations

import json
import re
import shlex

import pytest
from helpers import REPO_ROOT, shared_path

from simulator.cli.main import main

AZURE = "traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"


def _commands() -> list[list[str]]:
    text = (REPO_ROOT / "docs" / "howto" / "day.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL).group(1)
    return [shlex.split(line.split("#")[0]) for line in block.splitlines()
            if line.startswith("servesim ")]


def test_the_howto_commands_run(tmp_path):
    trace = str(shared_path(AZURE))
    cmds = _commands()
    assert [c[1] for c in cmds] == ["run", "run", "plan"]
    outs = []
    for i, cmd in enumerate(cmds):
        argv = [trace if a == "AZURE" else a for a in cmd[1:]]
        # the first 4800 s of the trace's clock: 9600 s at rate_scale 0.5, shaped into the
        # first 2 h of the day and a little of the third (a windowed day needs two hours or
        # more); the plan: under 1 h of the day
        end = "4800" if i < 2 else "1900"
        out = tmp_path / f"c{i}"
        extra = ["--set", f"workload.end_s={end}", "-o", str(out), "-q", "--no-figures"]
        if cmd[1] == "plan":
            extra += ["-j", "1"]
        assert main([*argv, *extra]) == 0, cmd
        outs.append(out)
    full = json.loads((outs[0] / "summary.json").read_text())
    assert [r["hour"] for r in full["by_hour"]["rows"]] == [0, 1, 2]
    assert "## The day, hour by hour" in (outs[0] / "report.md").read_text()
    win = json.loads((outs[1] / "summary.json").read_text())
    assert win["by_hour"]["windowed"]["window_s"] == 600.0
    assert "**Approximation:" in (outs[1] / "report.md").read_text()
    plan = json.loads((outs[2] / "plan.json").read_text())
    assert [f["label"] for f in plan["fleets"]] == ["static peak", "static mean", "autoscaled"]
    assert all("error" not in f for f in plan["fleets"])


def test_the_h100_plan_reports_energy(tmp_path):
    # the how-to's H100 plan (its text names the command) on the day's first half hour
    text = (REPO_ROOT / "docs" / "howto" / "day.md").read_text()
    assert "servesim plan scenarios/plan_day_azure_conv_70b_h100.yaml --trace AZURE" in text
    trace = str(shared_path(AZURE))
    assert main(["plan", "scenarios/plan_day_azure_conv_70b_h100.yaml", "--trace", trace,
                 "--set", "workload.end_s=900", "-o", str(tmp_path / "p"), "-q",
                 "--no-figures", "-j", "1"]) == 0
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    for f in plan["fleets"]:
        e = f["energy"]
        assert e["idle_counted"] and e["energy_kwh"] > 0
        # mean power x the fleet's window = its energy (kWh = J / 3.6e6)
        dur = sum(r["duration_s"] for r in f["rows"])
        assert e["mean_power_w"] * dur / 3.6e6 == pytest.approx(e["energy_kwh"], rel=1e-6)
    assert "kWh per day" in (tmp_path / "p" / "plan.md").read_text()
