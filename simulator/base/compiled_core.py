"""Which build of the per-event core runs: compiled (mypyc) or pure Python.

The modules of :data:`CORE_MODULES` (the scheduler, KV accounting, token emission, step rows
and pricing, the SimPy loop) are plain, type-annotated Python. When a C compiler is present at
install time, ``setup.py`` also compiles them with mypyc (the same source files; see
``buildtools/``); otherwise only the Python source is installed. Both builds give
byte-identical outputs (CI runs the suite and the output fingerprints on both).

The compiled build is used only when it is current. At build time ``setup.py`` writes a
manifest (:data:`MANIFEST_NAME`, next to this module) with the sha256 of every compiled
module's source. :func:`install` runs when the ``simulator`` package is imported, before any
core module: when ``SERVESIM_PURE_PYTHON`` is set (to anything but ``0`` or empty), when a
compiled module or the manifest is missing, or when any core source no longer matches the
manifest (an editable install whose source was edited after its build, or whose module list
changed since), it installs an import hook that loads every core module (and every module the
last build compiled) from its ``.py`` source instead. All core modules are
compiled together (one mypyc group), so the choice is all or nothing.

``servesim --version`` reports the build in use and why (:func:`status`).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

#: the modules compiled together by mypyc (dotted names; each a ``.py`` file in the package)
CORE_MODULES: tuple[str, ...] = (
    "simulator.scheduling.state",
    "simulator.scheduling.emission",
    "simulator.scheduling.continuous",
    "simulator.scheduling.static",
    "simulator.scheduling.queues",
    "simulator.scheduling.parallel",
    "simulator.kv.block_pool",
    "simulator.kv.manager",
    "simulator.perf.step_cost",
    "simulator.engine.step_rows",
    "simulator.engine.idle",
    "simulator.engine.loop",
)
#: the build manifest written beside this module by ``setup.py`` (sources' sha256 at build)
MANIFEST_NAME = "compiled_core.json"
#: environment variable that forces the pure-Python core
PURE_ENV = "SERVESIM_PURE_PYTHON"

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the ``simulator`` folder


@dataclass(frozen=True)
class CoreBuild:
    """The build of the core in use.

    Attributes
    ----------
    compiled : bool
        True when the mypyc-compiled modules run.
    reason : str
        Why the pure-Python core runs ('' when compiled).
    """

    compiled: bool
    reason: str

    def describe(self) -> str:
        """One line for ``servesim --version``."""
        if self.compiled:
            return "core: compiled (mypyc)"
        return f"core: pure Python ({self.reason})"


def source_path(module: str, package_root: Path = _PACKAGE_ROOT) -> Path:
    """The ``.py`` source of the dotted core ``module`` under ``package_root`` (the
    ``simulator`` folder)."""
    parts = module.split(".")
    return package_root.joinpath(*parts[1:]).with_suffix(".py")


def compiled_path(module: str, package_root: Path = _PACKAGE_ROOT) -> Path | None:
    """The compiled extension of ``module`` beside its source (None when there is none)."""
    src = source_path(module, package_root)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = src.with_name(src.stem + suffix)
        if p.exists():
            return p
    return None


def source_digest(path: Path) -> str:
    """sha256 (hex) of a source file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(package_root: Path, modules: tuple[str, ...] = CORE_MODULES,
                   *, sources_root: Path | None = None) -> Path:
    """Write the build manifest into ``package_root/base`` (``setup.py`` calls this after
    compiling); digests are read from ``sources_root`` (default ``package_root``).
    Returns the manifest's path."""
    src_root = sources_root or package_root
    data = {"python": sys.implementation.cache_tag,
            "modules": {m: source_digest(source_path(m, src_root)) for m in modules}}
    out = package_root / "base" / MANIFEST_NAME
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return out


