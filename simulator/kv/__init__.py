"""KV memory: block pool, cache manager (paged / contiguous, prefix sharing), planner."""
from .block_pool import BlockPool, BlockPoolError
from .manager import KVCacheManager, KVHandle
from .planner import MemoryPlan, plan_memory

__all__ = ["BlockPool", "BlockPoolError", "KVCacheManager", "KVHandle", "MemoryPlan", "plan_memory"]
