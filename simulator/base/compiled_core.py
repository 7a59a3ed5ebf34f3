"""Which build of the per-event core runs: compiled (mypyc) or pure Python.

The modules of :data:`CORE_MODULES` (the scheduler, KV accounting, token emission, step rows
and pricing, the SimPy loop) are plain, type-annotated Python. When a C compiler is present at
install time, ``setup.py`` also compiles them with mypyc (the same source files; see
``buildtools/``); otherwise only the Python source is installed. Both builds give
byte-identical outputs (CI runs the suite and the output fingerprints on both).

The compiled build is used only when it is current and whole. At build time ``setup.py``
writes a manifest (:data:`MANIFEST_NAME`, next to this module) with the sha256 of every
compiled module's source and the size of every extension built. :func:`install` runs when the
``simulator`` package is imported, before any core module: when ``SERVESIM_PURE_PYTHON`` is set
(:func:`pure_forced`), when a compiled module or the manifest is missing, when any core source
no longer matches the manifest (an editable install whose source was edited after its build, or
whose module list changed since), when an extension is not the one built, or when the group's
shared library (:data:`GROUP_MODULE`) cannot be imported from this install, it installs an
import hook that loads every core module (and every module the last build compiled) from its
``.py`` source instead. All core modules are compiled together (one mypyc group), so the choice
is all or nothing.

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
    "simulator.kv.run_blocks",
    "simulator.kv.tiers",
    "simulator.scheduling.kv_loads",
    "simulator.perf.tables.grid_point",
    "simulator.perf.step_times",
    "simulator.perf.step_cost",
    "simulator.engine.step_rows",
    "simulator.engine.idle",
    "simulator.engine.loop",
)
#: the build manifest written beside this module by ``setup.py`` (sources' sha256 at build)
MANIFEST_NAME = "compiled_core.json"
#: environment variable that forces the pure-Python core
PURE_ENV = "SERVESIM_PURE_PYTHON"
#: values of :data:`PURE_ENV` that do not force it (case and surrounding blanks ignored)
NOT_FORCED = ("", "0", "false", "no", "off")
#: mypyc's group of the core: one shared library, ``<GROUP_NAME>__mypyc``, beside the package
GROUP_NAME = "servesim_core"
GROUP_MODULE = f"{GROUP_NAME}__mypyc"

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


def _extension(folder: Path, stem: str) -> Path | None:
    """The extension module ``stem`` in ``folder`` (any suffix this interpreter imports; None
    when there is none)."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = folder / (stem + suffix)
        if p.exists():
            return p
    return None


def compiled_path(module: str, package_root: Path = _PACKAGE_ROOT) -> Path | None:
    """The compiled extension of ``module`` beside its source (None when there is none)."""
    src = source_path(module, package_root)
    return _extension(src.parent, src.stem)


def pure_forced(environ=None) -> bool:
    """Whether ``SERVESIM_PURE_PYTHON`` asks for the pure-Python core (any value but those of
    :data:`NOT_FORCED`); the build backend asks the same question at install time."""
    env = os.environ if environ is None else environ
    return str(env.get(PURE_ENV, "")).strip().lower() not in NOT_FORCED


