"""``calibration/`` imports no module of its own in a circle, counting the imports made inside
functions (read with :mod:`ast`, never imported: no torch needed).

The circle this pins was ``harness`` -> ``operator_harness`` (the format dispatcher) ->
``harness`` (the shared device helpers, imported inside ``calibrate_operators``): the dispatcher
now lives in ``dispatch`` and the helpers in ``device`` and ``tiny_model``.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest
from helpers import REPO_ROOT

PACKAGE = "calibration"


def package_imports(folder: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the same flat package it imports anywhere in its source
    (``__init__`` for the package itself)."""
    names = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 or node.module == package \
                        or (node.module or "").startswith(package + "."):
                    mod = node.module or ""
                    mod = mod.removeprefix(package).lstrip(".") if node.level == 0 else mod
                    if mod:
                        deps.add(mod.split(".")[0])
                    else:  # from . import x: a module, or a name of __init__
                        deps.update(a.name if a.name in names else "__init__"
                                    for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names
                            if a.name.startswith(package + ".") and a.name.count(".") >= 1)
        graph[path.stem] = {d for d in deps if d in names and d != path.stem}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (its nodes, the first repeated at the end), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


def test_checker_finds_a_function_level_circle(tmp_path):
    (tmp_path / "a.py").write_text("from .b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import g\n    return g\n")
    (tmp_path / "c.py").write_text("from . import a\nimport calibration.b\n")
    graph = package_imports(tmp_path)
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"a", "b"}}
    assert set(find_cycle(graph)) == {"a", "b"}
    (tmp_path / "b.py").write_text("def f():\n    return 1\n")
    assert find_cycle(package_imports(tmp_path)) is None


def test_calibration_has_no_import_cycle():
    graph = package_imports(REPO_ROOT / PACKAGE)
    assert {"harness", "operator_harness", "dispatch", "device"} <= set(graph)
    assert find_cycle(graph) is None, f"import cycle in calibration/: {find_cycle(graph)}"


@pytest.mark.parametrize(("a", "b"), [("harness", "operator_harness"),
                                      ("operator_harness", "harness")])
def test_the_two_harnesses_do_not_import_each_other(a, b):
    assert b not in package_imports(REPO_ROOT / PACKAGE)[a]
