"""One simulation as sweeps and plans use it: a resolved scenario + requests -> summary.

Besides the run summary, :func:`simulate_summary` returns a few extra figures the plan report
needs and the summary does not carry: the busy fraction of the replicas, the mean step shape,
how often the batch sits at ``max_num_seqs`` and, where the performance model offers
``bottleneck_shares``, the share of busy time in compute-bound operators, memory-bound
operators and overheads (:func:`step_bottleneck`).

The bottleneck is classified per step and weighted by step time, not on one averaged step:
a run mixes a few long prefill-heavy steps (compute-bound) with many short pure-decode steps
(memory-bound), and the average of the two shapes is neither. Steps are binned by prefill
tokens and decode sequences (powers of two); each bin is evaluated once, on its mean shape,
and weighted by the bin's total step time, so a 300k-step run costs a few dozen evaluations.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from simulator.cluster.setup import build_setup
from simulator.perf.step_shape import StepShape
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import validate_scenario

__all__ = ["BOTTLENECK_KEYS", "OVERHEAD_TERMS", "compact_summary", "mean_step_shape",
           "rescale_specs", "run_extras", "simulate_summary", "specs_rate", "step_bottleneck"]

#: Shares :meth:`RooflinePerfModel.bottleneck_shares` returns (they sum to 1).
BOTTLENECK_KEYS = ("compute_bound", "memory_bound", "overhead")

#: The ``op_times`` entries that make up the ``overhead`` share (what a model may have).
OVERHEAD_TERMS = ("all_reduce", "ep_comm", "engine_overhead", "cpu_overhead")


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


def _log2_bucket(x: np.ndarray) -> np.ndarray:
    """0 for 0, else ``1 + floor(log2(x))`` (1, 2-3, 4-7, ...)."""
    out = np.zeros(x.shape, dtype=np.int64)
    pos = x > 0
    out[pos] = 1 + np.floor(np.log2(x[pos])).astype(np.int64)
    return out


def step_bottleneck(steps, perf) -> dict[str, Any] | None:
    """Compute-bound / memory-bound / overhead shares of a run's busy time, step by step.

    Each step is classified on a representative :class:`~simulator.perf.step_shape.StepShape`
    of its own composition: its prefill tokens split evenly over ``num_prefill_seqs`` chunks
    starting at position 0, and its decode sequences attending ``kv_tokens_used`` minus the
    step's prefill tokens (at least one token each). The step's time is split by
    ``perf.bottleneck_shares(shape)`` and the splits are summed, weighted by ``step_time_s``.
    To stay fast on long runs, steps are binned by (prefill tokens, decode sequences) in
    powers of two and each bin is evaluated once on its mean shape, weighted by its total
    step time.

    Parameters
    ----------
    steps : pandas.DataFrame
        The run's step table (``step_time_s``, ``num_prefill_tokens``, ``num_prefill_seqs``,
        ``num_decode_seqs``; ``num_decode_tokens`` and ``kv_tokens_used`` when present).
    perf : object
        A performance model with ``bottleneck_shares(StepShape) -> dict``.

    Returns
    -------
    dict or None
        ``compute_bound``, ``memory_bound``, ``overhead``: shares of busy time (sum 1);
        ``prefill_steps`` and ``decode_steps``: for the steps with prefill work and the
        pure-decode steps, ``time_share`` (of busy time), ``step_share`` (of steps), the
        three shares within that group's time, ``mean_prefill_tokens`` and
        ``mean_decode_seqs``; ``overhead_terms``: the parts of ``overhead`` the model has
        (``all_reduce``, ``ep_comm``, ``engine_overhead``, ``cpu_overhead``: shares of busy
        time, only those with time; none at TP=1 for the all-reduce); ``busy_time_s``,
        ``num_steps``, ``num_bins``, ``method``. None without steps, without step time or
        when the model cannot classify a shape (``perf.source: constant`` has no operators:
        no ``bottleneck_shares``).
    """
    if steps is None or len(steps) == 0 or not hasattr(perf, "bottleneck_shares"):
        return None
    t, pf, nps, nd, ndt, ctx = _step_columns(steps)
    busy = float(t.sum())
    if not busy > 0:
        return None
    key = _log2_bucket(pf) * 64 + _log2_bucket(nd)
    order = np.argsort(key, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(key[order])) + 1)
    acc = {"all": np.zeros(3), "prefill": np.zeros(3), "decode": np.zeros(3)}
    terms: dict[str, float] = {}
    for idx in groups:
        w = float(t[idx].sum())
        if w <= 0:
            continue
        shape = _bin_shape(idx, pf, nps, nd, ndt, ctx)
        if shape.num_tokens <= 0:
            continue
        try:
            sh = perf.bottleneck_shares(shape)
            parts = _overhead_parts(perf, shape)
        except Exception:  # noqa: BLE001 - a perf model without the method's inputs
            return None
        v = np.array([float(sh.get(k, 0.0)) for k in BOTTLENECK_KEYS]) * w
        acc["all"] += v
        acc["prefill" if float(pf[idx].mean()) > 0 else "decode"] += v
        for k, f in parts.items():
            terms[k] = terms.get(k, 0.0) + f * w
    tot = float(acc["all"].sum())
    if not tot > 0:
        return None
    has_pf = pf > 0
    out: dict[str, Any] = {k: float(acc["all"][i]) / tot for i, k in enumerate(BOTTLENECK_KEYS)}
    out.update({"prefill_steps": _group_shares(has_pf, acc["prefill"], t, busy, pf, nd),
                "decode_steps": _group_shares(~has_pf, acc["decode"], t, busy, pf, nd),
                "overhead_terms": {k: terms[k] / tot for k in OVERHEAD_TERMS
                                   if terms.get(k, 0.0) > 0},
                "busy_time_s": busy, "num_steps": len(steps), "num_bins": len(groups),
                "method": "time-weighted per step (binned)"})
    return out


def _step_columns(steps) -> tuple[np.ndarray, ...]:
    """Per step, as floats (NaN read as 0 unless said): time, prefill tokens, prefill
    sequences, decode sequences, decode tokens (NaN kept; the decode sequences without the
    column) and the decode context (KV tokens used less prefill tokens, at least one per
    decode sequence; None without ``kv_tokens_used``)."""
    def col(name, default=0.0):
        if name in steps.columns:
            return np.nan_to_num(steps[name].to_numpy(dtype=float), nan=default)
        return np.full(len(steps), default, dtype=float)

    t = col("step_time_s")
    pf = col("num_prefill_tokens")
    nps = col("num_prefill_seqs")
    nd = col("num_decode_seqs")
    ndt = col("num_decode_tokens", np.nan) if "num_decode_tokens" in steps.columns else nd
    kvt = col("kv_tokens_used", np.nan) if "kv_tokens_used" in steps.columns else None
    ctx = np.maximum(kvt - pf, nd) if kvt is not None else None
    return t, pf, nps, nd, ndt, ctx


def _bin_shape(idx: np.ndarray, pf: np.ndarray, nps: np.ndarray, nd: np.ndarray,
               ndt: np.ndarray, ctx: np.ndarray | None) -> StepShape:
    """The mean shape of the steps ``idx`` of one bin: their mean prefill tokens split
    evenly over their mean number of chunks (each from position 0), their mean decode
    sequences with the mean tokens per sequence (speculative steps verify several) and the
    mean context (``ctx``: KV tokens used less the step's prefill; one token each without)."""
    q = float(pf[idx].mean())
    n_dec = round(float(nd[idx].mean()))
    if q > 0:
        n_chunks = max(1, round(float(nps[idx].mean())))
        qi = max(1, round(q / n_chunks))
        pq, ps = [qi] * n_chunks, [0] * n_chunks
    else:
        pq, ps = [], []
    q_per = 1
    if n_dec > 0:
        d_tok = ndt[idx]
        d_seq = nd[idx]
        ok = np.isfinite(d_tok) & (d_seq > 0)
        if ok.any():
            q_per = max(1, round(float(d_tok[ok].sum() / d_seq[ok].sum())))
    if ctx is not None and n_dec > 0:
        c = ctx[idx]
        c = c[np.isfinite(c)]
        ctx_total = round(float(c.mean())) if c.size else n_dec
    else:
        ctx_total = n_dec
    return StepShape(prefill_q=pq, prefill_start=ps, num_decode=n_dec,
                     decode_ctx_total=max(ctx_total, n_dec), decode_q_per_seq=q_per,
                     num_sampled=n_dec * q_per + len(pq))


def _group_shares(mask: np.ndarray, a: np.ndarray, t: np.ndarray, busy: float,
                  pf: np.ndarray, nd: np.ndarray) -> dict[str, Any]:
    """One group of steps (``mask``: those with prefill work, or the pure-decode ones): its
    share of busy time and of steps, its mean composition and the shares within its time of
    the bottleneck sums ``a``."""
    gt = float(t[mask].sum())
    s = float(a.sum())
    out = {"time_share": gt / busy, "step_share": float(mask.mean()),
           "mean_prefill_tokens": float(pf[mask].mean()) if mask.any() else None,
           "mean_decode_seqs": float(nd[mask].mean()) if mask.any() else None}
    out.update({k: (float(a[i]) / s if s > 0 else None) for i, k in enumerate(BOTTLENECK_KEYS)})
    return out


def _overhead_parts(perf, shape: StepShape) -> dict[str, float]:
    """Shares of ``shape``'s step time in each :data:`OVERHEAD_TERMS` entry the model has
    (from ``perf.op_times``; empty without it)."""
    if not hasattr(perf, "op_times"):
        return {}
    times = perf.op_times(shape)
    tot = float(sum(times.values()))
    if not tot > 0:
        return {}
    return {k: float(times[k]) / tot for k in OVERHEAD_TERMS if times.get(k, 0.0) > 0}


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
    out["bottleneck"] = step_bottleneck(steps, perf)
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
