"""PEP 517 build backend of servesim: setuptools, plus mypyc when it can compile.

It is ``setuptools.build_meta`` with one difference: when this machine can compile C
extensions (a C compiler and the Python headers; see :func:`can_compile`) and
``SERVESIM_PURE_PYTHON`` is not set, the build also asks for mypy (whose mypyc compiles the
per-event core, ``simulator/base/compiled_core.py``'s ``CORE_MODULES``; ``setup.py`` does the
compiling). Without a compiler nothing more is asked and the pure-Python package is built: the
compiled core is an option, never a requirement.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import build_meta as _orig
from setuptools.build_meta import *  # the PEP 517 hooks we do not change

#: the mypy release whose mypyc compiles the core (pinned: a build is reproducible)
MYPY_REQUIREMENT = "mypy==2.4.1"


def _core_rules():
    """``simulator/base/compiled_core.py`` loaded from its file (it imports the standard
    library only): the one definition of the core's modules and of SERVESIM_PURE_PYTHON."""
    path = Path(__file__).resolve().parents[1] / "simulator" / "base" / "compiled_core.py"
    spec = importlib.util.spec_from_file_location("_servesim_compiled_core", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclass looks itself up there)
    spec.loader.exec_module(mod)
    return mod


core = _core_rules()


def pure_forced() -> bool:
    """Whether ``SERVESIM_PURE_PYTHON`` asks for the pure-Python build
    (:func:`simulator.base.compiled_core.pure_forced`)."""
    return core.pure_forced()


def can_compile() -> bool:
    """Whether a C compiler (``$CC`` or the one Python was built with, else ``cc``) and the
    Python headers (``Python.h``) are present."""
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc")
    exe = cc.split()[0] if cc.split() else "cc"
    if shutil.which(exe) is None and shutil.which("cc") is None:
        return False
    include = sysconfig.get_paths().get("include")
    return bool(include) and (Path(include) / "Python.h").exists()


def _extra() -> list[str]:
    return [] if pure_forced() or not can_compile() else [MYPY_REQUIREMENT]


def get_requires_for_build_wheel(config_settings=None):
    return _orig.get_requires_for_build_wheel(config_settings) + _extra()


def get_requires_for_build_editable(config_settings=None):
    return _orig.get_requires_for_build_editable(config_settings) + _extra()
