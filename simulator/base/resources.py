"""Locate the data folders that ship with servesim.

Lookup order for ``hardware_profiles/``, ``engine_profiles/``, ``scenarios/`` and ``traces/``:

1. ``$SERVESIM_HOME/<name>`` when the environment variable is set (it must be a folder
   holding at least one of the three; a bad value is an error, never ignored);
2. the repository root next to the package (a source checkout or an editable install);
3. ``simulator/_data/<name>`` inside the installed package (a plain ``pip install .``,
   populated by the build hook in ``setup.py``).
"""
from __future__ import annotations

import os
from pathlib import Path

from simulator.base.input_limits import load_yaml

#: the ``simulator`` package folder (this module lives in ``simulator/base/``)
_PKG = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """Return the folder ``name`` (``hardware_profiles``, ``engine_profiles``, ``scenarios`` or
    ``traces``).

    Raises
    ------
    FileNotFoundError
        If no candidate folder exists.
    ValueError
        If ``$SERVESIM_HOME`` is set but is not a servesim root (:func:`check_home`).
    """
    candidates = []
    home = os.environ.get("SERVESIM_HOME")
    if home:
        check_home(home)
        candidates.append(Path(home) / name)
    candidates.append(_PKG.parent / name)
    candidates.append(_PKG / "_data" / name)
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError(
        f"servesim data folder {name!r} not found (looked in: {', '.join(map(str, candidates))})"
    )


#: the data folders a servesim root holds
DATA_FOLDERS = ("hardware_profiles", "scenarios", "traces")


def check_home(home: str) -> Path:
    """Validate ``$SERVESIM_HOME``: it must be a folder holding at least one of
    :data:`DATA_FOLDERS` (a folder it lacks falls back to the shipped one).

    Raises
    ------
    ValueError
        One line naming the variable, its value and what is wrong (never ignored silently).
    """
    p = Path(home).expanduser()
    if not p.is_dir():
        why = "does not exist" if not p.exists() else "is not a folder"
        raise ValueError(f"SERVESIM_HOME={home!r} {why}; set it to a folder holding "
                                f"{', '.join(DATA_FOLDERS)} (or unset it)")
    if not any((p / d).is_dir() for d in DATA_FOLDERS):
        raise ValueError(f"SERVESIM_HOME={home!r} holds none of "
                                f"{', '.join(DATA_FOLDERS)}; point it at a servesim root "
                                "(or unset it)")
    return p


class UnusablePath(FileNotFoundError):
    """A user path that names something, but nothing servesim can read: a symbolic link loop,
    a link to a missing file, a path it may not look up (one line naming it and why)."""


#: the one-word noun of a file looked up in each data folder (messages: ``trace file 'x' not
#: found``, not the folder's plural)
_FILE_NOUNS = {"traces": "trace", "scenarios": "scenario", "hardware_profiles": "GPU profile",
               "engine_profiles": "engine profile"}


def resolve_path(path: str | os.PathLike, kind: str, base_dir: Path | None = None, *,
                 what: str | None = None, skip_folders: bool = False) -> Path:
    """Resolve a user path: as given (absolute or relative to ``base_dir``/cwd), else in the
    shipped data folder ``kind``.

    Parameters
    ----------
    path : str or path-like
    kind : str
        The shipped data folder (``traces``, ``scenarios``, ...).
    base_dir : Path, optional
        Tried before the working folder.
    what : str, optional
        The file's noun in messages (default: ``trace`` for ``traces``, ``scenario`` for
        ``scenarios``, ...): ``trace file 'x' not found``.
    skip_folders : bool
        Pass over a candidate that is a folder (look on, as if it were not there).

    Raises
    ------
    UnusablePath
        (a ``FileNotFoundError``) If a candidate exists as a name but cannot be followed: a
        symbolic link loop, a link to a missing file, a permission denied
        (:func:`path_problem`); the message names the path and why.
    FileNotFoundError
        If the path is found nowhere; the message lists where it looked.
    """
    p = Path(path).expanduser()
    noun = what or _FILE_NOUNS.get(kind, kind)
    tried = []

    def found(q: Path) -> bool:
        if q.exists():
            return not (skip_folders and q.is_dir())
        why = path_problem(q)
        if why is not None:
            raise UnusablePath(f"{noun} file {str(path)!r}: {why}")
        return False

    if p.is_absolute():
        if found(p):
            return p
        tried.append(p)
    else:
        for base in ([base_dir] if base_dir else []) + [Path.cwd()]:
            q = (base / p)
            if q in tried:  # the base folder is the working folder
                continue
            if found(q):
                return q.resolve()
            tried.append(q)
        try:
            d = data_dir(kind)
            parts = p.parts
            q = d / Path(*parts[1:]) if parts and parts[0] == kind and len(parts) > 1 else d / p
            if q.exists() and not (skip_folders and q.is_dir()):
                return q
            tried.append(q)
        except FileNotFoundError:
            pass
    raise FileNotFoundError(f"{noun} file {str(path)!r} not found (looked in: "
                            + ", ".join(str(t) for t in tried) + ")")


