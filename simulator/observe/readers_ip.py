"""Reader of inference-perf experiment folders (github.com/kubernetes-sigs/inference-perf).

A folder holds ``results/config.yaml`` (the configuration inference-perf resolved and ran
with), ``results/stage_<k>_lifecycle_metrics.json`` (client-side latency summaries per load
stage), optionally ``results/summary_lifecycle_metrics.json``, ``profile.yaml`` (the workload
as specified; where it differs from ``results/config.yaml``, what ran wins) and
``exp-config.yaml`` (the vLLM server's arguments). A ``*datasheet*.json`` with a ``name``
beside the folder or in its parent names the GPU; ``model_configs/<model>/config.json`` there
holds the model's Hugging Face config (:func:`~simulator.observe.model_lookup.resolve_model`).

The record has no per-request file: the requests are rebuilt as inference-perf generated them
(:mod:`simulator.observe.ip_workload`) and compared per stage with the recorded summaries, in
inference-perf's definitions (:data:`~simulator.observe.record.METRIC_DEFINITIONS`). Only the
``shared_prefix`` data type with streaming completions is supported (what these runs use).
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from simulator.base.resources import safe_load_yaml
from simulator.observe.ip_workload import (
    PERCENTILE_KEYS,
    SharedPrefixData,
    aiohttp_deadlines,
    constant_arrivals,
    poisson_arrivals,
    prompt_lengths,
    prompt_token_ids,
    shared_prefix_tokens,
    stage_specs,
)
from simulator.observe.readers_common import (
    _SETTING_TYPES,
    DEFAULT_BLOCK_SIZE,
    _key_line,
    _kind,
    _read_json,
    _type_ok,
)
from simulator.observe.record import (
    OUTCOME_COLUMNS,
    RecordedRun,
    RecordedStage,
    RecordError,
    Setting,
)

__all__ = ["IP_METRICS", "is_inference_perf_dir", "read_inference_perf"]

_STAGE_FILE = re.compile(r"^stage_(\d+)_lifecycle_metrics\.json$")
#: Recorded latency (inference-perf name) -> the comparison's metric name.
IP_METRICS: dict[str, str] = {"time_to_first_token": "ttft", "time_per_output_token": "tpot",
                              "inter_token_latency": "itl", "request_latency": "e2e",
                              "normalized_time_per_output_token": "ntpot"}
#: ``exp-config.yaml`` keys that are not vLLM's names.
_EXP_ALIASES = {"tensor_parallelism": "tensor_parallel_size"}
#: Seconds inference-perf waits between a stage's set-up and its first scheduled send
#: (``run_stage``: ``start_time = time.perf_counter() + 1``), and the mean wait of its 1 s
#: poll for the stage's last request.
_STAGE_LEAD_S, _POLL_MEAN_S = 1.0, 0.5


def is_inference_perf_dir(path: Path) -> bool:
    """Whether ``path`` is an inference-perf experiment folder (``results/config.yaml`` and at
    least one ``results/stage_<k>_lifecycle_metrics.json``)."""
    res = path / "results"
    return (res / "config.yaml").is_file() and any(
        _STAGE_FILE.match(q.name) for q in res.glob("stage_*_lifecycle_metrics.json"))


# ------------------------------------------------------------------------ YAML / JSON access
class _Doc:
    """A parsed YAML/JSON document with the line of each key path, for one-line errors."""

    def __init__(self, path: Path, shown: str, required: bool = True):
        self.shown = shown
        self.data: Any = None
        self._node = None
        if not path.is_file():
            if required:
                raise RecordError(f"{shown}: file not found")
            return
        try:
            text = path.read_text(encoding="utf-8-sig")
            self.data = safe_load_yaml(text)
            self._node = yaml.compose(text, Loader=yaml.SafeLoader)
        except OSError as e:
            raise RecordError(f"{shown}: cannot read ({e.strerror})") from None
        except UnicodeDecodeError as e:
            raise RecordError(f"{shown}: not UTF-8 text ({e.reason})") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            raise RecordError(f"{shown}{where}: not valid YAML "
                              f"({getattr(e, 'problem', None) or e})") from None
        if not isinstance(self.data, dict):
            raise RecordError(f"{shown}:1: must be a mapping of keys")

    def line(self, keys: tuple[str, ...]) -> str:
        node, found = self._node, None
        for k in keys:
            if not isinstance(node, yaml.MappingNode):
                break
            hit = next(((kn, vn) for kn, vn in node.value if kn.value == k), None)
            if hit is None:
                break
            found, node = hit[0].start_mark.line + 1, hit[1]
        return f":{found}" if found else ""

    def get(self, dotted: str, want: type, *, required: bool = True, positive: bool = False,
            default: Any = None) -> Any:
        keys = tuple(dotted.split("."))
        v: Any = self.data
        for k in keys:
            if not isinstance(v, dict) or k not in v:
                if required:
                    raise RecordError(f"{self.shown}{self.line(keys)}: key {dotted} is missing")
                return default
            v = v[k]
        if v is None and not required:
            return default
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not _type_ok(v, want) or (positive and not v > 0):
            what = _kind(want) + (" > 0" if positive else "")
            raise RecordError(f"{self.shown}{self.line(keys)}: key {dotted} must be {what}, "
                              f"got {v!r}")
        return v


# ------------------------------------------------------------------------------- stages
def _stat_block(d: dict, text: str, shown: str, keys: tuple[str, ...],
                required: bool) -> dict | None:
    """One recorded summary (``{"mean", "min", "p0.1", ..., "max"}``) as floats; None when
    absent or null and not required."""
    v: Any = d
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    if v is None:
        if required:
            line = _key_line(text, keys)
            raise RecordError(f"{shown}{f':{line}' if line else ''}: key {'.'.join(keys)} is "
                              "missing")
        return None
    if not isinstance(v, dict):
        raise RecordError(f"{shown}:{_key_line(text, keys) or 1}: key {'.'.join(keys)} must be "
                          "an object of statistics")
    out = {}
    for k in ("mean", *PERCENTILE_KEYS):
        x = v.get(k)
        if x is None and k in ("mean", "median", "p90", "p99", "min", "max"):
            line = _key_line(text, (*keys, k))
            raise RecordError(f"{shown}{f':{line}' if line else ''}: key "
                              f"{'.'.join((*keys, k))} is missing")
        if x is not None:
            if not _type_ok(x, float):
                raise RecordError(f"{shown}:{_key_line(text, (*keys, k)) or 1}: key "
                                  f"{'.'.join((*keys, k))} must be a number, got {x!r}")
            out[k] = float(x)
    return out


def _count(d: dict, text: str, shown: str, keys: tuple[str, ...]) -> int:
    v: Any = d
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    if not _type_ok(v, int) or v < 0:
        line = _key_line(text, keys)
        what = "is missing" if v is None else f"must be an integer >= 0, got {v!r}"
        raise RecordError(f"{shown}{f':{line}' if line else ''}: key {'.'.join(keys)} {what}")
    return int(v)


def _read_stage(path: Path, shown: str) -> dict:
    """A stage file's counts, recorded statistics (seconds) and throughput.

    Raises
    ------
    RecordError
        Invalid JSON (``file:line``), a missing or malformed key (``file:line: key ...``),
        successes + failures not the stage's count.
    """
    d, text = _read_json(path, shown)
    if not isinstance(d, dict):
        raise RecordError(f"{shown}:1: a stage summary must be a JSON object")
    n = _count(d, text, shown, ("load_summary", "count"))
    ok = _count(d, text, shown, ("successes", "count"))
    bad = _count(d, text, shown, ("failures", "count"))
    if ok + bad != n:
        raise RecordError(f"{shown}:{_key_line(text, ('load_summary', 'count')) or 1}: "
                          f"load_summary.count {n} is not successes.count {ok} + failures.count "
                          f"{bad}")
    stats = {}
    for name, m in IP_METRICS.items():
        stats[m] = _stat_block(d, text, shown, ("successes", "latency", name), ok > 0)
    tput = d["successes"].get("throughput") or {}
    throughput = {k: float(tput[k]) for k in ("requests_per_sec", "output_tokens_per_sec",
                                              "input_tokens_per_sec")
                  if _type_ok(tput.get(k), float)}
    return {"count": n, "ok": ok, "bad": bad, "stats": stats, "throughput": throughput,
            "prompt_len": _stat_block(d, text, shown, ("successes", "prompt_len"), False),
            "output_len": _stat_block(d, text, shown, ("successes", "output_len"), False),
            "fail_latency": _stat_block(d, text, shown, ("failures", "request_latency"), False),
            "rate": d.get("load_summary", {}).get("requested_rate")}


def _stage_files(res: Path, shown: str) -> list[Path]:
    files = sorted((int(m.group(1)), q) for q in res.iterdir()
                   if (m := _STAGE_FILE.match(q.name)))
    idx = [i for i, _ in files]
    if idx != list(range(len(idx))):
        raise RecordError(f"{shown}/results: stage files {idx} are not numbered 0..{len(idx) - 1}"
                          " (a stage's summary is missing)")
    return [q for _, q in files]


# ------------------------------------------------------------------------------ config
#: the most requests one rebuilt stage may send (rate x duration), and the most prompt tokens
#: the rebuilt prompts may hold (groups x prompts x (system prompt + question)): bounds that
#: keep a rebuild's memory to a few hundred MB and refuse a config no run could have had
MAX_STAGE_REQUESTS = 20_000_000
MAX_PROMPT_TOKENS = 200_000_000


def _check_prompt_tokens(cfg: _Doc, sp: SharedPrefixData) -> None:
    n = sp.num_prompts * (sp.system_prompt_len + sp.question_len)
    if n > MAX_PROMPT_TOKENS:
        raise RecordError(
            f"{cfg.shown}{cfg.line(('data', 'shared_prefix'))}: data.shared_prefix asks for "
            f"{sp.num_groups:,} x {sp.num_prompts_per_group:,} prompts of "
            f"{sp.system_prompt_len + sp.question_len:,} tokens ({n:,} tokens), more than the "
            f"{MAX_PROMPT_TOKENS:,} a rebuild may hold")


def _run_config(cfg: _Doc) -> dict:
    """What ran (``results/config.yaml``): data, load and API settings.

    Raises
    ------
    RecordError
        Another data type than ``shared_prefix``, no streaming, another load type than
        ``constant`` / ``poisson``, a bad stage (``file:line: key ...``).
    """
    dtype = cfg.get("data.type", str)
    if dtype != "shared_prefix":
        raise RecordError(f"{cfg.shown}{cfg.line(('data', 'type'))}: data.type {dtype!r} is not "
                          "supported (servesim rebuilds inference-perf's shared_prefix data only)")
    sp = SharedPrefixData(*(cfg.get(f"data.shared_prefix.{k}", int, positive=True) for k in (
        "num_groups", "num_prompts_per_group", "system_prompt_len", "question_len",
        "output_len")))
    if not cfg.get("api.streaming", bool, required=False, default=False):
        raise RecordError(f"{cfg.shown}{cfg.line(('api', 'streaming'))}: api.streaming must be "
                          "true (without streaming the record has no time to first token)")
    load_type = cfg.get("load.type", str)
    if load_type not in ("constant", "poisson"):
        raise RecordError(f"{cfg.shown}{cfg.line(('load', 'type'))}: load.type {load_type!r} is "
                          "not supported (constant or poisson)")
    stages = cfg.get("load.stages", list)
    if not stages:
        raise RecordError(f"{cfg.shown}{cfg.line(('load', 'stages'))}: load.stages is empty")
    out = []
    for i, st in enumerate(stages):
        if not isinstance(st, dict):
            raise RecordError(f"{cfg.shown}{cfg.line(('load', 'stages'))}: load.stages[{i}] "
                              "must be a mapping with rate and duration")
        for k in ("rate", "duration"):
            v = st.get(k)
            if not (_type_ok(v, float) and v > 0):
                raise RecordError(f"{cfg.shown}{cfg.line(('load', 'stages'))}: key "
                                  f"load.stages[{i}].{k} must be a number > 0, got {v!r}")
        out.append((float(st["rate"]), float(st["duration"])))
        if out[-1][0] * out[-1][1] > MAX_STAGE_REQUESTS:
            raise RecordError(
                f"{cfg.shown}{cfg.line(('load', 'stages'))}: load.stages[{i}] sends "
                f"{out[-1][0]:g} req/s for {out[-1][1]:g} s, more than the "
                f"{MAX_STAGE_REQUESTS:,} requests a rebuilt stage may hold")
    _check_prompt_tokens(cfg, sp)
    return {
        "data": sp, "load_type": load_type, "stages": out,
        "interval": cfg.get("load.interval", float, required=False, default=1.0),
        "timeout": cfg.get("load.request_timeout", float, required=False, positive=True),
        "ignore_eos": cfg.get("server.ignore_eos", bool, required=False, default=False),
        "server": cfg.get("server.type", str, required=False, default="vllm"),
        "api": cfg.get("api.type", str, required=False, default="completion"),
        "tokenizer": cfg.get("tokenizer.pretrained_model_name_or_path", str, required=False),
        "num_workers": cfg.get("load.num_workers", int, required=False),
        "worker_max_concurrency": cfg.get("load.worker_max_concurrency", int, required=False),
    }


def _exp_settings(exp: _Doc, run: RecordedRun, name: str) -> None:
    """The server's arguments (``exp-config.yaml``) as record settings (vLLM names)."""
    for k, v in (exp.data or {}).items():
        key = _EXP_ALIASES.get(k, k)
        want = _SETTING_TYPES.get(key)
        if want is None:
            if k != "app":
                run.notes.append(f"{name} {k}={v!r} is not an engine setting servesim models")
            continue
        if want is float and _type_ok(v, int):
            v = float(v)
        if not _type_ok(v, want):
            raise RecordError(f"{exp.shown}{exp.line((k,))}: key {k} must be {_kind(want)}, "
                              f"got {v!r}")
        run.settings[key] = Setting(v, f"{name} {k}")


