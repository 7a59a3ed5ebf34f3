"""Argument parsing shared by every ``servesim`` subcommand: the one-line error parser (whose
help is plain text), the argument types (whole numbers, seeds, output paths, scenario files)
and the console the commands print their tables on."""
from __future__ import annotations

import argparse
import math
import os
import re

from simulator.base.input_limits import clip_text

__all__ = ["PLAIN_TABLE_WIDTH", "OneLineParser", "PlainHelpFormatter", "output_path",
           "plain_text", "scenario_file", "seed_number", "table_console", "whole_number"]

#: a Sphinx role: ``:func:`x` ``, ``:py:class:`~a.b.C` ``, ``:ref:`text <target>` ``
_ROLE = re.compile(r":(?:[A-Za-z][\w-]*:)+`([^`]+)`")
#: an inline literal, double backticks
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
#: the default role / Markdown code: single backticks around text without backticks
_CODE = re.compile(r"`([^`\n]+)`")


def _role_text(m: re.Match) -> str:
    body = m.group(1).strip()
    if body.endswith(">") and "<" in body:   # `text <target>`: the text
        body = body[:body.index("<")].strip()
    if body.startswith("~"):                 # `~a.b.c`: the last component
        body = body[1:].rsplit(".", 1)[-1]
    return body.lstrip("!")


def plain_text(text: str) -> str:
    """``text`` without reStructuredText / Markdown inline markup: Sphinx roles
    (``:data:`X` `` -> ``X``, ``:func:`~a.b.f` `` -> ``f``), inline literals in double
    backticks and single-backtick code become their plain text (issue 26 part 9: help
    strings built from docstrings printed the markup)."""
    text = _ROLE.sub(_role_text, text)
    text = _LITERAL.sub(r"\1", text)
    return _CODE.sub(r"\1", text)


class PlainHelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter with descriptions, epilogs and argument help converted by
    :func:`plain_text` before they are wrapped."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_text(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain_text(super()._expand_help(action))


class OneLineParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors are ONE line on stderr (exit 2):
    ``servesim plan: error: argument --max-requests: invalid int value: '1.5'``, without the
    usage block (``--help`` still prints it), and whose help is plain text
    (:class:`PlainHelpFormatter` unless another formatter is given; whatever formatter, the
    help is passed through :func:`plain_text`). Subparsers inherit the class."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", PlainHelpFormatter)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        """The help text, plain (:func:`plain_text`)."""
        return plain_text(super().format_help())

    def error(self, message: str):
        """Print ``PROG: error: MESSAGE`` (its first line) on stderr and exit 2.

        Raises
        ------
        SystemExit
            Always, with status 2.
        """
        text = " ".join(str(message).split())  # one line, whatever argparse composed
        # a value of thousands of characters (a 5,000-digit number) is shown cut
        text = re.sub(r"\S{81,}", lambda m: clip_text(m.group(), 60), text)
        self.exit(2, f"{self.prog}: error: {text}\n")


def whole_number(text: str) -> int:
    """A count argument: an integer, or a float spelling of one (``1e9``, ``300.0``), as the
    scenario YAML reads numbers (YAML 1.2).

    Parameters
    ----------
    text : str
        The command-line value.

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a number, or not a whole one (``1.5``, ``nan``, ``inf``);
        argparse reports it as one line naming the argument.
    """
    try:
        return int(text)
    except ValueError:
        digits = text.strip().lstrip("+-")
        if digits.isdigit():  # over Python's int conversion limit
            raise argparse.ArgumentTypeError(
                f"invalid int value: {clip_text(repr(text), 40)} (an integer of "
                f"{len(digits):,} digits is too large)") from None
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid int value: {clip_text(repr(text), 60)} (expected a whole number)"
        ) from None
    if not math.isfinite(x) or not x.is_integer():
        raise argparse.ArgumentTypeError(
            f"invalid int value: {clip_text(repr(text), 60)} (expected a whole number, such "
            "as 300 or 1e9)")
    return int(x)


def seed_number(text: str) -> int:
    """A seed argument: a whole number (:func:`whole_number`) >= 0, as a scenario's ``seed``
    and every random stream take (:func:`simulator.base.rng.check_seed`).

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a whole number, or is negative.
    """
    n = whole_number(text)
    if n < 0:
        raise argparse.ArgumentTypeError(
            f"invalid seed value: {clip_text(repr(text), 60)} (a seed is a whole number >= 0)")
    return n


def output_path(text: str) -> str:
    """An output argument (``-o``, ``--to-parquet``): any path but an empty one, which would
    put the outputs in the working folder (``Path("")`` is ``.``).

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is empty or blank.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"empty path {text!r}: give the output's path (or leave the flag out for the "
            "default)")
    return text


def scenario_file(text: str) -> str:
    """A scenario (or sweep / plan) file argument: a path, or a name under ``scenarios/``.

    The loader resolves it (:func:`simulator.base.resources.find_yaml_file`): a bare name (no
    folder part) never means a folder here while a file of that name is left to try, so the
    output folder of ``servesim run default -o default``, created before the scenario is read
    again, does not change which file ``default`` names. An empty argument is refused.

    Parameters
    ----------
    text : str
        The command-line value.

    Returns
    -------
    str
        ``text``.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is empty or blank.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"empty path {text!r}: give a file, or a name under scenarios/")
    return text


#: Columns of the tables a command prints where its output is no terminal (a log, CI, a
#: pipe) and ``$COLUMNS`` is not set: wide enough that no column of a sweep, plan or run
#: table is cut (rich would use 80 and shorten ``gpu=h100-sxm`` to ``gpu=h10…``).
PLAIN_TABLE_WIDTH = 200


def table_console(**kwargs):
    """The ``rich`` console a command prints its tables and lines on (keyword arguments go to
    :class:`rich.console.Console`): on a terminal, the terminal's width; elsewhere
    ``$COLUMNS`` when it is a positive number, else :data:`PLAIN_TABLE_WIDTH` columns."""
    from rich.console import Console

    c = Console(**kwargs)
    if c.is_terminal or "width" in kwargs:
        return c
    cols = os.environ.get("COLUMNS", "").strip()
    width = int(cols) if cols.isdigit() and 0 < int(cols) <= 10_000 else PLAIN_TABLE_WIDTH
    return Console(width=width, **kwargs)
