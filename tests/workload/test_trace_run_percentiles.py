"""One percentile definition for every command (issue 32 item 1): ``servesim trace`` and
``servesim run`` report the same p50 / p90 / p99 of the same samples, the inverse empirical
CDF (``P(q)`` = the ``ceil(q / 100 x n)``-th smallest of ``n`` samples).

The samples: ten requests with output lengths 1..10 tokens (in shuffled order), 100 s apart, on
``perf.source: constant`` with 1 s a step and no engine overhead. Each request runs alone:
its prefill step emits the first token and each further token takes one step, so its E2E
latency is exactly its output length in seconds, and the run's E2E percentiles are the
trace's output-length percentiles, in seconds.

By hand, n = 10: p50 the ceil(5.0) = 5th smallest = 5, p90 the ceil(9.0) = 9th = 9, p99 the
ceil(9.9) = 10th = 10. Linear interpolation (what ``trace`` printed before) would give 5.5,
9.1 and 9.91.
"""
from __future__ import annotations

import json

import numpy as np

from simulator.base.quantiles import weighted_percentiles
from simulator.cli.main import main
from simulator.workload import describe_columns, read_columns

OUTPUTS = [7, 1, 4, 10, 3, 8, 2, 9, 5, 6]
HAND = {"p50": 5, "p90": 9, "p99": 10}


def _trace(tmp_path):
    path = tmp_path / "t.csv"
    rows = "".join(f"{100 * i},16,{o}\n" for i, o in enumerate(OUTPUTS))
    path.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\n" + rows)
    return path


def test_trace_and_run_report_the_same_hand_derived_percentiles(tmp_path, capsys):
    path = _trace(tmp_path)
    assert main(["trace", str(path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    got_trace = {k: stats["output_tokens"][k] for k in HAND}
    assert got_trace == HAND
    assert all(isinstance(v, int) for v in got_trace.values())  # observed counts

    out = tmp_path / "run"
    assert main(["run", "default", "--trace", str(path), "-o", str(out), "--no-figures", "-q",
                 "--set", "workload.format=generic_csv", "--set", "perf.source=constant",
                 "--set", "perf.constant.step_s=1.0", "--set", "perf.engine=none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    e2e = summary["e2e_latency_s"]
    assert e2e["count"] == len(OUTPUTS) and e2e["mean"] == np.mean(OUTPUTS)
    assert {k: e2e[k] for k in HAND} == {k: float(v) for k, v in HAND.items()}


def test_describe_uses_the_summary_definition_on_ties_and_odd_sizes(tmp_path):
    """Sizes 1..12 with ties: every trace percentile equals the run summary's function and
    numpy's ``inverted_cdf`` of the same sample, never an interpolated value."""
    rng = np.random.default_rng(5)
    for n in range(1, 13):
        x = rng.integers(1, 6, n)
        p = tmp_path / f"t{n}.csv"
        p.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\n"
                     + "".join(f"{i},{int(v)},1\n" for i, v in enumerate(x)))
        d = describe_columns(read_columns(p, "generic_csv"))["prompt_tokens"]
        want = np.percentile(x, [50, 90, 99], method="inverted_cdf")
        assert [d["p50"], d["p90"], d["p99"]] == want.tolist()
        assert want.tolist() == weighted_percentiles(x, None, [50, 90, 99]).tolist()
