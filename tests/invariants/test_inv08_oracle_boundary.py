"""Invariant 8 (DESIGN.md): routing and admission never read the true output length.

Two tests:

1. *Guarded reads.* Every request's spec is wrapped in a proxy, and the engine's
   ``ReqState`` replaced by a subclass, whose ``num_output_tokens`` raises while a guard is
   on. The guard is on during ``Router.route``, ``ContinuousScheduler.add_request``
   (admission: rejection reasons, queue limits) and ``ContinuousScheduler.schedule`` (who
   is admitted into the running batch). The engine's token accounting (``update``,
   fast-forward planning) reads the field outside the guard, which is counted to show the
   proxy is live. Run for every router, with admission limits and contiguous allocation
   (which reserves by the *declared* ``max_tokens``).
2. *Black box.* Routing happens at arrival, so changing request ``j``'s true output length
   must not change where requests ``0..j`` were routed nor whether they were admitted.

Non-vacuity: a router that peeks at the output length is caught by the guard; requests were
spread over several replicas; admission rejected some requests and admitted others; and the
black-box test's output-length change does change the run (later requests move).
"""
from __future__ import annotations

import dataclasses

import pytest
from helpers import load_specs, make_scenario, run_sim, synthetic_workload

from simulator.cluster.replica import ROUTERS, Router
from simulator.engine import loop as engine
from simulator.scheduling.continuous import ContinuousScheduler
from simulator.scheduling.state import ReqState

# instruments the scheduler by patching its classes: the pure-Python build only
pytestmark = pytest.mark.pure_core


class OracleRead(AssertionError):
    """The true output length was read where only declared data may be."""


class Guard:
    def __init__(self):
        self.depth = 0
        self.reads_outside = 0

    def read(self):
        if self.depth:
            raise OracleRead("num_output_tokens read during routing/admission/scheduling")
        self.reads_outside += 1


GUARD = Guard()


class GuardedSpec:
    """Proxy for a RequestSpec whose ``num_output_tokens`` is guarded."""

    def __init__(self, spec):
        object.__setattr__(self, "_spec", spec)

    def __getattr__(self, name):
        if name == "num_output_tokens":
            GUARD.read()
        return getattr(self._spec, name)


class GuardedReqState(ReqState):
    __slots__ = ("_nout",)

    @property
    def num_output_tokens(self):
        GUARD.read()
        return self._nout

    @num_output_tokens.setter
    def num_output_tokens(self, v):
        self._nout = v


def _guarded(fn):
    def wrapper(*a, **kw):
        GUARD.depth += 1
        try:
            return fn(*a, **kw)
        finally:
            GUARD.depth -= 1
    return wrapper


@pytest.fixture
def guard(monkeypatch):
    GUARD.depth = 0
    GUARD.reads_outside = 0
    monkeypatch.setattr(engine, "ReqState", GuardedReqState)
    monkeypatch.setattr(Router, "route", _guarded(Router.route))
    monkeypatch.setattr(ContinuousScheduler, "add_request",
                        _guarded(ContinuousScheduler.add_request))
    monkeypatch.setattr(ContinuousScheduler, "schedule", _guarded(ContinuousScheduler.schedule))
    return GUARD


def _scenario(router, **extra):
    ov = {"cluster": {"num_replicas": 3, "router": router},
          "kv_cache": {"num_gpu_blocks": 150},
          "scheduler": {"max_model_len": 1200,
                        "admission": {"max_waiting": 8, "max_queue_delay_s": 4.0}}}
    for k, v in extra.items():
        ov.setdefault(k, {}).update(v)
    if router == "prefix_affinity":  # routes by cached prefix: needs the prefix cache
        ov["kv_cache"]["enable_prefix_caching"] = True
    return make_scenario(ov, workload=synthetic_workload(250, 60, max_tokens=400))


@pytest.mark.parametrize("router", ROUTERS)
@pytest.mark.parametrize("allocation", ["paged", "contiguous"])
def test_routing_and_admission_never_read_output_length(router, allocation, guard):
    sc = _scenario(router, kv_cache={"allocation": allocation,
                                     "num_gpu_blocks": 150 if allocation == "paged" else 700})
    specs = [GuardedSpec(s) for s in load_specs(sc)]
    out = run_sim(sc, specs)
    df = out.requests()
    assert guard.reads_outside > 0  # the proxies are live: accounting reads them
    assert df.replica_id.nunique() == 3
    reasons = set(df.reject_reason)
    assert "queue_full" in reasons and (df.status == "completed").sum() > 50
    assert "prompt_too_long" in reasons or "kv_capacity" in reasons


def test_guard_catches_a_peeking_router(guard, monkeypatch):
    def peeking(self, spec, replicas):
        return spec.num_output_tokens % len(replicas)  # "route long outputs apart"

    monkeypatch.setattr(Router, "route", _guarded(peeking))
    sc = _scenario("round_robin")
    with pytest.raises(OracleRead):
        run_sim(sc, [GuardedSpec(s) for s in load_specs(sc)])


def test_guard_catches_peeking_admission(guard, monkeypatch):
    orig = ContinuousScheduler.never_fits_reason

    def peeking(self, r):
        if r.num_output_tokens > 500:
            return "too_long_output"
        return orig(self, r)

    monkeypatch.setattr(ContinuousScheduler, "never_fits_reason", peeking)
    sc = _scenario("least_outstanding")
    with pytest.raises(OracleRead):
        run_sim(sc, [GuardedSpec(s) for s in load_specs(sc)])


@pytest.mark.parametrize("router", ROUTERS)
def test_own_routing_independent_of_own_output_length(router):
    sc = _scenario(router)
    base = load_specs(sc)
    ref = run_sim(sc, base).requests().set_index("request_id")
    moved_later = 0
    for j in (30, 100, 170):
        for new_out in (1, 1500):
            specs = list(base)
            specs[j] = dataclasses.replace(base[j], num_output_tokens=new_out, max_tokens=None)
            df = run_sim(sc, specs).requests().set_index("request_id")
            upto = ref.index <= j
            assert (df.replica_id[upto] == ref.replica_id[upto]).all()
            qf_ref = ref.reject_reason[upto] == "queue_full"
            qf = df.reject_reason[upto] == "queue_full"
            assert (qf == qf_ref).all()
            moved_later += int((df.replica_id[~upto] != ref.replica_id[~upto]).sum())
    if router in ("least_outstanding", "least_kv"):  # state-dependent routers
        assert moved_later > 0  # the change was felt by later routing decisions
