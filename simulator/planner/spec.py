"""Schemas of sweep and plan files (pydantic, unknown keys forbidden) and their loading.

A bad file raises :class:`PlanError` with one line naming the key path, the value and what is
allowed, in the style of the scenario loader (``plan.yaml: search.rel_tol: value 0: ...``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from simulator.base.resources import not_a_file_reason
from simulator.base.schema import StrictModel
from simulator.experiments.grid import MAX_GRID_POINTS
from simulator.planner.base_scenario import (
    PlanError,
    check_names_up_front,
    refuse_pools_base,
    resolve_base,
    resolve_base_source,
)
from simulator.planner.spec_checks import (
    apply_spec_overrides,
    check_count,
    check_not_sized,
    check_paths,
    slo_text,
    spec_overrides,
)
from simulator.scenario.config import ScenarioError, format_validation_error
from simulator.scenario.overrides import blame_override
from simulator.scenario.yaml_files import read_yaml_mapping

__all__ = [
    "DEPLOYMENT_GATES",
    "BaselineSpec",
    "GateSettings",
    "PlanError",
    "PlanSpec",
    "QualityEntry",
    "QualityGate",
    "QualityTable",
    "SLOOverride",
    "SearchSettings",
    "SweepSpec",
    "check_names_up_front",
    "format_spec_error",
    "load_plan_spec",
    "load_quality_table",
    "load_sweep_spec",
    "refuse_pools_base",
    "resolve_base",
    "resolve_base_source",
    "slo_text",
]


#: sweep and plan files: unknown keys forbidden, no coercion, finite floats
_Strict = StrictModel


class SweepSpec(_Strict):
    """A sweep file.

    Attributes
    ----------
    name : str
        Used in the default output folder.
    base : str or dict
        Base scenario: a path (relative to the sweep file, the working directory, or a name
        under ``scenarios/``) or an inline scenario mapping.
    set : dict
        Field path -> value applied to the base before the grid.
    grid : dict
        Field path -> list of values; the sweep runs their Cartesian product.
    points : list of dict, optional
        Explicit override sets, each combined with every grid point.
    output_dir : str
        Where ``sweep.parquet``, ``sweep.csv`` and the cache (``.cache/``) go; ``{name}``
        is replaced by ``name``.
    max_points : int
        Most points the sweep may have (``points`` x the grid's product, checked before
        expanding it): a guard against a typo'd range, not a model limit; at most
        :data:`~simulator.experiments.grid.MAX_GRID_POINTS`.
    """

    name: str = "sweep"
    base: str | dict[str, Any]
    set: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[dict[str, Any]] | None = None
    output_dir: str = "reports/sweep_{name}"
    max_points: int = Field(default=10_000, ge=1, le=MAX_GRID_POINTS)

    @model_validator(mode="after")
    def _count(self):
        check_count(self.grid, self.points, self.max_points, "points", "grid", "points",
                    "max_points")
        return self

    @field_validator("set", "grid")
    @classmethod
    def _paths(cls, v, info):
        return check_paths(v, info.field_name)

    @field_validator("grid")
    @classmethod
    def _nonempty(cls, v):
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"grid: '{k}' has no values")
        return v

    @field_validator("points")
    @classmethod
    def _points(cls, v):
        for p in v or []:
            check_paths(p, "points")
        return v


class SearchSettings(_Strict):
    """How the capacity of one configuration is searched (one replica, rate-scaled trace).

    Attributes
    ----------
    window_s : float or None
        Seconds of the trace (from ``start_s``, on the trace's clock) that form the request
        pool; ``None``: the whole workload.
    start_s : float
        Start of the window on the trace's clock (added to the workload's own ``start_s``).
    max_requests : int
        Requests per capacity probe (the first ones of the pool). The main speed knob.
    confirm_max_requests : int or None
        Requests in the cluster confirmation run; default ``max_requests x replicas``
        (at most the pool).
    initial_rate_scale : float
        First probe, as a multiple of the pool's own arrival rate.
    growth : float
        Bracketing factor: double (by default) while feasible, halve while not.
    rel_tol : float
        Bisection (geometric) stops when ``high / low - 1 <= rel_tol``.
    max_probes : int
        Probes per configuration at most.
    min_rate_scale, max_rate_scale : float
        Bracketing limits: below ``min_rate_scale`` the configuration has no capacity; at
        ``max_rate_scale`` the search stops and reports that bound.
    early_stop : bool
        End a probe (or a confirmation) as soon as finished requests prove a gate failed
        (:mod:`simulator.planner.early_stop`); its verdict is the full run's, its other
        metrics cover the part that ran (``stopped_early``). False: every run to its end.
    prune_dominated : bool
        Evaluate the baseline (and last known-good) first and skip every candidate that
        cannot cost less than a passing one (:mod:`simulator.planner.prune`: one replica
        already dearer, or one probe at the capacity it would need fails); skipped
        candidates are reported (``status: skipped``, gate ``dominated`` with its bound).
        The recommendation is unchanged; runners-up are among the candidates not skipped.
    """

    window_s: float | None = Field(default=600.0, gt=0)
    start_s: float = Field(default=0.0, ge=0)
    max_requests: int = Field(default=1000, ge=10)
    confirm_max_requests: int | None = Field(default=None, ge=10)
    initial_rate_scale: float = Field(default=1.0, gt=0)
    growth: float = Field(default=2.0, gt=1)
    rel_tol: float = Field(default=0.1, gt=0, le=1)
    max_probes: int = Field(default=12, ge=2, le=64)
    min_rate_scale: float = Field(default=1.0 / 64, gt=0)
    max_rate_scale: float = Field(default=1024.0, gt=0)
    early_stop: bool = True
    prune_dominated: bool = False

    @model_validator(mode="after")
    def _limits(self):
        if not self.min_rate_scale <= self.initial_rate_scale <= self.max_rate_scale:
            raise ValueError(f"initial_rate_scale {self.initial_rate_scale} must lie in "
                             f"[min_rate_scale, max_rate_scale] = [{self.min_rate_scale}, "
                             f"{self.max_rate_scale}]")
        return self


class GateSettings(_Strict):
    """Quality gates every candidate must pass (besides fitting in memory).

    Attributes
    ----------
    slo_attainment : bool
        SLO attainment >= ``slo.attainment_target`` (capacity probes and the confirmation).
    slice_ttft_p99 : bool
        Every workload slice's p99 TTFT <= its bound: ``slice_ttft_p99_s[slice]``, else
        ``slo.ttft_s`` (no bound: not checked).
    slice_ttft_p99_s : dict of str to float
        Per-slice p99 TTFT bounds in seconds.
    slice_tpot_p99 : bool
        Every workload slice's p99 TPOT <= its bound: ``slice_tpot_p99_s[slice]``, else
        ``slo.tpot_s`` (no bound: not checked). Off by default (turning it on makes plans
        stricter than SLO attainment alone: a p99 bound on every slice).
    slice_tpot_p99_s : dict of str to float
        Per-slice p99 TPOT bounds in seconds.
    max_rejected_fraction : float or None
        Rejected + cancelled requests as a fraction of all, at most this.
    max_preemptions_per_request : float or None
        KV-capacity preemptions per request, at most this.
    max_peak_kv_cache_usage : float or None
        Memory headroom: the peak KV-cache occupancy of any replica in any step (the run
        summary's ``max_kv_cache_usage``, used blocks / blocks, a fraction in (0, 1]) at most
        this. Checked on every capacity probe, so the capacity found keeps the headroom.
    max_gpus : int or None
        GPUs of the sized deployment, at most this.
    max_usd_per_hour : float or None
        Price of the sized deployment, at most this.
    max_usd_per_1m_output_tokens : float or None
        Phase-attributed price per 1M output tokens of the sized deployment at the target
        rate (decode GPU time only, :mod:`simulator.metrics.cost`), at most this many USD.
    max_usd_per_1m_input_tokens : float or None
        Likewise for input tokens (prefill GPU time).
    """

    slo_attainment: bool = True
    slice_ttft_p99: bool = True
    slice_ttft_p99_s: dict[str, float] = Field(default_factory=dict)
    slice_tpot_p99: bool = False
    slice_tpot_p99_s: dict[str, float] = Field(default_factory=dict)
    max_rejected_fraction: float | None = Field(default=None, ge=0, le=1)
    max_preemptions_per_request: float | None = Field(default=None, ge=0)
    max_peak_kv_cache_usage: float | None = Field(default=None, gt=0, le=1)
    max_gpus: int | None = Field(default=None, ge=1)
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    max_usd_per_1m_output_tokens: float | None = Field(default=None, gt=0)
    max_usd_per_1m_input_tokens: float | None = Field(default=None, gt=0)

    @field_validator("slice_ttft_p99_s", "slice_tpot_p99_s")
    @classmethod
    def _positive(cls, v):
        for k, b in v.items():
            if not b > 0:
                raise ValueError(f"slice {k!r}: bound must be > 0 s, got {b}")
        return v


#: Gates of :class:`GateSettings` checked on the sized deployment (plan rows), not on each
#: simulation: they do not change what a candidate's simulations find.
DEPLOYMENT_GATES = ("max_gpus", "max_usd_per_hour", "max_usd_per_1m_output_tokens",
                    "max_usd_per_1m_input_tokens")


class QualityEntry(_Strict):
    """Quality scores of the configurations a ``match`` selects.

    Attributes
    ----------
    name : str, optional
        Shown in the report (default: the ``match`` as ``key=value`` pairs).
    match : dict
        Field path -> value; the entry applies to a configuration whose resolved scenario has
        every one of these values (``hardware.gpu`` compares catalog names, so aliases
        match). Empty: every configuration.
    score : float, optional
        Score of every slice without its own entry in ``slices``.
    slices : dict of str to float
        Score per workload slice.
    """

    name: str | None = None
    match: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    slices: dict[str, float] = Field(default_factory=dict)

    @field_validator("match")
    @classmethod
    def _paths(cls, v):
        return check_paths(v, "match")

    @model_validator(mode="after")
    def _some_score(self):
        if self.score is None and not self.slices:
            raise ValueError("a quality entry needs 'score' or 'slices'")
        return self


class QualityTable(_Strict):
    """A table of user-supplied quality scores (what a plan's ``quality.table`` holds).

    Attributes
    ----------
    metric : str
        What the scores measure (a label, e.g. ``accuracy``); higher is better.
    source : str
        Where the scores come from (evaluation, date, sample size): shown in the report.
    scores : list of QualityEntry
        Matched in order; the first entry whose ``match`` holds gives a configuration's
        scores, so list specific entries before general ones.
    """

    metric: str = Field(default="score", min_length=1)
    source: str = Field(min_length=1)
    scores: list[QualityEntry] = Field(min_length=1)


class QualityGate(_Strict):
    """The quality gate of a plan: scores per configuration and slice, with minimums.

    Attributes
    ----------
    table : str or QualityTable
        A YAML file (path relative to the plan file, then the working directory) holding a
        :class:`QualityTable`, or the table inline.
    min_score : float, optional
        Minimum score of every slice of the workload.
    min_score_by_slice : dict of str to float
        Minimum per slice (overrides ``min_score`` for that slice; slices named here are
        checked even when ``min_score`` is not given).
    unscored : {"fail", "pass"}
        What a checked slice without a score means for a configuration: ``fail`` (default:
        an unevaluated path, such as a new quantization, cannot pass a quality gate) or
        ``pass``.
    """

    table: str | QualityTable
    min_score: float | None = None
    min_score_by_slice: dict[str, float] = Field(default_factory=dict)
    unscored: Literal["fail", "pass"] = "fail"

    @model_validator(mode="after")
    def _some_minimum(self):
        if self.min_score is None and not self.min_score_by_slice:
            raise ValueError("quality: give min_score and/or min_score_by_slice")
        return self


class SLOOverride(_Strict):
    """SLO fields to override in the base scenario (``None``: keep the base's value)."""

    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    e2e_s: float | None = Field(default=None, gt=0)
    attainment_target: float | None = Field(default=None, gt=0, le=1)


class BaselineSpec(_Strict):
    """A named configuration the plan evaluates beside the candidates: the baseline (what
    runs today) or the last known-good configuration (the plan's fallback when given)."""

    name: str = Field(default="baseline", min_length=1)
    set: dict[str, Any] = Field(default_factory=dict)

    @field_validator("set")
    @classmethod
    def _paths(cls, v):
        return check_not_sized(check_paths(v, "set"), "set")


class PlanSpec(_Strict):
    """A capacity plan file.

    Attributes
    ----------
    name : str
    base : str or dict
        Base scenario path or inline mapping (as in a sweep).
    set : dict
        Field path -> value applied to the base first.
    target_rate_rps : float, optional
        Arrival rate (requests/s) the deployment must sustain.
    rate_scale : float, optional
        Alternatively: the target as a multiple of the pool's own rate (default 1).
    slo : SLOOverride
        SLO fields overriding the base scenario's ``slo:``.
    search_space : dict
        Field path -> list of values; candidates are their Cartesian product (replicas are
        not a search dimension: the planner sizes them).
    candidates : list of dict, optional
        Explicit override sets, each combined with every ``search_space`` point.
    prices : dict of str to float
        GPU name (or alias) -> US dollars per GPU-hour. Default: the GPU profile's price.
    baseline : BaselineSpec
        Named baseline configuration (overrides of the base; default: the base itself); the
        fallback unless ``last_known_good`` is given.
    last_known_good : BaselineSpec, optional
        The last configuration known to serve well (overrides of the base); when given it is
        the plan's fallback, evaluated and shown beside the recommendation.
    gates : GateSettings
    quality : QualityGate, optional
        User-supplied quality scores per configuration and slice, with minimums.
    headroom : float
        Capacity margin when sizing: replicas = ceil(target x (1 + headroom) / capacity).
    max_extra_replicas : int
        Replicas added one at a time when the cluster confirmation fails.
    search : SearchSettings
    top_k : int
        Runners-up listed and configurations drawn in the latency-vs-load figure.
    output_dir : str
        Report folder (``{name}`` expanded); the cache is ``OUTDIR/.cache/``.
    max_candidates : int
        Most candidates the plan may have (``candidates`` x the product of ``search_space``,
        checked before expanding it): a guard against a typo'd range, not a model limit.
    """

    name: str = "plan"
    base: str | dict[str, Any]
    set: dict[str, Any] = Field(default_factory=dict)
    target_rate_rps: float | None = Field(default=None, gt=0)
    rate_scale: float | None = Field(default=None, gt=0)
    slo: SLOOverride = Field(default_factory=SLOOverride)
    search_space: dict[str, list[Any]] = Field(default_factory=dict)
    candidates: list[dict[str, Any]] | None = None
    prices: dict[str, float] = Field(default_factory=dict)
    baseline: BaselineSpec = Field(default_factory=BaselineSpec)
    last_known_good: BaselineSpec | None = None
    gates: GateSettings = Field(default_factory=GateSettings)
    quality: QualityGate | None = None
    headroom: float = Field(default=0.1, ge=0, le=10)
    max_extra_replicas: int = Field(default=4, ge=0, le=64)
    search: SearchSettings = Field(default_factory=SearchSettings)
    top_k: int = Field(default=5, ge=1, le=50)
    output_dir: str = "reports/plan_{name}"
    max_candidates: int = Field(default=10_000, ge=1, le=MAX_GRID_POINTS)

    @field_validator("set", "search_space")
    @classmethod
    def _paths(cls, v, info):
        return check_paths(v, info.field_name)

    @field_validator("set")
    @classmethod
    def _setcheck_not_sized(cls, v):
        return check_not_sized(v, "set")

    @field_validator("search_space")
    @classmethod
    def _space(cls, v):
        for k, vals in v.items():
            if not vals:
                raise ValueError(f"'{k}' has no values")
            if k == "cluster.num_replicas":
                raise ValueError("cluster.num_replicas is sized by the planner, "
                                 "not searched")
            if k == "workload" or k.startswith("workload."):
                raise ValueError(f"'{k}': the workload is fixed for a plan "
                                 "(use a sweep to vary it)")
        return v

    @field_validator("candidates")
    @classmethod
    def _cands(cls, v):
        for p in v or []:
            check_paths(p, "candidates")
            for k in p:
                if k == "cluster.num_replicas" or k.startswith("workload"):
                    raise ValueError(f"'{k}' cannot vary between candidates")
        return v

    @field_validator("prices")
    @classmethod
    def _prices(cls, v):
        for k, p in v.items():
            if not p >= 0:
                raise ValueError(f"price of {k!r} must be >= 0 USD/GPU-hour, got {p}")
        return v

    @model_validator(mode="after")
    def _target(self):
        check_count(self.search_space, self.candidates, self.max_candidates, "candidates",
                    "search_space", "candidates", "max_candidates")
        if self.target_rate_rps is not None and self.rate_scale is not None:
            raise ValueError("give target_rate_rps or rate_scale, not both")
        if self.last_known_good is not None and \
                self.last_known_good.name == self.baseline.name:
            raise ValueError(f"last_known_good and baseline share the name "
                             f"{self.baseline.name!r}; name them apart")
        return self


# ---------------------------------------------------------------------- errors and loading
def format_spec_error(e: ValidationError, model_cls, source: str) -> str:
    """One line for the first validation error of a sweep or plan file (the scenario
    loader's formatter, listing ``model_cls``'s keys for an unknown key)."""
    return format_validation_error(e, source, model_cls)


def _read_yaml(path: str | Path, what: str) -> tuple[dict, Path]:
    raw, p = read_yaml_mapping(path, what, PlanError)
    return raw, p.parent


def _load_spec(path: str | Path, overrides: list[str] | None, what: str, schema, flag: str):
    raw, folder = _read_yaml(path, what)
    if "base" not in raw and "workload" in raw:
        raise PlanError(f"{path}: a scenario file (it has workload: and no base:), not a "
                        f"{what} file; run it with servesim run, or name it as base: in a "
                        f"{what} file")
    other = {"plan": ("sweep", "grid", "search_space"), "sweep": ("plan", "search_space", "grid")}
    kind, has, lacks = other.get(what, (None, None, None))
    if kind and has in raw and lacks not in raw:
        raise PlanError(f"{path}: a {kind} file (it has {has}: and no {lacks}:), not a {what} "
                        f"file; run it with servesim {kind}")
    ovs = spec_overrides(overrides, flag)
    try:
        raw = apply_spec_overrides(raw, ovs, schema)
    except ScenarioError as e:  # a bad boolean spelling: the file leads, as for other errors
        raise PlanError(f"{path}: {e}") from None
    try:
        return schema.model_validate(raw), folder
    except ValidationError as e:
        who = blame_override(e, ovs)
        src = f"{path}: {who}" if who else str(path)
        raise PlanError(format_spec_error(e, schema, src)) from None


def load_sweep_spec(path: str | Path, overrides: list[str] | None = None) -> tuple[SweepSpec,
                                                                                   Path]:
    """Read and validate a sweep file (``overrides``: its ``--sweep-set`` items); returns the
    spec and the folder of the file.

    Raises
    ------
    PlanError
        One line naming the file, the ``--sweep-set`` item responsible (if any) and the key.
    """
    return _load_spec(path, overrides, "sweep", SweepSpec, "--sweep-set")


def load_plan_spec(path: str | Path, overrides: list[str] | None = None) -> tuple[PlanSpec,
                                                                                 Path]:
    """Read and validate a plan file (``overrides``: its ``--plan-set`` items); returns the
    spec and the folder of the file.

    Raises
    ------
    PlanError
        One line naming the file, the ``--plan-set`` item responsible (if any) and the key.
    """
    return _load_spec(path, overrides, "plan", PlanSpec, "--plan-set")


def load_quality_table(gate: QualityGate, spec_dir: Path | None) -> QualityTable:
    """The quality table of a plan's ``quality`` gate (read and validated when a path).

    The path is tried relative to the plan file's folder, then as given.

    Raises
    ------
    PlanError
        A missing or unreadable file, or one line naming the file and key of an invalid table.
    """
    if isinstance(gate.table, QualityTable):
        return gate.table
    p = Path(gate.table).expanduser()
    if not p.is_absolute() and spec_dir is not None and (spec_dir / p).is_file():
        p = spec_dir / p
    if not p.is_file():
        why = not_a_file_reason(p, "quality table")
        raise PlanError(f"quality.table: file {gate.table!r} not found (relative to the plan "
                        f"file's folder or the working directory)" if why.endswith(
                            "not found") else f"quality.table: file {gate.table!r}: {why}")
    raw, _ = read_yaml_mapping(p, "quality table", PlanError)
    try:
        return QualityTable.model_validate(raw)
    except ValidationError as e:
        raise PlanError(format_spec_error(e, QualityTable, str(p))) from None