def _datasheet_gpu(folder: Path, run: RecordedRun) -> None:
    """The GPU the campaign ran on, from a ``*datasheet*.json`` with a ``name`` in the run's
    folder or its parent (the record's own files do not name it)."""
    for d in (folder, folder.parent):
        for q in sorted(d.glob("*datasheet*.json")):
            try:
                data, _ = _read_json(q, str(q))
            except RecordError:
                continue
            name = data.get("name") if isinstance(data, dict) else None
            if isinstance(name, str) and name.strip():
                rel = q.name if d == folder else f"../{q.name}"
                run.settings["device_name"] = Setting(
                    name, f"{rel} name (the campaign's GPU datasheet; the run's own files do "
                          "not name the GPU)")
                return


def _profile_notes(prof: _Doc, ran: dict, run: RecordedRun) -> None:
    """What ``profile.yaml`` asked for and did not run (the resolved configuration wins)."""
    sp = ((prof.data or {}).get("data") or {}).get("shared_prefix") or {}
    d: SharedPrefixData = ran["data"]
    if sp.get("enable_multi_turn_chat"):
        run.notes.append(
            "profile.yaml sets shared_prefix.enable_multi_turn_chat, which results/config.yaml "
            "(what ran) lacks: the inference-perf version that ran predates the option (its "
            "configuration has no load.trace, added in November 2025 before multi-turn chat), "
            "so every request is a single-turn prompt (the recorded prompt_len is the same in "
            "every stage, as it is without growing conversations)")
    alias = {"num_unique_system_prompts": d.num_groups,
             "num_users_per_system_prompt": d.num_prompts_per_group}
    for k, ran_v in alias.items():
        if k in sp and sp[k] != ran_v:
            run.notes.append(f"profile.yaml shared_prefix.{k}={sp[k]!r} did not run (that "
                             "inference-perf version does not know the alias): results/config.yaml"
                             f" has {ran_v}, which is replayed")


