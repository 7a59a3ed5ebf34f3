"""The one check of an output folder (``-o``) shared by every command that writes one.

Each command calls :func:`make_output_folder` once its input is validated and before any
simulation or import runs, so that an unusable ``-o`` (a file in the way, a folder that cannot
be created or written) is one line on stderr (exit 2) instead of a ``[Errno ...]`` after the
work.

**One run per folder.** Two runs writing the same folder at once would interleave their
files (and trip on each other's ``.part`` renames). :func:`make_output_folder` takes an
exclusive, non-blocking ``flock`` on the folder itself (no lock file is written): the command
line (:func:`hold_output_folders`) keeps it until the command ends, so a second ``servesim``
aimed at the same folder stops at once, before simulating, with one line (exit 2). The lock is
the kernel's: a run that dies releases it. Outside a command (the Python API) the call only
checks that no command holds the folder. Where ``flock`` is missing (Windows) or refused (some
network file systems) folders are not locked.

**Write errors.** :class:`OutputWriteError` is an ``OSError`` whose text is one line naming
the file and the cause (``.../requests.parquet: cannot write (No space left on device)``);
:func:`describe_os_error` words any other ``OSError`` a command ends on, naming the output
folder being written when the error itself names no file (a full disk raises
``[Errno 28]`` without a path). The command line exits 1 on these, as on a full ``$TMPDIR``.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["OutputFolderError", "OutputWriteError", "describe_os_error",
           "discard_empty_created", "hold_output_folders", "make_output_folder",
           "release_output_folders"]

#: Folders :func:`make_output_folder` created in this process (outermost first), so that a
#: command that fails before writing anything leaves no empty folder behind
#: (:func:`discard_empty_created`, called by the CLI on failure).
_created: list[Path] = []
#: Output folders this process holds locked (real path -> open descriptor of the folder)
_held: dict[str, int] = {}
#: The output folders checked since the command began, latest last (named by write errors)
_used: list[Path] = []
#: Whether locks are kept until :func:`release_output_folders` (a command is running)
_hold = False

#: errno values that mean "the output could not be written for lack of room"
_NO_ROOM = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}


class OutputFolderError(ValueError):
    """An output folder that cannot be used (one line naming it and why)."""


class OutputWriteError(OSError):
    """Writing an output file failed (a full disk, a quota, an I/O error): ``str()`` is one
    line naming the file and the cause; ``errno`` and ``filename`` are those of the cause."""

    def __init__(self, path: str | Path, cause: OSError):
        super().__init__(cause.errno, _cause_text(cause), str(path))

    def __str__(self) -> str:
        hint = "; free space there or choose another -o" if self.errno in _NO_ROOM else ""
        return f"{self.filename}: cannot write ({self.strerror}){hint}"


def _cause_text(e: OSError) -> str:
    """The cause of an ``OSError`` in words: its ``strerror``, else its first line (pyarrow's
    ``Error writing bytes to file. Detail: [errno 28] No space left on device``)."""
    if e.strerror:
        return e.strerror
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "[errno 28]" in text.lower() or "no space left" in text.lower():
        return os.strerror(errno.ENOSPC)
    return text


def describe_os_error(e: OSError) -> str:
    """One line for an ``OSError`` a command ended on: an :class:`OutputWriteError` as it is;
    an error naming its file as ``FILE: cause``; a full disk or quota naming no file as
    ``output folder DIR: cannot write (cause)`` for the output folder being written (the
    latest :func:`make_output_folder` of the command); anything else by its first line."""
    if isinstance(e, OutputWriteError):
        return str(e)
    if e.filename is not None:
        return f"{e.filename}: {_cause_text(e)}"
    if e.errno in _NO_ROOM and _used:  # (a message-only OSError, the spool's, names its place)
        return str(OutputWriteError(f"output folder {_used[-1]}", e))
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def hold_output_folders() -> None:
    """Keep the lock of every output folder :func:`make_output_folder` checks from now until
    :func:`release_output_folders` (the command line calls it as a command starts)."""
    global _hold
    _hold = True


def release_output_folders() -> None:
    """Release every output folder lock this process holds and stop holding new ones."""
    global _hold
    _hold = False
    for fd in _held.values():
        try:
            os.close(fd)  # closing the descriptor releases its flock
        except OSError:  # pragma: no cover - already closed
            pass
    _held.clear()
    _used.clear()


def _lock_folder(out: Path, error: type[Exception]) -> None:
    """Take (or, outside a command, test) the exclusive lock of the folder ``out``.

    Raises
    ------
    error
        When another process holds it: one line naming the folder.
    """
    key = os.path.realpath(out)
    if key in _held:
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no flock
        return
    try:
        fd = os.open(key, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - a folder that cannot be opened: not locked
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise error(f"output folder {out}: another servesim run is writing it now; wait for "
                    "it to finish or choose another -o") from None
    except OSError:  # pragma: no cover - a file system without flock: not locked
        os.close(fd)
        return
    if _hold:
        _held[key] = fd
    else:
        os.close(fd)


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
        system such as ``/proc``), is not writable, or another ``servesim`` run is writing it
        (see the module docstring: the folder lock).
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
    _lock_folder(out, error)
    if _hold:
        _used.append(out)
    return out


def discard_empty_created(remove: bool = True) -> list[Path]:
    """Release the output folder locks (:func:`release_output_folders`: the command is over)
    and remove the folders :func:`make_output_folder` created in this process that are still
    empty, innermost first (a folder holding anything, a partial output or a plan's cache, is
    kept, and so are its parents); forget them all (``remove=False``: only forget, after a
    command that succeeded). Returns the folders removed."""
    release_output_folders()  # the command is over: its folders are free again
    removed = []
    for p in reversed(_created if remove else ()):
        try:
            p.rmdir()  # only an empty folder goes
        except OSError:
            continue
        removed.append(p)
    _created.clear()
    return removed
