"""Memory estimate of a run before it starts, checked against a stated budget.

A run holds, at its peak, per-request state and records, per-replica objects, one record per
engine step and the KV blocks the replicas touched (the block pool allocates lazily, so a
replica costs memory for the blocks it used, not the blocks it owns). The estimate is::

    bytes = BYTES_FIXED + BYTES_PER_REQUEST * N + BYTES_PER_REPLICA * R
            + BYTES_PER_STEP_ROW * S + BYTES_PER_BLOCK * B

with ``N`` requests, ``R`` replicas, ``S`` step rows and ``B`` touched blocks. ``N`` and ``R``
are known; ``S`` and ``B`` are bounded from the requests' declared lengths (see
:func:`estimate_run`), giving a low and a high estimate.

A run whose *low* estimate exceeds the budget cannot fit and is refused with
:class:`ResourceError` (one line: the estimate, its largest part, the budget and the knob to
change). A run whose high estimate exceeds it proceeds with a :class:`MemoryBudgetWarning`.

The budget is ``$SERVESIM_MEMORY_BUDGET_GB`` (GB = 1e9 bytes) when set, else the memory the
kernel reports available (``MemAvailable`` in ``/proc/meminfo``, Linux; else
``os.sysconf`` available pages), else unknown (nothing is refused).

The ``BYTES_*`` coefficients were fitted by ``benchmarks/bench_memory.py --quick``
(tracemalloc peak of complete ``servesim run`` executions, outputs and figures included) over
12 runs spanning 50-16,000 requests, 1-8,000 replicas, 1,100-286,000 step rows and
266-108,000 touched blocks, by non-negative least squares, after the step table began to
stream to disk (2026-12-02); leave-one-out error of the peak: median 36.7 %, max 75 % (the
peak of a run is the largest of its phases, not a sum, so a linear form is only
order-of-magnitude accurate, which is what a refusal needs). The reduced set (the full set
adds 32,000 requests and 16,000 replicas) was run for time on a loaded 2-core machine.
All fitted runs keep their step table in memory (at most 4 x 65,536 rows); past that the
rows stream to disk (:mod:`simulator.metrics.step_table`) and a row costs far less than
``BYTES_PER_STEP_ROW`` (the summary reads ~3 columns at a time: ~24 bytes a row, plus 16 for
its ITL sample), so the estimate of a long run errs high, on the side of a warning.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

#: fitted by benchmarks/bench_memory.py (see the module docstring)
BYTES_FIXED = 7.0e6
BYTES_PER_REQUEST = 2520.0
BYTES_PER_REPLICA = 2690.0
BYTES_PER_STEP_ROW = 147.0
BYTES_PER_BLOCK = 41.0

ENV_BUDGET = "SERVESIM_MEMORY_BUDGET_GB"


class ResourceError(ValueError):
    """A run (or workload) would not fit the memory budget (message: one readable line)."""


class MemoryBudgetWarning(UserWarning):
    """A run may exceed the memory budget (its high estimate does; its low one does not)."""


def _gb(x: float) -> str:
    return f"{x / 1e9:,.3g} GB"


def _mem_available_bytes() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget() -> tuple[float | None, str]:
    """The memory budget in bytes and where it came from.

    Returns
    -------
    (float or None, str)
        Bytes (None: unknown, nothing is refused) and its source.

    Raises
    ------
    ResourceError
        If ``$SERVESIM_MEMORY_BUDGET_GB`` is set but not a positive finite number.
    """
    env = os.environ.get(ENV_BUDGET)
    if env is not None and env.strip():
        try:
            gb = float(env)
        except ValueError:
            gb = math.nan
        if not (math.isfinite(gb) and gb > 0):
            raise ResourceError(f"{ENV_BUDGET}={env!r}: not a positive number of GB "
                                "(1 GB = 1e9 bytes)")
        return gb * 1e9, f"${ENV_BUDGET}"
    avail = _mem_available_bytes()
    if avail is None:
        return None, "unknown (no MemAvailable)"
    return avail, "the memory available now"


@dataclass
class RunEstimate:
    """Memory estimate of one run (bytes), low and high, with its parts."""

    num_requests: int
    num_replicas: int
    step_rows: tuple[int, int]
    blocks: tuple[int, int]
    bytes_low: float
    bytes_high: float
    parts_low: dict

    def describe(self) -> str:
        """``N requests, R replicas, S step rows, B blocks`` with the low estimate's parts."""
        p = self.parts_low
        return (f"{self.num_requests:,} requests x {BYTES_PER_REQUEST:.0f} B = "
                f"{_gb(p['requests'])}, {self.num_replicas:,} replicas = {_gb(p['replicas'])}, "
                f">= {self.step_rows[0]:,} step rows = {_gb(p['step_rows'])}, "
                f"{self.blocks[0]:,} KV blocks = {_gb(p['blocks'])}")


