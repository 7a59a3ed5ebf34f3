"""The ``random`` router draws from its own named random stream (``router``), whatever
else in the run draws."""
from __future__ import annotations

import numpy as np
from helpers import run_constant_step, small_scenario, specs_from_rows

from simulator.base.rng import stream


def test_random_router_draws_from_its_own_stream():
    """The random router's i-th choice is the i-th ``integers(3)`` draw of stream
    ``router`` (SeedSequence(seed) child 7), whatever the patience sampler does."""
    seed = 11
    sc = small_scenario(cluster={"num_replicas": 3, "router": "random"}, seed=seed)
    specs = specs_from_rows([(float(i), 10, 2) for i in range(12)])
    sim, _ = run_constant_step(sc, specs)
    got = sim.requests().sort_values("request_id").replica_id.tolist()
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(8)[7])
    assert got == [int(rng.integers(3)) for _ in range(12)]
    assert got == [int(x) for x in stream(seed, "router").integers(3, size=12)]
