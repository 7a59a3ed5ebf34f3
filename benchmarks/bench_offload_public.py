"""KV offload tiers against vLLM's published CPU-offloading results, on one Markdown page.

Usage::

    python benchmarks/bench_offload_public.py [-o docs/results] [--quick] [--no-figures]

Reproduces the two end-to-end figures of the vLLM blog post "Inside vLLM's New KV Offloading
Connector" (Or Ozeri, Danny Harnik, IBM Research; https://blog.vllm.ai/2026/01/08/
kv-offloading-connector.html): Llama-3.1-8B-Instruct on one H100 80GB HBM3 (SXM), TP 1,
16-token blocks, the ``OffloadingConnector`` with a CPU tier, GPU prefix caching disabled.

* **Figure 1**, single-request TTFT: a prompt of N tokens computed on the GPU ("GPU compute")
  against the same prompt loaded from the CPU tier ("Load from CPU").
* **Figure 2**, throughput of 10,000 unique 512-token prefill requests submitted at once, at
  CPU hit rates 0..100 %, against the same batch without offloading.

The published values were read off the post's PNG charts by pixel position (about 1 % of full
scale; :data:`PUBLISHED_TTFT_MS`, :data:`PUBLISHED_TOKENS_PER_S`). Each figure is simulated
with the shipped Llama-3.1-8B / H100 SXM profile (measured kernel tables of the vLLM version
nearest the post's commit, the ``vllm-v1`` engine profile) and nothing tuned: once with the
CPU tier's bandwidth left to the GPU profile's host link (64 GB/s per direction) and once with
the H2D copy rate the post itself measured for 2 MB blocks (Figure 4, :data:`MEASURED_H2D`).

How a GPU miss is made: the post disabled GPU prefix caching; servesim keys its offload tiers
by the prefix cache's block hashes, so prefix caching stays on and the GPU's copy is evicted
instead, by unique filler prompts that together need more blocks than the GPU holds, run
between the request that stores a prompt and the one that reads it back. Every run is checked
(:class:`PipelineError` otherwise): the reading requests found nothing on the GPU and every
full block they should have found in the CPU tier, the CPU tier evicted nothing, every
request completed, and each phase ended before the next began.

Writes, in ``-o`` (default ``docs/results``): ``offload.md`` (the page), ``offload/offload.csv``
(every number on it), ``offload/ttft.png`` and ``offload/throughput.png``. ``--quick`` runs a
small subset (two prompt lengths, 200 requests at three hit rates) for the tests. Not part of
the test run: the full page takes about a minute and a half on two cores.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import functools
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from gitinfo import commit_label

from simulator.base.request import RequestSpec
from simulator.cluster.setup import build_setup
from simulator.runs.scenario import run_scenario
from simulator.scenario.config import Scenario, validate_scenario

DEFAULT_OUT = REPO / "docs" / "results"

# ------------------------------------------------------------------------ the source
SOURCE_URL = "https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html"
SOURCE_TITLE = ("Inside vLLM's New KV Offloading Connector: Smarter Memory Transfer for "
                "Maximizing Inference Throughput")
SOURCE_AUTHORS = "Or Ozeri, Danny Harnik (vLLM team at IBM Research), 2026-01-08"
#: the post's Markdown and chart PNGs (github.com/vllm-project/vllm-project.github.io)
SOURCE_FILES = ("vllm-project/vllm-project.github.io @ c3a01c4a: "
                "_posts/2026-01-08-kv-offloading-connector.md, "
                "assets/figures/2026-01-08-kv-offloading-connector/figure{1,2,4}.png")
#: the vLLM commit the post measured (between 0.13 and 0.14; with PRs #29870 and #31341)
SOURCE_VLLM_COMMIT = "2a1776b7ac4fae7c50c694edeafc1b14270e4350"

#: Figure 1, digitized: prompt tokens -> (GPU compute TTFT, load-from-CPU TTFT), ms. The 1K
#: point is left out: both markers overlap near 20 ms and cannot be told apart.
PUBLISHED_TTFT_MS = {
    10_000: (267.0, 42.0), 20_000: (638.0, 70.0), 30_000: (1102.0, 99.0),
    40_000: (1655.0, 127.0), 50_000: (2293.0, 155.0), 60_000: (3015.0, 192.0),
    70_000: (3841.0, 220.0), 80_000: (4788.0, 249.0), 90_000: (5735.0, 277.0),
    100_000: (6846.0, 314.0)}
#: Figure 2, digitized: CPU hit rate -> prompt tokens/s with offloading
PUBLISHED_TOKENS_PER_S = {
    0.0: 42.3e3, 0.1: 46.7e3, 0.2: 51.8e3, 0.3: 56.6e3, 0.4: 64.3e3, 0.5: 74.0e3,
    0.6: 89.0e3, 0.7: 116.1e3, 0.8: 158.6e3, 0.9: 219.3e3, 1.0: 387.7e3}
#: Figure 2's flat line: the same batch without offloading, tokens/s
PUBLISHED_BASELINE_TOKENS_PER_S = 43.8e3
#: Figure 4, digitized: single-direction CPU -> GPU copy rate with DMA (cudaMemcpyAsync) of
#: 1000 blocks of 2 MB, the transfer unit of Llama-3.1-8B in vLLM >= 0.12 (16 tokens x
#: 131,072 B), bytes/s. The post's text rounds the single-direction peak to "about 50GB/s".
MEASURED_H2D = 48.2e9

# ------------------------------------------------------------------------ the setup
MODEL, GPU = "llama-3.1-8b", "h100-sxm"
#: nearest shipped measured-table set to the post's vLLM commit (between 0.13 and 0.14)
ENGINE_VERSION = "0.14.0"
BLOCK_SIZE = 16
MAX_MODEL_LEN = 131_072
#: vLLM's batch defaults on a >= 70 GiB GPU other than an A100 for the offline ``LLM`` class
#: (``EngineArgs.get_batch_defaults``): the post's benchmark is a Python script that skips
#: de/tokenization, which the offline class does (``skip_tokenizer_init``)
MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS = 16_384, 1024
#: the same defaults under ``vllm serve`` (a sensitivity column of Figure 1's recompute)
SERVE_MAX_NUM_BATCHED_TOKENS = 8192
#: unique filler prompts that evict the GPU's copy (one full step each)
FILLER_TOKENS = 16_384
#: Figure 2's workload (the post: "10,000 unique requests (each of 512 tokens)")
NUM_REQUESTS, PROMPT_TOKENS = 10_000, 512
#: simulated seconds between phases (store, evict, read back); checked to be enough
TTFT_GAP_S, BATCH_GAP_S = 1_000.0, 20_000.0
#: Figure 2's two readings of "hit rate h" (the post's benchmark code is not retrievable)
ORDERS = {"first": "hits first", "spread": "hits spread"}


@dataclass(frozen=True)
class Variant:
    """A CPU tier's bandwidth: None leaves it to the GPU profile's host link."""

    key: str
    label: str
    bandwidth_bytes_per_s: float | None


VARIANTS = (Variant("link", "host link 64 GB/s (GPU profile)", None),
            Variant("measured", "measured 48.2 GB/s (post, Fig. 4)", MEASURED_H2D))

CSV_COLUMNS = ("figure", "quantity", "x", "x_unit", "variant", "published", "simulated",
               "signed_error", "unit")


class PipelineError(RuntimeError):
    """A run did not do what the reproduction needs (a GPU hit, a CPU eviction, a phase
    overlapping the next, a request not completed)."""


# ------------------------------------------------------------------------ scenarios
def scenario(*, offload: bool, bandwidth_bytes_per_s: float | None = None,
             cpu_bytes: int = 1 << 40, budget: int = MAX_NUM_BATCHED_TOKENS) -> Scenario:
    """The post's deployment: Llama-3.1-8B, one H100 SXM, TP 1, 16-token blocks, 0.9 of the
    memory, ``max_model_len`` 131,072; with ``offload`` a vLLM-connector CPU tier of
    ``cpu_bytes`` (prefix caching on: the tiers are keyed by it), without it prefix caching
    off (the post's setting, and its "without offloading" line).

    Raises
    ------
    simulator.scenario.config.ScenarioError
        A budget or bandwidth the schema refuses.
    """
    kv: dict = {"block_size": BLOCK_SIZE, "gpu_memory_utilization": 0.9,
                "enable_prefix_caching": offload}
    if offload:
        tier: dict = {"medium": "cpu", "cpu_bytes_to_use": int(cpu_bytes)}
        if bandwidth_bytes_per_s is not None:
            tier["bandwidth_bytes_per_s"] = float(bandwidth_bytes_per_s)
        kv["offload"] = {"connector": "vllm", "tiers": [tier]}
    raw = {"name": "offload_public", "model": MODEL, "hardware": {"gpu": GPU},
           "cluster": {"num_replicas": 1, "tensor_parallel_size": 1},
           "perf": {"engine": "vllm-v1", "engine_version": ENGINE_VERSION},
           "scheduler": {"max_num_seqs": MAX_NUM_SEQS, "max_num_batched_tokens": budget,
                         "max_model_len": MAX_MODEL_LEN, "enable_chunked_prefill": True},
           "kv_cache": kv, "seed": 0,
           # replaced by the requests built here (run_scenario's specs)
           "workload": {"synthetic": {"arrival": {"process": "poisson", "rate_rps": 1.0},
                                      "num_requests": 1,
                                      "prompt_tokens": {"dist": "fixed", "value": 16},
                                      "output_tokens": {"dist": "fixed", "value": 1}}}}
    return validate_scenario(raw)


@functools.cache
def _setup():
    """The replica :func:`scenario` builds (memory plan, model, GPU), built once."""
    return build_setup(scenario(offload=False))


def gpu_kv_tokens() -> int:
    """Tokens the GPU's KV cache holds in :func:`scenario` (the memory planner's blocks)."""
    return int(_setup().num_gpu_blocks) * BLOCK_SIZE


def host_link_bytes_per_s() -> float:
    """The GPU profile's host link per direction, bytes/s (the CPU tier's default)."""
    return float(_setup().gpu.host_link_bandwidth_bytes_per_s)


def kv_bytes_per_block() -> int:
    """KV bytes of one 16-token block of the model (bf16, all layers, K and V)."""
    setup = _setup()
    return int(setup.model.kv_bytes_per_token(setup.kv_cache_dtype, 1)) * BLOCK_SIZE


def num_fillers(gpu_tokens: int) -> int:
    """Unique :data:`FILLER_TOKENS`-token prompts that need more blocks than the GPU has."""
    return gpu_tokens // FILLER_TOKENS + 1


def _req(rid: int, at: float, tokens: int, ids: tuple[int, ...] | None) -> RequestSpec:
    return RequestSpec(request_id=rid, arrival_time_s=at, num_prompt_tokens=tokens,
                       num_output_tokens=1, prefix_hash_ids=ids,
                       prefix_block_tokens=BLOCK_SIZE)


#: first content id of the fillers' declared blocks (apart from every prompt's ids)
FILLER_IDS = 1 << 40


def _fillers(first_id: int, at: float, n: int) -> list[RequestSpec]:
    """``n`` unique filler prompts arriving at ``at``, each declaring its own content ids (so
    the GPU prefix cache holds their blocks, as vLLM hashes every full block, and evicts the
    measured prompt's in LRU order)."""
    per = -(-FILLER_TOKENS // BLOCK_SIZE)
    return [_req(first_id + i, at, FILLER_TOKENS,
                 tuple(range(FILLER_IDS + i * per, FILLER_IDS + (i + 1) * per)))
            for i in range(n)]


# ------------------------------------------------------------------------ Figure 1
def ttft_requests(prompt_tokens: int, fillers: int) -> list[RequestSpec]:
    """A prompt (request 0, at 0 s), ``fillers`` unique prompts (at :data:`TTFT_GAP_S`), the
    same prompt again (last, at twice the gap); one output token each."""
    ids = tuple(range(-(-prompt_tokens // BLOCK_SIZE)))
    out = [_req(0, 0.0, prompt_tokens, ids)]
    out += _fillers(1, TTFT_GAP_S, fillers)
    out.append(_req(len(out), 2 * TTFT_GAP_S, prompt_tokens, ids))
    return out


def _check_phases(df, starts: list[tuple[int, float]]) -> None:
    """Every request completed, and the requests before index ``i`` finished by the time
    ``t`` of each ``(i, t)`` in ``starts``."""
    bad = df[df["status"] != "completed"]
    if len(bad):
        raise PipelineError(f"{len(bad)} request(s) did not complete (first: request "
                            f"{int(bad['request_id'].iloc[0])}, {bad['status'].iloc[0]} "
                            f"{bad['reject_reason'].iloc[0]!r})")
    for i, t in starts:
        end = float(df["finish_time_s"].iloc[:i].max())
        if end > t:
            raise PipelineError(f"a phase ran into the next: its requests finished at {end:.1f} "
                                f"s, after the next began ({t:.1f} s)")


def _check_offload(res) -> None:
    off = res.summary.get("kv_offload") or {}
    evicted = sum(t["blocks_evicted"] for t in off.get("tiers", []))
    if evicted:
        raise PipelineError(f"the CPU tier evicted {evicted} blocks: it is too small for the "
                            "reproduction")


def simulate_ttft(prompt_tokens: int, fillers: int, *, offload: bool,
                  bandwidth_bytes_per_s: float | None = None,
                  budget: int = MAX_NUM_BATCHED_TOKENS) -> dict:
    """TTFT of the second request of :func:`ttft_requests`, seconds, and its hits.

    Returns
    -------
    dict
        ``ttft_s``, ``gpu_hit_tokens``, ``tier_hit_tokens``, ``kv_load_wait_s`` of the
        prompt's second run, and ``first_ttft_s`` of its first run.

    Raises
    ------
    PipelineError
        A request not completed, a phase overlapping the next, a GPU hit on the second run,
        a CPU hit short of every full block but the last (with offload), a CPU eviction.
    """
    specs = ttft_requests(prompt_tokens, fillers)
    sc = scenario(offload=offload, bandwidth_bytes_per_s=bandwidth_bytes_per_s, budget=budget)
    res = run_scenario(sc, specs=specs, write=False, figures=False)
    df = res.requests.sort_values("request_id").reset_index(drop=True)
    _check_phases(df, [(1, TTFT_GAP_S), (len(df) - 1, 2 * TTFT_GAP_S)])
    last = df.iloc[-1]
    tier = int(last.get("tier_hit_tokens", 0) or 0)
    gpu = int(last["num_cached_prompt_tokens"]) - tier
    want = (prompt_tokens - 1) // BLOCK_SIZE * BLOCK_SIZE if offload else 0
    if gpu or tier != want:
        raise PipelineError(f"{prompt_tokens}-token prompt read back with {gpu} GPU-hit and "
                            f"{tier} CPU-hit tokens (expected 0 and {want})")
    if offload:
        _check_offload(res)
    first = df.iloc[0]
    return {"ttft_s": float(last["first_token_time_s"] - last["arrival_time_s"]),
            "first_ttft_s": float(first["first_token_time_s"] - first["arrival_time_s"]),
            "gpu_hit_tokens": gpu, "tier_hit_tokens": tier,
            "kv_load_wait_s": float(last.get("kv_load_wait_s", 0.0) or 0.0)}


def figure1(prompts: list[int], fillers: int, progress=print) -> list[dict]:
    """One row per prompt length: recompute TTFT (two budgets) and load TTFT per variant,
    milliseconds."""
    rows = []
    for n in prompts:
        progress(f"figure 1: {n}-token prompt")
        row = {"prompt_tokens": n,
               "recompute_ms": 1e3 * simulate_ttft(n, fillers, offload=False)["ttft_s"],
               "recompute_serve_ms": 1e3 * simulate_ttft(
                   n, fillers, offload=False, budget=SERVE_MAX_NUM_BATCHED_TOKENS)["ttft_s"]}
        for v in VARIANTS:
            r = simulate_ttft(n, fillers, offload=True,
                              bandwidth_bytes_per_s=v.bandwidth_bytes_per_s)
            row[f"load_{v.key}_ms"] = 1e3 * r["ttft_s"]
        rows.append(row)
    return rows


# ------------------------------------------------------------------------ Figure 2
def hit_prompts(num_requests: int, hit_rate: float, order: str) -> list[int]:
    """The prompts (0-based, in submission order) warmed into the CPU tier: the first
    ``round(h N)`` (``first``), or as evenly spread over the batch (``spread``: prompt ``i``
    when ``floor((i + 1) h) > floor(i h)``).

    Raises
    ------
    ValueError
        A hit rate outside [0, 1] or an unknown order.
    """
    if not 0.0 <= hit_rate <= 1.0:
        raise ValueError(f"hit rate must be within [0, 1], got {hit_rate}")
    if order == "first":
        return list(range(round(hit_rate * num_requests)))
    if order == "spread":
        return [i for i in range(num_requests)
                if math.floor((i + 1) * hit_rate + 1e-9) > math.floor(i * hit_rate + 1e-9)]
    raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")


def batch_requests(num_requests: int, hits: list[int],
                   fillers: int) -> tuple[list[RequestSpec], int]:
    """Warm-up (the ``hits`` prompts, at 0 s), fillers (at :data:`BATCH_GAP_S`), then the
    measured batch of every prompt (at twice the gap), :data:`PROMPT_TOKENS` tokens and one
    output token each; returns the requests and the index of the batch's first."""
    blocks = PROMPT_TOKENS // BLOCK_SIZE

    def ids(k):
        return tuple(range(k * blocks, (k + 1) * blocks))
    out = [_req(i, 0.0, PROMPT_TOKENS, ids(k)) for i, k in enumerate(hits)]
    out += _fillers(len(out), BATCH_GAP_S, fillers)
    first = len(out)
    out += [_req(first + k, 2 * BATCH_GAP_S, PROMPT_TOKENS, ids(k))
            for k in range(num_requests)]
    return out, first


def simulate_batch(num_requests: int, hit_rate: float, order: str, fillers: int, *,
                   bandwidth_bytes_per_s: float | None = None) -> dict:
    """Prompt tokens/s of the measured batch (all its prompt tokens over the time from its
    submission to its last request's end) with a vLLM-connector CPU tier.

    Raises
    ------
    PipelineError
        As :func:`simulate_ttft`; the batch's CPU hits must be every full block but the last
        of each warmed prompt.
    """
    hits = hit_prompts(num_requests, hit_rate, order)
    specs, first = batch_requests(num_requests, hits, fillers)
    block_bytes = kv_bytes_per_block()
    stored_blocks = sum(s.num_prompt_tokens // BLOCK_SIZE for s in specs)
    sc = scenario(offload=True, bandwidth_bytes_per_s=bandwidth_bytes_per_s,
                  cpu_bytes=(stored_blocks + 1) * block_bytes)
    res = run_scenario(sc, specs=specs, write=False, figures=False)
    df = res.requests.sort_values("request_id").reset_index(drop=True)
    _check_phases(df, [(len(hits), BATCH_GAP_S), (first, 2 * BATCH_GAP_S)])
    _check_offload(res)
    batch = df.iloc[first:]
    tier = int(batch["tier_hit_tokens"].sum())
    gpu = int(batch["num_cached_prompt_tokens"].sum()) - tier
    want = len(hits) * ((PROMPT_TOKENS - 1) // BLOCK_SIZE * BLOCK_SIZE)
    if gpu or tier != want:
        raise PipelineError(f"hit rate {hit_rate}: the batch found {gpu} GPU-hit and {tier} "
                            f"CPU-hit tokens (expected 0 and {want})")
    span = float(batch["finish_time_s"].max()) - 2 * BATCH_GAP_S
    return {"tokens_per_s": num_requests * PROMPT_TOKENS / span, "span_s": span,
            "tier_hit_tokens": tier, "num_hit_prompts": len(hits)}


def simulate_baseline(num_requests: int) -> float:
    """Prompt tokens/s of the batch without offloading (prefix caching off)."""
    specs = [_req(k, 0.0, PROMPT_TOKENS, None) for k in range(num_requests)]
    res = run_scenario(scenario(offload=False), specs=specs, write=False, figures=False)
    _check_phases(res.requests, [])
    return num_requests * PROMPT_TOKENS / float(res.requests["finish_time_s"].max())


def figure2(num_requests: int, hit_rates: list[float], fillers: int,
            progress=print) -> tuple[list[dict], float]:
    """One row per hit rate (tokens/s per order and variant) and the no-offload baseline."""
    rows = []
    for h in hit_rates:
        progress(f"figure 2: hit rate {h:.0%}")
        row = {"hit_rate": h}
        for order in ORDERS:
            for v in VARIANTS:
                r = simulate_batch(num_requests, h, order, fillers,
                                   bandwidth_bytes_per_s=v.bandwidth_bytes_per_s)
                row[f"{order}_{v.key}"] = r["tokens_per_s"]
        rows.append(row)
    progress("figure 2: without offloading")
    return rows, simulate_baseline(num_requests)


# ------------------------------------------------------------------------ numbers
def signed_error(simulated: float, published: float | None) -> float | None:
    """``(simulated - published) / published`` (None without a published value)."""
    if published is None:
        return None
    return (simulated - published) / published


def csv_rows(fig1: list[dict], fig2: list[dict], baseline: float) -> list[dict]:
    """Every number of the page, one row each (:data:`CSV_COLUMNS`)."""
    out = []

    def add(figure, quantity, x, x_unit, variant, pub, sim, unit):
        out.append({"figure": figure, "quantity": quantity, "x": x, "x_unit": x_unit,
                    "variant": variant, "published": pub, "simulated": sim,
                    "signed_error": signed_error(sim, pub), "unit": unit})
    for r in fig1:
        n = r["prompt_tokens"]
        pub_c, pub_l = PUBLISHED_TTFT_MS.get(n, (None, None))
        add("1", "ttft_gpu_compute", n, "prompt_tokens", f"budget {MAX_NUM_BATCHED_TOKENS}",
            pub_c, r["recompute_ms"], "ms")
        add("1", "ttft_gpu_compute", n, "prompt_tokens",
            f"budget {SERVE_MAX_NUM_BATCHED_TOKENS}", pub_c, r["recompute_serve_ms"], "ms")
        for v in VARIANTS:
            sim = r[f"load_{v.key}_ms"]
            add("1", "ttft_load_from_cpu", n, "prompt_tokens", v.label, pub_l, sim, "ms")
            add("1", "ttft_ratio", n, "prompt_tokens", v.label,
                None if pub_l is None else pub_c / pub_l, r["recompute_ms"] / sim, "x")
    for r in fig2:
        h = r["hit_rate"]
        for order, name in ORDERS.items():
            for v in VARIANTS:
                add("2", "prompt_tokens_per_s", h, "cpu_hit_rate", f"{name}, {v.label}",
                    PUBLISHED_TOKENS_PER_S.get(round(h, 2)), r[f"{order}_{v.key}"], "tokens/s")
    add("2", "prompt_tokens_per_s", "", "without offloading", "no connector, no prefix caching",
        PUBLISHED_BASELINE_TOKENS_PER_S, baseline, "tokens/s")
    return out


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r[k] is None else
                            f"{r[k]:.10g}" if isinstance(r[k], float) else r[k])
                        for k in CSV_COLUMNS})


# ------------------------------------------------------------------------ figures
def plot_figures(fig1: list[dict], fig2: list[dict], baseline: float, num_requests: int,
                 out: Path) -> list[Path]:
    """``ttft.png`` (Figure 1: published and simulated TTFT against prompt length, log
    scale) and ``throughput.png`` (Figure 2: tokens/s against hit rate); PNGs without
    version or time metadata."""
    import matplotlib.style as mpl_style
    from matplotlib.figure import Figure
    out.mkdir(parents=True, exist_ok=True)
    meta = {"Software": None}
    paths = []
    with mpl_style.context("default"):
        fig = Figure(figsize=(7.5, 4.2))
        ax = fig.add_subplot()
        k = [r["prompt_tokens"] / 1e3 for r in fig1]
        pub = [PUBLISHED_TTFT_MS.get(r["prompt_tokens"], (math.nan, math.nan)) for r in fig1]
        ax.plot(k, [p[0] for p in pub], "o-", color="black", label="published: GPU compute")
        ax.plot(k, [p[1] for p in pub], "s-", color="black", mfc="white",
                label="published: load from CPU")
        ax.plot(k, [r["recompute_ms"] for r in fig1], "o--", color="tab:blue",
                label="servesim: GPU compute")
        for v, c in zip(VARIANTS, ("tab:orange", "tab:green")):
            ax.plot(k, [r[f"load_{v.key}_ms"] for r in fig1], "s--", color=c, mfc="white",
                    label=f"servesim: load, {v.label}")
        ax.set(yscale="log", xlabel="prompt (K tokens)", ylabel="TTFT (ms)",
               title="Single-request TTFT, Llama-3.1-8B, H100 SXM")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / "ttft.png")
        fig.savefig(paths[-1], format="png", dpi=80, metadata=meta)

        fig = Figure(figsize=(7.5, 4.2))
        ax = fig.add_subplot()
        hs = [100 * r["hit_rate"] for r in fig2]
        ax.plot(hs, [PUBLISHED_TOKENS_PER_S.get(round(r["hit_rate"], 2), math.nan) / 1e3
                     for r in fig2], "o-", color="black", label="published")
        ax.axhline(PUBLISHED_BASELINE_TOKENS_PER_S / 1e3, color="black", ls=":", lw=1,
                   label="published: without offloading")
        ax.axhline(baseline / 1e3, color="tab:blue", ls=":", lw=1,
                   label="servesim: without offloading")
        styles = {("first", "link"): ("tab:orange", "s--"), ("first", "measured"):
                  ("tab:green", "s--"), ("spread", "link"): ("tab:orange", "^:"),
                  ("spread", "measured"): ("tab:green", "^:")}
        for (order, key), (c, st) in styles.items():
            v = next(x for x in VARIANTS if x.key == key)
            ax.plot(hs, [r[f"{order}_{key}"] / 1e3 for r in fig2], st, color=c,
                    label=f"servesim: {ORDERS[order]}, {v.label}")
        ax.set(xlabel="CPU hit rate (%)", ylabel="prompt tokens/s (thousands)",
               title=f"{num_requests:,} x {PROMPT_TOKENS}-token prefills, Llama-3.1-8B, "
                     "H100 SXM")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / "throughput.png")
        fig.savefig(paths[-1], format="png", dpi=80, metadata=meta)
    return paths


# ------------------------------------------------------------------------ the page
def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def _with_error(sim: float, pub: float | None, fmt: str) -> str:
    return f"{sim:{fmt}} ({_pct(signed_error(sim, pub))})" if pub is not None \
        else f"{sim:{fmt}}"


def _span(errors: list[float | None]) -> str:
    """``a .. b %`` over the errors given (``-`` when none)."""
    e = [x for x in errors if x is not None]
    if not e:
        return "-"
    lo, hi = min(e), max(e)
    return _pct(lo) if lo == hi else f"{_pct(lo)} .. {_pct(hi)}"


def _fig1_table(fig1: list[dict]) -> list[str]:
    lab = {v.key: v for v in VARIANTS}
    out = [("| prompt tokens | GPU compute: published (ms) | servesim (ms, error) | "
           f"servesim, budget {SERVE_MAX_NUM_BATCHED_TOKENS} | load from CPU: published (ms) | "
           f"servesim, {lab['link'].label} | servesim, {lab['measured'].label} | "
           "ratio: published | ratio: servesim, 64 GB/s | ratio: servesim, 48.2 GB/s |"),
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in fig1:
        pc, pl = PUBLISHED_TTFT_MS.get(r["prompt_tokens"], (None, None))
        ratio = "-" if pl is None else f"{pc / pl:.1f}x"
        out.append(
            f"| {r['prompt_tokens']:,} | {'-' if pc is None else f'{pc:,.0f}'} | "
            f"{_with_error(r['recompute_ms'], pc, ',.0f')} | "
            f"{_with_error(r['recompute_serve_ms'], pc, ',.0f')} | "
            f"{'-' if pl is None else f'{pl:,.0f}'} | "
            f"{_with_error(r['load_link_ms'], pl, ',.1f')} | "
            f"{_with_error(r['load_measured_ms'], pl, ',.1f')} | {ratio} | "
            f"{r['recompute_ms'] / r['load_link_ms']:.1f}x | "
            f"{r['recompute_ms'] / r['load_measured_ms']:.1f}x |")
    return out


def _fig2_table(fig2: list[dict]) -> list[str]:
    cols = [(o, v) for o in ORDERS for v in VARIANTS]
    out = ["| CPU hit rate | published (tokens/s) | "
           + " | ".join(f"servesim: {ORDERS[o]}, {v.label}" for o, v in cols) + " |",
           "|---:|---:|" + "---:|" * len(cols)]
    for r in fig2:
        pub = PUBLISHED_TOKENS_PER_S.get(round(r["hit_rate"], 2))
        out.append(f"| {r['hit_rate']:.0%} | {'-' if pub is None else f'{pub:,.0f}'} | "
                   + " | ".join(_with_error(r[f"{o}_{v.key}"], pub, ",.0f") for o, v in cols)
                   + " |")
    return out


def _fig1_errors(fig1: list[dict], key: str, col: int) -> list[float | None]:
    return [signed_error(r[key], PUBLISHED_TTFT_MS[r["prompt_tokens"]][col])
            for r in fig1 if r["prompt_tokens"] in PUBLISHED_TTFT_MS]


def _fig2_errors(fig2: list[dict], key: str, rates=None) -> list[float | None]:
    return [signed_error(r[key], PUBLISHED_TOKENS_PER_S.get(round(r["hit_rate"], 2)))
            for r in fig2 if rates is None or round(r["hit_rate"], 2) in rates]


def _ratios(fig1: list[dict], key: str) -> list[float]:
    return [r["recompute_ms"] / r[key] for r in fig1]


def _rise(ratios: list[float]) -> str:
    """``rises from a to b`` (or says it does not rise monotonically)."""
    if len(ratios) < 2:
        return f"is {ratios[0]:.1f}x" if ratios else "-"
    word = "rises" if all(b > a for a, b in itertools.pairwise(ratios)) \
        else "does not rise monotonically"
    return f"{word} from {ratios[0]:.1f}x to {ratios[-1]:.1f}x"


def serial_published(hit_rate: float) -> float:
    """The post's serial mix at ``hit_rate``: 1 / ((1 - h) / baseline + h / 100 %-hit)."""
    return 1.0 / ((1.0 - hit_rate) / PUBLISHED_BASELINE_TOKENS_PER_S
                  + hit_rate / PUBLISHED_TOKENS_PER_S[1.0])


def serial_tokens_per_s(num_requests: int, hit_rate: float, baseline: float,
                        block_bytes: float, bandwidth: float) -> float:
    """Tokens/s of the batch if its copies and its misses' prefill took turns: the warmed
    prompts' copies (31 blocks each) at ``bandwidth`` plus the other prompts at the
    no-offload ``baseline`` tokens/s (the hit prompts' last blocks left out)."""
    hits = len(hit_prompts(num_requests, hit_rate, "first"))
    copy_s = hits * ((PROMPT_TOKENS - 1) // BLOCK_SIZE) * block_bytes / bandwidth
    compute_s = (num_requests - hits) * PROMPT_TOKENS / baseline
    return num_requests * PROMPT_TOKENS / (copy_s + compute_s)


def render_page(ctx: dict) -> str:
    """The Markdown page from the runs' numbers (``ctx``: ``commit``, ``date``, ``command``,
    ``gpu_tokens``, ``fillers``, ``num_requests``, ``block_bytes``, ``host_link``, ``fig1``,
    ``fig2``, ``baseline``, ``figures`` (PNG names, or empty))."""
    fig1, fig2, base = ctx["fig1"], ctx["fig2"], ctx["baseline"]
    gtok, nfill, nreq = ctx["gpu_tokens"], ctx["fillers"], ctx["num_requests"]
    mib = ctx["block_bytes"] / 2**20
    full_gib = NUM_REQUESTS * (PROMPT_TOKENS // BLOCK_SIZE) * ctx["block_bytes"] / 2**30
    mid = {0.5, 0.6, 0.7, 0.8, 0.9}
    pub_ratio = [c / ld for c, ld in (PUBLISHED_TTFT_MS[r["prompt_tokens"]] for r in fig1)
                 if ld]
    at90 = next((r for r in fig2 if round(r["hit_rate"], 2) == 0.9), None)
    serial_fit = max(abs(serial_published(h) / p - 1) for h, p in PUBLISHED_TOKENS_PER_S.items())

    def per_k(bw):  # copy milliseconds per 1,000 prompt tokens at bw bytes/s
        return f"{1e3 * 1000 * ctx['block_bytes'] / BLOCK_SIZE / bw:.2f}"
    lines = [
        "# KV offload: servesim against vLLM's published CPU-offloading results", "",
        (f"Generated by `{ctx['command']}` at commit `{ctx['commit']}` on {ctx['date']}. "
         "Every number on this page is in [offload.csv](offload/offload.csv). Nothing is "
         "tuned to the published values: the simulator runs the shipped profile, and the only "
         "published figure it is given is, in the second variant, the post's own measured "
         "copy rate."), "",
        "## In short", "",
        (f"- Figure 1, single-request TTFT ({fig1[0]['prompt_tokens']:,} to "
         f"{fig1[-1]['prompt_tokens']:,} prompt tokens): GPU compute "
         f"{_span(_fig1_errors(fig1, 'recompute_ms', 0))}; load from CPU "
         f"{_span(_fig1_errors(fig1, 'load_link_ms', 1))} with the GPU profile's 64 GB/s host "
         f"link, {_span(_fig1_errors(fig1, 'load_measured_ms', 1))} with the post's measured "
         f"48.2 GB/s copy rate. Recompute / load: published {pub_ratio[0]:.1f}x to "
         f"{pub_ratio[-1]:.1f}x, servesim {_ratios(fig1, 'load_link_ms')[0]:.1f}x to "
         f"{_ratios(fig1, 'load_link_ms')[-1]:.1f}x (64 GB/s), "
         f"{_ratios(fig1, 'load_measured_ms')[0]:.1f}x to "
         f"{_ratios(fig1, 'load_measured_ms')[-1]:.1f}x (48.2 GB/s)."),
        (f"- Figure 2, {nreq:,} prefills of {PROMPT_TOKENS} tokens: without offloading "
         f"{_pct(signed_error(base, PUBLISHED_BASELINE_TOKENS_PER_S))}; with the CPU tier, "
         f"over hit rates {100 * fig2[0]['hit_rate']:.0f} to "
         f"{100 * fig2[-1]['hit_rate']:.0f} %: "
         f"{ORDERS['first']} {_span(_fig2_errors(fig2, 'first_link'))} (64 GB/s), "
         f"{_span(_fig2_errors(fig2, 'first_measured'))} (48.2 GB/s); {ORDERS['spread']} "
         f"{_span(_fig2_errors(fig2, 'spread_link'))} and "
         f"{_span(_fig2_errors(fig2, 'spread_measured'))}."),
        ("- The copy rate decides the load side: 64 GB/s is PCIe Gen5 x16's theoretical rate "
         "per direction, the post measured 48.2 GB/s for this model's 2 MB copies. The "
         "compute side comes from the shipped kernel tables, unchanged."), "",
        "## The source", "",
        (f"[\"{SOURCE_TITLE}\"]({SOURCE_URL}), {SOURCE_AUTHORS} (the post's Markdown and "
         f"charts: {SOURCE_FILES}). The setup as the post states it: one NVIDIA H100 80GB "
         "HBM3 (SXM), TP 1, Llama-3.1-8B-Instruct, vLLM at commit "
         f"`{SOURCE_VLLM_COMMIT[:9]}` (between 0.13 and 0.14) with the `OffloadingConnector` "
         "and its CPU backend (DMA copies), Flash Attention, GPU prefix caching disabled "
         "\"in order to evaluate CPU hits\", 16-token GPU and CPU blocks, de/tokenization "
         "disabled; a Sapphire Rapids host limited to 8 cores, with 500 GB of DRAM. The "
         "benchmark code the post links (`orozery/playground`, branch "
         "`kv-offloading-blog-dec-2025`, `kvcache/kv_offload_benchmark.py`) could not be "
         "retrieved, so the entry point, the output length and how the hit rates were made "
         "are not known: the choices below say what is assumed."), "",
        ("The published values were read off the post's PNG charts by pixel position "
         "(gridlines and markers located by their colour): about 1 % of full scale, i.e. "
         "about 9 ms on Figure 1 and 0.5k tokens/s on Figure 2. \"K tokens\" is read as "
         "thousands. Figure 1's 1K point is left out (both markers overlap near 20 ms)."), "",
        "## The simulated deployment", "",
        "| setting | value | why |", "|---|---|---|",
        (f"| model, GPU | `{MODEL}` (bf16, {mib:g} MiB of KV per 16-token block), one "
         f"`{GPU}`, TP 1 | the post's |"),
        (f"| KV cache | 16-token blocks, `gpu_memory_utilization` 0.9: {gtok:,} tokens "
         "(the memory planner's) | vLLM's defaults; the post states no other |"),
        (f"| scheduler | `max_num_batched_tokens` {MAX_NUM_BATCHED_TOKENS:,}, `max_num_seqs` "
         f"{MAX_NUM_SEQS:,}, chunked prefill, `max_model_len` {MAX_MODEL_LEN:,} | vLLM's "
         "defaults on an H100 for the offline `LLM` class (the post's benchmark is a Python "
         "script that skips de/tokenization); Figure 1 also shows the `vllm serve` default "
         f"budget, {SERVE_MAX_NUM_BATCHED_TOKENS:,} |"),
        (f"| step times | measured kernel tables of vLLM {ENGINE_VERSION} on the H100 SXM "
         "(the shipped set nearest the post's commit), `vllm-v1` engine profile | the "
         "shipped profile |"),
        ("| offload | `kv_cache.offload`: `connector: vllm`, one CPU tier sized to hold every "
         "block a run stores (no CPU eviction: checked) | the post's connector; its "
         "tier size is not stated |"),
        (f"| CPU tier bandwidth | two variants: **{VARIANTS[0].label}** (the tier's default: "
         "`host_link_bandwidth_bytes_per_s` of the H100 SXM profile, PCIe Gen5 x16's "
         f"theoretical rate per direction) and **{VARIANTS[1].label}** (the post's Figure 4: "
         "one DMA transfer of 1000 blocks of 2 MB, CPU to GPU, the transfer unit of this "
         "model in vLLM >= 0.12; the text rounds the single-direction peak to \"about "
         "50GB/s\") | the second uses a published measurement, cited, nothing fitted |"), "",
        ("**How a GPU miss is made.** The post disabled GPU prefix caching. servesim keys "
         "its offload tiers by the prefix cache's block hashes, so with the CPU tier prefix "
         "caching stays on, and the GPU's copy of a prompt is evicted instead: between the "
         f"request that stores a prompt and the one that reads it back, {nfill} unique "
         f"prompts of {FILLER_TOKENS:,} tokens ({nfill * FILLER_TOKENS:,} tokens, more than "
         "the GPU's KV cache) run, and the GPU's least recently used blocks go first. Every "
         "run checks that the reading requests found nothing on the GPU and every full block "
         "but the last in the CPU tier (vLLM leaves at least one token to compute), that "
         "each phase ended before the next began, and that every request completed. Without "
         "offloading, prefix caching is off, as in the post."), "",
        "## Figure 1: single-request TTFT", "",
        ("Workload: one request of N prompt tokens and one output token, alone on the GPU; "
         "the fillers; the same prompt again. *GPU compute* is the second run's TTFT without "
         "offloading (the first run's is the same), *load from CPU* its TTFT with the CPU "
         "tier: its full blocks are copied to the GPU (the request waits, "
         "`WAITING_FOR_REMOTE_KVS`), then its last block is computed. Cells: milliseconds "
         "and the signed error against the published value, (servesim - published) / "
         "published."), "",
        *_fig1_table(fig1), "",
        (f"- GPU compute: {_span(_fig1_errors(fig1, 'recompute_ms', 0))} with the "
         f"{MAX_NUM_BATCHED_TOKENS:,}-token budget, "
         f"{_span(_fig1_errors(fig1, 'recompute_serve_ms', 0))} with "
         f"{SERVE_MAX_NUM_BATCHED_TOKENS:,} (more, smaller chunks: more steps)."),
        (f"- Load from CPU: {_span(_fig1_errors(fig1, 'load_link_ms', 1))} with the "
         f"profile's 64 GB/s link, {_span(_fig1_errors(fig1, 'load_measured_ms', 1))} with "
         "the post's measured 48.2 GB/s. The load is almost all copy: "
         f"{(100_000 - 1) // BLOCK_SIZE:,} blocks of {mib:g} MiB for a 100K prompt. The "
         "published load-from-CPU TTFT grows by about 3.0 ms per 1K tokens (a least-squares "
         "line through its points: about 44 GB/s end to end) on top of about 9 ms; "
         f"servesim's by the copy alone ({per_k(ctx['host_link'])} ms per 1K tokens at "
         f"{ctx['host_link'] / 1e9:g} GB/s, {per_k(MEASURED_H2D)} at "
         f"{MEASURED_H2D / 1e9:g} GB/s) on top of one step for the last block."),
        (f"- Direction: the post's recompute / load ratio {_rise(pub_ratio)} (its text: "
         f"\"X2-X22\"); servesim's {_rise(_ratios(fig1, 'load_link_ms'))} with 64 GB/s, "
         f"{_rise(_ratios(fig1, 'load_measured_ms'))} with 48.2 GB/s."), "",
    ]
    if ctx["figures"]:
        lines += ["![Figure 1 reproduced](offload/ttft.png)", ""]
    lines += [
        "## Figure 2: throughput against CPU hit rate", "",
        (f"Workload: {nreq:,} unique prompts of {PROMPT_TOKENS} tokens, one output token "
         "each (\"prefill requests\"; the output length is not stated), submitted at once. "
         "Hit rate h: a warm-up pass runs the prompts to be hit (the CPU tier stores them), "
         "the fillers evict them from the GPU, then the whole batch is submitted; throughput "
         "is its prompt tokens over the time from its submission to its last request's end "
         "(the post omits the warm-up too). Which prompts were warmed is not known, so two "
         f"readings: **{ORDERS['first']}** (the first h of the batch, as a warm-up of the "
         f"first h of the prompt list gives) and **{ORDERS['spread']}** (every 1/h-th "
         "prompt). A hit prompt loads 31 of its 32 blocks and computes the last, so the "
         "token hit rate is 31/32 of h."), "",
        *_fig2_table(fig2), "",
        (f"- Without offloading (no connector, no prefix caching): published "
         f"{PUBLISHED_BASELINE_TOKENS_PER_S:,.0f} tokens/s, servesim {base:,.0f} "
         f"({_pct(signed_error(base, PUBLISHED_BASELINE_TOKENS_PER_S))}). At 0 % hits "
         "servesim equals its own no-offload run (stores cost nothing here), where the post "
         "loses about 3 % to them."),
        (f"- 100 % hits: the host link binds; {ORDERS['first']} "
         f"{_span(_fig2_errors(fig2, 'first_link', {1.0}))} with 64 GB/s, "
         f"{_span(_fig2_errors(fig2, 'first_measured', {1.0}))} with the measured 48.2 GB/s "
         "(the post's point is 387.7k tokens/s x 131,072 B = 50.8 GB/s of KV)."),
        (f"- 50-90 %: {ORDERS['first']} {_span(_fig2_errors(fig2, 'first_link', mid))} "
         f"(64 GB/s), {_span(_fig2_errors(fig2, 'first_measured', mid))} (48.2 GB/s); "
         f"{ORDERS['spread']} {_span(_fig2_errors(fig2, 'spread_link', mid))} and "
         f"{_span(_fig2_errors(fig2, 'spread_measured', mid))}."),
        ("- The post's points follow a serial mix, 1/t = (1-h)/43.8k + h/387.7k (copies "
         "and computes taking turns), within "
         f"{100 * serial_fit:.0f} %."),
    ]
    if at90 is not None:
        ser = [serial_tokens_per_s(nreq, 0.9, base, ctx["block_bytes"], bw)
               for bw in (ctx["host_link"], MEASURED_H2D)]
        lines[-1] += (
            " In servesim, at 90 %, the same serial mix of its own copy time and its own "
            f"no-offload prefill gives {ser[0]:,.0f} / {ser[1]:,.0f} tokens/s (64 / 48.2 "
            f"GB/s); {ORDERS['first']} simulates {at90['first_link']:,.0f} / "
            f"{at90['first_measured']:,.0f}, {ORDERS['spread']} {at90['spread_link']:,.0f} / "
            f"{at90['spread_measured']:,.0f}. With the hits first the batch runs as two "
            "phases, the copies (the hit prompts wait for theirs, parked, ahead of the misses "
            "in the queue) and then the misses' prefill, so their times add as in the post; "
            "spread, the copies of parked prompts overlap the other prompts' prefill.")
    lines.append("")
    if ctx["figures"]:
        lines += ["![Figure 2 reproduced](offload/throughput.png)", ""]
    lines += [
        "## What is modelled and what is not", "",
        ("- **Stores are free.** GPU-to-CPU copies are asynchronous in both vLLM and "
         "servesim, but servesim charges them no link time and no GPU time, so they neither "
         "slow compute (the post's -3 % at 0 % hits) nor share the link with loads (the post "
         "measured 83.4 GB/s for both directions together, about 41.7 each way, against "
         "about 50 one way)."),
        ("- **One copy rate per tier.** A load takes its bytes over the tier's bandwidth: no "
         "per-block DMA cost (the post's Figures 3-4: about 1 GB/s for 4 KB blocks, 48 for "
         "2 MB, 51 for 16 MB) and no fixed cost per load; this model's 2 MB blocks sit near "
         "the plateau."),
        ("- **vLLM's `store_threshold`** (store a block only after N requests offered it) is "
         "not modelled; its default, off, is what the post ran."),
        ("- **CPU capacity.** Warming all 10,000 prompts stores "
         f"{full_gib:,.0f} GiB of KV, more than the post's 500 GB host, so the post's 100 % "
         "point cannot come from one warm-up of every prompt kept in a CPU tier; how it was "
         "made is not known. Here the tier holds everything, so h is exactly the warmed "
         "fraction."),
        ("- **Not simulated: a per-prompt reading of h** (every prompt has its first h of "
         "blocks in the CPU tier). With half of every 512-token prompt to load, the parked "
         "requests take every GPU block before any of them can compute the rest of its "
         "prompt, and servesim then rejects them (`kv_capacity`) instead of waiting: an "
         "open problem of the offload model, so that reading is left out."),
        ("- **Versions.** The post ran vLLM between 0.13 and 0.14; the step times come from "
         f"vLLM {ENGINE_VERSION}'s measured kernels and the `vllm-v1` profile (async "
         "scheduling), whose constants were fitted on other runs."),
        ("- **LMCache** results are not compared here: the published multi-turn results "
         "found (the Production Stack's multi-round QA, LMBenchmark's) ran on A100 or GH200, "
         "not on an H100."), "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------ main
QUICK_PROMPTS = [10_000, 50_000]
QUICK_REQUESTS, QUICK_RATES = 200, [0.0, 0.5, 1.0]


def run(out: Path, *, quick: bool = False, figures: bool = True, progress=print) -> dict:
    """Simulate both figures and write the page, the CSV and (``figures``) the PNGs under
    ``out``; returns the page's context (:func:`render_page`) with ``rows`` (the CSV's)."""
    gtok = gpu_kv_tokens()
    fillers = num_fillers(gtok)
    prompts = QUICK_PROMPTS if quick else sorted(PUBLISHED_TTFT_MS)
    nreq = QUICK_REQUESTS if quick else NUM_REQUESTS
    rates = QUICK_RATES if quick else sorted(PUBLISHED_TOKENS_PER_S)
    fig1 = figure1(prompts, fillers, progress)
    fig2, base = figure2(nreq, rates, fillers, progress)
    rows = csv_rows(fig1, fig2, base)
    write_csv(rows, out / "offload" / "offload.csv")
    pngs = plot_figures(fig1, fig2, base, nreq, out / "offload") if figures else []
    cmd = "python benchmarks/bench_offload_public.py" + (" --quick" if quick else "")
    ctx = {"commit": commit_label(REPO),
           "date": dt.datetime.now(dt.timezone.utc).date().isoformat(), "command": cmd,
           "gpu_tokens": gtok, "fillers": fillers, "num_requests": nreq,
           "block_bytes": kv_bytes_per_block(), "host_link": host_link_bytes_per_s(),
           "fig1": fig1, "fig2": fig2, "baseline": base,
           "figures": [p.name for p in pngs], "rows": rows}
    (out / "offload.md").write_text(render_page(ctx))
    return ctx


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT,
                    help="folder of offload.md (its CSV and PNGs go to offload/ in it)")
    ap.add_argument("--quick", action="store_true",
                    help=f"two prompt lengths and {QUICK_REQUESTS} requests at "
                         f"{len(QUICK_RATES)} hit rates (tests)")
    ap.add_argument("--no-figures", action="store_true", help="write no PNG")
    args = ap.parse_args(argv)
    try:
        ctx = run(args.output, quick=args.quick, figures=not args.no_figures,
                  progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (PipelineError, ValueError, OSError) as e:
        print(f"bench_offload_public: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    print(f"wrote {args.output / 'offload.md'} ({len(ctx['rows'])} numbers in "
          f"{args.output / 'offload' / 'offload.csv'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
