"""Provenance of a plan candidate's numbers: which operator times are measured, fitted or
datasheet, from which table set and engine version, and which recorded runs back the engine
profile.

A plan ranks configurations by numbers of unequal standing: an H100 whose GEMM, attention and
elementwise times all come from measured or fitted tables, against an H200 whose elementwise
times are a datasheet roofline. :func:`perf_provenance` classifies a performance model's
``provenance()`` labels; :func:`compare_provenance` marks each candidate whose evidence is
weaker than the best-backed candidate's, operator by operator, so the report can label it.

Classification of a label: :func:`simulator.perf.provenance.classify_label` (measured,
fitted, datasheet, link model, constant, none). Rank for the comparison: measured 2 > fitted
1 > datasheet, link model, constant 0.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.cluster.setup import resolve_kv_dtype
from simulator.perf import build_perf_model
from simulator.perf.provenance import classify_label, kind_counts, operator_records, sources_label
from simulator.scenario.config import validate_scenario

__all__ = ["KIND_RANK", "classify_label", "compare_provenance", "perf_provenance",
           "scenario_provenance"]

#: Evidence rank of each provenance kind (higher: stronger).
KIND_RANK = {"measured": 2, "fitted": 1, "datasheet": 0, "link_model": 0, "constant": 0}


def perf_provenance(perf) -> dict[str, Any]:
    """Provenance record of one configuration's performance model.

    Parameters
    ----------
    perf : object
        A performance model with ``provenance() -> {key: label}`` (``StepTimeModel`` or
        ``ConstantPerfModel``); its ``engine`` (an ``EngineProfile``) when present.

    Returns
    -------
    dict
        ``perf_model`` (``table``, ``fitted``, ``roofline``, ``constant``), ``operators``
        (``{operator: {"kind", "label"}}``), ``counts`` (operators per kind, ``none``
        excluded), ``num_operators`` (compared operators), ``measured_table_sets`` (sorted
        ``"<device>: <engine> <version>"`` of the measured labels), ``engine_profile`` (name or
        ``None``), ``engine_fitted_on`` (recorded runs the engine constants were fitted on),
        ``label`` (one line: ``measured 5/6 (NVIDIA H100 80GB HBM3: vLLM 0.24.0), fitted 1/6;
        engine vllm-v1, constants fitted on no recorded run``).
    """
    ops, sets = operator_records(perf.provenance())
    counts = kind_counts(ops)
    n = sum(counts.values())
    eng = getattr(perf, "engine", None)
    fitted_on = list(getattr(eng, "fitted_on", ()) or ())
    name = getattr(eng, "name", None)
    label = sources_label(counts, sets, name, fitted_on)
    return {"perf_model": getattr(perf, "kind", "roofline"), "operators": ops,
            "counts": counts, "num_operators": n, "measured_table_sets": sets,
            "engine_profile": name, "engine_fitted_on": fitted_on, "label": label}


def scenario_provenance(scenario: Mapping[str, Any]) -> dict[str, Any] | None:
    """:func:`perf_provenance` of a resolved scenario's performance model alone (for a
    configuration whose replica cannot be built, e.g. one that does not fit in memory).

    Returns
    -------
    dict or None
        ``None`` when the performance model cannot be built either.
    """
    try:
        sc = validate_scenario(dict(scenario))
        wdt = "bf16" if sc.perf.weight_dtype == "fp16" else sc.perf.weight_dtype
        perf = build_perf_model(
            get_model(sc.model), get_gpu(sc.hardware.gpu), sc.cluster.tensor_parallel_size,
            wdt, resolve_kv_dtype(sc), sc.perf.source, engine=sc.perf.engine,
            engine_version=sc.perf.engine_version, constant=sc.perf.constant,
            max_num_seqs=sc.scheduler.max_num_seqs,
            max_num_batched_tokens=sc.scheduler.max_num_batched_tokens,
            expert_parallel_size=sc.cluster.expert_parallel_size)
        return perf_provenance(perf)
    except Exception:  # noqa: BLE001 - provenance is best effort for an unbuildable config
        return None


def compare_provenance(records: Sequence[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """Mark each configuration whose evidence is weaker than the best-backed one's.

    For every operator the best rank over all configurations is taken (:data:`KIND_RANK`);
    a configuration is *weaker* on an operator it ranks below that best (operators it lacks
    or that are ``none`` are not compared). An engine profile without recorded runs is weaker
    when another configuration's profile has some.

    Parameters
    ----------
    records : sequence of dict or None
        :func:`perf_provenance` records (``None``: unknown).

    Returns
    -------
    list of dict
        One per record, in order: ``weaker`` (bool), ``weaker_operators`` (``{operator:
        "<its kind> (best: <best kind>)"}``), ``note`` (one sentence, empty when not weaker).
    """
    best: dict[str, int] = {}
    best_kind: dict[str, str] = {}
    any_fitted_engine = False
    for r in records:
        if not r:
            continue
        any_fitted_engine |= bool(r.get("engine_fitted_on"))
        for op, v in (r.get("operators") or {}).items():
            rank = KIND_RANK.get(v["kind"])
            if rank is not None and rank > best.get(op, -1):
                best[op], best_kind[op] = rank, v["kind"]
    out = []
    for r in records:
        if not r:
            out.append({"weaker": True, "weaker_operators": {},
                        "note": "provenance unknown (the configuration was not built)"})
            continue
        weak = {}
        for op, v in sorted((r.get("operators") or {}).items()):
            rank = KIND_RANK.get(v["kind"])
            if rank is not None and rank < best.get(op, -1):
                weak[op] = f"{v['kind'].replace('_', ' ')} (best: {best_kind[op]})"
        engine_weak = any_fitted_engine and not r.get("engine_fitted_on")
        parts = []
        if weak:
            parts.append("weaker evidence than the best-backed candidate: "
                         + ", ".join(f"{op} {k}" for op, k in weak.items()))
        if engine_weak:
            parts.append("engine constants not fitted on recorded runs (others are)")
        out.append({"weaker": bool(weak) or engine_weak, "weaker_operators": weak,
                    "note": "; ".join(parts)})
    return out
