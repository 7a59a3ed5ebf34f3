"""Run one scenario end to end: workload -> simulation -> summary -> outputs.

Outputs written to ``OUTDIR`` (``scenario.output_dir``, ``{name}`` expanded):
``summary.json``, ``requests.parquet`` and ``steps.parquet`` (``.csv`` with
``table_format="csv"``; see :mod:`simulator.metrics.tables_io`), ``scenario.yaml`` (the
resolved scenario), ``report.md`` / ``report.html`` and its PNG figures.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np
import yaml

from simulator.base.gc_freeze import gc_frozen
from simulator.base.outdir import (
    clear_outputs,
    input_files,
    make_output_folder,
    named_output_folder,
)
from simulator.base.request import RequestSpec
from simulator.base.resources import data_dir
from simulator.cluster.replica import ReplicaSetup
from simulator.cluster.setup import build_setup
from simulator.engine.loop import SimOutput, simulate
from simulator.kv.stages import stage_rows
from simulator.metrics.bounds import run_bounds
from simulator.metrics.column_buffers import reusing_buffers
from simulator.metrics.cost import phase_cost
from simulator.metrics.degrade import degrade_column, degrade_effects
from simulator.metrics.fleet import autoscale_summary, fixed_fleet_spans
from simulator.metrics.hourly import HOUR_S, hourly_rows, wants_by_hour
from simulator.metrics.lanes import LANE_MIN_ROWS, Lane
from simulator.metrics.latency import slo_mask
from simulator.metrics.offload import offload_summary
from simulator.metrics.speculative import speculative_summary
from simulator.metrics.step_bottleneck import step_bins
from simulator.metrics.step_stats import kv_and_batching_stats
from simulator.metrics.summary import cost_fields, json_safe, summarize
from simulator.metrics.tables_io import (
    TABLE_FORMATS,
    check_table_format,
    drop_other_formats,
    write_run_tables,
    write_table,
)
from simulator.report.day import DAY_FIGURE
from simulator.report.figures import FIGURE_FILES
from simulator.report.run import HTML_FILE, REPORT_FILE, write_run_report
from simulator.runs.energy import run_energy
from simulator.scenario.config import Scenario
from simulator.workload import load_workload, synthesised_labels

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # heavy: imported where used, after the simulation

    from simulator.metrics.step_table import StepTable


@dataclass
class RunResult:
    """Everything a run produced.

    ``itl_values_s`` / ``itl_weights`` (all inter-token gaps in seconds, float64, and their
    int64 multiplicities) are read from the run's recorder on first use and then kept: the
    summary has their statistics already, and a long run's samples stay on disk (18M
    samples, 288 MB, for a million requests) unless a caller asks for them. Positional
    construction with the two arrays (or ``None``: read lazily) is as before.

    Picklable (results sent between processes): the simulation's processes and events are
    dropped (:meth:`simulator.engine.output.SimOutput.__getstate__`), spooled tables travel with
    their data.
    """

    scenario: Scenario
    setup: ReplicaSetup
    summary: dict
    requests: pd.DataFrame
    #: the step table: a :class:`~simulator.metrics.step_table.StepTable` (in memory, or
    #: spooled to disk for a large run) or a DataFrame
    step_table: StepTable | pd.DataFrame
    _itl_values_s: np.ndarray | None
    _itl_weights: np.ndarray | None
    sim: SimOutput
    outdir: Path | None = None
    extra: dict = field(default_factory=dict)
    _steps_frame: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def _load_itl(self) -> None:
        if self._itl_values_s is None or self._itl_weights is None:
            self._itl_values_s, self._itl_weights = self.sim.recorder.itl_samples()

    @property
    def itl_values_s(self) -> np.ndarray:
        """Every inter-token gap of the run (s), in recorded order (read on first use)."""
        self._load_itl()
        return self._itl_values_s

    @property
    def itl_weights(self) -> np.ndarray:
        """The multiplicity of each of :attr:`itl_values_s` (int64; read on first use)."""
        self._load_itl()
        return self._itl_weights

    @property
    def steps(self) -> pd.DataFrame:
        """The step table as a DataFrame, built on first use and kept (a spooled table then
        costs its whole size in memory: readers that can should use ``step_table``)."""
        if self._steps_frame is None:
            t = self.step_table
            self._steps_frame = t.to_pandas() if hasattr(t, "to_pandas") else t
        return self._steps_frame


def scenario_dict(scenario: Scenario) -> dict:
    """The resolved scenario as plain data (JSON/YAML safe)."""
    return json.loads(scenario.model_dump_json())


def _kv_bytes_by_replica(sim) -> dict[int, int]:
    """KV bytes per token per GPU of each replica (a degrade fallback set of another model has
    its own)."""
    return {rep.idx: rep.setup.model.kv_bytes_per_token(rep.setup.kv_cache_dtype,
                                                       rep.setup.tensor_parallel_size)
            for rep in sim.replicas}


def run_scenario(scenario: Scenario, base_dir: Path | None = None, *,
                 specs: list[RequestSpec] | None = None, write: bool = True,
                 outdir: str | Path | None = None, figures: bool = True,
                 progress: Callable[[int, int], None] | None = None,
                 check_transitions: bool = False, setup: ReplicaSetup | None = None,
                 table_format: str = "parquet",
                 stop_when: Callable | None = None) -> RunResult:
    """Simulate ``scenario`` and (optionally) write its outputs.

    Parameters
    ----------
    scenario : Scenario
    base_dir : Path, optional
        Folder relative paths in the scenario are resolved against (the scenario file's).
    specs : list of RequestSpec or RequestStream, optional
        Use these requests instead of loading the scenario's workload (sweeps, compare);
        loaded lazily (:class:`simulator.workload.loader.RequestStream`) when not given.
    write : bool
        Write the output files.
    outdir : path, optional
        Overrides ``scenario.output_dir``.
    table_format : {"parquet", "csv"}
        File format of ``requests`` and ``steps`` (:func:`simulator.metrics.tables_io.write_table`).
    stop_when : callable, optional
        Passed to :func:`simulator.engine.loop.simulate` (end the run once it holds).

    Raises
    ------
    ValueError
        On a bad ``table_format`` (before simulating) or an unusable output folder.
    """
    check_table_format(table_format)
    if scenario.pools:
        raise ValueError(f"scenario '{scenario.name}' declares pools: it runs through the "
                         "gateway (servesim run; simulator.runs.gateway.run_gateway)")
    if specs is None:
        specs = load_workload(scenario.workload, scenario.seed, base_dir, lazy=True)
    check_slices(scenario, specs)
    # long-lived objects stay out of the collector's full passes (simulator.base.gc_freeze):
    # the modules while the set-up imports the table readers (pandas), then the finished
    # run's objects (and the modules) while its summary and outputs are made
    if setup is None:
        with gc_frozen():
            setup = build_setup(scenario, base_dir)
    sim = simulate(scenario, setup, specs, stop_when=stop_when, check_transitions=check_transitions,
                   progress=progress)
    with gc_frozen(), StepsWriter.start(scenario, sim, outdir, table_format, write) as early:
        res = summarize_run(scenario, setup, sim)
        if write:
            res.outdir = write_outputs(res, outdir, figures=figures, table_format=table_format,
                                       steps_written=early)
    return res


class StepsWriter:
    """A long run's steps table written on a second thread while its summary is computed.

    The table is written into the output folder under a hidden name (:data:`INFLIGHT_STEM`;
    the same bytes as written afterwards: :func:`~simulator.metrics.tables_io.write_table`),
    and :func:`write_run_folder` renames it to ``steps.{table_format}`` once it has cleared
    the folder of an earlier run's outputs and written the requests table (``summary.json``
    last, as always). An earlier run's outputs are therefore left as they were until the
    summary is made. Leaving the context on an exception stops the write between two slices,
    waits for it and removes what it wrote (no ``.part`` file, no table).

    Parameters
    ----------
    out : Path
        The output folder (exists).
    steps : StepTable
        The run's step table.
    table_format : {"parquet", "csv"}
    """

    #: File stem of the table while it is written (renamed by :meth:`install`)
    INFLIGHT_STEM = ".steps-inflight"

    def __init__(self, out: Path, steps, table_format: str) -> None:
        self.out = out
        self.table_format = table_format
        self._path = out / f"{self.INFLIGHT_STEM}.{table_format}"
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="servesim-steps")
        # no read-ahead thread: the summary's lanes use the cores meanwhile (and each slice
        # read ahead would be ~100 MB more held at once)
        self._done = self._pool.submit(write_table, steps, out, self.INFLIGHT_STEM,
                                       table_format, self._stop, False)

    @classmethod
    def start(cls, scenario: Scenario, sim: SimOutput, outdir: str | Path | None,
              table_format: str, write: bool) -> StepsWriter | contextlib.nullcontext:
        """A writer for a run that writes its outputs and has at least
        :data:`~simulator.metrics.lanes.LANE_MIN_ROWS` steps; else a context that is None."""
        if not write:
            return contextlib.nullcontext()
        steps = sim.step_table()
        if len(steps) < LANE_MIN_ROWS:
            return contextlib.nullcontext()
        return cls(make_output_folder(resolve_outdir(scenario, outdir)), steps, table_format)

    def install(self) -> None:
        """Wait until the table is written (raises the write's error) and give it its name,
        ``steps.{table_format}`` (a table of the other format left by an earlier run goes)."""
        self._done.result()
        os.replace(self._path, self.out / f"steps.{self.table_format}")
        drop_other_formats(self.out, "steps", self.table_format)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        if exc_type is not None:
            self._stop.set()
        self._pool.shutdown(wait=True)
        if exc_type is not None:  # the run failed: nothing of it stays
            self._path.unlink(missing_ok=True)


#: The summary keys :func:`~simulator.runs.energy.run_energy` reads.
_ENERGY_KEYS = ("window_start_s", "window_end_s", "num_output_tokens")


def summarize_run(scenario: Scenario, setup: ReplicaSetup, sim: SimOutput) -> RunResult:
    """The :class:`RunResult` of a finished simulation: its step and request tables and the
    summary (:func:`simulator.metrics.summary.summarize` and the run's extras: memory plan,
    provenance, KV and batching statistics, phase cost, parallel sampling, degrade effects,
    what bounds the run: :func:`simulator.metrics.bounds.run_bounds`).
    """
    # memory: each transient peaks while little else is held: the spool's sort, the ITL
    # statistics (samples read and freed; RunResult rereads them if asked), the requests
    steps = sim.step_table()
    # a long run's passes over the step table that need nothing else go to a second thread
    # (simulator.metrics.lanes); each result is read where it was computed before; a long
    # run's whole-column reads reuse column-sized buffers (simulator.metrics.column_buffers)
    with reusing_buffers(), Lane(len(steps) >= LANE_MIN_ROWS) as lane:
        binned = (lane.submit(step_bins, steps) if hasattr(setup.perf, "bottleneck_shares")
                  else None)
        summary, requests = _summary_body(scenario, setup, sim, steps, lane)
        # what bounds the run; after summary_extras (in _summary_body): a PP model's op_times
        # tallies its bubble
        summary["bounds"] = json_safe(run_bounds(summary, requests, steps, setup.perf,
                                                 binned.result() if binned else None))
    add_by_hour(summary, scenario, sim, requests, setup.usd_per_gpu_hour)
    return RunResult(scenario, setup, summary, requests, steps, None, None, sim)


def _summary_body(scenario: Scenario, setup: ReplicaSetup, sim: SimOutput, steps, lane: Lane
                  ) -> tuple[dict, pd.DataFrame]:
    """The summary of :func:`summarize_run` up to its ``bounds`` (the energy profile computed
    on ``lane``), and the request table."""
    itl_stats = sim.recorder.itl_stats()
    requests = sim.requests()
    slo = scenario.slo.model_dump()
    summary = summarize(requests, steps, slo=slo, itl_stats=itl_stats,
                        usd_per_gpu_hour=setup.usd_per_gpu_hour, num_gpus=scenario.num_gpus,
                        sim_wall_s=sim.sim_wall_s)
    if sim.replica_spans is not None:  # an autoscaled pool: GPUs paid while held
        g = scenario.gpus_per_replica
        a = autoscale_summary(
            sim.replica_spans, sim.autoscale or {},
            requests["arrival_time_s"].to_numpy(dtype=float), slo_mask(requests, slo),
            (summary["window_start_s"], summary["window_end_s"]), g, setup.usd_per_gpu_hour,
            scenario.cluster.autoscale.model_dump(mode="json"))
        # the summary's cost keys are the block's integrals (they replace a fleet held
        # throughout's); num_gpus: the most GPUs held at once
        summary.update(cost_fields(a["peak_replicas_held"] * g, a["gpu_hours"], a["cost_usd"],
                                   summary.get("num_input_tokens") or 0,
                                   summary.get("num_output_tokens") or 0))
        summary["autoscale"] = json_safe(a)
    # the energy block reads the window and the output tokens only (set by now)
    energy = lane.submit(run_energy, scenario, setup, sim, steps,
                         {k: summary.get(k) for k in _ENERGY_KEYS})
    summary["num_gpu_blocks"] = setup.num_gpu_blocks
    summary["kv_cache_tokens"] = setup.num_gpu_blocks * setup.block_size
    if setup.memory is not None and setup.memory.stages:  # PP: every stage's memory plan
        summary["pipeline_stages"] = stage_rows(setup.memory)
    summary["perf_model"] = getattr(setup.perf, "kind", "roofline")
    summary["provenance"] = setup.perf.provenance()
    summary["prefix_cache_hit_tokens"] = int(sim.recorder.prefix_hit_tokens)
    summary["num_steps"] = len(steps)
    if scenario.speculative is not None:
        summary["speculative"] = speculative_summary(sim)
    summary.update(kv_and_batching_stats(steps, setup.block_size, _kv_bytes_by_replica(sim)))
    summary["num_swap_outs"] = int(sum(getattr(r.sched, "num_swap_outs", 0) for r in sim.replicas))
    if scenario.kv_cache.offload_tiers is not None:
        summary["kv_offload"] = offload_summary(sim.replicas, requests, sim.end_time_s)
    summary["kv_cache_dtype"] = setup.kv_cache_dtype
    add_phase_cost(summary, steps, setup.perf, scenario.gpus_per_replica)
    summary["workload_synthesised"] = synthesised_labels(scenario.workload)
    add_parallel_sampling(summary, sim, setup, requests)
    if sim.degrade:
        summary["degrade"] = json_safe(degrade_effects(sim.degrade, requests, sim.end_time_s))
        summary["num_fallback_replicas"] = len(sim.replicas) - sim.num_primary_replicas
        summary["fallback_busy_s"] = (
            float(steps.loc[steps["replica_id"].to_numpy() >= sim.num_primary_replicas][
                "step_time_s"].sum()) if len(steps) else 0.0)
        requests["degrade_policy"] = degrade_column(sim.degrade,
                                                    requests["request_id"].to_numpy())
    if hasattr(setup.perf, "summary_extras"):  # e.g. the pipeline bubble (issue 11)
        summary.update(setup.perf.summary_extras())
    summary["energy"] = json_safe(energy.result())
    return summary, requests


def add_by_hour(summary: dict, scenario: Scenario, sim: SimOutput, requests,
                usd_per_gpu_hour: float) -> None:
    """Add ``summary["by_hour"]`` (in place) to a run of two hours or more
    (:func:`simulator.metrics.hourly.wants_by_hour`): ``{"period_s", "windowed": None,
    "rows"}``, the rows of :func:`simulator.metrics.hourly.hourly_rows` over the summary's
    window, the fleet from ``sim.replica_spans`` (an autoscaled run's) or the fixed fleet
    (``cluster.num_replicas``; a degrade fallback set is not counted in its GPU-hours)."""
    if not wants_by_hour(float(summary.get("duration_s") or 0.0)):
        return
    spans = sim.replica_spans or fixed_fleet_spans(
        scenario.cluster.num_replicas)
    rows = hourly_rows(requests, spans, window=(summary["window_start_s"],
                                                summary["window_end_s"]),
                       slo=scenario.slo.model_dump(), gpus_per_replica=scenario.gpus_per_replica,
                       usd_per_gpu_hour=usd_per_gpu_hour, period_s=HOUR_S)
    summary["by_hour"] = {"period_s": HOUR_S, "windowed": None, "rows": json_safe(rows)}


def _paid_gpus(summary: dict) -> float:
    """GPUs paid for over the window: ``num_gpus``, or an autoscaled fleet's mean (GPU-hours
    over the window's hours)."""
    dur = float(summary.get("duration_s") or 0.0)
    if "autoscale" in summary and dur > 0:
        return float(summary.get("gpu_hours") or 0.0) * 3600.0 / dur
    return int(summary.get("num_gpus") or 0)


def add_phase_cost(summary: dict, steps: pd.DataFrame, perf, tensor_parallel_size: int) -> None:
    """Add the phase-attributed cost to ``summary`` (in place).

    Keys added: ``phase_cost`` (everything :func:`simulator.metrics.cost.phase_cost` returns,
    over the steps that start in the summary's window) and, flat for tables and sweeps,
    ``price_per_1m_input_tokens_usd`` and ``price_per_1m_output_tokens_usd``: the price sheet
    whose input x price + output x price equals ``cost_usd``. The existing
    ``cost_per_1m_*_tokens_usd`` keys are unchanged (alternative views, not a split).
    """
    start, end = summary.get("window_start_s"), summary.get("window_end_s")
    st = steps
    if len(steps) and start is not None and end is not None:
        t0 = steps["start_time_s"].to_numpy(dtype=float)
        st = steps.loc[(t0 >= start) & (t0 <= end)]
    pc = phase_cost(st, cost_usd=float(summary.get("cost_usd") or 0.0),
                    num_input_tokens=int(summary.get("num_input_tokens") or 0),
                    num_output_tokens=int(summary.get("num_output_tokens") or 0),
                    num_gpus=_paid_gpus(summary),
                    duration_s=float(summary.get("duration_s") or 0.0),
                    gpus_per_replica=int(tensor_parallel_size), perf=perf)
    summary["phase_cost"] = json_safe(pc)
    summary["price_per_1m_input_tokens_usd"] = summary["phase_cost"][
        "price_per_1m_input_tokens_usd"]
    summary["price_per_1m_output_tokens_usd"] = summary["phase_cost"][
        "price_per_1m_output_tokens_usd"]


def add_parallel_sampling(summary: dict, sim: SimOutput, setup: ReplicaSetup,
                          requests=None) -> None:
    """Add ``summary["parallel_sampling"]`` (in place) when a request had ``n > 1``.

    Keys: ``num_requests`` (requests with ``n > 1`` that entered the run),
    ``num_requests_not_run`` (those of them never scheduled: rejected at arrival, e.g.
    ``n_exceeds_max_num_seqs``, or cancelled while waiting), ``num_sequences`` (the sequences
    of those that ran: scheduled at least once), ``num_beam_search_requests``,
    ``num_cow_copies`` (partial prompt blocks copied on first write),
    ``cow_blocks_saved_peak`` (blocks copy-on-write sharing saved against ``n`` independent
    requests at its peak, summed over replicas) and ``cow_bytes_saved_peak`` (those blocks in
    bytes per GPU: blocks x ``block_size`` x KV bytes per token per GPU). ``requests``: the
    run's request table (default: ``sim.requests()``).
    """
    rec = sim.recorder
    if not rec.num_parallel_requests:
        return
    req = sim.requests() if requests is None else requests
    par = req[req["n"] > 1]
    ran = par["first_scheduled_time_s"].notna().to_numpy()
    kvs = [rep.kv for rep in sim.replicas]
    peak = int(sum(kv.cow_blocks_saved_peak for kv in kvs))
    per_token = setup.model.kv_bytes_per_token(setup.kv_cache_dtype, setup.tensor_parallel_size)
    summary["parallel_sampling"] = {
        "num_requests": int(rec.num_parallel_requests),
        "num_requests_not_run": int((~ran).sum()),
        "num_sequences": int(par["n"].to_numpy()[ran].sum()),
        "num_beam_search_requests": int(rec.num_beam_search_requests),
        "num_cow_copies": int(sum(kv.num_cow_copies for kv in kvs)),
        "cow_blocks_saved_peak": peak,
        "cow_bytes_saved_peak": float(peak * setup.block_size * per_token),
    }


def check_slices(scenario: Scenario, specs: list[RequestSpec]) -> None:
    """Slices named in ``speculative.acceptance_by_slice`` must occur in the workload (a typo
    would otherwise fall back to the default acceptance model silently).

    Raises
    ------
    ValueError
        Naming the unknown slices and the workload's slices.
    """
    spec = scenario.speculative
    if spec is not None and spec.acceptance_by_slice:
        _check_named(specs, [("speculative.acceptance_by_slice", list(spec.acceptance_by_slice))])


def check_policy_slices(scenario: Scenario, specs: list[RequestSpec]) -> None:
    """Slices named by a degrade policy (``scheduler.admission.degrade.<i>.slices``, also
    in each pool's ``scheduler``) or by ``workload.parallel_sampling.slices`` must occur in
    the whole workload (``specs``: every request, before pools split it): a typo would make
    the setting do nothing, silently. Called by ``servesim run`` on the whole workload.

    Raises
    ------
    ValueError
        Naming the key, the unknown slices and the workload's slices.
    """
    named: list[tuple[str, list[str]]] = []
    scheds = [("scheduler", scenario.scheduler)] + [
        (f"pools.{i}.scheduler", p.scheduler) for i, p in enumerate(scenario.pools or [])
        if p.scheduler is not None]
    for where, sch in scheds:
        for i, pol in enumerate(sch.admission.degrade or []):
            if pol.slices:
                named.append((f"{where}.admission.degrade.{i} ({pol.name}).slices", pol.slices))
    ps = scenario.workload.parallel_sampling
    if ps is not None and ps.slices:
        named.append(("workload.parallel_sampling.slices", ps.slices))
    _check_named(specs, named)


def _check_named(specs: list[RequestSpec], named: list[tuple[str, list[str]]]) -> None:
    if not named:
        return
    present = specs.slices() if hasattr(specs, "slices") else {s.slice for s in specs}
    for key, slices in named:
        unknown = sorted(set(slices) - present)
        if unknown:
            raise ValueError(f"{key} names slice(s) {', '.join(unknown)} that the workload "
                             "does not have; its slices: " + ", ".join(sorted(present)))


def resolve_outdir(scenario: Scenario, outdir: str | Path | None = None) -> Path:
    """The run's output folder: ``outdir``, else ``scenario.output_dir`` with ``{name}``
    replaced by the scenario name.

    Raises
    ------
    OutputFolderError
        When the name cannot be one folder name (``../../x``, a ``/``, NUL:
        :func:`simulator.base.outdir.named_output_folder`) and ``output_dir`` uses it.
    """
    if outdir is not None:
        return Path(outdir)
    return named_output_folder(scenario.output_dir, scenario.name, "scenario name")


#: Shipped data folders a scenario's relative paths may point into (``traces/x.csv``)
_DATA_FOLDERS = ("traces", "hardware_profiles", "engine_profiles", "scenarios")


def shipped_data_folders() -> list[tuple[str, Path]]:
    """``(name, folder)`` of the shipped data folders that exist (for
    :func:`simulator.base.outdir.input_files`)."""
    out = []
    for name in _DATA_FOLDERS:
        try:
            out.append((name, data_dir(name)))
        except (FileNotFoundError, ValueError):
            continue
    return out


def run_output_names() -> list[str]:
    """Every file a run folder may hold: ``summary.json`` (first: a folder without it is
    incomplete), both table formats, ``scenario.yaml``, the report and its figures. What a
    new run into the folder replaces (:func:`simulator.base.outdir.clear_outputs`) and what must
    not be one of its inputs (:func:`simulator.base.outdir.check_outputs_spare_inputs`)."""
    return ["summary.json", *(f"{t}.{f}" for t in ("requests", "steps") for f in TABLE_FORMATS),
            "scenario.yaml", REPORT_FILE, HTML_FILE, *FIGURE_FILES.values(), DAY_FIGURE]


def scenario_inputs(scenarios, base_dir: Path | None, files=(), folders=()) -> list[Path]:
    """The input files of runs of ``scenarios`` (one or several): ``files`` (the scenario
    file) and every existing file their settings name (trace, model ``config.json``, GPU
    spec, engine profile, ...), relative to ``base_dir``, the working folder, one of
    ``folders`` or a shipped data folder."""
    if isinstance(scenarios, Scenario):
        scenarios = [scenarios]
    values = [s.model_dump(mode="json") if isinstance(s, Scenario) else s for s in scenarios]
    return input_files(files, values, (base_dir, Path.cwd(), *folders),
                       data_folders=shipped_data_folders())


def write_outputs(res: RunResult, outdir: str | Path | None = None, *, figures: bool = True,
                  table_format: str = "parquet", steps_written: StepsWriter | None = None
                  ) -> Path:
    """Write summary.json, the requests and steps tables, scenario.yaml and the report.

    ``summary.json`` is written last, after an earlier run's is removed: a folder holding it
    is complete (an interrupted write leaves none).

    The tables are ``requests.{table_format}`` and ``steps.{table_format}`` (full float
    precision, pyarrow's writers); a table file of the other format left by an earlier run
    in the same folder is removed so the folder never holds two versions of a table.
    ``steps_written``: the :class:`StepsWriter` writing the steps table into the same
    folder under another name (:func:`run_scenario`).
    """
    if steps_written is not None:
        out = steps_written.out
    else:
        out = make_output_folder(resolve_outdir(res.scenario, outdir))
    sd = scenario_dict(res.scenario)
    summary = dict(res.summary)
    summary.pop("sim_wall_s_note", None)
    steps = res.step_table if res._steps_frame is None else res.steps
    sd_report = dict(sd)
    sd_report["provenance"] = res.summary.get("provenance", {})
    write_run_folder(out, summary, res.requests, steps, sd, sd_report,
                     title=f"servesim run: {res.scenario.name}", figures=figures,
                     table_format=table_format, steps_written=steps_written)
    return out


def write_run_folder(out: Path, summary: dict, requests, steps, sd: dict, sd_report: dict, *,
                     title: str, figures: bool, table_format: str,
                     steps_written: StepsWriter | None = None) -> None:
    """The files of a run folder ``out``: the requests and steps tables, ``scenario.yaml``
    (``sd``), the report (``sd_report``: the scenario as the report shows it) and
    ``summary.json`` last, after an earlier run's is removed: a folder holding it is complete,
    one without it was interrupted (Ctrl-C, a full disk) while its files were written. Every
    file an earlier run left under the names of :func:`run_output_names` goes first (a
    ``--no-figures`` run leaves no stale figure); other files stay. ``steps_written``: the
    steps table, being written by it under another name, is given its name after the
    requests table."""
    clear_outputs(out, run_output_names())
    if steps_written is None:
        write_run_tables(out, {"requests": requests, "steps": steps}, table_format)
    else:
        write_run_tables(out, {"requests": requests}, table_format)
        steps_written.install()
    (out / "scenario.yaml").write_text(yaml.safe_dump(sd, sort_keys=False))
    write_run_report(out, summary, requests, steps, sd_report, title=title, figures=figures)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
