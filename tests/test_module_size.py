"""Module size budgets (issue 28 part 3): every module of ``simulator/`` and ``calibration/``
stays within :data:`DEFAULT_MODULE_LINES` lines and every function within
:data:`DEFAULT_FUNCTION_LINES` lines, unless its docstring declares larger bounds on one line
of its own::

    size: 700 lines, functions 95 lines: <why this module is one piece>

Either part may be left out (``size: 700 lines: <reason>``, ``size: functions 95 lines:
<reason>``). A declared bound is a budget, not an exemption: the module fails when it passes
it. No marker can go past the hard caps :data:`MAX_MODULE_LINES` / :data:`MAX_FUNCTION_LINES`.
The check fails when

- a module or one of its functions passes its bound (the default, or the one declared);
- a marker names a bound above the hard cap;
- a marker gives no reason, does not follow the form above, or appears twice;
- a marker, or one part of it, is stale: the module (or every function in it) fits the
  default without it.

A function's length runs from its ``def`` line to its last line (decorators not counted; a
nested function counts inside its parent and is checked on its own too); a module's length is
its number of lines. The source is read with :mod:`ast`, never imported.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import pytest
from helpers import REPO_ROOT

#: the packages walked, and the fewest modules each must have (proof that it was walked)
PACKAGES = {"simulator": 50, "calibration": 15}
#: Bounds for a module without a ``size:`` marker (lines).
DEFAULT_MODULE_LINES = 600
DEFAULT_FUNCTION_LINES = 80
#: Bounds no marker can raise (lines).
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120

#: ``size: [N lines][, ][functions M lines]: reason`` (at least one part).
_MARKER = re.compile(
    r"size:\s*(?:(?P<module>\d+) lines)?(?P<comma>,\s*)?(?:functions (?P<function>\d+) lines)?"
    r"\s*:(?P<reason>.*)")


@dataclass(frozen=True)
class SizeMarker:
    """A module's declared bounds (None where the part is left out) and its reason."""

    module_lines: int | None
    function_lines: int | None
    reason: str


def parse_marker(tree: ast.Module, name: str) -> tuple[SizeMarker | None, list[str]]:
    """The ``size:`` marker of a module docstring (None when there is none) and the problems
    with how it is written (bad form, no reason, two markers, a bound above its cap)."""
    lines = [ln.strip() for ln in (ast.get_docstring(tree) or "").splitlines()]
    found = [ln for ln in lines if ln.startswith("size:")]
    if not found:
        return None, []
    if len(found) > 1:
        return None, [f"{name}: {len(found)} 'size:' lines (one marker per module)"]
    m = _MARKER.fullmatch(found[0])
    module, function = (m["module"], m["function"]) if m else (None, None)
    if m is None or (module is None and function is None) \
            or bool(m["comma"]) != (module is not None and function is not None):
        form = "'size: <N> lines, functions <M> lines: <reason>', either part optional"
        return None, [f"{name}: malformed marker {found[0]!r} (write {form})"]
    marker = SizeMarker(None if module is None else int(module),
                        None if function is None else int(function), m["reason"].strip())
    problems = []
    if not marker.reason:
        problems.append(f"{name}: the size marker gives no reason")
    if marker.module_lines is not None and marker.module_lines > MAX_MODULE_LINES:
        problems.append(f"{name}: the marker's {marker.module_lines} lines pass the hard cap "
                        f"of {MAX_MODULE_LINES}")
    if marker.function_lines is not None and marker.function_lines > MAX_FUNCTION_LINES:
        problems.append(f"{name}: the marker's functions {marker.function_lines} lines pass "
                        f"the hard cap of {MAX_FUNCTION_LINES}")
    return marker, problems


