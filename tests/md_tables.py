"""Reading the Markdown the reports write: table rows as cells, whatever the column padding.

Import with ``from md_tables import ...`` (``tests/conftest.py`` puts this folder on the path).
"""
from __future__ import annotations

import re

_SEP = re.compile(r":?-{3,}:?")


def row_cells(line: str) -> list[str]:
    """The stripped cells of one Markdown table row (an escaped ``\\|`` stays in its cell)."""
    body = line.strip()
    body = body.removeprefix("|")
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def is_separator(cells: list[str]) -> bool:
    """Whether a row's cells are the alignment row (``---``, ``:---``, ``---:``)."""
    return bool(cells) and all(_SEP.fullmatch(c) for c in cells)


def tables(text: str) -> list[list[list[str]]]:
    """Every table of a Markdown document: a list of rows (header first), each a list of
    cells; alignment rows are left out."""
    out: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            cells = row_cells(line)
            if current is None:
                current = []
                out.append(current)
            if not is_separator(cells):
                current.append(cells)
        else:
            current = None
    return out


def rows_starting(text: str, first: str) -> list[list[str]]:
    """Every table row (of any table) whose first cell is ``first``."""
    return [r for t in tables(text) for r in t if r and r[0] == first]


def normalize_markdown(text: str) -> list[str]:
    """Lines of a Markdown document with table rows as their stripped cells (padding and
    the exact dashes of alignment rows do not count; alignments do)."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            cells = row_cells(line)
            if is_separator(cells):
                out.append("ALIGN " + " ".join(
                    "center" if c.startswith(":") and c.endswith(":") else
                    "right" if c.endswith(":") else "left" for c in cells))
            else:
                out.append("ROW " + " || ".join(cells))
        else:
            out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out
