"""Locate the data folders that ship with servesim.

Lookup order for ``hardware_profiles/``, ``engine_profiles/``, ``scenarios/`` and ``traces/``:

1. ``$SERVESIM_HOME/<name>`` when the environment variable is set;
2. the repository root next to the package (a source checkout or an editable install);
3. ``simulator/_data/<name>`` inside the installed package (a plain ``pip install .``,
   populated by the build hook in ``setup.py``).
"""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the folder ``name`` (``hardware_profiles``, ``engine_profiles``, ``scenarios`` or
    ``traces``).

    Raises
    ------
    FileNotFoundError
        If no candidate folder exists.
    """
    candidates = []
    home = os.environ.get("SERVESIM_HOME")
    if home:
        candidates.append(Path(home) / name)
    candidates.append(_PKG.parent / name)
    candidates.append(_PKG / "_data" / name)
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError(
        f"servesim data folder {name!r} not found (looked in: {', '.join(map(str, candidates))})"
    )


def resolve_path(path: str | os.PathLike, kind: str, base_dir: Path | None = None) -> Path:
    """Resolve a user path: as given (absolute or relative to ``base_dir``/cwd), else in the
    shipped data folder ``kind``.

    Raises
    ------
    FileNotFoundError
        If the path is found nowhere; the message lists where it looked.
    """
    p = Path(path).expanduser()
    tried = []
    if p.is_absolute():
        if p.exists():
            return p
        tried.append(p)
    else:
        for base in ([base_dir] if base_dir else []) + [Path.cwd()]:
            q = (base / p)
            if q.exists():
                return q.resolve()
            tried.append(q)
        try:
            d = data_dir(kind)
            parts = p.parts
            q = d / Path(*parts[1:]) if parts and parts[0] == kind and len(parts) > 1 else d / p
            if q.exists():
                return q
            tried.append(q)
        except FileNotFoundError:
            pass
    raise FileNotFoundError(f"{kind} file {str(path)!r} not found (looked in: "
                            + ", ".join(str(t) for t in tried) + ")")
