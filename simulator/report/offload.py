"""The run report's "KV offload tiers" section (from ``summary["kv_offload"]``,
:func:`simulator.metrics.offload.offload_summary`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.report.format import adaptive, adaptive_ms, adaptive_pct

_GIB = float(1 << 30)


def _gib(x: Any) -> str:
    return adaptive(None if x is None else float(x) / _GIB, " GiB")


def offload_section(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The context of the "KV offload tiers" section (None without tiers).

    Returns
    -------
    dict or None
        ``connector``; ``tier_rows`` (per tier: medium, capacity blocks, blocks stored,
        promoted from the tier below, evicted, hit tokens, hit rate); ``rows`` (loads, bytes
        each way in GiB, link use, load wait total and mean); ``ttft_rows`` (TTFT p50 / p99 in ms of completed requests
        with and without a tier hit, with counts).
    """
    off = summary.get("kv_offload")
    if not off:
        return None
    tier_rows = [[t["medium"], adaptive(t["capacity_blocks"]), adaptive(t["blocks_stored"]),
                  adaptive(t.get("blocks_promoted", 0)),
                  adaptive(t["blocks_evicted"]), adaptive(t["hit_tokens"]),
                  adaptive_pct(t["hit_rate"])] for t in off.get("tiers", [])]
    rows = [
        ("Loads (requests x admissions)", adaptive(off.get("loads"))),
        ("Loaded, host to GPU", _gib(off.get("bytes_loaded"))),
        ("Stored, GPU to host", _gib(off.get("bytes_stored"))),
        ("Host link use, host to GPU / GPU to host",
         " / ".join(adaptive_pct(off.get(k)) for k in ("host_to_device_use",
                                                       "device_to_host_use"))),
        ("Load wait on requests' paths, total / mean (ms)",
         " / ".join(adaptive_ms(off.get(k)) for k in ("load_wait_s", "load_wait_mean_s"))),
    ]
    ttft_rows = []
    for key, label in (("ttft_tier_hit", "with a tier hit"),
                       ("ttft_no_tier_hit", "without")):
        t = off.get(key) or {}
        ttft_rows.append([label, adaptive(t.get("count", 0)), adaptive_ms(t.get("p50")),
                          adaptive_ms(t.get("p99"))])
    return {"connector": off.get("connector", ""), "shared": bool(off.get("shared")),
            "tier_rows": tier_rows, "rows": rows, "ttft_rows": ttft_rows}
