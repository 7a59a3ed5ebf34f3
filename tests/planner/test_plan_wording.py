"""What a plan says when nothing passes, and how it shows a capacity it does not have."""
from __future__ import annotations

from types import SimpleNamespace

from simulator.planner.recommend import recommend
from simulator.planner.report import _capacity_row, _headline, capacity_text, headroom_text


def _row(label, **kw):
    row = {"label": label, "passed": False, "failed_gates": ["capacity"],
           "is_baseline": False, "is_last_known_good": False}
    row.update(kw)
    return row


def _none_passed(lkg):
    base = _row("today", is_baseline=True)
    cands = [_row("a"), _row("b")]
    status, chosen, _runners, reason, fallback = recommend(None, cands, base, lkg)
    return status, chosen, reason, fallback


def test_none_passed_without_a_last_known_good_does_not_claim_one():
    status, chosen, reason, _ = _none_passed(None)
    assert status == "none_passed" and chosen["label"] == "today"
    assert reason == ("no candidate passed every gate (failed gates, by candidates: "
                      "capacity (2)); the baseline 'today' fails capacity too: nothing to "
                      "recommend and no last_known_good given to fall back to")
    res = SimpleNamespace(status=status, recommendation={"config": chosen})
    assert _headline(res) == (
        "No configuration passes the gates: every candidate and the baseline 'today' fail "
        "(capacity for the baseline); no last known-good deployment was given to fall back to")


def test_none_passed_with_a_last_known_good_keeps_it():
    lkg = _row("old", is_last_known_good=True)
    status, chosen, reason, _ = _none_passed(lkg)
    assert status == "none_passed" and chosen["label"] == "old"
    assert reason.endswith("the last known-good 'old' fails capacity too: keep the last "
                           "known-good deployment")
    res = SimpleNamespace(status=status, recommendation={"config": chosen})
    assert _headline(res).endswith("(capacity for the last known-good); keep the last "
                                   "known-good deployment")


def test_capacity_cell_dash_where_there_is_none():
    # no feasible rate: the search stores 0.0 with no rate scale
    none_found = {"capacity_rps": 0.0, "capacity_rps_per_gpu": 0.0, "capacity_rate_scale": None}
    skipped = {"capacity_rps": None, "capacity_rps_per_gpu": None, "capacity_rate_scale": None}
    measured = {"capacity_rps": 1.234, "capacity_rps_per_gpu": 0.617, "capacity_rate_scale": 2.0}
    real_zero = {"capacity_rps": 0.0, "capacity_rps_per_gpu": 0.0, "capacity_rate_scale": 1.0}
    assert capacity_text(none_found) == "-" and capacity_text(skipped) == "-"
    assert capacity_text(measured) == "1.23"
    assert capacity_text(measured, "capacity_rps_per_gpu") == "0.62"
    assert capacity_text(real_zero) == "0.00"  # measured at a rate scale: shown as measured
    assert _capacity_row(none_found) == "- (no probed rate meets the SLOs)"
    assert _capacity_row(skipped) == "- (not measured)"
    assert _capacity_row(measured) == "1.23 requests/s (0.62 per GPU)"


def test_a_capacity_no_probe_bracketed_reads_as_a_lower_bound():
    row = {"capacity_rps": 2560.0, "capacity_rps_per_gpu": 2560.0, "capacity_rate_scale": 512.0,
           "search_note": "lower_bound"}
    assert capacity_text(row) == ">= 2560.00"
    assert _capacity_row(row) == ">= 2560.00 requests/s (>= 2560.00 per GPU)"
    assert capacity_text({**row, "search_note": "at_max_scale"}) == ">= 2560.00"
    assert capacity_text({**row, "search_note": "max_probes"}) == "2560.00"
    assert headroom_text({**row, "headroom": 127.0}) == ">= 12700%"
    assert headroom_text({**row, "headroom": 127.0, "search_note": "converged"}) == "12700%"
    assert headroom_text({**row, "headroom": None}) == "-"
    c = {**row, "label": "a", "passed": True, "is_baseline": False, "replicas": 1,
         "tensor_parallel_size": 1, "gpu": "h100-sxm", "gpus": 1, "usd_per_hour": 2.99,
         "price_per_1m_input_tokens_usd": 0.01, "price_per_1m_output_tokens_usd": 0.3,
         "headroom": 127.0}
    res = SimpleNamespace(status="ok", recommendation={"config": c}, fallback=None)
    assert _headline(res).endswith(
        "headroom at least 12700% (its capacity is a lower bound: no probed rate up to 2560.00 "
        "requests/s per replica failed; a longer trace, or a larger search.max_probes or "
        "search.max_rate_scale, brackets it)")
    res.recommendation["config"] = {**c, "search_note": "converged"}
    assert _headline(res).endswith("headroom 12700%")
