"""Module hygiene (issue 14 part 4): no function over :data:`MAX_FUNCTION_LINES` lines and no
module over :data:`MAX_MODULE_LINES` lines in ``simulator/`` unless the module's docstring
states why, on a line of its own starting ``size:`` followed by the reason.

A function's length runs from its ``def`` line to its last line (decorators not counted; a
nested function counts inside its parent and is checked on its own too); a module's length is
its number of lines. The source is read with :mod:`ast`, never imported.
"""
from __future__ import annotations

import ast

from helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "simulator"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600


def size_reason(tree: ast.Module) -> str | None:
    """The reason given on a ``size: <reason>`` line of the module docstring, or None."""
    for line in (ast.get_docstring(tree) or "").splitlines():
        head, sep, reason = line.strip().partition(":")
        if sep and head == "size" and reason.strip():
            return reason.strip()
    return None


def oversized(source: str, name: str) -> list[str]:
    """What breaks the size rule in one module's source (empty when it is within the limits or
    its docstring gives a ``size:`` reason)."""
    tree = ast.parse(source)
    if size_reason(tree) is not None:
        return []
    out = []
    num_lines = len(source.splitlines())
    if num_lines > MAX_MODULE_LINES:
        out.append(f"{name}: {num_lines} lines (> {MAX_MODULE_LINES})")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{name}:{node.lineno} {node.name}() {length} lines "
                           f"(> {MAX_FUNCTION_LINES})")
    return out


def _function(body_lines: int) -> str:
    """A function of exactly ``1 + body_lines`` lines."""
    return "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(body_lines))


def test_checker_counts_function_lines():
    """80 lines (def + 79 body lines) pass, 81 fail; a nested function is reported too."""
    assert oversized(_function(79), "m") == []
    assert oversized(_function(80), "m") == ["m:1 f() 81 lines (> 80)"]
    nested = "def outer():\n" + "\n".join("    " + ln for ln in _function(80).splitlines())
    found = oversized(nested + "\n", "m")
    assert [s.split()[1] for s in found] == ["outer()", "f()"]


def test_checker_counts_module_lines_and_honours_a_reason():
    src = "x = 1\n" * 601
    assert oversized(src, "m") == ["m: 601 lines (> 600)"]
    assert oversized("x = 1\n" * 600, "m") == []
    assert oversized('"""Doc.\n\nsize: one table of 601 rows.\n"""\n' + src, "m") == []
    # the word alone, or the reason only mentioned in a sentence, is not a reason
    assert oversized('"""Doc.\n\nsize:\n"""\n' + src, "m") != []
    assert oversized('"""Doc about size: big.\n"""\n' + src, "m") != []


def test_simulator_modules_are_within_size_limits():
    paths = sorted(PACKAGE.rglob("*.py"))
    assert len(paths) > 50  # the package was walked
    bad = [msg for p in paths
           for msg in oversized(p.read_text(encoding="utf-8"),
                                str(p.relative_to(REPO_ROOT)))]
    assert not bad, "split these or state why on a 'size: <reason>' docstring line:\n" + \
        "\n".join(bad)
