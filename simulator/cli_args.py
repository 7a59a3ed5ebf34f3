"""Argument parsing shared by every ``servesim`` subcommand: the one-line error parser and
the whole-number argument type."""
from __future__ import annotations

import argparse
import math
import re

from .input_limits import clip_text

__all__ = ["OneLineParser", "whole_number"]


class OneLineParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors are ONE line on stderr (exit 2):
    ``servesim plan: error: argument --max-requests: invalid int value: '1.5'``, without the
    usage block (``--help`` still prints it). Subparsers inherit the class."""

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
