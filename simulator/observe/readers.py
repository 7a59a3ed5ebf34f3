"""Readers of real engines' per-request records (``servesim validate --recorded RUN``).

Three formats (``traces/README.md`` section "Recorded runs" has examples):

``vllm_request_stats``
    One JSON object per line with vLLM V1's per-request ``RequestStateStats`` timestamps:
    ``queued_ts``, ``scheduled_ts``, ``first_token_ts``, ``last_token_ts`` (seconds, the
    engine's monotonic clock), ``input_toks``, ``output_toks``, optional ``request_id`` and
    ``arrival_time`` (wall clock). Beside it, optionally: ``meta.json`` (engine kwargs, vLLM
    version, KV-cache block counts, hardware) and ``timeseries.csv`` (running / waiting / KV
    usage per tick). **Arrival = ``queued_ts``**, relative to the earliest one: it is on the
    same clock as the other three timestamps (``arrival_time`` is the frontend's wall clock,
    a different clock), so TTFT = first token - queued, TPOT = (last - first) / (output - 1),
    E2E = last - queued, exactly as the record's own summary defines them. Prompt token ids
    come from the workload file that ``meta.json`` names (``dataset_path``), resolved against
    the run folder and its ancestors, used only when its SHA-256 equals ``dataset_hash``
    (when recorded) and every request's lengths match.
``vllm_bench_json``
    ``vllm bench serve --save-result --save-detailed`` output: lists ``input_lens``,
    ``output_lens``, ``ttfts``, ``itls``, ``latencies``, ``start_times``, ``errors`` (key names
    of ``vllm/benchmarks/serve.py``), plus ``model_id``, ``request_rate``, ``burstiness``,
    ``max_concurrency``. Arrival = ``start_times`` (``time.perf_counter()`` when the client
    sent the request, after its concurrency semaphore), relative to the earliest; without
    ``start_times`` arrivals are drawn from ``request_rate`` and ``burstiness`` as
    ``vllm bench serve`` draws them (an approximation, stated in the run).
``generic_csv``
    One row per request: ``arrival_s``, ``prompt_tokens``, ``output_tokens``, ``ttft_s``,
    ``e2e_s`` (or ``first_token_s`` / ``last_token_s`` on the arrival clock), optional
    ``tpot_s``, ``scheduled_s``, ``queue_delay_s``, ``itl_s`` (a JSON list), ``request_id``,
    ``prompt_token_ids`` (a JSON list): for SGLang, TensorRT-LLM or any other engine.

A malformed record raises :class:`~simulator.observe.record.RecordError` with one line naming
the file and the line (JSONL, CSV, the line of a JSON syntax error or of a ``meta.json``
key) or the JSON key and index (``ttfts[17]``) of the first bad value.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.request import RequestSpec
from simulator.workload.errors import WorkloadError
from simulator.workload.readers import (
    _Errors,
    _float_column,
    _int_column,
    _read_csv_table,
    _read_jsonl_table,
)

from .record import OUTCOME_COLUMNS, RecordedRun, RecordError, Setting

__all__ = [
    "GENERIC_CSV_COLUMNS",
    "detect_record_format",
    "find_recorded_runs",
    "prefix_hash_ids",
    "read_bench_json",
    "read_generic_csv",
    "read_peer_summary",
    "read_recorded",
    "read_request_stats",
    "read_timeseries",
    "specs_with_block_size",
]

#: vLLM's default KV block size on CUDA (``CacheConfig.DEFAULT_BLOCK_SIZE = 16`` in
#: ``vllm/config/cache.py``); the prefix-hash block of records that do not state one.
DEFAULT_BLOCK_SIZE = 16

#: Required and optional columns of the generic per-request CSV (``traces/README.md``).
GENERIC_CSV_COLUMNS = {
    "required": ("arrival_s", "prompt_tokens", "output_tokens"),
    "one_of": (("ttft_s", "first_token_s"), ("e2e_s", "last_token_s")),
    "optional": ("request_id", "tpot_s", "first_token_s", "last_token_s", "scheduled_s",
                 "queue_delay_s", "itl_s", "prompt_token_ids"),
}

#: Expected Python type of each engine setting a record may carry (vLLM names).
_SETTING_TYPES: dict[str, type] = {
    "max_num_seqs": int, "max_num_batched_tokens": int, "block_size": int,
    "num_gpu_blocks": int, "tensor_parallel_size": int, "data_parallel_size": int,
    "pipeline_parallel_size": int, "max_model_len": int, "seed": int, "device_count": int,
    "enable_prefix_caching": bool, "enable_chunked_prefill": bool,
    "enable_expert_parallel": bool, "async_scheduling": bool, "enforce_eager": bool,
    "gpu_memory_utilization": float, "model": str, "vllm_version": str, "device_name": str,
    "dtype": str, "kv_cache_dtype": str, "policy": str,
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
        return json.loads(text), text
    except json.JSONDecodeError as e:
        raise RecordError(f"{shown}:{e.lineno}: invalid JSON ({e.msg})") from None


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


# ------------------------------------------------------------------------ vLLM request stats
_STATS_TIMES = ("queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")


def read_request_stats(path: str | Path, meta_path: str | Path | None = None) -> RecordedRun:
    """Read a vLLM ``RequestStateStats`` JSONL record (plus ``meta.json`` and
    ``timeseries.csv`` next to it when present).

    Parameters
    ----------
    path : str or Path
        The ``requests.jsonl`` file.
    meta_path : str or Path, optional
        The run's ``meta.json`` (default: the one beside ``path``, when present).

    Returns
    -------
    RecordedRun
        Arrivals are ``queued_ts`` minus the earliest ``queued_ts`` (seconds); outcomes as in
        :data:`~simulator.observe.record.OUTCOME_COLUMNS`; settings from ``meta.json``.

    Raises
    ------
    RecordError
        Missing file; a line that is not a JSON object; a missing or non-numeric field, a
        token count < 1 or timestamps out of order (``queued <= scheduled <= first token <=
        last token``), naming ``file:line``; a malformed ``meta.json`` (``file:line``).
    """
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise RecordError(f"{shown}: recorded requests file not found")
    try:
        objs, lines = _read_jsonl_table(p, shown)
    except WorkloadError as e:
        raise RecordError(str(e)) from None
    if not objs:
        raise RecordError(f"{shown}: no requests in the file")
    errors = _RecErrors(shown)
    cols = {}
    for k in _STATS_TIMES:
        cols[k] = _float_column([o.get(k) for o in objs], lines, k, errors, positive=False)
    prompt = _int_column([o.get("input_toks") for o in objs], lines, "input_toks", errors,
                         min_value=1)
    output = _int_column([o.get("output_toks") for o in objs], lines, "output_toks", errors,
                         min_value=1)
    errors.raise_if_any()
    for a, b in itertools.pairwise(_STATS_TIMES):
        bad = cols[b] < cols[a]
        if bad.any():
            i = int(np.argmax(bad))
            errors.add(int(lines[i]), f"{b} {float(cols[b][i])!r} is before {a} "
                                      f"{float(cols[a][i])!r}")
    errors.raise_if_any()
    rec_ids = [str(o.get("request_id", f"line-{ln}")) for o, ln in zip(objs, lines.tolist())]
    outcomes, order = _outcomes(rec_ids, cols["queued_ts"], cols["scheduled_ts"],
                                cols["first_token_ts"], cols["last_token_ts"], prompt, output)
    run = RecordedRun(name=_run_name(p), path=p, format="vllm_request_stats", specs=[],
                      outcomes=outcomes,
                      clock="queued_ts (vLLM engine core, time.monotonic) from the first request")
    run.notes.append("Arrival = queued_ts (the engine's monotonic clock, the clock of the other "
                     "timestamps); arrival_time (frontend wall clock) is not used for timing.")
    mp = Path(meta_path) if meta_path is not None else p.parent / "meta.json"
    meta, meta_text = ({}, "")
    if mp.is_file():
        meta, meta_text = _read_json(mp, str(mp))
        if not isinstance(meta, dict):
            raise RecordError(f"{mp}:1: meta.json must hold a JSON object")
        run.settings.update(_meta_settings(meta, meta_text, mp))
    elif meta_path is not None:
        raise RecordError(f"{meta_path}: meta.json not found")
    else:
        run.notes.append(f"No meta.json beside {p.name}: every setting comes from flags, the "
                         "scenario or defaults.")
    _cluster_config_settings(p, run)
    block_size = int(run.setting("block_size", DEFAULT_BLOCK_SIZE))
    token_ids = None
    if meta.get("dataset_path"):
        token_ids = _workload_token_ids(p, meta, mp, run, outcomes)
    run.extra["prompt_token_ids"] = token_ids
    run.specs = _specs(outcomes, token_ids, block_size, lines[order])
    # timeseries beside the record, aligned to the first arrival
    ts_path = p.parent / "timeseries.csv"
    if ts_path.is_file():
        offset = _timeseries_offset(meta, objs, order, run)
        run.timeseries = read_timeseries(ts_path, offset_s=offset, notes=run.notes)
    _attach_peer(p, run)
    return run


def _meta_settings(meta: dict, text: str, path: Path) -> dict[str, Setting]:
    """Engine settings from ``meta.json``: the resolved vLLM config first (what the engine ran
    with), then the ``kv_cache`` block, then ``engine_kwargs`` (what the harness passed), then
    the top level and ``hardware``."""
    shown = path.name
    out: dict[str, Setting] = {}

    def put(name: str, value: Any, keys: tuple[str, ...]) -> None:
        if value is None or name in out:
            return
        want = _SETTING_TYPES.get(name)
        if want is not None and not _type_ok(value, want):
            line = _key_line(text, keys)
            where = f"{path}:{line}" if line else str(path)
            raise RecordError(f"{where}: {'.'.join(keys)} {value!r} is not {_kind(want)}")
        if want is float:
            value = float(value)
        out[name] = Setting(value, f"{shown} {'.'.join(keys)}")

    def section(*keys: str) -> dict:
        d: Any = meta
        for k in keys:
            d = d.get(k) if isinstance(d, dict) else None
        if d is not None and not isinstance(d, dict):
            line = _key_line(text, keys)
            raise RecordError(f"{path}:{line or 1}: {'.'.join(keys)} must be a JSON object")
        return d or {}

    rc = ("resolved_config",)
    for k in ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
              "async_scheduling", "policy"):
        put(k, section(*rc, "scheduler_config").get(k), (*rc, "scheduler_config", k))
    cache = section(*rc, "cache_config")
    for k in ("block_size", "num_gpu_blocks", "enable_prefix_caching", "gpu_memory_utilization"):
        put(k, cache.get(k), (*rc, "cache_config", k))
    put("kv_cache_dtype", cache.get("cache_dtype"), (*rc, "cache_config", "cache_dtype"))
    par = section(*rc, "parallel_config")
    for k in ("tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size",
              "enable_expert_parallel"):
        put(k, par.get(k), (*rc, "parallel_config", k))
    mc = section(*rc, "model_config")
    for k in ("max_model_len", "dtype", "seed", "model", "enforce_eager"):
        put(k, mc.get(k), (*rc, "model_config", k))
    comp = section(*rc, "compilation_config")
    for k in ("cudagraph_capture_sizes", "cudagraph_mode"):
        put(k, comp.get(k), (*rc, "compilation_config", k))
    kv = section("kv_cache")
    for k in ("num_gpu_blocks", "block_size", "gpu_memory_utilization", "enable_prefix_caching"):
        put(k, kv.get(k), ("kv_cache", k))
    ek = section("engine_kwargs")
    for k, v in ek.items():
        put("num_gpu_blocks" if k == "num_gpu_blocks_override" else k, v, ("engine_kwargs", k))
    put("model", meta.get("model"), ("model",))
    put("vllm_version", meta.get("vllm_version"), ("vllm_version",))
    hw = section("hardware")
    put("device_name", hw.get("device_name"), ("hardware", "device_name"))
    put("device_count", hw.get("device_count"), ("hardware", "device_count"))
    return out


def _cluster_config_settings(path: Path, run: RecordedRun) -> None:
    """The GPU name from an LLMServingSim cluster ``config.json`` beside the ``vllm/`` folder,
    when ``meta.json`` does not name the device (``nodes[0].instances[0].hardware``)."""
    if path.parent.name != "vllm":
        return
    cfg = path.parent.parent / "config.json"
    if not cfg.is_file():
        return
    data, _ = _read_json(cfg, str(cfg))
    where = f"{cfg.parent.name}/config.json"
    bw, lat = (data.get("link_bw"), data.get("link_latency")) if isinstance(data, dict) else (
        None, None)
    if isinstance(bw, (int, float)) and not isinstance(bw, bool) and bw > 0:
        # LLMServingSim cluster config: link_bw in GB/s, link_latency in ns (its README)
        run.settings["link_bandwidth_bytes_per_s"] = Setting(
            float(bw) * 1e9, f"{where} link_bw {bw} GB/s (the deployment's GPU link)")
    if isinstance(lat, (int, float)) and not isinstance(lat, bool) and lat >= 0:
        run.settings["link_latency_s"] = Setting(
            float(lat) * 1e-9, f"{where} link_latency {lat} ns")
    if "device_name" in run.settings:
        return
    try:
        hw = data["nodes"][0]["instances"][0]["hardware"]
    except (KeyError, IndexError, TypeError):
        return
    if isinstance(hw, str) and hw:
        run.settings["device_name"] = Setting(
            hw, f"{where} nodes[0].instances[0].hardware "
                "(LLMServingSim cluster config; meta.json names no device)")


def _find_upwards(start: Path, rel: str) -> Path | None:
    """The first ``ancestor / rel`` that is a file, for ``start`` and each of its parents."""
    for base in [start, *start.parents]:
        q = base / rel
        if q.is_file():
            return base
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _record_index(rec_id: str, fallback: int) -> int:
    """The workload line a request id points at: ``bench-17`` -> 17 (vLLM's benchmark ids end
    in the request's index); other ids -> the request's position in the record."""
    m = re.search(r"(\d+)$", rec_id)
    return int(m.group(1)) if m else fallback


def _workload_token_ids(path: Path, meta: dict, meta_path: Path, run: RecordedRun,
                        outcomes: pd.DataFrame) -> list | None:
    """Prompt token ids per outcome row from the workload file ``meta.json`` names, or None
    (with a note saying why)."""
    rel = str(meta["dataset_path"])
    root = _find_upwards(path.parent, rel)
    if root is None:
        run.notes.append(f"meta.json dataset_path {rel!r} not found next to the run or in its "
                         "parent folders: no prompt token ids, so no prefix sharing in the "
                         "replay.")
        return None
    run.root = root
    wl = root / rel
    shown = str(wl)
    want = meta.get("dataset_hash")
    if isinstance(want, str) and want:
        got = _sha256(wl)
        if got != want:
            alt = next((q for q in sorted(wl.parent.glob("*.jsonl"))
                        if q != wl and _sha256(q) == want), None)
            if alt is None:
                run.notes.append(f"{rel}: its SHA-256 differs from meta.json dataset_hash and no "
                                 "file beside it has that hash: token ids not used (no prefix "
                                 "sharing in the replay).")
                return None
            run.notes.append(f"{rel}: its SHA-256 differs from meta.json dataset_hash (it is not "
                             f"the file the run read); {alt.name} in the same folder has the "
                             "recorded hash and supplies the token ids.")
            wl, shown = alt, str(alt)
        else:
            run.notes.append(f"{rel}: SHA-256 equals meta.json dataset_hash.")
    rows: list[dict] = []
    with open(wl, encoding="utf-8") as f:
        for no, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                run.notes.append(f"{shown}:{no}: not valid JSON ({e.msg}): token ids not used.")
                return None
            if not isinstance(obj, dict) or "sub_requests" in obj:
                run.notes.append(f"{shown}:{no}: not a flat request (agentic sessions are not "
                                 "read): token ids not used.")
                return None
            rows.append(obj)
    ids = []
    rec = outcomes["record_request_id"].tolist()
    pr = outcomes["num_prompt_tokens"].tolist()
    out = outcomes["num_output_tokens"].tolist()
    for i, rid in enumerate(rec):
        j = _record_index(rid, i)
        w = rows[j] if 0 <= j < len(rows) else None
        tok = w.get("input_tok_ids") if w else None
        if (w is None or w.get("input_toks") != pr[i] or w.get("output_toks") != out[i]
                or not isinstance(tok, list) or len(tok) != pr[i]
                or not all(isinstance(t, int) and not isinstance(t, bool) for t in tok)):
            run.notes.append(f"{Path(shown).name}: request {rid} does not match workload line "
                             f"{j + 1} (lengths or token ids): token ids not used.")
            return None
        ids.append(tok)
    run.token_ids_source = f"{Path(shown).name} input_tok_ids"
    run.notes.append(f"Prompt token ids from {Path(shown).name} (request bench-N = workload "
                     f"line N+1); all {len(ids)} requests' prompt and output lengths match.")
    return ids


def _timeseries_offset(meta: dict, objs: list[dict], order: np.ndarray,
                       run: RecordedRun) -> float:
    """Seconds to add to the timeseries' ``t`` to put it on the replay clock (0 = the first
    arrival): ``started_at`` - the first request's ``arrival_time`` (both wall clock)."""
    import datetime as dt
    started = meta.get("started_at")
    first = objs[int(order[0])].get("arrival_time")
    if isinstance(started, str) and isinstance(first, (int, float)):
        try:
            t = dt.datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
        except ValueError:
            t = None
        if t is not None:
            off = t - float(first)
            run.notes.append(f"timeseries.csv t is seconds from meta.json started_at, "
                             f"{-off:.3f} s before the first request's arrival_time; shifted by "
                             f"{off:+.3f} s onto the replay clock.")
            return off
    run.notes.append("timeseries.csv t taken as seconds from the first arrival (no started_at "
                     "/ arrival_time to align it).")
    return 0.0


