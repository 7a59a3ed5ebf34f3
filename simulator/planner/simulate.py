"""One simulation as sweeps and plans use it: a resolved scenario + requests -> summary.

Besides the run summary, :func:`simulate_summary` returns a few extra figures the plan report
needs and the summary does not carry: the busy fraction of the replicas, the mean step shape
and, where the performance model offers ``bottleneck_shares``, the share of step time in
compute-bound operators, memory-bound operators and overheads for that shape.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["mean_step_shape", "rescale_specs", "run_extras", "simulate_summary", "specs_rate"]


def rescale_specs(specs: Sequence, scale: float, limit: int | None = None) -> list:
    """The first ``limit`` requests with arrival times divided by ``scale`` (rate x scale).

    Same arithmetic as the workload loader's ``rate_scale``: ``t' = t / scale``.
    """
    from dataclasses import replace
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
    from ..perf.roofline import StepShape
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
    """Extra figures of a :class:`~simulator.run.RunResult` (see the module docstring)."""
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
    shape = mean_step_shape(steps, res.requests)
    perf = res.setup.perf
    if shape is not None and hasattr(perf, "bottleneck_shares") and shape.num_tokens > 0:
        try:
            out["bottleneck"] = {k: float(v) for k, v in perf.bottleneck_shares(shape).items()}
        except Exception:  # noqa: BLE001 - a perf model without the method's inputs
            out["bottleneck"] = None
        out["mean_step_shape"] = {
            "prefill_tokens": int(sum(shape.prefill_q)), "num_decode": shape.num_decode,
            "decode_ctx_total": shape.decode_ctx_total}
    else:
        out["bottleneck"] = None
    return out


def simulate_summary(scenario: Mapping[str, Any], specs: Sequence, *, setup=None,
                     setup_factory: Callable | None = None) -> dict[str, Any]:
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
        :func:`simulator.engine.build_setup` (tests inject a constant-time model).
    """
    from ..config import validate_scenario
    from ..engine import build_setup
    from ..run import run_scenario
    sc = validate_scenario(dict(scenario))
    if setup is None:
        setup = setup_factory(sc) if setup_factory is not None else build_setup(sc)
    res = run_scenario(sc, None, specs=list(specs), write=False, setup=setup)
    return {"summary": res.summary, "extra": run_extras(res)}
