"""Generate the traces that servesim ships (deterministic; run from anywhere).

    python traces/generate_default_trace.py [--out-dir DIR]

Writes:

- ``default_conv_1k.csv`` (Vidur processed-trace format: ``arrived_at,num_prefill_tokens,
  num_decode_tokens``): 1,000 synthetic chat-like requests. Gamma arrivals at 5.5 req/s with
  inter-arrival CV 1.1; lognormal prompt lengths (median 1020 tokens, p90 2735) and output
  lengths (median 129, p90 424), clipped to prompt <= 8000 and output <= 1000 tokens. The
  parameters are the *published summary statistics* of the Azure LLM inference trace 2023
  (conversation), Patel et al., "Splitwise", ISCA 2024, as listed in the trace's README; no
  row of the real trace is used. The lognormal sigma is ln(p90 / median) / z_0.9.
- ``tiny_mooncake_like.jsonl`` (Mooncake format): 50 requests whose ``hash_ids`` share a few
  system-prompt prefixes, with some equal timestamps, for tests and examples.

Both use fixed seeds, so re-running gives byte-identical files.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from statistics import NormalDist

HERE = Path(__file__).resolve().parent
try:
    import simulator  # noqa: F401
except ImportError:  # running from a source checkout without an install
    sys.path.insert(0, str(HERE.parent))

import numpy as np

from simulator.workload import WorkloadConfig
from simulator.workload.synthetic import generate_arrivals, sample_lengths

DEFAULT_SEED = 20231116
MOONCAKE_SEED = 2025

# Published Azure conv 2023 statistics (tokens): median and p90.
PROMPT_MEDIAN, PROMPT_P90 = 1020.0, 2735.0
OUTPUT_MEDIAN, OUTPUT_P90 = 129.0, 424.0
Z90 = NormalDist().inv_cdf(0.9)


def lognormal_sigma(median: float, p90: float) -> float:
    """Sigma of ln(tokens) such that a lognormal with this median has this 90th percentile."""
    return math.log(p90 / median) / Z90


def default_conv_config() -> WorkloadConfig:
    """The synthetic workload behind ``default_conv_1k.csv``."""
    return WorkloadConfig.model_validate({
        "synthetic": {
            "arrival": {"process": "gamma", "rate_rps": 5.5, "cv": 1.1},
            "num_requests": 1000,
            "prompt_tokens": {"dist": "lognormal", "median": PROMPT_MEDIAN,
                              "sigma": lognormal_sigma(PROMPT_MEDIAN, PROMPT_P90),
                              "max": 8000},
            "output_tokens": {"dist": "lognormal", "median": OUTPUT_MEDIAN,
                              "sigma": lognormal_sigma(OUTPUT_MEDIAN, OUTPUT_P90),
                              "max": 1000},
        }
    })


def write_default_conv(path: Path) -> None:
    """The file as first generated: the synthetic generator's functions driven by the streams
    ``numpy.random.default_rng([DEFAULT_SEED, k])`` (k = 1 arrivals, 2 prompt, 3 output
    lengths) that servesim's workload loader used when the file was made. The loader's own
    streams have changed since (``simulator.base.rng``); pinning them here keeps the shipped data
    byte-identical and reproducible."""
    syn = default_conv_config().synthetic
    n = syn.num_requests
    arrivals = generate_arrivals(syn.arrival, np.random.default_rng([DEFAULT_SEED, 1]), n, None)
    prompt = sample_lengths(syn.prompt_tokens, n, np.random.default_rng([DEFAULT_SEED, 2]))
    output = sample_lengths(syn.output_tokens, n, np.random.default_rng([DEFAULT_SEED, 3]),
                            default_column="output")
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{t:.6f},{p},{o}" for t, p, o in zip(arrivals.tolist(), prompt.tolist(),
                                                   output.tolist())]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8", newline="\n")


def write_tiny_mooncake(path: Path, n: int = 50) -> None:
    """Mooncake-style JSONL: 3 shared system prompts (2, 4 and 6 blocks of 512 tokens), each
    request's own blocks after it, Poisson arrivals at 2 req/s in integer ms, and every 8th
    request arriving on the same millisecond as the one before it."""
    rng = np.random.default_rng(MOONCAKE_SEED)
    prefixes = [list(range(2)), list(range(2, 6)), list(range(6, 12))]
    next_id = 100
    t_ms = 0
    lines = []
    for i in range(n):
        if i > 0 and i % 8 != 0:
            t_ms += round(float(rng.exponential(500.0)))
        group = int(rng.integers(0, len(prefixes) + 1))  # len(prefixes) = no shared prefix
        shared = prefixes[group] if group < len(prefixes) else []
        own_tokens = int(rng.integers(1, 3 * 512))
        input_length = len(shared) * 512 + own_tokens
        n_blocks = math.ceil(input_length / 512)
        own = list(range(next_id, next_id + n_blocks - len(shared)))
        next_id += len(own)
        output_length = int(min(1000, max(1, round(rng.lognormal(math.log(100), 0.8)))))
        lines.append(json.dumps({"timestamp": t_ms, "input_length": input_length,
                                 "output_length": output_length, "hash_ids": shared + own}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, default=HERE, help="where to write (default: traces/)")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_default_conv(args.out_dir / "default_conv_1k.csv")
    write_tiny_mooncake(args.out_dir / "tiny_mooncake_like.jsonl")
    for name in ("default_conv_1k.csv", "tiny_mooncake_like.jsonl"):
        p = args.out_dir / name
        print(f"wrote {p} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
