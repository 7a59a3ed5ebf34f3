"""Report injection (issue 26, defect 1): a value from an input file is shown as written in
every Markdown and HTML report and never becomes markup.

The escaping rules are checked by hand against CommonMark (what each escape prevents), the
HTML sanitiser on raw hostile Markdown (the second layer, on its own), the templates for
values that bypass escaping, and every report kind written from the stored golden inputs
with hostile labels in the places that carry user text (:mod:`injection`), with checks that
do not use servesim's escaping code: the ``.md`` rendered by a CommonMark renderer that
passes raw HTML through, the ``.html`` page as written.
"""
from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import pytest
from injection import PAYLOADS, WRITERS, html_problems, markdown_problems, shown

from simulator.report.escape import Md, is_safe_link, md_code, md_text, md_url_segment
from simulator.report.render import TEMPLATES, markdown_to_html, render
from simulator.report.tables import markdown_table

#: One label carrying the payloads that would be active (script, handlers, javascript: and
#: image links, a table break, a comment) plus pipes, backticks and a line break.
COMBINED = " ".join(PAYLOADS[k] for k in (
    "img_onerror", "script", "attr_break", "md_js_link", "md_image_attr", "table_break",
    "pipes", "backticks", "newline", "autolink", "definition", "anchor", "comment"))


# ---------------------------------------------------------------------------- the rules
@pytest.mark.parametrize("value, want", [
    # an HTML tag, closing tag, comment, declaration or autolink starts with "<" + one of
    # [A-Za-z/!?]: that "<" becomes an entity; "<=" starts nothing and stays
    ("<img src=x>", "&lt;img src=x>"),
    ("</td>", "&lt;/td>"),
    ("<!-- c", "&lt;!-- c"),
    ("<?php", "&lt;?php"),
    ("<javascript:x>", "&lt;javascript:x>"),
    ("TTFT <= 250 ms", "TTFT <= 250 ms"),
    # an entity would be decoded: its "&" becomes "&amp;"; a bare "&" stays
    ("&lt;b&gt;", "&amp;lt;b&amp;gt;"),
    ("&#60;", "&amp;#60;"),
    ("R&D", "R&D"),
    # links, images, definitions: "](" "][" "]:" and a final "]" escaped, "![" too
    ("[a](javascript:x)", r"[a\](javascript:x)"),
    ("![x](y)", r"\![x\](y)"),
    ("[q]: http://x", r"[q\]: http://x"),
    ("[q][r]", r"[q\][r\]"),
    ("E[tokens/step] closed form", "E[tokens/step] closed form"),
    # code spans, emphasis, backslashes
    ("a `b` c", r"a \`b\` c"),
    ("*em* **b**", r"\*em\* \*\*b\*\*"),
    ("_u_ round_robin __x", r"\_u\_ round_robin \_\_x"),
    ("a\\b", r"a\\b"),
    # one line: no value starts a block
    ("one\ntwo\r\nthree\u2028four", "one two three four"),
    ("a|b", "a|b"),  # a table cell escapes it (below); in prose it starts nothing
])
def test_md_text_by_hand(value, want):
    assert md_text(value) == want
    assert isinstance(md_text(value), Md)


def test_markdown_is_kept_and_data_combined_with_it_escaped():
    assert md_text(Md("**b**")) == "**b**"
    assert Md("[baseline] ") + "<x>" == "[baseline] &lt;x>"
    assert Md("{}: {:.1f}").format("*k*", 2.25) == r"\*k\*: 2.2"
    assert Md(", ").join(["[a](b)", Md("`c`")]) == r"[a\](b), `c`"


@pytest.mark.parametrize("value, want", [
    ("plain", "`plain`"),
    ("<img src=x>", "`<img src=x>`"),  # a code span shows its content verbatim
    ("a`b", "``a`b``"),  # a fence longer than the longest backtick run
    ("``x", "``` ``x ```"),  # padded: the content starts with a backtick
    (" both ", "`  both  `"),  # padded: one space each side is stripped again
    ("x\ny", "`x y`"),
    ("", ""),
])
def test_md_code_by_hand(value, want):
    assert md_code(value) == want


def test_md_url_segment_stays_one_relative_segment():
    assert md_url_segment("static-paged") == "static-paged"
    assert md_url_segment("max_num_seqs=64") == "max_num_seqs=64"
    assert md_url_segment("javascript:alert(1)") == "javascript%3Aalert%281%29"
    assert md_url_segment("../x y/z") == "..%2Fx%20y%2Fz"


@pytest.mark.parametrize("url, safe", [
    ("run/report.md", True), ("#section", True), ("https://example.org/x", True),
    ("mailto:a@b.c", True), ("javascript:alert(1)", False), ("JavaScript:alert(1)", False),
    (" \tjava\nscript:alert(1)", False), ("data:text/html,x", False),
    ("data:image/png;base64,AAAA", False), ("vbscript:x", False), ("file:///etc/passwd", False),
    ("//evil.example/x", False), ("/etc/passwd", False), ("\\\\host\\x", False),
])
def test_is_safe_link(url, safe):
    assert is_safe_link(url) is safe


def test_markdown_table_escapes_cells_and_keeps_markdown():
    text = markdown_table(["k", "<b>"], [[Md("`a|b`"), "x|<i>"], ["[q](javascript:x)", 1]])
    rows = text.splitlines()
    assert r"`a\|b`" in rows[2] and r"x\|&lt;i>" in rows[2]
    assert r"[q\](javascript:x)" in rows[3] and "&lt;b>" in rows[0]
    assert markdown_problems(text) == []


