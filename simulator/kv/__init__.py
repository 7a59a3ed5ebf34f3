"""KV memory: block pool, cache manager (paged / contiguous, prefix sharing), planner."""
from simulator.kv.block_pool import BlockPool, BlockPoolError
from simulator.kv.manager import KVCacheManager, KVHandle
from simulator.kv.planner import MemoryPlan, plan_memory

__all__ = ["BlockPool", "BlockPoolError", "KVCacheManager", "KVHandle", "MemoryPlan", "plan_memory"]
