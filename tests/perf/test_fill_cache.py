"""The on-disk cache of filled table grids (simulator.perf.tables.fill_cache): a table's grid is
filled once, read back bit for bit, keyed by everything the fill reads, and a cache that
cannot be used is never an error."""
from __future__ import annotations

import math
import os
import stat

import numpy as np
import pytest

from simulator.catalog.hardware import get_gpu
from simulator.perf.tables import fill_cache
from simulator.perf.tables import grid as table_grid
from simulator.perf.tables.fill_cache import cache_dir, fill_key
from simulator.perf.tables.grid import _fill, _Grid
from simulator.perf.tables.sets import select_table_set


def _rows(hole_value_row=None):
    """Scattered rows of a 2 x 4 grid, a in (1, 2), b in (1, 2, 4, 8) (u = 0, 1, 2, 3),
    without the cell (a = 1, b = 4). Row a = 1 holds log efficiencies 0, 1, 1 at b = 1, 2, 8;
    row a = 2 holds 0.5 everywhere (``hole_value_row`` replaces its value at b = 1)."""
    a, b, v = [], [], []
    for bi, val in zip((1.0, 2.0, 8.0), (0.0, 1.0, 1.0)):
        a.append(1.0)
        b.append(bi)
        v.append(val)
    for bi in (1.0, 2.0, 4.0, 8.0):
        a.append(2.0)
        b.append(bi)
        v.append(0.5 if hole_value_row is None or bi != 1.0 else hole_value_row)
    return [np.array(a), np.array(b)], np.array(v)


def _table_grid(hole_value_row=None):
    """A grid built the way a table's is (``_Grid.__init__``: the cached fill), no bound."""
    coords, le = _rows(hole_value_row)
    return _Grid(["a", "b"], coords, le, [False, False])


def _entries(folder):
    d = folder / "fill"
    return sorted(d.glob("*.npz")) if d.is_dir() else []


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_fill_is_stored_and_read_back_bit_for_bit(cache, monkeypatch):
    g = _table_grid()
    # the empty cell (a = 1, b = 4) is bracketed along b only: Akima through (0, 0), (1, 1),
    # (3, 1) at u = 2 is 1.25 (worked out in test_table_grid.test_fill_kinds_by_hand)
    assert math.isclose(g.le[0, 2], 1.25, rel_tol=1e-12)
    (entry,) = _entries(cache)
    assert _grid(entry).tobytes() == g.le.tobytes()

    def no_fill(*a, **k):
        raise AssertionError("the fill ran although its result is cached")

    monkeypatch.setattr(table_grid, "_fill", no_fill)
    again = _table_grid()
    assert again.le.tobytes() == g.le.tobytes()
    assert again.flat == g.flat


def test_cached_fill_equals_the_fill_itself(cache):
    raw = np.array([[0.0, np.nan, 2.0, np.nan], [1.0, 0.5, np.nan, 3.0],
                    [np.nan, np.nan, np.nan, 1.0]])
    us = [np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.5, 4.0])]
    lr = np.arange(12, dtype=float).reshape(3, 4) / 7.0
    want = _fill(raw, us, lr, "hybrid")
    cold = fill_cache.cached_fill(raw, us, lr, "hybrid", _fill)
    warm = fill_cache.cached_fill(raw, us, lr, "hybrid", _fill)
    assert cold.tobytes() == want.tobytes() == warm.tobytes()
    assert len(_entries(cache)) == 1


def test_key_names_every_input():
    raw = np.array([[0.0, np.nan, 1.0]])
    us = [np.array([0.0]), np.array([0.0, 1.0, 2.0])]
    lr = np.zeros((1, 3))
    base = fill_key(raw, us, lr, "hybrid")
    other_raw = raw.copy()
    other_raw[0, 2] = 1.0 + 2 ** -40
    keys = {base, fill_key(other_raw, us, lr, "hybrid"),
            fill_key(raw, [us[0], np.array([0.0, 1.0, 2.5])], lr, "hybrid"),
            fill_key(raw, us, lr + 1e-12, "hybrid"), fill_key(raw, us, None, "hybrid"),
            fill_key(raw, us, lr, "akima"), fill_key(raw.reshape(3, 1), us[::-1], lr.T, "hybrid")}
    assert len(keys) == 7
    assert fill_key(raw.copy(), [u.copy() for u in us], lr.copy(), "hybrid") == base


def test_other_table_values_get_another_entry(cache):
    a = _table_grid()
    b = _table_grid(hole_value_row=0.25)
    assert len(_entries(cache)) == 2
    assert a.le[1, 0] == 0.5 and b.le[1, 0] == 0.25


def test_unwritable_cache_folder_falls_back_to_computing(monkeypatch, tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(blocker))
    g = _table_grid()
    assert math.isclose(g.le[0, 2], 1.25, rel_tol=1e-12)
    assert blocker.read_text() == "x"
    assert not list(tmp_path.glob("**/*.npz"))


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied"),
                                   IsADirectoryError(21, "Is a directory")])
