"""ServeGen client data (Alibaba, 2025) -> request arrivals and lengths.

ServeGen (github.com/alibaba/ServeGen, ``data/``; Xiang et al., arXiv:2505.09999) publishes
no request rows: per *client* (tenant) it gives aggregates from which a workload is generated.
A client ``N`` is two files in one folder:

- ``chunk-N-trace.csv`` (no header), one row per 600 s window:
  ``window_start_s, rate, cv, pattern, shape, scale``. ``rate`` is the client's request rate
  in the window (req/s; ``rate x 600`` is an integer in every published file: the requests
  the window had), ``pattern`` the distribution fitted to its inter-arrival gaps,
  ``Gamma`` (``scipy.stats.gamma(a=shape, scale=scale)``) or ``Weibull``
  (``scipy.stats.weibull_min(c=shape, scale=scale)``), empty (with rate 0) for an idle window.
- ``chunk-N-dataset.json`` (optional), one entry per 6 h window (key: window start in s):
  length distributions as strings holding Python dict literals ``{value: probability}``,
  e.g. ``input_tokens``, ``output_tokens`` (language and reasoning models; ``reason_ratio`` is
  not used), or ``text_tokens``, ``image_count``, ``image_tokens``, ``audio_*``,
  ``video_*`` (multimodal models). A window may hold empty distributions (no data).

How requests are generated (deterministic for a seed)
----------------------------------------------------
For each client and each 600 s window ``[t0, t0 + W)`` with ``rate > 0``:

1. **Count**: ``k = round(rate x W)`` requests, the window's recorded count, so the
   generated workload keeps every client's rate in every window exactly (the fitted gap
   distribution's own mean differs from ``1 / rate`` by up to 2x in the published files, so
   drawing gaps until the window ends would not).
2. **Times**: ``k + 1`` gaps ``g_1..g_{k+1}`` are drawn from the fitted distribution (numpy:
   ``gamma(shape, scale)``, ``scale x weibull(shape)``) and rescaled to fill the window,
   ``t_j = t0 + W x (g_1 + ... + g_j) / (g_1 + ... + g_{k+1})`` for ``j = 1..k``. The spacings
   keep the fitted shape (its CV); for exponential gaps (Gamma with shape 1) this is exactly a
   Poisson process conditioned on ``k`` arrivals (uniform order statistics). ServeGen's own
   generator rescales gaps the same way (``servegen/construct.py``, ``_sample_iats``), drawing
   ``ceil(rate x W)`` gaps and keeping the arrivals before the window's end.
3. **Lengths**: from the client's 6 h dataset window that contains ``t0`` (else its latest
   earlier non-empty one, ServeGen's rule), each value drawn from its ``{value: probability}``
   table; prompt = ``input_tokens``, or for multimodal clients ``text_tokens`` plus one
   ``image_tokens`` draw per image of an ``image_count`` draw (likewise audio and video);
   output = ``output_tokens``. Lengths below 1 token (the tables hold a few zeros) become 1,
   with a warning. A folder without dataset files (``language/m-large``) needs
   ``workload.servegen.prompt_tokens`` / ``output_tokens`` (any :class:`LengthDist`), which,
   when given, replace the dataset's tables for every client.
4. **Tenant**: ``client-N``. Slices and priorities are not in the data.

Randomness: every (client, window) draws from its own stream
``simulator.base.rng.stream(seed, "servegen", N, window_index)``, so a window's requests do not
depend on which other clients or windows are generated (a time range or a client subset gives
the same requests for what it keeps). Only windows overlapping ``[start_s, end_s)`` are
generated; the workload loader then keeps the arrivals inside it. The expected request count
is checked against the memory budget before anything is generated (``language/m-large`` holds
237 million requests over 14 days).
"""
from __future__ import annotations

