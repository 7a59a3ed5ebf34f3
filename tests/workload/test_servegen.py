"""ServeGen reader: counts per window, arrival-time shape, length tables, determinism,
strict errors, and the published data (when the shared folder is there)."""
from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from simulator.workload import WorkloadConfig, WorkloadError, load_workload, read_columns
from simulator.workload.readers import detect_format

SG = "traces/servegen"


def _client(folder: Path, cid: int, rows: list[str], dataset: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"chunk-{cid}-trace.csv"
    p.write_text("\n".join(rows) + "\n")
    if dataset is not None:
        (folder / f"chunk-{cid}-dataset.json").write_text(json.dumps(
            {ts: {k: repr(v) for k, v in fields.items()} for ts, fields in dataset.items()}))
    return p


LEN = {"0": {"input_tokens": {100: 0.25, 200: 0.75}, "output_tokens": {10: 0.5, 20: 0.5}}}


def test_counts_per_window_are_the_recorded_rates(tmp_path):
    # 0.1 req/s and 0.5 req/s over 600 s windows = 60 and 300 requests; the idle window none
    p = _client(tmp_path, 3, ["0,0.1,1.0,Gamma,1.0,10.0", "600,0,0,,0,0",
                              "1200,0.5,2.0,Weibull,0.6,1.3"], LEN)
    c = read_columns(p, seed=7)
    assert c.format == "servegen" and len(c) == 360
    t = np.sort(c.arrival_s)
    assert ((t > 0) & (t < 600)).sum() == 60 and ((t > 1200) & (t < 1800)).sum() == 300
    assert set(c.tenant) == {"client-3"}
    assert set(c.prompt.tolist()) <= {100, 200} and set(c.output.tolist()) <= {10, 20}
    assert detect_format(p) == "servegen" and detect_format(tmp_path) == "servegen"


def test_exponential_gaps_give_uniform_arrivals_in_the_window(tmp_path):
    """Gamma with shape 1 is the exponential: k arrivals of a Poisson process in a window,
    conditioned on their number, are uniform order statistics, so the offsets from the window
    start must pass a KS test against U(0, 600)."""
    p = _client(tmp_path, 0, ["0,5.0,1.0,Gamma,1.0,0.2"], LEN)
    t = read_columns(p, seed=1).arrival_s
    assert t.size == 3000
    assert stats.kstest(t / 600.0, "uniform").pvalue > 0.01


def test_gap_shape_keeps_the_fitted_cv(tmp_path):
    """Gamma(shape a) gaps have CV 1 / sqrt(a) = 2 for a = 0.25; rescaling all gaps of a
    window by one factor leaves their CV unchanged."""
    p = _client(tmp_path, 0, ["0,10.0,2.0,Gamma,0.25,0.4"], LEN)
    t = np.sort(read_columns(p, seed=3).arrival_s)
    g = np.diff(t)
    assert g.std() / g.mean() == pytest.approx(2.0, rel=0.1)


def test_lengths_follow_the_tables(tmp_path):
    p = _client(tmp_path, 0, ["0,20.0,1.0,Gamma,1.0,0.05"], LEN)
    c = read_columns(p, seed=5)
    n = len(c)
    got = [int((c.prompt == 100).sum()), int((c.prompt == 200).sum())]
    assert stats.chisquare(got, [0.25 * n, 0.75 * n]).pvalue > 0.001


def test_multimodal_prompt_is_text_plus_every_image(tmp_path):
    ds = {"0": {"text_tokens": {10: 1.0}, "image_count": {2: 1.0}, "image_tokens": {100: 1.0},
                "audio_count": {0: 1.0}, "audio_tokens": {0: 1.0}, "video_count": {0: 1.0},
                "video_tokens": {0: 1.0}, "output_tokens": {7: 1.0}}}
    p = _client(tmp_path, 0, ["0,0.2,1.0,Gamma,1.0,5.0"], ds)
    c = read_columns(p)
    assert set(c.prompt.tolist()) == {210} and set(c.output.tolist()) == {7}


def test_zero_lengths_become_one_token_with_a_warning(tmp_path):
    ds = {"0": {"input_tokens": {0: 0.5, 5: 0.5}, "output_tokens": {3: 1.0}}}
    p = _client(tmp_path, 0, ["0,1.0,1.0,Gamma,1.0,1.0"], ds)
    with pytest.warns(UserWarning, match=r"length\(s\) of 0 tokens .* set to 1 token"):
        c = read_columns(p)
    assert set(c.prompt.tolist()) == {1, 5}


def test_deterministic_and_independent_of_subsets(tmp_path):
    _client(tmp_path, 1, ["0,0.2,1.0,Gamma,1.0,5.0", "600,0.3,1.0,Gamma,1.0,3.0"], LEN)
    _client(tmp_path, 2, ["0,0.4,1.0,Weibull,0.8,2.0", "600,0.1,1.0,Gamma,1.0,10.0"], LEN)
    a = read_columns(tmp_path, seed=11)
    b = read_columns(tmp_path, seed=11)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt, b.prompt)
    assert not np.array_equal(read_columns(tmp_path, seed=12).arrival_s, a.arrival_s)
    one = read_columns(tmp_path, seed=11, servegen=_sg(clients=[2]))
    mine = np.array([t == "client-2" for t in a.tenant])
    assert np.array_equal(np.sort(one.arrival_s), np.sort(a.arrival_s[mine]))
    # a time range generates only its windows, with the same requests in them
    late = read_columns(tmp_path, seed=11, start_s=600.0)
    assert np.array_equal(np.sort(late.arrival_s), np.sort(a.arrival_s[a.arrival_s >= 600]))