_KNOBS = {
    "requests": "fewer requests (workload.max_requests, workload.end_s, or the synthetic "
                "num_requests / duration_s)",
    "replicas": "fewer cluster.num_replicas (cluster.autoscale.max_replicas when "
                "autoscaled; and scheduler.admission.fallback.num_replicas)",
    "step_rows": "fewer or shorter requests (workload.max_requests, workload.end_s, "
                 "output lengths)",
    "blocks": "fewer cluster.num_replicas or kv_cache.num_gpu_blocks (or no "
              "kv_cache.enable_prefix_caching)",
}


def estimate_run(prompt, output, *, num_replicas: int, num_gpu_blocks: int, block_size: int,
                 max_num_seqs: int, max_num_batched_tokens: int, tokens_per_step: int = 1,
                 prefix_caching: bool = False, runs=None) -> RunEstimate:
    """Estimate a run's peak memory from its requests' lengths and the cluster's shape.

    Parameters
    ----------
    prompt, output : array_like of int, shape (N,)
        Prompt and output lengths in tokens of every request.
    num_replicas, num_gpu_blocks, block_size, max_num_seqs, max_num_batched_tokens : int
        Cluster shape and scheduler limits (blocks per replica, tokens per block).
    tokens_per_step : int
        Most tokens one request can emit per step (``k + 1`` with ``k`` speculative tokens).
    prefix_caching : bool
        Freed blocks keep their prefix hash (so every touched block stays in the pool).
    runs : array_like of bool, shape (N,), optional
        Requests certain to run to their output length (``None``: all). Only they enter the
        lower bound on step rows; a request that may be rejected or cancelled does not.

    Returns
    -------
    RunEstimate
        Step rows: at least ``ceil(max_i out_i / t)`` over the certain requests (a request
        emits at most ``t`` tokens per step) and ``ceil(sum_i out_i / (R * max_num_seqs *
        t))`` (at most ``max_num_seqs`` sequences per step on each replica); at most
        ``sum_i (out_i + ceil(prompt_i / max_num_batched_tokens))`` (every step moves at
        least one request). Blocks touched: at most ``min(R * num_gpu_blocks, sum_i
        ceil((prompt_i + out_i) / block_size))``; at least the largest request's blocks, or the
        upper bound with prefix caching (cached blocks are kept until evicted).
    """
    import numpy as np
    p = np.asarray(prompt, dtype=np.float64)
    o = np.asarray(output, dtype=np.float64)
    n = int(p.size)
    R = int(num_replicas)
    t = max(1, int(tokens_per_step))
    if n:
        sure = o if runs is None else np.where(np.asarray(runs, dtype=bool), o, 0.0)
        s_lo = max(math.ceil(float(sure.max()) / t),
                   math.ceil(float(sure.sum()) / (R * max(1, max_num_seqs) * t)))
        s_hi = int(o.sum() + np.ceil(p / max(1, max_num_batched_tokens)).sum())
        per_req = np.ceil((p + o) / max(1, block_size))
        b_hi = int(min(float(R) * num_gpu_blocks, float(per_req.sum())))
        b_lo = b_hi if prefix_caching else int(min(num_gpu_blocks, float(per_req.max())))
    else:
        s_lo = s_hi = b_lo = b_hi = 0
    s_hi = max(s_hi, s_lo)
    parts = {"fixed": BYTES_FIXED, "requests": BYTES_PER_REQUEST * n,
             "replicas": BYTES_PER_REPLICA * R, "step_rows": BYTES_PER_STEP_ROW * s_lo,
             "blocks": BYTES_PER_BLOCK * b_lo}
    low = float(sum(parts.values()))
    high = (BYTES_FIXED + BYTES_PER_REQUEST * n + BYTES_PER_REPLICA * R
            + BYTES_PER_STEP_ROW * s_hi + BYTES_PER_BLOCK * b_hi)
    return RunEstimate(n, R, (int(s_lo), int(s_hi)), (b_lo, b_hi), low, float(high), parts)


