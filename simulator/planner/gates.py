"""The plan's gates: what a probe or confirmation run must satisfy to be feasible (SLO
attainment, each slice's p99 TTFT / TPOT, rejected fraction, preemptions, peak KV-cache use;
:class:`simulator.planner.spec.GateSettings`), each failure recorded with its value, bound
and margin, and the compact record of one run that reports and curves read.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check_gates", "evaluate_gates", "gate_failure", "probe_record"]


def gate_failure(gate: str, value: float | None, bound: float | None, *, op: str = "<=",
                 unit: str = "", text: str | None = None) -> dict[str, Any]:
    """One failed gate with its value, its bound and by how much it missed.

    Parameters
    ----------
    gate : str
        Gate name (``slo_attainment``, ``slice_tpot_p99[chat]``, ...).
    value, bound : float or None
        The measured value and the bound it had to respect (``None``: not measured).
    op : {"<=", ">="}
        The comparison the value had to pass (``value <= bound`` or ``value >= bound``).
    unit : {"", "s", "usd", "fraction"} or str
        How the value is shown (seconds as ms, USD with a dollar sign, fractions in %).
    text : str, optional
        The reason in words (default: built from the numbers).

    Returns
    -------
    dict
        ``gate``, ``value``, ``bound``, ``op``, ``unit``, ``excess`` (``value - bound`` for
        ``<=``, ``bound - value`` for ``>=``: how far past the bound, > 0), ``relative``
        (excess / bound, or ``None``) and ``text`` (e.g. ``p99 TPOT 61 ms > 50 ms (+22%)``).
    """
    excess = rel = None
    if value is not None and bound is not None:
        excess = (value - bound) if op == "<=" else (bound - value)
        rel = excess / abs(bound) if bound else None
    if text is None:
        bad = ">" if op == "<=" else "<"
        if value is None:
            text = f"{gate}: not measured"
        else:
            text = (f"{gate} {_fmt_value(value, unit)} {bad} {_fmt_value(bound, unit)}"
                    + (f" ({'+' if op == '<=' else '-'}{abs(rel):.0%})" if rel is not None
                       else ""))
    return {"gate": gate, "value": value, "bound": bound, "op": op, "unit": unit,
            "excess": excess, "relative": rel, "text": text}


def _fmt_value(x: float | None, unit: str) -> str:
    if x is None:
        return "n/a"
    if unit == "s":
        return f"{1000.0 * x:.0f} ms" if abs(x) < 10 else f"{x:.1f} s"
    if unit == "usd":
        return f"${x:,.4f}" if abs(x) < 1 else f"${x:,.2f}"
    if unit == "fraction":
        return f"{100.0 * x:.1f}%"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def evaluate_gates(summary: Mapping[str, Any], gates: Mapping[str, Any],
                   slo: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request-level gates a run's summary fails, each with value, bound and margin.

    Gates (see :class:`simulator.planner.spec.GateSettings`): ``slo_attainment`` (attainment
    >= ``slo.attainment_target``), ``slice_ttft_p99[<slice>]`` and ``slice_tpot_p99[<slice>]``
    (each slice's p99 TTFT / TPOT <= its bound), ``rejected_fraction`` (rejected + cancelled
    over all requests <= ``max_rejected_fraction``), ``preemptions_per_request`` (<=
    ``max_preemptions_per_request``) and ``peak_kv_cache_usage`` (the summary's
    ``max_kv_cache_usage`` <= ``max_peak_kv_cache_usage``: memory headroom).

    Returns
    -------
    list of dict
        :func:`gate_failure` records, in the order above (empty: all pass).
    """
    fails: list[dict[str, Any]] = []
    n = summary.get("num_requests") or 0
    if gates.get("slo_attainment", True):
        att = summary.get("slo_attainment")
        target = slo.get("attainment_target")
        if att is None or (target is not None and att < float(target)):
            fails.append(gate_failure("slo_attainment", att,
                                      None if target is None else float(target), op=">=",
                                      unit="fraction"))
    for flag, default, key, bounds_key, slo_key, label in (
            ("slice_ttft_p99", True, "ttft_s", "slice_ttft_p99_s", "ttft_s", "p99 TTFT"),
            ("slice_tpot_p99", False, "tpot_s", "slice_tpot_p99_s", "tpot_s", "p99 TPOT")):
        if not gates.get(flag, default):
            continue
        per = gates.get(bounds_key) or {}
        for name, g in sorted((summary.get("by_slice") or {}).items()):
            bound = per.get(name, slo.get(slo_key))
            if bound is None:
                continue
            p99 = (g.get(key) or {}).get("p99")
            if key == "tpot_s" and p99 is None:
                continue  # no request of the slice emitted 2 tokens: TPOT undefined
            if p99 is None or p99 > float(bound):
                gate = f"{flag}[{name}]"
                text = (f"{gate}: no request got a first token" if p99 is None else
                        f"{name} {label} {_fmt_value(p99, 's')} > "
                        f"{_fmt_value(float(bound), 's')} "
                        f"(+{(p99 - float(bound)) / float(bound):.0%})")
                fails.append(gate_failure(gate, p99, float(bound), unit="s", text=text))
    mrf = gates.get("max_rejected_fraction")
    if mrf is not None and n:
        bad = (summary.get("num_rejected") or 0) + (summary.get("num_cancelled") or 0)
        if bad / n > float(mrf):
            fails.append(gate_failure("rejected_fraction", bad / n, float(mrf),
                                      unit="fraction"))
    mpp = gates.get("max_preemptions_per_request")
    if mpp is not None and n and (summary.get("num_preemptions") or 0) / n > float(mpp):
        fails.append(gate_failure("preemptions_per_request",
                                  (summary.get("num_preemptions") or 0) / n, float(mpp)))
    mkv = gates.get("max_peak_kv_cache_usage")
    if mkv is not None:
        peak = summary.get("max_kv_cache_usage")
        if peak is not None and peak > float(mkv):
            fails.append(gate_failure("peak_kv_cache_usage", float(peak), float(mkv),
                                      unit="fraction",
                                      text=(f"peak KV-cache use {100 * peak:.1f}% > "
                                            f"{100 * float(mkv):.1f}% (memory headroom)")))
    return fails


