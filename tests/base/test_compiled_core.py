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
from helpers import load_file_module

from simulator.base import compiled_core as cc

REPO = Path(__file__).resolve().parents[2]
MODS = ("simulator.alpha.one", "simulator.beta")
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _package(tmp_path: Path, *, compiled=MODS, manifest: bool = True) -> Path:
    """A fake ``simulator`` folder: a source per module of MODS, an extension file per module
    of ``compiled`` (a few bytes), the group's library beside the folder, and the build
    manifest of all of them."""
    root = tmp_path / "simulator"
    (root / "base").mkdir(parents=True)
    for m in MODS:
        src = cc.source_path(m, root)
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(f"NAME = {m!r}\n")
    for m in compiled:
        src = cc.source_path(m, root)
        src.with_name(src.stem + SUFFIX).write_bytes(b"ext:" + m.encode())
    (tmp_path / (cc.GROUP_MODULE + SUFFIX)).write_bytes(b"group library")
    if manifest:
        cc.write_manifest(root, MODS)
    return root


def _decide(root: Path, environ=None, group: Path | None = None) -> cc.CoreBuild:
    """:func:`decide` of the fake package, its group library found beside it (or ``group``)."""
    where = group if group is not None else root.parent / (cc.GROUP_MODULE + SUFFIX)
    return cc.decide(root, environ={} if environ is None else environ, modules=MODS,
                     find_group=lambda: where)


def test_a_complete_current_build_is_used(tmp_path):
    assert _decide(_package(tmp_path)) == cc.CoreBuild(True, "")


def test_an_edited_source_makes_the_whole_build_pure(tmp_path):
    root = _package(tmp_path)
    src = cc.source_path(MODS[1], root)
    src.write_text(src.read_text() + "# edited after the build\n")
    got = _decide(root)
    assert not got.compiled
    assert "older than its source" in got.reason and "simulator/beta.py" in got.reason


@pytest.mark.parametrize("case, words", [
    ("no_extensions", "no compiled core"),
    ("one_missing", "incomplete (missing simulator.beta)"),
    ("no_manifest", "without a readable build manifest"),
    ("forced", "SERVESIM_PURE_PYTHON=1"),
    ("damaged_extension", "compiled extension of simulator.beta is not the one built"),
    ("group_not_importable", "is not on this install's import path"),
    ("damaged_group", "is not the one built"),
])
def test_pure_python_and_why(tmp_path, case, words):
    root = _package(tmp_path, compiled={"no_extensions": (), "one_missing": MODS[:1]}.get(
        case, MODS), manifest=case != "no_manifest")
    group = None
    if case == "damaged_extension":  # truncated after the build
        src = cc.source_path(MODS[1], root)
        src.with_name(src.stem + SUFFIX).write_bytes(b"ext")
    elif case == "group_not_importable":  # e.g. a later install that does not map it
        group = tmp_path / "nowhere" / (cc.GROUP_MODULE + SUFFIX)
    elif case == "damaged_group":
        (tmp_path / (cc.GROUP_MODULE + SUFFIX)).write_bytes(b"grou")
    env = {cc.PURE_ENV: "1"} if case == "forced" else {cc.PURE_ENV: "0"}  # "0": not forced
    got = _decide(root, env, group)
    assert not got.compiled and words in got.reason
    assert got.describe() == f"core: pure Python ({got.reason})"


@pytest.mark.parametrize("value, forced", [
    ("", False), ("0", False), ("false", False), (" Off ", False), ("NO", False),
    ("1", True), ("yes", True), ("true", True), ("pure", True)])
def test_which_values_force_pure_python(value, forced):
    assert cc.pure_forced({cc.PURE_ENV: value}) is forced
    assert cc.pure_forced({}) is False


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
    return load_file_module(REPO / "buildtools" / "servesim_build.py",
                            "servesim_build_under_test")


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


_PICKLE_RUN = """
import pickle, sys
from pathlib import Path
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import load_scenario
sc, base = load_scenario(Path("scenarios/default.yaml"))
sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"max_requests": 60})})
Path(sys.argv[1]).write_bytes(pickle.dumps(run_scenario(sc, base, write=False, figures=False)))
"""
_LOAD_RUN = """
import pickle, sys
from pathlib import Path
res = pickle.loads(Path(sys.argv[1]).read_bytes())
kv = res.sim.replicas[0].kv
print(res.summary["num_completed"], kv.num_gpu_blocks, len(res.requests))
"""


@pytest.mark.skipif(not cc.status().compiled, reason="this install has no current compiled core")
def test_a_result_pickled_by_one_build_loads_in_the_other(tmp_path):
    """A run's result (its replicas' compiled schedulers and KV managers included) travels
    between processes whose builds differ, in both directions, and reads the same."""
    seen = []
    for maker, reader in (({"SERVESIM_PURE_PYTHON": "1"}, {}), ({}, {"SERVESIM_PURE_PYTHON": "1"})):
        blob = tmp_path / f"run{len(seen)}.pickle"
        subprocess.run([sys.executable, "-c", _PICKLE_RUN, str(blob)], cwd=REPO, check=True,
                       capture_output=True, env={**os.environ, **maker})
        out = subprocess.run([sys.executable, "-c", _LOAD_RUN, str(blob)], cwd=REPO, check=True,
                             capture_output=True, text=True, env={**os.environ, **reader})
        seen.append(out.stdout.split())
    assert seen[0] == seen[1] and int(seen[0][0]) == 60
