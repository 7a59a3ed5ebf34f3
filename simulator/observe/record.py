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

from simulator.request import RequestSpec

__all__ = ["OUTCOME_COLUMNS", "TIMESERIES_COLUMNS", "RecordError", "RecordedRun", "Setting"]

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
#:   has them (``vllm bench serve`` detailed results).
OUTCOME_COLUMNS: tuple[str, ...] = (
    "request_id", "record_request_id", "arrival_s", "scheduled_s", "first_token_s",
    "last_token_s", "num_prompt_tokens", "num_output_tokens", "ttft_s", "tpot_s",
    "e2e_latency_s", "queue_delay_s")

#: Columns of :attr:`RecordedRun.timeseries`: ``time_s`` (seconds from the first arrival),
#: ``num_running``, ``num_waiting`` (requests), ``kv_cache_usage`` (fraction of the KV
#: blocks in use, NaN when the record has none).
TIMESERIES_COLUMNS: tuple[str, ...] = ("time_s", "num_running", "num_waiting", "kv_cache_usage")


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

    @property
    def num_requests(self) -> int:
        """Requests replayed (the record's successful requests)."""
        return len(self.specs)

    def setting(self, name: str, default: Any = None) -> Any:
        """The value of setting ``name`` (``default`` when the record does not carry it)."""
        s = self.settings.get(name)
        return default if s is None else s.value
