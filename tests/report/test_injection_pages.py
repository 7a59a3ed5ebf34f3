"""Report injection in a browser (issue 26, defect 1): ``report.html`` and ``compare.html``
built from hostile labels (tenant, slice, scenario name, ``--vary`` value, variant name)
open in headless Chromium with no script run, and show the labels as text.

The payloads (:data:`injection.PAYLOADS`) set ``document.title`` to
:data:`injection.MARKER` when they run; a control page that holds them raw shows that they
do. Needs Chromium (skipped without one, as the other page tests).
"""
from __future__ import annotations

from injection import MARKER, PAYLOADS, write_compare, write_run

#: The payloads that run script when the page is opened (plus one javascript: link each).
ACTIVE = ("img_onerror", "script", "attr_break", "table_break", "newline", "md_js_link",
          "md_image_attr", "anchor", "autolink", "definition")
LABEL = " ".join(PAYLOADS[k] for k in ACTIVE)

#: Elements, handlers and links the payloads would add to the page.
_INJECTED_JS = ("document.querySelectorAll('script, svg, iframe, object, embed, "
                "[onerror], [onload], [onclick], a[href^=\"javascript:\" i]').length")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _check_page(browser, path, title_prefix: str) -> None:
    browser.open(path)
    assert browser.evaluate("document.title") == _norm(title_prefix + LABEL)
    assert browser.evaluate(_INJECTED_JS) == 0
    assert browser.errors() == [], browser.errors()  # the payload's <img src=x> would fail
    assert _norm(LABEL) in _norm(browser.evaluate("document.body.innerText"))


def test_the_payloads_run_on_a_raw_page(browser, tmp_path):
    """Control: the same payloads, put in a page as they are, do run (the marker is set)."""
    for key in ("img_onerror", "script", "attr_break"):
        page = tmp_path / f"{key}.html"
        page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title>'
                        f"</head><body><table><tr><td>{PAYLOADS[key]}</td></tr></table>"
                        "</body></html>")
        browser.open(page)
        assert browser.evaluate("document.title") == MARKER, key


def test_run_report_page_runs_no_label(browser, tmp_path):
    files = write_run(LABEL, tmp_path)
    _check_page(browser, files["html"], "servesim run: ")
    assert browser.evaluate("document.images.length") == 5  # the figures, embedded


def test_compare_page_runs_no_label(browser, tmp_path):
    files = write_compare(LABEL, tmp_path)
    _check_page(browser, files["html"], "servesim compare: ")
    # the variant named by the label links to its folder: a relative link, percent-encoded
    hrefs = browser.evaluate("Array.from(document.links).map(a => a.getAttribute('href'))")
    assert all(h.endswith("/report.html") and ":" not in h and not h.startswith("/")
               for h in hrefs), hrefs
