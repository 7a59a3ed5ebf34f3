"""The one check of an output folder (``-o``) shared by every command that writes one.

Each command calls :func:`make_output_folder` once its input is validated and before any
simulation or import runs, so that an unusable ``-o`` (a file in the way, a folder that cannot
be created or written) is one line on stderr (exit 2) instead of a ``[Errno ...]`` after the
work.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OutputFolderError", "discard_empty_created", "make_output_folder"]

#: Folders :func:`make_output_folder` created in this process (outermost first), so that a
#: command that fails before writing anything leaves no empty folder behind
#: (:func:`discard_empty_created`, called by the CLI on failure).
_created: list[Path] = []


class OutputFolderError(ValueError):
    """An output folder that cannot be used (one line naming it and why)."""


def make_output_folder(path: str | Path, error: type[Exception] = OutputFolderError) -> Path:
    """Create the output folder ``path`` (with its parents) and check it can be written.

    Parameters
    ----------
    path : str or Path
        The output folder.
    error : exception class
        What to raise (a ``ValueError`` subclass such as ``ScenarioError`` or ``PlanError``
        keeps a command's own error type); default :class:`OutputFolderError`.

    Returns
    -------
    Path
        ``path``, now an existing, writable folder.

    Raises
    ------
    OutputFolderError
        (or ``error``) one line ``output folder PATH: why`` when ``path`` exists and is not a
        folder, cannot be created (a file among its parents, a read-only or virtual file
        system such as ``/proc``) or is not writable.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise error(f"output folder {out}: exists and is not a folder")
    missing = []  # the folder and those of its parents that do not exist yet
    p = out.absolute()
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise error(f"output folder {out}: cannot create it ({e.strerror or e})") from None
    _created.extend(reversed(missing))
    if not os.access(out, os.W_OK | os.X_OK):
        raise error(f"output folder {out}: not writable")
    return out


def discard_empty_created(remove: bool = True) -> list[Path]:
    """Remove the folders :func:`make_output_folder` created in this process that are still
    empty, innermost first (a folder holding anything, a partial output or a plan's cache, is
    kept, and so are its parents); forget them all (``remove=False``: only forget, after a
    command that succeeded). Returns the folders removed."""
    removed = []
    for p in reversed(_created if remove else ()):
        try:
            p.rmdir()  # only an empty folder goes
        except OSError:
            continue
        removed.append(p)
    _created.clear()
    return removed
