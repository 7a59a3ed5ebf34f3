"""Pool schema parts without scenario sections (the KV link, the request-class match) and the
cross-pool checks of a scenario's ``pools:`` (the pool itself is
:class:`simulator.scenario.config.PoolConfig`)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from simulator.base.schema import StrictModel as _Strict


class KVTransferConfig(_Strict):
    """The link a prefill pool ships each prompt's KV cache over to its decode pool
    (alpha-beta: ``latency_s + bytes / bandwidth_bytes_per_s``; see
    :mod:`simulator.topology.transfer`). ``layerwise`` overlaps the transfer with the prefill
    layer by layer (vLLM's layer-wise connectors, DistServe)."""

    kind: Literal["nvlink", "infiniband", "pcie"] = "infiniband"
    bandwidth_bytes_per_s: float = Field(gt=0)
    latency_s: float = Field(default=0.0, ge=0)
    layerwise: bool = False


class PoolMatch(_Strict):
    """The request class a pool serves: requests whose tenant is in ``tenants`` or whose
    slice is in ``slices`` (a pool without ``match`` takes every request no other pool
    matched)."""

    tenants: list[str] = Field(default_factory=list)
    slices: list[str] = Field(default_factory=list)


def check_pools(pools) -> None:
    """Cross-pool rules of ``pools:`` (a list of :class:`simulator.scenario.config.PoolConfig`): names
    unique, each prefill pool names its own decode pool and a KV link, decode pools take no
    ``match`` and are fed by exactly one prefill pool.

    Raises
    ------
    ValueError
        One line naming the pool and the key path.
    """
    names = [p.name for p in pools]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"pools: duplicate pool name(s) {', '.join(dup)}")
    role = {p.name: p.role for p in pools}
    fed = set()
    for i, p in enumerate(pools):
        if p.role == "prefill":
            if p.decode_pool not in role or role[p.decode_pool] != "decode":
                decodes = [n for n, r in role.items() if r == "decode"] or ["(none)"]
                raise ValueError(f"pools.{i}.decode_pool: prefill pool '{p.name}' must name a "
                                 f"decode pool; decode pools: {', '.join(decodes)}")
            if p.kv_transfer is None:
                raise ValueError(f"pools.{i}.kv_transfer: prefill pool '{p.name}' needs the "
                                 "KV link (kind, bandwidth_bytes_per_s, latency_s)")
            if p.decode_pool in fed:
                raise ValueError(f"pools.{i}.decode_pool: decode pool '{p.decode_pool}' is "
                                 "already fed by another prefill pool (scale a pool with "
                                 "cluster.num_replicas: 2P1D is one prefill pool of 2 "
                                 "replicas)")
            fed.add(p.decode_pool)
        elif p.decode_pool is not None or p.kv_transfer is not None:
            raise ValueError(f"pools.{i}: decode_pool and kv_transfer apply to prefill pools "
                             f"only ('{p.name}' is {p.role})")
        if p.role == "decode" and p.match is not None:
            raise ValueError(f"pools.{i}.match: decode pool '{p.name}' receives its requests "
                             "from prefill pools; put match on the prefill pool")
    lonely = [p.name for p in pools if p.role == "decode" and p.name not in fed]
    if lonely:
        raise ValueError(f"pools: decode pool(s) {', '.join(lonely)} not named by any prefill "
                         "pool's decode_pool")
