"""What the readers of recorded runs (:mod:`simulator.observe.readers`) share: error
collection, JSON reading with line numbers, prefix-hash ids, the outcome table and request specs.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.base.input_limits import InputLimitError, load_json
from simulator.base.request import RequestSpec
from simulator.observe.record import OUTCOME_COLUMNS, RecordedRun, RecordError
from simulator.workload.errors import WorkloadError
from simulator.workload.readers import _Errors

#: vLLM's default KV block size on CUDA (``CacheConfig.DEFAULT_BLOCK_SIZE = 16`` in
#: ``vllm/config/cache.py``); the prefix-hash block of records that do not state one.
DEFAULT_BLOCK_SIZE = 16

#: Expected Python type of each engine setting a record may carry (vLLM names).
_SETTING_TYPES: dict[str, type] = {
    "max_num_seqs": int, "max_num_batched_tokens": int, "block_size": int,
    "num_gpu_blocks": int, "tensor_parallel_size": int, "data_parallel_size": int,
    "pipeline_parallel_size": int, "max_model_len": int, "seed": int, "device_count": int,
    "enable_prefix_caching": bool, "enable_chunked_prefill": bool,
    "enable_expert_parallel": bool, "async_scheduling": bool, "enforce_eager": bool,
    "gpu_memory_utilization": float, "model": str, "vllm_version": str, "device_name": str,
    "dtype": str, "kv_cache_dtype": str, "policy": str, "quantization": str,
}


# --------------------------------------------------------------------------------- helpers
class _RecErrors(_Errors):
    """The workload readers' first-bad-row collector, raising :class:`RecordError`."""

    def raise_if_any(self) -> None:
        try:
            super().raise_if_any()
        except WorkloadError as e:
            raise RecordError(str(e)) from None


def _type_ok(value: Any, want: type) -> bool:
    if want is bool:
        return isinstance(value, bool)
    if want is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if want is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(float(value))
    return isinstance(value, want)


def _kind(want: type) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[want]


def _key_line(text: str, keys: tuple[str, ...]) -> int | None:
    """1-based line of the last key of ``keys`` in a JSON text, found after each parent key in
    turn (``("engine_kwargs", "max_num_seqs")``); None when not found."""
    pos = 0
    for k in keys:
        i = text.find(f'"{k}"', pos)
        if i < 0:
            return None
        pos = i + 1
    return text.count("\n", 0, pos) + 1


