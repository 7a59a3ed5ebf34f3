"""The rows of a capacity plan: one per evaluated configuration (the candidates, the
baseline, the last known-good), with its sizing and cost (``usd_per_hour``, the cost and the
phase-attributed price per 1M tokens), the plan's cost gates and quality gate, the
comparison of its performance-model provenance with the others', and its status line.
"""
from __future__ import annotations

from simulator.catalog.hardware import get_gpu
from simulator.experiments.cache import scenario_identity
from simulator.experiments.grid import config_label
from simulator.planner.gates import gate_failure
from simulator.planner.provenance import compare_provenance
from simulator.planner.spec import PlanSpec

__all__ = ["plan_row", "plan_rows", "same_cost", "status_text", "without_extra"]


def plan_rows(ev: dict, ctx) -> list[dict]:
    """One plan row per evaluated configuration (candidates, baseline, last known-good), with
    the quality gate, the provenance comparison, ``same_config_as`` (``"baseline"`` or
    ``"last_known_good"`` for a candidate whose resolved scenario is that one's, else None;
    see :func:`simulator.planner.recommend.rank_key`) and ``status`` (:func:`status_text`).

    ``ctx``: the plan, the target (requests/s), the mean prompt and output tokens, the quality
    table, every configuration's overrides and resolved scenario, the slices and the number
    of candidates."""
    plan, target, mean_in, mean_out, quality, all_ov, all_cfg, slices, n_cand = ctx
    lkg = plan.last_known_good
    ident = [scenario_identity(c) for c in all_cfg]
    rows = []
    for i, (ov, key, m) in enumerate(zip(all_ov, ev["row_task"], ev["meta"])):
        is_base = i == n_cand
        is_lkg = i == n_cand + 1
        name = plan.baseline.name if is_base else (lkg.name if is_lkg else None)
        row = plan_row(i, ov, ev["results"][key], m, plan, target, mean_in, mean_out, name=name,
                       is_baseline=is_base)
        row["is_last_known_good"] = is_lkg
        row["same_config_as"] = next(
            (w for w, j in (("baseline", n_cand), ("last_known_good", n_cand + 1))
             if i < n_cand and j < len(ident) and ident[i] == ident[j]), None)
        if quality is not None:
            _quality_gate(row, all_cfg[i], quality, plan.quality, slices)
        rows.append(row)
    for row, cmp in zip(rows, compare_provenance([row.get("provenance") for row in rows])):
        row["provenance_weaker"] = cmp["weaker"]
        row["provenance_note"] = cmp["note"]
        row["provenance_weaker_operators"] = cmp["weaker_operators"]
    setter = next((r for r in rows[n_cand:] if ev["bound"] is not None
                   and same_cost(r, {"usd_per_hour": ev["bound"]})), None)
    for row in rows:
        row["status"] = status_text(row, setter)
    return rows


def status_text(row: dict, setter: dict | None) -> str:
    """``pass``, ``fail: <gates>`` or ``skipped: dominated by <the deployment that set the
    bound> ($/h)`` (a skipped candidate has no capacity: ``capacity_rps`` is None)."""
    if row.get("dominance"):
        who = (f"{'the baseline' if setter['is_baseline'] else 'the last known-good'} "
               f"'{setter['label']}'" if setter is not None else "a passing fallback")
        return (f"skipped: dominated by {who} at "
                f"${row['dominance']['bound_usd_per_hour']:,.2f}/h")
    return "pass" if row["passed"] else "fail: " + ", ".join(row["failed_gates"])