import ast
import csv
import json
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulator.base.budget import check_workload_budget
from simulator.base.input_limits import MAX_LINE_CHARS, InputLimitError, bounded_lines, load_json
from simulator.base.resources import not_text_reason
from simulator.base.rng import stream
from simulator.base.schema import MAX_TOKENS_REPRESENTABLE
from simulator.workload.columns import TraceColumns
from simulator.workload.errors import ServeGenLengthsMissing, WorkloadError, WorkloadWarning
from simulator.workload.synthetic import sample_lengths

__all__ = ["SERVEGEN_STREAM", "WINDOW_S", "ServeGenClient", "is_servegen_path",
           "load_clients", "read_servegen"]

#: The :mod:`simulator.base.rng` stream of ServeGen generation (sub-streams: client, window).
SERVEGEN_STREAM = "servegen"
#: Length of one ServeGen rate window in seconds (the step of ``window_start_s`` in every
#: published ``chunk-N-trace.csv``; traces/README.md of the shared data).
WINDOW_S = 600
PATTERNS = ("Gamma", "Weibull")
_TRACE_RE = re.compile(r"^chunk-(\d+)-trace\.csv$")
_MM_PARTS = (("image_count", "image_tokens"), ("audio_count", "audio_tokens"),
             ("video_count", "video_tokens"))
#: Tolerance on the sum of a length table's probabilities (the published tables sum to 1
#: within 2e-13; ServeGen's own loader checks 1e-6, ``servegen/clientpool.py``).
PDF_SUM_TOLERANCE = 1e-6
#: a length table's usual form, ``{number: number, ...}``: read by :func:`_fast_pdf` (a
#: number literal here means what Python's means: the same dict as ``ast.literal_eval``)
_NUM = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_PAIR = rf"({_NUM})[ ]*:[ ]*({_NUM})"
_PDF_RE = re.compile(rf"\{{(?:[ ]*{_PAIR}[ ]*(?:,[ ]*{_PAIR}[ ]*)*,?)?[ ]*\}}")
_PDF_PAIR_RE = re.compile(_PAIR)


@dataclass
class ServeGenClient:
    """One ServeGen client's windows.

    Attributes
    ----------
    client_id : int
        ``N`` of ``chunk-N-*``.
    trace_path : Path
    window_start_s : numpy.ndarray of int64
        Start of each rate window (s).
    rate_rps, shape, scale : numpy.ndarray of float64
        Rate and the fitted gap distribution's parameters (NaN for idle windows).
    pattern : list of str
        ``Gamma``, ``Weibull`` or ``""``.
    lines : numpy.ndarray of int64
        1-based line of each window in ``trace_path``.
    dataset : dict of int to dict
        6 h window start -> ``{field: (values, cdf)}``; only windows with every table
        non-empty.
    dataset_path : Path or None
    """

    client_id: int
    trace_path: Path
    window_start_s: np.ndarray
    rate_rps: np.ndarray
    pattern: list[str]
    shape: np.ndarray
    scale: np.ndarray
    lines: np.ndarray
    dataset: dict = field(default_factory=dict)
    dataset_path: Path | None = None


def is_servegen_path(path: Path) -> bool:
    """Whether ``path`` is a ServeGen folder (holding ``chunk-N-trace.csv`` files) or one
    client's ``chunk-N-trace.csv`` whose first line has ServeGen's six fields."""
    p = Path(path)
    if p.is_dir():
        return any(_TRACE_RE.match(q.name) for q in p.iterdir())
    if not _TRACE_RE.match(p.name):
        return False
    try:
        with open(p, encoding="utf-8") as f:
            first = f.readline(MAX_LINE_CHARS).strip()  # a bounded read: not a whole file
    except (OSError, UnicodeDecodeError):
        return False
    parts = first.split(",")
    return len(parts) == 6 and parts[3] in ("", *PATTERNS)


