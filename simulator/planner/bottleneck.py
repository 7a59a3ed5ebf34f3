"""Where a recommended configuration spends its step time, and what that suggests.

:func:`bottleneck_note` reads the confirmation run of a plan row (its per-step bottleneck
shares from :func:`simulator.metrics.step_bottleneck.step_bottleneck`, its summary figures and
the run's verdict, :func:`simulator.metrics.bounds.run_bounds`) and writes the sentences of the
plan report's "Bottleneck" section; each advice sentence follows
one of the ``ADVICE_*`` thresholds (shares of busy time or of KV capacity worth acting on: the
report's reading conventions, stated with each sentence).
"""
from __future__ import annotations

from typing import Any

from simulator.metrics.bounds import KV_FULL_USAGE

__all__ = ["bottleneck_note"]

#: Thresholds of the bottleneck advice (fractions of busy time or of KV capacity).
ADVICE_COMPUTE_PREFILL = 0.20   # compute-bound prefill time worth acting on
ADVICE_MEMORY_DECODE = 0.40     # memory-bound decode time worth acting on
ADVICE_LOW_KV = 0.50            # mean KV use below which KV is not the limit
ADVICE_BATCH_AT_CAP = 0.10      # busy time with the batch at max_num_seqs worth acting on
ADVICE_OVERHEAD = 0.25          # per-step overheads worth acting on
ADVICE_FULL_KV = KV_FULL_USAGE  # peak KV use that counts as full (the run verdict's)
ADVICE_QUEUE = 0.50             # queueing share of the mean TTFT worth acting on


#: How the summary and the advice name each part of the overhead share (the ``op_times``
#: entries of :data:`simulator.metrics.step_bottleneck.OVERHEAD_TERMS`).
OVERHEAD_NAMES = {"all_reduce": "TP all-reduce", "ep_comm": "EP all-to-all",
                  "engine_overhead": "engine CPU and sync", "cpu_overhead": "engine CPU"}


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _overhead_names(b: dict) -> list[str] | None:
    """The overhead parts the model has (largest first), or None when the shares do not say
    (a cached entry from before they were recorded)."""
    terms = b.get("overhead_terms")
    if terms is None:
        return None
    return [OVERHEAD_NAMES.get(k, k) for k, _v in sorted(terms.items(), key=lambda kv: -kv[1])]


def _overhead_advice(b: dict) -> str:
    """The overhead sentence, naming only the costs the model has."""
    names = _overhead_names(b)
    head = f"per-step overheads are {b['overhead']:.0%} of busy time"
    if names is None:
        return head + " (which ones is missing from this cached result: rerun with --no-cache)"
    terms = b.get("overhead_terms") or {}
    fixes = []
    if "engine_overhead" in terms or "cpu_overhead" in terms:
        fixes.append("larger batches amortise the engine's per-step CPU time")
    if "all_reduce" in terms:
        fixes.append("a lower TP degree removes all-reduces")
    if "ep_comm" in terms:
        fixes.append("a smaller EP group shrinks the all-to-all")
    return f"{head} ({', '.join(names)})" + (": " + ", and ".join(fixes) if fixes else "")


def _bottleneck_advice(b: dict, note: dict, sched: dict) -> list[str]:
    """Advice sentences that follow the numbers (see the ``ADVICE_*`` thresholds)."""
    adv: list[str] = []
    pre = b.get("prefill_steps") or {}
    dec = b.get("decode_steps") or {}
    p_time, p_comp = pre.get("time_share") or 0.0, pre.get("compute_bound") or 0.0
    d_time, d_mem = dec.get("time_share") or 0.0, dec.get("memory_bound") or 0.0
    pre_comp = p_time * p_comp
    dec_mem = d_time * d_mem
    preempt = note.get("num_preemptions") or 0
    rejects = note.get("kv_capacity_rejections") or 0
    kv_peak, kv_mean = note.get("max_kv_cache_usage"), note.get("mean_kv_cache_usage")
    at_cap = note.get("batch_at_cap_time_share")
    seqs, mnbt = sched.get("max_num_seqs"), sched.get("max_num_batched_tokens")
    chunked = sched.get("enable_chunked_prefill")
    if preempt or rejects or (kv_peak is not None and kv_peak >= ADVICE_FULL_KV):
        adv.append(f"KV capacity binds ({preempt} preemption(s), {rejects} KV-capacity "
                   f"rejection(s), peak KV use {_pct(kv_peak)}): give the KV cache more "
                   "memory (higher gpu_memory_utilization, fp8 KV cache, a GPU with more HBM "
                   "or a higher TP degree) before raising max_num_seqs")
    if pre_comp >= ADVICE_COMPUTE_PREFILL:
        txt = (f"compute-bound prefill work is {pre_comp:.0%} of busy time: each such step "
               "delays every decode batched with it")
        if chunked is False:
            txt += ("; enable chunked prefill so long prompts are split across steps")
        else:
            txt += (f"; a smaller max_num_batched_tokens (now {mnbt}) splits prompts into "
                    "shorter chunks and evens out TPOT" if mnbt else
                    "; smaller prefill chunks even out TPOT")
        txt += (", but only more GPUs (replicas or TP) or a faster GPU shrink the prefill "
                "compute itself")
        adv.append(txt)
    if dec_mem >= ADVICE_MEMORY_DECODE:
        low_kv = kv_mean is not None and kv_mean < ADVICE_LOW_KV
        if at_cap is not None and at_cap >= ADVICE_BATCH_AT_CAP and low_kv and not preempt:
            adv.append(f"memory-bound decode is {dec_mem:.0%} of busy time and the batch sits "
                       f"at max_num_seqs={seqs} for {at_cap:.0%} of it with KV use at "
                       f"{_pct(kv_mean)}: a larger max_num_seqs reads the weights once for "
                       "more sequences")
        elif at_cap is not None and at_cap < ADVICE_BATCH_AT_CAP:
            reach = (f"never reaches max_num_seqs={seqs}" if at_cap == 0 else
                     f"reaches max_num_seqs={seqs} in only {at_cap:.0%} of it")
            adv.append(f"memory-bound decode is {dec_mem:.0%} of busy time, but the batch "
                       f"{reach}, so raising max_num_seqs would not help; HBM bandwidth "
                       "(fp8 weights or KV, a GPU with more bandwidth) sets the decode step "
                       "time")
        else:
            adv.append(f"memory-bound decode is {dec_mem:.0%} of busy time: HBM bandwidth "
                       "(fp8 weights or KV, a GPU with more bandwidth) sets the decode "
                       "step time")
    if (b.get("overhead") or 0.0) >= ADVICE_OVERHEAD:
        adv.append(_overhead_advice(b))
    q = note.get("queue_share_of_ttft")
    if q is not None and q >= ADVICE_QUEUE:
        adv.append(f"queueing is {q:.0%} of the mean TTFT: more headroom (replicas) "
                   "shortens it")
    return adv