def read_timeseries(path: str | Path, *, offset_s: float = 0.0,
                    notes: list[str] | None = None) -> pd.DataFrame:
    """Read an engine's sampled timeseries (``t, running, waiting[, kv_cache_pct]``).

    Parameters
    ----------
    path : str or Path
        CSV with a time column ``t`` or ``time_s`` (seconds), ``running`` and ``waiting``
        (requests) and optionally ``kv_cache_pct`` (percent of KV blocks in use).
    offset_s : float
        Added to the times (seconds), to put them on the replay clock.
    notes : list of str, optional
        Receives a note when the KV column is zero throughout (then reported as NaN).

    Returns
    -------
    pandas.DataFrame
        :data:`~simulator.observe.record.TIMESERIES_COLUMNS`.

    Raises
    ------
    RecordError
        A missing column or a non-numeric or negative value, naming ``file:line``.
    """
    shown = str(path)
    try:
        header, rows, lines = _read_csv_table(Path(path), shown)
    except WorkloadError as e:
        raise RecordError(str(e)) from None
    tcol = "t" if "t" in header else "time_s" if "time_s" in header else None
    missing = [c for c in ("running", "waiting") if c not in header]
    if tcol is None or missing:
        raise RecordError(f"{shown}: a timeseries needs columns t (or time_s), running, waiting; "
                          f"it has {', '.join(header)}")
    errors = _RecErrors(shown)

    def col(name):
        j = header.index(name)
        return [r[j] for r in rows]

    t = _float_column(col(tcol), lines, tcol, errors, positive=False)
    run_ = _float_column(col("running"), lines, "running", errors, positive=False)
    wait = _float_column(col("waiting"), lines, "waiting", errors, positive=False)
    kv = (_float_column(col("kv_cache_pct"), lines, "kv_cache_pct", errors, positive=False)
          if "kv_cache_pct" in header else np.full(len(rows), np.nan))
    errors.raise_if_any()
    if "kv_cache_pct" in header and len(kv) and not np.any(kv > 0):
        if notes is not None:
            notes.append(f"{Path(path).name}: kv_cache_pct is 0 throughout (not recorded): the "
                         "record's KV usage is not compared.")
        kv = np.full(len(rows), np.nan)
    return pd.DataFrame({"time_s": t + offset_s, "num_running": run_, "num_waiting": wait,
                         "kv_cache_usage": kv / 100.0})


