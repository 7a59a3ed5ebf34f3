"""Build hook: ship the top-level data folders inside the wheel.

``hardware_profiles/``, ``scenarios/`` and ``traces/`` live at the repository root (where users
edit them), and are copied into ``simulator/_data/`` of the build so that a plain, non-editable
``pip install .`` finds them too (see ``simulator/base/resources.py`` for the lookup order).
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_DIRS = ("hardware_profiles", "engine_profiles", "scenarios", "traces")


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "simulator" / "_data"
        for name in DATA_DIRS:
            src = root / name
            if src.is_dir():
                dst = target / name
                if dst.exists():
                    shutil.rmtree(dst)
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
