"""Write ``diurnal_servegen_deepseek_r1.csv``: the hourly arrival-rate profile of ServeGen's
``reason/deepseek-r1`` day (Alibaba ServeGen, github.com/alibaba/ServeGen ``data/``, commit
f891d118, Apache-2.0; Xiang et al., arXiv:2505.09999), measured from its published client
rates, not invented.

For each hour ``h`` of the day the requests of every client's 600 s windows in it are summed
(``rate x 600`` per window, the recorded count) and divided by 3600 s: the hourly mean rate
(7.16 to 35.13 req/s, mean 16.01). The profile is each hour's rate over the day's mean
(``relative_rate``, mean 1), at ``time_of_day_s = 3600 h``: used with ``interpolation: step``
it reproduces the hourly means exactly.

Usage: ``python traces/diurnal_profile.py SERVEGEN_FOLDER [OUT.csv]`` (the folder holds the
``chunk-N-trace.csv`` files; e.g. ``../shared/traces/servegen/reason/deepseek-r1``).
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np


def hourly_rates(folder: Path) -> np.ndarray:
    """The day's 24 hourly mean arrival rates (req/s) over every client of ``folder``."""
    counts = np.zeros(24)
    files = sorted(folder.glob("chunk-*-trace.csv"))
    if not files:
        raise SystemExit(f"{folder}: no chunk-N-trace.csv files")
    for f in files:
        with f.open(newline="") as fh:
            for row in csv.reader(fh):
                t, rate = float(row[0]), float(row[1])
                if 0 <= t < 86_400:
                    counts[int(t // 3600)] += rate * 600.0
    return counts / 3600.0


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name(
        "diurnal_servegen_deepseek_r1.csv")
    rates = hourly_rates(folder)
    rel = rates / rates.mean()
    lines = ["time_of_day_s,relative_rate"] + [f"{3600 * h},{r:.6f}" for h, r in enumerate(rel)]
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: hourly rates {rates.min():.2f} to {rates.max():.2f} req/s, mean "
          f"{rates.mean():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
