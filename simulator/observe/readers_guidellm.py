"""Reader of GuideLLM benchmark reports (``guidellm benchmark ... --output-path
benchmarks.json``; github.com/vllm-project/guidellm).

A report is ``{"benchmarks": [...]}``: one entry per benchmark of the run (a sweep's
synchronous, throughput and constant-rate benchmarks, run one after another), each with its
``config.strategy`` (or ``args.strategy``) and its ``requests`` grouped by status
(``successful``, ``errored``, ``incomplete``). Per request, the timestamps (Unix seconds, one
clock for the whole report):

* GuideLLM >= 0.4 (``GenerativeRequestStats``): ``info.timings.request_start``,
  ``first_token_iteration``, ``last_token_iteration``, ``request_end``; token counts
  ``prompt_tokens`` / ``output_tokens`` (else ``input_metrics`` / ``output_metrics``
  ``total_tokens`` or ``text_tokens``);
* GuideLLM 0.3 (``GenerativeTextResponseStats``): ``start_time``, ``first_token_time``,
  ``last_token_time``, ``end_time``, ``prompt_tokens``, ``output_tokens``.

Arrival = ``request_start`` (when the client sent the request) relative to the report's first;
TTFT = first token - start, TPOT = (last token - first token) / (output - 1) (GuideLLM's
``inter_token_latency``; its ``time_per_output_token`` divides by all output tokens instead),
E2E = last token - start (the glossary's; GuideLLM's ``request_latency`` ends at
``request_end``, when the HTTP response closed). Each benchmark is a stage. Successful requests
are replayed and compared; errored and incomplete ones (cancelled when a benchmark's time ran
out) are counted and named, not replayed. A report whose request lists are samples
(``request_totals`` above the listed count: GuideLLM's ``--output-sampling`` / ``sample_size``)
is refused: the replay needs every request the server saw.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simulator.observe.readers_common import DEFAULT_BLOCK_SIZE, _outcomes, _specs, _type_ok
from simulator.observe.record import RecordedRun, RecordedStage, RecordError, Setting

__all__ = ["is_guidellm_report", "read_guidellm"]

_STATUSES = ("successful", "errored", "incomplete")
#: (field in ``info.timings`` of >= 0.4, field of 0.3)
_TIMES = {"start": ("request_start", "start_time"),
          "first": ("first_token_iteration", "first_token_time"),
          "last": ("last_token_iteration", "last_token_time"),
          "end": ("request_end", "end_time")}


def is_guidellm_report(data: Any) -> bool:
    """Whether a parsed JSON document is a GuideLLM report (a ``benchmarks`` list)."""
    return isinstance(data, dict) and isinstance(data.get("benchmarks"), list)


def _tokens(r: dict, key: str, metrics: str) -> Any:
    v = r.get(key)
    if v is None and isinstance(r.get(metrics), dict):
        m = r[metrics]
        v = m.get("total_tokens", m.get("text_tokens"))
    return v


def _request(r: Any, where: str, shown: str) -> tuple[float, float, float, float, int, int]:
    """(start, first token, last token, end, prompt tokens, output tokens) of one request.

    Raises
    ------
    RecordError
        ``file: benchmarks[k].requests.successful[i].<key> ...``.
    """
    if not isinstance(r, dict):
        raise RecordError(f"{shown}: {where} must be an object")
    timings = ((r.get("info") or {}).get("timings") if isinstance(r.get("info"), dict)
               else None) or {}
    t = {}
    for k, (new, old) in _TIMES.items():
        v = timings.get(new, r.get(old))
        key = f"info.timings.{new}" if timings else old
        if v is None and k == "end":
            v = t.get("last")
        if not _type_ok(v, float):
            what = "is missing" if v is None else f"must be a number, got {v!r}"
            raise RecordError(f"{shown}: {where}.{key} {what}")
        t[k] = float(v)
    if not t["start"] <= t["first"] <= t["last"]:
        raise RecordError(f"{shown}: {where}: timestamps out of order (start {t['start']!r}, "
                          f"first token {t['first']!r}, last token {t['last']!r})")
    counts = []
    for key, metrics in (("prompt_tokens", "input_metrics"), ("output_tokens", "output_metrics")):
        v = _tokens(r, key, metrics)
        if not (_type_ok(v, int) and v >= 1):
            what = "is missing" if v is None else f"must be an integer >= 1, got {v!r}"
            raise RecordError(f"{shown}: {where}.{key} {what}")
        counts.append(int(v))
    return t["start"], t["first"], t["last"], t["end"], counts[0], counts[1]


def _benchmark(b: Any, k: int, shown: str) -> tuple[list, dict[str, int], str, float | None]:
    """A benchmark's successful requests, its count per status, its name and rate.

    Raises
    ------
    RecordError
        A malformed entry, or request lists that are samples of the requests made.
    """
    where = f"benchmarks[{k}]"
    if not isinstance(b, dict) or not isinstance(b.get("requests"), dict):
        raise RecordError(f"{shown}: {where}.requests is missing (a GuideLLM benchmark groups "
                          "its requests by status)")
    reqs = b["requests"]
    lists = {s: reqs.get(s) or [] for s in _STATUSES}
    for s, v in lists.items():
        if not isinstance(v, list):
            raise RecordError(f"{shown}: {where}.requests.{s} must be a list")
    totals = ((b.get("metrics") or {}).get("request_totals") if isinstance(b.get("metrics"), dict)
              else None) or b.get("request_totals") or {}
    for s in _STATUSES:
        made = totals.get(s) if isinstance(totals, dict) else None
        if _type_ok(made, int) and made > len(lists[s]):
            raise RecordError(f"{shown}: {where}.requests.{s} lists {len(lists[s])} of the "
                              f"{made} requests made (a sample): rerun GuideLLM keeping every "
                              "request (no --output-sampling / sample_size) to replay it")
    rows = [_request(r, f"{where}.requests.successful[{i}]", shown)
            for i, r in enumerate(lists["successful"])]
    strat = ((b.get("config") or {}).get("strategy") if isinstance(b.get("config"), dict)
             else None) or ((b.get("args") or {}).get("strategy")
                            if isinstance(b.get("args"), dict) else None) or {}
    kind = strat.get("type_", strat.get("type", "benchmark")) if isinstance(strat, dict) \
        else "benchmark"
    rate = strat.get("rate") if isinstance(strat, dict) else None
    rate = float(rate) if _type_ok(rate, float) else None
    name = f"benchmark {k} ({kind}" + (f" {rate:g} req/s)" if rate is not None else ")")
    return rows, {s: len(v) for s, v in lists.items()}, name, rate


def _find_model(data: dict) -> str | None:
    """The served model named in the report's configuration (best effort: a ``model`` string
    in ``config`` / ``args`` or a benchmark's ``config.backend`` / ``config.requests``)."""
    places = [data.get("config"), data.get("args")]
    for b in data["benchmarks"][:1]:
        cfg = b.get("config") if isinstance(b, dict) else None
        if isinstance(cfg, dict):
            places += [cfg.get("backend"), cfg.get("requests"), cfg]
    for p in places:
        if isinstance(p, dict):
            for key in ("model", "model_name", "processor"):
                if isinstance(p.get(key), str) and p[key]:
                    return p[key]
    return None


