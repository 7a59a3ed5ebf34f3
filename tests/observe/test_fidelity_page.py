"""The fidelity page's maths and builder (simulator.observe.fidelity, fidelity_page): KS
distances, a peer simulator's per-request answer compared by servesim's definitions, the fit
report read defensively, and the page and CSV from small inputs whose values are derived here
by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from md_tables import tables

from simulator.observe.fidelity import (
    fit_report_summary,
    ks_distance,
    match_peer,
    peer_comparison,
    per_request_ks,
    read_peer_requests,
)
from simulator.observe.fidelity_page import (
    csv_rows,
    error_chart_rows,
    fit_status,
    headline,
    is_overload,
    render_page,
)
from simulator.observe.record import RecordError

PEER_HEADER = "instance id,request id,model,input,output,arrival,end_time,latency," \
              "queuing_delay,TTFT,TPOT,ITL\n"


# ------------------------------------------------------------------------ KS
def test_ks_distance_by_hand():
    """ECDFs of {1, 2, 3} and {2.5, 4}: on [2, 2.5) they are 2/3 and 0, the largest gap."""
    assert ks_distance([1, 2, 3], [2.5, 4]) == pytest.approx(2 / 3)
    assert ks_distance([1, 2, 3, np.nan], [4, 2.5, np.inf]) == pytest.approx(2 / 3)
    assert ks_distance([1, 2], [1, 2]) == 0.0
    assert ks_distance([1, 2], [5, 6]) == 1.0
    assert ks_distance([], [1.0]) is None
    assert ks_distance([np.nan], [1.0]) is None


def test_per_request_ks_uses_the_compared_requests_only():
    """Simulated {1.5, 2.5, 3.5} against recorded {1, 2, 3}: the ECDFs alternate, gap 1/3;
    the fourth request (not compared) would make it larger if it counted."""
    pair = pd.DataFrame({"compared": [True, True, True, False]})
    for m in ("ttft", "tpot", "e2e"):
        pair[f"real_{m}_s"] = [1.0, 2.0, 3.0, 0.0]
        pair[f"sim_{m}_s"] = [1.5, 2.5, 3.5, 99.0]
    ks = per_request_ks(pair)
    assert set(ks) == {"ttft", "tpot", "e2e"}
    for d in ks.values():
        assert d["ks"] == pytest.approx(1 / 3) and d["count"] == 3


# ------------------------------------------------------------------------ peer CSV
def _peer_csv(tmp_path, rows: list[str]):
    p = tmp_path / "sim.csv"
    p.write_text(PEER_HEADER + "".join(r + "\n" for r in rows))
    return p


def test_read_peer_requests_converts_nanoseconds_and_derives_tpot(tmp_path):
    p = _peer_csv(tmp_path, ['0,0,m,10,5,7,0,2000000000,0,500000000,1,"[1, 2]"',
                             '1,1,m,20,1,7,0,300000000,0,300000000,0,"[]"'])
    df = read_peer_requests(p)
    assert df["peer_request_id"].tolist() == ["0", "1"]
    assert df["num_prompt_tokens"].tolist() == [10, 20]
    assert df["ttft_s"].tolist() == pytest.approx([0.5, 0.3])
    assert df["e2e_latency_s"].tolist() == pytest.approx([2.0, 0.3])
    assert df["tpot_s"].iloc[0] == pytest.approx((2.0 - 0.5) / 4)   # its TPOT column is ignored
    assert np.isnan(df["tpot_s"].iloc[1])                          # one output token


def test_read_peer_requests_errors_name_file_line_and_column(tmp_path):
    p = _peer_csv(tmp_path, ['0,0,m,10,5,0,0,2000000000,0,500000000,0,"[]"',
                             '0,1,m,10,5,0,0,abc,0,500000000,0,"[]"'])
    with pytest.raises(RecordError, match=r"sim\.csv:3: column 'latency' is 'abc', not a number"):
        read_peer_requests(p)
    q = tmp_path / "short.csv"
    q.write_text("request id,input,output\n0,1,2\n")
    with pytest.raises(RecordError, match=r"short\.csv: missing column\(s\) 'latency', 'TTFT'"):
        read_peer_requests(q)
    with pytest.raises(RecordError, match="not found"):
        read_peer_requests(tmp_path / "none.csv")


def _outcomes() -> pd.DataFrame:
    """Three recorded requests: TTFT 1, 2, 3 s; E2E 5, 6, 7 s; TPOT (E2E - TTFT) / (n - 1)."""
    out = pd.DataFrame({"record_request_id": ["bench-0", "bench-1", "bench-2"],
                        "num_prompt_tokens": [10, 20, 30], "num_output_tokens": [5, 5, 3],
                        "ttft_s": [1.0, 2.0, 3.0], "e2e_latency_s": [5.0, 6.0, 7.0],
                        "last_token_s": [5.0, 7.0, 9.0]})
    out["tpot_s"] = (out["e2e_latency_s"] - out["ttft_s"]) / (out["num_output_tokens"] - 1)
    return out


def _peer(ttft_ns, e2e_ns, ids=(0, 1, 2), tokens=((10, 5), (20, 5), (30, 3))):
    return pd.DataFrame({"peer_request_id": [str(i) for i in ids],
                         "num_prompt_tokens": [t[0] for t in tokens],
                         "num_output_tokens": [t[1] for t in tokens],
                         "ttft_s": np.asarray(ttft_ns, float) * 1e-9,
                         "e2e_latency_s": np.asarray(e2e_ns, float) * 1e-9,
                         "tpot_s": [np.nan] * len(ids)}).assign(
        tpot_s=lambda d: (d.e2e_latency_s - d.ttft_s) / (d.num_output_tokens - 1))


def test_peer_errors_by_servesims_definitions():
    """Peer TTFT 1.5, 2, 3.5 s against 1, 2, 3: mean 7/3 vs 2 (+16.67%), p50 2 vs 2 (0%), KS
    1/3; E2E 5.5, 6, 7 vs 5, 6, 7: mean +1/36 (+2.78%); TPOT (5.5-1.5)/4, (6-2)/4, (7-3.5)/2
    = 1, 1, 1.75 (mean 1.25) vs 1, 1, 2 (mean 4/3): -6.25%."""
    res = peer_comparison(_outcomes(), _peer([1.5e9, 2e9, 3.5e9], [5.5e9, 6e9, 7e9]))
    m = res["metrics"]
    assert res["num_compared"] == 3 and res["num_unmatched"] == 0
    assert m["ttft"]["pct_error"]["mean"] == pytest.approx(100 / 6)
    assert m["ttft"]["pct_error"]["p50"] == pytest.approx(0.0)
    assert m["ttft"]["ks"] == pytest.approx(1 / 3)
    assert m["e2e"]["pct_error"]["mean"] == pytest.approx(100 * (37 / 6 - 6) / 6)
    assert m["tpot"]["sim"]["mean"] == pytest.approx(1.25)
    assert m["tpot"]["pct_error"]["mean"] == pytest.approx(-6.25)


def test_peer_compared_on_servesims_population_and_unmatched_counted():
    """Only requests in both and compared by servesim count: the peer lacks bench-2 and
    servesim did not compare bench-0, so bench-1 alone (TTFT 2 vs 2.5: +25%)."""
    peer = _peer([9e9, 2.5e9], [9e9, 6.5e9], ids=(0, 1), tokens=((10, 5), (20, 5)))
    res = peer_comparison(_outcomes(), peer, compared=[False, True, True])
    assert res["num_compared"] == 1 and res["num_unmatched"] == 1 and res["num_peer_rows"] == 2
    assert res["metrics"]["ttft"]["pct_error"]["mean"] == pytest.approx(25.0)


def test_peer_ids_that_name_other_requests_are_refused():
    peer = _peer([1e9, 2e9, 3e9], [5e9, 6e9, 7e9], tokens=((10, 5), (21, 5), (30, 3)))
    with pytest.raises(ValueError, match="'bench-1' has 20 prompt / 5 output tokens but the "
                                         "peer's request '1' has 21 / 5"):
        match_peer(_outcomes(), peer)


# ------------------------------------------------------------------------ fit report
NEW_REPORT = {"fit_report": {
    "tool": "benchmarks/fit_engine_constants.py", "objective": "least squares",
    "constants": {"sync.step_s": 0.0009, "api_server.per_request_s": 0.008},
    "runs": ["G/a", "G/d"],
    "per_run": {"G/a": {"fitted": True, "in": {"ttft": -1.2, "tpot": 0.5, "e2e": 0.3},
                        "loro": {"ttft": 1.0, "tpot": 2.0, "e2e": 3.0},
                        "lomo": {"ttft": 4.0, "tpot": "x", "e2e": 6.0}},
                "G/b": {"fitted": False, "not_fitted_because": "overload",
                        "in": {"ttft": 9.0, "tpot": 9.0, "e2e": 9.0}}},
    "median_abs_pct": {"loro_tpot": 3.1, "bad": "x"}}}


def test_fit_report_new_layout():
    f = fit_report_summary(NEW_REPORT)
    assert f["fitted"] and f["tool"] == "benchmarks/fit_engine_constants.py"
    assert f["constants"] == {"sync.step_s": 0.0009, "api_server.per_request_s": 0.008}
    assert f["per_run"]["G/a"]["loro"] == {"ttft": 1.0, "tpot": 2.0, "e2e": 3.0}
    assert f["per_run"]["G/a"]["lomo"] == {"ttft": 4.0, "tpot": None, "e2e": 6.0}
    assert f["per_run"]["G/a"]["logo"] is None
    assert f["median_abs_pct"] == {"loro_tpot": 3.1}
    assert fit_status("G/a", f) == "fitted on"
    assert fit_status("G/d", f) == "fitted on"            # listed in runs, no per_run entry
    assert fit_status("G/b", f) == "not fitted (overload)"
    assert fit_status("G/zz", f) == "not fitted"


def test_fit_report_older_layout_and_absent_or_malformed():
    old = {"fit_report": {"runs": ["G/a"],
                          "in_sample": {"G/a": {"ttft_mean_pct_error": 1.5,
                                                "tpot_mean_pct_error": -0.5,
                                                "e2e_mean_pct_error": 0.25}},
                          "leave_one_run_out": {"G/a": {"ttft_mean_pct_error": 2.0,
                                                        "constants": {"sync.step_s": 1}}}}}
    f = fit_report_summary(old)
    assert f["fitted"] and f["per_run"]["G/a"]["in"] == {"ttft": 1.5, "tpot": -0.5, "e2e": 0.25}
    assert f["per_run"]["G/a"]["loro"] == {"ttft": 2.0, "tpot": None, "e2e": None}
    for doc in (None, {}, {"name": "p"}, {"fit_report": "x"}, {"fit_report": {}},
                {"fit_report": {"per_run": "x", "runs": "y"}}, ["fit_report"]):
        f = fit_report_summary(doc)
        assert not f["fitted"] and f["per_run"] == {}
        assert fit_status("G/a", f) == "not fitted"


# ------------------------------------------------------------------------ the page
def _stage(index, name, ttft_mean, *, rate=None, failure=0, success=100, tpot_per_token=None):
    err = {"ttft": {"mean": ttft_mean, "p50": 1.0, "p90": 2.0, "p99": None},
           "tpot": {"mean": -3.0, "p50": -3.0, "p90": -3.0, "p99": -3.0},
           "e2e": {"mean": 0.5, "p50": 0.5, "p90": 0.5, "p99": 0.5}}
    stats = {m: {"mean": 0.25, "p50": 0.25, "p90": 0.5, "p99": 1.0} for m in err}
    nc = {}
    if tpot_per_token is not None:
        err["tpot_per_token"] = {k: tpot_per_token for k in ("mean", "p50", "p90", "p99")}
        stats["tpot_per_token"] = {"mean": 0.008}
        err["itl"] = {"mean": 7.0, "p50": None, "p90": 1.0, "p99": 2.0}
        stats["itl"] = {"mean": 0.004}
        nc = {"itl.p50": "falls in the zero gaps"}
    return {"index": index, "name": name, "rate": rate, "pct_error": err, "recorded": stats,
            "simulated": stats, "not_compared": nc,
            "counts": {"recorded": {"success": success, "failure": failure},
                       "simulated": {"success": success + failure, "failure": 0},
                       "pct_error": {"success": 100.0 * failure / success,
                                     "failure": -100.0 if failure else None}},
            "throughput": {"recorded": {"requests_per_s": 2.0},
                           "simulated": {"requests_per_s": 2.5},
                           "pct_error": {"requests_per_s": 25.0, "output_tokens_per_s": 25.0}}}


def _runs() -> list[dict]:
    """G/a: one stage, TTFT mean +10%, with KS and a peer; G/d: two stages (-2%, +4%), an
    inference-perf-like record; G/b: overload (50 of 150 lost); G/c: not replayed."""
    st = {"mean": 1.0, "p50": 1.0, "p90": 1.0, "p99": 1.0}
    peer = {"metrics": {m: {"real": st, "sim": st, "ks": 0.125,
                            "pct_error": {"mean": 0.6, "p50": 0.7, "p90": 0.8, "p99": 0.9}}
                        for m in ("ttft", "tpot", "e2e")}}
    published = {"name": "Peer", "metrics": {"ttft": {"mean": {"real": 1, "sim": 1,
                                                               "pct_error": 0.75}}}}
    metrics = {m: {"pct_error": {"mean": 10.0, "p50": 1.0, "p90": 2.0, "p99": None}}
               for m in ("ttft", "tpot", "e2e")}
    return [
        {"name": "G/a", "collection": "c1", "record": "per request, engine side",
         "num_requests": 300, "engine_version": "0.19.0", "tables": "vLLM 0.19.0 x",
         "stages": [_stage(0, "whole run", 10.0)], "metrics": metrics,
         "ks": {m: {"ks": 0.25, "count": 300} for m in ("ttft", "tpot", "e2e")},
         "peer": peer, "peer_name": "Peer", "peer_published": published},
        {"name": "G/d", "collection": "c1", "record": "per-stage summaries, client side",
         "num_requests": 200, "engine_version": "0.15.1",
         "stages": [_stage(0, "stage 0", -2.0, rate=5.0, tpot_per_token=3.5),
                    _stage(1, "stage 1", 4.0, rate=10.0, tpot_per_token=3.5)]},
        {"name": "G/b", "collection": "c1", "record": "per-stage summaries, client side",
         "num_requests": 150, "stages": [_stage(0, "stage 0", -40.0, failure=50)]},
        {"name": "G/c", "collection": "c2", "stages": [], "error": "names no GPU"},
    ]


def test_overload_needs_one_percent_of_a_stage_lost():
    assert not is_overload({"stages": [_stage(0, "s", 0.0, failure=9, success=991)]})
    assert is_overload({"stages": [_stage(0, "s", 0.0, failure=10, success=990)]})
    assert not is_overload({"stages": []})


def test_headline_leaves_out_overload_and_unreplayed_runs():
    """c1 stages not overload: |+10|, |-2|, |+4| -> median 4.0, largest 10.0; TPOT -3 each."""
    rows = headline([r for r in _runs() if not r.get("error")])
    assert rows == [["c1", "2", "3", "4.0% / 10.0%", "3.0% / 3.0%", "0.5% / 0.5%"]]


def _table(md: str, first_header: str) -> list[list[str]]:
    return next(t for t in tables(md) if t[0][0] == first_header and len(t) > 1)


HEADER = {"command": "python benchmarks/bench_fidelity.py", "commit": "abc1234",
          "date": "2026-01-01", "servesim_version": "0.1.0", "root": "gt",
          "profile": "engine_profiles/vllm-v1.yaml", "summaries_source": "s.yaml",
          "csv": "fidelity.csv"}
SUMMARY = {"record": "rec-1", "gpu": "h100-sxm", "engine": "vllm-v1", "metrics": {
    k: {"published": 2.0, "simulated": 1.5, "pct_error": -25.0} for k in (
        "duration_s", "ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "tpot_mean_ms",
        "tpot_median_ms", "tpot_p99_ms", "itl_mean_ms")}}


def test_page_tables_flags_and_sections():
    fit = fit_report_summary(NEW_REPORT | {"fit_report": {
        **NEW_REPORT["fit_report"], "runs": ["G/a", "G/d"],
        "per_run": {"G/a": NEW_REPORT["fit_report"]["per_run"]["G/a"]}}})
    figs = {"errors": "signed_errors.png", "summaries": None, "cdfs": [("G/a", "cdf_G-a.png")]}
    md = render_page(HEADER, _runs(), [SUMMARY, {"record": "rec-2", "gpu": "a100",
                                                 "error": "model not found"}], fit, figs)
    runs = {r[0]: r for r in _table(md, "Run")[1:]}
    assert runs["G/b"][-1] == "overload, not fitted"
    assert runs["G/c"][-1].startswith("not replayed")
    assert runs["G/a"][-1] == "" and runs["G/d"][-1] == ""
    ttft = {r[0]: r[1:5] for r in _table(md, "Run / stage")[1:]}
    assert ttft["G/a"] == ["+10.0%", "+1.0%", "+2.0%", "-"]
    assert ttft["G/d, stage 1 (10 req/s)"][0] == "+4.0%"
    tpot = {r[0]: r[1] for r in [t for t in tables(md) if t[0][0] == "Run / stage"][1][1:]}
    assert tpot["G/d, stage 0 (5 req/s)"] == "+3.5%"     # the per-token TPOT of a staged record
    assert tpot["G/a"] == "-3.0%"
    itl = [t for t in tables(md) if t[0][0] == "Run / stage"][2]
    assert [r[1:3] for r in itl[1:]] == [["+7.0%", "n/c"]] * 2   # G/d's stages only
    loo = {r[0]: r for r in next(t for t in tables(md) if t[0][:2] == ["Run", "Fit"])[1:]}
    assert loo["G/a"][2:5] == ["-1.2 / +0.5 / +0.3", "+1.0 / +2.0 / +3.0", "+4.0 / - / +6.0"]
    assert loo["G/d"][1] == "fitted on" and loo["G/c"][1] == "not fitted"
    assert "`sync.step_s` = 0.0009" in md and "`loro_tpot` 3.1%" in md
    peer = next(t for t in tables(md) if "KS servesim" in t[0])
    assert peer[1][:5] == ["G/a", "TTFT", "0.250", "0.125", "+10.0% / +0.6% / +0.8%"]
    assert peer[2][4] == "+10.0% / +0.6% / -"      # no published TPOT mean
    summ = next(t for t in tables(md) if t[0][0] == "Record")
    assert summ[1][2:6] == ["-25.0%", "-25.0% / -25.0% / -25.0%", "-25.0% / -25.0% / -25.0%",
                            "-25.0%"]
    assert summ[2][-1] == "not replayed: model not found"
    assert "- G/c: names no GPU" in md
    assert "![Signed error per run and stage](signed_errors.png)" in md
    assert "(cdf_G-a.png)" in md
    assert "Overload runs" in md and "G/b" in md.split("Overload runs")[1].splitlines()[0]


def test_page_without_a_fit_report_says_not_fitted():
    md = render_page(HEADER, _runs()[:1], [], fit_report_summary(None),
                     {"errors": None, "summaries": None, "cdfs": []})
    assert "Not fitted: the engine profile `engine_profiles/vllm-v1.yaml` has no " \
           "`fit_report`" in md
    assert "the profile has no fit report): G/a." in md
    assert "None replayed." in md


def test_csv_rows_hold_every_number():
    runs = _runs()
    fit = fit_report_summary(NEW_REPORT)
    rows = csv_rows(runs, [SUMMARY], fit)
    by = {}
    for r in rows:
        by.setdefault(r["section"], []).append(r)
    # 4 stages x (3 or 5 metrics x 4 stats): G/a 12, G/d 2 x 20, G/b 12
    assert len(by["stage"]) == 12 + 40 + 12
    assert len(by["counts"]) == 4 * 2 and len(by["throughput"]) == 4 * 2
    assert len(by["ks"]) == 3 and len(by["peer"]) == 12 and len(by["peer_ks"]) == 3
    assert len(by["peer_published"]) == 1 and by["peer_published"][0]["pct_error"] == 0.75
    itl = [r for r in by["stage"] if r["metric"] == "itl" and r["stat"] == "p50"]
    assert itl[0]["note"] == "falls in the zero gaps" and itl[0]["pct_error"] is None
    a = next(r for r in by["stage"] if r["run"] == "G/a" and r["metric"] == "ttft"
             and r["stat"] == "mean")
    assert a["pct_error"] == 10.0 and a["recorded"] == 0.25 and a["unit"] == "s"
    assert len(by["fit"]) == 3 + 3 + 3 + 3       # G/a in, loro, lomo; G/b in
    assert {r["metric"]: r["value"] for r in by["fit_constant"]} == {
        "sync.step_s": 0.0009, "api_server.per_request_s": 0.008}
    assert len(by["public_summary"]) == 8
    assert by["error"][0]["run"] == "G/c" and by["error"][0]["note"] == "names no GPU"


def test_error_chart_rows_mute_overload_runs():
    rows = error_chart_rows([r for r in _runs() if not r.get("error")])
    assert [r["label"] for r in rows] == ["G/a", "G/d, stage 0 (5 req/s)",
                                          "G/d, stage 1 (10 req/s)", "G/b (overload)"]
    assert [r["muted"] for r in rows] == [False, False, False, True]
    assert rows[0]["errors"]["ttft"]["mean"] == 10.0
    assert rows[0]["errors"]["throughput"] == {"value": 25.0}
