"""Fit a GPU's busy-power constants (:mod:`simulator.perf.power`) to published measurements.

Reads ``fit_points`` from ``hardware_profiles/<gpu>/power.yaml``: rows of ``[model, tensor
parallel size, mean batch size, mean output tokens per request, output tokens/s, mean power of
all the run's GPUs (W)]`` (the ML.ENERGY Leaderboard v3.0 data, see that file), and the
``fit.held_out`` model, whose points are left out of the fit (they check it). Each point's
mean step is rebuilt from its figures: ``batch / output tokens/s`` seconds, ``batch`` decode
tokens, the prompt of each request spread over its output tokens (``batch x prompt /
output`` prefill tokens a step) and ``batch x (prompt + output / 2)`` tokens in the KV cache.
The published data do not give the mean prompt length, so it is fitted too: the prompt
length of the grid ``PROMPT_GRID`` whose fit has the smallest mean error on the *fit* points
(the held-out points play no part in any choice).

Usage: ``python calibration/fit_power.py [gpu]`` (default ``h100-sxm``); prints the
constants and the errors to copy into ``power.yaml``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from simulator.catalog.hardware import get_gpu
from simulator.catalog.models import get_model
from simulator.perf.power import StepWork, fit_power_constants, step_utilisation, step_work

#: mean prompt lengths tried (tokens)
PROMPT_GRID = (0, 128, 256, 512, 768, 1024, 1280, 1536, 1792, 2048, 2560, 3072)


def point_utilisation(row, gpu, prompt_tokens: float) -> dict:
    """The (utilisation, per-GPU power) of one published row at a mean prompt length."""
    model, tp, batch, out_len, tps, power_w = row
    work = StepWork.of(get_model(model), int(tp))
    step_s = batch / tps
    flops, byts = step_work(work, [batch * prompt_tokens / out_len], [batch],
                            [batch / out_len], [batch], [batch * (prompt_tokens + out_len / 2)])
    uc, um = step_utilisation(flops, byts, [step_s], gpu.bf16_flops_per_s,
                              gpu.hbm_bandwidth_bytes_per_s)
    return {"model": model, "batch": batch, "u_compute": float(uc[0]),
            "u_memory": float(um[0]), "power_w": power_w / tp}


def fit(gpu_name: str = "h100-sxm") -> dict:
    """The fit of ``gpu_name``'s ``power.yaml`` points: constants, prompt length, errors,
    and the held-out points' predicted and measured power."""
    gpu = get_gpu(gpu_name)
    raw = yaml.safe_load((Path(gpu.profile_dir) / "power.yaml").read_text())
    limit, held = float(raw["limit_w"]), raw["fit"]["held_out"]
    best = None
    for prompt in PROMPT_GRID:
        pts = [point_utilisation(r, gpu, prompt) for r in raw["fit_points"]]
        train = [p for p in pts if p["model"] != held]
        consts, stats = fit_power_constants(train, limit)
        if best is None or stats["mape"] < best["stats"]["mape"]:
            best = {"prompt_tokens": prompt, "constants": consts, "stats": stats, "points": pts}
    s, c, m = best["constants"]
    best["held_out"] = [(p["batch"], p["power_w"], min(limit, s + c * p["u_compute"]
                                                       + m * p["u_memory"]))
                        for p in best["points"] if p["model"] == held]
    return best


if __name__ == "__main__":  # pragma: no cover - a script
    r = fit(sys.argv[1] if len(sys.argv) > 1 else "h100-sxm")
    s, c, m = r["constants"]
    print(f"prompt_tokens: {r['prompt_tokens']}  static_w: {s:.1f}  compute_w: {c:.1f}  "
          f"memory_w: {m:.1f}  fit: {r['stats']}")
    for b, meas, pred in r["held_out"]:
        print(f"  held out, batch {b:7.2f}: measured {meas:6.1f} W, model {pred:6.1f} W "
              f"({100 * (pred / meas - 1):+.1f}%)")
