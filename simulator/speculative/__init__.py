"""Speculative decoding, the maths and models: acceptance models, closed-form estimates,
the exact rejection sampler and the arithmetic of acceptance economics.

- :mod:`~simulator.speculative.acceptance` -- accepted-length distributions the engine
  samples per verification step (i.i.d., positional, empirical, tree);
- :mod:`~simulator.speculative.config` -- the scenario's ``speculative:`` schema and
  :func:`build_acceptance`;
- :mod:`~simulator.speculative.calculator` -- Leviathan et al. (2023) closed forms
  (``servesim spec``);
- :mod:`~simulator.speculative.sampler` -- the exact token-level rejection sampler (the
  reference behind invariant 10);
- :mod:`~simulator.speculative.economics` -- gains, the sweep table and crossovers of
  speculation on versus off (pure arithmetic on run summaries).

Elsewhere: the scheduler plug-in that runs speculation in the engine
(``simulator/scheduling/speculative.py``), the run's
speculative counters (:mod:`simulator.metrics.speculative`), the ``servesim spec-sweep``
experiment (:mod:`simulator.experiments.spec_sweep`) and its report
(:mod:`simulator.report.spec_sweep`).
"""
from simulator.speculative.acceptance import (
    AcceptanceModel,
    EmpiricalAcceptance,
    IIDAcceptance,
    PositionalAcceptance,
    TreeAcceptance,
)
from simulator.speculative.calculator import (
    acceptance_rate_from_tokens_per_step,
    break_even_acceptance_rate,
    expected_ops_increase,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
    sweep_table,
)
from simulator.speculative.config import (
    AcceptanceConfig,
    SpeculativeConfig,
    TreeShape,
    build_acceptance,
)
from simulator.speculative.sampler import expected_acceptance_rate, greedy_verify, rejection_sample

__all__ = [
    "AcceptanceConfig",
    "AcceptanceModel",
    "EmpiricalAcceptance",
    "IIDAcceptance",
    "PositionalAcceptance",
    "SpeculativeConfig",
    "TreeAcceptance",
    "TreeShape",
    "acceptance_rate_from_tokens_per_step",
    "break_even_acceptance_rate",
    "build_acceptance",
    "expected_acceptance_rate",
    "expected_ops_increase",
    "expected_speedup",
    "expected_tokens_per_step",
    "greedy_verify",
    "optimal_k",
    "rejection_sample",
    "sweep_table",
]
