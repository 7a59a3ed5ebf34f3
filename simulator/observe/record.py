"""What a recorded real-engine run is, once read: requests to replay, measured outcomes,
settings with their sources, and the engine's timeseries.

The readers (:mod:`simulator.observe.readers`) fill a :class:`RecordedRun`; the replay
(:mod:`simulator.observe.validate`) turns its settings into a scenario, simulates its
``specs`` and compares the result with its ``outcomes``.

Clock: every time in a :class:`RecordedRun` is in seconds from the run's first arrival (the
earliest arrival is 0), on the record's own clock; :attr:`RecordedRun.clock` says which one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.base.request import RequestSpec

__all__ = ["METRIC_DEFINITIONS", "OUTCOME_COLUMNS", "TIMESERIES_COLUMNS", "RecordError",
           "RecordedRun", "RecordedStage", "Setting"]

#: Columns of :attr:`RecordedRun.outcomes` (one row per replayed request, ``request_id``
#: order). Times are seconds from the first arrival; NaN where the record has no value.
#:
#: * ``request_id``: the replay's dense id (0..N-1 in arrival order, as the simulator uses);
#: * ``record_request_id``: the id in the record (``bench-17``, a row number, ...);
#: * ``arrival_s``, ``scheduled_s`` (first scheduled), ``first_token_s``, ``last_token_s``;
#: * ``num_prompt_tokens``, ``num_output_tokens``;
#: * ``ttft_s`` = first token - arrival; ``tpot_s`` = (last token - first token) /
#:   (output tokens - 1), NaN for one output token; ``e2e_latency_s`` = last token - arrival;
#:   ``queue_delay_s`` = scheduled - arrival (DESIGN.md glossary);
#: * ``itl_s``: the request's inter-token gaps (a tuple of seconds), only when the record
#:   has them (``vllm bench serve`` detailed results);
#: * ``stage``: the load stage (benchmark) the request arrived in (0, 1, ...), only in
#:   records with stages (inference-perf, GuideLLM).
OUTCOME_COLUMNS: tuple[str, ...] = (
    "request_id", "record_request_id", "arrival_s", "scheduled_s", "first_token_s",
    "last_token_s", "num_prompt_tokens", "num_output_tokens", "ttft_s", "tpot_s",
    "e2e_latency_s", "queue_delay_s")

#: Columns of :attr:`RecordedRun.timeseries`: ``time_s`` (seconds from the first arrival),
#: ``num_running``, ``num_waiting`` (requests), ``kv_cache_usage`` (fraction of the KV
#: blocks in use, NaN when the record has none).
TIMESERIES_COLUMNS: tuple[str, ...] = ("time_s", "num_running", "num_waiting", "kv_cache_usage")


#: How a record defines the latencies it reports (:attr:`RecordedRun.metric_definitions`):
#:
#: * ``glossary``: per request, TTFT = first token - arrival, TPOT = (last token - first token)
#:   / (output tokens - 1), E2E = last token - arrival, ITL = the gaps between tokens
#:   (DESIGN.md glossary; vLLM's ``RequestStateStats``, ``vllm bench serve``, GuideLLM's
#:   timestamps);
#: * ``inference_perf``: inference-perf's streaming client (its ``apis/completion.py`` and
#:   ``reportgen/base.py``): one timestamp per SSE *line* read, blank separator lines and the
#:   final ``data: [DONE]`` included, so a request of n streamed tokens has 2n + 2 timestamps;
#:   ``time_per_output_token`` = (last - first timestamp) / (2n + 1), about half the
#:   per-token time, and ``inter_token_latency`` pools the 2n + 1 gaps of every request:
#:   n - 1 token gaps and n + 2 gaps of near zero (a data line to its blank line; the last
#:   token to ``[DONE]``); ``request_latency`` = end - start (E2E); percentiles are
#:   ``numpy.percentile`` (linear).
METRIC_DEFINITIONS = ("glossary", "inference_perf")


class RecordWarning(UserWarning):
    """Something in a record that changes the replay's answer without stopping it (e.g. the
    workload file with the prompt token ids is not found: no prefix sharing is replayed)."""


class RecordError(ValueError):
    """A recorded run that cannot be read; the message is one line naming the file (and the
    line, or the JSON key, of the first bad value)."""


@dataclass(frozen=True)
class Setting:
    """One engine setting found in (or implied for) a record.

    Attributes
    ----------
    value : Any
        The value, in the engine's own terms (vLLM names and values: ``bfloat16``, ``auto``).
    source : str
        Where it came from, e.g. ``meta.json engine_kwargs.max_num_seqs``.
    """

    value: Any
    source: str


@dataclass
class RecordedStage:
    """One load stage of a record (an inference-perf stage, a GuideLLM benchmark; a record
    without stages is one stage).

    Attributes
    ----------
    index : int
        0, 1, ... in the order the stages ran.
    name : str
        ``stage 0 (5 req/s constant, 600 s)``, ``benchmark 2 (constant@4.00)``.
    start_s, end_s : float
        The stage's first and last arrival (seconds on the record's replay clock).
    num_requests : int
        Requests the client sent in the stage.
    rate : float or None
        Requested rate (requests/s).
    num_success, num_failure : int or None
        What the record counts; None when derived from per-request outcomes.
    stats : dict or None
        The record's own aggregate statistics (seconds), ``{metric: {"mean", "p50", "p90",
        "p99"}}`` for ``ttft``, ``tpot``, ``itl``, ``e2e`` in the record's definitions
        (:attr:`RecordedRun.metric_definitions`); None when the record has per-request
        outcomes (the comparison computes them).
    throughput : dict
        ``requests_per_s`` and ``output_tokens_per_s`` as the record states them (empty when
        computed from outcomes).
    source : str
        The file the stage was read from.
    """

    index: int
    name: str
    start_s: float
    end_s: float
    num_requests: int
    rate: float | None = None
    num_success: int | None = None
    num_failure: int | None = None
    stats: dict | None = None
    throughput: dict = field(default_factory=dict)
    source: str = ""


@dataclass
class RecordedRun:
    """A real engine's recorded run, read.

    Attributes
    ----------
    name : str
        Short name (``RTX4090/Llama-3.1-8B``: the run folder relative to its examples folder,
        or the file's stem).
    path : Path
        What was read: the requests file.
    format : str
        ``vllm_request_stats`` (``requests.jsonl`` + ``meta.json``), ``vllm_bench_json``
        (``vllm bench serve --save-result --save-detailed``) or ``generic_csv``.
    specs : list of RequestSpec
        The requests to replay, sorted by arrival, ids 0..N-1, arrival 0 = the first one.
    outcomes : pandas.DataFrame
        The measured outcome of each replayed request (:data:`OUTCOME_COLUMNS`).
    settings : dict of str to Setting
        Engine settings by vLLM name (``max_num_seqs``, ``device_name``, ...).
    clock : str
        Which of the record's clocks the times come from (one sentence, for reports).
    timeseries : pandas.DataFrame or None
        The engine's own running / waiting / KV samples (:data:`TIMESERIES_COLUMNS`).
    token_ids_source : str or None
        Where prompt token ids (hence prefix-sharing ids) came from; None without them.
    notes : list of str
        What the reader checked or decided (one sentence each).
    approximations : list of str
        Where the replay cannot be exact (e.g. arrivals drawn from the request rate).
    num_failed : int
        Requests the record lists as failed (not replayed, not compared).
    root : Path or None
        The run's repository root (where ``workloads/`` and ``configs/`` live), when found.
    peer : dict or None
        A peer simulator's published errors for this run (``validation/summary.txt``).
    extra : dict
        Format-specific facts (``vllm bench serve`` traffic settings, ...).
    client_side : bool
        Latencies measured at the HTTP client (inference-perf, GuideLLM, ``vllm bench serve``):
        the replay adds the engine profile's ``api_server`` terms to the simulated ones.
    metric_definitions : str
        How the record defines its latencies (:data:`METRIC_DEFINITIONS`).
    stages : list of RecordedStage
        The record's load stages (empty: the run is one stage).
    aggregate_only : bool
        The record has per-stage statistics but no per-request latencies (inference-perf's
        lifecycle summaries): the requests are rebuilt from the workload specification and
        compared per stage only.
    """

    name: str
    path: Path
    format: str
    specs: list[RequestSpec]
    outcomes: pd.DataFrame
    settings: dict[str, Setting] = field(default_factory=dict)
    clock: str = ""
    timeseries: pd.DataFrame | None = None
    token_ids_source: str | None = None
    notes: list[str] = field(default_factory=list)
    approximations: list[str] = field(default_factory=list)
    num_failed: int = 0
    root: Path | None = None
    peer: dict | None = None
    extra: dict = field(default_factory=dict)
    client_side: bool = False
    metric_definitions: str = "glossary"
    stages: list[RecordedStage] = field(default_factory=list)
    aggregate_only: bool = False

    @property
    def num_requests(self) -> int:
        """Requests replayed (the record's successful requests)."""
        return len(self.specs)

    def setting(self, name: str, default: Any = None) -> Any:
        """The value of setting ``name`` (``default`` when the record does not carry it)."""
        s = self.settings.get(name)
        return default if s is None else s.value