def plan_row(i: int, ov: dict, r: dict, m: dict, plan: PlanSpec, target: float, mean_in: float,
             mean_out: float, *, name: str | None, is_baseline: bool) -> dict:
    """The plan row of configuration ``i`` (overrides ``ov``) from its evaluation ``r`` and
    its meta ``m`` (GPU, TP, GPUs per replica, price): sizing, cost at the ``target`` rate
    (requests/s; ``mean_in`` / ``mean_out`` tokens per request), the plan's cost gates
    added to the failed gates, and the figures at the target and at capacity."""
    # None: not measured (a candidate skipped as dominated); 0.0: no feasible rate found
    cap = None if r.get("capacity_rps") is None else float(r["capacity_rps"])
    replicas = r.get("replicas")
    gpus = replicas * m["gpus_per_replica"] if replicas else None
    usd_h = gpus * m["price"] if gpus else None
    fails = list(r.get("failed_gates") or [])
    details = [dict(f) for f in (r.get("gate_failures") or [])]
    conf = (r.get("confirmations") or [None])[-1] or {}
    tok_h = target * 3600.0

    def per_m(tokens: float) -> float | None:
        return usd_h / (tok_h * tokens) * 1e6 if (usd_h is not None and tokens > 0) else None

    # phase-attributed prices: the sized deployment's hourly cost split by the prefill share
    # of the busy time of its target-rate confirmation (simulator.metrics.cost), each phase
    # divided by the tokens the target rate brings per hour
    share = ((r.get("confirm_summary") or {}).get("phase_cost") or {}).get("prefill_share")
    price_in = (usd_h * share / (tok_h * mean_in) * 1e6
                if (usd_h is not None and share is not None and mean_in > 0) else None)
    price_out = (usd_h * (1.0 - share) / (tok_h * mean_out) * 1e6
                 if (usd_h is not None and share is not None and mean_out > 0) else None)
    cost_fails = _cost_gate_failures(plan.gates, gpus, usd_h, price_out, price_in)
    fails += [f["gate"] for f in cost_fails]
    details += cost_fails
    passed = r.get("status") == "ok" and not fails

    return {
        "index": i,
        "label": name or config_label(ov),
        "is_baseline": is_baseline,
        "overrides": ov,
        "gpu": m["gpu"],
        "tensor_parallel_size": m["tp"],
        "usd_per_gpu_hour": m["price"],
        "price_source": m["price_source"],
        "passed": passed,
        "failed_gates": fails,
        "gate_failures": details,
        "error": r.get("error"),
        "provenance": r.get("provenance"),
        "capacity_rps": cap,
        "capacity_rps_per_gpu": None if cap is None else cap / m["gpus_per_replica"],
        "capacity_rate_scale": r.get("capacity_rate_scale"),
        "search_note": r.get("search_note"),
        "replicas": replicas,
        "gpus": gpus,
        "headroom": (replicas * cap / target - 1.0) if (replicas and cap) else None,
        "usd_per_hour": usd_h,
        "cost_per_1m_input_tokens_usd": per_m(mean_in),
        "cost_per_1m_output_tokens_usd": per_m(mean_out),
        "cost_per_1m_tokens_usd": per_m(mean_in + mean_out),
        "prefill_share_at_target": share,
        "price_per_1m_input_tokens_usd": price_in,
        "price_per_1m_output_tokens_usd": price_out,
        "peak_kv_cache_usage_at_target": conf.get("max_kv_cache_usage"),
        "slice_tpot_p99_s_at_target": conf.get("slice_tpot_p99_s"),
        "slo_attainment_at_target": conf.get("slo_attainment"),
        "ttft_p99_s_at_target": conf.get("ttft_p99_s"),
        "tpot_p99_s_at_target": conf.get("tpot_p99_s"),
        "slice_ttft_p99_s_at_target": conf.get("slice_ttft_p99_s"),
        "output_tps_per_gpu_at_capacity": _at_capacity(r, "output_tps_per_gpu"),
        "tps_per_user_at_capacity": _at_capacity(r, "tps_per_user"),
        "probes": r.get("probes") or [],
        "confirmations": r.get("confirmations") or [],
        "confirm_summary": r.get("confirm_summary"),
        "degrade_at_target": (r.get("confirm_summary") or {}).get("degrade"),
        "confirm_extra": r.get("confirm_extra"),
        "num_simulations": r.get("num_simulations", 0),
        "cached": bool(r.get("cached")),
        "dominance": r.get("dominance"),
        "dominance_probe": r.get("dominance_probe"),
    }


