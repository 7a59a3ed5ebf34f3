"""Hostile corpus, a constant step time of zero: refused in one line naming the scenario
file and the key, and by the API."""
from __future__ import annotations

import pytest
from command_cases import SCENARIO, _refused


@pytest.mark.parametrize("constant", ["{step_s: 0, per_token_s: 0, per_seq_s: 0}", "{}"])
def test_a_constant_step_time_of_zero_is_refused(capsys, tmp_path, constant):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    _refused(capsys, ["run", s, "-q", "-o", tmp_path / "o", "--set", "perf.source=constant",
                      "--set", f"perf.constant={constant}"],
             [str(s), "perf.constant: step_s, per_token_s and per_seq_s are all 0",
              "give at least one of them > 0"])


def test_a_constant_model_of_zero_is_refused_by_the_api():
    from simulator.perf import ConstantPerfModel
    with pytest.raises(ValueError, match="all 0"):
        ConstantPerfModel()
    assert ConstantPerfModel(per_seq_s=1e-3).per_seq_s == 1e-3
