"""Reader of the generic per-request CSV (SGLang, TensorRT-LLM or any other engine);
format: :mod:`simulator.observe.readers`.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from simulator.observe.readers_common import (
    DEFAULT_BLOCK_SIZE,
    _outcomes,
    _RecErrors,
    _refuse_duplicate_ids,
    _specs,
)
from simulator.observe.readers_vllm import read_timeseries
from simulator.observe.record import RecordedRun, RecordError
from simulator.workload.errors import WorkloadError
from simulator.workload.readers import _Errors, _float_column, _int_column, _read_csv_table

#: Required and optional columns of the generic per-request CSV (``traces/README.md``).
GENERIC_CSV_COLUMNS = {
    "required": ("arrival_s", "prompt_tokens", "output_tokens"),
    "one_of": (("ttft_s", "first_token_s"), ("e2e_s", "last_token_s")),
    "optional": ("request_id", "tpot_s", "first_token_s", "last_token_s", "scheduled_s",
                 "queue_delay_s", "itl_s", "prompt_token_ids"),
}


#: Relative tolerance of :func:`_check_agree` (on the duration, seconds).
AGREE_RTOL = 1e-9


# ------------------------------------------------------------------------ generic CSV
def _check_agree(arrival: np.ndarray, dur: np.ndarray, dname: str, at: np.ndarray,
                 aname: str, lines: np.ndarray, errors: _Errors) -> None:
    """Record the first row whose duration ``dur`` (``ttft_s``, seconds from the arrival)
    and clock time ``at`` (``first_token_s``, seconds on the arrival clock) disagree.

    They agree when ``|dur - (at - arrival)| <= AGREE_RTOL * max(|dur|, |at - arrival|)``
    plus two float spacings of the larger clock value (the rounding of ``at - arrival`` on
    an epoch-based clock). Rows where either is empty are not compared.
    """
    with np.errstate(invalid="ignore"):
        derived = at - arrival
        tol = AGREE_RTOL * np.maximum(np.abs(dur), np.abs(derived)) + 2.0 * np.spacing(
            np.maximum(np.abs(arrival), np.abs(at)))
        bad = np.abs(dur - derived) > tol  # NaN (an empty cell) compares False
    if bad.any():
        i = int(np.argmax(bad))
        errors.add(int(lines[i]), f"{dname} {float(dur[i])!r} s disagrees with {aname} "
                                  f"{float(at[i])!r} s - arrival_s {float(arrival[i])!r} s = "
                                  f"{float(derived[i])!r} s (relative tolerance "
                                  f"{AGREE_RTOL:g}); give one of them, or make them agree")


def _json_list_col(vals: list, lines: np.ndarray, name: str, errors: _Errors, *,
                   integer: bool) -> list | None:
    out = []
    for v, ln in zip(vals, lines.tolist()):
        if v is None or not str(v).strip():
            out.append(None)
            continue
        try:
            x = json.loads(v)
        except (ValueError, RecursionError):  # not JSON, too deep, an integer too long
            x = None
        ok = isinstance(x, list) and all(
            isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e)
            and e >= 0 and (not integer or float(e).is_integer()) for e in x)
        if not ok:
            what = "a JSON list of non-negative integers" if integer else \
                "a JSON list of seconds >= 0"
            errors.add(int(ln), f"{name} {str(v)[:40]!r} is not {what}")
            return None
        out.append(tuple(int(e) for e in x) if integer else tuple(float(e) for e in x))
    return out


def _check_itl(itl: list | None, output: np.ndarray, lines: np.ndarray, errors) -> None:
    """A request's ``itl_s`` holds at most ``output_tokens - 1`` gaps: one between consecutive
    tokens (fewer when a step emits several, as speculation does)."""
    for i, g in enumerate(itl or ()):
        if g is not None and len(g) > int(output[i]) - 1:
            errors.add(int(lines[i]), f"itl_s has {len(g)} gaps but output_tokens "
                                      f"{int(output[i])} has at most {int(output[i]) - 1} "
                                      "(one between consecutive tokens)")
            return


def _csv_columns(header: list[str], rows: list[list[str]], lines: np.ndarray,
                 shown: str) -> dict:
    """The checked columns of a generic CSV, on the arrival clock (seconds): ``arrival``,
    ``prompt``, ``output``, ``first`` and ``last`` token times, ``scheduled`` (NaN when not
    recorded), ``tpot`` and ``itl`` (None when absent), ``prompt_token_ids``.

    Raises
    ------
    RecordError
        A bad value; times out of order (arrival <= scheduled <= first token <= last
        token); a duration and its clock time both given (``ttft_s`` and
        ``first_token_s``, ``e2e_s`` and ``last_token_s``, ``queue_delay_s`` and
        ``scheduled_s``) that disagree; or ``prompt_token_ids`` whose length is not
        ``prompt_tokens``. The message names ``file:line`` and the values.
    """
    errors = _RecErrors(shown)

    def col(name):
        j = header.index(name)
        return [r[j] for r in rows]

    def fcol(name, optional=False, clock=False):
        # clock times (arrival, first/last token, scheduled) may have any origin, even a
        # negative one (traces/README.md); durations must be >= 0
        if name not in header:
            return None
        return _float_column(col(name), lines, name, errors, positive=False, optional=optional,
                             signed=clock)

    arrival = fcol("arrival_s", clock=True)
    prompt = _int_column(col("prompt_tokens"), lines, "prompt_tokens", errors, min_value=1)
    output = _int_column(col("output_tokens"), lines, "output_tokens", errors, min_value=1)
    ttft, e2e = fcol("ttft_s"), fcol("e2e_s")
    # both forms of a time may be given; then they must agree (:func:`_check_agree`)
    first = fcol("first_token_s", clock=True, optional=ttft is not None)
    last = fcol("last_token_s", clock=True, optional=e2e is not None)
    tpot = fcol("tpot_s", optional=True)
    sched = fcol("scheduled_s", optional=True, clock=True)
    qd = fcol("queue_delay_s", optional=True)
    itl = (_json_list_col(col("itl_s"), lines, "itl_s", errors, integer=False)
           if "itl_s" in header else None)
    toks = (_json_list_col(col("prompt_token_ids"), lines, "prompt_token_ids", errors,
                           integer=True) if "prompt_token_ids" in header else None)
    errors.raise_if_any()
    f = arrival + ttft if ttft is not None else first
    last_ = arrival + e2e if e2e is not None else last
    for dur, dname, at, aname in ((ttft, "ttft_s", first, "first_token_s"),
                                  (e2e, "e2e_s", last, "last_token_s"),
                                  (qd, "queue_delay_s", sched, "scheduled_s")):
        if dur is not None and at is not None:
            _check_agree(arrival, dur, dname, at, aname, lines, errors)
    # scheduled_s wins over queue_delay_s (they agree when both are given)
    sched_ = sched if sched is not None else arrival + qd if qd is not None else \
        np.full(len(rows), np.nan)
    # queued (arrival) <= scheduled <= first token <= last token, as the vLLM reader checks
    for later, lname, earlier, ename in ((sched_, "scheduled", arrival, "arrival"),
                                         (f, "first token", sched_, "scheduled"),
                                         (f, "first token", arrival, "arrival"),
                                         (last_, "last token", f, "first token")):
        with np.errstate(invalid="ignore"):
            bad = later < earlier  # NaN (scheduled not recorded) compares False
        if bad.any():
            i = int(np.argmax(bad))
            errors.add(int(lines[i]), f"{lname} {float(later[i])!r} s is before the {ename} "
                                      f"{float(earlier[i])!r} s (arrival_s clock; a negative "
                                      "delay cannot be compared)")
    if toks is not None:
        for i, t in enumerate(toks):
            if t is not None and len(t) != int(prompt[i]):
                errors.add(int(lines[i]), f"prompt_token_ids has {len(t)} ids but prompt_tokens "
                                          f"is {int(prompt[i])}")
                break
    _check_itl(itl, output, lines, errors)
    errors.raise_if_any()
    return {"arrival": arrival, "prompt": prompt, "output": output, "first": f,
            "last": last_, "scheduled": sched_, "tpot": tpot, "itl": itl,
            "prompt_token_ids": toks}


def read_generic_csv(path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE) -> RecordedRun:
    """Read a generic per-request CSV (any engine; format in ``traces/README.md``).

    Parameters
    ----------
    path : str or Path
        CSV with :data:`GENERIC_CSV_COLUMNS`; times in seconds, on one clock.
    block_size : int
        Tokens per prefix-hash block when the file has ``prompt_token_ids``.

    Returns
    -------
    RecordedRun
        Arrival = ``arrival_s`` - min(arrival_s); first token = arrival + ``ttft_s`` (or
        ``first_token_s``); last token = arrival + ``e2e_s`` (or ``last_token_s``); TPOT =
        ``tpot_s`` when given, else (E2E - TTFT) / (output - 1); no settings (they come from
        flags or a scenario).

    Raises
    ------
    RecordError
        A missing column or a bad value; times out of order (arrival <= scheduled <= first
        token <= last token); a duration and the matching clock time both given and
        disagreeing (``ttft_s`` / ``first_token_s``, ``e2e_s`` / ``last_token_s``,
        ``queue_delay_s`` / ``scheduled_s``, relative tolerance :data:`AGREE_RTOL`); a
        ``request_id`` seen twice (an empty one defaults to ``line-N``). Each names
        ``file:line``.
    """
    p = Path(path)
    shown = str(path)
    if not p.is_file():
        raise RecordError(f"{shown}: recorded requests file not found")
    try:
        header, rows, lines = _read_csv_table(p, shown)
    except WorkloadError as e:
        raise RecordError(str(e)) from None
    missing = [c for c in GENERIC_CSV_COLUMNS["required"] if c not in header]
    missing += [" or ".join(g) for g in GENERIC_CSV_COLUMNS["one_of"]
                if not any(c in header for c in g)]
    if missing:
        raise RecordError(f"{shown}: a recorded-run CSV needs column(s) {', '.join(missing)}; "
                          f"the header has {', '.join(header)}")
    if not rows:
        raise RecordError(f"{shown}: no requests in the file")
    c = _csv_columns(header, rows, lines, shown)
    arrival, prompt, output = c["arrival"], c["prompt"], c["output"]
    toks = c["prompt_token_ids"]
    # an empty (or blank) request_id defaults like a missing column: line-N
    j = header.index("request_id") if "request_id" in header else None
    rec_ids = [r[j] if j is not None and r[j].strip() else f"line-{ln}"
               for r, ln in zip(rows, lines.tolist())]
    _refuse_duplicate_ids([str(x) for x in rec_ids], lines, shown)
    outcomes, order = _outcomes([str(x) for x in rec_ids], arrival, c["scheduled"],
                                c["first"], c["last"], prompt, output, itls=c["itl"],
                                tpot=c["tpot"])
    run = RecordedRun(name=p.stem, path=p, format="generic_csv", specs=[], outcomes=outcomes,
                      clock="arrival_s from the first request")
    token_ids = None
    if toks is not None and all(t is not None for t in toks):
        token_ids = [toks[i] for i in order.tolist()]
        run.token_ids_source = f"{p.name} prompt_token_ids"
    run.extra["prompt_token_ids"] = token_ids
    run.specs = _specs(outcomes, token_ids, block_size, lines[order])
    ts_path = p.parent / "timeseries.csv"
    if ts_path.is_file():
        run.notes.append("timeseries.csv t taken as seconds from the first arrival.")
        run.timeseries = read_timeseries(ts_path, notes=run.notes)
    return run
