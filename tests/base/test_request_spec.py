"""request_spec (simulator/base/request.py), the trace readers' positional constructor, makes
the object RequestSpec(...) makes."""
from __future__ import annotations

import dataclasses
import inspect
import pickle

import numpy as np
import pytest

from simulator.base.request import RequestSpec, request_spec


def test_its_parameters_are_the_fields_in_order():
    names = [f.name for f in dataclasses.fields(RequestSpec)]
    assert list(inspect.signature(request_spec).parameters) == names


@pytest.mark.parametrize("seed", range(5))
def test_it_equals_the_dataclass_constructor(seed):
    rng = np.random.default_rng(seed)
    for i in range(50):
        kw = {"request_id": int(rng.integers(1 << 40)), "arrival_time_s": float(rng.random()),
              "num_prompt_tokens": int(rng.integers(1, 9999)),
              "num_output_tokens": int(rng.integers(1, 9999)),
              "max_tokens": None if i % 3 else int(rng.integers(1, 99)),
              "tenant": f"t{i % 4}", "priority": int(rng.integers(-3, 3)), "slice": f"s{i}",
              "cancel_after_s": None if i % 2 else float(rng.random()),
              "prefix_hash_ids": None if i % 5 else tuple(range(i)),
              "prefix_block_tokens": 16 * (1 + i % 4), "source_line": None if i % 7 else i,
              "n": 1 + i % 3, "use_beam_search": bool(i % 2),
              "num_kv_transferred_tokens": i % 11,
              "handoff_token_time_s": None if i % 2 else 0.25,
              "cancel_when_streaming": bool(i % 3), "session_id": None if i % 2 else i,
              "turn_index": i % 5, "think_time_s": float(i) / 7}
        want = RequestSpec(**kw)
        got = request_spec(*kw.values())
        assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
        assert pickle.loads(pickle.dumps(got)) == want
        assert dataclasses.replace(got, n=9) == dataclasses.replace(want, n=9)
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.n = 2  # type: ignore[misc]
