"""Property: random *valid* scenarios and traces never crash and never lose a request.

Hypothesis draws a scenario (batching policy, chunked prefill, KV size / allocation / prefix
caching / watermark, replicas and router, sequence and token budgets, ``max_model_len``,
preemption mode, admission limits, priorities, tenants, patience, speculative decoding) and a
workload: a synthetic one, or a trace file written in the generic CSV or the Mooncake JSONL
format (with ``hash_ids`` obeying ``len == ceil(input_length / 512)``). The run must finish
(no exception) with every input request in the request table exactly once and in a final
status: ``completed + rejected + cancelled == number of input requests`` (no ``until_s`` stop,
so nothing may be left waiting or running).

Bounded in time: at most 30 requests per example, ``max_examples`` small, no deadline.
"""
from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario

ROUTERS = ["round_robin", "least_outstanding", "least_kv", "random"]


@st.composite
def trace_rows(draw):
    n = draw(st.integers(1, 30))
    rows = []
    for _ in range(n):
        rows.append((draw(st.floats(0.0, 50.0, allow_nan=False)), draw(st.integers(1, 3000)),
                     draw(st.integers(1, 300))))
    return rows


@st.composite
def workloads(draw, folder: Path):
    kind = draw(st.sampled_from(["synthetic", "csv", "mooncake"]))
    if kind == "synthetic":
        length = st.one_of(
            st.builds(lambda v: {"dist": "fixed", "value": v}, st.integers(1, 2000)),
            st.builds(lambda lo, d: {"dist": "uniform", "low": lo, "high": lo + d},
                      st.integers(1, 500), st.integers(0, 500)),
            st.builds(lambda m, s, mx: {"dist": "lognormal", "median": m, "sigma": s,
                                        "max": mx},
                      st.floats(1.0, 1000.0), st.floats(0.0, 2.0), st.integers(1, 4000)))
        n = draw(st.integers(1, 30))
        w = {"synthetic": {
            "arrival": draw(st.one_of(
                st.builds(lambda r: {"process": "poisson", "rate_rps": r},
                          st.floats(0.01, 1e6)),
                st.builds(lambda r, cv: {"process": "gamma", "rate_rps": r, "cv": cv},
                          st.floats(0.01, 1e4), st.floats(0.1, 5.0)))),
            "num_requests": n, "prompt_tokens": draw(length), "output_tokens": draw(length)}}
        return w, n
    rows = draw(trace_rows())
    if kind == "csv":
        p = folder / "t.csv"
        lines = ["arrival_time_s,num_prompt_tokens,num_output_tokens"]
        lines += [f"{t!r},{pr},{o}" for t, pr, o in rows]
        p.write_text("\n".join(lines) + "\n")
    else:
        p = folder / "t.jsonl"
        groups = draw(st.integers(1, 3))
        out = []
        for i, (t, pr, o) in enumerate(rows):
            nblk = -(-pr // 512)
            g = i % groups
            ids = [g * 1000 + j for j in range(nblk)]  # requests of a group share prefixes
            out.append(json.dumps({"timestamp": int(t * 1000), "input_length": pr,
                                   "output_length": o, "hash_ids": ids}))
        p.write_text("\n".join(out) + "\n")
    w = {"trace": str(p), "rate_scale": draw(st.floats(0.1, 100.0))}
    return w, len(rows)


@st.composite
def scenarios(draw, folder: Path):
    workload, n = draw(workloads(folder))
    policy = draw(st.sampled_from(["continuous", "static"]))
    sched = {"policy": policy,
             "queue_policy": draw(st.sampled_from(["fcfs", "priority"])),
             "max_num_seqs": draw(st.integers(1, 16)),
             "max_num_batched_tokens": draw(st.integers(16, 2048)),
             "enable_chunked_prefill": draw(st.booleans()),
             "preemption_mode": draw(st.sampled_from(["recompute", "swap"])),
             "max_batch_size": draw(st.integers(1, 8)),
             "batch_timeout_s": draw(st.floats(0.0, 2.0))}
    if draw(st.booleans()):
        sched["max_model_len"] = draw(st.integers(2, 4096))
    adm = {}
    if draw(st.booleans()):
        adm["max_waiting"] = draw(st.integers(1, 10))
    if draw(st.booleans()):
        adm["max_queue_delay_s"] = draw(st.floats(0.001, 5.0))
    if draw(st.booleans()):
        adm["tenant_max_share"] = draw(st.floats(0.05, 1.0))
    sched["admission"] = adm
    kv = {"num_gpu_blocks": draw(st.integers(1, 400)),
          "block_size": draw(st.sampled_from([1, 4, 16])),
          "allocation": draw(st.sampled_from(["paged", "contiguous"])),
          "enable_prefix_caching": draw(st.booleans()),
          "watermark": draw(st.floats(0.0, 0.5)),
          "swap_space_gb": draw(st.floats(0.0, 0.1))}
    if draw(st.booleans()):
        workload["priorities"] = {0: 0.5, 1: 0.5}
    if draw(st.booleans()):
        workload["tenants"] = {"a": 0.7, "b": 0.3}
    if draw(st.booleans()):
        workload["patience"] = {"dist": "exponential", "mean_s": draw(st.floats(0.001, 10.0)),
                                "fraction": draw(st.floats(0.0, 1.0))}
    if draw(st.booleans()):
        workload["max_tokens"] = draw(st.integers(1, 400))
    raw = {"name": "prop", "model": "llama-3.1-8b", "perf": {"source": "roofline"},
           "seed": draw(st.integers(0, 2**32)),
           "cluster": {"num_replicas": draw(st.integers(1, 3)),
                       "router": draw(st.sampled_from(ROUTERS))},
           "scheduler": sched, "kv_cache": kv, "workload": workload,
           "slo": {"ttft_s": 1.0, "tpot_s": 0.1}}
    if policy == "continuous" and draw(st.booleans()):
        raw["speculative"] = {"method": "ngram",
                              "num_speculative_tokens": draw(st.integers(1, 4)),
                              "acceptance": {"acceptance_rate": draw(st.floats(0.0, 1.0))}}
    return raw, n


_TMP = tempfile.TemporaryDirectory(prefix="servesim-prop-")
_FOLDER = Path(_TMP.name)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenarios(_FOLDER))
def test_random_valid_scenarios_never_crash_or_lose_requests(case):
    raw, n = case
    sc = validate_scenario(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. outputs clipped to max_tokens (announced)
        res = run_scenario(sc, write=False, figures=False)
    df = res.requests
    s = res.summary
    assert len(df) == n and df.request_id.is_unique
    assert set(df.status) <= {"completed", "rejected", "cancelled"}, df.status.value_counts()
    assert s["num_completed"] + s["num_rejected"] + s["num_cancelled"] == n
    assert s["num_unfinished"] == 0
    done = df[df.status == "completed"]
    # a completed request emitted exactly its (possibly max_tokens-clipped) output length
    assert (done.num_emitted_tokens == done.num_output_tokens).all()
