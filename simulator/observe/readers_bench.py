"""Reader of ``vllm bench serve --save-result --save-detailed`` JSON files; format:
:mod:`simulator.observe.readers`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simulator.base.input_limits import short_repr
from simulator.observe.readers_common import (
    _SETTING_TYPES,
    DEFAULT_BLOCK_SIZE,
    _kind,
    _outcomes,
    _read_json,
    _specs,
    _type_ok,
)
from simulator.observe.record import RecordedRun, RecordError, Setting
from simulator.scenario.overrides import parse_yaml_value


# ------------------------------------------------------------------------ vllm bench serve
def _bench_list(data: dict, key: str, n: int | None, shown: str, required: bool) -> list | None:
    v = data.get(key)
    if v is None:
        if required:
            raise RecordError(f"{shown}: key {key!r} is missing (save with vllm bench serve "
                              "--save-result --save-detailed)")
        return None
    if not isinstance(v, list):
        raise RecordError(f"{shown}: {key} must be a list, got {type(v).__name__}")
    if n is not None and len(v) != n:
        raise RecordError(f"{shown}: {key} has {len(v)} entries but input_lens has {n}")
    return v


def _num(v: Any, key: str, i: int, shown: str, *, integer: bool = False,
         min_value: float = 0.0) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and integer and not float(v).is_integer():
        ok = False
    if not ok:
        kind = "an integer" if integer else "a finite number"
        raise RecordError(f"{shown}: {key}[{i}] {v!r} is not {kind}")
    if v < min_value:
        raise RecordError(f"{shown}: {key}[{i}] {v!r} must be >= {min_value:g}")
    return float(v)


def _bench_arrivals(n: int, rate: Any, burstiness: Any, seed: int) -> np.ndarray:
    """Send times as ``vllm bench serve`` draws them without timestamps
    (``vllm/benchmarks/serve.py`` ``get_request``): gamma gaps with shape ``burstiness`` and
    scale ``1 / (rate x burstiness)``, cumulated and rescaled so the last equals ``n / rate``;
    all zero for an infinite rate. Drawn with ``numpy.random.default_rng(seed)``: the same
    distribution, not the run's exact draws."""
    r = float("inf") if rate in (None, "inf") else float(rate)
    if not math.isfinite(r):
        return np.zeros(n)
    b = 1.0 if burstiness is None else float(burstiness)
    if not (r > 0 and b > 0):
        raise ValueError("request_rate and burstiness must be > 0")
    if not math.isfinite(b):
        gaps = np.full(n, 1.0 / r)
    else:
        gaps = np.random.default_rng(seed).gamma(shape=b, scale=1.0 / (r * b), size=n)
    t = np.cumsum(gaps)
    if t[-1] > 0:
        t *= (n / r) / t[-1]
    return t


