"""The KV blocks a planned decode run holds at each step, listed only as far as they are read
(part of the compiled core).

A decode run is planned to its first finish (often thousands of steps) and an arrival usually
cuts it after tens; :meth:`~simulator.kv.manager.KVCacheManager.plan_decode_run_blocks` finds
the longest run the free pool supplies from the closed form :meth:`RunBlocks.growth`, and the
engine lists the blocks in use for the steps it prices (:meth:`RunBlocks.extend_to`).
"""
from __future__ import annotations

from simulator.base.compiled_core import register_pickling

__all__ = ["RunBlocks"]


class RunBlocks:
    """Pool blocks in use during each step of a planned decode run
    (:meth:`KVCacheManager.plan_decode_run_blocks`), listed only as far as they are asked for.

    Request ``r`` of the batch takes one more block at steps ``start_r``,
    ``start_r + block_size``, ... (1-based; ``start_r >= 2``), and the batch ``first`` blocks at
    step 1, so by the end of step ``s`` the run has taken ``growth(s) = first + sum_r
    max(0, (s - start_r) // block_size + 1)`` blocks (integers: the same counts however they
    are summed).

    Parameters
    ----------
    used0 : int
        Blocks in use before the run (blocks).
    first : int
        Blocks the first step takes.
    starts : list of int
        Per request, the first step after which it needs another block.
    block_size : int
        Tokens per block.
    k_max : int
        Steps planned at most (the list never grows past them).
    """

    __slots__ = ("block_size", "first", "k_max", "level", "starts", "used")

    def __init__(self, used0: int, first: int, starts: list[int], block_size: int,
                 k_max: int) -> None:
        self.first: int = first
        self.starts: list[int] = starts
        self.block_size: int = block_size
        self.k_max: int = k_max
        #: blocks in use during step ``i + 1`` for every step listed so far
        self.used: list[int] = []
        self.level: int = used0  # blocks in use during the last step listed

    def _init_args(self) -> tuple[tuple, dict]:
        """Constructor arguments that rebuild this object when unpickled
        (:func:`simulator.base.compiled_core.register_pickling`); the steps listed so far
        are listed again when asked for."""
        return (self.level - self.growth(len(self.used)), self.first, self.starts,
                self.block_size, self.k_max), {}

    def growth(self, s: int) -> int:
        """Blocks the run has taken by the end of step ``s`` (0 for ``s = 0``)."""
        if s <= 0:
            return 0
        bs = self.block_size
        g = self.first
        for start in self.starts:
            if s >= start:
                g += (s - start) // bs + 1
        return g

    def head(self, n: int) -> list[int]:
        """Blocks in use during each of the first ``n`` steps (at most ``k_max``): the list
        itself when it holds exactly that many (treat as read-only), else a copy."""
        self.extend_to(n)
        used = self.used
        return used if len(used) == n else used[:n]

    def at(self, i: int) -> int:
        """Blocks in use during step ``i + 1`` (0-based ``i < k_max``)."""
        if i >= len(self.used):
            self.extend_to(i + 1)
        return self.used[i]

    def extend_to(self, n: int) -> None:
        """List the steps up to ``n`` (at most ``k_max``): each request's block boundaries
        in the new steps counted, then summed step by step from the last level."""
        n = min(n, self.k_max)
        used = self.used
        a = len(used) + 1   # first new step (1-based)
        if n < a:
            return
        bs = self.block_size
        inc = [0] * (n - a + 1)
        if a == 1:
            inc[0] = self.first
        for start in self.starts:
            t = start if start >= a else start + ((a - start + bs - 1) // bs) * bs
            while t <= n:
                inc[t - a] += 1
                t += bs
        g = self.level
        for x in inc:
            g += x
            used.append(g)
        self.level = g


register_pickling(RunBlocks)
