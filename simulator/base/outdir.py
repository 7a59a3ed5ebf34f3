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

__all__ = ["OutputFolderError", "OutputWriteError", "check_outputs_spare_inputs",
           "clear_outputs", "describe_os_error", "discard_empty_created", "hold_output_folders",
           "input_files", "make_output_folder", "named_output_folder", "release_output_folders",
           "unsafe_name_reason"]

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
    try:  # (exists / is_dir raise PermissionError under a folder the user cannot enter)
        if out.exists() and not out.is_dir():
            raise error(f"output folder {out}: exists and is not a folder")
        missing = []  # the folder and those of its parents that do not exist yet
        p = out.absolute()
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
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


# --------------------------------------------------------------------------------------------
# outputs versus inputs (issue 26 part 6): no output over an input, names that stay inside
# the output folder, and an earlier run's outputs cleared before a new run writes its own
# --------------------------------------------------------------------------------------------
#: Names Windows reserves for devices (any extension): refused as folder names everywhere,
#: so that a report folder made here can be copied there.
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                       *(f"LPT{i}" for i in range(1, 10))})
#: Longest file-name component most file systems take (bytes, UTF-8).
_NAME_MAX_BYTES = 255
#: Most files of one input folder (a ServeGen folder) checked against the outputs.
_FOLDER_FILES_MAX = 10_000


def unsafe_name_reason(name: str) -> str | None:
    """Why ``name`` cannot be used as one folder name inside an output folder, or None.

    Refused: an empty name, ``.`` and ``..``, a path separator (``/`` or ``\\``, which
    also covers absolute paths), NUL or another control character, a name longer than 255
    bytes, and the device names Windows reserves (``CON``, ``NUL``, ``COM1``, ...).
    """
    if not name or not name.strip():
        return "it is empty"
    if name in (".", ".."):
        return f"'{name}' is not a folder name"
    if "/" in name or "\\" in name:
        return "it contains a path separator"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "it contains a control character (NUL, newline, ...)"
    if len(name.encode("utf-8", "surrogatepass")) > _NAME_MAX_BYTES:
        return f"it is longer than {_NAME_MAX_BYTES} bytes"
    if name.split(".")[0].strip().upper() in _RESERVED:
        return "it is a device name Windows reserves"
    return None


def named_output_folder(template: str, name: str, what: str = "name",
                        error: type[Exception] = OutputFolderError) -> Path:
    """The output folder ``template.format(name=name)`` (a default such as
    ``reports/{name}``), with ``name`` checked first: it must be one folder name
    (:func:`unsafe_name_reason`), so that a name like ``../../x`` cannot put the outputs
    outside the folder the template names.

    Raises
    ------
    OutputFolderError
        (or ``error``) one line naming the name, why it cannot name a folder and the way
        out (rename it, or give the output folder with ``-o``).
    """
    if "{name}" in template:
        why = unsafe_name_reason(name)
        if why is not None:
            raise error(f"{what} {name!r} cannot name the output folder {template} ({why}); "
                        "rename it, or give the output folder with -o")
    return Path(template.format(name=name))


def _strings(value, skip: frozenset) -> list[tuple[object, str]]:
    """Every string in ``value`` (mapping values, list items, recursively) with the mapping
    key it is under (None at the top), skipping the mappings' ``skip`` keys."""
    out, stack = [], [(None, value)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, str):
            out.append((key, v))
        elif isinstance(v, dict):
            stack.extend((k, x) for k, x in v.items() if k not in skip)
        elif isinstance(v, (list, tuple)):
            stack.extend((key, x) for x in v)
    return out


def _regular_files(p: Path, folder: bool = False) -> list[Path]:
    """``p`` resolved when it is a regular file; with ``folder``, the regular files directly
    in it when it is a folder (a ServeGen trace folder); nothing otherwise (missing, special,
    unreadable)."""
    try:
        if p.is_file():
            return [p.resolve()]
        if folder and p.is_dir():
            with os.scandir(p) as it:
                files = []
                for e in it:
                    if e.is_file():
                        files.append(Path(e.path).resolve())
                    if len(files) >= _FOLDER_FILES_MAX:
                        break
            return files
    except (OSError, ValueError):  # a name too long, a NUL byte, no permission
        pass
    return []


