"""describe_workload on hand-made request lists."""
from __future__ import annotations

import math

from simulator.base.request import RequestSpec
from simulator.workload import describe_workload


def req(i, t, p=10, o=5, **kw):
    return RequestSpec(request_id=i, arrival_time_s=t, num_prompt_tokens=p,
                       num_output_tokens=o, **kw)


def test_describe_small():
    # gaps 0.5, 0.5, 1.0, 2.0 -> mean 1.0, population sd sqrt(0.375)
    times = [0.0, 0.5, 1.0, 2.0, 4.0]
    reqs = [req(i, t, p=10 * (i + 1), o=i + 1, tenant="a" if i < 2 else "b",
                cancel_after_s=1.0 if i == 0 else None) for i, t in enumerate(times)]
    d = describe_workload(reqs)
    assert d["count"] == 5
    assert d["duration_s"] == 4.0
    assert d["mean_rate_rps"] == 1.0
    assert math.isclose(d["interarrival_cv"], math.sqrt(0.375))
    assert d["peak_requests_in_1s"] == 2        # [0, 1) holds 0.0 and 0.5
    assert d["peak_requests_any_1s"] == 2
    # inverse CDF over the prompts 10..50 (n = 5): p50 the ceil(2.5) = 3rd, p90 the
    # ceil(4.5) = 5th smallest (linear interpolation would give 46)
    assert d["prompt_tokens"]["p50"] == 30
    assert d["prompt_tokens"]["p90"] == 50
    assert d["prompt_tokens"]["max"] == 50
    assert d["output_tokens"]["min"] == 1
    assert d["tenants"] == {"a": 2, "b": 3}
    assert d["slices"] == {"default": 5}
    assert d["with_cancel_after"] == 1


def test_describe_sliding_peak_differs_from_calendar_seconds():
    reqs = [req(i, t) for i, t in enumerate([0.6, 0.9, 1.1, 1.4])]
    d = describe_workload(reqs)
    assert d["peak_requests_in_1s"] == 2
    assert d["peak_requests_any_1s"] == 4


def test_describe_edge_cases():
    assert describe_workload([])["count"] == 0
    d = describe_workload([req(0, 3.0)])
    assert d["duration_s"] == 0.0 and d["mean_rate_rps"] is None and d["interarrival_cv"] is None


def test_describe_columns_matches_the_objects_and_hand_counts(tmp_path):
    """``servesim trace`` statistics come from the columns (no object per row): the same
    dict as describe_workload over the rows' objects, and the label counts by hand."""
    import json

    from simulator.workload import describe_columns, read_columns

    rows = [  # file order is not arrival order
        {"arrival_time_s": 2.0, "num_prompt_tokens": 30, "num_output_tokens": 3,
         "tenant": "b", "priority": 2, "slice": "code", "max_tokens": 8},
        {"arrival_time_s": 0.0, "num_prompt_tokens": 10, "num_output_tokens": 1,
         "tenant": "a", "cancel_after_s": 1.5},
        {"arrival_time_s": 0.5, "num_prompt_tokens": 20, "num_output_tokens": 2,
         "tenant": "b", "priority": 2, "cancel_after_s": None},
        {"arrival_time_s": 4.0, "num_prompt_tokens": 40, "num_output_tokens": 4,
         "priority": 1, "slice": "chat", "cancel_after_s": 2.0},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cols = read_columns(path, "generic_jsonl")
    d = describe_columns(cols)
    assert d == describe_workload(cols.to_specs())
    assert d["tenants"] == {"a": 1, "b": 2, "default": 1}
    assert d["priorities"] == {0: 1, 1: 1, 2: 2}
    assert d["slices"] == {"chat": 1, "code": 1, "default": 2}
    assert (d["with_cancel_after"], d["with_max_tokens"], d["with_prefix_ids"]) == (2, 1, 0)
    assert d["duration_s"] == 4.0 and d["mean_rate_rps"] == 0.75      # 3 gaps over 4 s
    assert d["prompt_tokens"]["p50"] == 20            # the ceil(0.5 x 4) = 2nd of 10..40


def test_describe_columns_without_label_columns(tmp_path):
    from simulator.workload import describe_columns, read_columns

    path = tmp_path / "t.csv"
    path.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\n0,5,1\n0.25,7,2\n")
    cols = read_columns(path, "generic_csv")
    d = describe_columns(cols)
    assert d == describe_workload(cols.to_specs())
    assert d["tenants"] == {"default": 2} and d["priorities"] == {0: 2}
    assert d["peak_requests_in_1s"] == 2 and d["with_cancel_after"] == 0
    assert describe_columns(cols.take(cols.arrival_s[:0].astype(int)))["count"] == 0
