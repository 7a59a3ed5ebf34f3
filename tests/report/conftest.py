"""Shared fixtures for the report tests."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def make_tables(n_steps: int = 200, n_replicas: int = 2, n_requests: int = 60, seed: int = 0):
    """Small synthetic request and step tables with the engine's columns."""
    rng = np.random.default_rng(seed)
    rep = np.arange(n_steps) % n_replicas
    dt = rng.uniform(0.01, 0.05, n_steps)
    start = np.zeros(n_steps)
    for r in range(n_replicas):
        m = rep == r
        start[m] = np.cumsum(dt[m]) - dt[m]
    steps = pd.DataFrame({
        "replica_id": rep, "step_index": np.arange(n_steps) // n_replicas,
        "start_time_s": start, "step_time_s": dt, "end_time_s": start + dt,
        "batch_size": rng.integers(1, 32, n_steps), "num_prefill_tokens": 0,
        "num_decode_tokens": 0, "num_prefill_seqs": 0, "num_decode_seqs": 0,
        "num_waiting": rng.integers(0, 8, n_steps), "kv_blocks_used": rng.integers(0, 100, n_steps),
        "num_gpu_blocks": 100, "num_preempted": 0,
    })
    arrival = np.sort(rng.uniform(0, max(start.max(), 1e-3), n_requests))
    ttft = rng.exponential(0.2, n_requests)
    status = np.where(np.arange(n_requests) % 10 == 9, "rejected", "completed")
    done = status == "completed"
    first_token = np.where(done, arrival + ttft, np.nan)
    emitted = np.where(done, rng.integers(1, 50, n_requests), 0)
    requests = pd.DataFrame({
        "request_id": np.arange(n_requests), "replica_id": np.where(done, 0, -1),
        "tenant": "default", "slice": np.where(np.arange(n_requests) % 2, "chat", "code"),
        "priority": 0, "arrival_time_s": arrival,
        "num_prompt_tokens": rng.integers(10, 500, n_requests), "num_output_tokens": emitted,
        "num_emitted_tokens": emitted, "num_cached_prompt_tokens": 0, "status": status,
        "reject_reason": np.where(done, "", "kv_capacity"),
        "first_scheduled_time_s": np.where(done, arrival + ttft / 2, np.nan),
        "first_token_time_s": first_token,
        "finish_time_s": np.where(done, first_token + 0.02 * emitted, np.nan),
        "num_preemptions": 0,
    })
    return requests, steps


@pytest.fixture
def tables():
    """The factory :func:`make_tables` (keyword arguments: sizes and seed)."""
    return make_tables


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium session (tests/browser.py) for the page tests; skips without a
    Chromium binary, fails when one is found but does not start."""
    from browser import Browser, BrowserError, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium found: install the Debian package `chromium` (.ci/run tries "
                    "apt-get) or set SERVESIM_CHROMIUM=/path/to/chromium")
    try:
        b = Browser(binary)
    except (BrowserError, OSError) as e:
        pytest.fail(f"Chromium at {binary} did not start: {e}", pytrace=False)
    yield b
    b.close()
