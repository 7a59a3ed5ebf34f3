"""Fingerprints of servesim's outputs, to check that a speed change leaves them bit-identical.

Usage::

    python benchmarks/output_hashes.py --json before.json [--azure PATH] [--only NAME ...]
    # ... change the code ...
    python benchmarks/output_hashes.py --json after.json --compare before.json

Runs ``servesim run ... --table-format csv --no-figures`` of this checkout (a fresh child
process each) on the configurations below and records, per configuration, the sha256 of
``steps.csv`` and ``requests.csv`` and of ``summary.json`` without its wall-clock fields
(``sim_wall_s``, ``sim_speedup``; keys sorted). ``--compare`` prints SAME or DIFF per
configuration against an earlier JSON and exits 1 on any difference. Configurations:

``llama8b_h100_hour``
    ``scenarios/azure_conv_llama3_8b_h100.yaml`` on the Azure conv hour (19,366 requests).
``side_by_side_34b``
    CodeLlama-34B, TP 2, A100, 3 replicas, round robin on the same hour (the scenario of
    ``benchmarks/bench_speed.py``).
``default``, ``default_static``, ``default_no_chunked_prefill``, ``default_roofline``
    ``scenarios/default.yaml`` as shipped and with ``scheduler.policy=static``,
    ``scheduler.enable_chunked_prefill=false`` and ``perf.source=roofline``.
``spec_mixed_slices``
    ``scenarios/spec_mixed_slices.yaml`` (speculative decoding).

Without the Azure trace the first two are left out (said on stderr). The build of the core that
ran (``servesim --version``: compiled or pure Python, ``SERVESIM_PURE_PYTHON``) is printed
first; CI fingerprints the compiled build and compares the pure-Python build against it.

Not part of the test suite (about a minute).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_speed  # the 34B scenario and the child environment

ROOT = bench_speed.ROOT
WALL_KEYS = frozenset({"sim_wall_s", "sim_speedup"})


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in WALL_KEYS}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def fingerprint(outdir: Path) -> dict[str, str]:
    """sha256 of the step and request tables and of the summary without wall-clock fields."""
    out = {}
    for name in ("steps.csv", "requests.csv"):
        out[name] = hashlib.sha256((outdir / name).read_bytes()).hexdigest()
    summary = _strip(json.loads((outdir / "summary.json").read_text()))
    out["summary.json"] = hashlib.sha256(
        json.dumps(summary, sort_keys=True).encode()).hexdigest()
    return out


def configurations(tmp: Path, azure: Path) -> dict[str, list[str]]:
    """``servesim run`` arguments per configuration name."""
    bench_speed.AZURE = azure
    default = ["scenarios/default.yaml"]
    return {
        "llama8b_h100_hour": ["scenarios/azure_conv_llama3_8b_h100.yaml", "--trace", str(azure)],
        "side_by_side_34b": [str(bench_speed.scenario_34b(tmp)), "--trace", str(azure)],
        "default": default,
        "default_static": [*default, "--set", "scheduler.policy=static"],
        "default_no_chunked_prefill": [*default, "--set", "scheduler.enable_chunked_prefill=false"],
        "default_roofline": [*default, "--set", "perf.source=roofline"],
        "spec_mixed_slices": ["scenarios/spec_mixed_slices.yaml"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--azure", type=Path, default=bench_speed.AZURE)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--json", type=Path, required=True, help="where to write the fingerprints")
    ap.add_argument("--compare", type=Path, help="an earlier --json to compare against")
    args = ap.parse_args()
    need_azure = {"llama8b_h100_hour", "side_by_side_34b"}
    skip = set()
    if not args.azure.exists():
        if args.only and need_azure & set(args.only):
            print(f"trace not found: {args.azure} (pass --azure PATH)", file=sys.stderr)
            return 2
        skip = need_azure
        print(f"trace not found: {args.azure}: {', '.join(sorted(skip))} left out",
              file=sys.stderr)
    build = subprocess.run([sys.executable, "-m", "simulator.cli", "--version"], cwd=ROOT,
                           env=bench_speed._env(), check=True, capture_output=True, text=True)
    print(build.stdout.strip(), flush=True)  # which build of the core ran
    result = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, argv in configurations(tmp, args.azure).items():
            if (args.only and name not in args.only) or name in skip:
                continue
            outdir = tmp / name
            subprocess.run([sys.executable, "-m", "simulator.cli", "run", *argv, "-o",
                            str(outdir), "-q", "--no-figures", "--table-format", "csv"],
                           cwd=ROOT, env=bench_speed._env(), check=True,
                           stdout=subprocess.DEVNULL)
            result[name] = fingerprint(outdir)
            print(name, " ".join(f"{k}={v[:12]}" for k, v in result[name].items()), flush=True)
    args.json.write_text(json.dumps(result, indent=1, sort_keys=True))
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    same = True
    for name, fp in result.items():
        ok = before.get(name) == fp
        same &= ok
        print(f"{name}: {'SAME' if ok else 'DIFF'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