def read_guidellm(data: dict, path: Path, shown: str) -> RecordedRun:
    """Build a :class:`RecordedRun` from a parsed GuideLLM report (module docstring).

    Parameters
    ----------
    data : dict
        The parsed report.
    path : Path
        The report file.
    shown : str
        The path as the user gave it (error messages).

    Raises
    ------
    RecordError
        A malformed benchmark or request (``file: benchmarks[k].requests.successful[i].key
        ...``), sampled request lists, no successful request.
    """
    starts, firsts, lasts, prompts, outs, stage, ids = [], [], [], [], [], [], []
    stages: list[RecordedStage] = []
    counts_note, num_failed = [], 0
    for k, b in enumerate(data["benchmarks"]):
        rows, counts, name, rate = _benchmark(b, k, shown)
        for i, (s, f, last, _end, p, o) in enumerate(rows):
            starts.append(s)
            firsts.append(f)
            lasts.append(last)
            prompts.append(p)
            outs.append(o)
            stage.append(k)
            ids.append(f"b{k}-{i}")
        stages.append(RecordedStage(k, name, min((r[0] for r in rows), default=0.0),
                                    max((r[0] for r in rows), default=0.0), len(rows), rate,
                                    source=f"benchmarks[{k}]"))
        num_failed += counts["errored"] + counts["incomplete"]
        if counts["errored"] or counts["incomplete"]:
            counts_note.append(f"{name}: {counts['errored']} errored, {counts['incomplete']} "
                               "incomplete")
    if not starts:
        raise RecordError(f"{shown}: no successful request in any benchmark")
    arr = np.asarray(starts)
    outcomes, order = _outcomes(ids, arr, np.full(arr.size, np.nan), np.asarray(firsts),
                                np.asarray(lasts), prompts, outs)
    outcomes["stage"] = np.asarray(stage, dtype=np.int64)[order]
    t0 = float(arr.min())
    for st in stages:
        st.start_s, st.end_s = st.start_s - t0, st.end_s - t0
    run = RecordedRun(name=path.stem, path=path, format="guidellm_json", specs=[],
                      outcomes=outcomes, client_side=True, stages=stages,
                      clock="request_start (client send time, Unix seconds) from the first "
                            "request of the report")
    model = _find_model(data)
    if model:
        run.settings["model"] = Setting(model, f"{path.name} configuration model")
    run.notes.append("Latencies are GuideLLM's client-side timestamps (HTTP streaming): the "
                     "engine profile's api_server terms are added to the simulated ones; each "
                     "benchmark is compared as one stage.")
    if counts_note:
        run.approximations.append("Errored and incomplete requests are neither replayed nor "
                                  "compared (their load on the server is left out): "
                                  + "; ".join(counts_note) + ".")
    run.num_failed = num_failed
    run.extra["prompt_token_ids"] = None
    run.extra["num_benchmarks"] = len(stages)
    run.specs = _specs(outcomes, None, DEFAULT_BLOCK_SIZE)
    return run
