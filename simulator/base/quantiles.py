"""The one percentile definition of servesim, and exact percentiles of a long sample.

:func:`weighted_percentiles` is the inverse of the empirical CDF (Hyndman & Fan definition 1):
every percentile that servesim reports (run summaries, reports, sweeps, plans, ``validate``,
and ``servesim trace``'s workload statistics) comes from it, so it is an observed value and
the same for a weighted sample as for the expanded one. The module imports nothing of the
package but numpy, so the workload layer (``simulator.workload.describe``) uses it too
(``tests/test_import_graph.py`` places it with the pure-maths layer).

Sorting a long sample costs memory: an ``argsort`` order and the permuted weights cost 16 bytes
a sample (290 MB for the 18M inter-token-latency samples of a million-request run, the largest
part of that run's peak memory). For non-negative values with integer weights
:func:`select_percentiles` gives the *same* values, bit for bit, by selection in two passes
over fixed-size chunks:

1. Bucket every value by the top bits of its IEEE-754 pattern (for non-negative doubles the
   int64 view orders like the value, so a bucket is an interval of values and the buckets are
   ordered) and add its weight to the bucket (``np.bincount``; integer weights sum exactly in
   float64 below 2**53, checked).
2. For each percentile, the target cumulative weight ``T = ceil(q / 100 * total)`` falls in one
   bucket; gather that bucket's values, sort them (a small set) and take the first value whose
   cumulative weight, counted from the buckets before it, reaches ``T``.

That is the inverse-CDF definition the sorting path uses, with the same integer arithmetic, so
the two paths agree exactly. Memory: O(chunk + buckets + one bucket's values); time O(n), so it
is also the faster path for any sample past :data:`SELECT_MIN_SAMPLES`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SELECT_MIN_SAMPLES", "as_weights", "kept_samples", "select_percentiles",
           "weighted_percentiles"]

#: Samples from which :func:`weighted_percentiles` selects instead of sorting: selection is
#: faster from about 20,000 samples on (3x at 65,536, 4-6x at 400,000: a stable ``argsort``
#: is O(n log n), the bucket passes O(n)); below, the sort is cheap and its memory small.
SELECT_MIN_SAMPLES = 1 << 16

_CHUNK = 1 << 20          # values per pass step: 8 MB temporaries
_BUCKET_BITS = 16         # 65,536 buckets
_EXACT_INT = float(2**53)
_FEW_BUCKETS = 8          # up to this many buckets, _gather compares keys one bucket at a time


def select_percentiles(v: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray | None:
    """Inverse-CDF weighted percentiles by bucketed selection, or ``None`` where not exact.

    Parameters
    ----------
    v : ndarray of float64, shape (n,)
        Values, no NaN (the caller drops them), n >= 1.
    w : ndarray of int64 or float64, shape (n,)
        Positive integer weights (zero weights already dropped); float64 weights must hold
        integers (a run's ITL multiplicities read back as floats), checked.
    q : ndarray of float, shape (m,)
        Percentiles in percent, in ``[0, 100]``.

    Returns
    -------
    ndarray of float64, shape (m,), or None
        ``min { v_k : W(v <= v_k) >= ceil(q / 100 * W_total) }`` for each ``q``: the result of
        the sorting path exactly. ``None`` when the shortcut does not apply (a negative value or
        ``-0.0``, weights that are not integers, or a total weight of 2**53 or more); the
        caller then sorts.
    """
    if w.dtype.kind not in "if" or v.dtype != np.float64:
        return None
    bits = v.view(np.int64)
    n = v.size
    lo = hi = None
    total = 0
    for s in range(0, n, _CHUNK):
        b = bits[s:s + _CHUNK]
        bmin, bmax = int(b.min()), int(b.max())
        if bmin < 0:  # a negative value or -0.0: the int view no longer orders like the value
            return None
        lo = bmin if lo is None else min(lo, bmin)
        hi = bmax if hi is None else max(hi, bmax)
        wc = w[s:s + _CHUNK]
        if wc.dtype.kind == "f" and not (np.all(np.isfinite(wc)) and np.all(np.floor(wc) == wc)
                                         and wc.max() < _EXACT_INT):
            return None  # non-integer float weights: the caller sorts
        total += int(wc.sum())  # integers below 2**53: exact in float64 too
    if total >= _EXACT_INT:
        return None
    shift = max(0, (hi - lo).bit_length() - _BUCKET_BITS)
    nb = ((hi - lo) >> shift) + 1
    weight = np.zeros(nb, dtype=np.float64)
    for s in range(0, n, _CHUNK):
        key = (bits[s:s + _CHUNK] - lo) >> shift
        weight += np.bincount(key, weights=w[s:s + _CHUNK], minlength=nb)
    cum = np.cumsum(weight).astype(np.int64)   # exact: integer sums below 2**53
    target = np.ceil((q / 100.0) * total).astype(np.int64)
    buckets = np.searchsorted(cum, target, side="left")
    buckets = np.minimum(buckets, nb - 1)
    out = np.empty(q.shape, dtype=np.float64)
    wanted = np.unique(buckets)
    keys, values, weights = _gather(bits, v, w, lo, shift, wanted)
    for b in wanted:
        sel = keys == b
        vals, wts = values[sel], weights[sel]
        order = np.argsort(vals, kind="stable")
        before = int(cum[b - 1]) if b > 0 else 0
        c = np.cumsum(wts[order]) + before
        for i in np.flatnonzero(buckets == b):
            k = min(int(np.searchsorted(c, target[i], side="left")), c.size - 1)
            out[i] = vals[order[k]]
    return out


def _gather(bits, v, w, lo: int, shift: int, buckets: np.ndarray):
    """The bucket keys, values and weights of the samples in ``buckets``, in one pass over
    the chunks."""
    ks, vs, ws = [], [], []
    few = 0 < buckets.size <= _FEW_BUCKETS
    for s in range(0, v.size, _CHUNK):
        key = (bits[s:s + _CHUNK] - lo) >> shift
        if few:  # a comparison a bucket (np.isin: 11 ms a chunk of 2**20, this 1 to 3 ms)
            m = key == buckets[0]
            for b in buckets[1:]:
                m |= key == b
        else:
            m = np.isin(key, buckets)
        ks.append(key[m])
        vs.append(v[s:s + _CHUNK][m])
        ws.append(w[s:s + _CHUNK][m])
    return np.concatenate(ks), np.concatenate(vs), np.concatenate(ws)


def weighted_percentiles(values, weights, qs) -> np.ndarray:
    """Percentiles of a weighted sample by the inverse of its empirical CDF.

    For a percentile ``q`` (in percent) the result is the smallest value ``v`` whose cumulative
    weight reaches the fraction ``q / 100`` of the total weight::

        P(q) = min { v_k : sum_{j <= k} w_j >= (q / 100) * sum_j w_j }   (values sorted)

    with ``P(0)`` the smallest value of positive weight. With integer weights this equals
    ``np.percentile`` of the sample in which each value is repeated ``weight`` times, using
    ``method="inverted_cdf"``; with equal weights it equals ``np.percentile(values, qs,
    method="inverted_cdf")`` exactly (Hyndman & Fan definition 1).

    Parameters
    ----------
    values : array_like of float, shape (n,)
        Sample values (any unit; the result has the same unit). NaN values are ignored.
    weights : array_like of float, shape (n,) or None
        Non-negative weight (multiplicity) of each value; ``None`` means all ones. Values with
        zero weight are ignored.
    qs : float or array_like of float, shape (m,)
        Percentiles in percent, each in ``[0, 100]``.

    Returns
    -------
    ndarray of float, shape (m,)
        One percentile per entry of ``qs`` (shape ``(1,)`` for a scalar ``qs``); all NaN when
        no value has positive weight.

    Raises
    ------
    ValueError
        If shapes differ, a weight is negative or not finite, or a percentile is outside
        ``[0, 100]``.
    """
    v = np.asarray(values, dtype=float).ravel()
    q = np.atleast_1d(np.asarray(qs, dtype=float))
    if q.ndim != 1:
        raise ValueError("qs must be a scalar or a 1-D array of percentiles")
    if np.any(~np.isfinite(q)) or np.any(q < 0.0) or np.any(q > 100.0):
        raise ValueError(f"percentiles must lie in [0, 100], got {q.tolist()}")
    if weights is None:
        w = np.ones_like(v)
    else:
        w = as_weights(weights)
        if w.shape != v.shape:
            raise ValueError(f"values and weights differ in shape: {v.shape} vs {w.shape}")
        if np.any(~np.isfinite(w)) or np.any(w < 0.0):
            raise ValueError("weights must be finite and non-negative")
    v, w = kept_samples(v, w)
    if v.size == 0:
        return np.full(q.shape, np.nan)
    if np.all(w == w[0]):
        # Equal weights: use unit weights so the float arithmetic below is the same as
        # numpy's (target = n * q / 100) and results match np.percentile bit for bit.
        w = np.ones_like(w)
    if v.size >= SELECT_MIN_SAMPLES:
        # A long sample (a run's ITL): exact selection without the sort.
        sel = select_percentiles(v, w, q)
        if sel is not None:
            return sel
    # Memory: a 10^7-sample ITL array is 80 MB a copy; the order and the sorted copies are
    # made one at a time and the cumulative sum reuses the sorted weights' buffer.
    order = np.argsort(v, kind="stable")
    w = w[order]
    cum = np.cumsum(w, out=w)
    target = (q / 100.0) * cum[-1]
    if cum.dtype.kind == "i":  # exact integer sums: cum >= target <=> cum >= ceil(target)
        target = np.ceil(target).astype(np.int64)
    idx = np.clip(np.searchsorted(cum, target, side="left"), 0, v.size - 1)
    return v[order[idx]]


def as_weights(weights) -> np.ndarray:
    """``weights`` as a 1-D array: integer multiplicities stay int64 (their sums are exact,
    so every result equals that of float weights, and a long ITL sample is not copied),
    anything else float64."""
    w = np.asarray(weights).ravel()
    if w.dtype.kind in "iu":
        return w.astype(np.int64, copy=False)
    return w.astype(float, copy=False)


def kept_samples(v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``v`` and ``w`` without NaN values and zero weights (no copy when none is dropped)."""
    keep = ~np.isnan(v) & (w > 0.0)
    if keep.all():
        return v, w
    return v[keep], w[keep]
