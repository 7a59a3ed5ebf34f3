"""On-disk cache of filled table grids: the ``hybrid`` fill of a measured table's grid
(:func:`simulator.perf.tables.grid._fill`) computed once per machine, not once per process.

Why: the fill itself takes milliseconds, but its Akima interpolant needs
``scipy.interpolate``, whose import costs about 0.4 s of CPU, paid by every process that loads
a measured table (a capacity search runs many). A cached grid is read back with
``numpy.load`` and is the very array the fill returned (``.npz`` keeps float64 bit for bit),
so results do not depend on whether the cache was hit.

Key: SHA-256 of everything the fill reads and of the code that computes it: the raw grid
(shape and bytes, NaN = not measured), the ``u`` coordinates of every axis, the log roofline
bound at the nodes (or its absence), the fill method, the bytes of ``grid.py`` (the fill
code) and ``libm.py`` (the C-library functions it calls), and the numpy and scipy versions (the interpolants). A changed table, roofline, fill
code or library gives another key, so an entry is never stale. An entry carries the SHA-256
of its grid's bytes next to the grid; one whose grid does not match that digest (a damaged
file: a flipped bit in a filled cell would otherwise change results silently), or does not
carry the measured cells of its grid unchanged, is ignored (and rewritten).

Where: ``$SERVESIM_CACHE_DIR/fill/`` when that variable is set (an empty value turns the
cache off), else ``$XDG_CACHE_HOME/servesim/fill/``, else ``~/.cache/servesim/fill/``. One
``<key>.npz`` file per grid (a few kB: the grid and its digest), written to a temporary file in the same folder and
renamed into place (atomic: concurrent processes never read half a file). A folder that
cannot be created or written, or a file that cannot be read, is not an error: the grid is
then computed as without a cache.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

#: environment variable naming the cache folder (empty: no cache)
CACHE_ENV = "SERVESIM_CACHE_DIR"
#: bumped when the layout of an entry changes
CACHE_FORMAT = 2

_CODE_KEY: bytes | None = None


def cache_dir() -> Path | None:
    """The folder of cached fills, or None when ``$SERVESIM_CACHE_DIR`` is set empty.

    ``$SERVESIM_CACHE_DIR/fill``, else ``$XDG_CACHE_HOME/servesim/fill`` (XDG Base Directory
    Specification), else ``~/.cache/servesim/fill``. Not created here.
    """
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env).expanduser() / "fill" if env.strip() else None
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "servesim" / "fill"


def _code_key() -> bytes:
    """Digest of the fill code (``grid.py``, ``libm.py``) and the library versions it depends on
    (computed once per process)."""
    global _CODE_KEY
    if _CODE_KEY is None:
        import scipy  # the package alone (its submodules load lazily): milliseconds
        h = hashlib.sha256(f"format {CACHE_FORMAT}\n".encode())
        for name in ("grid.py", "libm.py"):  # the fill and the functions it calls
            h.update((Path(__file__).parent / name).read_bytes())
        h.update(f"\nnumpy {np.__version__} scipy {scipy.__version__}".encode())
        _CODE_KEY = h.digest()
    return _CODE_KEY


def fill_key(raw: np.ndarray, us: list[np.ndarray], lr: np.ndarray | None, method: str) -> str:
    """Hex SHA-256 naming the fill of ``raw`` (log efficiency, NaN = not measured) over the
    axis coordinates ``us`` with log bound ``lr`` (None: none) by ``method``."""
    h = hashlib.sha256(_code_key())
    h.update(f"\n{method}\n{raw.shape}\n".encode())
    h.update(np.ascontiguousarray(raw, dtype=np.float64).tobytes())
    for u in us:
        h.update(f"\nu {len(u)}\n".encode())
        h.update(np.ascontiguousarray(u, dtype=np.float64).tobytes())
    if lr is None:
        h.update(b"\nno bound")
    else:
        h.update(b"\nbound\n")
        h.update(np.ascontiguousarray(np.broadcast_to(lr, raw.shape), dtype=np.float64)
                 .tobytes())
    return h.hexdigest()


def _digest(grid: np.ndarray) -> np.ndarray:
    """SHA-256 of ``grid``'s shape and float64 bytes, as 32 uint8."""
    h = hashlib.sha256(f"{grid.shape}\n".encode())
    h.update(np.ascontiguousarray(grid, dtype=np.float64).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8)


def _load(path: Path, raw: np.ndarray) -> np.ndarray | None:
    """The cached grid at ``path`` when it is readable, matches the digest stored with it,
    has ``raw``'s shape, is finite and holds ``raw``'s measured cells unchanged; else None."""
    try:
        with np.load(path, allow_pickle=False) as z:
            got, digest = z["grid"], z["sha256"]
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None
    if got.dtype != np.float64 or got.shape != raw.shape or not np.isfinite(got).all():
        return None
    if not np.array_equal(digest, _digest(got)):
        return None
    fin = np.isfinite(raw)
    if not np.array_equal(got[fin], raw[fin]):
        return None
    return got


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it
    (``/proc/self/status``), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _store(folder: Path, path: Path, grid: np.ndarray) -> None:
    """Write ``grid`` to ``path`` atomically (temporary file in ``folder``, then rename);
    silently nothing when the folder cannot be written."""
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".npz")
        # mkstemp makes 0600; an entry is an ordinary file: 0666 less the umask
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            np.savez(f, grid=grid, sha256=_digest(grid))
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def cached_fill(raw: np.ndarray, us: list[np.ndarray], lr: np.ndarray | None, method: str,
                fill: Callable[..., np.ndarray]) -> np.ndarray:
    """``fill(raw, us, lr, method)``, read from the cache folder (:func:`cache_dir`) when an
    entry for these inputs is there, else computed and stored.

    Parameters
    ----------
    raw : numpy.ndarray
        The grid's log efficiency, NaN where not measured (any shape, float64).
    us : list of numpy.ndarray
        Interpolation coordinate of every axis (``len(us[a]) == raw.shape[a]``).
    lr : numpy.ndarray or None
        Log roofline bound at the nodes (``raw``'s shape), or None.
    method : str
        The fill method (:data:`simulator.perf.tables.grid.FILL_METHODS`).
    fill : callable
        The fill itself; its errors (e.g. ``ValueError`` for an empty grid) propagate.

    Returns
    -------
    numpy.ndarray
        The filled grid (``raw``'s shape), bit-identical to ``fill``'s result.
    """
    try:
        folder = cache_dir()
    except RuntimeError:  # no home folder to find (Path.home)
        folder = None
    if folder is None:
        return fill(raw, us, lr, method)
    path = folder / f"{fill_key(raw, us, lr, method)}.npz"
    # no is_file() first: on a folder the user cannot enter it raises PermissionError (Python
    # 3.11); _load turns a missing or unreadable entry into None (computed again)
    hit = _load(path, raw)
    if hit is not None:
        return hit
    grid = fill(raw, us, lr, method)
    _store(folder, path, grid)
    return grid
