"""The workload of an inference-perf run, rebuilt from its configuration and its per-stage
summaries (inference-perf records no per-request file by default; its ``shared_prefix`` data
are random, unseeded tokens): what :func:`~simulator.observe.readers_ip.read_inference_perf`
replays.

How inference-perf generated the run (its source, github.com/kubernetes-sigs/inference-perf,
at the versions whose configuration schema matches the recorded ``results/config.yaml``:
October-November 2025, ``datagen/shared_prefix_datagen.py``, ``loadgen/load_generator.py``,
``loadgen/load_timer.py``, ``client/modelserver/openai_client.py``):

* **Prompts.** ``num_groups x num_prompts_per_group`` prompts: per group one system prompt of
  ``system_prompt_len`` random token ids, per prompt a question of ``question_len`` random
  ids; each decoded to text (``skip_special_tokens``) and joined with a space; the list is
  shuffled once. Request ``i`` of a stage (``i`` restarts at 0 in every stage) sends prompt
  ``i mod P``, so every prompt is sent again every P requests (the server's prefix cache
  holds it whole). The server re-encodes the text: BOS plus the re-tokenised random words,
  which the client's ``prompt_len`` (the same tokenizer, ``len(tokenizer(text).input_ids)``)
  counts, ~5% above ``system_prompt_len + question_len``.
* **Outputs.** ``max_tokens = output_len`` with ``ignore_eos``: the engine emits exactly
  ``output_len`` tokens (the client's ``output_len`` re-tokenises the streamed text and
  differs by a few tokens).
* **Arrivals.** Load type ``constant``: ``int(rate x duration)`` requests whose gaps are
  exponential draws rescaled to sum to ``duration`` (``ConstantLoadTimer``: not evenly
  spaced; the last request is sent at exactly ``duration``); ``poisson``: a Poisson count per
  second, each second's requests spread the same way (``PoissonLoadTimer``). A stage starts 1 s
  after it is set up; the next stage is set up once every request of the previous one has
  finished (polled each second) and ``load.interval`` seconds have passed.
* **Time-outs.** ``aiohttp.ClientTimeout(total=load.request_timeout)``, or aiohttp's default
  total of 300 s when it is null; aiohttp rounds a deadline over 5 s up to the next whole
  second of its loop clock, so a request times out 300-301 s after it was sent (the recorded
  failures' ``request_latency`` spans exactly that).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.base.request import RequestSpec
from simulator.observe.readers_common import prefix_hash_ids

__all__ = ["PERCENTILE_KEYS", "SharedPrefixData", "aiohttp_deadlines", "constant_arrivals",
           "poisson_arrivals", "prompt_lengths", "prompt_token_ids", "stage_specs"]

#: Keys of an inference-perf summary (``reportgen/base.py`` ``summarize``) and the percentile
#: each stands for.
PERCENTILE_KEYS: dict[str, float] = {
    "min": 0.0, "p0.1": 0.1, "p1": 1.0, "p5": 5.0, "p10": 10.0, "p25": 25.0, "median": 50.0,
    "p75": 75.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9, "max": 100.0}

#: aiohttp's default ``ClientTimeout(total=5 * 60)`` (seconds), used when
#: ``load.request_timeout`` is null.
AIOHTTP_DEFAULT_TOTAL_S = 300.0
#: aiohttp's ``timeout_ceil_threshold``: a longer deadline is rounded up to a whole second.
AIOHTTP_CEIL_THRESHOLD_S = 5.0


@dataclass(frozen=True)
class SharedPrefixData:
    """``data.shared_prefix`` of the configuration that ran.

    Attributes
    ----------
    num_groups, num_prompts_per_group : int
        Groups (distinct system prompts) and prompts per group.
    system_prompt_len, question_len, output_len : int
        Tokens as configured (random token ids before the text round trip).
    """

    num_groups: int
    num_prompts_per_group: int
    system_prompt_len: int
    question_len: int
    output_len: int

    @property
    def num_prompts(self) -> int:
        return self.num_groups * self.num_prompts_per_group


def constant_arrivals(rate: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Send times (seconds from the stage's start) of inference-perf's ``constant`` load:
    ``int(rate x duration)`` exponential gaps of mean ``1 / rate``, rescaled to sum to
    ``duration_s`` (the last request at exactly ``duration_s``).

    Raises
    ------
    ValueError
        ``rate`` or ``duration_s`` not > 0.
    """
    if not (rate > 0 and duration_s > 0):
        raise ValueError("rate and duration must be > 0")
    n = int(rate * duration_s)
    if n == 0:
        return np.zeros(0)
    gaps = rng.exponential(1.0 / rate, n)
    return np.cumsum(gaps * (duration_s / gaps.sum()))


