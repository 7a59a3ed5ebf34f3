"""Distributions of the workload schema (pydantic v2): token lengths (:class:`LengthDist`),
arrival processes (:class:`ArrivalConfig`), client patience (:class:`PatienceConfig`) and
session think times (:class:`ThinkTimeDist`), shared by the synthetic generators
(:mod:`simulator.workload.synthetic`, :mod:`simulator.workload.session_synth`) and ServeGen.

A parameter the chosen ``dist`` does not use is an error naming the ones it takes; samples
are clipped to ``[min, max]``.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from simulator.base.schema import MAX_TOKENS_REPRESENTABLE, StrictModel

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


def _check_seconds_dist(model: BaseModel, *, fixed_may_be_zero: bool) -> None:
    """The checks of a distribution of seconds (:class:`PatienceConfig`,
    :class:`ThinkTimeDist`): the parameters its ``dist`` takes, ``min <= max``, and positive
    parameters (a ``fixed`` value of 0 only where ``fixed_may_be_zero``); errors are prefixed
    with the model's name."""
    name, m = type(model).__name__, model
    allowed = {"fixed": ("value",), "lognormal": ("median", "sigma"),
               "uniform": ("low", "high"), "exponential": ("mean_s",)}
    _check_fields(m, m.dist, allowed, allowed)
    if m.max is not None and m.max < m.min:
        raise ValueError(f"{name}: max={m.max} is below min={m.min}")
    if m.dist == "fixed" and not (m.value >= 0 if fixed_may_be_zero else m.value > 0):
        raise ValueError(f"{name}: fixed value must be {'>=' if fixed_may_be_zero else '>'} "
                         f"0 s, got {m.value}")
    if m.dist == "lognormal" and not (m.median > 0 and m.sigma >= 0):
        raise ValueError(f"{name}: lognormal needs median > 0 and sigma >= 0")
    if m.dist == "uniform" and not (0 <= m.low <= m.high):
        raise ValueError(f"{name}: uniform needs 0 <= low <= high")
    if m.dist == "exponential" and not m.mean_s > 0:
        raise ValueError(f"{name}: mean_s must be > 0, got {m.mean_s}")


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
        _check_seconds_dist(self, fixed_may_be_zero=False)
        return self


class ThinkTimeDist(StrictModel):
    """Distribution of a session's think time in seconds: from the end of a turn (its last
    token) to the user's next turn.

    ``fixed``: ``value`` (0: the next turn follows the answer at once, as in an agent's
    tool loop). ``exponential``: mean ``mean_s``. ``lognormal``: ``exp(N(ln(median),
    sigma))`` seconds. ``uniform``: continuous on ``[low, high]``. Samples are clipped to
    ``[min, max]``.
    """

    dist: Literal["fixed", "exponential", "lognormal", "uniform"]
    value: float | None = None
    mean_s: float | None = None
    median: float | None = None
    sigma: float | None = None
    low: float | None = None
    high: float | None = None
    min: float = Field(default=0.0, ge=0)
    max: float | None = None

    @model_validator(mode="after")
    def _validate(self) -> ThinkTimeDist:
        _check_seconds_dist(self, fixed_may_be_zero=True)
        return self
