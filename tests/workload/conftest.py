"""Shared helpers for the workload tests."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import shared_path


@pytest.fixture
def shared_file():
    """``shared_file("traces/x.csv")`` -> the path; skips when the shared folder is absent,
    fails when ``$SERVESIM_SHARED`` is set but lacks the file (``helpers.shared_path``)."""
    return shared_path


@pytest.fixture
def write(tmp_path):
    """``write("x.csv", text, crlf=False)`` writes bytes exactly and returns the path."""

    def _write(name: str, text: str, crlf: bool = False) -> Path:
        p = tmp_path / name
        data = text.replace("\n", "\r\n") if crlf else text
        p.write_bytes(data.encode("utf-8"))
        return p

    return _write


def check_session_contract(specs, system_tokens: int = 0) -> int:
    """Assert the multi-turn contract of ``simulator.workload.sessions`` on a request list,
    from its definition (nothing of the implementation): requests sorted by arrival with
    ids 0..N-1; a session's turns 0..K-1 in arrival order, strictly later each; each turn's
    ``ceil((prompt + output) / pbt)`` ids; turn k's first ``floor(min(prompt + output of
    k-1, prompt of k) / pbt)`` ids are turn k-1's, every later id never seen in any other
    request before; the first ``floor(min(system, prompt) / pbt)`` ids of every session's
    turn 0 are the same. Returns the number of session turns checked."""
    assert [s.request_id for s in specs] == list(range(len(specs)))
    times = [s.arrival_time_s for s in specs]
    assert times == sorted(times)
    sessions: dict[int, list] = {}
    seen: set[int] = set()
    for s in specs:
        if s.session_id is None:
            seen.update(s.prefix_hash_ids or ())
        else:
            sessions.setdefault(s.session_id, []).append(s)
    system_ids = None
    for sid in sorted(sessions):
        turns = sessions[sid]  # in arrival (list) order
        assert [t.turn_index for t in turns] == list(range(len(turns))), sid
        prev = None
        for t in turns:
            pbt = t.prefix_block_tokens
            ids = t.prefix_hash_ids
            assert len(ids) == -(-(t.num_prompt_tokens + t.num_output_tokens) // pbt)
            if prev is None:
                shared = min(system_tokens, t.num_prompt_tokens) // pbt
                if system_ids is None:  # the first session: its system ids are new
                    system_ids = ids[:shared]
                    assert not set(system_ids) & seen
                assert ids[:shared] == system_ids[:shared]
            else:
                assert t.arrival_time_s > prev.arrival_time_s
                shared = min(prev.num_prompt_tokens + prev.num_output_tokens,
                             t.num_prompt_tokens) // pbt
                assert ids[:shared] == prev.prefix_hash_ids[:shared]
            fresh = ids[shared:]
            assert len(set(fresh)) == len(fresh) and not set(fresh) & seen, (sid, t.turn_index)
            seen.update(ids)
            prev = t
    return sum(len(v) for v in sessions.values())


@pytest.fixture
def session_contract():
    """``session_contract(specs, system_tokens=0)``: :func:`check_session_contract`."""
    return check_session_contract
