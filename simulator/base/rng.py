"""Named, independent random streams of one run, all derived from the scenario's seed.

Every subsystem that draws random numbers asks for its own stream by name::

    from simulator.base.rng import stream
    rng = stream(seed, "router")                  # numpy.random.Generator
    rng = stream(seed, "speculative", replica_idx)  # one stream per replica

Stream ``name`` (index ``i`` in :data:`STREAMS`) is the ``i``-th child that
``numpy.random.SeedSequence(seed).spawn(...)`` would return, i.e. the seed sequence with
``entropy=seed`` and ``spawn_key=(i,)``; a sub-stream (``stream(seed, name, j)``) is that
child's ``j``-th child (``spawn_key=(i, j)``). NumPy's ``SeedSequence`` hashes entropy and
spawn key together, so distinct keys give statistically independent streams (NumPy
documentation, "Parallel random number generation": spawned sequences "are guaranteed to be
independent"). Building the child directly from its spawn key gives exactly the generator that
spawning would, without creating the children before it, so one stream does not depend on how
many others (or how many replicas) a run has.

Stream indices are fixed forever: new streams are appended to :data:`STREAMS`, never inserted,
so adding a subsystem leaves every existing stream (and every recorded output) unchanged.
"""
from __future__ import annotations

import numpy as np

#: Stream names in spawn-index order (append only). What each one drives:
#: ``arrivals`` synthetic inter-arrival gaps; ``prompt_tokens`` / ``output_tokens`` synthetic
#: lengths; ``slices`` / ``tenants`` / ``priorities`` share-based labels; ``patience`` client
#: patience; ``router`` the ``random`` router; ``speculative`` accepted-draft draws (one
#: sub-stream per replica); ``servegen`` requests generated from ServeGen client data (one
#: sub-stream per client and window, :mod:`simulator.workload.servegen`); ``sessions``
#: synthetic multi-turn sessions (one sub-stream per quantity,
#: :mod:`simulator.workload.session_synth`).
STREAMS: tuple[str, ...] = ("arrivals", "prompt_tokens", "output_tokens", "slices", "tenants",
                            "priorities", "patience", "router", "speculative", "servegen",
                            "sessions")
_INDEX = {name: i for i, name in enumerate(STREAMS)}


def check_seed(seed) -> int:
    """``seed`` as a Python int.

    Raises
    ------
    ValueError
        If ``seed`` is a bool, not an integer, or negative (the message names ``seed``).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def seed_sequence(seed: int, name: str, *sub: int) -> np.random.SeedSequence:
    """The ``SeedSequence`` of stream ``name`` (and sub-stream ``sub``) of run ``seed``.

    Equal to ``SeedSequence(seed).spawn(i + 1)[i]`` for ``i = STREAMS.index(name)`` (and, per
    ``sub`` index ``j``, to a further ``.spawn(j + 1)[j]``).

    Raises
    ------
    ValueError
        On a bad seed, an unknown stream name, or a negative sub-stream index.
    """
    s = check_seed(seed)
    if name not in _INDEX:
        raise ValueError(f"unknown random stream {name!r}; streams: {', '.join(STREAMS)}")
    key = [_INDEX[name]]
    for j in sub:
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or j < 0:
            raise ValueError(f"sub-stream index must be a non-negative integer, got {j!r}")
        key.append(int(j))
    return np.random.SeedSequence(s, spawn_key=tuple(key))


def stream(seed: int, name: str, *sub: int) -> np.random.Generator:
    """A fresh ``numpy.random.Generator`` (PCG64) for stream ``name`` of run ``seed``.

    Parameters
    ----------
    seed : int
        The run's seed (>= 0).
    name : str
        One of :data:`STREAMS`.
    *sub : int
        Sub-stream indices (e.g. the replica index of the ``speculative`` stream).

    Raises
    ------
    ValueError
        See :func:`seed_sequence`.
    """
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name, *sub)))


__all__ = ["STREAMS", "check_seed", "seed_sequence", "stream"]
