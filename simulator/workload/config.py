"""Workload configuration schema (pydantic v2).

A workload is either a trace file (``trace``) or a synthetic specification (``synthetic``),
followed by the same post-processing: time window, rate scaling, request cap, share-based
assignment of slices / tenants / priorities, client patience, declared shared prefixes and a
declared ``max_tokens``. See :func:`simulator.workload.load_workload` for the order.

All models derive from :class:`simulator.base.schema.StrictModel`: unknown fields are errors (a typo
in a scenario file is not a silent default), values are not coerced (``max_requests: true`` or
``rate_scale: "2"`` are errors) and floats must be finite (``duration_s: .inf`` is an error).
Token counts are at most :data:`simulator.base.schema.MAX_TOKENS_REPRESENTABLE` (2**31 - 1).
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from simulator.base.schema import MAX_TOKENS_REPRESENTABLE, StrictModel, int_keys

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
)
#: The fields a generic trace must provide.
REQUIRED_GENERIC_FIELDS = ("arrival_time_s", "num_prompt_tokens", "num_output_tokens")

TraceFormat = Literal["auto", "azure", "vidur", "mooncake", "generic_csv", "generic_jsonl",
                      "parquet", "servegen"]

SHARE_TOLERANCE = 1e-6
_TOK = MAX_TOKENS_REPRESENTABLE


def _check_fields(model: BaseModel, dist: str, allowed: dict[str, tuple[str, ...]],
                  required: dict[str, tuple[str, ...]]) -> None:
    """Reject parameters that the chosen distribution does not use; require those it needs."""
    name = type(model).__name__
    used = set(allowed[dist])
    for field in sorted(set().union(*allowed.values())):
        if field not in used and getattr(model, field) is not None:
            raise ValueError(f"{name}: field {field!r} is not used by dist={dist!r} "
                             f"(it takes: {', '.join(allowed[dist]) or 'no parameters'})")
    missing = [f for f in required[dist] if getattr(model, f) is None]
    if missing:
        raise ValueError(f"{name}: dist={dist!r} requires {', '.join(map(repr, missing))}")


class LengthDist(StrictModel):
    """Distribution of a token length (prompt or output), in tokens.

    ``fixed``: every request gets ``value``. ``lognormal``: ``exp(N(ln(median), sigma))``, so
    ``median`` is the median in tokens and ``sigma`` the standard deviation of ln(tokens).
    ``uniform``: integers ``low..high`` inclusive. ``empirical``: ``values`` drawn with
    ``weights`` (normalised; equal when omitted), or the lengths of a trace file
    (``from_trace``; ``column`` picks its prompt or output lengths, by default the column of
    the length being drawn). Samples are rounded to integers and clipped to ``[min, max]``.
    """


    dist: Literal["fixed", "lognormal", "empirical", "uniform"]
    value: int | None = Field(default=None, le=_TOK)
    median: float | None = Field(default=None, le=_TOK)
    sigma: float | None = None
    low: int | None = Field(default=None, le=_TOK)
    high: int | None = Field(default=None, le=_TOK)
    values: list[Annotated[int, Field(le=_TOK)]] | None = None
    weights: list[float] | None = None
    from_trace: str | None = None
    column: Literal["prompt", "output"] | None = None
    min: int = Field(default=1, ge=1, le=_TOK)
    max: int | None = Field(default=None, le=_TOK)

    @model_validator(mode="after")
    def _validate(self) -> LengthDist:
        allowed = {
            "fixed": ("value",),
            "lognormal": ("median", "sigma"),
            "uniform": ("low", "high"),
            "empirical": ("values", "weights", "from_trace", "column"),
        }
        required = {"fixed": ("value",), "lognormal": ("median", "sigma"),
                    "uniform": ("low", "high"), "empirical": ()}
        _check_fields(self, self.dist, allowed, required)
        if self.max is not None and self.max < self.min:
            raise ValueError(f"LengthDist: max={self.max} is below min={self.min}")
        if self.dist == "fixed" and self.value < 1:
            raise ValueError(f"LengthDist: fixed value must be >= 1 token, got {self.value}")
        if self.dist == "lognormal":
            if not self.median > 0:
                raise ValueError(f"LengthDist: lognormal median must be > 0, got {self.median}")
            if not self.sigma >= 0:
                raise ValueError(f"LengthDist: lognormal sigma must be >= 0, got {self.sigma}")
        if self.dist == "uniform" and (self.low < 1 or self.high < self.low):
            raise ValueError(f"LengthDist: uniform needs 1 <= low <= high, "
                             f"got low={self.low}, high={self.high}")
        if self.dist == "empirical":
            if (self.values is None) == (self.from_trace is None):
                raise ValueError("LengthDist: dist='empirical' needs exactly one of "
                                 "'values' (with optional 'weights') or 'from_trace'")
            if self.values is not None:
                if not self.values:
                    raise ValueError("LengthDist: empirical 'values' is empty")
                if any(v < 1 for v in self.values):
                    raise ValueError("LengthDist: empirical 'values' must all be >= 1 token")
                if self.column is not None:
                    raise ValueError("LengthDist: 'column' only applies with 'from_trace'")
            if self.weights is not None:
                if self.values is None:
                    raise ValueError("LengthDist: 'weights' only applies with 'values'")
                if len(self.weights) != len(self.values):
                    raise ValueError(f"LengthDist: {len(self.weights)} weights for "
                                     f"{len(self.values)} values")
                if any(not w >= 0 for w in self.weights) or not sum(self.weights) > 0:
                    raise ValueError("LengthDist: weights must be >= 0 with a positive sum")
        return self


class ArrivalConfig(StrictModel):
    """Synthetic arrival process.

    ``poisson``: exponential inter-arrival gaps with mean ``1 / rate_rps`` seconds (``cv`` must
    be 1). ``gamma``: gaps ~ Gamma(shape = 1/cv², scale = cv²/rate_rps): mean gap
    ``1 / rate_rps`` s and coefficient of variation ``cv`` (cv > 1 is burstier than Poisson).
    """


    process: Literal["poisson", "gamma"]
    rate_rps: float = Field(gt=0)
    cv: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _validate(self) -> ArrivalConfig:
        if self.process == "poisson" and self.cv != 1.0:
            raise ValueError(f"ArrivalConfig: a poisson process has cv=1 (got cv={self.cv}); "
                             "use process='gamma' for another cv")
        cv2 = self.cv * self.cv
        if not (cv2 > 0.0 and math.isfinite(cv2) and math.isfinite(1.0 / cv2)):
            # the gamma's shape 1 / cv**2 and scale cv**2 / rate_rps must be finite and > 0
            raise ValueError(f"ArrivalConfig: cv={self.cv} is out of the range a gamma process "
                             "can be drawn with (cv**2 and 1/cv**2 must be finite and > 0)")
        return self


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


class PatienceConfig(StrictModel):
    """Distribution of client patience in seconds (time after arrival until the client cancels
    a request that has not received its first token).

    ``fixed``: ``value``. ``lognormal``: ``exp(N(ln(median), sigma))``. ``uniform``: continuous
    on ``[low, high]``. ``exponential``: mean ``mean_s``. Samples are clipped to ``[min, max]``.
    ``fraction`` of the requests (chosen at random) get a patience; the others wait forever.
    """


    dist: Literal["fixed", "lognormal", "uniform", "exponential"]
    value: float | None = None
    median: float | None = None
    sigma: float | None = None
    low: float | None = None
    high: float | None = None
    mean_s: float | None = None
    min: float = Field(default=0.0, ge=0)
    max: float | None = None
    fraction: float = Field(default=1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _validate(self) -> PatienceConfig:
        allowed = {"fixed": ("value",), "lognormal": ("median", "sigma"),
                   "uniform": ("low", "high"), "exponential": ("mean_s",)}
        _check_fields(self, self.dist, allowed, allowed)
        if self.max is not None and self.max < self.min:
            raise ValueError(f"PatienceConfig: max={self.max} is below min={self.min}")
        if self.dist == "fixed" and not self.value > 0:
            raise ValueError(f"PatienceConfig: fixed value must be > 0 s, got {self.value}")
        if self.dist == "lognormal" and not (self.median > 0 and self.sigma >= 0):
            raise ValueError("PatienceConfig: lognormal needs median > 0 and sigma >= 0")
        if self.dist == "uniform" and not (0 <= self.low <= self.high):
            raise ValueError("PatienceConfig: uniform needs 0 <= low <= high")
        if self.dist == "exponential" and not self.mean_s > 0:
            raise ValueError(f"PatienceConfig: mean_s must be > 0, got {self.mean_s}")
        return self


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
    """The workload of a scenario: a trace or a synthetic spec, plus post-processing.

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
        Synthetic workload (exactly one of ``trace`` and ``synthetic``).
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
    """


    trace: str | None = None
    format: TraceFormat = "auto"
    columns: dict[str, str] | None = None
    time_unit: Literal["s", "ms"] = "s"
    servegen: ServeGenConfig | None = None
    synthetic: SyntheticConfig | None = None
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
        if (self.trace is None) == (self.synthetic is None):
            raise ValueError("WorkloadConfig: give exactly one of 'trace' and 'synthetic'")
        if self.synthetic is not None:
            for f in ("columns",):
                if getattr(self, f) is not None:
                    raise ValueError(f"WorkloadConfig: {f!r} applies to a trace, not synthetic")
            if self.format != "auto" or self.time_unit != "s":
                raise ValueError("WorkloadConfig: 'format'/'time_unit' apply to a trace only")
        if self.servegen is not None and self.format not in ("auto", "servegen"):
            raise ValueError(f"WorkloadConfig: 'servegen' options apply to format "
                             f"'servegen', not {self.format!r}")
        if self.servegen is not None and self.synthetic is not None:
            raise ValueError("WorkloadConfig: 'servegen' applies to a trace, not synthetic")
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
        if self.shared_prefixes:
            names = [p.name for p in self.shared_prefixes]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"WorkloadConfig: duplicate shared prefix name(s) {dup}")
        return self
