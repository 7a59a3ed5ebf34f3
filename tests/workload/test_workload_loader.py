"""load_workload: windowing, scaling, shares, patience, prefixes, synthetic, determinism."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from helpers import load_file_module

from simulator.workload import (
    WorkloadConfig,
    WorkloadError,
    WorkloadWarning,
    assign_by_share,
    describe_workload,
    load_workload,
    stable_int_hash,
)

REPO = Path(__file__).resolve().parents[2]
VIDUR_HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens\n"


@pytest.fixture
def six(write):
    """Six requests at t = 0..5 s with prompt = 10*(t+1), output = t+1."""
    rows = "".join(f"{t},{10 * (t + 1)},{t + 1}\n" for t in range(6))
    return write("six.csv", VIDUR_HEADER + rows)


def cfg(**kw) -> WorkloadConfig:
    return WorkloadConfig.model_validate(kw)


def test_plain_trace(six):
    reqs = load_workload(cfg(trace=str(six)), seed=0)
    assert [r.arrival_time_s for r in reqs] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert [r.request_id for r in reqs] == list(range(6))


def test_window_rebase_and_rate_scale(six):
    reqs = load_workload(cfg(trace=str(six), start_s=1.5, end_s=4.0), seed=0)
    assert [(r.arrival_time_s, r.num_prompt_tokens) for r in reqs] == [(0.5, 30), (1.5, 40)]
    assert [r.request_id for r in reqs] == [0, 1]
    assert [r.source_line for r in reqs] == [4, 5]
    reqs = load_workload(cfg(trace=str(six), start_s=1.5, end_s=4.0, rate_scale=2.0), seed=0)
    assert [r.arrival_time_s for r in reqs] == [0.25, 0.75]
    # end is exclusive, start inclusive
    reqs = load_workload(cfg(trace=str(six), start_s=1.0, end_s=3.0), seed=0)
    assert [r.num_prompt_tokens for r in reqs] == [20, 30]


def test_max_requests_after_window(six):
    reqs = load_workload(cfg(trace=str(six), start_s=2.0, max_requests=3, rate_scale=0.5),
                         seed=0)
    assert [(r.arrival_time_s, r.num_output_tokens) for r in reqs] == [
        (0.0, 3), (2.0, 4), (4.0, 5)]


def test_empty_window_is_an_error(six):
    with pytest.raises(WorkloadError, match="no requests in the window"):
        load_workload(cfg(trace=str(six), start_s=100.0), seed=0)


def test_sort_is_stable_for_ties(write):
    p = write("t.csv", VIDUR_HEADER + "1.0,1,1\n0.5,2,1\n1.0,3,1\n1.0,4,1\n")
    reqs = load_workload(cfg(trace=str(p)), seed=0)
    assert [r.num_prompt_tokens for r in reqs] == [2, 1, 3, 4]
    assert [r.request_id for r in reqs] == [0, 1, 2, 3]


def test_trace_path_resolved_against_base_dir(six):
    reqs = load_workload(cfg(trace=six.name), seed=0, base_dir=six.parent)
    assert len(reqs) == 6
    with pytest.raises(WorkloadError, match="not found"):
        load_workload(cfg(trace="definitely_missing_trace.csv"), seed=0, base_dir=six.parent)


# ------------------------------------------------------------------ shares

#: These traces have no tenant / slice / priority / patience column: the tests check the
#: labels the workload config assigns by share, and the reader's WorkloadWarning that it did
#: so is expected.
_ASSIGNED = pytest.mark.filterwarnings(
    "ignore:.*assigned at random by the workload config:simulator.workload.WorkloadWarning")


def test_assign_by_share_exact_counts():
    rng = np.random.default_rng(0)
    # 7 requests: exact 3.5 / 2.1 / 1.4 -> floors 3/2/1, the spare one to the largest part (a)
    labels = assign_by_share({"c": 0.2, "a": 0.5, "b": 0.3}, 7, rng)
    assert Counter(labels) == {"a": 4, "b": 2, "c": 1}
    labels = assign_by_share({"a": 0.5, "b": 0.3, "c": 0.2}, 10, np.random.default_rng(1))
    assert Counter(labels) == {"a": 5, "b": 3, "c": 2}
    # 1/3 each over 4: floors 1/1/1, tie on fractional part -> smallest label
    labels = assign_by_share({"x": 1 / 3, "y": 1 / 3, "z": 1 / 3}, 4, np.random.default_rng(2))
    assert Counter(labels) == {"x": 2, "y": 1, "z": 1}


@_ASSIGNED
def test_shares_deterministic_and_proportional(six):
    c = cfg(trace=str(six), tenants={"a": 0.5, "b": 0.5}, slices={"chat": 1 / 3, "code": 2 / 3},
            priorities={0: 0.5, 1: 0.5})
    r1 = load_workload(c, seed=7)
    r2 = load_workload(c, seed=7)
    assert r1 == r2
    assert Counter(r.tenant for r in r1) == {"a": 3, "b": 3}
    assert Counter(r.slice for r in r1) == {"chat": 2, "code": 4}
    assert Counter(r.priority for r in r1) == {0: 3, 1: 3}
    orders = {tuple(r.tenant for r in load_workload(c, seed=s)) for s in range(20)}
    assert len(orders) > 1  # the seed changes the assignment order


@_ASSIGNED
def test_share_order_in_mapping_does_not_matter(six):
    a = load_workload(cfg(trace=str(six), tenants={"a": 0.25, "b": 0.75}), seed=3)
    b = load_workload(cfg(trace=str(six), tenants={"b": 0.75, "a": 0.25}), seed=3)
    assert a == b


def test_shares_conflict_with_trace_column(write):
    p = write("t.csv", VIDUR_HEADER.strip() + ",tenant\n0,1,1,x\n")
    with pytest.raises(WorkloadError, match="has a 'tenant' column"):
        load_workload(cfg(trace=str(p), tenants={"a": 1.0}), seed=0)


@_ASSIGNED
def test_labels_do_not_depend_on_rate_scale(six):
    base = {"trace": str(six), "tenants": {"a": 0.5, "b": 0.5},
            "patience": {"dist": "exponential", "mean_s": 3.0}}
    r1 = load_workload(cfg(**base), seed=5)
    r2 = load_workload(cfg(**base, rate_scale=4.0), seed=5)
    assert [(r.tenant, r.cancel_after_s) for r in r1] == [(r.tenant, r.cancel_after_s)
                                                         for r in r2]


# ------------------------------------------------------------------ patience

@_ASSIGNED
def test_patience_fixed_and_trace_values_win(write):
    p = write("t.csv", VIDUR_HEADER.strip() + ",cancel_after_s\n0,1,1,\n1,1,1,0.5\n")
    reqs = load_workload(cfg(trace=str(p), patience={"dist": "fixed", "value": 5.0}), seed=0)
    assert [r.cancel_after_s for r in reqs] == [5.0, 0.5]


def test_patience_exponential_mean_and_fraction():
    c = cfg(synthetic={"arrival": {"process": "poisson", "rate_rps": 100.0},
                       "num_requests": 4000,
                       "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
            patience={"dist": "exponential", "mean_s": 2.0, "fraction": 0.25})
    reqs = load_workload(c, seed=11)
    vals = np.array([r.cancel_after_s for r in reqs if r.cancel_after_s is not None])
    # fraction: binomial(4000, 0.25) sd = 27.4 -> 5 sd band
    assert abs(vals.size - 1000) < 140
    # mean of ~1000 exponentials with mean 2: sd 0.063 -> 5 sd band
    assert abs(vals.mean() - 2.0) < 0.32
    assert (vals >= 0).all()


@_ASSIGNED
def test_patience_uniform_and_clip(six):
    reqs = load_workload(cfg(trace=str(six), patience={"dist": "uniform", "low": 1.0,
                                                        "high": 9.0, "max": 3.0}), seed=2)
    assert all(1.0 <= r.cancel_after_s <= 3.0 for r in reqs)


# ------------------------------------------------------------------ max_tokens, prefixes

def test_declared_max_tokens_fills_and_clips(write):
    p = write("t.csv", VIDUR_HEADER.strip() + ",max_tokens\n0,1,50,\n1,1,500,900\n2,1,300,\n")
    # rows 1 and 3 have no max_tokens and get 100; only row 3 (300 tokens) is clipped, and
    # the warning says so (1 of 3 requests) instead of clipping silently
    with pytest.warns(WorkloadWarning, match=r"max_tokens=100 clips the output of 1 of 3 "):
        reqs = load_workload(cfg(trace=str(p), max_tokens=100), seed=0)
    assert [(r.max_tokens, r.num_output_tokens) for r in reqs] == [
        (100, 50), (900, 500), (100, 100)]


def test_stable_int_hash_is_pinned():
    # BLAKE2b-64 of the UTF-8 name, shifted right by one bit (fixed across processes).
    assert stable_int_hash("system-prompt") == 8318611476039124463
    assert 0 <= stable_int_hash("") < 2**63


@_ASSIGNED
def test_shared_prefixes_by_tenant_and_default(six):
    c = cfg(trace=str(six), tenants={"a": 0.5, "b": 0.5},
            shared_prefixes=[{"name": "sys-a", "num_tokens": 300, "tenant": "a"},
                             {"name": "global", "num_tokens": 40}])
    reqs = load_workload(c, seed=1)
    for r in reqs:
        if r.tenant == "a":
            assert r.prefix_hash_ids == (stable_int_hash("sys-a"),)
            assert r.prefix_block_tokens == 300
        else:
            assert r.prefix_hash_ids == (stable_int_hash("global"),)
            assert r.prefix_block_tokens == 40


@_ASSIGNED
def test_shared_prefix_by_slice_only(six):
    c = cfg(trace=str(six), slices={"code": 0.5, "chat": 0.5},
            shared_prefixes=[{"name": "code-sys", "num_tokens": 64, "slice": "code"}])
    reqs = load_workload(c, seed=1)
    assert sum(r.prefix_hash_ids is not None for r in reqs) == 3
    assert all((r.prefix_hash_ids is not None) == (r.slice == "code") for r in reqs)
    assert all(r.prefix_block_tokens == (64 if r.slice == "code" else 512) for r in reqs)


def test_shared_prefix_conflicts_with_trace_hash_ids(write):
    p = write("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2, '
                         '"hash_ids": [1]}\n')
    with pytest.raises(WorkloadError, match=re.escape(":1: shared prefix 'x'")):
        load_workload(cfg(trace=str(p), shared_prefixes=[{"name": "x", "num_tokens": 8}]),
                      seed=0)


# ------------------------------------------------------------------ synthetic

def synth(tenants=None, patience=None, **kw):
    base = {"arrival": {"process": "poisson", "rate_rps": 10.0}, "num_requests": 200,
            "prompt_tokens": {"dist": "fixed", "value": 100},
            "output_tokens": {"dist": "uniform", "low": 5, "high": 7}}
    base.update(kw)
    return cfg(synthetic=base, tenants=tenants, patience=patience)


def test_synthetic_counts_and_lengths():
    reqs = load_workload(synth(), seed=0)
    assert len(reqs) == 200
    assert all(r.num_prompt_tokens == 100 for r in reqs)
    assert {r.num_output_tokens for r in reqs} == {5, 6, 7}
    t = [r.arrival_time_s for r in reqs]
    assert t == sorted(t) and t[0] > 0
    assert all(r.source_line is None for r in reqs)


def test_synthetic_duration_only_and_both():
    reqs = load_workload(synth(num_requests=None, duration_s=30.0), seed=4)
    assert all(r.arrival_time_s < 30.0 for r in reqs)
    assert 300 - 5 * 17.4 < len(reqs) < 300 + 5 * 17.4  # Poisson(300), 5 sd
    reqs = load_workload(synth(num_requests=50, duration_s=1000.0), seed=4)
    assert len(reqs) == 50
    reqs = load_workload(synth(num_requests=10_000, duration_s=2.0), seed=4)
    assert all(r.arrival_time_s < 2.0 for r in reqs) and len(reqs) < 100


def test_synthetic_lognormal_median_and_clip():
    reqs = load_workload(synth(num_requests=4000,
                               prompt_tokens={"dist": "lognormal", "median": 500, "sigma": 1.0,
                                              "min": 50, "max": 2000}), seed=9)
    x = np.array([r.num_prompt_tokens for r in reqs])
    assert x.min() >= 50 and x.max() <= 2000
    assert (x == 2000).any() and (x == 50).any()
    # P(X > 2000) = 1 - Phi(ln 4) = 0.0828; binomial sd over 4000 = 0.0044
    assert abs((x == 2000).mean() - 0.0828) < 0.022
    assert abs(np.median(x) - 500) < 40


def test_synthetic_empirical_values_and_from_trace(six):
    reqs = load_workload(synth(num_requests=3000,
                               prompt_tokens={"dist": "empirical", "values": [10, 20],
                                              "weights": [3, 1]}), seed=1)
    share10 = np.mean([r.num_prompt_tokens == 10 for r in reqs])
    assert abs(share10 - 0.75) < 5 * (0.75 * 0.25 / 3000) ** 0.5
    reqs = load_workload(synth(prompt_tokens={"dist": "empirical", "from_trace": six.name},
                               output_tokens={"dist": "empirical", "from_trace": str(six)}),
                         seed=1, base_dir=six.parent)
    assert {r.num_prompt_tokens for r in reqs} <= {10, 20, 30, 40, 50, 60}
    assert {r.num_output_tokens for r in reqs} <= {1, 2, 3, 4, 5, 6}
    assert len({r.num_output_tokens for r in reqs}) > 1
    reqs = load_workload(synth(prompt_tokens={"dist": "empirical", "from_trace": str(six),
                                              "column": "output"}), seed=1)
    assert {r.num_prompt_tokens for r in reqs} <= {1, 2, 3, 4, 5, 6}


def test_determinism_same_seed_identical_other_seed_differs():
    c = synth(arrival={"process": "gamma", "rate_rps": 3.0, "cv": 2.0},
              prompt_tokens={"dist": "lognormal", "median": 300, "sigma": 0.5},
              tenants={"a": 0.5, "b": 0.5}, patience={"dist": "lognormal", "median": 5,
                                                       "sigma": 1})
    a, b = load_workload(c, seed=123), load_workload(c, seed=123)
    assert a == b
    assert repr(a) == repr(b)
    assert load_workload(c, seed=124) != a


def test_negative_seed_rejected():
    with pytest.raises(WorkloadError, match="seed"):
        load_workload(synth(), seed=-1)


# ------------------------------------------------------------------ shipped traces

def _generator():
    return load_file_module(REPO / "traces" / "generate_default_trace.py",
                            "generate_default_trace")


def test_shipped_traces_are_reproducible(tmp_path):
    _generator().main(["--out-dir", str(tmp_path)])
    for name in ("default_conv_1k.csv", "tiny_mooncake_like.jsonl"):
        shipped = REPO / "traces" / name
        assert shipped.read_bytes() == (tmp_path / name).read_bytes(), name
        assert shipped.stat().st_size < 100_000


def test_default_trace_loads_by_name():
    reqs = load_workload(cfg(trace="default_conv_1k.csv"), seed=0)
    d = describe_workload(reqs)
    assert d["count"] == 1000
    assert d["prompt_tokens"]["max"] <= 8000 and d["output_tokens"]["max"] <= 1000
    assert abs(d["prompt_tokens"]["p50"] - 1020) < 100
    assert abs(d["output_tokens"]["p50"] - 129) < 15
    assert abs(d["mean_rate_rps"] - 5.5) < 0.6


def test_tiny_mooncake_shares_prefixes():
    reqs = load_workload(cfg(trace="traces/tiny_mooncake_like.jsonl"), seed=0)
    assert len(reqs) == 50
    firsts = Counter(r.prefix_hash_ids[0] for r in reqs)
    assert max(firsts.values()) > 1  # some requests share their first block
    times = [r.arrival_time_s for r in reqs]
    assert len(set(times)) < len(times)  # equal timestamps kept
    for r in reqs:
        assert len(r.prefix_hash_ids) == -(-r.num_prompt_tokens // 512)
