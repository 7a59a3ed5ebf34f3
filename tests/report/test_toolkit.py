"""The report toolkit: number formatting, Markdown tables, templates, Markdown to HTML."""
from __future__ import annotations

import base64
import io
import math

import numpy as np
import pytest
from md_tables import row_cells, tables

from simulator.report.format import (
    adaptive,
    adaptive_ms,
    adaptive_pct,
    adaptive_usd,
    fmt,
    ms,
    pct,
    ratio,
    usd,
    yaml_value,
)
from simulator.report.render import markdown_to_html, oneline, render, write_report
from simulator.report.tables import markdown_table


# ---------------------------------------------------------------------------- formatting
def test_fmt_missing_values_and_types():
    for missing in (None, math.nan, math.inf, -math.inf, np.float64("nan")):
        assert fmt(missing) == "-" and fmt(missing, na="n/a") == "n/a"
    assert fmt(True) == "yes" and fmt(False) == "no"
    assert fmt("text", "{:.2f}") == "text"
    assert fmt(np.int64(3), "{}") == "3" and fmt(2.0 / 3.0, "{:.3f}") == "0.667"


def test_units_by_hand():
    assert ms(0.0123) == "12 ms" and ms(0.0123, "{:.2f}") == "12.30"
    assert pct(0.256) == "25.6%" and pct(0, "{:.0f}%") == "0%"
    assert usd(1234.5) == "$1,234.50" and usd(0.12345, 4) == "$0.1235"
    assert ratio(1.655) == "1.66x" and ratio(None) == "n/a"
    assert yaml_value(True) == "true" and yaml_value(None) == "null" and yaml_value(8) == "8"


def test_adaptive_precision_follows_magnitude():
    assert adaptive(12345) == "12,345" and adaptive(12345.6) == "12,346"
    assert adaptive(12.34) == "12.3" and adaptive(1.234) == "1.23" and adaptive(0.01234) == "0.0123"
    assert adaptive(0.0) == "0" and adaptive(3, " s") == "3 s" and adaptive(None) == "n/a"
    assert adaptive_ms(0.2503) == "250" and adaptive_pct(0.9) == "90.0%"
    assert adaptive_usd(12.3) == "$12.30" and adaptive_usd(0.01234) == "$0.0123"


# ---------------------------------------------------------------------------- tables
def test_markdown_table_cells_alignment_and_escaping():
    text = markdown_table(["name", "value"], [["a|b", "0.50"], ["c\nd", 1234]],
                          ["left", "right"])
    lines = text.splitlines()
    assert len(lines) == 4
    assert row_cells(lines[0]) == ["name", "value"]
    assert row_cells(lines[1])[0].startswith(":-") and row_cells(lines[1])[1].endswith("-:")
    assert row_cells(lines[2]) == ["a\\|b", "0.50"]  # escaped pipe, number text kept as is
    assert row_cells(lines[3]) == ["c d", "1234"]
    assert len({len(line) for line in lines}) == 1  # padded to one width


def test_markdown_table_empty_and_errors():
    assert tables(markdown_table(["a", "b"], [], ["left", "right"])) == [[["a", "b"]]]
    assert markdown_table(["a", "b"], []).splitlines()[1] == "|:---|:---|"
    with pytest.raises(ValueError, match="row 0 has 1 cells"):
        markdown_table(["a", "b"], [["x"]])
    with pytest.raises(ValueError, match="alignments"):
        markdown_table(["a"], [["x"]], ["middle"])


# ---------------------------------------------------------------------------- templates
def test_oneline_joins_a_paragraph():
    assert oneline("  a\n   b\tc \n") == "a b c"


def test_templates_render_strictly():
    import jinja2
    with pytest.raises(jinja2.UndefinedError):
        render("run_speculative.md.j2")


def _png(w=8, h=6) -> bytes:
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 20, 30)).save(buf, "PNG")
    return buf.getvalue()


def test_markdown_to_html_embeds_figures_and_links_pages(tmp_path):
    (tmp_path / "fig.png").write_bytes(_png())
    md = ("# Title here\n\nSome *text* & more.\n\n| a | b |\n|:--|--:|\n| 1 | pass |\n\n"
          "![a figure](fig.png)\n\n- [run](run/report.md)\n- [outside](https://example.org/x.md)\n")
    html = markdown_to_html(md, figure_dir=tmp_path)
    assert "<title>Title here</title>" in html
    uri = "data:image/png;base64," + base64.b64encode(_png()).decode()
    assert f'src="{uri}"' in html and 'alt="a figure"' in html
    assert 'href="run/report.html"' in html and 'href="https://example.org/x.md"' in html
    assert '<td style="text-align:right" class="ok">pass</td>' in html
    assert "&amp; more" in html and "<script" not in html


def test_markdown_to_html_refuses_a_missing_figure(tmp_path):
    with pytest.raises(ValueError, match="gone.png"):
        markdown_to_html("![x](gone.png)\n", figure_dir=tmp_path)


def test_gate_column_cells_are_marked(tmp_path):
    md = "| configuration | gates |\n|---|---|\n| a | pass |\n| b | capacity |\n"
    html = markdown_to_html(md, title="t")
    assert '<td class="ok">pass</td>' in html and '<td class="bad">capacity</td>' in html


def test_write_report_writes_both_pages(tmp_path):
    files = write_report(tmp_path / "out", "rep", "# R\n\ntext\n")
    assert files["md"].read_text() == "# R\n\ntext\n"
    assert files["html"].read_text().startswith("<!DOCTYPE html>")