def _bench_rows(data: dict, shown: str) -> tuple[int, tuple[list, ...]]:
    """The number of entries and, for the successful ones (no error, output >= 1), their
    indices, prompt and output lengths, TTFT, E2E (``latencies`` or TTFT + sum of ITLs), ITL
    tuples (None without ``itls``) and send times (empty without ``start_times``).

    Raises
    ------
    RecordError
        A missing key, lists of unequal length, a bad value (``file: ttfts[17] ...``).
    """
    inp = _bench_list(data, "input_lens", None, shown, True)
    n = len(inp)
    outl = _bench_list(data, "output_lens", n, shown, True)
    ttfts = _bench_list(data, "ttfts", n, shown, True)
    # end-to-end latency: ``latencies``, or ``e2els`` (the name some vllm bench serve
    # derivatives save); without either, TTFT + the sum of the ITLs
    lat_key = "latencies" if data.get("latencies") is not None or "e2els" not in data \
        else "e2els"
    lat = _bench_list(data, lat_key, n, shown, False)
    itls = _bench_list(data, "itls", n, shown, lat is None)
    starts = _bench_list(data, "start_times", n, shown, False)
    errs = _bench_list(data, "errors", n, shown, False)
    keep, prompt, output, ttft, e2e, itl_out, st = [], [], [], [], [], [], []
    for i in range(n):
        failed = bool(errs[i]) if errs is not None else False
        if not failed and outl[i] == 0:
            failed = True
        if failed:
            continue
        prompt.append(int(_num(inp[i], "input_lens", i, shown, integer=True, min_value=1)))
        output.append(int(_num(outl[i], "output_lens", i, shown, integer=True, min_value=1)))
        t = _num(ttfts[i], "ttfts", i, shown)
        gaps = None
        if itls is not None:
            g = itls[i]
            if not isinstance(g, list):
                raise RecordError(f"{shown}: itls[{i}] must be a list of seconds")
            gaps = tuple(_num(x, f"itls[{i}]", j, shown) for j, x in enumerate(g))
        e = _num(lat[i], lat_key, i, shown) if lat is not None else t + sum(gaps)
        if e < t:
            raise RecordError(f"{shown}: {lat_key}[{i}] {e!r} is below ttfts[{i}] {t!r}")
        ttft.append(t)
        e2e.append(e)
        itl_out.append(gaps)
        if starts is not None:
            st.append(_num(starts[i], "start_times", i, shown))
        keep.append(i)
    return n, (keep, prompt, output, ttft, e2e, itl_out, st)


def _bench_arrival_times(data: dict, n: int, keep: list[int], starts: list | None, seed: int,
                         shown: str) -> tuple[np.ndarray, str, list[str], list[str]]:
    """Arrival times (seconds) of the kept entries, the clock they are on, and the notes and
    approximations that say how they were obtained: the recorded send times, or (no
    ``start_times``) drawn as ``vllm bench serve`` draws them (:func:`_bench_arrivals`).

    Raises
    ------
    RecordError
        No ``start_times`` and a ``request_rate`` / ``burstiness`` that cannot give arrivals.
    """
    approximations, notes = [], []
    if starts is not None:
        arrival = np.asarray(starts)
        clock = "start_times (client time.perf_counter() at send) from the first request"
        notes.append("Arrival = start_times, when the client sent each request (after its "
                     "max_concurrency semaphore): the server-side arrival process is replayed.")
    else:
        try:
            arrival = _bench_arrivals(n, data.get("request_rate"), data.get("burstiness"),
                                      seed)[keep]
        except (TypeError, ValueError):
            raise RecordError(f"{shown}: no start_times, and request_rate "
                              f"{data.get('request_rate')!r} / burstiness "
                              f"{data.get('burstiness')!r} cannot give arrivals (need numbers "
                              "> 0 or 'inf')") from None
        clock = "drawn send times (the file has no start_times)"
        rate = data.get("request_rate")
        if rate is None or not math.isfinite(float(rate)):
            how = (f"request_rate={rate!r}" + (" (not recorded; vllm bench serve's default is inf)"
                                                if rate is None else "")
                   + ": every request arrives at 0, as vllm bench serve sends them all at once")
        else:
            how = (f"arrivals are drawn from request_rate={rate!r} and burstiness="
                   f"{data.get('burstiness', 1.0)!r} the way vllm bench serve draws them (gamma "
                   f"gaps, rescaled to num_prompts / rate; seed {seed}): same distribution, not "
                   "the same arrival times")
        approximations.append(
            f"The record has no start_times (older vllm bench serve): {how}."
            + (" The client's max_concurrency cap is not modelled."
               if data.get("max_concurrency") else ""))
    notes.append("TTFT and E2E are client-side (streamed HTTP chunks); the simulator measures "
                 "from the request's arrival at the engine: the engine profile's api_server "
                 "terms (HTTP front end) are added to the simulated latencies.")
    return np.asarray(arrival, dtype=float), clock, notes, approximations