# ------------------------------------------------------------------------------ reading
def _stage_record(k: int, st: dict, rate: float, dur: float, load_type: str, arr: np.ndarray,
                  source: str) -> RecordedStage:
    stats = {m: (None if s is None else {"mean": s["mean"], "p50": s["median"], "p90": s["p90"],
                                          "p99": s["p99"], "min": s["min"], "max": s["max"]})
             for m, s in st["stats"].items()}
    tput = st["throughput"]
    return RecordedStage(
        index=k, name=f"stage {k} ({rate:g} req/s {load_type}, {dur:g} s)",
        start_s=float(arr[0]) if len(arr) else 0.0, end_s=float(arr[-1]) if len(arr) else 0.0,
        num_requests=st["count"], rate=rate, num_success=st["ok"], num_failure=st["bad"],
        stats=stats, throughput={"requests_per_s": tput.get("requests_per_sec"),
                                 "output_tokens_per_s": tput.get("output_tokens_per_sec")},
        source=source)


def _prompt_summary(res: Path, shown: str, stages: list[dict]) -> dict:
    """The recorded prompt_len distribution: the run summary's (every stage), else the first
    stage with successes."""
    q = res / "summary_lifecycle_metrics.json"
    if q.is_file():
        s = _read_stage(q, f"{shown}/results/{q.name}")["prompt_len"]
        if s is not None:
            return s
    for st in stages:
        if st["prompt_len"] is not None:
            return st["prompt_len"]
    raise RecordError(f"{shown}/results: no stage has successes.prompt_len (no request "
                      "succeeded): the prompts cannot be rebuilt")