def estimate_scenario_run(scenario, setup, specs, until_s: float | None = None) -> RunEstimate:
    """:func:`estimate_run` for ``specs`` on ``scenario``'s cluster (``setup`` from
    :func:`simulator.cluster.setup.build_setup`).

    Output lengths are capped at ``max_model_len - prompt`` (a request stops there). Requests
    rejected at arrival by the scheduler's rules (prompt or prompt + declared ``max_tokens``
    beyond ``max_model_len``, a prompt or reservation larger than the KV pool less its
    watermark, a prompt beyond ``max_num_batched_tokens`` without chunked prefill) count as
    requests but emit nothing; with client patience, admission limits (``max_waiting``,
    ``max_queue_delay_s``) or a ``until_s`` stop, no request is certain to finish.
    """
    import numpy as np
    n = len(specs)
    if hasattr(specs, "budget_columns"):  # a RequestStream: read its columns, build no spec
        p, o, mt, has_patience = specs.budget_columns()
    else:
        p = np.fromiter((s.num_prompt_tokens for s in specs), dtype=np.float64, count=n)
        o = np.fromiter((s.num_output_tokens for s in specs), dtype=np.float64, count=n)
        mt = np.fromiter((s.max_tokens or 0 for s in specs), dtype=np.float64, count=n)
        has_patience = np.fromiter((s.cancel_after_s is not None for s in specs), dtype=bool,
                                   count=n)
    cfg = scenario.scheduler
    L = float(setup.limits.max_model_len)
    kvc = scenario.kv_cache
    nb, bs = int(setup.num_gpu_blocks), int(setup.block_size)
    cap = nb - int(kvc.watermark * nb)
    if kvc.allocation == "contiguous" or scenario.scheduler.policy == "static":
        reserve = np.where(mt > 0, np.minimum(L, p + mt), L)
    else:
        reserve = p + 1
    ok = (p + 1 <= L) & ((mt == 0) | (p + mt <= L)) & (np.ceil(reserve / bs) <= cap)
    if not cfg.enable_chunked_prefill:
        ok &= p <= cfg.max_num_batched_tokens
    o = np.where(ok, np.minimum(o, L - p), 0.0)
    adm = scenario.scheduler.admission
    may_drop = adm.max_waiting is not None or adm.max_queue_delay_s is not None
    runs = ok & ~has_patience
    if may_drop or until_s is not None:
        runs[:] = False
    spec = scenario.speculative
    t = 1 + spec.num_speculative_tokens if spec is not None else 1
    fb = adm.fallback  # a degrade fallback set: replicas too
    return estimate_run(p, o, num_replicas=scenario.cluster.max_num_replicas
                        + (fb.num_replicas if fb is not None else 0),
                        num_gpu_blocks=nb, block_size=bs, max_num_seqs=cfg.max_num_seqs,
                        max_num_batched_tokens=cfg.max_num_batched_tokens, tokens_per_step=t,
                        prefix_caching=kvc.enable_prefix_caching, runs=runs)


def check_run_budget(est: RunEstimate, what: str = "run") -> None:
    """Refuse a run whose low estimate exceeds the budget; warn when its high one does.

    Raises
    ------
    ResourceError
        One line: the estimate and its parts, the budget and its source, the knob to change.
    """
    import warnings
    budget, source = memory_budget()
    if budget is None:
        return
    if est.bytes_low > budget:
        big = max((k for k in est.parts_low if k != "fixed"), key=est.parts_low.get)
        raise ResourceError(
            f"{what} needs an estimated {_gb(est.bytes_low)} or more of memory "
            f"({est.describe()}) but the memory budget is {_gb(budget)} ({source}); use "
            f"{_KNOBS[big]}, or set {ENV_BUDGET}")
    if est.bytes_high > budget:
        warnings.warn(MemoryBudgetWarning(
            f"{what} may need up to {_gb(est.bytes_high)} of memory (at least "
            f"{_gb(est.bytes_low)}; up to {est.step_rows[1]:,} step rows) against a budget "
            f"of {_gb(budget)} ({source})"), stacklevel=2)


def check_workload_budget(num_requests: float, source: str, knob: str) -> None:
    """Refuse to generate ``num_requests`` requests when they alone exceed the budget.

    Raises
    ------
    ResourceError
        Naming the request count, the estimate, the budget and ``knob``.
    """
    budget, where = memory_budget()
    if budget is None or not num_requests:
        return
    need = BYTES_FIXED + BYTES_PER_REQUEST * float(num_requests)
    if need > budget:
        raise ResourceError(
            f"{source}: {num_requests:,.0f} requests need an estimated {_gb(need)} of memory "
            f"({BYTES_PER_REQUEST:.0f} B each) but the memory budget is {_gb(budget)} "
            f"({where}); lower {knob}, or set {ENV_BUDGET}")


__all__ = [
    "BYTES_FIXED",
    "BYTES_PER_BLOCK",
    "BYTES_PER_REPLICA",
    "BYTES_PER_REQUEST",
    "BYTES_PER_STEP_ROW",
    "ENV_BUDGET",
    "MemoryBudgetWarning",
    "ResourceError",
    "RunEstimate",
    "check_run_budget",
    "check_workload_budget",
    "estimate_run",
    "estimate_scenario_run",
    "memory_budget",
]