def _read_json(path: Path, shown: str) -> tuple[Any, str]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise RecordError(f"{shown}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise RecordError(f"{shown}: not UTF-8 text ({e.reason})") from None
    try:
        return load_json(text), text
    except json.JSONDecodeError as e:
        raise RecordError(f"{shown}:{e.lineno}: invalid JSON ({e.msg})") from None
    except InputLimitError as e:  # nesting or an integer's digits
        raise RecordError(e.at(shown)) from None


def _stable_hash(data: bytes) -> int:
    """A process-independent 63-bit id: BLAKE2b (8-byte digest) shifted right one bit (the
    rule of :func:`simulator.workload.stable_int_hash`)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1


def prefix_hash_ids(token_ids, block_size: int) -> tuple[int, ...]:
    """Ids of a prompt's full KV blocks, for prefix sharing.

    Each full ``block_size``-token block of ``token_ids`` gets the hash of its own tokens
    (little-endian int64 bytes, :func:`_stable_hash`); a trailing partial block gets none
    (vLLM caches full blocks only). The KV manager chains the ids (block ``j``'s key depends
    on blocks ``0..j``), so equal ids at different positions or after different prefixes
    never share a block.

    Parameters
    ----------
    token_ids : sequence of int
        The prompt's token ids.
    block_size : int
        Tokens per KV block (>= 1).

    Returns
    -------
    tuple of int
        ``len(token_ids) // block_size`` ids in ``[0, 2**63)``.

    Raises
    ------
    ValueError
        If ``block_size`` < 1.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    ids = np.asarray(token_ids, dtype="<i8")
    n = len(ids) // block_size
    blocks = ids[: n * block_size].reshape(n, block_size) if n else ids[:0].reshape(0, 1)
    return tuple(_stable_hash(b.tobytes()) for b in blocks)


def specs_with_block_size(run: RecordedRun, block_size: int) -> list[RequestSpec]:
    """``run.specs`` with prefix ids re-hashed for ``block_size`` (when the record has prompt
    token ids and ``block_size`` differs from the block they were hashed with)."""
    ids = run.extra.get("prompt_token_ids")
    if ids is None or run.specs and run.specs[0].prefix_block_tokens == block_size:
        return run.specs
    return [_spec_with_ids(s, ids[s.request_id], block_size) for s in run.specs]


def _spec_with_ids(s: RequestSpec, token_ids, block_size: int) -> RequestSpec:
    h = prefix_hash_ids(token_ids, block_size) if token_ids is not None else ()
    return RequestSpec(s.request_id, s.arrival_time_s, s.num_prompt_tokens, s.num_output_tokens,
                       max_tokens=s.max_tokens, tenant=s.tenant, priority=s.priority,
                       slice=s.slice, cancel_after_s=s.cancel_after_s,
                       prefix_hash_ids=h or None, prefix_block_tokens=block_size,
                       source_line=s.source_line)


def _run_name(path: Path) -> str:
    """``RTX4090/Llama-3.1-8B`` for ``.../RTX4090/Llama-3.1-8B/vllm/requests.jsonl``."""
    d = path.parent
    if d.name == "vllm":
        d = d.parent
        return f"{d.parent.name}/{d.name}" if d.parent.name else d.name
    return path.stem


def _refuse_duplicate_ids(rec_ids: list[str], lines, shown: str) -> None:
    """Raise :class:`RecordError` naming both lines of the first ``request_id`` seen twice
    (a record's requests are matched to the simulation's by it, one to one)."""
    first_line: dict[str, int] = {}
    for rid, ln in zip(rec_ids, lines):
        prev = first_line.setdefault(rid, int(ln))
        if prev != int(ln):
            raise RecordError(f"{shown}:{int(ln)}: request_id {rid!r} repeats the one on "
                              f"line {prev}; each request needs its own id")


def _outcomes(rec_ids: list[str], arrival, scheduled, first, last, prompt, output,
              itls: list | None = None, tpot=None) -> tuple[pd.DataFrame, np.ndarray]:
    """Sorted (stable, by arrival) outcome table with times from the first arrival, and the
    sort order applied."""
    order = np.argsort(arrival, kind="stable")
    t0 = float(arrival[order[0]]) if len(order) else 0.0
    n = len(order)

    def rel(x):
        return np.asarray(x, dtype=float)[order] - t0

    a, s, f, last_ = rel(arrival), rel(scheduled), rel(first), rel(last)
    out = np.asarray(output, dtype=np.int64)[order]
    with np.errstate(invalid="ignore", divide="ignore"):
        own = np.where(out >= 2, (last_ - f) / (out - 1.0), np.nan)
    if tpot is not None:
        given = np.asarray(tpot, dtype=float)[order]
        own = np.where(np.isnan(given), own, given)
    df = pd.DataFrame({
        "request_id": np.arange(n, dtype=np.int64),
        "record_request_id": [rec_ids[i] for i in order.tolist()],
        "arrival_s": a, "scheduled_s": s, "first_token_s": f, "last_token_s": last_,
        "num_prompt_tokens": np.asarray(prompt, dtype=np.int64)[order],
        "num_output_tokens": out,
        "ttft_s": f - a, "tpot_s": own, "e2e_latency_s": last_ - a, "queue_delay_s": s - a,
    })
    if itls is not None:
        df["itl_s"] = [itls[i] for i in order.tolist()]
    return df[[*OUTCOME_COLUMNS, *(["itl_s"] if itls is not None else [])]], order


def _specs(outcomes: pd.DataFrame, token_ids: list | None, block_size: int,
           lines: np.ndarray | None = None) -> list[RequestSpec]:
    arr = outcomes["arrival_s"].tolist()
    pr = outcomes["num_prompt_tokens"].tolist()
    out = outcomes["num_output_tokens"].tolist()
    ln = [None] * len(arr) if lines is None else [int(x) for x in lines]
    specs = []
    for i in range(len(arr)):
        h = prefix_hash_ids(token_ids[i], block_size) if token_ids is not None else ()
        specs.append(RequestSpec(i, float(arr[i]), int(pr[i]), int(out[i]),
                                 prefix_hash_ids=h or None, prefix_block_tokens=block_size,
                                 source_line=ln[i]))
    return specs
