"""The scenario that replays a recorded run, and where each of its settings came from.

Layers, later ones win (each setting's source is kept for the report):

1. servesim's scenario defaults (``simulator/scenario/config.py``);
2. the recording engine's defaults for its version (:data:`ENGINE_DEFAULTS`), for settings the
   record does not carry;
3. the ``--scenario`` file (its ``workload`` is replaced by the record's requests);
4. the record's own settings (``meta.json``, ``--metadata`` items of a bench file);
5. flags: ``--gpu``, ``--model``, then each ``--set key=value`` in order.

The GPU and the model never fall back to servesim's defaults: they come from the record, a
flag or the scenario file, else the replay stops with a one-line error saying which flag to
pass. The GPU a record names (``NVIDIA GeForce RTX 4090``, ``RTXPRO6000``) is looked up in the
GPU catalog by name and alias, ignoring case, punctuation and the vendor words ``NVIDIA`` and
``GeForce``. A model id the catalog lacks is looked up as ``configs/model/<id>.json`` under the
run's repository root (the layout of LLMServingSim's recorded runs).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.catalog.hardware import get_gpu, gpu_catalog
from simulator.catalog.models import get_model
from simulator.cluster.setup import _user_path
from simulator.observe.engine_defaults import (
    V0_DEFAULTS,
    V1_DEFAULTS,
    batch_defaults,
    engine_generation,
    release_tuple,
)
from simulator.observe.model_lookup import resolve_model
from simulator.observe.record import RecordedRun
from simulator.perf.tables.sets import table_sets, version_key
from simulator.scenario.config import Scenario, ScenarioError, validate_scenario
from simulator.scenario.overrides import apply_overrides, parse_override
from simulator.scenario.yaml_files import read_scenario_yaml

__all__ = ["ENGINE_DEFAULTS", "RECORD_KEYS", "ReplayScenario", "SettingRow",
           "build_replay_scenario", "gpu_name_matches", "match_gpu", "resolve_model"]

#: Record setting (vLLM name) -> scenario key it sets.
RECORD_KEYS: dict[str, str] = {
    "model": "model",
    "device_name": "hardware.gpu",
    "tensor_parallel_size": "cluster.tensor_parallel_size",
    "data_parallel_size": "cluster.num_replicas",
    "max_num_seqs": "scheduler.max_num_seqs",
    "max_num_batched_tokens": "scheduler.max_num_batched_tokens",
    "enable_chunked_prefill": "scheduler.enable_chunked_prefill",
    "max_model_len": "scheduler.max_model_len",
    "policy": "scheduler.queue_policy",
    "block_size": "kv_cache.block_size",
    "num_gpu_blocks": "kv_cache.num_gpu_blocks",
    "gpu_memory_utilization": "kv_cache.gpu_memory_utilization",
    "enable_prefix_caching": "kv_cache.enable_prefix_caching",
    "kv_cache_dtype": "kv_cache.kv_cache_dtype",
    "dtype": "perf.weight_dtype",
    "quantization": "perf.weight_dtype",
    "vllm_version": "perf.engine_version",
    "seed": "seed",
    "link_bandwidth_bytes_per_s": "hardware.interconnect.bandwidth_bytes_per_s",
    "link_latency_s": "hardware.interconnect.latency_s",
}

#: Record settings with no scenario key yet: reported (``validation.json`` ``engine_features``)
#: for the engine profile (``perf.engine``) to use.
ENGINE_FEATURES = ("async_scheduling", "cudagraph_capture_sizes", "cudagraph_mode",
                   "enforce_eager", "enable_expert_parallel", "pipeline_parallel_size",
                   "device_count")

#: Defaults of the recording engine by (engine, generation), for settings a record leaves out
#: (:mod:`simulator.observe.engine_defaults` gives the sources; the GPU-dependent batch budgets
#: are added once the GPU is known).
ENGINE_DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("vllm", "v1"): V1_DEFAULTS,
    ("vllm", "v0"): V0_DEFAULTS,
}
_ENGINE_DEFAULTS_SOURCE = {
    "v1": "vLLM {v} default (not in the record; the value a 0.19.0 resolved config "
          "shows when the option is left unset)",
    "v0": "vLLM {v} default (V0 engine, vllm 0.6 EngineArgs; not in the record)",
}

#: Settings listed in the report's settings table, in this order (scenario keys).
REPORTED_KEYS = ("hardware.gpu", "model", "cluster.tensor_parallel_size",
                 "cluster.num_replicas", "cluster.router", "scheduler.max_num_seqs",
                 "scheduler.max_num_batched_tokens", "scheduler.enable_chunked_prefill",
                 "scheduler.max_model_len", "scheduler.queue_policy", "kv_cache.block_size",
                 "kv_cache.num_gpu_blocks", "kv_cache.gpu_memory_utilization",
                 "kv_cache.enable_prefix_caching", "kv_cache.kv_cache_dtype",
                 "perf.weight_dtype", "perf.source", "perf.engine", "perf.engine_version",
                 "hardware.interconnect.bandwidth_bytes_per_s", "hardware.interconnect.latency_s",
                 "seed")

_DTYPES = {"bfloat16": "bf16", "torch.bfloat16": "bf16", "bf16": "bf16", "float16": "fp16",
           "torch.float16": "fp16", "half": "fp16", "fp16": "fp16", "fp8": "fp8"}
#: vLLM ``quantization`` methods whose weights are 8-bit floats (online or checkpoint FP8).
_QUANT = {"fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt": "fp8", "ptpc_fp8": "fp8"}
_KV_DTYPES = {"auto": "auto", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16",
              "fp16": "fp16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


@dataclass(frozen=True)
class SettingRow:
    """One line of the report's settings table.

    Attributes
    ----------
    key : str
        Scenario key (``scheduler.max_num_seqs``).
    value : Any
        The value the replay used.
    source : str
        Where it came from (``meta.json engine_kwargs.max_num_seqs``, ``flag --gpu``,
        ``servesim default``, ...).
    """

    key: str
    value: Any
    source: str


@dataclass
class ReplayScenario:
    """The replay's scenario plus the story of its settings.

    Attributes
    ----------
    scenario : Scenario
        Validated; its ``workload`` names ``replay_requests.csv`` (written with the report).
    base_dir : Path or None
        Folder relative paths in it resolve against (the ``--scenario`` file's).
    rows : list of SettingRow
        The reported settings, with sources.
    approximations : list of str
        Where the replay departs from the recorded deployment.
    notes : list of str
        Other decisions (a GPU matched by alias, a scenario workload replaced, ...).
    engine_features : dict
        Recorded engine settings without a scenario key (:data:`ENGINE_FEATURES`), with
        sources: ``{name: {"value", "source"}}``.
    """

    scenario: Scenario
    base_dir: Path | None
    rows: list[SettingRow]
    approximations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine_features: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------- lookups
_VENDOR = re.compile(r"nvidia|geforce")


def _norm(name: str) -> str:
    return _VENDOR.sub("", re.sub(r"[^a-z0-9]", "", name.lower()))


def gpu_name_matches(device: str, names) -> bool:
    """Whether a recorded device string names one of ``names`` (a GPU's name and aliases):
    equal ignoring case, or equal after normalising both (lower case, letters and digits
    only, without ``nvidia`` / ``geforce``)."""
    key = device.strip().lower()
    want = _norm(device)
    return any(key == str(n).lower() or (want and want == _norm(str(n))) for n in names)


def match_gpu(device: str) -> str | None:
    """The catalog GPU a recorded device string names, or None.

    Exact name or alias first (:func:`simulator.catalog.hardware.get_gpu`), then the same comparison
    on normalised strings (lower case, letters and digits only, without ``nvidia`` /
    ``geforce``): ``NVIDIA GeForce RTX 4090`` matches an alias ``RTX 4090`` or ``rtx4090``.

    Returns
    -------
    str or None
        The catalog profile name.
    """
    cat = gpu_catalog()
    key = device.strip().lower()
    for g in cat.values():
        if key in {n.lower() for n in (g.name, *g.aliases)}:
            return g.name
    hits = sorted(g.name for g in cat.values() if gpu_name_matches(device, (g.name, *g.aliases)))
    return hits[0] if len(hits) == 1 else None


# ----------------------------------------------------------------------------- building
def _set(raw: dict, key: str, value: Any) -> None:
    d = raw
    parts = key.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def _get(d: dict, key: str, default: Any = None) -> Any:
    for p in key.split("."):
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def _leaves(d: dict, prefix: str = ""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            yield from _leaves(v, key + ".")
        else:
            yield key, v


def _engine_defaults(run: RecordedRun) -> tuple[dict[str, Any], str, str | None]:
    """The recording engine's defaults (record setting names), their source label and the
    engine generation (``v0`` / ``v1``; None when the record names no vLLM version and is not
    a vLLM benchmark)."""
    ver = run.setting("vllm_version")
    gen = engine_generation(ver)
    if gen is not None:
        rel = release_tuple(ver)
        shown = f"{rel[0]}.{rel[1]}"
        d = dict(ENGINE_DEFAULTS[("vllm", gen)])
        if gen == "v1" and rel[:2] >= (0, 19):
            d["async_scheduling"] = True
        return d, _ENGINE_DEFAULTS_SOURCE[gen].format(v=shown), gen
    if run.format == "vllm_request_stats":
        # RequestStateStats (queued / scheduled / first / last token timestamps) exist only in
        # vLLM's V1 engine (vllm/v1/metrics/stats.py)
        src = ("vLLM V1 default (assumed: the record names no vLLM version; its "
               "RequestStateStats timestamps exist only in the V1 engine)")
        return dict(V1_DEFAULTS), src, "v1"
    if run.extra.get("server_engine") == "vllm" or (run.format == "vllm_bench_json" and str(
            run.extra.get("backend", "vllm")).startswith(("vllm", "openai"))):
        hint = run.extra.get("version_hint", "the vllm bench serve file names no vLLM version; "
                             "record it with --metadata vllm_version=X.Y.Z")
        return dict(V1_DEFAULTS), f"vLLM V1 default (assumed: {hint})", "v1"
    return {}, "", None


#: record fields looked up in a table of servesim values: (table, note when absent)
_LOOKUPS = {
    "quantization": (_QUANT, ("record quantization {!r} is not modelled: weights costed at "
                              "the record's dtype")),
    "dtype": (_DTYPES, ("record dtype {!r} has no servesim weight dtype; perf.weight_dtype "
                        "keeps its default")),
    "kv_cache_dtype": (_KV_DTYPES, ("record kv_cache_dtype {!r} has no servesim equivalent; "
                                    "kv_cache.kv_cache_dtype keeps its default")),
}


def _convert(name: str, value: Any, notes: list[str]) -> Any:
    """A record value in the scenario's terms, or None when it has no equivalent."""
    if name == "dtype" and str(value).lower() == "auto":
        notes.append("record dtype 'auto' (the checkpoint's torch_dtype): weights costed as "
                     "perf.weight_dtype's default bf16 (16-bit; fp16 costs the same)")
        return None
    if name in _LOOKUPS:
        table, missing = _LOOKUPS[name]
        v = table.get(str(value).lower())
        if v is None:
            notes.append(missing.format(value))
        return v
    if name == "policy":
        return value if value in ("fcfs", "priority") else None
    return value


def build_replay_scenario(run: RecordedRun, *, scenario: str | Path | None = None,
                          gpu: str | None = None, model: str | None = None,
                          sets: list[str] | None = None,
                          trace: str = "replay_requests.csv") -> ReplayScenario:
    """Build the scenario that replays ``run`` (layers and precedence: module docstring).

    Parameters
    ----------
    run : RecordedRun
        The record.
    scenario : str or Path, optional
        A scenario file filling in what the record does not carry.
    gpu, model : str, optional
        ``--gpu`` / ``--model``: a catalog name or a spec / ``config.json`` path.
    sets : list of str, optional
        ``--set key.path=value`` overrides, applied last.
    trace : str
        The file the scenario's ``workload.trace`` names (the replayed requests, written next
        to the report so that ``servesim run scenario.yaml`` reruns the replay).

    Returns
    -------
    ReplayScenario

    Raises
    ------
    ScenarioError
        One line: no GPU or model known, an unknown scenario key or a bad value.
    """
    b = _Build()
    # 2. engine defaults
    defaults, dsrc, gen = _engine_defaults(run)
    for name, value in defaults.items():
        if name in RECORD_KEYS and name not in run.settings:
            v = _convert(name, value, b.notes)
            if v is not None:
                b.put(RECORD_KEYS[name], v, dsrc)
    if gen is not None and "vllm_version" not in run.settings:
        b.put("perf.engine", f"vllm-{gen}", dsrc)
    # 3. scenario file
    base_dir = _put_scenario_file(b, run, scenario) if scenario is not None else None
    # 4. the record
    _put_record(b, run, gpu, model)
    _put_parallelism(b, run, base_dir)
    # 5. flags
    _put_flags(b, gpu, model, sets)
    raw, src, notes, approx = b.raw, b.src, b.notes, b.approx
    if _get(raw, "hardware.gpu") is None:
        raise ScenarioError("the record names no GPU; pass --gpu NAME|spec.yaml (or a --scenario "
                            "with hardware.gpu)")
    if _get(raw, "model") is None:
        raise ScenarioError("the record names no model; pass --model ID|config.json (or a "
                            "--scenario with model)")
    _nearest_table_version(raw, src, approx, base_dir)
    if gen is not None:
        _batch_defaults(b, run, gen, dsrc, base_dir)
    raw.setdefault("name", f"validate-{re.sub(r'[^A-Za-z0-9._-]+', '-', run.name)}")
    raw["workload"] = {"trace": trace, "format": "generic_csv"}
    sc = validate_scenario(raw, source=f"replay of {run.name}")
    data = sc.model_dump()
    rows = []
    for key in REPORTED_KEYS:
        rows.append(SettingRow(key, _get(data, key), src.get(key, "servesim default")))
    for name, st in sorted(run.settings.items()):
        if name not in RECORD_KEYS and name not in ENGINE_FEATURES:
            notes.append(f"record setting {name}={st.value!r} ({st.source}) has no servesim "
                         "equivalent and is not modelled")
    feats = {}
    for name in ENGINE_FEATURES:
        s = run.settings.get(name)
        if s is not None:
            feats[name] = {"value": s.value, "source": s.source}
        elif name in defaults:
            feats[name] = {"value": defaults[name], "source": dsrc}
    return ReplayScenario(sc, base_dir, rows, approx, notes, feats)


def _batch_defaults(b: _Build, run: RecordedRun, gen: str, dsrc: str, base_dir) -> None:
    """The engine's step budgets where neither the record, the scenario nor a flag sets them:
    V1 by version and GPU (:func:`~simulator.observe.engine_defaults.batch_defaults`, the
    ``vllm serve`` values, an approximation since the entry point is not recorded); V0 256
    sequences and max(max_model_len, 2048) tokens in prefill-only steps."""
    seqs_key, mbt_key = "scheduler.max_num_seqs", "scheduler.max_num_batched_tokens"
    if seqs_key in b.src and mbt_key in b.src:
        return
    ver = run.setting("vllm_version")
    try:
        g = get_gpu(_user_path(str(_get(b.raw, "hardware.gpu")), base_dir))
        m = get_model(_user_path(str(_get(b.raw, "model")), base_dir))
    except (ValueError, ImportError):
        return   # building the scenario reports the error
    if gen == "v0":
        mml = _get(b.raw, "scheduler.max_model_len") or m.max_position_embeddings
        cp_key = "scheduler.enable_chunked_prefill"
        if (int(mml) > 32768 and not m.sliding_window and str(b.src.get(cp_key, "")).startswith(
                "vLLM") and mbt_key not in b.src):
            why = (f"vLLM {ver} V0 default for max_model_len {mml} > 32768: chunked prefill is "
                   "switched on, 512 tokens per step (EngineArgs of 0.6)")
            b.put(cp_key, True, why)
            b.put(mbt_key, 512, why)
            b.approx.append(f"The record does not state chunked prefill or the token budget: {why} "
                            "is assumed.")
            return
        if mbt_key not in b.src and _get(b.raw, cp_key):
            b.put(mbt_key, 512, f"vLLM {ver} V0 default with chunked prefill: 512 tokens per "
                                "step (EngineArgs of 0.6)")
        elif mbt_key not in b.src:
            b.put(mbt_key, max(int(mml), 2048), f"vLLM {ver} V0 default without chunked prefill: "
                  f"max(max_model_len {mml}, 2048)")
        if (_get(b.raw, "scheduler.enable_chunked_prefill") is False
                and "scheduler.step_policy" not in b.src):
            b.put("scheduler.step_policy", "prefill_first",
                  f"vLLM {ver} V0 scheduler without chunked prefill (prefill-only steps first)")
        return
    dev = run.setting("device_name") or g.name
    mbt, seqs, rule = batch_defaults(ver, str(dev), float(g.hbm_bytes))
    ver = ver or "(not recorded)"
    filled = []
    if seqs_key not in b.src:
        b.put(seqs_key, seqs, rule)
        filled.append(f"max_num_seqs {seqs}")
    if mbt_key not in b.src:
        b.put(mbt_key, mbt, rule)
        filled.append(f"max_num_batched_tokens {mbt}")
    b.approx.append(f"The record does not state {' and '.join(filled)}: the {rule} is used (the "
                    "offline LLM class defaults to twice the tokens, and other entry points "
                    "differ; --set scheduler.max_num_batched_tokens=N corrects it).")


@dataclass
class _Build:
    """The raw scenario being layered, the source of each key, notes and approximations."""

    raw: dict = field(default_factory=dict)
    src: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    approx: list[str] = field(default_factory=list)

    def put(self, key: str, value: Any, source: str) -> None:
        _set(self.raw, key, value)
        self.src[key] = source


def _put_scenario_file(b: _Build, run: RecordedRun, scenario: str | Path) -> Path:
    """Layer 3: the scenario file's keys (its workload replaced by the record's requests);
    returns the folder relative paths in it resolve against."""
    sraw = read_scenario_yaml(scenario)
    file = sraw.pop("__file__", str(scenario))
    base_dir = Path(file).parent
    if "workload" in sraw:
        sraw.pop("workload")
        b.notes.append(f"the scenario's workload is replaced by the record's {run.num_requests} "
                       "requests")
    for key, value in _leaves(sraw):
        b.put(key, value, f"scenario {Path(file).name}")
    return base_dir


def _put_record(b: _Build, run: RecordedRun, gpu: str | None, model: str | None) -> None:
    """Layer 4: the record's settings, its vLLM version (V1 engine from 0.8), its GPU matched
    to the catalog and its model resolved (unless ``--gpu`` / ``--model`` replace them).

    Raises
    ------
    ScenarioError
        The record's GPU is not in the catalog and neither ``--gpu`` nor the scenario names one.
    """
    for name, key in RECORD_KEYS.items():
        s = run.settings.get(name)
        if s is None or name in ("device_name", "model"):
            continue
        v = _convert(name, s.value, b.notes)
        if v is not None:
            b.put(key, v, s.source)
    ver = run.settings.get("vllm_version")
    if ver is not None:
        m = re.match(r"(\d+)\.(\d+)", str(ver.value))
        if m and (int(m.group(1)), int(m.group(2))) >= (0, 8):
            b.put("perf.engine", "vllm-v1", f"{ver.source} {ver.value} (vLLM >= 0.8 runs its V1 "
                                            "engine)")
        elif m:
            b.put("perf.engine", "vllm-v0", f"{ver.source} {ver.value} (vLLM < 0.8 runs its V0 "
                                            "engine)")
    dev = run.settings.get("device_name")
    if dev is not None:
        name = match_gpu(str(dev.value))
        if name is not None:
            b.put("hardware.gpu", name, f"{dev.source} {dev.value!r} -> GPU catalog {name}")
        elif gpu is None:
            if _get(b.raw, "hardware.gpu") is None:
                raise ScenarioError(
                    f"the record's GPU {dev.value!r} ({dev.source}) has no profile in the GPU "
                    f"catalog ({', '.join(sorted(gpu_catalog()))}); another board is not "
                    "substituted (memory, bandwidth, clocks and link differ): pass --gpu "
                    "NAME|spec.yaml")
            b.notes.append(f"the record's GPU {dev.value!r} is not in the GPU catalog; the "
                           f"scenario's {_get(b.raw, 'hardware.gpu')!r} is used")
    rec_model = run.settings.get("model")
    if rec_model is not None and model is None:
        mid, how = resolve_model(str(rec_model.value), run)
        b.put("model", mid, f"{rec_model.source} {rec_model.value!r} -> {how}")


def _put_parallelism(b: _Build, run: RecordedRun, base_dir: Path | None) -> None:
    """Data, expert and pipeline parallelism of the record: replicas behind a router, expert
    parallelism for an MoE model, and the approximations each implies."""
    dp = int(_get(b.raw, "cluster.num_replicas", 1) or 1)
    if dp > 1 and "cluster.router" not in b.src:
        b.put("cluster.router", "least_outstanding",
              "approximation of vLLM's data-parallel balancing (it sends a request to the engine "
              "with the fewest waiting x 4 + running requests)")
        b.approx.append(f"Data parallelism {dp}: {dp} replicas behind the "
                        "least_outstanding router (vLLM's DP coordinator balances by queue "
                        "length).")
    if run.setting("enable_expert_parallel") and not _is_moe(_get(b.raw, "model"), base_dir):
        b.notes.append("the record enables expert parallelism but the model has no experts "
                       "(vLLM ignores the flag for a dense model): not modelled")
    elif run.setting("enable_expert_parallel"):
        src_ep = run.settings["enable_expert_parallel"].source
        b.put("cluster.enable_expert_parallel", True, src_ep)
        ep = dp * int(_get(b.raw, "cluster.tensor_parallel_size", 1) or 1)
        b.approx.append(f"Expert parallelism (DP{dp} x EP{ep}): each data-parallel rank is a "
                        f"replica holding 1/{ep} of the experts; its MoE layers process the EP "
                        "group's tokens assuming every rank carries the same load, plus the "
                        "all-gather / reduce-scatter of activations; the ranks step in "
                        "lockstep (each group step as long as the slowest rank's, as vLLM's DP "
                        "ranks do), the dummy batches of idle ranks are not costed.")
    pp = run.setting("pipeline_parallel_size")
    if pp and int(pp) > 1:
        b.put("cluster.pipeline_parallel_size", int(pp),
              run.settings["pipeline_parallel_size"].source)
        b.approx.append(f"Pipeline parallelism {pp}: steady-state cycle of up to {pp} "
                        "micro-batches in flight (simulator.perf.pipeline).")


def _put_flags(b: _Build, gpu: str | None, model: str | None, sets: list[str] | None) -> None:
    """Layer 5: ``--gpu``, ``--model``, then each ``--set`` (which also claims the keys under
    the path it sets)."""
    if gpu is not None:
        b.put("hardware.gpu", gpu, "flag --gpu")
    if model is not None:
        b.put("model", model, "flag --model")
    for item in sets or []:
        path, _ = parse_override(item)
        if path and path[0] == "workload":
            raise ScenarioError(
                f"--set {item}: the workload of a replay is the recorded run's requests "
                "(arrival times and lengths as recorded); workload.* cannot be overridden")
        b.raw = apply_overrides(b.raw, [item])
        key = ".".join(path)
        b.src[key] = f"flag --set {item}"
        for k in list(b.src):
            if k.startswith(key + "."):
                b.src[k] = f"flag --set {item}"


def _nearest_table_version(raw: dict, src: dict, approx: list, base_dir) -> None:
    """A recorded engine version the GPU has no measured tables for is replaced by the nearest
    shipped one (the newest earlier version, else the oldest later one), as an approximation;
    a version given by a flag is kept (and fails with the available versions if absent)."""
    ver = _get(raw, "perf.engine_version")
    if str(src.get("perf.engine_version", "")).startswith("flag"):
        return
    try:
        gpu = get_gpu(_user_path(str(_get(raw, "hardware.gpu")), base_dir))
    except (ValueError, ImportError):
        return
    have = sorted({s.engine_version for s in table_sets(gpu) if s.engine == "vllm"},
                  key=version_key)
    if gpu.efficiency_tables_from:
        approx.append(f"{gpu.name} has no kernel measurement of its own: GEMM, attention and MoE "
                      f"times are the measured excess time of {gpu.efficiency_tables_from} "
                      f"(same die) above its roofline, held over {gpu.name}'s datasheet "
                      f"roofline; all-reduce is {gpu.name}'s link "
                      "model (communication tables are not transferred).")
    if ver is None and have:
        approx.append(f"The record names no vLLM version: {gpu.name}'s newest measured kernel "
                      f"tables (vLLM {have[-1]}) are used.")
    if ver is None or not have or str(ver) in have:
        return
    want = release_tuple(ver)
    if want is None:
        raise ValueError(f"{src.get('perf.engine_version', 'the record')}: {str(ver)!r} is not a "
                         "vLLM version (X.Y[.Z], e.g. 0.19.0); fix the record or pass --set "
                         "perf.engine_version=X.Y.Z")
    rel = {v: release_tuple(v) or (0, 0, 0) for v in have}
    same = [v for v in have if want is not None and rel[v] == want]
    if same:
        pick, why = same[-1], f"the tables of release {same[-1]} (a build of the same release)"
    else:
        earlier = [v for v in have if want is not None and rel[v] <= want]
        pick = earlier[-1] if earlier else have[0]
        why = ("the newest shipped set not newer than the record's" if earlier else
               "the oldest shipped set (every set is newer than the record's)")
    raw.setdefault("perf", {})["engine_version"] = pick
    src["perf.engine_version"] = (f"{src.get('perf.engine_version', 'record')} {ver} -> nearest "
                                  f"measured tables of {gpu.name}: vLLM {pick}")
    approx.append(f"{gpu.name} has no measured kernel tables of vLLM {ver}; vLLM {pick} is used, "
                  f"{why} (rule: same release, else the newest earlier, else the oldest later; "
                  f"available: {', '.join(have)}). Kernels that changed between the versions "
                  "are not corrected for.")


def _is_moe(model_id, base_dir) -> bool:
    """Whether the replay's model routes tokens to experts (True when it cannot be read yet:
    building the scenario reports that error)."""
    if model_id is None:
        return True
    try:
        return get_model(_user_path(str(model_id), base_dir)).is_moe
    except ValueError:
        return True

