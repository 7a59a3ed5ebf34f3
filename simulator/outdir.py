"""The one check of an output folder (``-o``) shared by every command that writes one.

Each command calls :func:`make_output_folder` once its input is validated and before any
simulation or import runs, so that an unusable ``-o`` (a file in the way, a folder that cannot
be created or written) is one line on stderr (exit 2) instead of a ``[Errno ...]`` after the
work.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OutputFolderError", "check_outputs_spare_inputs", "clear_outputs",
           "discard_empty_created", "input_files", "make_output_folder", "named_output_folder",
           "unsafe_name_reason"]

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


def check_outputs_spare_inputs(folder: str | Path, outputs, inputs, *,
                               flag: str | None = None,
                               error: type[Exception] = OutputFolderError) -> None:
    """Refuse a run whose outputs would overwrite one of its inputs.

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
        (or ``error``) one line naming the output, the input and what to do, before any
        simulation runs.
    """
    inputs = [Path(i) for i in inputs]
    if not inputs:
        return
    base = Path(folder)
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