def poisson_arrivals(rate: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Send times of inference-perf's ``poisson`` load: per second a Poisson(``rate``) count
    (an empty second is skipped over), spread over that second as :func:`constant_arrivals`
    spreads a stage; the first ``int(rate x duration)`` of them."""
    if not (rate > 0 and duration_s > 0):
        raise ValueError("rate and duration must be > 0")
    n = int(rate * duration_s)
    out: list[np.ndarray] = []
    t, have = 0.0, 0
    while have < n:
        k = int(rng.poisson(rate))
        if k >= 1:
            out.append(t + constant_arrivals(k, 1.0, rng))
            have += k
        t += 1.0
    return np.concatenate(out)[:n] if out else np.zeros(0)


def aiohttp_deadlines(n: int, timeout_s: float | None, rng: np.random.Generator) -> np.ndarray:
    """Seconds after sending at which each of ``n`` requests times out at the client:
    ``timeout_s`` (aiohttp's default 300 s when None) plus, above aiohttp's 5 s ceiling
    threshold, a uniform [0, 1) s (the deadline rounded up to the next whole second of a
    clock the send time is not aligned to)."""
    total = AIOHTTP_DEFAULT_TOTAL_S if timeout_s is None else float(timeout_s)
    if total > AIOHTTP_CEIL_THRESHOLD_S:
        return total + rng.random(n)
    return np.full(n, total)


def prompt_lengths(summary: dict, n: int, mean: float) -> np.ndarray:
    """``n`` prompt lengths (tokens, ascending) whose distribution is a recorded one.

    inference-perf sends each of its ``n`` prompts equally often, so the recorded per-request
    ``prompt_len`` distribution is that of the prompts: the ``j``-th shortest prompt sits at
    percentile ``100 (j + 0.5) / n`` (the shortest and the longest at the recorded ``min``
    and ``max``), interpolated linearly between the recorded percentiles, rounded, then
    nudged by one token at a time so the lengths sum to ``round(mean x n)``.

    Parameters
    ----------
    summary : dict
        Recorded percentiles by inference-perf key (:data:`PERCENTILE_KEYS`): at least
        ``min``, ``median`` and ``max``.
    n : int
        Number of prompts (>= 1).
    mean : float
        The recorded mean.

    Returns
    -------
    numpy.ndarray
        int64 lengths, ascending, within [min, max].
    """
    pts = sorted((q, float(summary[k])) for k, q in PERCENTILE_KEYS.items()
                 if summary.get(k) is not None)
    qs, vs = np.array([p[0] for p in pts]), np.maximum.accumulate([p[1] for p in pts])
    at = 100.0 * (np.arange(n) + 0.5) / n
    if n > 1:
        at[0], at[-1] = 0.0, 100.0
    lengths = np.rint(np.interp(at, qs, vs)).astype(np.int64)
    lo, hi = math.ceil(vs[0]), math.floor(vs[-1])
    lengths = np.clip(lengths, lo, max(lo, hi))
    want = round(mean * n)
    frac = np.interp(at, qs, vs) - lengths   # > 0: rounded down (may go up first)
    order_up, order_down = np.argsort(-frac, kind="stable"), np.argsort(frac, kind="stable")
    i = 0
    while lengths.sum() < want and i < 4 * n:
        j = order_up[i % n]
        if lengths[j] < hi:
            lengths[j] += 1
        i += 1
    i = 0
    while lengths.sum() > want and i < 4 * n:
        j = order_down[i % n]
        if lengths[j] > lo:
            lengths[j] -= 1
        i += 1
    return np.sort(lengths)


def shared_prefix_tokens(data: SharedPrefixData, mean_prompt_len: float) -> int:
    """Tokens of a prompt its group shares (the prefix a prefix cache can reuse between the
    group's prompts): the BOS token plus the system prompt scaled by the recorded
    re-tokenisation ratio ``(mean prompt_len - 1) / (system_prompt_len + question_len)``,
    less the one token at the join with the question that may tokenise differently."""
    ratio = max(mean_prompt_len - 1.0, 0.0) / max(data.system_prompt_len + data.question_len, 1)
    return max(math.floor(data.system_prompt_len * ratio), 0)


def prompt_token_ids(data: SharedPrefixData, lengths: np.ndarray, shared: int,
                     rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """Synthetic token ids of the ``P`` prompts: group ``g``'s prompts start with the same
    ``shared`` ids (BOS = 1, then the group's own random ids), then ids of their own, to each
    prompt's length. The lengths are dealt to the prompts, and the prompts to their send
    order, by one permutation (inference-perf shuffles its prompt list once).

    Returns
    -------
    (list of numpy.ndarray, numpy.ndarray)
        The ids of prompt 0..P-1 in send order, and each prompt's group.
    """
    p = data.num_prompts
    group = np.repeat(np.arange(data.num_groups), data.num_prompts_per_group)
    dealt = rng.permutation(np.asarray(lengths, dtype=np.int64))
    heads = [np.concatenate(([1], rng.integers(2, 32000, max(shared - 1, 0))))
             for _ in range(data.num_groups)]
    ids = []
    for j in range(p):
        n_shared = min(shared, int(dealt[j]) - 1)
        own = rng.integers(2, 32000, int(dealt[j]) - max(n_shared, 0))
        ids.append(np.concatenate((heads[group[j]][:max(n_shared, 0)], own)).astype(np.int64))
    order = rng.permutation(p)
    return [ids[j] for j in order], group[order]


def stage_specs(first_id: int, arrivals: np.ndarray, deadlines: np.ndarray,
                prompts: list[np.ndarray], output_len: int, block_size: int,
                hashes: dict[int, tuple[int, ...]], stage: int) -> list[RequestSpec]:
    """The requests of one stage: request ``i`` sends prompt ``i mod P``, asks for (and, with
    ``ignore_eos``, gets) ``output_len`` tokens, and is abandoned by the client
    ``deadlines[i]`` seconds after it was sent, streaming or not (aiohttp's total time-out;
    the server aborts it: ``cancel_when_streaming``).

    ``hashes`` caches each prompt's prefix-block ids (filled on first use).
    """
    p = len(prompts)
    out = []
    for i, t in enumerate(arrivals.tolist()):
        j = i % p
        h = hashes.get(j)
        if h is None:
            h = hashes[j] = prefix_hash_ids(prompts[j], block_size)
        out.append(RequestSpec(first_id + i, float(t), len(prompts[j]), int(output_len),
                               max_tokens=int(output_len), slice=f"stage_{stage}",
                               cancel_after_s=float(deadlines[i]), prefix_hash_ids=h or None,
                               prefix_block_tokens=block_size, cancel_when_streaming=True))
    return out