def _attach_peer(path: Path, run: RecordedRun) -> None:
    base = path.parent.parent if path.parent.name == "vllm" else path.parent
    summ = base / "validation" / "summary.txt"
    if summ.is_file():
        run.peer = read_peer_summary(summ)


# ------------------------------------------------------------------------ peer summary
_PEER_LINE = re.compile(r"^\s*(TTFT|TPOT|ITL|Latency|E2E)\s+(Mean|Median|P\d+)\s+"
                        r"([-+\d.eE]+)\s+([-+\d.eE]+)\s+([-+\d.eE]+)%\s*$")


def read_peer_summary(path: str | Path) -> dict | None:
    """A peer simulator's published error table (LLMServingSim ``validation/summary.txt``).

    The file lists ``<metric> <stat> <real> <simulated> <diff>%`` rows in milliseconds, e.g.
    ``TTFT Mean 65456.6 65820.2 +0.6%``; ``Latency`` is end-to-end latency, ``Median`` p50.
    These are *their* numbers with *their* percentile definition, reported as published.

    Returns
    -------
    dict or None
        ``{"name", "source", "unit": "ms", "metrics": {ttft|tpot|itl|e2e: {mean|p50|p90|
        ...: {"real", "sim", "pct_error"}}}}``; None when no row parses.
    """
    p = Path(path)
    metrics: dict[str, dict] = {}
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        m = _PEER_LINE.match(line)
        if not m:
            continue
        name = {"Latency": "e2e", "E2E": "e2e"}.get(m.group(1), m.group(1).lower())
        stat = "p50" if m.group(2) == "Median" else m.group(2).lower()
        metrics.setdefault(name, {})[stat] = {"real": float(m.group(3)),
                                              "sim": float(m.group(4)),
                                              "pct_error": float(m.group(5))}
    if not metrics:
        return None
    peer = "LLMServingSim" if any("llmservingsim" in s.lower() for s in p.parts) \
        else "peer simulator"
    return {"name": peer, "source": str(p), "unit": "ms", "metrics": metrics}