def _build(run: RecordedRun, ran: dict, stages: list[dict], plen: dict, files: list[Path],
           seed: int) -> None:
    """Rebuild the requests (:mod:`simulator.observe.ip_workload`) and the stages."""
    data: SharedPrefixData = ran["data"]
    rng = np.random.default_rng(seed)
    lengths = prompt_lengths(plen, data.num_prompts, plen["mean"])
    shared = shared_prefix_tokens(data, plen["mean"])
    prompts, _ = prompt_token_ids(data, lengths, shared, rng)
    draw = constant_arrivals if ran["load_type"] == "constant" else poisson_arrivals
    setup_s, specs, ids, recs, hashes = 0.0, [], [], [], {}
    for k, st in enumerate(stages):
        rate, dur = ran["stages"][k]
        rec_rate = st.get("rate")
        if isinstance(rec_rate, (int, float)) and not isinstance(rec_rate, bool) \
                and abs(float(rec_rate) - rate) > 1e-6 * rate:
            raise RecordError(f"{files[k]}: load_summary.requested_rate {rec_rate:g} is not the "
                              f"{rate:g} req/s results/config.yaml gives stage {k}: the record "
                              "contradicts itself")
        offs = draw(rate, dur, rng)
        if st["count"] > len(offs):
            raise RecordError(f"{files[k]}: load_summary.count {st['count']} is more than the "
                              f"{len(offs)} requests stage {k} sends ({rate:g} req/s for "
                              f"{dur:g} s)")
        if st["count"] < len(offs):
            run.approximations.append(
                f"stage {k} sent {st['count']} of its {len(offs)} requests (stopped early); "
                "the first ones are replayed")
        arr = setup_s + _STAGE_LEAD_S + offs[:st["count"]]
        dl = aiohttp_deadlines(len(arr), ran["timeout"], rng)
        specs += stage_specs(len(specs), arr, dl, prompts, data.output_len, DEFAULT_BLOCK_SIZE,
                             hashes, k)
        ids += [prompts[i % len(prompts)] for i in range(len(arr))]
        recs.append(_stage_record(k, st, rate, dur, ran["load_type"], arr, files[k].name))
        tail = max([x["max"] for x in (st["stats"]["e2e"], st["fail_latency"]) if x] or [0.0])
        setup_s = float(arr[-1] if len(arr) else setup_s + dur) + tail + _POLL_MEAN_S \
            + ran["interval"]
    t0 = specs[0].arrival_time_s if specs else 0.0
    run.specs = [dataclasses.replace(s, arrival_time_s=s.arrival_time_s - t0) for s in specs]
    for r in recs:
        r.start_s, r.end_s = r.start_s - t0, r.end_s - t0
    run.stages = recs
    run.extra["prompt_token_ids"] = ids
    run.extra["shared_prefix_tokens"] = shared
    run.extra["prompt_lengths"] = {"min": int(lengths.min()), "mean": float(lengths.mean()),
                                   "max": int(lengths.max())}
    n = len(run.specs)
    nan = np.full(n, np.nan)
    run.outcomes = pd.DataFrame({
        "request_id": np.arange(n, dtype=np.int64),
        "record_request_id": [f"{s.slice}-{i}" for i, s in enumerate(run.specs)],
        "arrival_s": [s.arrival_time_s for s in run.specs], "scheduled_s": nan,
        "first_token_s": nan, "last_token_s": nan,
        "num_prompt_tokens": np.array([s.num_prompt_tokens for s in run.specs], dtype=np.int64),
        "num_output_tokens": np.full(n, data.output_len, dtype=np.int64),
        "ttft_s": nan, "tpot_s": nan, "e2e_latency_s": nan, "queue_delay_s": nan,
        "stage": np.array([int(s.slice.split("_")[1]) for s in run.specs], dtype=np.int64)})
    _explain(run, ran, plen, shared, lengths, seed)


