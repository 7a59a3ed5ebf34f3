"""Start-up (issue 12): ``servesim run`` reaches its first simulated event without loading the
heavy libraries it needs only for outputs (pandas, pyarrow, matplotlib, jinja2, scipy,
markdown-it, rich). Checked in a fresh interpreter: which modules are loaded, never how long
anything takes."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers import REPO_ROOT

HEAVY = ("pandas", "pyarrow", "matplotlib", "jinja2", "scipy", "markdown_it", "rich")

_CHILD = textwrap.dedent("""
    import os, sys
    import simpy

    def first_event(self):
        heavy = [m for m in {heavy!r} if m in sys.modules]
        print("HEAVY", ",".join(heavy), flush=True)
        os._exit(0)

    simpy.Environment.step = first_event
    from simulator.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def test_first_event_loads_no_heavy_library(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(textwrap.dedent("""\
        name: tiny
        model: llama-3.1-8b
        perf: {source: roofline}
        workload:
          synthetic:
            arrival: {process: poisson, rate_rps: 5}
            num_requests: 10
            prompt_tokens: {dist: fixed, value: 100}
            output_tokens: {dist: fixed, value: 20}
        """))
    p = subprocess.run([sys.executable, "-c", _CHILD.format(heavy=HEAVY), "run", str(scenario),
                        "-o", str(tmp_path / "out"), "-q", "--no-figures"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("HEAVY")]
    assert lines, p.stderr[-2000:]
    assert lines[0] == "HEAVY ", lines[0]  # none of them
    # non-vacuity: after the run, the outputs did need them (Parquet tables via pyarrow)
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "run", str(scenario), "-o",
                           str(tmp_path / "out"), "-q", "--no-figures"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "out" / "requests.parquet").is_file()


def test_whole_parser_loads_no_heavy_library():
    """``servesim --help`` builds the parser of every subcommand (each row's module is
    imported: compare, sweep/plan, spec-sweep, calibrate/validate with the table importers):
    none of those modules loads pandas or another heavy library at import, only where a
    command uses it. Non-vacuity: the parser did import them (every subcommand registered)."""
    child = textwrap.dedent(f"""
        import sys
        from simulator.cli.main import SUBCOMMANDS, build_parser
        build_parser()  # raises unless every row added exactly its subcommands
        assert all(row.module in sys.modules for row in SUBCOMMANDS)
        print("HEAVY", ",".join(m for m in {HEAVY!r} if m in sys.modules))
    """)
    p = subprocess.run([sys.executable, "-c", child], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "HEAVY", p.stdout