def _sg(**kw):
    from simulator.workload import ServeGenConfig
    return ServeGenConfig.model_validate(kw)


def test_lengths_from_the_config_for_arrival_only_data(tmp_path):
    p = _client(tmp_path, 0, ["0,0.5,1.0,Gamma,1.0,2.0"])
    with pytest.raises(WorkloadError, match="arrivals only.*servegen.prompt_tokens"):
        read_columns(p)
    c = read_columns(p, servegen=_sg(prompt_tokens={"dist": "fixed", "value": 64},
                                     output_tokens={"dist": "fixed", "value": 8}))
    assert len(c) == 300 and set(c.prompt.tolist()) == {64}
    with pytest.raises(ValueError, match="both prompt_tokens and output_tokens"):
        _sg(prompt_tokens={"dist": "fixed", "value": 64})


@pytest.mark.parametrize("rows, msg", [
    (["0,0.1,1.0,Pareto,1,1"], r"chunk-0-trace.csv:1: pattern 'Pareto'"),
    (["0,0.1,1.0,,0,0"], r":1: rate 0.1 > 0 but no arrival pattern"),
    (["0,0.1,1.0,Gamma,1,1", "300,0.1,1.0,Gamma,1,1"], r":2: window_start_s '300' is not"),
    (["0,0.1,1.0,Gamma,-1,1"], r":1: Gamma shape and scale must be > 0"),
    (["0,0.1234,1.0,Gamma,1,1"], r"not a whole number of requests"),
    (["0,abc,1.0,Gamma,1,1"], r":1: rate 'abc' is not a number"),
    (["0,0.1,1.0,Gamma,1"], r":1: 5 fields, a ServeGen trace row has 6"),
])
def test_malformed_trace_rows(tmp_path, rows, msg):
    p = _client(tmp_path, 0, rows, LEN)
    with pytest.raises(WorkloadError, match=msg):
        read_columns(p, format="servegen")


def test_malformed_dataset(tmp_path):
    bad = {"0": {"input_tokens": {1: 0.5}, "output_tokens": {1: 1.0}}}
    p = _client(tmp_path, 0, ["0,0.1,1.0,Gamma,1,1"], bad)
    with pytest.raises(WorkloadError, match=r"window 0 input_tokens: probabilities sum to 0.5"):
        read_columns(p)
    p = _client(tmp_path / "b", 0, ["0,0.1,1.0,Gamma,1,1", "21600,0.1,1.0,Gamma,1,1"],
                {"21600": LEN["0"]})
    with pytest.raises(WorkloadError, match="no length distribution at or before it"):
        read_columns(p)


@pytest.mark.parametrize("text", [
    "{}", "{ }", "{1: 0.5, 2: 0.5,}", "{1: 1, 1: 0.5}", "{1: 1, 1.0: 0.5}", "{-1: 1e-3}",
    "{1:0.5,2:5E-1}", "{1: 1e999}", "{1: -0.5}", "{0.25: 1, 3: 0.0}",
    "{12345678901234567890123: 0.1}", "{1: 0.30000000000000004, 2: 0.7}"])
def test_length_tables_read_without_the_compiler_as_literal_eval_reads_them(text):
    import ast

    from simulator.workload.servegen import _fast_pdf
    fast, slow = _fast_pdf(text), ast.literal_eval(text)
    assert list(fast.items()) == list(slow.items())
    assert [type(k) for k in fast] == [type(k) for k in slow]
    assert [type(v) for v in fast.values()] == [type(v) for v in slow.values()]


