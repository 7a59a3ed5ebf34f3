"""Phase-attributed cost: prefill vs decode GPU time, and a price sheet per token kind.

A price sheet charges input (prompt) and output tokens differently because the two phases use
the GPU differently: prefill is a few long, compute-bound steps over many tokens, decode many
short, memory-bound steps over one token per sequence. This module splits a run's GPU time
between the two phases from its step records and prices each phase's tokens so that

    price_in x input_tokens / 1e6 + price_out x output_tokens / 1e6 = cost_usd      (exactly)

Inputs are only the columns every step table has (``step_time_s``, ``num_prefill_tokens``,
``num_decode_tokens``, ``num_prefill_seqs``, ``num_decode_seqs``, ``replica_id``;
``kv_tokens_used`` when present), so the functions work on the in-memory step frame and on
step rows streamed to Parquet alike.

The split rule, per step
------------------------
* A step with only prefill work (no decode token) is all prefill; one with only decode work is
  all decode (no model needed).
* A **mixed** step (a prefill chunk batched with decodes, chunked prefill) is split by its
  **operator times** when the performance model can give them for the step's shape
  (:meth:`simulator.perf.step_model.StepTimeModel.op_times`):

  - prefill attention is prefill's, decode attention decode's;
  - operators that run once over all the step's tokens (QKV/O projections, MLP or MoE, norms
    and activations, TP all-reduce, EP all-to-all, the MLA extra GEMMs) and the engine's
    overhead are split by **token share** ``p / (p + d)``: a GEMM's FLOPs and activation
    bytes are linear in the tokens it multiplies, so each token pays the same;
  - the LM head and sampler are split by **sampled rows**: one per prefill chunk, ``q`` per
    decode sequence (``q = num_decode_tokens / num_decode_seqs``, 1 without speculation).

  Why not token share alone: decode attention reads every decode sequence's whole KV context
  (memory-bound, ~context bytes per token) while prefill attention grows with the square of
  the chunk; charging both at the GEMMs' per-token rate misprices a mixed step whenever
  contexts are long. The operator split keeps each kernel with the phase that causes it.
* Without operator times (``perf`` not given, or a model such as ``perf.source: constant``
  whose ``op_times`` has no attention terms) a mixed step is split by token share
  ``num_prefill_tokens / (num_prefill_tokens + num_decode_tokens)``; the result says which
  rule was used (``phase_split_method``).

Mixed steps are binned by prefill tokens and decode sequences in powers of two (as
:func:`simulator.metrics.step_bottleneck.step_bottleneck` does); each bin's split is evaluated
once on the bin's mean shape (prefill tokens spread evenly over its chunks, each starting at
position 0; decode sequences attending ``kv_tokens_used - prefill tokens``) and applied to the
time of every step in the bin, so a run of 10^5 steps costs a few dozen model evaluations.

From GPU time to prices
-----------------------
``cost_usd`` (``num_gpus x duration x price``, the summary's figure) also pays for idle GPU time
between steps. Idle time serves neither phase, so it is distributed in proportion to the busy
time: prefill cost = ``cost_usd x P / (P + D)``, decode cost = ``cost_usd x D / (P + D)`` with
``P`` and ``D`` the prefill and decode GPU-seconds. Each phase's cost is then divided by the
tokens of the completed requests (the summary's ``num_input_tokens`` and
``num_output_tokens``): work for rejected, cancelled or unfinished requests and recomputation
after preemption is paid by the served tokens, as a price sheet must recover the whole bill.
Cached prompt tokens (prefix caching) count as input tokens although they cost no prefill
time: the input price is per prompt token sent.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.columns import finite_column
from simulator.perf.step_shape import StepShape

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = ["PHASE_SPLIT_METHODS", "log2_bucket", "phase_cost", "phase_gpu_seconds",
           "step_prefill_fraction"]

#: Values of ``phase_split_method``.
PHASE_SPLIT_METHODS = ("operator", "token_share")

#: Operator keys of ``StepTimeModel.op_times`` charged wholly to one phase.
_PREFILL_OPS = ("attention_prefill",)
_DECODE_OPS = ("attention_decode",)
#: Operator keys split by sampled rows (one per prefill chunk, q per decode sequence).
_ROW_OPS = ("lm_head", "sampler")


def log2_bucket(x: np.ndarray) -> np.ndarray:
    """0 for 0 (and below), else ``1 + floor(log2(x))`` (1, 2-3, 4-7, ...).

    Computed exactly as the binary exponent of ``x`` (``numpy.frexp``: ``x = m 2**e`` with
    ``m`` in [0.5, 1), so ``floor(log2 x) = e - 1``), with no logarithm whose last bit could
    depend on the CPU's instruction set, in one pass."""
    e = np.frexp(np.asarray(x, dtype=float))[1].astype(np.int64)
    return np.where(x > 0, e, 0)


