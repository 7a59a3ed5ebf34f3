"""Pools behind a gateway that no request reaches: a pool whose match no request carries
reports zero requests and warns; a second pool without a match is refused."""
from __future__ import annotations

import warnings

import pytest
from helpers import make_scenario, spec

from simulator.runs.gateway import run_gateway
from simulator.workload import WorkloadWarning

CONST = {"source": "constant", "constant": {"step_s": 0.01}}


def test_a_pool_no_request_reaches_reports_zero_and_warns():
    sc = make_scenario({"perf": CONST, "pools": [
        {"name": "vip", "match": {"tenants": ["vip"]}}, {"name": "rest"}]})
    specs = [spec(i, 0.1 * i, 20, 3) for i in range(5)]
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = run_gateway(sc, specs=specs, write=False)   # was an IndexError
    assert res.summary["pools"]["vip"]["num_requests"] == 0
    assert res.summary["pools"]["rest"]["num_requests"] == 5 == res.summary["num_completed"]
    msgs = [str(w.message) for w in got if issubclass(w.category, WorkloadWarning)]
    assert any("pool vip matches vip, which no request of the workload carries" in m
               for m in msgs)


def test_a_second_pool_without_match_is_refused():
    sc = make_scenario({"perf": CONST, "pools": [{"name": "a"}, {"name": "b"}]})
    with pytest.raises(ValueError, match=r"pools: a, b have no match: .* b would never get one"):
        run_gateway(sc, specs=[spec(0, 0.0, 10, 2)], write=False)
