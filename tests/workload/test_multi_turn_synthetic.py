"""Synthetic multi-turn sessions (``workload.synthetic_sessions``): prompts that repeat the
history, prefix id chains, think times and arrivals, all derived by hand or checked against
the stated distributions with scipy.stats."""
from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
import yaml
from helpers import REPO_ROOT
from pydantic import ValidationError
from scipy import stats

from simulator.workload import WorkloadConfig, WorkloadError, load_workload
from simulator.workload.session_synth import generate_sessions


def sessions_cfg(**kw) -> dict:
    """A ``workload.synthetic_sessions`` block: fixed lengths (system 100, messages 50,
    answers 30), 3 turns, 2 s think time, one session; ``kw`` replaces keys."""
    base = {"arrival": {"process": "poisson", "rate_rps": 1.0}, "num_sessions": 1,
            "turns": {"dist": "fixed", "value": 3},
            "think_time": {"dist": "fixed", "value": 2.0},
            "system_prompt_tokens": 100,
            "message_tokens": {"dist": "fixed", "value": 50},
            "answer_tokens": {"dist": "fixed", "value": 30}}
    base.update(kw)
    return base


def load(seed: int = 0, **workload):
    return load_workload(WorkloadConfig.model_validate(workload), seed)


def test_three_turn_session_has_the_hand_derived_prompts_and_id_chains(session_contract):
    reqs = load(synthetic_sessions=sessions_cfg())
    # prompt_0 = 100 + 50; prompt_k = prompt_{k-1} + 30 + 50
    assert [r.num_prompt_tokens for r in reqs] == [150, 230, 310]
    assert [r.num_output_tokens for r in reqs] == [30, 30, 30]
    assert [r.session_id for r in reqs] == [0, 0, 0]
    assert [r.turn_index for r in reqs] == [0, 1, 2]
    assert {r.prefix_block_tokens for r in reqs} == {16}
    t0, t1, t2 = (r.prefix_hash_ids for r in reqs)
    # ids cover prompt + output: ceil(180/16) = 12, ceil(260/16) = 17, ceil(340/16) = 22
    assert (len(t0), len(t1), len(t2)) == (12, 17, 22)
    # turn 1 repeats turn 0's 180 tokens: floor(180/16) = 11 shared ids, 6 fresh
    assert t1[:11] == t0[:11] and not set(t1[11:]) & set(t0)
    # turn 2 repeats turn 1's 260 tokens: floor(260/16) = 16 shared, 6 fresh
    assert t2[:16] == t1[:16] and not set(t2[16:]) & (set(t0) | set(t1))
    assert len(set(t0) | set(t1) | set(t2)) == 12 + 6 + 6
    # think time 2 s: turn k arrives 2 s after turn k-1 (provisional), turn 0 has none
    a = [r.arrival_time_s for r in reqs]
    assert a[1] == a[0] + 2.0 and a[2] == a[1] + 2.0
    assert [r.think_time_s for r in reqs] == [0.0, 2.0, 2.0]
    assert session_contract(reqs, system_tokens=100) == 3


def test_every_session_shares_the_system_prompt_blocks_and_nothing_else():
    reqs = load(synthetic_sessions=sessions_cfg(num_sessions=2, turns={"dist": "fixed",
                                                                        "value": 1}))
    a, b = (r.prefix_hash_ids for r in reqs)
    # floor(100/16) = 6 full system blocks; block 6 mixes system and message tokens
    assert a[:6] == b[:6]
    assert not set(a[6:]) & set(b[6:])


def test_block_tokens_is_a_workload_key():
    reqs = load(synthetic_sessions=sessions_cfg(), session_block_tokens=64)
    # ceil(180/64) = 3, ceil(260/64) = 5, ceil(340/64) = 6 ids; turn 1 shares floor(180/64)=2
    assert [len(r.prefix_hash_ids) for r in reqs] == [3, 5, 6]
    assert reqs[1].prefix_hash_ids[:2] == reqs[0].prefix_hash_ids[:2]
    assert reqs[1].prefix_hash_ids[2] not in reqs[0].prefix_hash_ids
    assert {r.prefix_block_tokens for r in reqs} == {64}


@pytest.mark.parametrize("bound, kept", [
    (None, [150, 230, 310, 390, 470]),
    (340, [150, 230, 310]),   # contexts 180, 260, 340 fit; 420 does not
    (339, [150, 230]),
    (150, [150]),             # turn 0 (context 180) is always kept
])
def test_max_context_tokens_ends_a_session_before_the_first_turn_past_it(bound, kept):
    reqs = load(synthetic_sessions=sessions_cfg(turns={"dist": "fixed", "value": 5},
                                                max_context_tokens=bound))
    assert [r.num_prompt_tokens for r in reqs] == kept
    assert [r.turn_index for r in reqs] == list(range(len(kept)))


