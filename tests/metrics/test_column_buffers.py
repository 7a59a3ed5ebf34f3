"""Column-sized buffers reused by whole-column reads inside a summary
(:mod:`simulator.metrics.column_buffers`): a buffer is handed out again only when no array
made from it is alive, the pool goes when its scope closes, and reads through the pool give
the values of reads without it."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from simulator.metrics import column_buffers as cb
from simulator.metrics.step_table import ColumnSpool


@pytest.fixture
def pool_all(monkeypatch):
    """Every read pooled, however small."""
    monkeypatch.setattr(cb, "MIN_POOLED_BYTES", 0)


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_outside_a_scope_nothing_is_pooled(pool_all):
    a = cb.empty(100, np.float64)
    assert a.shape == (100,) and a.dtype == np.float64
    assert cb.pooled_bytes() == 0


def test_a_buffer_is_reused_only_once_its_arrays_are_gone(pool_all):
    with cb.reusing_buffers():
        a = cb.empty(1000, np.float64)
        b = cb.empty(1000, np.float64)  # a is alive: a second buffer
        assert not np.shares_memory(a, b)
        assert cb.pooled_bytes() == 2 * 8000
        pa = _addr(a)
        view = a[10:20]
        del a
        c = cb.empty(1000, np.int64)  # a's buffer is still held by its view
        assert cb.pooled_bytes() == 3 * 8000 and not np.shares_memory(c, view)
        del view
        d = cb.empty(500, np.int32)  # a's buffer, free now (a larger one is not needed)
        assert _addr(d) == pa and d.dtype == np.int32 and d.shape == (500,)
        assert cb.pooled_bytes() == 3 * 8000
        d[:] = 7
        assert np.all(d == 7)
    assert cb.pooled_bytes() == 0  # the scope closed: the pool let its buffers go
    assert np.all(d == 7)  # an array still alive keeps its memory


def test_the_smallest_free_buffer_that_fits_is_taken(pool_all):
    with cb.reusing_buffers():
        big = cb.empty(1000, np.float64)
        small = cb.empty(100, np.float64)
        p_big, p_small = _addr(big), _addr(small)
        del big, small
        assert _addr(cb.empty(50, np.float64)) == p_small
        assert _addr(cb.empty(500, np.float64)) == p_big  # 50 values freed again at once
        assert cb.pooled_bytes() == 8800


def test_small_reads_and_nested_scopes(monkeypatch):
    monkeypatch.setattr(cb, "MIN_POOLED_BYTES", 4096)
    with cb.reusing_buffers():
        cb.empty(100, np.float64)  # 800 bytes: numpy.empty
        assert cb.pooled_bytes() == 0
        keep = cb.empty(1024, np.float64)
        with cb.reusing_buffers():
            pass
        assert cb.pooled_bytes() == 8192  # the inner scope's end kept the outer's pool
        del keep
    assert cb.pooled_bytes() == 0
    with pytest.raises(ValueError):
        cb.empty(-1, np.float64)


def test_threads_never_share_a_buffer(pool_all):
    got: list = []
    start = threading.Barrier(8)

    def take():
        start.wait()
        a = cb.empty(4096, np.float64)
        a[:] = threading.get_ident()
        got.append(a)

    with cb.reusing_buffers():
        threads = [threading.Thread(target=take) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len({_addr(a) for a in got}) == 8
        assert all(len(set(a.tolist())) == 1 for a in got)  # none written by two threads


@pytest.mark.parametrize("order", ["appended", "permuted", "pieces"])
def test_spool_reads_through_the_pool_equal_plain_reads(pool_all, tmp_path, order):
    n = 8000  # pieces of 2,000 rows (a spool keeps pieces of at least MIN_PIECE_ROWS)
    rng = np.random.default_rng(5)
    if order == "appended":
        rid, idx = np.zeros(n, dtype=np.int64), np.arange(n)
    elif order == "permuted":  # rows interleaved one by one: a permutation is kept
        perm = rng.permutation(n)
        rid, idx = perm % 3, perm // 3
    else:  # two replicas in long runs: pieces
        rid = np.repeat([1, 0, 1, 0], n // 4)
        idx = np.concatenate([np.arange(n // 4), np.arange(n // 4), np.arange(n // 4, n // 2),
                              np.arange(n // 4, n // 2)])
    sp = ColumnSpool(["rid", "idx", "x", "k"], frozenset({"x"}), folder=tmp_path)
    sp.append({"rid": rid, "idx": idx, "x": rng.random(n), "k": rng.integers(0, 1000, n)})
    sp.sort_by("rid", "idx")
    assert (sp._order is not None) == (order == "permuted")
    assert (sp._pieces is not None) == (order == "pieces")
    plain = {c: sp.read(c) for c in sp.columns}
    plain_float = sp.read_float("k")
    with cb.reusing_buffers():
        for _ in range(2):  # the second round reuses the first round's freed buffers
            for c in sp.columns:
                assert np.array_equal(sp.read(c), plain[c])
                assert np.array_equal(sp.read(c, 7, 2000), plain[c][7:2000])
            assert np.array_equal(sp.read_float("k"), plain_float)
        held = [sp.read(c) for c in sp.columns]  # all alive at once: distinct buffers
        assert all(np.array_equal(h, plain[c]) for h, c in zip(held, sp.columns))
    sp.close()


def test_free_buffers_too_small_go_when_a_larger_one_is_made(pool_all):
    """The pool keeps no free buffer a later, larger read cannot use (one array alive at a
    time: one buffer held), and keeps a small buffer that is still in use."""
    with cb.reusing_buffers():
        for n in (100, 200, 400, 800):
            a = cb.empty(n, np.float64)
            del a
        assert cb.pooled_bytes() == 800 * 8
        small = cb.empty(10, np.float64)  # the 800-value buffer (the only one)
        big = cb.empty(1000, np.float64)   # new: the small one is in use and stays
        assert cb.pooled_bytes() == 800 * 8 + 1000 * 8
        del small, big


def test_no_pooling_once_the_scope_closed_or_without_expected_counts(pool_all, monkeypatch):
    """A take after the last scope closed (a thread that looked before) pools nothing; an
    interpreter whose reference counts differ never pools."""
    assert cb._POOL.take(100, np.dtype(np.float64)).shape == (100,)
    assert cb.pooled_bytes() == 0
    assert cb.REUSE  # this interpreter counts as the pool expects
    monkeypatch.setattr(cb, "REUSE", False)
    with cb.reusing_buffers():
        cb.empty(100, np.float64)
        assert cb.pooled_bytes() == 0
