"""The ``random`` router draws from its own named random stream (``router``), whatever
else in the run draws."""
from __future__ import annotations

import numpy as np
from helpers import ConstantStepPerf, specs_from_rows

from simulator.base.rng import stream
from simulator.cluster.setup import build_setup
from simulator.engine.loop import simulate
from simulator.scenario.config import validate_scenario

STEP_S = 0.01


def _scenario(**over):
    raw = {"name": "h", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm"},
           "perf": {"source": "roofline"},
           "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1},
                                      "num_requests": 1,
                                      "prompt_tokens": {"dist": "fixed", "value": 10},
                                      "output_tokens": {"dist": "fixed", "value": 10}}}}
    for k, v in over.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return validate_scenario(raw)


def _run(sc, specs):
    setup = build_setup(sc)
    setup.perf = ConstantStepPerf(STEP_S)
    return simulate(sc, setup, specs, check_transitions=True), setup


def test_random_router_draws_from_its_own_stream():
    """The random router's i-th choice is the i-th ``integers(3)`` draw of stream
    ``router`` (SeedSequence(seed) child 7), whatever the patience sampler does."""
    seed = 11
    sc = _scenario(cluster={"num_replicas": 3, "router": "random"}, seed=seed)
    specs = specs_from_rows([(float(i), 10, 2) for i in range(12)])
    sim, _ = _run(sc, specs)
    got = sim.requests().sort_values("request_id").replica_id.tolist()
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(8)[7])
    assert got == [int(rng.integers(3)) for _ in range(12)]
    assert got == [int(x) for x in stream(seed, "router").integers(3, size=12)]
