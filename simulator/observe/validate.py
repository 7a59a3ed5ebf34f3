"""``servesim validate --recorded RUN``: replay a real engine's recorded requests in the
simulator and report the error against what the engine measured.

Pipeline: read the record (:func:`~simulator.observe.readers.read_recorded`) -> build the
replay scenario from its settings, ``--scenario`` and flags
(:func:`~simulator.observe.settings.build_replay_scenario`) -> simulate exactly those requests
(:func:`simulator.runs.scenario.run_scenario` with ``specs``) -> compare per request and per statistic
(:func:`~simulator.observe.compare.compare_outcomes`) -> write the outputs.

Outputs (``-o OUTDIR``): ``validation.json`` (every figure of the report; deterministic: no
wall-clock time), ``report.md``, ``report.html`` (self-contained), ``request_scatter.png``,
``latency_cdfs.png``, ``running_waiting.png``, ``requests_compared.csv`` (one row per request,
recorded and simulated latencies), ``stage_errors.csv`` (per stage x metric x statistic: recorded,
simulated, signed % error; :mod:`simulator.observe.stages`), ``timeline.csv`` (the plotted
counts), ``scenario.yaml`` and ``replay_requests.csv`` (``servesim run OUTDIR/scenario.yaml``
reruns the replay, without prefix-sharing ids, which the generic CSV cannot carry). A record
with per-stage summaries only (inference-perf) has no per-request figures and no
``requests_compared.csv``.

Client-side records (inference-perf, GuideLLM, ``vllm bench serve``) are compared with the
simulated latencies plus the engine profile's ``api_server`` terms
(:mod:`simulator.observe.client_side`); engine-side records without them.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from simulator import __version__
from simulator.base.outdir import (
    check_outputs_spare_inputs,
    clear_outputs,
    make_output_folder,
    named_output_folder,
)
from simulator.cluster.setup import unpriced_quiet
from simulator.kv.planner import MaxModelLenError
from simulator.metrics.summary import json_safe
from simulator.observe.client_side import api_server_section, api_server_terms, client_view
from simulator.observe.compare import compare_outcomes, paired_frame, pct_error
from simulator.observe.engine_defaults import release_tuple
from simulator.observe.readers import read_recorded, specs_with_block_size
from simulator.observe.record import RecordedRun, Setting
from simulator.observe.settings import ReplayScenario, build_replay_scenario
from simulator.observe.stages import compare_stages, stage_error_rows
from simulator.runs.scenario import run_scenario, scenario_dict, scenario_inputs
from simulator.scenario.yaml_files import read_scenario_yaml

__all__ = ["RecordedValidation", "constants_fitted_on", "run_replay", "validate_recorded"]


@dataclass
class RecordedValidation:
    """Everything one ``validate --recorded`` produced.

    Attributes
    ----------
    validation : dict
        The ``validation.json`` content.
    run : RecordedRun
    replay : ReplayScenario
    result : simulator.runs.scenario.RunResult
    specs : list of RequestSpec
        The replayed requests.
    outdir : Path or None
        Where the outputs were written (None with ``write=False``).
    files : list of Path
    client_requests : pandas.DataFrame or None
        The simulated requests as the record's client would time them (the API server's
        terms added for a client-side record; the engine's table otherwise).
    """

    validation: dict
    run: RecordedRun
    replay: ReplayScenario
    result: Any
    specs: list = field(default_factory=list)
    outdir: Path | None = None
    files: list[Path] = field(default_factory=list)
    client_requests: Any = None


def constants_fitted_on(result) -> list[str] | None:
    """Recorded runs the engine profile's fitted constants came from (``EngineProfile.fitted_on``
    of the step-time model), or None when the run's model has no engine profile or the profile
    fitted nothing. A replay of one of those runs is in-sample."""
    prof = getattr(result.setup.perf, "engine", None)
    fitted = getattr(prof, "fitted_on", None)
    if not fitted:
        return None
    return [str(x) for x in fitted]


def _kv_section(run: RecordedRun, replay: ReplayScenario, result) -> dict[str, Any]:
    setup = result.setup
    rec = run.settings.get("num_gpu_blocks")
    # the plan's own count: ``num_gpu_blocks`` is the record's when the record gives one
    planner = setup.memory.planned_num_gpu_blocks if setup.memory is not None else None
    row = next(r for r in replay.rows if r.key == "kv_cache.num_gpu_blocks")
    used_src = row.source if row.value is not None else "servesim memory planner"
    return {
        "num_gpu_blocks": int(setup.num_gpu_blocks),
        "num_gpu_blocks_source": used_src,
        "recorded_num_gpu_blocks": None if rec is None else int(rec.value),
        "planner_num_gpu_blocks": planner,
        "planner_vs_recorded_pct": (pct_error(planner, rec.value)
                                    if rec is not None and planner is not None else None),
        "block_size": int(setup.block_size),
        "kv_cache_tokens": int(setup.num_gpu_blocks * setup.block_size),
    }


def validate_recorded(path: str | Path, *, scenario: str | Path | None = None,
                      gpu: str | None = None, model: str | None = None,
                      sets: list[str] | None = None, out_dir: str | Path | None = None,
                      write: bool = True, figures: bool = True,
                      engine_version: str | None = None) -> RecordedValidation:
    """Replay a recorded run and compare (module docstring).

    Parameters
    ----------
    path : str or Path
        A run folder, ``requests.jsonl``, a ``vllm bench serve`` JSON or a generic CSV.
    scenario : str or Path, optional
        Scenario file for settings the record lacks.
    gpu, model : str, optional
        ``--gpu`` / ``--model`` (override the record).
    sets : list of str, optional
        ``--set key.path=value`` overrides (applied last).
    out_dir : str or Path, optional
        Output folder (default ``reports/validate-<run>``).
    write : bool
        Write the outputs.
    figures : bool
        Draw the figures (with ``write``).
    engine_version : str, optional
        ``--engine-version``: the recording vLLM's version when the record does not state it
        (or to correct it); drives the engine generation, its defaults and the nearest measured
        kernel tables, as a recorded version does.

    Returns
    -------
    RecordedValidation

    Raises
    ------
    RecordError
        A malformed record (one line, file:line).
    ScenarioError
        No GPU / model, or a bad override.
    ValueError
        A model that does not fit the GPU, and other setup errors (one line).
    """
    run = read_recorded(path)
    if engine_version is not None:
        _set_engine_version(run, engine_version)
    replay = build_replay_scenario(run, scenario=scenario, gpu=gpu, model=model, sets=sets)
    sc = replay.scenario
    if write:  # the output folder, and no output over an input, before the replay runs
        out_dir = _output_folder(run, out_dir, path, scenario, replay)
    specs = specs_with_block_size(run, sc.kv_cache.block_size)
    res = run_replay(replay, specs)
    per_req, per_tok, api = api_server_terms(run, res, replay.base_dir)
    sim_req = client_view(res.requests, per_req, per_tok)
    itl = res.itl_values_s + per_tok if per_tok else res.itl_values_s
    cmp = compare_outcomes(run.outcomes, sim_req, itl, res.itl_weights)
    v = _validation(run, replay, res, cmp)
    v["api_server"] = api_server_section(run, per_req, per_tok, api)
    v["stages"] = json_safe(compare_stages(run, sim_req, res.requests, res.steps, specs,
                                           per_tok))
    out = RecordedValidation(v, run, replay, res, specs, client_requests=sim_req)
    if write:
        _write(out, out_dir, figures)
    return out


def _set_engine_version(run: RecordedRun, version: str) -> None:
    """``--engine-version``: the record's vLLM version (replacing a recorded one, noted).

    Raises
    ------
    ValueError
        Not a vLLM version (X.Y[.Z]).
    """
    if release_tuple(version) is None:
        raise ValueError(f"--engine-version {version!r} is not a vLLM version (X.Y[.Z], e.g. "
                         "0.15.1)")
    old = run.settings.get("vllm_version")
    if old is not None and str(old.value) != version:
        run.notes.append(f"the record's vLLM version {old.value} ({old.source}) is replaced by "
                         f"--engine-version {version}")
    run.settings["vllm_version"] = Setting(version, "command line --engine-version (the record "
                                           "does not state it)" if old is None else
                                           "command line --engine-version")


def run_replay(replay: ReplayScenario, specs):
    """Simulate a replay's requests (``run_scenario``, nothing written): without the
    unpriced-GPU warning (a replay is compared on latency, not cost), and with
    ``scheduler.max_model_len`` lowered (:func:`_cap_max_model_len`, noted in
    ``replay.approximations``) when the memory plan's start-up check would refuse what the
    recorded engine served.

    Returns
    -------
    simulator.runs.scenario.RunResult
    """
    with unpriced_quiet():
        try:
            return run_scenario(replay.scenario, replay.base_dir, specs=specs, write=False,
                                figures=False)
        except MaxModelLenError as e:
            sc = _cap_max_model_len(replay, e)
            return run_scenario(sc, replay.base_dir, specs=specs, write=False, figures=False)


def _cap_max_model_len(replay: ReplayScenario, err: MaxModelLenError):
    """The replay's scenario with ``scheduler.max_model_len`` lowered to the longest request
    the planned KV cache holds, noted as an approximation: the recorded engine *served* its
    max_model_len, so the memory plan's start-up check (vLLM's) is not a reason to refuse the
    replay; the cap only changes that check (the recorded requests are shorter). A
    max_model_len the user set with ``--set`` is kept (the error is raised again).

    Raises
    ------
    MaxModelLenError
        ``err`` again when ``--set`` gave the max_model_len, or no request fits the cap.
    """
    row = next((r for r in replay.rows if r.key == "scheduler.max_model_len"), None)
    if row is not None and str(row.source).startswith("flag"):
        raise err
    sc = replay.scenario
    old = sc.scheduler.max_model_len
    sc = sc.model_copy(update={"scheduler": sc.scheduler.model_copy(
        update={"max_model_len": err.max_tokens})})
    replay.scenario = sc
    replay.approximations.append(
        f"scheduler.max_model_len {old if old is not None else 'of the model'} lowered to "
        f"{err.max_tokens:,} tokens: servesim's memory plan leaves a KV cache too small for "
        "the recorded engine's max_model_len, which that engine served (its free memory or "
        "its non-KV memory differs from the plan's); only vLLM's start-up check changes")
    if row is not None:
        i = replay.rows.index(row)
        replay.rows[i] = dataclasses.replace(
            row, value=err.max_tokens, source=f"{row.source}, lowered to the planned KV cache")
    return sc


def _validation(run: RecordedRun, replay: ReplayScenario, res, cmp: dict) -> dict:
    """The ``validation.json`` document: the record, the counts, the errors of
    :func:`~simulator.observe.compare.compare_outcomes`, the KV cache, the settings with their
    sources, approximations and notes, the perf model and the scenario (JSON-safe)."""
    sc = replay.scenario
    s = res.summary
    v: dict[str, Any] = {
        "kind": "recorded",
        "servesim_version": __version__,
        "run": {"name": run.name, "path": str(run.path), "format": run.format,
                "clock": run.clock, "token_ids_source": run.token_ids_source,
                "client_side": run.client_side, "metric_definitions": run.metric_definitions,
                "aggregate_only": run.aggregate_only,
                "extra": {k: x for k, x in run.extra.items() if k != "prompt_token_ids"}},
        "counts": {
            "num_requests_record": run.num_requests + run.num_failed,
            "num_failed_record": run.num_failed,
            "num_requests_replayed": run.num_requests,
            "num_sim_completed": cmp["num_sim_completed"],
            "num_sim_rejected": cmp["num_sim_rejected"],
            "num_sim_cancelled": cmp["num_sim_cancelled"],
            "num_sim_unfinished": cmp["num_sim_unfinished"],
            "num_compared": cmp["num_compared"],
        },
    }
    v.update({k: x for k, x in cmp.items() if k.endswith("_pct_error")})
    v["metrics"] = cmp["metrics"]
    v["per_request"] = cmp["per_request"]
    v["makespan"] = cmp["makespan"]
    v["kv_cache"] = _kv_section(run, replay, res)
    v["settings"] = [{"key": r.key, "value": r.value, "source": r.source} for r in replay.rows]
    v["engine_features"] = replay.engine_features
    v["approximations"] = list(run.approximations) + list(replay.approximations)
    v["notes"] = list(run.notes) + list(replay.notes)
    v["perf_model"] = s.get("perf_model")
    v["provenance"] = s.get("provenance", {})
    v["engine"] = {"name": sc.perf.engine, "version": sc.perf.engine_version,
                   "constants_fitted_on": constants_fitted_on(res)}
    v["constants_fitted_on"] = v["engine"]["constants_fitted_on"]
    v["sim_summary"] = {k: s.get(k) for k in (
        "num_preemptions", "prefix_cache_hit_rate", "prefix_cache_hit_tokens",
        "mean_batch_size", "max_concurrency", "mean_kv_cache_usage", "num_steps",
        "num_swap_outs")}
    v["peer"] = run.peer
    v["scenario"] = scenario_dict(sc)
    v = json_safe(v)
    return v


#: The files ``validate --recorded`` writes in its output folder
VALIDATE_FILES = ("requests_compared.csv", "replay_requests.csv", "stage_errors.csv",
                  "scenario.yaml",
                  "timeline.csv", "request_scatter.png", "latency_cdfs.png",
                  "running_waiting.png", "validation.json", "report.md", "report.html")


def _output_folder(run: RecordedRun, out_dir, recorded, scenario,
                   replay: ReplayScenario) -> Path:
    """The output folder (default ``reports/validate-<run>``), created; refused (one line)
    when an output would overwrite an input: the recorded run's files (every file of a run
    folder), the scenario file, a model ``config.json`` or GPU spec the replay names."""
    out = Path(out_dir) if out_dir is not None else named_output_folder(
        "reports/validate-{name}", run.name.replace("/", "-"), "recorded run name")
    make_output_folder(out)
    files = [recorded, run.path]
    if scenario is not None:
        files.append(read_scenario_yaml(scenario).get("__file__"))
    # {"trace": folder}: every file of a recorded run folder is an input
    inputs = scenario_inputs([replay.scenario, {"trace": str(recorded)}], replay.base_dir,
                             files)
    check_outputs_spare_inputs(out, VALIDATE_FILES, inputs)
    return out


def _write(rv: RecordedValidation, out_dir, figures: bool) -> None:
    from simulator.observe.figures import plot_latency_cdfs, plot_request_scatter, plot_timeline
    from simulator.observe.report import write_reports
    run, res, v = rv.run, rv.result, rv.validation
    out = Path(out_dir) if out_dir is not None else named_output_folder(
        "reports/validate-{name}", run.name.replace("/", "-"), "recorded run name")
    make_output_folder(out)
    clear_outputs(out, VALIDATE_FILES)  # an earlier validation's (figures too)
    files = []
    pair = paired_frame(run.outcomes, rv.client_requests if rv.client_requests is not None
                        else res.requests)
    if not run.aggregate_only:  # per-stage summaries hold no request to pair with
        p = out / "requests_compared.csv"
        pair.to_csv(p, index=False, float_format="%.9g")
        files.append(p)
    rp = out / "replay_requests.csv"
    specs = rv.specs
    pd.DataFrame({"arrival_time_s": [s.arrival_time_s for s in specs],
                  "num_prompt_tokens": [s.num_prompt_tokens for s in specs],
                  "num_output_tokens": [s.num_output_tokens for s in specs]}).to_csv(
        rp, index=False, float_format="%.12g")
    files.append(rp)
    se = out / "stage_errors.csv"
    pd.DataFrame(stage_error_rows(v["stages"]), columns=[
        "stage", "name", "metric", "stat", "recorded", "simulated", "pct_error", "note"]).to_csv(
        se, index=False, float_format="%.9g")
    files.append(se)
    sp = out / "scenario.yaml"
    sp.write_text("# the replay of a recorded run (servesim validate --recorded); its workload is\n"
                  "# replay_requests.csv, which has no prefix-sharing ids\n"
                  + yaml.safe_dump(v["scenario"], sort_keys=False))
    files.append(sp)
    names: list[str] = []
    if figures and not run.aggregate_only:  # (per-stage summaries: nothing per request)
        plot_request_scatter(pair, out / "request_scatter.png")
        real_itl = None
        if "itl_s" in run.outcomes.columns:
            ok = set(pair.loc[pair["compared"], "request_id"].tolist())
            gaps = [np.asarray(g, dtype=float) for rid, g in
                    zip(run.outcomes["request_id"], run.outcomes["itl_s"]) if rid in ok and g]
            real_itl = np.concatenate(gaps) if gaps else None
        plot_latency_cdfs(pair, out / "latency_cdfs.png", real_itl_s=real_itl,
                          sim_itl_s=res.itl_values_s, sim_itl_weights=res.itl_weights)
        _, samples = plot_timeline(run.outcomes, res.steps, out / "running_waiting.png",
                                   timeseries=run.timeseries)
        samples.to_csv(out / "timeline.csv", index=False, float_format="%.9g")
        files.append(out / "timeline.csv")
        names = ["request_scatter.png", "latency_cdfs.png", "running_waiting.png"]
        files += [out / n for n in names]
    jp = out / "validation.json"
    jp.write_text(json.dumps(v, indent=2, sort_keys=False) + "\n")
    files.append(jp)
    files += write_reports(out, v, names)
    rv.outdir = out
    rv.files = files