def check_gates(summary: Mapping[str, Any], gates: Mapping[str, Any],
                slo: Mapping[str, Any]) -> list[str]:
    """Names of the request-level gates a run's summary fails (empty: all pass).

    Gate names: ``slo_attainment``, ``slice_ttft_p99[<slice>]``, ``slice_tpot_p99[<slice>]``,
    ``rejected_fraction``, ``preemptions_per_request``, ``peak_kv_cache_usage``; see
    :func:`evaluate_gates` (which also gives each failure's value and margin) and
    :class:`simulator.planner.spec.GateSettings`.
    """
    return [f["gate"] for f in evaluate_gates(summary, gates, slo)]


def _get(d: Mapping | None, *keys):
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def probe_record(summary: Mapping[str, Any], extra: Mapping[str, Any] | None, *,
                 rate_rps: float, gpus: int, gates: Mapping[str, Any],
                 slo: Mapping[str, Any], stopped: Mapping[str, Any] | None = None
                 ) -> dict[str, Any]:
    """The compact record of one probe or confirmation run (what reports and curves use).

    ``stopped`` (a run ended early, :mod:`simulator.planner.early_stop`): ``stopped_at_s``
    and ``gate_failures`` (the gates proven failed: the verdict); the other figures then
    cover the requests that entered before the stop (``num_requests``).
    """
    if stopped:
        details = [gate_failure(f["gate"], f["value"], f["bound"], op=f["op"],
                                unit=f["unit"], text=f["text"])
                   for f in stopped["gate_failures"]]
    else:
        details = evaluate_gates(summary, gates, slo)
    fails = [f["gate"] for f in details]
    tpot_mean = _get(summary, "tpot_s", "mean")
    out_tps = summary.get("output_token_throughput_tps")
    extra = extra or {}
    return {
        "rate_rps": rate_rps,
        "feasible": not fails,
        "failed_gates": fails,
        "gate_failures": details,
        "slo_attainment": summary.get("slo_attainment"),
        "ttft_p50_s": _get(summary, "ttft_s", "p50"),
        "ttft_p99_s": _get(summary, "ttft_s", "p99"),
        "tpot_mean_s": tpot_mean,
        "tpot_p99_s": _get(summary, "tpot_s", "p99"),
        "e2e_p99_s": _get(summary, "e2e_latency_s", "p99"),
        "output_tps": out_tps,
        "output_tps_per_gpu": (out_tps / gpus) if (out_tps is not None and gpus) else None,
        "tps_per_user": (1.0 / tpot_mean) if tpot_mean else None,
        "num_requests": summary.get("num_requests"),
        "num_preemptions": summary.get("num_preemptions"),
        "num_rejected": summary.get("num_rejected"),
        "slice_ttft_p99_s": {k: _get(v, "ttft_s", "p99")
                             for k, v in sorted((summary.get("by_slice") or {}).items())},
        "slice_tpot_p99_s": {k: _get(v, "tpot_s", "p99")
                             for k, v in sorted((summary.get("by_slice") or {}).items())},
        "max_kv_cache_usage": summary.get("max_kv_cache_usage"),
        "price_per_1m_input_tokens_usd": summary.get("price_per_1m_input_tokens_usd"),
        "price_per_1m_output_tokens_usd": summary.get("price_per_1m_output_tokens_usd"),
        "busy_fraction": extra.get("busy_fraction"),
        "queue_share_of_ttft": extra.get("queue_share_of_ttft"),
        "stopped_early": bool(stopped),
        "stopped_at_s": stopped["stopped_at_s"] if stopped else None,
    }