def source_digest(path: Path) -> str:
    """sha256 (hex) of a source file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(package_root: Path, modules: tuple[str, ...] = CORE_MODULES,
                   *, sources_root: Path | None = None) -> Path:
    """Write the build manifest into ``package_root/base`` (``setup.py`` calls this after
    compiling): the sha256 of every compiled source (read from ``sources_root``, default
    ``package_root``) and the size in bytes of every extension built (each module's beside
    it, the group's library beside the package). Returns the manifest's path."""
    src_root = sources_root or package_root
    sizes = {}
    for m in modules:
        ext = compiled_path(m, package_root)
        if ext is not None:
            sizes[m] = ext.stat().st_size
    group = _extension(package_root.parent, GROUP_MODULE)
    data = {"modules": {m: source_digest(source_path(m, src_root)) for m in modules},
            "extension_bytes": sizes,
            "group_bytes": group.stat().st_size if group is not None else None}
    out = package_root / "base" / MANIFEST_NAME
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return out


def _manifest(package_root: Path) -> dict | None:
    """The build manifest (None when absent or unreadable)."""
    try:
        data = json.loads((package_root / "base" / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _recorded(package_root: Path) -> dict | None:
    """The manifest's ``{module: sha256}`` (None when absent or unreadable)."""
    rec = (_manifest(package_root) or {}).get("modules")
    return rec if isinstance(rec, dict) else None


def _find_group() -> Path | None:
    """Where this interpreter would import the group's shared library from (None: nowhere)."""
    try:
        spec = importlib.util.find_spec(GROUP_MODULE)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    return Path(origin) if origin else None


REINSTALL = "reinstall servesim (pip install -e . in a checkout)"


def decide(package_root: Path = _PACKAGE_ROOT, environ=None,
           modules: tuple[str, ...] = CORE_MODULES, find_group=_find_group) -> CoreBuild:
    """Whether the compiled core may run, and if not why (reads files only; imports
    nothing). ``find_group()`` locates the group's shared library as an import would."""
    if pure_forced(environ):
        env = os.environ if environ is None else environ
        return CoreBuild(False, f"{PURE_ENV}={env[PURE_ENV]}")
    exts = {m: compiled_path(m, package_root) for m in modules}
    have = [m for m, ext in exts.items() if ext is not None]
    if not have:
        return CoreBuild(False, "this install has no compiled core (built without a C compiler "
                                f"or mypy, or with {PURE_ENV} set)")
    if len(have) != len(modules):
        missing = sorted(set(modules) - set(have))
        return CoreBuild(False, f"compiled core incomplete (missing {missing[0]}): {REINSTALL}")
    manifest = _manifest(package_root) or {}
    recorded = manifest.get("modules")
    if not isinstance(recorded, dict):
        path = package_root / "base" / MANIFEST_NAME
        return CoreBuild(False, f"compiled core without a readable build manifest ({path})")
    if set(recorded) != set(modules):
        return CoreBuild(False, f"compiled core built from another module list: {REINSTALL}")
    for m in modules:
        src = source_path(m, package_root)
        if not src.exists():  # an install of the compiled modules only: nothing to check
            continue
        if recorded.get(m) != source_digest(src):
            rel = src.relative_to(package_root.parent)
            return CoreBuild(False, f"compiled core is older than its source: {rel} changed "
                                    f"since the build: {REINSTALL}")
    sizes = manifest.get("extension_bytes") or {}
    for m, ext in exts.items():
        if ext is None or sizes.get(m) != ext.stat().st_size:
            return CoreBuild(False, f"compiled extension of {m} is not the one built "
                                    f"(damaged or replaced): {REINSTALL}")
    group = find_group()
    if group is None or not group.exists():
        return CoreBuild(False, f"the compiled core's library ({GROUP_MODULE}) is not on this "
                                f"install's import path: {REINSTALL}")
    if group.stat().st_size != manifest.get("group_bytes"):
        return CoreBuild(False, f"the compiled core's library ({group.name}) is not the one "
                                f"built (damaged or replaced): {REINSTALL}")
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
    """Unpickle a core object: construct it, then restore every attribute."""
    obj = cls(*args, **kwargs)
    for name, value in state.items():
        setattr(obj, name, value)
    return obj


def _state(obj) -> dict:
    """Every attribute of ``obj``: a compiled class's (mypyc's ``__getstate__``) or a Python
    class's slots, then any ``__dict__`` (a Python subclass's own attributes)."""
    if hasattr(type(obj), "__mypyc_attrs__"):
        state = obj.__getstate__()
    else:
        state = {}
        for klass in type(obj).__mro__:
            slots = klass.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name not in state and hasattr(obj, name):
                    state[name] = getattr(obj, name)
    state.update(getattr(obj, "__dict__", {}))
    return state


def _reduce(obj):
    args, kwargs = obj._init_args()
    return _rebuild, (type(obj), args, kwargs, _state(obj))


def register_pickling(*classes) -> None:
    """Make the core's ``classes`` picklable and copyable the same way in both builds (a
    finished run's result travels between processes, whose builds may differ). A compiled
    class's ``__new__`` runs its ``__init__``, so each class gives the arguments that construct
    an instance (its ``_init_args()``: ``(args, kwargs)``); every attribute is then restored.
    A pickle made by either build loads in the other."""
    import copyreg

    for cls in classes:
        copyreg.pickle(cls, _reduce)