def _float(text: str, shown: str, line: int, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise WorkloadError(f"{shown}:{line}: {name} {text!r} is not a number") from None
    if not math.isfinite(v):
        raise WorkloadError(f"{shown}:{line}: {name} {text!r} is not finite")
    return v


def _read_trace_csv(path: Path, client_id: int) -> ServeGenClient:
    shown = str(path)
    starts, rates, pats, shapes, scales, lines = [], [], [], [], [], []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            bounded = bounded_lines(f, shown, error=WorkloadError)
            for no, row in enumerate(csv.reader(bounded), start=1):
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != 6:
                    raise WorkloadError(
                        f"{shown}:{no}: {len(row)} fields, a ServeGen trace row has 6 "
                        "(window_start_s, rate, cv, pattern, shape, scale)")
                t = _float(row[0], shown, no, "window_start_s")
                if t < 0 or t != int(t) or int(t) % WINDOW_S:
                    raise WorkloadError(f"{shown}:{no}: window_start_s {row[0]!r} is not a "
                                        f"non-negative multiple of {WINDOW_S} s")
                if starts and int(t) <= starts[-1]:
                    raise WorkloadError(f"{shown}:{no}: window_start_s {row[0]} is not after "
                                        f"the previous window ({starts[-1]})")
                rate = _float(row[1], shown, no, "rate")
                if rate < 0:
                    raise WorkloadError(f"{shown}:{no}: rate {row[1]!r} must be >= 0")
                pat = row[3].strip()
                if pat not in ("", *PATTERNS):
                    raise WorkloadError(f"{shown}:{no}: pattern {pat!r} is not Gamma, Weibull "
                                        "or empty")
                if rate > 0:
                    if not pat:
                        raise WorkloadError(f"{shown}:{no}: rate {row[1]} > 0 but no arrival "
                                            "pattern")
                    a = _float(row[4], shown, no, "shape")
                    b = _float(row[5], shown, no, "scale")
                    if not (a > 0 and b > 0):
                        raise WorkloadError(f"{shown}:{no}: {pat} shape and scale must be "
                                            f"> 0, got {row[4]}, {row[5]}")
                    count = rate * WINDOW_S
                    if abs(count - round(count)) > 1e-6 * max(1.0, count):
                        raise WorkloadError(
                            f"{shown}:{no}: rate {row[1]} x {WINDOW_S} s = {count:g} is not a "
                            "whole number of requests")
                else:
                    a = b = math.nan
                starts.append(int(t))
                rates.append(rate)
                pats.append(pat)
                shapes.append(a)
                scales.append(b)
                lines.append(no)
    except UnicodeDecodeError as e:
        raise WorkloadError(f"{shown}: not UTF-8 text ({e})") from None
    except OSError as e:
        raise WorkloadError(f"{shown}: cannot open ({e.strerror})") from None
    if not starts:
        raise WorkloadError(f"{shown}: empty ServeGen trace (no windows)")
    return ServeGenClient(client_id, path, np.asarray(starts, dtype=np.int64),
                          np.asarray(rates), pats, np.asarray(shapes), np.asarray(scales),
                          np.asarray(lines, dtype=np.int64))


def _parse_pdf(text, shown: str, where: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``{value: probability}`` (a dict literal in a string) -> (values, cdf); None if empty."""
    if not isinstance(text, str):
        raise WorkloadError(f"{shown}: {where}: expected a string holding a dict literal")
    pdf = _fast_pdf(text)
    if pdf is None:
        try:
            pdf = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise WorkloadError(f"{shown}: {where}: not a Python dict literal") from None
    if not isinstance(pdf, dict):
        raise WorkloadError(f"{shown}: {where}: not a dict of value -> probability")
    if not pdf:
        return None
    vals, probs = [], []
    for k, v in pdf.items():
        if isinstance(k, bool) or not isinstance(k, (int, float)) or \
                isinstance(v, bool) or not isinstance(v, (int, float)) or \
                not math.isfinite(k) or not math.isfinite(v) or v < 0:
            raise WorkloadError(f"{shown}: {where}: entry {k!r}: {v!r} is not a finite value "
                                "with a probability >= 0")
        vals.append(float(k))
        probs.append(float(v))
    total = sum(probs)
    if abs(total - 1.0) > PDF_SUM_TOLERANCE:
        raise WorkloadError(f"{shown}: {where}: probabilities sum to {total!r}, not 1 "
                            f"(within {PDF_SUM_TOLERANCE:g})")
    order = np.argsort(vals, kind="stable")
    v = np.asarray(vals)[order]
    cdf = np.cumsum(np.asarray(probs)[order])
    return v, cdf / cdf[-1]


def _fast_pdf(text: str) -> dict | None:
    """``ast.literal_eval(text)`` of a dict of numbers written as ServeGen writes them
    (``{45: 0.0096..., 46: ...}``), without compiling it (a day's 73 clients hold 860,000
    entries: 1.3 s in Python's compiler); None for any other text (the caller then evaluates
    it). A number is ``int(token)`` without a point or exponent, else ``float(token)``, as
    Python reads those literals, inserted in order (a repeated key keeps its first place and
    its last value, as in a dict display)."""
    if _PDF_RE.fullmatch(text) is None:
        return None
    out: dict = {}
    for k, v in _PDF_PAIR_RE.findall(text):
        out[_number(k)] = _number(v)
    return out


def _number(token: str) -> int | float:
    """A number literal's value (``_NUM``'s form)."""
    if "." in token or "e" in token or "E" in token:
        return float(token)
    return int(token)


def _read_dataset(path: Path) -> dict[int, dict]:
    shown = str(path)
    try:
        raw = load_json(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{shown}:{e.lineno}: invalid JSON ({e.msg})") from None
    except InputLimitError as e:  # nesting, an integer's digits
        raise WorkloadError(e.at(shown)) from None
    except UnicodeDecodeError as e:
        raise WorkloadError(f"{shown}: {not_text_reason(e)}; a ServeGen dataset is JSON "
                            "text") from None
    except OSError as e:
        raise WorkloadError(f"{shown}: cannot read ({e.strerror or e})") from None
    if not isinstance(raw, dict):
        raise WorkloadError(f"{shown}: expected a JSON object of windows")
    out: dict[int, dict] = {}
    for ts, fields in raw.items():
        if not str(ts).isdigit():
            raise WorkloadError(f"{shown}: window key {ts!r} is not a start time in s")
        if not isinstance(fields, dict):
            raise WorkloadError(f"{shown}: window {ts}: expected an object of distributions")
        tables = {}
        empty = False
        for name, text in fields.items():
            t = _parse_pdf(text, shown, f"window {ts} {name}")
            if t is None:
                empty = True
                break
            tables[name] = t
        if empty:
            continue  # ServeGen skips windows with an empty table (no data in them)
        if "output_tokens" not in tables or not (
                "input_tokens" in tables or "text_tokens" in tables):
            raise WorkloadError(f"{shown}: window {ts}: needs output_tokens and input_tokens "
                                f"(or text_tokens); has {', '.join(sorted(tables))}")
        out[int(ts)] = tables
    return dict(sorted(out.items()))


def load_clients(path: str | Path, clients: list[int] | None = None,
                 need_lengths: bool = True) -> list[ServeGenClient]:
    """Read the clients of a ServeGen folder or one client's ``chunk-N-trace.csv``.

    Parameters
    ----------
    path : str or Path
        A folder with ``chunk-N-trace.csv`` (and ``chunk-N-dataset.json``) files, or one
        ``chunk-N-trace.csv``.
    clients : list of int, optional
        Keep only these client ids (``N``); each must exist.
    need_lengths : bool
        Read the ``chunk-N-dataset.json`` files (False when the lengths come from the
        config).

    Returns
    -------
    list of ServeGenClient
        Sorted by client id.

    Raises
    ------
    WorkloadError
        Malformed files (naming ``file:line`` or the window and field), a missing client or
        dataset file, or no client at all.
    """
    p = Path(path)
    shown = str(path)
    if p.is_dir():
        found = {}
        for q in p.iterdir():
            m = _TRACE_RE.match(q.name)
            if m:
                found[int(m.group(1))] = q
        if not found:
            raise WorkloadError(f"{shown}: no ServeGen client files (chunk-N-trace.csv) here")
    else:
        m = _TRACE_RE.match(p.name)
        if not m:
            raise WorkloadError(f"{shown}: a ServeGen client file is named chunk-N-trace.csv")
        found = {int(m.group(1)): p}
    if clients is not None:
        missing = sorted(set(clients) - set(found))
        if missing:
            raise WorkloadError(f"{shown}: servegen.clients {missing} not found (has "
                                f"{len(found)} client(s), ids {min(found)}..{max(found)})")
        found = {k: v for k, v in found.items() if k in set(clients)}
    out = []
    for cid in sorted(found):
        c = _read_trace_csv(found[cid], cid)
        if need_lengths:
            ds = found[cid].with_name(f"chunk-{cid}-dataset.json")
            if not ds.is_file():
                raise ServeGenLengthsMissing(
                    f"{ds}: not found; this ServeGen data has arrivals only: give the lengths "
                    "with workload.servegen.prompt_tokens and output_tokens")
            c.dataset = _read_dataset(ds)
            c.dataset_path = ds
        out.append(c)
    return out


def _draw(table: tuple[np.ndarray, np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
    values, cdf = table
    idx = np.searchsorted(cdf, rng.random(n), side="right")
    return values[np.minimum(idx, values.size - 1)]


def _window_lengths(c: ServeGenClient, t0: int, k: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    keys = [ts for ts in c.dataset if ts <= t0]
    if not keys:
        raise WorkloadError(
            f"{c.dataset_path}: client {c.client_id} has requests at {t0} s but no length "
            f"distribution at or before it (windows: {sorted(c.dataset) or 'none'})")
    tables = c.dataset[keys[-1]]
    if "input_tokens" in tables:
        prompt = _draw(tables["input_tokens"], k, rng)
    else:
        prompt = _draw(tables["text_tokens"], k, rng)
        for count_key, tok_key in _MM_PARTS:
            if count_key in tables and tok_key in tables:
                cnt = _draw(tables[count_key], k, rng).astype(np.int64)
                cnt = np.maximum(cnt, 0)
                tot = int(cnt.sum())
                if tot:
                    per = _draw(tables[tok_key], tot, rng)
                    owner = np.repeat(np.arange(k), cnt)
                    prompt = prompt + np.bincount(owner, weights=per, minlength=k)
    output = _draw(tables["output_tokens"], k, rng)
    return prompt, output


def _window_plan(cl, start_s: float, hi: float) -> tuple[list[tuple], float]:
    """The windows to generate, ``(client, window index, start s, request count)`` for each
    window with a positive rate overlapping ``[start_s, hi)``, and the total request count
    (rate x :data:`WINDOW_S`, rounded, per window)."""
    plan = []
    expected = 0.0
    for c in cl:
        for j in range(len(c.window_start_s)):
            t0 = int(c.window_start_s[j])
            r = float(c.rate_rps[j])
            if r <= 0 or t0 + WINDOW_S <= start_s or t0 >= hi:
                continue
            k = round(r * WINDOW_S)
            plan.append((c, j, t0, k))
            expected += k
    return plan, expected


def _generate_windows(plan: list[tuple], seed: int, prompt_tokens, output_tokens):
    """Arrivals, prompt and output lengths and client ids of each planned window (lists of
    arrays, one per window): gaps drawn from the window's Gamma or Weibull fit and rescaled to
    fill the window, lengths from ``prompt_tokens`` / ``output_tokens`` when given, else from
    the dataset's tables (:func:`_window_lengths`). Each window draws from its own stream
    ``(seed, SERVEGEN_STREAM, client, window)``."""
    own_lengths = prompt_tokens is not None
    arr, pr, out, ten = [], [], [], []
    for c, j, t0, k in plan:
        rng = stream(seed, SERVEGEN_STREAM, c.client_id, j)
        a = float(c.shape[j])
        if c.pattern[j] == "Gamma":
            gaps = rng.gamma(a, float(c.scale[j]), size=k + 1)
        else:
            gaps = float(c.scale[j]) * rng.weibull(a, size=k + 1)
        cum = np.cumsum(gaps)
        if not cum[-1] > 0:   # all gaps underflowed to 0 (extreme shapes): spread evenly
            cum = np.arange(1, k + 2, dtype=float)
        arr.append(t0 + WINDOW_S * cum[:k] / cum[-1])
        if own_lengths:
            pr.append(sample_lengths(prompt_tokens, k, rng, default_column="prompt"))
            out.append(sample_lengths(output_tokens, k, rng, default_column="output"))
        else:
            p_, o_ = _window_lengths(c, t0, k, rng)
            pr.append(p_)
            out.append(o_)
        ten.append(np.full(k, c.client_id, dtype=np.int64))
    return arr, pr, out, ten


def read_servegen(path: str | Path, seed: int = 0, *, start_s: float = 0.0,
                  end_s: float | None = None, clients: list[int] | None = None,
                  prompt_tokens=None, output_tokens=None):
    """Generate the requests of ServeGen clients (rule: module docstring).

    Parameters
    ----------
    path : str or Path
        A ServeGen folder or one ``chunk-N-trace.csv``.
    seed : int
        Run seed (>= 0).
    start_s, end_s : float
        Generate the windows overlapping ``[start_s, end_s)`` on the data's clock (seconds
        from its start; ``end_s`` None: to the end). Arrivals of those windows outside the
        range are returned too (the workload loader trims them).
    clients : list of int, optional
        Client ids to keep (default all).
    prompt_tokens, output_tokens : LengthDist, optional
        Replace the dataset's length tables (required together when the data has no
        ``chunk-N-dataset.json``).

    Returns
    -------
    TraceColumns
        Arrival order within each client; ``tenant`` = ``client-N``; ``lines`` 0 (generated
        rows); ``format`` ``servegen``.

    Raises
    ------
    WorkloadError
        Malformed data, a missing dataset, or only one of ``prompt_tokens`` /
        ``output_tokens``.
    simulator.base.budget.ResourceError
        When the expected request count exceeds the memory budget.
    """
    if (prompt_tokens is None) != (output_tokens is None):
        raise WorkloadError("workload.servegen: give both prompt_tokens and output_tokens, or "
                            "neither (then the dataset files give the lengths)")
    own_lengths = prompt_tokens is not None
    shown = str(path)
    cl = load_clients(path, clients, need_lengths=not own_lengths)
    hi = math.inf if end_s is None else float(end_s)
    plan, expected = _window_plan(cl, start_s, hi)
    check_workload_budget(expected, f"{shown} (ServeGen)",
                          "the window (workload.end_s - start_s) or workload.servegen.clients")
    arr, pr, out, ten = _generate_windows(plan, seed, prompt_tokens, output_tokens)
    if not arr:
        zero = np.zeros(0)
        return TraceColumns(shown, "servegen", zero, zero.astype(np.int64),
                            zero.astype(np.int64), zero.astype(np.int64), tenant=[])
    arrival = np.concatenate(arr)
    prompt = np.rint(np.concatenate(pr)).astype(np.int64)
    output = np.rint(np.concatenate(out)).astype(np.int64)
    low = (prompt < 1) | (output < 1)
    if low.any():
        warnings.warn(WorkloadWarning(
            f"{shown}: {int((prompt < 1).sum())} prompt and {int((output < 1).sum())} output "
            f"length(s) of 0 tokens drawn from ServeGen's tables (of {prompt.size} requests) "
            "were set to 1 token"), stacklevel=3)
        prompt = np.maximum(prompt, 1)
        output = np.maximum(output, 1)
    big = int(max(prompt.max(), output.max()))
    if big > MAX_TOKENS_REPRESENTABLE:
        raise WorkloadError(f"{shown}: a generated length of {big:,} tokens exceeds "
                            f"{MAX_TOKENS_REPRESENTABLE:,}")
    tenants = np.concatenate(ten)
    names = {cid: f"client-{cid}" for cid in np.unique(tenants).tolist()}
    return TraceColumns(shown, "servegen", arrival, prompt, output,
                        np.zeros(arrival.size, dtype=np.int64),
                        tenant=[names[t] for t in tenants.tolist()])
