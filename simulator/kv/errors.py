"""Errors of the KV layer (a module of their own: the block pool is compiled by mypyc, which
cannot compile a subclass of a built-in exception)."""
from __future__ import annotations


class BlockPoolError(RuntimeError):
    """Misuse of the pool (double free, negative ref count): a bug in the caller."""