def read_inference_perf(path: str | Path, *, seed: int = 0) -> RecordedRun:
    """Read an inference-perf experiment folder (module docstring).

    Parameters
    ----------
    path : str or Path
        The experiment folder (holding ``results/``).
    seed : int
        Seeds the rebuilt workload's random parts (arrival gaps, the prompts' order and
        lengths, time-out jitter): the same distributions as the run, not its draws.

    Returns
    -------
    RecordedRun
        ``format="inference_perf"``, ``aggregate_only``, ``client_side``, one
        :class:`~simulator.observe.record.RecordedStage` per stage file, the rebuilt requests
        (``slice`` = ``stage_<k>``, ``cancel_after_s`` = the client's time-out).

    Raises
    ------
    RecordError
        A missing file, invalid YAML/JSON or a missing or malformed key (one line: file,
        line, key).
    """
    folder = Path(path)
    shown = str(path)
    if not is_inference_perf_dir(folder):
        raise RecordError(f"{shown}: not an inference-perf folder (needs results/config.yaml and "
                          "results/stage_<k>_lifecycle_metrics.json)")
    res = folder / "results"
    cfg = _Doc(res / "config.yaml", f"{shown}/results/config.yaml")
    ran = _run_config(cfg)
    files = _stage_files(res, shown)
    if len(files) > len(ran["stages"]):
        raise RecordError(f"{shown}/results: {len(files)} stage files but load.stages in "
                          f"results/config.yaml lists {len(ran['stages'])}")
    stages = [_read_stage(q, f"{shown}/results/{q.name}") for q in files]
    run = RecordedRun(name=folder.name, path=folder, format="inference_perf", specs=[],
                      outcomes=pd.DataFrame(columns=list(OUTCOME_COLUMNS)), client_side=True,
                      metric_definitions="inference_perf", aggregate_only=True,
                      clock="rebuilt send times (the record has per-stage summaries only)")
    exp = _Doc(folder / "exp-config.yaml", f"{shown}/exp-config.yaml", required=False)
    if exp.data is not None:
        _exp_settings(exp, run, "exp-config.yaml")
    else:
        run.notes.append("no exp-config.yaml: the server's arguments are not recorded")
    if "model" not in run.settings and ran["tokenizer"]:
        run.settings["model"] = Setting(ran["tokenizer"], "results/config.yaml "
                                        "tokenizer.pretrained_model_name_or_path")
    _datasheet_gpu(folder, run)
    prof = _Doc(folder / "profile.yaml", f"{shown}/profile.yaml", required=False)
    if prof.data is not None:
        _profile_notes(prof, ran, run)
    _build(run, ran, stages, _prompt_summary(res, shown, stages), files, seed)
    run.num_failed = 0
    run.extra.update({"server_engine": ran["server"], "load_type": ran["load_type"],
                      "stages": [{"rate": r, "duration_s": d} for r, d in ran["stages"]],
                      "stage_interval_s": ran["interval"], "request_timeout_s": ran["timeout"],
                      "shared_prefix": ran["data"].__dict__, "api_type": ran["api"],
                      "ignore_eos": ran["ignore_eos"],
                      "version_hint": "the inference-perf folder names no vLLM version; pass "
                                      "--engine-version X.Y.Z"})
    return run


