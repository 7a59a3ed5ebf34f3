"""Which build of the per-event core runs (simulator/base/compiled_core.py): the compiled one
only when it is complete and current, the Python source otherwise, and both give the same
outputs."""
from __future__ import annotations

import filecmp
import importlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.base import compiled_core as cc

REPO = Path(__file__).resolve().parents[2]
MODS = ("simulator.alpha.one", "simulator.beta")
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _package(tmp_path: Path, *, compiled=MODS, manifest: bool = True) -> Path:
    """A fake ``simulator`` folder: a source per module of MODS, an (empty) extension file
    per module of ``compiled``, and the build manifest of the sources."""
    root = tmp_path / "simulator"
    (root / "base").mkdir(parents=True)
    for m in MODS:
        src = cc.source_path(m, root)
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(f"NAME = {m!r}\n")
    if manifest:
        cc.write_manifest(root, MODS)
    for m in compiled:
        src = cc.source_path(m, root)
        src.with_name(src.stem + SUFFIX).write_bytes(b"")
    return root


def test_a_complete_current_build_is_used(tmp_path):
    assert cc.decide(_package(tmp_path), environ={}, modules=MODS) == cc.CoreBuild(True, "")


def test_an_edited_source_makes_the_whole_build_pure(tmp_path):
    root = _package(tmp_path)
    src = cc.source_path(MODS[1], root)
    src.write_text(src.read_text() + "# edited after the build\n")
    got = cc.decide(root, environ={}, modules=MODS)
    assert not got.compiled
    assert "older than its source" in got.reason and "simulator/beta.py" in got.reason


@pytest.mark.parametrize("case, words", [
    ("no_extensions", "no compiled core"),
    ("one_missing", "incomplete (missing simulator.beta)"),
    ("no_manifest", "without a readable build manifest"),
    ("forced", "SERVESIM_PURE_PYTHON=1"),
])
def test_pure_python_and_why(tmp_path, case, words):
    root = _package(tmp_path, compiled={"no_extensions": (), "one_missing": MODS[:1]}.get(
        case, MODS), manifest=case != "no_manifest")
    env = {cc.PURE_ENV: "1"} if case == "forced" else {cc.PURE_ENV: "0"}  # "0": not forced
    got = cc.decide(root, environ=env, modules=MODS)
    assert not got.compiled and words in got.reason
    assert got.describe() == f"core: pure Python ({got.reason})"


def _child(code: str, **env) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, **env}, check=True)
    return out.stdout.strip()


def test_pure_python_forced_loads_every_core_module_from_source():
    code = ("import importlib, simulator.base.compiled_core as cc\n"
            "print(*[importlib.import_module(m).__file__ for m in cc.CORE_MODULES], sep='\\n')")
    files = _child(code, SERVESIM_PURE_PYTHON="1").splitlines()
    assert len(files) == len(cc.CORE_MODULES) and all(f.endswith(".py") for f in files)
    version = subprocess.run([sys.executable, "-m", "simulator.cli", "--version"], cwd=REPO,
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "SERVESIM_PURE_PYTHON": "1"}).stdout
    assert "core: pure Python (SERVESIM_PURE_PYTHON=1)" in version


def test_the_status_says_what_runs():
    """In this process: the reported build is the one imported, module by module."""
    build = cc.status()
    for m in cc.CORE_MODULES:
        assert cc.module_is_compiled(importlib.import_module(m)) == build.compiled, m


@pytest.mark.skipif(not cc.status().compiled, reason="this install has no current compiled core")
def test_compiled_and_pure_python_write_identical_outputs(tmp_path):
    argv = ["run", "scenarios/default.yaml", "-q", "--no-figures", "--table-format", "csv"]
    for name, env in (("compiled", {}), ("pure", {"SERVESIM_PURE_PYTHON": "1"})):
        subprocess.run([sys.executable, "-m", "simulator.cli", *argv, "-o", str(tmp_path / name)],
                       cwd=REPO, check=True, capture_output=True,
                       env={**os.environ, **env})
    for f in ("steps.csv", "requests.csv"):
        assert filecmp.cmp(tmp_path / "compiled" / f, tmp_path / "pure" / f, shallow=False), f


def _backend():
    """``buildtools/servesim_build.py``, the build backend, loaded from its file."""
    spec = importlib.util.spec_from_file_location(
        "servesim_build_under_test", REPO / "buildtools" / "servesim_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("compiler, pure, wants_mypy", [
    (True, "", True), (False, "", False), (True, "1", False), (True, "0", True)])
def test_the_build_asks_for_mypyc_only_when_it_can_compile(monkeypatch, compiler, pure,
                                                          wants_mypy):
    backend = _backend()
    monkeypatch.setattr(backend, "can_compile", lambda: compiler)
    monkeypatch.setenv("SERVESIM_PURE_PYTHON", pure)
    # what both hooks (wheel, editable) add to setuptools' own requirements
    assert backend._extra() == ([backend.MYPY_REQUIREMENT] if wants_mypy else [])


def test_no_compiler_found_means_no_compiled_build(monkeypatch):
    backend = _backend()
    monkeypatch.setattr(backend.shutil, "which", lambda name: None)
    assert backend.can_compile() is False
