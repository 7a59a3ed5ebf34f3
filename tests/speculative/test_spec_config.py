"""Unit tests of the speculative config schema and the acceptance factory."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from simulator.speculative.acceptance import (
    EmpiricalAcceptance,
    IIDAcceptance,
    PositionalAcceptance,
    TreeAcceptance,
)
from simulator.speculative.config import (
    AcceptanceConfig,
    SpeculativeConfig,
    TreeShape,
    build_acceptance,
)


def _spec(**kw):
    base = {"method": "eagle", "num_speculative_tokens": 3,
            "acceptance": {"model": "iid", "acceptance_rate": 0.7}}
    base.update(kw)
    return SpeculativeConfig.model_validate(base)


def test_build_each_model():
    assert isinstance(build_acceptance(AcceptanceConfig(acceptance_rate=0.6)), IIDAcceptance)
    pos = build_acceptance(AcceptanceConfig(model="positional", rates=[0.8, 0.7]))
    assert isinstance(pos, PositionalAcceptance) and pos.rates == (0.8, 0.7)
    emp = build_acceptance(AcceptanceConfig(model="empirical", probabilities=[0.5, 0.5]))
    assert isinstance(emp, EmpiricalAcceptance)
    cnt = build_acceptance(AcceptanceConfig(model="empirical", counts=[1, 3]))
    assert cnt.pmf(1).tolist() == pytest.approx([0.25, 0.75])
    tree = build_acceptance(AcceptanceConfig(model="tree", acceptance_rate=0.4),
                            tree=TreeShape(width=4, depth=3))
    assert isinstance(tree, TreeAcceptance) and tree.num_verified_tokens(3) == 12
    with pytest.raises(ValueError, match="tree shape"):
        build_acceptance(AcceptanceConfig(model="tree", acceptance_rate=0.4))


def test_speculative_config_slices_and_factory():
    cfg = _spec(acceptance_by_slice={"code": {"model": "iid", "acceptance_rate": 0.9}})
    assert cfg.acceptance_for("code").acceptance_rate == 0.9
    assert cfg.acceptance_for("chat").acceptance_rate == 0.7
    assert cfg.acceptance_model("code").acceptance_rate == 0.9
    assert build_acceptance(cfg).acceptance_rate == 0.7
    assert cfg.num_verified_tokens == 3
    assert cfg.draft_cost_ratio is None and cfg.tree is None


def test_tree_config():
    cfg = _spec(acceptance={"model": "tree", "acceptance_rate": 0.5},
                tree={"width": 10, "depth": 3})
    assert cfg.num_verified_tokens == 30
    assert cfg.acceptance_model().num_verified_tokens(3) == 30
    with pytest.raises(ValidationError, match="needs speculative.tree"):
        _spec(acceptance={"model": "tree", "acceptance_rate": 0.5})
    with pytest.raises(ValidationError, match="tree.depth"):
        _spec(acceptance={"model": "tree", "acceptance_rate": 0.5}, tree={"width": 2, "depth": 4})


@pytest.mark.parametrize(
    ("acceptance", "match"),
    [
        ({"model": "iid"}, "needs acceptance_rate"),
        ({"model": "iid", "acceptance_rate": 1.2}, "less than or equal"),
        ({"model": "iid", "acceptance_rate": 0.5, "rates": [0.5]}, "does not use rates"),
        ({"model": "positional"}, "needs rates"),
        ({"model": "positional", "rates": []}, "at least 1"),
        ({"model": "empirical"}, "exactly one"),
        ({"model": "empirical", "probabilities": [0.5], "counts": [1]}, "exactly one"),
        ({"model": "empirical", "probabilities": [0.5, 0.4]}, "sum to"),
        ({"model": "empirical", "counts": [0, 0]}, "all be zero"),
        ({"model": "beam", "acceptance_rate": 0.5}, "literal_error|Input should be"),
        ({"acceptance_rate": 0.5, "alpha": 0.5}, "Extra inputs"),
    ],
)
def test_acceptance_config_errors(acceptance, match):
    with pytest.raises(ValidationError, match=match):
        AcceptanceConfig.model_validate(acceptance)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "draft_model"}, "needs draft_model"),
        ({"method": "ngram", "draft_model": "llama-3.2-1b"}, "no separate draft model"),
        ({"method": "eagle", "draft_model": "llama-3.2-1b"}, "no separate draft model"),
        ({"num_speculative_tokens": 0}, "greater than or equal"),
        ({"num_speculative_tokens": True}, "boolean"),
        ({"draft_cost_ratio": -0.1}, "greater than or equal"),
        ({"draft_cost_ratio": float("inf")}, "finite"),
        ({"method": "lookahead"}, "Input should be"),
        ({"temperature": 0.0}, "Extra inputs"),
        ({"tree": {"width": 2, "depth": 3, "shape": "x"}}, "Extra inputs"),
    ],
)
def test_speculative_config_errors(kw, match):
    with pytest.raises(ValidationError, match=match):
        _spec(**kw)


def test_draft_model_method_accepts_a_catalog_name():
    cfg = _spec(method="draft_model", draft_model="llama-3.2-1b", draft_cost_ratio=0.05)
    assert cfg.draft_model == "llama-3.2-1b" and cfg.draft_cost_ratio == 0.05