def test_unreadable_cache_entry_falls_back_to_computing(cache, monkeypatch, error):
    # a cache folder the user cannot enter (HOME left at /root under sudo): checking or
    # opening an entry raises (Path.is_file raises PermissionError there on Python 3.11);
    # the fill is computed, as with no cache
    want = _table_grid().le  # stored in the cache
    assert _entries(cache)

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(fill_cache.Path, "is_file", refuse)
    monkeypatch.setattr(fill_cache.np, "load", refuse)
    assert _table_grid().le.tobytes() == want.tobytes()


def test_no_home_folder_turns_the_cache_off(monkeypatch):
    def no_home(*args, **kwargs):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("SERVESIM_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(fill_cache.Path, "home", no_home)
    g = _table_grid()
    assert math.isclose(g.le[0, 2], 1.25, rel_tol=1e-12)


def _grid(entry):
    with np.load(entry) as z:
        return z["grid"]


def _write_entry(entry, grid, digest=None):
    with open(entry, "wb") as f:
        np.savez(f, grid=grid, sha256=fill_cache._digest(grid) if digest is None else digest)


def test_corrupt_or_foreign_entry_is_recomputed_and_replaced(cache):
    good = _table_grid().le.copy()
    (entry,) = _entries(cache)
    entry.write_bytes(b"not an npz file")
    assert _table_grid().le.tobytes() == good.tobytes()
    assert _grid(entry).tobytes() == good.tobytes()
    # an entry whose measured cells are not the grid's (e.g. a tampered file) is not trusted,
    # even with a digest that matches its own bytes
    forged = good.copy()
    forged[1, 3] = 9.0
    _write_entry(entry, forged)
    assert _table_grid().le.tobytes() == good.tobytes()
    _write_entry(entry, good[:, :3])   # wrong shape
    assert _table_grid().le.tobytes() == good.tobytes()
    assert _grid(entry).tobytes() == good.tobytes()
    # a grid without its digest (format 1 layout) is not trusted
    with open(entry, "wb") as f:
        np.savez(f, grid=good)
    assert _table_grid().le.tobytes() == good.tobytes()
    assert _grid(entry).tobytes() == good.tobytes()


def test_damaged_filled_cell_is_caught_by_the_digest(cache):
    good = _table_grid().le.copy()
    (entry,) = _entries(cache)
    # the unmeasured cell (a = 1, b = 4) holds a filled value: change it by one ulp and keep
    # the digest of the good grid (a bit flipped on disk); the measured cells still match
    damaged = good.copy()
    damaged[0, 2] = np.nextafter(damaged[0, 2], np.inf)
    _write_entry(entry, damaged, digest=fill_cache._digest(good))
    assert _table_grid().le.tobytes() == good.tobytes()
    assert _grid(entry).tobytes() == good.tobytes()   # rewritten


def test_empty_variable_turns_the_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv("SERVESIM_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() is None
    assert math.isclose(_table_grid().le[0, 2], 1.25, rel_tol=1e-12)
    assert not list(tmp_path.glob("**/*.npz"))


def test_cache_folder_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine" / "fill"
    monkeypatch.delenv("SERVESIM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "servesim" / "fill"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "servesim" / "fill"


def test_grids_built_from_cells_are_not_cached(cache):
    """The leave-one-out benchmark refills thousands of held-out grids: none is stored."""
    raw = np.array([[0.0, 1.0, np.nan, 1.0]])
    g = _Grid.from_cells(["a", "b"], [np.array([1.0]), np.array([1.0, 2.0, 4.0, 8.0])],
                         [False, False], raw)
    assert math.isclose(g.le[0, 2], 1.25, rel_tol=1e-12)
    assert _entries(cache) == []


def test_shipped_table_answers_the_same_cold_warm_and_uncached(monkeypatch, tmp_path):
    gpu = get_gpu("h100-sxm")
    heads = {"q_heads": 32, "kv_heads": 8, "head_dim": 128}

    def answers():
        ts = select_table_set(gpu)
        m = np.array([1.0, 3.0, 100.0, 777.0, 5000.0])
        return (np.asarray(ts.gemm(m, 4096, 14336)).tobytes(),
                np.asarray(ts.attention_decode(37, np.array([100.0, 3000.0, 20000.0]),
                                               **heads)).tobytes(),
                np.asarray(ts.attention_prefill(np.array([17.0, 900.0]), 1000.0,
                                                **heads)).tobytes())

    monkeypatch.setenv("SERVESIM_CACHE_DIR", "")
    off = answers()
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path))
    cold = answers()
    assert len(_entries(tmp_path)) == 3
    warm = answers()
    assert off == cold == warm


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_entry_mode_honours_the_umask(cache, mask, mode):
    # an entry is an ordinary file (0666 less the umask), not mkstemp's 0600
    old = os.umask(mask)
    try:
        _table_grid()
    finally:
        os.umask(old)
    (entry,) = _entries(cache)
    assert stat.S_IMODE(entry.stat().st_mode) == mode