def bottleneck_note(row: dict) -> dict:
    """Where the recommended configuration spends its step time, and what that suggests.

    The shares come from :func:`simulator.metrics.step_bottleneck.step_bottleneck` on the
    confirmation run at the target rate: every step classified on its own shape and
    weighted by its duration (not one averaged step, which hides the few long prefill
    steps). Returns ``shares`` (the three busy-time shares plus the prefill / pure-decode
    split), the run figures it used, ``bound`` (the confirmation run's verdict,
    :func:`simulator.metrics.bounds.run_bounds`, whose sentence ends ``summary``; None for a
    result cached before it), ``advice`` (list of sentences) and ``text``.
    """
    ex = row.get("confirm_extra") or {}
    cs = row.get("confirm_summary") or {}
    b = ex.get("bottleneck")
    stale = bool(b) and "prefill_steps" not in b
    if stale:
        b = None  # a cached entry from before the per-step classification
    note: dict[str, Any] = {
        "shares": b,
        "mean_step_shape": ex.get("mean_step_shape"),
        "busy_fraction": ex.get("busy_fraction"),
        "queue_share_of_ttft": ex.get("queue_share_of_ttft"),
        "num_preemptions": cs.get("num_preemptions"),
        "kv_capacity_rejections": ex.get("kv_capacity_rejections"),
        "mean_kv_cache_usage": cs.get("mean_kv_cache_usage"),
        "max_kv_cache_usage": cs.get("max_kv_cache_usage"),
        "batch_at_cap_time_share": ex.get("batch_at_cap_time_share"),
        "scheduler": ex.get("scheduler"),
    }
    parts = []
    if stale:
        parts.append("per-step bottleneck shares are missing from this cached result "
                     "(rerun with --no-cache)")
    perf_model = cs.get("perf_model")
    if not b and not stale and perf_model == "constant":
        parts.append("perf.source: constant prices every step as one synthetic time "
                     "(perf.constant): it has no operators to classify, so there is no "
                     "compute, memory or overhead split and no advice about one")
    if b:
        dom = max(("compute_bound", "memory_bound", "overhead"), key=lambda k: b.get(k, 0))
        pre, dec = b["prefill_steps"], b["decode_steps"]
        names = _overhead_names(b)
        what = "" if names is None else f" ({', '.join(names)})" if names else " (none)"
        parts.append(
            f"busy time (each step classified on its own shape, weighted by its duration): "
            f"{b.get('compute_bound', 0):.0%} compute-bound operators, "
            f"{b.get('memory_bound', 0):.0%} memory-bound operators, "
            f"{b.get('overhead', 0):.0%} overheads{what}; mostly "
            f"{dom.replace('_', '-')}")
        parts.append(
            f"steps with prefill work are {_pct(pre.get('step_share'))} of steps but "
            f"{_pct(pre.get('time_share'))} of busy time "
            f"({_pct(pre.get('compute_bound'))} compute-bound), pure-decode steps "
            f"{_pct(dec.get('time_share'))} of busy time ({_pct(dec.get('memory_bound'))} "
            "memory-bound)")
    if note["num_preemptions"] is not None:
        parts.append(f"{note['num_preemptions']} KV-capacity preemption(s) at the target rate"
                     + (f", peak KV use {note['max_kv_cache_usage']:.0%}"
                        if note["max_kv_cache_usage"] is not None else ""))
    if note["queue_share_of_ttft"] is not None:
        parts.append(f"queueing is {note['queue_share_of_ttft']:.0%} of the mean TTFT")
    bounds = cs.get("bounds") or {}
    note["bound"] = bounds.get("bound")
    if bounds.get("verdict"):  # the run's verdict (absent from results cached before it)
        parts.append("the run's verdict: " + bounds["verdict"][:1].lower()
                     + bounds["verdict"][1:])
    advice = _bottleneck_advice(b or {}, note, note["scheduler"] or {})
    note["advice"] = advice
    note["summary"] = "; ".join(parts) if parts else "no bottleneck data"
    note["text"] = note["summary"] + ("; advice: " + "; ".join(advice) if advice else "")
    return note
