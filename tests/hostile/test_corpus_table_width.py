"""Hostile corpus, tables off a terminal: sweep and plan tables printed to a pipe or a log
are not cut to a narrow width; ``$COLUMNS`` sets the width when it is a number."""
from __future__ import annotations

from command_cases import SCENARIO, _plan_text, _ran

from simulator.cli.args import PLAIN_TABLE_WIDTH, table_console


def test_tables_off_a_terminal_are_not_cut(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    base = tmp_path / "base.yaml"
    base.write_text(SCENARIO)
    sw = tmp_path / "sw.yaml"
    sw.write_text(f"name: sw\nbase: {base}\ngrid:\n  hardware.gpu: [h100-sxm, h200-sxm]\n"
                  "  scheduler.max_num_seqs: [4]\n")
    out = _ran(capsys, ["sweep", sw, "-j", "1", "-o", tmp_path / "o", "--no-figures"])
    assert "gpu=h100-sxm" in out and "gpu=h200-sxm" in out, out
    assert "…" not in out, out
    plan = tmp_path / "p.yaml"
    plan.write_text(_plan_text("p", str(base)))
    out = _ran(capsys, ["plan", plan, "-j", "1", "-o", tmp_path / "po", "--no-figures"])
    assert "TTFT p99 (s)" in out, out
    assert "…" not in out, out


def test_table_console_width(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert table_console().width == PLAIN_TABLE_WIDTH  # pytest's stdout is no terminal
    monkeypatch.setenv("COLUMNS", "123")
    assert table_console().width == 123
    monkeypatch.setenv("COLUMNS", "wide")
    assert table_console().width == PLAIN_TABLE_WIDTH
