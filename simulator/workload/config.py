"""Workload configuration schema (pydantic v2).

A workload is either a trace file (``trace``), a synthetic specification (``synthetic``) or
synthetic multi-turn sessions (``synthetic_sessions``), followed by the same post-processing: time window, rate scaling, request cap, share-based
assignment of slices / tenants / priorities, client patience, declared shared prefixes and a
declared ``max_tokens``. See :func:`simulator.workload.load_workload` for the order.

All models derive from :class:`simulator.base.schema.StrictModel`: unknown fields are errors (a typo
in a scenario file is not a silent default), values are not coerced (``max_requests: true`` or
``rate_scale: "2"`` are errors) and floats must be finite (``duration_s: .inf`` is an error).
Token counts are at most :data:`simulator.base.schema.MAX_TOKENS_REPRESENTABLE` (2**31 - 1).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from simulator.base.schema import MAX_TOKENS_REPRESENTABLE, StrictModel, int_keys
from simulator.workload.dists import (
    ArrivalConfig,
    LengthDist,
    PatienceConfig,
    ThinkTimeDist,
)
from simulator.workload.diurnal import RateProfileConfig

#: Our field names that a generic CSV/JSONL column mapping may name (``columns``).
GENERIC_FIELDS = (
    "arrival_time_s",
    "num_prompt_tokens",
    "num_output_tokens",
    "tenant",
    "priority",
    "slice",
    "cancel_after_s",
    "max_tokens",
    "n",
    "session_id",
    "turn_index",
    "think_time_s",
)
#: The fields a generic trace must provide.
REQUIRED_GENERIC_FIELDS = ("arrival_time_s", "num_prompt_tokens", "num_output_tokens")

TraceFormat = Literal["auto", "azure", "vidur", "mooncake", "generic_csv", "generic_jsonl",
                      "parquet", "servegen"]

SHARE_TOLERANCE = 1e-6
_TOK = MAX_TOKENS_REPRESENTABLE


class SyntheticConfig(StrictModel):
    """A synthetic workload: arrivals x independent prompt and output length distributions.

    Generation stops at ``num_requests`` requests or at the first arrival after ``duration_s``
    seconds, whichever comes first (at least one of the two is required).
    """


    arrival: ArrivalConfig
    num_requests: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    prompt_tokens: LengthDist
    output_tokens: LengthDist

    @model_validator(mode="after")
    def _validate(self) -> SyntheticConfig:
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("SyntheticConfig: give num_requests, duration_s, or both")
        return self


class SyntheticSessionsConfig(StrictModel):
    """Synthetic multi-turn sessions (conversations, agents): sessions arrive as ``arrival``
    (``rate_rps`` sessions per second); each has ``turns`` turns, and every turn after the
    first repeats the whole history as its prompt (:mod:`simulator.workload.session_synth`).

    Turn 0's prompt is ``system_prompt_tokens + message_0``; turn ``k``'s is turn ``k-1``'s
    prompt + its answer + ``message_k``. Generation stops at ``num_sessions`` sessions or
    at the first session starting after ``duration_s`` seconds, whichever comes first (at
    least one is required).

    Attributes
    ----------
    arrival : ArrivalConfig
        Session arrivals (turn 0 of each session): ``rate_rps`` is sessions per second.
    num_sessions : int or None
        Stop after this many sessions.
    duration_s : float or None
        Stop at the first session starting after this time (s).
    turns : LengthDist
        Turns per session (``from_trace`` is not available; ``min`` defaults to 1).
    think_time : ThinkTimeDist
        Seconds between the end of a turn and the next turn's arrival (closed loop; in open
        loop the gap between the two arrivals).
    message_tokens : LengthDist
        The user's new message of each turn, in tokens.
    answer_tokens : LengthDist
        Each turn's answer (output), in tokens.
    system_prompt_tokens : int
        A system prompt that starts every session's prompt; every session shares its KV
        blocks (0: none).
    max_context_tokens : int or None
        A session ends before the first turn whose prompt + answer would exceed this
        (turn 0 is always kept); ``null``: no bound.
    """

    arrival: ArrivalConfig
    num_sessions: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    turns: LengthDist
    think_time: ThinkTimeDist
    message_tokens: LengthDist
    answer_tokens: LengthDist
    system_prompt_tokens: int = Field(default=0, ge=0, le=_TOK)
    max_context_tokens: int | None = Field(default=None, ge=1, le=_TOK)

    @model_validator(mode="after")
    def _validate(self) -> SyntheticSessionsConfig:
        if self.num_sessions is None and self.duration_s is None:
            raise ValueError("SyntheticSessionsConfig: give num_sessions, duration_s, or both")
        if self.turns.from_trace is not None:
            raise ValueError("SyntheticSessionsConfig: turns cannot be drawn from_trace "
                             "(a trace has no turn counts); give values or a distribution")
        if self.max_context_tokens is not None \
                and self.max_context_tokens <= self.system_prompt_tokens:
            raise ValueError(f"SyntheticSessionsConfig: max_context_tokens="
                             f"{self.max_context_tokens} leaves no room after "
                             f"system_prompt_tokens={self.system_prompt_tokens}")
        return self


class SharedPrefix(StrictModel):
    """A prompt prefix (e.g. a system prompt) shared by a group of requests.

    Matching requests (``tenant`` and ``slice`` both matching where given; all requests when
    both are ``None``) get ``prefix_hash_ids = (stable_int_hash(name),)`` and
    ``prefix_block_tokens = num_tokens``: the KV cache may share their first
    ``min(num_tokens, prompt)`` tokens.
    """


    name: str = Field(min_length=1)
    num_tokens: int = Field(gt=0, le=_TOK)
    tenant: str | None = None
    slice: str | None = None


def check_utf8(label, what: str) -> None:
    """Refuse a label that cannot be written as UTF-8 (a lone surrogate such as YAML's or
    JSON's ``"\\ud800"``), before any simulation: every output file holds it as UTF-8.
    (pydantic refuses such a ``str`` field itself; share-table keys need this.)

    Raises
    ------
    ValueError
        Naming ``what`` and the offending code point.
    """
    if isinstance(label, str):
        try:
            label.encode("utf-8")
        except UnicodeEncodeError as e:
            bad = label[e.start:e.end].encode("utf-8", "backslashreplace").decode()
            shown = label.encode("utf-8", "backslashreplace").decode()
            raise ValueError(f"{what} '{shown}' is not valid Unicode text ({bad}: "
                             f"{e.reason}); labels must be UTF-8") from None


def _check_shares(name: str, shares: dict | None) -> dict | None:
    if shares is None:
        return None
    if not shares:
        raise ValueError(f"{name}: empty share table")
    for k in shares:
        check_utf8(k, f"{name}: name")
    for k, v in shares.items():
        if not v >= 0:
            raise ValueError(f"{name}: share of {k!r} must be >= 0, got {v}")
        if isinstance(k, str) and not k:
            raise ValueError(f"{name}: empty name")
    total = sum(shares.values())
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ValueError(f"{name}: shares must sum to 1 (within {SHARE_TOLERANCE:g}), "
                         f"they sum to {total!r}")
    return shares


class ServeGenConfig(StrictModel):
    """Options of a ServeGen trace (``format: servegen``; :mod:`simulator.workload.servegen`).

    Attributes
    ----------
    clients : list of int, optional
        Client ids (``N`` of ``chunk-N-trace.csv``) to generate; default all of the folder.
    prompt_tokens, output_tokens : LengthDist, optional
        Lengths for every client instead of the dataset files' tables (give both; required
        for data with arrivals only, such as ``language/m-large``). ``from_trace`` is not
        available here.
    """

    clients: list[int] | None = Field(default=None, min_length=1)
    prompt_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None

    @model_validator(mode="after")
    def _validate(self) -> ServeGenConfig:
        if (self.prompt_tokens is None) != (self.output_tokens is None):
            raise ValueError("ServeGenConfig: give both prompt_tokens and output_tokens, or "
                             "neither (the dataset files then give the lengths)")
        for d in (self.prompt_tokens, self.output_tokens):
            if d is not None and d.from_trace is not None:
                raise ValueError("ServeGenConfig: from_trace lengths are not available for "
                                 "a ServeGen trace")
        if self.clients is not None:
            if any(c < 0 for c in self.clients):
                raise ValueError("ServeGenConfig: client ids are >= 0")
            if len(set(self.clients)) != len(self.clients):
                raise ValueError("ServeGenConfig: duplicate client ids")
        return self


class ParallelSamplingConfig(StrictModel):
    """Parallel sampling / beam search for the workload's requests (vLLM request fields).

    Attributes
    ----------
    n : int
        Output sequences per request (vLLM ``SamplingParams.n``; the beam width with
        ``use_beam_search``, as vLLM's OpenAI server reads ``n``). Each sequence is the
        request's output length long; they share the prompt's KV blocks copy-on-write.
    use_beam_search : bool
        Label the requests as beam search (costed as parallel sampling of width ``n``).
    slices : list of str, optional
        Only requests of these slices (all requests when left out).
    """

    n: int = Field(default=1, ge=1, le=_TOK)
    use_beam_search: bool = False
    slices: list[str] | None = None


class WorkloadConfig(StrictModel):
    """The workload of a scenario: a trace, a synthetic spec or synthetic sessions, plus
    post-processing.

    Attributes
    ----------
    trace : str or None
        Trace file path (resolved with ``simulator.base.resources.resolve_path(path, "traces")``).
    format : str
        ``auto`` (by extension, header or folder), ``azure``, ``vidur``, ``mooncake``,
        ``generic_csv``, ``generic_jsonl``, ``parquet`` (generic columns) or ``servegen``
        (a ServeGen folder or client file: requests generated from its per-client rates
        and length tables); see ``traces/README.md``.
    columns : dict or None
        Generic formats (CSV, JSONL, Parquet) only: our field name -> the file's column name.
    time_unit : ``"s"`` or ``"ms"``
        Unit of a generic trace's arrival time column (numbers; a Parquet timestamp or
        duration column has its own). Timestamps far from 0 that read as a Unix epoch date
        in a finer unit are taken in that unit (:mod:`simulator.workload.clock`).
    servegen : ServeGenConfig or None
        Options of a ServeGen trace (clients, lengths).
    synthetic : SyntheticConfig or None
        Synthetic workload (exactly one of ``trace``, ``synthetic`` and
        ``synthetic_sessions``).
    synthetic_sessions : SyntheticSessionsConfig or None
        Synthetic multi-turn sessions (conversations, agents); see ``traces/README.md``.
    session_arrival : ``"closed"`` or ``"open"``
        How later turns of a session arrive: ``closed``, when the turn before them has
        finished plus their ``think_time_s`` (the engine replaces a turn's provisional
        arrival time); ``open``, at their arrival time in the trace (or the generated
        one). Workloads without sessions ignore it.
    session_block_tokens : int
        Tokens per prefix id of a session turn (``prefix_block_tokens``): the content ids
        built for a session's history (a trace's sessions, ``synthetic_sessions``).
    rate_scale : float
        Multiplies the arrival rate: arrival times are divided by it (> 0). A value that
        puts the last arrival at 2**26 s or later is refused (the clock could not resolve a
        step there; :mod:`simulator.workload.clock`).
    start_s, end_s : float
        Window ``[start_s, end_s)`` in seconds on the trace's own clock (seconds after the
        first arrival for a trace of timestamps, which the reader re-bases), applied before
        rate scaling; kept arrival times are re-based to ``t - start_s``.
    max_requests : int or None
        Keep only the first ``max_requests`` requests (by arrival) of the window.
    slices, tenants : dict of str to float, or None
        Shares by which to assign slice / tenant names (sum to 1).
    priorities : dict of int to float, or None
        Shares by which to assign priority classes (sum to 1).
    patience : PatienceConfig or None
        Client patience; requests without ``cancel_after_s`` get one sampled.
    shared_prefixes : list of SharedPrefix or None
        Declared shared prefixes; the first matching entry applies to a request.
    max_tokens : int or None
        Declared ``max_tokens`` for every request without one (outputs above it are clipped).
    parallel_sampling : ParallelSamplingConfig or None
        ``n`` sequences per request (parallel sampling, beam search), optionally per slice.
    tile_to_s : float or None
        Repeat the trace until it fills this many seconds (a trace only; before the window;
        :mod:`simulator.workload.diurnal`).
    tile_period_s : float or None
        The repeat period of ``tile_to_s`` (default: the trace's span plus one mean gap).
    rate_profile : RateProfileConfig or None
        Rate-shape the arrivals by a diurnal curve (after ``rate_scale``): the time change
        ``tau = F^-1(t)`` of :mod:`simulator.workload.diurnal`.
    """


    trace: str | None = None
    format: TraceFormat = "auto"
    columns: dict[str, str] | None = None
    time_unit: Literal["s", "ms"] = "s"
    servegen: ServeGenConfig | None = None
    synthetic: SyntheticConfig | None = None
    synthetic_sessions: SyntheticSessionsConfig | None = None
    session_arrival: Literal["closed", "open"] = "closed"
    session_block_tokens: int = Field(default=16, ge=1, le=_TOK)
    rate_scale: float = Field(default=1.0, gt=0)
    start_s: float = Field(default=0.0, ge=0)
    end_s: float | None = None
    max_requests: int | None = Field(default=None, ge=1)
    slices: dict[str, float] | None = None
    tenants: dict[str, float] | None = None
    priorities: dict[int, float] | None = None
    patience: PatienceConfig | None = None
    shared_prefixes: list[SharedPrefix] | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=_TOK)
    parallel_sampling: ParallelSamplingConfig | None = None
    tile_to_s: float | None = Field(default=None, gt=0)
    tile_period_s: float | None = Field(default=None, gt=0)
    rate_profile: RateProfileConfig | None = None

    @field_validator("priorities", mode="before")
    @classmethod
    def _priority_keys(cls, v):
        # YAML writes priority classes as int keys, JSON (a scenario round-tripped through
        # model_dump_json, as sweeps and plans do) as digit strings: accept both, nothing else
        return int_keys(v, "priority class")

    @field_validator("slices", "tenants", "priorities")
    @classmethod
    def _shares(cls, v, info):
        return _check_shares(info.field_name, v)

    @field_validator("trace")
    @classmethod
    def _trace_path(cls, v):
        if v is not None and not str(v).strip():
            raise ValueError("empty path: give the trace file (or leave trace out for a "
                             "synthetic workload)")
        return v

    @field_validator("columns")
    @classmethod
    def _columns(cls, v):
        if v is None:
            return v
        unknown = sorted(set(v) - set(GENERIC_FIELDS))
        if unknown:
            raise ValueError(f"columns: unknown field(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(GENERIC_FIELDS)}")
        return v

    @model_validator(mode="after")
    def _validate(self) -> WorkloadConfig:
        sources = [k for k in ("trace", "synthetic", "synthetic_sessions")
                   if getattr(self, k) is not None]
        if len(sources) != 1:
            raise ValueError("WorkloadConfig: give exactly one of 'trace' and 'synthetic' (or "
                             f"'synthetic_sessions'); got {' and '.join(sources) or 'none'}")
        if self.trace is None:
            for f in ("columns",):
                if getattr(self, f) is not None:
                    raise ValueError(f"WorkloadConfig: {f!r} applies to a trace, not synthetic")
            if self.format != "auto" or self.time_unit != "s":
                raise ValueError("WorkloadConfig: 'format'/'time_unit' apply to a trace only")
        if self.servegen is not None and self.format not in ("auto", "servegen"):
            raise ValueError(f"WorkloadConfig: 'servegen' options apply to format "
                             f"'servegen', not {self.format!r}")
        if self.servegen is not None and self.trace is None:
            raise ValueError("WorkloadConfig: 'servegen' applies to a trace, not synthetic")
        if self.synthetic_sessions is not None and self.shared_prefixes:
            raise ValueError("WorkloadConfig: 'shared_prefixes' does not apply to "
                             "synthetic_sessions (every turn has its session's prefix ids); "
                             "give synthetic_sessions.system_prompt_tokens for a prompt all "
                             "sessions share")
        if self.format in ("azure", "vidur", "mooncake", "servegen"):
            if self.columns is not None:
                raise ValueError(f"WorkloadConfig: 'columns' applies to generic formats, "
                                 f"not format={self.format!r}")
            if self.time_unit != "s":
                raise ValueError(f"WorkloadConfig: 'time_unit' applies to generic formats, "
                                 f"not format={self.format!r} (its unit is fixed)")
        if self.end_s is not None and not self.end_s > self.start_s:
            raise ValueError(f"WorkloadConfig: end_s={self.end_s} must be > start_s="
                             f"{self.start_s}")
        if self.tile_period_s is not None and self.tile_to_s is None:
            raise ValueError("WorkloadConfig: tile_period_s applies with tile_to_s (give both)")
        if self.tile_to_s is not None and self.trace is None:
            raise ValueError("WorkloadConfig: tile_to_s repeats a trace; a synthetic workload "
                             "sets its own length (duration_s)")
        if self.shared_prefixes:
            names = [p.name for p in self.shared_prefixes]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"WorkloadConfig: duplicate shared prefix name(s) {dup}")
        return self
