"""Speculative-decoding metrics of one run, from the replicas' scheduler counters.

:func:`speculative_summary` turns the counters of every
:class:`~simulator.scheduling.speculative.SpeculativeScheduler` of a run into the JSON-safe
block ``summary["speculative"]``. Definitions (vLLM's spec-decode metrics where they exist):

- ``num_drafts``: speculating (request, step) pairs; ``num_draft_tokens``: draft tokens
  verified (``k`` per draft, ``width * depth`` for a tree); ``num_accepted_tokens``: drafts
  the verification accepted (drawn from the slice's acceptance model, before the output
  length cap); ``num_emitted_tokens``: tokens those steps emitted (accepted + bonus, capped).
- ``acceptance_rate`` = accepted / draft tokens (vLLM's *draft acceptance rate*, accepted /
  proposed). Not the i.i.d. model's configured per-token acceptance ``alpha``
  (``configured_acceptance_alpha`` per slice): once a draft is rejected the step's later
  drafts are discarded but still count as proposed, so for i.i.d. acceptance the draft
  acceptance rate is ``(alpha - alpha^(k+1)) / ((1 - alpha) k)``, below ``alpha`` (0.292
  for ``alpha = 0.5``, ``k = 3``);
- ``mean_acceptance_length`` = 1 + accepted / drafts (includes the bonus token; vLLM's
  *mean acceptance length*, i.e. tokens per step per sequence);
- ``accepted_tokens_per_draft`` = accepted / drafts; ``accepted_tokens_per_draft_pass`` =
  accepted / (drafting steps x k): tokens a batched draft forward pass earns;
- ``draft_time_share`` = (drafting + draft prefill) / busy step time (all steps);
  ``drafting_share_of_spec_steps`` = drafting / time of the steps that drafted;
- per slice: the same counters, the configured per-token acceptance ``alpha`` of an i.i.d.
  acceptance model (``configured_acceptance_alpha``; None for other models), the closed-form
  expectation of its acceptance model (``expected_tokens_per_step`` = Leviathan et al.'s (1 - a^(k+1)) / (1 - a) for i.i.d.)
  next to the simulated value with its standard error, and the slice's drafting share
  (each drafting step's time split by the slice's share of its speculating sequences);
- ``verification_cost_by_batch``: pure-decode drafting steps binned by batch size; for each
  bin the mean verification time (step - drafting) against the target's plain decode step
  of the same batch and context (``verify_over_plain_decode``): the price of verifying
  ``k + 1`` tokens per sequence, which grows once the batch makes the step compute-bound.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulator.metrics.summary import json_safe as _json_safe
from simulator.scheduling.speculative import SpeculativeScheduler
from simulator.speculative.acceptance import IIDAcceptance

__all__ = ["BATCH_BINS", "configured_alpha", "draft_cost_ratio", "speculative_summary",
           "verification_cost_table"]

#: Batch-size bin edges (inclusive lower, inclusive upper) of the verification cost table.
BATCH_BINS: tuple[tuple[int, int], ...] = (
    (1, 1), (2, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1 << 30))


def _r(num: float, den: float) -> float | None:
    if not den:
        return None
    x = float(num) / float(den)
    return x if math.isfinite(x) else None


def configured_alpha(model) -> float | None:
    """The configured per-token acceptance ``alpha`` of an i.i.d. acceptance model, else None.

    Only :class:`~simulator.speculative.acceptance.IIDAcceptance` has one per-token
    probability; positional, empirical and tree models have none to report.
    """
    return float(model.acceptance_rate) if isinstance(model, IIDAcceptance) else None


def _spec_scheds(sim) -> list:
    return [rep.sched for rep in getattr(sim, "replicas", [])
            if isinstance(rep.sched, SpeculativeScheduler)]


def draft_cost_ratio(sched, num_seqs: int, ctx_per_seq: int) -> float | None:
    """Leviathan et al.'s ``c`` at one batch: one draft pass / the target's plain decode step.

    Parameters
    ----------
    sched : SpeculativeScheduler
        Supplies the draft cost model and the target performance model.
    num_seqs : int
        Decode sequences (>= 1).
    ctx_per_seq : int
        Context per sequence (tokens).

    Returns
    -------
    float or None
        ``c``; None when the plain step time is not positive.
    """
    ctx = int(num_seqs * ctx_per_seq)
    plain = float(np.asarray(sched.target_perf.decode_step_times(
        int(num_seqs), np.array([ctx]))).reshape(-1)[0])
    draft = sched.cost.decode_cost(int(num_seqs), ctx) / max(1, sched.k)
    return _r(draft, plain)


def verification_cost_table(scheds: list) -> list[dict[str, Any]]:
    """Verification and drafting cost of pure-decode drafting steps, by batch size.

    Parameters
    ----------
    scheds : list of SpeculativeScheduler
        The replicas' schedulers (their ``step_log`` and target performance model).

    Returns
    -------
    list of dict
        One entry per non-empty :data:`BATCH_BINS` bin: ``batch_min``, ``batch_max``,
        ``num_steps``, ``mean_batch_size``, ``mean_step_time_s``, ``mean_draft_time_s``,
        ``mean_verify_time_s`` (step - drafting), ``mean_plain_decode_time_s`` (the
        target's 1-token decode of the same batch and context), ``verify_over_plain_decode``
        and ``draft_share`` (drafting / step time).
    """
    parts = []
    for s in scheds:
        log = s.step_log
        if not log["num_seqs"]:
            continue
        n = np.asarray(log["num_seqs"], dtype=np.int64)
        keep = (np.asarray(log["prefill_tokens"]) == 0) & (np.asarray(log["batch_size"]) == n)
        if not keep.any():
            continue
        n = n[keep]
        ctx = np.asarray(log["ctx_total"], dtype=np.int64)[keep]
        step = np.asarray(log["step_time_s"], dtype=float)[keep]
        draft = np.asarray(log["draft_time_s"], dtype=float)[keep]
        plain = np.empty(len(n))
        for b in np.unique(n):
            m = n == b
            plain[m] = np.asarray(s.target_perf.decode_step_times(int(b), ctx[m]), dtype=float)
        parts.append((n, step, draft, plain))
    if not parts:
        return []
    n, step, draft, plain = (np.concatenate([p[i] for p in parts]) for i in range(4))
    rows = []
    for lo, hi in BATCH_BINS:
        m = (n >= lo) & (n <= hi)
        if not m.any():
            continue
        verify = float((step[m] - draft[m]).mean())
        pl = float(plain[m].mean())
        rows.append({
            "batch_min": lo, "batch_max": int(min(hi, n[m].max())),
            "num_steps": int(m.sum()), "mean_batch_size": float(n[m].mean()),
            "mean_step_time_s": float(step[m].mean()), "mean_draft_time_s": float(draft[m].mean()),
            "mean_verify_time_s": verify, "mean_plain_decode_time_s": pl,
            "verify_over_plain_decode": _r(verify, pl),
            "draft_share": _r(float(draft[m].sum()), float(step[m].sum())),
        })
    return rows


def _counter_block(drafts: int, draft_tokens: int, accepted: int, emitted: int,
                   hist: np.ndarray) -> dict[str, Any]:
    ks = np.arange(len(hist))
    n = int(hist.sum())
    if n:
        mean = float((ks * hist).sum()) / n
        var = float(((ks - mean) ** 2 * hist).sum()) / n
        stderr = math.sqrt(var / n)
    else:
        stderr = None
    return {
        "num_drafts": int(drafts),
        "num_draft_tokens": int(draft_tokens),
        "num_accepted_tokens": int(accepted),
        "num_emitted_tokens": int(emitted),
        "acceptance_rate": _r(accepted, draft_tokens),
        "mean_acceptance_length": (1.0 + accepted / drafts) if drafts else None,
        "mean_acceptance_length_stderr": stderr,
        "accepted_tokens_per_draft": _r(accepted, drafts),
        "emitted_tokens_per_draft": _r(emitted, drafts),
        "accepted_length_hist": [int(x) for x in hist],
    }


def _slice_block(cs: list, model, k: int) -> tuple[dict[str, Any], dict[str, int], np.ndarray]:
    """One slice's counter block over the replicas' per-slice counters ``cs``; also its
    totals (drafts, draft tokens, accepted, emitted) and accepted-length histogram."""
    hist = np.sum([c.accepted_hist for c in cs], axis=0)
    counts = {"drafts": sum(c.num_drafts for c in cs),
              "tokens": sum(c.num_draft_tokens for c in cs),
              "acc": sum(c.num_accepted_tokens for c in cs),
              "emit": sum(c.num_emitted_tokens for c in cs)}
    dt = sum(c.draft_time_s for c in cs)
    st = sum(c.step_time_s for c in cs)
    block = _counter_block(counts["drafts"], counts["tokens"], counts["acc"], counts["emit"],
                           hist)
    block.update({
        "acceptance_model": repr(model),
        "configured_acceptance_alpha": configured_alpha(model),
        "expected_tokens_per_step": model.expected_tokens_per_step(k),
        "expected_acceptance_rate": model.draft_acceptance_rate(k),
        "num_plain_decodes": int(sum(c.num_plain_decodes for c in cs)),
        "draft_time_s": dt, "step_time_s": st, "draft_time_share": _r(dt, st),
    })
    return block, counts, hist


def speculative_summary(sim) -> dict[str, Any]:
    """The ``summary["speculative"]`` block of a run.

    Parameters
    ----------
    sim : SimOutput
        What :func:`simulator.engine.loop.simulate` returned (``sim.replicas[i].sched``).

    Returns
    -------
    dict
        JSON-safe (``None`` where undefined). Keys: ``method``, ``draft_model``,
        ``num_speculative_tokens``, ``num_verified_tokens``, the counter block (see the
        module docstring: ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``,
        ``num_emitted_tokens``, ``acceptance_rate``, ``mean_acceptance_length`` and its
        standard error, ``accepted_tokens_per_draft``, ``emitted_tokens_per_draft``,
        ``accepted_length_hist``), ``accepted_tokens_per_draft_pass``, ``num_steps``,
        ``num_spec_steps``, ``num_steps_speculation_paused`` (steps a ``disable_speculation``
        degrade policy ran without drafts), ``num_plain_decodes``, ``mean_spec_batch_size``,
        ``busy_time_s``, ``spec_step_time_s``, ``draft_time_s``, ``draft_prefill_time_s``
        (seconds), ``draft_time_share``, ``drafting_share_of_spec_steps``,
        ``draft_cost_ratio_batch1`` (``c`` at batch 1 and the mean context),
        ``by_slice`` (per slice: the counter block, ``configured_acceptance_alpha``,
        ``expected_tokens_per_step`` and
        ``expected_acceptance_rate`` of its acceptance model, ``draft_time_s``,
        ``step_time_s`` and ``draft_time_share``) and ``verification_cost_by_batch``
        (:func:`verification_cost_table`). Empty dict when no replica speculates.
    """
    scheds = _spec_scheds(sim)
    if not scheds:
        return {}
    s0 = scheds[0]
    cfg, k = s0.spec_cfg, s0.k
    names = sorted({name for s in scheds for name in s.slices})
    tot = {"drafts": 0, "tokens": 0, "acc": 0, "emit": 0}
    hist_all = np.zeros(k + 1, dtype=np.int64)
    by_slice: dict[str, Any] = {}
    for name in names:
        block, counts, hist = _slice_block([s.slices[name] for s in scheds if name in s.slices],
                                           cfg.acceptance_model(name), k)
        for key, n in counts.items():
            tot[key] += n
        hist_all += hist
        by_slice[name] = block
    busy = sum(s.busy_time_s for s in scheds)
    spec_t = sum(s.spec_step_time_s for s in scheds)
    d_dec = sum(s.draft_decode_time_s for s in scheds)
    d_pre = sum(s.draft_prefill_time_s for s in scheds)
    n_spec = sum(s.num_spec_steps for s in scheds)
    ctx = sum(sum(s.step_log["ctx_total"]) for s in scheds)
    seqs = sum(sum(s.step_log["num_seqs"]) for s in scheds)
    out = {
        "method": cfg.method,
        "draft_model": cfg.draft_model,
        "num_speculative_tokens": k,
        "num_verified_tokens": int(s0.spec_cfg.num_verified_tokens),
        "num_steps_speculation_paused": int(sum(getattr(s, "num_paused_steps", 0)
                                                for s in scheds)),
        **_counter_block(tot["drafts"], tot["tokens"], tot["acc"], tot["emit"], hist_all),
        "accepted_tokens_per_draft_pass": _r(tot["acc"], n_spec * k),
        "num_steps": int(sum(s.num_steps for s in scheds)),
        "num_spec_steps": int(n_spec),
        "num_plain_decodes": int(sum(b["num_plain_decodes"] for b in by_slice.values())),
        "mean_spec_batch_size": _r(seqs, n_spec),
        "busy_time_s": busy,
        "spec_step_time_s": spec_t,
        "draft_time_s": d_dec,
        "draft_prefill_time_s": d_pre,
        "draft_time_share": _r(d_dec + d_pre, busy),
        "drafting_share_of_spec_steps": _r(d_dec, spec_t),
        "draft_cost_ratio_batch1": (draft_cost_ratio(s0, 1, max(1, round(ctx / seqs)))
                                    if seqs else None),
        "by_slice": by_slice,
        "verification_cost_by_batch": verification_cost_table(scheds),
    }
    return _json_safe(out)