def step_prefill_fraction(op_times: Mapping[str, float], *, prefill_tokens: float,
                          decode_tokens: float, prefill_rows: float,
                          decode_rows: float) -> float | None:
    """Prefill's share of one step's time from its operator times (the rule of the module
    docstring).

    Parameters
    ----------
    op_times : mapping of str to float
        Seconds per operator class of the step (``StepTimeModel.op_times``), including
        ``engine_overhead``; they sum to the step time.
    prefill_tokens, decode_tokens : float
        Query tokens of the step's prefill chunks and of its decode sequences (``p``, ``d``).
    prefill_rows, decode_rows : float
        Rows sampled for prefill chunks and for decode sequences.

    Returns
    -------
    float or None
        Fraction in [0, 1]; ``None`` when the operator times carry no attention terms (a
        model that cannot be split this way) or sum to zero.
    """
    if not any(k in op_times for k in _PREFILL_OPS + _DECODE_OPS):
        return None
    total = float(sum(float(v) for v in op_times.values()))
    if not total > 0:
        return None
    tok = prefill_tokens + decode_tokens
    tok_share = prefill_tokens / tok if tok > 0 else 0.0
    rows = prefill_rows + decode_rows
    row_share = prefill_rows / rows if rows > 0 else tok_share
    pre = 0.0
    for k, v in op_times.items():
        v = float(v)
        if k in _PREFILL_OPS:
            pre += v
        elif k in _DECODE_OPS:
            continue
        elif k in _ROW_OPS:
            pre += row_share * v
        else:
            pre += tok_share * v
    return min(1.0, max(0.0, pre / total))


def _bin_fraction(perf, pf, nps, nd, ndt, kvt, idx) -> float | None:
    """Operator-split prefill fraction of one bin of mixed steps (None: not available)."""
    q = float(pf[idx].mean())
    n_chunks = max(1, round(float(nps[idx].mean())))
    qi = max(1, round(q / n_chunks))
    n_dec = max(1, round(float(nd[idx].mean())))
    d_tok = float(ndt[idx].sum())
    d_seq = float(nd[idx].sum())
    q_per = max(1, round(d_tok / d_seq)) if d_seq > 0 else 1
    if kvt is not None:
        ctx = np.maximum(kvt[idx] - pf[idx], nd[idx])
        ctx_total = max(n_dec, round(float(ctx.mean())))
    else:
        ctx_total = n_dec
    shape = StepShape(prefill_q=[qi] * n_chunks, prefill_start=[0] * n_chunks,
                      num_decode=n_dec, decode_ctx_total=ctx_total, decode_q_per_seq=q_per,
                      num_sampled=n_dec * q_per + n_chunks)
    try:
        times = perf.op_times(shape)
    except Exception:  # noqa: BLE001 - a model without the inputs: fall back to token share
        return None
    return step_prefill_fraction(times, prefill_tokens=qi * n_chunks,
                                 decode_tokens=n_dec * q_per, prefill_rows=n_chunks,
                                 decode_rows=n_dec * q_per)


def _split_mixed(steps, perf, idx_all: np.ndarray, pf_m: np.ndarray, ndt_m: np.ndarray,
                 frac: np.ndarray) -> tuple[str, int]:
    """Set ``frac`` (prefill fraction per step) of the mixed steps ``idx_all`` bin by bin from
    operator times; returns (method, bins evaluated). Reads only the mixed rows' columns."""
    nps_m = finite_column(steps, "num_prefill_seqs")[idx_all]
    nd_m = (finite_column(steps, "num_decode_seqs")[idx_all]
            if "num_decode_seqs" in steps.columns else ndt_m.copy())
    kvt_m = (finite_column(steps, "kv_tokens_used")[idx_all]
             if "kv_tokens_used" in steps.columns else None)
    key = log2_bucket(pf_m) * 64 + log2_bucket(nd_m)
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    all_op, n_bins = True, 0
    for grp in np.split(order, cuts):  # positions among the mixed steps
        n_bins += 1
        f = _bin_fraction(perf, pf_m, nps_m, nd_m, ndt_m, kvt_m, grp)
        if f is None:
            all_op = False
            continue
        frac[idx_all[grp]] = f
    return ("operator" if all_op else "token_share"), n_bins


