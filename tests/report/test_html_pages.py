"""Every report's HTML page in headless Chromium: it loads with no console error, no uncaught
exception and no failed load, shows every figure of its Markdown report embedded (``data:``
URIs, decoded, not blank), and carries the Markdown's text.

The pages are written from the stored golden inputs (:mod:`report_cases`: the run and plan
reports first among them), so no simulation runs here. A figure counts as present when the
browser decoded it (``naturalWidth > 0``) and as non-empty when a screenshot of its box has
more than :data:`MIN_INK` of its pixels off the white background (a matplotlib figure draws
axes, ticks, labels and data: several percent; a blank image: 0).

Needs Chromium (Debian package ``chromium``; ``.ci/run`` tries to install it, or set
``$SERVESIM_CHROMIUM``); skipped without one, with the reason.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from browser import non_background_fraction
from report_cases import WRITERS

#: Least share of a figure's pixels that must differ from the white background.
MIN_INK = 0.01
#: The pages checked: the run and plan pages (issue 15), and every other report.
PAGES = ["run_plain", "run_spec", "plan", "plan_none", "compare", "spec_sweep", "validate",
         "self_check"]
#: Figures the run and plan pages must show (the five of each report).
FIGURES = {"run_plain": 5, "run_spec": 5, "plan": 5}



class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z][A-Za-z]{3,}", text))


def _markdown_words(md: str) -> set[str]:
    """The words a reader sees: without image syntax (alt texts are attributes) and without
    link targets (file names)."""
    md = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", md)
    return _words(re.sub(r"\]\([^)]*\)", "]", md))


def test_a_broken_page_is_caught(browser, tmp_path):
    """The checks see what they look for: a missing image, a console error, an exception
    and a blank figure are all reported."""
    import base64
    import io

    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (60, 40), (255, 255, 255)).save(buf, "PNG")
    blank = base64.b64encode(buf.getvalue()).decode()
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>x</title></head>'
                    f'<body><img alt="gone" src="missing.png"><img alt="blank" '
                    f'src="data:image/png;base64,{blank}"><script>console.error("bad");'
                    'throw new Error("boom");</script></body></html>')
    browser.open(page)
    errors = browser.errors()
    assert any("ERR_FILE_NOT_FOUND" in e for e in errors)
    assert any(e.startswith("console: bad") for e in errors)
    assert any(e.startswith("exception:") for e in errors)
    gone, shown = browser.images()
    assert gone["natural_width"] == 0 and shown["natural_width"] == 60
    assert non_background_fraction(browser.screenshot(shown["x"], shown["y"], shown["width"],
                                                      shown["height"])) == 0.0


@pytest.mark.parametrize("case", PAGES)
def test_report_page_renders(browser, tmp_path, case):
    files = WRITERS[case](case, tmp_path)
    md = files["md"].read_text(encoding="utf-8")
    html = files["html"].read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html and "<script" not in html
    browser.open(files["html"])
    assert browser.errors() == [], browser.errors()
    assert browser.evaluate("document.title") == md.splitlines()[0].lstrip("# ").strip()
    images = browser.images()
    assert len(images) == md.count("!["), "every figure of the Markdown report is on the page"
    assert len(images) == FIGURES.get(case, len(images))
    for im in images:
        assert im["src_scheme"] == "data", f"{im['alt']}: not embedded"
        assert im["complete"] and im["natural_width"] > 0 and im["natural_height"] > 0, im
        png = browser.screenshot(im["x"], im["y"], im["width"], im["height"])
        assert non_background_fraction(png) > MIN_INK, f"{im['alt']}: blank figure"
    # the page carries the report's words (prose and table cells), nothing lost on the way
    parser = _Text()
    parser.feed(html)
    missing = _markdown_words(md) - _words(" ".join(parser.parts)) - {"details", "summary"}
    assert not missing, sorted(missing)[:20]


def test_ci_installs_chromium():
    """``.ci/run`` tries to install the browser these tests need (and says so when it cannot)."""
    from helpers import REPO_ROOT
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "apt-get" in ci and "install -y --no-install-recommends chromium" in ci
    assert "the browser tests will skip" in ci