def _recorded(package_root: Path) -> dict | None:
    """The manifest's ``{module: sha256}`` (None when absent or unreadable)."""
    try:
        rec = json.loads((package_root / "base" / MANIFEST_NAME).read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rec if isinstance(rec, dict) else None


def decide(package_root: Path = _PACKAGE_ROOT, environ=None,
           modules: tuple[str, ...] = CORE_MODULES) -> CoreBuild:
    """Whether the compiled core may run, and if not why (reads files only; imports
    nothing)."""
    env = os.environ if environ is None else environ
    if env.get(PURE_ENV, "") not in ("", "0"):
        return CoreBuild(False, f"{PURE_ENV}={env[PURE_ENV]}")
    have = [m for m in modules if compiled_path(m, package_root) is not None]
    if not have:
        return CoreBuild(False, "this install has no compiled core (no C compiler or mypyc "
                                "at install time)")
    if len(have) != len(modules):
        missing = sorted(set(modules) - set(have))
        return CoreBuild(False, f"compiled core incomplete (missing {missing[0]})")
    recorded = _recorded(package_root)
    if recorded is None:
        manifest = package_root / "base" / MANIFEST_NAME
        return CoreBuild(False, f"compiled core without a readable build manifest ({manifest})")
    if set(recorded) != set(modules):
        return CoreBuild(False, "compiled core built from another module list (reinstall: "
                                "pip install -e .)")
    for m in modules:
        src = source_path(m, package_root)
        if not src.exists():  # an install of the compiled modules only: nothing to check
            continue
        if recorded.get(m) != source_digest(src):
            rel = src.relative_to(package_root.parent)
            return CoreBuild(False, f"compiled core is older than its source: {rel} changed "
                                    "since the build (reinstall: pip install -e .)")
    return CoreBuild(True, "")


class _SourceFinder:
    """A meta-path finder that loads the core modules from their ``.py`` sources (so that a
    compiled extension beside them, stale or unwanted, is never imported)."""

    def __init__(self, package_root: Path, modules: tuple[str, ...]):
        self.package_root = package_root
        self.modules = frozenset(modules)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.modules:
            return None
        src = source_path(fullname, self.package_root)
        loader = importlib.machinery.SourceFileLoader(fullname, str(src))
        return importlib.util.spec_from_file_location(fullname, src, loader=loader)


_STATUS: CoreBuild | None = None


def install() -> CoreBuild:
    """Decide the build once per process and, for the pure-Python core, install the source
    finder (called by ``simulator/__init__.py`` before any core module is imported)."""
    global _STATUS
    if _STATUS is None:
        _STATUS = decide()
        if not _STATUS.compiled:  # every module compiled now or at the last build
            modules = set(CORE_MODULES) | set(_recorded(_PACKAGE_ROOT) or ())
            sys.meta_path.insert(0, _SourceFinder(_PACKAGE_ROOT, tuple(sorted(modules))))
    return _STATUS


def status() -> CoreBuild:
    """The build in use (:func:`install` decides it)."""
    return install()


def module_is_compiled(module) -> bool:
    """Whether an imported ``module`` object is a compiled extension."""
    return not str(getattr(module, "__file__", "") or "").endswith(".py")


def _rebuild(cls, args: tuple, kwargs: dict, state: dict):
    """Unpickle a compiled core object: construct it, then restore every attribute."""
    obj = cls(*args, **kwargs)
    obj.__setstate__(state)
    return obj


def _reduce_compiled(obj):
    args, kwargs = obj._init_args()
    state = obj.__getstate__()  # the compiled attributes (mypyc's)
    state.update(getattr(obj, "__dict__", {}))  # a Python subclass's own attributes
    return _rebuild, (type(obj), args, kwargs, state)


def register_pickling(*classes) -> None:
    """Make the compiled ``classes`` picklable and copyable (a finished run's result travels
    between processes). A compiled class's ``__new__`` runs its ``__init__``, so each class
    gives the arguments that construct an instance (its ``_init_args()``: ``(args, kwargs)``),
    and the attributes are then restored from mypyc's ``__getstate__`` (and, for a Python
    subclass of a compiled class, its ``__dict__``). Classes that are not compiled and do not
    derive from a compiled one (the pure-Python core) keep Python's own pickling: nothing is
    registered."""
    import copyreg

    for cls in classes:
        if hasattr(cls, "__mypyc_attrs__"):
            copyreg.pickle(cls, _reduce_compiled)
