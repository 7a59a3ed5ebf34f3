"""Reader of vLLM V1 ``RequestStateStats`` records (``requests.jsonl`` with ``meta.json``,
``timeseries.csv`` and a peer summary beside it); format: :mod:`simulator.observe.readers`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.base.input_limits import json_line_problem
from simulator.observe.readers_common import (
    _SETTING_TYPES,
    DEFAULT_BLOCK_SIZE,
    _key_line,
    _kind,
    _outcomes,
    _read_json,
    _RecErrors,
    _refuse_duplicate_ids,
    _run_name,
    _specs,
    _type_ok,
)
from simulator.observe.record import RecordedRun, RecordError, RecordWarning, Setting
from simulator.workload.errors import WorkloadError
from simulator.workload.readers import (
    _float_column,
    _int_column,
    _read_csv_table,
    _read_jsonl_table,
)

# ------------------------------------------------------------------------ vLLM request stats
_STATS_TIMES = ("queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")


def _id_text(value) -> str:
    """A record's ``request_id`` as text ("" for a missing or null one)."""
    return "" if value is None else str(value)


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
        last token``) or a ``request_id`` seen twice (both lines named), naming ``file:line``;
        a malformed ``meta.json`` (``file:line``).
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
    cols, prompt, output = _stats_columns(objs, lines, shown)
    # a missing, null or blank request_id defaults to line-N (as in the generic CSV)
    rec_ids = [rid if (rid := _id_text(o.get("request_id"))).strip() else f"line-{ln}"
               for o, ln in zip(objs, lines.tolist())]
    _refuse_duplicate_ids(rec_ids, lines.tolist(), shown)
    outcomes, order = _outcomes(rec_ids, cols["queued_ts"], cols["scheduled_ts"],
                                cols["first_token_ts"], cols["last_token_ts"], prompt, output)
    run = RecordedRun(name=_run_name(p), path=p, format="vllm_request_stats", specs=[],
                      outcomes=outcomes,
                      clock="queued_ts (vLLM engine core, time.monotonic) from the first request")
    run.notes.append("Arrival = queued_ts (the engine's monotonic clock, the clock of the other "
                     "timestamps); arrival_time (frontend wall clock) is not used for timing.")
    mp = Path(meta_path) if meta_path is not None else p.parent / "meta.json"
    meta = _read_meta(run, p, mp, meta_path)
    _cluster_config_settings(p, run)
    block_size = int(run.setting("block_size", DEFAULT_BLOCK_SIZE))
    token_ids = None
    if meta.get("dataset_path"):
        token_ids = _workload_token_ids(p, meta, mp, run, outcomes)
        if token_ids is None and run.setting("enable_prefix_caching", True):
            # prefix caching on (vLLM V1's default) and no token ids: the replay cannot share
            # prefixes the engine shared, so TTFT comes out high; say so on the console too
            warnings.warn(f"{p}: {run.notes[-1]}", RecordWarning, stacklevel=2)
    run.extra["prompt_token_ids"] = token_ids
    run.specs = _specs(outcomes, token_ids, block_size, lines[order])
    # timeseries beside the record, aligned to the first arrival
    ts_path = p.parent / "timeseries.csv"
    if ts_path.is_file():
        offset = _timeseries_offset(meta, objs, order, run)
        run.timeseries = read_timeseries(ts_path, offset_s=offset, notes=run.notes)
    _attach_peer(p, run)
    return run



def _stats_columns(objs: list[dict], lines: np.ndarray, shown: str):
    """The four timestamps (``{name: array}``) and the prompt and output token counts of the
    records, checked: numbers, counts >= 1, ``queued <= scheduled <= first <= last``.

    Raises
    ------
    RecordError
        Naming ``file:line`` of the first bad value.
    """
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
    return cols, prompt, output


def _read_meta(run: RecordedRun, path: Path, mp: Path, given: str | Path | None) -> dict:
    """Read ``meta.json`` (``mp``) into ``run.settings``; ``{}`` when absent (a note says so).

    Raises
    ------
    RecordError
        When ``given`` (the path the caller named) is missing, or it is not a JSON
        object.
    """
    if mp.is_file():
        meta, meta_text = _read_json(mp, str(mp))
        if not isinstance(meta, dict):
            raise RecordError(f"{mp}:1: meta.json must hold a JSON object")
        run.settings.update(_meta_settings(meta, meta_text, mp))
        return meta
    if given is not None:
        raise RecordError(f"{given}: meta.json not found")
    run.notes.append(f"No meta.json beside {path.name}: every setting comes from flags, the "
                     "scenario or defaults.")
    return {}


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
    try:
        lines = wl.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        run.notes.append(f"{shown}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                         f"{e.start}): token ids not used.")
        return None
    for no, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            run.notes.append(f"{shown}:{no}: not valid JSON ({e.msg}): token ids not used.")
            return None
        except (ValueError, RecursionError) as e:  # too deep, an integer too long
            run.notes.append(f"{shown}:{no}: {json_line_problem(text, e) or e}: token ids "
                             "not used.")
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
