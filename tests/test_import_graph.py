"""The package's import graph: no cycle, no upward import, no hidden or function-level imports
of its own modules.

The graph is read from the source with :mod:`ast` (every ``import`` / ``from ... import`` of a
``simulator`` module, at module level or inside a function), so the test sees the imports a
lazy function-level import would hide at run time. Layers, lowest first (a module may import
its own layer and the layers below, never one above; the longest matching prefix decides):

0. ``base``: the package root (version), ``base/`` (schema base, requests, seeded streams,
   resources, progress, budgets, output folders, input bounds, the one percentile definition)
1. ``catalog``: models (with their specs and configs) and GPUs
2. models of behaviour: ``workload``, ``perf``, ``kv``, ``speculative``, ``topology`` (pure
   maths)
3. ``scenario`` (the scenario schema: config, degrade policies, pools)
4. ``scheduling`` (queues, emission, the continuous, static and speculative schedulers)
5. ``metrics``
6. ``cluster`` (replicas, their set-up, routing)
7. ``engine`` (the SimPy loop, fast-forward step rows, lockstep ranks)
8. ``report``
9. ``runs`` (one scenario, pools behind a gateway)
10. ``experiments``, ``observe``
11. ``planner``
12. ``cli`` (the command line)

Every entry of :data:`LAYERS` is one folder of ``simulator/`` (no per-module entry), so ``ls
simulator/`` shows the layers and a new folder must be given its place here.

Function-level imports of the package's own modules are allowed only in the modules listed
in :data:`FUNCTION_LEVEL_ALLOWED`, each with the part of the project that owns it; the rule
(DESIGN.md: function-level imports only for optional heavy dependencies) holds everywhere
else. ``importlib`` appears only in ``simulator/cli/main.py`` (the subcommand table).
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "simulator"

#: Module-name prefix -> layer (lowest first; see the module docstring).
LAYERS: dict[str, int] = {
    "simulator": 0, "simulator.base": 0,
    "simulator.catalog": 1,
    "simulator.workload": 2, "simulator.perf": 2, "simulator.kv": 2, "simulator.speculative": 2,
    "simulator.topology": 2,
    "simulator.scenario": 3,
    "simulator.scheduling": 4,
    "simulator.metrics": 5,
    "simulator.cluster": 6,
    "simulator.engine": 7,
    "simulator.report": 8,
    "simulator.runs": 9,
    "simulator.experiments": 10, "simulator.observe": 10,
    "simulator.planner": 11,
    "simulator.cli": 12,
}

#: Modules that still import their own package's modules inside functions, and who owns the
#: fix. Allowed until their owners' rework lands; an entry whose module no longer has such an
#: import is stale and fails :func:`test_no_stale_function_level_allowance`.
FUNCTION_LEVEL_ALLOWED: dict[str, str] = {
    "simulator.cli.kv": "hot path (kv/)",
    "simulator.cli.calibrate": "calibration harness (torch imported lazily through it)",
    "simulator.observe.validate": "observe: the matplotlib figures and the report writer, "
                                  "imported only when outputs are written",
    "simulator.perf": "performance model",
    "simulator.perf.measured": "performance model",
    "simulator.perf.tables.flat_profile": "performance model",
}


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = list(p.relative_to(REPO_ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _targets(module: str, is_pkg: bool, node: ast.AST) -> list[str]:
    """The package modules an import statement loads (the module, and any imported
    submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "simulator"]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    if name.split(".")[0] != "simulator":
        return []
    return [name] + [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in MODULES]


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _edges() -> list[tuple[str, str, bool, int]]:
    """(importer, imported, at function level, line) for every import of a package module."""
    edges = []
    for module, (path, is_pkg) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = set()
        for node in tree.body:
            if _is_type_checking(node):
                continue  # annotations only: not an import at run time
            top.add(id(node))
            if isinstance(node, ast.Try):
                top.update(id(n) for n in node.body)
        skip = {id(n) for node in tree.body if _is_type_checking(node) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
                for target in _targets(module, is_pkg, node):
                    if target != module:
                        edges.append((module, target, id(node) not in top, node.lineno))
    return edges


EDGES = _edges()


def _layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def test_every_top_level_module_has_a_layer():
    """A new subpackage or top-level module must be given its place in :data:`LAYERS`."""
    tops = {".".join(m.split(".")[:2]) for m in MODULES if m != "simulator"}
    assert tops <= set(LAYERS), sorted(tops - set(LAYERS))


def test_no_import_cycle():
    graph = defaultdict(set)
    for a, b, _func, _line in EDGES:
        graph[a].add(b)
    # Tarjan's strongly connected components
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    assert not comps, f"import cycles: {comps}"


def test_no_upward_import():
    up = [f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)}) at line {line}"
          for a, b, _f, line in EDGES if _layer(b) > _layer(a)]
    assert not up, "\n".join(up)


def test_function_level_imports_only_where_allowed():
    bad = [f"{a}:{line} imports {b} inside a function" for a, b, func, line in EDGES
           if func and a not in FUNCTION_LEVEL_ALLOWED]
    assert not bad, "\n".join(bad)


def test_no_stale_function_level_allowance():
    """Every allowance is still used: a module that lost its function-level imports loses its
    entry too (the list only shrinks)."""
    used = {a for a, _b, func, _l in EDGES if func}
    assert set(FUNCTION_LEVEL_ALLOWED) <= used, sorted(set(FUNCTION_LEVEL_ALLOWED) - used)


#: modules that may use importlib, and why (no other module imports by name at run time)
IMPORTLIB_ALLOWED = {
    "simulator.cli.main": "the subcommand table imports each command's module on demand",
    "simulator.base.compiled_core": "its import hook loads the core from source (a loader, "
                                    "not an import by name)",
}


def test_importlib_only_in_the_subcommand_table_and_the_core_loader():
    users = [m for m, (p, _pkg) in MODULES.items() if m not in IMPORTLIB_ALLOWED
             and "importlib" in p.read_text(encoding="utf-8")]
    assert not users, users
    assert all("importlib" in MODULES[m][0].read_text(encoding="utf-8")
               for m in IMPORTLIB_ALLOWED)  # no stale allowance


def test_the_graph_was_read():
    """The reader finds known edges of each kind (so an empty graph cannot pass)."""
    pairs = {(a, b) for a, b, _f, _l in EDGES}
    assert ("simulator.runs.scenario", "simulator.engine.loop") in pairs
    assert ("simulator.experiments.spec_sweep", "simulator.experiments.runner") in pairs
    assert ("simulator.report.run", "simulator") in pairs  # from .. import __version__
    assert ("simulator.cli.main", "simulator.runs.scenario") in pairs
    assert any(func for _a, _b, func, _l in EDGES)  # the allowed function-level imports


def test_folders_are_the_layers():
    """``ls simulator/`` is the architecture: every module lives in a layer's folder (only the
    package's ``__init__.py`` at the top), and :data:`LAYERS` names exactly those folders."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside a layer folder: {loose}"
    folders = {f"simulator.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    assert folders == set(LAYERS) - {"simulator"}, sorted(folders ^ (set(LAYERS) - {"simulator"}))
