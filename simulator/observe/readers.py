"""Readers of real engines' per-request records (``servesim validate --recorded RUN``).

Five formats (``traces/README.md`` section "Recorded runs" has examples):

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
``inference_perf``
    An inference-perf experiment folder (``results/config.yaml``,
    ``results/stage_<k>_lifecycle_metrics.json``, ``profile.yaml``, ``exp-config.yaml``):
    per-stage client-side summaries only; the requests are rebuilt from the configuration
    that ran and compared per stage (:mod:`simulator.observe.readers_ip`).
``guidellm_json``
    A GuideLLM benchmark report (``{"benchmarks": [...]}``, a ``.json`` file): per-request
    timestamps per benchmark, each benchmark a stage (:mod:`simulator.observe.readers_guidellm`).
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

from pathlib import Path

from simulator.base.resources import not_a_file_reason
from simulator.observe.readers_bench import read_bench_json
from simulator.observe.readers_common import _read_json, prefix_hash_ids, specs_with_block_size
from simulator.observe.readers_csv import GENERIC_CSV_COLUMNS, read_generic_csv
from simulator.observe.readers_guidellm import is_guidellm_report, read_guidellm
from simulator.observe.readers_ip import is_inference_perf_dir, read_inference_perf
from simulator.observe.readers_vllm import read_peer_summary, read_request_stats, read_timeseries
from simulator.observe.record import RecordedRun, RecordError
from simulator.workload.clock import CLOCK_RESOLUTION_S, MAX_CLOCK_S

__all__ = [
    "GENERIC_CSV_COLUMNS",
    "detect_record_format",
    "find_recorded_runs",
    "prefix_hash_ids",
    "read_bench_json",
    "read_generic_csv",
    "read_guidellm",
    "read_inference_perf",
    "read_peer_summary",
    "read_recorded",
    "read_request_stats",
    "read_timeseries",
    "specs_with_block_size",
]


# ------------------------------------------------------------------------ dispatch
def detect_record_format(path: str | Path) -> tuple[str, Path]:
    """Which reader a ``--recorded`` path needs, and the file it reads.

    A folder: an inference-perf experiment folder (``inference_perf``), else its
    ``vllm/requests.jsonl`` or ``requests.jsonl``. A file: ``.jsonl`` ->
    ``vllm_request_stats``, ``.json`` -> ``vllm_bench_json`` (a GuideLLM report among them is
    told apart when read), ``.csv`` -> ``generic_csv``.

    Raises
    ------
    RecordError
        A missing path, a folder without a requests file, or another extension.
    """
    p = Path(path)
    if p.is_dir():
        if is_inference_perf_dir(p):
            return "inference_perf", p
        for cand in (p / "vllm" / "requests.jsonl", p / "requests.jsonl"):
            if cand.is_file():
                return "vllm_request_stats", cand
        raise RecordError(f"{path}: no requests.jsonl (or vllm/requests.jsonl) and no "
                          "inference-perf results/ (config.yaml + stage_<k>_lifecycle_metrics"
                          ".json) in this folder")
    if not p.is_file():  # missing, a link loop, a FIFO (never opened: it would block)
        raise RecordError(f"{path}: {not_a_file_reason(p, 'recorded run')}")
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
        A run folder, ``requests.jsonl``, an inference-perf folder, a ``vllm bench serve`` or
        GuideLLM JSON, or a generic CSV.
    seed : int
        Seeds what a record does not hold and the replay draws: arrivals of ``vllm bench
        serve`` files without ``start_times``, an inference-perf run's rebuilt workload.

    Raises
    ------
    RecordError
        See the individual readers.
    """
    fmt, p = detect_record_format(path)
    if fmt == "vllm_request_stats":
        run = read_request_stats(p)
    elif fmt == "inference_perf":
        run = read_inference_perf(p, seed=seed)
    elif fmt == "vllm_bench_json":
        data, _ = _read_json(p, str(path)) if p.is_file() else (None, "")
        run = (read_guidellm(data, p, str(path)) if is_guidellm_report(data)
               else read_bench_json(p, seed=seed))
    else:
        run = read_generic_csv(p)
    _check_record_clock(run, str(path))
    return run


def _check_record_clock(run: RecordedRun, shown: str) -> None:
    """Refuse a record whose arrivals span more than the simulated clock resolves (the
    limit ``servesim run`` applies to traces, :data:`simulator.workload.clock.MAX_CLOCK_S`):
    past it, float64 cannot tell a step's end from its start and every latency reads 0."""
    if not run.specs:
        return
    t = [s.arrival_time_s for s in run.specs]
    span = max(t) - min(t)
    if not span < MAX_CLOCK_S:  # NaN or inf included
        i = max(range(len(t)), key=t.__getitem__)
        line = run.specs[i].source_line
        where = f"{shown}:{line}" if line else f"{shown}: request {run.specs[i].request_id}"
        raise RecordError(f"{where}: its arrival is {span:.3g} s after the first one: more "
                          f"than the {MAX_CLOCK_S:.3g} s a simulated clock resolves to "
                          f"{CLOCK_RESOLUTION_S:g} s (check the record's time unit)")


def find_recorded_runs(root: str | Path) -> list[Path]:
    """Run folders under ``root``: every folder holding ``requests.jsonl`` and ``meta.json``
    (its ``vllm/`` parent when the files sit in a ``vllm/`` folder), sorted."""
    out = set()
    for req in Path(root).rglob("requests.jsonl"):
        if (req.parent / "meta.json").is_file():
            out.add(req.parent.parent if req.parent.name == "vllm" else req.parent)
    return sorted(out)
