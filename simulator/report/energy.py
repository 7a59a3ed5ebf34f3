"""The run report's "Energy and power" section (from ``summary["energy"]``,
:mod:`simulator.metrics.energy`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.report.format import NA, adaptive, adaptive_pct, adaptive_usd


def kwh_price_text(usd_per_kwh: Any) -> str:
    """An energy block's ``usd_per_kwh`` as text: ``$0.1200/kWh``, or each pool's price when
    the pools pay different prices (a mapping ``{pool: price}``)."""
    if isinstance(usd_per_kwh, Mapping):
        return ", ".join(f"{name} {adaptive_usd(v)}/kWh" for name, v in usd_per_kwh.items())
    return f"{adaptive_usd(usd_per_kwh)}/kWh"


def _kwh_per_day(e: Mapping[str, Any]) -> str:
    if e.get("kwh_per_day") is not None:
        return adaptive(e["kwh_per_day"], " kWh/day")
    return f"{NA} ({e.get('kwh_per_day_note') or 'window shorter than a day'})"


def energy_section(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The context of the "Energy and power" section (None when the summary has no energy
    block: a summary written before it existed).

    Returns
    -------
    dict or None
        ``available``; ``reason`` (why energy is not modelled) or ``rows`` (energy, J per output
        token, mean and peak power, busy share, kWh per day, energy cost), ``pool_rows`` (per
        pool: energy, mean and peak power), ``model_rows`` (per power model: GPU, constants,
        fit error) and ``notes``.
    """
    e = summary.get("energy")
    if not e:
        return None
    if not e.get("available"):
        return {"available": False, "reason": e.get("reason") or NA}
    res = adaptive(e.get("peak_power_resolution_s"), " s")
    idle = ("idle not counted" if not e.get("idle_counted")
            else f"{adaptive(e.get('idle_energy_j'), ' J')} idle")
    rows = [
        ("GPU energy", (f"{adaptive(e.get('energy_kwh'), ' kWh')} "
                       f"({adaptive(e.get('busy_energy_j'), ' J')} busy, {idle})")),
        ("Energy per output token", adaptive(e.get("joules_per_output_token"), " J")),
        ("Mean power", adaptive(e.get("mean_power_w"), " W")),
        (f"Peak power (mean over {res})", adaptive(e.get("peak_power_w"), " W")),
        ("Busy share of held replica time", adaptive_pct(e.get("busy_share"))),
        ("Energy per day", _kwh_per_day(e)),
        ("Energy cost", (f"{adaptive_usd(e.get('energy_cost_usd'))} at "
                         f"{kwh_price_text(e.get('usd_per_kwh'))}"
                         if e.get("energy_cost_usd") is not None
                         else f"{NA} (no cost.usd_per_kwh)")),
    ]
    if e.get("power_cap_w") is not None:
        rows.append(("Power cap", adaptive(e["power_cap_w"], " W per GPU")))
    pool_rows = [[name, adaptive(p.get("energy_kwh"), " kWh"), adaptive(p.get("mean_power_w"), " W"),
                  adaptive(p.get("peak_power_w"), " W")]
                 for name, p in (e.get("by_pool") or {}).items()]
    pm = e.get("power_model") or {}
    models = pm if pm and "gpu" not in pm else ({"": pm} if pm else {})
    model_rows = [[name or m.get("gpu", NA), m.get("gpu", NA),
                   (f"{adaptive(m.get('static_w'))} + {adaptive(m.get('compute_w'))} u_c + "
                   f"{adaptive(m.get('memory_w'))} u_m, at most {adaptive(m.get('limit_w'))}"),
                   adaptive(m.get("idle_w"), " W") + (" (stated)" if m.get("idle_stated") else ""),
                   adaptive((m.get("fit") or {}).get("mape_pct"), " %")]
                  for name, m in models.items()]
    return {"available": True, "rows": rows, "pool_rows": pool_rows, "model_rows": model_rows,
            "notes": list(e.get("notes") or [])}
