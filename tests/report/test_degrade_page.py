"""The run page of a run whose degrade policies fired, in headless Chromium: it loads with no
console error, its five figures are embedded and not blank, and the "Degrade actions" table
shows the policy with the counts the engine test derives by hand (issue 15 parts 1 and 6)."""
from __future__ import annotations

from browser import non_background_fraction

from simulator.base.request import RequestSpec
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario

MIN_INK = 0.01



def test_degrade_section_renders(browser, tmp_path):
    sc = validate_scenario({
        "name": "degrade_page", "model": "llama-3.1-8b",
        "scheduler": {"max_num_seqs": 1, "admission": {"degrade": [
            {"name": "shed_all", "action": "shed", "when": {"num_waiting": 2}}]}},
        "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                   "num_requests": 1,
                                   "prompt_tokens": {"dist": "fixed", "value": 10},
                                   "output_tokens": {"dist": "fixed", "value": 10}}}})
    # as in tests/scheduling/test_degrade.py: r2, r3, r4 shed in one episode
    specs = [RequestSpec(i, 0.0, 10, 10) for i in range(5)] + [RequestSpec(5, 1.0, 10, 10)]
    run_scenario(sc, specs=specs, outdir=tmp_path)
    browser.open(tmp_path / "report.html")
    assert browser.errors() == [], browser.errors()
    images = browser.images()
    assert len(images) == 5
    for im in images:
        assert im["complete"] and im["natural_width"] > 0, im
        png = browser.screenshot(im["x"], im["y"], im["width"], im["height"])
        assert non_background_fraction(png) > MIN_INK, f"{im['alt']}: blank figure"
    cells = browser.evaluate(
        "Array.from(document.getElementById('degrade-actions').nextElementSibling"
        ".querySelectorAll('tbody tr')[0].cells).map(c => c.textContent.trim())")
    assert cells[0] == "shed_all" and cells[1] == "shed" and cells[3] == "1"
    assert cells[6] == "3 shed (rejected)"
