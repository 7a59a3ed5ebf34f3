"""The workload subsystem's error type."""
from __future__ import annotations


class WorkloadError(ValueError):
    """A trace file or workload configuration that cannot be turned into requests.

    Messages about a trace row name the file and the 1-based line number (a CSV header is
    line 1), e.g. ``traces/x.csv:17: GeneratedTokens 'abc' is not an integer``.
    """


class TraceFormatMismatch(WorkloadError):
    """A trace file that does not look like the format stated for it (``format: mooncake``
    on a CSV file): the message names the file, the stated format and what the file looks
    like; the caller adds the setting that stated it (``workload.format``, ``--format``)."""


class ServeGenLengthsMissing(WorkloadError):
    """ServeGen client data with arrivals only (no ``chunk-N-dataset.json``) read where the
    lengths were to come from the data (a scenario gives them with
    ``workload.servegen.prompt_tokens`` and ``output_tokens``)."""


class WorkloadWarning(UserWarning):
    """Something the workload changed that the user should know about (e.g. outputs clipped to
    the declared ``workload.max_tokens``). The CLI prints each as one ``servesim: warning:``
    line; Python callers see a standard :mod:`warnings` warning."""
