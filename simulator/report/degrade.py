"""The run report's "Degrade actions" section: when each policy fired, for how long, and what
it cost and saved (from ``summary["degrade"]``, :func:`simulator.metrics.degrade.degrade_effects`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.report.format import NA, adaptive, adaptive_ms

#: at most this many episodes are listed per policy (the summary keeps them all)
MAX_EPISODE_ROWS = 20

_EFFECT = {"shed": "shed (rejected)", "fallback": "sent to the fallback",
           "cap_max_tokens": "capped", "disable_speculation": ""}


def _shortened(p: Mapping[str, Any]) -> str:
    """`` (N shortened)`` for a cap whose capped requests were not all longer than the cap
    (a summary written before the counter existed: empty)."""
    k = p.get("num_requests_shortened")
    if p.get("action") != "cap_max_tokens" or k is None or k == p.get("num_requests"):
        return ""
    return f" ({adaptive(k)} shortened)"


def _when(p: Mapping[str, Any]) -> str:
    parts = [f"{k} >= {adaptive(v)}" for k, v in (p.get("when") or {}).items()]
    return " or ".join(parts) + (f"; release below {adaptive(p.get('release_fraction'))} x, "
                                 f"hold {adaptive(p.get('min_hold_s'))} s")


def _change(active: Any, inactive: Any) -> str:
    return f"{adaptive_ms(active)} / {adaptive_ms(inactive)}"


def degrade_section(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The context of the "Degrade actions" section (None when no policy is configured).

    Parameters
    ----------
    summary : mapping
        A run summary with ``degrade`` (a list of per-policy dicts).

    Returns
    -------
    dict or None
        ``rows`` (one per policy: name, action, trigger, episodes, active seconds, first
        fired, requests affected, tokens not generated, TTFT p99 and E2E p99 active /
        inactive in ms), ``episodes`` (policy, start, end, duration, trigger signal and
        value; at most :data:`MAX_EPISODE_ROWS` per policy), ``num_fallback_replicas`` and
        ``fallback_busy_s`` (seconds the fallback replicas spent in steps).
    """
    pols = summary.get("degrade")
    if not pols:
        return None
    rows, eps = [], []
    for p in pols:
        action = p.get("action", "")
        label = action + (f" to {p['max_tokens']} tokens" if p.get("max_tokens") else "")
        n = p.get("num_requests", 0)
        rows.append([p.get("name", ""), label, _when(p), adaptive(p.get("num_episodes", 0)),
                     adaptive(p.get("active_s")), adaptive(p.get("first_fired_s"), " s"),
                     f"{adaptive(n)} {_EFFECT.get(action, '')}{_shortened(p)}" if n else "0",
                     adaptive(p.get("num_output_tokens_not_generated", 0)),
                     _change(p.get("ttft_p99_active_s"), p.get("ttft_p99_inactive_s")),
                     _change(p.get("e2e_p99_active_s"), p.get("e2e_p99_inactive_s"))])
        for e in (p.get("episodes") or [])[:MAX_EPISODE_ROWS]:
            eps.append([p.get("name", ""), adaptive(e.get("start_s")),
                        adaptive(e.get("end_s")), adaptive(e.get("duration_s")),
                        f"{e.get('trigger', '')} = {adaptive(e.get('trigger_value'))}"])
    return {"rows": rows, "episodes": eps,
            "num_fallback_replicas": summary.get("num_fallback_replicas") or 0,
            "fallback_busy_s": adaptive(summary.get("fallback_busy_s")), "na": NA}


def degrade_text(policies: list[Mapping[str, Any]] | None) -> str:
    """One cell: what each degrade policy did in a run (``-`` without policies).

    ``cap_long_answers: 12 capped, 3,072 tokens not generated (2 episodes, 4.10 s); shed: not
    fired``.
    """
    if not policies:
        return "-"
    parts = []
    for p in policies:
        n_ep = p.get("num_episodes") or 0
        if not n_ep:
            parts.append(f"{p.get('name')}: not fired")
            continue
        n = p.get("num_requests") or 0
        what = (f"{adaptive(n)} {_EFFECT.get(p.get('action'), '')}".strip() + _shortened(p)
                if n else "active")
        if p.get("num_output_tokens_not_generated"):
            what += f", {adaptive(p['num_output_tokens_not_generated'])} tokens not generated"
        parts.append(f"{p.get('name')}: {what} ({adaptive(n_ep)} episode"
                     f"{'s' if n_ep != 1 else ''}, {adaptive(p.get('active_s'))} s)")
    return "; ".join(parts)