# ------------------------------------------------------------------------ vllm bench serve
def _bench_list(data: dict, key: str, n: int | None, shown: str, required: bool) -> list | None:
    v = data.get(key)
    if v is None:
        if required:
            raise RecordError(f"{shown}: key {key!r} is missing (save with vllm bench serve "
                              "--save-result --save-detailed)")
        return None
    if not isinstance(v, list):
        raise RecordError(f"{shown}: {key} must be a list, got {type(v).__name__}")
    if n is not None and len(v) != n:
        raise RecordError(f"{shown}: {key} has {len(v)} entries but input_lens has {n}")
    return v


def _num(v: Any, key: str, i: int, shown: str, *, integer: bool = False,
         min_value: float = 0.0) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and integer and not float(v).is_integer():
        ok = False
    if not ok:
        kind = "an integer" if integer else "a finite number"
        raise RecordError(f"{shown}: {key}[{i}] {v!r} is not {kind}")
    if v < min_value:
        raise RecordError(f"{shown}: {key}[{i}] {v!r} must be >= {min_value:g}")
    return float(v)


def _bench_arrivals(n: int, rate: Any, burstiness: Any, seed: int) -> np.ndarray:
    """Send times as ``vllm bench serve`` draws them without timestamps
    (``vllm/benchmarks/serve.py`` ``get_request``): gamma gaps with shape ``burstiness`` and
    scale ``1 / (rate x burstiness)``, cumulated and rescaled so the last equals ``n / rate``;
    all zero for an infinite rate. Drawn with ``numpy.random.default_rng(seed)``: the same
    distribution, not the run's exact draws."""
    r = float("inf") if rate in (None, "inf") else float(rate)
    if not math.isfinite(r):
        return np.zeros(n)
    b = 1.0 if burstiness is None else float(burstiness)
    if not (r > 0 and b > 0):
        raise ValueError("request_rate and burstiness must be > 0")
    if not math.isfinite(b):
        gaps = np.full(n, 1.0 / r)
    else:
        gaps = np.random.default_rng(seed).gamma(shape=b, scale=1.0 / (r * b), size=n)
    t = np.cumsum(gaps)
    if t[-1] > 0:
        t *= (n / r) / t[-1]
    return t


