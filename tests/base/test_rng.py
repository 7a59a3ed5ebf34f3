"""Named random streams (simulator/base/rng.py): NumPy SeedSequence spawn children, independent of
each other, of the replica count and of Python's hash seed."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from simulator.base.rng import STREAMS, seed_sequence, stream


def _spawned(seed: int, *path: int) -> np.random.Generator:
    ss = np.random.SeedSequence(seed)
    for i in path:
        ss = ss.spawn(i + 1)[i]
    return np.random.default_rng(ss)


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**40])
def test_each_stream_is_the_spawned_child(seed):
    for i, name in enumerate(STREAMS):
        a = stream(seed, name).integers(0, 2**63, size=4)
        b = _spawned(seed, i).integers(0, 2**63, size=4)
        assert np.array_equal(a, b), name
    assert np.array_equal(stream(seed, "speculative", 3).random(3),
                          _spawned(seed, STREAMS.index("speculative"), 3).random(3))


def test_no_two_streams_coincide():
    """Over several seeds, every (seed, stream, sub-stream) starts with a different 64-bit
    word, and no two streams of one seed agree on any of their first 256 words: streams that
    shared a key (the router and the patience sampler did) would agree on all of them."""
    firsts = {}
    for seed in (0, 1, 2, 7, 99):
        draws = {}
        keys = [(n,) for n in STREAMS] + [("speculative", j) for j in range(4)]
        for key in keys:
            draws[key] = stream(seed, *key).integers(0, 2**63, size=256)
            first = int(draws[key][0])
            assert first not in firsts, (seed, key, firsts.get(first))
            firsts[first] = (seed, key)
        for a, b in itertools.combinations(keys, 2):
            assert not np.any(draws[a] == draws[b]), (seed, a, b)


def test_router_and_patience_are_distinct_streams():
    assert seed_sequence(0, "router").spawn_key != seed_sequence(0, "patience").spawn_key
    assert stream(3, "router").random() != stream(3, "patience").random()


def test_stream_indices_are_stable():
    """Indices are append-only: recorded outputs depend on them."""
    assert STREAMS[:9] == ("arrivals", "prompt_tokens", "output_tokens", "slices", "tenants",
                           "priorities", "patience", "router", "speculative")


@pytest.mark.parametrize("args, needle", [
    ((-1, "router"), "seed"), ((True, "router"), "seed"), ((1.5, "router"), "seed"),
    ((0, "nope"), "unknown random stream 'nope'"), ((0, "speculative", -1), "sub-stream"),
])
def test_bad_arguments(args, needle):
    with pytest.raises(ValueError, match=needle):
        stream(*args)
