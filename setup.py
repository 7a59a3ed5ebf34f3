"""Build hooks: ship the top-level data folders inside the wheel, and compile the per-event
core with mypyc when this machine can.

``hardware_profiles/``, ``scenarios/`` and ``traces/`` live at the repository root (where users
edit them), and are copied into ``simulator/_data/`` of the build so that a plain, non-editable
``pip install .`` finds them too (see ``simulator/base/resources.py`` for the lookup order).

The modules of ``simulator/base/compiled_core.py``'s ``CORE_MODULES`` are compiled by mypyc
(one group, ``servesim_core``) when a C compiler is present, mypyc is importable (the build
backend, ``buildtools/servesim_build.py``, asks for it then) and ``SERVESIM_PURE_PYTHON`` is
not set; the build then writes the manifest of the compiled sources' digests that lets the
package refuse a compiled module older than its source. Otherwise the package is pure Python.
"""
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_DIRS = ("hardware_profiles", "engine_profiles", "scenarios", "traces")
sys.path.insert(0, str(ROOT / "buildtools"))
from servesim_build import can_compile, core, pure_forced


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "simulator" / "_data"
        for name in DATA_DIRS:
            src = ROOT / name
            if src.is_dir():
                dst = target / name
                if dst.exists():
                    shutil.rmtree(dst)
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


class BuildExtWithManifest(build_ext):
    """Builds the compiled core, then records the digests of the sources it was built from
    beside the built modules (in place for an editable install)."""

    def run(self):
        if self.inplace:  # extensions of modules compiled by an earlier build, no longer core
            keep = {core.source_path(m, ROOT / "simulator").stem for m in core.CORE_MODULES}
            for so in (ROOT / "simulator").rglob("*.so"):
                if so.name.split(".")[0] not in keep:
                    so.unlink()
        super().run()
        if not self.extensions:
            return
        pkg = ROOT / "simulator" if self.inplace else Path(self.build_lib) / "simulator"
        pkg.joinpath("base").mkdir(parents=True, exist_ok=True)
        core.write_manifest(pkg, sources_root=ROOT / "simulator")


def core_extensions() -> list:
    """mypyc's extensions of the core, or [] when this build is pure Python."""
    if pure_forced() or not can_compile():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    paths = [str(core.source_path(m, ROOT / "simulator").relative_to(ROOT))
             for m in core.CORE_MODULES]
    flags = ["--ignore-missing-imports", "--follow-imports=silent",
             "--disable-error-code", "annotation-unchecked"]
    return mypycify(flags + paths, opt_level="3", group_name=core.GROUP_NAME)


setup(cmdclass={"build_py": BuildPyWithData, "build_ext": BuildExtWithManifest},
      ext_modules=core_extensions())