def input_files(files=(), values=None, folders=(), *, data_folders=(),
                skip_keys=("name", "output_dir"), folder_keys=("trace",)) -> list[Path]:
    """The existing input files of a run, resolved, for :func:`check_outputs_spare_inputs`.

    Parameters
    ----------
    files : iterable of path
        Files the run reads (the scenario, sweep or plan file, recorded runs); those that
        are not regular files are left out.
    values : mapping or list, optional
        Settings whose string values may name files (a resolved scenario: its trace, a
        model's ``config.json``, a GPU spec, an engine profile ...): every string that names
        an existing file relative to one of ``folders`` (or absolute) is an input; under a
        ``folder_keys`` key, one that names a folder (a ServeGen trace folder) contributes
        the files directly in it.
    folders : iterable of path
        Where relative strings are looked up (the scenario's folder, the working folder).
    data_folders : iterable of (str, Path)
        ``(name, folder)`` of shipped data folders: a string starting ``name/`` is also
        looked up in ``folder`` (``traces/x.csv`` in the shipped ``traces/``).
    skip_keys : iterable of str
        Keys whose values are not inputs (the run's ``name`` and ``output_dir``).
    folder_keys : iterable of str
        Keys whose value may be an input folder.
    """
    found: dict[Path, None] = {}
    for f in files:
        if f is not None:
            found.update(dict.fromkeys(_regular_files(Path(f))))
    data = dict(data_folders)
    # each distinct string once (a sweep's 10,000 points name the same few files)
    strings = dict.fromkeys(_strings(values, frozenset(skip_keys))) if values is not None else {}
    for key, s in strings:
        if not s or len(s) > 4096 or "\0" in s:
            continue
        try:
            p = Path(s).expanduser()
        except RuntimeError:  # ~user of no known user
            continue
        cands = [p] if p.is_absolute() else [Path(d) / p for d in folders if d is not None]
        if not p.is_absolute() and len(p.parts) > 1 and p.parts[0] in data:
            cands.append(Path(data[p.parts[0]]).joinpath(*p.parts[1:]))
        for c in cands:
            hit = _regular_files(c, folder=key in folder_keys)
            if hit:
                found.update(dict.fromkeys(hit))
                break
    return list(found)


def _same_file(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)  # hard links, bind mounts
    except (OSError, ValueError):
        return False


def _is_folder(p: Path) -> bool:
    """Whether ``p`` is a folder; False where it cannot be looked at (a parent the user cannot
    enter: ``Path.is_dir`` raises there on Python 3.11; writing reports that itself)."""
    try:
        return p.is_dir()
    except OSError:
        return False


def check_outputs_spare_inputs(folder: str | Path, outputs, inputs, *,
                               flag: str | None = None,
                               error: type[Exception] = OutputFolderError) -> None:
    """Refuse a run whose outputs would overwrite one of its inputs, or that would find a
    folder where it writes one of its files (it would fail halfway, its outputs half written).

    Parameters
    ----------
    folder : path
        The output folder.
    outputs : iterable of str
        The names the run writes in ``folder`` (relative; a name ending with ``/`` is a folder
        the run owns, such as a compare variant's run folder or ``.cache/``: any input inside
        it counts).
    inputs : iterable of path
        The run's input files (:func:`input_files`).
    flag : str, optional
        How the user named the output, for the message (default ``-o FOLDER``; e.g.
        ``--to-parquet``).

    Raises
    ------
    OutputFolderError
        (or ``error``) one line naming the output, the input (or the folder in the way) and
        what to do, before any simulation runs.
    """
    base = Path(folder)
    outputs = list(outputs)
    for name in outputs:  # a file the run writes, where a folder of that name stands
        if not name.endswith("/") and _is_folder(base / name):
            raise error(f"{flag or f'-o {base}'}: {base / name} is a folder, where the run "
                        "writes a file of that name; remove it or choose another output")
    inputs = [Path(i) for i in inputs]
    if not inputs:
        return
    try:
        root = base.resolve()
    except (OSError, ValueError):
        return
    for name in outputs:
        target = root / name.rstrip("/")
        try:
            target = target.resolve()  # a symlinked output lands where it points
        except (OSError, ValueError):
            continue
        for i in inputs:
            hit = target in i.parents if name.endswith("/") else _same_file(target, i)
            if hit:
                shown = base / name.rstrip("/")
                raise error(f"{flag or f'-o {base}'}: the output {shown} would overwrite the "
                            f"input {i}; choose another output (or move the input)")


def clear_outputs(folder: str | Path, names) -> list[Path]:
    """Remove what an earlier run left in ``folder`` under the names a run of this kind
    writes (``names``, relative; figures included), so that a new run that writes fewer of
    them (``--no-figures``) leaves no stale file beside its own. Only the named files go (a
    symbolic link itself, never its target); a folder among the names' parents that is left
    empty goes too; any other file in ``folder`` stays.

    Returns
    -------
    list of Path
        The files removed.
    """
    out = Path(folder)
    removed = []
    parents: set[Path] = set()
    for name in names:
        p = out / name
        try:
            if p.is_symlink() or p.is_file():
                p.unlink()
                removed.append(p)
                parents.update(q for q in p.parents if out in q.parents)
        except OSError:
            continue
    for d in sorted(parents, key=lambda q: len(q.parts), reverse=True):
        try:
            d.rmdir()  # only an empty folder goes
        except OSError:
            pass
    return removed
