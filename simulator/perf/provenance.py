"""One line naming the evidence behind a performance model's operator times: which operators
are measured, fitted or datasheet, and from which measured table sets (device, engine version).

A provenance mapping is what ``StepTimeModel.provenance()`` returns and what a run's
``summary.json`` keeps under ``provenance``: ``{operator: label}`` plus the engine keys
(:data:`ENGINE_KEYS`). Classification of a label: ``measured ...`` -> ``measured``, ``fitted
...`` -> ``fitted``, ``datasheet`` -> ``datasheet``, ``link model ...`` (TP all-reduce from a
stated link) -> ``link_model``, ``constant: ...`` -> ``constant``, ``none ...`` (no such
operator, e.g. all-reduce at TP=1) -> ``none`` (not counted); any other label is a
datasheet roofline. The capacity planner ranks candidates by it
(:mod:`simulator.planner.provenance`); ``servesim compare`` and ``servesim sweep`` print the
line per variant or point.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ENGINE_KEYS", "KINDS", "classify_label", "kind_counts", "operator_records",
           "sources_by_label", "sources_label", "summary_sources_label"]

#: ``StepTimeModel.provenance()`` keys that describe the engine, not an operator.
ENGINE_KEYS = ("engine", "engine_overhead", "cuda_graphs", "sampler")
#: Kinds in the order a label lists them (strongest evidence first).
KINDS = ("measured", "fitted", "datasheet", "link_model", "constant")

#: a measured label's device and engine version (a reused set keeps "reusing <set>": the
#: tables are that set's)
_MEASURED_SET = re.compile(r"^measured \(([^,()]+), ([^;()]+?)(?:[;)]| \+)")


def classify_label(label: str) -> str:
    """The kind of one provenance label (see the module docstring)."""
    s = str(label).strip().lower()
    for prefix, kind in (("measured", "measured"), ("fitted", "fitted"),
                         ("datasheet", "datasheet"), ("link model", "link_model"),
                         ("constant", "constant"), ("none", "none")):
        if s.startswith(prefix):
            return kind
    return "datasheet"


def operator_records(prov: Mapping[str, Any]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The operators of a provenance mapping with their kind, and the measured table sets.

    Returns
    -------
    tuple
        ``({operator: {"kind", "label"}}`` (engine keys left out), sorted ``"<device>:
        <engine> <version>"`` of the measured labels)``.
    """
    ops: dict[str, dict[str, str]] = {}
    sets: set[str] = set()
    for k in sorted(prov):
        if k in ENGINE_KEYS:
            continue
        kind = classify_label(prov[k])
        ops[k] = {"kind": kind, "label": str(prov[k])}
        if kind == "measured":
            m = _MEASURED_SET.match(str(prov[k]))
            if m:
                sets.add(f"{m.group(1).strip()}: {m.group(2).strip()}")
    return ops, sorted(sets)


def kind_counts(ops: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """Operators per kind of :func:`operator_records`' operators (``none`` not counted)."""
    counts: dict[str, int] = {}
    for v in ops.values():
        if v["kind"] != "none":
            counts[v["kind"]] = counts.get(v["kind"], 0) + 1
    return counts


def sources_label(counts: Mapping[str, int], sets: Sequence[str],
                  engine: str | None = None, fitted_on: Sequence[str] | None = None) -> str:
    """One line: operators per kind over those counted, the measured table sets, the engine.

    Parameters
    ----------
    counts : mapping
        Operators per kind (``none`` excluded), e.g. ``{"measured": 5, "fitted": 1}``.
    sets : sequence of str
        Measured table sets (:func:`operator_records`).
    engine : str, optional
        Engine profile name; with it the line ends with how many recorded runs its constants
        were fitted on (``fitted_on``).

    Returns
    -------
    str
        e.g. ``measured 5/6 (NVIDIA H100 80GB HBM3: vLLM 0.24.0), fitted 1/6; engine vllm-v1,
        constants fitted on 3 recorded run(s)``.
    """
    n = sum(counts.values())
    parts = []
    for kind in KINDS:
        c = counts.get(kind, 0)
        if c:
            txt = f"{kind.replace('_', ' ')} {c}/{n}"
            if kind == "measured" and sets:
                txt += f" ({'; '.join(sets)})"
            parts.append(txt)
    label = ", ".join(parts) or "no operators"
    if engine is not None:
        label += (f"; engine {engine}, constants fitted on "
                  + (f"{len(fitted_on)} recorded run(s)" if fitted_on else "no recorded run"))
    return label


def summary_sources_label(prov: Mapping[str, Any] | None) -> str:
    """:func:`sources_label` of a run summary's ``provenance`` mapping (its ``engine`` entry,
    ``"<name> (constants fitted on N recorded run(s))"``, appended as written); ``"unknown"``
    for a summary without one."""
    if not prov:
        return "unknown"
    ops, sets = operator_records(prov)
    label = sources_label(kind_counts(ops), sets)
    eng = prov.get("engine")
    return f"{label}; engine {eng}" if eng else label


def sources_by_label(labels, names) -> list[tuple[str, str]]:
    """The distinct latency-sources lines of a comparison or sweep, each with the variants or
    points it backs (``"a, b"``), in first-seen order; a missing label (a failed point) is
    left out."""
    groups: dict[str, list[str]] = {}
    for name, label in zip(names, labels):
        if isinstance(label, str):
            groups.setdefault(label, []).append(str(name))
    return [(label, ", ".join(ns)) for label, ns in groups.items()]
