"""Shared pieces of the hostile corpus's command-line families (``test_corpus_*``): the
one-line refusal check, a run that must succeed, a small roofline scenario and the texts built
on it, and every option of the parser.

A refusal is exit 2, exactly one line on stderr, ``servesim: error:`` for a command's own
checks or ``servesim CMD: error: argument ...`` for a flag argparse refuses, no
``Traceback``."""
from __future__ import annotations

import argparse
import re

from helpers import roofline_scenario_text

from simulator.cli.main import build_parser, main

LINE = re.compile(r"^servesim(?: [\w-]+)*: error: \S")

SCENARIO = roofline_scenario_text("tiny", 8, "{dist: uniform, low: 16, high: 120}",
                                  "{dist: uniform, low: 2, high: 12}")

SPECULATIVE = ("speculative: {method: ngram, num_speculative_tokens: 2, "
               "acceptance: {model: iid, acceptance_rate: 0.6}}\n")

GC = "arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,2\n"


def _refused(capsys, argv, needles=()) -> str:
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse refuses a flag's value
        rc = e.code
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1, err
    line = lines[0]
    assert LINE.match(line), line
    assert "Traceback" not in line and "internal error" not in line, line
    for n in needles:
        assert n in line, (n, line)
    return line


def _ran(capsys, argv) -> str:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "error" not in err, err
    return out


def _sweep_text(name: str, base: str) -> str:
    return f"name: {name}\nbase: {base}\ngrid:\n  scheduler.max_num_seqs: [4, 8]\n"


def _plan_text(name: str, base: str) -> str:
    return (f"name: {name}\nbase: {base}\ntarget_rate_rps: 5\nslo: {{ttft_s: 2.0}}\n"
            "search_space:\n  scheduler.max_num_seqs: [4, 8]\n"
            "search: {max_requests: 10, max_probes: 2}\n")


def _parser_actions():
    """(subcommand words, action) of every option of every (sub)command of the parser."""
    stack = [([], build_parser())]
    while stack:
        words, p = stack.pop()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend((words + [k], sp) for k, sp in a.choices.items())
            else:
                yield words, a


def _with(text: str) -> str:
    """SCENARIO with its top-level section of ``text`` (and the section's indented lines)
    replaced by ``text``."""
    key = text.split(":", 1)[0]
    kept, inside = [], False
    for ln in SCENARIO.splitlines(keepends=True):
        if not ln.startswith(" "):
            inside = ln.startswith(f"{key}:")
        if not inside:
            kept.append(ln)
    return "".join(kept) + text