@pytest.mark.parametrize("text", ["{01: 0.5}", "{1: .5}", "{1: 0.5", " {1: 0.5}", "{1: 0.5} x",
                                  "{,}", "{1: 0.5}\n", "{1: True}", "{'a': 1}", "[1, 2]"])
def test_other_forms_go_to_literal_eval(text):
    from simulator.workload.servegen import _fast_pdf
    assert _fast_pdf(text) is None


def test_published_length_tables_read_as_literal_eval_reads_them():
    import ast

    from helpers import shared_path

    from simulator.workload.servegen import _fast_pdf
    root = shared_path("traces/servegen", kind="dir")
    n = 0
    for f in sorted(root.glob("*/*/chunk-*-dataset.json"))[::7]:
        for fields in json.loads(f.read_text()).values():
            for text in fields.values():
                if isinstance(text, str):
                    fast, slow = _fast_pdf(text), ast.literal_eval(text)
                    assert fast is not None and list(fast.items()) == list(slow.items()), f
                    n += 1
    assert n >= 50


def test_workload_config_and_loader_window(tmp_path):
    _client(tmp_path, 4, ["0,0.1,1.0,Gamma,1,10", "600,0.2,1.0,Gamma,1,5"], LEN)
    cfg = WorkloadConfig.model_validate({"trace": str(tmp_path), "format": "servegen",
                                         "start_s": 600.0, "end_s": 1200.0})
    specs = load_workload(cfg, 0)
    assert len(specs) == 120 and all(0 <= s.arrival_time_s < 600 for s in specs)
    with pytest.raises(ValueError, match="'servegen' options apply to format 'servegen'"):
        WorkloadConfig.model_validate({"trace": "x.csv", "format": "azure",
                                       "servegen": {"clients": [1]}})


# --------------------------------------------------------------------------- published data
def _count(path: Path, end_s: float | None = None) -> int:
    """Requests a ServeGen client file records: sum of rate x 600 over its windows (read with
    the csv module, independently of the reader)."""
    n = 0.0
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if end_s is None or int(row[0]) < end_s:
                n += float(row[1]) * 600
    return round(n)


def test_published_client_file(shared_file):
    p = shared_file(f"{SG}/reason/deepseek-r1/chunk-5-trace.csv")
    c = read_columns(p, seed=0)
    assert len(c) == _count(p)
    assert c.tenant[0] == "client-5" and c.prompt.min() >= 1 and c.output.min() >= 1


def test_published_folder_total(shared_file):
    """stats.json of the shared traces gives 1,383,669 requests implied by the deepseek-r1
    rates over the day (aggregate_requests_implied); generation keeps every window's count."""
    folder = shared_file(f"{SG}/reason/deepseek-r1/chunk-0-trace.csv").parent
    want = json.loads((folder.parents[2] / "stats.json").read_text())[
        "servegen/reason/deepseek-r1"]["aggregate_requests_implied"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # the reasoning tables hold no zero lengths
        c = read_columns(folder, seed=0)
    assert len(c) == want == 1_383_669
    assert len(set(c.tenant)) == 73


def test_published_arrival_only_folder(shared_file):
    folder = shared_file(f"{SG}/language/m-large/chunk-0-trace.csv").parent
    cfg = WorkloadConfig.model_validate({
        "trace": str(folder), "end_s": 600.0,
        "servegen": {"prompt_tokens": {"dist": "fixed", "value": 100},
                     "output_tokens": {"dist": "fixed", "value": 10}}})
    specs = load_workload(cfg, 0)
    want = sum(_count(p, end_s=600) for p in folder.glob("chunk-*-trace.csv"))
    assert len(specs) == want


def test_servesim_trace_on_arrival_only_data_says_what_it_lacks(tmp_path, capsys):
    from simulator.cli.main import main
    _client(tmp_path / "sg", 0, ["0,0.1,1.0,Gamma,1.0,10.0"])  # no chunk-0-dataset.json
    assert main(["trace", str(tmp_path / "sg")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"servesim: error: {tmp_path / 'sg'}: this ServeGen data has arrivals only "
                    "(no chunk-N-dataset.json): it has no lengths for servesim trace to "
                    "describe; replay it in a scenario that gives them "
                    "(workload.servegen.prompt_tokens and output_tokens)")
