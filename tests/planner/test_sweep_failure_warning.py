"""A sweep with failed points warns about them on stderr even with ``-q``."""
from __future__ import annotations

import yaml
from planner_testlib import tiny_scenario


def test_sweep_warns_about_failed_points_even_when_quiet(tmp_path, capsys):
    from simulator.cli.main import main
    p = tmp_path / "sweep.yaml"
    p.write_text(yaml.safe_dump({"base": tiny_scenario(num_requests=20),
                                 "grid": {"model": ["llama-3.1-8b", "llama-3.1-405b"]}}))
    assert main(["sweep", str(p), "-q", "-j", "1", "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "servesim: warning: 1 point(s) failed (see the 'error' column)" in err
