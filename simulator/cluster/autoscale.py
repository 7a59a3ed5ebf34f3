"""The autoscaler's decisions and a new replica's cold start (SimPy-free; the engine's
:mod:`simulator.engine.autoscaling` samples the pool, asks :class:`AutoscaleController` and
adds or drains replicas).

The rule is the Kubernetes HorizontalPodAutoscaler's, documented at
https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
(algorithm details, stabilisation windows, tolerance); the configuration and each metric are
described in :mod:`simulator.scenario.autoscale`.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from simulator.scenario.autoscale import AutoscaleConfig, ColdStartConfig

# The cold start's parts (defaults of :class:`simulator.scenario.autoscale.ColdStartConfig`),
# from published vLLM start-up measurements; every part is overridable per scenario.
#: Weights read from a node's local NVMe SSD by vLLM's default safetensors loader, page cache
#: cold, bytes/s: vLLM PR #10647 (fastsafetensors) measured the default loader on A100 hosts at
#: 7.29 s for Llama-2-7B (~13.5 GB, ~1.85 GB/s) and 16.04 s for Llama-2-13B (~1.6 GB/s);
#: ServerlessLLM's H100 benchmark (benchmarks/results/h100_2025) 3.2-3.6 GB/s for HF
#: safetensors. Object storage streamed with Run:ai Model Streamer: ~3.5e9 (its
#: docs/src/benchmarks.md, S3, Llama-3-8B); vLLM's default loader downloading first: ~0.5e9
#: (Anyscale, Llama-2-70B from S3: 4 min 25 s).
DEFAULT_STORAGE_READ_BANDWIDTH_BYTES_PER_S = 2.0e9
#: vLLM engine start-up besides weights and CUDA graphs, s: process start, imports and config
#: ~19 s (vLLM issue #15225), torch.compile 19-42 s cold (vLLM PR #11005: 19.4 s, Llama-3-8B;
#: tensorfuse's Llama-3.1-8B/L40S start-up log: 10 s Dynamo + 42 s compile), memory profiling
#: and KV-cache allocation 1-5 s (vLLM PRs #10460, #11005): ~60 s with a cold compile cache
#: (~30 s with the compile cache persisted).
DEFAULT_ENGINE_STARTUP_S = 60.0
#: vLLM CUDA-graph capture, s: "Graph capturing finished in 10-17 secs" for Llama-3-8B /
#: Llama-3.2 (vLLM PRs #11005, #10460, issue #20264).
DEFAULT_CUDA_GRAPH_CAPTURE_S = 15.0
#: Where the defaults above come from (the summary carries it with the cold start).
COLD_START_SOURCES = ("weights: vLLM default safetensors loader from local NVMe, ~2 GB/s "
                      "(vLLM PR #10647; ServerlessLLM H100 benchmark); engine start-up 60 s "
                      "(vLLM issue #15225, PRs #11005, #10460: process, torch.compile cold, "
                      "profiling); CUDA-graph capture 15 s (vLLM PRs #11005, #10460, issue "
                      "#20264); no node provisioning or image pull (pre-provisioned node, "
                      "cached image)")


@dataclass(frozen=True)
class ColdStart:
    """A new replica's cold start (seconds) and its parts."""

    total_s: float
    weight_bytes: float
    weights_s: float
    engine_startup_s: float
    cuda_graph_capture_s: float
    storage_read_bandwidth_bytes_per_s: float
    #: ``parts`` (the sum of the parts) or ``stated`` (``cold_start_s`` given)
    basis: str

    def as_dict(self) -> dict:
        """JSON-safe fields, with the defaults' sources."""
        return {"cold_start_s": self.total_s, "basis": self.basis,
                "weight_bytes": self.weight_bytes, "weights_load_s": self.weights_s,
                "storage_read_bandwidth_bytes_per_s": self.storage_read_bandwidth_bytes_per_s,
                "engine_startup_s": self.engine_startup_s,
                "cuda_graph_capture_s": self.cuda_graph_capture_s,
                "sources": COLD_START_SOURCES}


def cold_start(cfg: ColdStartConfig, weight_bytes: float) -> ColdStart:
    """The cold start of a replica whose weights are ``weight_bytes`` (every GPU's shard, read
    over the node's storage).

    ``total_s = weight_bytes / storage_read_bandwidth_bytes_per_s + engine_startup_s +
    cuda_graph_capture_s``, each part as stated or its default; ``cold_start_s`` replaces the
    sum when given.
    """
    bw = cfg.storage_read_bandwidth_bytes_per_s or DEFAULT_STORAGE_READ_BANDWIDTH_BYTES_PER_S
    eng = DEFAULT_ENGINE_STARTUP_S if cfg.engine_startup_s is None else cfg.engine_startup_s
    graphs = (DEFAULT_CUDA_GRAPH_CAPTURE_S if cfg.cuda_graph_capture_s is None
              else cfg.cuda_graph_capture_s)
    weights_s = float(weight_bytes) / bw
    if cfg.cold_start_s is not None:
        return ColdStart(float(cfg.cold_start_s), float(weight_bytes), weights_s, eng, graphs,
                         bw, "stated")
    return ColdStart(weights_s + eng + graphs, float(weight_bytes), weights_s, eng, graphs, bw,
                     "parts")


