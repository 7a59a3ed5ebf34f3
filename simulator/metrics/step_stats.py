"""KV-cache waste and batching figures of a run's step table (time-weighted over busy time),
computed a few columns at a time so that a long, spooled table is never copied whole."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.metrics.columns import numeric

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

__all__ = ["divide_by_column", "kv_and_batching_stats"]


def divide_by_column(x: np.ndarray, steps: pd.DataFrame, col: str) -> None:
    """``x /= steps[col]`` in place (0/0 and x/0 give NaN and inf, silently). An int64
    column is divided as stored (each value cast exactly, no float copy), a slice at a time
    from a spooled step table (:meth:`~simulator.metrics.step_table.StepTable.
    column_slices`); a missing or non-numeric column divides by NaN."""
    if hasattr(steps, "column_slices") and col in steps.columns:
        parts = steps.column_slices(col)
    else:
        c = steps[col] if col in steps.columns else None
        if c is None or not isinstance(c.dtype, np.dtype) or c.dtype.kind not in "iuf":
            c = numeric(steps, col)  # missing or not numeric: NaN where not
        else:
            c = c.to_numpy()
        parts = [(0, len(x), c)]
    with np.errstate(invalid="ignore", divide="ignore"):
        for a, b, d in parts:
            np.divide(x[a:b], d, out=x[a:b])


def _num_distinct(steps: pd.DataFrame, col: str) -> int:
    """``steps[col].nunique()``; for small non-negative integers (replica ids) by counting,
    which needs no hash table over a long step table, a slice of a spooled table at a time
    (``StepTable.column_slices``: no whole column read, no column-sized copy as the intp
    ``bincount`` counts in: 2.6 s of the ServeGen day's summary)."""
    slices = (steps.column_slices(col) if hasattr(steps, "column_slices")
              else [(0, len(steps), steps[col].to_numpy())])
    seen = np.zeros(0, dtype=bool)
    for _, _, x in slices:
        if not x.size:
            continue
        if x.dtype.kind not in "iu" or x.min() < 0 or x.max() >= 1 << 24:
            return int(steps[col].nunique())
        here = np.bincount(x, minlength=seen.size) > 0  # at least as long as seen
        here[:seen.size] |= seen
        seen = here
    return int(np.count_nonzero(seen))


def _step_bytes_per_token(steps: pd.DataFrame,
                          kv_bytes_per_token: float | Mapping[int, float]):
    """One KV bytes-per-token figure for every step (a float), or one per step (an array, by
    the step's ``replica_id``) when the replicas' figures differ (a degrade fallback set of
    another model)."""
    if not isinstance(kv_bytes_per_token, Mapping):
        return float(kv_bytes_per_token)
    vals = set(kv_bytes_per_token.values())
    if len(vals) == 1:
        return float(vals.pop())
    lut = np.zeros(max(kv_bytes_per_token) + 1, dtype=float)
    for rid, b in kv_bytes_per_token.items():
        lut[rid] = b
    return lut[numeric(steps, "replica_id").astype(np.int64)]


def kv_and_batching_stats(steps: pd.DataFrame, block_size: int,
                          kv_bytes_per_token: float | Mapping[int, float]) -> dict[str, Any]:
    """KV waste and batching figures from the steps frame (time-weighted over busy time).

    Parameters
    ----------
    steps : pandas.DataFrame
        The engine's step table (needs ``kv_blocks_used``, ``kv_tokens_used``,
        ``num_padding_seqs``, ``batch_size``, ``step_time_s``).
    block_size : int
        Tokens per KV block.
    kv_bytes_per_token : float or mapping of int to float
        KV bytes of one token on one GPU of a replica; ``{replica_id: bytes}`` when replicas
        differ (a degrade fallback set of another model): each step is charged its replica's.

    Returns
    -------
    dict
        ``max_concurrency`` (largest batch), ``padding_waste`` (share of slot-steps doing no
        useful work: sum of padding slots / sum of batch slots), ``kv_reserved_bytes_mean``,
        ``kv_used_bytes_mean``, ``kv_wasted_bytes_mean`` (per GPU: the mean over every replica's
        steps, each weighted by its duration, i.e. over the replicas' pooled busy time),
        ``mean_kv_fragmentation`` (time-weighted share of
        reserved KV bytes holding no token: 1 - tokens / (blocks x block_size)).
    """
    if steps is None or len(steps) == 0:
        return {"max_concurrency": 0, "padding_waste": None, "kv_reserved_bytes_mean": None,
                "kv_used_bytes_mean": None, "kv_wasted_bytes_mean": None,
                "mean_kv_fragmentation": None}
    # Memory: at most three step-length arrays and one temporary at a time (a 10^7-step
    # table is 80 MB a column); the arithmetic is that of the whole-frame expressions.
    # Each product below is formed in a buffer that is not needed afterwards, in the order
    # that keeps three columns alive at most (float casts of int columns are made a slice
    # at a time on a spooled table: ``_num``); every sum is over the same array as before.
    n_rep = max(1, _num_distinct(steps, "replica_id"))
    w = numeric(steps, "step_time_s")
    wsum = w.sum() or 1.0
    reserved = numeric(steps, "kv_blocks_used", copy=True)
    reserved *= block_size
    bpt = _step_bytes_per_token(steps, kv_bytes_per_token)
    reserved_w = (reserved * w).sum()
    reserved_sum = reserved.sum()
    reserved_b = (float(reserved_w / wsum) * bpt if isinstance(bpt, float)
                  else float((reserved * w * bpt).sum() / wsum))
    tokens = (numeric(steps, "kv_tokens_used", copy=True) if "kv_tokens_used" in steps
              else reserved.copy())
    np.minimum(tokens, reserved, out=tokens)
    np.subtract(reserved, tokens, out=reserved)  # reserved - tokens
    reserved *= w
    frag = float(reserved.sum() / max(reserved_w, 1e-300))
    del reserved
    tokens *= w
    used_b = (float(tokens.sum() / wsum) * bpt if isinstance(bpt, float)
              else float((tokens * bpt).sum() / wsum))
    del tokens, w
    batch = numeric(steps, "batch_size")
    pad = numeric(steps, "num_padding_seqs") if "num_padding_seqs" in steps else 0 * batch
    return {
        "max_concurrency": int(batch.max()),
        "padding_waste": float(pad.sum() / batch.sum()) if batch.sum() else None,
        "kv_reserved_bytes_mean": reserved_b,
        "kv_used_bytes_mean": used_b,
        "kv_wasted_bytes_mean": reserved_b - used_b,
        "mean_kv_fragmentation": frag if reserved_sum else None,
        "num_replicas_with_steps": int(n_rep),
    }