def read_bench_json(path: str | Path, *, seed: int = 0) -> RecordedRun:
    """Read a ``vllm bench serve --save-result --save-detailed`` result file.

    Parameters
    ----------
    path : str or Path
        The result JSON.
    seed : int
        Seeds the arrival draw when the file has no ``start_times`` (older vLLM).

    Returns
    -------
    RecordedRun
        One request per successful entry (``errors[i]`` empty and ``output_lens[i]`` >= 1):
        arrival = ``start_times[i]`` - min(start_times); TTFT = ``ttfts[i]``; E2E =
        ``latencies[i]`` (or TTFT + sum of ``itls[i]`` when absent); TPOT = (E2E - TTFT) /
        (output - 1), as ``vllm bench serve`` computes it; ITLs = ``itls[i]``.

    Raises
    ------
    RecordError
        Invalid JSON (``file:line``); a missing key, lists of unequal length, a bad value
        (``file: ttfts[17] ...``); no successful request.
    """
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise RecordError(f"{shown}: recorded benchmark file not found")
    data, _ = _read_json(p, shown)
    if not isinstance(data, dict):
        raise RecordError(f"{shown}:1: a vllm bench serve result must be a JSON object")
    inp = _bench_list(data, "input_lens", None, shown, True)
    n = len(inp)
    outl = _bench_list(data, "output_lens", n, shown, True)
    ttfts = _bench_list(data, "ttfts", n, shown, True)
    lat = _bench_list(data, "latencies", n, shown, False)
    itls = _bench_list(data, "itls", n, shown, lat is None)
    starts = _bench_list(data, "start_times", n, shown, False)
    errs = _bench_list(data, "errors", n, shown, False)
    keep, prompt, output, ttft, e2e, itl_out, st = [], [], [], [], [], [], []
    for i in range(n):
        failed = bool(errs[i]) if errs is not None else False
        if not failed and outl[i] == 0:
            failed = True
        if failed:
            continue
        prompt.append(int(_num(inp[i], "input_lens", i, shown, integer=True, min_value=1)))
        output.append(int(_num(outl[i], "output_lens", i, shown, integer=True, min_value=1)))
        t = _num(ttfts[i], "ttfts", i, shown)
        gaps = None
        if itls is not None:
            g = itls[i]
            if not isinstance(g, list):
                raise RecordError(f"{shown}: itls[{i}] must be a list of seconds")
            gaps = tuple(_num(x, f"itls[{i}]", j, shown) for j, x in enumerate(g))
        e = _num(lat[i], "latencies", i, shown) if lat is not None else t + sum(gaps)
        if e < t:
            raise RecordError(f"{shown}: latencies[{i}] {e!r} is below ttfts[{i}] {t!r}")
        ttft.append(t)
        e2e.append(e)
        itl_out.append(gaps)
        if starts is not None:
            st.append(_num(starts[i], "start_times", i, shown))
        keep.append(i)
    if not keep:
        raise RecordError(f"{shown}: no successful request (every entry has an error or no "
                          "output)")
    approximations, notes = [], []
    if starts is not None:
        arrival = np.asarray(st)
        clock = "start_times (client time.perf_counter() at send) from the first request"
        notes.append("Arrival = start_times, when the client sent each request (after its "
                     "max_concurrency semaphore): the server-side arrival process is replayed.")
    else:
        try:
            arrival = _bench_arrivals(n, data.get("request_rate"), data.get("burstiness"),
                                      seed)[keep]
        except (TypeError, ValueError):
            raise RecordError(f"{shown}: no start_times, and request_rate "
                              f"{data.get('request_rate')!r} / burstiness "
                              f"{data.get('burstiness')!r} cannot give arrivals (need numbers "
                              "> 0 or 'inf')") from None
        clock = "drawn send times (the file has no start_times)"
        approximations.append(
            "The record has no start_times (older vllm bench serve): arrivals are drawn from "
            f"request_rate={data.get('request_rate')!r} and burstiness="
            f"{data.get('burstiness', 1.0)!r} the way vllm bench serve draws them (gamma gaps, "
            f"rescaled to num_prompts / rate; seed {seed}): same distribution, not the same "
            "arrival times."
            + (" The client's max_concurrency cap is not modelled."
               if data.get("max_concurrency") else ""))
    notes.append("TTFT and E2E are client-side (streamed HTTP chunks); the simulator measures "
                 "from the request's arrival at the engine, so a constant client/server "
                 "overhead shows as a TTFT offset.")
    arrival = np.asarray(arrival, dtype=float)
    a = arrival
    ttft_a, e2e_a = np.asarray(ttft), np.asarray(e2e)
    has_itl = itls is not None
    outcomes, _ = _outcomes([str(k) for k in keep], a, np.full(len(a), np.nan), a + ttft_a,
                                a + e2e_a, prompt, output,
                                itls=itl_out if has_itl else None)
    run = RecordedRun(name=p.stem, path=p, format="vllm_bench_json", specs=[],
                      outcomes=outcomes, clock=clock, notes=notes,
                      approximations=approximations, num_failed=n - len(keep))
    if run.num_failed:
        run.notes.append(f"{run.num_failed} failed request(s) in the record are neither "
                         "replayed nor compared.")
    model = data.get("model_id")
    if isinstance(model, str) and model:
        run.settings["model"] = Setting(model, f"{p.name} model_id")
    for k in ("request_rate", "burstiness", "max_concurrency", "num_prompts", "backend",
              "tokenizer_id", "date"):
        if data.get(k) is not None:
            run.extra[k] = data[k]
    # --metadata KEY=VALUE items land at the top level as strings
    from simulator.config import parse_yaml_value
    for k, want in _SETTING_TYPES.items():
        if k in data and k != "model":
            v = data[k]
            v = parse_yaml_value(v) if isinstance(v, str) and want is not str else v
            if not _type_ok(v, want):
                raise RecordError(f"{shown}: {k} {data[k]!r} is not {_kind(want)}")
            run.settings[k] = Setting(float(v) if want is float else v,
                                      f"{p.name} {k} (vllm bench serve --metadata)")
    run.extra["prompt_token_ids"] = None
    run.specs = _specs(outcomes, None, DEFAULT_BLOCK_SIZE)
    return run