def _explain(run: RecordedRun, ran: dict, plen: dict, shared: int, lengths: np.ndarray,
             seed: int) -> None:
    """The reader's decisions: approximations (where the replay cannot be the run) and notes."""
    d: SharedPrefixData = ran["data"]
    base = d.system_prompt_len + d.question_len
    how = ("exponential gaps rescaled to sum to the stage's duration (inference-perf's "
           "ConstantLoadTimer; its 'constant' load is not evenly spaced)"
           if ran["load_type"] == "constant" else
           "a Poisson count per second spread over the second (inference-perf's PoissonLoadTimer)")
    run.approximations += [
        (f"Send times are drawn as inference-perf draws them: {how}, seed {seed}: the same "
        "process, not the run's draws (inference-perf does not seed it and records no send "
        "times). Each stage starts 1 s after set-up; the next is set up once the previous "
        "one's last request ended (estimated as its last send + the stage's longest recorded "
        f"latency + 0.5 s of the client's 1 s poll) + load.interval {ran['interval']:g} s."),
        (f"Prompts: {d.num_groups} groups x {d.num_prompts_per_group} prompts of "
        f"{d.system_prompt_len} + {d.question_len} random tokens, which the server re-encodes "
        f"as BOS + ~{(plen['mean'] - 1) / base - 1:+.1%} tokens: each prompt's length is taken "
        f"from the recorded prompt_len distribution (mean {plen['mean']:.2f}, {lengths.min()}"
        f"-{lengths.max()} tokens; the {d.num_prompts} prompts are sent equally often, so its "
        "percentiles are the prompts'), dealt to the prompts at random; the first "
        f"{shared} tokens (BOS + the system prompt at the same ratio, less the token at the "
        "join) are shared within a group; request i of each stage sends prompt i mod "
        f"{d.num_prompts}, so a resent prompt can be served whole from the prefix cache."),
        "Client time-outs: a request still unanswered "
        + (f"{ran['timeout']:g} s" if ran["timeout"] is not None else
           "300 s (aiohttp's default total time-out; load.request_timeout is null)")
        + " (+ up to 1 s: aiohttp rounds the deadline up to a whole second) after it was sent "
        "fails. The simulated engine aborts it then, waiting or streaming, at the end of the "
        "step in progress, and frees its KV (vLLM's API server aborts a request whose client "
        "disconnected).",
    ]
    cap = (ran["num_workers"] or 0) * (ran["worker_max_concurrency"] or 0)
    if cap:
        peak = max(r * (t + 301.0) for r, t in ran["stages"])   # every send still in flight
        (run.notes if peak <= cap else run.approximations).append(
            f"The client's concurrency cap (load.num_workers x worker_max_concurrency = {cap:,}) "
            + ("cannot bind (fewer requests than that are ever in flight): not modelled." if
               peak <= cap else "may have delayed sends in this run; it is not modelled."))
    if not ran["ignore_eos"]:
        run.approximations.append(
            f"server.ignore_eos is false: outputs may have ended early; every request is "
            f"replayed with output_len {d.output_len} tokens (its max_tokens).")
    run.notes += [
        ("Latencies are inference-perf's, measured at the HTTP client: TTFT and E2E include the "
        "API server (the engine profile's api_server terms are added to the simulated ones); "
        "time_per_output_token and inter_token_latency count SSE lines, not tokens (2n + 2 "
        "timestamps for n tokens: the simulated counterparts are computed the same way); the "
        f"engine emits exactly output_len = {d.output_len} tokens (ignore_eos), while the "
        "record's output_len re-tokenises the streamed text."),
        f"Requests compared per stage (the stage a request was sent in); the record has no "
        f"per-request latencies. Workload from results/config.yaml: shared_prefix "
        f"{d.num_groups} x {d.num_prompts_per_group}, {ran['load_type']} load "
        + ", ".join(f"{r:g} req/s for {t:g} s" for r, t in ran["stages"]) + ".",
    ]
