"""The run report's "Autoscaling" section (from ``summary["autoscale"]``,
:func:`simulator.metrics.fleet.autoscale_summary`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.report.format import adaptive, adaptive_pct

#: events listed in the report at most (all are in summary.json)
MAX_EVENT_ROWS = 40


def _blocks(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(pool name or '', autoscale block)`` of a run, or of each autoscaled pool of a
    gateway run."""
    if summary.get("autoscale"):
        return [("", summary["autoscale"])]
    return [(name, p["autoscale"]) for name, p in (summary.get("pools") or {}).items()
            if p.get("autoscale")]


def autoscale_headline(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The headline row of an autoscaled run, or of each autoscaled pool (none without)."""
    return [(f"Replicas (autoscaled{', pool ' + name if name else ''}): mean held / peak",
             (f"{adaptive(a.get('mean_replicas_held'))} / "
              f"{adaptive(a.get('peak_replicas_held'))}; {a.get('num_scale_ups', 0)} up, "
              f"{a.get('num_scale_downs', 0)} down"))
            for name, a in _blocks(summary)]


def autoscale_section(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The contexts of the "Autoscaling" sections: one for an autoscaled run, one per
    autoscaled pool of a gateway run (empty without autoscaling).

    Returns
    -------
    list of dict
        Each: ``pool`` (its name, '' for a single pool), ``policy`` (one line: policy,
        target, bounds, cooldowns, drain), ``rows`` (replica- and GPU-hours, cost, mean /
        peak replicas, scale events, the cold start and its parts, requests arriving during a
        cold start and their SLO misses), ``event_rows`` (time, action, replica, serving and
        starting after it, metric; at most :data:`MAX_EVENT_ROWS`), ``num_events``.
    """
    return [{"pool": name, **_section(a)} for name, a in _blocks(summary)]


def _section(a: Mapping[str, Any]) -> dict[str, Any]:
    """One autoscale block's section context (:func:`autoscale_section`)."""
    cfg, cs = a.get("config") or {}, a.get("cold_start") or {}
    policy = (f"{cfg.get('policy')} (target {adaptive(cfg.get('target'))}), replicas "
              f"{cfg.get('min_replicas')}..{cfg.get('max_replicas')}, evaluated every "
              f"{adaptive(cfg.get('interval_s'))} s over {adaptive(cfg.get('window_s'))} s, "
              f"cooldowns up {adaptive(cfg.get('scale_up_cooldown_s'))} s / down "
              f"{adaptive(cfg.get('scale_down_cooldown_s'))} s, drain: {cfg.get('drain')}")
    parts = (f"{adaptive(cs.get('weights_load_s'))} s weights "
             f"({adaptive((cs.get('weight_bytes') or 0) / 1e9)} GB at "
             f"{adaptive((cs.get('storage_read_bandwidth_bytes_per_s') or 0) / 1e9)} GB/s) + "
             f"{adaptive(cs.get('engine_startup_s'))} s engine start-up + "
             f"{adaptive(cs.get('cuda_graph_capture_s'))} s CUDA graphs")
    stated = cs.get("basis") == "stated"
    rows = [
        ("Replica-hours / GPU-hours held",
         f"{adaptive(a.get('replica_hours'))} / {adaptive(a.get('gpu_hours'))}"),
        ("GPU cost (USD)", adaptive(a.get("cost_usd"))),
        ("Replicas held: mean / min / peak",
         (f"{adaptive(a.get('mean_replicas_held'))} / {a.get('min_replicas_held')} / "
         f"{a.get('peak_replicas_held')}")),
        ("Replicas serving: mean", adaptive(a.get("mean_replicas_serving"))),
        ("Scale-ups / scale-downs / starts cancelled",
         (f"{a.get('num_scale_ups')} / {a.get('num_scale_downs')} / "
         f"{a.get('num_cancelled_starts')}")),
        ("Cold start (s)", f"{adaptive(cs.get('cold_start_s'))}"
         + (" (stated)" if stated else f" = {parts}")),
        ("Requests arriving during a cold start / of them missing an SLO",
         f"{a.get('cold_start_requests')} / {a.get('cold_start_slo_misses')}"),
    ]
    events = a.get("events") or []
    event_rows = [[adaptive(e.get("time_s")), e.get("action"), e.get("replica_id"),
                   e.get("serving"), e.get("starting"), adaptive(e.get("metric"))]
                  for e in events[:MAX_EVENT_ROWS]]
    return {"policy": policy, "rows": rows, "event_rows": event_rows,
            "num_events": len(events), "sources": cs.get("sources", ""),
            "share_during": adaptive_pct(
                (a.get("cold_start_slo_misses") or 0) / a["cold_start_requests"]
                if a.get("cold_start_requests") else None)}