def _cost_gate_failures(g, gpus: int | None, usd_h: float | None, price_out: float | None,
                        price_in: float | None) -> list[dict]:
    """The cost gates of :class:`~simulator.planner.spec.GateSettings` ``g`` a sized
    deployment fails (GPUs, USD per hour, price per 1M output and input tokens), as
    :func:`~simulator.planner.gates.gate_failure` records; none for an unsized one."""
    out = []
    for gate, value, bound, unit in (
            ("max_gpus", gpus, g.max_gpus, ""),
            ("max_usd_per_hour", usd_h, g.max_usd_per_hour, "usd"),
            ("max_usd_per_1m_output_tokens", price_out, g.max_usd_per_1m_output_tokens, "usd"),
            ("max_usd_per_1m_input_tokens", price_in, g.max_usd_per_1m_input_tokens, "usd")):
        if bound is None or gpus is None:
            continue
        if value is None or value > bound:
            what = {"max_gpus": "GPUs", "max_usd_per_hour": "USD per hour",
                    "max_usd_per_1m_output_tokens": "price per 1M output tokens",
                    "max_usd_per_1m_input_tokens": "price per 1M input tokens"}[gate]
            f = gate_failure(gate, None if value is None else float(value), float(bound),
                             unit=unit)
            f["text"] = (f"{what}: not measured (no phase split of the confirmation run)"
                         if value is None else f"{what} " + f["text"].split(" ", 1)[1])
            out.append(f)
    return out


def _config_value(cfg: dict, path: str):
    cur = cfg
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _matches(cfg: dict, match: dict) -> bool:
    """Whether a resolved configuration has every value of a quality entry's ``match``
    (``hardware.gpu`` by catalog name, so aliases match; other values by equality)."""
    for path, want in match.items():
        have = _config_value(cfg, path)
        if path == "hardware.gpu" and isinstance(want, str) and isinstance(have, str):
            try:
                if get_gpu(want).name == get_gpu(have).name:
                    continue
            except ValueError:
                pass
        if have != want:
            return False
    return True


def _quality_gate(row: dict, cfg: dict, table, gate, slices: list[str]) -> None:
    """Check a plan row against the quality table (in place): adds ``quality`` (the matched
    entry and the score per checked slice) and a ``quality[<slice>]`` failure per slice whose
    score is below its minimum or missing (``unscored: fail``).

    Checked slices: every slice of the workload when ``min_score`` is given, plus those named
    in ``min_score_by_slice``; the minimum of a slice is its own entry, else ``min_score``.
    """
    entry = next((e for e in table.scores if _matches(cfg, e.match)), None)
    checked = sorted(set(slices if gate.min_score is not None else [])
                     | set(gate.min_score_by_slice))
    scores: dict[str, float | None] = {}
    for sl in checked:
        bound = gate.min_score_by_slice.get(sl, gate.min_score)
        score = None
        if entry is not None:
            score = entry.slices.get(sl, entry.score)
        scores[sl] = score
        name = f"quality[{sl}]"
        if score is None:
            if gate.unscored == "fail":
                row["failed_gates"].append(name)
                row["gate_failures"].append(gate_failure(
                    name, None, float(bound), op=">=",
                    text=f"{sl} {table.metric}: no score for this configuration in the "
                         f"quality table (unscored: fail)"))
            continue
        if score < bound:
            row["failed_gates"].append(name)
            f = gate_failure(name, float(score), float(bound), op=">=")
            f["text"] = (f"{sl} {table.metric} {score:.4g} < minimum {bound:.4g} "
                         f"(short by {bound - score:.3g})")
            row["gate_failures"].append(f)
    label = None
    if entry is not None:
        label = entry.name or ", ".join(f"{k}={v}" for k, v in entry.match.items()) or "all"
    row["quality"] = {"metric": table.metric, "entry": label, "scores": scores,
                      "minimums": {sl: gate.min_score_by_slice.get(sl, gate.min_score)
                                   for sl in checked}}
    row["passed"] = row["passed"] and not any(
        g.startswith("quality[") for g in row["failed_gates"])


def _at_capacity(r: dict, key: str):
    s = r.get("capacity_rate_scale")
    for p in r.get("probes") or []:
        if s is not None and p.get("rate_scale") == s:
            return p.get(key)
    return None


def same_cost(a: dict, b: dict) -> bool:
    """Equal ``usd_per_hour`` (to a relative 1e-12: the same GPUs at the same price)."""
    x, y = a.get("usd_per_hour"), b.get("usd_per_hour")
    return x is not None and y is not None and abs(x - y) <= 1e-12 * max(abs(x), abs(y))


def without_extra(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("confirm_extra",)}