def phase_gpu_seconds(steps: pd.DataFrame, perf=None, *,
                      gpus_per_replica: int = 1) -> dict[str, Any]:
    """Split a run's busy time between prefill and decode (rule: module docstring).

    Parameters
    ----------
    steps : pandas.DataFrame
        Step records with ``step_time_s`` (s), ``num_prefill_tokens``, ``num_decode_tokens``
        (tokens), ``num_prefill_seqs``, ``num_decode_seqs``; ``kv_tokens_used`` optional.
    perf : object, optional
        Performance model with ``op_times(StepShape) -> {operator: seconds}``; without it (or
        when it gives no attention terms) mixed steps are split by token share.
    gpus_per_replica : int
        GPUs that run each step (the tensor-parallel degree): GPU-seconds = step seconds x
        this.

    Returns
    -------
    dict
        ``prefill_gpu_s``, ``decode_gpu_s`` (GPU-seconds), ``busy_gpu_s`` (their sum),
        ``prefill_share`` (of busy time; ``None`` without busy time), ``num_steps``,
        ``num_mixed_steps``, ``mixed_time_share`` (mixed steps' share of busy time),
        ``phase_split_method`` (``operator`` or ``token_share``; the rule used for the mixed
        steps, ``operator`` only when every mixed bin could be split by operators) and
        ``num_bins`` (mixed-step bins evaluated).

    Raises
    ------
    ValueError
        If ``steps`` lacks ``step_time_s`` or a step time is negative, or
        ``gpus_per_replica`` < 1.
    """
    if gpus_per_replica < 1:
        raise ValueError(f"gpus_per_replica must be >= 1, got {gpus_per_replica}")
    n = 0 if steps is None else len(steps)
    if n and "step_time_s" not in steps.columns:
        raise ValueError("steps: missing column 'step_time_s'")
    if n == 0:
        return {"prefill_gpu_s": 0.0, "decode_gpu_s": 0.0, "busy_gpu_s": 0.0,
                "prefill_share": None, "num_steps": 0, "num_mixed_steps": 0,
                "mixed_time_share": None, "phase_split_method": "token_share", "num_bins": 0}
    # Memory: columns are read one at a time and freed (a 10^7-step table is 80 MB a
    # column); the mixed steps' bins read only the mixed rows of the per-bin columns.
    if (finite_column(steps, "step_time_s") < 0).any():
        raise ValueError("steps: negative step_time_s")
    pf = finite_column(steps, "num_prefill_tokens")
    ndt = finite_column(steps, "num_decode_tokens")
    mixed = (pf > 0) & (ndt > 0)
    idx_all = np.flatnonzero(mixed)
    pf_m, ndt_m = pf[idx_all], ndt[idx_all]
    np.add(ndt, pf, out=ndt)  # tokens (pf + ndt: the same sums), in ndt's buffer
    tok = ndt
    has_tok = tok > 0
    frac = np.divide(pf, tok, out=tok, where=has_tok)  # token share (pure steps: 0 or 1)
    frac[~has_tok] = 0.0
    del pf, ndt, tok, has_tok
    method, n_bins = "token_share", 0
    if perf is not None and hasattr(perf, "op_times") and idx_all.size:
        method, n_bins = _split_mixed(steps, perf, idx_all, pf_m, ndt_m, frac)
    t = finite_column(steps, "step_time_s")
    # the products in frac's own array (no third column-sized array; the same products)
    pre = float(np.sum(np.multiply(t, frac, out=frac))) * gpus_per_replica
    busy = float(t.sum()) * gpus_per_replica
    dec = busy - pre
    return {"prefill_gpu_s": pre, "decode_gpu_s": dec, "busy_gpu_s": busy,
            "prefill_share": pre / busy if busy > 0 else None, "num_steps": int(n),
            "num_mixed_steps": int(mixed.sum()),
            "mixed_time_share": float(t[mixed].sum() / t.sum()) if t.sum() > 0 else None,
            "phase_split_method": method, "num_bins": n_bins}