def request_met_slo(r, slo) -> bool:
    """Whether a finished request met every configured SLO (the definition of
    :func:`simulator.metrics.latency.slo_mask`, for one request as it finishes: completed,
    and TTFT, TPOT (passes when undefined) and E2E within their bounds)."""
    if r.status != "completed":
        return False
    ttft = r.first_token_time_s - r.arrival_time_s
    if slo.ttft_s is not None and not ttft <= slo.ttft_s:
        return False
    n = r.num_emitted
    if slo.tpot_s is not None and n >= 2 and \
            not (r.finish_time_s - r.first_token_time_s) / (n - 1) <= slo.tpot_s:
        return False
    return slo.e2e_s is None or r.finish_time_s - r.arrival_time_s <= slo.e2e_s


class AutoscaleController:
    """The decision rule of ``cluster.autoscale`` (HPA's), fed one sample per evaluation.

    Parameters
    ----------
    cfg : AutoscaleConfig
    attainment_target : float
        ``slo.attainment_target``: the ``slo_attainment`` policy's target when ``cfg.target``
        is None.

    Notes
    -----
    A sample is a pair ``(numerator, denominator)``; the metric over the window is the sum of
    numerators over the sum of denominators (the mean of the samples for the gauges, whose
    denominator is 1; finished requests that met the SLOs over those finished for
    ``slo_attainment``). A stabilisation window acts only once the controller has
    recommendations reaching back over all of it (no scale-down at the first evaluation).
    Each evaluation costs O(1) amortised: running sums over the window's samples, and the
    windows' smallest / largest recommendation kept by monotonic queues.
    """

    def __init__(self, cfg: AutoscaleConfig, attainment_target: float):
        self.cfg = cfg
        self.target = float(cfg.target if cfg.target is not None else attainment_target)
        self._samples: deque = deque()
        self._num = self._den = 0.0  # sums over the window's samples
        self._up: deque = deque()    # (time, recommendation), increasing: its front the min
        self._down: deque = deque()  # ... decreasing: its front the max
        self._first_rec_s = math.inf

    def add_sample(self, now: float, num: float, den: float = 1.0) -> None:
        """One observation of the metric at ``now`` (see the class notes)."""
        self._samples.append((now, float(num), float(den)))
        self._num += float(num)
        self._den += float(den)
        w = self.cfg.window_s
        while self._samples and self._samples[0][0] <= now - w:
            _, a, b = self._samples.popleft()
            self._num -= a
            self._den -= b
        if len(self._samples) == 1:  # re-anchored: no drift from the running sums
            self._num, self._den = float(num), float(den)

    def metric(self) -> float | None:
        """The metric over the window (None: no denominator, e.g. nothing finished)."""
        if self._den <= 0:
            return None
        return self._num / self._den

    def recommend(self, n: int) -> int:
        """The replica count the window's metric calls for, ``n`` replicas committed (serving
        or starting), clamped to ``[min_replicas, max_replicas]``."""
        cfg = self.cfg
        m = self.metric()
        if m is None:
            return n
        t = self.target
        if cfg.policy == "slo_attainment":
            want = n + cfg.scale_step if m < t else n - cfg.scale_step
        else:
            ratio = m / (t * n) if cfg.policy != "queue_delay" else m / t
            if abs(ratio - 1.0) <= cfg.tolerance:
                want = n
            else:
                want = math.ceil(ratio * n - 1e-9)
        return max(cfg.min_replicas, min(cfg.max_replicas, want))

    def max_step(self, n: int) -> int:
        """Replicas one evaluation may add to ``n``: ``max_scale_up_step``, or HPA's default
        scale-up policy (the larger of 4 pods and 100% of the current count per 15 s period;
        ``behavior.scaleUp.policies``, ``selectPolicy: Max``), per evaluation."""
        step = self.cfg.max_scale_up_step
        return max(4, n) if step is None else step

    def decide(self, now: float, n: int) -> int:
        """The replica count to hold from ``now`` (``n`` committed now): the recommendation,
        through the scale-up and scale-down stabilisation windows and the step limit."""
        cfg = self.cfg
        rec = self.recommend(n)
        self._first_rec_s = min(self._first_rec_s, now)
        up_cd, down_cd = cfg.scale_up_cooldown_s, cfg.scale_down_cooldown_s
        up_q, down_q = self._up, self._down
        while up_q and up_q[-1][1] >= rec:
            up_q.pop()
        up_q.append((now, rec))
        while up_q[0][0] < now - up_cd:
            up_q.popleft()
        while down_q and down_q[-1][1] <= rec:
            down_q.pop()
        down_q.append((now, rec))
        while down_q[0][0] < now - down_cd:
            down_q.popleft()
        if self._first_rec_s <= now - up_cd:
            up = up_q[0][1]  # the smallest recommendation of [now - up_cd, now]
            if up > n:
                return min(up, n + self.max_step(n))
        if self._first_rec_s <= now - down_cd:
            down = down_q[0][1]  # the largest of [now - down_cd, now]
            if down < n:
                return down
        return n