def _function_lengths(tree: ast.Module) -> list[tuple[int, str, int]]:
    """``(line, name, length)`` for every function and method, nested ones included."""
    return [(node.lineno, node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def size_problems(source: str, name: str) -> list[str]:
    """What breaks the size rule in one module's source (empty when it is within its bounds
    and any marker it carries is well formed and needed)."""
    tree = ast.parse(source)
    marker, out = parse_marker(tree, name)
    num_lines = len(source.splitlines())
    functions = _function_lengths(tree)
    longest = max((length for _, _, length in functions), default=0)
    module_bound, function_bound = DEFAULT_MODULE_LINES, DEFAULT_FUNCTION_LINES
    if marker is not None:
        if marker.module_lines is not None:
            module_bound = min(marker.module_lines, MAX_MODULE_LINES)
        if marker.function_lines is not None:
            function_bound = min(marker.function_lines, MAX_FUNCTION_LINES)
        if marker.module_lines is not None and num_lines <= DEFAULT_MODULE_LINES:
            out.append(f"{name}: stale marker: {num_lines} lines fit the default "
                       f"{DEFAULT_MODULE_LINES} (drop its '{marker.module_lines} lines')")
        if marker.function_lines is not None and longest <= DEFAULT_FUNCTION_LINES:
            out.append(f"{name}: stale marker: the longest function, {longest} lines, fits "
                       f"the default {DEFAULT_FUNCTION_LINES} (drop its 'functions "
                       f"{marker.function_lines} lines')")
    if num_lines > module_bound:
        out.append(f"{name}: {num_lines} lines (> {module_bound})")
    out.extend(f"{name}:{line} {fname}() {length} lines (> {function_bound})"
               for line, fname, length in functions if length > function_bound)
    return out


def _function(body_lines: int) -> str:
    """A function of exactly ``1 + body_lines`` lines."""
    return "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(body_lines))


def _module(doc: str, num_lines: int, function_lines: int = 2) -> str:
    """A module of exactly ``num_lines`` lines: ``doc`` as its docstring, one function of
    ``function_lines`` lines, then filler assignments."""
    head = f'"""{doc}\n"""\n' + _function(function_lines - 1)
    filler = num_lines - len(head.splitlines())
    assert filler >= 0
    return head + "y = 1\n" * filler


def test_checker_counts_function_lines():
    """80 lines (def + 79 body lines) pass, 81 fail; a nested function is reported too."""
    assert size_problems(_function(79), "m") == []
    assert size_problems(_function(80), "m") == ["m:1 f() 81 lines (> 80)"]
    nested = "def outer():\n" + "\n".join("    " + ln for ln in _function(80).splitlines())
    found = size_problems(nested + "\n", "m")
    assert [s.split()[1] for s in found] == ["outer()", "f()"]


def test_checker_counts_module_lines():
    assert size_problems("x = 1\n" * 601, "m") == ["m: 601 lines (> 600)"]
    assert size_problems("x = 1\n" * 600, "m") == []


def test_a_marker_raises_the_bounds_to_what_it_names():
    marker = "Doc.\n\nsize: 700 lines, functions 95 lines: one table and its one reader."
    assert size_problems(_module(marker, 700, 95), "m") == []
    assert size_problems(_module(marker, 701, 95), "m") == ["m: 701 lines (> 700)"]
    assert size_problems(_module(marker, 700, 96), "m") == ["m:5 f() 96 lines (> 95)"]


def test_either_part_of_a_marker_may_be_left_out_and_then_the_default_holds():
    lines_only = "Doc.\n\nsize: 650 lines: one table."
    assert size_problems(_module(lines_only, 650, 80), "m") == []
    assert size_problems(_module(lines_only, 650, 81), "m") == ["m:5 f() 81 lines (> 80)"]
    functions_only = "Doc.\n\nsize: functions 90 lines: one state machine."
    assert size_problems(_module(functions_only, 600, 90), "m") == []
    assert size_problems(_module(functions_only, 601, 90), "m") == ["m: 601 lines (> 600)"]


def test_no_marker_passes_the_hard_caps():
    over = "Doc.\n\nsize: 900 lines, functions 150 lines: big."
    assert size_problems(_module(over, 850, 130), "m") == [
        "m: the marker's 900 lines pass the hard cap of 800",
        "m: the marker's functions 150 lines pass the hard cap of 120",
        "m: 850 lines (> 800)", "m:5 f() 130 lines (> 120)"]
    # a marker at the caps holds exactly them
    at_caps = "Doc.\n\nsize: 800 lines, functions 120 lines: big."
    assert size_problems(_module(at_caps, 800, 120), "m") == []
    assert size_problems(_module(at_caps, 801, 121), "m") == [
        "m: 801 lines (> 800)", "m:5 f() 121 lines (> 120)"]


def test_a_marker_needs_a_reason_and_its_form():
    def problems(doc: str) -> list[str]:
        return size_problems(_module(doc, 650), "m")
    assert problems("Doc.\n\nsize: 650 lines:") == ["m: the size marker gives no reason"]
    assert problems("Doc.\n\nsize: 650 lines:   ") == ["m: the size marker gives no reason"]
    for bad in ("size: one table of 601 rows.",       # the issue-14 form: a reason, no bound
                "size: 650: one table.",              # no unit
                "size: lines 650: one table.",        # unit first
                "size: 650 lines functions 90 lines: x",   # no comma between the parts
                "size: , functions 90 lines: x",      # a comma with one part
                "size:"):
        found = problems(f"Doc.\n\n{bad}")
        assert found[0].startswith("m: malformed marker"), (bad, found)
        assert found[1:] == ["m: 650 lines (> 600)"], (bad, found)   # the default holds
    two = "Doc.\n\nsize: 650 lines: a.\nsize: 650 lines: b."
    assert problems(two)[0] == "m: 2 'size:' lines (one marker per module)"
    # 'size:' inside a sentence is not a marker: the default bound holds, nothing else is said
    assert problems("Doc about size: 650 lines: big.") == ["m: 650 lines (> 600)"]


def test_a_stale_marker_fails():
    """A marker (or one part of it) whose module fits the defaults without it."""
    def stale_lines(n: int) -> str:
        return f"m: stale marker: {n} lines fit the default 600 (drop its '700 lines')"

    def stale_functions(n: int) -> str:
        return (f"m: stale marker: the longest function, {n} lines, fits the default 80 "
                "(drop its 'functions 95 lines')")

    both = "Doc.\n\nsize: 700 lines, functions 95 lines: was big once."
    assert size_problems(_module(both, 600, 80), "m") == [stale_lines(600), stale_functions(80)]
    # only the stale part is reported
    assert size_problems(_module(both, 650, 80), "m") == [stale_functions(80)]
    assert size_problems(_module(both, 600, 90), "m") == [stale_lines(600)]
    functions_only = "Doc.\n\nsize: functions 95 lines: x."
    assert size_problems(_module(functions_only, 100, 40), "m") == [stale_functions(40)]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_modules_are_within_their_size_bounds(package):
    paths = sorted((REPO_ROOT / package).rglob("*.py"))
    assert len(paths) > PACKAGES[package]  # the package was walked
    bad = [msg for p in paths
           for msg in size_problems(p.read_text(encoding="utf-8"),
                                    str(p.relative_to(REPO_ROOT)))]
    assert not bad, ("split these, or declare tight bounds and the reason on one docstring "
                     "line 'size: <N> lines, functions <M> lines: <reason>':\n"
                     + "\n".join(bad))