# ------------------------------------------------------------------------ generic CSV
def _json_list_col(vals: list, lines: np.ndarray, name: str, errors: _Errors, *,
                   integer: bool) -> list | None:
    out = []
    for v, ln in zip(vals, lines.tolist()):
        if v is None or not str(v).strip():
            out.append(None)
            continue
        try:
            x = json.loads(v)
        except json.JSONDecodeError:
            x = None
        ok = isinstance(x, list) and all(
            isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e)
            and e >= 0 and (not integer or float(e).is_integer()) for e in x)
        if not ok:
            what = "a JSON list of non-negative integers" if integer else \
                "a JSON list of seconds >= 0"
            errors.add(int(ln), f"{name} {str(v)[:40]!r} is not {what}")
            return None
        out.append(tuple(int(e) for e in x) if integer else tuple(float(e) for e in x))
    return out


def read_generic_csv(path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE) -> RecordedRun:
    """Read a generic per-request CSV (any engine; format in ``traces/README.md``).

    Parameters
    ----------
    path : str or Path
        CSV with :data:`GENERIC_CSV_COLUMNS`; times in seconds, on one clock.
    block_size : int
        Tokens per prefix-hash block when the file has ``prompt_token_ids``.

    Returns
    -------
    RecordedRun
        Arrival = ``arrival_s`` - min(arrival_s); first token = arrival + ``ttft_s`` (or
        ``first_token_s``); last token = arrival + ``e2e_s`` (or ``last_token_s``); TPOT =
        ``tpot_s`` when given, else (E2E - TTFT) / (output - 1); no settings (they come from
        flags or a scenario).

    Raises
    ------
    RecordError
        A missing column or a bad value (``file:line``), a first token before the arrival or
        a last token before the first.
    """
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise RecordError(f"{shown}: recorded requests file not found")
    try:
        header, rows, lines = _read_csv_table(p, shown)
    except WorkloadError as e:
        raise RecordError(str(e)) from None
    missing = [c for c in GENERIC_CSV_COLUMNS["required"] if c not in header]
    missing += [" or ".join(g) for g in GENERIC_CSV_COLUMNS["one_of"]
                if not any(c in header for c in g)]
    if missing:
        raise RecordError(f"{shown}: a recorded-run CSV needs column(s) {', '.join(missing)}; "
                          f"the header has {', '.join(header)}")
    if not rows:
        raise RecordError(f"{shown}: no requests in the file")
    errors = _RecErrors(shown)

    def col(name):
        j = header.index(name)
        return [r[j] for r in rows]

    def fcol(name, optional=False):
        if name not in header:
            return None
        return _float_column(col(name), lines, name, errors, positive=False, optional=optional)

    arrival = fcol("arrival_s")
    prompt = _int_column(col("prompt_tokens"), lines, "prompt_tokens", errors, min_value=1)
    output = _int_column(col("output_tokens"), lines, "output_tokens", errors, min_value=1)
    ttft, e2e = fcol("ttft_s"), fcol("e2e_s")
    first = fcol("first_token_s") if ttft is None else None
    last = fcol("last_token_s") if e2e is None else None
    tpot = fcol("tpot_s", optional=True)
    sched = fcol("scheduled_s", optional=True)
    qd = fcol("queue_delay_s", optional=True) if sched is None else None
    itl = (_json_list_col(col("itl_s"), lines, "itl_s", errors, integer=False)
           if "itl_s" in header else None)
    toks = (_json_list_col(col("prompt_token_ids"), lines, "prompt_token_ids", errors,
                           integer=True) if "prompt_token_ids" in header else None)
    errors.raise_if_any()
    f = arrival + ttft if ttft is not None else first
    last_ = arrival + e2e if e2e is not None else last
    for name, bad, msg in (
            ("first token", f < arrival, "first token before the arrival"),
            ("last token", last_ < f, "last token before the first token")):
        if bad.any():
            i = int(np.argmax(bad))
            errors.add(int(lines[i]), msg)
    if toks is not None:
        for i, t in enumerate(toks):
            if t is not None and len(t) != int(prompt[i]):
                errors.add(int(lines[i]), f"prompt_token_ids has {len(t)} ids but prompt_tokens "
                                          f"is {int(prompt[i])}")
                break
    errors.raise_if_any()
    s = arrival + qd if qd is not None else sched if sched is not None else \
        np.full(len(rows), np.nan)
    rec_ids = col("request_id") if "request_id" in header else [f"line-{ln}" for ln in lines]
    outcomes, order = _outcomes([str(x) for x in rec_ids], arrival, s, f, last_, prompt, output,
                                itls=itl, tpot=tpot)
    run = RecordedRun(name=p.stem, path=p, format="generic_csv", specs=[], outcomes=outcomes,
                      clock="arrival_s from the first request")
    token_ids = None
    if toks is not None and all(t is not None for t in toks):
        token_ids = [toks[i] for i in order.tolist()]
        run.token_ids_source = f"{p.name} prompt_token_ids"
    run.extra["prompt_token_ids"] = token_ids
    run.specs = _specs(outcomes, token_ids, block_size, lines[order])
    ts_path = p.parent / "timeseries.csv"
    if ts_path.is_file():
        run.notes.append("timeseries.csv t taken as seconds from the first arrival.")
        run.timeseries = read_timeseries(ts_path, notes=run.notes)
    return run


