"""Workload subsystem: trace readers, synthetic generators and post-processing.

Public API::

    WorkloadConfig, load_workload(cfg, seed, base_dir=None) -> list[RequestSpec]
    read_trace(path, format="auto", columns=None, time_unit="s", seed=0) -> list[RequestSpec]
    write_parquet_trace(cols, path) -> Path          # a Parquet copy of any trace
    generate_sessions(cfg, seed, block_tokens=16) -> TraceColumns   # synthetic sessions
    describe_workload(reqs) -> dict
    describe_columns(cols) -> dict
    session_starts(cols) -> array      # each row's session start (a session's turn 0)
    synthesised_labels(cfg) -> dict     # fields assigned at random, not read from the trace
    WorkloadError (a ValueError), WorkloadWarning (a UserWarning)

Formats and examples: ``traces/README.md``.
"""
from __future__ import annotations

from simulator.workload.config import (
    ArrivalConfig,
    LengthDist,
    PatienceConfig,
    ServeGenConfig,
    SharedPrefix,
    SyntheticConfig,
    SyntheticSessionsConfig,
    ThinkTimeDist,
    WorkloadConfig,
)
from simulator.workload.describe import describe_columns, describe_workload
from simulator.workload.errors import (
    ServeGenLengthsMissing,
    TraceFormatMismatch,
    WorkloadError,
    WorkloadWarning,
)
from simulator.workload.loader import (
    assign_by_share,
    load_workload,
    stable_int_hash,
    synthesised_labels,
)
from simulator.workload.parquet import write_parquet_trace
from simulator.workload.readers import detect_format, read_columns, read_trace
from simulator.workload.session_synth import generate_sessions
from simulator.workload.sessions import session_starts

__all__ = [
    "ArrivalConfig",
    "LengthDist",
    "PatienceConfig",
    "ServeGenConfig",
    "ServeGenLengthsMissing",
    "SharedPrefix",
    "SyntheticConfig",
    "SyntheticSessionsConfig",
    "ThinkTimeDist",
    "TraceFormatMismatch",
    "WorkloadConfig",
    "WorkloadError",
    "WorkloadWarning",
    "assign_by_share",
    "describe_columns",
    "describe_workload",
    "detect_format",
    "generate_sessions",
    "load_workload",
    "read_columns",
    "read_trace",
    "session_starts",
    "stable_int_hash",
    "synthesised_labels",
    "write_parquet_trace",
]
