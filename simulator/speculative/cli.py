"""``servesim spec``: closed-form speculative-decoding calculator.

Registered by the main CLI through :func:`register`::

    servesim spec --acceptance-rate 0.8 --num-speculative-tokens 5 --draft-cost 0.05
    servesim spec --draft-cost 0.05 --sweep -o reports/spec_sweep.png
"""
from __future__ import annotations

import argparse
import math

from simulator.speculative.calculator import (
    DEFAULT_SWEEP_KS,
    DEFAULT_SWEEP_RATES,
    break_even_acceptance_rate,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
    plot_sweep,
    sweep_table,
)

__all__ = ["register", "run_spec"]

_K_SEARCH_MAX = 16
_NOTE = ("Batch-1 estimate (Leviathan et al. 2023, arXiv:2211.17192, Eq. 1 and Thm 3.8); "
         "run a scenario to see the effect under batching.")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``spec`` subcommand to an argparse ``subparsers`` object.

    The parser's ``func`` default is :func:`run_spec`.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.

    Returns
    -------
    argparse.ArgumentParser
        The new ``spec`` parser.
    """
    p = subparsers.add_parser(
        "spec",
        help="speculative decoding calculator (tokens/step, speedup, break-even)",
        description="Closed-form speculative decoding estimates: expected tokens per step, "
                    "walltime speedup and the break-even acceptance rate. " + _NOTE,
    )
    p.add_argument("--acceptance-rate", "-a", type=float, metavar="A",
                   help="probability a draft token is accepted, in [0, 1]")
    p.add_argument("--num-speculative-tokens", "-k", type=int, metavar="K",
                   help="draft tokens proposed per step (>= 1)")
    p.add_argument("--draft-cost", "-c", type=float, metavar="C", required=True,
                   help="draft step time / target step time (>= 0; ~0 for n-gram drafts)")
    p.add_argument("--sweep", action="store_true",
                   help=f"print speedups for a in {DEFAULT_SWEEP_RATES[0]:.2f}.."
                        f"{DEFAULT_SWEEP_RATES[-1]:.2f} and k in {DEFAULT_SWEEP_KS[0]}.."
                        f"{DEFAULT_SWEEP_KS[-1]}")
    p.add_argument("-o", "--output", metavar="PNG",
                   help="with --sweep: write a plot of speedup vs acceptance rate here")
    p.set_defaults(func=run_spec)
    return p


def _validate(args: argparse.Namespace) -> None:
    a, k, c = args.acceptance_rate, args.num_speculative_tokens, args.draft_cost
    if a is not None and not (0.0 <= a <= 1.0):
        raise ValueError(f"--acceptance-rate must lie in [0, 1], got {a}")
    if k is not None and k < 1:
        raise ValueError(f"--num-speculative-tokens must be >= 1, got {k}")
    if not (math.isfinite(c) and c >= 0.0):
        raise ValueError(f"--draft-cost must be a finite number >= 0, got {c}")
    if not args.sweep and (a is None or k is None):
        raise ValueError("--acceptance-rate and --num-speculative-tokens are required "
                         "unless --sweep is given")
    if (a is None) != (k is None):
        raise ValueError("give --acceptance-rate and --num-speculative-tokens together")
    if args.output and not args.sweep:
        raise ValueError("-o/--output writes the sweep plot; it needs --sweep")


def _fmt_rate(x: float | None) -> str:
    return "none (speculation never pays off)" if x is None else f"{x:.4f}"


def run_spec(args: argparse.Namespace) -> int:
    """Run ``servesim spec`` for parsed arguments.

    Parameters
    ----------
    args : argparse.Namespace
        With ``acceptance_rate``, ``num_speculative_tokens``, ``draft_cost``, ``sweep`` and
        ``output``.

    Returns
    -------
    int
        Exit code 0.

    Raises
    ------
    ValueError
        On an out-of-range or missing value (one-line message).
    """
    from rich.console import Console
    from rich.table import Table

    _validate(args)
    console = Console()
    a, k, c = args.acceptance_rate, args.num_speculative_tokens, args.draft_cost

    if a is not None:
        best = optimal_k(a, c, _K_SEARCH_MAX)
        t = Table(title="Speculative decoding estimate", show_header=True)
        t.add_column("quantity")
        t.add_column("value", justify="right")
        t.add_row("acceptance rate a", f"{a:.4f}")
        t.add_row("draft tokens per step k", str(k))
        t.add_row("draft cost ratio c", f"{c:.4f}")
        t.add_row("expected tokens per step", f"{expected_tokens_per_step(a, k):.4f}")
        t.add_row("expected speedup", f"{expected_speedup(a, k, c):.4f}x")
        t.add_row(f"break-even acceptance rate (k={k})",
                  _fmt_rate(break_even_acceptance_rate(k, c)))
        t.add_row(f"best k in 0..{_K_SEARCH_MAX}",
                  f"{best} ({expected_speedup(a, best, c):.4f}x)" if best
                  else "0 (do not speculate)")
        console.print(t)

    if args.sweep:
        df = sweep_table(DEFAULT_SWEEP_RATES, DEFAULT_SWEEP_KS, c)
        t = Table(title=f"Expected speedup, draft cost ratio c = {c:g}")
        t.add_column("a", justify="right")
        for kk in DEFAULT_SWEEP_KS:
            t.add_column(f"k={kk}", justify="right")
        wide = df.pivot(index="acceptance_rate", columns="num_speculative_tokens",
                        values="speedup")
        for rate, row in wide.iterrows():
            cells = []
            for kk in DEFAULT_SWEEP_KS:
                s = float(row[kk])
                style = "green" if s > 1.0 else "red" if s < 1.0 else ""
                cells.append(f"[{style}]{s:.2f}[/{style}]" if style else f"{s:.2f}")
            t.add_row(f"{rate:.2f}", *cells)
        t.add_section()
        t.add_row("a*", *[
            "-" if (be := break_even_acceptance_rate(kk, c)) is None else f"{be:.3f}"
            for kk in DEFAULT_SWEEP_KS])
        console.print(t)
        console.print("a* = break-even acceptance rate (speedup = 1) for each k.")
        if args.output:
            path = plot_sweep(df, args.output)
            console.print(f"wrote {path}")

    console.print(_NOTE)
    return 0