# ------------------------------------------------------------------------ dispatch
def detect_record_format(path: str | Path) -> tuple[str, Path]:
    """Which reader a ``--recorded`` path needs, and the file it reads.

    A folder: its ``vllm/requests.jsonl`` or ``requests.jsonl``. A file: ``.jsonl`` ->
    ``vllm_request_stats``, ``.json`` -> ``vllm_bench_json``, ``.csv`` -> ``generic_csv``.

    Raises
    ------
    RecordError
        A missing path, a folder without a requests file, or another extension.
    """
    p = Path(path)
    if p.is_dir():
        for cand in (p / "vllm" / "requests.jsonl", p / "requests.jsonl"):
            if cand.is_file():
                return "vllm_request_stats", cand
        raise RecordError(f"{path}: no requests.jsonl (or vllm/requests.jsonl) in this folder")
    if not p.exists():
        raise RecordError(f"{path}: recorded run not found")
    ext = p.suffix.lower()
    if ext in (".jsonl", ".ndjson"):
        return "vllm_request_stats", p
    if ext == ".json":
        return "vllm_bench_json", p
    if ext == ".csv":
        return "generic_csv", p
    raise RecordError(f"{path}: unknown record type {ext or '(no extension)'!r}; expected a run "
                      "folder, requests.jsonl (vLLM request stats), a vllm bench serve .json or "
                      "a .csv")


def read_recorded(path: str | Path, *, seed: int = 0) -> RecordedRun:
    """Read any supported record (:func:`detect_record_format` picks the reader).

    Parameters
    ----------
    path : str or Path
        A run folder, ``requests.jsonl``, a ``vllm bench serve`` JSON or a generic CSV.
    seed : int
        Seeds drawn arrivals (``vllm bench serve`` files without ``start_times`` only).

    Raises
    ------
    RecordError
        See the individual readers.
    """
    fmt, p = detect_record_format(path)
    if fmt == "vllm_request_stats":
        return read_request_stats(p)
    if fmt == "vllm_bench_json":
        return read_bench_json(p, seed=seed)
    return read_generic_csv(p)


def find_recorded_runs(root: str | Path) -> list[Path]:
    """Run folders under ``root``: every folder holding ``requests.jsonl`` and ``meta.json``
    (its ``vllm/`` parent when the files sit in a ``vllm/`` folder), sorted."""
    out = set()
    for req in Path(root).rglob("requests.jsonl"):
        if (req.parent / "meta.json").is_file():
            out.add(req.parent.parent if req.parent.name == "vllm" else req.parent)
    return sorted(out)