def phase_cost(steps: pd.DataFrame, *, cost_usd: float, num_input_tokens: int,
               num_output_tokens: int, num_gpus: int, duration_s: float,
               gpus_per_replica: int = 1, perf=None) -> dict[str, Any]:
    """Prefill and decode cost and the per-token price sheet of one run.

    Parameters
    ----------
    steps : pandas.DataFrame
        The run's steps in the measurement window (see :func:`phase_gpu_seconds`).
    cost_usd : float
        The run's GPU cost in US dollars (``num_gpus x duration_s / 3600 x USD per
        GPU-hour``, the summary's ``cost_usd``).
    num_input_tokens, num_output_tokens : int
        Prompt and output tokens of the completed requests (the summary's counts).
    num_gpus : int
        GPUs the run occupies (replicas x tensor-parallel degree).
    duration_s : float
        Measurement window in seconds.
    gpus_per_replica : int
        Tensor-parallel degree (GPUs per step).
    perf : object, optional
        Performance model for the operator split (see :func:`phase_gpu_seconds`).

    Returns
    -------
    dict
        Everything of :func:`phase_gpu_seconds` plus ``idle_gpu_s`` (``num_gpus x
        duration_s`` - busy GPU-seconds, at least 0), ``idle_share`` (of the GPU-seconds
        paid for), ``prefill_cost_usd`` and ``decode_cost_usd`` (``cost_usd`` split by the
        busy-time shares, idle time pro rata; they sum to ``cost_usd``),
        ``price_per_1m_input_tokens_usd`` = prefill cost / input tokens x 1e6 and
        ``price_per_1m_output_tokens_usd`` = decode cost / output tokens x 1e6 (``None`` when
        the token count is 0), ``price_check_usd`` (price_in x in / 1e6 + price_out x out /
        1e6, equal to ``cost_usd`` whenever both prices exist), ``rule`` (one sentence).
        Without busy time the whole cost is left unattributed (both phase costs ``None``).

    Raises
    ------
    ValueError
        On negative token counts, GPUs, duration or cost.
    """
    for name, v in (("cost_usd", cost_usd), ("num_input_tokens", num_input_tokens),
                    ("num_output_tokens", num_output_tokens), ("num_gpus", num_gpus),
                    ("duration_s", duration_s)):
        if v is None or not float(v) >= 0:
            raise ValueError(f"phase_cost: {name} must be >= 0, got {v!r}")
    g = phase_gpu_seconds(steps, perf, gpus_per_replica=gpus_per_replica)
    paid = float(num_gpus) * float(duration_s)
    out: dict[str, Any] = dict(g)
    idle = paid - g["busy_gpu_s"]
    # busy time can exceed the window by rounding (a step ending exactly at its end)
    out["idle_gpu_s"] = idle if idle > 1e-9 * max(paid, 1.0) else 0.0
    out["idle_share"] = out["idle_gpu_s"] / paid if paid > 0 else None
    share = g["prefill_share"]
    if share is None:
        pre_c = dec_c = None
    else:
        pre_c = float(cost_usd) * share
        dec_c = float(cost_usd) - pre_c
    out["prefill_cost_usd"] = pre_c
    out["decode_cost_usd"] = dec_c
    p_in = pre_c / num_input_tokens * 1e6 if (pre_c is not None and num_input_tokens) else None
    p_out = dec_c / num_output_tokens * 1e6 if (dec_c is not None and num_output_tokens) \
        else None
    out["price_per_1m_input_tokens_usd"] = p_in
    out["price_per_1m_output_tokens_usd"] = p_out
    out["price_check_usd"] = (p_in * num_input_tokens / 1e6 + p_out * num_output_tokens / 1e6
                              if (p_in is not None and p_out is not None) else None)
    out["rule"] = (
        f"GPU time split per step: pure prefill / pure decode steps wholly to their phase; "
        f"mixed steps by {'operator times' if g['phase_split_method'] == 'operator' else 'token share'}"
        f"; idle GPU time pro rata; each phase's cost divided by the completed requests' "
        f"input / output tokens")
    return out