def _bench_settings(run: RecordedRun, data: dict, p: Path, shown: str) -> None:
    """The model, the benchmark's own parameters (``run.extra``) and the engine settings given
    with ``--metadata KEY=VALUE`` (top-level strings, parsed as YAML values).

    Raises
    ------
    RecordError
        A ``--metadata`` setting of the wrong type.
    """
    model = data.get("model_id")
    if isinstance(model, str) and model:
        run.settings["model"] = Setting(model, f"{p.name} model_id")
    for k in ("request_rate", "burstiness", "max_concurrency", "num_prompts", "backend",
              "tokenizer_id", "date"):
        if data.get(k) is not None:
            run.extra[k] = data[k]
    # --metadata KEY=VALUE items land at the top level as strings
    for k, want in _SETTING_TYPES.items():
        if k in data and k != "model":
            v = data[k]
            try:
                v = parse_yaml_value(v) if isinstance(v, str) and want is not str else v
            except ValueError as e:  # a value over an input limit (5,000 digits, nesting)
                raise RecordError(f"{shown}: {k}: {getattr(e, 'problem', e)}") from None
            if not _type_ok(v, want):
                raise RecordError(f"{shown}: {k} {short_repr(data[k])} is not {_kind(want)}")
            run.settings[k] = Setting(float(v) if want is float else v,
                                      f"{p.name} {k} (vllm bench serve --metadata)")


def read_bench_json(path: str | Path, *, seed: int = 0) -> RecordedRun:
    """Read a ``vllm bench serve --save-result --save-detailed`` result file.

    Parameters
    ----------
    path : str or Path
        The result JSON.
    seed : int
        Seeds the arrival draw when the file has no ``start_times`` (older vLLM).

    Returns
    -------
    RecordedRun
        One request per successful entry (``errors[i]`` empty and ``output_lens[i]`` >= 1):
        arrival = ``start_times[i]`` - min(start_times); TTFT = ``ttfts[i]``; E2E =
        ``latencies[i]`` (or TTFT + sum of ``itls[i]`` when absent); TPOT = (E2E - TTFT) /
        (output - 1), as ``vllm bench serve`` computes it; ITLs = ``itls[i]``.

    Raises
    ------
    RecordError
        Invalid JSON (``file:line``); a missing key, lists of unequal length, a bad value
        (``file: ttfts[17] ...``); no successful request.
    """
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise RecordError(f"{shown}: recorded benchmark file not found")
    data, _ = _read_json(p, shown)
    if not isinstance(data, dict):
        raise RecordError(f"{shown}:1: a vllm bench serve result must be a JSON object")
    n, rows = _bench_rows(data, shown)
    keep, prompt, output, ttft, e2e, itl_out, st = rows
    if not keep:
        raise RecordError(f"{shown}: no successful request (every entry has an error or no "
                          "output)")
    starts = st if data.get("start_times") is not None else None
    arrival, clock, notes, approximations = _bench_arrival_times(data, n, keep, starts, seed,
                                                                 shown)
    a = arrival
    ttft_a, e2e_a = np.asarray(ttft), np.asarray(e2e)
    has_itl = data.get("itls") is not None
    outcomes, _ = _outcomes([str(k) for k in keep], a, np.full(len(a), np.nan), a + ttft_a,
                                a + e2e_a, prompt, output,
                                itls=itl_out if has_itl else None)
    run = RecordedRun(name=p.stem, path=p, format="vllm_bench_json", specs=[],
                      outcomes=outcomes, clock=clock, notes=notes,
                      approximations=approximations, num_failed=n - len(keep),
                      client_side=True)
    if run.num_failed:
        run.notes.append(f"{run.num_failed} failed request(s) in the record are neither "
                         "replayed nor compared.")
    _bench_settings(run, data, p, shown)
    run.extra["prompt_token_ids"] = None
    run.specs = _specs(outcomes, None, DEFAULT_BLOCK_SIZE)
    return run
