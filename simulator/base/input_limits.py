"""Bounds on what servesim reads, so that a hostile or broken input fails fast, in one line,
in bounded memory, before any simulation starts.

Every YAML file the tool reads (scenarios, sweep and plan files, GPU specs, engine profiles,
latency-table provenance, ``--set`` / ``--vary`` values) goes through :func:`load_yaml`; every
JSON document (a Hugging Face ``config.json``, a recorded run, ServeGen data) through
:func:`load_json`; every line of a CSV or JSONL trace through :func:`bounded_lines`.

Limits (module constants, read at call time):

- :data:`MAX_YAML_VALUES` values (scalars, lists and mappings, mapping keys included) in one
  YAML document *with its aliases expanded*: a "billion laughs" document of 1 KB expands to
  10^9 values; it is refused after a walk over its few distinct nodes, before any Python
  object is built.
- :data:`MAX_NESTING_DEPTH` levels of nested lists and mappings in YAML and JSON input (a
  scenario is ~5 deep): deeper input is refused before Python's recursion limit is reached
  by the parser, by ``copy.deepcopy`` or by validation.
- :data:`MAX_INT_DIGITS` decimal digits of an integer (Python's own limit on converting text
  to ``int``): a longer one is refused naming its key, not with Python's message.
- :data:`MAX_LINE_CHARS` characters (1 MiB) of one line of a CSV or JSONL trace: a file with
  no newline is refused at ``file:line`` after reading at most that much, never read whole.

Values shown in error messages go through :func:`short_repr` (a bounded ``repr``: a shared
1,000-deep structure shows as ``[[[[...]]]]`` without being printed whole first).
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import IO, Any

import yaml

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_LINE_CHARS",
    "MAX_NESTING_DEPTH",
    "MAX_YAML_VALUES",
    "InputLimitError",
    "bounded_lines",
    "check_yaml_nodes",
    "clip_text",
    "json_line_problem",
    "json_too_deep",
    "load_json",
    "load_yaml",
    "short_repr",
]

#: values one YAML document may hold once its aliases are expanded
MAX_YAML_VALUES = 1_000_000
#: levels of nested lists / mappings in a YAML or JSON input
MAX_NESTING_DEPTH = 100
#: decimal digits of an integer in YAML or JSON input (CPython's default
#: ``sys.get_int_max_str_digits()``)
MAX_INT_DIGITS = 4300
#: characters of one line of a CSV or JSONL trace (1 MiB)
MAX_LINE_CHARS = 1 << 20


class InputLimitError(yaml.YAMLError, ValueError):
    """An input over one of this module's limits. ``str(e)`` is one line: ``line N: key.path:
    problem`` (the parts known); callers put the file name in front.

    A :class:`yaml.YAMLError` (so a YAML caller's ``except yaml.YAMLError`` names its file)
    and a :class:`ValueError` (so the CLI reports it as bad input, exit 2).

    Attributes
    ----------
    problem : str
        What is wrong, with the limit.
    line : int or None
        1-based line in the file, when known.
    key : str or None
        Dotted key path of the offending value, when known.
    """

    def __init__(self, problem: str, line: int | None = None, key: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.line = line
        self.key = key

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        key = f"{self.key}: " if self.key else ""
        return f"{where}{key}{self.problem}"

    def at(self, source: str) -> str:
        """The one-line message for the file ``source``: ``source:LINE: key.path: problem``."""
        where = f":{self.line}" if self.line else ""
        key = f"{self.key}: " if self.key else ""
        return f"{source}{where}: {key}{self.problem}"


# ---------------------------------------------------------------------------- reprs
#: nesting levels :func:`short_repr` descends before writing ``...``
_REPR_LEVELS = 20


def _repr_pieces(v: Any, level: int, limit: int) -> Iterator[str]:
    """``repr(v)`` in pieces, produced on demand (the consumer stops once it has enough)."""
    if isinstance(v, (list, tuple, set, frozenset)):
        left, right = {list: "[]", tuple: "()"}.get(type(v), "{}")
        yield left
        for i, x in enumerate(v):
            yield ", " if i else ""
            if level >= _REPR_LEVELS:
                yield "..."
                break
            yield from _repr_pieces(x, level + 1, limit)
        yield right
    elif isinstance(v, dict):
        yield "{"
        for i, (k, x) in enumerate(v.items()):
            yield ", " if i else ""
            if level >= _REPR_LEVELS:
                yield "..."
                break
            yield from _repr_pieces(k, level + 1, limit)
            yield ": "
            yield from _repr_pieces(x, level + 1, limit)
        yield "}"
    elif isinstance(v, str):
        yield repr(v[: limit + 1])[: -1 if len(v) > limit + 1 else None]
    elif isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 3.33 * limit:
        digits = int(v.bit_length() * 0.30103) + 1
        yield f"<an integer of ~{digits:,} digits>"
    else:
        yield repr(v)


def clip_text(text: str, limit: int = 80) -> str:
    """``text`` cut to at most ``limit`` characters (``...`` at the end when cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to at most ``limit`` characters (``...`` at the end when cut),
    built lazily: a huge, deeply nested or alias-shared value costs what is shown, never its
    full repr (the same text as ``repr`` for the values YAML and JSON produce, up to the
    cut)."""
    out: list[str] = []
    n = 0
    for piece in _repr_pieces(value, 0, limit):
        out.append(piece)
        n += len(piece)
        if n > limit:
            break
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _show_key(parts: list) -> str | None:
    """A dotted key path for messages, its middle elided past 6 parts."""
    if not parts:
        return None
    parts = [str(p) for p in parts]
    if len(parts) > 6:
        parts = parts[:3] + [f"...({len(parts) - 5} levels)..."] + parts[-2:]
    text = ".".join(parts)
    return text if len(text) <= 120 else text[:117] + "..."


# ---------------------------------------------------------------------------- YAML
_INT_TAG = "tag:yaml.org,2002:int"


def _too_many_digits(text: str) -> int:
    """The digit count of an integer scalar's text when over :data:`MAX_INT_DIGITS`, else 0."""
    if len(text) <= MAX_INT_DIGITS:
        return 0
    n = sum(c.isdigit() for c in text)
    return n if n > MAX_INT_DIGITS else 0


def _node_label(key_node: Any) -> str:
    if isinstance(key_node, yaml.ScalarNode):
        v = key_node.value
        return v if len(v) <= 40 else v[:37] + "..."
    return "<key>"


def _path(entry: tuple | None) -> list:
    """The key path of a walk entry ``(parent_entry, label)`` chain, root first."""
    out = []
    while entry is not None:
        entry, label = entry
        if label is not None:
            out.append(label)
    return out[::-1]


def check_yaml_nodes(root: yaml.Node, max_values: int | None = None,
                     max_depth: int | None = None) -> None:
    """Check a composed YAML node graph before it is turned into Python objects.

    One walk over the distinct nodes (an alias is the node it names, so shared sub-trees are
    sized once): the number of values the document holds with its aliases expanded, its
    nesting depth through aliases, recursive aliases, and integers with too many digits.

    Parameters
    ----------
    root : yaml.Node
        The document's root node (from a loader's ``get_single_node``).
    max_values, max_depth : int, optional
        Default :data:`MAX_YAML_VALUES`, :data:`MAX_NESTING_DEPTH`.

    Raises
    ------
    InputLimitError
        The first value over a limit, with its line and key path.
    """
    max_values = MAX_YAML_VALUES if max_values is None else max_values
    max_depth = MAX_NESTING_DEPTH if max_depth is None else max_depth
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_: set[int] = set()
    # (node, path entry, children-done flag); a path entry is (parent entry, label)
    stack: list[tuple[yaml.Node, tuple | None, bool]] = [(root, None, False)]
    while stack:
        node, where, done = stack.pop()
        nid = id(node)
        if done:
            open_.discard(nid)
            kids = _children(node)
            s = 1 + sum(size[id(k)] for _, k in kids)
            h = 1 + max((height[id(k)] for _, k in kids), default=0)
            size[nid], height[nid] = s, h
            if s > max_values:
                raise InputLimitError(
                    f"holds more than {max_values:,} values with its aliases expanded (the "
                    "most servesim reads from one YAML document; an alias bomb?)",
                    node.start_mark.line + 1, _show_key(_path(where)))
            if h > max_depth:
                raise InputLimitError(f"nested deeper than {max_depth} levels",
                                      node.start_mark.line + 1, _show_key(_path(where)))
            continue
        if nid in size:
            continue
        if nid in open_:
            raise InputLimitError("a recursive alias (the value contains itself)",
                                  node.start_mark.line + 1, _show_key(_path(where)))
        if isinstance(node, yaml.ScalarNode):
            digits = _too_many_digits(node.value) if node.tag == _INT_TAG else 0
            if digits:
                raise InputLimitError(
                    f"an integer of {digits:,} digits is too large (at most "
                    f"{MAX_INT_DIGITS:,} digits)", node.start_mark.line + 1,
                    _show_key(_path(where)))
            size[nid], height[nid] = 1, 0
            continue
        open_.add(nid)
        stack.append((node, where, True))
        for label, kid in reversed(_children(node)):
            stack.append((kid, (where, label), False))


def _children(node: yaml.Node) -> list[tuple[Any, yaml.Node]]:
    """(path label, child node) of a collection node; a mapping's keys count as values."""
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    if isinstance(node, yaml.MappingNode):
        out = []
        for k, v in node.value:
            out.append((None, k))
            out.append((_node_label(k), v))
        return out
    return []


class BoundedLoaderMixin:
    """A loader that checks the composed document (:func:`check_yaml_nodes`) before
    constructing it, and (on the pure-Python composer) bounds the nesting while composing,
    before Python's recursion limit. Put it first among a loader's bases."""

    _compose_depth = 0

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        check_yaml_nodes(node)
        return self.construct_document(node)

    def compose_node(self, parent, index):  # pure-Python Composer only (libyaml: its own
        self._compose_depth += 1            # 1,000-level limit, then the walk above)
        try:
            if self._compose_depth > MAX_NESTING_DEPTH:
                mark = self.peek_event().start_mark
                raise InputLimitError(f"nested deeper than {MAX_NESTING_DEPTH} levels",
                                      mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._compose_depth -= 1

    def fetch_flow_collection_start(self, TokenClass):  # pure-Python Scanner only: it scans
        if self.flow_level >= MAX_NESTING_DEPTH:        # a run of "[[[[" ahead of the parser
            raise InputLimitError(f"nested deeper than {MAX_NESTING_DEPTH} levels",
                                  self.get_mark().line + 1)
        super().fetch_flow_collection_start(TokenClass)


class BoundedSafeLoader(BoundedLoaderMixin, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """``yaml.CSafeLoader`` (libyaml; the pure-Python one without it) with the bounds."""


def load_yaml(text: str, loader: type | None = None) -> Any:
    """Parse one YAML document with the module's bounds.

    Parameters
    ----------
    text : str
    loader : type, optional
        A loader class with :class:`BoundedLoaderMixin` first among its bases (default
        :class:`BoundedSafeLoader`: ``yaml.safe_load`` semantics through libyaml).

    Raises
    ------
    InputLimitError
        Over a limit (a :class:`yaml.YAMLError`).
    yaml.YAMLError
        Text that is not YAML.
    """
    try:
        return yaml.load(text, Loader=loader or BoundedSafeLoader)
    except yaml.MarkedYAMLError as e:  # libyaml's own nesting limit: say it as ours
        if "maximum nesting depth" not in str(e.problem):
            raise
        mark = e.problem_mark
        raise InputLimitError(f"nested deeper than {MAX_NESTING_DEPTH} levels",
                              mark.line + 1 if mark is not None else None) from None


# ---------------------------------------------------------------------------- JSON
_JSON_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
#: bytes of text scanned at a time for the nesting depth
_SCAN_BYTES = 1 << 24


def _json_deep_line(text: str, max_depth: int) -> int | None:
    """The 1-based line where ``text`` (JSON) first nests deeper than ``max_depth``, or None.
    Strings are blanked first, so brackets inside them do not count (vectorised: a running
    sum of +1 per ``[``/``{`` and -1 per ``]``/``}``, a chunk at a time)."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    import numpy as np

    data = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8", "surrogatepass"),
                         dtype=np.uint8)
    depth = 0
    for start in range(0, len(data), _SCAN_BYTES):
        seg = data[start:start + _SCAN_BYTES]
        step = ((seg == 91) | (seg == 123)).astype(np.int64) - ((seg == 93) | (seg == 125))
        run = np.cumsum(step) + depth
        over = run > max_depth
        if over.any():
            at = start + int(np.argmax(over))
            return int(np.count_nonzero(data[:at] == 10)) + 1
        depth = int(run[-1]) if len(run) else depth
    return None


def json_too_deep(text: str) -> bool:
    """Whether the JSON ``text`` (one JSONL line, say) nests deeper than
    :data:`MAX_NESTING_DEPTH` levels (two ``str.count`` calls for any line with fewer
    brackets than that)."""
    return _json_deep_line(text, MAX_NESTING_DEPTH) is not None


def _huge_int_key(text: str) -> tuple[int, str | None, int]:
    """(line, key or None, digits) of the first integer over :data:`MAX_INT_DIGITS` digits."""
    digits = r"(\d{" + str(MAX_INT_DIGITS + 1) + r",})"
    m = re.search(r'(?:"((?:[^"\\]|\\.){0,200})"\s*:\s*)?-?' + digits, text)
    if m is None:  # pragma: no cover - only called when json reported one
        return 0, None, MAX_INT_DIGITS + 1
    return text.count("\n", 0, m.start()) + 1, m.group(1), len(m.group(2))


def json_line_problem(text: str, e: BaseException) -> str | None:
    """The one-phrase cause of a JSON decode failure that is a limit, not a syntax error:
    nesting past the parser's recursion (``RecursionError``) or an integer over
    :data:`MAX_INT_DIGITS` digits (``ValueError``); None for anything else."""
    if isinstance(e, RecursionError):
        return f"nested deeper than {MAX_NESTING_DEPTH} levels"
    if isinstance(e, ValueError) and not isinstance(e, json.JSONDecodeError) \
            and "digits" in str(e):
        _line, key, n = _huge_int_key(text)
        return (f"{key + ': ' if key else ''}an integer of {n:,} digits is too large (at most "
                f"{MAX_INT_DIGITS:,} digits)")
    return None


def load_json(text: str, **kwargs) -> Any:
    """``json.loads(text, **kwargs)`` with the module's bounds: nesting deeper than
    :data:`MAX_NESTING_DEPTH` and integers over :data:`MAX_INT_DIGITS` digits are refused
    (checked before parsing / from the parser's error), with their line.

    Raises
    ------
    InputLimitError
        Over a limit (a ``ValueError``).
    json.JSONDecodeError
        Text that is not JSON.
    """
    line = _json_deep_line(text, MAX_NESTING_DEPTH)
    if line is not None:
        raise InputLimitError(f"nested deeper than {MAX_NESTING_DEPTH} levels", line)
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as e:
        why = json_line_problem(text, e)
        if why is None:
            raise
        line, _key, _n = _huge_int_key(text) if isinstance(e, ValueError) else (None, 0, 0)
        raise InputLimitError(why, line or None) from None


# ---------------------------------------------------------------------------- lines
def bounded_lines(f: IO[str], shown: str, limit: int | None = None,
                  error: type[Exception] = InputLimitError) -> Iterator[str]:
    """The lines of the text file ``f`` (as ``for line in f`` yields them), each read with a
    bound: a line longer than ``limit`` characters (default :data:`MAX_LINE_CHARS`, its end of
    line not counted) raises after at most ``limit + 2`` characters were read, so a file
    without newlines is never read whole.

    Parameters
    ----------
    f : text file
        Open for reading (any ``newline`` mode).
    shown : str
        The file as messages name it.
    limit : int, optional
        Characters per line.
    error : exception class
        What to raise (the readers' ``WorkloadError``); called with one message.

    Raises
    ------
    error
        ``FILE:LINE: line longer than N characters ...``.
    """
    limit = MAX_LINE_CHARS if limit is None else limit
    for no, line in enumerate(iter(functools.partial(f.readline, limit + 2), ""), start=1):
        if len(line) > limit and len(line.rstrip("\r\n")) > limit:
            raise error(f"{shown}:{no}: line longer than {limit:,} characters (servesim "
                        f"reads trace lines of at most {limit:,}; is this a trace file with "
                        "one record per line?)")
        yield line
