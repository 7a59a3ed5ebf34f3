"""Scenario schema of speculative decoding (pydantic v2) and the acceptance-model factory.

A scenario's ``speculative:`` block, e.g.::

    speculative:
      method: draft_model
      draft_model: llama-3.2-1b
      num_speculative_tokens: 4
      acceptance: {model: iid, acceptance_rate: 0.7}
      acceptance_by_slice:
        code: {model: empirical, probabilities: [0.2, 0.15, 0.15, 0.1, 0.4]}

All models derive from :class:`simulator.base.schema.StrictModel` (unknown keys forbidden, no
coercion, finite floats), and each acceptance model accepts only its own fields.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from simulator.base.schema import StrictModel
from simulator.speculative.acceptance import (
    AcceptanceModel,
    EmpiricalAcceptance,
    IIDAcceptance,
    PositionalAcceptance,
    TreeAcceptance,
)

__all__ = ["AcceptanceConfig", "SpeculativeConfig", "TreeShape", "build_acceptance"]

Rate = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]

# which optional fields each acceptance model uses
_FIELDS_BY_MODEL: dict[str, tuple[str, ...]] = {
    "iid": ("acceptance_rate",),
    "tree": ("acceptance_rate",),
    "positional": ("rates",),
    "empirical": ("probabilities", "counts"),
}
_OPTIONAL_FIELDS = ("acceptance_rate", "rates", "probabilities", "counts")


def _no_bool(v):
    # pydantic turns only ValueError/AssertionError into a ValidationError
    if isinstance(v, bool):
        raise ValueError("expected an integer, got a boolean")  # noqa: TRY004
    return v


class TreeShape(StrictModel):
    """Shape of a tree draft: ``width`` candidates verified at each of ``depth`` levels.

    Attributes
    ----------
    width : int
        Candidates per level (>= 1).
    depth : int
        Levels (>= 1); equals ``num_speculative_tokens``.
    """

    model_config = ConfigDict(frozen=True, validate_assignment=False)

    width: int = Field(ge=1)
    depth: int = Field(ge=1)

    reject_bool_ints = field_validator("width", "depth", mode="before")(_no_bool)


class AcceptanceConfig(StrictModel):
    """How many draft tokens a verification step accepts (see
    :mod:`simulator.speculative.acceptance`).

    Attributes
    ----------
    model : {"iid", "positional", "empirical", "tree"}, default "iid"
        The acceptance model.
    acceptance_rate : float, optional
        ``iid``: probability each draft token is accepted; ``tree``: per-candidate
        acceptance probability. In ``[0, 1]``.
    rates : list of float, optional
        ``positional``: conditional acceptance rate of draft position 1, 2, ... (the last
        one repeats for deeper positions).
    probabilities : list of float, optional
        ``empirical``: P(accepted drafts = n), n = 0..m; sums to 1.
    counts : list of float, optional
        ``empirical``: histogram of accepted drafts per step (normalized on use); give
        either ``probabilities`` or ``counts``.
    """

    model_config = ConfigDict(frozen=True, validate_assignment=False)

    model: Literal["iid", "positional", "empirical", "tree"] = "iid"
    acceptance_rate: Rate | None = None
    rates: list[Rate] | None = Field(default=None, min_length=1)
    probabilities: list[NonNegative] | None = Field(default=None, min_length=1)
    counts: list[NonNegative] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _fields_match_model(self) -> AcceptanceConfig:
        allowed = _FIELDS_BY_MODEL[self.model]
        extra = [f for f in _OPTIONAL_FIELDS if f not in allowed and getattr(self, f) is not None]
        if extra:
            raise ValueError(
                f"acceptance model {self.model!r} does not use {', '.join(extra)} "
                f"(it takes: {' or '.join(allowed)})"
            )
        if self.model in ("iid", "tree") and self.acceptance_rate is None:
            raise ValueError(f"acceptance model {self.model!r} needs acceptance_rate")
        if self.model == "positional" and self.rates is None:
            raise ValueError("acceptance model 'positional' needs rates")
        if self.model == "empirical":
            if (self.probabilities is None) == (self.counts is None):
                raise ValueError(
                    "acceptance model 'empirical' needs exactly one of probabilities or counts")
            if self.probabilities is not None and abs(sum(self.probabilities) - 1.0) > 1e-6:
                raise ValueError(
                    f"probabilities sum to {sum(self.probabilities):.9g}, not 1 "
                    f"(give raw histograms as counts)")
            if self.counts is not None and sum(self.counts) <= 0:
                raise ValueError("counts must not all be zero")
        return self


class SpeculativeConfig(StrictModel):
    """Speculative decoding of one deployment.

    Attributes
    ----------
    method : {"draft_model", "ngram", "eagle", "medusa"}
        How drafts are produced (vLLM's names).
    num_speculative_tokens : int
        ``k`` (gamma), draft tokens proposed per step (>= 1); for a tree, its depth.
    draft_model : str, optional
        Catalog name of the draft model; required for ``draft_model``, not allowed for
        ``ngram``.
    acceptance : AcceptanceConfig
        Acceptance model of every slice without its own entry.
    acceptance_by_slice : dict of str to AcceptanceConfig
        Per workload slice overrides (keys are ``RequestSpec.slice`` names).
    draft_cost_ratio : float, optional
        Override of one draft step's time as a fraction of one target decode step (>= 0).
        ``None``: the performance model computes it (draft model's own step time for
        ``draft_model``, ~0 for ``ngram``, a head cost for ``eagle``/``medusa``).
    tree : TreeShape, optional
        Tree draft shape; required when any acceptance model is ``tree``, and then
        ``tree.depth`` must equal ``num_speculative_tokens``.
    """

    model_config = ConfigDict(frozen=True, validate_assignment=False)

    method: Literal["draft_model", "ngram", "eagle", "medusa"]
    num_speculative_tokens: int = Field(ge=1)
    draft_model: str | None = Field(default=None, min_length=1)
    acceptance: AcceptanceConfig
    acceptance_by_slice: dict[str, AcceptanceConfig] = Field(default_factory=dict)
    draft_cost_ratio: NonNegative | None = None
    tree: TreeShape | None = None

    reject_bool_ints = field_validator("num_speculative_tokens", mode="before")(_no_bool)

    @model_validator(mode="after")
    def _consistent(self) -> SpeculativeConfig:
        if self.method == "draft_model" and self.draft_model is None:
            raise ValueError("method 'draft_model' needs draft_model (a model catalog name)")
        if self.method != "draft_model" and self.draft_model is not None:
            raise ValueError(f"method '{self.method}' uses no separate draft model; remove "
                             "draft_model (or use method: draft_model)")
        tree_slices = [name for name, a in self._all_acceptance() if a.model == "tree"]
        if tree_slices and self.tree is None:
            raise ValueError(
                f"acceptance model 'tree' (for {', '.join(tree_slices)}) needs "
                f"speculative.tree: {{width, depth}}")
        k = self.num_speculative_tokens
        for name, a in self._all_acceptance():
            hist = a.probabilities if a.probabilities is not None else a.counts
            if a.model == "empirical" and len(hist) < k + 1:
                field = "probabilities" if a.probabilities is not None else "counts"
                where = "acceptance" if name == "default" else f"acceptance_by_slice.{name}"
                raise ValueError(
                    f"{where}.{field} has {len(hist)} entries (accepted drafts 0..{len(hist) - 1})"
                    f" but num_speculative_tokens {k} needs {k + 1} (0..{k}): a histogram "
                    f"measured at fewer drafts says nothing about accepting more; measure it "
                    f"at k = {k}" + (f" or lower num_speculative_tokens to {len(hist) - 1}"
                                     if len(hist) >= 2 else ""))
        if self.tree is not None and self.tree.depth != self.num_speculative_tokens:
            raise ValueError(
                f"tree.depth ({self.tree.depth}) must equal num_speculative_tokens "
                f"({self.num_speculative_tokens})")
        return self

    def _all_acceptance(self) -> list[tuple[str, AcceptanceConfig]]:
        return [("default", self.acceptance), *self.acceptance_by_slice.items()]

    def acceptance_for(self, slice_name: str | None = None) -> AcceptanceConfig:
        """The acceptance config of ``slice_name`` (the default one when it has none)."""
        if slice_name is None:
            return self.acceptance
        return self.acceptance_by_slice.get(slice_name, self.acceptance)

    def acceptance_model(self, slice_name: str | None = None) -> AcceptanceModel:
        """Build the acceptance model of ``slice_name`` (see :func:`build_acceptance`)."""
        return build_acceptance(self.acceptance_for(slice_name), tree=self.tree)

    @property
    def num_verified_tokens(self) -> int:
        """Draft tokens the target verifies per step: ``width * depth`` for a tree, else
        ``num_speculative_tokens``."""
        if self.tree is not None:
            return self.tree.width * self.tree.depth
        return self.num_speculative_tokens


def build_acceptance(
    cfg: AcceptanceConfig | SpeculativeConfig, *, tree: TreeShape | None = None
) -> AcceptanceModel:
    """Build an acceptance model from its config.

    Parameters
    ----------
    cfg : AcceptanceConfig or SpeculativeConfig
        An acceptance config, or a speculative config (its default ``acceptance`` and its
        ``tree`` are used).
    tree : TreeShape, optional
        The tree shape, needed when ``cfg.model == "tree"`` (ignored for a
        ``SpeculativeConfig``, which carries its own).

    Returns
    -------
    AcceptanceModel
        :class:`IIDAcceptance`, :class:`PositionalAcceptance`, :class:`EmpiricalAcceptance`
        or :class:`TreeAcceptance`.

    Raises
    ------
    ValueError
        If a tree model is requested without a tree shape.
    """
    if isinstance(cfg, SpeculativeConfig):
        cfg, tree = cfg.acceptance, cfg.tree
    if cfg.model == "iid":
        return IIDAcceptance(cfg.acceptance_rate)
    if cfg.model == "positional":
        return PositionalAcceptance(cfg.rates)
    if cfg.model == "empirical":
        if cfg.counts is not None:
            return EmpiricalAcceptance.from_counts(cfg.counts)
        return EmpiricalAcceptance(cfg.probabilities)
    if tree is None:
        raise ValueError("acceptance model 'tree' needs a tree shape {width, depth}")
    return TreeAcceptance(tree.width, tree.depth, cfg.acceptance_rate)
