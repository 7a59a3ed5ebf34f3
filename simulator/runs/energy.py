"""The run summary's ``energy`` block: a run's (or each pool's) set-up turned into the
power-model parameters (:class:`~simulator.metrics.energy.EnergyParams`) and the energy of
its steps and replica spans over the summary's window (:mod:`simulator.metrics.energy`).

A GPU without sourced power figures gets ``{"available": false, "reason": ...}``, never a
made-up figure. The replicas' spans are the run's own where it records them (an autoscaled
run's ``replica_spans``), else a fixed fleet held throughout.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.catalog.hardware import GPUSpec
from simulator.metrics.energy import (
    EnergyParams,
    EnergyProfile,
    energy_profile,
    energy_summary,
    unavailable_energy,
)
from simulator.metrics.fleet import fixed_fleet_spans
from simulator.perf.power import NoPowerModelError, StepWork, load_power_model
from simulator.scenario.config import Scenario

__all__ = ["energy_params", "gateway_energy", "run_energy"]


def energy_params(scenario: Scenario, setup, gpu: GPUSpec | None = None) -> EnergyParams:
    """The power-model parameters of ``scenario``'s replicas (``setup``: its
    :class:`~simulator.cluster.replica.ReplicaSetup`; ``gpu``: the GPU priced, default the
    set-up's).

    Raises
    ------
    NoPowerModelError
        The GPU has no sourced power model.
    """
    gpu = gpu or setup.gpu
    pm = load_power_model(gpu)
    hw = scenario.hardware
    idle = hw.idle_power_w if hw.idle_power_w is not None else pm.idle_w
    return EnergyParams(
        power=pm, work=StepWork.of(setup.model, setup.tensor_parallel_size,
                                   setup.weight_dtype, setup.kv_cache_dtype),
        peak_flops_per_s=gpu.flops_per_s(setup.weight_dtype),
        hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s,
        tensor_parallel_size=setup.tensor_parallel_size,
        pipeline_parallel_size=scenario.cluster.pipeline_parallel_size,
        limit_w=hw.power_cap_w, idle_w=idle, idle_stated=hw.idle_power_w is not None)


def _profile(scenario: Scenario, setup, sim, steps, window) -> tuple[EnergyProfile,
                                                                       EnergyParams]:
    """The energy profile of one run's replicas (a degrade fallback set with its own
    set-up, when it has one)."""
    params = energy_params(scenario, setup)
    # the run's replica spans: its own (autoscaled) or a fixed fleet of its replicas
    spans = sim.replica_spans or fixed_fleet_spans(len(sim.replicas))
    n_primary = sim.num_primary_replicas
    prof = energy_profile(steps, spans, window, params, replica_ids=(0, n_primary))
    fb = setup.extra.get("fallback")
    if n_primary < len(sim.replicas):
        if fb is None:
            raise NoPowerModelError("the degrade fallback replicas have no set-up to price")
        fparams = energy_params(scenario, fb)
        prof = prof + energy_profile(steps, spans, window, fparams,
                                     replica_ids=(n_primary, len(sim.replicas)))
    return prof, params


def _window(summary: Mapping[str, Any]) -> tuple[float, float] | None:
    t0, t1 = summary.get("window_start_s"), summary.get("window_end_s")
    return None if t0 is None or t1 is None else (float(t0), float(t1))


def run_energy(scenario: Scenario, setup, sim, steps, summary: Mapping[str, Any]
               ) -> dict[str, Any]:
    """The ``energy`` block of one run's summary (over the summary's window)."""
    win = _window(summary)
    if win is None:
        return unavailable_energy("the run has no measurement window")
    try:
        prof, params = _profile(scenario, setup, sim, steps, win)
    except NoPowerModelError as e:
        return unavailable_energy(str(e))
    return energy_summary({"": prof}, num_output_tokens=summary.get("num_output_tokens") or 0,
                          params_by_pool={"": params}, usd_per_kwh=scenario.cost.usd_per_kwh,
                          power_cap_w=scenario.hardware.power_cap_w)


def gateway_energy(scenario: Scenario, runs: Mapping[str, Any], summary: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """The ``energy`` block of a multi-pool run: every pool over the gateway's window, with
    ``by_pool`` (``runs``: pool name -> :class:`~simulator.runs.gateway.PoolRun`)."""
    win = _window(summary)
    if win is None:
        return unavailable_energy("the run has no measurement window")
    profs, params = {}, {}
    try:
        for name, r in runs.items():
            res = r.result
            profs[name], params[name] = _profile(r.scenario, res.setup, res.sim, res.steps, win)
    except NoPowerModelError as e:
        return unavailable_energy(f"pool '{name}': {e}")
    caps = {r.scenario.hardware.power_cap_w for r in runs.values()}
    out = energy_summary(profs, num_output_tokens=summary.get("num_output_tokens") or 0,
                         params_by_pool=params, power_cap_w=caps.pop() if len(caps) == 1 else None)
    # each pool's electricity price (its own cost section, else the scenario's)
    prices = {n: r.scenario.cost.usd_per_kwh for n, r in runs.items()}
    if all(v is not None for v in prices.values()):
        out["energy_cost_usd"] = sum(out["by_pool"][n]["energy_kwh"] * v if "by_pool" in out
                                     else out["energy_kwh"] * v for n, v in prices.items())
        out["usd_per_kwh"] = (next(iter(prices.values())) if len(set(prices.values())) == 1
                              else {n: v for n, v in prices.items()})
    return out