def test_a_later_turn_never_shares_the_arrival_of_the_turn_before_it():
    # think time 0 (an agent's tool loop): each turn one float step after the one before
    reqs = load(synthetic_sessions=sessions_cfg(think_time={"dist": "fixed", "value": 0.0}))
    a = [r.arrival_time_s for r in reqs]
    assert a[1] == math.nextafter(a[0], math.inf) and a[2] == math.nextafter(a[1], math.inf)
    assert [r.think_time_s for r in reqs] == [0.0, 0.0, 0.0]


def test_same_seed_gives_identical_specs_and_another_seed_differs():
    cfg = sessions_cfg(num_sessions=30, turns={"dist": "uniform", "low": 1, "high": 6},
                       think_time={"dist": "lognormal", "median": 10.0, "sigma": 1.0},
                       message_tokens={"dist": "lognormal", "median": 80, "sigma": 0.7},
                       answer_tokens={"dist": "uniform", "low": 10, "high": 300},
                       max_context_tokens=3000)
    a, b, c = load(7, synthetic_sessions=cfg), load(7, synthetic_sessions=cfg), \
        load(8, synthetic_sessions=cfg)
    assert a == b
    assert [r.num_prompt_tokens for r in a] != [r.num_prompt_tokens for r in c]


def test_random_sessions_keep_the_contract(session_contract):
    cfg = sessions_cfg(num_sessions=60, arrival={"process": "gamma", "rate_rps": 3.0, "cv": 3},
                       turns={"dist": "lognormal", "median": 4, "sigma": 0.8, "max": 20},
                       think_time={"dist": "exponential", "mean_s": 1.0},
                       system_prompt_tokens=333,
                       message_tokens={"dist": "lognormal", "median": 60, "sigma": 1.0},
                       answer_tokens={"dist": "lognormal", "median": 90, "sigma": 0.8},
                       max_context_tokens=4000)
    reqs = load(3, synthetic_sessions=cfg, session_block_tokens=32)
    assert session_contract(reqs, system_tokens=333) == len(reqs) > 100
    # a synthetic turn repeats the whole history: prompt_k = prompt_{k-1} + output_{k-1} + m
    by = {}
    for r in reqs:
        by.setdefault(r.session_id, []).append(r)
    for turns in by.values():
        for p, q in itertools.pairwise(turns):
            assert q.num_prompt_tokens > p.num_prompt_tokens + p.num_output_tokens
        assert turns[-1].num_prompt_tokens + turns[-1].num_output_tokens <= 4000 or \
            len(turns) == 1


def _think_samples(think: dict, n_sessions: int = 400) -> np.ndarray:
    cfg = WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg(
        num_sessions=n_sessions, turns={"dist": "fixed", "value": 6}, think_time=think)})
    cols = generate_sessions(cfg.synthetic_sessions, 11)
    later = cols.turn_index >= 1
    return cols.think_time_s[later]


@pytest.mark.parametrize("think, dist, args", [
    ({"dist": "exponential", "mean_s": 20.0}, "expon", (0, 20.0)),
    ({"dist": "lognormal", "median": 5.0, "sigma": 0.8}, "lognorm", (0.8, 0, 5.0)),
    ({"dist": "uniform", "low": 3.0, "high": 9.0}, "uniform", (3.0, 6.0)),
])
def test_think_times_follow_the_stated_distribution(think, dist, args):
    x = _think_samples(think)
    assert x.size == 400 * 5
    assert stats.kstest(x, dist, args=args).pvalue > 0.01
    # the test can fail: the same sample against a distribution twice as long is rejected
    wrong = list(args)
    wrong[-1] *= 2
    assert stats.kstest(x, dist, args=tuple(wrong)).pvalue < 1e-6


def test_open_loop_gaps_between_turns_are_the_think_times():
    cfg = WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg(
        num_sessions=50, turns={"dist": "fixed", "value": 4},
        think_time={"dist": "exponential", "mean_s": 3.0})})
    cols = generate_sessions(cfg.synthetic_sessions, 5)
    for s in range(50):
        rows = np.flatnonzero(cols.session_id == s)
        rows = rows[np.argsort(cols.turn_index[rows])]
        t, d = cols.arrival_s[rows], cols.think_time_s[rows]
        assert np.all(t[1:] == t[:-1] + d[1:])  # computed in that order: exact