def find_yaml_file(path: str | os.PathLike, kind: str = "scenarios",
                   what: str = "scenario") -> Path:
    """The YAML file a scenario, sweep or plan argument names, as every command looks it up:
    ``path`` as given (absolute, or relative to the working folder), else in the shipped
    folder ``kind``; then, when ``path`` has no ``.yaml`` / ``.yml`` suffix, both again with
    ``.yaml`` appended (``default`` -> ``scenarios/default.yaml``).

    A bare name (no folder part) never resolves to a folder while a file is left to try: a
    folder is no scenario file, and an output folder of the same name (``servesim run
    default -o default`` creates ``./default``) must not change which file the name means,
    whether it exists yet or not. Only when no file matches is that folder returned (for the
    caller to say it is a directory). A path with a folder part (``./default``) means what it
    says.

    Raises
    ------
    FileNotFoundError
        (or :class:`UnusablePath`) As :func:`resolve_path`, for ``path`` as given, naming the
        file ``what file 'path'``.
    """
    p = Path(path)
    text = str(path)
    bare = bool(text) and len(p.parts) == 1 and not any(c in text for c in "/\\")
    names = [text] + ([f"{text}.yaml"] if p.suffix not in (".yaml", ".yml") else [])
    first: FileNotFoundError | None = None
    for name in names:
        try:
            return resolve_path(name, kind, what=what, skip_folders=bare)
        except UnusablePath:
            raise
        except FileNotFoundError as e:
            first = first or e
    if bare and p.is_dir():  # nothing but the folder: the caller says what it is
        return p
    assert first is not None
    if bare:  # a shipped name mistyped: the names it could have meant
        raise FileNotFoundError(f"{first}; {_shipped_names_hint(text, kind)}") from None
    raise first


def _shipped_names_hint(name: str, kind: str) -> str:
    """``did you mean 'x'?`` (the names closest to ``name`` in the folder ``kind`` that
    :func:`data_dir` gives: ``$SERVESIM_HOME``'s or the shipped one), else every name there."""
    import difflib
    try:
        folder = data_dir(kind)
    except FileNotFoundError:
        return f"no {kind} folder to look in"
    names = sorted(f.stem for f in folder.glob("*.yaml"))
    close = difflib.get_close_matches(name.removesuffix(".yaml"), names, n=3)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return f"{folder} holds: " + (", ".join(names) or "no YAML files")


def path_problem(p: Path) -> str | None:
    """Why a path that does not lead to a file system entry still names something: a symbolic
    link loop, a symbolic link to a missing file, a path servesim may not look up (permission
    denied), a file used as a folder; None when ``p`` exists or simply is not there."""
    import errno
    try:
        os.stat(p)
        return None
    except FileNotFoundError:
        try:
            target = os.readlink(p)
        except OSError:
            return None  # no such name (or a missing folder on its way)
        return f"is a symbolic link to a missing file ({target})"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "is a symbolic link loop (too many levels of symbolic links)"
        if e.errno == errno.EACCES:
            return "permission denied (a folder on its path cannot be searched)"
        if e.errno == errno.ENOTDIR:
            return "a part of its path is a file, not a folder"
        return f"cannot be looked up ({e.strerror})"


def not_a_file_reason(p: Path, what: str = "trace file") -> str:
    """Why ``p`` cannot be read as a ``what``: not found, a symbolic link loop or a link to a
    missing file, permission denied, a directory, or a special file (``/dev/null`` is a
    character device, a FIFO a named pipe). One phrase, e.g. ``is a directory, not a trace
    file``."""
    import stat
    why = path_problem(p)
    if why is not None:
        return why
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return f"{what} not found"
    except OSError as e:  # pragma: no cover - path_problem reports these
        return f"cannot access {what} ({e.strerror})"
    an = "an" if what[:1].lower() in "aeiou" else "a"
    if stat.S_ISDIR(mode):
        return f"is a directory, not {an} {what}"
    if stat.S_ISREG(mode):
        return f"permission denied (the {what} is not readable)" if not os.access(
            p, os.R_OK) else f"is a {what}"
    kind = ("a character device" if stat.S_ISCHR(mode) else "a block device"
            if stat.S_ISBLK(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return f"is {kind}, not {an} {what}"


def not_text_reason(e: UnicodeDecodeError) -> str:
    """Why a file read as UTF-8 text failed to decode, in words: ``not a text file (byte 0xff
    at offset 3 is not UTF-8)`` (offsets count bytes from the start of the file, as the
    decoder read it whole); the caller puts the file, the key naming it and what the file
    should hold around it."""
    try:
        bad = f"byte 0x{e.object[e.start]:02x} at offset {e.start}"
    except (IndexError, TypeError):  # pragma: no cover - a decoder error without its bytes
        bad = f"offset {e.start}"
    return f"not a text file ({bad} is not UTF-8)"


def not_yaml_reason(path, e) -> str:
    """``PATH[:LINE]: not valid YAML (PROBLEM)`` for a ``yaml.YAMLError`` raised reading
    ``path``: one line (PyYAML's own text spans several, and a message cut at its first line
    would leave its parenthesis open)."""
    mark = getattr(e, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or " ".join(str(e).split()) or type(e).__name__
    return f"{path}{where}: not valid YAML ({problem})"


def safe_load_yaml(text: str):
    """``yaml.safe_load(text)`` through libyaml's C parser when PyYAML was built with it, with
    the bounds of :mod:`simulator.base.input_limits` (alias expansion, nesting, integer digits).

    The same safe constructor and resolvers as ``yaml.SafeLoader`` (so the same Python values:
    checked on every YAML file that ships with servesim), ~8x faster to parse; PyYAML without
    libyaml falls back to the pure-Python loader.

    Raises
    ------
    simulator.base.input_limits.InputLimitError
        Over a limit (a ``yaml.YAMLError`` whose text is one line).
    yaml.YAMLError
        As ``yaml.safe_load`` does, for text that is not valid YAML.
    """
    return load_yaml(text)
