"""One simulation as sweeps and plans use it: a resolved scenario + requests -> summary.

Besides the run summary, :func:`simulate_summary` returns a few extra figures the plan report
needs and the summary does not carry: the busy fraction of the replicas, the mean step shape,
how often the batch sits at ``max_num_seqs`` and, where the performance model offers
``bottleneck_shares``, the share of busy time in compute-bound operators, memory-bound
operators and overheads (:func:`simulator.metrics.step_bottleneck.step_bottleneck`, each
step classified on its own shape and weighted by its duration; the run summary's ``bounds``
section carries it, :func:`run_extras` reads it from there).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from simulator.cluster.setup import build_setup
from simulator.metrics.step_bottleneck import BOTTLENECK_KEYS, OVERHEAD_TERMS, step_bottleneck
from simulator.perf.step_shape import StepShape
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario

__all__ = ["BOTTLENECK_KEYS", "OVERHEAD_TERMS", "compact_summary", "mean_step_shape",
           "rescale_specs", "run_extras", "simulate_summary", "specs_rate", "step_bottleneck"]

def rescale_specs(specs: Sequence, scale: float, limit: int | None = None) -> list:
    """The first ``limit`` requests with arrival times divided by ``scale`` (rate x scale).

    Same arithmetic as the workload loader's ``rate_scale``: ``t' = t / scale``.
    """
    sub = specs[:limit] if limit is not None else specs
    if scale == 1.0:
        return list(sub)
    return [replace(s, arrival_time_s=s.arrival_time_s / scale) for s in sub]


def specs_rate(specs: Sequence) -> float:
    """Mean arrival rate (requests/s) of a request list: ``(n - 1) / (t_last - t_first)``.

    Raises
    ------
    ValueError
        With fewer than 2 requests or all arrivals at the same instant.
    """
    n = len(specs)
    if n < 2:
        raise ValueError(f"need at least 2 requests to measure an arrival rate, got {n}")
    span = specs[-1].arrival_time_s - specs[0].arrival_time_s
    if not span > 0:
        raise ValueError("all requests arrive at the same instant: no arrival rate")
    return (n - 1) / span


def mean_step_shape(steps, requests=None):
    """A representative step: the mean batch composition of a run's steps.

    The prefill tokens of the mean step form one chunk starting at position 0; decode
    sequences attend the mean context per running sequence (``kv_tokens_used /
    batch_size`` averaged over steps, else mean prompt + half the mean output).

    Returns
    -------
    StepShape or None
        ``None`` when the run has no steps.
    """
    if steps is None or len(steps) == 0:
        return None

    def col(name):
        return steps[name].to_numpy(dtype=float) if name in steps.columns else None

    pf = col("num_prefill_tokens")
    nd = col("num_decode_seqs")
    bs = col("batch_size")
    kvt = col("kv_tokens_used")
    mean_pf = float(np.nanmean(pf)) if pf is not None else 0.0
    mean_dec = float(np.nanmean(nd)) if nd is not None else 0.0
    ctx = None
    if kvt is not None and bs is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            per = kvt / bs
        per = per[np.isfinite(per)]
        if per.size:
            ctx = float(per.mean())
    if ctx is None and requests is not None and len(requests):
        ctx = float(requests["num_prompt_tokens"].mean()
                    + 0.5 * requests["num_output_tokens"].mean())
    ndec = round(mean_dec)
    q = round(mean_pf)
    return StepShape(prefill_q=[q] if q > 0 else [], prefill_start=[0] if q > 0 else [],
                     num_decode=ndec, decode_ctx_total=round(ndec * (ctx or 0.0)),
                     num_sampled=ndec + (1 if q > 0 else 0))


def run_extras(res) -> dict[str, Any]:
    """Extra figures of a :class:`~simulator.runs.scenario.RunResult` (see the module docstring)."""
    steps, summary = res.steps, res.summary
    n_rep = max(1, int(res.scenario.cluster.num_replicas))
    dur = summary.get("duration_s") or 0.0
    busy = float(steps["step_time_s"].sum()) if len(steps) else 0.0
    out: dict[str, Any] = {
        "busy_fraction": busy / (dur * n_rep) if dur > 0 else None,
        "mean_prefill_tokens_per_step": (float(steps["num_prefill_tokens"].mean())
                                         if len(steps) else None),
        "mean_decode_seqs_per_step": (float(steps["num_decode_seqs"].mean())
                                      if len(steps) else None),
    }
    ttft = (summary.get("ttft_s") or {}).get("mean")
    qd = (summary.get("queue_delay_s") or {}).get("mean")
    out["queue_share_of_ttft"] = (qd / ttft) if (ttft and qd is not None and ttft > 0) else None
    reasons = summary.get("reject_reasons") or {}
    out["kv_capacity_rejections"] = int(reasons.get("kv_capacity", 0))
    sch = res.scenario.scheduler
    out["scheduler"] = {"max_num_seqs": getattr(sch, "max_num_seqs", None),
                        "max_num_batched_tokens": getattr(sch, "max_num_batched_tokens", None),
                        "enable_chunked_prefill": getattr(sch, "enable_chunked_prefill", None)}
    cap = out["scheduler"]["max_num_seqs"]
    out["batch_at_cap_time_share"] = (
        float(steps.loc[steps["batch_size"] >= cap, "step_time_s"].sum()) / busy
        if (cap and busy > 0 and "batch_size" in steps.columns) else None)
    shape = mean_step_shape(steps, res.requests)
    perf = res.setup.perf
    bounds = summary.get("bounds") or {}
    out["bottleneck"] = (bounds["step_bottleneck"] if "step_bottleneck" in bounds
                         else step_bottleneck(steps, perf))  # the run's own, computed once
    if shape is not None:
        out["mean_step_shape"] = {
            "prefill_tokens": int(sum(shape.prefill_q)), "num_decode": shape.num_decode,
            "decode_ctx_total": shape.decode_ctx_total}
    return out


def simulate_summary(scenario: Mapping[str, Any], specs: Sequence, *, setup=None,
                     setup_factory: Callable | None = None,
                     stop_when: Callable | None = None) -> dict[str, Any]:
    """Simulate a resolved scenario on ``specs``; returns ``{"summary", "extra"}``.

    Parameters
    ----------
    scenario : mapping
        A resolved scenario (validated here again).
    specs : sequence of RequestSpec
        The requests to replay (the scenario's ``workload`` section is not read).
    setup : ReplicaSetup, optional
        Reuse this setup (it does not depend on the workload or the replica count).
    setup_factory : callable, optional
        ``setup_factory(Scenario) -> ReplicaSetup`` instead of
        :func:`simulator.cluster.setup.build_setup` (tests inject a constant-time model).
    stop_when : callable, optional
        ``stop_when(request, now_s) -> bool`` after every finish: True ends the run
        (:func:`simulator.engine.loop.simulate`; the planner's :class:`~.early_stop.ProbeStop`).
    """
    sc = validate_scenario(dict(scenario))
    if setup is None:
        setup = setup_factory(sc) if setup_factory is not None else build_setup(sc)
    res = run_scenario(sc, None, specs=list(specs), write=False, setup=setup,
                       stop_when=stop_when)
    return {"summary": res.summary, "extra": run_extras(res)}


def compact_summary(s: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of a run summary a plan keeps for a confirmation (JSON-safe subset)."""
    keep = ("num_requests", "num_completed", "num_rejected", "num_cancelled",
            "num_preemptions", "slo_attainment", "ttft_s", "tpot_s", "e2e_latency_s",
            "queue_delay_s", "output_token_throughput_tps", "mean_batch_size",
            "mean_kv_cache_usage", "max_kv_cache_usage", "num_gpu_blocks", "kv_cache_tokens",
            "perf_model", "reject_reasons", "duration_s", "num_input_tokens",
            "num_output_tokens", "cost_usd", "price_per_1m_input_tokens_usd",
            "price_per_1m_output_tokens_usd", "workload_synthesised")
    out = {k: s.get(k) for k in keep}
    # what bounds the run, without its busy-time detail (the run's extras carry that)
    out["bounds"] = ({k: v for k, v in s["bounds"].items() if k != "step_bottleneck"}
                     if s.get("bounds") else None)
    pc = s.get("phase_cost") or {}
    out["phase_cost"] = {k: pc.get(k) for k in (
        "prefill_share", "prefill_gpu_s", "decode_gpu_s", "idle_gpu_s", "idle_share",
        "phase_split_method", "mixed_time_share")} if pc else None
    out["degrade"] = [{k: d.get(k) for k in (
        "name", "action", "num_episodes", "active_s", "num_requests",
        "num_output_tokens_not_generated")} for d in s.get("degrade") or []] or None
    out["by_slice"] = {k: {"ttft_s": v.get("ttft_s"), "tpot_s": v.get("tpot_s"),
                           "slo_attainment": v.get("slo_attainment"),
                           "num_requests": v.get("num_requests")}
                       for k, v in (s.get("by_slice") or {}).items()}
    return out
