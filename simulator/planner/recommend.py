"""Choosing a capacity plan's recommendation from its rows: rank the candidates (passing
first, then :data:`TIE_RULE`), recommend the cheapest passing one or fall back to the last
known-good (or the baseline), and draw the Pareto front of every feasible probe.
"""
from __future__ import annotations

import math
from collections import Counter

from simulator.planner.plan_rows import same_cost, without_extra
from simulator.planner.prune import is_skipped
from simulator.planner.spec import PlanSpec

__all__ = ["TIE_RULE", "any_within", "pareto_front", "plan_pareto", "rank_key", "recommend"]


def pareto_front(points: list[dict], x: str, y: str) -> list[dict]:
    """Points not dominated in (``x`` up, ``y`` up), sorted by ``x`` ascending.

    A point is dominated when another is at least as good on both axes and better on one.
    Points missing either value are ignored.
    """
    pts = [p for p in points if p.get(x) is not None and p.get(y) is not None]
    pts.sort(key=lambda p: (-p[x], -p[y]))
    front, best_y = [], -math.inf
    for p in pts:
        if p[y] > best_y:
            front.append(p)
            best_y = p[y]
    return sorted(front, key=lambda p: p[x])


def any_within(cand_rows: list[dict], bound: float) -> bool:
    """Whether a candidate costing at most the dominance bound passed every gate, the quality
    gate included.

    This alone makes the pruned plan's answer the unpruned one's: every skipped candidate
    costs more than the bound, so the cheapest passing candidate is among those evaluated,
    whichever deployment set the bound.
    """
    return any(r["passed"] and r["usd_per_hour"] <= bound * (1 + 1e-12) for r in cand_rows)


def recommend(plan: PlanSpec, ranked: list[dict], base_row: dict, lkg_row: dict | None):
    """The recommendation: the cheapest passing candidate, else the fallback (the last
    known-good, or the baseline) when it passes; its status, runners-up, reason and the
    fallback record."""
    fb_row = lkg_row if lkg_row is not None else base_row
    fb_kind = "last_known_good" if lkg_row is not None else "baseline"
    fb_what = "last known-good" if lkg_row is not None else "baseline"
    passing = [r for r in ranked if r["passed"]]
    if passing:
        status, chosen = "candidate", passing[0]
        runners = passing[1: 1 + plan.top_k]
        n_skip = sum(1 for r in ranked if is_skipped(r))
        reason = (f"cheapest of {len(passing)} passing candidate(s) out of {len(ranked)}"
                  + (f" ({n_skip} skipped: dominated by the cost of a passing "
                     f"{fb_what})" if n_skip else ""))
        tie = [r for r in (base_row, lkg_row) if r is not None and r["passed"]
               and same_cost(r, chosen) and _preference(r) < _preference(chosen)]
        if tie:
            # the tie rule: what runs today (then the last known-good) wins at equal cost
            won = min(tie, key=_preference)
            kind = "baseline" if won["is_baseline"] else "last_known_good"
            reason = (f"the {kind.replace('_', ' ')} '{won['label']}' passes at the cost of "
                      f"the cheapest passing candidate '{chosen['label']}' "
                      f"(${chosen['usd_per_hour']:,.2f}/h) and wins the tie ({TIE_RULE}); "
                      + reason)
            status, chosen, runners = kind, won, passing[: plan.top_k]
        elif len(passing) > 1 and same_cost(passing[0], passing[1]):
            reason += f"; equal-cost tie settled {TIE_RULE}"
        same = chosen.get("same_config_as") if status == "candidate" else None
        if same:  # the cheapest candidate is what runs today: say so, nothing to change
            reason += (f"; it is the {str(same).replace('_', ' ')}'s configuration, so the "
                       "recommendation is to keep it")
    else:
        chosen = fb_row
        runners = []
        counts = Counter(g for r in ranked for g in r["failed_gates"])
        top = ", ".join(f"{g} ({n})" for g, n in counts.most_common(6))
        reason = f"no candidate passed every gate (failed gates, by candidates: {top})"
        if fb_row["passed"]:
            status = f"{fb_kind}_fallback"
            reason += f"; falling back to {fb_what} '{fb_row['label']}'"
        else:
            # nothing to recommend: the fallback is reported (for comparison), not endorsed
            status = "none_passed"
            reason += (f"; the {fb_what} '{fb_row['label']}' fails "
                       f"{', '.join(fb_row['failed_gates'])} too: "
                       + ("keep the last known-good deployment" if lkg_row is not None else
                          "nothing to recommend and no last_known_good given to fall back to"))
    fallback = {"kind": fb_kind, "name": fb_row["label"], "config": without_extra(fb_row),
                "is_recommended": chosen is fb_row,
                "source": ("plan last_known_good (given by the user)" if lkg_row is not None
                           else "plan baseline (no last_known_good given)")}
    return status, chosen, runners, reason, fallback


def plan_pareto(rows: list[dict]) -> list[dict]:
    """The Pareto front of every feasible capacity probe of every configuration."""
    points = []
    for row in rows:
        for p in row["probes"]:
            if p["feasible"]:
                points.append({"config_index": row["index"], "label": row["label"],
                               "rate_rps": p["rate_rps"],
                               "output_tps_per_gpu": p["output_tps_per_gpu"],
                               "tps_per_user": p["tps_per_user"]})
    return pareto_front(points, "output_tps_per_gpu", "tps_per_user")


#: the tie rule, wherever a cheapest configuration is chosen (docs/howto/plan-capacity.md, "The recommendation and its ties")
TIE_RULE = ("at equal USD per hour: the baseline's configuration, then the last known-good's, "
            "then fewer GPUs, then more deployed capacity (headroom), then list order")

_PREFERENCE = {"baseline": 0, "last_known_good": 1}


def _preference(r: dict) -> int:
    """0 for the baseline's configuration, 1 for the last known-good's, 2 for any other."""
    if r.get("is_baseline"):
        return 0
    if r.get("is_last_known_good"):
        return 1
    return _PREFERENCE.get(r.get("same_config_as"), 2)


def rank_key(r: dict):
    """Passing first, then :data:`TIE_RULE`: USD per hour, the baseline's (then the last
    known-good's) configuration, fewer GPUs, more headroom, list order."""
    inf = math.inf
    return (not r["passed"], r["usd_per_hour"] if r["usd_per_hour"] is not None else inf,
            _preference(r), r["gpus"] if r["gpus"] is not None else inf,
            -(r["headroom"] if r["headroom"] is not None else -inf), r["index"])
