"""The energy how-to (docs/howto/energy.md) does what it says: its commands run (taken from the
page itself, outputs redirected to a temporary folder) and show what the page says they show."""
from __future__ import annotations

import json
import re
import shlex

from helpers import REPO_ROOT

from simulator.cli.main import main

PAGE = REPO_ROOT / "docs" / "howto" / "energy.md"


def _commands() -> list[list[str]]:
    block = re.search(r"```console\n(.*?)```", PAGE.read_text(), re.DOTALL).group(1)
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("servesim ")]


def test_the_pages_commands_show_what_it_says(tmp_path):
    run, cmp = _commands()
    assert run[0] == "run" and cmp[0] == "compare"

    def redirect(argv, name):
        i = argv.index("-o")
        return [*argv[:i + 1], str(tmp_path / name), *argv[i + 2:], "-q"]

    assert main(redirect(run, "run")) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    e = s["energy"]
    assert e["available"] and e["energy_cost_usd"] == e["energy_kwh"] * 0.12
    assert e["joules_per_output_token"] == e["energy_j"] / s["num_output_tokens"]
    assert "## Energy and power" in (tmp_path / "run" / "report.md").read_text()

    assert main(redirect(cmp, "cmp")) == 0
    runs = {p.name: json.loads((p / "summary.json").read_text())
            for p in (tmp_path / "cmp").iterdir() if p.is_dir()}
    caps = [runs[f"power_cap_w={w}"] for w in (700, 500, 350)]
    ttft = [r["ttft_s"]["p50"] for r in caps]
    tpot = [r["tpot_s"]["p50"] for r in caps]
    jpt = [r["energy"]["joules_per_output_token"] for r in caps]
    assert ttft[0] < ttft[1] < ttft[2]                      # prefill is compute bound
    assert tpot[2] / tpot[0] - 1 < (ttft[2] / ttft[0] - 1) / 2   # decode much less
    assert jpt[2] < jpt[0]
    assert caps[2]["energy"]["peak_power_w"] <= 350 * (1 + 1e-12)
    table = (tmp_path / "cmp" / "compare.md").read_text()
    assert "GPU energy per output token (J)" in table