def test_session_arrivals_are_poisson_and_turn_counts_uniform():
    cfg = WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg(
        num_sessions=2000, arrival={"process": "poisson", "rate_rps": 4.0},
        turns={"dist": "uniform", "low": 1, "high": 4})})
    cols = generate_sessions(cfg.synthetic_sessions, 2)
    first = cols.turn_index == 0
    starts = np.sort(cols.arrival_s[first])
    assert starts.size == 2000
    gaps = np.diff(np.r_[0.0, starts])
    assert stats.kstest(gaps, "expon", args=(0, 0.25)).pvalue > 0.01
    _, per = np.unique(cols.session_id, return_counts=True)
    counts = np.bincount(per, minlength=5)[1:]
    assert stats.chisquare(counts).pvalue > 0.01  # 1..4 turns equally likely


def test_duration_bounds_the_session_starts():
    cfg = WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg(
        num_sessions=None, duration_s=20.0, arrival={"process": "poisson", "rate_rps": 5.0},
        think_time={"dist": "fixed", "value": 30.0})})
    cols = generate_sessions(cfg.synthetic_sessions, 0)
    assert cols.arrival_s[cols.turn_index == 0].max() < 20.0
    assert cols.arrival_s.max() > 60.0  # later turns of a session are kept after it
    assert set(np.unique(cols.turn_index, return_counts=True)[1]) == {
        int((cols.turn_index == 0).sum())}


@pytest.mark.parametrize("change, message", [
    ({"turns": None}, "turns"),
    ({"think_time": {"dist": "uniform", "low": 3, "high": 1}},
     "ThinkTimeDist: uniform needs 0 <= low <= high"),
    ({"think_time": {"dist": "fixed", "value": -1}}, "fixed value must be >= 0 s"),
    ({"think_time": {"dist": "exponential", "mean_s": 2, "value": 1}},
     "'value' is not used by dist='exponential'"),
    ({"turns": {"dist": "empirical", "from_trace": "x.csv"}}, "turns cannot be drawn"),
    ({"num_sessions": None}, "give num_sessions, duration_s, or both"),
    ({"max_context_tokens": 100}, "max_context_tokens=100 leaves no room"),
    ({"answer_tokens": {"dist": "fixed", "value": 0}}, "fixed value must be >= 1 token"),
    ({"bogus": 1}, "Extra inputs"),
])
def test_bad_session_configs_name_the_key(change, message):
    cfg = sessions_cfg(**change)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    with pytest.raises(ValidationError, match=message):
        WorkloadConfig.model_validate({"synthetic_sessions": cfg})


@pytest.mark.parametrize("extra, message", [
    ({"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1.0}, "num_requests": 2,
                    "prompt_tokens": {"dist": "fixed", "value": 5},
                    "output_tokens": {"dist": "fixed", "value": 5}}},
     (r"give exactly one of 'trace' and 'synthetic' \(or 'synthetic_sessions'\); got "
      "synthetic and synthetic_sessions")),
    ({"trace": "x.csv"}, "got trace and synthetic_sessions"),
    ({"shared_prefixes": [{"name": "sys", "num_tokens": 8}]},
     "give synthetic_sessions.system_prompt_tokens"),
    ({"columns": {"session_id": "s"}}, "'columns' applies to a trace"),
    ({"session_arrival": "half"}, "session_arrival"),
    ({"session_block_tokens": 0}, "session_block_tokens"),
])
def test_session_workload_options_that_do_not_fit_are_refused(extra, message):
    with pytest.raises(ValidationError, match=message):
        WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg(), **extra})


def test_session_arrival_defaults_to_closed():
    cfg = WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg()})
    assert cfg.session_arrival == "closed" and cfg.session_block_tokens == 16
    assert WorkloadConfig.model_validate({"synthetic_sessions": sessions_cfg(),
                                          "session_arrival": "open"}).session_arrival == "open"


def test_a_prompt_beyond_the_token_range_is_refused_without_a_context_bound():
    cfg = sessions_cfg(turns={"dist": "fixed", "value": 3},
                       message_tokens={"dist": "fixed", "value": 2 ** 30})
    # turn 1's prompt: 100 + 2**30 + 30 + 2**30 = 2**31 + 130 tokens
    with pytest.raises(WorkloadError, match=r"turn 1 of session 0 has a prompt of "
                                            r"2,147,483,778 tokens.*max_context_tokens"):
        load(synthetic_sessions=cfg)


def test_the_documented_example_loads_and_keeps_the_contract(session_contract):
    """The ``workload:`` example of traces/README.md's synthetic sessions section."""
    text = (REPO_ROOT / "traces" / "README.md").read_text()
    section = text.split("## Synthetic sessions (`workload.synthetic_sessions`")[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1)
    cfg = WorkloadConfig.model_validate(yaml.safe_load(block)["workload"])
    assert cfg.session_arrival == "closed" and cfg.synthetic_sessions.num_sessions == 200
    reqs = load_workload(cfg, 0)
    assert session_contract(reqs, system_tokens=1200) == len(reqs) > 200
    assert all(r.num_prompt_tokens + r.num_output_tokens <= 32768 or r.turn_index == 0
               for r in reqs)