# ---------------------------------------------------------------------------- second layer
def test_html_rendering_is_safe_on_raw_hostile_markdown(tmp_path):
    """The sanitiser on its own: Markdown that was not escaped (as if a value had slipped
    through) gives a page with nothing active, and the report's own markup survives."""
    from injection import _reference_html
    # (the payloads last: the unclosed comment makes the rest of the page one HTML block)
    raw = ("# T\n\n<details><summary>All settings</summary>\n\n| a |\n|---|\n| x |\n\n"
           "</details>\n\n[ok](run/report.md) [web](https://example.org) "
           "![remote](http://evil.example/x.png) ![data](data:image/png;base64,AAAA) "
           "![fragment](#top) "
           "<img src=x onerror=alert(1)>\n\n" + "\n\n".join(PAYLOADS.values()) + "\n")
    assert markdown_problems(raw) != []  # the payloads are active when passed through
    assert "<script>" in _reference_html(raw)
    html = markdown_to_html(raw, figure_dir=tmp_path)
    assert html_problems(html, web_links=True) == []
    assert "<details><summary>All settings</summary>" in html and "</details>" in html
    assert 'href="run/report.html"' in html and 'href="https://example.org"' in html
    assert "&lt;script&gt;document.title=" in html  # shown as text
    assert "fragment" in html  # an image that is no figure of the report: its alt text
    assert "evil.example" not in re.sub(r">[^<]*<", "><", html)  # in no tag or attribute


def test_page_title_is_the_heading_text():
    md = "# servesim run: " + md_text("<b>*x*</b> & `y`") + "\n"
    html = markdown_to_html(md)
    assert "<title>servesim run: &lt;b&gt;*x*&lt;/b&gt; &amp; `y`</title>" in html


def test_templates_escape_every_value():
    """Every value a Markdown template shows is escaped: no template puts a value in a code
    span by hand (``code`` filter instead) or marks one safe; the page shell marks only its
    body safe."""
    offenders = []
    for p in sorted(TEMPLATES.glob("*.j2")):
        text = p.read_text()
        if re.search(r"`\{\{|\}\}`", text):
            offenders.append(f"{p.name}: a value in a hand-made code span")
        safe = re.findall(r"\|\s*safe\b", text)
        if safe and (p.name != "base.html.j2" or text.count("| safe") != 1
                     or "{{ body | safe }}" not in text):
            offenders.append(f"{p.name}: |safe")
    assert not offenders, offenders
    assert render("run_degrade.md.j2", degrade={
        "rows": [], "episodes": [], "num_fallback_replicas": "<b>x</b>",
        "fallback_busy_s": "1"}).count("&lt;b>x&lt;/b>") == 1


# ---------------------------------------------------------------------------- every report
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_report_shows_hostile_labels_as_text(kind, tmp_path):
    files = WRITERS[kind](COMBINED, tmp_path)
    md = files["md"].read_text(encoding="utf-8")
    html = files["html"].read_text(encoding="utf-8")
    assert markdown_problems(md) == [], kind
    assert html_problems(html) == [], kind
    # escaped, not dropped: the .md holds the escaped text, both show the label as written
    assert "&lt;img src=x onerror=" in md and "&lt;script>document.title=" in md
    assert "&lt;img src=x onerror=&quot;document.title=" in html
    assert shown(COMBINED, markdown=md), kind
    assert shown(COMBINED, html), kind


# ---------------------------------------------------------------------------- figures
def test_figure_labels_are_text_not_markup_or_tex():
    """Labels from the user's files reach figure titles and legends (through
    :func:`plain_text`): a ``$`` pair is not parsed as TeX (``$\\foo$`` would fail to draw)
    and shows as written; in SVG output (text kept as text) a tag-like label is escaped by
    matplotlib, never an element."""
    import matplotlib

    from simulator.report.figures import default_style, figure, plain_text
    label = PAYLOADS["tex_rich"] + " " + PAYLOADS["script"]
    with default_style():
        fig = figure((3, 2))
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label=plain_text(label))
        ax.set_title(plain_text(label))
        ax.legend()
        fig.savefig(io.BytesIO(), format="png")  # draws (parses) every text
        buf = io.BytesIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            fig.savefig(buf, format="svg")
        with pytest.raises(ValueError, match="Unknown symbol"):  # unescaped: TeX, and fails
            ax.set_title(label)
            fig.savefig(io.BytesIO(), format="png")
    svg = buf.getvalue().decode()
    root = ET.fromstring(svg)
    tags = {el.tag.rsplit("}", 1)[-1] for el in root.iter()}
    assert "script" not in tags
    texts = ["".join(el.itertext()) for el in root.iter() if el.tag.endswith("text")]
    assert texts.count(label) == 2, texts  # title and legend, as written
    assert "&lt;script&gt;" in svg


# ---------------------------------------------------------------------------- terminal
def test_terminal_tables_print_labels_as_written():
    """rich reads ``[...]`` as markup: names are passed as Text, so ``[/bold]`` prints as
    written instead of raising a MarkupError."""
    import pandas as pd
    from rich.console import Console

    from simulator.report.compare import print_compare_table
    from simulator.report.run import print_summary_table
    from simulator.report.sweep import print_sweep_table
    label = "[/bold] [red]x[/red]"
    con = Console(file=io.StringIO(), width=300, color_system=None)
    print_summary_table({"num_requests": 1}, con, title=label)
    print_compare_table(pd.DataFrame({"variant": [label], "num_completed": [1]}), con,
                        title=label)
    print_sweep_table(pd.DataFrame({"point_id": [0], "label": [label], "status": ["ok"]}), con,
                      title=label)
    out = con.file.getvalue()
    assert out.count("[/bold]") >= 4 and "[red]x[/red]" in out
