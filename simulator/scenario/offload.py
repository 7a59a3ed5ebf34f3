"""The ``kv_cache.offload`` section: KV offload tiers behind the GPU prefix cache.

Semantics and sources: :mod:`simulator.kv.tiers`. Example::

    kv_cache:
      enable_prefix_caching: true
      offload:
        connector: vllm            # vLLM's OffloadingConnector; or lmcache
        tiers:
          - medium: cpu
            size_gib: 64           # or cpu_bytes_to_use (bytes), as vLLM names it
          - medium: disk
            size_gib: 1000
            bandwidth_bytes_per_s: 6.0e9
            latency_s: 1.0e-4
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simulator.base.schema import StrictModel

#: LMCache's default chunk (``chunk_size``, tokens; LMCache documentation, configuration)
LMCACHE_CHUNK_TOKENS = 256


class OffloadTierConfig(StrictModel):
    """One offload tier of a replica (its size over the replica's GPUs together).

    ``medium: cpu`` defaults its bandwidth to the GPU profile's host link
    (``host_link_bandwidth_bytes_per_s``, per GPU and direction) and its latency to 0;
    ``medium: disk`` has no default: state the drive's read bandwidth and latency.
    """

    medium: Literal["cpu", "disk"]
    size_gib: float | None = Field(default=None, ge=0, le=1 << 20, description="capacity, "
                                   "GiB (2**30 bytes); 0 on the cpu tier: no offload (a "
                                   "baseline for a compare or plan over tier sizes)")
    cpu_bytes_to_use: int | None = Field(default=None, ge=1, description="capacity in bytes "
                                         "(vLLM's OffloadingConnector name)")
    bandwidth_bytes_per_s: float | None = Field(default=None, gt=0, description="read "
                                                "bandwidth per GPU of a load out of the tier")
    latency_s: float | None = Field(default=None, ge=0, le=60)

    @model_validator(mode="after")
    def _one_size(self):
        if (self.size_gib is None) == (self.cpu_bytes_to_use is None):
            raise ValueError(f"offload tier {self.medium!r}: give exactly one of size_gib and "
                             "cpu_bytes_to_use")
        if self.medium == "disk" and (self.bandwidth_bytes_per_s is None
                                      or self.latency_s is None):
            raise ValueError("offload tier 'disk': state bandwidth_bytes_per_s and latency_s "
                             "(the drive's read figures; there is no default)")
        return self

    @property
    def size_bytes(self) -> int:
        """Capacity in bytes."""
        if self.cpu_bytes_to_use is not None:
            return int(self.cpu_bytes_to_use)
        return int(float(self.size_gib or 0.0) * (1 << 30))


class OffloadConfig(StrictModel):
    """KV offload tiers: whose semantics (``connector``), the tiers (CPU first, then at most
    one disk tier), LMCache's chunk and sharing."""

    connector: Literal["vllm", "lmcache"] = "vllm"
    tiers: list[OffloadTierConfig] = Field(min_length=1, max_length=2)
    chunk_size: int | None = Field(default=None, ge=1, description="lmcache: tokens per "
                                   f"stored chunk (default {LMCACHE_CHUNK_TOKENS})")
    shared: bool = Field(default=False, description="lmcache: one store for every replica "
                         "of the pool")
    offload_prompt_only: bool | None = Field(default=None, description="vllm: store prompt "
                                             "blocks only (vLLM's default: true)")
    save_decode_cache: bool | None = Field(default=None, description="lmcache: store the "
                                           "blocks of generated tokens too (default: false)")

    @model_validator(mode="after")
    def _layout(self):
        media = [t.medium for t in self.tiers]
        if media not in (["cpu"], ["cpu", "disk"]):
            raise ValueError(f"offload tiers must be [cpu] or [cpu, disk], got {media}")
        if self.connector == "vllm" and (self.chunk_size is not None or self.shared
                                         or self.save_decode_cache is not None):
            raise ValueError("offload: chunk_size, shared and save_decode_cache are LMCache's "
                             "(connector: lmcache); vLLM's connector stores whole blocks per "
                             "replica (offload_prompt_only says whether answers are stored)")
        if any(t.size_bytes == 0 for t in self.tiers[1:]):
            raise ValueError("offload: a disk tier of size 0; remove it instead (size 0 on the "
                             "cpu tier turns offload off)")
        if self.connector == "lmcache" and self.offload_prompt_only is not None:
            raise ValueError("offload: offload_prompt_only is vLLM's connector's; LMCache's is "
                             "save_decode_cache")
        return self

    @property
    def active(self) -> bool:
        """Whether there are tiers at all: a CPU tier of size 0 turns offload off."""
        return self.tiers[0].size_bytes > 0

    def stores_decode(self) -> bool:
        """Whether blocks of generated tokens are stored (both engines default to no)."""
        if self.connector == "lmcache":
            return bool(self.save_decode_cache)
        return self.offload_prompt_only is False

    def chunk_tokens(self) -> int:
        """Tokens per stored unit (LMCache's chunk; 0 for vLLM: one block)."""
        if self.connector == "lmcache":
            return int(self.chunk_size or LMCACHE_CHUNK_TOKENS)
        return 0
